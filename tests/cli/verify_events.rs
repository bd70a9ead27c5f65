//! `tooljournal journal verify` checks events, not just frames, and agrees with `recover` (issue
//! 14 items 6 and 10): the same verdict and the same seq, segment and offset; a payload a
//! journal of a newer event schema holds is "written by a newer tooljournal" (exit 3), not
//! corruption.
//!
//! Each check runs on a journal of format 1 (fixint payloads, what older builds wrote and a
//! resumed version-1 journal keeps) and of format 2 (varint, what a new journal is), its raw
//! payloads laid out by hand in that format.

use journal::{FsStorage, Journal, Options};
use runtime::event::{
    Event, Record, SessionOpen, ToolDescriptor, ToolSource, TurnOutcome, EVENT_SCHEMA_VERSION,
};
use serde::ser::{Serialize, SerializeTuple, Serializer};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

/// Bytes appended as a payload exactly as they are (a tuple encodes with no length prefix).
struct Raw(Vec<u8>);

impl Serialize for Raw {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(self.0.len())?;
        for b in &self.0 {
            t.serialize_element(b)?;
        }
        t.end()
    }
}

/// The payload encoding of format `v`.
fn encoding(v: u32) -> journal::codec::Encoding {
    journal::codec::Encoding::of_format(v).expect("format 1 or 2")
}

fn encode(record: &Record, v: u32) -> Vec<u8> {
    let mut out = Vec::new();
    journal::codec::encode_into(record, &mut out, u64::MAX, encoding(v)).unwrap();
    out
}

fn open_record(schema_version: u32, tools: Vec<ToolDescriptor>) -> Record {
    Record {
        at_ms: 1,
        event: Event::SessionOpen(SessionOpen {
            schema_version,
            session_id: "s".into(),
            workspace: "/w".into(),
            tools,
        }),
    }
}

/// A record of format `v` whose at_ms is 7, whose event index is `index` and whose fields are
/// `rest` (laid out in that format by the caller).
fn raw_event(index: u32, rest: &[u8], v: u32) -> Vec<u8> {
    let mut p = encode_plain(&(7u64, index), v);
    p.extend_from_slice(rest);
    p
}

fn encode_plain<T: Serialize>(value: &T, v: u32) -> Vec<u8> {
    let mut out = Vec::new();
    journal::codec::encode_into(value, &mut out, u64::MAX, encoding(v)).unwrap();
    out
}

/// A journal of format `v` holding these payloads, in a fresh directory. Format 1: an empty
/// version-1 segment 0 is put there first, and the writer continues the journal in it.
fn journal_of(payloads: &[Vec<u8>], v: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if v == 1 {
        let header = journal::segment::SegmentHeader {
            format_version: 1,
            journal_id: [7; 16],
            segment_number: 0,
            first_seq: 1,
        };
        let segment0 = dir.path().join(journal::segment::file_name(0));
        std::fs::write(segment0, header.encode()).unwrap();
    }
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir.path()).unwrap()),
        Options::default(),
    )
    .unwrap();
    for p in payloads {
        journal.append(&Raw(p.clone())).unwrap();
    }
    journal.close().unwrap();
    dir
}

fn turn(n: u32, v: u32) -> Vec<Vec<u8>> {
    let start = Event::TurnStart {
        turn: n,
        user_text: "hello".into(),
    };
    let end = Event::TurnEnd {
        turn: n,
        outcome: TurnOutcome::Completed,
    };
    vec![
        encode(
            &Record {
                at_ms: 2,
                event: start,
            },
            v,
        ),
        encode(
            &Record {
                at_ms: 3,
                event: end,
            },
            v,
        ),
    ]
}

fn verify(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["journal", "verify", dir.to_str().unwrap()])
        .output()
        .expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn offset_of(dir: &Path, seq: u64) -> u64 {
    let storage: Arc<dyn journal::Storage> = Arc::new(FsStorage::open(dir).unwrap());
    journal::Reader::open(storage, journal::Limits::default())
        .unwrap()
        .map(|r| r.unwrap())
        .find(|r| r.seq == seq)
        .expect("the record")
        .position
        .offset
}

