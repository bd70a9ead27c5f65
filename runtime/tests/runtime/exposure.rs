//! Tool exposure per step (direct, deferred, hidden; `tool_search`) and plan mode, through the
//! public session API, checked against the journal.

use crate::common;

use common::*;
use journal::{Journal, Options, SimStorage};
use std::sync::Arc;
use tooljournal_runtime::ask::Ask;
use tooljournal_runtime::event::{
    Answer, AskAnswer, Event, Question, SideEffect, StepOutcome, ToolSource, TurnOutcome,
};
use tooljournal_runtime::replay::SessionReplay;
use tooljournal_runtime::ManualClock;
use tooljournal_runtime::ToolError;
use tooljournal_runtime::{
    Approver, AskFuture, CallInfo, Decision, Hooks, PreExecute, QuestionFuture, QuestionOutcome,
};
use tooljournal_runtime::{Config, ErrorCode, Session, SessionOptions, ToolResult};
use tooljournal_runtime::{Exposure, Registry, RegistryError};

fn events(storage: &SimStorage) -> Vec<Event> {
    let reader = journal::Reader::open(Arc::new(storage.clone()), journal::Limits::default())
        .expect("reader");
    reader
        .map(|r| {
            let r = r.expect("record");
            r.decode::<tooljournal_runtime::event::Record>()
                .expect("event")
                .event
        })
        .collect()
}

/// The names each step showed, in step order.
fn step_tools(storage: &SimStorage) -> Vec<Vec<String>> {
    events(storage)
        .into_iter()
        .filter_map(|e| match e {
            Event::StepTools { tools, .. } => Some(tools.into_iter().map(|t| t.name).collect()),
            _ => None,
        })
        .collect()
}

fn plan_modes(storage: &SimStorage) -> Vec<(bool, String, Option<String>)> {
    events(storage)
        .into_iter()
        .filter_map(|e| match e {
            Event::PlanMode { on, reason, call } => Some((on, reason, call.map(|c| c.call_id))),
            _ => None,
        })
        .collect()
}

fn registry_with(tools: Vec<(TestTool, Exposure)>) -> Arc<Registry> {
    let mut r = Registry::new();
    for (t, exposure) in tools {
        r.register_exposed(Arc::new(t), ToolSource::BuiltIn, exposure)
            .expect("register");
    }
    Arc::new(r)
}

async fn step(
    s: &mut Session,
    calls: Vec<tooljournal_runtime::event::ModelCall>,
) -> Vec<ToolResult> {
    s.begin_step().unwrap();
    let r = s.run_batch(response(calls)).await.unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    r
}

fn code(r: &ToolResult) -> Option<ErrorCode> {
    r.code
}

