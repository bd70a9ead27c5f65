//! The `recover` binary end to end on journals built event by event (golden journals: each
//! test says in its name what situation it holds), checked against what DESIGN.md §6 says.

use journal::{FsStorage, Journal, Options};
use runtime::event::*;
use runtime::ErrorCode;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

fn recover(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recover"))
        .args(args)
        .output()
        .expect("recover runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn call(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 1,
        call_id: id.into(),
    }
}

/// Appends events with the seqs they get, so per-call events can point back correctly.
struct Builder {
    journal: Journal,
    last: std::collections::HashMap<String, u64>,
    response_seq: u64,
}

impl Builder {
    fn new(dir: &Path) -> Builder {
        let (journal, _) = Journal::open(
            Arc::new(FsStorage::create(dir).unwrap()),
            Options::default(),
        )
        .unwrap();
        Builder {
            journal,
            last: Default::default(),
            response_seq: 0,
        }
    }
    fn put(&mut self, event: Event) -> u64 {
        self.journal
            .append(&Record {
                at_ms: 1_000,
                event,
            })
            .unwrap()
    }
    /// session/open, turn 1, step 1, and an llm/response with these calls (all `mark`).
    fn batch(&mut self, ids: &[&str]) {
        self.put(Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "golden".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }));
        self.put(Event::TurnStart {
            turn: 1,
            user_text: "do three things".into(),
        });
        self.put(Event::StepStart { turn: 1, step: 1 });
        let tool_calls = ids
            .iter()
            .map(|id| ModelCall {
                call_id: id.to_string(),
                name: "mark".into(),
                arguments: format!("{{\"path\":\"{id}.txt\"}}"),
            })
            .collect();
        self.response_seq = self.put(Event::LlmResponse {
            turn: 1,
            step: 1,
            response: ModelResponse {
                text: "on it".into(),
                tool_calls,
                stop_reason: StopReason::ToolUse,
            },
        });
        for (i, id) in ids.iter().enumerate() {
            let seq = self.put(Event::Received {
                call: call(id),
                index: i as u32,
                tool: "mark".into(),
                raw_arguments: format!("{{\"path\":\"{id}.txt\"}}"),
                source_seqs: vec![self.response_seq],
            });
            self.last.insert(id.to_string(), seq);
        }
    }
    fn step(&mut self, id: &str, make: impl FnOnce(CallRef, Vec<u64>) -> Event) {
        let src = vec![self.last[id]];
        let seq = self.put(make(call(id), src));
        self.last.insert(id.to_string(), seq);
    }
    fn approve(&mut self, id: &str) {
        self.step(id, |call, s| Event::Parsed {
            call,
            arguments: "{}".into(),
            source_seqs: s,
        });
        self.step(id, |call, s| Event::Approved {
            call,
            approval: Approval::Default,
            source_seqs: s,
        });
    }
    fn start(&mut self, id: &str) {
        self.step(id, |call, s| Event::Started {
            call,
            attempt: 1,
            resources: Resources {
                writes: vec![format!("{}.txt", "m")],
                intents: vec!["mark it".into()],
                ..Default::default()
            },
            source_seqs: s,
        });
    }
    fn settle(&mut self, id: &str, ok: bool) {
        let status = if ok {
            OutcomeStatus::Success
        } else {
            OutcomeStatus::Error {
                code: ErrorCode::ToolFailed,
                message: "disk on fire".into(),
            }
        };
        self.step(id, |call, s| Event::Settled {
            call,
            outcome: Outcome {
                status,
                content: Text::Inline("marked".into()),
                value: None,
                details: None,
                side_effects: vec![SideEffect::FsWrite {
                    path: "m.txt".into(),
                    before_sha256: None,
                    after_sha256: "ab".repeat(32),
                }],
                attempts: 1,
                duration_ms: 5,
            },
            source_seqs: s,
        });
    }
    fn done(self) {
        self.journal.close().unwrap();
    }
}

fn classify_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["classify", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = recover(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn by_id<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["call_id"] == id)
        .unwrap()
}

fn segment_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(journal::segment::file_name(0))).unwrap()
}

