//! docs/SCENARIOS.md 30: the user stops a step before the model answered. The other
//! cancellation scenarios (26 to 29) are in `scheduler_cancel.rs`; this one needs no batch.

use crate::common;

use common::*;
use journal::SimStorage;
use tooljournal_runtime::event::{Event, StepOutcome, TurnOutcome};
use tooljournal_runtime::Config;
use tooljournal_runtime::Hooks;

#[tokio::test(start_paused = true)]
async fn scenario_30_cancel_at_step_start_sends_no_request_and_runs_no_call() {
    let storage = SimStorage::new();
    let tool = TestTool::ok("touch");
    let probe = tool.probe();
    let mut s = session_on(
        &storage,
        registry(vec![tool]),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    // Stopped here: the embedder never asks the model, and ends the step and turn.
    s.end_step(StepOutcome::Cancelled).unwrap();
    s.end_turn(TurnOutcome::Cancelled).await.unwrap();

    let kinds: Vec<&str> = journal_events(&storage).iter().map(Event::kind).collect();
    assert!(!kinds.contains(&"llm/response"), "{kinds:?}");
    assert_eq!(
        kinds[kinds.len() - 6..],
        [
            "turn/start",
            "step/start",
            "tool/schema",
            "step/tools",
            "step/end",
            "turn/end"
        ]
    );
    let replay = replay(&storage);
    let step = &replay.turns[0].steps[0];
    assert_eq!(step.response, None, "no model response");
    assert!(step.calls.is_empty(), "no calls");
    assert_eq!(step.outcome, Some(StepOutcome::Cancelled));
    assert_eq!(replay.turns[0].outcome, Some(TurnOutcome::Cancelled));
    assert!(probe.runs().is_empty(), "no body ran");

    // The session goes on: the next turn runs its call.
    let results = one_step(&mut s, vec![call("a", "touch", "{}")]).await;
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(probe.runs(), ["a"]);
}
