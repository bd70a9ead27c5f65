//! The batch scheduler's cancellation and fault rules (DESIGN.md §5, I3, I9, I10; SCENARIOS.md
//! 9, 26–29), one test per rule: cancel before, during and after bodies start, while an approval
//! is pending or a `started` sync is in flight; locks held until a cancelled or timed-out tool
//! settles; internal faults and fsync failures that drain running calls and fabricate nothing.
//! Time is tokio's paused clock and ordering comes from latches, never from the wall clock.
//! Each test checks the results and what the journal says.

use crate::common;

use common::scheduler::*;
use common::*;
use journal::storage::{Fault, Op, ReadAt, Storage, TailLoss, WriteFile};
use journal::{Journal, Options, SimStorage};
use std::any::Any;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::event::{AskAnswer, ModelCall, StepOutcome, TurnOutcome};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Failpoints;
use tooljournal_runtime::{Approver, AskFuture, CallInfo, Decision, Hooks, PreExecute};
use tooljournal_runtime::{Config, ErrorCode, RuntimeError, Session, SessionOptions, ToolResult};
use tooljournal_runtime::{ToolError, ToolOutput};

// ---------------------------------------------------------------------------------------------
// Bodies that wait for their cancel, and batches cancelled at a chosen moment.

/// A body that says it started, waits for its cancel, then takes `cleanup` to stop.
fn stops_on_cancel(name: &str, bodies: &Bodies, started: &Arc<Notify>, cleanup: u64) -> TestTool {
    let (bodies, started) = (bodies.clone(), started.clone());
    TestTool::with(name, move |_, ctx| {
        let (bodies, started) = (bodies.clone(), started.clone());
        Box::pin(async move {
            let id = ctx.call_id().to_owned();
            bodies.enter(&id);
            started.notify_one();
            ctx.cancel().cancelled().await;
            tokio::time::sleep(Duration::from_millis(cleanup)).await;
            bodies.leave(&id);
            Err(ToolError::new(ErrorCode::Aborted, "stopped"))
        })
    })
}

fn codes(results: &[ToolResult]) -> Vec<Option<ErrorCode>> {
    results.iter().map(|r| r.code).collect()
}

/// Runs `calls` in a new turn and step, cancelling `cancel` once `when` is notified.
async fn run_cancelled_when(
    s: &mut Session,
    calls: Vec<ModelCall>,
    cancel: &CancellationToken,
    when: &Notify,
) -> Result<Vec<ToolResult>, RuntimeError> {
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let batch = async {
        tokio::join!(
            s.run_batch_cancellable(response(calls), cancel.clone()),
            async {
                when.notified().await;
                cancel.cancel();
            }
        )
        .0
    };
    // A batch that never settles fails here instead of hanging (paused time runs ahead).
    tokio::time::timeout(Duration::from_secs(3_600), batch)
        .await
        .expect("the batch settles")
}

async fn end_cancelled(s: &mut Session) {
    s.end_step(StepOutcome::Cancelled).unwrap();
    s.end_turn(TurnOutcome::Cancelled).await.unwrap();
}
// ---------------------------------------------------------------------------------------------
// §5: cancellation.

#[tokio::test(start_paused = true)]
async fn cancel_with_one_done_one_running_one_queued() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let started = Arc::new(Notify::new());
    let later = TestTool::ok("later");
    let later_probe = later.probe();
    let tools = vec![
        worker("quick", &bodies),
        stops_on_cancel("waits", &bodies, &started, 0),
        later,
    ];
    let mut s = session(&storage, tools, Hooks::default(), pool(1));
    let calls = vec![
        call("c1", "quick", "{}"),
        call("c2", "waits", "{}"),
        call("c3", "later", "{}"),
    ];
    let cancel = CancellationToken::new();
    let results = run_cancelled_when(&mut s, calls, &cancel, &started)
        .await
        .unwrap();
    end_cancelled(&mut s).await;
    assert_eq!(ids(&results), ["c1", "c2", "c3"]);
    assert_eq!(
        codes(&results),
        [
            None,
            Some(ErrorCode::Aborted),
            Some(ErrorCode::AbortedBeforeDispatch)
        ]
    );
    assert_eq!(
        results[0].content, "done c1",
        "a finished call keeps its result"
    );
    assert!(later_probe.runs().is_empty(), "c3 never ran");
    let c2 = replayed(&storage, "c2");
    assert_eq!(status_code(&c2), Some(ErrorCode::Aborted));
    assert_eq!((c2.state, c2.attempts), (CallState::Committed, 1));
    let c3 = replayed(&storage, "c3");
    assert!(c3.cancel_reason.is_some() && c3.outcome.is_none());
    assert_eq!(
        kinds(&storage, "c3"),
        [
            "received",
            "parsed",
            "approved",
            "cancelled-before-start",
            "committed"
        ]
    );
    assert_eq!(order(&storage, "committed"), ["c1", "c2", "c3"]);
}

