//! Properties of the scheduler over random batches (DESIGN.md §4, §5; I3, I9): parallel-safe
//! and exclusive tools, durations, paths read and written, panics, and a cancel at a random
//! time. Simulated time (tokio paused clock): the same case always runs the same way.

use crate::common;

use common::*;
use journal::SimStorage;
use proptest::prelude::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::{Config, ErrorCode};
use tooljournal_runtime::{ToolError, ToolOutput};

#[derive(Debug, Clone)]
struct Spec {
    parallel: bool,
    duration_ms: u64,
    reads: Vec<&'static str>,
    writes: Vec<&'static str>,
    panics: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    let path = prop_oneof![Just("a"), Just("b"), Just("c"), Just("d")];
    (
        proptest::bool::weighted(0.7),
        0u64..50,
        proptest::collection::vec(path.clone(), 0..2),
        proptest::collection::vec(path, 0..2),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(parallel, duration_ms, reads, writes, panics)| Spec {
            parallel,
            duration_ms,
            reads,
            writes,
            panics,
        })
}

/// What the bodies saw: for each call that ran, when it started (simulated ms) and which calls
/// were running at that moment. Two calls overlapped iff one started while the other ran.
#[derive(Default)]
struct Seen {
    running: Vec<usize>,
    starts: Vec<(usize, u64, Vec<usize>)>,
}

type Shared = Arc<Mutex<Seen>>;

fn sim_tool(seen: Shared, epoch: Instant) -> TestTool {
    TestTool::with("sim", move |args, ctx| {
        let seen = seen.clone();
        Box::pin(async move {
            let index = args.get("i").and_then(|v| v.as_u64()).unwrap() as usize;
            let duration = args.get("ms").and_then(|v| v.as_u64()).unwrap();
            {
                let mut s = seen.lock().unwrap();
                let others = s.running.clone();
                s.starts.push((index, epoch.elapsed().as_millis() as u64, others));
                s.running.push(index);
            }
            let done = |seen: &Shared| seen.lock().unwrap().running.retain(|&r| r != index);
            if args.get("panic").and_then(|v| v.as_bool()) == Some(true) {
                done(&seen);
                panic!("injected panic");
            }
            let result = tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(duration)) => Ok(ToolOutput::text(format!("done {index}"))),
                _ = ctx.cancel().cancelled() => Err(ToolError::new(ErrorCode::Aborted, "stopped")),
            };
            done(&seen);
            result
        })
    })
    .safe_when(|args| args.get("parallel").and_then(|v| v.as_bool()) == Some(true))
}

fn conflict(x: &Spec, y: &Spec) -> bool {
    x.writes
        .iter()
        .any(|p| y.writes.contains(p) || y.reads.contains(p))
        || x.reads.iter().any(|p| y.writes.contains(p))
}

