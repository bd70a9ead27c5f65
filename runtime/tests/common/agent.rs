//! The agent loop's test harness: a model answering each request from a list (or by a rule that
//! reads the request), keeping every request it was given, and what the context reduction's
//! tests read of a journal; shared by `agent.rs`, `agent_reduce.rs` and `replay_context.rs`.

use super::{events, registry, session_on, TestTool};
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use journal::SimStorage;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use tooljournal_runtime::event::{
    ContextCompacted, ContextSummaryRequested, Event, LlmAttemptFailed, LlmRequest, StopReason,
};
use tooljournal_runtime::model::{
    Conversation, Message, Model, ModelError, ModelErrorKind, ModelEvent, ModelRequest, ModelStream,
};
use tooljournal_runtime::Config;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ToolOutput;
use tooljournal_runtime::{Agent, AgentConfig, AgentEvent, AgentObserver, TurnEnd};

/// What one request gets.
pub enum Answer {
    /// These events, then the end of the stream.
    Events(Vec<ModelEvent>),
    /// These events, then this error.
    Break(Vec<ModelEvent>, ModelError),
    /// These events, then nothing ever again.
    Hang(Vec<ModelEvent>),
    /// The request fails before any byte.
    Refuse(ModelError),
    /// These events, each this many ms after the one before.
    Slow(Vec<ModelEvent>, u64),
    /// The user presses stop (this token) as the request is sent; no answer ever comes.
    StopThenHang(CancellationToken),
}

/// Answers a request by reading it (instead of taking the list's next answer).
pub type Rule = Box<dyn FnMut(&ModelRequest) -> Answer + Send>;

/// A model answering each request with the next [`Answer`] (or its rule's); it keeps every
/// request, summary requests included.
pub struct ListModel {
    pub answers: VecDeque<Answer>,
    /// When set, answers every request instead of `answers`.
    pub rule: Option<Rule>,
    pub requests: Arc<Mutex<Vec<ModelRequest>>>,
    /// The session's journal, when a test checks what is durable as each request leaves.
    pub journal: Option<Arc<journal::Journal>>,
    /// (appended, durable) seqs as each request was sent.
    pub sent_at: Arc<Mutex<Vec<(u64, u64)>>>,
}

impl ListModel {
    pub fn new(answers: Vec<Answer>, requests: Arc<Mutex<Vec<ModelRequest>>>) -> ListModel {
        ListModel {
            answers: answers.into(),
            rule: None,
            requests,
            journal: None,
            sent_at: Arc::default(),
        }
    }
}

impl Model for ListModel {
    fn provider(&self) -> &str {
        "anthropic"
    }
    fn model(&self) -> &str {
        "list"
    }
    /// The request's debug text: two different requests have different bodies (and hashes).
    fn body(&mut self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        Ok(format!("{request:?}").into_bytes())
    }
    fn send(&mut self, _body: Vec<u8>) -> BoxFuture<'_, Result<ModelStream<'_>, ModelError>> {
        if let Some(journal) = &self.journal {
            let stats = journal.stats();
            self.sent_at
                .lock()
                .unwrap()
                .push((stats.appended_seq, stats.durable_seq));
        }
        let answer = match &mut self.rule {
            Some(rule) => {
                let request = self.requests.lock().unwrap().last().cloned();
                rule(&request.expect("body() is called before send()"))
            }
            None => self.answers.pop_front().expect("a scripted answer"),
        };
        if let Answer::StopThenHang(stop) = &answer {
            stop.cancel();
        }
        Box::pin(async move {
            let stream: ModelStream<'_> = match answer {
                Answer::Events(events) => {
                    Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)))
                }
                Answer::Break(events, error) => Box::pin(futures_util::stream::iter(
                    events.into_iter().map(Ok).chain([Err(error)]),
                )),
                Answer::Hang(events) => Box::pin(
                    futures_util::stream::iter(events.into_iter().map(Ok))
                        .chain(futures_util::stream::pending()),
                ),
                Answer::StopThenHang(_) => Box::pin(futures_util::stream::pending()),
                Answer::Refuse(error) => return Err(error),
                Answer::Slow(events, gap_ms) => Box::pin(futures_util::stream::unfold(
                    events.into_iter(),
                    move |mut rest| async move {
                        let next = rest.next()?;
                        tokio::time::sleep(std::time::Duration::from_millis(gap_ms)).await;
                        Some((Ok(next), rest))
                    },
                )),
            };
            Ok(stream)
        })
    }
}

