//! The built-in `ask` puts a question to a person, and the person's answer is the call's result
//! (event schema 4). Every state, through the library: answered (one option, several, free text),
//! declined, expired, withdrawn, an answer that does not fit, the batch stopped while it waits,
//! and arguments that make no question. Nobody but the approver's `question` answers it: not a
//! listener, not a yes/no approver, not a missing approver, not a timeout (I16).

use crate::common;

use common::*;
use journal::SimStorage;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::ask::Ask;
use tooljournal_runtime::event::{
    Answer, Approval, AskAnswer, Event, ModelCall, Question, QuestionOption, Reply, StepOutcome,
    ToolSource, TurnOutcome,
};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Registry;
use tooljournal_runtime::{
    Approver, AskFuture, CallInfo, Decision, Hooks, PreExecute, QuestionFuture, QuestionOutcome,
};
use tooljournal_runtime::{Config, ErrorCode, ToolResult};

fn registry_with_ask(others: Vec<TestTool>) -> Arc<Registry> {
    let mut r = Registry::new();
    r.register(Arc::new(Ask), ToolSource::BuiltIn).unwrap();
    for t in others {
        r.register(Arc::new(t), ToolSource::BuiltIn).unwrap();
    }
    Arc::new(r)
}

fn ask_call(args: Value) -> ModelCall {
    call("q", "ask", &args.to_string())
}

/// Three options, one to choose.
fn deploy_args() -> Value {
    json!({
        "question": "Which environment?",
        "options": [
            {"label": "staging", "description": "safe"},
            {"label": "prod"},
            {"label": "none", "description": "do nothing"}
        ]
    })
}

/// A listener that allows every call, `ask` included.
struct AllowAll;
impl PreExecute for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }
    fn decide(&self, _call: &CallInfo) -> Decision {
        Decision::Allow
    }
}

/// A listener that asks a person about every call.
struct AskAll;
impl PreExecute for AskAll {
    fn name(&self) -> &str {
        "ask-all"
    }
    fn decide(&self, _call: &CallInfo) -> Decision {
        Decision::Ask {
            reason: "may it?".into(),
        }
    }
}

/// An approver that only knows yes/no: it keeps `Approver::question`'s default.
struct YesNo(AskAnswer);
impl Approver for YesNo {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        let a = self.0;
        Box::pin(async move { a })
    }
}

/// A person as a test scripts them: every question gets `outcome` (`None`: never answered), every
/// yes/no approval never answered either. It keeps the questions it was shown.
struct Person {
    outcome: Option<QuestionOutcome>,
    shown: Mutex<Vec<Question>>,
}

impl Person {
    fn new(outcome: Option<QuestionOutcome>) -> Arc<Person> {
        Arc::new(Person {
            outcome,
            shown: Mutex::new(Vec::new()),
        })
    }
    fn answering(choice: &[&str], text: Option<&str>) -> Arc<Person> {
        Person::new(Some(QuestionOutcome::Answered(answer(choice, text))))
    }
    fn shown(&self) -> Vec<Question> {
        self.shown.lock().unwrap().clone()
    }
}

impl Approver for Person {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(std::future::pending())
    }
    fn question(&self, call: CallInfo, question: Question) -> QuestionFuture<'_> {
        assert!(call.answer.is_none(), "an answer before the question");
        self.shown.lock().unwrap().push(question);
        let outcome = self.outcome.clone();
        Box::pin(async move {
            match outcome {
                Some(outcome) => outcome,
                None => std::future::pending().await,
            }
        })
    }
}

fn answer(choice: &[&str], text: Option<&str>) -> Answer {
    Answer {
        choice: choice.iter().map(|c| (*c).to_owned()).collect(),
        text: text.map(str::to_owned),
    }
}

fn hooks(approver: Arc<dyn Approver>) -> Hooks {
    Hooks {
        approver: Some(approver),
        ..Hooks::default()
    }
}

