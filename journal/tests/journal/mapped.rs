//! A journal that never syncs, on a real ext4 disk: its live segment takes records as copies
//! into a shared mapping (`journal/src/storage/fs/mapped.rs`). What was written must read back
//! through ordinary reads, across the zeros ahead, rotations and reopens, and a SIGKILLed
//! writer must lose nothing it had written. A journal that syncs, or one on tmpfs, maps nothing,
//! and neither does a reopened writer over the zeros an earlier process left.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use tooljournal_journal::{FsStorage, FsyncPolicy, Journal, Options, ReadEnd, Storage};

/// Small segments and a little zero-fill ahead, so a few thousand records cross many of both.
fn never_syncs() -> Options {
    Options {
        fsync: FsyncPolicy::Never,
        preallocate_bytes: 16 << 10,
        ..small_limits(64 << 10)
    }
}

/// Whether this process maps a file of `dir` (its `/proc/self/maps` names the path).
fn maps_a_file_of(dir: &Path) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let dir = dir.canonicalize().unwrap();
    maps.lines().any(|l| l.contains(dir.to_str().unwrap()))
}

fn storage(dir: &Path) -> Arc<dyn Storage> {
    Arc::new(FsStorage::create(dir).unwrap())
}

/// Appends records `from..=to` (lengths vary with the seq), each written before the next.
fn append_written(journal: &Journal, from: u64, to: u64) {
    for seq in from..=to {
        assert_eq!(journal.append(&payload(seq, record_len(seq))).unwrap(), seq);
        journal.sync_through_blocking(seq).unwrap();
    }
}

fn record_len(seq: u64) -> usize {
    40 + (seq as usize * 37) % 400
}

/// Every record of the journal in `dir`, checked against what was appended: seqs `1..=n`.
fn assert_reads_back(dir: &Path, n: u64) -> ReadEnd {
    let (records, end) = read_all(&FsStorage::open(dir).unwrap(), never_syncs());
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>());
    for (record, got) in records.iter().zip(payloads(&records)) {
        assert_eq!(
            got,
            payload(record.seq, record_len(record.seq)),
            "seq {}",
            record.seq
        );
    }
    end
}

#[test]
fn a_journal_that_never_syncs_maps_its_segment_and_every_record_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(storage(dir.path()), never_syncs()).unwrap();
    append_written(&journal, 1, 3_000);
    assert!(maps_a_file_of(dir.path()), "no segment mapped");
    // A reader beside the live writer reads the copies through the page cache.
    assert_eq!(assert_reads_back(dir.path(), 3_000), ReadEnd::Clean);

    // Finished in place (durable, its zeros cut under the mapping), then appended to again.
    journal.finish().unwrap();
    assert!(!maps_a_file_of(dir.path()), "a cut segment is still mapped");
    append_written(&journal, 3_001, 3_500);
    assert!(
        maps_a_file_of(dir.path()),
        "no segment mapped after finishing in place"
    );
    assert_eq!(assert_reads_back(dir.path(), 3_500), ReadEnd::Clean);

    // Dropped without `close`, as a killed process leaves it. Reopened, the zeros an earlier
    // process left (perhaps a hole, after a sparse copy) are written, not copied to; the
    // zeros this writer adds are copied to again.
    drop(journal);
    let (journal, report) = Journal::open(storage(dir.path()), never_syncs()).unwrap();
    assert_eq!((report.torn, report.next_seq), (None, 3_501));
    append_written(&journal, 3_501, 3_505);
    assert!(
        !maps_a_file_of(dir.path()),
        "copies over zeros another process left"
    );
    append_written(&journal, 3_506, 4_000);
    assert!(
        maps_a_file_of(dir.path()),
        "no segment mapped after a reopen"
    );
    journal.close().unwrap();
    assert!(
        !maps_a_file_of(dir.path()),
        "a closed journal still maps a file"
    );
    assert_eq!(assert_reads_back(dir.path(), 4_000), ReadEnd::Clean);

    // Many segments, each sealed at its last record (the zeros cut under the mapping).
    let mut names: Vec<String> = storage(dir.path())
        .list()
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".segment"))
        .collect();
    names.sort();
    assert!(names.len() > 5, "{names:?}");
    for name in &names {
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        assert_eq!(nonzero_len(&bytes), bytes.len(), "{name} ends in zeros");
    }
}