pub fn text(t: &str) -> ModelEvent {
    ModelEvent::TextDelta(t.into())
}

pub fn call(index: u32, id: &str, name: &str, args: &[&str]) -> Vec<ModelEvent> {
    let mut events = vec![ModelEvent::CallBegin {
        index,
        id: id.into(),
        name: name.into(),
    }];
    for piece in args {
        events.push(ModelEvent::CallArgumentsDelta {
            index,
            delta: (*piece).into(),
        });
    }
    events.push(ModelEvent::CallEnd { index });
    events
}

pub fn stop(reason: StopReason) -> ModelEvent {
    ModelEvent::Stop(reason)
}

pub fn status(code: u16, retry_after_ms: Option<u64>, message: &str) -> ModelError {
    ModelError {
        kind: ModelErrorKind::Status,
        status: Some(code),
        retry_after_ms,
        message: message.into(),
    }
}

pub fn fast() -> AgentConfig {
    AgentConfig {
        backoff_base_ms: 1,
        backoff_max_ms: 50,
        idle_timeout_ms: 5_000,
        system: Some("be brief".into()),
        ..AgentConfig::default()
    }
}

pub struct Setup {
    pub storage: SimStorage,
    pub session: tooljournal_runtime::Session,
    /// The runs of the first tool.
    pub runs: Arc<Mutex<Vec<String>>>,
    pub requests: Arc<Mutex<Vec<ModelRequest>>>,
}

/// A session with one tool, `note`, answering `ok: <args>`.
pub fn setup() -> Setup {
    setup_with(vec![TestTool::ok("note")])
}

/// A session with these tools (at least one).
pub fn setup_with(tools: Vec<TestTool>) -> Setup {
    let storage = SimStorage::new();
    let runs = tools[0].runs.clone();
    let session = session_on(
        &storage,
        registry(tools),
        Hooks::default(),
        Config::default(),
    );
    Setup {
        storage,
        session,
        runs,
        requests: Arc::default(),
    }
}

pub fn agent(s: &Setup, answers: Vec<Answer>, config: AgentConfig) -> Agent {
    Agent::new(
        Box::new(ListModel::new(answers, s.requests.clone())),
        config,
    )
}

/// Stops the turn when `when` says so.
pub struct StopWhen<F: FnMut(&AgentEvent<'_>) -> bool + Send>(pub CancellationToken, pub F);

impl<F: FnMut(&AgentEvent<'_>) -> bool + Send> AgentObserver for StopWhen<F> {
    fn on(&mut self, event: AgentEvent<'_>) {
        if (self.1)(&event) {
            self.0.cancel();
        }
    }
}

/// One turn of `agent` on `s`'s session, saying `user_text`, with no stop and no observer.
pub async fn turn(s: &mut Setup, agent: &mut Agent, user_text: &str) -> TurnEnd {
    agent
        .run_turn(
            &mut s.session,
            user_text,
            &CancellationToken::new(),
            &mut (),
        )
        .await
        .unwrap()
}

pub fn kinds(storage: &SimStorage) -> Vec<&'static str> {
    events(storage).into_iter().map(|(_, e)| e.kind()).collect()
}

// ---- Context reduction (agent_reduce.rs, replay_context.rs) ----

/// The provider's words for a request longer than the context window, without token counts
/// (OpenAI Responses' wording): nothing to calibrate the estimate by.
pub const OVERFLOW: &str = "Your input exceeds the context window of this model.";
/// Words that count the tokens (Anthropic's): the session calibrates by them.
pub const OVERFLOW_COUNTED: &str = "prompt is too long: 212000 tokens > 200000 maximum";

pub fn overflow() -> ModelError {
    ModelError {
        kind: ModelErrorKind::ContextOverflow,
        status: Some(400),
        retry_after_ms: None,
        message: OVERFLOW.into(),
    }
}

