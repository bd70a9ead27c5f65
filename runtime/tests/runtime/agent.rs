//! The agent loop against a model that answers from a list: every request journaled, retries
//! after what may pass, never after what will not, the user's stop at every point, and the
//! conversation it keeps equal to what it sent and got.

use crate::common;

use common::agent::*;
use common::{events, registry, replay, session_on, TestTool};
use journal::SimStorage;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::event::{Event, StepOutcome, StopReason, TurnOutcome};
use tooljournal_runtime::model::{Message, ModelError, ModelErrorKind, ModelEvent, Usage};
use tooljournal_runtime::Config;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::{Agent, AgentConfig, AgentEvent, TurnEnd};

#[tokio::test]
async fn a_tool_call_then_an_answer_is_two_steps_each_request_journaled_before_it_is_sent() {
    let mut s = setup();
    let mut events = vec![text("noting")];
    events.extend(call(0, "c1", "note", &["{\"x\":", "1}"]));
    events.push(ModelEvent::Usage(Usage {
        input_tokens: 10,
        output_tokens: 3,
        cached_input_tokens: 4,
    }));
    events.push(ModelEvent::ResponseId("resp_1".into()));
    events.push(ModelEvent::ProviderState(
        "[{\"type\":\"thinking\"}]".into(),
    ));
    events.push(stop(StopReason::ToolUse));
    let answers = vec![
        Answer::Events(events),
        Answer::Events(vec![text("done"), stop(StopReason::EndTurn)]),
    ];
    let mut agent = agent(&s, answers, fast());
    let end = turn(&mut s, &mut agent, "note x").await;
    assert_eq!(end, TurnEnd::Completed);
    assert_eq!(*s.runs.lock().unwrap(), vec!["c1".to_string()]);
    let k = kinds(&s.storage);
    let first_request = k.iter().position(|k| *k == "llm/request").unwrap();
    assert!(k[..first_request].contains(&"session/model"));
    assert!(k[..first_request].contains(&"tool/schema"));
    assert_eq!(
        k.iter().filter(|k| **k == "tool/schema").count(),
        1,
        "{k:?}"
    );
    assert_eq!(k.iter().filter(|k| **k == "session/model").count(), 1);
    let r = replay(&s.storage);
    let step1 = &r.turns[0].steps[0];
    assert_eq!(step1.attempts, 1);
    let detail = step1.detail.as_ref().unwrap();
    assert_eq!(detail.usage.cached_input_tokens, 4);
    assert_eq!(detail.response_id.as_deref(), Some("resp_1"));
    assert_eq!(
        detail.provider_state,
        Some(("anthropic".into(), "[{\"type\":\"thinking\"}]".into()))
    );
    assert_eq!(r.turns[0].outcome, Some(TurnOutcome::Completed));
    assert_eq!(
        r.model.as_ref().unwrap().system.as_deref(),
        Some("be brief")
    );
    // The second request carries the first answer and its one result; the conversation kept
    // is that plus the final answer.
    let requests = s.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].tools.len(), 1);
    assert_eq!(requests[0].tools[0].name, "note");
    let sent = &requests[1].conversation.messages;
    assert!(matches!(&sent[0], Message::User { text } if text == "note x"));
    assert!(
        matches!(&sent[1], Message::Assistant { calls, .. } if calls[0].arguments == "{\"x\":1}")
    );
    assert!(
        matches!(&sent[2], Message::Results { results } if results.len() == 1 && results[0].id == "c1")
    );
    let kept = &agent.conversation().messages;
    assert_eq!(kept[..3], sent[..]);
    assert!(
        matches!(&kept[3], Message::Assistant { text, calls, .. } if text == "done" && calls.is_empty())
    );
}

