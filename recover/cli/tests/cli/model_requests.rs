//! A crash while a live model was being asked: `llm/request` with no answer. Recovery closes
//! the step and the turn as interrupted (a resume asks again) and invents nothing: no call, no
//! assistant message.

use crate::common;

use common::{recover, replay_dir, text, Builder};
use runtime::event::*;
use runtime::model::{ModelErrorKind, ModelSettings};

fn request(turn: u32, step: u32, attempt: u32) -> Event {
    Event::LlmRequest(LlmRequest {
        turn,
        step,
        attempt,
        provider: "anthropic".into(),
        model: "m".into(),
        body_sha256: "00".repeat(32),
        body_bytes: 10,
    })
}

/// Turn 1: step 1 answered with a call that ran; step 2's first attempt broke (a retry
/// follows) and its second attempt was in flight when the process died.
fn crashed_mid_request(dir: &std::path::Path) {
    let mut b = Builder::new(dir);
    b.put(Event::SessionOpen(SessionOpen {
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: "live".into(),
        workspace: "/ws".into(),
        tools: vec![],
    }));
    b.put(Event::SessionModel(SessionModel {
        provider: "anthropic".into(),
        model: "m".into(),
        system: Some("be careful".into()),
        settings: ModelSettings::default(),
        note: None,
        base_url: None,
    }));
    b.put(Event::TurnStart {
        turn: 1,
        user_text: "mark it".into(),
    });
    b.put(Event::StepStart { turn: 1, step: 1 });
    b.put(request(1, 1, 1));
    b.response_seq = b.put(Event::LlmResponse {
        turn: 1,
        step: 1,
        response: ModelResponse {
            text: "marking".into(),
            tool_calls: vec![ModelCall {
                call_id: "c1".into(),
                name: "mark".into(),
                arguments: "{}".into(),
            }],
            stop_reason: StopReason::ToolUse,
        },
    });
    let seq = b.put(Event::Received {
        call: common::call("c1"),
        index: 0,
        tool: "mark".into(),
        raw_arguments: "{}".into(),
        source_seqs: vec![b.response_seq],
    });
    b.last.insert("c1".into(), seq);
    b.approve("c1");
    b.start("c1");
    b.settle("c1", true);
    b.step("c1", |call, s| Event::Committed {
        call,
        result: CommittedResult {
            content: "marked".into(),
            is_error: false,
            code: None,
            value: None,
        },
        source_seqs: s,
    });
    b.put(Event::StepEnd {
        turn: 1,
        step: 1,
        outcome: StepOutcome::Completed,
    });
    b.put(Event::StepStart { turn: 1, step: 2 });
    b.put(request(1, 2, 1));
    b.put(Event::LlmAttemptFailed(LlmAttemptFailed {
        turn: 1,
        step: 2,
        attempt: 1,
        kind: ModelErrorKind::Transport,
        status: None,
        message: "connection reset".into(),
        partial_text: "I marked it and".into(),
        retry: true,
        backoff_ms: 500,
    }));
    let last = b.put(request(1, 2, 2));
    // `llm/request` is synced before the request leaves; the process dies then, mid-stream.
    b.journal.sync_through_blocking(last).unwrap();
    drop(b.journal);
}

#[test]
fn a_crash_mid_request_closes_the_turn_as_interrupted_and_invents_nothing() {
    let dir = tempfile::tempdir().unwrap();
    crashed_mid_request(dir.path());
    let out = recover(&["classify", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // c1 was committed before the crash: it keeps its result, unclassified.
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{report}");
    assert_eq!(calls[0]["state"], "committed");
    assert!(calls[0]["classification"].is_null(), "{report}");
    let r = replay_dir(dir.path());
    let turn = &r.turns[0];
    assert_eq!(turn.outcome, Some(TurnOutcome::Interrupted));
    assert_eq!(turn.steps[1].outcome, Some(StepOutcome::Interrupted));
    assert_eq!(turn.steps[1].attempts, 2);
    assert!(turn.steps[1].response.is_none());
    // The history: the user, the answer with its call, its result; the broken attempt's text
    // is nowhere in it.
    let out = recover(&[
        "rebuild",
        dir.path().to_str().unwrap(),
        "--format",
        "anthropic",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = text(&out.stdout);
    assert!(!body.contains("I marked it and"), "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
}
