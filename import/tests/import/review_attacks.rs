//! An adversarial review of `import`: each test states a promise of DESIGN §13 /
//! IMPORT_FORMATS.md and a file that once broke it (the comments tell how it broke; each is
//! fixed). The pi checks replay the repaired
//! copy the way pi itself loads it (session-manager.ts `loadEntriesFromFile`, `_buildIndex`,
//! `buildSessionContext`) and sends it (transform-messages.ts), see `pi_replay`.

use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use tooljournal_import::{check_repair, read, repair, Agent, Verdict};

// ---------------------------------------------------------------- pi, as pi reads it

/// What pi would do with `bytes` on resume, as a list of problems (empty: the provider gets a
/// well-formed conversation). Mirrors pi-mono HEAD:
/// - `loadEntriesFromFile`: `content.trim().split("\n")` (JS `trim` strips a leading BOM),
///   `JSON.parse` each non-blank line, malformed lines skipped; first parsed entry must be a
///   `session` header with a string id, else the file is discarded (and rewritten fresh);
/// - `_buildIndex`: reads `entry.type` of every entry (a `null` entry throws), leaf = last
///   entry's `id`;
/// - `buildSessionContext`: walk `parentId` from the leaf, compaction handling;
/// - `transformMessages`: skip `error`/`aborted` assistants, synthesize "No result provided"
///   for pending calls at the next user/assistant, pass every toolResult through.
fn pi_replay(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let mut entries: Vec<Value> = Vec::new();
    for line in text.split('\n') {
        if line.trim().is_empty() {
            continue;
        }
        // JSON.parse accepts JSON whitespace (incl. \r) around the value, not a BOM.
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            entries.push(v);
        }
    }
    let mut problems = Vec::new();
    match entries.first() {
        None => return vec!["empty".into()],
        Some(Value::Null) => return vec!["pi throws: first entry is null".into()],
        Some(h) if h["type"] == "session" && h["id"].is_string() => {}
        Some(_) => {
            return vec![
                "pi discards the file: first parsed entry is not the session header".into(),
            ]
        }
    }
    if entries.iter().any(Value::is_null) {
        return vec!["pi throws in _buildIndex: an entry is null".into()];
    }
    // v1 → v2 migration: ids and parents by file order.
    if entries[0]["version"].as_u64().unwrap_or(1) < 2 {
        let mut prev = Value::Null;
        for (i, e) in entries.iter_mut().enumerate().skip(1) {
            if let Value::Object(o) = e {
                let id = json!(format!("mig{i}"));
                o.insert("id".into(), id.clone());
                o.insert("parentId".into(), prev.clone());
                prev = id;
            }
        }
    }
    let body = &entries[1..];
    let mut by_id: HashMap<String, &Value> = HashMap::new();
    let mut leaf_id: Option<String> = None;
    for e in body {
        if e["type"] == "session" {
            continue;
        }
        leaf_id = e["id"].as_str().map(str::to_owned);
        if let Some(id) = &leaf_id {
            by_id.insert(id.clone(), e);
        }
    }
    let leaf = leaf_id
        .as_ref()
        .and_then(|id| by_id.get(id).copied())
        .or(body.last());
    let mut path: Vec<&Value> = Vec::new();
    let mut seen = HashSet::new();
    let mut at = leaf;
    while let Some(e) = at {
        if !seen.insert(e as *const Value) {
            problems.push("cycle in parentId: pi's walk never ends".into());
            break;
        }
        path.insert(0, e);
        at = e["parentId"].as_str().and_then(|p| by_id.get(p).copied());
    }
    let compaction = path.iter().rposition(|e| e["type"] == "compaction");
    let kept: Vec<&Value> = match compaction {
        Some(c) => {
            let first = path[c]["firstKeptEntryId"].clone();
            let start = path[..c].iter().position(|e| e["id"] == first).unwrap_or(c);
            path[start..c]
                .iter()
                .chain(&path[c + 1..])
                .copied()
                .collect()
        }
        None => path,
    };
    let messages: Vec<&Value> = kept
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let mut pending: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    let flush = |pending: &mut Vec<String>, answered: &mut Vec<String>, p: &mut Vec<String>| {
        for id in pending.iter() {
            if !answered.contains(id) {
                p.push(format!(
                    "call {id} has no result: pi sends \"No result provided\""
                ));
            }
        }
        pending.clear();
        answered.clear();
    };
    for m in messages {
        match m["role"].as_str() {
            Some("assistant") => {
                flush(&mut pending, &mut answered, &mut problems);
                if matches!(m["stopReason"].as_str(), Some("error" | "aborted")) {
                    continue;
                }
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "toolCall" {
                        pending.push(b["id"].as_str().unwrap_or("").to_owned());
                    }
                }
            }
            Some("toolResult") => {
                let id = m["toolCallId"].as_str().unwrap_or("").to_owned();
                if !pending.contains(&id) {
                    problems.push(format!("toolResult {id} reaches the provider with no call"));
                } else if answered.contains(&id) {
                    problems.push(format!("toolResult {id} sent twice for one call"));
                }
                answered.push(id);
            }
            Some("user") => flush(&mut pending, &mut answered, &mut problems),
            _ => {}
        }
    }
    for id in &pending {
        if !answered.contains(id) {
            problems.push(format!("call {id} is last and has no result: provider 400"));
        }
    }
    problems
}

