//! The writer: append, group commit and fail-stop. Its rooms: the live segment file, rotation
//! and the zeros ahead (`segment_file`), reopening after a crash (`reopen`), the lead and where
//! the leader syncs (`lead`, `leader`), syncs shared between journals (`shared_sync`, `pace`),
//! a record store's rows (`rows`).
//!
//! Why it is shaped this way (DESIGN.md §8): an fsync costs milliseconds, so the number of them
//! decides the runtime's speed. `append` only encodes into a memory buffer and hands out the
//! next seq. `sync_through(seq)` lets one caller at a time lead (a flag, not an async lock, so
//! no await ever holds it); the leader takes everything appended so far, writes it, and
//! fdatasyncs once (on its own thread, or the blocking pool when another journal's leader
//! already blocks a worker); callers that waited for it usually find their seq already durable
//! and return without touching the disk.
//!
//! Preallocation (format version 2): the live segment is kept zero-filled ahead of its records
//! (`Options::preallocate_bytes`), the zeros written in the same `pwrite` as the records that
//! pass the filled end, so most syncs overwrite written blocks and leave the file's size alone:
//! an fdatasync that then writes data only, no file system metadata. Zeros are cut off before a
//! segment is sealed and on `close`.
//!
//! Fail-stop (DESIGN.md I10): after a failed write or fsync the file's state is unknown (Linux
//! may drop the dirty pages and report success on a retry), so the first failure poisons the
//! journal and every later call returns it. Nothing is retried.

use crate::codec::{self, Encoding};
use crate::error::JournalError;
use crate::framing::{self, SEQ_BYTES};
use crate::reader::{ReadEnd, TornTail};
use crate::records::{Holder, RecordStore, Taken, Takeover};
use crate::segment::{self, SegmentHeader, HEADER_BYTES};
use crate::storage::Storage;
use crate::{Backend, FsyncPolicy, Options};
use serde::Serialize;
use std::any::Any;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

mod lead;
mod leader;
mod pace;
mod reopen;
mod rows;
mod segment_file;
mod shared_sync;
use lead::{Leader, Leading};
use reopen::{
    continue_segment, create_first_segment, quarantine_and_cut, read_tail, remove_temp_segments,
};
use rows::RowsIo;
use segment_file::{create_segment, first_filled_end, live_segment, FileIo};
use shared_sync::Group;
pub use shared_sync::{shared_sync_stats, SharedSyncStats};

/// Largest write buffer kept for reuse after a flush.
const SPARE_BYTES_MAX: usize = 1 << 20;

/// What opening a journal for append found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// The journal was empty and a first segment was created.
    pub created: bool,
    /// A torn tail that was quarantined and then cut off before appending.
    pub torn: Option<TornTail>,
    /// The file the torn bytes were copied to, beside the segment.
    pub quarantine_file: Option<String>,
    /// The seq the next append gets.
    pub next_seq: u64,
}

/// Counters, for tests and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalStats {
    /// The last seq handed out by `append` (0 before the first).
    pub appended_seq: u64,
    /// Every record up to this seq is durable.
    pub durable_seq: u64,
    /// fdatasyncs this writer has issued.
    pub syncs: u64,
}

/// A journal open for appending. One writer per directory: it holds the directory's lock until
/// it is dropped.
pub struct Journal {
    shared: Arc<Shared>,
}

struct Shared {
    backend: Backend,
    options: Options,
    journal_id: [u8; 16],
    state: Mutex<State>,
    io: Mutex<Io>,
    durable_seq: AtomicU64,
    syncs: AtomicU64,
    poison: OnceLock<Arc<JournalError>>,
    /// Whether a caller is writing and syncing for everyone (see [`Leader`]).
    leading: Mutex<Leading>,
    /// Blocking callers wait here for the leader to finish.
    leader_done: Condvar,
    /// Async callers wait here for the leader to finish.
    leader_released: tokio::sync::Notify,
    /// The journals this one shares its syncs with, when it may (`shared_sync`).
    sync_group: Option<Arc<Group>>,
    _lock: Box<dyn Any + Send + Sync>,
}

