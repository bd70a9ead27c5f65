//! `repair` on every fixture: the copy answers every call the agent will replay and no other,
//! moves out only the lines that are not JSON, keeps pi's chain whole, and is a fixed point.

use crate::common;

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use tooljournal_import::{check_repair, read, repair, Agent, Damage, Verdict};

/// The ids of the calls that have no output and that the agent sends again on resume.
fn replayed_orphans(agent: Agent, bytes: &[u8]) -> Vec<String> {
    read(agent, bytes)
        .unwrap()
        .calls
        .iter()
        .filter(|c| match c.verdict {
            Verdict::Result { .. } | Verdict::Placeholder { .. } => false,
            Verdict::NotStarted { .. } => agent != Agent::Pi,
            Verdict::OutcomeUnknown { .. } => true,
        })
        .map(|c| c.id.clone())
        .collect()
}

fn check_agent(agent: Agent) {
    for (name, bytes) in common::fixture_bytes(agent) {
        let before = read(agent, &bytes).unwrap();
        let r = repair(agent, &bytes).unwrap();
        let again = check_repair(agent, &r).unwrap_or_else(|e| panic!("{name}: {e}"));

        // Answered: exactly the replayed orphans, each with the truth and its code.
        let answered: Vec<&str> = r.answered.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(answered, replayed_orphans(agent, &bytes), "{name}");
        for (id, _) in &r.answered {
            let call = again.calls.iter().find(|c| &c.id == id).unwrap();
            let Verdict::Result { text, .. } = &call.verdict else {
                unreachable!()
            };
            let text = again.text(*text).unwrap();
            let was = before.calls.iter().find(|c| &c.id == id).unwrap();
            let code = match was.verdict {
                Verdict::NotStarted { .. } => "TOOL_NOT_STARTED",
                _ => "TOOL_OUTCOME_UNKNOWN",
            };
            assert!(text.starts_with(code), "{name}: {id}: {text}");
            assert!(
                text != "aborted" && !text.starts_with("No result provided"),
                "{name}: never the agents' canned words: {text}"
            );
        }
        // Every call that had an output keeps it, word for word.
        for c in &before.calls {
            if let Verdict::Result { text, is_error, .. } = &c.verdict {
                let after = again.calls.iter().find(|d| d.id == c.id).unwrap();
                let text = before.text(*text).unwrap();
                assert!(
                    matches!(&after.verdict, Verdict::Result { text: t, is_error: e, .. } if again.text(*t).unwrap() == text && e == is_error),
                    "{name}: {} changed",
                    c.id
                );
            }
        }
        // pi's calls it never ran stay without a result: pi drops their messages on replay.
        if agent == Agent::Pi {
            for c in &before.calls {
                if matches!(c.verdict, Verdict::NotStarted { .. }) {
                    let after = again.calls.iter().find(|d| d.id == c.id).unwrap();
                    assert!(
                        matches!(after.verdict, Verdict::NotStarted { .. }),
                        "{name}: {}",
                        c.id
                    );
                }
            }
        }

        // Moved: the lines that are not JSON, byte for byte, and (pi, whose fixtures have one
        // branch) the results of no call; lines of a shape this reader does not know stay.
        let mut moved: Vec<(u64, usize)> = before
            .quarantined
            .iter()
            .filter(|q| matches!(q.damage, Damage::Torn | Damage::NotJson { .. }))
            .map(|q| (q.at.line, q.at.offset as usize))
            .collect();
        if agent == Agent::Pi {
            moved.extend(
                before
                    .orphan_outputs
                    .iter()
                    .map(|o| (o.at.line, o.at.offset as usize)),
            );
        }
        moved.sort();
        assert_eq!(
            r.moved.iter().map(|s| s.line).collect::<Vec<_>>(),
            moved.iter().map(|(line, _)| *line).collect::<Vec<_>>(),
            "{name}"
        );
        let mut expected_quarantine = Vec::new();
        for (_, start) in &moved {
            let end = bytes[*start..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |n| start + n);
            expected_quarantine.extend_from_slice(&bytes[*start..end]);
            expected_quarantine.push(b'\n');
        }
        assert_eq!(r.quarantine, expected_quarantine, "{name}: the quarantine");
        assert!(
            again
                .quarantined
                .iter()
                .all(|q| matches!(q.damage, Damage::Shape { .. })),
            "{name}: {:?}",
            again.quarantined
        );
        assert_eq!(r.bytes.last(), Some(&b'\n'), "{name}: ends with a newline");

        match agent {
            Agent::Pi => pi_chain_is_whole(&name, &r.bytes),
            Agent::ClaudeCode => claude_chain_is_whole(&name, &r.bytes),
            Agent::Codex => {}
        }

        // A fixed point: a repaired file needs nothing more.
        let twice = repair(agent, &r.bytes).unwrap();
        assert_eq!(
            twice.bytes, r.bytes,
            "{name}: repairing again changes bytes"
        );
        assert!(twice.answered.is_empty() && twice.moved.is_empty() && twice.relinked.is_empty());
    }
}