/// The `ask/*` events of the journal, by kind.
fn ask_events(storage: &SimStorage) -> Vec<&'static str> {
    journal_events(storage)
        .into_iter()
        .filter(|e| e.kind().starts_with("ask/"))
        .map(|e| e.kind())
        .collect()
}

/// The call's events of one kind.
fn of_kind(storage: &SimStorage, call_id: &str, kind: &str) -> Vec<Event> {
    journal_events(storage)
        .into_iter()
        .filter(|e| e.kind() == kind && e.call().is_some_and(|c| c.call_id == call_id))
        .collect()
}

/// The reason of the call's one `ask/cancelled`.
fn cancel_reason(storage: &SimStorage, call_id: &str) -> String {
    match &of_kind(storage, call_id, "ask/cancelled")[..] {
        [Event::AskCancelled { reason, .. }] => reason.clone(),
        other => panic!("one ask/cancelled expected: {other:?}"),
    }
}

/// One `ask` call with `args` in a session with `hooks` and `config`.
async fn ask_once(args: Value, hooks: Hooks, config: Config) -> (ToolResult, SimStorage) {
    let storage = SimStorage::new();
    let mut s = session_on(&storage, registry_with_ask(vec![]), hooks, config);
    let r = one_step(&mut s, vec![ask_call(args)]).await;
    (r.into_iter().next().expect("one result"), storage)
}

const REJECTED: [&str; 6] = [
    "received",
    "parsed",
    "ask/question",
    "?",
    "rejected",
    "committed",
];

/// The call was rejected `code` after its question ended with `end`; the body never ran.
fn assert_rejected(r: &ToolResult, storage: &SimStorage, end: &str, code: ErrorCode) {
    assert_eq!(r.code, Some(code), "{}", r.content);
    assert!(r.is_error);
    assert!(
        r.content.starts_with(&format!("{}: ", code.as_str())),
        "{}",
        r.content
    );
    let mut want = REJECTED.to_vec();
    want[3] = end;
    assert_eq!(kinds(storage, "q"), want, "no started: the body never ran");
    let c = replayed(storage, "q");
    assert_eq!(c.state, CallState::Committed);
    assert_eq!(c.approval, None);
    assert_eq!(c.rejection.as_ref().map(|r| r.0), Some(code));
}

/// The call ran to a result that is the person's answer, and the journal says so in order.
fn assert_answered(r: &ToolResult, storage: &SimStorage, given: &Answer) {
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(r.content, given.render());
    assert_eq!(
        r.value,
        Some(json!({"choice": given.choice, "text": given.text}))
    );
    assert_eq!(
        kinds(storage, "q"),
        [
            "received",
            "parsed",
            "ask/question",
            "ask/reply",
            "approved",
            "started",
            "settled",
            "committed"
        ]
    );
    let c = replayed(storage, "q");
    assert_eq!(
        c.approval,
        Some(Approval::Asked {
            answer: AskAnswer::Answered
        })
    );
    let asked = c.asks.last().expect("a question");
    assert_eq!(asked.answer, Some(AskAnswer::Answered));
    assert_eq!(asked.reply, Some(Reply::Answered(given.clone())));
    assert_eq!(
        c.committed.as_ref().map(|c| c.content.as_str()),
        Some(r.content.as_str())
    );
}

#[tokio::test]
async fn a_single_choice_is_the_result_and_the_journal_shows_question_reply_then_the_run() {
    let person = Person::answering(&["prod"], None);
    let (r, storage) = ask_once(deploy_args(), hooks(person.clone()), Config::default()).await;
    let given = answer(&["prod"], None);
    assert_answered(&r, &storage, &given);
    // What the model reads, exactly.
    assert_eq!(r.content, "The user chose: prod");
    // The person was shown the model's question, options in its order, descriptions kept.
    let option = |label: &str, description: &str| QuestionOption {
        label: label.into(),
        description: description.into(),
    };
    let expected = Question {
        text: "Which environment?".into(),
        options: vec![
            option("staging", "safe"),
            option("prod", ""),
            option("none", "do nothing"),
        ],
        multiple: false,
        free_text: false,
        plan_option: None,
    };
    assert_eq!(person.shown(), std::slice::from_ref(&expected));
    let journaled = of_kind(&storage, "q", "ask/question");
    assert!(
        matches!(&journaled[..], [Event::AskQuestion { question, .. }] if *question == expected),
        "{journaled:?}"
    );
}