#[tokio::test(start_paused = true)]
async fn cancel_right_after_the_assistant_message_runs_no_body() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("par", &bodies).parallel(), worker("ex", &bodies)];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    let cancel = CancellationToken::new();
    cancel.cancel();
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let calls = vec![call("a", "par", "{}"), call("b", "ex", "{}")];
    let results = s
        .run_batch_cancellable(response(calls), cancel)
        .await
        .unwrap();
    end_cancelled(&mut s).await;
    assert_eq!(ids(&results), ["a", "b"]);
    for r in &results {
        assert_eq!(r.code, Some(ErrorCode::AbortedBeforeDispatch), "{r:?}");
        assert!(r.content.starts_with("ABORTED_BEFORE_DISPATCH: "), "{r:?}");
        assert_eq!(
            kinds(&storage, &r.call_id),
            ["received", "cancelled-before-start", "committed"]
        );
    }
    assert!(bodies.log().is_empty(), "no body ran");
    let replay = replay(&storage);
    assert_eq!(replay.turns[0].outcome, Some(TurnOutcome::Cancelled));
}

/// A simulated disk that cancels `cancel` from inside a file sync once `armed`.
#[derive(Debug, Clone)]
struct CancelOnSync {
    disk: SimStorage,
    cancel: CancellationToken,
    armed: Arc<AtomicBool>,
}

struct CancellingFile(Box<dyn WriteFile>, CancelOnSync);

impl WriteFile for CancellingFile {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
        self.0.write_at(offset, buf)
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.0.len_bytes()
    }
    fn sync_data(&mut self) -> io::Result<()> {
        let synced = self.0.sync_data();
        if self.1.armed.load(Ordering::SeqCst) {
            self.1.cancel.cancel();
        }
        synced
    }
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        self.0.truncate(len_bytes)
    }
}

impl Storage for CancelOnSync {
    fn location(&self) -> String {
        self.disk.location()
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.disk.list()
    }
    fn open_read(&self, name: &str) -> io::Result<Box<dyn ReadAt>> {
        self.disk.open_read(name)
    }
    fn create_new(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let file = self.disk.create_new(name)?;
        Ok(Box::new(CancellingFile(file, self.clone())))
    }
    fn open_write(&self, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let file = self.disk.open_write(name)?;
        Ok(Box::new(CancellingFile(file, self.clone())))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.disk.rename(from, to)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.disk.remove(name)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.disk.sync_dir()
    }
    fn try_lock(&self) -> io::Result<Option<Box<dyn Any + Send + Sync>>> {
        self.disk.try_lock()
    }
    fn blocks(&self) -> bool {
        self.disk.blocks()
    }
}

/// A session over any storage, with journal options of the test's choosing.
fn session_over(
    storage: impl Storage + 'static,
    options: Options,
    tools: Vec<TestTool>,
    config: Config,
) -> Session {
    let (journal, _) = Journal::open(Arc::new(storage), options).expect("journal");
    let options = SessionOptions {
        session_id: Some("test-session".into()),
        ..SessionOptions::default()
    };
    Session::open(journal, registry(tools), Hooks::default(), config, options).expect("session")
}