/// `journal verify` fails with exit `code` and exactly the message a read-only recovery gives.
fn assert_verify_agrees_with_recover(dir: &Path, code: i32) -> String {
    let out = verify(dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let recovered = recover::Recovery::of(dir)
        .run()
        .expect_err("recover refuses it");
    let expected_class = match code {
        2 => matches!(recovered, recover::RecoverError::Corrupt(_)),
        3 => matches!(recovered, recover::RecoverError::Newer(_)),
        _ => false,
    };
    assert!(expected_class, "recover said {recovered:?}");
    assert_eq!(stderr, format!("error: {recovered}\n"));
    stderr
}

/// A session/open of `schema` (no tools) and one turn, in format `v`.
fn opened(schema: u32, v: u32) -> Vec<Vec<u8>> {
    let mut payloads = vec![encode(&open_record(schema, vec![]), v)];
    payloads.extend(turn(1, v));
    payloads
}

fn an_unknown_event_type_is_corruption_naming_it(v: u32) {
    let mut payloads = opened(EVENT_SCHEMA_VERSION, v);
    payloads.push(raw_event(Event::VARIANT_COUNT, &[], v));
    let dir = journal_of(&payloads, v);
    let stderr = assert_verify_agrees_with_recover(dir.path(), 2);
    let offset = offset_of(dir.path(), 4);
    assert!(
        stderr.contains(&format!(
            "record seq 4 at segment 00000000000000000000.segment offset {offset}: unknown event type {}",
            Event::VARIANT_COUNT
        )),
        "{stderr}"
    );
}

#[test]
fn scenario_07_an_unknown_event_type_is_corruption_naming_it_in_verify_as_in_recover() {
    an_unknown_event_type_is_corruption_naming_it(1);
}

#[test]
fn scenario_07_in_format_2() {
    an_unknown_event_type_is_corruption_naming_it(2);
}

#[test]
fn a_garbage_payload_is_corruption_in_verify_as_in_recover() {
    for v in [1, 2] {
        let mut payloads = vec![encode(&open_record(EVENT_SCHEMA_VERSION, vec![]), v)];
        // turn/start whose user_text says 1000 bytes and has 3.
        let mut rest = encode_plain(&(1u32, 1000u64), v);
        rest.extend_from_slice(b"abc");
        payloads.push(raw_event(1, &rest, v));
        let dir = journal_of(&payloads, v);
        let stderr = assert_verify_agrees_with_recover(dir.path(), 2);
        let offset = offset_of(dir.path(), 2);
        assert!(
            stderr.contains(&format!(
                "record seq 2 at segment 00000000000000000000.segment offset {offset}: payload does not decode as an event"
            )),
            "format {v}: {stderr}"
        );
    }
}

/// A payload damaged where bincode has words of its own (an integer that begins with the byte
/// 255, "an extension point … a mismatched bincode version"): `verify` and `recover` say what is
/// wrong with the record in the journal's words.
#[test]
fn a_damaged_payload_is_described_without_the_codec_s_words() {
    let mut payloads = vec![encode(&open_record(EVENT_SCHEMA_VERSION, vec![]), 2)];
    payloads.push(raw_event(1, &[255, 1, 2, 3], 2));
    let dir = journal_of(&payloads, 2);
    let stderr = assert_verify_agrees_with_recover(dir.path(), 2);
    assert!(
        stderr.contains("an integer in it begins with the byte 255, which no journal writes"),
        "{stderr}"
    );
    for theirs in ["bincode", "extension point"] {
        assert!(!stderr.contains(theirs), "{stderr}");
    }
}

fn an_unknown_event_in_a_newer_schema_is_newer(v: u32) {
    let newer = EVENT_SCHEMA_VERSION + 1;
    let mut payloads = opened(newer, v);
    payloads.push(raw_event(Event::VARIANT_COUNT, &[1, 2, 3], v));
    let dir = journal_of(&payloads, v);
    let stderr = assert_verify_agrees_with_recover(dir.path(), 3);
    assert!(
        stderr.contains(&format!(
            "record seq 4 at segment 00000000000000000000.segment offset {}: written by a newer tooljournal (schema {newer} > {EVENT_SCHEMA_VERSION})",
            offset_of(dir.path(), 4)
        )),
        "{stderr}"
    );
}

#[test]
fn an_unknown_event_in_a_newer_schema_is_reported_as_newer_not_corrupt() {
    an_unknown_event_in_a_newer_schema_is_newer(1);
}

#[test]
fn an_unknown_event_in_a_newer_schema_is_newer_in_format_2() {
    an_unknown_event_in_a_newer_schema_is_newer(2);
}

#[test]
fn an_unknown_variant_inside_session_open_of_a_newer_schema_is_newer() {
    // session/open whose one tool has a `ToolSource` variant this build does not know; the
    // bytes patched are format 1's.
    let newer = EVENT_SCHEMA_VERSION + 1;
    let known = encode(
        &open_record(
            newer,
            vec![ToolDescriptor {
                name: "t".into(),
                source: ToolSource::BuiltIn,
                version: "1".into(),
                schema_hash: "h".into(),
            }],
        ),
        1,
    );
    // The source's variant index follows the tool's name: 8-byte length + "t".
    let name_at = known
        .windows(9)
        .position(|w| w == [1, 0, 0, 0, 0, 0, 0, 0, b't'])
        .expect("the tool's name");
    let mut patched = known.clone();
    patched[name_at + 9..name_at + 13].copy_from_slice(&3u32.to_le_bytes());
    let dir = journal_of(&[patched.clone()], 1);
    let stderr = assert_verify_agrees_with_recover(dir.path(), 3);
    assert!(
        stderr.contains(&format!("record seq 1 at segment 00000000000000000000.segment offset 48: written by a newer tooljournal (schema {newer} > {EVENT_SCHEMA_VERSION})")),
        "{stderr}"
    );

    // The same bytes with the schema this build knows: corruption.
    patched[12..16].copy_from_slice(&EVENT_SCHEMA_VERSION.to_le_bytes());
    let dir = journal_of(&[patched], 1);
    let stderr = assert_verify_agrees_with_recover(dir.path(), 2);
    assert!(stderr.contains("payload does not decode"), "{stderr}");
}

#[test]
fn a_newer_schema_whose_events_all_decode_verifies_clean() {
    for v in [1, 2] {
        let dir = journal_of(&opened(EVENT_SCHEMA_VERSION + 1, v), v);
        let out = verify(dir.path());
        assert_eq!(
            out.status.code(),
            Some(0),
            "format {v}: {}",
            text(&out.stderr)
        );
        assert!(text(&out.stdout).contains("clean: 3 records"));
        let segment0 = std::fs::read(dir.path().join(journal::segment::file_name(0))).unwrap();
        assert_eq!(
            segment0[8..12],
            v.to_le_bytes(),
            "the journal is format {v}"
        );
    }
}
