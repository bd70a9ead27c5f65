//! Replay of the model-request events of schema 3 (docs/FORMAT.md, *Model requests*): journals
//! written through the runtime's `EventLog`, read back with `replay_storage`. Attempts are
//! numbered 1, 2, 3 within their step; a failure names the step's last attempt; nothing is
//! requested after the response; the response's detail comes once, after it, for the last
//! attempt; `session/model` and `tool/schema` are kept.

use std::collections::BTreeMap;
use tooljournal_runtime::event::{
    Event, LlmAttemptFailed, LlmNote, LlmRefusal, LlmRequest, LlmResponseDetail, ModelResponse,
    SessionModel, SessionOpen, StepOutcome, StopReason, ToolDescriptor, ToolSchema, ToolSource,
    TurnOutcome, VisibleTool, EVENT_SCHEMA_VERSION,
};
use tooljournal_runtime::model::{ModelErrorKind, ModelSettings, Usage};

use crate::common;
use common::written::{refused, replay};

const HASH: &str = "5c1f";

fn session_model(model: &str) -> SessionModel {
    SessionModel {
        provider: "anthropic".into(),
        model: model.into(),
        system: Some("Be brief.".into()),
        settings: ModelSettings {
            max_tokens: Some(1024),
            temperature: Some(0.25),
        },
        note: None,
        base_url: None,
    }
}

fn tool_schema(hash: &str, description: &str) -> ToolSchema {
    ToolSchema {
        schema_hash: hash.into(),
        name: "read".into(),
        description: description.into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }
}

/// The session up to turn 1's step 1, its tools shown: 6 records.
fn prefix() -> Vec<Event> {
    vec![
        Event::SessionOpen(SessionOpen {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: "s".into(),
            workspace: "/ws".into(),
            tools: vec![ToolDescriptor {
                name: "read".into(),
                source: ToolSource::BuiltIn,
                version: "1".into(),
                schema_hash: HASH.into(),
            }],
        }),
        Event::SessionModel(session_model("claude-a")),
        Event::ToolSchema(tool_schema(HASH, "Reads a file.")),
        Event::TurnStart {
            turn: 1,
            user_text: "hi".into(),
        },
        step_start(1),
        Event::StepTools {
            turn: 1,
            step: 1,
            tools: vec![VisibleTool {
                name: "read".into(),
                schema_hash: HASH.into(),
            }],
        },
    ]
}

/// The prefix, then `tail`.
fn with_prefix(tail: Vec<Event>) -> Vec<Event> {
    let mut events = prefix();
    events.extend(tail);
    events
}

/// The seq `tail[i]` gets in `with_prefix(tail)`.
fn seq_of_tail(i: usize) -> u64 {
    (prefix().len() + i + 1) as u64
}

fn step_start(step: u32) -> Event {
    Event::StepStart { turn: 1, step }
}

fn request(step: u32, attempt: u32) -> Event {
    Event::LlmRequest(LlmRequest {
        turn: 1,
        step,
        attempt,
        provider: "anthropic".into(),
        model: "claude-a".into(),
        body_sha256: format!("{attempt:064x}"),
        body_bytes: 2048,
    })
}

fn attempt_failed(step: u32, attempt: u32) -> LlmAttemptFailed {
    LlmAttemptFailed {
        turn: 1,
        step,
        attempt,
        kind: ModelErrorKind::Status,
        status: Some(529),
        message: "overloaded".into(),
        partial_text: "Let me re".into(),
        retry: true,
        backoff_ms: 1000,
    }
}

fn failed(step: u32, attempt: u32) -> Event {
    Event::LlmAttemptFailed(attempt_failed(step, attempt))
}

fn model_response(text: &str) -> ModelResponse {
    ModelResponse {
        text: text.into(),
        tool_calls: vec![],
        stop_reason: StopReason::EndTurn,
    }
}

fn response(step: u32) -> Event {
    Event::LlmResponse {
        turn: 1,
        step,
        response: model_response("Done."),
    }
}

fn response_detail(step: u32, attempt: u32) -> LlmResponseDetail {
    LlmResponseDetail {
        turn: 1,
        step,
        attempt,
        response_id: Some(format!("msg_{step}_{attempt}")),
        usage: Usage {
            input_tokens: 900,
            output_tokens: 12,
            cached_input_tokens: 512,
        },
        provider_state: Some(("anthropic".into(), "[]".into())),
    }
}

fn detail(step: u32, attempt: u32) -> Event {
    Event::LlmResponseDetail(response_detail(step, attempt))
}

fn step_end(step: u32) -> Event {
    Event::StepEnd {
        turn: 1,
        step,
        outcome: StepOutcome::Completed,
    }
}

fn turn_end() -> Event {
    Event::TurnEnd {
        turn: 1,
        outcome: TurnOutcome::Completed,
    }
}

