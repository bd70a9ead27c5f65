//! The pipeline's execute and result rules (DESIGN.md §2, §3, §7): `finalize_content`, error
//! codes, panicking tools and observers, post-execute listeners and the output contract, the
//! execute wrapper's timeout and retry; one test per rule, each through the public API on a
//! simulated disk, each checking both the results and what the journal says.

use crate::common;

use common::pipeline::*;
use common::*;
use journal::SimStorage;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tooljournal_runtime::event::{Event, OutcomeStatus, SideEffect, Text};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::{Config, ErrorCode};
use tooljournal_runtime::{Hooks, PostDecision};
use tooljournal_runtime::{ToolError, ToolOutput};

// ---------------------------------------------------------------------------------------------
// Results and errors.

#[tokio::test(start_paused = true)]
async fn finalize_content_runs_exactly_once_on_every_outcome() {
    const SFX: &str = " [finalized]";
    let log = Arc::new(Mutex::new(Vec::new()));
    let out = json!({"type": "object", "required": ["n"]});
    let cases: Vec<(&str, TestTool, Hooks, &str, Option<ErrorCode>)> = vec![
        ("success", TestTool::ok("t"), Hooks::default(), "{}", None),
        (
            "tool error",
            TestTool::failing("t", ErrorCode::ToolFailed, "boom"),
            Hooks::default(),
            "{}",
            Some(ErrorCode::ToolFailed),
        ),
        (
            "panic",
            TestTool::with("t", |_, _| panic!("kaboom")),
            Hooks::default(),
            "{}",
            Some(ErrorCode::ToolPanicked),
        ),
        (
            "timeout",
            slow_to_cancel("t", Duration::from_millis(5), log.clone()),
            Hooks::default(),
            "{}",
            Some(ErrorCode::Timeout),
        ),
        (
            "post-execute block",
            TestTool::ok("t"),
            Hooks {
                post_execute: vec![post(
                    "redactor",
                    PostDecision::Block {
                        feedback: "secret".into(),
                    },
                )],
                ..Hooks::default()
            },
            "{}",
            Some(ErrorCode::PostExecuteBlocked),
        ),
        (
            "post-execute invalid value",
            TestTool::with("t", |_, _| {
                Box::pin(async { Ok(ToolOutput::text("n").with_value(json!({"n": 1}))) })
            })
            .output(out.clone()),
            Hooks {
                post_execute: vec![post("rewriter", PostDecision::ReplaceValue(json!({})))],
                ..Hooks::default()
            },
            "{}",
            Some(ErrorCode::OutputSchemaViolation),
        ),
        (
            "output schema violation",
            TestTool::ok("t").output(out.clone()),
            Hooks::default(),
            "{}",
            Some(ErrorCode::OutputSchemaViolation),
        ),
        (
            "policy deny",
            TestTool::ok("t"),
            Hooks {
                pre_execute: vec![pre("no", deny("nope"))],
                ..Hooks::default()
            },
            "{}",
            Some(ErrorCode::PolicyDenied),
        ),
        (
            "schema error",
            TestTool::ok("t").input(json!({"type": "object", "required": ["path"]})),
            Hooks::default(),
            "{}",
            Some(ErrorCode::SchemaError),
        ),
        (
            "syntax error",
            TestTool::ok("t"),
            Hooks::default(),
            "{",
            Some(ErrorCode::SyntaxError),
        ),
    ];
    let config = Config {
        timeout_ms: 20,
        ..Config::default()
    };
    for (what, mut tool, hooks, args, code) in cases {
        tool.finalize_suffix = Some(SFX.into());
        let probe = tool.probe();
        let (r, c, _) = single(tool, hooks, config.clone(), args).await;
        assert_eq!(
            probe.finalized(),
            1,
            "{what}: finalize_content runs exactly once"
        );
        assert!(r.content.ends_with(SFX), "{what}: {:?}", r.content);
        assert_eq!(
            c.committed.as_ref().map(|c| c.content.as_str()),
            Some(r.content.as_str())
        );
        match code {
            None => assert!(!r.is_error, "{what}: {r:?}"),
            Some(code) => assert_error(&r, code),
        }
    }
}

