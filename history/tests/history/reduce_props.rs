//! The context reduction's property: any reduction of a random conversation keeps every provider's pairing
//! rules. Random turns (unicode texts, 0-3 calls a step with random ids, names and arguments,
//! results of random lengths) under random compactions, under `plan_fallback`'s plans for
//! random budgets, and as summary requests, all render to bodies every validator accepts,
//! each call answered exactly once.

use proptest::prelude::*;
use serde_json::{json, Value};
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ProviderState,
};
use tooljournal_history::layout::{layout, Compaction, StepView, TurnView};
use tooljournal_history::providers::{request_body, stand_in_tools, validate, Format};
use tooljournal_history::reduce::{
    estimate_tokens, plan_fallback, plan_summary_scope, summary_request, SUMMARY_INSTRUCTION,
};

/// `PROPTEST_CASES` when set (CI may raise it), else `default`: bounded, every body is
/// rendered four times and `plan_fallback` lays out a history once per turn and step.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(cases)
}

fn text_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(" \n".to_string()),
        "\\PC{0,24}",
        "[a-zé🎉 ]{0,12}",
    ]
}

fn id_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        // A small pool, so that ids repeat across steps and turns (and now and then within one).
        "call_[0-3]",
        "[a-zA-Z0-9|+/=_-]{1,80}",
        "\\PC{0,6}",
        Just(String::new()),
    ]
}

fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z_]{1,10}", "\\PC{0,8}", "[a-z]{60,70}"]
}

fn arguments_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{}".to_string()),
        Just(r#"{"path":"a.txt","n":[1,2.50]}"#.to_string()),
        Just("{not json".to_string()),
        Just(String::new()),
        "\\PC{0,10}",
    ]
}

/// Never empty (a result's content never is), short to long.
fn content_strategy() -> impl Strategy<Value = String> {
    prop_oneof!["\\PC{1,20}", "[a-zé🎉 \n]{1,400}", "x{300,1200}"]
}

fn state_strategy() -> impl Strategy<Value = Option<ProviderState>> {
    let state = prop_oneof![
        Just(ProviderState {
            format: "anthropic".into(),
            items: json!([{"type": "thinking", "thinking": "t", "signature": "s"}]).to_string(),
        }),
        // Reasoning item ids are the provider's, unique (Responses rejects a repeated one).
        any::<u64>().prop_map(|n| ProviderState {
            format: "openai-responses".into(),
            items: json!([{"type": "reasoning", "id": format!("rs_{n}"), "summary": [],
                           "encrypted_content": "e"}])
            .to_string(),
        }),
        Just(ProviderState {
            format: "gemini".into(),
            items: json!({"text": "sig", "calls": ["c1", null, "c3"]}).to_string(),
        }),
        Just(ProviderState {
            format: "cobol".into(),
            items: "not json".into(),
        }),
    ];
    prop::option::weighted(0.3, state)
}

fn step_strategy() -> impl Strategy<Value = StepView> {
    let call = (
        id_strategy(),
        name_strategy(),
        arguments_strategy(),
        content_strategy(),
        any::<bool>(),
    );
    (
        text_strategy(),
        prop::collection::vec(call, 0..=3),
        state_strategy(),
    )
        .prop_map(|(text, calls, state)| StepView {
            step: 0,
            text,
            results: calls
                .iter()
                .map(|(id, name, _, content, is_error)| ConvResult {
                    id: id.clone(),
                    name: name.clone(),
                    content: content.clone(),
                    is_error: *is_error,
                })
                .collect(),
            calls: calls
                .into_iter()
                .map(|(id, name, arguments, _, _)| ConvCall {
                    id,
                    name,
                    arguments,
                })
                .collect(),
            state,
        })
}

/// 0 to 5 turns numbered from 1, each of 0 to 3 steps numbered from 1.
fn turns_strategy() -> impl Strategy<Value = Vec<TurnView>> {
    let turn = (
        text_strategy(),
        prop::collection::vec(step_strategy(), 0..=3),
    );
    prop::collection::vec(turn, 0..=5).prop_map(|turns| {
        turns
            .into_iter()
            .zip(1u32..)
            .map(|((user_text, steps), turn)| TurnView {
                turn,
                user_text,
                steps: steps
                    .into_iter()
                    .zip(1u32..)
                    .map(|(s, step)| StepView { step, ..s })
                    .collect(),
            })
            .collect()
    })
}

