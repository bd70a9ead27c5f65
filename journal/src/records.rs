//! The record-store seam: a journal kept as rows, one per record, in a database (PostgreSQL).
//!
//! Why a second seam beside [`crate::Storage`]: segment files fail byte by byte (a torn write, a
//! lost page, a failed fdatasync), so their seam is a file's bytes and the reader judges every
//! byte. A database fails transaction by transaction: a batch of records is stored whole or not
//! at all, and the question after a dropped connection is not "which bytes reached the disk"
//! but "did that commit happen". So this seam is records: a writer stores a batch of them in
//! one transaction, a reader gets them back in seq order, and the journal above (group commit,
//! seq numbering, fail-stop, frame checks on read) is the same code for both.
//!
//! A record keeps its bytes: its seq, its payload as encoded, and the frame's CRC-32, so a
//! reader checks a row exactly as it checks a frame in a segment (`framing::check`), and a row
//! changed inside the database is corruption, not a different record.
//!
//! Single writer: [`RecordStore::take`] makes the caller the journal's writer by bumping an
//! epoch (the fencing token) in one transaction; every [`RecordWriter::append`] checks that
//! epoch in the transaction that stores the rows, so a deposed writer's next append fails with
//! [`JournalError::Fenced`] and its journal stops (I10). Who holds a journal is a lease the
//! writer renews ([`RecordStore::holder`]); a caller that finds it live is refused with
//! [`JournalError::Leased`] unless it steals.

use crate::error::JournalError;
use std::fmt;

/// What identifies a journal and decides how its payloads are encoded; set once, when the
/// journal's first writer creates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalMeta {
    /// The journal's id (a segment header's `journal_id`).
    pub journal_id: [u8; 16],
    /// The journal's format version (a segment header's `format_version`).
    pub format_version: u32,
}

/// Whether to take a journal whose writer lease is still live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Takeover {
    /// Refuse with [`JournalError::Leased`] while the lease is live.
    #[default]
    Refuse,
    /// Take it at once: the holder is fenced off (its next append fails).
    Steal,
}

/// Who holds a journal for writing, as its lease says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holder's name: `host:pid`.
    pub name: String,
    /// The holder's pid, when it is on this host.
    pub pid: Option<u32>,
    /// The epoch the holder took the journal with.
    pub epoch: u64,
    /// Milliseconds until the lease expires unless renewed; 0 or less: expired.
    pub expires_in_ms: i64,
}

impl Holder {
    /// Whether the lease is still live.
    pub fn live(&self) -> bool {
        self.expires_in_ms > 0
    }
}

/// A journal taken for writing: what [`RecordStore::take`] gives.
pub struct Taken {
    /// Stores the journal's records from now on.
    pub writer: Box<dyn RecordWriter>,
    /// The journal's identity; `None` when it has no records and no identity yet (the caller
    /// sets it with [`RecordWriter::create`] before the first append).
    pub meta: Option<JournalMeta>,
    /// The epoch this writer holds the journal with.
    pub epoch: u64,
    /// The holder whose live lease was stolen, if one was.
    pub stolen_from: Option<Holder>,
}

impl fmt::Debug for Taken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Taken")
            .field("meta", &self.meta)
            .field("epoch", &self.epoch)
            .field("stolen_from", &self.stolen_from)
            .finish_non_exhaustive()
    }
}

/// One stored record, as a reader gets it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The record's seq.
    pub seq: u64,
    /// The CRC-32 of its frame (length, seq and payload), as the writer computed it.
    pub crc: u32,
    /// The payload's bytes.
    pub payload: Vec<u8>,
}

/// One record to store, borrowed from the writer's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef<'a> {
    /// The record's seq.
    pub seq: u64,
    /// The CRC-32 of its frame (length, seq and payload).
    pub crc: u32,
    /// The payload's bytes.
    pub payload: &'a [u8],
}

/// A journal's identity and its rows, as [`RecordStore::rows`] opens them.
pub type OpenedRows = (JournalMeta, Box<dyn RowSource>);

/// A journal kept as rows. One value names one journal (one session) in one store.
pub trait RecordStore: Send + Sync + fmt::Debug {
    /// Where the journal lives, for messages: a URL without its password.
    fn location(&self) -> String;
    /// Makes the caller the journal's writer: creates the journal when there is none, bumps its
    /// epoch and takes its lease, in one transaction. A live lease held by another writer is
    /// [`JournalError::Leased`] unless `takeover` is [`Takeover::Steal`].
    fn take(&self, takeover: Takeover) -> Result<Taken, JournalError>;
    /// The journal's identity and its records in seq order, from seq 1; `None` when the store
    /// holds no journal under this name. Takes no lease: a live journal can be read.
    fn rows(&self) -> Result<Option<OpenedRows>, JournalError>;
    /// Who holds the journal for writing; `None` when nobody has, or its holder closed it.
    /// An expired lease is returned too ([`Holder::live`] says which).
    fn holder(&self) -> Result<Option<Holder>, JournalError>;
}

/// The writer's side of a taken journal.
pub trait RecordWriter: Send {
    /// Sets the journal's identity; called once, before the first append of a new journal.
    fn create(&mut self, meta: JournalMeta) -> Result<(), JournalError>;
    /// Stores `rows` in one transaction that first checks this writer's epoch; with `durable`
    /// the commit waits for the store's log flush. The rows' seqs run on, one by one, from the
    /// last stored. `Ok` means every row is stored; an error means none is, or that it could
    /// not be told (then the journal stops and recovery reads what is there). Never stores a
    /// row twice, and never assumes an unknown outcome. An empty `rows` with `durable` still
    /// commits durably (the lease renewal): rows stored earlier without `durable` become
    /// durable with it, as an fdatasync makes earlier unsynced writes durable.
    fn append(&mut self, rows: &[RowRef<'_>], durable: bool) -> Result<(), JournalError>;
    /// Gives the lease up: a clean close. The journal stays.
    fn release(&mut self) -> Result<(), JournalError>;
}

/// Rows read back in seq order.
pub trait RowSource: Send {
    /// The next row, or `None` after the last.
    fn next_row(&mut self) -> Result<Option<Row>, JournalError>;
}
