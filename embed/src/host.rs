//! A tool whose body lives in the host language (a Python or JavaScript function).
//!
//! Why two ways to run a body: a tool that may overlap its siblings (declared read-only or
//! concurrent) runs on a worker thread, so the scheduler can run several at once and the
//! step's time limit and stop reach it through [`CallCtx::cancelled`]; every other tool runs
//! alone anyway (the scheduler never overlaps it), so it runs on the thread that polls the
//! step, with no hand-off: the host's function is called where the host already is. A host
//! whose functions may answer later (a JavaScript promise) gives that answer as a future
//! ([`Reply::Later`]), and the step waits for it without holding the thread.

use runtime::{Args, ErrorCode, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

/// What the host declares about a tool: the model's view and the runtime's rules.
#[derive(Debug, Clone)]
pub struct ToolDecl {
    /// The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub schema: Value,
    /// It changes nothing outside the session: plan mode lets it run, and it may overlap
    /// its siblings.
    pub read_only: bool,
    /// Running it twice does what running it once does: a retryable failure may be retried,
    /// and `--rerun safe` may run it again after a crash.
    pub idempotent: bool,
    /// It may overlap its siblings even though it writes.
    pub concurrent: bool,
    /// Its own time limit, when it differs from the session's.
    pub timeout_ms: Option<u64>,
}

impl ToolDecl {
    /// A tool named `name` with no declared schema (any object), neither read-only nor
    /// idempotent: the safe defaults.
    pub fn new(name: impl Into<String>) -> ToolDecl {
        ToolDecl {
            name: name.into(),
            description: String::new(),
            schema: serde_json::json!({"type": "object"}),
            read_only: false,
            idempotent: false,
            concurrent: false,
            timeout_ms: None,
        }
    }

    /// Whether its calls run on a worker thread (they may overlap their siblings).
    pub fn overlaps(&self) -> bool {
        self.read_only || self.concurrent
    }
}

/// What a call's body is told: who it is, and whether it should stop.
#[derive(Debug, Clone)]
pub struct CallCtx {
    /// The model's id for the call.
    pub call_id: String,
    /// The key the call keeps across attempts and re-runs: pass it to the world's APIs so a
    /// second delivery is recognised.
    pub idempotency_key: String,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The session's id.
    pub session_id: String,
    cancel: CancellationToken,
}

impl CallCtx {
    /// Whether the call was asked to stop (its time limit passed, or the user stopped the
    /// step). Live: read it again while the body runs.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Ends when the call is asked to stop (for a body that waits: abort what it waits on).
    pub fn until_cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        let cancel = self.cancel.clone();
        async move { cancel.cancelled().await }
    }
}

/// How a body failed.
#[derive(Debug, Clone)]
pub enum Failure {
    /// It raised or threw: a failed call with its message (`TOOL_FAILED`).
    Failed {
        /// The host's message for it.
        message: String,
        /// A failure the tool says is worth retrying (only idempotent tools are retried).
        retryable: bool,
    },
    /// The user stopped the process inside the body (Python's `KeyboardInterrupt`): the call
    /// ends `ABORTED`, and the step is stopped as the CLI stops it on Ctrl-C.
    Stopped,
}

/// A body's answer that comes later (a JavaScript promise, settled on the host's thread).
pub type Later = Pin<Box<dyn Future<Output = Result<String, Failure>> + Send>>;

/// What a body started on the step's own thread answered.
pub enum Reply {
    /// It ran to the end.
    Now(Result<String, Failure>),
    /// It answers later; the step waits for it without holding the thread.
    Later(Later),
}

/// A body in the host language.
pub trait HostTool: Send + Sync + 'static {
    /// Runs one attempt with the call's arguments (JSON text, as the model sent them) and
    /// returns the content the model sees. Called on a worker thread for a tool that may
    /// overlap its siblings, and by the default [`HostTool::call_inline`].
    fn call(&self, arguments: &str, ctx: &CallCtx) -> Result<String, Failure>;

    /// Starts one attempt of a tool that runs alone, on the thread that polls the step.
    fn call_inline(&self, arguments: &str, ctx: &CallCtx) -> Reply {
        Reply::Now(self.call(arguments, ctx))
    }
}

/// Stops the step in progress from any thread (the host's `abort`, a signal, a body that saw
/// the user's stop). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Stopper(Arc<Mutex<StopState>>);

#[derive(Debug, Default)]
struct StopState {
    token: CancellationToken,
    stopped: bool,
}

impl Stopper {
    fn lock(&self) -> MutexGuard<'_, StopState> {
        // Two plain fields: nothing a panic could leave half-written.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the step in progress: nothing starts after it, running calls see `cancelled`.
    /// Before a step, it stops nothing.
    pub fn stop(&self) {
        let mut state = self.lock();
        state.stopped = true;
        state.token.cancel();
    }

    /// A fresh token for a new step (a stop before it does not stop it).
    pub(crate) fn begin(&self) -> CancellationToken {
        let mut state = self.lock();
        *state = StopState::default();
        state.token.clone()
    }

    /// Whether the step was stopped.
    pub(crate) fn stopped(&self) -> bool {
        self.lock().stopped
    }
}

/// The runtime's view of a host tool.
pub(crate) struct Hosted {
    pub(crate) decl: ToolDecl,
    pub(crate) body: Arc<dyn HostTool>,
    pub(crate) stopper: Stopper,
}

impl Hosted {
    fn outcome(&self, result: Result<String, Failure>) -> Result<ToolOutput, ToolError> {
        match result {
            Ok(content) => Ok(ToolOutput::text(content)),
            Err(Failure::Failed { message, retryable }) => {
                let error = ToolError::new(ErrorCode::ToolFailed, message);
                Err(if retryable { error.retryable() } else { error })
            }
            Err(Failure::Stopped) => {
                self.stopper.stop();
                Err(ToolError::new(
                    ErrorCode::Aborted,
                    "stopped by the user while the call ran",
                ))
            }
        }
    }
}

impl Tool for Hosted {
    fn name(&self) -> &str {
        &self.decl.name
    }
    fn description(&self) -> &str {
        &self.decl.description
    }
    fn input_schema(&self) -> Value {
        self.decl.schema.clone()
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        self.decl.overlaps()
    }
    fn is_retry_safe(&self) -> bool {
        self.decl.idempotent
    }
    fn is_read_only(&self) -> bool {
        self.decl.read_only
    }
    fn timeout_ms(&self) -> Option<u64> {
        self.decl.timeout_ms
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let call = CallCtx {
            call_id: ctx.call_id().to_owned(),
            idempotency_key: ctx.idempotency_key().to_owned(),
            attempt: ctx.attempt(),
            session_id: ctx.session_id().to_owned(),
            cancel: ctx.cancel().clone(),
        };
        if !self.decl.overlaps() {
            return match self.body.call_inline(args.raw(), &call) {
                Reply::Now(result) => Box::pin(std::future::ready(self.outcome(result))),
                Reply::Later(later) => Box::pin(async move { self.outcome(later.await) }),
            };
        }
        let body = self.body.clone();
        Box::pin(async move {
            let arguments = args.raw().to_owned();
            let joined = tokio::task::spawn_blocking(move || body.call(&arguments, &call)).await;
            match joined {
                Ok(result) => self.outcome(result),
                // A panic in the binding's glue: the pipeline's catch turns it into
                // TOOL_PANICKED, as for any tool.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(ToolError::new(
                    ErrorCode::Aborted,
                    "the runtime shut down while the call ran",
                )),
            }
        })
    }
}
