//! The pipeline tests' listeners built from closures (pre-execute, guards, post-execute,
//! approvers, observers) and their one-call sessions; shared by `pipeline_admission.rs`,
//! `pipeline_execute.rs` and `pipeline_commit.rs`.

use super::*;
use journal::SimStorage;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tooljournal_runtime::event::{Approval, AskAnswer, CallRef, Event};
use tooljournal_runtime::replay::CallReplay;
use tooljournal_runtime::ToolError;
use tooljournal_runtime::{
    Approver, AskFuture, CallInfo, Decision, Draft, Guard, Hooks, Observer, PostDecision,
    PostExecute, PreExecute,
};
use tooljournal_runtime::{Config, ErrorCode, ToolResult};

/// A pre-execute chain, in order.
pub type Chain = Vec<Arc<dyn PreExecute>>;

pub struct Pre<F>(pub &'static str, pub F);
impl<F: Fn(&CallInfo) -> Decision + Send + Sync> PreExecute for Pre<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        (self.1)(call)
    }
}

pub fn pre(name: &'static str, decision: Decision) -> Arc<dyn PreExecute> {
    Arc::new(Pre(name, move |_: &CallInfo| decision.clone()))
}

pub fn deny(reason: &str) -> Decision {
    Decision::Deny {
        reason: reason.into(),
    }
}

pub fn ask(reason: &str) -> Decision {
    Decision::Ask {
        reason: reason.into(),
    }
}

pub struct GuardFn<F>(pub &'static str, pub F);
impl<F: Fn(&CallInfo) -> Option<String> + Send + Sync> Guard for GuardFn<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn check(&self, call: &CallInfo) -> Option<String> {
        (self.1)(call)
    }
}

pub fn guard(
    name: &'static str,
    f: impl Fn(&CallInfo) -> Option<String> + Send + Sync + 'static,
) -> Arc<dyn Guard> {
    Arc::new(GuardFn(name, f))
}

pub struct Post<F>(pub &'static str, pub F);
impl<F: Fn(&CallInfo, &Draft) -> PostDecision + Send + Sync> PostExecute for Post<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn inspect(&self, call: &CallInfo, draft: &Draft) -> PostDecision {
        (self.1)(call, draft)
    }
}

pub fn post(name: &'static str, decision: PostDecision) -> Arc<dyn PostExecute> {
    Arc::new(Post(name, move |_: &CallInfo, _: &Draft| decision.clone()))
}

/// Answers every question with the same answer and counts the questions.
pub struct FixedApprover {
    answer: AskAnswer,
    pub asked: AtomicU64,
}

impl Approver for FixedApprover {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let answer = self.answer;
        Box::pin(async move { answer })
    }
}

pub fn approver(answer: AskAnswer) -> Arc<FixedApprover> {
    Arc::new(FixedApprover {
        answer,
        asked: AtomicU64::new(0),
    })
}

#[derive(Clone, Copy)]
pub enum Mood {
    Record,
    Panic,
    Fail,
}

/// An observer that records what it sees into a shared log, or panics, or fails.
pub struct Watch {
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

pub fn watch(name: &'static str, mood: Mood, log: &Arc<Mutex<Vec<String>>>) -> Arc<dyn Observer> {
    Arc::new(Watch {
        name,
        mood,
        log: log.clone(),
    })
}

/// One call `c1` to a lone tool, in its own session. Returns the result, the journal's account
/// of the call, and the storage.
pub async fn single(
    tool: TestTool,
    hooks: Hooks,
    config: Config,
    args: &str,
) -> (ToolResult, CallReplay, SimStorage) {
    let (r, storage) = single_unreplayed(tool, hooks, config, args).await;
    (r, replayed(&storage, "c1"), storage)
}

/// As [`single`], without replaying the journal.
pub async fn single_unreplayed(
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
pub fn call_events(storage: &SimStorage, call_id: &str) -> Vec<Event> {
    events(storage)
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| e.call().is_some_and(|c| c.call_id == call_id))
        .collect()
}

/// What the journal says of a call's question and approval, read from its raw events.
pub fn asked(storage: &SimStorage, call_id: &str) -> (Vec<String>, Option<Approval>) {
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

pub fn assert_error(r: &ToolResult, code: ErrorCode) {
    assert!(r.is_error, "{r:?}");
    assert_eq!(r.code, Some(code), "{r:?}");
    assert!(
        r.content.starts_with(&format!("{}: ", code.as_str())),
        "content begins with its code: {:?}",
        r.content
    );
    assert_eq!(r.value, None);
}

pub fn slow_to_cancel(name: &str, cleanup: Duration, log: Arc<Mutex<Vec<String>>>) -> TestTool {
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