#[tokio::test]
async fn a_retryable_failure_is_retried_and_a_broken_attempt_s_calls_never_run() {
    let mut s = setup();
    let mut broken = vec![text("half")];
    broken.extend(call(0, "c1", "note", &["{\"x\":1}"]));
    let mut whole = call(0, "c2", "note", &["{}"]);
    whole.push(stop(StopReason::ToolUse));
    let answers = vec![
        Answer::Refuse(status(429, Some(0), "slow down")),
        Answer::Break(
            broken,
            ModelError {
                kind: ModelErrorKind::Transport,
                status: None,
                retry_after_ms: None,
                message: "connection reset".into(),
            },
        ),
        Answer::Events(whole),
        Answer::Events(vec![text("ok"), stop(StopReason::EndTurn)]),
    ];
    let mut agent = agent(&s, answers, fast());
    let end = turn(&mut s, &mut agent, "go").await;
    assert_eq!(end, TurnEnd::Completed);
    assert_eq!(
        *s.runs.lock().unwrap(),
        vec!["c2".to_string()],
        "c1 never runs"
    );
    let r = replay(&s.storage);
    let step = &r.turns[0].steps[0];
    assert_eq!(step.attempts, 3);
    assert_eq!(step.failed_attempts.len(), 2);
    assert_eq!(step.failed_attempts[0].status, Some(429));
    assert!(step.failed_attempts[0].retry);
    assert_eq!(step.failed_attempts[1].partial_text, "half");
    assert_eq!(step.calls.len(), 1);
    assert_eq!(step.calls[0].call.call_id, "c2");
    // The broken attempt's text never reached the history.
    let requests = s.requests.lock().unwrap();
    assert!(requests[3]
        .conversation
        .messages
        .iter()
        .all(|m| !matches!(m, Message::Assistant { text, .. } if text.contains("half"))));
}

#[tokio::test]
async fn a_request_error_is_shown_verbatim_and_ends_the_turn_without_a_retry() {
    let mut s = setup();
    let answers = vec![Answer::Refuse(status(
        400,
        None,
        "messages.1: tool_use ids were found without tool_result blocks",
    ))];
    let mut agent = agent(&s, answers, fast());
    let end = turn(&mut s, &mut agent, "go").await;
    let TurnEnd::Failed(message) = end else {
        panic!("{end:?}")
    };
    assert!(message.contains("tool_use ids were found without tool_result blocks"));
    let r = replay(&s.storage);
    let step = &r.turns[0].steps[0];
    assert_eq!(step.attempts, 1);
    assert!(!step.failed_attempts[0].retry);
    assert!(step.response.is_none());
    assert!(matches!(step.outcome, Some(StepOutcome::Failed { .. })));
    assert!(matches!(
        r.turns[0].outcome,
        Some(TurnOutcome::Failed { .. })
    ));
    // The session goes on: a next turn is possible.
    assert!(!s.session.turn_open());
}

#[tokio::test]
async fn attempts_run_out() {
    let mut s = setup();
    let answers = (0..3)
        .map(|_| Answer::Refuse(status(503, None, "overloaded")))
        .collect();
    let config = AgentConfig {
        attempts_max: 3,
        ..fast()
    };
    let mut agent = agent(&s, answers, config);
    let end = turn(&mut s, &mut agent, "go").await;
    assert_eq!(
        end,
        TurnEnd::Failed("HTTP 503: overloaded (after 3 attempts)".into())
    );
    assert_eq!(replay(&s.storage).turns[0].steps[0].attempts, 3);
}

#[tokio::test]
async fn a_provider_asking_to_wait_past_the_backoff_limit_is_a_failure_not_a_wait() {
    let mut s = setup();
    let answers = vec![Answer::Refuse(status(429, Some(3_600_000), "quota"))];
    let mut agent = agent(&s, answers, fast());
    let end = turn(&mut s, &mut agent, "go").await;
    let TurnEnd::Failed(message) = end else {
        panic!("{end:?}")
    };
    assert!(message.contains("3600000 ms"), "{message}");
}

