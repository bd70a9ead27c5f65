//! The pipeline's rules (DESIGN.md §2, §3, §7), one test per rule, each through the public API
//! on a simulated disk, each checking both the results and what the journal says.

mod common;

use common::*;
use journal::SimStorage;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tooljournal_runtime::args::Args;
use tooljournal_runtime::event::{
    Approval, AskAnswer, CallRef, Event, ModelCall, ModelResponse, OutcomeStatus, Record,
    SideEffect, StepOutcome, StopReason, Text, ToolSource, TurnOutcome, EVENT_SCHEMA_VERSION,
};
use tooljournal_runtime::hooks::{
    Approver, AskFuture, CallInfo, Decision, Draft, Guard, Hooks, Observer, PostDecision,
    PostExecute, PreExecute,
};
use tooljournal_runtime::registry::Registry;
use tooljournal_runtime::replay::CallReplay;
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use tooljournal_runtime::{Config, ErrorCode, RuntimeError, ToolResult};

// ---------------------------------------------------------------------------------------------
// Listeners built from closures, and helpers over the journal.

/// A pre-execute chain, in order.
type Chain = Vec<Arc<dyn PreExecute>>;

struct Pre<F>(&'static str, F);
impl<F: Fn(&CallInfo) -> Decision + Send + Sync> PreExecute for Pre<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        (self.1)(call)
    }
}

fn pre(name: &'static str, decision: Decision) -> Arc<dyn PreExecute> {
    Arc::new(Pre(name, move |_: &CallInfo| decision.clone()))
}

fn deny(reason: &str) -> Decision {
    Decision::Deny {
        reason: reason.into(),
    }
}

fn ask(reason: &str) -> Decision {
    Decision::Ask {
        reason: reason.into(),
    }
}

struct GuardFn<F>(&'static str, F);
impl<F: Fn(&CallInfo) -> Option<String> + Send + Sync> Guard for GuardFn<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn check(&self, call: &CallInfo) -> Option<String> {
        (self.1)(call)
    }
}

fn guard(
    name: &'static str,
    f: impl Fn(&CallInfo) -> Option<String> + Send + Sync + 'static,
) -> Arc<dyn Guard> {
    Arc::new(GuardFn(name, f))
}

struct Post<F>(&'static str, F);
impl<F: Fn(&CallInfo, &Draft) -> PostDecision + Send + Sync> PostExecute for Post<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn inspect(&self, call: &CallInfo, draft: &Draft) -> PostDecision {
        (self.1)(call, draft)
    }
}

fn post(name: &'static str, decision: PostDecision) -> Arc<dyn PostExecute> {
    Arc::new(Post(name, move |_: &CallInfo, _: &Draft| decision.clone()))
}

/// Answers every question with the same answer and counts the questions.
struct FixedApprover {
    answer: AskAnswer,
    asked: AtomicU64,
}

impl Approver for FixedApprover {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let answer = self.answer;
        Box::pin(async move { answer })
    }
}

fn approver(answer: AskAnswer) -> Arc<FixedApprover> {
    Arc::new(FixedApprover {
        answer,
        asked: AtomicU64::new(0),
    })
}

#[derive(Clone, Copy)]
enum Mood {
    Record,
    Panic,
    Fail,
}

/// An observer that records what it sees into a shared log, or panics, or fails.
struct Watch {
    name: &'static str,
    mood: Mood,
    log: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    fn act(&self, line: String) -> Result<(), String> {
        match self.mood {
            Mood::Record => {
                self.log.lock().unwrap().push(line);
                Ok(())
            }
            Mood::Panic => panic!("observer {} exploded", self.name),
            Mood::Fail => Err(format!("observer {} is unhappy", self.name)),
        }
    }
}

impl Observer for Watch {
    fn name(&self) -> &str {
        self.name
    }
    fn on_result(&self, call: &CallRef, _tool: &str, _result: &ToolResult) -> Result<(), String> {
        self.act(format!("result:{}", call.call_id))
    }
    fn on_progress(&self, call: &CallRef, _tool: &str, message: &str) -> Result<(), String> {
        self.act(format!("progress:{}:{message}", call.call_id))
    }
}