#[test]
fn scenario_18_only_the_middle_of_three_had_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2", "c3"]);
    for id in ["c1", "c2", "c3"] {
        b.approve(id);
    }
    b.start("c2");
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "c1")["classification"], "TOOL_NOT_STARTED");
    assert_eq!(by_id(&v, "c2")["classification"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(by_id(&v, "c3")["classification"], "TOOL_NOT_STARTED");
    assert_eq!(by_id(&v, "c2")["state"], "started");
    assert_eq!(by_id(&v, "c1")["state"], "approved");
    let resources: Vec<&str> = by_id(&v, "c2")["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(resources, ["write:m.txt", "intent:mark it"]);
    assert_eq!(v["end"]["kind"], "clean");
}

#[test]
fn scenario_19_a_settled_but_uncommitted_call_keeps_its_real_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["ok", "bad"]);
    for id in ["ok", "bad"] {
        b.approve(id);
        b.start(id);
    }
    b.settle("ok", true);
    b.settle("bad", false);
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "ok")["classification"], Value::Null);
    assert_eq!(by_id(&v, "ok")["state"], "settled");
    let audit = recover(&["audit", dir.path().to_str().unwrap(), "--json"]);
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    let calls = audit["calls"].as_array().unwrap();
    assert_eq!(
        calls[0]["result_code"],
        Value::Null,
        "a success stays a success (I4)"
    );
    assert_eq!(
        calls[1]["result_code"], "TOOL_FAILED",
        "a known error stays that error"
    );
    assert!(calls[0]["side_effects"][0]
        .as_str()
        .unwrap()
        .starts_with("wrote m.txt"));
    assert_eq!(audit["totals"]["outcome_unknown"], 0);
}

#[test]
fn scenario_31_a_second_recovery_appends_nothing_and_prints_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.start("c1");
    b.done();
    let first = recover(&["classify", dir.path().to_str().unwrap(), "--json"]);
    assert!(
        text(&first.stderr).contains("recovery appended"),
        "{}",
        text(&first.stderr)
    );
    let after_first = segment_bytes(dir.path());
    let second = recover(&["classify", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(first.stdout, second.stdout, "same bytes out (I5)");
    assert_eq!(
        segment_bytes(dir.path()),
        after_first,
        "nothing appended the second time"
    );
    assert!(!text(&second.stderr).contains("recovery appended"));
    // Exactly one recovery event in the journal.
    let storage = Arc::new(FsStorage::open(dir.path()).unwrap());
    let (replay, _) = runtime::replay::replay_storage(storage, journal::Limits::default()).unwrap();
    assert_eq!(replay.recoveries.len(), 1);
    assert_eq!(replay.turns[0].outcome, Some(TurnOutcome::Interrupted));
}

#[test]
fn scenario_32_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.done();
    let mut bytes = segment_bytes(dir.path());
    bytes.extend_from_slice(&[7, 0, 0, 0, 1]);
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    let v = classify_json(dir.path(), &["--dry-run"]);
    assert_eq!(v["end"]["kind"], "torn_tail");
    assert_eq!(v["end"]["dropped_bytes"], 5);
    assert_eq!(segment_bytes(dir.path()), bytes, "not a byte changed");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.to_string_lossy().contains("torn-at")),
        "no quarantine file: {names:?}"
    );
}

#[test]
fn scenario_02_a_torn_tail_is_cut_and_the_bytes_before_it_are_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.done();
    let mut bytes = segment_bytes(dir.path());
    let valid = bytes.len();
    bytes.resize(valid + 4096, 0); // a zero-filled last page: torn, not corrupt
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    let first = classify_json(dir.path(), &[]);
    assert_eq!(
        first["end"],
        serde_json::json!({"kind": "torn_tail", "dropped_bytes": 4096})
    );
    let quarantine = dir.path().join(format!(
        "{}.torn-at-{valid}",
        journal::segment::file_name(0)
    ));
    assert_eq!(
        std::fs::read(&quarantine).unwrap(),
        vec![0u8; 4096],
        "evidence first"
    );
    assert!(
        segment_bytes(dir.path()).starts_with(&bytes[..valid]),
        "the prefix is never rewritten"
    );
    let second = classify_json(dir.path(), &[]);
    assert_eq!(first, second);
}

