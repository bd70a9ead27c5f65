//! The `recover` binary on a crash at each point of a session (the scenarios of
//! docs/SCENARIOS.md that had no test of their own), on golden journals built event by event:
//! a turn cut mid-record, crashes before the model answered, before and after a call started,
//! with some calls settled, with an approval pending; earlier turns left untouched, two
//! recoveries at once, synthetic ids and texts the same before and after recovery.

use crate::common;

use common::*;
use runtime::event::*;
use runtime::ErrorCode;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

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
    settled_unknown_and_not_started(dir.path());
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