proptest! {
    #[test]
    fn random_batches_keep_order_limits_and_cancellation(
        specs in proptest::collection::vec(spec(), 1..9),
        pool in 1usize..4,
        cancel_at in proptest::option::weighted(0.4, 0u64..80),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let storage = SimStorage::new();
        let seen: Shared = Arc::default();
        let (results, cancelled_at) = rt.block_on(async {
            let epoch = Instant::now();
            let tool = sim_tool(seen.clone(), epoch);
            let config = Config { parallel_max: pool, ..Config::default() };
            let mut session = session_on(&storage, registry(vec![tool]), Hooks::default(), config);
            let calls = specs.iter().enumerate().map(|(i, s)| {
                let args = json!({"i": i, "ms": s.duration_ms, "parallel": s.parallel,
                    "reads": s.reads, "writes": s.writes, "panic": s.panics});
                call(&format!("c{i}"), "sim", &args.to_string())
            }).collect();
            let cancel = CancellationToken::new();
            let cancelled_at = Arc::new(Mutex::new(None));
            if let Some(ms) = cancel_at {
                let (cancel, cancelled_at) = (cancel.clone(), cancelled_at.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    *cancelled_at.lock().unwrap() = Some(epoch.elapsed().as_millis() as u64);
                    cancel.cancel();
                });
            }
            session.begin_turn("go").unwrap();
            session.begin_step().unwrap();
            let results = session.run_batch_cancellable(response(calls), cancel).await.unwrap();
            let at = *cancelled_at.lock().unwrap();
            (results, at)
        });
        let starts = std::mem::take(&mut seen.lock().unwrap().starts);
        let ran = |i: usize| starts.iter().find(|s| s.0 == i);
        let overlapped = |i: usize, j: usize| {
            ran(i).is_some_and(|s| s.2.contains(&j)) || ran(j).is_some_and(|s| s.2.contains(&i))
        };

        // I3: one result per call id, in model order.
        let ids: Vec<_> = results.iter().map(|r| r.call_id.clone()).collect();
        prop_assert_eq!(ids, (0..specs.len()).map(|i| format!("c{i}")).collect::<Vec<_>>());
        for (i, r) in results.iter().enumerate() {
            // I9: a call reported as never dispatched did not run. A call whose `started` was
            // journaled when the cancel came, but whose body had not begun, is ABORTED and says
            // it did not run.
            match (ran(i).is_some(), r.code) {
                (true, code) => {
                    prop_assert_ne!(code, Some(ErrorCode::AbortedBeforeDispatch), "call {} ran", i);
                    if specs[i].panics {
                        prop_assert_eq!(code, Some(ErrorCode::ToolPanicked));
                    }
                }
                (false, Some(ErrorCode::AbortedBeforeDispatch)) => {}
                (false, Some(ErrorCode::Aborted)) => {
                    prop_assert!(r.content.contains("did not run"), "call {}: {:?}", i, r);
                }
                (false, _) => prop_assert!(false, "call {} never ran but says {:?}", i, r),
            }
        }
        // I9: nothing starts after the cancel.
        if let Some(t) = cancelled_at {
            for (i, start, _) in &starts {
                prop_assert!(*start <= t, "call {} started at {} after the cancel at {}", i, start, t);
            }
        }
        // The pool limit, exclusive barriers and path locks.
        for (i, _, others) in &starts {
            prop_assert!(others.len() < pool, "call {} started beside {:?} with a pool of {}", i, others, pool);
        }
        for i in 0..specs.len() {
            for j in 0..specs.len() {
                if i == j || !overlapped(i, j) {
                    continue;
                }
                prop_assert!(specs[i].parallel && specs[j].parallel, "exclusive call {} or {} overlapped another", i, j);
                prop_assert!(!conflict(&specs[i], &specs[j]), "calls {} and {} share a path with a write and overlapped", i, j);
            }
        }
        // Two parallel-safe calls on disjoint paths at the head of the batch run together.
        if specs.len() >= 2 && pool >= 2 && cancel_at.is_none_or(|t| t > 0)
            && specs[0].parallel && specs[1].parallel && !conflict(&specs[0], &specs[1])
            && !specs[0].panics && specs[0].duration_ms > 0
        {
            prop_assert!(overlapped(0, 1), "calls 0 and 1 should have overlapped: {:?}", starts);
        }
        // The journal agrees: every call committed with the result returned.
        let replay = replay(&storage);
        let calls: Vec<_> = replay.calls().collect();
        prop_assert_eq!(calls.len(), results.len());
        for (c, r) in calls.iter().zip(&results) {
            prop_assert_eq!(c.state, CallState::Committed);
            prop_assert_eq!(c.committed.as_ref(), Some(&r.committed()));
            prop_assert_eq!(c.cancel_reason.is_some(), r.code == Some(ErrorCode::AbortedBeforeDispatch));
            prop_assert_eq!(c.attempts > 0, c.cancel_reason.is_none(), "{}: started iff not cancelled before start", c.call);
        }
    }
}