#[test]
fn a_failed_attempt_then_a_successful_one_replays_as_two_attempts_one_failed() {
    let events = with_prefix(vec![
        request(1, 1),
        failed(1, 1),
        request(1, 2),
        response(1),
        detail(1, 2),
        step_end(1),
        turn_end(),
        Event::SessionClose,
    ]);
    let replay = replay(&events).expect("a consistent journal");
    let step = &replay.turns[0].steps[0];
    assert_eq!(step.attempts, 2);
    assert_eq!(step.failed_attempts, vec![attempt_failed(1, 1)]);
    // The response is the successful attempt's; the failed one's partial text is not in it.
    assert_eq!(step.response, Some(model_response("Done.")));
    assert_eq!(step.detail, Some(response_detail(1, 2)));
    assert_eq!(step.outcome, Some(StepOutcome::Completed));
    assert!(replay.closed);
}

#[test]
fn attempts_are_numbered_from_one_again_in_each_step() {
    let events = with_prefix(vec![
        request(1, 1),
        request(1, 2),
        request(1, 3),
        response(1),
        detail(1, 3),
        step_end(1),
        step_start(2),
        request(2, 1),
        response(2),
        detail(2, 1),
        step_end(2),
        turn_end(),
    ]);
    let replay = replay(&events).expect("a consistent journal");
    let steps = &replay.turns[0].steps;
    assert_eq!((steps[0].attempts, steps[1].attempts), (3, 1));
    assert!(steps.iter().all(|s| s.failed_attempts.is_empty()));
    assert_eq!(steps[1].detail, Some(response_detail(2, 1)));
}

#[test]
fn an_attempt_out_of_sequence_is_refused_naming_its_record() {
    let cases: [(&str, Vec<Event>, usize); 4] = [
        ("the first attempt is not 1", vec![request(1, 2)], 0),
        ("a gap", vec![request(1, 1), request(1, 3)], 1),
        ("a repeat", vec![request(1, 1), request(1, 1)], 1),
        (
            "a repeat after a failure",
            vec![request(1, 1), failed(1, 1), request(1, 2), request(1, 2)],
            3,
        ),
    ];
    for (case, tail, bad) in cases {
        let (seq, kind, message) = refused(&with_prefix(tail));
        assert_eq!((seq, kind), (seq_of_tail(bad), "llm/request"), "{case}");
        assert!(message.contains("attempt"), "{case}: {message}");
    }
    // A request for a step that is not the open one.
    let (seq, kind, message) = refused(&with_prefix(vec![request(2, 1)]));
    assert_eq!((seq, kind), (seq_of_tail(0), "llm/request"));
    assert!(message.contains("not the open step"), "{message}");
}

#[test]
fn a_request_after_the_steps_response_is_refused() {
    let (seq, kind, message) = refused(&with_prefix(vec![
        request(1, 1),
        response(1),
        request(1, 2),
    ]));
    assert_eq!((seq, kind), (seq_of_tail(2), "llm/request"));
    assert!(
        message.contains("after the step's llm/response"),
        "{message}"
    );
}

#[test]
fn an_attempt_failure_must_name_the_steps_last_attempt() {
    let cases: [(&str, Vec<Event>, usize); 5] = [
        ("no request yet", vec![failed(1, 1)], 0),
        (
            "an earlier attempt",
            vec![request(1, 1), request(1, 2), failed(1, 1)],
            2,
        ),
        ("a later attempt", vec![request(1, 1), failed(1, 2)], 1),
        (
            "the same attempt twice",
            vec![request(1, 1), failed(1, 1), failed(1, 1)],
            2,
        ),
        (
            "after the response",
            vec![request(1, 1), response(1), failed(1, 1)],
            2,
        ),
    ];
    for (case, tail, bad) in cases {
        let (seq, kind, message) = refused(&with_prefix(tail));
        assert_eq!(
            (seq, kind),
            (seq_of_tail(bad), "llm/attempt-failed"),
            "{case}"
        );
        assert!(message.contains("attempt"), "{case}: {message}");
    }
}

#[test]
fn the_response_detail_comes_once_after_the_response_for_the_last_attempt() {
    let cases: [(&str, Vec<Event>, usize); 4] = [
        ("before the response", vec![request(1, 1), detail(1, 1)], 1),
        ("with no request", vec![response(1), detail(1, 1)], 1),
        (
            "twice",
            vec![request(1, 1), response(1), detail(1, 1), detail(1, 1)],
            3,
        ),
        (
            "for an earlier attempt",
            vec![
                request(1, 1),
                failed(1, 1),
                request(1, 2),
                response(1),
                detail(1, 1),
            ],
            4,
        ),
    ];
    for (case, tail, bad) in cases {
        let (seq, kind, message) = refused(&with_prefix(tail));
        assert_eq!(
            (seq, kind),
            (seq_of_tail(bad), "llm/response-detail"),
            "{case}"
        );
        assert!(message.contains("llm/response-detail"), "{case}: {message}");
    }
}