fn pi_header() -> String {
    r#"{"type":"session","version":3,"id":"5f0c2a9e-1b7d-4c3e-9a10-2b8f6d4e7c11","timestamp":"2026-11-20T10:00:00.000Z","cwd":"/p"}"#.into()
}

fn pi_user(id: &str, parent: Option<&str>, text: &str) -> String {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-20T10:00:01.000Z",
        "message":{"role":"user","content":text,"timestamp":1}})
    .to_string()
}

fn pi_assistant(id: &str, parent: &str, calls: &[&str], stop: &str) -> String {
    let content: Vec<Value> = calls
        .iter()
        .map(|c| json!({"type":"toolCall","id":c,"name":"bash","arguments":{"command":"ls"}}))
        .chain(std::iter::once(json!({"type":"text","text":"ok"})))
        .collect();
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-20T10:00:02.000Z",
        "message":{"role":"assistant","content":content,"api":"anthropic-messages",
        "provider":"anthropic","model":"m","stopReason":stop,"timestamp":2}})
    .to_string()
}

fn pi_result(id: &str, parent: &str, call: &str) -> String {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-20T10:00:03.000Z",
        "message":{"role":"toolResult","toolCallId":call,"toolName":"bash",
        "content":[{"type":"text","text":"a.txt"}],"isError":false,"timestamp":3}})
    .to_string()
}

fn file(lines: &[String]) -> Vec<u8> {
    let mut out = lines.join("\n").into_bytes();
    out.push(b'\n');
    out
}

fn verdicts(agent: Agent, bytes: &[u8]) -> Vec<(String, &'static str)> {
    read(agent, bytes)
        .unwrap()
        .calls
        .iter()
        .map(|c| {
            let v = match c.verdict {
                Verdict::Result { .. } => "Result",
                Verdict::NotStarted { .. } => "NotStarted",
                Verdict::OutcomeUnknown { .. } => "OutcomeUnknown",
                Verdict::Placeholder { .. } => "Placeholder",
            };
            (c.id.clone(), v)
        })
        .collect()
}

/// Promise 1 (truth) and 2 (repair): pi's results follow their own assistant message in the
/// chain. Providers that number ids per response (`call_0`) reuse them across messages. The
/// reader pairs a result with the *first* open call of that id anywhere in the file, so m2's
/// recorded result is given to m1's call, m2's call (which has a result) is called unknown, and
/// the repair adds a second toolResult for it.
#[test]
fn pi_a_reused_call_id_is_paired_with_the_call_of_its_own_chain() {
    let bytes = file(&[
        pi_header(),
        pi_user("u1", None, "one"),
        pi_assistant("m1", "u1", &["call_0"], "toolUse"), // crashed: no result
        pi_user("u2", Some("m1"), "two"),
        pi_assistant("m2", "u2", &["call_0"], "toolUse"),
        pi_result("r2", "m2", "call_0"),
        pi_assistant("m3", "r2", &[], "stop"),
    ]);
    let found = verdicts(Agent::Pi, &bytes);
    let repaired = repair(Agent::Pi, &bytes).unwrap();
    let problems = pi_replay(&repaired.bytes);
    assert!(
        found == [("call_0".to_owned(), "OutcomeUnknown"), ("call_0".to_owned(), "Result")]
            && problems.is_empty(),
        "verdicts (expected m1 unknown, m2 Result): {found:?}; pi replays the copy with: {problems:?}"
    );
}

