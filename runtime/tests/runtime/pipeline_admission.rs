//! The pipeline's admission rules (DESIGN.md §2, §3): the policy stages (guards, pre-execute
//! listeners, asks and approvals) and the arguments (frozen bytes, JSON syntax, schemas, unknown
//! tools, truncated batches), one test per rule, each through the public API on a simulated disk,
//! each checking both the results and what the journal says.

use crate::common;

use common::pipeline::*;
use common::*;
use journal::SimStorage;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tooljournal_runtime::event::{
    Approval, AskAnswer, Event, ModelResponse, StepOutcome, StopReason, TurnOutcome,
};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Args;
use tooljournal_runtime::ToolOutput;
use tooljournal_runtime::{CallInfo, Decision, Hooks};
use tooljournal_runtime::{Config, ErrorCode};

// ---------------------------------------------------------------------------------------------
// Stage 1 and 2: policy.

#[tokio::test]
async fn guard_denial_survives_a_later_allow() {
    let tool = TestTool::ok("write");
    let probe = tool.probe();
    let hooks = Hooks {
        pre_execute: vec![pre("allow-all", Decision::Allow)],
        guards: vec![
            guard("quiet", |_| None),
            guard("no-writes", |_| Some("writes are switched off".into())),
            guard("after", |_| None),
        ],
        ..Hooks::default()
    };
    let (r, c, storage) = single(tool, hooks, Config::default(), "{}").await;
    assert_error(&r, ErrorCode::PolicyDenied);
    assert!(r.content.contains("no-writes"), "{}", r.content);
    assert!(probe.runs().is_empty(), "the body never ran");
    let (code, reason) = c.rejection.clone().expect("rejected");
    assert_eq!(code, ErrorCode::PolicyDenied);
    assert!(
        reason.contains("no-writes") && reason.contains("writes are switched off"),
        "{reason}"
    );
    assert_eq!(
        c.approval, None,
        "a guard's denial is never recorded as an approval"
    );
    assert_eq!(c.state, CallState::Committed);
    assert_eq!(
        kinds(&storage, "c1"),
        ["received", "parsed", "rejected", "committed"]
    );
}

#[tokio::test]
async fn pre_execute_first_decision_wins_and_order_is_configuration() {
    let cases: Vec<(Chain, bool, Option<Approval>)> = vec![
        (
            vec![pre("no", deny("nope")), pre("yes", Decision::Allow)],
            true,
            None,
        ),
        (
            vec![pre("yes", Decision::Allow), pre("no", deny("nope"))],
            true,
            Some(Approval::Listener { name: "yes".into() }),
        ),
        (
            vec![pre("pass", Decision::Pass), pre("no", deny("nope"))],
            true,
            None,
        ),
        (
            vec![pre("pass", Decision::Pass), pre("yes", Decision::Allow)],
            false,
            Some(Approval::Listener { name: "yes".into() }),
        ),
        (
            vec![pre("pass", Decision::Pass)],
            true,
            Some(Approval::Default),
        ),
    ];
    for (i, (chain, default_allow, expected)) in cases.into_iter().enumerate() {
        let tool = TestTool::ok("t");
        let probe = tool.probe();
        let hooks = Hooks {
            pre_execute: chain,
            ..Hooks::default()
        };
        let config = Config {
            default_allow,
            ..Config::default()
        };
        let (r, c, _) = single(tool, hooks, config, "{}").await;
        assert_eq!(c.approval, expected, "case {i}");
        if expected.is_some() {
            assert!(!r.is_error, "case {i}: {r:?}");
            assert_eq!(probe.runs(), ["c1"], "case {i}");
        } else {
            assert_error(&r, ErrorCode::PolicyDenied);
            assert!(
                r.content.contains("denied by no: nope"),
                "case {i}: {}",
                r.content
            );
            assert!(probe.runs().is_empty(), "case {i}");
            assert_eq!(c.rejection.map(|r| r.0), Some(ErrorCode::PolicyDenied));
        }
    }
}

#[tokio::test]
async fn approval_names_the_listener_that_allowed() {
    let hooks = Hooks {
        pre_execute: vec![pre("default", Decision::Allow)],
        ..Hooks::default()
    };
    let config = Config {
        default_allow: false,
        ..Config::default()
    };
    let (r, c, _) = single(TestTool::ok("t"), hooks, config, "{}").await;
    assert!(!r.is_error);
    assert_eq!(
        c.approval,
        Some(Approval::Listener {
            name: "default".into()
        }),
        "the session's default is deny, yet the journal says the default allowed it"
    );
}