#[tokio::test]
async fn several_choices_with_words_are_the_result_when_the_question_allows_them() {
    let mut args = deploy_args();
    args["multiple"] = json!(true);
    args["free_text"] = json!(true);
    let person = Person::answering(&["staging", "prod"], Some("staging first"));
    let (r, storage) = ask_once(args, hooks(person.clone()), Config::default()).await;
    let given = answer(&["staging", "prod"], Some("staging first"));
    assert_answered(&r, &storage, &given);
    assert_eq!(
        r.content,
        "The user chose:\n- staging\n- prod\nThe user wrote: staging first"
    );
    let shown = person.shown();
    assert!(shown[0].multiple && shown[0].free_text, "{shown:?}");
}

#[tokio::test]
async fn a_question_without_options_takes_free_text_and_returns_it() {
    let person = Person::answering(&[], Some("call it v2"));
    let (r, storage) = ask_once(
        json!({"question": "What name?"}),
        hooks(person.clone()),
        Config::default(),
    )
    .await;
    assert_answered(&r, &storage, &answer(&[], Some("call it v2")));
    assert_eq!(r.content, "The user wrote: call it v2");
    let shown = person.shown();
    assert!(
        shown[0].options.is_empty() && shown[0].free_text,
        "{shown:?}"
    );
}

