//! Format 2 (FORMAT.md, *Payload encoding*): the varint layout byte by byte on representative
//! events, and the versioning rule read through it (the schema is no longer at a fixed byte).

use super::sample::every_event;
use super::{events, payloads_of, runtime_verdict, Layout};
use runtime::event::{Event, Record, SessionOpen};

/// A varint as FORMAT.md spells it: one byte below 251, else 251/252/253 and a `u16`/`u32`/
/// `u64`, little-endian.
fn varint(v: u64) -> Vec<u8> {
    match v {
        0..=250 => vec![v as u8],
        251..=0xFFFF => [&[251][..], &(v as u16).to_le_bytes()].concat(),
        0x1_0000..=0xFFFF_FFFF => [&[252][..], &(v as u32).to_le_bytes()].concat(),
        _ => [&[253][..], &v.to_le_bytes()].concat(),
    }
}

fn string(s: &str) -> Vec<u8> {
    [varint(s.len() as u64), s.as_bytes().to_vec()].concat()
}

/// The payload of the `nth` record of `kind` in `records`, and where its event's fields start:
/// after `at_ms` (a `u64` over 2^32: 253 and 8 bytes) and the event index (one byte).
fn payload_of<'a>(records: &[Record], payloads: &'a [Vec<u8>], kind: &str, nth: usize) -> &'a [u8] {
    let i = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.event.kind() == kind)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {kind} number {nth}"))
        .0;
    let p = &payloads[i];
    assert_eq!(p[..9], varint(records[i].at_ms)[..], "{kind}: at_ms");
    p
}

#[test]
fn hand_checked_payloads_of_format_2() {
    let records = every_event();
    let payloads = payloads_of(&records, 2);
    let of = |kind: &str, nth: usize| payload_of(&records, &payloads, kind, nth);
    // `session/open`: at_ms, index 0, then the schema as a one-byte varint.
    let open = of("session/open", 0);
    assert_eq!(open[9..11], [0, runtime::event::EVENT_SCHEMA_VERSION as u8]);
    // `ProcExit` (variant 1): pid 4242 is 251 and a `u16`; status `Some(-1)` zigzags to 1;
    // `Some(i32::MIN)` zigzags to 2^32 − 1, 252 and a `u32`.
    let settled = of("settled", 0);
    let first = [1, 251, 0x92, 0x10, 1, 1, 0];
    assert!(settled.windows(7).any(|w| w == first), "{settled:?}");
    let second = [1, 1, 0, 1, 252, 0xFF, 0xFF, 0xFF, 0xFF];
    assert!(settled.windows(9).any(|w| w == second), "{settled:?}");
    // `recovery`: the tuple (1, 2) and `Some(1)` are one byte per number.
    let recovery = of("recovery", 0);
    assert!(recovery.ends_with(&[1, 1, 2, 1, 1]), "{recovery:?}");
    // `session/model` settings: `Some(4096)` as 251 and a `u16`; an f64 stays 8 bytes.
    let model = of("session/model", 0);
    let settings = [1, 251, 0x00, 0x10, 1, 0, 0, 0, 0, 0, 0, 0xE0, 0x3F];
    assert!(model.windows(13).any(|w| w == settings), "{model:?}");
    // `llm/attempt-failed` (31): turn 1, step 2, attempt 2, kind 1, status `Some(503)`.
    let failed = of("llm/attempt-failed", 1);
    assert_eq!(failed[9..17], [31, 1, 2, 2, 1, 1, 251, 0xF7]);
    // `ask/reply` (34) after its `CallRef` (turn 1, step 2, "call_1"): `Answered` (0), no choice,
    // no text; `Declined` (1), no text.
    let call = [&[1, 2][..], &string("call_1")].concat();
    let answered = of("ask/reply", 1);
    assert_eq!(answered[9..], [&[34][..], &call, &[0, 0, 0]].concat()[..]);
    let declined = of("ask/reply", 3);
    assert_eq!(declined[9..], [&[34][..], &call, &[1, 0]].concat()[..]);
    // `started` (37): `CallRef`, attempt, `Resources`, key, evidence, `source_seqs`.
    let Some(Event::Started(written)) = records
        .iter()
        .map(|r| &r.event)
        .find(|e| matches!(e, Event::Started(_)))
    else {
        panic!("the sample has a schema-5 started");
    };
    let mut want = vec![37];
    want.extend(&call);
    want.push(1); // attempt
    want.push(0); // reads: none
    want.push(2); // writes: two
    want.extend(string("new.txt"));
    want.extend(string("src/old.rs"));
    want.push(0); // intents: none
    want.extend(string(&written.idempotency_key)); // 68 bytes: one-byte length
    want.push(2); // two evidence items
    want.push(0); // FileReplace
    want.extend(string("new.txt"));
    want.push(0); // before_sha256: none
    want.extend(string("aa"));
    want.push(0);
    want.extend(string("src/old.rs"));
    want.push(1);
    want.extend(string("bb"));
    want.extend(string("cc"));
    want.extend([2, 9, 10]); // source_seqs
    assert_eq!(of("started", 1)[9..], want[..]);
    // `context/compacted` (36): tokens_before 210 000 is 252 and a `u32`.
    let compacted = of("context/compacted", 0);
    let mut tail = vec![0, 1, 3, 1]; // summary_note: none; one pair (3, 1)
    tail.extend(varint(2_000)); // preview_chars
    tail.extend(varint(210_000)); // tokens_before
    tail.extend(varint(40_000)); // tokens_after
    assert_eq!(
        tail[4..],
        [251, 0xD0, 0x07, 252, 0x50, 0x34, 0x03, 0x00, 251, 0x40, 0x9C]
    );
    assert!(compacted.ends_with(&tail), "{compacted:?}");
}

