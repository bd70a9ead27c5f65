//! How a journal's end is judged, from damaged bytes (SCENARIOS.md, "Journal bytes").

use crate::common;

use common::*;
use std::sync::Arc;
use tooljournal_journal::{
    segment, CorruptionKind, Journal, JournalError, ReadEnd, SimStorage, TornReason,
};

fn last_segment(storage: &SimStorage) -> (String, Vec<u8>) {
    segments(storage).pop().expect("a segment")
}

fn journal_of(sizes: &[usize]) -> (SimStorage, Vec<Vec<u8>>) {
    let storage = SimStorage::new();
    let written = write_records(&storage, small_limits(1 << 20), sizes);
    (storage, written)
}

#[test]
fn scenario_06_zero_filled_last_sector_is_a_torn_tail_not_corruption() {
    zero_filled_last_sector(true);
}

#[test]
fn scenario_06_zero_filled_last_sector_of_a_version_2_journal_ends_its_records() {
    zero_filled_last_sector(false);
}

/// Zeros after the last record (the file grew, its data never reached the disk) or over it.
/// Version 1: a torn tail of exactly those bytes. Version 2: zeros to the end of the segment are
/// where its records end (a preallocated segment holds them ahead of its records): clean, and a
/// writer reopening it quarantines nothing.
fn zero_filled_last_sector(version_1: bool) {
    let journal_of = |sizes: &[usize]| {
        let storage = SimStorage::new();
        if version_1 {
            seed_version_1(&storage);
        }
        let written = write_records(&storage, small_limits(1 << 20), sizes);
        (storage, written)
    };
    for sector in [512usize, 4096] {
        let (storage, written) = journal_of(&[10, 200, 30]);
        let (name, mut bytes) = last_segment(&storage);
        let valid_len = bytes.len() as u64;
        bytes.resize(bytes.len() + sector, 0);
        storage.put_file(&name, bytes);
        let (records, end) = read_all(&storage, small_limits(1 << 20));
        assert_eq!(payloads(&records), written);
        match (version_1, end) {
            (true, ReadEnd::TornTail(t)) => {
                assert_eq!(t.position.offset, valid_len);
                assert_eq!(t.dropped_bytes, sector as u64);
            }
            (false, ReadEnd::Clean) => {
                let (_, report) =
                    Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
                assert_eq!((report.torn, report.next_seq), (None, 4));
            }
            (_, other) => panic!("{sector}-byte zero tail, version 1 {version_1}: {other:?}"),
        }

        // The last record's own bytes zeroed to the end of its sector.
        let (storage, written) = journal_of(&[10, 200, 30, 700]);
        let (records, _) = read_all(&storage, small_limits(1 << 20));
        let last = records.last().expect("records").position.offset as usize;
        let (name, mut bytes) = last_segment(&storage);
        let sector_start = last / sector * sector;
        let cut = (sector_start + sector).max(last + 1);
        bytes.resize(cut.max(bytes.len()), 0);
        bytes[sector_start.max(segment::HEADER_BYTES)..cut].fill(0);
        let all_zero_from_last = nonzero_len(&bytes) <= last;
        storage.put_file(&name, bytes);
        let (records, end) = read_all(&storage, small_limits(1 << 20));
        let kept = payloads(&records);
        assert_eq!(kept, written[..kept.len()].to_vec());
        assert!(kept.len() < written.len());
        match (version_1 || !all_zero_from_last, end) {
            (true, ReadEnd::TornTail(_)) | (false, ReadEnd::Clean) => {}
            (_, other) => panic!("{sector}, version 1 {version_1}: {other:?}"),
        }
    }
}