/// Promise 2: answers belong to the branch pi replays. The user branched back to r1 (pi's
/// /tree) after m1's second call finished on the other branch: on the current path (leaf =
/// last entry) c2 has no result, pi sends "No result provided". The reader takes r2 from the
/// abandoned branch as c2's result, so the repair answers nothing.
#[test]
fn pi_a_call_answered_only_on_an_abandoned_branch_is_answered_on_the_current_one() {
    let bytes = file(&[
        pi_header(),
        pi_user("u1", None, "one"),
        pi_assistant("m1", "u1", &["c1", "c2"], "toolUse"),
        pi_result("r1", "m1", "c1"),
        pi_result("r2", "r1", "c2"),
        pi_assistant("m2", "r2", &[], "stop"),
        // /tree back to r1, then a new prompt.
        pi_user("u3", Some("r1"), "again"),
        pi_assistant("m3", "u3", &[], "stop"),
    ]);
    let repaired = repair(Agent::Pi, &bytes).unwrap();
    assert_eq!(pi_replay(&repaired.bytes), Vec::<String>::new());
}

/// Promise 2 / §3.6 "Keep line 1 a valid header, else pi discards the file". pi reads a file
/// that starts with a UTF-8 BOM fine (`content.trim()` strips U+FEFF); the repair moves the
/// header line to the quarantine as "not JSON", and pi then discards the repaired copy.
#[test]
fn pi_a_bom_before_the_header_does_not_cost_the_header() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(file(&[
        pi_header(),
        pi_user("u1", None, "one"),
        pi_assistant("m1", "u1", &["c1"], "toolUse"),
    ]));
    assert!(
        pi_replay(&bytes).iter().all(|p| !p.contains("discards")),
        "pi itself reads the original"
    );
    let repaired = repair(Agent::Pi, &bytes).unwrap();
    assert!(repaired.moved.is_empty(), "moved: {:?}", repaired.moved);
    assert_eq!(pi_replay(&repaired.bytes), Vec::<String>::new());
}