/// The appenders' side: records encoded but not yet handed to the file.
struct State {
    next_seq: u64,
    /// Oldest first, never empty; a chunk that starts a segment carries that segment's header.
    chunks: Vec<Chunk>,
    pending_bytes: usize,
    /// A written chunk's buffer, emptied, for the next `take` (no allocation per flush).
    spare: Vec<u8>,
    /// The segment the next record goes to, its length counting pending bytes, its records.
    segment: u64,
    segment_len_bytes: u64,
    segment_records: u64,
    /// The journal's format version, kept from its creation: new segments get it and payloads
    /// are encoded by it, so a reopened version-1 journal stays version 1.
    format_version: u32,
}

struct Chunk {
    starts_segment: Option<SegmentHeader>,
    bytes: Vec<u8>,
}

impl Drop for WriterLock {
    /// A lock dropped unopened gives a record store's lease up, as a directory's lock is
    /// released (a journal refused as corrupt, a caller that only looked).
    fn drop(&mut self) {
        if let Some(Held::Records { mut taken, .. }) = self.held.take() {
            let _ = taken.writer.release();
        }
    }
}

/// Where batches go; held while writing and syncing so batches arrive in seq order.
enum Io {
    /// A segment file, and the directory it is in (for the next segment).
    File {
        io: FileIo,
        storage: Arc<dyn Storage>,
    },
    /// A record store's writer.
    Rows(RowsIo),
}