#[test]
fn scenario_03_a_bad_record_before_valid_ones_exits_2_naming_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.done();
    let mut bytes = segment_bytes(dir.path());
    // The second record starts after the header and the first record; damage its payload.
    let header = journal::segment::HEADER_BYTES;
    let first_len = u32::from_le_bytes(bytes[header..header + 4].try_into().unwrap()) as usize + 8;
    let second = header + first_len;
    bytes[second + 20] ^= 0x01;
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    for args in [
        vec!["classify"],
        vec!["classify", "--dry-run"],
        vec!["audit"],
        vec!["verify"],
    ] {
        let mut full = args.clone();
        full.insert(1, dir.path().to_str().unwrap());
        let out = recover(&full);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(&format!("offset {second}")),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(
        segment_bytes(dir.path()),
        bytes,
        "corruption is never repaired"
    );
}

#[test]
fn scenario_33_a_live_session_is_reported_live_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir.path()).unwrap()),
        Options::default(),
    )
    .unwrap();
    for event in [
        Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "live".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }),
        Event::TurnStart {
            turn: 1,
            user_text: "hi".into(),
        },
    ] {
        let seq = journal.append(&Record { at_ms: 1, event }).unwrap();
        journal.sync_through_blocking(seq).unwrap();
    }
    let before = segment_bytes(dir.path());
    let v = classify_json(dir.path(), &[]);
    assert_eq!(v["live"], true);
    assert_eq!(
        segment_bytes(dir.path()),
        before,
        "nothing appended to a live journal"
    );
    drop(journal);
}