/// Turns and a compaction of them: any through_turn (past the last too), a summary or none,
/// some of their steps shortened (and a pair naming no step), any preview.
fn with_compaction() -> impl Strategy<Value = (Vec<TurnView>, Compaction)> {
    turns_strategy().prop_flat_map(|turns| {
        let steps: Vec<(u32, u32)> = turns
            .iter()
            .flat_map(|t| t.steps.iter().map(move |s| (t.turn, s.step)))
            .chain([(99, 1)])
            .collect();
        let len = steps.len();
        (
            Just(turns.clone()),
            0..=turns.len() as u32 + 1,
            prop::option::of(text_strategy()),
            prop::sample::subsequence(steps, 0..=len),
            0u32..300,
        )
            .prop_map(|(turns, through_turn, summary, shortened, preview_chars)| {
                (
                    turns,
                    Compaction {
                        through_turn,
                        summary,
                        shortened,
                        preview_chars,
                    },
                )
            })
    })
}

/// Right after each assistant message with calls, one result per call, in call order; no
/// results anywhere else.
fn check_pairing(conv: &Conversation) -> Result<(), TestCaseError> {
    let mut open: Option<Vec<&str>> = None;
    for (i, m) in conv.messages.iter().enumerate() {
        let expected = open.take();
        match m {
            Message::Results { results } => {
                let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
                prop_assert_eq!(Some(ids), expected, "results at {}", i);
            }
            _ => prop_assert!(expected.is_none(), "calls before {} unanswered", i),
        }
        if let Message::Assistant { calls, .. } = m {
            if !calls.is_empty() {
                open = Some(calls.iter().map(|c| c.id.as_str()).collect());
            }
        }
    }
    prop_assert!(open.is_none(), "the last calls are unanswered");
    Ok(())
}

/// The call ids and the result ids of a rendered body, in document order.
fn rendered_ids(format: Format, body: &Value) -> (Vec<String>, Vec<String>) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    let each = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    match format {
        Format::OpenAiChat => {
            for m in each("messages") {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    calls.push(s(&c["id"]));
                }
                if m["role"] == "tool" {
                    results.push(s(&m["tool_call_id"]));
                }
            }
        }
        Format::OpenAiResponses => {
            for item in each("input") {
                match item["type"].as_str() {
                    Some("function_call") => calls.push(s(&item["call_id"])),
                    Some("function_call_output") => results.push(s(&item["call_id"])),
                    _ => {}
                }
            }
        }
        Format::Anthropic => {
            for m in each("messages") {
                for b in m["content"].as_array().into_iter().flatten() {
                    match b["type"].as_str() {
                        Some("tool_use") => calls.push(s(&b["id"])),
                        Some("tool_result") => results.push(s(&b["tool_use_id"])),
                        _ => {}
                    }
                }
            }
        }
        Format::Gemini => {
            for c in each("contents") {
                for p in c["parts"].as_array().into_iter().flatten() {
                    if let Some(call) = p.get("functionCall") {
                        calls.push(s(&call["id"]));
                    }
                    if let Some(r) = p.get("functionResponse") {
                        results.push(s(&r["id"]));
                    }
                }
            }
        }
    }
    (calls, results)
}

/// Every format's validator accepts `conv` (with stand-ins for the tools its calls name), and
/// every rendered call has exactly one result, with its id, in order.
fn check_renders(conv: &Conversation) -> Result<(), TestCaseError> {
    check_pairing(conv)?;
    let calls_in_conv: usize = conv
        .messages
        .iter()
        .map(|m| match m {
            Message::Assistant { calls, .. } => calls.len(),
            _ => 0,
        })
        .sum();
    let tools = stand_in_tools(conv);
    for f in Format::ALL {
        let body = request_body(conv, &tools, &ModelSettings::default(), f).value();
        if let Err(v) = validate(f, &body) {
            return Err(TestCaseError::fail(format!("{f}: {v}\n{body:#}")));
        }
        let (calls, results) = rendered_ids(f, &body);
        prop_assert_eq!(calls.len(), calls_in_conv, "{}: every call rendered", f);
        prop_assert_eq!(&results, &calls, "{}: one result per call, by its id", f);
    }
    Ok(())
}