#[tokio::test]
async fn the_user_s_stop_mid_stream_keeps_the_text_and_runs_no_call() {
    let mut s = setup();
    let mut events = vec![text("I will note")];
    events.extend(call(0, "c1", "note", &["{}"]));
    let answers = vec![Answer::Hang(events)];
    let mut agent = agent(&s, answers, fast());
    let token = CancellationToken::new();
    let mut observer = StopWhen(token.clone(), |e: &AgentEvent<'_>| {
        matches!(e, AgentEvent::Stream(ModelEvent::CallEnd { .. }))
    });
    let end = agent
        .run_turn(&mut s.session, "go", &token, &mut observer)
        .await
        .unwrap();
    assert_eq!(end, TurnEnd::Stopped);
    assert!(s.runs.lock().unwrap().is_empty());
    let r = replay(&s.storage);
    let step = &r.turns[0].steps[0];
    let response = step.response.as_ref().unwrap();
    assert_eq!(response.stop_reason, StopReason::Interrupted);
    assert_eq!(response.text, "I will note");
    assert!(step.calls[0].committed.as_ref().unwrap().is_error);
    assert_eq!(step.outcome, Some(StepOutcome::Cancelled));
    assert_eq!(r.turns[0].outcome, Some(TurnOutcome::Cancelled));
    // The history keeps the interrupted message with its call answered.
    assert!(
        matches!(&agent.conversation().messages[2], Message::Results { results } if results[0].is_error)
    );
}

#[tokio::test]
async fn the_user_s_stop_during_a_backoff_ends_the_turn_at_once() {
    let mut s = setup();
    let answers = vec![Answer::Refuse(status(500, None, "oops"))];
    let config = AgentConfig {
        backoff_base_ms: 600_000,
        backoff_max_ms: 600_000,
        ..fast()
    };
    let mut agent = agent(&s, answers, config);
    let token = CancellationToken::new();
    let mut observer = StopWhen(token.clone(), |e: &AgentEvent<'_>| {
        matches!(
            e,
            AgentEvent::AttemptFailed {
                retry_in_ms: Some(_),
                ..
            }
        )
    });
    let started = std::time::Instant::now();
    let end = agent
        .run_turn(&mut s.session, "go", &token, &mut observer)
        .await
        .unwrap();
    assert_eq!(end, TurnEnd::Stopped);
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let r = replay(&s.storage);
    assert!(r.turns[0].steps[0].response.is_none());
    assert_eq!(r.turns[0].outcome, Some(TurnOutcome::Cancelled));
}

#[tokio::test]
async fn a_stream_that_goes_quiet_past_the_idle_timeout_is_retried() {
    let mut s = setup();
    let answers = vec![
        Answer::Hang(vec![text("th")]),
        Answer::Events(vec![text("there"), stop(StopReason::EndTurn)]),
    ];
    let config = AgentConfig {
        idle_timeout_ms: 50,
        ..fast()
    };
    let mut agent = agent(&s, answers, config);
    let end = turn(&mut s, &mut agent, "hi").await;
    assert_eq!(end, TurnEnd::Completed);
    let r = replay(&s.storage);
    let step = &r.turns[0].steps[0];
    assert_eq!(step.failed_attempts[0].message, "no response within 50 ms");
    assert_eq!(step.failed_attempts[0].partial_text, "th");
    assert_eq!(step.response.as_ref().unwrap().text, "there");
}

#[tokio::test]
async fn a_stream_that_ends_without_a_stop_reason_is_broken_not_an_answer() {
    let mut s = setup();
    let mut cut = vec![text("a")];
    cut.extend(call(0, "c1", "note", &["{\"x\""]));
    let answers = vec![
        Answer::Events(cut),
        Answer::Events(vec![text("b"), stop(StopReason::EndTurn)]),
    ];
    let mut agent = agent(&s, answers, fast());
    turn(&mut s, &mut agent, "hi").await;
    assert!(s.runs.lock().unwrap().is_empty());
    let step = &replay(&s.storage).turns[0].steps[0];
    assert_eq!(
        step.failed_attempts[0].message,
        "the stream ended before the response was complete"
    );
    assert!(step.calls.is_empty());
}