fn watch(name: &'static str, mood: Mood, log: &Arc<Mutex<Vec<String>>>) -> Arc<dyn Observer> {
    Arc::new(Watch {
        name,
        mood,
        log: log.clone(),
    })
}

/// Every event of the journal, with its seq.
fn events(storage: &SimStorage) -> Vec<(u64, Event)> {
    journal::Reader::open(Arc::new(storage.clone()), journal::Limits::default())
        .expect("reader")
        .map(|r| {
            let r = r.expect("record");
            (r.seq, r.decode::<Record>().expect("event").event)
        })
        .collect()
}

/// The kinds of one call's events, in journal order.
fn kinds(storage: &SimStorage, call_id: &str) -> Vec<&'static str> {
    events(storage)
        .iter()
        .filter(|(_, e)| e.call().is_some_and(|c| c.call_id == call_id))
        .map(|(_, e)| e.kind())
        .collect()
}

fn replayed(storage: &SimStorage, call_id: &str) -> CallReplay {
    replay(storage)
        .calls()
        .find(|c| c.call.call_id == call_id)
        .unwrap_or_else(|| panic!("{call_id} is in the journal"))
        .clone()
}

fn status_code(c: &CallReplay) -> Option<ErrorCode> {
    match &c.outcome.as_ref().expect("settled").status {
        OutcomeStatus::Success => None,
        OutcomeStatus::Error { code, .. } => Some(*code),
    }
}

/// One call `c1` to a lone tool, in its own session. Returns the result, the journal's account
/// of the call, and the storage.
async fn single(
    tool: TestTool,
    hooks: Hooks,
    config: Config,
    args: &str,
) -> (ToolResult, CallReplay, SimStorage) {
    let (r, storage) = single_unreplayed(tool, hooks, config, args).await;
    (r, replayed(&storage, "c1"), storage)
}

/// As [`single`], without replaying the journal.
async fn single_unreplayed(
    tool: TestTool,
    hooks: Hooks,
    config: Config,
    args: &str,
) -> (ToolResult, SimStorage) {
    let storage = SimStorage::new();
    let name = tool.name.clone();
    let mut session = session_on(&storage, registry(vec![tool]), hooks, config);
    let mut results = one_step(&mut session, vec![call("c1", &name, args)]).await;
    assert_eq!(results.len(), 1);
    (results.remove(0), storage)
}

/// One call's events, in journal order, read without replay's consistency checks.
fn call_events(storage: &SimStorage, call_id: &str) -> Vec<Event> {
    events(storage)
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| e.call().is_some_and(|c| c.call_id == call_id))
        .collect()
}

/// What the journal says of a call's question and approval, read from its raw events.
fn asked(storage: &SimStorage, call_id: &str) -> (Vec<String>, Option<Approval>) {
    let mut questions = Vec::new();
    let mut approval = None;
    for e in call_events(storage, call_id) {
        match e {
            Event::AskPending { question, .. } => questions.push(question),
            Event::Approved { approval: a, .. } => approval = Some(a),
            _ => {}
        }
    }
    (questions, approval)
}

fn assert_error(r: &ToolResult, code: ErrorCode) {
    assert!(r.is_error, "{r:?}");
    assert_eq!(r.code, Some(code), "{r:?}");
    assert!(
        r.content.starts_with(&format!("{}: ", code.as_str())),
        "content begins with its code: {:?}",
        r.content
    );
    assert_eq!(r.value, None);
}

fn slow_to_cancel(name: &str, cleanup: Duration, log: Arc<Mutex<Vec<String>>>) -> TestTool {
    TestTool::with(name, move |_, ctx| {
        let log = log.clone();
        Box::pin(async move {
            ctx.cancel().cancelled().await;
            tokio::time::sleep(cleanup).await;
            log.lock().unwrap().push("cleanup finished".into());
            Err(ToolError::new(ErrorCode::Aborted, "stopped after cleanup"))
        })
    })
}

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

