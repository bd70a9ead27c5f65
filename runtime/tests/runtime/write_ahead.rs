//! Write-ahead (DESIGN.md I1) and the durability plan (§8), checked through the storage seam:
//! power loss at every write and sync point of a small session; fsyncs counted per step.

use crate::common;

use common::*;
use journal::storage::{Fault, Op, TailLoss};
use journal::{Journal, Options, SimStorage};
use std::sync::Arc;
use tooljournal_runtime::event::{ModelCall, StepOutcome, TurnOutcome};
use tooljournal_runtime::replay::replay_storage;
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ManualClock;
use tooljournal_runtime::{Config, RuntimeError, Session, SessionOptions};

/// The session every power-loss case runs: two turns, mixed calls. Stops at the first error.
async fn drive(
    storage: &SimStorage,
    registry: Arc<tooljournal_runtime::Registry>,
) -> Result<(), RuntimeError> {
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default())?;
    let mut session = Session::open(
        journal,
        registry,
        Hooks::default(),
        Config::default(),
        SessionOptions {
            session_id: Some("s".into()),
            workspace: "/ws".into(),
            clock: Arc::new(ManualClock::new(0)),
        },
    )?;
    let steps: Vec<Vec<ModelCall>> = vec![
        vec![
            call("a1", "touch", r#"{"path":"x"}"#),
            call("a2", "touch", "{not json"),
            call("a3", "touch", r#"{"path":"y"}"#),
        ],
        vec![call("b1", "touch", r#"{"path":"z"}"#)],
    ];
    for (turn, calls) in steps.into_iter().enumerate() {
        session.begin_turn(&format!("turn {turn}"))?;
        session.begin_step()?;
        session.run_batch(response(calls)).await?;
        session.end_step(StepOutcome::Completed)?;
        session.end_turn(TurnOutcome::Completed).await?;
    }
    session.close().await
}

#[tokio::test]
async fn power_loss_anywhere_never_hides_a_started_body() {
    let probe_storage = SimStorage::new();
    let tool = TestTool::ok("touch");
    drive(&probe_storage, registry(vec![tool]))
        .await
        .expect("the clean run succeeds");
    let total_ops = probe_storage.op_count(Op::Any);
    assert!(total_ops > 10);

    for k in 1..=total_ops {
        for tail in [
            TailLoss::DropUnsynced,
            TailLoss::Torn {
                granule_bytes: 512,
                granules: 1,
            },
            TailLoss::ZeroFilled {
                granule_bytes: 4096,
                granules: 1,
            },
        ] {
            let storage = SimStorage::new();
            storage.inject(Op::Any, k, Fault::PowerLoss);
            let tool = TestTool::ok("touch");
            let probe = tool.probe();
            let result = drive(&storage, registry(vec![tool])).await;
            assert!(
                result.is_err() || k == total_ops + 1,
                "op {k}: the power loss surfaced"
            );
            let after = storage.power_loss(tail);
            let (replay, end) = replay_storage(Arc::new(after), journal::Limits::default())
                .unwrap_or_else(|e| panic!("op {k} {tail:?}: replay failed: {e}"));
            assert!(
                !matches!(end, journal::ReadEnd::Corrupt(_)),
                "op {k}: {end:?}"
            );
            for ran in probe.runs() {
                let call = replay
                    .calls()
                    .find(|c| c.call.call_id == ran)
                    .unwrap_or_else(|| {
                        panic!("op {k} {tail:?}: body of {ran} ran, but the journal lost the call")
                    });
                assert!(
                    call.attempts >= 1
                        && matches!(
                            call.state,
                            CallState::Started | CallState::Settled | CallState::Committed
                        ),
                    "op {k} {tail:?}: body of {ran} ran, journal says {} with {} attempts",
                    call.state,
                    call.attempts
                );
            }
            for c in replay.calls() {
                if c.outcome.is_some() {
                    assert!(
                        c.attempts >= 1,
                        "op {k}: {} settled without a started",
                        c.call
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn a_sequential_session_costs_one_fsync_per_step() {
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![TestTool::ok("touch")]),
        Hooks::default(),
        Config::default(),
    );
    let syncs_at_start = storage.stats().syncs;
    let steps = 20;
    session.begin_turn("go").unwrap();
    for i in 0..steps {
        session.begin_step().unwrap();
        let results = session
            .run_batch(response(vec![call(
                &format!("c{i}"),
                "touch",
                r#"{"path":"p"}"#,
            )]))
            .await
            .unwrap();
        assert!(!results[0].is_error);
        session.end_step(StepOutcome::Completed).unwrap();
    }
    session.end_turn(TurnOutcome::Completed).await.unwrap();
    let syncs = storage.stats().syncs - syncs_at_start;
    // One per step (the `started` sync), plus the one at turn/end.
    assert_eq!(
        syncs,
        steps + 1,
        "{steps} single-call steps took {syncs} fsyncs"
    );
    session.close().await.unwrap();
}

#[tokio::test]
async fn rejected_calls_cost_no_fsync_of_their_own() {
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![TestTool::ok("touch")]),
        Hooks::default(),
        Config::default(),
    );
    let before = storage.stats().syncs;
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    let results = session
        .run_batch(response(vec![
            call("x", "nope", "{}"),
            call("y", "touch", "{bad"),
        ]))
        .await
        .unwrap();
    assert!(results.iter().all(|r| r.is_error));
    assert_eq!(
        storage.stats().syncs,
        before,
        "nothing started, nothing waited for the disk"
    );
}

#[tokio::test]
async fn scenario_09_a_failed_fsync_stops_the_batch_before_any_body_runs() {
    let storage = SimStorage::new();
    let tool = TestTool::ok("touch");
    let probe = tool.probe();
    let mut session = session_on(
        &storage,
        registry(vec![tool]),
        Hooks::default(),
        Config::default(),
    );
    storage.inject(Op::Sync, 1, Fault::Error);
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    let err = session
        .run_batch(response(vec![
            call("a", "touch", "{}"),
            call("b", "touch", "{}"),
        ]))
        .await
        .expect_err("the journal failure surfaces");
    assert!(matches!(err, RuntimeError::Journal(_)), "{err}");
    assert!(
        probe.runs().is_empty(),
        "no body ran after the failed sync: {:?}",
        probe.runs()
    );
    // Fail-stop: the session refuses to go on.
    assert!(session.end_step(StepOutcome::Completed).is_err());
}
