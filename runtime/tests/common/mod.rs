//! Test tools and a harness that runs sessions on a simulated disk.
#![allow(dead_code)]

pub mod agent;
pub mod forged;
pub mod fs_env;
pub mod pipeline;
pub mod scheduler;
pub mod written;

use journal::{Journal, Options, SimStorage};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tooljournal_runtime::event::{
    Event, ModelCall, ModelResponse, OutcomeStatus, Record, StepOutcome, StopReason, ToolSource,
    TurnOutcome,
};
use tooljournal_runtime::replay::{replay_storage, CallReplay, SessionReplay};
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ManualClock;
use tooljournal_runtime::Registry;
use tooljournal_runtime::{Config, ErrorCode, Session, SessionOptions, ToolResult};
use tooljournal_runtime::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// What a test tool's body does.
pub type Behavior =
    Arc<dyn Fn(tooljournal_runtime::Args, ToolContext) -> ToolFuture<'static> + Send + Sync>;

/// A tool whose body, schemas and flags a test chooses. It records every body run (outside the
/// journal) and counts `finalize_content` calls.
pub struct TestTool {
    pub name: String,
    pub input: Value,
    pub output: Option<Value>,
    pub retry_safe: bool,
    pub behavior: Behavior,
    pub runs: Arc<Mutex<Vec<String>>>,
    pub finalized: Arc<AtomicU64>,
    pub finalize_suffix: Option<String>,
    /// Whether a call may overlap others; asked right before it starts. Default: never.
    pub safe: Arc<dyn Fn(&tooljournal_runtime::Args) -> bool + Send + Sync>,
    pub read_only: bool,
    pub timeout_ms: Option<u64>,
}

impl TestTool {
    /// A tool that answers `ok: <args>`.
    pub fn ok(name: &str) -> TestTool {
        TestTool::with(name, |args, _ctx| {
            Box::pin(async move { Ok(ToolOutput::text(format!("ok: {}", args.canonical()))) })
        })
    }

    pub fn with(
        name: &str,
        f: impl Fn(tooljournal_runtime::Args, ToolContext) -> ToolFuture<'static>
            + Send
            + Sync
            + 'static,
    ) -> TestTool {
        TestTool {
            name: name.to_owned(),
            input: json!({"type": "object"}),
            output: None,
            retry_safe: false,
            behavior: Arc::new(f),
            runs: Arc::new(Mutex::new(Vec::new())),
            finalized: Arc::new(AtomicU64::new(0)),
            finalize_suffix: None,
            safe: Arc::new(|_| false),
            read_only: false,
            timeout_ms: None,
        }
    }

    /// Every call may overlap others.
    pub fn parallel(mut self) -> TestTool {
        self.safe = Arc::new(|_| true);
        self
    }

    /// Whether a call may overlap others, decided by `f` right before it starts.
    pub fn safe_when(
        mut self,
        f: impl Fn(&tooljournal_runtime::Args) -> bool + Send + Sync + 'static,
    ) -> TestTool {
        self.safe = Arc::new(f);
        self
    }

    pub fn failing(name: &str, code: ErrorCode, message: &'static str) -> TestTool {
        TestTool::with(name, move |_, _| {
            Box::pin(async move { Err(ToolError::new(code, message)) })
        })
    }

    pub fn input(mut self, schema: Value) -> TestTool {
        self.input = schema;
        self
    }

    pub fn output(mut self, schema: Value) -> TestTool {
        self.output = Some(schema);
        self
    }

    /// Declared read-only (plan mode lets it run).
    pub fn read_only(mut self) -> TestTool {
        self.read_only = true;
        self
    }

    /// A time limit of its own.
    pub fn timeout_ms(mut self, ms: u64) -> TestTool {
        self.timeout_ms = Some(ms);
        self
    }

    pub fn retry_safe(mut self) -> TestTool {
        self.retry_safe = true;
        self
    }

    pub fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap().clone()
    }

    pub fn finalized(&self) -> u64 {
        self.finalized.load(Ordering::SeqCst)
    }
}

/// Handles a test keeps to a tool after registering it.
#[derive(Clone)]
pub struct Probe {
    pub runs: Arc<Mutex<Vec<String>>>,
    pub finalized: Arc<AtomicU64>,
}

impl Probe {
    pub fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap().clone()
    }
    pub fn finalized(&self) -> u64 {
        self.finalized.load(Ordering::SeqCst)
    }
}

impl TestTool {
    pub fn probe(&self) -> Probe {
        Probe {
            runs: self.runs.clone(),
            finalized: self.finalized.clone(),
        }
    }
}