#[test]
fn an_empty_journal_directory_is_an_empty_session() {
    let dir = tempfile::tempdir().unwrap();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(v["calls"], serde_json::json!([]));
    assert_eq!(v["end"]["kind"], "clean");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn bad_usage_and_missing_directories_exit_1() {
    assert_eq!(recover(&["classify"]).status.code(), Some(1));
    assert_eq!(recover(&["frobnicate", "x"]).status.code(), Some(1));
    let out = recover(&["classify", "/nonexistent/recover-test"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/recover-test"));
}

#[test]
fn scenario_03_salvage_skips_the_bad_record_lists_it_and_the_calls_it_touched() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.approve("c2");
    b.done();
    let mut bytes = segment_bytes(dir.path());
    // Damage the `parsed` record of c1 (records: open, turn, step, response, received x2, parsed c1 …).
    let header = journal::segment::HEADER_BYTES;
    let mut offsets = vec![header];
    while *offsets.last().unwrap() < bytes.len() {
        let at = *offsets.last().unwrap();
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize + 8;
        offsets.push(at + len);
    }
    let parsed_c1 = offsets[6];
    bytes[parsed_c1 + 20] ^= 0x01;
    std::fs::write(dir.path().join(journal::segment::file_name(0)), &bytes).unwrap();

    let v = classify_json(dir.path(), &["--salvage"]);
    let skipped = v["salvage"]["skipped"].as_array().unwrap();
    assert_eq!(skipped[0]["offset"], parsed_c1 as u64);
    assert!(skipped[0]["what"].as_str().unwrap().contains("checksum"));
    // c1's `approved` no longer follows anything it can: that record is listed too.
    let events = v["salvage"]["skipped_events"].as_array().unwrap();
    assert!(!events.is_empty());
    let affected: Vec<&str> = v["salvage"]["affected_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert!(affected.contains(&"c1"), "{affected:?}");
    assert_eq!(by_id(&v, "c2")["classification"], "TOOL_NOT_STARTED");
    for format in ["openai-chat", "anthropic"] {
        let out = recover(&[
            "rebuild",
            dir.path().to_str().unwrap(),
            "--format",
            format,
            "--salvage",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("SALVAGED"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(segment_bytes(dir.path()), bytes, "salvage never writes");
}

#[test]
fn scenario_23_every_format_gets_exactly_one_result_per_call_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c.2", "c3"]);
    for id in ["c1", "c.2", "c3"] {
        b.approve(id);
    }
    b.start("c1");
    b.settle("c1", true);
    b.start("c.2");
    b.done();
    for format in ["openai-chat", "openai-responses", "anthropic", "gemini"] {
        let out = recover(&["rebuild", dir.path().to_str().unwrap(), "--format", format]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{format}: {}",
            text(&out.stderr)
        );
        let body: Value = serde_json::from_slice(&out.stdout).unwrap();
        let f: tooljournal_recover::providers::Format = format.parse().unwrap();
        tooljournal_recover::providers::validate(f, &body).unwrap();
        let s = body.to_string();
        assert_eq!(
            s.matches("TOOL_OUTCOME_UNKNOWN").count(),
            1,
            "{format}: {s}"
        );
        assert_eq!(s.matches("TOOL_NOT_STARTED").count(), 1, "{format}: {s}");
        assert!(
            s.contains("marked"),
            "{format}: the settled call keeps its real result"
        );
    }
    let out = recover(&["rebuild", dir.path().to_str().unwrap(), "--format", "cobol"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn classify_warns_on_stderr_about_a_process_group_a_call_left_running() {
    use std::os::unix::process::CommandExt;
    // A process group of our own, standing for a command a crashed run left behind.
    let mut orphan = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .expect("sleep starts");
    let pid = orphan.id();
    let process = runtime::process::identify(pid, pid).expect("it has a stat");
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["a"]);
    b.approve("a");
    b.start("a");
    b.put(Event::CallProcess {
        call: call("a"),
        process,
    });
    b.journal.close().unwrap();
    let path = dir.path().to_str().unwrap();

    let out = recover(&["classify", "--dry-run", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let warning = format!("still running: process group {pid} (1 processes)");
    assert!(
        text(&out.stderr).contains(&warning),
        "{}",
        text(&out.stderr)
    );
    // Stdout is the journal's alone: the world's state stays out of it.
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("still running"), "{stdout}");

    orphan.kill().unwrap();
    orphan.wait().unwrap();
    let again = recover(&["classify", "--dry-run", path]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        !text(&again.stderr).contains("still running"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(
        text(&again.stdout),
        stdout,
        "the same journal, the same stdout"
    );
}

// ---------------------------------------------------------------------------------------------
// The scenarios of docs/SCENARIOS.md that had no test of their own.

impl Builder {
    fn commit(&mut self, id: &str) {
        self.step(id, |call, s| Event::Committed {
            call,
            result: CommittedResult {
                content: "marked".into(),
                is_error: false,
                code: None,
                value: None,
            },
            source_seqs: s,
        });
    }
    /// Turn 1 (from `batch`) with its one call `c1` run, committed, and the turn ended.
    fn finish_turn_1(&mut self) {
        self.batch(&["c1"]);
        self.approve("c1");
        self.start("c1");
        self.settle("c1", true);
        self.commit("c1");
        self.put(Event::StepEnd {
            turn: 1,
            step: 1,
            outcome: StepOutcome::Completed,
        });
        self.put(Event::TurnEnd {
            turn: 1,
            outcome: TurnOutcome::Completed,
        });
    }
    /// Turn 2's first step and its response asking for `d1`; returns the response's seq.
    fn open_turn_2(&mut self) -> u64 {
        self.put(Event::TurnStart {
            turn: 2,
            user_text: "and again".into(),
        });
        self.put(Event::StepStart { turn: 2, step: 1 });
        self.put(Event::LlmResponse {
            turn: 2,
            step: 1,
            response: ModelResponse {
                text: "once more".into(),
                tool_calls: vec![ModelCall {
                    call_id: "d1".into(),
                    name: "mark".into(),
                    arguments: "{}".into(),
                }],
                stop_reason: StopReason::ToolUse,
            },
        })
    }
}

fn turn_2_call(id: &str) -> CallRef {
    CallRef {
        turn: 2,
        step: 1,
        call_id: id.into(),
    }
}

/// Where each frame of segment 0 starts, and where the last one ends.
fn frame_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = vec![journal::segment::HEADER_BYTES];
    while *offsets.last().unwrap() < bytes.len() {
        let at = *offsets.last().unwrap();
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize + 8;
        offsets.push(at + len);
    }
    offsets
}

fn replay_dir(dir: &Path) -> runtime::replay::SessionReplay {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    runtime::replay::replay_storage(storage, journal::Limits::default())
        .unwrap()
        .0
}

fn rebuild(dir: &Path, format: &str, extra: &[&str]) -> Output {
    let mut args = vec!["rebuild", dir.to_str().unwrap(), "--format", format];
    args.extend_from_slice(extra);
    let out = recover(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    out
}

/// The tool messages of an OpenAI Chat history, as (tool_call_id, content), in order.
fn chat_results(dir: &Path) -> Vec<(String, String)> {
    let body: Value = serde_json::from_slice(&rebuild(dir, "openai-chat", &[]).stdout).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn scenario_01_turn_2_cut_mid_record_is_dropped_and_its_turn_closed_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.finish_turn_1();
    let response = b.open_turn_2();
    b.put(Event::Received {
        call: turn_2_call("d1"),
        index: 0,
        tool: "mark".into(),
        raw_arguments: "{}".into(),
        source_seqs: vec![response],
    });
    b.done();
    // The process died halfway through writing `received`.
    let whole = segment_bytes(dir.path());
    let offsets = frame_offsets(&whole);
    let last = offsets[offsets.len() - 2];
    let cut = last + (whole.len() - last) / 2;
    let kept = &whole[..cut];
    std::fs::write(dir.path().join(journal::segment::file_name(0)), kept).unwrap();

    let first = classify_json(dir.path(), &[]);
    assert_eq!(
        first["end"],
        serde_json::json!({"kind": "torn_tail", "dropped_bytes": cut - last})
    );
    let quarantine = dir
        .path()
        .join(format!("{}.torn-at-{last}", journal::segment::file_name(0)));
    assert_eq!(std::fs::read(&quarantine).unwrap(), kept[last..].to_vec());
    assert_eq!(by_id(&first, "c1")["state"], "committed");
    assert_eq!(by_id(&first, "d1")["classification"], "TOOL_NOT_STARTED");

    let replay = replay_dir(dir.path());
    assert_eq!(replay.turns[0].outcome, Some(TurnOutcome::Completed));
    assert_eq!(replay.turns[1].outcome, Some(TurnOutcome::Interrupted));
    assert_eq!(
        replay.turns[1].steps[0].outcome,
        Some(StepOutcome::Interrupted)
    );
    assert_eq!(
        replay.last_seq,
        response + 1,
        "the recovery event takes the seq after the last whole record"
    );
    assert_eq!(replay.recoveries.len(), 1);
    assert_eq!(replay.recoveries[0].dropped_bytes, (cut - last) as u64);
    // Reloading gives the same state.
    assert_eq!(classify_json(dir.path(), &[]), first);
    assert_eq!(replay_dir(dir.path()).last_seq, response + 1);
}

#[test]
fn scenario_12_crash_after_turn_start_is_an_interrupted_turn_with_no_results() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.finish_turn_1();
    b.put(Event::TurnStart {
        turn: 2,
        user_text: "and again".into(),
    });
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(
        v["calls"].as_array().unwrap().len(),
        1,
        "only turn 1's call"
    );
    let replay = replay_dir(dir.path());
    assert_eq!(replay.turns.len(), 2);
    assert_eq!(replay.turns[1].outcome, Some(TurnOutcome::Interrupted));
    assert!(replay.turns[1].steps.is_empty());
    assert_eq!(replay.recoveries[0].interrupted_turn, Some(2));
    assert_eq!(replay.recoveries[0].interrupted_step, None);
    assert!(replay.recoveries[0].calls.is_empty());
    assert_eq!(chat_results(dir.path()).len(), 1, "no result for turn 2");
}

#[test]
fn scenario_13_crash_before_the_model_answered_is_an_interrupted_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.finish_turn_1();
    b.put(Event::TurnStart {
        turn: 2,
        user_text: "and again".into(),
    });
    b.put(Event::StepStart { turn: 2, step: 1 });
    b.done();
    classify_json(dir.path(), &[]);
    let replay = replay_dir(dir.path());
    let step = &replay.turns[1].steps[0];
    assert_eq!(step.response, None);
    assert!(step.calls.is_empty());
    assert_eq!(step.outcome, Some(StepOutcome::Interrupted));
    assert_eq!(replay.turns[1].outcome, Some(TurnOutcome::Interrupted));
    assert_eq!(replay.recoveries[0].interrupted_step, Some((2, 1)));
    assert!(replay.recoveries[0].calls.is_empty());
}

#[test]
fn scenario_14_one_call_crashed_before_started_is_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.approve("c1");
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "c1")["state"], "approved");
    assert_eq!(by_id(&v, "c1")["classification"], "TOOL_NOT_STARTED");
    let results = chat_results(dir.path());
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "c1");
    assert!(
        results[0].1.starts_with("TOOL_NOT_STARTED: ")
            && results[0].1.contains("did not run and may be retried"),
        "{}",
        results[0].1
    );
}

#[test]
fn scenario_15_one_call_crashed_after_started_is_outcome_unknown_naming_its_resources() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.approve("c1");
    b.start("c1");
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "c1")["state"], "started");
    assert_eq!(by_id(&v, "c1")["classification"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(
        by_id(&v, "c1")["resources"],
        serde_json::json!(["write:m.txt", "intent:mark it"])
    );
    let results = chat_results(dir.path());
    let text = &results[0].1;
    assert!(text.starts_with("TOOL_OUTCOME_UNKNOWN: "), "{text}");
    for part in [
        "may have run",
        "check these before retrying: writes m.txt; intends `mark it`",
        "retry only if the call is idempotent",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
}

#[test]
fn scenario_16_three_parallel_calls_one_settled_keeps_its_result_in_model_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2", "c3"]);
    for id in ["c1", "c2", "c3"] {
        b.approve(id);
    }
    // All three were started together; c1 finished, c2 and c3 did not (c3 never started).
    b.start("c2");
    b.start("c1");
    b.settle("c1", true);
    b.done();
    let v = classify_json(dir.path(), &[]);
    let order: Vec<&str> = v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["c1", "c2", "c3"]);
    assert_eq!(by_id(&v, "c1")["classification"], Value::Null);
    assert_eq!(by_id(&v, "c2")["classification"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(by_id(&v, "c3")["classification"], "TOOL_NOT_STARTED");
    let results = chat_results(dir.path());
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"], "results in model order");
    assert_eq!(results[0].1, "marked", "c1 keeps its real result");
    assert!(results[1].1.starts_with("TOOL_OUTCOME_UNKNOWN: "));
    assert!(results[2].1.starts_with("TOOL_NOT_STARTED: "));
}

#[test]
fn scenario_17_no_call_settled_gives_one_synthetic_result_per_call_in_model_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2", "c3", "c4"]);
    for id in ["c1", "c2", "c3"] {
        b.approve(id);
    }
    b.start("c3");
    b.start("c1");
    b.done();
    let results = chat_results(dir.path());
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|(id, text)| (id.as_str(), text.split(':').next().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("c1", "TOOL_OUTCOME_UNKNOWN"),
            ("c2", "TOOL_NOT_STARTED"),
            ("c3", "TOOL_OUTCOME_UNKNOWN"),
            ("c4", "TOOL_NOT_STARTED"),
        ]
    );
}

#[test]
fn scenario_20_an_earlier_turn_that_completed_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.finish_turn_1();
    let before = b.journal.stats().appended_seq;
    let response = b.open_turn_2();
    let d1 = b.put(Event::Received {
        call: turn_2_call("d1"),
        index: 0,
        tool: "mark".into(),
        raw_arguments: "{}".into(),
        source_seqs: vec![response],
    });
    b.done();
    let untouched = replay_dir(dir.path()).turns[0].clone();
    let bytes = segment_bytes(dir.path());
    let turn_1_end = frame_offsets(&bytes)[before as usize];

    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "c1")["state"], "committed");
    assert_eq!(by_id(&v, "c1")["classification"], Value::Null);
    assert_eq!(by_id(&v, "d1")["classification"], "TOOL_NOT_STARTED");
    let replay = replay_dir(dir.path());
    assert_eq!(replay.turns[0], untouched, "turn 1 replays as it was");
    assert_eq!(
        replay.recoveries[0]
            .calls
            .iter()
            .map(|c| c.call.clone())
            .collect::<Vec<_>>(),
        [turn_2_call("d1")],
        "the recovery names only turn 2's call"
    );
    assert!(replay.last_seq > d1);
    assert_eq!(
        segment_bytes(dir.path())[..turn_1_end],
        bytes[..turn_1_end],
        "turn 1's bytes are as they were"
    );
    assert_eq!(chat_results(dir.path())[0], ("c1".into(), "marked".into()));
}

