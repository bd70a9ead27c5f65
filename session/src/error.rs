//! What a resume can refuse or fail with.

use journal::JournalError;

/// Why a resume did not go on. Every message names the journal's location (a URL without its
/// secrets).
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The journal is corrupt (not merely torn).
    #[error("{0}")]
    Corrupt(String),
    /// The journal was written by a newer tooljournal.
    #[error("{0}")]
    Newer(String),
    /// Another process holds the journal: its writer lock, or a live PostgreSQL lease.
    #[error("{0}")]
    Locked(String),
    /// The resume refused: the session is imported, has orphans running, changed underneath it
    /// too often, or recovery could not write.
    #[error("{0}")]
    Refused(String),
    /// The journal, its store or the workspace failed (I/O).
    #[error("{0}")]
    Failed(String),
    /// A location that is neither a directory nor a PostgreSQL URL.
    #[error(transparent)]
    Location(#[from] journal::LocationError),
    /// One of the embedder's hooks refused.
    #[error("{0}")]
    Hook(String),
}

impl From<JournalError> for ResumeError {
    fn from(e: JournalError) -> ResumeError {
        match e.root() {
            JournalError::Corrupt { .. } => ResumeError::Corrupt(e.to_string()),
            JournalError::Locked { .. } | JournalError::Leased { .. } => {
                ResumeError::Locked(e.to_string())
            }
            _ => ResumeError::Failed(e.to_string()),
        }
    }
}

impl From<runtime::BuildError> for ResumeError {
    fn from(e: runtime::BuildError) -> ResumeError {
        use runtime::BuildError;
        match e {
            BuildError::Journal(e) => e.into(),
            BuildError::Corrupt { .. } => ResumeError::Corrupt(e.to_string()),
            BuildError::Replay { source, .. } => ResumeError::Failed(source.to_string()),
            BuildError::Spill { message, .. } => ResumeError::Failed(message),
            BuildError::Live { .. } => ResumeError::Locked(e.to_string()),
            BuildError::StillRunning { .. } => ResumeError::Refused(e.to_string()),
            e => ResumeError::Failed(e.to_string()),
        }
    }
}

impl From<recover::RecoverError> for ResumeError {
    fn from(e: recover::RecoverError) -> ResumeError {
        match e {
            recover::RecoverError::Corrupt(m) => ResumeError::Corrupt(m),
            recover::RecoverError::Newer(m) => ResumeError::Newer(m),
            // The rest are I/O failures.
            other => ResumeError::Failed(other.to_string()),
        }
    }
}

impl From<runtime::RuntimeError> for ResumeError {
    fn from(e: runtime::RuntimeError) -> ResumeError {
        ResumeError::Failed(e.to_string())
    }
}