#[test]
fn scenario_35_a_torn_tail_is_quarantined_byte_for_byte_before_reopen_cuts_it() {
    let (storage, written) = journal_of(&[10, 20, 30]);
    let (name, mut bytes) = last_segment(&storage);
    let valid_len = bytes.len();
    let garbage: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    bytes.extend_from_slice(&garbage);
    storage.put_file(&name, bytes);
    let (records, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(payloads(&records), written);
    assert!(
        matches!(&end, ReadEnd::TornTail(t) if t.dropped_bytes == 3000),
        "{end:?}"
    );

    let (journal, report) =
        Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
    let q = report.quarantine_file.expect("quarantined");
    assert_eq!(
        storage.read_file(&q).unwrap(),
        garbage,
        "evidence kept byte for byte"
    );
    journal.append(&payload(99, 5)).unwrap();
    journal.close().unwrap();
    let (_, bytes) = last_segment(&storage);
    // Frame (16) + a 5-byte `Vec<u8>`: its length is one varint byte (format 2).
    assert_eq!(
        bytes.len(),
        valid_len + 16 + 1 + 5,
        "garbage cut, new record appended"
    );
    let (records, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(records.len(), 4);
}

#[test]
fn bad_record_followed_by_a_valid_one_is_corruption_and_is_never_truncated() {
    let (storage, _) = journal_of(&[10, 20, 30]);
    let (records, _) = read_all(&storage, small_limits(1 << 20));
    let second = records[1].position;
    let (name, mut bytes) = last_segment(&storage);
    bytes[second.offset as usize + 20] ^= 0x40;
    storage.put_file(&name, bytes.clone());
    let (got, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(got.len(), 1);
    match &end {
        ReadEnd::Corrupt(c) => {
            assert_eq!(c.position, second);
            assert!(matches!(c.kind, CorruptionKind::BadRecord(_)));
        }
        other => panic!("{other:?}"),
    }
    match Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)) {
        Err(JournalError::Corrupt { corruption, .. }) => assert_eq!(corruption.position, second),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a corrupt journal must not open for append"),
    }
    assert_eq!(last_segment(&storage).1, bytes, "not a byte changed");
}

/// Builds a frame by hand (the format is documented; this is what a third party would write).
fn raw_frame(seq: u64, payload: &[u8]) -> Vec<u8> {
    let length = (8 + payload.len()) as u32;
    let mut body = seq.to_le_bytes().to_vec();
    body.extend_from_slice(payload);
    let mut h = crc32fast::Hasher::new();
    h.update(&length.to_le_bytes());
    h.update(&body);
    let mut out = length.to_le_bytes().to_vec();
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out.extend_from_slice(&body);
    out
}

#[test]
fn scenario_04_seq_gap_or_repeat_is_corruption_even_with_good_checksums() {
    for bad_seq in [5u64, 3, 2] {
        let (storage, _) = journal_of(&[10, 20, 30]);
        let (name, mut bytes) = last_segment(&storage);
        let at = bytes.len() as u64;
        bytes.extend_from_slice(&raw_frame(bad_seq, b"x"));
        storage.put_file(&name, bytes);
        let (got, end) = read_all(&storage, small_limits(1 << 20));
        assert_eq!(got.len(), 3);
        match end {
            ReadEnd::Corrupt(c) => {
                assert_eq!(c.position.offset, at);
                assert_eq!(
                    c.kind,
                    CorruptionKind::SeqGap {
                        expected: 4,
                        found: bad_seq
                    }
                );
            }
            other => panic!("seq {bad_seq}: {other:?}"),
        }
    }
}

#[test]
fn a_bad_record_followed_by_an_empty_payload_record_is_corruption() {
    // The smallest valid frame (16 bytes, no payload) after garbage still proves the garbage
    // is not a torn tail.
    let (storage, _) = journal_of(&[10]);
    let (name, mut bytes) = last_segment(&storage);
    let at = bytes.len() as u64;
    bytes.extend_from_slice(&[0xff; 5]);
    bytes.extend_from_slice(&raw_frame(2, b""));
    storage.put_file(&name, bytes);
    let (got, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(got.len(), 1);
    assert!(
        matches!(&end, ReadEnd::Corrupt(c) if c.position.offset == at),
        "{end:?}"
    );
}

#[test]
fn a_hand_built_frame_with_the_right_seq_is_read() {
    // FORMAT.md is enough to write records: a frame built from it alone reads back.
    let (storage, _) = journal_of(&[10]);
    let (name, mut bytes) = last_segment(&storage);
    // FORMAT.md's layout for Vec<u8> in format 2: a varint length (one byte), then the bytes.
    let mut payload = vec![3];
    payload.extend_from_slice(b"abc");
    bytes.extend_from_slice(&raw_frame(2, &payload));
    storage.put_file(&name, bytes);
    let (got, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(got[1].decode::<Vec<u8>>().unwrap(), b"abc");
}

#[test]
fn scenario_05_empty_and_header_only_segments_read_as_empty_journals() {
    // A directory with no segment at all.
    let storage = SimStorage::new();
    let (got, end) = read_all(&storage, small_limits(1 << 20));
    assert!(got.is_empty());
    assert_eq!(end, ReadEnd::Clean);

    // A header only: a journal opened and never written.
    let storage = SimStorage::new();
    write_records(&storage, small_limits(1 << 20), &[]);
    let (got, end) = read_all(&storage, small_limits(1 << 20));
    assert!(got.is_empty());
    assert_eq!(end, ReadEnd::Clean);

    // An empty segment file: torn, zero bytes to drop; reopening starts afresh.
    let storage = SimStorage::new();
    storage.put_file(&segment::file_name(0), Vec::new());
    let (got, end) = read_all(&storage, small_limits(1 << 20));
    assert!(got.is_empty());
    match end {
        ReadEnd::TornTail(t) => {
            assert_eq!(t.reason, TornReason::ShortHeader);
            assert_eq!(t.dropped_bytes, 0);
        }
        other => panic!("{other:?}"),
    }
    let (journal, report) =
        Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
    assert!(report.created);
    assert_eq!(journal.append(&payload(1, 3)).unwrap(), 1);
}

#[test]
fn future_format_version_is_refused_by_name() {
    let (storage, _) = journal_of(&[10]);
    let (name, mut bytes) = last_segment(&storage);
    bytes[8..12].copy_from_slice(&3u32.to_le_bytes());
    storage.put_file(&name, bytes);
    let (_, end) = read_all(&storage, small_limits(1 << 20));
    match end {
        ReadEnd::Corrupt(c) => {
            assert_eq!(
                c.kind,
                CorruptionKind::BadHeader(segment::BadHeader::UnsupportedVersion {
                    found: 3,
                    supported: segment::FORMAT_VERSION
                })
            );
            assert!(
                c.to_string().contains("unsupported format version 3"),
                "{c}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_middle_segment_is_corruption() {
    let storage = SimStorage::new();
    write_records(&storage, small_limits(200), &[100, 100, 100, 100]);
    let segs = segments(&storage);
    assert!(segs.len() >= 3);
    storage.delete_file(&segs[1].0);
    let (got, end) = read_all(&storage, small_limits(200));
    assert!(
        matches!(
            end,
            ReadEnd::Corrupt(ref c) if c.kind == CorruptionKind::MissingSegment { missing: 1 }
        ),
        "{end:?}"
    );
    assert_eq!(got.len(), 1);
}

#[test]
fn oversized_records_are_refused_on_write_and_on_read() {
    let storage = SimStorage::new();
    let options = small_limits(1 << 20);
    let (journal, _) = Journal::open(Arc::new(storage.clone()), options).unwrap();
    let too_big = vec![0u8; (1 << 16) + 1];
    match journal.append(&too_big) {
        Err(JournalError::RecordTooLarge {
            size_bytes,
            size_bytes_max,
        }) => {
            // A length of 65 537 is a varint of 5 bytes: 252 and a `u32`.
            assert_eq!(size_bytes, too_big.len() as u64 + 5);
            assert_eq!(size_bytes_max, (1 << 16) - 8);
        }
        other => panic!("{other:?}"),
    }
    // The refusal poisons nothing: the journal goes on.
    assert_eq!(journal.append(&payload(1, 10)).unwrap(), 1);
    journal.close().unwrap();

    // A reader with a smaller limit than the writer's refuses the record by length.
    let storage = SimStorage::new();
    write_records(&storage, options, &[5000, 10]);
    let mut tight = options;
    tight.limits.record_size_bytes_max = 1000;
    let (got, end) = read_all(&storage, tight);
    assert!(got.is_empty());
    assert!(
        matches!(end, ReadEnd::Corrupt(ref c) if matches!(c.kind,
        CorruptionKind::BadRecord(tooljournal_journal::framing::BadFrame::LengthOverLimit { .. }))),
        "{end:?}"
    );
}

#[test]
fn a_salvaging_reader_passes_over_a_bad_record_and_says_so() {
    let (storage, written) = journal_of(&[10, 20, 30, 40]);
    let (records, _) = read_all(&storage, small_limits(1 << 20));
    let second = records[1].clone();
    let (name, mut bytes) = last_segment(&storage);
    bytes[second.position.offset as usize + 18] ^= 0x08;
    storage.put_file(&name, bytes.clone());
    let mut reader = tooljournal_journal::Reader::open_salvaging(
        Arc::new(storage.clone()),
        small_limits(1 << 20).limits,
    )
    .unwrap();
    let got: Vec<tooljournal_journal::Record> = reader.by_ref().map(|r| r.unwrap()).collect();
    let mut expected = written.clone();
    expected.remove(1);
    assert_eq!(payloads(&got), expected, "every record but the damaged one");
    assert_eq!(got.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1, 3, 4]);
    let skipped = reader.skipped();
    assert_eq!(
        skipped.len(),
        2,
        "the bad bytes, and the seq gap they leave: {skipped:?}"
    );
    assert_eq!(skipped[0].position, second.position);
    assert_eq!(skipped[0].bytes, second.frame_bytes);
    assert!(skipped[0].what.contains("checksum"), "{}", skipped[0].what);
    assert!(
        skipped[1].what.contains("expected seq 2, found 3"),
        "{}",
        skipped[1].what
    );
    assert_eq!(reader.end(), Some(&ReadEnd::Clean));
    // A plain reader still calls it what it is.
    let (_, end) = read_all(&storage, small_limits(1 << 20));
    assert!(matches!(end, ReadEnd::Corrupt(_)));
}
