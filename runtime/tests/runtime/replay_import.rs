//! Replay of an imported journal's events (schema 7; docs/FORMAT.md, *Imported journals*):
//! `import/source` only right after `session/open`, `import/line` and `import/outcome` only in
//! an imported journal, an imported call committed only from `received`, each call keeping its
//! source lines and verdict; and a resume refuses an imported journal.

use crate::common;
use common::written::{refused, replay};
use tooljournal_runtime::event::{
    CallRef, Classification, CommittedResult, Event, ImportLine, ImportOutcome, ImportSource,
    ImportVerdict, ModelCall, ModelResponse, SessionOpen, StepOutcome, StopReason, TurnOutcome,
    EVENT_SCHEMA_VERSION,
};
use tooljournal_runtime::replay::ImportedCall;
use tooljournal_runtime::state::CallState;

fn open() -> Event {
    Event::SessionOpen(SessionOpen {
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: "s".into(),
        workspace: ".".into(),
        tools: vec![],
    })
}

fn source() -> Event {
    Event::ImportSource(ImportSource {
        agent: "codex".into(),
        file: "rollout.jsonl".into(),
        size_bytes: 100,
        sha256: "00".repeat(32),
        source_session_id: Some("s".into()),
        damaged: vec![],
        notes: vec![],
    })
}

fn line(line: u64) -> Event {
    Event::ImportLine(ImportLine {
        line,
        offset: line * 100,
    })
}

fn call(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 1,
        call_id: id.into(),
    }
}

/// A turn's first step with `ids` as its calls, up to (not including) their `received`s: the
/// `llm/response` is seq 6 when `import/source` and one `import/line` come first.
fn step_with(ids: &[&str]) -> Vec<Event> {
    vec![
        Event::TurnStart {
            turn: 1,
            user_text: "go".into(),
        },
        Event::StepStart { turn: 1, step: 1 },
        Event::LlmResponse {
            turn: 1,
            step: 1,
            response: ModelResponse {
                text: String::new(),
                tool_calls: ids
                    .iter()
                    .map(|id| ModelCall {
                        call_id: (*id).into(),
                        name: "shell".into(),
                        arguments: "{}".into(),
                    })
                    .collect(),
                stop_reason: StopReason::ToolUse,
            },
        },
    ]
}

fn received(id: &str, index: u32, response_seq: u64) -> Event {
    Event::Received {
        call: call(id),
        index,
        tool: "shell".into(),
        raw_arguments: "{}".into(),
        source_seqs: vec![response_seq],
    }
}

fn outcome(id: &str, verdict: ImportVerdict, received_seq: u64) -> Event {
    Event::ImportOutcome(ImportOutcome {
        call: call(id),
        verdict,
        result: CommittedResult {
            content: "out".into(),
            is_error: false,
            code: None,
            value: None,
        },
        source_seqs: vec![received_seq],
    })
}

fn ends() -> Vec<Event> {
    vec![
        Event::StepEnd {
            turn: 1,
            step: 1,
            outcome: StepOutcome::Completed,
        },
        Event::TurnEnd {
            turn: 1,
            outcome: TurnOutcome::Completed,
        },
        Event::SessionClose,
    ]
}

#[test]
fn an_imported_call_is_committed_from_received_with_its_lines_and_verdict() {
    // seqs: 1 open, 2 source, 3 line 3, 4 turn, 5 step, 6 response, 7 line 4, 8 received a,
    // 9 received b, 10 line 9, 11 outcome a, 12 line 4, 13 outcome b.
    let mut events = vec![open(), source(), line(3)];
    events.extend(step_with(&["a", "b"]));
    events.extend([line(4), received("a", 0, 6), received("b", 1, 6)]);
    events.extend([line(9), outcome("a", ImportVerdict::Recorded, 8)]);
    let unknown = ImportVerdict::OutcomeUnknown {
        why: "no output".into(),
    };
    events.extend([line(4), outcome("b", unknown.clone(), 9)]);
    events.extend(ends());
    let replay = replay(&events).expect("an imported journal replays");
    assert_eq!(
        replay.imported.as_ref().map(|s| s.agent.as_str()),
        Some("codex")
    );
    let calls: Vec<_> = replay.calls().collect();
    assert!(calls.iter().all(|c| c.state == CallState::Committed));
    assert_eq!(
        calls[0].imported,
        Some(ImportedCall {
            line: Some(ImportLine {
                line: 4,
                offset: 400
            }),
            verdict: Some(ImportVerdict::Recorded),
            outcome_line: Some(ImportLine {
                line: 9,
                offset: 900
            }),
        })
    );
    assert_eq!(
        calls[1].imported.as_ref().and_then(|i| i.verdict.clone()),
        Some(unknown.clone())
    );
    assert_eq!(
        unknown.classification(),
        Some(Classification::ToolOutcomeUnknown)
    );
    assert_eq!(
        calls[0].committed.as_ref().map(|r| r.content.as_str()),
        Some("out")
    );
}

#[test]
fn import_source_comes_only_right_after_session_open() {
    // After another event: refused by name.
    let events = vec![
        open(),
        Event::TurnStart {
            turn: 1,
            user_text: String::new(),
        },
        source(),
    ];
    let (seq, kind, message) = refused(&events);
    assert_eq!((seq, kind), (3, "import/source"));
    assert!(message.contains("right after session/open"), "{message}");
    // Twice: the second is refused.
    let (seq, _, _) = refused(&[open(), source(), source()]);
    assert_eq!(seq, 3);
}

#[test]
fn import_events_are_refused_in_a_journal_that_was_not_imported() {
    let (seq, kind, message) = refused(&[open(), line(1)]);
    assert_eq!((seq, kind), (2, "import/line"));
    assert!(message.contains("not imported"), "{message}");

    let mut events = vec![open()];
    events.extend(step_with(&["a"]));
    events.extend([
        received("a", 0, 4),
        outcome("a", ImportVerdict::Recorded, 5),
    ]);
    let (seq, kind, message) = refused(&events);
    assert_eq!((seq, kind), (6, "import/outcome"));
    assert!(message.contains("not imported"), "{message}");
}

#[test]
fn an_import_outcome_commits_only_a_received_call_pointing_back_at_it() {
    let base = || {
        let mut e = vec![open(), source()];
        e.extend(step_with(&["a"]));
        e.push(received("a", 0, 5)); // seq 6
        e
    };
    // Twice: the second finds the call committed.
    let mut events = base();
    events.push(outcome("a", ImportVerdict::Recorded, 6));
    events.push(outcome("a", ImportVerdict::Recorded, 7));
    let e = replay(&events).expect_err("a second outcome is refused");
    assert!(e.to_string().contains("committed"), "{e}");
    // Not pointing at the call's `received`.
    let mut events = base();
    events.push(outcome("a", ImportVerdict::Recorded, 5));
    let (seq, _, message) = refused(&events);
    assert_eq!(seq, 7);
    assert!(message.contains("points back"), "{message}");
    // A call never received.
    let mut events = base();
    events.push(outcome("zz", ImportVerdict::Recorded, 6));
    let (seq, _, _) = refused(&events);
    assert_eq!(seq, 7);
}
