//! A journal's location as the command line gives it: a directory, or a session in PostgreSQL
//! (`postgres://USER@HOST[:PORT]/DB?session=ID`, libpq's URL syntax; `host=/socket/dir` works).
//!
//! The type, its parser and how it prints are `journal::Location`'s; opening one is
//! `pg::open`'s. This room keeps the command line's own: where sessions live by default, where
//! files beside a PostgreSQL session's journal go, and `&Path` forms for the commands that hold
//! the argument clap parsed (a URL is a valid path string, and messages print it as given).

use crate::CliError;
use journal::{Backend, Location, RecordStore};
use runtime::SessionBuilder;
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where sessions live by default: `$XDG_STATE_HOME/tooljournal/sessions`, else
/// `~/.local/state/tooljournal/sessions`.
pub fn state_root() -> Result<PathBuf, CliError> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").ok_or_else(|| {
                CliError::Failed("neither XDG_STATE_HOME nor HOME is set: give --journal".into())
            })?;
            PathBuf::from(home).join(".local/state")
        }
    };
    Ok(base.join("tooljournal/sessions"))
}

/// The location `journal` names, or the refusal of a URL of another scheme than PostgreSQL's.
pub fn parse(journal: &Path) -> Result<Location, CliError> {
    Location::from_path(journal).map_err(|e| CliError::Failed(e.to_string()))
}

/// How messages show a journal's location: as given, a URL's secrets taken out.
pub fn shown(journal: impl AsRef<Path>) -> String {
    let journal = journal.as_ref();
    match Location::from_path(journal) {
        Ok(location) => location.to_string(),
        Err(e) => e.shown,
    }
}

/// The URL, when `journal` names a PostgreSQL session rather than a directory.
pub fn url(journal: &Path) -> Option<&str> {
    journal.to_str().filter(|s| journal::location::is_url(s))
}

/// Refuses a location that is a URL of another scheme than PostgreSQL's, rather than take it
/// for a directory's path.
pub fn check(journal: &Path) -> Result<(), CliError> {
    parse(journal).map(|_| ())
}

/// The session's store, for a URL; `None` for a directory.
pub fn store(journal: &Path) -> Result<Option<Arc<dyn RecordStore>>, CliError> {
    match parse(journal)? {
        Location::Dir(_) => Ok(None),
        location => match pg::open(&location)? {
            Backend::Records(store) => Ok(Some(store)),
            Backend::Files(_) => Ok(None),
        },
    }
}

/// The journal's backend, opened for reading: an existing directory, or the session's store.
pub fn backend(journal: &Path) -> Result<Backend, CliError> {
    pg::open(&parse(journal)?).map_err(|e| CliError::Failed(e.to_string()))
}

/// The journal as `recover`'s entry points take it.
pub fn place(journal: &Path) -> Result<recover::Place, CliError> {
    session::place(&parse(journal)?).map_err(CliError::from)
}

/// The library's builder for a session journaled at `journal` (a directory is created if
/// missing; a URL's session is created by its first writer).
pub fn builder(workspace: &Path, journal: &Path) -> Result<SessionBuilder, CliError> {
    session::builder(&parse(journal)?, workspace).map_err(CliError::from)
}

/// Where the CLI keeps files beside a journal (what MCP servers print on stderr): the journal
/// directory, or for a PostgreSQL session a directory of its own under the state root (the
/// session's id in the store, made safe as a file name), created if missing.
pub fn side_dir(journal: &Path) -> Result<PathBuf, CliError> {
    let Some(url) = url(journal) else {
        return Ok(journal.to_path_buf());
    };
    let store = pg::PgStore::open(url).map_err(|e| CliError::Failed(e.to_string()))?;
    // Made safe as a file name, and told apart from another id made the same (`a b`, `a_b`) by
    // a hash of the id.
    let id = store.session();
    let safe: String = id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = sha2::Sha256::digest(id.as_bytes());
    let name = format!("{safe}-{}", hex::encode(&digest[..6]));
    let dir = state_root()?.join("postgres").join(name);
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .map_err(|e| CliError::Failed(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}
