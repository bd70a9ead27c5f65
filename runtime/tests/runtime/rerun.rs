//! `Session::resume_recovering` and `Session::run_rerun` on a real (file) journal: a session
//! dropped in the middle of a batch, then resumed with a recovery that leaves calls to run
//! again. What the library refuses (typed, the journal untouched), and what a re-run does: the
//! body once, under the call's id and key, attempt 1 for a call that never started and the
//! next attempt for one that did.

use crate::common;

use common::{call, response, TestTool};
use journal::{FsStorage, ReadEnd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tooljournal_runtime::event::{
    idempotency_key, CallRef, Classification, CommittedResult, Event, RecoveredCall, Recovery,
    RecoveryRerun, RerunPolicy, StepOutcome, TurnOutcome,
};
use tooljournal_runtime::replay::{replay_storage, SessionReplay};
use tooljournal_runtime::result::error_content;
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::ToolOutput;
use tooljournal_runtime::{BuildError, ErrorCode, RuntimeError, Session};

const SESSION: &str = "rerun-lib";

/// Every body run: (call id, attempt, idempotency key).
type Runs = Arc<Mutex<Vec<(String, u32, String)>>>;

/// `count` records its run and answers at once (parallel-safe); `hang` records its run and, on
/// its first attempt, waits for a notification nobody sends (exclusive: a barrier).
fn tools(runs: &Runs) -> Vec<TestTool> {
    let record = |runs: &Runs, ctx: &tooljournal_runtime::ToolContext| {
        runs.lock().unwrap().push((
            ctx.call_id().to_owned(),
            ctx.attempt(),
            ctx.idempotency_key().to_owned(),
        ));
    };
    let count_runs = runs.clone();
    let count = TestTool::with("count", move |_, ctx| {
        record(&count_runs, &ctx);
        let id = ctx.call_id().to_owned();
        let attempt = ctx.attempt();
        Box::pin(async move { Ok(ToolOutput::text(format!("count {id} attempt {attempt}"))) })
    })
    .parallel();
    let hang_runs = runs.clone();
    let never = Arc::new(tokio::sync::Notify::new());
    let hang = TestTool::with("hang", move |_, ctx| {
        record(&hang_runs, &ctx);
        let never = never.clone();
        let attempt = ctx.attempt();
        Box::pin(async move {
            if attempt == 1 {
                never.notified().await;
            }
            Ok(ToolOutput::text(format!("hang attempt {attempt}")))
        })
    })
    .read_only()
    .retry_safe();
    vec![count, hang]
}

struct Dirs {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    journal: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    Dirs {
        journal: tmp.path().join("journal"),
        ws,
        _tmp: tmp,
    }
}

fn builder(d: &Dirs, runs: &Runs) -> tooljournal_runtime::SessionBuilder {
    let mut b = Session::builder(&d.ws, &d.journal)
        .without_builtins()
        .without_spill()
        .session_id(SESSION);
    for tool in tools(runs) {
        b = b.tool(Arc::new(tool));
    }
    b
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn cref(step: u32, id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step,
        call_id: id.into(),
    }
}

/// Turn 1: step 1 runs `e1` to its end; step 2 runs `d1` (committed), then `h1`, which never
/// ends; `c1` and `c2` wait behind it. The session is dropped there, as a crash would leave it
/// (the runtime that ran it shut down).
fn crashed(d: &Dirs) {
    let runs: Runs = Arc::default();
    let rt = rt();
    rt.block_on(async {
        let mut session = builder(d, &runs).open().unwrap();
        session.begin_turn("go").unwrap();
        session.begin_step().unwrap();
        session
            .run_batch(response(vec![call("e1", "count", "{}")]))
            .await
            .unwrap();
        session.end_step(StepOutcome::Completed).unwrap();
        session.begin_step().unwrap();
        let batch = session.run_batch(response(vec![
            call("d1", "count", "{}"),
            call("h1", "hang", "{}"),
            call("c1", "count", "{}"),
            call("c2", "count", "{}"),
        ]));
        let timed_out = tokio::time::timeout(Duration::from_millis(300), batch).await;
        assert!(timed_out.is_err(), "h1 never ends");
        drop(session);
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    let ran: Vec<String> = runs.lock().unwrap().iter().map(|r| r.0.clone()).collect();
    assert_eq!(ran, ["e1", "d1", "h1"]);
    let r = replay(&d.journal);
    let state = |step: u32, id: &str| {
        r.calls()
            .find(|c| c.call == cref(step, id))
            .unwrap_or_else(|| panic!("{id}"))
            .state
    };
    assert_eq!(state(1, "e1"), CallState::Committed);
    assert_eq!(state(2, "d1"), CallState::Committed);
    assert_eq!(state(2, "h1"), CallState::Started);
    assert_eq!(state(2, "c1"), CallState::Approved);
    assert_eq!(state(2, "c2"), CallState::Approved);
}

fn replay(journal: &Path) -> SessionReplay {
    let storage = Arc::new(FsStorage::open(journal).unwrap());
    let (replay, end) = replay_storage(storage, journal::Limits::default())
        .unwrap_or_else(|e| panic!("replay refuses the journal: {e}"));
    assert_eq!(end, ReadEnd::Clean);
    replay
}

/// Every event of the journal, in order.
fn events(journal: &Path) -> Vec<Event> {
    let storage = Arc::new(FsStorage::open(journal).unwrap());
    journal::Reader::open(storage, journal::Limits::default())
        .unwrap()
        .map(|r| {
            r.unwrap()
                .decode::<tooljournal_runtime::event::Record>()
                .unwrap()
                .event
        })
        .collect()
}

/// The journal's segments, name and bytes.
fn segments(journal: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(journal)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".segment"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn unknown(call: CallRef) -> RecoveredCall {
    RecoveredCall {
        call,
        state: CallState::Started,
        classification: Some(Classification::ToolOutcomeUnknown),
        result: CommittedResult {
            content: error_content(ErrorCode::ToolOutcomeUnknown, "interrupted while running"),
            is_error: true,
            code: Some(ErrorCode::ToolOutcomeUnknown),
            value: None,
        },
    }
}

fn not_started(call: CallRef) -> RecoveredCall {
    RecoveredCall {
        call,
        state: CallState::Approved,
        classification: Some(Classification::ToolNotStarted),
        result: CommittedResult {
            content: error_content(ErrorCode::ToolNotStarted, "interrupted before it started"),
            is_error: true,
            code: Some(ErrorCode::ToolNotStarted),
            value: None,
        },
    }
}

/// A recovery that closes `closed` and leaves the step open, then `recovery/rerun`.
fn rerunning(closed: Vec<RecoveredCall>, policy: RerunPolicy, rerun: &[CallRef]) -> Vec<Event> {
    vec![
        Event::Recovery(Recovery {
            dropped_bytes: 0,
            calls: closed,
            interrupted_step: None,
            interrupted_turn: None,
        }),
        Event::RecoveryRerun(RecoveryRerun {
            policy,
            calls: rerun.to_vec(),
        }),
    ]
}

fn resume(d: &Dirs, runs: &Runs, recovery: Vec<Event>) -> Result<Session, BuildError> {
    let prepared = builder(d, runs).lock()?.prepare()?;
    Ok(prepared.resume_recovering(recovery)?.0)
}

/// `recovery` is refused with a misuse naming `what`, and not a byte of the journal changes.
fn refused(d: &Dirs, recovery: Vec<Event>, what: &str) {
    let before = segments(&d.journal);
    let runs: Runs = Arc::default();
    match resume(d, &runs, recovery) {
        Err(BuildError::Runtime(RuntimeError::Misuse(message))) => {
            assert!(message.contains(what), "{message:?} names {what:?}")
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(session) => {
            drop(session);
            let storage = Arc::new(FsStorage::open(&d.journal).unwrap());
            let replayed = replay_storage(storage, journal::Limits::default()).map(|_| ());
            panic!(
                "accepted a recovery that should be refused ({what}); the journal replays now: \
                 {replayed:?}"
            )
        }
    }
    assert_eq!(
        segments(&d.journal),
        before,
        "{what}: the journal is untouched"
    );
    assert!(runs.lock().unwrap().is_empty(), "{what}: nothing ran");
}

#[test]
fn a_recovery_that_does_not_fit_the_journal_is_refused_and_changes_nothing() {
    let d = dirs();
    crashed(&d);
    let (c1, c2, h1) = (cref(2, "c1"), cref(2, "c2"), cref(2, "h1"));
    let good = rerunning(
        vec![unknown(h1.clone())],
        RerunPolicy::NotStarted,
        &[c1.clone(), c2.clone()],
    );
    // A call named twice would run twice (and the journal's replay refuses it).
    refused(
        &d,
        rerunning(
            vec![unknown(h1.clone()), not_started(c2.clone())],
            RerunPolicy::NotStarted,
            &[c1.clone(), c1.clone()],
        ),
        "named twice",
    );
    // The shape: ask/cancelled events, a recovery, and recovery/rerun when calls run again.
    let shape = "a recovering resume appends";
    refused(&d, vec![], shape);
    refused(&d, vec![good[1].clone(), good[0].clone()], shape);
    refused(&d, vec![good[1].clone()], shape);
    refused(
        &d,
        vec![good[0].clone(), good[1].clone(), good[1].clone()],
        shape,
    );
    refused(
        &d,
        vec![
            good[0].clone(),
            Event::TurnEnd {
                turn: 1,
                outcome: TurnOutcome::Interrupted,
            },
        ],
        shape,
    );
    // A committed call of the open step.
    refused(
        &d,
        rerunning(
            vec![unknown(h1.clone()), not_started(c2.clone())],
            RerunPolicy::NotStarted,
            &[cref(2, "d1"), c1.clone()],
        ),
        "call d1 (turn 1, step 2): committed cannot run again under not-started",
    );
    // A started call, under not-started.
    refused(
        &d,
        rerunning(
            vec![not_started(c2.clone())],
            RerunPolicy::NotStarted,
            &[h1.clone(), c1.clone()],
        ),
        "call h1 (turn 1, step 2): started cannot run again under not-started",
    );
    // A call of another step, and one the journal never saw.
    for other in [cref(1, "e1"), cref(2, "zz")] {
        refused(
            &d,
            rerunning(
                vec![unknown(h1.clone()), not_started(c2.clone())],
                RerunPolicy::NotStarted,
                &[other.clone(), c1.clone()],
            ),
            &format!("{other}: not a call of the open step"),
        );
    }
    // After all that, the journal is as the crash left it: the right recovery is accepted.
    let runs: Runs = Arc::default();
    let rt = rt();
    let results = rt.block_on(async {
        let mut session = resume(&d, &runs, good).unwrap();
        session
            .run_rerun(tokio_util::sync::CancellationToken::new())
            .await
            .unwrap()
    });
    let ran: Vec<&str> = results.iter().map(|(c, _)| c.call_id.as_str()).collect();
    assert_eq!(ran, ["c1", "c2"]);
}

/// A recovery the shape check lets through but whose events replay refuses once appended: the
/// library must refuse it before writing, or the journal can never be read again.
#[test]
fn a_recovery_that_closes_a_rerun_call_is_refused_and_changes_nothing() {
    let d = dirs();
    crashed(&d);
    let (c1, c2, h1) = (cref(2, "c1"), cref(2, "c2"), cref(2, "h1"));
    refused(
        &d,
        rerunning(
            vec![unknown(h1), not_started(c1.clone())],
            RerunPolicy::NotStarted,
            &[c1, c2],
        ),
        "c1",
    );
}

/// As above: the recovery ends the step (and turn) the re-run is to run in.
#[test]
fn a_recovery_that_interrupts_the_rerun_step_is_refused_and_changes_nothing() {
    let d = dirs();
    crashed(&d);
    let (c1, c2, h1) = (cref(2, "c1"), cref(2, "c2"), cref(2, "h1"));
    let mut interrupting = rerunning(vec![unknown(h1)], RerunPolicy::NotStarted, &[c1, c2]);
    if let Event::Recovery(r) = &mut interrupting[0] {
        r.interrupted_step = Some((1, 2));
        r.interrupted_turn = Some(1);
    }
    refused(&d, interrupting, "step");
}

#[test]
fn not_started_calls_run_once_with_attempt_one_and_their_keys() {
    let d = dirs();
    crashed(&d);
    let (c1, c2, h1) = (cref(2, "c1"), cref(2, "c2"), cref(2, "h1"));
    let runs: Runs = Arc::default();
    let rt = rt();
    rt.block_on(async {
        let mut session = resume(
            &d,
            &runs,
            rerunning(
                vec![unknown(h1.clone())],
                RerunPolicy::NotStarted,
                &[c1.clone(), c2.clone()],
            ),
        )
        .unwrap();
        let results = session
            .run_rerun(tokio_util::sync::CancellationToken::new())
            .await
            .unwrap();
        let got: Vec<(&str, &str)> = results
            .iter()
            .map(|(c, r)| (c.call_id.as_str(), r.content.as_str()))
            .collect();
        assert_eq!(
            got,
            [("c1", "count c1 attempt 1"), ("c2", "count c2 attempt 1")]
        );
        // Nothing left to run: a second call does nothing.
        let again = session
            .run_rerun(tokio_util::sync::CancellationToken::new())
            .await
            .unwrap();
        assert!(again.is_empty());
        // The session goes on after the re-run's turn.
        session.begin_turn("next").unwrap();
        session.begin_step().unwrap();
        session
            .run_batch(response(vec![call("n1", "count", "{}")]))
            .await
            .unwrap();
        session.end_step(StepOutcome::Completed).unwrap();
        session.end_turn(TurnOutcome::Completed).await.unwrap();
        session.close().await.unwrap();
    });
    let mut ran = runs.lock().unwrap().clone();
    ran.sort();
    let key = |c: &CallRef| idempotency_key(SESSION, c);
    assert_eq!(
        ran,
        [
            ("c1".to_owned(), 1, key(&c1)),
            ("c2".to_owned(), 1, key(&c2)),
            (
                "n1".to_owned(),
                1,
                key(&CallRef {
                    turn: 2,
                    step: 1,
                    call_id: "n1".into()
                })
            ),
        ],
        "each body once, attempt 1, its own key; h1 never again"
    );
    let r = replay(&d.journal);
    assert!(r.closed);
    for c in r.calls() {
        let id = c.call.call_id.as_str();
        assert_eq!(c.state, CallState::Committed, "{id}");
        let rerun = matches!(id, "c1" | "c2").then_some(RerunPolicy::NotStarted);
        assert_eq!(c.rerun, rerun, "{id}");
    }
    let c1_replay = r.calls().find(|c| c.call == c1).unwrap();
    assert!(!c1_replay.recovered);
    assert_eq!(c1_replay.attempts, 1);
    assert_eq!(
        c1_replay.idempotency_key.as_deref(),
        Some(key(&c1).as_str())
    );
    assert_eq!(
        c1_replay.committed.as_ref().map(|r| r.content.as_str()),
        Some("count c1 attempt 1")
    );
    let h1_replay = r.calls().find(|c| c.call == h1).unwrap();
    assert!(h1_replay.recovered);
    assert_eq!(
        h1_replay.committed.as_ref().and_then(|r| r.code),
        Some(ErrorCode::ToolOutcomeUnknown)
    );
    let turn = &r.turns[0];
    assert_eq!(turn.outcome, Some(TurnOutcome::Interrupted));
    assert_eq!(turn.steps[1].outcome, Some(StepOutcome::Completed));
}

#[test]
fn a_started_call_runs_again_under_safe_with_the_next_attempt_and_the_same_key() {
    let d = dirs();
    crashed(&d);
    let (c1, c2, h1) = (cref(2, "c1"), cref(2, "c2"), cref(2, "h1"));
    let runs: Runs = Arc::default();
    let rt = rt();
    let results = rt.block_on(async {
        let mut session = resume(
            &d,
            &runs,
            rerunning(
                vec![],
                RerunPolicy::Safe,
                &[h1.clone(), c1.clone(), c2.clone()],
            ),
        )
        .unwrap();
        let results = tokio::time::timeout(
            Duration::from_secs(10),
            session.run_rerun(tokio_util::sync::CancellationToken::new()),
        )
        .await
        .expect("the re-run ends")
        .unwrap();
        session.close().await.unwrap();
        results
    });
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|(c, r)| (c.call_id.as_str(), r.content.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("h1", "hang attempt 2"),
            ("c1", "count c1 attempt 1"),
            ("c2", "count c2 attempt 1")
        ]
    );
    let ran = runs.lock().unwrap().clone();
    assert_eq!(
        ran.iter().filter(|r| r.0 == "h1").collect::<Vec<_>>(),
        [&("h1".to_owned(), 2, idempotency_key(SESSION, &h1))],
        "the body once more, attempt 2, the key of attempt 1"
    );
    let r = replay(&d.journal);
    let h1_replay = r.calls().find(|c| c.call == h1).unwrap();
    assert_eq!(h1_replay.attempts, 2);
    assert_eq!(h1_replay.rerun, Some(RerunPolicy::Safe));
    assert!(!h1_replay.recovered);
    let started: Vec<(u32, String)> = events(&d.journal)
        .into_iter()
        .filter_map(|e| match e {
            Event::Started(s) if s.call == h1 => Some((s.attempt, s.idempotency_key)),
            _ => None,
        })
        .collect();
    let key = idempotency_key(SESSION, &h1);
    assert_eq!(started, [(1, key.clone()), (2, key)]);
}

/// A resume that appended its recovery and `recovery/rerun`, then died before the calls
/// started: the next resume runs them (they still never started), and the journal reads.
#[test]
fn a_rerun_that_died_before_its_calls_started_runs_them_on_the_next_resume() {
    let d = dirs();
    crashed(&d);
    let (c1, c2, h1) = (cref(2, "c1"), cref(2, "c2"), cref(2, "h1"));
    let runs: Runs = Arc::default();
    let rt = rt();
    rt.block_on(async {
        let session = resume(
            &d,
            &runs,
            rerunning(
                vec![unknown(h1)],
                RerunPolicy::NotStarted,
                &[c1.clone(), c2.clone()],
            ),
        )
        .unwrap();
        // Dies before running them.
        drop(session);
    });
    let r = replay(&d.journal);
    assert!(r.calls().filter(|c| c.rerun.is_some()).count() == 2);
    // Nothing is left to classify: an empty recovery, and the same calls named again.
    let results = rt.block_on(async {
        let mut session = resume(
            &d,
            &runs,
            rerunning(vec![], RerunPolicy::NotStarted, &[c1.clone(), c2.clone()]),
        )
        .unwrap();
        session
            .run_rerun(tokio_util::sync::CancellationToken::new())
            .await
            .unwrap()
    });
    assert_eq!(results.len(), 2);
    let ran: Vec<(String, u32)> = runs
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.0.clone(), r.1))
        .collect();
    assert_eq!(ran, [("c1".to_owned(), 1), ("c2".to_owned(), 1)]);
    let r = replay(&d.journal);
    assert_eq!(
        r.calls().find(|c| c.call == c1).map(|c| c.state),
        Some(CallState::Committed)
    );
}