#[tokio::test]
async fn a_decline_is_question_declined_not_a_policy_denial() {
    let person = Person::new(Some(QuestionOutcome::Declined {
        text: Some("ask me tomorrow".into()),
    }));
    let (r, storage) = ask_once(deploy_args(), hooks(person), Config::default()).await;
    assert_rejected(&r, &storage, "ask/reply", ErrorCode::QuestionDeclined);
    assert_ne!(r.code, Some(ErrorCode::PolicyDenied));
    assert!(r.content.contains("ask me tomorrow"), "{}", r.content);
    let c = replayed(&storage, "q");
    let asked = c.asks.last().unwrap();
    assert_eq!(asked.answer, Some(AskAnswer::Declined));
    assert_eq!(
        asked.reply,
        Some(Reply::Declined {
            text: Some("ask me tomorrow".into())
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_question_nobody_answers_expires_after_the_configured_time_and_is_no_answer() {
    let config = Config {
        question_timeout_ms: Some(5_000),
        ..Config::default()
    };
    let start = tokio::time::Instant::now();
    let (r, storage) = ask_once(deploy_args(), hooks(Person::new(None)), config).await;
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(5_000) && waited < Duration::from_millis(6_000),
        "{waited:?}"
    );
    assert_rejected(&r, &storage, "ask/expired", ErrorCode::QuestionUnanswered);
    assert!(
        r.content.contains("a timeout is never an answer"),
        "{}",
        r.content
    );
    assert_eq!(
        replayed(&storage, "q").asks.last().unwrap().answer,
        Some(AskAnswer::Expired)
    );
}

#[tokio::test(start_paused = true)]
async fn the_same_timeout_expires_a_yes_no_approval_of_another_tool_as_a_denial() {
    let tool = TestTool::ok("deploy");
    let probe = tool.probe();
    let storage = SimStorage::new();
    let hooks = Hooks {
        pre_execute: vec![Arc::new(AskAll)],
        approver: Some(Person::new(None)),
        ..Hooks::default()
    };
    let config = Config {
        question_timeout_ms: Some(5_000),
        ..Config::default()
    };
    let mut s = session_on(&storage, registry_with_ask(vec![tool]), hooks, config);
    let start = tokio::time::Instant::now();
    let r = one_step(&mut s, vec![call("d", "deploy", "{}")]).await;
    assert!(start.elapsed() >= Duration::from_millis(5_000));
    assert_eq!(r[0].code, Some(ErrorCode::PolicyDenied), "{}", r[0].content);
    assert!(
        r[0].content.contains("a timeout is never an approval"),
        "{}",
        r[0].content
    );
    assert!(probe.runs().is_empty());
    assert_eq!(
        kinds(&storage, "d"),
        [
            "received",
            "parsed",
            "ask/pending",
            "ask/expired",
            "rejected",
            "committed"
        ]
    );
}

#[tokio::test]
async fn a_withdrawn_question_is_unanswered_and_says_why() {
    let person = Person::new(Some(QuestionOutcome::Withdrawn {
        reason: "the terminal went away".into(),
    }));
    let (r, storage) = ask_once(deploy_args(), hooks(person), Config::default()).await;
    assert_rejected(&r, &storage, "ask/cancelled", ErrorCode::QuestionUnanswered);
    assert_eq!(cancel_reason(&storage, "q"), "the terminal went away");
    assert!(
        r.content.contains("the terminal went away"),
        "{}",
        r.content
    );
}

#[tokio::test]
async fn an_approver_that_only_answers_yes_no_withdraws_every_question() {
    for yes in [AskAnswer::AllowedOnce, AskAnswer::AllowedAlways] {
        let (r, storage) = ask_once(
            deploy_args(),
            hooks(Arc::new(YesNo(yes))),
            Config::default(),
        )
        .await;
        assert_rejected(&r, &storage, "ask/cancelled", ErrorCode::QuestionUnanswered);
        assert!(
            cancel_reason(&storage, "q").contains("only yes/no"),
            "{yes:?}: {}",
            cancel_reason(&storage, "q")
        );
        assert!(!r.content.contains("The user chose"), "{}", r.content);
    }
}

#[tokio::test]
async fn with_the_default_hooks_an_ask_is_never_answered_yes() {
    // Config::default() allows calls no listener decided: the ask must not be one of them.
    let (r, storage) = ask_once(deploy_args(), Hooks::default(), Config::default()).await;
    assert_rejected(&r, &storage, "ask/cancelled", ErrorCode::QuestionUnanswered);
    assert!(
        cancel_reason(&storage, "q").contains("no approver"),
        "{}",
        cancel_reason(&storage, "q")
    );
    assert_eq!(ask_events(&storage), ["ask/question", "ask/cancelled"]);
}

#[tokio::test]
async fn no_listener_can_answer_an_ask_for_the_user() {
    // An allow-all listener with a person who answers, and with approvers that only say yes or
    // no: the question goes to the approver's `question` every time.
    let people: Vec<(Arc<dyn Approver>, bool)> = vec![
        (Person::answering(&["none"], None), true),
        (Arc::new(YesNo(AskAnswer::AllowedOnce)), false),
        (Arc::new(YesNo(AskAnswer::Denied)), false),
    ];
    for (i, (approver, answered)) in people.into_iter().enumerate() {
        let hooks = Hooks {
            pre_execute: vec![Arc::new(AllowAll)],
            approver: Some(approver),
            ..Hooks::default()
        };
        let (r, storage) = ask_once(deploy_args(), hooks, Config::default()).await;
        assert_eq!(!r.is_error, answered, "approver {i}: {r:?}");
        let end = if answered {
            "ask/reply"
        } else {
            "ask/cancelled"
        };
        assert_eq!(
            ask_events(&storage),
            ["ask/question", end],
            "approver {i}: the user was asked, whatever the listener said"
        );
        let approval = replayed(&storage, "q").approval;
        assert!(
            !matches!(approval, Some(Approval::Listener { .. })),
            "approver {i}: {approval:?}"
        );
    }
}

#[tokio::test]
async fn an_answer_that_does_not_fit_the_question_is_withdrawn_and_the_body_never_runs() {
    let cases = [
        (
            deploy_args(),
            answer(&["qa"], None),
            "not one of the options",
        ),
        (
            deploy_args(),
            answer(&["staging", "prod"], None),
            "only one option",
        ),
        (
            deploy_args(),
            answer(&["prod"], Some("and more")),
            "no free text",
        ),
        (
            deploy_args(),
            answer(&[], None),
            "chooses an option or says",
        ),
    ];
    for (args, given, why) in cases {
        let person = Person::new(Some(QuestionOutcome::Answered(given.clone())));
        let (r, storage) = ask_once(args, hooks(person), Config::default()).await;
        assert_rejected(&r, &storage, "ask/cancelled", ErrorCode::QuestionUnanswered);
        let reason = cancel_reason(&storage, "q");
        assert!(
            reason.contains("does not fit") && reason.contains(why),
            "{given:?}: {reason}"
        );
        assert!(r.content.contains(why), "{given:?}: {}", r.content);
        assert!(of_kind(&storage, "q", "ask/reply").is_empty(), "{given:?}");
    }
}

/// A guard refuses every call.
struct Refuses;
impl tooljournal_runtime::Guard for Refuses {
    fn name(&self) -> &str {
        "refuses"
    }
    fn check(&self, _call: &CallInfo) -> Option<String> {
        Some("not in this room".into())
    }
}

#[tokio::test]
async fn a_guard_refuses_an_ask_before_anyone_is_asked_and_its_body_never_runs() {
    let person = Person::answering(&["prod"], None);
    let hooks = Hooks {
        guards: vec![Arc::new(Refuses)],
        approver: Some(person.clone()),
        ..Hooks::default()
    };
    let (r, storage) = ask_once(deploy_args(), hooks, Config::default()).await;
    // Refused before the question: an answer, once given, is final.
    assert_eq!(r.code, Some(ErrorCode::PolicyDenied), "{}", r.content);
    assert_eq!(
        kinds(&storage, "q"),
        ["received", "parsed", "rejected", "committed"]
    );
    assert!(person.shown().is_empty(), "nobody was asked");
    assert!(r.content.contains("not in this room"), "{}", r.content);
    assert!(!r.content.contains("The user chose"), "{}", r.content);
}

#[tokio::test(start_paused = true)]
async fn a_batch_stopped_while_the_question_waits_cancels_the_question_and_the_call() {
    let later = TestTool::ok("later");
    let probe = later.probe();
    let storage = SimStorage::new();
    let mut s = session_on(
        &storage,
        registry_with_ask(vec![later]),
        hooks(Person::new(None)),
        Config::default(),
    );
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stopper.cancel();
    });
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    let r = s
        .run_batch_cancellable(
            response(vec![ask_call(deploy_args()), call("l", "later", "{}")]),
            stop,
        )
        .await
        .unwrap();
    s.end_step(StepOutcome::Cancelled).unwrap();
    s.end_turn(TurnOutcome::Cancelled).await.unwrap();
    assert_eq!(
        r[0].code,
        Some(ErrorCode::AbortedBeforeDispatch),
        "{}",
        r[0].content
    );
    assert_eq!(
        r[1].code,
        Some(ErrorCode::AbortedBeforeDispatch),
        "{}",
        r[1].content
    );
    assert!(probe.runs().is_empty());
    assert_eq!(
        kinds(&storage, "q"),
        [
            "received",
            "parsed",
            "ask/question",
            "ask/cancelled",
            "cancelled-before-start",
            "committed"
        ]
    );
    assert_eq!(cancel_reason(&storage, "q"), "the batch was stopped");
    assert_eq!(
        replayed(&storage, "q").asks.last().unwrap().answer,
        Some(AskAnswer::Cancelled)
    );
}

/// Answers the question of call `q` at once; never answers any other.
struct AnswersFirstOnly(Answer);
impl Approver for AnswersFirstOnly {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(std::future::pending())
    }
    fn question(&self, call: CallInfo, _question: Question) -> QuestionFuture<'_> {
        let answer = self.0.clone();
        Box::pin(async move {
            if call.call.call_id == "q" {
                QuestionOutcome::Answered(answer)
            } else {
                std::future::pending().await
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_batch_stopped_after_the_person_answered_still_gives_the_model_that_answer() {
    let storage = SimStorage::new();
    let answer = answer(&["prod"], None);
    let mut s = session_on(
        &storage,
        registry_with_ask(vec![]),
        hooks(Arc::new(AnswersFirstOnly(answer.clone()))),
        Config::default(),
    );
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stopper.cancel();
    });
    s.begin_turn("go").unwrap();
    s.begin_step().unwrap();
    // The person answers the first question, then the user stops at the second: the first is
    // answered and approved, but it is cancelled before it runs with the rest of the batch.
    let second = call("q2", "ask", &deploy_args().to_string());
    let r = s
        .run_batch_cancellable(response(vec![ask_call(deploy_args()), second]), stop)
        .await
        .unwrap();
    s.end_step(StepOutcome::Cancelled).unwrap();
    s.end_turn(TurnOutcome::Cancelled).await.unwrap();
    assert_eq!(
        r[0].code,
        Some(ErrorCode::AbortedBeforeDispatch),
        "{}",
        r[0].content
    );
    // The journaled answer is owed to the model: it is in the result, never "ask again".
    assert!(
        r[0].content
            .ends_with("the answer is this:\nThe user chose: prod"),
        "{}",
        r[0].content
    );
    assert!(!r[0].content.contains("may be retried"), "{}", r[0].content);
    assert_eq!(
        replayed(&storage, "q")
            .asks
            .last()
            .and_then(|a| a.reply.clone()),
        Some(Reply::Answered(answer))
    );
    assert_eq!(r[1].code, Some(ErrorCode::AbortedBeforeDispatch));
    assert!(r[1].content.contains("may be retried"), "{}", r[1].content);
}

#[tokio::test]
async fn arguments_that_make_no_question_are_a_schema_error_and_nobody_is_asked() {
    let cases = [
        (
            json!({"question": "Which?", "options": [{"label": "a"}, {"label": "a"}]}),
            "repeats an earlier label",
        ),
        (
            json!({"question": "Which?", "options": [{"label": "a"}, {"label": " a "}]}),
            "repeats an earlier label",
        ),
        (
            json!({"question": "Approve?", "options": [{"label": "yes"}], "plan_option": "ok"}),
            "not one of the options",
        ),
        (
            json!({"question": "Which?", "multiple": true}),
            "needs `options`",
        ),
        (json!({"question": "   "}), "non-empty"),
    ];
    for (args, why) in cases {
        let person = Person::answering(&["a"], None);
        let (r, storage) = ask_once(args.clone(), hooks(person.clone()), Config::default()).await;
        assert_eq!(
            r.code,
            Some(ErrorCode::SchemaError),
            "{args}: {}",
            r.content
        );
        assert!(r.content.contains(why), "{args}: {}", r.content);
        assert!(person.shown().is_empty(), "{args}: nobody is asked");
        assert_eq!(ask_events(&storage), Vec::<&str>::new(), "{args}");
        assert_eq!(
            kinds(&storage, "q"),
            ["received", "parsed", "rejected", "committed"]
        );
    }
}

// ---- Property: only an answer that fits is a result ----

const LABELS: [&str; 4] = ["red", "green", "blue", "plan"];

#[derive(Debug, Clone)]
struct Asked {
    text: String,
    options: Vec<&'static str>,
    multiple: bool,
    free_text: bool,
    plan_option: bool,
}

fn asked() -> impl Strategy<Value = Asked> {
    (
        proptest::sample::subsequence(LABELS.to_vec(), 0..=4),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        "[a-z ?]{1,12}",
    )
        .prop_map(|(options, multiple, free_text, plan_option, text)| Asked {
            text: format!("q {text}"),
            multiple: multiple && !options.is_empty(),
            plan_option: plan_option && options.contains(&"plan"),
            options,
            free_text,
        })
}

impl Asked {
    fn args(&self) -> Value {
        let options: Vec<Value> = self
            .options
            .iter()
            .map(|l| json!({"label": l, "description": format!("means {l}")}))
            .collect();
        let mut args = json!({"question": self.text, "options": options,
                              "multiple": self.multiple, "free_text": self.free_text});
        if self.plan_option {
            args["plan_option"] = json!("plan");
        }
        args
    }
}

/// What the person does with `asked`: mostly an answer made of its labels (and now and then
/// one it does not have), sometimes a decline, an expiry or a withdrawal.
fn outcome(asked: &Asked) -> impl Strategy<Value = QuestionOutcome> {
    let mut labels = asked.options.clone();
    labels.push("mauve");
    let label = proptest::sample::select(labels);
    let known = proptest::sample::select(if asked.options.is_empty() {
        vec!["mauve"]
    } else {
        asked.options.clone()
    });
    let choice = prop_oneof![
        3 => proptest::collection::vec(known, 0..3),
        1 => proptest::collection::vec(label, 0..3),
    ];
    let text = proptest::option::of(prop_oneof![Just(""), Just("  "), Just("my words")]);
    prop_oneof![
        6 => (choice, text).prop_map(|(choice, text)| {
            QuestionOutcome::Answered(Answer {
                choice: choice.into_iter().map(str::to_owned).collect(),
                text: text.map(str::to_owned),
            })
        }),
        1 => proptest::option::of(Just("no".to_owned()))
            .prop_map(|text| QuestionOutcome::Declined { text }),
        1 => Just(QuestionOutcome::Expired),
        1 => Just(QuestionOutcome::Withdrawn { reason: "gone".into() }),
    ]
}

fn asked_and_outcome() -> impl Strategy<Value = (Asked, QuestionOutcome)> {
    asked().prop_flat_map(|asked| {
        let outcome = outcome(&asked);
        (Just(asked), outcome)
    })
}

proptest! {
    #[test]
    fn an_ask_runs_to_a_result_iff_the_person_gave_an_answer_that_fits(
        (asked, outcome) in asked_and_outcome(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let person = Person::new(Some(outcome.clone()));
        let (r, storage) =
            rt.block_on(ask_once(asked.args(), hooks(person.clone()), Config::default()));
        let shown = person.shown();
        prop_assert_eq!(shown.len(), 1);
        let question = &shown[0];
        // The question shown is the model's, by the input schema's rules.
        prop_assert_eq!(&question.text, &asked.text);
        let labels: Vec<&str> = question.options.iter().map(|o| o.label.as_str()).collect();
        prop_assert_eq!(labels, asked.options.clone());
        prop_assert_eq!(question.free_text, asked.free_text || asked.options.is_empty());
        prop_assert_eq!(question.multiple, asked.multiple);
        prop_assert_eq!(question.plan_option.is_some(), asked.plan_option);

        let fits = match &outcome {
            QuestionOutcome::Answered(a) => question.check(a).is_ok(),
            _ => false,
        };
        let c = replayed(&storage, "q");
        let ran = c.approval == Some(Approval::Asked { answer: AskAnswer::Answered })
            && c.state == CallState::Committed
            && !r.is_error;
        prop_assert_eq!(ran, fits, "{:?} → {:?}", outcome, r);
        prop_assert_eq!(c.attempts, u32::from(fits));
        let replies = of_kind(&storage, "q", "ask/reply");
        if let (true, QuestionOutcome::Answered(a)) = (fits, &outcome) {
            // Kept as the question orders it, words trimmed: what the model reads is the
            // journaled reply, rendered.
            let kept = question.fit(a.clone()).expect("it fits");
            prop_assert_eq!(&r.content, &kept.render());
            prop_assert_eq!(c.asks.last().and_then(|q| q.reply.clone()), Some(Reply::Answered(kept)));
        } else {
            prop_assert!(r.is_error);
            // No `ask/reply` holds an answer that was not given, or did not fit.
            let answered = replies
                .iter()
                .any(|e| matches!(e, Event::AskReplied { reply: Reply::Answered(_), .. }));
            prop_assert!(!answered, "{:?}", replies);
            let code = match outcome {
                QuestionOutcome::Declined { .. } => ErrorCode::QuestionDeclined,
                _ => ErrorCode::QuestionUnanswered,
            };
            prop_assert_eq!(r.code, Some(code));
        }
    }
}