#[tokio::test]
async fn default_deny_when_no_listener_decides() {
    for chain in [vec![], vec![pre("pass", Decision::Pass)]] {
        let tool = TestTool::ok("t");
        let probe = tool.probe();
        let hooks = Hooks {
            pre_execute: chain,
            ..Hooks::default()
        };
        let config = Config {
            default_allow: false,
            ..Config::default()
        };
        let (r, c, _) = single(tool, hooks, config, "{}").await;
        assert_error(&r, ErrorCode::PolicyDenied);
        assert!(probe.runs().is_empty());
        let (code, reason) = c.rejection.expect("rejected");
        assert_eq!(code, ErrorCode::PolicyDenied);
        assert!(reason.contains("default"), "{reason}");
    }
    // The same call with the default left at allow runs.
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let (r, c, _) = single(tool, Hooks::default(), Config::default(), "{}").await;
    assert!(!r.is_error);
    assert_eq!(c.approval, Some(Approval::Default));
    assert_eq!(probe.runs(), ["c1"]);
}

#[tokio::test]
async fn a_panicking_listener_or_guard_fails_closed() {
    let cases: Vec<Hooks> = vec![
        Hooks {
            pre_execute: vec![Arc::new(Pre("buggy", |_: &CallInfo| -> Decision {
                panic!("listener bug")
            }))],
            ..Hooks::default()
        },
        Hooks {
            guards: vec![guard("buggy", |_| panic!("guard bug"))],
            ..Hooks::default()
        },
    ];
    for hooks in cases {
        let tool = TestTool::ok("t");
        let probe = tool.probe();
        let (r, c, _) = single(tool, hooks, Config::default(), "{}").await;
        assert_error(&r, ErrorCode::PolicyDenied);
        assert!(r.content.contains("buggy"), "{}", r.content);
        assert!(probe.runs().is_empty());
        assert_eq!(c.rejection.map(|r| r.0), Some(ErrorCode::PolicyDenied));
    }
}

// The ask tests read the journal's raw events (`a_journal_with_an_ask_replays` replays one).

#[tokio::test]
async fn ask_allowed_once_runs_and_denied_or_expired_never_runs() {
    let answers = [
        (AskAnswer::AllowedOnce, "ask/answered"),
        (AskAnswer::Denied, "ask/answered"),
        (AskAnswer::Expired, "ask/expired"),
        (AskAnswer::Cancelled, "ask/cancelled"),
        // What a structured question's reply did (schema 4) is no yes/no answer: withdrawn.
        (AskAnswer::Answered, "ask/cancelled"),
        (AskAnswer::Declined, "ask/cancelled"),
    ];
    for (answer, answer_kind) in answers {
        let tool = TestTool::ok("t");
        let probe = tool.probe();
        let who = approver(answer);
        let hooks = Hooks {
            pre_execute: vec![pre("careful", ask("touches the disk"))],
            approver: Some(who.clone()),
            ..Hooks::default()
        };
        let (r, storage) = single_unreplayed(tool, hooks, Config::default(), "{}").await;
        assert_eq!(who.asked.load(Ordering::SeqCst), 1, "{answer:?}");
        let k = kinds(&storage, "c1");
        assert_eq!(
            &k[..4],
            ["received", "parsed", "ask/pending", answer_kind],
            "{answer:?}"
        );
        let evs = call_events(&storage, "c1");
        match &evs[3] {
            Event::AskAnswered { answer: a, .. } => assert_eq!(*a, answer),
            Event::AskExpired { .. } => assert_eq!(answer, AskAnswer::Expired),
            Event::AskCancelled { reason, .. } => match answer {
                AskAnswer::Cancelled => {}
                AskAnswer::Answered | AskAnswer::Declined => {
                    assert!(reason.contains("no yes/no answer"), "{answer:?}: {reason}")
                }
                _ => panic!("{answer:?} cancelled the question: {reason}"),
            },
            other => panic!("{answer:?}: {other:?}"),
        }
        let (questions, approval) = asked(&storage, "c1");
        assert_eq!(questions, ["touches the disk"]);
        if answer == AskAnswer::AllowedOnce {
            assert!(!r.is_error, "{r:?}");
            assert_eq!(probe.runs(), ["c1"]);
            assert_eq!(approval, Some(Approval::Asked { answer }));
            assert_eq!(&k[4..], ["approved", "started", "settled", "committed"]);
        } else {
            assert_error(&r, ErrorCode::PolicyDenied);
            assert!(probe.runs().is_empty(), "{answer:?} never runs");
            assert_eq!(approval, None);
            assert_eq!(&k[4..], ["rejected", "committed"]);
        }
        if answer == AskAnswer::Expired {
            assert!(
                r.content.contains("a timeout is never an approval"),
                "{}",
                r.content
            );
        }
    }
}

