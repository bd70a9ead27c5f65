//! A store's URL: libpq's URL syntax, plus this crate's own query parameters.
//!
//! Why parse it here and not only in `postgres::Config`: the URL also names the journal
//! (`session=ID`) and its lease (`lease_ms=N`), which `postgres::Config` would refuse as unknown
//! options, and every message names the store by its URL with the password taken out.

use journal::location::{is_secret_param, is_url, redact_url, split_userinfo};
use journal::JournalError;
use percent_encoding::percent_decode_str;
use std::sync::OnceLock;
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
    /// The URL as [`redact_url`] shows it: what messages name the store by.
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

/// A bad URL's error: names the URL (as [`redact_url`] shows it) and what is wrong; `message`
/// never quotes the URL's text, which may hold a password.
fn bad(location: &str, message: String) -> JournalError {
    JournalError::Store {
        location: location.to_string(),
        op: "parse URL",
        message,
    }
}

/// The password a URL that gives none connects with, once [`set_default_password`] was called.
static DEFAULT_PASSWORD: OnceLock<Option<String>> = OnceLock::new();

/// Sets the password every URL that gives none connects with, in place of `PGPASSWORD`: for a
/// binary that took `PGPASSWORD` out of its environment (so that the tools it starts do not
/// inherit it). The first call wins. Without a call, `PGPASSWORD` is read, as libpq reads it.
pub fn set_default_password(password: Option<String>) {
    let _ = DEFAULT_PASSWORD.set(password);
}

fn default_password() -> Option<Vec<u8>> {
    match DEFAULT_PASSWORD.get() {
        Some(set) => set.clone().map(String::into_bytes),
        None => std::env::var_os("PGPASSWORD").map(|p| p.into_encoded_bytes()),
    }
}

/// Parses a store URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB?session=ID[&lease_ms=N]`, or
/// `postgres://USER@/DB?host=/socket/dir&session=ID` for a Unix socket.
///
/// The password (from the user part, a `password` parameter, else the default) is taken out
/// before the driver parses the rest, and set on its configuration directly: no text the
/// driver's errors quote can hold it.
pub(crate) fn parse(url: &str) -> Result<StoreUrl, JournalError> {
    let location = redact_url(url);
    let Some((scheme, rest)) = url.split_once("://").filter(|_| is_url(url)) else {
        return Err(bad(
            &location,
            "not a PostgreSQL URL: it must start with postgres:// or postgresql://".into(),
        ));
    };
    let (userinfo, after) = split_userinfo(rest);
    let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        Some((user, password)) => (Some(user), Some(password).filter(|p| !p.is_empty())),
        None => (None, None),
    };
    let (host_and_path, query) = after.split_once('?').unwrap_or((after, ""));
    if host_and_path.contains('@') || user.is_some_and(|u| u.contains(['?', '#'])) {
        return Err(bad(
            &location,
            "the user part is ambiguous: percent-encode `@`, `/`, `?` and `#` in a user name \
             or password (as %40, %2F, %3F, %23)"
                .into(),
        ));
    }
    let password = password.map(|p| percent_decode_str(p).collect::<Vec<u8>>());
    let params = Params::read(&location, query)?;
    let mut driver_url = format!("{scheme}://");
    if let Some(user) = user {
        driver_url.push_str(user);
        driver_url.push('@');
    }
    driver_url.push_str(host_and_path);
    if !params.passed.is_empty() {
        driver_url.push('?');
        driver_url.push_str(&params.passed.join("&"));
    }
    let mut config: postgres::Config = driver_url
        .parse()
        .map_err(|e| bad(&location, format!("{e}")))?;
    if config.get_hosts().is_empty() {
        return Err(bad(
            &location,
            "no host: give one (postgres://USER@HOST/DB) or a socket directory (?host=/dir)".into(),
        ));
    }
    // As libpq: a parameter wins over the user part; PGPASSWORD (or the default a binary set)
    // counts only when neither gives one, so that a password need not be typed where a shell
    // history or a process listing keeps it.
    if let Some(password) = params.password.or(password).or_else(default_password) {
        config.password(password);
    }
    set_defaults(&mut config, params.lease_ms);
    Ok(StoreUrl {
        location,
        config,
        session: params.session,
        lease_ms: params.lease_ms,
    })
}

