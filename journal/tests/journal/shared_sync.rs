//! Syncs shared between journals (`writer/shared_sync.rs`, DESIGN.md I31): one `syncfs` makes
//! many journals durable, each journal's own write-back is checked, and whatever cannot be
//! proven durable that way is synced on its own or poisons the journal.
//!
//! The journals live in real directories on the machine's disk, behind a storage that counts
//! (and can fail) the file system's sync and each file's check, and that makes a file's own
//! fdatasync slow on demand so that another journal's sync is reliably in flight.

use crate::common::*;
use std::any::Any;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tooljournal_journal::storage::{FileSystem, ReadAt, WriteFile};
use tooljournal_journal::{FsStorage, Journal, JournalError, Options, Storage};

/// What the test controls and counts, shared by every file of one storage.
#[derive(Debug, Default)]
struct Knobs {
    /// `FileSystem::sync_all` calls, and whether they fail.
    syncfs: AtomicU64,
    syncfs_fails: AtomicBool,
    /// A `syncfs` takes this long (ms) before it runs.
    syncfs_ms: AtomicU64,
    /// `WriteFile::check_written` calls, and whether they report a failed write-back.
    checks: AtomicU64,
    check_fails: AtomicBool,
    /// A file's own fdatasync sleeps this long (ms), and says when one is under way.
    own_sync_ms: AtomicU64,
    own_sync_running: AtomicBool,
    /// A file's own fdatasyncs.
    own_syncs: AtomicU64,
    /// Neither the `syncfs` nor a file's fdatasync reaches the kernel: their time is the knobs'
    /// alone (for tests of which way is chosen, not of what is durable).
    timed_by_knobs_only: AtomicBool,
}

#[derive(Debug)]
struct TestFs {
    id: u64,
    real: Arc<dyn FileSystem>,
    knobs: Arc<Knobs>,
}

impl FileSystem for TestFs {
    fn id(&self) -> u64 {
        self.id
    }
    fn sync_all(&self) -> io::Result<()> {
        self.knobs.syncfs.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(
            self.knobs.syncfs_ms.load(Ordering::SeqCst),
        ));
        if self.knobs.syncfs_fails.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc_eio()));
        }
        if self.knobs.timed_by_knobs_only.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.real.sync_all()
    }
}

struct TestFile {
    inner: Box<dyn WriteFile>,
    knobs: Arc<Knobs>,
}

impl WriteFile for TestFile {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
        self.inner.write_at(offset, buf)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.knobs.own_syncs.fetch_add(1, Ordering::SeqCst);
        self.knobs.own_sync_running.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(
            self.knobs.own_sync_ms.load(Ordering::SeqCst),
        ));
        let synced = if self.knobs.timed_by_knobs_only.load(Ordering::SeqCst) {
            Ok(())
        } else {
            self.inner.sync_data()
        };
        self.knobs.own_sync_running.store(false, Ordering::SeqCst);
        synced
    }
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        self.inner.truncate(len_bytes)
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }
    fn check_written(&mut self) -> io::Result<()> {
        self.knobs.checks.fetch_add(1, Ordering::SeqCst);
        if self.knobs.check_fails.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc_eio()));
        }
        self.inner.check_written()
    }
}

/// EIO, as the kernel reports a failed write-back.
fn libc_eio() -> i32 {
    5
}

/// A journal directory on the real disk, with the knobs above.
#[derive(Debug)]
struct TestStorage {
    inner: FsStorage,
    fs: Arc<TestFs>,
    knobs: Arc<Knobs>,
}

impl TestStorage {
    /// A storage in `dir`, in a group of its own (`group` is its file system's id here).
    fn new(dir: &std::path::Path, group: u64, knobs: Arc<Knobs>) -> Arc<TestStorage> {
        let inner = FsStorage::create(dir).unwrap();
        let real = inner.file_system().expect(
            "the test directory is on ext2/3/4 on Linux 5.8+ (the only file systems that share)",
        );
        let fs = Arc::new(TestFs {
            id: group,
            real,
            knobs: knobs.clone(),
        });
        Arc::new(TestStorage { inner, fs, knobs })
    }

