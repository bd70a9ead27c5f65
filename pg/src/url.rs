//! A store's URL: libpq's URL syntax, plus this crate's own query parameters.
//!
//! Why parse it here and not only in `postgres::Config`: the URL also names the journal
//! (`session=ID`) and its lease (`lease_ms=N`), which `postgres::Config` would refuse as unknown
//! options, and every message names the store by its URL with the password taken out.

use journal::JournalError;
use percent_encoding::percent_decode_str;
use std::time::Duration;

/// The lease a writer holds a journal with unless the URL says `lease_ms`.
pub const LEASE_MS_DEFAULT: u64 = 10_000;
/// The shortest lease the URL may ask for: the heartbeat renews it every third of it.
pub const LEASE_MS_MIN: u64 = 30;
/// The shortest idle time in a transaction after which the server ends it (see `parse`).
const IDLE_IN_TRANSACTION_MS_MIN: u64 = 1_000;
/// How long one connection attempt may take unless the URL says `connect_timeout`.
const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// How long sent data may go unacknowledged on TCP before the connection counts as lost (so
/// an append to a vanished host ends in the unknown-outcome path, not a hang), unless the URL
/// says `tcp_user_timeout`.
const TCP_USER_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// A parsed store URL.
#[derive(Clone)]
pub(crate) struct StoreUrl {
    /// The URL without its password: what messages name the store by.
    pub(crate) location: String,
    /// What the client connects with.
    pub(crate) config: postgres::Config,
    /// The journal's name in the store (`session=`), when the URL has one.
    pub(crate) session: Option<String>,
    /// How long a writer's lease lasts unless renewed.
    pub(crate) lease_ms: u64,
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the password: never printed.
        f.debug_struct("StoreUrl")
            .field("location", &self.location)
            .field("session", &self.session)
            .field("lease_ms", &self.lease_ms)
            .finish_non_exhaustive()
    }
}

/// Whether `location` names a PostgreSQL store (`postgres://` or `postgresql://`) rather than
/// a directory: how the command lines tell a journal's two kinds of location apart.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// The URL of one session in the store `store_url` names: `session=` set to `session`
/// (percent-encoded), any `session=` the store URL had replaced.
pub fn session_url(store_url: &str, session: &str) -> String {
    let encoded =
        percent_encoding::utf8_percent_encode(session, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let (base, query) = match store_url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (store_url, ""),
    };
    let session_param = format!("session={encoded}");
    let params: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("session="))
        .chain(std::iter::once(session_param.as_str()))
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// Whether `location` starts like a URL of any scheme (`scheme://`): a location a command must
/// not take for a directory's path when it is not a PostgreSQL URL.
pub fn looks_like_url(location: &str) -> bool {
    location.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// A bad URL's error: names the URL (password elided) and what is wrong.
fn bad(location: &str, message: String) -> JournalError {
    JournalError::Store {
        location: location.to_string(),
        op: "parse URL",
        message,
    }
}

/// The URL with any password removed, from the user part and from a `password=` parameter:
/// how a location is shown (anything that is not a PostgreSQL URL is returned as it is).
pub fn elide_password(url: &str) -> String {
    if !looks_like_url(url) {
        return url.to_owned();
    }
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut shown = match base.split_once("://") {
        // The credentials run to the last `@` (a host has none, and a password may hold `/`).
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((creds, host_and_path)) => {
                let user = creds.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}@{host_and_path}")
            }
            None => format!("{scheme}://{rest}"),
        },
        None => base.to_string(),
    };
    if let Some(query) = query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| !p.starts_with("password="))
            .collect();
        if !kept.is_empty() {
            shown.push('?');
            shown.push_str(&kept.join("&"));
        }
    }
    shown
}

