//! Where a journal lives: segment files in a directory, or rows in a record store.
//!
//! The runtime and `recover` hold a [`Backend`] and call [`crate::Journal::lock_backend`] and
//! [`crate::Reader::open_backend`]; they never learn which kind they have. The two kinds keep
//! their own seams ([`Storage`] for files, [`RecordStore`] for rows) because they fail in
//! different units (see `records.rs`); the journal's writer and reader are one code above both.
//! What only files have (a torn tail to cut, bytes to salvage) is reached through
//! [`Backend::files`], and a caller that asks a record store for it says so in its message.

use crate::error::JournalError;
use crate::records::{Holder, RecordStore};
use crate::storage::Storage;
use std::sync::Arc;

/// A journal's backend: the embedded default (segment files) or a record store (PostgreSQL).
#[derive(Debug, Clone)]
pub enum Backend {
    /// Segment files in a directory ([`crate::FsStorage`], or [`crate::SimStorage`] in tests).
    Files(Arc<dyn Storage>),
    /// One journal's rows in a record store.
    Records(Arc<dyn RecordStore>),
}

/// Who writes a journal now, as far as its backend can tell without taking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterState {
    /// No writer holds it.
    Free,
    /// A process on this host holds the directory's lock (its pid, when the kernel says).
    Locked {
        /// The lock holder's pid.
        pid: Option<u32>,
    },
    /// A record store's lease: live, or expired and not given up (a crashed writer).
    Leased(Holder),
}

impl WriterState {
    /// Whether a live writer holds the journal: a lock, or a lease that has not expired.
    pub fn live(&self) -> bool {
        match self {
            WriterState::Free => false,
            WriterState::Locked { .. } => true,
            WriterState::Leased(holder) => holder.live(),
        }
    }
}

impl Backend {
    /// Where the journal lives, for messages (a path, or a URL without its password).
    pub fn location(&self) -> String {
        match self {
            Backend::Files(storage) => storage.location(),
            Backend::Records(store) => store.location(),
        }
    }

    /// The segment files' storage, for what only files have (cutting a torn tail, salvage).
    pub fn files(&self) -> Option<&Arc<dyn Storage>> {
        match self {
            Backend::Files(storage) => Some(storage),
            Backend::Records(_) => None,
        }
    }

    /// Whether this backend's calls may block the thread for long (a disk or a network): the
    /// journal then moves them off the async executor.
    pub fn blocks(&self) -> bool {
        match self {
            Backend::Files(storage) => storage.blocks(),
            Backend::Records(_) => true,
        }
    }

    /// Who writes the journal now, found without taking it or changing anything.
    pub fn writer_state(&self) -> Result<WriterState, JournalError> {
        match self {
            Backend::Files(storage) => match storage.writer_lock_held() {
                Ok(false) => Ok(WriterState::Free),
                Ok(true) => Ok(WriterState::Locked {
                    pid: storage.lock_holder_pid(),
                }),
                Err(source) => Err(JournalError::Io {
                    location: storage.location(),
                    op: "check lock",
                    file: crate::storage::LOCK_FILE.into(),
                    source,
                }),
            },
            Backend::Records(store) => Ok(match store.holder()? {
                Some(holder) => WriterState::Leased(holder),
                None => WriterState::Free,
            }),
        }
    }
}

impl From<Arc<dyn Storage>> for Backend {
    fn from(storage: Arc<dyn Storage>) -> Backend {
        Backend::Files(storage)
    }
}

impl From<Arc<dyn RecordStore>> for Backend {
    fn from(store: Arc<dyn RecordStore>) -> Backend {
        Backend::Records(store)
    }
}