impl Io {
    /// What an error names as the file written: the live segment, or nothing for rows.
    fn file_name(&self) -> String {
        match self {
            Io::File { io, .. } => segment::file_name(io.segment),
            Io::Rows(_) => String::new(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these leaves no half-done file operation behind (the state
    // is only swapped, never partly updated), so the data is still consistent.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Journal {
    /// Opens the journal in `storage` for appending, creating it if the directory holds none.
    ///
    /// Takes the directory's writer lock (a second writer gets [`JournalError::Locked`]),
    /// removes temporary segments left by a crash mid-rotation, and reads the last segment to
    /// find where to continue. A torn tail is copied to a quarantine file beside its segment,
    /// then cut off, so new records never land behind a torn one. Corruption is never cut off:
    /// it is returned as [`JournalError::Corrupt`]. [`Journal::lock`] then
    /// [`WriterLock::open`] do the same in two steps.
    pub fn open(
        storage: Arc<dyn Storage>,
        options: Options,
    ) -> Result<(Journal, OpenReport), JournalError> {
        Journal::lock(storage)?.open(options)
    }

    /// Takes the directory's writer lock and changes nothing else: between this and
    /// [`WriterLock::open`] no other writer can start, so a caller can read the whole journal
    /// and decide not to touch it (a corrupt one, say) before anything is removed or cut.
    /// A second writer gets [`JournalError::Locked`].
    pub fn lock(storage: Arc<dyn Storage>) -> Result<WriterLock, JournalError> {
        let guard = storage
            .try_lock()
            .map_err(|source| JournalError::Io {
                location: storage.location(),
                op: "lock",
                file: "LOCK".into(),
                source,
            })?
            .ok_or_else(|| JournalError::Locked {
                location: storage.location(),
                holder_pid: storage.lock_holder_pid(),
            })?;
        Ok(WriterLock {
            held: Some(Held::Files { storage, guard }),
        })
    }

    /// Takes the journal in `backend` for writing and changes nothing else: a directory's
    /// writer lock, or a record store's epoch and lease (see `records.rs`). A live holder gets
    /// [`JournalError::Locked`] (files) or [`JournalError::Leased`] (a record store, unless
    /// `takeover` steals; a directory's lock cannot be stolen).
    pub fn lock_backend(backend: &Backend, takeover: Takeover) -> Result<WriterLock, JournalError> {
        match backend {
            Backend::Files(storage) => Journal::lock(storage.clone()),
            Backend::Records(store) => {
                let taken = store.take(takeover)?;
                Ok(WriterLock {
                    held: Some(Held::Records {
                        store: store.clone(),
                        taken,
                    }),
                })
            }
        }
    }

    /// [`Journal::lock_backend`] then [`WriterLock::open`].
    pub fn open_backend(
        backend: &Backend,
        takeover: Takeover,
        options: Options,
    ) -> Result<(Journal, OpenReport), JournalError> {
        Journal::lock_backend(backend, takeover)?.open(options)
    }
}

/// A journal directory whose writer lock is held and which is otherwise untouched: what
/// [`Journal::lock`] gives. Dropping it releases the lock.
pub struct WriterLock {
    /// `None` once `open` took it.
    held: Option<Held>,
}

enum Held {
    Files {
        storage: Arc<dyn Storage>,
        guard: Box<dyn Any + Send + Sync>,
    },
    Records {
        store: Arc<dyn RecordStore>,
        taken: Taken,
    },
}

impl WriterLock {
    /// The live holder this lock was stolen from (a record store taken with
    /// [`Takeover::Steal`]); what the caller journals about the takeover.
    pub fn stolen_from(&self) -> Option<&Holder> {
        match &self.held {
            Some(Held::Records { taken, .. }) => taken.stolen_from.as_ref(),
            _ => None,
        }
    }

    /// The fencing epoch this writer holds a record store's journal with; `None` for files.
    pub fn epoch(&self) -> Option<u64> {
        match &self.held {
            Some(Held::Records { taken, .. }) => Some(taken.epoch),
            _ => None,
        }
    }

    /// [`Journal::open`] under this lock: removes temporary segments, quarantines and cuts a
    /// torn tail, and opens the journal for appending (creating it if there is none).
    pub fn open(mut self, options: Options) -> Result<(Journal, OpenReport), JournalError> {
        let (storage, guard) = match self.held.take() {
            Some(Held::Files { storage, guard }) => (storage, guard),
            Some(Held::Records { store, taken }) => return rows::open(store, taken, options),
            // `open` consumes the lock: `held` is only ever taken here.
            None => unreachable!("a WriterLock is opened once"),
        };
        assert!(
            options.limits.record_size_bytes_max as usize >= SEQ_BYTES,
            "record size limit below the size of a seq"
        );
        remove_temp_segments(storage.as_ref())?;
        let (end, tail) = read_tail(&storage, &options)?;

        let mut report = OpenReport {
            created: false,
            torn: None,
            quarantine_file: None,
            next_seq: 1,
        };
        match end {
            ReadEnd::Clean => {}
            ReadEnd::Corrupt(corruption) => {
                return Err(JournalError::Corrupt {
                    location: storage.location(),
                    corruption,
                })
            }
            ReadEnd::TornTail(torn) => {
                report.quarantine_file = Some(quarantine_and_cut(storage.as_ref(), &torn)?);
                report.torn = Some(torn);
            }
        }

        let (journal_id, io, state) = match tail {
            Some(tail) => continue_segment(storage.as_ref(), &tail, &options)?,
            None => {
                report.created = true;
                create_first_segment(storage.as_ref(), &options)?
            }
        };
        report.next_seq = state.next_seq;
        let io = Io::File {
            io,
            storage: storage.clone(),
        };
        let journal = Journal::assemble(storage.into(), options, journal_id, io, state, guard);
        Ok((journal, report))
    }
}

impl Journal {
    /// Puts an opened journal together: everything before `state.next_seq` is already durable
    /// (it was read back from, or never written to, the disk), and no sync has run yet.
    fn assemble(
        backend: Backend,
        options: Options,
        journal_id: [u8; 16],
        io: Io,
        state: State,
        guard: Box<dyn Any + Send + Sync>,
    ) -> Journal {
        let durable = state.next_seq - 1;
        let sync_group = match &backend {
            Backend::Files(storage)
                if options.share_syncs && options.fsync == FsyncPolicy::Group =>
            {
                storage.file_system().map(Group::of)
            }
            _ => None,
        };
        Journal {
            shared: Arc::new(Shared {
                backend,
                options,
                journal_id,
                state: Mutex::new(state),
                io: Mutex::new(io),
                durable_seq: AtomicU64::new(durable),
                syncs: AtomicU64::new(0),
                poison: OnceLock::new(),
                leading: Mutex::new(Leading::default()),
                leader_done: Condvar::new(),
                leader_released: tokio::sync::Notify::new(),
                sync_group,
                _lock: guard,
            }),
        }
    }
}

impl Journal {
    /// Appends one record and returns its seq. Does not wait for the disk unless the policy is
    /// [`FsyncPolicy::Always`] (then it writes and syncs before returning, blocking the thread).
    pub fn append<T: Serialize + ?Sized>(&self, value: &T) -> Result<u64, JournalError> {
        let shared = &self.shared;
        shared.check_poison()?;
        let (seq, flush) = {
            let mut st = lock(&shared.state);
            st.push(value, &shared.options, shared.journal_id)?
        };
        match shared.options.fsync {
            FsyncPolicy::Always => shared.flush(true)?,
            _ if flush => shared.flush(false)?,
            _ => {}
        }
        Ok(seq)
    }

    /// Resolves when every record up to `seq` is durable. Callers waiting at the same time share
    /// one fdatasync: the first becomes the leader and syncs on its own thread (nothing to hand
    /// over, no thread to wake); the others wait until it is done and usually find their seq
    /// durable. On a current-thread runtime the leader's write and sync run on the blocking
    /// pool instead, so the one thread keeps serving other tasks. Under
    /// [`FsyncPolicy::Never`] there is nothing to wait for: the bytes go to the OS inline.
    pub async fn sync_through(&self, seq: u64) -> Result<(), JournalError> {
        let shared = &self.shared;
        shared.check_poison()?;
        if shared.durable_seq() >= seq {
            return Ok(());
        }
        shared.check_appended(seq)?;
        if shared.options.fsync == FsyncPolicy::Never {
            // A write(2), no sync: the io lock keeps batches in seq order.
            return shared.flush(true);
        }
        loop {
            // Created before the checks: it sees every release that happens after this line.
            let released = shared.leader_released.notified();
            shared.check_poison()?;
            if shared.durable_seq() >= seq {
                return Ok(());
            }
            if let Some(leader) = Leader::try_new(shared) {
                match leader.sync(shared).await {
                    Some(result) => return result,
                    // The shared sync's thread stopped with the lead: lead again.
                    None => continue,
                }
            }
            released.await;
        }
    }

    /// [`Journal::sync_through`] for code outside an async runtime. Must not be called from
    /// async code (it blocks the thread).
    pub fn sync_through_blocking(&self, seq: u64) -> Result<(), JournalError> {
        let shared = &self.shared;
        shared.check_poison()?;
        if shared.durable_seq() >= seq {
            return Ok(());
        }
        shared.check_appended(seq)?;
        let mut leading = lock(&shared.leading);
        while leading.now {
            leading.blocked += 1;
            leading = shared
                .leader_done
                .wait(leading)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            leading.blocked -= 1;
        }
        leading.now = true;
        drop(leading);
        let leader = Leader {
            shared: shared.clone(),
        };
        shared.check_poison()?;
        if shared.durable_seq() >= seq {
            return Ok(());
        }
        let result = shared.flush(true);
        drop(leader);
        result
    }

    /// Makes everything appended so far durable (per the policy), cuts the zeros written ahead
    /// of the records off the last segment, and releases the lock. Returns the last appended seq.
    pub fn close(self) -> Result<u64, JournalError> {
        let last = self.finish()?;
        self.shared.release()?;
        Ok(last)
    }

    /// What `close` does to the file, for a journal others still hold (a session's log is
    /// shared with its watchers): everything appended made durable and the zeros written ahead
    /// cut, so the journal ends at its last record. The lock stays held until the last holder
    /// drops the journal; an append after this writes zeros ahead again, as any append does.
    pub fn finish(&self) -> Result<u64, JournalError> {
        self.shared.check_poison()?;
        self.shared.flush(true)?;
        self.shared.trim()?;
        Ok(self.stats().appended_seq)
    }

    /// The last appended seq, the last durable seq, and the number of syncs so far.
    pub fn stats(&self) -> JournalStats {
        let shared = &self.shared;
        JournalStats {
            appended_seq: lock(&shared.state).next_seq - 1,
            durable_seq: shared.durable_seq(),
            syncs: shared.syncs.load(Ordering::Acquire),
        }
    }

    /// The error that stopped this journal, if one did.
    pub fn poisoned(&self) -> Option<Arc<JournalError>> {
        self.shared.poison.get().cloned()
    }

    /// The journal's id, written in every segment header.
    pub fn journal_id(&self) -> [u8; 16] {
        self.shared.journal_id
    }

    /// Where the journal lives (a path), for messages.
    pub fn location(&self) -> String {
        self.shared.backend.location()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Hand buffered records to the OS so that they survive this process; no sync (a clean
        // shutdown calls `close`). Errors here have no one to go to and poison nothing new.
        if self.shared.poison.get().is_none() {
            let _ = self.shared.flush(false);
        }
        // A record store's lease is given up as a directory's lock is released when its writer
        // goes: a writer dropped in a live process is done, stopped by an error or not. (A
        // fenced one holds no lease; a killed process never gets here: its lease expires.)
        let fenced = matches!(
            self.shared.poison.get().map(|e| e.root()),
            Some(JournalError::Fenced { .. })
        );
        if let (Io::Rows(rows), false) = (&mut *lock(&self.shared.io), fenced) {
            let _ = rows.release();
        }
    }
}

impl State {
    fn new(
        next_seq: u64,
        segment: u64,
        segment_len_bytes: u64,
        segment_records: u64,
        format_version: u32,
    ) -> State {
        State {
            next_seq,
            chunks: vec![Chunk {
                starts_segment: None,
                bytes: Vec::new(),
            }],
            pending_bytes: 0,
            spare: Vec::new(),
            segment,
            segment_len_bytes,
            segment_records,
            format_version,
        }
    }

    /// The payload encoding of the journal's format version.
    fn encoding(&self) -> Encoding {
        // Only versions the reader accepted, or the current one, ever get here.
        Encoding::of_format(self.format_version).unwrap_or(Encoding::Varint)
    }

    /// Encodes `value` as the next record. Returns its seq and whether the buffer is full.
    fn push<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        options: &Options,
        journal_id: [u8; 16],
    ) -> Result<(u64, bool), JournalError> {
        let limits = options.limits;
        let seq = self.next_seq;
        let encoding = self.encoding();
        // Cannot fail: `chunks` starts with one chunk and is never emptied.
        #[allow(clippy::expect_used)]
        let chunk = self.chunks.last_mut().expect("chunks is never empty");
        let start = framing::begin(&mut chunk.bytes, seq);
        let payload_max = u64::from(limits.record_size_bytes_max) - SEQ_BYTES as u64;
        if let Err(e) = codec::encode_into(value, &mut chunk.bytes, payload_max, encoding) {
            chunk.bytes.truncate(start);
            return Err(if e.over_limit {
                JournalError::RecordTooLarge {
                    size_bytes: codec_size(value, encoding),
                    size_bytes_max: payload_max,
                }
            } else {
                JournalError::Encode(e)
            });
        }
        let frame_bytes = framing::seal(&mut chunk.bytes, start);
        if self.segment_records > 0
            && self.segment_len_bytes + frame_bytes > limits.segment_size_bytes_max
        {
            let bytes = chunk.bytes.split_off(start);
            self.segment += 1;
            self.segment_len_bytes = HEADER_BYTES as u64;
            self.segment_records = 0;
            self.chunks.push(Chunk {
                starts_segment: Some(SegmentHeader {
                    format_version: self.format_version,
                    journal_id,
                    segment_number: self.segment,
                    first_seq: seq,
                }),
                bytes,
            });
        }
        self.segment_len_bytes += frame_bytes;
        self.segment_records += 1;
        self.pending_bytes += frame_bytes as usize;
        self.next_seq += 1;
        Ok((seq, self.pending_bytes >= options.write_buffer_bytes_max))
    }

    /// Takes everything pending; returns it with the last seq it holds.
    fn take(&mut self) -> (Vec<Chunk>, u64) {
        let mut bytes = std::mem::take(&mut self.spare);
        bytes.reserve(self.pending_bytes.min(1 << 20));
        let fresh = vec![Chunk {
            starts_segment: None,
            bytes,
        }];
        self.pending_bytes = 0;
        (
            std::mem::replace(&mut self.chunks, fresh),
            self.next_seq - 1,
        )
    }

    /// Keeps a written chunk's buffer for reuse, unless it grew large (one big write should not
    /// pin its memory for the journal's lifetime).
    fn give_back(&mut self, mut bytes: Vec<u8>) {
        if bytes.capacity() <= SPARE_BYTES_MAX && bytes.capacity() > self.spare.capacity() {
            bytes.clear();
            self.spare = bytes;
        }
    }
}

/// The encoded size of a value that was over the limit, for the error message.
fn codec_size<T: Serialize + ?Sized>(value: &T, encoding: Encoding) -> u64 {
    let mut buf = Vec::new();
    match codec::encode_into(value, &mut buf, u64::MAX, encoding) {
        Ok(()) => buf.len() as u64,
        Err(_) => u64::MAX,
    }
}

impl Shared {
    fn durable_seq(&self) -> u64 {
        self.durable_seq.load(Ordering::Acquire)
    }

    fn check_poison(&self) -> Result<(), JournalError> {
        match self.poison.get() {
            Some(cause) => Err(JournalError::Poisoned(cause.clone())),
            None => Ok(()),
        }
    }

    fn check_appended(&self, seq: u64) -> Result<(), JournalError> {
        let last = lock(&self.state).next_seq - 1;
        if seq > last {
            return Err(JournalError::NotAppended { seq, last });
        }
        Ok(())
    }

    /// Records `error` as the journal's fatal error (the first one wins) and returns it.
    fn poison(&self, error: JournalError) -> JournalError {
        let copy = match &error {
            JournalError::Io {
                location,
                op,
                file,
                source,
            } => JournalError::Io {
                location: location.clone(),
                op,
                file: file.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            JournalError::Fenced { location, epoch } => JournalError::Fenced {
                location: location.clone(),
                epoch: *epoch,
            },
            JournalError::Store {
                location,
                op,
                message,
            } => JournalError::Store {
                location: location.clone(),
                op,
                message: message.clone(),
            },
            other => JournalError::Io {
                location: self.backend.location(),
                op: "write",
                file: String::new(),
                source: io::Error::other(other.to_string()),
            },
        };
        let _ = self.poison.set(Arc::new(copy));
        error
    }

    /// Writes everything pending to the file; with `sync`, makes it durable too (per policy).
    fn flush(&self, sync: bool) -> Result<(), JournalError> {
        self.write_through(sync).map(|_| ())
    }

    /// [`Shared::flush`], returning the last seq written and whether everything written lies
    /// where a shared sync may make it durable ([`FileIo::data_only`]).
    fn write_through(&self, sync: bool) -> Result<(u64, bool), JournalError> {
        let mut io = lock(&self.io);
        self.check_poison()?;
        let (mut chunks, last_seq) = lock(&self.state).take();
        let fsync = sync && self.options.fsync != FsyncPolicy::Never;
        // The records are out of the buffer now: a panic before they are written must stop the
        // journal, or the next flush would write later seqs where these belong.
        let unwinding = PoisonOnUnwind(self);
        let written = match &mut *io {
            Io::File { io, storage } => self.write_out(storage.as_ref(), io, &mut chunks, fsync),
            Io::Rows(rows) => rows.store(&chunks, fsync).map(|committed_durably| {
                if committed_durably {
                    self.syncs.fetch_add(1, Ordering::AcqRel);
                }
            }),
        };
        std::mem::forget(unwinding);
        match written {
            Ok(()) => {
                if sync {
                    let before = self.durable_seq.fetch_max(last_seq, Ordering::AcqRel);
                    // Only flush publishes durability, under the io lock, from a later take.
                    debug_assert!(before <= last_seq, "durable seq went backwards");
                }
                if let Some(chunk) = chunks.pop() {
                    lock(&self.state).give_back(chunk.bytes);
                }
                let data_only = match &*io {
                    Io::File { io, .. } => io.data_only(),
                    Io::Rows(_) => false,
                };
                Ok((last_seq, data_only))
            }
            Err(e) => Err(self.poison(e)),
        }
    }

    /// After a shared `syncfs` that succeeded: checks this journal's own file for a failed
    /// write-back, and if there was none makes everything through `through_seq` (written
    /// before the `syncfs` began) durable. `Ok(false)`: the file cannot check, nothing
    /// changed, the journal must sync on its own.
    fn finish_shared_sync(&self, through_seq: u64) -> Result<bool, JournalError> {
        let mut io = lock(&self.io);
        self.check_poison()?;
        let (checked, location, segment) = match &mut *io {
            Io::File { io, storage } => (io.file.check_written(), storage.location(), io.segment),
            Io::Rows(_) => return Ok(false),
        };
        match checked {
            Ok(()) => {
                self.syncs.fetch_add(1, Ordering::AcqRel);
                self.durable_seq.fetch_max(through_seq, Ordering::AcqRel);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok(false),
            Err(source) => Err(self.poison(JournalError::Io {
                location,
                op: "sync",
                file: segment::file_name(segment),
                source,
            })),
        }
    }

    /// Cuts the zeros written ahead off the segment, durably (a journal closed cleanly after
    /// appending ends at its last record, as one of version 1 does). A record store has none.
    fn trim(&self) -> Result<(), JournalError> {
        let mut io = lock(&self.io);
        self.check_poison()?;
        let sync = self.options.fsync != FsyncPolicy::Never;
        let trimmed = match &mut *io {
            Io::File { io, storage } => io.trim(storage.as_ref(), sync),
            Io::Rows(_) => Ok(()),
        };
        trimmed.map_err(|e| self.poison(e))
    }

    /// Ends the writer's work at `close`: a record store's lease is given up (a directory's
    /// lock goes with the journal).
    fn release(&self) -> Result<(), JournalError> {
        let mut io = lock(&self.io);
        self.check_poison()?;
        let released = match &mut *io {
            Io::File { .. } => Ok(()),
            Io::Rows(rows) => rows.release(),
        };
        released.map_err(|e| self.poison(e))
    }
}

/// Poisons the journal when dropped, which only happens when a write panics (a normal return
/// forgets it).
struct PoisonOnUnwind<'a>(&'a Shared);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        let _ = self.0.poison(JournalError::Io {
            location: self.0.backend.location(),
            op: "write",
            file: String::new(),
            source: io::Error::other("a panic while writing: what reached the file is unknown"),
        });
    }
}