fn call_ids(turns: &[TurnView]) -> Vec<String> {
    turns
        .iter()
        .flat_map(|t| &t.steps)
        .flat_map(|s| &s.calls)
        .map(|c| c.id.clone())
        .collect()
}

fn conv_call_ids(conv: &Conversation) -> Vec<String> {
    conv.messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { calls, .. } => calls.iter().map(|c| c.id.clone()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn any_compaction_keeps_every_providers_pairing((turns, compaction) in with_compaction()) {
        let conv = layout(Some("sys".into()), &turns, Some(&compaction));
        check_renders(&conv)?;
        // Whole turns go: the kept turns' calls are all there, in order, and no other.
        let last = turns.len().saturating_sub(1);
        let kept: Vec<TurnView> = turns
            .iter()
            .enumerate()
            .filter(|(i, t)| *i == last || t.turn > compaction.through_turn)
            .map(|(_, t)| t.clone())
            .collect();
        prop_assert_eq!(conv_call_ids(&conv), call_ids(&kept));
        let users = conv.messages.iter().filter(|m| matches!(m, Message::User { .. })).count();
        prop_assert_eq!(users, kept.len());
        // Without the compaction: the flat layout, valid as well.
        check_renders(&layout(None, &turns, None))?;
    }

    #[test]
    fn fallback_plans_fit_the_budget_or_say_how_far_over(
        turns in turns_strategy(),
        percent in 0u64..=110,
        preview_chars in 0u32..300,
    ) {
        let system = Some("sys");
        let tools = stand_in_tools(&layout(None, &turns, None));
        let full = estimate_tokens(&layout(Some("sys".into()), &turns, None), &tools);
        let budget = full * percent / 100;
        let planned = plan_fallback(system, &turns, &tools, budget, preview_chars);
        prop_assert_eq!(
            &planned,
            &plan_fallback(system, &turns, &tools, budget, preview_chars),
            "deterministic"
        );
        match planned {
            Ok(plan) => {
                prop_assert_eq!(plan.summary.as_ref(), None);
                prop_assert_eq!(plan.preview_chars, preview_chars);
                let conv = layout(Some("sys".into()), &turns, Some(&plan));
                prop_assert!(estimate_tokens(&conv, &tools) <= budget);
                // The last turn is never planned away, its newest step never shortened.
                if let Some(current) = turns.last() {
                    prop_assert!(plan.through_turn < current.turn);
                    let newest = current.steps.last().map(|s| (current.turn, s.step));
                    for pair in &plan.shortened {
                        prop_assert_eq!(pair.0, current.turn);
                        prop_assert!(Some(*pair) != newest);
                    }
                }
                check_renders(&conv)?;
            }
            Err(over) => {
                prop_assert!(over >= 1);
                // The plan it ended on fits a budget that much larger.
                let fits = plan_fallback(system, &turns, &tools, budget + over, preview_chars);
                prop_assert!(fits.is_ok(), "{:?}", fits);
                if let Ok(plan) = fits {
                    let conv = layout(Some("sys".into()), &turns, Some(&plan));
                    prop_assert!(estimate_tokens(&conv, &tools) <= budget + over);
                }
            }
        }
    }

    #[test]
    fn summary_requests_validate_in_every_format(turns in turns_strategy(), through in 0u32..=6) {
        let scope = plan_summary_scope(&turns);
        prop_assert_eq!(scope, turns.len().checked_sub(2).map(|i| turns[i].turn));
        for through_turn in [through, scope.unwrap_or(0)] {
            let conv = summary_request(Some("sys".into()), &turns, through_turn, None);
            check_renders(&conv)?;
            let Some((instruction, replaced)) = conv.messages.split_last() else {
                return Err(TestCaseError::fail("no instruction"));
            };
            prop_assert_eq!(
                instruction,
                &Message::User { text: SUMMARY_INSTRUCTION.to_string() }
            );
            let covered: Vec<TurnView> =
                turns.iter().filter(|t| t.turn <= through_turn).cloned().collect();
            prop_assert_eq!(replaced, &layout(None, &covered, None).messages[..]);
        }
    }
}
