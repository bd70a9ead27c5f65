//! The agent loop's context reduction against a model that answers from a list: a
//! request the provider refuses as too long is reduced once (the model's summary of the earlier
//! turns, else the deterministic fallback), journaled before the one retry; a second refusal
//! ends the turn; a request estimated past `compact_at_percent` of a known window is reduced
//! before it is sent; the user's stop during the summary request reduces nothing.
//!
//! The texts the model is sent after a reduction (the summary prefix, the left-out note, a
//! shortened result) are written out here from the design, not taken from the code under test.

use crate::common;

use common::agent::*;
use common::replay;
use proptest::prelude::*;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::event::{CompactTrigger, Event, StepOutcome, TurnOutcome};
use tooljournal_runtime::model::{Message, ModelErrorKind, ModelRequest};
use tooljournal_runtime::{AgentConfig, TurnEnd};

/// The model's summary of the earlier turns.
const SUMMARY: &str = "The user asked about FIRST-TURN; it was answered.";

/// The instruction a summary request ends with (history::reduce::SUMMARY_INSTRUCTION), written
/// out: what the model is asked for.
const INSTRUCTION_START: &str =
    "[The conversation above is about to be replaced by a summary to fit the model's context \
     window.] Write a concise summary of it for continuing the work";

/// A first turn this long: about 2,000 tokens, so leaving it out halves any small request.
fn long_first_turn() -> String {
    format!("FIRST-TURN {}", "context ".repeat(1_000))
}

/// What opens the first kept user message after `n` turns were replaced by `summary`.
fn summary_prefix(n: usize, summary: &str) -> String {
    format!(
        "[Summary of the {n} earlier turn(s), written by the model when the context was \
         reduced:]\n{summary}\n[End of summary.]\n\n"
    )
}

/// What opens the first kept user message after `n` turns were left out with no summary.
fn left_out_prefix(n: usize) -> String {
    format!(
        "[{n} earlier turn(s) were left out to fit the model's context window; the session's \
         journal keeps them.]\n\n"
    )
}

/// A result of `total` characters cut to 2,000 (the agent's preview): 1,000 from each end.
fn shortened(head_tail: &str, total: usize) -> String {
    format!(
        "{}\n[... result shortened to fit the context: {total} characters in all; the journal \
         keeps it whole ...]\n{}",
        head_tail.repeat(1_000),
        head_tail.repeat(1_000)
    )
}

fn is_summary_request(request: &ModelRequest) -> bool {
    matches!(request.conversation.messages.last(),
        Some(Message::User { text }) if text.starts_with(INSTRUCTION_START))
}

/// The body `ListModel` sends for `request`, hashed as `llm/request` and
/// `context/summary-requested` record it.
fn body_sha256(request: &ModelRequest) -> String {
    hex::encode(Sha256::digest(format!("{request:?}").as_bytes()))
}

