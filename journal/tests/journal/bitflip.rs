//! Every single-bit flip at every byte of a journal: no altered record is ever returned, and a
//! flip anywhere but the last record is corruption at the right place (DESIGN.md I7).

use crate::common;

use common::*;
use tooljournal_journal::{CorruptionKind, Position, ReadEnd, SimStorage};

#[test]
fn every_bit_flip_is_caught_where_it_is() {
    let options = small_limits(260);
    let original = SimStorage::new();
    let written = write_records(&original, options, &[5, 60, 0, 33, 90, 12, 7, 40]);
    let (records, end) = read_all(&original, options);
    assert_eq!(end, ReadEnd::Clean);
    let segs = segments(&original);
    assert!(segs.len() >= 2, "want at least two segments");
    let last = records.last().expect("records").position;

    for (seg_index, (name, bytes)) in segs.iter().enumerate() {
        for byte in 0..bytes.len() {
            for bit in 0..8 {
                let storage = original.process_crash();
                let mut damaged = bytes.clone();
                damaged[byte] ^= 1 << bit;
                storage.put_file(name, damaged);
                let (got, end) = read_all(&storage, options);
                let at = format!("flip of bit {bit} at {name} byte {byte}");

                // Whatever is returned is exactly what was written, from the start.
                assert_eq!(payloads(&got), written[..got.len()].to_vec(), "{at}");
                for (r, orig) in got.iter().zip(&records) {
                    assert_eq!((r.seq, r.position), (orig.seq, orig.position), "{at}");
                }

                let offset = byte as u64;
                let in_header = offset < tooljournal_journal::segment::HEADER_BYTES as u64;
                let hit = records
                    .iter()
                    .find(|r| {
                        r.position.segment == seg_index as u64
                            && (r.position.offset..r.position.offset + r.frame_bytes)
                                .contains(&offset)
                    })
                    .map(|r| r.position);
                match (in_header, hit) {
                    (true, _) => match &end {
                        ReadEnd::Corrupt(c) => {
                            assert_eq!(
                                c.position,
                                Position {
                                    segment: seg_index as u64,
                                    offset: 0
                                },
                                "{at}"
                            );
                            assert!(matches!(c.kind, CorruptionKind::BadHeader(_)), "{at}: {c}");
                        }
                        other => panic!("{at}: expected a bad header, got {other:?}"),
                    },
                    (false, Some(pos)) if pos == last => match &end {
                        ReadEnd::TornTail(t) => assert_eq!(t.position, pos, "{at}"),
                        other => {
                            panic!("{at}: a flip in the last record is a torn tail, got {other:?}")
                        }
                    },
                    (false, Some(pos)) => match &end {
                        ReadEnd::Corrupt(c) => {
                            assert_eq!(c.position, pos, "{at}");
                            assert!(matches!(c.kind, CorruptionKind::BadRecord(_)), "{at}: {c}");
                        }
                        other => panic!("{at}: expected corruption at {pos}, got {other:?}"),
                    },
                    (false, None) => panic!("{at}: byte belongs to no record"),
                }
            }
        }
    }
}
