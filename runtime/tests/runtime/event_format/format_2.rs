//! Format 2's payload layout (docs/FORMAT.md, *Payload encoding*: varints) on representative
//! events, byte by byte: a call's events, an enum inside an enum, a signed number, and a time
//! of today (a `u64` over 2^32).

use super::{call, committed};
use journal::codec::Encoding;
use tooljournal_runtime::event::*;
use tooljournal_runtime::ErrorCode;

/// `value` as format 2 lays it out.
pub fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    journal::codec::encode_into(value, &mut out, 1 << 20, Encoding::Varint).unwrap();
    out
}

/// A `String` in format 2 (lengths below 251): one length byte, then the UTF-8 bytes.
fn string(s: &str) -> Vec<u8> {
    assert!(s.len() < 251);
    [&[s.len() as u8][..], s.as_bytes()].concat()
}

/// `call()` (turn 1, step 2, "c"): three bytes of numbers and length, then the id.
const CALL: [u8; 4] = [1, 2, 1, b'c'];

#[test]
fn a_rejected_event_in_format_2() {
    let event = Event::Rejected {
        call: call(),
        code: ErrorCode::SchemaError,
        reason: "bad".into(),
        source_seqs: vec![9],
    };
    let mut expected = vec![7, 13]; // at_ms, rejected
    expected.extend(CALL);
    expected.push(2); // SCHEMA_ERROR
    expected.extend(string("bad"));
    expected.extend([1, 9]); // one source seq, 9
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

#[test]
fn a_received_event_of_today_in_format_2() {
    // 1 700 000 000 123 ms is over 2^32: 253 and its 8 bytes. A seq of 300 is 251 and a u16.
    let at_ms = 1_700_000_000_123u64;
    let event = Event::Received {
        call: call(),
        index: 0,
        tool: "read".into(),
        raw_arguments: "{}".into(),
        source_seqs: vec![300],
    };
    let mut expected = vec![253];
    expected.extend(at_ms.to_le_bytes());
    expected.push(7); // received
    expected.extend(CALL);
    expected.push(0); // index
    expected.extend(string("read"));
    expected.extend(string("{}"));
    expected.extend([1, 251, 0x2C, 0x01]); // one seq: 300
    assert_eq!(encode(&Record { at_ms, event }), expected);
}

#[test]
fn approved_and_committed_in_format_2() {
    let approved = Event::Approved {
        call: call(),
        approval: Approval::Asked {
            answer: AskAnswer::Answered,
        },
        source_seqs: vec![4],
    };
    let mut expected = vec![7, 9];
    expected.extend(CALL);
    expected.extend([2, 5]); // Asked {answer: answered}: two one-byte indexes
    expected.extend([1, 4]);
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: approved
        }),
        expected
    );

    let committed = Event::Committed {
        call: call(),
        result: CommittedResult {
            code: Some(ErrorCode::QuestionUnanswered),
            ..committed()
        },
        source_seqs: vec![5],
    };
    let mut expected = vec![7, 12];
    expected.extend(CALL);
    expected.extend(string("x")); // content
    expected.push(0); // is_error: false
    expected.extend([1, 17]); // code: Some(QUESTION_UNANSWERED)
    expected.push(0); // value: none
    expected.extend([1, 5]);
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: committed
        }),
        expected
    );
}

#[test]
fn signed_numbers_are_zigzagged_in_format_2() {
    // ProcExit (1): pid 70 000 is 252 and a u32; status -1 zigzags to 1; signal 9 to 18;
    // process/killed's signal -15 to 29.
    let exit = SideEffect::ProcExit {
        pid: 70_000,
        status: Some(-1),
        signal: Some(9),
    };
    let mut expected = vec![1, 252];
    expected.extend(70_000u32.to_le_bytes());
    expected.extend([1, 1, 1, 18]);
    assert_eq!(encode(&exit), expected);
    let killed = Event::ProcessKilled {
        call: call(),
        pgid: 5,
        signal: -15,
    };
    let mut expected = vec![7, 27];
    expected.extend(CALL);
    expected.extend([5, 29]);
    assert_eq!(
        encode(&Record {
            at_ms: 7,
            event: killed
        }),
        expected
    );
}
