//! The journal's errors. Each names what went wrong and where: the journal's location, the
//! segment file, the byte offset.

use crate::framing::BadFrame;
use crate::segment::BadHeader;
use std::io;
use std::sync::Arc;

/// Where in a journal something is: a segment and a byte offset in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The segment's number (its file name is derived from it).
    pub segment: u64,
    /// Byte offset from the start of the segment file, header included.
    pub offset: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "segment {} offset {}",
            crate::segment::file_name(self.segment),
            self.offset
        )
    }
}

/// What is wrong with a corrupt journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptionKind {
    /// A segment header is unreadable, or from an unsupported version.
    BadHeader(BadHeader),
    /// A record frame is bad and a valid record (or a later segment) follows it, so this is not
    /// a torn tail.
    BadRecord(BadFrame),
    /// A valid record whose seq is not the one expected (a gap or a repeat).
    SeqGap {
        /// The seq that should have come next.
        expected: u64,
        /// The seq the record carries.
        found: u64,
    },
    /// A segment header whose first seq does not continue the previous segment.
    FirstSeqMismatch {
        /// The seq after the previous segment's last record.
        expected: u64,
        /// The first seq this segment's header claims.
        found: u64,
    },
    /// A segment from another journal.
    JournalIdMismatch,
    /// A segment whose format version is not the journal's (its first segment's): a journal
    /// is written in one version from its first segment to its last.
    FormatVersionMismatch {
        /// The format version of the journal's first segment read (segment 0 when reading all).
        expected: u32,
        /// The format version this segment's header says.
        found: u32,
    },
    /// A segment header whose number does not match its file name.
    SegmentNumberMismatch {
        /// The number in the file name.
        expected: u64,
        /// The number in the header.
        found: u64,
    },
    /// Segment numbers skip one: the named segment is missing.
    MissingSegment {
        /// The number of the segment that should exist and does not.
        missing: u64,
    },
}

impl std::fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CorruptionKind::BadHeader(h) => write!(f, "{h}"),
            CorruptionKind::BadRecord(b) => write!(f, "{b}, and valid data follows"),
            CorruptionKind::SeqGap { expected, found } => {
                write!(f, "seq gap: expected seq {expected}, found {found}")
            }
            CorruptionKind::FirstSeqMismatch { expected, found } => write!(
                f,
                "segment header says first seq {found}, previous segment ends before {expected}"
            ),
            CorruptionKind::JournalIdMismatch => {
                write!(f, "segment belongs to another journal (journal id differs)")
            }
            CorruptionKind::FormatVersionMismatch { expected, found } => write!(
                f,
                "segment header says format version {found}, the journal's first segment \
                 says {expected} (a journal has one format version)"
            ),
            CorruptionKind::SegmentNumberMismatch { expected, found } => write!(
                f,
                "segment header says number {found}, file name says {expected}"
            ),
            CorruptionKind::MissingSegment { missing } => write!(
                f,
                "segment {} is missing",
                crate::segment::file_name(*missing)
            ),
        }
    }
}

/// Corruption found by the reader: what, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt journal at {position}: {kind}")]
pub struct Corruption {
    /// Where the corruption begins.
    pub position: Position,
    /// What is wrong there.
    pub kind: CorruptionKind,
}

/// Said after an I/O error that means the disk is full, so that nobody has to know errno 28.
pub fn full_disk_note(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(28) {
        " (the disk is full)"
    } else {
        ""
    }
}

/// Everything that can go wrong with a journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{location}: {op} {file}: {source}{}", full_disk_note(source))]
    /// A read, write, sync or directory operation failed.
    Io {
        /// The journal's location (its directory), as `Storage::location` gives it.
        location: String,
        /// The operation that failed, e.g. `"sync"`, `"lock"`, `"list"`.
        op: &'static str,
        /// The file it failed on, relative to the journal's directory (`.` for the directory
        /// itself).
        file: String,
        #[source]
        /// The OS's error.
        source: io::Error,
    },
    #[error("{location}: journal is locked by another writer{} (a live session, or a recovery in progress)", holder_pid.map(|p| format!(", pid {p}")).unwrap_or_default())]
    /// Another process holds the journal's writer lock.
    Locked {
        /// The journal's location.
        location: String,
        /// The pid the holder recorded in the lock file, if it could be read.
        holder_pid: Option<u32>,
    },
    #[error("{location}: journal is held by {holder}, whose lease expires in {expires_in_ms} ms (a live session on another worker; wait for the lease or steal it)")]
    /// A record store's journal whose writer lease is live (the store's [`JournalError::Locked`]).
    Leased {
        /// The journal's location.
        location: String,
        /// The holder's name (`host:pid`).
        holder: String,
        /// Milliseconds until the lease expires unless renewed.
        expires_in_ms: u64,
    },
    #[error("{location}: another writer took this journal (epoch {epoch} is no longer its writer's): nothing more is written here")]
    /// A record store refused an append because another writer took the journal since this
    /// one did (a higher epoch): this writer is deposed.
    Fenced {
        /// The journal's location.
        location: String,
        /// The epoch this writer held.
        epoch: u64,
    },
    #[error("{location}: {op}: {message}")]
    /// A record store's operation failed (a connection, a query, a commit whose outcome could
    /// not be read back).
    Store {
        /// The journal's location.
        location: String,
        /// The operation, e.g. `"connect"`, `"append"`, `"read"`.
        op: &'static str,
        /// The store's description of the failure.
        message: String,
    },
    #[error("{location}: {corruption}")]
    /// The journal's bytes are damaged somewhere other than a torn tail.
    Corrupt {
        /// The journal's location.
        location: String,
        /// What is damaged, and where.
        corruption: Corruption,
    },
    #[error("record of {size_bytes} bytes is over the limit of {size_bytes_max} bytes")]
    /// An append whose encoded payload would exceed the record size limit; nothing was written.
    RecordTooLarge {
        /// The payload's encoded size in bytes.
        size_bytes: u64,
        /// The largest payload allowed: `Limits::record_size_bytes_max` less the 8 bytes of seq.
        size_bytes_max: u64,
    },
    #[error("cannot encode record: {0}")]
    /// The value cannot be encoded (e.g. a type serde's bincode cannot represent); nothing was
    /// written.
    Encode(crate::codec::CodecError),
    #[error("cannot sync through seq {seq}: the last appended seq is {last}")]
    /// `sync_through` was asked for a seq that has not been appended yet.
    NotAppended {
        /// The seq asked for.
        seq: u64,
        /// The last seq appended so far.
        last: u64,
    },
    /// Fail-stop (DESIGN.md I10): an earlier write or sync failed, so nothing more is written.
    #[error("journal stopped after an earlier failure: {0}")]
    Poisoned(Arc<JournalError>),
}

impl JournalError {
    /// The original failure when this error is a poisoned journal's, else itself.
    pub fn root(&self) -> &JournalError {
        match self {
            JournalError::Poisoned(cause) => cause.root(),
            other => other,
        }
    }
}

/// A record whose bytes are intact but whose payload does not decode as the expected type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record seq {seq} at {position}: payload does not decode: {message}")]
pub struct DecodeError {
    /// The record's seq.
    pub seq: u64,
    /// Where the record's frame starts.
    pub position: Position,
    /// The decoder's description of the failure.
    pub message: String,
}