/// An overflow whose words count the tokens ([`OVERFLOW_COUNTED`]).
pub fn overflow_counted() -> ModelError {
    ModelError {
        message: OVERFLOW_COUNTED.into(),
        ..overflow()
    }
}

/// A whole answer: this text, then the end of the turn.
pub fn answer(t: &str) -> Answer {
    Answer::Events(vec![text(t), stop(StopReason::EndTurn)])
}

/// A whole answer calling `fetch` for `n` characters.
pub fn fetch(id: &str, n: usize) -> Answer {
    let mut events = call(0, id, "fetch", &[&format!("{{\"n\":{n}}}")]);
    events.push(stop(StopReason::ToolUse));
    Answer::Events(events)
}

/// A tool answering `{"n": N}` with N times `y`.
pub fn fetch_tool() -> TestTool {
    TestTool::with("fetch", |args, _ctx| {
        let n = args.get("n").and_then(Value::as_u64).unwrap_or(0);
        Box::pin(async move { Ok(ToolOutput::text("y".repeat(n as usize))) })
    })
}

/// The events of step `step` of turn `turn`, from its `step/start` to its `step/end`.
pub fn step_events(storage: &SimStorage, turn: u32, step: u32) -> Vec<Event> {
    let all: Vec<Event> = events(storage).into_iter().map(|(_, e)| e).collect();
    let start = all
        .iter()
        .position(
            |e| matches!(e, Event::StepStart { turn: t, step: s } if *t == turn && *s == step),
        )
        .unwrap_or_else(|| panic!("no step {step} of turn {turn}"));
    let end = all[start..]
        .iter()
        .position(|e| matches!(e, Event::StepEnd { .. }))
        .map_or(all.len(), |i| start + i + 1);
    all[start..end].to_vec()
}

pub fn names(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

pub fn count(storage: &SimStorage, kind: &str) -> usize {
    kinds(storage).iter().filter(|k| **k == kind).count()
}

pub fn compactions(storage: &SimStorage) -> Vec<ContextCompacted> {
    events(storage)
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::ContextCompacted(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// Every text the conversation carries: user and assistant text, call arguments, results.
pub fn every_text(conversation: &Conversation) -> String {
    let mut all = String::new();
    for m in &conversation.messages {
        match m {
            Message::User { text } => all.push_str(text),
            Message::Assistant { text, calls, .. } => {
                all.push_str(text);
                calls.iter().for_each(|c| all.push_str(&c.arguments));
            }
            Message::Results { results } => results.iter().for_each(|r| all.push_str(&r.content)),
        }
        all.push('\n');
    }
    all
}

/// Keeps every reduction the loop reports.
#[derive(Default)]
pub struct Reductions(pub Vec<ContextCompacted>);

impl AgentObserver for Reductions {
    fn on(&mut self, event: AgentEvent<'_>) {
        if let AgentEvent::Reduced(c) = event {
            self.0.push(c.clone());
        }
    }
}

pub fn request_of(e: &Event) -> &LlmRequest {
    match e {
        Event::LlmRequest(r) => r,
        other => panic!("not an llm/request: {other:?}"),
    }
}

pub fn failure_of(e: &Event) -> &LlmAttemptFailed {
    match e {
        Event::LlmAttemptFailed(f) => f,
        other => panic!("not an llm/attempt-failed: {other:?}"),
    }
}

pub fn summary_requested_of(e: &Event) -> &ContextSummaryRequested {
    match e {
        Event::ContextSummaryRequested(r) => r,
        other => panic!("not a context/summary-requested: {other:?}"),
    }
}

pub fn compacted_of(e: &Event) -> &ContextCompacted {
    match e {
        Event::ContextCompacted(c) => c,
        other => panic!("not a context/compacted: {other:?}"),
    }
}

pub const FORMATS: [history::providers::Format; 4] = [
    history::providers::Format::OpenAiChat,
    history::providers::Format::OpenAiResponses,
    history::providers::Format::Anthropic,
    history::providers::Format::Gemini,
];