#[tokio::test]
async fn a_length_cut_answer_rejects_its_calls_and_ends_the_turn() {
    let mut s = setup();
    let mut events = call(0, "c1", "note", &["{}"]);
    events.push(stop(StopReason::Length));
    let mut agent = agent(&s, vec![Answer::Events(events)], fast());
    let end = turn(&mut s, &mut agent, "hi").await;
    assert_eq!(end, TurnEnd::Completed);
    assert!(s.runs.lock().unwrap().is_empty());
    let r = replay(&s.storage);
    assert_eq!(
        r.turns[0].steps[0].calls[0]
            .committed
            .as_ref()
            .unwrap()
            .code,
        Some(tooljournal_runtime::ErrorCode::TruncatedCall)
    );
}

#[tokio::test]
async fn steps_run_out() {
    let mut s = setup();
    let answers = (0..2)
        .map(|i| {
            let mut e = call(0, &format!("c{i}"), "note", &["{}"]);
            e.push(stop(StopReason::ToolUse));
            Answer::Events(e)
        })
        .collect();
    let config = AgentConfig {
        steps_max: 2,
        ..fast()
    };
    let mut agent = agent(&s, answers, config);
    let end = turn(&mut s, &mut agent, "loop").await;
    assert_eq!(end, TurnEnd::StepsExhausted);
    let r = replay(&s.storage);
    assert_eq!(r.turns[0].steps.len(), 2);
    assert!(matches!(
        r.turns[0].outcome,
        Some(TurnOutcome::Failed { .. })
    ));
}

#[tokio::test]
async fn a_second_turn_does_not_journal_the_same_model_or_schemas_again() {
    let mut s = setup();
    let answers = vec![
        Answer::Events(vec![text("1"), stop(StopReason::EndTurn)]),
        Answer::Events(vec![text("2"), stop(StopReason::EndTurn)]),
    ];
    let mut agent = agent(&s, answers, fast());
    for t in ["a", "b"] {
        agent
            .run_turn(&mut s.session, t, &CancellationToken::new(), &mut ())
            .await
            .unwrap();
    }
    let all = events(&s.storage);
    let count = |k: &str| all.iter().filter(|(_, e)| e.kind() == k).count();
    assert_eq!(count("session/model"), 1);
    assert_eq!(count("tool/schema"), 1);
    assert_eq!(count("llm/request"), 2);
    assert!(all
        .iter()
        .any(|(_, e)| matches!(e, Event::ToolSchema(t) if t.name == "note" && t.input_schema.starts_with('{'))));
}

#[tokio::test]
async fn every_request_leaves_only_when_everything_before_it_is_durable() {
    let mut s = setup();
    let mut first = call(0, "c1", "note", &["{}"]);
    first.push(stop(StopReason::ToolUse));
    let sent_at: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let model = ListModel {
        journal: Some(s.session.event_log().journal().clone()),
        sent_at: sent_at.clone(),
        ..ListModel::new(
            vec![
                Answer::Events(first),
                Answer::Events(vec![text("done"), stop(StopReason::EndTurn)]),
            ],
            s.requests.clone(),
        )
    };
    let mut agent = Agent::new(Box::new(model), fast());
    turn(&mut s, &mut agent, "go").await;
    let sent_at = sent_at.lock().unwrap();
    assert_eq!(sent_at.len(), 2);
    for (appended, durable) in sent_at.iter() {
        assert_eq!(
            appended, durable,
            "a request left before its journal was durable"
        );
    }
    // The second request carried c1's result: its `committed` was durable before it left.
    let committed = events(&s.storage)
        .into_iter()
        .find(|(_, e)| e.kind() == "committed")
        .map(|(seq, _)| seq)
        .unwrap();
    assert!(sent_at[1].1 >= committed);
}