#[tokio::test]
async fn ask_allowed_always_is_remembered_for_the_tool() {
    let storage = SimStorage::new();
    let (t, u) = (TestTool::ok("t"), TestTool::ok("u"));
    let (pt, pu) = (t.probe(), u.probe());
    let who = approver(AskAnswer::AllowedAlways);
    let hooks = Hooks {
        pre_execute: vec![pre("careful", ask("may I?"))],
        approver: Some(who.clone()),
        ..Hooks::default()
    };
    let mut s = session_on(&storage, registry(vec![t, u]), hooks, Config::default());
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    s.run_batch(response(vec![call("c1", "t", "{}")]))
        .await
        .unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.begin_step().unwrap();
    let r = s
        .run_batch(response(vec![call("c2", "t", "{}"), call("c3", "u", "{}")]))
        .await
        .unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.end_turn(TurnOutcome::Completed).await.unwrap();

    assert!(r.iter().all(|r| !r.is_error), "{r:?}");
    assert_eq!(pt.runs(), ["c1", "c2"]);
    assert_eq!(pu.runs(), ["c3"]);
    assert_eq!(
        who.asked.load(Ordering::SeqCst),
        2,
        "t once, u once; never t twice"
    );
    let always = AskAnswer::AllowedAlways;
    assert_eq!(
        asked(&storage, "c1"),
        (
            vec!["may I?".into()],
            Some(Approval::Asked { answer: always })
        )
    );
    assert_eq!(
        asked(&storage, "c2"),
        (vec![], Some(Approval::AlwaysAllowed)),
        "no second question"
    );
    assert_eq!(
        asked(&storage, "c3").0.len(),
        1,
        "remembered per tool, not for all"
    );
}

#[tokio::test]
async fn ask_without_an_approver_is_denied() {
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let hooks = Hooks {
        pre_execute: vec![pre("careful", ask("may I?"))],
        ..Hooks::default()
    };
    let (r, storage) = single_unreplayed(tool, hooks, Config::default(), "{}").await;
    assert_error(&r, ErrorCode::PolicyDenied);
    assert!(probe.runs().is_empty());
    assert_eq!(
        kinds(&storage, "c1"),
        [
            "received",
            "parsed",
            "ask/pending",
            "ask/cancelled",
            "rejected",
            "committed"
        ]
    );
    let evs = call_events(&storage, "c1");
    assert!(
        matches!(&evs[3], Event::AskCancelled { reason, .. } if reason.contains("no approver")),
        "{:?}",
        evs[3]
    );
}