// The ask tests read the journal's raw events: replay refuses any journal with an ask in it
// (see `a_journal_with_an_ask_replays`).

#[tokio::test]
async fn ask_allowed_once_runs_and_denied_or_expired_never_runs() {
    let answers = [
        (AskAnswer::AllowedOnce, "ask/answered"),
        (AskAnswer::Denied, "ask/answered"),
        (AskAnswer::Expired, "ask/expired"),
        (AskAnswer::Cancelled, "ask/cancelled"),
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
            Event::AskCancelled { .. } => assert_eq!(answer, AskAnswer::Cancelled),
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
    assert_eq!(
        replay(&storage),
        replay(&plain),
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
            Event::Started { call, attempt, .. } if call.call_id == call_id => Some(attempt),
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

// ---------------------------------------------------------------------------------------------
// Commit order, progress, session structure.

#[tokio::test]
async fn results_are_committed_in_model_order_one_per_call_id() {
    let storage = SimStorage::new();
    let tools = vec![TestTool::ok("ok"), TestTool::ok("rm")];
    let hooks = Hooks {
        guards: vec![guard("no-rm", |i| (i.tool == "rm").then(|| "no".into()))],
        ..Hooks::default()
    };
    let mut s = session_on(&storage, registry(tools), hooks, Config::default());
    let ids = ["z9", "a1", "m5", "b2", "q0", "c3"];
    let calls = vec![
        call(ids[0], "ok", "{}"),
        call(ids[1], "unknown", "{}"),
        call(ids[2], "rm", "{}"),
        call(ids[3], "ok", r#"{"x":1}"#),
        call(ids[4], "ok", "{bad"),
        call(ids[5], "ok", ""),
    ];
    let r = one_step(&mut s, calls).await;
    let got: Vec<&str> = r.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(got, ids);
    let committed: Vec<(u64, String)> = events(&storage)
        .into_iter()
        .filter_map(|(seq, e)| match e {
            Event::Committed { call, .. } => Some((seq, call.call_id)),
            _ => None,
        })
        .collect();
    let order: Vec<&str> = committed.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        order, ids,
        "one committed event per call id, in model order"
    );
    assert!(committed.windows(2).all(|w| w[0].0 < w[1].0));
    for (c, r) in replay(&storage).calls().zip(&r) {
        assert_eq!(
            c.committed.as_ref().map(|c| c.content.as_str()),
            Some(r.content.as_str())
        );
    }
}

#[tokio::test]
async fn progress_is_delivered_before_the_result_and_late_progress_is_dropped() {
    let reported = Arc::new(Mutex::new(Vec::new()));
    let rep = reported.clone();
    let chatty = TestTool::with("chatty", move |_, ctx| {
        let rep = rep.clone();
        Box::pin(async move {
            for m in ["p1", "p2"] {
                rep.lock().unwrap().push(ctx.progress().report(m));
            }
            Ok(ToolOutput::text("done"))
        })
    });
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<bool>();
    let slot = Arc::new(Mutex::new(Some((go_rx, done_tx))));
    let late = TestTool::with("late", move |_, ctx| {
        let (go, done) = slot.lock().unwrap().take().expect("runs once");
        let sink = ctx.progress().clone();
        tokio::spawn(async move {
            go.await.unwrap();
            let _ = done.send(sink.report("too late"));
        });
        Box::pin(async { Ok(ToolOutput::text("done")) })
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let hooks = Hooks {
        observers: vec![watch("records", Mood::Record, &log)],
        ..Hooks::default()
    };
    let storage = SimStorage::new();
    let mut s = session_on(
        &storage,
        registry(vec![chatty, late]),
        hooks,
        Config::default(),
    );
    let r = one_step(
        &mut s,
        vec![call("c1", "chatty", "{}"), call("c2", "late", "{}")],
    )
    .await;
    assert!(r.iter().all(|r| !r.is_error));
    go_tx.send(()).unwrap();
    assert!(
        !done_rx.await.unwrap(),
        "a report after the result is refused"
    );
    assert_eq!(*reported.lock().unwrap(), [true, true]);
    assert_eq!(
        *log.lock().unwrap(),
        ["progress:c1:p1", "progress:c1:p2", "result:c1", "result:c2"]
    );
    assert_eq!(s.stats().observer_failures(), 0);
}

/// A tool with a chosen version and schemas, to see what `session/open` records.
struct Versioned {
    name: &'static str,
    version: &'static str,
    input: Value,
}

impl Tool for Versioned {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "versioned"
    }
    fn version(&self) -> &str {
        self.version
    }
    fn input_schema(&self) -> Value {
        self.input.clone()
    }
    fn execute(&self, _args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async { Ok(ToolOutput::text("")) })
    }
}

#[tokio::test]
async fn session_open_records_each_tools_name_source_version_and_schema_hash() {
    let schema_a = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let schema_a_reordered: Value =
        serde_json::from_str(r#"{"properties": {"path": {"type": "string"}}, "type": "object"}"#)
            .unwrap();
    let mut reg = Registry::new();
    let tool = |name, version, input: &Value| {
        Arc::new(Versioned {
            name,
            version,
            input: input.clone(),
        })
    };
    reg.register(tool("read", "1.2.0", &schema_a), ToolSource::BuiltIn)
        .unwrap();
    reg.register(
        tool("read_again", "7", &schema_a_reordered),
        ToolSource::BuiltIn,
    )
    .unwrap();
    let web = ToolSource::External {
        server: "mcp-web".into(),
    };
    reg.register(
        tool("search", "0.9", &json!({"type": "object"})),
        web.clone(),
    )
    .unwrap();
    let reg = Arc::new(reg);
    let storage = SimStorage::new();
    let s = session_on(&storage, reg.clone(), Hooks::default(), Config::default());
    s.close().await.unwrap();

    let open = replay(&storage).open.expect("session/open");
    assert_eq!(open.schema_version, EVENT_SCHEMA_VERSION);
    assert_eq!(open.session_id, "test-session");
    assert_eq!(open.tools, reg.descriptors());
    let seen: Vec<(&str, &ToolSource, &str)> = open
        .tools
        .iter()
        .map(|t| (t.name.as_str(), &t.source, t.version.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("read", &ToolSource::BuiltIn, "1.2.0"),
            ("read_again", &ToolSource::BuiltIn, "7"),
            ("search", &web, "0.9"),
        ]
    );
    let h: Vec<&str> = open.tools.iter().map(|t| t.schema_hash.as_str()).collect();
    for h in &h {
        assert_eq!(h.len(), 64);
        assert!(h.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    assert_eq!(
        h[0], h[1],
        "the hash is over canonical JSON: key order does not matter"
    );
    assert_ne!(h[0], h[2], "different schemas, different hashes");
}

#[tokio::test]
async fn duplicate_call_ids_in_one_message_are_refused_before_anything_is_written() {
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
    let before = s.event_log().journal().stats().appended_seq;
    let dup = vec![
        call("c1", "t", "{}"),
        call("c2", "t", "{}"),
        call("c1", "t", r#"{"x":1}"#),
    ];
    let err = s.run_batch(response(dup)).await.unwrap_err();
    assert!(
        matches!(&err, RuntimeError::InvalidResponse(m) if m.contains("c1")),
        "{err}"
    );
    assert_eq!(
        s.event_log().journal().stats().appended_seq,
        before,
        "nothing was written"
    );
    assert!(probe.runs().is_empty());

    // The step is still open and answerable with a valid message.
    let ok: Vec<ModelCall> = vec![call("c1", "t", "{}")];
    let r = s.run_batch(response(ok)).await.unwrap();
    assert!(!r[0].is_error);
    s.end_step(StepOutcome::Completed).unwrap();
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    let rep = replay(&storage);
    let step = &rep.turns[0].steps[0];
    assert_eq!(step.response.as_ref().unwrap().tool_calls.len(), 1);
    assert_eq!(step.calls.len(), 1);
    assert_eq!(probe.runs(), ["c1"]);
}