impl Tool for TestTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "a test tool"
    }
    fn input_schema(&self) -> Value {
        self.input.clone()
    }
    fn output_schema(&self) -> Option<Value> {
        self.output.clone()
    }
    fn is_retry_safe(&self) -> bool {
        self.retry_safe
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms
    }
    fn is_concurrency_safe(&self, args: &tooljournal_runtime::Args) -> bool {
        (self.safe)(args)
    }
    /// `path` (a string) and `writes` (an array) are written, `reads` (an array) is read.
    fn resources(&self, args: &tooljournal_runtime::Args) -> tooljournal_runtime::event::Resources {
        let list = |key: &str| -> Vec<String> {
            args.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut writes: Vec<String> = args
            .str("path")
            .map(|p| vec![p.to_owned()])
            .unwrap_or_default();
        writes.extend(list("writes"));
        tooljournal_runtime::event::Resources {
            reads: list("reads"),
            writes,
            ..Default::default()
        }
    }
    fn finalize_content(&self, content: String) -> String {
        self.finalized.fetch_add(1, Ordering::SeqCst);
        match &self.finalize_suffix {
            Some(s) => format!("{content}{s}"),
            None => content,
        }
    }
    fn execute(&self, args: tooljournal_runtime::Args, ctx: ToolContext) -> ToolFuture<'_> {
        self.runs.lock().unwrap().push(ctx.call_id().to_owned());
        (self.behavior)(args, ctx)
    }
}

pub fn registry(tools: Vec<TestTool>) -> Arc<Registry> {
    let mut r = Registry::new();
    for t in tools {
        r.register(Arc::new(t), ToolSource::BuiltIn)
            .expect("register");
    }
    Arc::new(r)
}

/// A session on `storage` with a fixed clock and id, so runs are byte-identical.
pub fn session_on(
    storage: &SimStorage,
    registry: Arc<Registry>,
    hooks: Hooks,
    config: Config,
) -> Session {
    let (journal, _) =
        Journal::open(Arc::new(storage.clone()), Options::default()).expect("journal");
    Session::open(
        journal,
        registry,
        hooks,
        config,
        SessionOptions {
            session_id: Some("test-session".into()),
            workspace: "/ws".into(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        },
    )
    .expect("session")
}

pub fn call(id: &str, name: &str, args: &str) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

pub fn response(calls: Vec<ModelCall>) -> ModelResponse {
    ModelResponse {
        text: String::new(),
        tool_calls: calls,
        stop_reason: StopReason::ToolUse,
    }
}

/// One turn with one step running `calls`; returns the results.
pub async fn one_step(session: &mut Session, calls: Vec<ModelCall>) -> Vec<ToolResult> {
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    let results = session.run_batch(response(calls)).await.unwrap();
    session.end_step(StepOutcome::Completed).unwrap();
    session.end_turn(TurnOutcome::Completed).await.unwrap();
    results
}

pub fn replay(storage: &SimStorage) -> SessionReplay {
    let (replay, end) =
        replay_storage(Arc::new(storage.clone()), journal::Limits::default()).expect("replay");
    assert!(!matches!(end, journal::ReadEnd::Corrupt(_)), "{end:?}");
    replay
}

/// Every event in `storage`'s journal, in order.
pub fn journal_events(storage: &SimStorage) -> Vec<tooljournal_runtime::event::Event> {
    journal::Reader::open(Arc::new(storage.clone()), journal::Limits::default())
        .expect("reader")
        .map(|r| {
            let record = r.expect("record");
            record
                .decode::<tooljournal_runtime::event::Record>()
                .expect("decodes")
                .event
        })
        .collect()
}

/// Every event of the journal, with its seq.
pub fn events(storage: &SimStorage) -> Vec<(u64, Event)> {
    journal::Reader::open(Arc::new(storage.clone()), journal::Limits::default())
        .expect("reader")
        .map(|r| {
            let r = r.expect("record");
            (r.seq, r.decode::<Record>().expect("event").event)
        })
        .collect()
}

/// The kinds of one call's events, in journal order.
pub fn kinds(storage: &SimStorage, call_id: &str) -> Vec<&'static str> {
    events(storage)
        .iter()
        .filter(|(_, e)| e.call().is_some_and(|c| c.call_id == call_id))
        .map(|(_, e)| e.kind())
        .collect()
}

/// The journal's account of `call_id`, replayed.
pub fn replayed(storage: &SimStorage, call_id: &str) -> CallReplay {
    replay(storage)
        .calls()
        .find(|c| c.call.call_id == call_id)
        .unwrap_or_else(|| panic!("{call_id} is in the journal"))
        .clone()
}

/// A settled call's error code (`None` on success).
pub fn status_code(c: &CallReplay) -> Option<ErrorCode> {
    match &c.outcome.as_ref().expect("settled").status {
        OutcomeStatus::Success => None,
        OutcomeStatus::Error { code, .. } => Some(*code),
    }
}