#[tokio::test(start_paused = true)]
async fn cancel_while_the_started_sync_is_in_flight_runs_no_body() {
    let disk = SimStorage::new();
    let cancel = CancellationToken::new();
    let armed = Arc::new(AtomicBool::new(false));
    let storage = CancelOnSync {
        disk: disk.clone(),
        cancel: cancel.clone(),
        armed: armed.clone(),
    };
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let mut s = session_over(storage, Options::default(), vec![tool], pool(10));
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    armed.store(true, Ordering::SeqCst);
    let calls = vec![call("c1", "t", "{}"), call("c2", "t", "{}")];
    let results = s
        .run_batch_cancellable(response(calls), cancel.clone())
        .await
        .unwrap();
    armed.store(false, Ordering::SeqCst);
    end_cancelled(&mut s).await;
    assert!(cancel.is_cancelled(), "the cancel came from c1's sync");
    assert!(probe.runs().is_empty(), "no body ran");
    assert_eq!(
        codes(&results),
        [
            Some(ErrorCode::Aborted),
            Some(ErrorCode::AbortedBeforeDispatch)
        ]
    );
    assert!(results[0].content.contains("did not run"), "{results:?}");
    let c1 = replayed(&disk, "c1");
    assert_eq!(
        (c1.state, status_code(&c1)),
        (CallState::Committed, Some(ErrorCode::Aborted))
    );
    assert_eq!(
        kinds(&disk, "c2"),
        [
            "received",
            "parsed",
            "approved",
            "cancelled-before-start",
            "committed"
        ]
    );
}

/// Asks about every call.
struct AskAll;
impl PreExecute for AskAll {
    fn name(&self) -> &str {
        "ask-all"
    }
    fn decide(&self, _: &CallInfo) -> Decision {
        Decision::Ask {
            reason: "may I?".into(),
        }
    }
}

