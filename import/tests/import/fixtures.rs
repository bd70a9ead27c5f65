//! The fixtures under `tests/data/import/<agent>/`: sessions written as each agent's own types
//! define them, each beside the classification expected of it (written by hand from the rules
//! in docs/IMPORT_FORMATS.md, never by this reader).

use crate::common;

use common::fixtures;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tooljournal_import::{read, Agent, Damage, Session, Verdict};

fn verdict_name(v: &Verdict) -> &'static str {
    match v {
        Verdict::Result { .. } => "result",
        Verdict::NotStarted { .. } => "not_started",
        Verdict::OutcomeUnknown { .. } => "unknown",
        Verdict::Placeholder { .. } => "placeholder",
    }
}

fn check(agent: Agent) {
    for file in fixtures(agent) {
        let name = file.display().to_string();
        let bytes = std::fs::read(&file).unwrap();
        let expected: Value =
            serde_json::from_slice(&std::fs::read(file.with_extension("expected.json")).unwrap())
                .unwrap_or_else(|e| panic!("{name}: expected.json: {e}"));
        let s: Session = read(agent, &bytes).unwrap();

        assert_eq!(
            s.session_id.as_deref(),
            expected["session_id"].as_str(),
            "{name}"
        );
        assert_eq!(s.model.as_deref(), expected["model"].as_str(), "{name}");
        let calls: BTreeMap<&str, &str> = s
            .calls
            .iter()
            .map(|c| (c.id.as_str(), verdict_name(&c.verdict)))
            .collect();
        let want: BTreeMap<&str, &str> = expected["calls"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
            .collect();
        assert_eq!(calls, want, "{name}: the calls' verdicts");
        let quarantined: Vec<Value> = s
            .quarantined
            .iter()
            .map(|q| {
                let kind = match q.damage {
                    Damage::Torn => "torn",
                    Damage::NotJson { .. } => "not_json",
                    Damage::Shape { .. } => "shape",
                };
                serde_json::json!([q.at.line, kind, q.followed_by_good])
            })
            .collect();
        assert_eq!(
            Value::Array(quarantined),
            expected["quarantined"],
            "{name}: quarantined lines {:?}",
            s.quarantined
        );
        let orphans: Vec<&str> = s
            .orphan_outputs
            .iter()
            .map(|o| o.call_id.as_str())
            .collect();
        let want: Vec<&str> = expected["orphan_outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(orphans, want, "{name}: outputs of no call");
        let unknown: Vec<&str> = s.unknown.iter().map(|(k, _)| k.as_str()).collect();
        let want: Vec<&str> = expected["unknown"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(unknown, want, "{name}: unknown types");
        for note in expected["notes"].as_array().into_iter().flatten() {
            let (line, words) = (note[0].as_u64().unwrap(), note[1].as_str().unwrap());
            assert!(
                s.notes
                    .iter()
                    .any(|(at, n)| at.line == line && n.contains(words)),
                "{name}: no note at line {line} saying {words:?}: {:?}",
                s.notes
            );
        }
        // Every verdict without an output says why; every result's line is in the file.
        for c in &s.calls {
            match &c.verdict {
                Verdict::Result { at, .. } => assert!(at.offset < bytes.len() as u64),
                Verdict::Placeholder { at, why, .. } => {
                    assert!(at.offset < bytes.len() as u64 && !why.is_empty(), "{name}")
                }
                Verdict::NotStarted { why } | Verdict::OutcomeUnknown { why } => {
                    assert!(!why.is_empty(), "{name}: {}", c.id)
                }
            }
        }
    }
}

#[test]
fn codex_fixtures_are_classified_as_expected() {
    check(Agent::Codex);
}

#[test]
fn pi_fixtures_are_classified_as_expected() {
    check(Agent::Pi);
}

#[test]
fn claude_code_fixtures_are_classified_as_expected() {
    check(Agent::ClaudeCode);
}

#[test]
fn a_quarantined_line_says_where_and_why() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/import/codex/bad_middle.jsonl");
    let bytes = std::fs::read(&file).unwrap();
    let s = read(Agent::Codex, &bytes).unwrap();
    let second = &s.quarantined[1];
    let line_start = bytes
        .split_inclusive(|b| *b == b'\n')
        .take(5)
        .map(|l| l.len() as u64)
        .sum::<u64>();
    assert_eq!((second.at.line, second.at.offset), (6, line_start));
    match &second.damage {
        Damage::Shape { why } => assert!(why.contains("name"), "names the field: {why}"),
        other => panic!("{other:?}"),
    }
}
