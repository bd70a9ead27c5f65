//! The deterministic fallback reduction: oldest turns first, then the current
//! turn's older steps' results, never the newest step, and a clear "still over" when nothing
//! more may go.

use tooljournal_history::conversation::{ConvCall, ConvResult, ToolSpec};
use tooljournal_history::layout::{layout, Compaction, StepView, TurnView};
use tooljournal_history::reduce::{estimate_tokens, plan_fallback, plan_toward};

fn step(step: u32, id: &str, content: String) -> StepView {
    StepView {
        step,
        text: format!("step {step}"),
        calls: vec![ConvCall {
            id: id.into(),
            name: "read".into(),
            arguments: "{}".into(),
        }],
        state: None,
        results: vec![ConvResult {
            id: id.into(),
            name: "read".into(),
            content,
            is_error: false,
        }],
    }
}

fn big(c: char) -> String {
    c.to_string().repeat(4000)
}

/// Two earlier turns of 4000 characters each, then the current turn: steps whose results are
/// `current`'s.
fn turns(current: Vec<String>) -> Vec<TurnView> {
    let mut turns = vec![
        TurnView {
            turn: 1,
            user_text: "one".into(),
            steps: vec![step(1, "a", big('a'))],
        },
        TurnView {
            turn: 2,
            user_text: "two".into(),
            steps: vec![step(1, "b", big('b'))],
        },
    ];
    turns.push(TurnView {
        turn: 3,
        user_text: "three".into(),
        steps: current
            .into_iter()
            .enumerate()
            .map(|(i, content)| step(i as u32 + 1, &format!("c{i}"), content))
            .collect(),
    });
    turns
}

fn plan(through_turn: u32, shortened: &[(u32, u32)]) -> Compaction {
    Compaction {
        through_turn,
        summary: None,
        shortened: shortened.to_vec(),
        preview_chars: 100,
    }
}

/// The estimate of `turns` laid out under `compaction`, as a budget.
fn cost(turns: &[TurnView], tools: &[ToolSpec], compaction: &Compaction) -> u64 {
    estimate_tokens(&layout(Some("sys".into()), turns, Some(compaction)), tools)
}

#[test]
fn within_budget_nothing_is_reduced() {
    let turns = turns(vec![big('c'), big('d'), big('e')]);
    let full = cost(&turns, &[], &plan(0, &[]));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], full, 100),
        Ok(plan(0, &[]))
    );
}

#[test]
fn oldest_turns_go_first() {
    let turns = turns(vec![big('c'), big('d'), big('e')]);
    let budget = cost(&turns, &[], &plan(1, &[]));
    assert!(budget < cost(&turns, &[], &plan(0, &[])));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget, 100),
        Ok(plan(1, &[]))
    );
    // One token less: turn 2 goes too.
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget - 1, 100),
        Ok(plan(2, &[]))
    );
}

#[test]
fn then_the_current_turns_older_steps_are_shortened_never_the_newest() {
    let turns = turns(vec![big('c'), big('d'), big('e')]);
    let budget = cost(&turns, &[], &plan(2, &[(3, 1)]));
    assert!(budget < cost(&turns, &[], &plan(2, &[])));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget, 100),
        Ok(plan(2, &[(3, 1)]))
    );
    let budget = cost(&turns, &[], &plan(2, &[(3, 1), (3, 2)]));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget, 100),
        Ok(plan(2, &[(3, 1), (3, 2)]))
    );
    // The newest step is never cut: one token less is over, by that one token.
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget - 1, 100),
        Err(1)
    );
}

#[test]
fn a_step_whose_results_are_short_is_not_named() {
    let turns = turns(vec!["ok".into(), big('d'), big('e')]);
    let budget = cost(&turns, &[], &plan(2, &[(3, 2)]));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget, 100),
        Ok(plan(2, &[(3, 2)]))
    );
    // A result just over the preview would grow by the marker: not named either.
    let turns = self::turns(vec!["x".repeat(101), big('d'), big('e')]);
    let budget = cost(&turns, &[], &plan(2, &[(3, 2)]));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget, 100),
        Ok(plan(2, &[(3, 2)]))
    );
}

#[test]
fn the_tools_count_against_the_budget() {
    let turns = turns(vec![big('c')]);
    let tools = [ToolSpec {
        name: "read".into(),
        description: "d".repeat(3000),
        input_schema: serde_json::json!({"type": "object"}),
    }];
    let budget = cost(&turns, &[], &plan(0, &[]));
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &[], budget, 100),
        Ok(plan(0, &[]))
    );
    assert_eq!(
        plan_fallback(Some("sys"), &turns, &tools, budget, 100),
        Ok(plan(1, &[]))
    );
}

#[test]
fn nothing_to_reduce_says_how_far_over() {
    // `{"messages":[]}`: 15 bytes, 4 tokens.
    assert_eq!(plan_fallback(None, &[], &[], 0, 100), Err(4));
    assert_eq!(plan_fallback(None, &[], &[], 4, 100), Ok(plan(0, &[])));
    // One turn of one step: the newest step, kept whole.
    let only = &turns(vec![big('c')])[2..];
    let whole = estimate_tokens(&layout(None, only, None), &[]);
    assert_eq!(plan_fallback(None, only, &[], whole - 10, 100), Err(10));
}

/// Short of the budget, `plan_toward` still gives the smallest layout (every earlier
/// turn out, the older steps of this turn shortened) and how far over it is, for a refused
/// request to go reduced as far as it can be; within the budget it is `plan_fallback`'s plan.
#[test]
fn short_of_the_budget_the_smallest_layout_is_planned_with_how_far_over() {
    let turns = turns(vec![big('c'), big('d'), big('e')]);
    let smallest = cost(&turns, &[], &plan(2, &[(3, 1), (3, 2)]));
    assert_eq!(
        plan_toward(Some("sys"), &turns, &[], smallest - 7, 100),
        (plan(2, &[(3, 1), (3, 2)]), Some(7))
    );
    let budget = cost(&turns, &[], &plan(1, &[]));
    assert_eq!(
        plan_toward(Some("sys"), &turns, &[], budget, 100),
        (plan(1, &[]), None)
    );
    // No turn at all: nothing to leave out, the empty plan and how far over.
    assert_eq!(plan_toward(None, &[], &[], 0, 100), (plan(0, &[]), Some(4)));
}