/// The lines an agent replays: from the last line with an id (`id_key`) up through parent
/// links (`parent_key`), root first; every parent named in the file must be in it.
fn replayed_path(name: &str, bytes: &[u8], id_key: &str, parent_key: &str) -> Vec<Value> {
    let lines: Vec<Value> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let by_id: HashMap<&str, &Value> = lines
        .iter()
        .filter_map(|l| Some((l[id_key].as_str()?, l)))
        .collect();
    for l in &lines {
        if let Some(parent) = l[parent_key].as_str() {
            assert!(
                by_id.contains_key(parent),
                "{name}: parent {parent} missing"
            );
        }
    }
    let mut path = Vec::new();
    let mut at = lines.iter().rev().find(|l| l[id_key].is_string());
    while let Some(l) = at {
        path.push(l.clone());
        at = l[parent_key].as_str().and_then(|p| by_id.get(p).copied());
    }
    path.reverse();
    path
}

/// pi's context is the chain from the last entry up: every parent is there, and every call on
/// it that pi replays has its result on it too.
fn pi_chain_is_whole(name: &str, bytes: &[u8]) {
    let path = replayed_path(name, bytes, "id", "parentId");
    let results: Vec<&str> = path
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .filter_map(|e| e["message"]["toolCallId"].as_str())
        .collect();
    for e in &path {
        let m = &e["message"];
        if m["role"] != "assistant" || matches!(m["stopReason"].as_str(), Some("error" | "aborted"))
        {
            continue;
        }
        for block in m["content"].as_array().unwrap() {
            if block["type"] == "toolCall" {
                let id = block["id"].as_str().unwrap();
                assert!(
                    results.contains(&id),
                    "{name}: {id} has no result on pi's path"
                );
            }
        }
    }
}

/// Claude Code's conversation is the chain from the last line up, each response on it whole
/// (its lines share the API message id) with the results hung under any of its lines: every
/// parent is there, and every `tool_use` of those responses has exactly one `tool_result`, on
/// the chain after it or under one of the response's lines.
fn claude_chain_is_whole(name: &str, bytes: &[u8]) {
    let path = replayed_path(name, bytes, "uuid", "parentUuid");
    let all: Vec<Value> = (bytes.split(|b| *b == b'\n'))
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let results_of = |l: &Value| -> Vec<Value> {
        let blocks = l["message"]["content"].as_array().into_iter().flatten();
        let ids = blocks.filter(|b| b["type"] == "tool_result");
        ids.map(|b| b["tool_use_id"].clone()).collect()
    };
    for (i, l) in path.iter().enumerate() {
        if l["type"] != "assistant" {
            continue;
        }
        let response = &l["message"]["id"];
        let lines: Vec<&Value> = (all.iter())
            .filter(|m| m["type"] == "assistant" && m["message"]["id"] == *response)
            .collect();
        let uuids: Vec<&Value> = lines.iter().map(|m| &m["uuid"]).collect();
        let hung: Vec<Value> = (all.iter())
            .filter(|r| r["type"] == "user" && uuids.contains(&&r["parentUuid"]))
            .filter(|r| !path.contains(r))
            .flat_map(results_of)
            .collect();
        let later: Vec<Value> = path[i + 1..].iter().flat_map(results_of).collect();
        for block in l["message"]["content"].as_array().unwrap() {
            if block["type"] != "tool_use" {
                continue;
            }
            let id = &block["id"];
            let answers = later.iter().chain(&hung).filter(|r| *r == id).count();
            assert_eq!(
                answers, 1,
                "{name}: {id} has {answers} tool_results after it on the chain or under its \
                 response"
            );
        }
    }
}