#[tokio::test]
async fn a_transcript_drives_the_agent_loop_through_the_same_seam() {
    use tooljournal_runtime::{parse_script, ScriptedModel};
    let mut s = setup();
    let script = parse_script(
        r#"{"user": "note it"}
{"assistant": {"text": "", "tool_calls": [{"id": "t1", "name": "note", "arguments": "{}"}], "stop_reason": "tool_use"}}
{"assistant": {"text": "noted", "tool_calls": [], "stop_reason": "end_turn"}}
"#,
        "inline",
    )
    .unwrap();
    let mut model = ScriptedModel::new(script);
    // The loop is handed the user's text; the transcript answers the requests.
    model.skip(1);
    let mut agent = Agent::new(Box::new(model), fast());
    let end = agent
        .run_turn(
            &mut s.session,
            "note it",
            &CancellationToken::new(),
            &mut (),
        )
        .await
        .unwrap();
    assert_eq!(end, TurnEnd::Completed);
    assert_eq!(*s.runs.lock().unwrap(), vec!["t1".to_string()]);
    let r = replay(&s.storage);
    assert_eq!(r.model.as_ref().unwrap().provider, "scripted");
    assert_eq!(r.turns[0].steps[1].response.as_ref().unwrap().text, "noted");
    // A request the transcript has no line for fails the turn with a clear message.
    let end = turn(&mut s, &mut agent, "more").await;
    assert_eq!(
        end,
        TurnEnd::Failed("the transcript has no assistant line at line 4".into())
    );
}

#[tokio::test]
async fn two_tools_with_one_schema_get_a_record_each() {
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![TestTool::ok("note"), TestTool::ok("mark")]),
        Hooks::default(),
        Config::default(),
    );
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    session.end_step(StepOutcome::Completed).unwrap();
    session.end_turn(TurnOutcome::Completed).await.unwrap();
    let schemas: Vec<_> = events(&storage)
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::ToolSchema(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(schemas.len(), 2, "{schemas:?}");
    assert_eq!(
        schemas[0].schema_hash, schemas[1].schema_hash,
        "same schemas"
    );
    let mut names: Vec<&str> = schemas.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["mark", "note"]);
}

#[tokio::test]
async fn resuming_on_another_provider_journals_what_state_is_left_behind() {
    use history::layout::{StepView, TurnView};
    use tooljournal_runtime::model::ProviderState;
    let mut s = setup();
    let history = vec![TurnView {
        turn: 1,
        user_text: "a".into(),
        steps: vec![StepView {
            step: 1,
            text: "b".into(),
            calls: vec![],
            state: Some(ProviderState {
                format: "gemini".into(),
                items: "{\"text\":\"sig\",\"calls\":[]}".into(),
            }),
            results: vec![],
        }],
    }];
    let mut agent = agent(
        &s,
        vec![Answer::Events(vec![text("c"), stop(StopReason::EndTurn)])],
        fast(),
    )
    .with_history(history, None);
    turn(&mut s, &mut agent, "go on").await;
    let r = replay(&s.storage);
    let note = r.model.unwrap().note.unwrap();
    assert!(
        note.contains("from gemini") && note.contains("anthropic"),
        "{note}"
    );
}

#[tokio::test]
async fn the_last_attempt_s_failure_does_not_blame_a_short_wait() {
    let mut s = setup();
    let answers = vec![Answer::Refuse(status(429, Some(10), "slow down"))];
    let config = AgentConfig {
        attempts_max: 1,
        ..fast()
    };
    let mut agent = agent(&s, answers, config);
    let end = turn(&mut s, &mut agent, "go").await;
    assert_eq!(end, TurnEnd::Failed("HTTP 429: slow down".into()));
}

#[tokio::test]
async fn keep_alives_keep_a_slow_thinking_stream_from_timing_out() {
    let mut s = setup();
    let mut events = vec![ModelEvent::KeepAlive; 6];
    events.extend([text("done thinking"), stop(StopReason::EndTurn)]);
    let answers = vec![Answer::Slow(events, 30)];
    let config = AgentConfig {
        idle_timeout_ms: 100,
        ..fast()
    };
    let mut agent = agent(&s, answers, config);
    let end = turn(&mut s, &mut agent, "think").await;
    assert_eq!(end, TurnEnd::Completed);
    let step = &replay(&s.storage).turns[0].steps[0];
    assert!(
        step.failed_attempts.is_empty(),
        "{:?}",
        step.failed_attempts
    );
    assert_eq!(step.response.as_ref().unwrap().text, "done thinking");
}
