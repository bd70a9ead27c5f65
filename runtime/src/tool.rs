//! What a tool is, and what it gets and gives back.
//!
//! A tool never sees the runtime: it gets frozen [`Args`] and a [`ToolContext`] whose
//! cancellation token is a child of the session's (the pipeline makes it; a tool cannot be
//! handed a context without one), and returns a [`ToolOutput`] or a [`ToolError`]. Side effects
//! it confirms travel with either, so a failure after a write still records the write.

use crate::args::Args;
use crate::code::ErrorCode;
use crate::event::{Evidence, Resources, SideEffect};
use serde_json::Value;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The future a tool's `execute` returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// The future a tool's `evidence` returns.
pub type EvidenceFuture<'a> = Pin<Box<dyn Future<Output = Vec<Evidence>> + Send + 'a>>;

/// A tool. Implementations must honour `ctx.cancel()`: a cancelled tool should stop and return
/// `ToolError::new(ErrorCode::Aborted, …)` (after reporting what it already did).
pub trait Tool: Send + Sync + 'static {
    /// The final name the model calls it by: `^[a-zA-Z0-9_-]{1,64}$`.
    fn name(&self) -> &str;
    /// What the tool does, for the model: sent with its schema in every request that shows it.
    fn description(&self) -> &str;
    /// The tool's version, journaled in `session/open` so a journal says which implementation ran.
    /// Default `"1"`.
    fn version(&self) -> &str {
        "1"
    }
    /// JSON Schema of the arguments.
    fn input_schema(&self) -> Value;
    /// JSON Schema of the structured value, if the tool returns one.
    fn output_schema(&self) -> Option<Value> {
        None
    }
    /// Whether this call may overlap its siblings. Asked again right before the call starts.
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        false
    }
    /// Whether a failed attempt that says it is retryable may be run again (idempotent tools).
    fn is_retry_safe(&self) -> bool {
        false
    }
    /// Whether the tool only reads: it changes nothing outside the session (plan mode lets
    /// only these run). The default is the safe answer.
    fn is_read_only(&self) -> bool {
        false
    }
    /// This tool's own time limit, when it differs from the session's `timeout_ms`.
    fn timeout_ms(&self) -> Option<u64> {
        None
    }
    /// What the call will touch: reported if its outcome is ever unknown.
    fn resources(&self, _args: &Args) -> Resources {
        Resources::default()
    }
    /// What the world looks like now and will look like after this attempt, as far as the tool
    /// can tell without acting: journaled in the attempt's `started`, before the body runs, for
    /// a probe to compare with the world if the outcome is ever unknown. Looks, never changes;
    /// returns nothing when it cannot tell (the body then fails on its own, if it must). The
    /// body gets it back as [`ToolContext::evidence`] and must not act against it (a `write`
    /// refuses if the file is no longer as recorded). Default: nothing.
    fn evidence<'a>(&'a self, _args: &'a Args) -> EvidenceFuture<'a> {
        Box::pin(std::future::ready(Vec::new()))
    }
    /// `Some(question)` when this call asks to run outside the session's sandbox: it then runs
    /// only after a person answers the question "allowed" (never a listener, an earlier "always"
    /// or a default; with nobody to ask it is rejected). The question names what will run and
    /// says it will run unsandboxed. Default: never.
    fn escalation(&self, _args: &Args) -> Option<String> {
        None
    }
    /// The tool's own last, synchronous fix-up of the content the model will see. Called exactly
    /// once per call on every outcome (for errors, on the message after the code).
    fn finalize_content(&self, content: String) -> String {
        content
    }
    /// Runs one attempt of the call. The pipeline has already journaled `started` durably, and
    /// enforces the time limit by cancelling `ctx.cancel()`; a panic is caught and becomes
    /// `TOOL_PANICKED`. Report every confirmed effect with the result, success or failure.
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_>;
}

/// Most progress messages a call may have queued; past it, new ones are dropped (progress is
/// advisory, the result is not).
pub(crate) const PROGRESS_QUEUE_MAX: usize = 64;

