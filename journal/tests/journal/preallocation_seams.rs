//! Preallocated segments where users meet them: a reader beside a live writer, pages of an
//! unsynced batch reaching the disk out of order, a panic mid-write, an absurd preallocation.
//! Each was a defect found in review, with the test written first.

use crate::common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tooljournal_journal::storage::{ReadAt, WriteFile};
use tooljournal_journal::{
    FsyncPolicy, Journal, JournalError, Options, ReadEnd, Reader, SimStorage, Storage,
};

/// A live reader (no lock, "sees whatever has been written so far") of a healthy version-2
/// journal whose preallocated region is larger than the reader's 1 MiB window. The reader's
/// window holds zeros where the writer has since written records; `nonzero_end` re-reads the
/// file from there, finds the new records, and the tail scan then finds a valid frame after the
/// stale zeros: the healthy journal is called corrupt. With the default 1 MiB preallocation the
/// same happens once a segment passes about 1 MiB (its zero region then reaches past the window).
#[test]
fn a_live_reader_never_calls_a_healthy_v2_journal_corrupt() {
    let storage = SimStorage::new();
    let opts = Options {
        preallocate_bytes: 2 << 20,
        ..Options::default()
    };
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).expect("open");
    for seq in 1..=3 {
        journal.append(&payload(seq, 100)).expect("append");
    }
    journal.sync_through_blocking(3).expect("sync");

    let mut reader = Reader::open(Arc::new(storage.clone()), opts.limits).expect("reader");
    for seq in 1..=3 {
        let record = reader.next().expect("a record").expect("io");
        assert_eq!(record.seq, seq);
    }
    // The writer goes on while the reader is open: records over the zeros it already read.
    for seq in 4..=5 {
        journal.append(&payload(seq, 100)).expect("append");
    }
    journal.sync_through_blocking(5).expect("sync");

    let rest: Vec<u64> = reader.by_ref().map(|r| r.expect("io").seq).collect();
    let end = reader.end().cloned().expect("end");
    assert!(
        !matches!(end, ReadEnd::Corrupt(_)),
        "a healthy live journal read as corrupt: {end:?} (records after the first three: {rest:?})"
    );
    journal.close().expect("close");
}

/// A power loss while a group commit's fdatasync is in flight. In version 2 the records
/// overwrite preallocated blocks in place, which nothing orders: the disk may complete the page
/// holding a later record before the page holding the first unsynced one (ext4's ordered mode
/// orders appends through the size update, not overwrites). No record past the last completed
/// sync was acknowledged, yet the writer refuses to reopen the journal (corruption, exit 2),
/// where version 1 on the same file system finds a clean prefix.
#[test]
fn pages_of_an_unsynced_batch_persisting_out_of_order_do_not_block_reopening() {
    let storage = SimStorage::new();
    let opts = Options {
        fsync: FsyncPolicy::Group,
        ..Options::default()
    };
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).expect("open");
    for seq in 1..=10 {
        journal.append(&payload(seq, 100)).expect("append");
    }
    journal.sync_through_blocking(10).expect("sync");
    // A batch the next leader writes (the sync that would follow never completes).
    for seq in 11..=200 {
        journal.append(&payload(seq, 100)).expect("append");
    }
    drop(journal); // hands the batch to the "page cache", no sync
    let crashed = storage.process_crash();

    // Where the first unsynced record starts, and the page boundary after it.
    let (records, _) = read_all(&crashed, opts);
    let first_unsynced = records.iter().find(|r| r.seq == 11).expect("seq 11");
    let name = tooljournal_journal::segment::file_name(0);
    let mut bytes = crashed.read_file(&name).expect("segment 0");
    let from = first_unsynced.position.offset as usize;
    let page_end = from.next_multiple_of(4096);
    // That page never reached the disk: its unsynced bytes read back as before (zeros); the
    // pages after it did.
    bytes[from..page_end].fill(0);
    crashed.put_file(&name, bytes);

    let reopened = Journal::open(Arc::new(crashed.clone()), opts);
    match reopened {
        Ok((journal, report)) => {
            assert!(report.next_seq >= 11, "durable records lost: {report:?}");
            journal.close().expect("close");
        }
        Err(e) => panic!("a plain power loss mid-sync left a journal that cannot reopen: {e}"),
    }
}