#[tokio::test]
async fn an_overflow_is_journaled_then_summarized_then_the_request_is_sent_once_more_reduced() {
    let mut s = setup();
    let first = long_first_turn();
    let answers = vec![
        answer("first answer"),
        Answer::Refuse(overflow()),
        answer(SUMMARY),
        answer("second answer"),
    ];
    let mut agent = agent(&s, answers, fast());
    assert_eq!(turn(&mut s, &mut agent, &first).await, TurnEnd::Completed);
    let mut seen = Reductions::default();
    let end = agent
        .run_turn(
            &mut s.session,
            "SECOND-TURN go on",
            &CancellationToken::new(),
            &mut seen,
        )
        .await
        .unwrap();
    assert_eq!(end, TurnEnd::Completed);

    // The journal: error, summary request, reduction, retry, answer; in that order.
    let step = step_events(&s.storage, 2, 1);
    assert_eq!(
        names(&step),
        [
            "step/start",
            "step/tools",
            "llm/request",
            "llm/attempt-failed",
            "context/summary-requested",
            "context/compacted",
            "llm/request",
            "llm/response",
            "llm/response-detail",
            "step/end",
        ]
    );
    assert_eq!(request_of(&step[2]).attempt, 1);
    let failed = failure_of(&step[3]);
    assert_eq!(failed.attempt, 1);
    assert_eq!(failed.kind, ModelErrorKind::ContextOverflow);
    assert_eq!(failed.status, Some(400));
    assert_eq!(failed.message, OVERFLOW);
    assert!(!failed.retry, "an overflow is never retried as is");
    let asked = summary_requested_of(&step[4]);
    assert_eq!((asked.turn, asked.step, asked.through_turn), (2, 1, 1));
    let compacted = compacted_of(&step[5]);
    assert_eq!((compacted.turn, compacted.step), (2, 1));
    assert_eq!(compacted.trigger, CompactTrigger::Overflow);
    assert_eq!(compacted.through_turn, 1);
    assert_eq!(compacted.summary.as_deref(), Some(SUMMARY));
    assert_eq!(compacted.summary_note, None);
    assert!(compacted.shortened.is_empty(), "{compacted:?}");
    // Turn 1 alone is about 2,000 tokens (8,000 bytes / 4); what is left, a few hundred.
    assert!(compacted.tokens_before > 2_000, "{compacted:?}");
    assert!(compacted.tokens_after < 500, "{compacted:?}");
    assert_eq!(request_of(&step[6]).attempt, 2);
    assert_eq!(count(&s.storage, "context/compacted"), 1);
    assert_eq!(count(&s.storage, "context/summary-requested"), 1);
    assert_eq!(seen.0, vec![compacted.clone()], "the observer is told once");

    // What the model got: the refused request whole, the summary request, the reduced retry.
    let requests = s.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4);
    assert!(every_text(&requests[1].conversation).contains("FIRST-TURN"));
    let summary_request = &requests[2];
    assert!(is_summary_request(summary_request));
    assert_eq!(
        summary_request.conversation.messages.last(),
        Some(&Message::User {
            text: history::reduce::SUMMARY_INSTRUCTION.into()
        })
    );
    assert!(every_text(&summary_request.conversation).contains(&first));
    assert!(
        !every_text(&summary_request.conversation).contains("SECOND-TURN"),
        "the current turn is not summarized"
    );
    assert_eq!(asked.body_sha256, body_sha256(summary_request));
    let retried = &requests[3];
    assert_eq!(
        retried.conversation.messages,
        [Message::User {
            text: summary_prefix(1, SUMMARY) + "SECOND-TURN go on"
        }]
    );
    assert_eq!(retried.conversation.system.as_deref(), Some("be brief"));
    assert!(!every_text(&retried.conversation).contains("FIRST-TURN "));
    assert_eq!(
        compacted.tokens_before,
        history::reduce::estimate_tokens(&requests[1].conversation, &requests[1].tools),
        "tokens_before is the refused request's estimate"
    );
    assert_eq!(
        compacted.tokens_after,
        history::reduce::estimate_tokens(&retried.conversation, &retried.tools),
        "tokens_after is the retried request's estimate"
    );

    // The history kept is the retried request plus its answer, and replay agrees.
    let kept = agent.conversation();
    assert_eq!(kept.messages[..1], retried.conversation.messages[..]);
    assert!(
        matches!(&kept.messages[1], Message::Assistant { text, .. } if text == "second answer")
    );
    let r = replay(&s.storage);
    assert_eq!(r.compaction.as_ref(), Some(compacted));
    let replayed = &r.turns[1].steps[0];
    assert_eq!(replayed.attempts, 2);
    assert_eq!(replayed.failed_attempts.len(), 1);
    assert_eq!(r.turns[1].outcome, Some(TurnOutcome::Completed));
}