    fn wrap(&self, inner: Box<dyn WriteFile>) -> Box<dyn WriteFile> {
        Box::new(TestFile {
            inner,
            knobs: self.knobs.clone(),
        })
    }
}

impl Storage for TestStorage {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn open_read(&self, name: &str) -> io::Result<Box<dyn ReadAt>> {
        self.inner.open_read(name)
    }
    fn create_new(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        Ok(self.wrap(self.inner.create_new(name)?))
    }
    fn open_write(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        Ok(self.wrap(self.inner.open_write(name)?))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()
    }
    fn try_lock(&self) -> io::Result<Option<Box<dyn Any + Send + Sync>>> {
        self.inner.try_lock()
    }
    fn file_system(&self) -> Option<Arc<dyn FileSystem>> {
        Some(self.fs.clone())
    }
}

/// A group id no other test (nor a real file system's device number) uses.
fn fresh_group() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0xF00D_0000_0000_0000);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

fn open(storage: &Arc<TestStorage>, options: Options) -> Arc<Journal> {
    let (journal, _) = Journal::open(storage.clone(), options).unwrap();
    Arc::new(journal)
}

/// A journal that syncs on its own: the one whose slow sync is in flight while another asks
/// (were it to share, its own slow fdatasync would never run).
fn alone() -> Options {
    Options {
        share_syncs: false,
        ..Options::default()
    }
}

/// Appends one record to `journal` and waits until it is durable.
async fn append_durably(journal: &Journal, n: u64) -> Result<u64, JournalError> {
    let seq = journal.append(&payload(n, 100))?;
    journal.sync_through(seq).await?;
    Ok(seq)
}

/// Starts a durable append to `slow` whose own fdatasync takes 200 ms, and returns once that
/// sync is under way (later own syncs are quick again): another journal's sync is in flight.
async fn slow_sync_in_flight(
    slow: &Arc<Journal>,
    knobs: &Knobs,
    n: u64,
) -> tokio::task::JoinHandle<Result<u64, JournalError>> {
    knobs.own_sync_ms.store(200, Ordering::SeqCst);
    let slow_task = {
        let slow = slow.clone();
        tokio::spawn(async move { append_durably(&slow, n).await })
    };
    until_own_sync_runs(knobs).await;
    knobs.own_sync_ms.store(0, Ordering::SeqCst);
    slow_task
}