#[tokio::test]
async fn error_content_begins_with_its_code() {
    let storage = SimStorage::new();
    let tools = vec![
        TestTool::ok("plain"),
        TestTool::ok("strict").input(json!({"type": "object", "required": ["path"]})),
        TestTool::ok("forbidden"),
        TestTool::failing("fails", ErrorCode::ToolFailed, "disk on fire"),
        TestTool::failing(
            "stale",
            ErrorCode::FsStaleVersion,
            "cfg.toml changed since it was read",
        ),
        TestTool::failing("outside", ErrorCode::FsOutsideWorkspace, "/etc is outside"),
        TestTool::with("panics", |_, _| panic!("kaboom")),
        TestTool::ok("typed").output(json!({"type": "object"})),
    ];
    let hooks = Hooks {
        guards: vec![guard("names", |i| {
            (i.tool == "forbidden").then(|| "not this one".into())
        })],
        ..Hooks::default()
    };
    let mut s = session_on(&storage, registry(tools), hooks, Config::default());
    let cases = [
        (call("c1", "missing", "{}"), ErrorCode::UnknownTool),
        (call("c2", "plain", "{oops"), ErrorCode::SyntaxError),
        (call("c3", "strict", "{}"), ErrorCode::SchemaError),
        (call("c4", "forbidden", "{}"), ErrorCode::PolicyDenied),
        (call("c5", "fails", "{}"), ErrorCode::ToolFailed),
        (call("c6", "stale", "{}"), ErrorCode::FsStaleVersion),
        (call("c7", "outside", "{}"), ErrorCode::FsOutsideWorkspace),
        (call("c8", "panics", "{}"), ErrorCode::ToolPanicked),
        (call("c9", "typed", "{}"), ErrorCode::OutputSchemaViolation),
    ];
    let r = one_step(&mut s, cases.iter().map(|c| c.0.clone()).collect()).await;
    for (r, (_, code)) in r.iter().zip(&cases) {
        assert_error(r, *code);
        let c = replayed(&storage, &r.call_id);
        let committed = c.committed.expect("committed");
        assert_eq!(committed.content, r.content);
        assert_eq!(committed.code, Some(*code));
        assert!(committed.is_error);
    }
    assert_eq!(
        r[5].content,
        "FS_STALE_VERSION: cfg.toml changed since it was read"
    );
}

#[tokio::test]
async fn a_tool_cannot_claim_a_runtime_code() {
    let storage = SimStorage::new();
    let claimed = [
        ErrorCode::ToolNotStarted,
        ErrorCode::PolicyDenied,
        ErrorCode::AbortedBeforeDispatch,
        ErrorCode::UnknownTool,
        ErrorCode::TruncatedCall,
        ErrorCode::ToolPanicked,
        ErrorCode::PostExecuteBlocked,
        ErrorCode::OutputSchemaViolation,
        ErrorCode::SchemaError,
    ];
    let tools = claimed
        .iter()
        .enumerate()
        .map(|(i, &code)| TestTool::failing(&format!("t{i}"), code, "trust me"))
        .collect();
    let mut s = session_on(
        &storage,
        registry(tools),
        Hooks::default(),
        Config::default(),
    );
    let calls = (0..claimed.len())
        .map(|i| call(&format!("c{i}"), &format!("t{i}"), "{}"))
        .collect();
    let r = one_step(&mut s, calls).await;
    for (r, code) in r.iter().zip(claimed) {
        assert_error(r, ErrorCode::ToolFailed);
        assert!(r.content.contains(code.as_str()), "{}", r.content);
        let c = replayed(&storage, &r.call_id);
        assert_eq!(status_code(&c), Some(ErrorCode::ToolFailed));
        assert_eq!(
            c.committed.and_then(|c| c.code),
            Some(ErrorCode::ToolFailed)
        );
    }
}

#[tokio::test]
async fn tool_panic_becomes_tool_panicked_and_the_session_goes_on() {
    let storage = SimStorage::new();
    let ok = TestTool::ok("ok");
    let probe = ok.probe();
    let tools = vec![TestTool::with("bad", |_, _| panic!("kaboom")), ok];
    let mut s = session_on(
        &storage,
        registry(tools),
        Hooks::default(),
        Config::default(),
    );
    let r = one_step(
        &mut s,
        vec![call("c1", "bad", "{}"), call("c2", "ok", "{}")],
    )
    .await;
    assert_error(&r[0], ErrorCode::ToolPanicked);
    assert!(r[0].content.contains("kaboom"), "{}", r[0].content);
    assert!(!r[1].is_error, "the next call of the batch runs");
    let r = one_step(&mut s, vec![call("c3", "ok", "{}")]).await;
    assert!(!r[0].is_error, "the next turn runs");
    s.close().await.unwrap();
    assert_eq!(probe.runs(), ["c2", "c3"]);
    let rep = replay(&storage);
    assert!(rep.closed);
    let c1 = replayed(&storage, "c1");
    assert_eq!(c1.state, CallState::Committed);
    assert_eq!(status_code(&c1), Some(ErrorCode::ToolPanicked));
}