#[tokio::test]
async fn a_second_overflow_after_the_reduction_ends_the_turn_and_nothing_more_is_sent() {
    let mut s = setup();
    let answers = vec![
        answer("first answer"),
        Answer::Refuse(overflow()),
        answer(SUMMARY),
        Answer::Refuse(overflow()),
        // Only for the next turn, which starts afresh.
        answer("third answer"),
    ];
    let mut agent = agent(&s, answers, fast());
    turn(&mut s, &mut agent, &long_first_turn()).await;
    let end = turn(&mut s, &mut agent, "SECOND-TURN").await;
    let TurnEnd::Failed(message) = end else {
        panic!("{end:?}")
    };
    assert!(message.contains(OVERFLOW), "{message}");
    assert!(message.contains("reduced once"), "{message}");
    assert_eq!(s.requests.lock().unwrap().len(), 4, "no third request");
    let step = step_events(&s.storage, 2, 1);
    assert_eq!(
        names(&step),
        [
            "step/start",
            "step/tools",
            "llm/request",
            "llm/attempt-failed",
            "context/summary-requested",
            "context/compacted",
            "llm/request",
            "llm/attempt-failed",
            "step/end",
        ]
    );
    let second = failure_of(&step[7]);
    assert_eq!(
        (second.attempt, second.kind),
        (2, ModelErrorKind::ContextOverflow)
    );
    assert!(!second.retry);
    assert_eq!(
        step[8],
        Event::StepEnd {
            turn: 2,
            step: 1,
            outcome: StepOutcome::Failed {
                message: message.clone()
            }
        }
    );
    let r = replay(&s.storage);
    assert_eq!(
        r.turns[1].outcome,
        Some(TurnOutcome::Failed {
            message: message.clone()
        })
    );
    assert_eq!(count(&s.storage, "context/compacted"), 1);

    // The session goes on, still reduced: the next turn's request carries the summary.
    assert_eq!(
        turn(&mut s, &mut agent, "THIRD-TURN").await,
        TurnEnd::Completed
    );
    let requests = s.requests.lock().unwrap();
    assert_eq!(requests.len(), 5);
    let sent = &requests[4].conversation.messages;
    assert_eq!(
        sent[0],
        Message::User {
            text: summary_prefix(1, SUMMARY) + "SECOND-TURN"
        }
    );
    assert_eq!(
        sent.last(),
        Some(&Message::User {
            text: "THIRD-TURN".into()
        })
    );
}

#[tokio::test]
async fn an_overflow_in_the_first_turn_shortens_the_older_results_of_this_turn() {
    let mut s = setup_with(vec![fetch_tool()]);
    let answers = vec![
        fetch("f1", 10_000),
        fetch("f2", 10_000),
        fetch("f3", 10),
        Answer::Refuse(overflow()),
        answer("done"),
    ];
    let mut agent = agent(&s, answers, fast());
    let end = turn(&mut s, &mut agent, "fetch three things").await;
    assert_eq!(end, TurnEnd::Completed);
    let r = replay(&s.storage);
    let content_of = |step: usize| {
        r.turns[0].steps[step].calls[0]
            .committed
            .as_ref()
            .unwrap()
            .content
            .clone()
    };
    assert_eq!(
        content_of(0),
        "y".repeat(10_000),
        "the journal keeps it whole"
    );

    // Nothing earlier to summarize: no summary request, the fallback alone.
    assert_eq!(count(&s.storage, "context/summary-requested"), 0);
    let step = step_events(&s.storage, 1, 4);
    assert_eq!(
        names(&step),
        [
            "step/start",
            "step/tools",
            "llm/request",
            "llm/attempt-failed",
            "context/compacted",
            "llm/request",
            "llm/response",
            "llm/response-detail",
            "step/end",
        ]
    );
    let compacted = compacted_of(&step[4]);
    assert_eq!(compacted.trigger, CompactTrigger::Overflow);
    assert_eq!(compacted.through_turn, 0);
    assert_eq!(compacted.summary, None);
    assert_eq!(compacted.summary_note, None);
    // Cutting step 1 is not enough for half the estimate; steps 1 and 2 are; the newest
    // step's results (the ones the model is about to read) stay whole.
    assert_eq!(compacted.shortened, vec![(1, 1), (1, 2)]);
    assert_eq!(compacted.preview_chars, 2_000);

    let requests = s.requests.lock().unwrap();
    assert_eq!(requests.len(), 5);
    let results = |i: usize| -> Vec<String> {
        requests[4]
            .conversation
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Results { results } => Some(results[0].content.clone()),
                _ => None,
            })
            .nth(i)
            .into_iter()
            .collect()
    };
    assert_eq!(results(0), [shortened("y", 10_000)]);
    assert_eq!(results(1), [shortened("y", 10_000)]);
    assert_eq!(results(2), ["y".repeat(10)]);
    assert_eq!(
        requests[4].conversation.messages[0],
        Message::User {
            text: "fetch three things".into()
        },
        "no turn was left out: no prefix"
    );
    // Calls and results stay together in every format.
    for format in FORMATS {
        let body = history::providers::request_body(
            &requests[4].conversation,
            &requests[4].tools,
            &requests[4].settings,
            format,
        );
        history::providers::validate(format, &body.value())
            .unwrap_or_else(|v| panic!("{format:?}: {v:?}"));
    }
}