/// Never answers; says when it was asked.
struct Silent(Arc<Notify>);
impl Approver for Silent {
    fn ask(&self, _: CallInfo, _: String) -> AskFuture<'_> {
        self.0.notify_one();
        Box::pin(std::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn cancel_while_awaiting_approval_withdraws_the_question() {
    let storage = SimStorage::new();
    let asked = Arc::new(Notify::new());
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let hooks = Hooks {
        pre_execute: vec![Arc::new(AskAll)],
        approver: Some(Arc::new(Silent(asked.clone()))),
        ..Hooks::default()
    };
    let mut s = session(&storage, vec![tool], hooks, pool(10));
    let calls = vec![call("c1", "t", "{}"), call("c2", "t", "{}")];
    let cancel = CancellationToken::new();
    let results = run_cancelled_when(&mut s, calls, &cancel, &asked)
        .await
        .unwrap();
    end_cancelled(&mut s).await;
    assert_eq!(codes(&results), [Some(ErrorCode::AbortedBeforeDispatch); 2]);
    assert!(probe.runs().is_empty());
    assert_eq!(
        kinds(&storage, "c1"),
        [
            "received",
            "parsed",
            "ask/pending",
            "ask/cancelled",
            "cancelled-before-start",
            "committed"
        ]
    );
    assert_eq!(
        kinds(&storage, "c2"),
        ["received", "cancelled-before-start", "committed"],
        "nothing more is asked after the cancel"
    );
    let c1 = replayed(&storage, "c1");
    assert_eq!(c1.approval, None, "never approved");
    assert_eq!(c1.asks.len(), 1);
    assert_eq!(c1.asks[0].answer, Some(AskAnswer::Cancelled), "withdrawn");
    assert!(c1.asks[0].cancel_reason.is_some());
}

#[tokio::test(start_paused = true)]
async fn started_calls_are_awaited_until_they_settle_and_hold_their_locks() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let started = Arc::new(Notify::new());
    let next = worker("next", &bodies).parallel();
    let next_probe = next.probe();
    let tools = vec![
        stops_on_cancel("slow", &bodies, &started, 500).parallel(),
        next,
    ];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    let calls = vec![
        call("a", "slow", r#"{"path":"p"}"#),
        call("b", "next", r#"{"path":"p"}"#),
    ];
    let cancel = CancellationToken::new();
    let t0 = tokio::time::Instant::now();
    let results = run_cancelled_when(&mut s, calls, &cancel, &started)
        .await
        .unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(500));
    assert_eq!(bodies.log(), ["+a", "-a"], "returned after a settled");
    end_cancelled(&mut s).await;
    assert_eq!(
        codes(&results),
        [
            Some(ErrorCode::Aborted),
            Some(ErrorCode::AbortedBeforeDispatch)
        ]
    );
    assert!(next_probe.runs().is_empty(), "b never started");
    let a = replayed(&storage, "a");
    assert!(a.outcome.as_ref().unwrap().duration_ms >= 500);
    assert!(seq(&storage, "settled", "a") < seq(&storage, "cancelled-before-start", "b"));
    assert_eq!(order(&storage, "committed"), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_ignores_cancellation_is_reported_and_awaited() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let started = Arc::new(Notify::new());
    let deaf = {
        let (bodies, started) = (bodies.clone(), started.clone());
        TestTool::with("deaf", move |_, ctx| {
            let (bodies, started) = (bodies.clone(), started.clone());
            Box::pin(async move {
                bodies.enter(ctx.call_id());
                started.notify_one();
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                bodies.leave(ctx.call_id());
                Ok(ToolOutput::text("finished anyway"))
            })
        })
        .parallel()
    };
    // A polite neighbour that stops at once is not counted.
    let polite = stops_on_cancel("polite", &bodies, &Arc::new(Notify::new()), 0).parallel();
    let config = Config {
        cancel_grace_ms: 100,
        ..pool(10)
    };
    let mut s = session(&storage, vec![deaf, polite], Hooks::default(), config);
    let calls = vec![call("d", "deaf", "{}"), call("p", "polite", "{}")];
    let cancel = CancellationToken::new();
    let t0 = tokio::time::Instant::now();
    let results = run_cancelled_when(&mut s, calls, &cancel, &started)
        .await
        .unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(1_000), "awaited");
    end_cancelled(&mut s).await;
    assert_eq!(s.stats().ignored_cancellations(), 1);
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].content, "finished anyway", "its real outcome");
    assert_eq!(results[1].code, Some(ErrorCode::Aborted));
    let d = replayed(&storage, "d");
    assert_eq!(status_code(&d), None);
    assert_eq!(d.committed.unwrap().content, "finished anyway");
    assert!(seq(&storage, "settled", "d") < seq(&storage, "committed", "d"));
}

