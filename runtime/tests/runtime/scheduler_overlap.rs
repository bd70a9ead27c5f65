//! The batch scheduler's rules for who runs alongside whom (DESIGN.md §4, I3; SCENARIOS.md 10),
//! one test per rule: the pool limit, exclusive barriers, concurrency re-decided before
//! a start, per-path locks, results in model order, one fsync per start group. Time is tokio's
//! paused clock and ordering comes from latches, never from the wall clock. Each test checks
//! the results and what the journal says.

use crate::common;

use common::scheduler::*;
use common::*;
use journal::SimStorage;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ToolOutput;

// ---------------------------------------------------------------------------------------------
// §4: who runs alongside whom.

#[tokio::test(start_paused = true)]
async fn parallel_safe_calls_overlap_up_to_the_pool_limit() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("work", &bodies).parallel()];
    let mut s = session(&storage, tools, Hooks::default(), pool(3));
    let calls = (1..=6)
        .map(|i| {
            let args = format!(r#"{{"ms":{},"writes":["f{i}"]}}"#, 10 * i);
            call(&format!("c{i}"), "work", &args)
        })
        .collect();
    let results = one_step(&mut s, calls).await;
    assert_eq!(ids(&results), ["c1", "c2", "c3", "c4", "c5", "c6"]);
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    assert_eq!(bodies.max(), 3, "never more than the pool, and it fills");
    assert_eq!(
        bodies.log()[..3],
        ["+c1", "+c2", "+c3"],
        "the first three start together"
    );
    // A rolling pool: c4 takes c1's place while c2 and c3 still run.
    assert!(bodies.overlap("c4", "c2") && bodies.overlap("c4", "c3"));
    assert!(!bodies.overlap("c4", "c1"));
    for c in replay(&storage).calls() {
        assert_eq!((c.state, c.attempts), (CallState::Committed, 1), "{c:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_exclusive_call_is_a_barrier() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("par", &bodies).parallel(), worker("ex", &bodies)];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    let calls = vec![
        call("p1", "par", "{}"),
        call("p2", "par", "{}"),
        call("x", "ex", "{}"),
        call("p3", "par", "{}"),
        call("p4", "par", "{}"),
    ];
    let results = one_step(&mut s, calls).await;
    assert_eq!(ids(&results), ["p1", "p2", "x", "p3", "p4"]);
    assert!(bodies.alone("x"), "{:?}", bodies.log());
    assert!(bodies.overlap("p1", "p2") && bodies.overlap("p3", "p4"));
    // The journal agrees: x starts after both earlier calls settled, and nothing after it
    // starts before it settled.
    let x_started = seq(&storage, "started", "x");
    let x_settled = seq(&storage, "settled", "x");
    assert!(seq(&storage, "settled", "p1") < x_started);
    assert!(seq(&storage, "settled", "p2") < x_started);
    assert!(seq(&storage, "started", "p3") > x_settled);
    assert!(seq(&storage, "started", "p4") > x_settled);
}

#[tokio::test(start_paused = true)]
async fn a_parallel_safe_call_that_becomes_exclusive_before_it_starts_runs_alone() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let flipped = Arc::new(AtomicBool::new(false));
    let flip = {
        let (bodies, flipped) = (bodies.clone(), flipped.clone());
        TestTool::with("flip", move |_, ctx| {
            let (bodies, flipped) = (bodies.clone(), flipped.clone());
            Box::pin(async move {
                bodies.enter(ctx.call_id());
                flipped.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                bodies.leave(ctx.call_id());
                Ok(ToolOutput::text("flipped"))
            })
        })
        .parallel()
    };
    let seen = flipped.clone();
    let maybe = worker("maybe", &bodies).safe_when(move |_| !seen.load(Ordering::SeqCst));
    let tools = vec![flip, maybe, worker("par", &bodies).parallel()];
    let mut s = session(&storage, tools, Hooks::default(), pool(2));
    // f and q fill the pool; when q ends, m (safe when it was planned) is asked again and is
    // now exclusive: it waits for f, runs alone, and r waits for it.
    let calls = vec![
        call("f", "flip", "{}"),
        call("q", "par", "{}"),
        call("m", "maybe", "{}"),
        call("r", "par", "{}"),
    ];
    let results = one_step(&mut s, calls).await;
    assert_eq!(ids(&results), ["f", "q", "m", "r"]);
    assert!(bodies.overlap("f", "q"), "{:?}", bodies.log());
    assert!(bodies.alone("m"), "{:?}", bodies.log());
    assert!(seq(&storage, "settled", "f") < seq(&storage, "started", "m"));
    assert!(seq(&storage, "settled", "m") < seq(&storage, "started", "r"));
}