/// A storage whose first write after `armed` is set panics (a bug in a storage, an assertion
/// inside the write path): a stand-in for any panic between `take` and the end of a write.
#[derive(Debug, Clone)]
struct PanickingStorage {
    inner: SimStorage,
    armed: Arc<AtomicBool>,
}

struct PanickingFile {
    inner: Box<dyn WriteFile>,
    armed: Arc<AtomicBool>,
}

impl WriteFile for PanickingFile {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> std::io::Result<usize> {
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("injected panic in write_at");
        }
        self.inner.write_at(offset, buf)
    }
    fn sync_data(&mut self) -> std::io::Result<()> {
        self.inner.sync_data()
    }
    fn truncate(&mut self, len_bytes: u64) -> std::io::Result<()> {
        self.inner.truncate(len_bytes)
    }
    fn len_bytes(&self) -> std::io::Result<u64> {
        self.inner.len_bytes()
    }
}

impl PanickingStorage {
    fn wrap(&self, inner: Box<dyn WriteFile>) -> Box<dyn WriteFile> {
        Box::new(PanickingFile {
            inner,
            armed: self.armed.clone(),
        })
    }
}

impl Storage for PanickingStorage {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        self.inner.list()
    }
    fn open_read(&self, name: &str) -> std::io::Result<Box<dyn ReadAt>> {
        self.inner.open_read(name)
    }
    fn create_new(&self, name: &str) -> std::io::Result<Box<dyn WriteFile>> {
        Ok(self.wrap(self.inner.create_new(name)?))
    }
    fn open_write(&self, name: &str) -> std::io::Result<Box<dyn WriteFile>> {
        Ok(self.wrap(self.inner.open_write(name)?))
    }
    fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, name: &str) -> std::io::Result<()> {
        self.inner.remove(name)
    }
    fn sync_dir(&self) -> std::io::Result<()> {
        self.inner.sync_dir()
    }
    fn try_lock(&self) -> std::io::Result<Option<Box<dyn std::any::Any + Send + Sync>>> {
        self.inner.try_lock()
    }
    fn blocks(&self) -> bool {
        false
    }
}

/// Fail-stop after a panic mid-write: the batch taken from the appenders is gone, the journal
/// is not poisoned, and the next sync writes the following records where the lost ones belong
/// and reports them durable. The journal on disk then has a seq gap (corruption) behind an
/// acknowledged record. (Not new in this change, but the write path it touches.)
#[test]
fn a_panic_while_writing_stops_the_journal() {
    let sim = SimStorage::new();
    let storage = PanickingStorage {
        inner: sim.clone(),
        armed: Arc::new(AtomicBool::new(false)),
    };
    let opts = Options::default();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).expect("open");
    journal.append(&payload(1, 100)).expect("append");
    storage.armed.store(true, Ordering::SeqCst);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        journal.sync_through_blocking(1)
    }));
    assert!(panicked.is_err(), "the injected panic did not fire");

    let after = journal
        .append(&payload(2, 100))
        .and_then(|seq| journal.sync_through_blocking(seq));
    match after {
        Err(JournalError::Poisoned(_)) => {}
        Err(other) => panic!("unexpected error: {other}"),
        Ok(()) => {
            // Acknowledged durable: then the journal must read back clean with it.
            let (records, end) = read_all(&sim, opts);
            let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
            assert_eq!(
                (end.clone(), seqs.clone()),
                (ReadEnd::Clean, vec![1, 2]),
                "seq 2 acknowledged durable, journal reads {end:?} with {seqs:?}"
            );
        }
    }
}

/// `preallocate_bytes` as "as far as the segment limit goes" (u64::MAX): `first_filled_end`
/// adds it to the header size and `zeros_to_add` to the records' end, which overflows (a panic
/// with overflow checks, as in the tests and the fuzz campaign; a wrap to no zeros in release).
#[test]
fn preallocating_to_the_segment_limit_does_not_overflow() {
    let storage = SimStorage::new();
    let opts = Options {
        preallocate_bytes: u64::MAX,
        ..small_limits(1 << 16)
    };
    let opened = std::panic::catch_unwind(|| {
        let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).expect("open");
        journal.append(&payload(1, 100)).expect("append");
        journal.sync_through_blocking(1).expect("sync");
        journal.close().expect("close")
    });
    assert_eq!(
        opened.ok(),
        Some(1),
        "open/append with preallocate_bytes = u64::MAX"
    );
}
