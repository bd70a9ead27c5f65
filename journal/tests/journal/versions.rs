//! Format versions side by side: a new journal is written in version 2 (varint payloads); a
//! version-1 journal stays version 1 when a writer appends to it, across a new segment; and a
//! journal is one version from its first segment to its last, anything else is corruption.

use crate::common;

use common::*;
use serde::Serialize;
use std::sync::Arc;
use tooljournal_journal::codec::{self, Encoding};
use tooljournal_journal::segment::{self, SegmentHeader, FORMAT_VERSION};
use tooljournal_journal::{
    framing, CorruptionKind, Journal, JournalError, Position, ReadEnd, Reader, SimStorage,
};

#[derive(Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Ev {
    turn: u32,
    call_id: String,
    source_seqs: Vec<u64>,
}

fn ev(n: u64) -> Ev {
    Ev {
        turn: n as u32,
        call_id: format!("call_{n}"),
        source_seqs: vec![n, n + 1],
    }
}

/// Segment 0 of a version-1 journal holding `evs`, made with the crate's pieces (header,
/// frames, the fixint codec) rather than its writer: what an older build left on disk.
fn v1_segment(evs: &[Ev]) -> Vec<u8> {
    let header = SegmentHeader {
        format_version: 1,
        journal_id: [0x11; 16],
        segment_number: 0,
        first_seq: 1,
    };
    let mut bytes = header.encode().to_vec();
    for (i, e) in evs.iter().enumerate() {
        let start = framing::begin(&mut bytes, i as u64 + 1);
        codec::encode_into(e, &mut bytes, u64::MAX, Encoding::Fixint).unwrap();
        framing::seal(&mut bytes, start);
    }
    bytes
}

fn version_of(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}

#[test]
fn a_new_journal_is_version_2_and_its_payloads_are_varints() {
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
    journal.append(&ev(3)).unwrap();
    journal.close().unwrap();
    let segs = segments(&storage);
    assert_eq!(version_of(&segs[0].1), FORMAT_VERSION);
    assert_eq!(FORMAT_VERSION, 2);
    let (records, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(records[0].encoding, Encoding::Varint);
    // turn 3, "call_3" with a one-byte length, two one-byte seqs.
    assert_eq!(
        records[0].payload,
        [3, 6, b'c', b'a', b'l', b'l', b'_', b'3', 2, 3, 4]
    );
    assert_eq!(records[0].decode::<Ev>().unwrap(), ev(3));
}

#[test]
fn a_version_1_journal_appended_to_stays_version_1() {
    let storage = SimStorage::new();
    let old: Vec<Ev> = (1..=3).map(ev).collect();
    storage.put_file(&segment::file_name(0), v1_segment(&old));
    // Small segments: the appends start new segments, which must be version 1 too.
    let options = small_limits(200);
    let (journal, report) = Journal::open(Arc::new(storage.clone()), options).unwrap();
    assert!(!report.created);
    assert_eq!(report.next_seq, 4);
    for n in 4..=12 {
        assert_eq!(journal.append(&ev(n)).unwrap(), n);
    }
    journal.close().unwrap();

    let segs = segments(&storage);
    assert!(segs.len() >= 3, "rotated: {} segments", segs.len());
    for (name, bytes) in &segs {
        assert_eq!(version_of(bytes), 1, "{name}");
    }
    let (records, end) = read_all(&storage, options);
    assert_eq!(end, ReadEnd::Clean);
    let evs: Vec<Ev> = records.iter().map(|r| r.decode().unwrap()).collect();
    assert_eq!(evs, (1..=12).map(ev).collect::<Vec<_>>());
    for r in &records {
        assert_eq!(r.encoding, Encoding::Fixint, "seq {}", r.seq);
        // Fixint: turn as 4 bytes, the id's length as 8.
        assert_eq!(
            r.payload[..4],
            (r.seq as u32).to_le_bytes(),
            "seq {}",
            r.seq
        );
        let id_len = format!("call_{}", r.seq).len() as u64;
        assert_eq!(r.payload[4..12], id_len.to_le_bytes(), "seq {}", r.seq);
    }
    // And again: a second reopen continues in version 1 from a segment it wrote itself.
    let (journal, report) = Journal::open(Arc::new(storage.clone()), options).unwrap();
    assert_eq!(report.next_seq, 13);
    journal.append(&ev(13)).unwrap();
    journal.close().unwrap();
    let (records, _) = read_all(&storage, options);
    assert_eq!(records.last().map(|r| r.encoding), Some(Encoding::Fixint));
    assert_eq!(records.last().unwrap().decode::<Ev>().unwrap(), ev(13));
}

/// A version-2 journal of several segments whose segment `which` (from the end when negative)
/// is rewritten as version 1, its header checksum made right: a mix no writer makes.
fn mixed(which: isize) -> (SimStorage, u64) {
    let storage = SimStorage::new();
    write_records(&storage, small_limits(200), &[100, 100, 100, 100]);
    let segs = segments(&storage);
    assert!(segs.len() >= 3, "{} segments", segs.len());
    let index = which.rem_euclid(segs.len() as isize) as usize;
    let (name, mut bytes) = segs[index].clone();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let header_crc = crc32fast::hash(&bytes[0..44]);
    bytes[44..48].copy_from_slice(&header_crc.to_le_bytes());
    storage.put_file(&name, bytes);
    (storage, index as u64)
}

#[test]
fn a_segment_of_another_version_than_segment_0_is_corruption_by_name() {
    let (storage, number) = mixed(1);
    let (records, end) = read_all(&storage, small_limits(200));
    let in_segment_0 = records.len();
    assert!(in_segment_0 >= 1);
    let ReadEnd::Corrupt(c) = end else {
        panic!("{end:?}")
    };
    assert_eq!(
        c.position,
        Position {
            segment: number,
            offset: 0
        }
    );
    assert_eq!(
        c.kind,
        CorruptionKind::FormatVersionMismatch {
            expected: 2,
            found: 1
        }
    );
    let text = c.to_string();
    assert!(
        text.contains("segment 00000000000000000001.segment offset 0")
            && text.contains("format version 1")
            && text.contains("says 2"),
        "{text}"
    );
    // A salvaging reader passes over the whole segment and names it.
    let mut reader = Reader::open_salvaging(storage.arc(), small_limits(200).limits).unwrap();
    let mut salvaged = 0;
    for record in reader.by_ref() {
        record.unwrap();
        salvaged += 1;
    }
    assert!(salvaged > in_segment_0);
    assert_eq!(reader.skipped()[0].position.segment, number);
    assert!(reader.skipped()[0].what.contains("format version"));
}

#[test]
fn a_writer_refuses_a_journal_whose_last_segment_changed_version() {
    // The writer reads only the last two segments: the one before the last decides.
    let (storage, number) = mixed(-1);
    match Journal::open(Arc::new(storage.clone()), small_limits(200)) {
        Err(JournalError::Corrupt { corruption, .. }) => {
            assert_eq!(corruption.position.segment, number);
            assert!(matches!(
                corruption.kind,
                CorruptionKind::FormatVersionMismatch { .. }
            ));
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a writer opened a journal of two versions"),
    }
}