#[tokio::test(start_paused = true)]
async fn a_write_and_a_read_of_the_same_path_never_overlap() {
    let cases = [
        (r#"{"ms":20,"writes":["p"]}"#, r#"{"ms":10,"reads":["p"]}"#),
        (r#"{"ms":20,"reads":["p"]}"#, r#"{"ms":10,"writes":["p"]}"#),
        (r#"{"ms":20,"path":"p"}"#, r#"{"ms":10,"writes":["p"]}"#),
    ];
    for (i, (first, second)) in cases.into_iter().enumerate() {
        let bodies = Bodies::default();
        let storage = SimStorage::new();
        let tools = vec![worker("io", &bodies).parallel()];
        let mut s = session(&storage, tools, Hooks::default(), pool(10));
        // `o` is on another path: it shows the batch does run in parallel.
        let calls = vec![
            call("a", "io", first),
            call("o", "io", r#"{"ms":10,"reads":["q"]}"#),
            call("b", "io", second),
        ];
        let results = one_step(&mut s, calls).await;
        assert!(results.iter().all(|r| !r.is_error), "case {i}: {results:?}");
        assert!(bodies.overlap("a", "o"), "case {i}: {:?}", bodies.log());
        assert!(!bodies.overlap("a", "b"), "case {i}: {:?}", bodies.log());
        assert!(
            seq(&storage, "settled", "a") < seq(&storage, "started", "b"),
            "case {i}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn calls_on_other_paths_go_on() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("io", &bodies).parallel()];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    let calls = vec![
        call("w", "io", r#"{"ms":50,"writes":["p"]}"#),
        call("r1", "io", r#"{"ms":10,"reads":["q"]}"#),
        call("r2", "io", r#"{"ms":10,"reads":["q"]}"#),
        call("w2", "io", r#"{"ms":10,"writes":["r"]}"#),
    ];
    let results = one_step(&mut s, calls).await;
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    assert!(bodies.overlap("r1", "r2"), "two reads of one path overlap");
    assert!(bodies.overlap("w", "r1") && bodies.overlap("w", "w2"));
    assert_eq!(bodies.max(), 4);
    let c = replayed(&storage, "r1");
    assert_eq!(c.resources.expect("started").reads, ["q"]);
    assert_eq!(
        order(&storage, "started")[..],
        ["w", "r1", "r2", "w2"],
        "one group"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_on_a_free_path_is_not_held_up_behind_one_waiting_for_a_lock() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("io", &bodies).parallel()];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    let calls = vec![
        call("w", "io", r#"{"ms":50,"writes":["p"]}"#),
        call("rp", "io", r#"{"ms":10,"reads":["p"]}"#),
        call("rq", "io", r#"{"ms":10,"reads":["q"]}"#),
    ];
    let results = one_step(&mut s, calls).await;
    assert_eq!(ids(&results), ["w", "rp", "rq"]);
    assert!(!bodies.overlap("w", "rp"));
    assert!(
        bodies.overlap("w", "rq"),
        "rq touches nothing w holds: {:?}",
        bodies.log()
    );
}

#[tokio::test(start_paused = true)]
async fn results_land_in_model_order_when_calls_finish_out_of_order() {
    let bodies = Bodies::default();
    let storage = SimStorage::new();
    let tools = vec![worker("work", &bodies).parallel()];
    let mut s = session(&storage, tools, Hooks::default(), pool(10));
    let calls = vec![
        call("a", "work", r#"{"ms":30}"#),
        call("b", "work", r#"{"ms":10}"#),
        call("c", "work", r#"{"ms":20}"#),
    ];
    let results = one_step(&mut s, calls).await;
    assert_eq!(ids(&results), ["a", "b", "c"]);
    let contents: Vec<&str> = results.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(contents, ["done a", "done b", "done c"]);
    assert_eq!(order(&storage, "settled"), ["b", "c", "a"], "finish order");
    assert_eq!(order(&storage, "committed"), ["a", "b", "c"], "model order");
    assert!(
        seq(&storage, "settled", "a") < seq(&storage, "committed", "b"),
        "b waits for a"
    );
    for r in &results {
        let c = replayed(&storage, &r.call_id);
        assert_eq!(c.committed.expect("committed").content, r.content);
    }
}

#[tokio::test(start_paused = true)]
async fn calls_starting_together_share_one_fsync() {
    const N: usize = 4;
    for (parallel, syncs) in [(true, 1), (false, N as u64)] {
        let bodies = Bodies::default();
        let storage = SimStorage::new();
        let tool = worker("work", &bodies);
        let tool = if parallel { tool.parallel() } else { tool };
        let mut s = session(&storage, vec![tool], Hooks::default(), pool(10));
        let calls = (0..N)
            .map(|i| call(&format!("c{i}"), "work", "{}"))
            .collect();
        s.begin_turn("go").unwrap();
        s.begin_step().unwrap();
        let before = storage.stats().syncs;
        let results = s.run_batch(response(calls)).await.unwrap();
        let after = storage.stats().syncs;
        assert_eq!(results.len(), N);
        assert_eq!(after - before, syncs, "parallel: {parallel}");
        assert_eq!(bodies.max(), if parallel { N } else { 1 });
        if parallel {
            let kinds: Vec<&str> = events(&storage)
                .iter()
                .filter(|(_, e)| e.call().is_some())
                .map(|(_, e)| e.kind())
                .skip_while(|k| *k != "started")
                .take(N)
                .collect();
            assert_eq!(kinds, ["started"; N], "the group's records are together");
        }
    }
}