#[tokio::test]
async fn observer_panic_or_error_is_isolated_and_counted() {
    let calls = || vec![call("c1", "ok", "{}"), call("c2", "bad", "{")];
    let tools = || {
        vec![
            TestTool::ok("ok"),
            TestTool::failing("bad", ErrorCode::ToolFailed, "x"),
        ]
    };
    let plain = SimStorage::new();
    let mut s = session_on(
        &plain,
        registry(tools()),
        Hooks::default(),
        Config::default(),
    );
    let expected = one_step(&mut s, calls()).await;

    let storage = SimStorage::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let hooks = Hooks {
        observers: vec![
            watch("panics", Mood::Panic, &log),
            watch("fails", Mood::Fail, &log),
            watch("records", Mood::Record, &log),
        ],
        ..Hooks::default()
    };
    let mut s = session_on(&storage, registry(tools()), hooks, Config::default());
    let r = one_step(&mut s, calls()).await;
    assert_eq!(r, expected, "observers change no result");
    assert_eq!(
        *log.lock().unwrap(),
        ["result:c1", "result:c2"],
        "a later observer is still called"
    );
    assert_eq!(
        s.stats().observer_failures(),
        4,
        "two failing observers × two results"
    );
    // Wall time of the bodies aside (a loaded machine makes it 0 or 1 ms either way).
    let timeless = |storage: &SimStorage| {
        let mut r = replay(storage);
        for t in &mut r.turns {
            for c in t.steps.iter_mut().flat_map(|s| s.calls.iter_mut()) {
                if let Some(o) = c.outcome.as_mut() {
                    o.duration_ms = 0;
                }
            }
        }
        r
    };
    assert_eq!(
        timeless(&storage),
        timeless(&plain),
        "observers change nothing in the journal"
    );
}

// ---------------------------------------------------------------------------------------------
// Post-execute and the output contract.

fn fs_write() -> SideEffect {
    SideEffect::FsWrite {
        path: "a.txt".into(),
        before_sha256: None,
        after_sha256: "ab".repeat(32),
    }
}

#[tokio::test]
async fn post_execute_block_after_a_side_effect_keeps_the_side_effect_recorded() {
    let tool = TestTool::with("write", |_, _| {
        Box::pin(async {
            Ok(ToolOutput::text("wrote a.txt: password=hunter2").with_side_effect(fs_write()))
        })
    });
    let probe = tool.probe();
    let hooks = Hooks {
        post_execute: vec![post(
            "secrets",
            PostDecision::Block {
                feedback: "leaks a password".into(),
            },
        )],
        ..Hooks::default()
    };
    let (r, c, _) = single(tool, hooks, Config::default(), r#"{"path":"a.txt"}"#).await;
    assert_error(&r, ErrorCode::PostExecuteBlocked);
    assert!(
        r.content.contains("secrets") && r.content.contains("leaks a password"),
        "{}",
        r.content
    );
    assert!(
        !r.content.contains("hunter2"),
        "the blocked content does not reach the model"
    );
    assert_eq!(probe.runs(), ["c1"]);
    let outcome = c.outcome.clone().expect("settled");
    assert_eq!(
        outcome.status,
        OutcomeStatus::Success,
        "the tool did succeed"
    );
    assert_eq!(
        outcome.side_effects,
        [fs_write()],
        "the write stays recorded as happened"
    );
    let committed = c.committed.expect("committed");
    assert_eq!(committed.code, Some(ErrorCode::PostExecuteBlocked));
    assert!(!committed.content.contains("hunter2"));
}

fn valued(value: Value) -> TestTool {
    TestTool::with("v", move |_, _| {
        let value = value.clone();
        Box::pin(async move { Ok(ToolOutput::text("raw content").with_value(value)) })
    })
    .output(json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"]
    }))
}

