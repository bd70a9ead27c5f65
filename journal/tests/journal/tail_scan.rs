//! The scan for a valid frame after a bad one (rule 3 of docs/FORMAT.md) does work linear in
//! the bytes it scans, even on a tail crafted so that every fourth offset holds a length field
//! that is plausible and fits (checked from scratch, each would cost the rest of the tail).

use crate::common;

use common::*;
use std::sync::Arc;
use tooljournal_journal::{
    CorruptionKind, Journal, Limits, Options, ReadEnd, Reader, ScanWork, SimStorage, Storage,
};

const MIB: usize = 1 << 20;

fn limits() -> Options {
    Options {
        limits: Limits {
            record_size_bytes_max: 16 << 20,
            segment_size_bytes_max: 64 << 20,
        },
        ..Options::default()
    }
}

/// `tail_bytes` of crafted garbage: at every fourth offset a length field (top byte zero) that
/// reaches exactly to the end of the segment; the crc fields are the next length fields, so
/// nothing checks. The first byte is 0xFF: an over-limit length, a bad frame.
fn crafted_tail(tail_bytes: usize) -> Vec<u8> {
    let mut tail = vec![0u8; tail_bytes];
    tail[..4].copy_from_slice(&[0xff; 4]);
    let mut p = 4;
    while p + 16 <= tail_bytes {
        let length = (tail_bytes - p - 8) as u32;
        tail[p..p + 4].copy_from_slice(&length.to_le_bytes());
        p += 4;
    }
    tail
}

/// A journal of three records, then `tail` appended to its segment.
fn journal_with_tail(tail: &[u8]) -> (SimStorage, u64) {
    let storage = SimStorage::new();
    write_records(&storage, limits(), &[10, 200, 30]);
    let (name, mut bytes) = segments(&storage).pop().expect("a segment");
    let valid_len = bytes.len() as u64;
    bytes.extend_from_slice(tail);
    storage.put_file(&name, bytes);
    (storage, valid_len)
}

fn read(storage: &SimStorage) -> (ReadEnd, u64, ScanWork) {
    let storage: Arc<dyn Storage> = Arc::new(storage.clone());
    let mut reader = Reader::open(storage, limits().limits).expect("reader");
    for record in reader.by_ref() {
        record.expect("io");
    }
    let work = reader.scan_work();
    (
        reader.end().cloned().expect("end"),
        reader.records_read(),
        work,
    )
}

#[test]
fn a_crafted_tail_is_scanned_in_work_linear_in_its_size() {
    for size_mib in [1usize, 2, 4, 8] {
        let tail_bytes = size_mib * MIB;
        let (storage, valid_len) = journal_with_tail(&crafted_tail(tail_bytes));
        let (end, records, work) = read(&storage);
        assert_eq!(records, 3);
        match end {
            ReadEnd::TornTail(t) => {
                assert_eq!(t.position.offset, valid_len);
                // Format 2: the zeros that end the crafted tail are not counted as dropped.
                let tail = crafted_tail(tail_bytes);
                assert_eq!(t.dropped_bytes, nonzero_len(&tail) as u64);
            }
            other => panic!("{size_mib} MiB: {other:?}"),
        }
        // The crafted case really is the bad one: a candidate at about every fourth offset.
        assert!(
            work.candidates >= (tail_bytes / 4 - 2) as u64,
            "{size_mib} MiB: {work:?}"
        );
        assert!(work.bytes_scanned <= tail_bytes as u64, "{work:?}");
        // Each byte is checksummed once, each candidate at most 4 + 2·32 bytes more: per
        // scanned byte, 1 + 68/4 = 18 at most, whatever the size.
        let ratio = work.bytes_checksummed as f64 / tail_bytes as f64;
        assert!(
            ratio <= 18.0,
            "{size_mib} MiB: {ratio} bytes checksummed per byte"
        );
    }
}

#[test]
fn a_valid_frame_after_a_crafted_tail_still_makes_it_corruption() {
    // The same crafted garbage, then one valid frame (whatever its seq) at the very end.
    let mut frame = Vec::new();
    let start = tooljournal_journal::framing::begin(&mut frame, 99);
    frame.extend_from_slice(b"a stray but valid frame");
    tooljournal_journal::framing::seal(&mut frame, start);
    let mut tail = crafted_tail(MIB);
    let frame_at = tail.len();
    tail.extend_from_slice(&frame);
    // The crafted length fields reach the old end; the valid frame lies behind them all.
    let (storage, valid_len) = journal_with_tail(&tail);
    let (end, records, work) = read(&storage);
    assert_eq!(records, 3);
    match end {
        ReadEnd::Corrupt(c) => {
            assert_eq!(c.position.offset, valid_len);
            assert!(matches!(c.kind, CorruptionKind::BadRecord(_)), "{c}");
        }
        other => panic!("{other:?}"),
    }
    assert!(work.bytes_scanned >= frame_at as u64, "{work:?}");
    assert!(work.bytes_checksummed as f64 / tail.len() as f64 <= 18.0);

    // A writer refuses to reopen it (it would truncate a valid record).
    let refused = Journal::open(Arc::new(storage.clone()), limits());
    assert!(refused.is_err(), "reopened a corrupt journal");
}

#[test]
fn a_writer_reopening_a_crafted_tail_quarantines_and_cuts_it() {
    let (storage, valid_len) = journal_with_tail(&crafted_tail(2 * MIB));
    let (journal, report) = Journal::open(Arc::new(storage.clone()), limits()).expect("reopen");
    let torn = report.torn.expect("a torn tail");
    assert_eq!(torn.position.offset, valid_len);
    assert_eq!(
        torn.dropped_bytes,
        nonzero_len(&crafted_tail(2 * MIB)) as u64
    );
    assert_eq!(journal.append(&payload(4, 5)).expect("append"), 4);
    journal.close().expect("close");
    let (end, records, _) = read(&storage);
    assert_eq!((end, records), (ReadEnd::Clean, 4));
}