#[tokio::test]
async fn an_overflow_with_nothing_to_reduce_ends_the_turn_saying_why_after_one_request() {
    // A first request alone; and one whose older step's result is too short to cut.
    let scripts: Vec<Vec<Answer>> = vec![
        vec![Answer::Refuse(overflow())],
        vec![fetch("f1", 10), Answer::Refuse(overflow())],
    ];
    for answers in scripts {
        let sent = answers.len();
        let mut s = setup_with(vec![fetch_tool()]);
        let mut agent = agent(&s, answers, fast());
        let end = turn(&mut s, &mut agent, "only turn").await;
        let TurnEnd::Failed(message) = end else {
            panic!("{end:?}")
        };
        assert!(message.contains(OVERFLOW), "{message}");
        assert!(
            message.contains("even with every earlier turn left out"),
            "says why nothing could be reduced: {message}"
        );
        assert_eq!(s.requests.lock().unwrap().len(), sent, "one request only");
        assert_eq!(count(&s.storage, "context/summary-requested"), 0);
        assert_eq!(count(&s.storage, "context/compacted"), 0);
        let r = replay(&s.storage);
        let last = r.turns[0].steps.last().unwrap();
        assert_eq!(last.attempts, 1);
        assert_eq!(
            last.failed_attempts[0].kind,
            ModelErrorKind::ContextOverflow
        );
        assert_eq!(
            r.turns[0].outcome,
            Some(TurnOutcome::Failed {
                message: message.clone()
            })
        );
        assert_eq!(r.compaction, None);
    }
}

#[tokio::test]
async fn a_failed_summary_request_leaves_the_earlier_turns_out_saying_why() {
    let cases: Vec<(Answer, &str)> = vec![
        (
            Answer::Refuse(status(500, None, "summary server down")),
            "HTTP 500: summary server down",
        ),
        (Answer::Refuse(overflow()), OVERFLOW),
        (answer("   "), "the model's summary was empty"),
        (
            Answer::Break(vec![text("half a summ")], status(503, None, "cut off")),
            "HTTP 503: cut off",
        ),
    ];
    for (summary_answer, why) in cases {
        let mut s = setup();
        let answers = vec![
            answer("first answer"),
            Answer::Refuse(overflow()),
            summary_answer,
            answer("second answer"),
        ];
        let mut agent = agent(&s, answers, fast());
        turn(&mut s, &mut agent, &long_first_turn()).await;
        let end = turn(&mut s, &mut agent, "SECOND-TURN").await;
        assert_eq!(end, TurnEnd::Completed, "{why}");
        let step = step_events(&s.storage, 2, 1);
        assert_eq!(
            names(&step),
            [
                "step/start",
                "step/tools",
                "llm/request",
                "llm/attempt-failed",
                "context/summary-requested",
                "context/compacted",
                "llm/request",
                "llm/response",
                "llm/response-detail",
                "step/end",
            ],
            "{why}: the summary request is no attempt of the step"
        );
        let compacted = compacted_of(&step[5]);
        assert_eq!(compacted.summary, None, "{why}");
        assert_eq!(compacted.through_turn, 1, "{why}");
        let note = compacted.summary_note.as_deref().unwrap_or_default();
        assert!(note.contains(why), "{why}: {note}");
        let requests = s.requests.lock().unwrap();
        assert_eq!(requests.len(), 4, "{why}: the summary is asked for once");
        assert_eq!(
            requests[3].conversation.messages,
            [Message::User {
                text: left_out_prefix(1) + "SECOND-TURN"
            }],
            "{why}"
        );
    }
}