#[test]
fn claude_code_repairs_answer_every_orphan_and_keep_the_chain_whole() {
    check_agent(Agent::ClaudeCode);
}

#[test]
fn codex_repairs_answer_every_orphan_and_move_only_what_is_not_json() {
    check_agent(Agent::Codex);
}

#[test]
fn pi_repairs_answer_every_replayed_orphan_and_keep_the_chain_whole() {
    check_agent(Agent::Pi);
}

#[test]
fn a_codex_answer_sits_right_after_its_call() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/import/codex/parallel_missing.jsonl");
    let r = repair(Agent::Codex, &std::fs::read(file).unwrap()).unwrap();
    let lines: Vec<Value> = r
        .bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let call = lines
        .iter()
        .position(|l| l["payload"]["call_id"] == "call_p2")
        .unwrap();
    let answer = &lines[call + 1];
    assert_eq!(answer["type"], "response_item");
    assert_eq!(answer["payload"]["type"], "function_call_output");
    assert_eq!(answer["payload"]["call_id"], "call_p2");
    assert_eq!(
        answer["timestamp"], lines[call]["timestamp"],
        "the call's own time"
    );
}

/// Every fixture of every agent, read from its file (texts kept in a temporary file) and
/// repaired into files, says and writes what the same bytes read in memory do: the streaming
/// reading changes where the texts are, never what they are.
#[test]
fn a_file_read_where_it_lies_says_what_its_bytes_in_memory_say() {
    use tooljournal_import::{read_from, repair_into, Input, Item, Session};
    fn texts(s: &Session) -> Vec<String> {
        let mut out = Vec::new();
        for item in &s.items {
            match item {
                Item::User { text, .. } | Item::Assistant { text, .. } => {
                    out.push(s.text(*text).unwrap())
                }
                Item::Output { .. } => {}
            }
        }
        for c in &s.calls {
            out.push(s.text(c.arguments).unwrap());
            if let Verdict::Result { text, .. } | Verdict::Placeholder { text, .. } = &c.verdict {
                out.push(s.text(*text).unwrap());
            }
        }
        out
    }
    for agent in [Agent::Codex, Agent::Pi, Agent::ClaudeCode] {
        for (name, bytes) in common::fixture_bytes(agent) {
            let in_memory = read(agent, &bytes).unwrap();
            let mut file = tempfile::tempfile().unwrap();
            std::io::Write::write_all(&mut file, &bytes).unwrap();
            let input = Input::file(&file).unwrap();
            let from_file = read_from(agent, input).unwrap();
            assert_eq!(texts(&from_file), texts(&in_memory), "{name}");
            assert_eq!(from_file.quarantined, in_memory.quarantined, "{name}");
            let r = repair(agent, &bytes).unwrap();
            let (mut copy, mut quarantine) = (Vec::new(), Vec::new());
            let made = repair_into(agent, input, &mut copy, &mut quarantine).unwrap();
            assert_eq!(made, r.made, "{name}");
            assert_eq!(
                (copy, quarantine),
                (r.bytes.clone(), r.quarantine.clone()),
                "{name}"
            );
            assert_eq!(made.copy_bytes, r.bytes.len() as u64, "{name}");
        }
    }
}
