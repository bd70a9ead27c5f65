//! Why recovery could not be done: each failure named with the journal's directory, in the
//! exit-code class `main` gives it (1 I/O, 2 corrupt, 3 newer), so that callers match on a type
//! instead of reading messages.

use events::replay::ReplayError;
use journal::JournalError;
use std::path::{Path, PathBuf};

/// Why recovery could not be done. `recover`'s `main` turns each into its exit code: 1 for the
/// I/O failures, 2 for [`RecoverError::Corrupt`], 3 for [`RecoverError::Newer`]. Every message
/// starts with the journal's directory, but [`RecoverError::Workspace`]'s, which starts with
/// the workspace's.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The journal directory could not be opened: exit 1.
    #[error("{}: cannot open the journal directory: {source}", dir.display())]
    OpenDir {
        /// The directory asked for.
        dir: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: std::io::Error,
    },
    /// Reading, locking or appending to the journal failed (I/O, a record refused, a writer
    /// stopped by an earlier failure): exit 1. A lock held by a live writer is not this: a
    /// live session is read, not refused.
    #[error("{}", placed(dir, source))]
    Journal {
        /// The journal's directory.
        dir: PathBuf,
        /// What the journal said.
        #[source]
        source: JournalError,
    },
    /// A file of the journal directory could not be listed or measured outside the journal's
    /// reader (looking for the quarantine file of an earlier cut, say): exit 1.
    #[error("{}: cannot read the journal directory: {source}", dir.display())]
    Io {
        /// The journal's directory.
        dir: PathBuf,
        /// What the storage said.
        #[source]
        source: std::io::Error,
    },
    /// The reader stopped without saying how the journal ends (it always does after its last
    /// record; this guards a reader that would not): exit 1.
    #[error("{}: reading ended without a verdict", dir.display())]
    NoVerdict {
        /// The journal's directory.
        dir: PathBuf,
    },
    /// The journal is corrupt (not merely torn), or does not make sense: exit 2.
    #[error("{0}")]
    Corrupt(String),
    /// Written by a newer tooljournal: a payload this build cannot decode in a journal of a
    /// newer event schema (docs/FORMAT.md, *Versioning*): exit 3.
    #[error("{0}")]
    Newer(String),
    /// The workspace to probe (`--probe`) could not be opened: exit 1. Found before anything
    /// is read or written.
    #[error(transparent)]
    Workspace(#[from] crate::probe::WorkspaceError),
    /// A second reading of the journal (`rebuild` and `audit` read it twice) did not find
    /// what the first found: something cut or changed it in between. Exit 1.
    #[error("{}: the journal changed between two readings: {what}", dir.display())]
    Changed {
        /// The journal's directory.
        dir: PathBuf,
        /// What differs.
        what: String,
    },
}

impl RecoverError {
    /// A replay error as the exit-code class it belongs to, named with the journal directory.
    pub fn from_replay(dir: &Path, e: ReplayError) -> RecoverError {
        match e {
            ReplayError::Journal(e) => journal_failed(dir, e),
            e @ ReplayError::NewerSchema { .. } => {
                RecoverError::Newer(format!("{}: {e}", dir.display()))
            }
            other => RecoverError::Corrupt(format!("{}: {other}", dir.display())),
        }
    }
}

/// The error said once with the journal's path in front: a journal error usually starts with
/// it already (its location), and then it is not said twice.
fn placed(dir: &Path, what: &dyn std::fmt::Display) -> String {
    let what = what.to_string();
    let place = format!("{}: ", dir.display());
    if what.starts_with(&place) {
        what
    } else {
        format!("{place}{what}")
    }
}

/// A journal failure in `dir` ([`RecoverError::Journal`]).
pub(super) fn journal_failed(dir: &Path, source: JournalError) -> RecoverError {
    RecoverError::Journal {
        dir: dir.to_path_buf(),
        source,
    }
}

/// A storage failure in `dir` ([`RecoverError::Io`]).
pub(super) fn io_failed(dir: &Path, source: std::io::Error) -> RecoverError {
    RecoverError::Io {
        dir: dir.to_path_buf(),
        source,
    }
}
