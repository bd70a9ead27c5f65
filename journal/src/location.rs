//! Where a journal is: a directory of segment files, or one session in a PostgreSQL store
//! (`postgres://USER@HOST[:PORT]/DB?session=ID`, libpq's URL syntax; `host=/socket/dir` works).
//!
//! Why one type on the lowest floor: every crate and both binaries name journals, and before
//! this each kept its own parser and its own way of printing a URL. [`Location`] is parsed
//! once ([`Location::parse`], refusing a URL of another scheme rather than taking it for a
//! path), printed without its secrets (`Display`, `Debug`), and opened by the floor that can
//! open it: `tooljournal-pg`'s `open` for either kind (this crate links no database driver).

use percent_encoding::percent_decode_str;
use std::path::{Path, PathBuf};

/// A journal's location.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A journal directory (created by its first writer if missing).
    Dir(PathBuf),
    /// One session in a PostgreSQL store, by its URL. The URL may hold a password: it is
    /// reached only through [`Location::url`], and never printed.
    Postgres(String),
}

/// A location that is neither a directory's path nor a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{shown}: not a journal location: a journal is a directory or a \
     postgres://USER@HOST/DB?session=ID URL"
)]
pub struct LocationError {
    /// The location as given, its secrets taken out.
    pub shown: String,
}

impl Location {
    /// Reads a location as a user types it: a `postgres://` or `postgresql://` URL, else a
    /// directory's path. A URL of another scheme (`http://…`, `sqlite://…`) is refused rather
    /// than taken for a relative path.
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        if is_url(text) {
            return Ok(Location::Postgres(text.to_owned()));
        }
        if looks_like_url(text) {
            return Err(LocationError {
                shown: redact_url(text),
            });
        }
        Ok(Location::Dir(PathBuf::from(text)))
    }

    /// As [`Location::parse`], for a path the command line or a caller already holds (a path
    /// that is not UTF-8 is a directory's).
    pub fn from_path(path: &Path) -> Result<Location, LocationError> {
        match path.to_str() {
            Some(text) => Location::parse(text),
            None => Ok(Location::Dir(path.to_path_buf())),
        }
    }

    /// The directory, for a journal kept in one.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Location::Dir(dir) => Some(dir),
            Location::Postgres(_) => None,
        }
    }

    /// The URL with its secrets, for a PostgreSQL session: what its store is opened with,
    /// never what a message shows.
    pub fn url(&self) -> Option<&str> {
        match self {
            Location::Dir(_) => None,
            Location::Postgres(url) => Some(url),
        }
    }
}

impl std::str::FromStr for Location {
    type Err = LocationError;

    fn from_str(text: &str) -> Result<Location, LocationError> {
        Location::parse(text)
    }
}

impl From<PathBuf> for Location {
    /// A directory's path, taken as given (use [`Location::from_path`] for what a user typed).
    fn from(dir: PathBuf) -> Location {
        Location::Dir(dir)
    }
}

impl From<&Path> for Location {
    /// A directory's path, taken as given (use [`Location::from_path`] for what a user typed).
    fn from(dir: &Path) -> Location {
        Location::Dir(dir.to_path_buf())
    }
}

impl std::fmt::Display for Location {
    /// As every message shows it: a directory's path, or the URL without its secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(dir) => write!(f, "{}", dir.display()),
            Location::Postgres(url) => f.write_str(&redact_url(url)),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: Debug shows what Display shows.
        match self {
            Location::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
            Location::Postgres(url) => f.debug_tuple("Postgres").field(&redact_url(url)).finish(),
        }
    }
}

/// Whether `location` names a PostgreSQL store (`postgres://` or `postgresql://`) rather than
/// a directory: how the command lines tell a journal's two kinds of location apart.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
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

/// Query parameters whose value is a secret (compared with the name percent-decoded, case
/// aside): never shown, never handed to the driver as text.
pub const SECRET_PARAMS: [&str; 3] = ["password", "sslpassword", "sslkey"];

