//! `journal`: tooljournal's on-disk log.
//!
//! A journal is a directory of segment files holding checksummed, seq-numbered records. It knows
//! bytes and records, nothing about tools: the runtime decides what a record means, this crate
//! decides whether it is intact and whether it is durable.
//!
//! - [`Journal`] appends records and makes them durable with group commit: `append` returns a
//!   seq at once, `sync_through(seq)` resolves when that record is on disk, and callers waiting
//!   together share one fdatasync. Any write or sync failure poisons the journal (fail-stop).
//! - [`Reader`] streams records back and ends [`ReadEnd::Clean`], [`ReadEnd::TornTail`] or
//!   [`ReadEnd::Corrupt`].
//! - [`storage`] is the seam every byte goes through; [`SimStorage`] injects faults and power
//!   loss for tests.
//!
//! The byte format is in `docs/FORMAT.md`.
//!
//! ```
//! use std::sync::Arc;
//! use tooljournal_journal::{FsStorage, Journal, Limits, Options, ReadEnd, Reader, Storage};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir.path())?);
//! // Opening takes the writer lock: a second writer is refused until this one closes.
//! let (journal, _report) = Journal::open(storage.clone(), Options::default())?;
//! let seq = journal.append(&"hello")?;
//! tokio::runtime::Runtime::new()?.block_on(journal.sync_through(seq))?; // on disk now
//! journal.close()?;
//!
//! let mut reader = Reader::open(storage, Limits::default())?;
//! let record = reader.next().expect("one record")?;
//! assert_eq!((record.seq, record.decode::<String>()?), (1, "hello".to_owned()));
//! assert!(reader.next().is_none());
//! assert!(matches!(reader.end(), Some(ReadEnd::Clean)));
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod backend;
pub mod codec;
mod error;
pub mod framing;
pub mod location;
mod reader;
pub mod records;
mod scan;
pub mod segment;
pub mod storage;
mod writer;

pub use backend::{Backend, WriterState};
pub use error::{full_disk_note, Corruption, CorruptionKind, DecodeError, JournalError, Position};
pub use location::{Location, LocationError};
pub use reader::{ReadEnd, Reader, Record, RecordRef, Skipped, TornReason, TornTail};
pub use records::{
    Holder, JournalMeta, OpenedRows, RecordStore, RecordWriter, Row, RowRef, RowSource, Taken,
    Takeover,
};
pub use scan::ScanWork;
pub use storage::{FileSystem, FsStorage, SimStorage, Storage};
pub use writer::{
    shared_sync_stats, Journal, JournalStats, OpenReport, SharedSyncStats, WriterLock,
};

use std::str::FromStr;

/// Size limits, on write and on read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest record body (seq + payload) in bytes. Checked on append and on read.
    pub record_size_bytes_max: u32,
    /// A segment is closed and the next begun before it would grow past this. A single record
    /// larger than this still gets a segment of its own.
    pub segment_size_bytes_max: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            record_size_bytes_max: 16 << 20,
            segment_size_bytes_max: 64 << 20,
        }
    }
}

/// When appended records are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Every `append` writes and fdatasyncs before it returns (one sync per record).
    Always,
    /// `append` buffers; `sync_through` makes records durable, sharing one fdatasync among all
    /// callers waiting at the same time. The default.
    #[default]
    Group,
    /// Never fdatasync; `sync_through` only hands the bytes to the OS. **Unsafe**: a power loss
    /// can lose records the caller believes durable. For benchmarks and tests only.
    Never,
}

impl FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<FsyncPolicy, String> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "group" => Ok(FsyncPolicy::Group),
            "never" => Ok(FsyncPolicy::Never),
            other => Err(format!(
                "unknown fsync policy {other:?} (expected always, group or never)"
            )),
        }
    }
}

impl std::fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::Group => "group",
            FsyncPolicy::Never => "never",
        })
    }
}

/// The default of [`Options::preallocate_bytes`]: one metadata-carrying sync per MiB written.
pub const PREALLOCATE_BYTES_DEFAULT: u64 = 1 << 20;

/// How a [`Journal`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Record and segment size limits.
    pub limits: Limits,
    /// When appended records are fdatasynced; `Group` unless a benchmark says otherwise.
    pub fsync: FsyncPolicy,
    /// Appended bytes held in memory before they are written to the file (not synced) even
    /// without a sync request: bounds memory, and keeps unsynced data in the OS page cache,
    /// where it survives a killed process.
    pub write_buffer_bytes_max: usize,
    /// The id a new journal gets; `None`: random. Fixed ids make simulated runs byte-identical.
    pub journal_id: Option<[u8; 16]>,
    /// How far a segment of format version 2 is zero-filled ahead of its records, so that an
    /// fdatasync finds the blocks written and the file's size unchanged and writes data only
    /// (see `docs/FORMAT.md`, *Preallocated tail*). 0: append, as version 1 always does.
    pub preallocate_bytes: u64,
    /// Whether a group sync may be shared with the other journals of the process on the same
    /// file system: one `syncfs` makes all of them durable, and each journal's own write-back
    /// is checked (see `docs/DESIGN.md` §8, *Many sessions in one process*). Only where the storage offers it
    /// ([`Storage::file_system`]) and under [`FsyncPolicy::Group`]. `false`: every sync is this
    /// journal's own fdatasync.
    pub share_syncs: bool,
}

impl Options {
    /// For a writer that appends a handful of records and closes (a recovery's, a takeover's):
    /// no zeros ahead, which it would write, sync and cut again for a few hundred bytes.
    pub fn few_records() -> Options {
        Options {
            preallocate_bytes: 0,
            ..Options::default()
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            limits: Limits::default(),
            fsync: FsyncPolicy::Group,
            write_buffer_bytes_max: 1 << 20,
            journal_id: None,
            preallocate_bytes: PREALLOCATE_BYTES_DEFAULT,
            share_syncs: true,
        }
    }
}