/// Waits (polling: the flag is set on a blocking thread) until a file's own sync is under way.
async fn until_own_sync_runs(knobs: &Knobs) {
    for _ in 0..2_000 {
        if knobs.own_sync_running.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("no journal's own sync started within 2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn journals_syncing_at_once_share_a_syncfs_and_every_record_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let knobs = Arc::new(Knobs::default());
    // A journal's own sync takes 5 ms, so the others always find one in flight and share.
    knobs.own_sync_ms.store(5, Ordering::SeqCst);
    let group = fresh_group();
    let (journals, rounds) = (12u64, 20u64);
    let storages: Vec<_> = (0..journals)
        .map(|j| TestStorage::new(&dir.path().join(format!("j{j}")), group, knobs.clone()))
        .collect();
    let opened: Vec<_> = storages
        .iter()
        .map(|s| open(s, Options::default()))
        .collect();
    let tasks: Vec<_> = opened
        .iter()
        .enumerate()
        .map(|(j, journal)| {
            let journal = journal.clone();
            tokio::spawn(async move {
                for r in 0..rounds {
                    let seq = append_durably(&journal, j as u64 * 1000 + r).await.unwrap();
                    assert!(journal.stats().durable_seq >= seq);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let (syncfs, checks) = (
        knobs.syncfs.load(Ordering::SeqCst),
        knobs.checks.load(Ordering::SeqCst),
    );
    assert!(syncfs > 0, "no sync was shared");
    // Every shared sync checked each journal it answered, and answered more than one at once.
    assert!(
        checks > syncfs,
        "{checks} journal checks for {syncfs} syncfs: no batch held two journals"
    );
    for (j, journal) in opened.into_iter().enumerate() {
        let stats = journal.stats();
        assert_eq!(stats.durable_seq, stats.appended_seq, "journal {j}");
        Arc::into_inner(journal).unwrap().close().unwrap();
    }
    for (j, storage) in storages.iter().enumerate() {
        let (records, _) = read_all(&Fs(storage.clone()), Options::default());
        let expected: Vec<_> = (0..rounds)
            .map(|r| payload(j as u64 * 1000 + r, 100))
            .collect();
        assert_eq!(payloads(&records), expected, "journal {j}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_syncfs_makes_nothing_durable_and_each_journal_syncs_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let knobs = Arc::new(Knobs::default());
    knobs.syncfs_fails.store(true, Ordering::SeqCst);
    let group = fresh_group();
    let slow = TestStorage::new(&dir.path().join("slow"), group, knobs.clone());
    let asker = TestStorage::new(&dir.path().join("asker"), group, knobs.clone());
    let (slow, asker) = (open(&slow, alone()), open(&asker, Options::default()));

    // The slow journal's own sync is in flight, so the asker shares, and the syncfs fails.
    let slow_task = slow_sync_in_flight(&slow, &knobs, 1).await;
    let seq = append_durably(&asker, 2).await.unwrap();

    assert!(
        knobs.syncfs.load(Ordering::SeqCst) >= 1,
        "the asker never shared"
    );
    // Nothing was checked after a failed syncfs: the asker's own fdatasync made it durable.
    assert_eq!(knobs.checks.load(Ordering::SeqCst), 0);
    assert_eq!(asker.stats().durable_seq, seq);
    assert!(asker.poisoned().is_none());
    slow_task.await.unwrap().unwrap();
    assert!(slow.poisoned().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_back_failure_found_after_a_shared_sync_stops_that_journal_only() {
    let dir = tempfile::tempdir().unwrap();
    let (good_knobs, bad_knobs) = (Arc::new(Knobs::default()), Arc::new(Knobs::default()));
    bad_knobs.check_fails.store(true, Ordering::SeqCst);
    let group = fresh_group();
    let slow = TestStorage::new(&dir.path().join("slow"), group, good_knobs.clone());
    let bad = TestStorage::new(&dir.path().join("bad"), group, bad_knobs.clone());
    let (slow, bad) = (open(&slow, alone()), open(&bad, Options::default()));

    let slow_task = slow_sync_in_flight(&slow, &good_knobs, 1).await;
    let durable_before = bad.stats().durable_seq;
    let failed = append_durably(&bad, 2).await.unwrap_err();

    assert_eq!(bad_knobs.checks.load(Ordering::SeqCst), 1);
    let root = failed.root();
    assert!(
        matches!(root, JournalError::Io { op: "sync", .. }),
        "{failed}"
    );
    assert!(failed.to_string().contains("sync"), "{failed}");
    // Fail-stop: nothing more is called durable, and every later call says why.
    assert_eq!(bad.stats().durable_seq, durable_before);
    assert!(bad.poisoned().is_some());
    assert!(bad.append(&payload(3, 10)).is_err());
    // The other journal is untouched.
    slow_task.await.unwrap().unwrap();
    assert!(slow.poisoned().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_that_grows_the_file_is_never_shared() {
    let dir = tempfile::tempdir().unwrap();
    let knobs = Arc::new(Knobs::default());
    let group = fresh_group();
    // Format version 1's appends change the file's size on every write.
    let options = Options {
        preallocate_bytes: 0,
        ..Options::default()
    };
    let slow = TestStorage::new(&dir.path().join("slow"), group, knobs.clone());
    let grows = TestStorage::new(&dir.path().join("grows"), group, knobs.clone());
    let (slow, grows) = (open(&slow, alone()), open(&grows, options));

    let slow_task = slow_sync_in_flight(&slow, &knobs, 1).await;
    let seq = append_durably(&grows, 2).await.unwrap();

    // Its own fdatasync made it durable; the group was never asked.
    assert_eq!(grows.stats().durable_seq, seq);
    assert_eq!(knobs.syncfs.load(Ordering::SeqCst), 0);
    assert_eq!(knobs.checks.load(Ordering::SeqCst), 0);
    slow_task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_journal_that_may_not_share_syncs_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let knobs = Arc::new(Knobs::default());
    let group = fresh_group();
    let no_sharing = alone();
    let slow = TestStorage::new(&dir.path().join("slow"), group, knobs.clone());
    let alone = TestStorage::new(&dir.path().join("alone"), group, knobs.clone());
    let (slow, alone) = (open(&slow, no_sharing), open(&alone, no_sharing));

    let slow_task = slow_sync_in_flight(&slow, &knobs, 1).await;
    let seq = append_durably(&alone, 2).await.unwrap();

    assert_eq!(alone.stats().durable_seq, seq);
    assert_eq!(knobs.syncfs.load(Ordering::SeqCst), 0);
    slow_task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_syncfs_pauses_sharing_and_the_next_sync_is_the_journal_s_own() {
    let dir = tempfile::tempdir().unwrap();
    let knobs = Arc::new(Knobs::default());
    // 60 ms: past the 50 ms that says the file system held much of others' data.
    knobs.syncfs_ms.store(60, Ordering::SeqCst);
    let group = fresh_group();
    let slow = TestStorage::new(&dir.path().join("slow"), group, knobs.clone());
    let asker = TestStorage::new(&dir.path().join("asker"), group, knobs.clone());
    let (slow, asker) = (open(&slow, alone()), open(&asker, Options::default()));

    for round in 0..2u64 {
        let slow_task = slow_sync_in_flight(&slow, &knobs, round * 10).await;
        let seq = append_durably(&asker, round * 10 + 1).await.unwrap();
        assert_eq!(asker.stats().durable_seq, seq, "round {round}");
        slow_task.await.unwrap().unwrap();
    }
    // The first round's syncfs was slow: the second asker was handed back, and synced alone.
    assert_eq!(knobs.syncfs.load(Ordering::SeqCst), 1);
    assert_eq!(knobs.checks.load(Ordering::SeqCst), 1);
}

/// `journals` journals of one group, each appending durably in a loop (resting `rest` after
/// each) from the moment they are open until `stop`; returns the tasks (each gives back how
/// many it made durable).
fn busy_journals(
    dir: &std::path::Path,
    knobs: &Arc<Knobs>,
    journals: u64,
    rest: Duration,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    let group = fresh_group();
    let opened: Vec<_> = (0..journals)
        .map(|j| {
            let storage = TestStorage::new(&dir.join(format!("j{j}")), group, knobs.clone());
            open(&storage, Options::default())
        })
        .collect();
    opened
        .into_iter()
        .enumerate()
        .map(|(j, journal)| {
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    append_durably(&journal, j as u64 * 1_000_000 + n)
                        .await
                        .unwrap();
                    n += 1;
                    if !rest.is_zero() {
                        tokio::time::sleep(rest).await;
                    }
                }
                let stats = journal.stats();
                assert_eq!(stats.durable_seq, stats.appended_seq, "journal {j}");
                n
            })
        })
        .collect()
}

/// What was counted while `window` passed.
#[derive(Debug)]
struct Counted {
    syncfs: u64,
    /// Journals checked after a `syncfs`: the journal syncs it answered.
    shared: u64,
    own: u64,
}

async fn counted_over(knobs: &Knobs, window: Duration) -> Counted {
    let now = || Counted {
        syncfs: knobs.syncfs.load(Ordering::SeqCst),
        shared: knobs.checks.load(Ordering::SeqCst),
        own: knobs.own_syncs.load(Ordering::SeqCst),
    };
    let before = now();
    tokio::time::sleep(window).await;
    let after = now();
    Counted {
        syncfs: after.syncfs - before.syncfs,
        shared: after.shared - before.shared,
        own: after.own - before.own,
    }
}

// The group shares for its first 2 s, then tries own syncs for about 20 ms, judges once they
// and a few shared ones after them ended, and keeps the faster way for 2 s
// (`journal/src/writer/pace.rs`). The counts are taken well inside that second stretch.
const FIRST_STRETCH: Duration = Duration::from_secs(2);
const INTO_SECOND_STRETCH: Duration = Duration::from_millis(700);

/// Eight journals of one group syncing busily (resting `rest` after each sync) under `knobs`:
/// the `syncfs` calls made in the first second, and what was counted over 500 ms well inside
/// the second stretch. Every journal made records durable.
async fn first_second_and_second_stretch(knobs: &Arc<Knobs>, rest: Duration) -> (u64, Counted) {
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = busy_journals(dir.path(), knobs, 8, rest, &stop);
    let first_second = Duration::from_millis(1_000);
    tokio::time::sleep(first_second).await;
    let syncfs_first_second = knobs.syncfs.load(Ordering::SeqCst);
    tokio::time::sleep(FIRST_STRETCH - first_second + INTO_SECOND_STRETCH).await;
    let counted = counted_over(knobs, Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        assert!(t.await.unwrap() > 0);
    }
    (syncfs_first_second, counted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_whose_syncfs_is_slower_than_own_syncs_gives_sharing_up() {
    let knobs = Arc::new(Knobs::default());
    // A syncfs of 40 ms (below the 50 ms that stops sharing at once), own syncs of 2 ms. Real
    // ones would time whatever else the machine writes. Own syncs of no time would seldom
    // overlap, and a sync only asks the group while another is in flight: the group could go a
    // second without a syncfs (it did, once, in CI).
    knobs.timed_by_knobs_only.store(true, Ordering::SeqCst);
    knobs.syncfs_ms.store(40, Ordering::SeqCst);
    knobs.own_sync_ms.store(2, Ordering::SeqCst);
    let (syncfs_first_second, counted) =
        first_second_and_second_stretch(&knobs, Duration::from_millis(1)).await;
    assert!(syncfs_first_second > 0, "the group never shared");
    // Inside the second stretch: own syncs only.
    assert_eq!(
        counted.syncfs, 0,
        "a syncfs after own syncs were found faster"
    );
    assert!(counted.own > 0, "no own sync after sharing was given up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_whose_own_syncs_are_slower_keeps_sharing_after_trying_them() {
    let knobs = Arc::new(Knobs::default());
    // Each journal's own fdatasync takes 30 ms; a shared one 1 ms.
    knobs.timed_by_knobs_only.store(true, Ordering::SeqCst);
    knobs.own_sync_ms.store(30, Ordering::SeqCst);
    knobs.syncfs_ms.store(1, Ordering::SeqCst);
    let (_, counted) = first_second_and_second_stretch(&knobs, Duration::ZERO).await;
    // Inside the second stretch: shared again, the trial's own syncs over. A few own ones
    // remain (a leader that found no other sync in flight, the next MiB of zeros).
    assert!(
        counted.syncfs > 0 && counted.shared >= 10 * counted.own,
        "sharing was given up for slower own syncs: {counted:?}"
    );
}

#[test]
fn only_ext4_directories_offer_a_shared_sync() {
    let on_disk = tempfile::tempdir().unwrap();
    assert!(
        FsStorage::create(on_disk.path())
            .unwrap()
            .file_system()
            .is_some(),
        "{} is on ext4 on this machine",
        on_disk.path().display()
    );
    // tmpfs: its syncfs is no promise this journal relies on.
    let in_memory = tempfile::tempdir_in("/dev/shm").unwrap();
    assert!(FsStorage::create(in_memory.path())
        .unwrap()
        .file_system()
        .is_none());
}

/// A test storage as `read_all` takes it.
struct Fs(Arc<TestStorage>);

impl StorageClone for Fs {
    fn arc(&self) -> Arc<dyn Storage> {
        self.0.clone()
    }
}