/// Whether a URL's query parameter `name` holds a secret ([`SECRET_PARAMS`], the name
/// percent-decoded, case aside).
pub fn is_secret_param(name: &str) -> bool {
    let decoded = percent_decode_str(name).decode_utf8_lossy();
    SECRET_PARAMS
        .iter()
        .any(|s| decoded.eq_ignore_ascii_case(s))
}

/// How every message shows a location: a PostgreSQL URL without its secrets, anything else as
/// it is. The one redaction routine of the workspace's locations.
///
/// The user part is libpq's (up to the first `@` that no `/` precedes) when that reading is
/// plain: no `?` or `#` in it, and no other `@` after it. Otherwise everything up to the URL's
/// *last* `@` is taken as the user part, so that a password typed with a raw `@`, `?`, `/` or
/// `#` never shows (a URL with a raw `@` in its query is then shown cut to what follows that
/// `@`: less than it says, never a secret). Either way only the user name is shown, and every query
/// parameter named as a secret (`password`, `sslpassword`, `sslkey`, its name decoded), or without `=`, is left
/// out.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://").filter(|_| looks_like_url(url)) else {
        return url.to_owned();
    };
    let (userinfo, after) = split_userinfo(rest);
    let plain = userinfo.is_none_or(|u| !u.contains(['?', '#'])) && !after.contains('@');
    let (user, after) = match rest.rfind('@') {
        _ if plain => (
            userinfo.map(|u| u.split(':').next().unwrap_or_default()),
            after,
        ),
        Some(at) => {
            let name = rest[..at]
                .split([':', '/', '?', '#', '&', '=', ';'])
                .next()
                .unwrap_or_default();
            (Some(name), &rest[at + 1..])
        }
        None => (None, rest),
    };
    let mut shown = format!("{scheme}://");
    if let Some(user) = user {
        shown.push_str(user);
        shown.push('@');
    }
    match after.split_once('?') {
        Some((host_and_path, query)) => {
            shown.push_str(host_and_path);
            let kept: Vec<&str> = query
                .split('&')
                // A parameter without `=` may be a mistyped secret: left out too.
                .filter(|p| {
                    p.split_once('=')
                        .is_some_and(|(name, _)| !is_secret_param(name))
                })
                .collect();
            if !kept.is_empty() {
                shown.push('?');
                shown.push_str(&kept.join("&"));
            }
        }
        None => shown.push_str(after),
    }
    shown
}

/// `rest` (the URL after `scheme://`) cut into its user part, when it has one, and what
/// follows: libpq's rule, the user part runs to the first `@` that no `/` precedes.
pub fn split_userinfo(rest: &str) -> (Option<&str>, &str) {
    match rest.find(['@', '/']) {
        Some(at) if rest.as_bytes()[at] == b'@' => (Some(&rest[..at]), &rest[at + 1..]),
        _ => (None, rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_a_directory_a_postgres_url_or_refused() {
        assert_eq!(
            Location::parse("some/dir"),
            Ok(Location::Dir(PathBuf::from("some/dir")))
        );
        let url = "postgresql://tj:s3cret@db/tj?session=a&password=p2";
        assert_eq!(Location::parse(url), Ok(Location::Postgres(url.to_owned())));
        let refused = Location::parse("http://user:pw@example.com/x");
        assert_eq!(
            refused,
            Err(LocationError {
                shown: "http://user@example.com/x".to_owned()
            })
        );
        let said = refused.map(|_| ()).unwrap_err().to_string();
        assert!(said.contains("not a journal location"), "{said}");
        assert!(!said.contains("pw"), "{said}");
    }

    #[test]
    fn a_location_never_prints_its_secrets() {
        let location = Location::parse("postgres://tj:s3cret@db/tj?session=a&password=p2")
            .unwrap_or_else(|e| panic!("{e}"));
        for shown in [location.to_string(), format!("{location:?}")] {
            assert!(
                !shown.contains("s3cret") && !shown.contains("p2"),
                "{shown}"
            );
            assert!(shown.contains("postgres://tj@db/tj?session=a"), "{shown}");
        }
        assert_eq!(
            location.url(),
            Some("postgres://tj:s3cret@db/tj?session=a&password=p2"),
            "the URL itself keeps what it connects with"
        );
    }
}