#[tokio::test]
async fn post_execute_replace_content_keeps_the_value() {
    let hooks = Hooks {
        post_execute: vec![post(
            "shorten",
            PostDecision::ReplaceContent("short".into()),
        )],
        ..Hooks::default()
    };
    let (r, c, _) = single(valued(json!({"n": 1})), hooks, Config::default(), "{}").await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.content, "short");
    assert_eq!(r.value, Some(json!({"n": 1})));
    let committed = c.committed.clone().expect("committed");
    assert_eq!(committed.content, "short");
    assert_eq!(committed.value.as_deref(), Some(r#"{"n":1}"#));
    assert_eq!(
        c.outcome.expect("settled").content,
        Text::Inline("raw content".into())
    );
}

#[tokio::test]
async fn post_execute_replace_value_is_revalidated() {
    let hooks = |v: Value| Hooks {
        post_execute: vec![post("rewrite", PostDecision::ReplaceValue(v))],
        ..Hooks::default()
    };
    let (r, c, _) = single(
        valued(json!({"n": 1})),
        hooks(json!({"n": 2})),
        Config::default(),
        "{}",
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.value, Some(json!({"n": 2})));
    assert_eq!(
        serde_json::from_str::<Value>(&r.content).unwrap(),
        json!({"n": 2})
    );
    assert_eq!(c.committed.unwrap().value.as_deref(), Some(r#"{"n":2}"#));

    let (r, c, _) = single(
        valued(json!({"n": 1})),
        hooks(json!({"n": "two"})),
        Config::default(),
        "{}",
    )
    .await;
    assert_error(&r, ErrorCode::OutputSchemaViolation);
    assert!(r.content.contains("rewrite"), "{}", r.content);
    assert_eq!(c.committed.unwrap().value, None);
    assert_eq!(
        c.outcome.unwrap().status,
        OutcomeStatus::Success,
        "the tool's own outcome stands"
    );
}

#[tokio::test]
async fn output_schema_violation_is_an_error() {
    for (tool, why) in [
        (valued(json!({"n": "one"})), "/n"),
        (valued(json!({})), "n"),
        (
            TestTool::ok("v").output(json!({"type": "object"})),
            "no structured value",
        ),
    ] {
        let (r, c, _) = single(tool, Hooks::default(), Config::default(), "{}").await;
        assert_error(&r, ErrorCode::OutputSchemaViolation);
        assert!(r.content.contains(why), "{}", r.content);
        assert_eq!(status_code(&c), Some(ErrorCode::OutputSchemaViolation));
        assert_eq!(c.committed.unwrap().value, None);
    }
}

// ---------------------------------------------------------------------------------------------
// The execute wrapper: timeout, retry.

#[tokio::test(start_paused = true)]
async fn timeout_cancels_then_waits_for_the_tool_to_settle() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let tool = slow_to_cancel("slow", Duration::from_millis(500), log.clone());
    let hooks = Hooks {
        observers: vec![watch("records", Mood::Record, &log)],
        ..Hooks::default()
    };
    let config = Config {
        timeout_ms: 100,
        ..Config::default()
    };
    let started = tokio::time::Instant::now();
    let (r, c, _) = single(tool, hooks, config, "{}").await;
    assert_error(&r, ErrorCode::Timeout);
    assert!(
        r.content.contains("100 ms") && r.content.contains("stopped after cleanup"),
        "{}",
        r.content
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["cleanup finished", "result:c1"],
        "the result is committed only after the tool settled"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    let outcome = c.outcome.expect("settled");
    assert!(outcome.duration_ms >= 600, "{}", outcome.duration_ms);
    assert!(matches!(
        outcome.status,
        OutcomeStatus::Error {
            code: ErrorCode::Timeout,
            ..
        }
    ));
    assert_eq!(c.attempts, 1, "a timed-out call is not retried");
}

fn flaky(name: &str) -> TestTool {
    TestTool::with(name, |_, ctx| {
        Box::pin(async move {
            match ctx.attempt() {
                n @ 1..=2 => {
                    Err(ToolError::new(ErrorCode::ToolFailed, format!("try {n}")).retryable())
                }
                _ => Ok(ToolOutput::text("third time lucky")),
            }
        })
    })
}

fn started_attempts(storage: &SimStorage, call_id: &str) -> Vec<u32> {
    events(storage)
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::Started(tooljournal_runtime::event::CallStarted { call, attempt, .. })
                if call.call_id == call_id =>
            {
                Some(attempt)
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn retry_safe_tool_is_retried_and_each_attempt_is_journaled() {
    let tool = flaky("f").retry_safe();
    let probe = tool.probe();
    let (r, c, storage) = single(tool, Hooks::default(), Config::default(), "{}").await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.content, "third time lucky");
    assert_eq!(probe.runs().len(), 3);
    assert_eq!(c.attempts, 3);
    assert_eq!(c.outcome.unwrap().attempts, 3);
    assert_eq!(started_attempts(&storage, "c1"), [1, 2, 3]);
    assert_eq!(probe.finalized(), 1, "finalized once, not per attempt");
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_is_not_retry_safe_is_not_retried() {
    let not_retryable = TestTool::with("g", |_, _| {
        Box::pin(async { Err(ToolError::new(ErrorCode::ToolFailed, "hard failure")) })
    })
    .retry_safe();
    for tool in [flaky("f"), not_retryable] {
        let probe = tool.probe();
        let (r, c, storage) = single(tool, Hooks::default(), Config::default(), "{}").await;
        assert_error(&r, ErrorCode::ToolFailed);
        assert_eq!(probe.runs().len(), 1);
        assert_eq!(c.attempts, 1);
        assert_eq!(c.outcome.unwrap().attempts, 1);
        assert_eq!(started_attempts(&storage, "c1"), [1]);
    }
}