#[tokio::test]
async fn past_the_threshold_of_a_known_window_the_request_is_reduced_before_it_is_sent() {
    // Turn 1's answer is long; turn 2's request would carry it.
    let long_answer = format!("FIRST-ANSWER {}", "words ".repeat(1_500));
    let script = || {
        vec![
            answer(&long_answer),
            answer(SUMMARY),
            answer("second answer"),
        ]
    };
    let config = AgentConfig {
        context_window_tokens: Some(1_000),
        compact_at_percent: 80,
        ..fast()
    };
    let mut s = setup();
    let mut reducing = agent(&s, script(), config.clone());
    assert_eq!(
        turn(&mut s, &mut reducing, "first").await,
        TurnEnd::Completed
    );
    assert_eq!(
        turn(&mut s, &mut reducing, "SECOND-TURN").await,
        TurnEnd::Completed
    );
    assert_eq!(count(&s.storage, "context/compacted"), 1);
    let step = step_events(&s.storage, 2, 1);
    assert_eq!(
        names(&step),
        [
            "step/start",
            "step/tools",
            "context/summary-requested",
            "context/compacted",
            "llm/request",
            "llm/response",
            "llm/response-detail",
            "step/end",
        ],
        "reduced before the first request: no overflow"
    );
    assert_eq!(count(&s.storage, "llm/attempt-failed"), 0);
    assert_eq!(request_of(&step[4]).attempt, 1);
    let compacted = compacted_of(&step[3]);
    assert_eq!(compacted.trigger, CompactTrigger::Threshold);
    assert_eq!(compacted.through_turn, 1);
    assert_eq!(compacted.summary.as_deref(), Some(SUMMARY));
    assert!(compacted.tokens_before > 800, "{compacted:?}");
    assert!(compacted.tokens_after <= 500, "{compacted:?}");
    {
        let requests = s.requests.lock().unwrap();
        assert_eq!(requests.len(), 3);
        assert!(is_summary_request(&requests[1]));
        assert_eq!(
            requests[2].conversation.messages,
            [Message::User {
                text: summary_prefix(1, SUMMARY) + "SECOND-TURN"
            }]
        );
    }

    // No window known: no threshold, the request goes whole.
    let mut s = setup();
    let config_none = AgentConfig {
        context_window_tokens: None,
        ..config.clone()
    };
    let mut whole = agent(&s, script(), config_none);
    turn(&mut s, &mut whole, "first").await;
    turn(&mut s, &mut whole, "SECOND-TURN").await;
    assert_eq!(count(&s.storage, "context/compacted"), 0);
    assert_eq!(count(&s.storage, "context/summary-requested"), 0);
    assert!(every_text(&s.requests.lock().unwrap()[1].conversation).contains("FIRST-ANSWER"));

    // A threshold reduction is the step's one reduction: an overflow after it ends the turn.
    let mut s = setup();
    let answers = vec![
        answer(&long_answer),
        answer(SUMMARY),
        Answer::Refuse(overflow()),
    ];
    let mut once = agent(&s, answers, config);
    turn(&mut s, &mut once, "first").await;
    let end = turn(&mut s, &mut once, "SECOND-TURN").await;
    assert!(
        matches!(&end, TurnEnd::Failed(m) if m.contains("reduced once")),
        "{end:?}"
    );
    assert_eq!(s.requests.lock().unwrap().len(), 3);
    assert_eq!(count(&s.storage, "context/compacted"), 1);
}

