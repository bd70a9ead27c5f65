//! Schema 5 in docs/FORMAT.md against the codec and the runtime: the new `started` and
//! `recovery/rerun` field by field, the indexes of `Evidence` and `RerunPolicy`, and the worked
//! example of *Idempotency keys* against both the derivation as the document states it and
//! `idempotency_key`, so the document cannot drift from the code.

use super::{call, documented_variants, encode, format_md, string, variant_index};
use sha2::{Digest, Sha256};
use tooljournal_runtime::event::*;

#[test]
fn the_schema_5_started_is_laid_out_field_by_field_as_documented() {
    let key = idempotency_key("s", &call());
    let event = Event::Started(CallStarted {
        call: call(),
        attempt: 3,
        resources: Resources {
            reads: vec!["r".into()],
            writes: vec![],
            intents: vec!["i".into()],
        },
        idempotency_key: key.clone(),
        evidence: vec![
            Evidence::FileReplace {
                path: "new".into(),
                before_sha256: None,
                after_sha256: "aa".into(),
            },
            Evidence::FileReplace {
                path: "d/old".into(),
                before_sha256: Some("bb".into()),
                after_sha256: "cc".into(),
            },
        ],
        source_seqs: vec![4],
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes()); // at_ms
    expected.extend(37u32.to_le_bytes()); // started (schema 5)
    expected.extend(1u32.to_le_bytes()); // call.turn
    expected.extend(2u32.to_le_bytes()); // call.step
    expected.extend(string("c"));
    expected.extend(3u32.to_le_bytes()); // attempt
    expected.extend(1u64.to_le_bytes()); // reads
    expected.extend(string("r"));
    expected.extend(0u64.to_le_bytes()); // writes
    expected.extend(1u64.to_le_bytes()); // intents
    expected.extend(string("i"));
    expected.extend(string(&key)); // idempotency_key
    expected.extend(2u64.to_le_bytes()); // two evidence items
    expected.extend(0u32.to_le_bytes()); // FileReplace
    expected.extend(string("new"));
    expected.push(0); // before_sha256: none
    expected.extend(string("aa"));
    expected.extend(0u32.to_le_bytes()); // FileReplace
    expected.extend(string("d/old"));
    expected.push(1); // before_sha256: some
    expected.extend(string("bb"));
    expected.extend(string("cc"));
    expected.extend(1u64.to_le_bytes()); // source_seqs
    expected.extend(4u64.to_le_bytes());
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

#[test]
fn the_old_started_keeps_index_10_and_its_layout() {
    let event = Event::StartedV4 {
        call: call(),
        attempt: 1,
        resources: Resources::default(),
        source_seqs: vec![4],
    };
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(10u32.to_le_bytes()); // started (schemas 1 to 4)
    expected.extend(1u32.to_le_bytes());
    expected.extend(2u32.to_le_bytes());
    expected.extend(string("c"));
    expected.extend(1u32.to_le_bytes()); // attempt
    for _ in 0..3 {
        expected.extend(0u64.to_le_bytes()); // reads, writes, intents: none
    }
    expected.extend(1u64.to_le_bytes());
    expected.extend(4u64.to_le_bytes());
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

#[test]
fn a_recovery_rerun_is_laid_out_field_by_field_as_documented() {
    let other = CallRef {
        turn: 1,
        step: 2,
        call_id: "d".into(),
    };
    let event = Event::RecoveryRerun(RecoveryRerun {
        policy: RerunPolicy::NotStarted,
        calls: vec![call(), other],
    });
    let mut expected = Vec::new();
    expected.extend(7u64.to_le_bytes());
    expected.extend(38u32.to_le_bytes()); // recovery/rerun
    expected.extend(0u32.to_le_bytes()); // policy: not_started
    expected.extend(2u64.to_le_bytes()); // two calls
    for id in ["c", "d"] {
        expected.extend(1u32.to_le_bytes());
        expected.extend(2u32.to_le_bytes());
        expected.extend(string(id));
    }
    assert_eq!(encode(&Record { at_ms: 7, event }), expected);
}

#[test]
fn the_schema_5_variants_have_the_indexes_format_md_gives_them() {
    let replace = Evidence::FileReplace {
        path: "p".into(),
        before_sha256: None,
        after_sha256: "h".into(),
    };
    assert_eq!(variant_index(&replace), 0, "Evidence 0 FileReplace");
    let name = serde_json::to_value(&replace).unwrap();
    assert!(name.get("FileReplace").is_some(), "{name}");
    let doc = format_md();
    assert!(
        doc.lines().any(|l| l.starts_with(
            "- `Evidence` = 0 `FileReplace {path: String, before_sha256: Opt<String>, \
             after_sha256: String}`"
        )),
        "FORMAT.md defines Evidence"
    );

    let policies = [RerunPolicy::NotStarted, RerunPolicy::Safe];
    let by_serde: Vec<(u32, String)> = policies
        .iter()
        .map(|p| {
            let name = serde_json::to_value(p).unwrap();
            (variant_index(p), name.as_str().expect("a unit").to_owned())
        })
        .collect();
    assert_eq!(
        by_serde,
        [(0, "not_started".to_owned()), (1, "safe".to_owned())]
    );
    assert_eq!(documented_variants("RerunPolicy"), by_serde);
    // The command line's spelling, which the document gives beside the list.
    for policy in policies {
        assert!(
            doc.contains(&format!("`{}`", policy.as_str())),
            "FORMAT.md spells --rerun {}",
            policy.as_str()
        );
    }
}

/// The worked example of FORMAT.md's *Idempotency keys*: its `label: value` lines, the hashed
/// bytes (the `hashed:` line and the indented lines after it, notes in parentheses dropped) as
/// hex text.
struct KeyExample {
    session_id: String,
    call: CallRef,
    hashed_hex: String,
    key: String,
}

fn documented_key_example() -> KeyExample {
    let doc = format_md();
    let start = doc
        .find("```text\nsession id: ")
        .expect("FORMAT.md: the idempotency key example")
        + "```text\n".len();
    let block = &doc[start..start + doc[start..].find("```").expect("the block's end")];
    let mut fields = std::collections::BTreeMap::new();
    let mut hashed = String::new();
    let mut in_hashed = false;
    for line in block.lines() {
        let continued = line.starts_with(' ');
        let value = match line.split_once(": ") {
            Some((label, value)) if !continued => {
                in_hashed = label == "hashed";
                fields.insert(label.to_owned(), value.to_owned());
                value
            }
            _ if continued && in_hashed => line,
            _ => panic!("FORMAT.md key example: unexpected line {line:?}"),
        };
        if in_hashed {
            let mut depth = 0;
            hashed.extend(value.chars().filter(|c| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0 && c.is_ascii_hexdigit()
            }));
        }
    }
    let field = |label: &str| {
        fields
            .get(label)
            .unwrap_or_else(|| panic!("FORMAT.md key example: no {label:?}"))
            .clone()
    };
    let number = |label: &str| field(label).parse::<u32>().expect("a number");
    KeyExample {
        session_id: field("session id"),
        call: CallRef {
            turn: number("turn"),
            step: number("step"),
            call_id: field("call id"),
        },
        hashed_hex: hashed,
        key: field("key"),
    }
}

#[test]
fn the_idempotency_key_example_of_format_md_is_what_the_runtime_derives() {
    let example = documented_key_example();
    // The derivation as the document states it, step by step, with no code of the runtime.
    let mut hashed = Vec::new();
    hashed.extend((example.session_id.len() as u64).to_le_bytes());
    hashed.extend(example.session_id.as_bytes());
    hashed.extend(u64::from(example.call.turn).to_le_bytes());
    hashed.extend(u64::from(example.call.step).to_le_bytes());
    hashed.extend((example.call.call_id.len() as u64).to_le_bytes());
    hashed.extend(example.call.call_id.as_bytes());
    assert_eq!(hex::encode(&hashed), example.hashed_hex, "the hashed bytes");
    let derived = format!("tj1-{}", hex::encode(Sha256::digest(&hashed)));
    assert_eq!(derived, example.key, "the document's key is its derivation");
    assert_eq!(example.key.len(), IDEMPOTENCY_KEY_BYTES);
    // And the runtime derives the same.
    assert_eq!(
        idempotency_key(&example.session_id, &example.call),
        example.key
    );
}
