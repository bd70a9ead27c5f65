//! What the embedding layer fails with: one kind per exception a host raises, each with the
//! exit code the CLI gives the same failure.

use journal::JournalError;

/// Which failure: the host's exception class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Another process holds the journal (its writer lock, or a live PostgreSQL lease).
    Locked,
    /// The journal's bytes are damaged (not merely torn).
    Corrupt,
    /// The journal was written by a newer tooljournal.
    NewerSchema,
    /// The journal cannot be resumed as it is (orphans running, imported, nothing to resume).
    Refused,
    /// The host used the API wrongly: a bad argument, a call out of order.
    Usage,
    /// I/O, the store, or the runtime failed.
    Failed,
}

impl ErrorKind {
    /// The exit code `tooljournal` and `recover` give this failure: 2 corrupt, 3 newer, else 1.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Corrupt => 2,
            ErrorKind::NewerSchema => 3,
            _ => 1,
        }
    }

    /// The exception's name in the host packages.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Locked => "JournalLocked",
            ErrorKind::Corrupt => "Corrupt",
            ErrorKind::NewerSchema => "NewerSchema",
            ErrorKind::Refused => "Refused",
            ErrorKind::Usage => "UsageError",
            ErrorKind::Failed => "Failed",
        }
    }
}

/// A failure, with the message the CLI prints for it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct EmbedError {
    /// Which failure.
    pub kind: ErrorKind,
    /// What went wrong and where (the journal's location, a URL without its secrets).
    pub message: String,
}

impl EmbedError {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> EmbedError {
        EmbedError {
            kind,
            message: message.into(),
        }
    }

    /// A misuse of the API.
    pub fn usage(message: impl Into<String>) -> EmbedError {
        EmbedError::new(ErrorKind::Usage, message)
    }

    /// The CLI's exit code for it.
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }
}

impl From<JournalError> for EmbedError {
    fn from(e: JournalError) -> EmbedError {
        let kind = match e.root() {
            JournalError::Corrupt { .. } => ErrorKind::Corrupt,
            JournalError::Locked { .. } | JournalError::Leased { .. } => ErrorKind::Locked,
            _ => ErrorKind::Failed,
        };
        EmbedError::new(kind, e.to_string())
    }
}

impl From<runtime::BuildError> for EmbedError {
    fn from(e: runtime::BuildError) -> EmbedError {
        use runtime::BuildError;
        match e {
            BuildError::Journal(e) => e.into(),
            BuildError::Live { .. } => EmbedError::new(ErrorKind::Locked, e.to_string()),
            // The rest are the session layer's mapping (corrupt, refused, failed).
            e => session::ResumeError::from(e).into(),
        }
    }
}

impl From<session::ResumeError> for EmbedError {
    fn from(e: session::ResumeError) -> EmbedError {
        use session::ResumeError;
        let kind = match &e {
            ResumeError::Corrupt(_) => ErrorKind::Corrupt,
            ResumeError::Newer(_) => ErrorKind::NewerSchema,
            ResumeError::Locked(_) => ErrorKind::Locked,
            ResumeError::Refused(_) => ErrorKind::Refused,
            ResumeError::Location(_) => ErrorKind::Usage,
            ResumeError::Failed(_) | ResumeError::Hook(_) => ErrorKind::Failed,
        };
        EmbedError::new(kind, e.to_string())
    }
}

impl From<recover::RecoverError> for EmbedError {
    fn from(e: recover::RecoverError) -> EmbedError {
        session::ResumeError::from(e).into()
    }
}

impl From<runtime::RuntimeError> for EmbedError {
    fn from(e: runtime::RuntimeError) -> EmbedError {
        EmbedError::new(ErrorKind::Failed, e.to_string())
    }
}

impl From<journal::LocationError> for EmbedError {
    fn from(e: journal::LocationError) -> EmbedError {
        EmbedError::usage(e.to_string())
    }
}