#[tokio::test]
async fn the_user_s_stop_during_the_summary_request_reduces_nothing() {
    let mut s = setup();
    let stop_button = CancellationToken::new();
    let answers = vec![
        answer("first answer"),
        Answer::Refuse(overflow()),
        Answer::StopThenHang(stop_button.clone()),
        answer("third answer"),
    ];
    let mut agent = agent(&s, answers, fast());
    turn(&mut s, &mut agent, &long_first_turn()).await;
    let end = agent
        .run_turn(&mut s.session, "SECOND-TURN", &stop_button, &mut ())
        .await
        .unwrap();
    assert_eq!(end, TurnEnd::Stopped);
    let step = step_events(&s.storage, 2, 1);
    assert_eq!(
        names(&step),
        [
            "step/start",
            "step/tools",
            "llm/request",
            "llm/attempt-failed",
            "context/summary-requested",
            "step/end",
        ]
    );
    assert_eq!(
        step[5],
        Event::StepEnd {
            turn: 2,
            step: 1,
            outcome: StepOutcome::Cancelled
        }
    );
    let r = replay(&s.storage);
    assert_eq!(r.turns[1].outcome, Some(TurnOutcome::Cancelled));
    assert_eq!(r.compaction, None, "a summary requested reduced nothing");
    // Nor did the agent reduce: the next turn's request carries turn 1 whole.
    assert_eq!(
        turn(&mut s, &mut agent, "THIRD-TURN").await,
        TurnEnd::Completed
    );
    let requests = s.requests.lock().unwrap();
    assert_eq!(requests.len(), 4);
    assert!(every_text(&requests[3].conversation).contains("FIRST-TURN"));
    assert_eq!(count(&s.storage, "context/compacted"), 0);
}

// ---- Random sessions, random overflows ----

#[derive(Debug, Clone)]
struct TurnPlan {
    /// Steps calling `fetch` before the answer, and how long each result is.
    fetches: Vec<usize>,
    /// How long the user's text is.
    user_chars: usize,
}

fn turn_plan() -> impl Strategy<Value = TurnPlan> {
    (
        proptest::collection::vec(0usize..6_000, 0..3),
        0usize..3_000,
    )
        .prop_map(|(fetches, user_chars)| TurnPlan {
            fetches,
            user_chars,
        })
}

/// How a summary request is answered.
#[derive(Debug, Clone, Copy)]
enum SummaryAnswer {
    Text,
    Fails,
    Overflows,
}

fn summary_answer() -> impl Strategy<Value = SummaryAnswer> {
    prop_oneof![
        Just(SummaryAnswer::Text),
        Just(SummaryAnswer::Fails),
        Just(SummaryAnswer::Overflows),
    ]
}

/// Answers by reading the request: a summary request as `summaries` say, in turn; any other
/// request overflows when `overflows` says so (in turn), else calls `fetch` while the turn's
/// plan has fetches left for that step, else answers.
fn rule(plans: Vec<TurnPlan>, overflows: Vec<bool>, summaries: Vec<SummaryAnswer>) -> Rule {
    let (mut asked, mut summarized) = (0usize, 0usize);
    Box::new(move |request: &ModelRequest| {
        if is_summary_request(request) {
            summarized += 1;
            return match summaries[(summarized - 1) % summaries.len()] {
                SummaryAnswer::Text => answer("a short summary"),
                SummaryAnswer::Fails => Answer::Refuse(status(500, None, "down")),
                SummaryAnswer::Overflows => Answer::Refuse(overflow()),
            };
        }
        asked += 1;
        if overflows[(asked - 1) % overflows.len()] {
            return Answer::Refuse(overflow());
        }
        let plan = &plans[request.turn as usize - 1];
        match plan.fetches.get(request.step as usize - 1) {
            Some(&n) => fetch(&format!("t{}s{}", request.turn, request.step), n),
            None => answer("done"),
        }
    })
}