/// Parses a store URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB?session=ID[&lease_ms=N]`, or
/// `postgres://USER@/DB?host=/socket/dir&session=ID` for a Unix socket.
pub(crate) fn parse(url: &str) -> Result<StoreUrl, JournalError> {
    let location = elide_password(url);
    if !is_url(url) {
        return Err(bad(
            &location,
            "not a PostgreSQL URL: it must start with postgres:// or postgresql://".into(),
        ));
    }
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut session = None;
    let mut lease_ms = LEASE_MS_DEFAULT;
    let mut passed = Vec::new();
    for param in query.split('&').filter(|p| !p.is_empty()) {
        let Some((key, value)) = param.split_once('=') else {
            return Err(bad(
                &location,
                format!("query parameter `{param}` has no `=`"),
            ));
        };
        let value = percent_decode_str(value).decode_utf8().map_err(|_| {
            bad(
                &location,
                format!("query parameter `{key}` is not UTF-8 once decoded"),
            )
        })?;
        match key {
            "session" if session.is_some() => {
                return Err(bad(&location, "`session` is given twice".into()))
            }
            "session" if value.is_empty() => {
                return Err(bad(&location, "`session` is empty".into()))
            }
            "session" => session = Some(value.into_owned()),
            "lease_ms" => lease_ms = parse_lease_ms(&location, &value)?,
            "sslmode" if value != "disable" && value != "prefer" => {
                return Err(bad(
                    &location,
                    format!("sslmode={value}: this build has no TLS (see the crate's docs)"),
                ))
            }
            _ => passed.push(param),
        }
    }
    let mut rest = base.to_string();
    if !passed.is_empty() {
        rest.push('?');
        rest.push_str(&passed.join("&"));
    }
    let mut config: postgres::Config = rest.parse().map_err(|e| bad(&location, format!("{e}")))?;
    if config.get_hosts().is_empty() {
        return Err(bad(
            &location,
            "no host: give one (postgres://USER@HOST/DB) or a socket directory (?host=/dir)".into(),
        ));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS_DEFAULT));
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_millis(TCP_USER_TIMEOUT_MS_DEFAULT));
    }
    if config.get_application_name().is_none() {
        config.application_name("tooljournal");
    }
    // A transaction of ours left open by a stopped process (SIGSTOP, a paused machine) would
    // hold its session's row lock for as long as TCP takes to notice: the server ends it once
    // it has been idle for a lease, so a crashed writer never blocks the next one for longer.
    if config.get_options().is_none() {
        config.options(&format!(
            "-c idle_in_transaction_session_timeout={}",
            lease_ms.max(IDLE_IN_TRANSACTION_MS_MIN)
        ));
    }
    // As libpq: a password not in the URL comes from PGPASSWORD, so it need not be typed
    // where a shell history or a process listing keeps it.
    if config.get_password().is_none() {
        if let Some(password) = std::env::var_os("PGPASSWORD") {
            config.password(password.as_encoded_bytes());
        }
    }
    Ok(StoreUrl {
        location,
        config,
        session,
        lease_ms,
    })
}

fn parse_lease_ms(location: &str, value: &str) -> Result<u64, JournalError> {
    match value.parse::<u64>() {
        Ok(ms) if ms >= LEASE_MS_MIN => Ok(ms),
        _ => Err(bad(
            location,
            format!(
                "lease_ms={value}: want a whole number of milliseconds, at least {LEASE_MS_MIN}"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_is_elided_from_user_part_and_params() {
        assert_eq!(
            elide_password("postgres://u:secret@h:5/db?session=a&password=x&lease_ms=9"),
            "postgres://u@h:5/db?session=a&lease_ms=9"
        );
        assert_eq!(
            elide_password("postgres://u@/db?host=/tmp"),
            "postgres://u@/db?host=/tmp"
        );
    }

    #[test]
    fn own_params_are_stripped_and_kept() {
        let u =
            parse("postgres://u:pw@localhost:6543/db?session=s%201&lease_ms=500&connect_timeout=2")
                .unwrap();
        assert_eq!(u.session.as_deref(), Some("s 1"));
        assert_eq!(u.lease_ms, 500);
        assert_eq!(u.config.get_ports(), &[6543]);
        assert_eq!(
            u.config.get_connect_timeout(),
            Some(&Duration::from_secs(2))
        );
        assert!(!u.location.contains("pw"));
    }

    #[test]
    fn socket_dir_url_parses() {
        let u = parse("postgres://u@/db?host=/tmp/x&session=a").unwrap();
        assert_eq!(u.config.get_hosts().len(), 1);
        assert_eq!(u.lease_ms, LEASE_MS_DEFAULT);
    }
}