/// Where a tool reports progress. Lossy by design.
#[derive(Debug, Clone)]
pub struct ProgressSink(Arc<ProgressQueue>);

/// One call's progress messages. A plain queue behind a mutex: made for every call and almost
/// never used, so it costs one small allocation (a channel cost two, one of them ~1 KB).
#[derive(Debug, Default)]
struct ProgressQueue {
    state: Mutex<Queued>,
    arrived: Notify,
}

#[derive(Debug, Default)]
struct Queued {
    messages: VecDeque<String>,
    /// The receiver is gone: the call's result is final.
    closed: bool,
}

impl ProgressQueue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        // Only pushes and pops happen under it: a panic cannot leave it half-updated.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ProgressSink {
    pub(crate) fn channel() -> (ProgressSink, ProgressReceiver) {
        let queue = Arc::new(ProgressQueue::default());
        (ProgressSink(queue.clone()), ProgressReceiver(queue))
    }

    /// Reports progress; returns whether anyone will see it (false once the call's result is
    /// final, or when the queue is full).
    pub fn report(&self, message: impl Into<String>) -> bool {
        let message = message.into();
        let mut queued = self.0.lock();
        if queued.closed || queued.messages.len() >= PROGRESS_QUEUE_MAX {
            return false;
        }
        queued.messages.push_back(message);
        drop(queued);
        self.0.arrived.notify_one();
        true
    }
}

/// The pipeline's end of a call's progress queue; dropping it closes the queue.
pub(crate) struct ProgressReceiver(Arc<ProgressQueue>);

impl ProgressReceiver {
    pub(crate) fn try_recv(&mut self) -> Option<String> {
        self.0.lock().messages.pop_front()
    }

    /// The next message, when there is one.
    pub(crate) async fn recv(&mut self) -> String {
        loop {
            if let Some(message) = self.try_recv() {
                return message;
            }
            // `notify_one` leaves a permit when no one waits: a report between the check and
            // this wait is not missed.
            self.0.arrived.notified().await;
        }
    }
}

impl Drop for ProgressReceiver {
    fn drop(&mut self) {
        let mut queued = self.0.lock();
        queued.closed = true;
        queued.messages.clear();
    }
}

/// Where a tool body journals the processes it starts: the call's own journal, under its name.
#[derive(Clone)]
pub(crate) struct ProcessLog {
    pub log: crate::eventlog::EventLog,
    /// The call, shared with everyone who has its frozen arguments (no copy of its id per call).
    pub info: Arc<crate::hooks::CallInfo>,
}

impl ProcessLog {
    fn call(&self) -> &crate::event::CallRef {
        &self.info.call
    }
}

impl std::fmt::Debug for ProcessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProcessLog({})", self.call())
    }
}

/// What the runtime hands a tool body.
#[derive(Debug, Clone)]
pub struct ToolContext {
    cancel: CancellationToken,
    progress: ProgressSink,
    attempt: u32,
    processes: ProcessLog,
    answer: Option<crate::event::Answer>,
    start: StartInfo,
}

/// What the attempt's `started` recorded, for the body.
#[derive(Debug, Clone, Default)]
pub(crate) struct StartInfo {
    pub session_id: Arc<str>,
    pub idempotency_key: String,
    pub evidence: Vec<Evidence>,
}

impl ToolContext {
    /// The context of one attempt: `answer` is the person's answer to the call's question (the
    /// built-in `ask`), `start` what the attempt's `started` recorded. Built whole, in one
    /// place: it moves into the body's future, and every step of a builder moved it again.
    pub(crate) fn new(
        cancel: CancellationToken,
        progress: ProgressSink,
        attempt: u32,
        processes: ProcessLog,
        answer: Option<crate::event::Answer>,
        start: StartInfo,
    ) -> ToolContext {
        ToolContext {
            cancel,
            progress,
            attempt,
            processes,
            answer,
            start,
        }
    }