/// The query parameters of a store URL: this crate's own, the password, and the rest, which
/// the driver reads.
struct Params<'a> {
    session: Option<String>,
    lease_ms: u64,
    password: Option<Vec<u8>>,
    passed: Vec<&'a str>,
}

impl<'a> Params<'a> {
    fn read(location: &str, query: &'a str) -> Result<Params<'a>, JournalError> {
        let mut params = Params {
            session: None,
            lease_ms: LEASE_MS_DEFAULT,
            password: None,
            passed: Vec::new(),
        };
        for (n, param) in query.split('&').filter(|p| !p.is_empty()).enumerate() {
            // Named by position, never quoted: a parameter without `=` may be a mistyped secret.
            let Some((key, value)) = param.split_once('=') else {
                return Err(bad(
                    location,
                    format!("query parameter {} has no `=`", n + 1),
                ));
            };
            let name = percent_decode_str(key).decode_utf8_lossy();
            if is_secret_param(key) {
                if !name.eq_ignore_ascii_case("password") {
                    return Err(bad(
                        location,
                        format!("`{name}`: this build has no TLS (see the crate's docs)"),
                    ));
                }
                params.password = Some(percent_decode_str(value).collect());
                continue;
            }
            let value = percent_decode_str(value).decode_utf8().map_err(|_| {
                bad(
                    location,
                    format!("query parameter `{name}` is not UTF-8 once decoded"),
                )
            })?;
            match name.as_ref() {
                "session" if params.session.is_some() => {
                    return Err(bad(location, "`session` is given twice".into()))
                }
                "session" if value.is_empty() => {
                    return Err(bad(location, "`session` is empty".into()))
                }
                "session" => params.session = Some(value.into_owned()),
                "lease_ms" => params.lease_ms = parse_lease_ms(location, &value)?,
                "sslmode" if value != "disable" && value != "prefer" => {
                    return Err(bad(
                        location,
                        format!("sslmode={value}: this build has no TLS (see the crate's docs)"),
                    ))
                }
                _ => params.passed.push(param),
            }
        }
        Ok(params)
    }
}

/// The timeouts, application name and server options a URL does not set.
fn set_defaults(config: &mut postgres::Config, lease_ms: u64) {
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
    fn no_way_of_writing_a_password_shows_it() {
        for (url, shown) in [
            (
                "postgres://u:pw@h/db?session=a",
                "postgres://u@h/db?session=a",
            ),
            ("postgres://u:p%3Fw@h/db", "postgres://u@h/db"),
            (
                "postgres://u:p?w@h/db?session=a",
                "postgres://u@h/db?session=a",
            ),
            ("postgres://u:p@w@h/db", "postgres://u@h/db"),
            ("postgres://u:p/w@h/db", "postgres://u@h/db"),
            ("postgres://u:a@p?w@/db?host=/s", "postgres://u@/db?host=/s"),
            (
                "postgres://u@h/db?%70assword=pw&session=a",
                "postgres://u@h/db?session=a",
            ),
            (
                "postgres://u@h/db?PASSWORD=pw&sslpassword=k",
                "postgres://u@h/db",
            ),
            (
                "postgres://u@h/db?session=a&pw",
                "postgres://u@h/db?session=a",
            ),
            ("postgres:///db?password=pw&session=a@b", "postgres://@b"),
            ("postgres://h:5432/db", "postgres://h:5432/db"),
            ("/var/lib/journals/s1", "/var/lib/journals/s1"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn a_password_with_a_raw_question_mark_is_read_as_libpq_reads_it() {
        let u = parse("postgres://u:p?w@localhost/db?session=s").unwrap();
        assert_eq!(u.config.get_password(), Some(b"p?w".as_slice()));
        assert_eq!(u.session.as_deref(), Some("s"));
        let u = parse("postgres://u@localhost/db?session=s&%70assword=a%26b").unwrap();
        assert_eq!(u.config.get_password(), Some(b"a&b".as_slice()));
        assert!(parse("postgres://u:a@b@localhost/db?session=s").is_err());
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