#[tokio::test(start_paused = true)]
async fn timeout_holds_locks_until_the_tool_settles() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![
        stops_on_cancel("stubborn", &bodies, &Arc::new(Notify::new()), 300).parallel(),
        worker("work", &bodies).parallel(),
    ];
    let config = Config {
        timeout_ms: 100,
        ..pool(10)
    };
    let mut s = session(&storage, tools, Hooks::default(), config);
    let calls = vec![
        call("a", "stubborn", r#"{"path":"p"}"#),
        call("o", "work", r#"{"reads":["q"]}"#),
        call("b", "work", r#"{"path":"p"}"#),
    ];
    let results = one_step(&mut s, calls).await;
    assert_eq!(
        codes(&results),
        [Some(ErrorCode::Timeout), None, None],
        "{results:?}"
    );
    assert!(bodies.overlap("a", "o"), "{:?}", bodies.log());
    assert!(!bodies.overlap("a", "b"), "{:?}", bodies.log());
    assert!(seq(&storage, "settled", "a") < seq(&storage, "started", "b"));
    assert!(replayed(&storage, "a").outcome.unwrap().duration_ms >= 400);
}

// ---------------------------------------------------------------------------------------------
// §5: faults.

#[tokio::test(start_paused = true)]
async fn an_internal_fault_drains_started_calls_writes_a_fault_and_fabricates_nothing() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let failpoints = Failpoints::armable();
    failpoints.arm("scheduler.after_settle", 1);
    let config = Config {
        failpoints,
        ..pool(10)
    };
    let tools = vec![worker("par", &bodies).parallel(), worker("ex", &bodies)];
    let mut s = session(&storage, tools, Hooks::default(), config);
    let calls = vec![
        call("a", "par", r#"{"ms":10}"#),
        call("b", "par", r#"{"ms":30}"#),
        call("c", "ex", "{}"),
    ];
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let error = s.run_batch(response(calls)).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Fault(_)), "{error:?}");
    assert_eq!(bodies.log(), ["+a", "+b", "-a", "-b"], "b was drained");
    // The driver closes the step and turn as failed (the fault rides on that sync).
    let failed = "fault".to_owned();
    s.end_step(StepOutcome::Failed {
        message: failed.clone(),
    })
    .unwrap();
    s.end_turn(TurnOutcome::Failed { message: failed })
        .await
        .unwrap();
    let all = events(&storage);
    let fault = all
        .iter()
        .find(|(_, e)| e.kind() == "fault")
        .expect("a fault event")
        .0;
    assert!(seq(&storage, "settled", "b") < fault);
    assert!(
        !all.iter()
            .any(|(_, e)| matches!(e.kind(), "committed" | "cancelled-before-start")),
        "nothing committed or made up"
    );
    let replay = replay(&storage);
    assert_eq!(replay.faults.len(), 1);
    let states: Vec<CallState> = replay.calls().map(|c| c.state).collect();
    assert_eq!(
        states,
        [CallState::Settled, CallState::Settled, CallState::Approved]
    );
}

#[tokio::test(start_paused = true)]
async fn an_fsync_failure_mid_batch_stops_everything_after_it() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("ex", &bodies)];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    // Sync 1 makes c1's start durable; sync 2, for c2's, fails.
    storage.inject(Op::Sync, 2, Fault::Error);
    let calls = vec![
        call("c1", "ex", "{}"),
        call("c2", "ex", "{}"),
        call("c3", "ex", "{}"),
    ];
    let error = s.run_batch(response(calls)).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Journal(_)), "{error:?}");
    assert_eq!(
        bodies.log(),
        ["+c1", "-c1"],
        "c1 ran once; nothing after it"
    );
    assert!(
        s.end_step(StepOutcome::Failed {
            message: "stopped".into()
        })
        .is_err(),
        "the journal is stopped"
    );
    // What reached the disk: c1 started, c2 never did.
    let disk = storage.power_loss(TailLoss::DropUnsynced);
    let states: Vec<(String, CallState)> = replay(&disk)
        .calls()
        .map(|c| (c.call.call_id.clone(), c.state))
        .collect();
    assert_eq!(
        states,
        [
            ("c1".to_owned(), CallState::Started),
            ("c2".to_owned(), CallState::Approved),
            ("c3".to_owned(), CallState::Approved),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_journal_failure_while_committing_still_awaits_running_calls() {
    let bodies = Bodies::default();
    let disk = SimStorage::new();
    // Every append reaches the disk at once, so the n-th write is the n-th append.
    let options = Options {
        write_buffer_bytes_max: 0,
        ..Options::default()
    };
    let fail_on_commit = {
        let (bodies, disk) = (bodies.clone(), disk.clone());
        TestTool::with("a", move |_, ctx| {
            let (bodies, disk) = (bodies.clone(), disk.clone());
            Box::pin(async move {
                bodies.enter(ctx.call_id());
                // The next appends: this call's `settled`, then its `committed`, which fails.
                disk.inject(Op::Write, 2, Fault::Error);
                bodies.leave(ctx.call_id());
                Ok(ToolOutput::text("done"))
            })
        })
        .parallel()
    };
    let tools = vec![fail_on_commit, worker("b", &bodies).parallel()];
    let mut s = session_over(disk.clone(), options, tools, pool(10));
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let calls = vec![call("a", "a", "{}"), call("b", "b", r#"{"ms":100}"#)];
    let t0 = tokio::time::Instant::now();
    let error = s.run_batch(response(calls)).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Journal(_)), "{error:?}");
    assert_eq!(
        bodies.log(),
        ["+a", "-a", "+b", "-b"],
        "b settled before the batch returned"
    );
    assert!(t0.elapsed() >= Duration::from_millis(100));
}