    /// The call's idempotency key (`tj1-…`, journaled in `started`): the same for every attempt
    /// of this call and after any resume; different for every other call and session. Pass it
    /// to whatever the tool changes that can deduplicate requests.
    pub fn idempotency_key(&self) -> &str {
        &self.start.idempotency_key
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.start.session_id
    }

    /// The evidence this attempt's `started` recorded ([`Tool::evidence`]).
    pub fn evidence(&self) -> &[Evidence] {
        &self.start.evidence
    }

    /// The person's answer to this call's question: `Some` only for the built-in `ask`, whose
    /// body runs only once a person answered (`ask/reply`).
    pub fn answer(&self) -> Option<&crate::event::Answer> {
        self.answer.as_ref()
    }

    /// Journals a process group this call started (`call/process`) and waits until it is
    /// durable, so that after a crash recovery and resume can tell whether it still runs. A
    /// tool that starts processes calls it right after the spawn; an error means the journal
    /// failed (the session is stopping) and the tool should stop what it started.
    pub async fn record_process(
        &self,
        process: crate::event::ProcessStarted,
    ) -> Result<(), ToolError> {
        let journal_failed =
            |e: crate::RuntimeError| ToolError::new(ErrorCode::ToolFailed, e.to_string());
        let seq = self
            .processes
            .log
            .append(&crate::event::Event::CallProcess {
                call: self.processes.call().clone(),
                process,
            })
            .map_err(journal_failed)?;
        self.processes
            .log
            .sync_through(seq)
            .await
            .map_err(journal_failed)
    }

    /// Cancelled when the user stops the batch or the call times out. (An internal fault is
    /// not a cancel: running calls are left to finish.)
    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Where to report progress; observers see it before the result.
    pub fn progress(&self) -> &ProgressSink {
        &self.progress
    }

    /// The model's id for this call.
    pub fn call_id(&self) -> &str {
        // The call's own id, as its processes are journaled under it (no copy of its own).
        &self.processes.call().call_id
    }

    /// 1 for the first attempt, 2 for the first retry, …
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// A successful tool result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// The structured value for programs, checked against the output schema.
    pub value: Option<Value>,
    /// Private details for people (diffs, timings); never sent to the model.
    pub details: Option<Value>,
    /// Effects the tool confirms happened, in order; journaled in `settled`.
    pub side_effects: Vec<SideEffect>,
}

impl ToolOutput {
    /// A result with this content and nothing else.
    pub fn text(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            ..ToolOutput::default()
        }
    }

    /// Adds the structured value (checked against the output schema).
    pub fn with_value(mut self, value: Value) -> ToolOutput {
        self.value = Some(value);
        self
    }

    /// Adds a confirmed effect.
    pub fn with_side_effect(mut self, effect: SideEffect) -> ToolOutput {
        self.side_effects.push(effect);
        self
    }
}

/// A tool's failure, with a stable code and whatever it did before failing.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// What kind of failure; only codes for which [`ErrorCode::tool_may_report`] holds are kept,
    /// others become `TOOL_FAILED`.
    pub code: ErrorCode,
    /// What went wrong, for the model; its content is `CODE: message`.
    pub message: String,
    /// Worth another attempt, if the tool is retry-safe.
    pub retryable: bool,
    /// Effects the tool confirms happened before it failed, in order.
    pub side_effects: Vec<SideEffect>,
}

impl From<confine::Refusal> for ToolError {
    fn from(refusal: confine::Refusal) -> ToolError {
        ToolError::new(refusal.code, refusal.message)
    }
}

impl ToolError {
    /// A failure with this code and message, not retryable, no side effects.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            retryable: false,
            side_effects: Vec::new(),
        }
    }

    /// Marks the failure worth another attempt (honoured only for a retry-safe tool).
    pub fn retryable(mut self) -> ToolError {
        self.retryable = true;
        self
    }

    /// Adds a confirmed effect that happened before the failure.
    pub fn with_side_effect(mut self, effect: SideEffect) -> ToolError {
        self.side_effects.push(effect);
        self
    }
}
