//! A crash can cut a journal at any byte. For every cut of a multi-segment journal the reader
//! returns exactly the whole records before it and calls the rest a torn tail; reopening
//! quarantines and cuts that tail, and new records follow the prefix. In format version 2 the
//! zeros at the end of a cut are where records end (preallocated space), not torn bytes; in
//! version 1 they are torn like any other byte.

use crate::common;

use common::*;
use std::sync::Arc;
use tooljournal_journal::{Journal, ReadEnd, SimStorage, TornReason};

const HEADER_BYTES: u64 = tooljournal_journal::segment::HEADER_BYTES as u64;

/// Record sizes chosen to vary frame sizes and to land records on both sides of segment cuts.
const SIZES: &[usize] = &[0, 1, 17, 90, 3, 120, 44, 0, 64, 250, 5, 77, 8, 101, 33, 2];

/// Where a record ends, counting bytes across segments laid end to end.
#[derive(Debug, Clone, Copy)]
struct Frame {
    global_end: u64,
}

/// A segment's name, bytes, and where it starts in the global layout.
type LaidOutSegment = (String, Vec<u8>, u64);

/// Global byte layout: where each segment and each record starts, concatenating segments.
fn layout(
    storage: &SimStorage,
    options: tooljournal_journal::Options,
) -> (Vec<LaidOutSegment>, Vec<Frame>) {
    let segs = segments(storage);
    let mut starts = Vec::new();
    let mut at = 0;
    for (_, bytes) in &segs {
        starts.push(at);
        at += bytes.len() as u64;
    }
    let (records, end) = read_all(storage, options);
    assert_eq!(end, ReadEnd::Clean);
    let frames = records
        .iter()
        .map(|r| {
            let s = starts[r.position.segment as usize] + r.position.offset;
            Frame {
                global_end: s + r.frame_bytes,
            }
        })
        .collect();
    let segs = segs
        .into_iter()
        .zip(starts)
        .map(|((n, b), s)| (n, b, s))
        .collect();
    (segs, frames)
}

/// The journal as a crash at global byte `cut` leaves it. With `keep_empty`, a segment that
/// starts exactly at the cut survives as an empty file.
fn cut_at(segs: &[LaidOutSegment], cut: u64, keep_empty: bool) -> SimStorage {
    let storage = SimStorage::new();
    for (name, bytes, start) in segs {
        let end = start + bytes.len() as u64;
        if *start < cut || (*start == cut && keep_empty) {
            let keep = (cut.min(end) - start) as usize;
            storage.put_file(name, bytes[..keep].to_vec());
        }
    }
    storage
}

#[test]
fn scenario_11_a_writer_reopening_any_cut_quarantines_and_cuts_the_torn_tail_before_appending() {
    every_cut(false);
}

#[test]
fn scenario_11_every_cut_of_a_version_1_journal_is_torn_to_the_end_of_the_file() {
    every_cut(true);
}

fn every_cut(version_1: bool) {
    let options = small_limits(300);
    let original = SimStorage::new();
    if version_1 {
        seed_version_1(&original);
    }
    let written = write_records(&original, options, SIZES);
    let (segs, frames) = layout(&original, options);
    assert!(segs.len() >= 4, "want several segments, got {}", segs.len());
    let total = segs.iter().map(|(_, b, _)| b.len() as u64).sum::<u64>();
    let segment_starts: Vec<u64> = segs.iter().map(|(_, _, s)| *s).collect();

    for cut in 0..=total {
        for keep_empty in [false, true] {
            if keep_empty && !segment_starts.contains(&cut) {
                continue;
            }
            let storage = cut_at(&segs, cut, keep_empty);
            let whole = frames.iter().filter(|f| f.global_end <= cut).count();
            let (records, end) = read_all(&storage, options);
            assert_eq!(
                payloads(&records),
                written[..whole].to_vec(),
                "cut at {cut}: records returned"
            );
            // Where is the cut, relative to the segment it falls in?
            let seg_index = segment_starts
                .iter()
                .rposition(|&s| s < cut || (s == cut && keep_empty));
            // `Some((short_header, dropped_bytes))` when the cut leaves a torn tail.
            let expect_torn = seg_index.and_then(|i| {
                let header_end = segment_starts[i] + HEADER_BYTES;
                if cut < header_end {
                    return Some((true, cut - segment_starts[i]));
                }
                let valid_end = frames
                    .iter()
                    .map(|f| f.global_end)
                    .filter(|&e| e <= cut)
                    .fold(header_end, u64::max);
                // Format 2: what a resume drops ends at the cut's last byte that is not zero.
                let (_, bytes, start) = &segs[i];
                let torn = &bytes[(valid_end - start) as usize..(cut - start) as usize];
                let dropped = match version_1 {
                    true => torn.len(),
                    false => nonzero_len(torn),
                } as u64;
                (dropped > 0).then_some((false, dropped))
            });
            match (&end, expect_torn) {
                (ReadEnd::Clean, None) => {}
                (ReadEnd::TornTail(t), Some((short_header, dropped))) => {
                    assert_eq!(t.dropped_bytes, dropped, "cut at {cut}: dropped bytes");
                    assert_eq!(
                        t.reason == TornReason::ShortHeader,
                        short_header,
                        "cut at {cut}: reason {:?}",
                        t.reason
                    );
                }
                other => panic!("cut at {cut} (keep_empty {keep_empty}): unexpected end {other:?}"),
            }

            // Reopen: the torn bytes are kept aside, cut off, and new records follow the prefix.
            let (journal, report) =
                Journal::open(Arc::new(storage.clone()), options).expect("reopen");
            assert_eq!(report.next_seq, whole as u64 + 1, "cut at {cut}: next seq");
            if let ReadEnd::TornTail(t) = &end {
                let q = report.quarantine_file.clone().expect("quarantined");
                let kept = storage.read_file(&q).expect("quarantine file exists");
                assert_eq!(
                    kept.len() as u64,
                    t.dropped_bytes,
                    "cut at {cut}: quarantine size"
                );
            } else {
                assert_eq!(report.quarantine_file, None);
            }
            let extra: Vec<Vec<u8>> = (0..3).map(|i| payload(1000 + i, 40 + i as usize)).collect();
            for p in &extra {
                journal.append(p).expect("append after reopen");
            }
            journal.close().expect("close");
            let (records, end) = read_all(&storage, options);
            assert_eq!(end, ReadEnd::Clean, "cut at {cut}: after reopen");
            let mut expected = written[..whole].to_vec();
            expected.extend(extra);
            assert_eq!(
                payloads(&records),
                expected,
                "cut at {cut}: prefix + new records"
            );
            let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
            assert_eq!(seqs, (1..=expected.len() as u64).collect::<Vec<_>>());
        }
    }
}