#[tokio::test]
async fn a_journal_with_an_ask_replays() {
    for answer in [AskAnswer::AllowedOnce, AskAnswer::Denied] {
        let hooks = Hooks {
            pre_execute: vec![pre("careful", ask("may I?"))],
            approver: Some(approver(answer)),
            ..Hooks::default()
        };
        let (r, c, _) = single(TestTool::ok("t"), hooks, Config::default(), "{}").await;
        assert_eq!(r.is_error, !answer.allows());
        assert_eq!(c.state, CallState::Committed);
        assert_eq!(c.asks.len(), 1);
        assert_eq!(c.asks[0].question, "may I?");
        assert_eq!(c.asks[0].answer, Some(answer));
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments.

#[tokio::test]
async fn arguments_are_frozen_and_kept_byte_for_byte() {
    let raw = "{ \"path\" :\t\"a.txt\" ,\n   \"n\":1.0e0 , \"s\": \"\\u00e9\" }  ";
    let seen: Arc<Mutex<Vec<(&'static str, Args)>>> = Arc::default();
    let (a, b, c) = (seen.clone(), seen.clone(), seen.clone());
    let tool = TestTool::with("t", move |args, _| {
        c.lock().unwrap().push(("body", args));
        Box::pin(async { Ok(ToolOutput::text("done")) })
    });
    let hooks = Hooks {
        pre_execute: vec![Arc::new(Pre("look", move |i: &CallInfo| {
            a.lock().unwrap().push(("pre", i.args.clone()));
            Decision::Pass
        }))],
        guards: vec![guard("look", move |i| {
            b.lock().unwrap().push(("guard", i.args.clone()));
            None
        })],
        ..Hooks::default()
    };
    let (r, c, _) = single(tool, hooks, Config::default(), raw).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        c.raw_arguments, raw,
        "received keeps the raw text byte for byte"
    );
    let canonical = r#"{"n":1.0,"path":"a.txt","s":"é"}"#;
    assert_eq!(c.arguments.as_deref(), Some(canonical));
    let seen = seen.lock().unwrap();
    let who: Vec<&str> = seen.iter().map(|(w, _)| *w).collect();
    assert_eq!(who, ["pre", "guard", "body"]);
    for (w, args) in seen.iter() {
        assert!(
            args.same(&seen[0].1),
            "{w} saw other arguments than the pre-execute listener"
        );
        assert_eq!(args.raw(), raw);
        assert_eq!(args.canonical(), canonical);
    }
}

#[tokio::test]
async fn empty_arguments_become_an_empty_object() {
    for raw in ["", "   \n\t"] {
        let tool =
            TestTool::ok("t").input(json!({"type": "object", "additionalProperties": false}));
        let (r, c, _) = single(tool, Hooks::default(), Config::default(), raw).await;
        assert!(!r.is_error, "{r:?}");
        assert_eq!(r.content, "ok: {}");
        assert_eq!(c.raw_arguments, raw);
        assert_eq!(c.arguments.as_deref(), Some("{}"));
    }
}

#[tokio::test]
async fn invalid_json_is_a_syntax_error_that_says_where() {
    let cases = [
        ("{\"path\": \"a.txt\"", "line 1, column 16"),
        ("{\n  \"a\": 1,\n  \"b\": ]\n}", "line 3, column 8"),
        ("{\"a\":1}}", "line 1, column 8"),
    ];
    for (raw, place) in cases {
        let tool = TestTool::ok("t");
        let probe = tool.probe();
        let (r, c, _) = single(tool, Hooks::default(), Config::default(), raw).await;
        assert_error(&r, ErrorCode::SyntaxError);
        assert!(r.content.contains(place), "{raw:?}: {}", r.content);
        assert!(probe.runs().is_empty());
        let (code, reason) = c.rejection.expect("rejected");
        assert_eq!(code, ErrorCode::SyntaxError);
        assert!(reason.contains(place), "{reason}");
        assert_eq!(c.arguments, None, "never parsed");
        assert_eq!(c.raw_arguments, raw);
    }
}

#[tokio::test]
async fn schema_failure_names_the_field() {
    let schema = json!({
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "path": {"type": "string"}},
        "required": ["path"]
    });
    for (raw, field) in [(r#"{"path":"a","limit":"ten"}"#, "/limit"), ("{}", "path")] {
        let tool = TestTool::ok("t").input(schema.clone());
        let probe = tool.probe();
        let (r, c, _) = single(tool, Hooks::default(), Config::default(), raw).await;
        assert_error(&r, ErrorCode::SchemaError);
        assert!(r.content.contains(field), "{}", r.content);
        assert!(probe.runs().is_empty());
        assert_eq!(c.rejection.map(|r| r.0), Some(ErrorCode::SchemaError));
        assert_eq!(c.arguments, None);
    }
}

#[tokio::test]
async fn unknown_tool_is_rejected() {
    let storage = SimStorage::new();
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let mut s = session_on(
        &storage,
        registry(vec![tool]),
        Hooks::default(),
        Config::default(),
    );
    let r = one_step(
        &mut s,
        vec![call("c1", "rm_rf", "{}"), call("c2", "t", "{}")],
    )
    .await;
    assert_error(&r[0], ErrorCode::UnknownTool);
    assert!(r[0].content.contains("rm_rf"), "{}", r[0].content);
    assert!(!r[1].is_error, "the rest of the batch runs");
    assert_eq!(probe.runs(), ["c2"]);
    let c = replayed(&storage, "c1");
    assert_eq!(c.tool, "rm_rf");
    assert_eq!(c.rejection.map(|r| r.0), Some(ErrorCode::UnknownTool));
    assert_eq!(kinds(&storage, "c1"), ["received", "rejected", "committed"]);
}

#[tokio::test]
async fn truncated_batch_is_rejected_whole() {
    let storage = SimStorage::new();
    let tool = TestTool::ok("t");
    let probe = tool.probe();
    let mut s = session_on(
        &storage,
        registry(vec![tool]),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let calls = vec![
        call("c1", "t", "{}"),
        call("c2", "t", r#"{"path":"ok.txt"}"#),
        call("c3", "nope", "{}"),
        call("c4", "t", r#"{"path":"cut"#),
    ];
    let r = s
        .run_batch(ModelResponse {
            text: "let me".into(),
            tool_calls: calls,
            stop_reason: StopReason::Length,
        })
        .await
        .unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    assert_eq!(r.len(), 4);
    for r in &r {
        assert_error(r, ErrorCode::TruncatedCall);
    }
    assert!(probe.runs().is_empty(), "no body ran");
    for c in replay(&storage).calls() {
        assert_eq!(
            c.rejection.as_ref().map(|r| r.0),
            Some(ErrorCode::TruncatedCall)
        );
        assert_eq!(c.arguments, None);
        assert_eq!(c.state, CallState::Committed);
    }
}