#[test]
fn scenario_21_a_call_waiting_for_approval_is_not_started_and_its_question_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1"]);
    b.step("c1", |call, s| Event::Parsed {
        call,
        arguments: "{}".into(),
        source_seqs: s,
    });
    b.put(Event::AskPending {
        call: call("c1"),
        question: "may I mark c1.txt?".into(),
    });
    b.done();
    let v = classify_json(dir.path(), &[]);
    assert_eq!(by_id(&v, "c1")["state"], "parsed");
    assert_eq!(by_id(&v, "c1")["classification"], "TOOL_NOT_STARTED");
    let replay = replay_dir(dir.path());
    let c1 = replay.calls().find(|c| c.call == call("c1")).unwrap();
    assert_eq!(c1.asks.len(), 1);
    assert_eq!(
        c1.asks[0].answer,
        Some(AskAnswer::Cancelled),
        "withdrawn, never taken as answered"
    );
    assert_eq!(
        c1.asks[0].cancel_reason.as_deref(),
        Some("session interrupted")
    );
    assert_eq!(c1.approval, None);
    assert_eq!(
        c1.committed.as_ref().unwrap().code,
        Some(ErrorCode::ToolNotStarted)
    );
}

#[test]
fn scenario_22_synthetic_results_say_interrupted_never_cancelled_nor_not_run_once_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.approve("c2");
    b.start("c2");
    b.done();
    let results = chat_results(dir.path());
    for (id, text) in &results {
        let lower = text.to_lowercase();
        assert!(lower.contains("interrupted"), "{id}: {text}");
        assert!(
            !lower.contains("cancel") && !lower.contains("user"),
            "{id}: a crash is not the user's stop: {text}"
        );
    }
    assert!(results[0].1.contains("did not run"), "{}", results[0].1);
    let started = results[1].1.to_lowercase();
    for claim in ["did not run", "not executed", "not run", "never ran"] {
        assert!(
            !started.contains(claim),
            "a started call is never said not to have run: {started}"
        );
    }
    assert!(started.contains("may have run"), "{started}");
}

