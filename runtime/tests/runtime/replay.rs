//! Replay folds a journal back into the states the runtime went through, and refuses journals
//! that do not make sense.

use crate::common;

use common::*;
use journal::{Journal, Options, SimStorage};
use proptest::prelude::*;
use std::sync::Arc;
use tooljournal_runtime::event::{
    Event, ModelResponse, Record, StepOutcome, StopReason, TurnOutcome,
};
use tooljournal_runtime::replay::{replay_storage, ReplayError};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::ToolError;
use tooljournal_runtime::{CallInfo, Decision, Hooks, PreExecute};
use tooljournal_runtime::{Config, ErrorCode};

/// Denies every call to the tool named "denied".
struct DenyNamed;
impl PreExecute for DenyNamed {
    fn name(&self) -> &str {
        "deny-named"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.tool == "denied" {
            Decision::Deny {
                reason: "not today".into(),
            }
        } else {
            Decision::Pass
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Ok,
    Unknown,
    BadJson,
    BadSchema,
    Denied,
    Fails,
    Panics,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => Just(Kind::Ok),
        1 => Just(Kind::Unknown),
        1 => Just(Kind::BadJson),
        1 => Just(Kind::BadSchema),
        1 => Just(Kind::Denied),
        1 => Just(Kind::Fails),
        1 => Just(Kind::Panics),
    ]
}

/// Turns of steps of (calls, truncated?).
fn session_shape() -> impl Strategy<Value = Vec<Vec<(Vec<Kind>, bool)>>> {
    proptest::collection::vec(
        proptest::collection::vec(
            (
                proptest::collection::vec(kind(), 0..4),
                proptest::bool::weighted(0.15),
            ),
            1..3,
        ),
        1..3,
    )
}

fn tools() -> Vec<TestTool> {
    vec![
        TestTool::ok("ok").input(serde_json::json!({
            "type": "object", "properties": {"n": {"type": "integer"}}
        })),
        TestTool::ok("denied"),
        TestTool::failing("fails", ErrorCode::ToolFailed, "it broke"),
        TestTool::with("panics", |_, _| Box::pin(async { panic!("boom") })),
    ]
}

fn model_call(id: String, kind: Kind) -> tooljournal_runtime::event::ModelCall {
    match kind {
        Kind::Ok => call(&id, "ok", r#"{"n": 1}"#),
        Kind::Unknown => call(&id, "missing", "{}"),
        Kind::BadJson => call(&id, "ok", "{\"n\":"),
        Kind::BadSchema => call(&id, "ok", r#"{"n": "one"}"#),
        Kind::Denied => call(&id, "denied", "{}"),
        Kind::Fails => call(&id, "fails", "{}"),
        Kind::Panics => call(&id, "panics", "{}"),
    }
}

proptest! {
    #[test]
    fn replay_reproduces_every_calls_final_state(shape in session_shape()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let storage = SimStorage::new();
        let hooks = Hooks { pre_execute: vec![Arc::new(DenyNamed)], ..Hooks::default() };
        let mut session = session_on(&storage, registry(tools()), hooks, Config::default());
        let mut expected = Vec::new();
        rt.block_on(async {
            for (t, steps) in shape.iter().enumerate() {
                session.begin_turn(&format!("turn {t}")).unwrap();
                for (s, (kinds, truncated)) in steps.iter().enumerate() {
                    session.begin_step().unwrap();
                    let calls: Vec<_> = kinds.iter().enumerate()
                        .map(|(i, k)| model_call(format!("t{t}s{s}c{i}"), *k)).collect();
                    let stop_reason = if *truncated { StopReason::Length } else { StopReason::ToolUse };
                    let results = session
                        .run_batch(ModelResponse { text: "x".into(), tool_calls: calls, stop_reason })
                        .await
                        .unwrap();
                    for (k, r) in kinds.iter().zip(results) {
                        expected.push((*k, *truncated, r));
                    }
                    session.end_step(StepOutcome::Completed).unwrap();
                }
                session.end_turn(TurnOutcome::Completed).await.unwrap();
            }
            session.close().await.unwrap();
        });

        let replay = replay(&storage);
        prop_assert!(replay.closed);
        let calls: Vec<_> = replay.calls().collect();
        prop_assert_eq!(calls.len(), expected.len());
        for (c, (kind, truncated, result)) in calls.iter().zip(&expected) {
            prop_assert_eq!(&c.call.call_id, &result.call_id);
            prop_assert_eq!(c.state, CallState::Committed);
            prop_assert_eq!(c.committed.as_ref(), Some(&result.committed()));
            let rejected_code = if *truncated {
                Some(ErrorCode::TruncatedCall)
            } else {
                match kind {
                    Kind::Unknown => Some(ErrorCode::UnknownTool),
                    Kind::BadJson => Some(ErrorCode::SyntaxError),
                    Kind::BadSchema => Some(ErrorCode::SchemaError),
                    Kind::Denied => Some(ErrorCode::PolicyDenied),
                    _ => None,
                }
            };
            prop_assert_eq!(c.rejection.as_ref().map(|r| r.0), rejected_code);
            // A call either was rejected before starting, or started once and settled.
            prop_assert_eq!(c.outcome.is_some(), rejected_code.is_none());
            prop_assert_eq!(c.attempts, u32::from(rejected_code.is_none()));
            let expect_code = rejected_code.or(match kind {
                Kind::Fails => Some(ErrorCode::ToolFailed),
                Kind::Panics => Some(ErrorCode::ToolPanicked),
                _ => None,
            });
            prop_assert_eq!(result.code, expect_code);
        }
    }
}

/// Writes raw records (each an arbitrary event) straight to a journal.
fn journal_of(records: &[Record]) -> SimStorage {
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    for r in records {
        journal.append(r).unwrap();
    }
    journal.close().unwrap();
    storage
}

fn rec(event: Event) -> Record {
    Record { at_ms: 1, event }
}

fn session_prefix() -> Vec<Record> {
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(tools()),
        Hooks::default(),
        Config::default(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        session.begin_turn("go").unwrap();
        session.begin_step().unwrap();
        session
            .run_batch(response(vec![call("c1", "ok", "{}")]))
            .await
            .unwrap();
    });
    drop(session);
    let reader = journal::Reader::open(
        Arc::new(storage.process_crash()),
        journal::Limits::default(),
    )
    .unwrap();
    reader
        .map(|r| r.unwrap().decode::<Record>().unwrap())
        .collect()
}

#[test]
fn an_illegal_transition_in_the_journal_is_an_error_naming_the_record() {
    let mut records = session_prefix();
    // Drop the `started`, so `settled` follows `approved`.
    let started = records
        .iter()
        .position(|r| r.event.kind() == "started")
        .unwrap();
    records.remove(started);
    // Point the `settled` back at the `approved` record so only the transition is wrong.
    if let Event::Settled { source_seqs, .. } = &mut records[started].event {
        *source_seqs = vec![started as u64];
    }
    let storage = journal_of(&records);
    match replay_storage(Arc::new(storage), journal::Limits::default()) {
        Err(ReplayError::IllegalTransition { seq, source, .. }) => {
            assert_eq!(seq, started as u64 + 1);
            assert_eq!(
                (source.from, source.to),
                (CallState::Approved, CallState::Settled)
            );
            assert_eq!(source.call.call_id, "c1");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_call_event_that_does_not_point_back_at_the_calls_last_event_is_inconsistent() {
    let mut records = session_prefix();
    let parsed = records
        .iter()
        .position(|r| r.event.kind() == "parsed")
        .unwrap();
    if let Event::Parsed { source_seqs, .. } = &mut records[parsed].event {
        *source_seqs = vec![1];
    }
    let err =
        replay_storage(Arc::new(journal_of(&records)), journal::Limits::default()).unwrap_err();
    assert!(matches!(err, ReplayError::Inconsistent { .. }), "{err}");
    assert!(err.to_string().contains("points back"), "{err}");
}

#[test]
fn a_future_event_type_is_named_not_skipped() {
    let mut records = session_prefix();
    records.truncate(2);
    let storage = journal_of(&records);
    // A complete, checksummed record whose event type this build does not know.
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    journal
        .append(&(5u64, Event::VARIANT_COUNT + 4, 0u64))
        .unwrap();
    journal.close().unwrap();
    match replay_storage(Arc::new(storage), journal::Limits::default()) {
        Err(e @ ReplayError::UnknownEventType { .. }) => {
            assert!(
                e.to_string()
                    .contains(&format!("unknown event type {}", Event::VARIANT_COUNT + 4)),
                "{e}"
            );
            assert!(e.to_string().contains("record seq 3"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_journal_that_does_not_begin_with_session_open_is_refused() {
    let storage = journal_of(&[rec(Event::TurnStart {
        turn: 1,
        user_text: "hi".into(),
    })]);
    let err = replay_storage(Arc::new(storage), journal::Limits::default()).unwrap_err();
    assert!(err.to_string().contains("session/open"), "{err}");
}

#[test]
fn an_empty_journal_replays_as_an_empty_session() {
    let storage = SimStorage::new();
    let (replay, end) = replay_storage(Arc::new(storage), journal::Limits::default()).unwrap();
    assert_eq!(end, journal::ReadEnd::Clean);
    assert!(replay.open.is_none() && replay.turns.is_empty());
}

#[test]
fn a_tool_error_keeps_its_side_effects_in_settled() {
    let effect = tooljournal_runtime::event::SideEffect::FsWrite {
        path: "a.txt".into(),
        before_sha256: None,
        after_sha256: "ab".into(),
    };
    let e2 = effect.clone();
    let tool = TestTool::with("half", move |_, _| {
        let e = e2.clone();
        Box::pin(async move {
            Err(
                ToolError::new(ErrorCode::ToolFailed, "disk full after the write")
                    .with_side_effect(e),
            )
        })
    });
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![tool]),
        Hooks::default(),
        Config::default(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt.block_on(one_step(&mut session, vec![call("h", "half", "{}")]));
    assert_eq!(results[0].code, Some(ErrorCode::ToolFailed));
    let replay = replay(&storage);
    let c = replay.calls().next().unwrap();
    assert_eq!(c.outcome.as_ref().unwrap().side_effects, vec![effect]);
}

fn session_options() -> tooljournal_runtime::SessionOptions {
    tooljournal_runtime::SessionOptions {
        session_id: Some("second".into()),
        workspace: "/ws".into(),
        clock: Arc::new(tooljournal_runtime::ManualClock::new(1_700_000_000_000)),
    }
}

#[tokio::test]
async fn open_refuses_a_journal_that_already_holds_a_session() {
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![]),
        Hooks::default(),
        Config::default(),
    );
    session.begin_turn("hello").unwrap();
    drop(session); // crashed mid-turn
    let before = replay(&storage).last_seq;
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    let opened = tooljournal_runtime::Session::open(
        journal,
        registry(vec![]),
        Hooks::default(),
        Config::default(),
        session_options(),
    );
    match opened {
        Err(tooljournal_runtime::RuntimeError::JournalMoved(m)) => {
            assert!(m.contains("already holds"), "{m}")
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a second session/open was written"),
    }
    let after = replay(&storage);
    assert_eq!(after.last_seq, before, "nothing was appended");
    assert_eq!(after.open.unwrap().session_id, "test-session");
}

#[tokio::test]
async fn resume_refuses_a_replay_that_is_not_the_journal_s_end() {
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![]),
        Hooks::default(),
        Config::default(),
    );
    session.begin_turn("hello").unwrap();
    session.end_turn(TurnOutcome::Completed).await.unwrap();
    drop(session);
    let stale = replay(&storage);
    // Another process resumed and went on after `stale` was read.
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    let mut other = tooljournal_runtime::Session::resume(
        journal,
        registry(vec![]),
        Hooks::default(),
        Config::default(),
        session_options(),
        &stale,
    )
    .expect("the replay is the journal's end");
    other.begin_turn("meanwhile").unwrap();
    other.end_turn(TurnOutcome::Completed).await.unwrap();
    drop(other);
    let before = replay(&storage).last_seq;
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    let resumed = tooljournal_runtime::Session::resume(
        journal,
        registry(vec![]),
        Hooks::default(),
        Config::default(),
        session_options(),
        &stale,
    );
    match resumed {
        Err(tooljournal_runtime::RuntimeError::JournalMoved(m)) => {
            assert!(m.contains(&format!("seq {before}")), "{m}")
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("resumed from a stale replay"),
    }
    assert_eq!(replay(&storage).last_seq, before, "nothing was appended");
}

#[test]
fn session_reopen_stands_only_right_after_session_close() {
    let open = rec(Event::SessionOpen(
        tooljournal_runtime::event::SessionOpen {
            schema_version: tooljournal_runtime::event::EVENT_SCHEMA_VERSION,
            session_id: "s".into(),
            workspace: "/ws".into(),
            tools: vec![],
        },
    ));
    let turn = |n: u32| {
        [
            rec(Event::TurnStart {
                turn: n,
                user_text: format!("turn {n}"),
            }),
            rec(Event::TurnEnd {
                turn: n,
                outcome: tooljournal_runtime::event::TurnOutcome::Completed,
            }),
        ]
    };
    let replay = |records: &[Record]| {
        replay_storage(Arc::new(journal_of(records)), journal::Limits::default())
    };
    // Closed, reopened, a second turn, closed again: one session of two turns.
    let mut records = vec![open.clone()];
    records.extend(turn(1));
    records.extend([rec(Event::SessionClose), rec(Event::SessionReopen)]);
    records.extend(turn(2));
    let (reopened, _) = replay(&records).unwrap();
    assert!(!reopened.closed, "open again after session/reopen");
    assert_eq!(reopened.turns.len(), 2);
    records.push(rec(Event::SessionClose));
    assert!(replay(&records).unwrap().0.closed);

    // Anywhere else it is an inconsistent journal, and so is any other event after a close.
    let mut not_closed = vec![open.clone()];
    not_closed.extend(turn(1));
    not_closed.push(rec(Event::SessionReopen));
    let err = replay(&not_closed).unwrap_err();
    assert!(
        err.to_string()
            .contains("session/reopen of a session that is not closed"),
        "{err}"
    );
    let mut after_close = vec![open];
    after_close.extend(turn(1));
    after_close.push(rec(Event::SessionClose));
    after_close.extend(turn(2));
    let err = replay(&after_close).unwrap_err();
    assert!(
        err.to_string().contains("event after session/close"),
        "{err}"
    );
}