#[test]
fn session_model_and_tool_schemas_are_kept() {
    let other_hash = "9e0d";
    let events = with_prefix(vec![
        request(1, 1),
        response(1),
        detail(1, 1),
        step_end(1),
        turn_end(),
        // A resume changed the model, and a tool's schema changed.
        Event::SessionModel(session_model("claude-b")),
        Event::ToolSchema(tool_schema(other_hash, "Reads a file, by lines.")),
    ]);
    let kept = replay(&events).expect("a consistent journal");
    assert_eq!(kept.model, Some(session_model("claude-b")), "the latest");
    let expected: BTreeMap<(String, String), ToolSchema> = [
        (
            ("read".to_string(), HASH.to_string()),
            tool_schema(HASH, "Reads a file."),
        ),
        (
            ("read".to_string(), other_hash.to_string()),
            tool_schema(other_hash, "Reads a file, by lines."),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(kept.tool_schemas, expected);

    // Before any `session/model`, there is none.
    let without: Vec<Event> = prefix()
        .into_iter()
        .filter(|e| !matches!(e, Event::SessionModel(_)))
        .collect();
    let first = replay(&without).expect("a consistent journal");
    assert_eq!(first.model, None);
}

#[test]
fn a_response_for_an_attempt_that_failed_is_refused() {
    let (seq, kind, message) =
        refused(&with_prefix(vec![request(1, 1), failed(1, 1), response(1)]));
    assert_eq!((seq, kind), (seq_of_tail(2), "llm/response"));
    assert!(message.contains("attempt 1, which failed"), "{message}");
    let (seq, kind, message) =
        refused(&with_prefix(vec![request(1, 1), response(1), failed(1, 1)]));
    assert_eq!((seq, kind), (seq_of_tail(2), "llm/attempt-failed"));
    assert!(
        message.contains("after the step's llm/response"),
        "{message}"
    );
}

fn refusal_event(step: u32, attempt: u32) -> Event {
    Event::LlmRefusal(LlmRefusal {
        turn: 1,
        step,
        attempt,
        reason: "refusal".into(),
        explanation: "[cyber] blocked".into(),
    })
}

fn note_event(step: u32, attempt: u32) -> Event {
    Event::LlmNote(LlmNote {
        turn: 1,
        step,
        attempt,
        note: "kept a block of type `x`".into(),
    })
}

fn refused_response(step: u32) -> Event {
    Event::LlmResponse {
        turn: 1,
        step,
        response: ModelResponse {
            text: "I can't help with that.".into(),
            tool_calls: vec![],
            stop_reason: StopReason::Refusal,
        },
    }
}

/// Schema 8: a refused answer's `llm/refusal` and any answer's `llm/note`s replay onto their
/// step; a refusal of an answer that was not refused, a second one, or either one for an
/// earlier attempt, is refused naming its record.
#[test]
fn a_refusal_and_notes_replay_onto_their_step_and_only_there() {
    let good = with_prefix(vec![
        request(1, 1),
        refused_response(1),
        detail(1, 1),
        refusal_event(1, 1),
        note_event(1, 1),
        note_event(1, 1),
        step_end(1),
        turn_end(),
    ]);
    let replayed = replay(&good).expect("a journal that fits");
    let step = &replayed.turns[0].steps[0];
    assert_eq!(
        step.refusal.as_ref().map(|r| r.reason.as_str()),
        Some("refusal")
    );
    assert_eq!(step.notes.len(), 2);
    let cases: [(&str, Vec<Event>, usize, &str); 4] = [
        (
            "an answer that was not refused",
            vec![
                request(1, 1),
                response(1),
                detail(1, 1),
                refusal_event(1, 1),
            ],
            3,
            "llm/refusal",
        ),
        (
            "twice",
            vec![
                request(1, 1),
                refused_response(1),
                refusal_event(1, 1),
                refusal_event(1, 1),
            ],
            3,
            "llm/refusal",
        ),
        (
            "for an earlier attempt",
            vec![
                request(1, 1),
                failed(1, 1),
                request(1, 2),
                refused_response(1),
                refusal_event(1, 1),
            ],
            4,
            "llm/refusal",
        ),
        (
            "a note before the response",
            vec![request(1, 1), note_event(1, 1)],
            1,
            "llm/note",
        ),
    ];
    for (case, tail, bad, kind_expected) in cases {
        let (seq, kind, _) = refused(&with_prefix(tail));
        assert_eq!((seq, kind), (seq_of_tail(bad), kind_expected), "{case}");
    }
}