#[tokio::test]
async fn a_deferred_tool_is_unknown_until_tool_search_finds_it_then_runs_from_the_next_step() {
    let storage = SimStorage::new();
    let deferred = TestTool::ok("weather_lookup");
    let probe = deferred.probe();
    let registry = registry_with(vec![
        (TestTool::ok("echo"), Exposure::Direct),
        (deferred, Exposure::Deferred),
    ]);
    let mut s = session_on(&storage, registry, Hooks::default(), Config::default());
    s.begin_turn("go").unwrap();

    // Step 1: called before discovery, then found, then called again in the same message.
    let r = step(
        &mut s,
        vec![
            call("c1", "weather_lookup", "{}"),
            call("c2", "tool_search", r#"{"query":"weather"}"#),
            call("c3", "weather_lookup", "{}"),
        ],
    )
    .await;
    assert_eq!(
        code(&r[0]),
        Some(ErrorCode::UnknownTool),
        "{}",
        r[0].content
    );
    assert!(r[0].content.contains("tool_search"), "{}", r[0].content);
    assert!(!r[1].is_error, "{}", r[1].content);
    assert!(r[1].content.contains("weather_lookup"), "{}", r[1].content);
    assert_eq!(
        code(&r[2]),
        Some(ErrorCode::UnknownTool),
        "the step's tool set was fixed before the search"
    );
    assert!(probe.runs().is_empty());

    // Step 2: it is shown and it runs.
    let r = step(&mut s, vec![call("c4", "weather_lookup", "{}")]).await;
    assert!(!r[0].is_error, "{}", r[0].content);
    assert_eq!(probe.runs(), ["c4"]);
    s.end_turn(TurnOutcome::Completed).await.unwrap();

    let shown = step_tools(&storage);
    assert_eq!(shown[0], ["echo", "tool_search"]);
    assert_eq!(shown[1], ["echo", "tool_search", "weather_lookup"]);
    let loaded: Vec<Vec<String>> = events(&storage)
        .into_iter()
        .filter_map(|e| match e {
            Event::Settled { outcome, .. } => {
                outcome.side_effects.into_iter().find_map(|e| match e {
                    SideEffect::ToolsLoaded { names } => Some(names),
                    _ => None,
                })
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        loaded,
        [["weather_lookup"]],
        "the search's settled says what it loaded"
    );
    assert!(replay(&storage).loaded_tools.contains("weather_lookup"));
}

#[tokio::test]
async fn a_hidden_tool_is_never_shown_never_found_and_never_runs() {
    let storage = SimStorage::new();
    let hidden = TestTool::ok("secret_admin");
    let probe = hidden.probe();
    let registry = registry_with(vec![
        (TestTool::ok("echo"), Exposure::Deferred),
        (hidden, Exposure::Hidden),
    ]);
    let mut s = session_on(&storage, registry, Hooks::default(), Config::default());
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![
            call("c1", "secret_admin", "{}"),
            call("c2", "tool_search", r#"{"query":"secret"}"#),
        ],
    )
    .await;
    assert_eq!(code(&r[0]), Some(ErrorCode::UnknownTool));
    assert!(
        !r[0].content.contains("tool_search"),
        "a hidden tool is not hinted at: {}",
        r[0].content
    );
    assert!(r[1].content.contains("no tool matches"), "{}", r[1].content);
    let r = step(&mut s, vec![call("c3", "secret_admin", "{}")]).await;
    assert_eq!(code(&r[0]), Some(ErrorCode::UnknownTool));
    assert!(probe.runs().is_empty());
    for shown in step_tools(&storage) {
        assert_eq!(shown, ["tool_search"]);
    }
}

#[tokio::test]
async fn without_deferred_tools_there_is_no_tool_search() {
    let storage = SimStorage::new();
    let mut s = session_on(
        &storage,
        registry(vec![TestTool::ok("echo")]),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    let r = step(&mut s, vec![call("c1", "tool_search", r#"{"query":"x"}"#)]).await;
    assert_eq!(code(&r[0]), Some(ErrorCode::UnknownTool));
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    assert_eq!(step_tools(&storage), [["echo"]]);
}

#[test]
fn no_one_but_the_runtime_registers_tool_search() {
    let mut r = Registry::new();
    let refused = r.register_exposed(
        Arc::new(TestTool::ok("tool_search")),
        ToolSource::BuiltIn,
        Exposure::Direct,
    );
    assert_eq!(
        refused,
        Err(RegistryError::Reserved {
            name: "tool_search".into()
        })
    );
}

fn resume_on(storage: &SimStorage, registry: Arc<Registry>, hooks: Hooks) -> Session {
    let replay: SessionReplay = replay(storage);
    let (journal, _) =
        Journal::open(Arc::new(storage.clone()), Options::default()).expect("journal");
    Session::resume(
        journal,
        registry,
        hooks,
        Config::default(),
        SessionOptions {
            session_id: None,
            workspace: "/ws".into(),
            clock: Arc::new(ManualClock::new(1_700_000_100_000)),
        },
        &replay,
    )
    .expect("resume")
}

#[tokio::test]
async fn tools_loaded_before_a_resume_stay_loaded() {
    let storage = SimStorage::new();
    let make = || registry_with(vec![(TestTool::ok("weather_lookup"), Exposure::Deferred)]);
    let mut s = session_on(&storage, make(), Hooks::default(), Config::default());
    s.begin_turn("go").unwrap();
    step(
        &mut s,
        vec![call("c1", "tool_search", r#"{"query":"weather"}"#)],
    )
    .await;
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    drop(s);

    let mut s = resume_on(&storage, make(), Hooks::default());
    s.begin_turn("again").unwrap();
    let r = step(&mut s, vec![call("c2", "weather_lookup", "{}")]).await;
    assert!(!r[0].is_error, "{}", r[0].content);
    assert_eq!(
        step_tools(&storage).last().unwrap(),
        &["tool_search", "weather_lookup"]
    );
}

/// Answers every question (the built-in `ask`'s) with one outcome, and every yes/no approval
/// with "yes, always": only the question's answer may end plan mode.
struct Person(QuestionOutcome);

impl Approver for Person {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(async { AskAnswer::AllowedAlways })
    }
    fn question(&self, _call: CallInfo, _question: Question) -> QuestionFuture<'_> {
        let outcome = self.0.clone();
        Box::pin(async move { outcome })
    }
}

/// Answers yes/no approvals only (`question` keeps the default, which withdraws it).
struct YesNo(AskAnswer);

impl Approver for YesNo {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        let a = self.0;
        Box::pin(async move { a })
    }
}

/// A person who answers a question by choosing `label`.
fn choosing(label: &str) -> Arc<dyn Approver> {
    Arc::new(Person(QuestionOutcome::Answered(Answer {
        choice: vec![label.into()],
        text: None,
    })))
}

/// A listener that allows everything but `ask`: plan mode must still refuse writes.
struct AllowAll;

impl PreExecute for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.tool == "ask" {
            Decision::Pass
        } else {
            Decision::Allow
        }
    }
}

/// A listener that allows every call, `ask` included.
struct AllowEverything;

impl PreExecute for AllowEverything {
    fn name(&self) -> &str {
        "allow-everything"
    }
    fn decide(&self, _call: &CallInfo) -> Decision {
        Decision::Allow
    }
}

fn plan_hooks(approver: Arc<dyn Approver>) -> Hooks {
    Hooks {
        pre_execute: vec![Arc::new(AllowAll)],
        approver: Some(approver),
        ..Hooks::default()
    }
}

fn plan_registry(write: TestTool, read: TestTool) -> Arc<Registry> {
    let mut r = Registry::new();
    r.register(Arc::new(write), ToolSource::BuiltIn).unwrap();
    r.register(Arc::new(read.read_only()), ToolSource::BuiltIn)
        .unwrap();
    r.register(Arc::new(Ask), ToolSource::BuiltIn).unwrap();
    Arc::new(r)
}

/// The plan question: approve (the plan option) or revise.
fn plan_question() -> String {
    serde_json::json!({
        "question": "Approve the plan: edit a.txt?",
        "options": [
            {"label": "Approve", "description": "run the plan"},
            {"label": "Revise", "description": "change it first"}
        ],
        "free_text": true,
        "plan_option": "Approve"
    })
    .to_string()
}

#[tokio::test]
async fn plan_mode_ends_only_when_the_person_chooses_the_plan_option_and_the_journal_shows_both() {
    let storage = SimStorage::new();
    let write = TestTool::ok("write_thing");
    let writes = write.probe();
    let read = TestTool::ok("read_thing");
    let reads = read.probe();
    let config = Config {
        plan_mode: true,
        ..Config::default()
    };
    let mut s = session_on(
        &storage,
        plan_registry(write, read),
        plan_hooks(choosing("Approve")),
        config,
    );
    assert!(s.plan_mode());
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![
            call("c1", "write_thing", "{}"),
            call("c2", "read_thing", "{}"),
        ],
    )
    .await;
    assert_eq!(code(&r[0]), Some(ErrorCode::PolicyDenied));
    assert!(r[0].content.contains("plan mode is on"), "{}", r[0].content);
    assert!(!r[1].is_error, "reads run in plan mode: {}", r[1].content);
    assert!(writes.runs().is_empty());
    assert_eq!(reads.runs(), ["c2"]);

    // The person chooses the plan option; a write after it in model order runs.
    let r = step(
        &mut s,
        vec![
            call("c3", "ask", &plan_question()),
            call("c4", "write_thing", "{}"),
        ],
    )
    .await;
    assert!(!r[0].is_error, "{}", r[0].content);
    assert_eq!(r[0].content, "The user chose: Approve");
    assert!(!r[1].is_error, "{}", r[1].content);
    assert_eq!(writes.runs(), ["c4"]);
    assert!(!s.plan_mode());
    s.end_turn(TurnOutcome::Completed).await.unwrap();

    let modes = plan_modes(&storage);
    assert_eq!(modes.len(), 2, "{modes:?}");
    assert_eq!((modes[0].0, modes[0].2.as_deref()), (true, None));
    assert_eq!((modes[1].0, modes[1].2.as_deref()), (false, Some("c3")));
    assert!(modes[1].1.contains("Approve the plan"), "{}", modes[1].1);
    // Journaled between the reply that chose it and the call's approval.
    let order: Vec<&str> = events(&storage)
        .iter()
        .filter(|e| {
            matches!(e, Event::PlanMode { on: false, .. })
                || e.call().is_some_and(|c| c.call_id == "c3")
        })
        .map(|e| e.kind())
        .collect();
    assert_eq!(
        order,
        [
            "received",
            "parsed",
            "ask/question",
            "ask/reply",
            "plan/mode",
            "approved",
            "started",
            "settled",
            "committed"
        ]
    );
    let replayed = replay(&storage);
    assert!(!replayed.plan_mode);
    let denied = replayed.call(&tooljournal_runtime::event::CallRef {
        turn: 1,
        step: 1,
        call_id: "c1".into(),
    });
    let (code, reason) = denied.unwrap().rejection.clone().unwrap();
    assert_eq!(code, ErrorCode::PolicyDenied);
    assert!(reason.contains("plan-mode"), "{reason}");
}

/// A guard that refuses every `ask` call.
struct NoAsks;

impl tooljournal_runtime::Guard for NoAsks {
    fn name(&self) -> &str {
        "no-asks"
    }
    fn check(&self, call: &CallInfo) -> Option<String> {
        (call.tool == "ask").then(|| "asks are refused here".to_owned())
    }
}

#[tokio::test]
async fn an_ask_a_guard_refuses_is_never_put_and_plan_mode_stays_on() {
    let storage = SimStorage::new();
    let write = TestTool::ok("write_thing");
    let writes = write.probe();
    let config = Config {
        plan_mode: true,
        ..Config::default()
    };
    let mut hooks = plan_hooks(choosing("Approve"));
    hooks.guards.push(Arc::new(NoAsks));
    let mut s = session_on(
        &storage,
        plan_registry(write, TestTool::ok("read_thing")),
        hooks,
        config,
    );
    s.begin_turn("go").unwrap();
    let r = step(
        &mut s,
        vec![
            call("c1", "ask", &plan_question()),
            call("c2", "write_thing", "{}"),
        ],
    )
    .await;
    // A guard refuses the plan question before anyone is asked: the plan is not approved,
    // and the write after it is still refused by plan mode.
    assert_eq!(
        code(&r[0]),
        Some(ErrorCode::PolicyDenied),
        "{}",
        r[0].content
    );
    assert!(r[0].content.contains("no-asks"), "{}", r[0].content);
    assert_eq!(code(&r[1]), Some(ErrorCode::PolicyDenied));
    assert!(r[1].content.contains("plan mode is on"), "{}", r[1].content);
    assert!(writes.runs().is_empty());
    assert!(s.plan_mode());
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    assert_eq!(plan_modes(&storage).len(), 1, "only the opening plan/mode");
    // Refused before the question: nobody was asked, and nothing was answered.
    let asked = events(&storage)
        .iter()
        .filter(|e| matches!(e, Event::AskQuestion { .. } | Event::AskReplied { .. }))
        .count();
    assert_eq!(asked, 0);
}

#[tokio::test]
async fn no_other_choice_decline_yes_or_listener_ends_plan_mode_and_plan_mode_survives_a_resume() {
    let make = || plan_registry(TestTool::ok("write_thing"), TestTool::ok("read_thing"));
    let config = || Config {
        plan_mode: true,
        ..Config::default()
    };
    let yes: Arc<dyn Approver> = Arc::new(YesNo(AskAnswer::AllowedAlways));
    // The question without a plan option: choosing "Approve" is just an answer.
    let no_plan_option = serde_json::json!({
        "question": "Approve the plan?",
        "options": [{"label": "Approve"}, {"label": "Revise"}]
    })
    .to_string();
    let cases: Vec<(&str, Hooks, String, Option<ErrorCode>)> = vec![
        (
            "another option",
            plan_hooks(choosing("Revise")),
            plan_question(),
            None,
        ),
        (
            "the plan option's label, in words",
            plan_hooks(Arc::new(Person(QuestionOutcome::Answered(Answer {
                choice: vec![],
                text: Some("Approve".into()),
            })))),
            plan_question(),
            None,
        ),
        (
            "a question with no plan option",
            plan_hooks(choosing("Approve")),
            no_plan_option,
            None,
        ),
        (
            "a decline",
            plan_hooks(Arc::new(Person(QuestionOutcome::Declined { text: None }))),
            plan_question(),
            Some(ErrorCode::QuestionDeclined),
        ),
        (
            "a yes/no approver",
            plan_hooks(yes.clone()),
            plan_question(),
            Some(ErrorCode::QuestionUnanswered),
        ),
        (
            "an allow-all listener",
            Hooks {
                pre_execute: vec![Arc::new(AllowEverything)],
                approver: Some(yes.clone()),
                ..Hooks::default()
            },
            plan_question(),
            Some(ErrorCode::QuestionUnanswered),
        ),
    ];
    for (what, hooks, question, ask_code) in cases {
        let storage = SimStorage::new();
        let mut s = session_on(&storage, make(), hooks, config());
        s.begin_turn("go").unwrap();
        let r = step(
            &mut s,
            vec![
                call("c1", "ask", &question),
                call("c2", "write_thing", "{}"),
            ],
        )
        .await;
        assert_eq!(code(&r[0]), ask_code, "{what}: {}", r[0].content);
        assert_eq!(code(&r[1]), Some(ErrorCode::PolicyDenied), "{what}");
        assert!(
            r[1].content.contains("plan mode is on"),
            "{what}: {}",
            r[1].content
        );
        assert!(s.plan_mode(), "{what}");
        s.end_turn(TurnOutcome::Completed).await.unwrap();
        drop(s);
        assert_eq!(plan_modes(&storage).len(), 1, "{what}");
        assert!(replay(&storage).plan_mode, "{what}");
    }

    let storage = SimStorage::new();
    let mut s = session_on(&storage, make(), plan_hooks(choosing("Revise")), config());
    s.begin_turn("go").unwrap();
    step(&mut s, vec![call("c1", "ask", &plan_question())]).await;
    s.end_turn(TurnOutcome::Completed).await.unwrap();
    drop(s);
    let mut s = resume_on(&storage, make(), plan_hooks(choosing("Approve")));
    assert!(s.plan_mode(), "the journal says plan mode is on");
    s.begin_turn("again").unwrap();
    let r = step(&mut s, vec![call("c3", "write_thing", "{}")]).await;
    assert!(r[0].content.contains("plan mode is on"), "{}", r[0].content);
    // Turned off explicitly by the application: journaled too.
    s.set_plan_mode(false, "the user left plan mode").unwrap();
    let r = step(&mut s, vec![call("c4", "write_thing", "{}")]).await;
    assert!(!r[0].is_error, "{}", r[0].content);
    let modes = plan_modes(&storage);
    assert!(!modes.last().unwrap().0);
    assert_eq!(modes.last().unwrap().1, "the user left plan mode");
    assert_eq!(modes.last().unwrap().2, None);
}

#[tokio::test]
async fn a_tool_may_say_its_outcome_is_unknown_and_a_timeout_keeps_that_code() {
    let storage = SimStorage::new();
    let lost = TestTool::with("remote", |_, ctx| {
        Box::pin(async move {
            ctx.cancel().cancelled().await;
            Err(ToolError::new(
                ErrorCode::ToolOutcomeUnknown,
                "the server was told to stop and did not confirm",
            ))
        })
    })
    .timeout_ms(30);
    let plain = TestTool::with("slow", |_, ctx| {
        Box::pin(async move {
            ctx.cancel().cancelled().await;
            Err(ToolError::new(ErrorCode::Aborted, "stopped"))
        })
    })
    .timeout_ms(30);
    let mut s = session_on(
        &storage,
        registry(vec![lost, plain]),
        Hooks::default(),
        Config::default(),
    );
    let r = one_step(
        &mut s,
        vec![call("c1", "remote", "{}"), call("c2", "slow", "{}")],
    )
    .await;
    assert_eq!(
        code(&r[0]),
        Some(ErrorCode::ToolOutcomeUnknown),
        "{}",
        r[0].content
    );
    assert!(
        r[0].content.contains("timed out after 30 ms"),
        "{}",
        r[0].content
    );
    assert_eq!(code(&r[1]), Some(ErrorCode::Timeout), "{}", r[1].content);
}

fn assert_send<T: Send>(_: &T) {}

/// An application runs sessions on a multi-thread runtime (`tokio::spawn`): the futures of
/// the session API must be `Send`. This fails to compile otherwise (it once did not).
#[tokio::test]
async fn the_session_s_futures_are_send() {
    let storage = SimStorage::new();
    let mut s = session_on(
        &storage,
        registry(vec![TestTool::ok("echo").parallel()]),
        Hooks::default(),
        Config::default(),
    );
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let batch = s.run_batch(response(vec![
        call("c1", "echo", "{}"),
        call("c2", "echo", "{}"),
    ]));
    assert_send(&batch);
    let results = batch.await.unwrap();
    assert_eq!(results.len(), 2);
    s.end_step(StepOutcome::Completed).unwrap();
    let end = s.end_turn(TurnOutcome::Completed);
    assert_send(&end);
    end.await.unwrap();
}
