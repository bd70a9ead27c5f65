//! Preallocated segments (format version 2, docs/FORMAT.md *Preallocated tail*): a live segment
//! is zero-filled ahead of its records so that a sync writes data only; a sealed or closed one
//! ends at its last record; zeros end a segment's records, and a record lost to zeros in a
//! sealed segment is still caught by the next segment's first seq.

use crate::common;

use common::*;
use std::sync::Arc;
use tooljournal_journal::segment::HEADER_BYTES;
use tooljournal_journal::{
    CorruptionKind, FsStorage, Journal, Options, ReadEnd, SimStorage, Storage,
};

const HEADER: u64 = HEADER_BYTES as u64;

fn options(preallocate_bytes: u64, segment_size_bytes_max: u64) -> Options {
    Options {
        preallocate_bytes,
        ..small_limits(segment_size_bytes_max)
    }
}

fn file_len(storage: &SimStorage, name: &str) -> u64 {
    storage.read_file(name).expect("file").len() as u64
}

#[test]
fn a_live_segment_is_zero_filled_ahead_and_a_closed_one_ends_at_its_last_record() {
    let storage = SimStorage::new();
    let opts = options(4096, 1 << 20);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    let name = segments(&storage)[0].0.clone();
    // Created with its header and the zeros ahead, in one write.
    assert_eq!(file_len(&storage, &name), HEADER + 4096);
    let before = storage.stats().writes;
    for i in 1..=3 {
        journal.append(&payload(i, 100)).unwrap();
    }
    journal.sync_through_blocking(3).unwrap();
    // The records overwrote zeros: the size did not change, and one write carried them.
    assert_eq!(file_len(&storage, &name), HEADER + 4096);
    assert_eq!(storage.stats().writes, before + 1);
    let (records, end) = read_all(&storage, opts);
    assert_eq!((records.len(), end), (3, ReadEnd::Clean));
    let records_end = records
        .last()
        .map(|r| r.position.offset + r.frame_bytes)
        .unwrap();

    // Past the zeros: one write of the records and the next zeros, 4 KiB-aligned.
    for i in 4..=60 {
        journal.append(&payload(i, 100)).unwrap();
    }
    journal.sync_through_blocking(60).unwrap();
    let len = file_len(&storage, &name);
    let (records, _) = read_all(&storage, opts);
    let end_60 = records
        .last()
        .map(|r| r.position.offset + r.frame_bytes)
        .unwrap();
    assert!(
        len >= end_60 + 4096 && len.is_multiple_of(4096),
        "{len} after {end_60}"
    );
    assert!(end_60 > records_end);

    journal.close().unwrap();
    assert_eq!(file_len(&storage, &name), end_60, "close cuts the zeros");
    let (records, end) = read_all(&storage, opts);
    assert_eq!((records.len(), end), (60, ReadEnd::Clean));
}

/// A journal others still hold (a session's log, its watchers) is finished in place:
/// durable, its zeros cut; an append after that zero-fills ahead again and reads on.
#[test]
fn a_shared_journal_finished_in_place_ends_at_its_last_record() {
    let storage = SimStorage::new();
    let opts = options(4096, 1 << 20);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    let journal = Arc::new(journal);
    let watcher = journal.clone();
    let name = segments(&storage)[0].0.clone();
    for i in 1..=3 {
        journal.append(&payload(i, 100)).unwrap();
    }
    assert_eq!(journal.finish().unwrap(), 3);
    assert_eq!(watcher.stats().durable_seq, 3);
    let (records, end) = read_all(&storage, opts);
    let records_end = records
        .last()
        .map(|r| r.position.offset + r.frame_bytes)
        .unwrap();
    assert_eq!((records.len(), end), (3, ReadEnd::Clean));
    assert_eq!(
        file_len(&storage, &name),
        records_end,
        "finish cuts the zeros"
    );

    journal.append(&payload(4, 100)).unwrap();
    journal.sync_through_blocking(4).unwrap();
    assert!(file_len(&storage, &name) >= records_end + 4096);
    drop(watcher);
    let journal = Arc::into_inner(journal).expect("the last holder");
    journal.close().unwrap();
    let (records, end) = read_all(&storage, opts);
    let last = records.last().unwrap();
    assert_eq!((records.len(), end), (4, ReadEnd::Clean));
    assert_eq!(
        file_len(&storage, &name),
        last.position.offset + last.frame_bytes
    );
}

#[test]
fn a_sealed_segment_ends_at_its_last_record() {
    let storage = SimStorage::new();
    let opts = options(4096, 2048);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    for i in 1..=40 {
        journal.append(&payload(i, 90)).unwrap();
        journal.sync_through_blocking(i).unwrap();
    }
    let segs = segments(&storage);
    assert!(segs.len() >= 3, "{} segments", segs.len());
    let (records, end) = read_all(&storage, opts);
    assert_eq!((records.len(), end), (40, ReadEnd::Clean));
    for (n, (_, bytes)) in segs.iter().enumerate().take(segs.len() - 1) {
        let last = records
            .iter()
            .filter(|r| r.position.segment == n as u64)
            .map(|r| r.position.offset + r.frame_bytes)
            .max()
            .unwrap();
        assert_eq!(
            bytes.len() as u64,
            last,
            "segment {n} was cut at its last record"
        );
    }
    // The live one is zero-filled ahead (capped by the segment size limit).
    let (_, live) = segs.last().unwrap();
    assert_eq!(live.len() as u64, 2048);
    journal.close().unwrap();
}