/// Promise 2: "a copy the agent can resume". JSON lines that are not objects are kept in the
/// copy as "a shape this reader does not know; the agent may know it" – but pi does know them:
/// `null` makes `_buildIndex` throw, and any non-header first entry makes pi discard the file.
#[test]
fn pi_non_object_json_lines_do_not_stay_in_the_resumable_copy() {
    let base = [
        pi_header(),
        pi_user("u1", None, "one"),
        pi_assistant("m1", "u1", &["c1"], "toolUse"),
    ];
    let mut failures = Vec::new();
    for (what, bytes) in [
        (
            "null in the middle",
            file(&[
                base[0].clone(),
                "null".into(),
                base[1].clone(),
                base[2].clone(),
            ]),
        ),
        (
            "[] before the header",
            file(&[
                "[]".into(),
                base[0].clone(),
                base[1].clone(),
                base[2].clone(),
            ]),
        ),
        (
            "1 before the header",
            file(&[
                "1".into(),
                base[0].clone(),
                base[1].clone(),
                base[2].clone(),
            ]),
        ),
    ] {
        let repaired = repair(Agent::Pi, &bytes).unwrap();
        let problems = pi_replay(&repaired.bytes);
        if !problems.is_empty() {
            failures.push(format!("{what}: {problems:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---------------------------------------------------------------- codex

fn codex(kind: &str, payload: Value) -> String {
    json!({"timestamp":"2025-01-03T12:00:00.000Z","type":kind,"payload":payload}).to_string()
}

/// Promise 1: codex pairs by `call_id` only, position unused (IMPORT_FORMATS §2.3,
/// normalize.rs `ensure_call_outputs_present`/`remove_orphan_outputs`): an output recorded
/// before its call still answers it, and codex would send it. The reader calls the output an
/// orphan and the call unknown; the repair then adds a second output with the same call_id.
#[test]
fn codex_an_output_before_its_call_still_answers_it() {
    let bytes = file(&[
        codex("session_meta", json!({"id":"s1"})),
        codex(
            "response_item",
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}),
        ),
        codex(
            "response_item",
            json!({"type":"function_call_output","call_id":"call_X","output":"done"}),
        ),
        codex(
            "response_item",
            json!({"type":"function_call","name":"shell","arguments":"{}","call_id":"call_X"}),
        ),
    ]);
    assert_eq!(
        verdicts(Agent::Codex, &bytes),
        vec![("call_X".to_owned(), "Result")]
    );
    let repaired = repair(Agent::Codex, &bytes).unwrap();
    let outputs = String::from_utf8_lossy(&repaired.bytes)
        .lines()
        .filter(|l| l.contains("function_call_output"))
        .count();
    assert_eq!(outputs, 1, "codex would send two outputs for call_X");
}

// ---------------------------------------------------------------- what held

/// Held: CRLF files, blank lines, a torn tail, a v1 pi file; repair is a fixed point, kept
/// lines are byte-identical, and pi's replay of the copy is clean.
#[test]
fn held_crlf_v1_and_fixed_point() {
    let v1 = [
        r#"{"type":"session","id":"s","timestamp":"t","cwd":"/p"}"#.to_owned(),
        r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"x","timestamp":1}}"#.to_owned(),
        r#"{"type":"message","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{}}],"stopReason":"toolUse","timestamp":2}}"#.to_owned(),
    ];
    let crlf = [
        pi_header(),
        pi_user("u1", None, "one"),
        pi_assistant("m1", "u1", &["c1", "c2"], "toolUse"),
        pi_result("r1", "m1", "c1"),
        pi_user("u2", Some("r1"), "two"),
    ]
    .join("\r\n\r\n")
        + "\r\n{\"type\":\"mess";
    for bytes in [file(&v1), crlf.into_bytes()] {
        let once = repair(Agent::Pi, &bytes).unwrap();
        check_repair(Agent::Pi, &once).unwrap();
        let twice = repair(Agent::Pi, &once.bytes).unwrap();
        assert_eq!(once.bytes, twice.bytes, "a fixed point");
        assert_eq!(pi_replay(&once.bytes), Vec::<String>::new());
        let kept: HashSet<&[u8]> = once.bytes.split(|b| *b == b'\n').collect();
        for line in bytes.split(|b| *b == b'\n') {
            let is_moved = once.quarantine.split(|b| *b == b'\n').any(|q| q == line);
            let relinked_any = !once.relinked.is_empty();
            assert!(
                kept.contains(line) || is_moved || relinked_any,
                "{line:?} changed"
            );
        }
    }
}

/// Promise 1 and "repair never drops a line the agent keeps": pi reads its file with
/// `readFileSync(…, "utf8")`, which turns an invalid byte into U+FFFD and never fails
/// (IMPORT_FORMATS §3.5), so a recorded toolResult with one bad byte inside its text is a
/// result to pi. The reader calls the line "not JSON": the call becomes OUTCOME_UNKNOWN, and
/// the repair moves pi's real result out of the copy and answers the call with "unknown".
#[test]
fn pi_an_invalid_utf8_byte_inside_a_string_does_not_lose_a_recorded_result() {
    let result = pi_result("r1", "m1", "c1").replace("a.txt", "a@MARK@.txt");
    let mut bytes = file(&[
        pi_header(),
        pi_user("u1", None, "one"),
        pi_assistant("m1", "u1", &["c1"], "toolUse"),
        result,
        pi_assistant("m2", "r1", &[], "stop"),
    ]);
    // One byte of a torn-in-the-middle character (0xFF) inside the result's text.
    let at = bytes.windows(6).position(|w| w == b"@MARK@").unwrap();
    bytes.splice(at..at + 6, [0xFFu8]);
    assert!(
        pi_replay(&bytes).is_empty(),
        "pi replays the original whole"
    );
    let found = verdicts(Agent::Pi, &bytes);
    let repaired = repair(Agent::Pi, &bytes).unwrap();
    assert!(
        found == [("c1".to_owned(), "Result")] && repaired.moved.is_empty(),
        "verdicts {found:?}; lines moved out: {:?}",
        repaired.moved
    );
}

/// Promise 2: "would pi send a toolResult without its call?" The project's own fixture
/// `pi/unknown_item.jsonl` holds a toolResult of no call (`toolu_zzz`, reported as an orphan
/// output). pi's `transformMessages` passes every toolResult through (IMPORT_FORMATS §3.3), so
/// the provider gets a `tool_result` with no `tool_use` (400) – and the repair keeps it in the
/// "resumable" copy. The other fixtures replay cleanly, and each repair is a fixed point.
#[test]
fn pi_fixtures_replay_clean_after_repair() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/import/pi");
    let mut failures = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let once = repair(Agent::Pi, &bytes).unwrap();
        let problems = pi_replay(&once.bytes);
        if !problems.is_empty() {
            failures.push(format!("{}: {problems:?}", path.display()));
        }
        assert_eq!(repair(Agent::Pi, &once.bytes).unwrap().bytes, once.bytes);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Promise 2: a pi file whose first line is not its session header (a committed session cut
/// from its start, `import-real/pi/agent-complex-task__01…`) was "repaired" into a copy that pi
/// throws away whole (`loadEntriesFromFile` checks the first parsed entry only) and starts
/// afresh. The copy now starts with a header, and the repair says so.
#[test]
fn pi_a_file_without_its_header_gets_one_and_pi_keeps_the_copy() {
    let lines = [
        pi_user("e1", Some("gone1234"), "list"),
        pi_assistant("e2", "e1", &["c1"], "toolUse"),
        pi_result("e3", "e2", "c1"),
        pi_assistant("e4", "e3", &["c2"], "toolUse"),
    ];
    let bytes = file(&lines);
    assert!(
        !pi_replay(&bytes).is_empty(),
        "the fixture is one pi discards"
    );
    let r = repair(Agent::Pi, &bytes).unwrap();
    let header = r
        .header
        .as_deref()
        .expect("the repair says it wrote a header");
    let first = r.bytes.split(|b| *b == b'\n').next().unwrap();
    assert_eq!(first, header.as_bytes());
    let h: Value = serde_json::from_str(header).unwrap();
    assert_eq!(h["type"], "session");
    assert_eq!(h["version"], 3, "entries with ids are version 3");
    assert_eq!(
        h["timestamp"], "2026-11-20T10:00:01.000Z",
        "the first entry's time"
    );
    assert!(h["id"].as_str().is_some_and(|id| id.len() == 36), "{h}");
    assert_eq!(pi_replay(&r.bytes), Vec::<String>::new());
    assert_eq!(r.answered.len(), 1, "c2 answered as well");
    // The same file repairs to the same bytes, and the copy needs no second header.
    assert_eq!(repair(Agent::Pi, &bytes).unwrap().bytes, r.bytes);
    let twice = repair(Agent::Pi, &r.bytes).unwrap();
    assert!(twice.header.is_none() && twice.bytes == r.bytes);
    check_repair(Agent::Pi, &r).unwrap();
}

/// A Claude Code session line as the harness writes it.
fn claude_line(
    session: &str,
    uuid: &str,
    parent: Option<&str>,
    kind: &str,
    message: Value,
) -> String {
    json!({"parentUuid": parent, "isSidechain": false, "sessionId": session, "type": kind,
        "message": message, "uuid": uuid, "timestamp": "2026-11-20T10:00:01.000Z"})
    .to_string()
}

/// Promise 2: the line a repair adds to a Claude Code file took its id from the
/// call id alone, so two sessions interrupted on the same call id (ids are per response, and
/// some providers number them) got lines with one uuid, which Claude Code looks up across a
/// project's files. Now each is drawn from the session and the line it follows as well, and
/// is shaped as the version 4 UUIDs Claude Code writes.
#[test]
fn claude_code_an_added_line_id_is_its_own_in_every_session() {
    let session_file = |session: &str, prefix: &str| {
        let (u, a) = (format!("{prefix}-u"), format!("{prefix}-a"));
        let call = json!({"role": "assistant", "id": format!("msg_{prefix}"), "model": "m",
            "content": [{"type": "tool_use", "id": "toolu_same", "name": "Bash", "input": {}}]});
        file(&[
            claude_line(
                session,
                &u,
                None,
                "user",
                json!({"role": "user", "content": "go"}),
            ),
            claude_line(session, &a, Some(&u), "assistant", call),
        ])
    };
    let added = |bytes: &[u8]| -> String {
        let r = repair(Agent::ClaudeCode, bytes).unwrap();
        assert_eq!(r.answered.len(), 1);
        let last = r
            .bytes
            .split(|b| *b == b'\n')
            .rfind(|l| !l.is_empty())
            .unwrap();
        let v: Value = serde_json::from_slice(last).unwrap();
        assert_eq!(v["message"]["content"][0]["tool_use_id"], "toolu_same");
        v["uuid"].as_str().unwrap().to_owned()
    };
    let one = added(&session_file("11111111-aaaa-4aaa-8aaa-111111111111", "s1"));
    let two = added(&session_file("22222222-bbbb-4bbb-8bbb-222222222222", "s2"));
    assert_ne!(one, two, "two sessions, one call id, two line ids");
    for id in [&one, &two] {
        let b = id.as_bytes();
        assert!(
            id.len() == 36 && b[14] == b'4' && b"89ab".contains(&b[19]),
            "{id}"
        );
    }
}

/// Claude Code 2.1.332, resumed after it was killed while its shell tool ran,
/// writes its own "[Tool call interrupted: … its outcome is unknown …]" as the call's result
/// and a "No response requested." reply of its own (model `<synthetic>`). That result is the
/// agent's verdict, not the tool's output: the call reads as unknown, its placeholder keeps it
/// answered (a repair adds nothing, which would be a second result), and the session's model
/// stays the model's.
#[test]
fn claude_code_its_own_interrupted_placeholder_is_no_output() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/import/claude-code/interrupted_resumed.jsonl");
    let bytes = std::fs::read(path).unwrap();
    let s = read(Agent::ClaudeCode, &bytes).unwrap();
    let Verdict::Placeholder { text, at, .. } = &s.calls[0].verdict else {
        panic!("{:?}", s.calls[0].verdict)
    };
    let text = s.text(*text).unwrap();
    assert!(
        text.starts_with("[Tool call interrupted") && at.line == 3,
        "{text} {at:?}"
    );
    assert_eq!(s.model.as_deref(), Some("claude-opus-4-5"));
    let r = repair(Agent::ClaudeCode, &bytes).unwrap();
    assert!(
        r.answered.is_empty() && r.bytes == bytes,
        "{:?}",
        r.answered
    );
}

/// Codex 0.171 numbers every line of a paginated rollout (`ordinal`, from 0)
/// and on resume continues from the last line's, refusing a last line without one; a repair
/// put an answer with none after the call. Now the answer takes the number after its call's,
/// every line after it moves on by one, and the file's last line carries one.
#[test]
fn codex_a_numbered_rollout_stays_numbered_one_by_one() {
    let numbered = |n: u64, kind: &str, payload: Value| {
        json!({"timestamp":"2026-11-20T10:00:00.000Z","ordinal":n,"type":kind,"payload":payload})
            .to_string()
    };
    let call =
        |id: &str| json!({"type":"function_call","name":"shell","arguments":"{}","call_id":id});
    let bytes = file(&[
        numbered(
            0,
            "session_meta",
            json!({"id":"s1","history_mode":"paginated"}),
        ),
        numbered(1, "response_item", call("call_a")),
        numbered(2, "response_item", call("call_b")),
        numbered(
            3,
            "response_item",
            json!({"type":"function_call_output","call_id":"call_b","output":"ok"}),
        ),
        numbered(
            4,
            "event_msg",
            json!({"type":"turn_aborted","reason":"interrupted"}),
        ),
        numbered(5, "response_item", call("call_c")),
    ]);
    let r = repair(Agent::Codex, &bytes).unwrap();
    let lines: Vec<Value> = (r.bytes.split(|b| *b == b'\n'))
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let ordinals: Vec<u64> = lines
        .iter()
        .map(|l| l["ordinal"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ordinals,
        (0..8).collect::<Vec<u64>>(),
        "one by one, answers included"
    );
    assert_eq!(
        lines[2]["payload"]["call_id"], "call_a",
        "call_a's answer right after it"
    );
    assert_eq!(
        lines[7]["payload"]["call_id"], "call_c",
        "the last line is an answer, numbered"
    );
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["payload"]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds[2], "function_call_output");
    assert_eq!(
        r.renumbered.len(),
        4,
        "the four lines after call_a's answer"
    );
    // Only the number changed in each renumbered line, in place.
    let first_moved =
        String::from_utf8_lossy(r.bytes.split(|b| *b == b'\n').nth(3).unwrap()).into_owned();
    assert_eq!(first_moved, numbered(3, "response_item", call("call_b")));
    check_repair(Agent::Codex, &r).unwrap();
    assert_eq!(
        repair(Agent::Codex, &r.bytes).unwrap().bytes,
        r.bytes,
        "a fixed point"
    );
}