#[test]
fn a_journal_that_syncs_maps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        fsync: FsyncPolicy::Group,
        ..never_syncs()
    };
    let (journal, _) = Journal::open(storage(dir.path()), options).unwrap();
    append_written(&journal, 1, 200);
    assert!(!maps_a_file_of(dir.path()));
    journal.close().unwrap();
    assert_eq!(assert_reads_back(dir.path(), 200), ReadEnd::Clean);
}

#[test]
fn on_tmpfs_a_journal_that_never_syncs_writes_and_maps_nothing() {
    // tmpfs allocates a page when it is first written: a copy there could meet a full disk.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (journal, _) = Journal::open(storage(dir.path()), never_syncs()).unwrap();
    append_written(&journal, 1, 200);
    assert!(!maps_a_file_of(dir.path()));
    journal.close().unwrap();
    assert_eq!(assert_reads_back(dir.path(), 200), ReadEnd::Clean);
}

/// Set in the child this test starts: the directory it appends to until it is killed.
const CHILD_DIR: &str = "TOOLJOURNAL_MAPPED_KILL_CHILD_DIR";

#[test]
fn a_writer_that_never_syncs_killed_at_random_loses_no_record_it_wrote() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        return append_until_killed(Path::new(&dir));
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut rng = seed;
    for kill in 0..6 {
        // Past a few zero-fills and rotations, at a point drawn anew each time.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let kill_after = 500 + rng % 6_000;
        let dir = tempfile::tempdir().unwrap();
        let written = run_child_until(dir.path(), kill_after);
        assert!(
            written >= kill_after,
            "kill {kill}: the child stopped early"
        );
        // Everything the child had written is there; it may have written more before it died.
        let (records, _) = read_all(&FsStorage::open(dir.path()).unwrap(), never_syncs());
        let n = records.len() as u64;
        assert!(
            n >= written,
            "kill {kill} (seed {seed}): {n} records of {written} written"
        );
        let end = assert_reads_back(dir.path(), n);
        assert!(
            matches!(end, ReadEnd::Clean | ReadEnd::TornTail(_)),
            "kill {kill} (seed {seed}): {end:?}"
        );
        // And a writer continues after them.
        let (journal, report) = Journal::open(storage(dir.path()), never_syncs()).unwrap();
        assert_eq!(report.next_seq, n + 1);
        append_written(&journal, n + 1, n + 10);
        journal.close().unwrap();
        assert_eq!(assert_reads_back(dir.path(), n + 10), ReadEnd::Clean);
    }
}

/// Starts this test in a child that appends into `dir`, SIGKILLs it once it said `kill_after`
/// records were written, and returns the last seq it said it wrote.
fn run_child_until(dir: &Path, kill_after: u64) -> u64 {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "mapped::a_writer_that_never_syncs_killed_at_random_loses_no_record_it_wrote",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut written, mut mapped) = (0, None);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // The harness's "test NAME ... " may begin the child's first line.
        if let Some((_, said)) = line.rsplit_once("mapped ") {
            mapped = Some(said == "true");
        }
        let Ok(seq) = line.trim().parse::<u64>() else {
            continue; // the test harness's own lines
        };
        written = seq;
        if seq >= kill_after {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    // Ended by our SIGKILL, not by a panic or a signal of its own (a copy's SIGBUS).
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{status}"
    );
    assert_eq!(mapped, Some(true), "the child's segment was not mapped");
    written
}

/// The child: appends and says each seq once it is written (copied into the page cache).
fn append_until_killed(dir: &Path) {
    use std::io::Write;
    let (journal, _) = Journal::open(storage(dir), never_syncs()).unwrap();
    let mut out = std::io::stdout().lock();
    for seq in 1.. {
        journal.append(&payload(seq, record_len(seq))).unwrap();
        journal.sync_through_blocking(seq).unwrap();
        if seq == 1 {
            writeln!(out, "mapped {}", maps_a_file_of(dir)).unwrap();
        }
        writeln!(out, "{seq}").unwrap();
        out.flush().unwrap();
    }
}