#[test]
fn scenario_34_two_recoveries_at_once_append_one_recovery_event() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Builder::new(dir.path());
        b.batch(&["c1", "c2"]);
        b.approve("c1");
        b.start("c1");
        b.done();
        let path = dir.path().to_str().unwrap();
        let children: Vec<_> = (0..4)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_recover"))
                    .args(["classify", path, "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("recover runs")
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let mut appended = 0;
        for out in &outs {
            let stderr = text(&out.stderr);
            match out.status.code() {
                Some(0) => {}
                Some(1) => assert!(stderr.contains("live"), "round {round}: {stderr}"),
                other => panic!("round {round}: exit {other:?}: {stderr}"),
            }
            if stderr.contains("recovery appended") {
                appended += 1;
            }
        }
        assert_eq!(appended, 1, "round {round}: exactly one run appended");
        let replay = replay_dir(dir.path());
        assert_eq!(replay.recoveries.len(), 1, "round {round}");
    }
}

#[test]
fn scenario_36_synthetic_ids_and_texts_are_the_same_before_and_after_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    // An id no provider takes as it is: its mapped form must not change either.
    b.batch(&["c1", "c.2", "c3"]);
    for id in ["c1", "c.2", "c3"] {
        b.approve(id);
    }
    b.start("c1");
    b.settle("c1", true);
    b.start("c.2");
    b.done();
    let formats = ["openai-chat", "openai-responses", "anthropic", "gemini"];
    let before: Vec<Vec<u8>> = formats
        .iter()
        .map(|f| rebuild(dir.path(), f, &["--dry-run"]).stdout)
        .collect();
    assert!(
        replay_dir(dir.path()).recoveries.is_empty(),
        "the dry runs recorded nothing"
    );
    classify_json(dir.path(), &[]);
    assert_eq!(replay_dir(dir.path()).recoveries.len(), 1);
    for _ in 0..2 {
        for (format, before) in formats.iter().zip(&before) {
            let after = rebuild(dir.path(), format, &[]).stdout;
            assert_eq!(
                text(&after),
                text(before),
                "{format}: the recorded recovery gives the bytes the first reading gave"
            );
        }
    }
    assert!(text(&before[0]).contains("c_2_"), "{}", text(&before[0]));
}