fn run_session(
    plans: &[TurnPlan],
    overflows: Vec<bool>,
    summaries: Vec<SummaryAnswer>,
    window: Option<u64>,
) -> (Setup, Vec<TurnEnd>) {
    let mut s = setup_with(vec![fetch_tool()]);
    let mut model = ListModel::new(vec![], s.requests.clone());
    model.rule = Some(rule(plans.to_vec(), overflows, summaries));
    let config = AgentConfig {
        context_window_tokens: window,
        ..fast()
    };
    let mut agent = tooljournal_runtime::Agent::new(Box::new(model), config);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ends = rt.block_on(async {
        let mut ends = Vec::new();
        for (i, plan) in plans.iter().enumerate() {
            let user = format!("turn {} {}", i + 1, "u".repeat(plan.user_chars));
            ends.push(turn(&mut s, &mut agent, &user).await);
        }
        ends
    });
    (s, ends)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn a_step_reduces_at_most_once_and_never_asks_after_a_second_overflow(
        plans in proptest::collection::vec(turn_plan(), 1..4),
        overflows in proptest::collection::vec(proptest::bool::weighted(0.35), 1..12),
        summaries in proptest::collection::vec(summary_answer(), 1..4),
        window in prop_oneof![Just(None), Just(Some(1_500u64)), Just(Some(4_000u64))],
    ) {
        let (s, ends) = run_session(&plans, overflows, summaries, window);
        // The journal replays (every rule of FORMAT.md holds).
        let r = replay(&s.storage);
        prop_assert_eq!(r.turns.len(), plans.len());
        let all: Vec<Event> = common::events(&s.storage).into_iter().map(|(_, e)| e).collect();
        // Every request the model got was journaled before it was sent.
        let requests = s.requests.lock().unwrap().clone();
        let journaled = all
            .iter()
            .filter(|e| matches!(e, Event::LlmRequest(_) | Event::ContextSummaryRequested(_)))
            .count();
        prop_assert_eq!(requests.len(), journaled);
        for turn in &r.turns {
            for step in &turn.steps {
                let events = step_events(&s.storage, turn.turn, step.step);
                let mut reduced = 0;
                let mut overflowed_since_reduction = false;
                let mut overflows = 0;
                for e in &events {
                    match e {
                        Event::ContextCompacted(_) => {
                            reduced += 1;
                            overflowed_since_reduction = false;
                        }
                        Event::LlmAttemptFailed(f) if f.kind == ModelErrorKind::ContextOverflow => {
                            prop_assert!(!f.retry);
                            overflows += 1;
                            overflowed_since_reduction = true;
                        }
                        Event::LlmRequest(_) => prop_assert!(
                            !overflowed_since_reduction,
                            "a request after an overflow with no reduction between: {:?}",
                            names(&events)
                        ),
                        _ => {}
                    }
                }
                prop_assert!(reduced <= 1, "{:?}", names(&events));
                prop_assert!(overflows <= 2, "{:?}", names(&events));
                if overflows == 2 {
                    // The second overflow ends the step, and the turn, as failed.
                    let end = events.last().unwrap();
                    prop_assert!(
                        matches!(end, Event::StepEnd { outcome: StepOutcome::Failed { message }, .. }
                            if message.contains("reduced once")),
                        "{:?}", end
                    );
                }
            }
        }
        prop_assert_eq!(ends.len(), plans.len());
        // The replay's reduction is the journal's latest.
        let reductions = compactions(&s.storage);
        prop_assert_eq!(r.compaction.as_ref(), reductions.last());
        // Every request the loop sent keeps each provider's pairing rules.
        for request in requests.iter().filter(|r| !is_summary_request(r)) {
            for format in FORMATS {
                let body = history::providers::request_body(
                    &request.conversation,
                    &request.tools,
                    &request.settings,
                    format,
                );
                prop_assert!(
                    history::providers::validate(format, &body.value()).is_ok(),
                    "{:?}: {:?}",
                    format,
                    history::providers::validate(format, &body.value())
                );
            }
        }
    }
}