/// The records of [`every_event`] with `session/open` declaring `schema`, in format 2.
fn with_schema(schema: u32) -> Vec<Vec<u8>> {
    let mut records = every_event();
    match &mut records[0].event {
        Event::SessionOpen(SessionOpen { schema_version, .. }) => *schema_version = schema,
        other => panic!("the sample starts with {}", other.kind()),
    }
    payloads_of(&records, 2)
}

/// An unknown event type, an unknown variant deep inside (a `SideEffect`), trailing bytes.
type Damage = (usize, fn(&mut Vec<u8>));

fn damages() -> [Damage; 3] {
    let settled = every_event()
        .iter()
        .position(|r| matches!(r.event, Event::Settled { .. }))
        .expect("the sample has a settled");
    [
        // The event index, right after `at_ms` (9 bytes).
        (5, |p| p[9] = Event::VARIANT_COUNT as u8),
        (settled, |p| {
            // The side-effect count (7), then the first one: `FsWrite` (0), path "a".
            let at = p.windows(4).position(|w| w == [7, 0, 1, b'a']).unwrap() + 1;
            p[at] = 5;
        }),
        (2, |p| p.push(0)),
    ]
}

/// The verdicts for each damage, under the schema this reader knows and a newer one, with
/// what the rule expects.
fn cases(verdict: impl Fn(&[Vec<u8>]) -> events::Verdict) {
    use events::Verdict;
    let newer = events::DOC_SCHEMA + 1;
    for schema in [events::DOC_SCHEMA, newer] {
        let p = with_schema(schema);
        assert_eq!(verdict(&p), Verdict::Read(p.len()), "schema {schema}");
    }
    for (index, damage) in damages() {
        for schema in [events::DOC_SCHEMA, newer] {
            let mut p = with_schema(schema);
            damage(&mut p[index]);
            let expected = if schema > events::DOC_SCHEMA {
                Verdict::Newer { index, schema }
            } else {
                Verdict::Corrupt { index }
            };
            assert_eq!(verdict(&p), expected, "record {index}, schema {schema}");
        }
    }
}

#[test]
fn the_versioning_rule_reads_the_schema_through_the_varint_layout() {
    cases(|p| events::verdict(p, Layout::Varint));
}

#[test]
fn the_versioning_rule_in_format_2_agrees_with_the_runtime() {
    cases(|p| runtime_verdict(p, Layout::Varint));
}