#[test]
fn a_version_1_journal_is_appended_to_and_never_zero_filled() {
    let storage = SimStorage::new();
    seed_version_1(&storage);
    let opts = options(4096, 1 << 20);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    for i in 1..=5 {
        journal.append(&payload(i, 50)).unwrap();
    }
    journal.sync_through_blocking(5).unwrap();
    let (records, end) = read_all(&storage, opts);
    assert_eq!((records.len(), end), (5, ReadEnd::Clean));
    let (_, bytes) = segments(&storage).pop().unwrap();
    let last = records.last().unwrap();
    assert_eq!(bytes.len() as u64, last.position.offset + last.frame_bytes);
    journal.close().unwrap();
}

#[test]
fn records_lost_to_zeros_in_a_sealed_segment_are_caught_by_the_next_first_seq() {
    let storage = SimStorage::new();
    let opts = options(4096, 2048);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    for i in 1..=40 {
        journal.append(&payload(i, 90)).unwrap();
    }
    journal.close().unwrap();
    let (records, _) = read_all(&storage, opts);
    // Zero segment 0's last record: it reads as the end of that segment's records.
    let last0 = records
        .iter()
        .rfind(|r| r.position.segment == 0)
        .unwrap()
        .clone();
    let (name, mut bytes) = segments(&storage).remove(0);
    bytes[last0.position.offset as usize..].fill(0);
    storage.put_file(&name, bytes);
    let (got, end) = read_all(&storage, opts);
    assert_eq!(got.len() as u64, last0.seq - 1);
    match end {
        ReadEnd::Corrupt(c) => {
            assert_eq!(c.position.segment, 1);
            assert!(
                matches!(c.kind, CorruptionKind::FirstSeqMismatch { expected, found }
                    if expected == last0.seq && found == last0.seq + 1),
                "{c}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_writer_killed_with_zeros_ahead_is_reopened_where_its_records_end_on_a_real_disk() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(64 << 10, 1 << 20);
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir.path()).unwrap());
    let (journal, _) = Journal::open(storage.clone(), opts).unwrap();
    for i in 1..=10 {
        journal.append(&payload(i, 200)).unwrap();
    }
    journal.sync_through_blocking(10).unwrap();
    // Dropped without `close`, as a killed process leaves it: the zeros ahead stay.
    drop(journal);
    let path = dir.path().join("00000000000000000000.segment");
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len >= HEADER + (64 << 10), "{len}");

    let (journal, report) = Journal::open(storage.clone(), opts).unwrap();
    assert_eq!((report.torn, report.next_seq), (None, 11));
    journal.append(&payload(11, 200)).unwrap();
    journal.close().unwrap();
    let mut reader = tooljournal_journal::Reader::open(storage, opts.limits).unwrap();
    let seqs: Vec<u64> = reader.by_ref().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, (1..=11).collect::<Vec<_>>());
    assert_eq!(reader.end(), Some(&ReadEnd::Clean));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        nonzero_len(&bytes),
        bytes.len(),
        "closed: no zeros after the last record"
    );
}

#[test]
fn a_writer_that_appends_nothing_leaves_the_zeros_ahead_byte_for_byte() {
    let storage = SimStorage::new();
    let opts = options(4096, 1 << 20);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    journal.append(&payload(1, 10)).unwrap();
    journal.sync_through_blocking(1).unwrap();
    drop(journal); // killed: the zeros ahead stay
    let before = segments(&storage);
    assert!(before[0].1.len() as u64 > HEADER + 20);
    // A reopen that appends nothing (a recovery with nothing to say) changes no byte.
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    journal.close().unwrap();
    assert_eq!(segments(&storage), before);
}

#[test]
fn a_few_records_writer_zero_fills_nothing_ahead() {
    // Recovery's and a takeover's writer: a handful of records, then close.
    let storage = SimStorage::new();
    let opts = Options::few_records();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), opts).unwrap();
    let name = segments(&storage)[0].0.clone();
    assert_eq!(file_len(&storage, &name), HEADER);
    journal.append(&payload(1, 100)).unwrap();
    journal.sync_through_blocking(1).unwrap();
    let (records, end) = read_all(&storage, opts);
    assert_eq!((records.len(), end), (1, ReadEnd::Clean));
    let records_end = records[0].position.offset + records[0].frame_bytes;
    assert_eq!(file_len(&storage, &name), records_end);
    journal.close().unwrap();
}