#[tokio::test]
async fn a_failed_second_summary_never_labels_the_first_as_covering_more_turns() {
    let mut s = setup();
    let answers = vec![
        answer("first answer"),
        // Turn 2: refused, summarized, answered.
        Answer::Refuse(overflow()),
        answer(SUMMARY),
        answer(&format!("SECOND-ANSWER {}", "words ".repeat(1_500))),
        // Turn 3: refused, its summary request fails, the retry is answered.
        Answer::Refuse(overflow()),
        Answer::Refuse(status(500, None, "summary server down")),
        answer("third answer"),
    ];
    let mut agent = agent(&s, answers, fast());
    turn(&mut s, &mut agent, &long_first_turn()).await;
    turn(&mut s, &mut agent, "SECOND-TURN").await;
    let end = turn(&mut s, &mut agent, "THIRD-TURN").await;
    assert_eq!(end, TurnEnd::Completed);
    let all = compactions(&s.storage);
    assert_eq!(all.len(), 2);
    let second = &all[1];
    // The first summary saw turn 1 only: once turn 2 is left out too, it is not kept under a
    // label that says it covers both.
    // The fallback leaves turns 1 and 2 out: no summary, and the note says why not.
    assert_eq!(second.through_turn, 2, "{second:?}");
    assert_eq!(second.summary, None, "{second:?}");
    let note = second.summary_note.as_deref().unwrap_or_default();
    assert!(note.contains("summary server down"), "{second:?}");
    let requests = s.requests.lock().unwrap();
    let last = requests.last().expect("requests");
    let Some(Message::User { text }) = last.conversation.messages.first() else {
        panic!("a user message first");
    };
    assert!(
        !text.starts_with(&summary_prefix(2, SUMMARY)),
        "the summary of turn 1 shown as one of turns 1-2: {text}"
    );
}

#[tokio::test]
async fn a_step_asks_for_one_summary_even_when_the_threshold_and_a_refusal_both_reduce() {
    let mut s = setup();
    let config = AgentConfig {
        context_window_tokens: Some(2_000),
        ..fast()
    };
    let answers = vec![
        answer("first answer"),
        // Turn 2, threshold: the summary request fails, and nothing else reduces enough.
        Answer::Refuse(status(500, None, "summary server down")),
        // The request goes as it is and is refused: reduced without a second summary request.
        Answer::Refuse(overflow()),
        answer("second answer"),
        answer("spare"),
    ];
    let mut agent = agent(&s, answers, config);
    turn(&mut s, &mut agent, "short first turn").await;
    turn(
        &mut s,
        &mut agent,
        &format!("SECOND {}", "word ".repeat(1_600)),
    )
    .await;
    let step = step_events(&s.storage, 2, 1);
    let asked = names(&step)
        .iter()
        .filter(|n| **n == "context/summary-requested")
        .count();
    assert_eq!(asked, 1, "{:?}", names(&step));
    assert!(
        names(&step)
            .iter()
            .filter(|n| **n == "context/compacted")
            .count()
            <= 1,
        "{:?}",
        names(&step)
    );
    let summaries = s
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.turn == 2 && is_summary_request(r))
        .count();
    assert_eq!(summaries, 1, "summary requests in one step");
}

#[tokio::test]
async fn attempts_past_any_count_and_an_overflow_do_not_overflow_the_numbering() {
    let mut s = setup();
    let config = AgentConfig {
        attempts_max: u32::MAX,
        ..fast()
    };
    let answers = vec![
        answer("first answer"),
        Answer::Refuse(overflow()),
        answer(SUMMARY),
        answer("second answer"),
    ];
    let mut agent = agent(&s, answers, config);
    turn(&mut s, &mut agent, &long_first_turn()).await;
    let end = turn(&mut s, &mut agent, "SECOND-TURN").await;
    assert_eq!(end, TurnEnd::Completed);
    assert_eq!(compactions(&s.storage).len(), 1);
}
