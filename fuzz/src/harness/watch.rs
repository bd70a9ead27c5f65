//! What the harness sees of a session from the side: every tool is wrapped ([`Watched`]) so
//! its bodies' beginnings and ends are recorded outside the journal (the ground truth the
//! invariants hold the journal to), a body is frozen when the machine loses power (nothing runs
//! on a machine that is off), and a planned cancel fires the moment a given body begins.

use crate::tools::{Body, BodyEnd};
use journal::{Journal, SimStorage};
use runtime::event::Resources;
use runtime::Args;
use runtime::ErrorCode;
use runtime::{CallInfo, Decision, PreExecute};
use runtime::{EvidenceFuture, Tool, ToolContext, ToolError, ToolFuture};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Numbers every body's beginning and end, across sessions (a resume's bodies come after the
/// crashed run's): the order effects happened in, as far as the harness can see.
static MOMENTS: AtomicU64 = AtomicU64::new(1);

fn moment() -> u64 {
    MOMENTS.fetch_add(1, Ordering::Relaxed)
}

/// The ground truth of one session, shared by its watched tools.
pub(crate) struct Ground {
    epoch: Instant,
    /// Every body that began, in order.
    pub(crate) bodies: Mutex<Vec<Body>>,
    /// Violations seen while running (a body beginning after the journal failed: I10).
    pub(crate) violations: Mutex<Vec<String>>,
    /// The session's journal, once open.
    pub(crate) journal: OnceLock<Arc<Journal>>,
    /// The disk whose power cut stops every body.
    disk: SimStorage,
    batch: Mutex<Batch>,
    /// When each step's cancel fired, by (turn, step), in ms since `epoch`.
    pub(crate) cancels: Mutex<HashMap<(u32, u32), u64>>,
}

/// The batch running now, and its planned cancel.
#[derive(Default)]
struct Batch {
    at: (u32, u32),
    token: Option<CancellationToken>,
    /// Cancel when the body of this index (from 0) begins.
    at_body: Option<usize>,
    began: usize,
}

impl Ground {
    pub(crate) fn new(epoch: Instant, disk: SimStorage) -> Arc<Ground> {
        Arc::new(Ground {
            epoch,
            bodies: Mutex::default(),
            violations: Mutex::default(),
            journal: OnceLock::new(),
            disk,
            batch: Mutex::default(),
            cancels: Mutex::default(),
        })
    }

    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A batch begins at `at`, stopped by `token`, at the beginning of body `at_body` if given.
    pub(crate) fn arm(&self, at: (u32, u32), token: CancellationToken, at_body: Option<usize>) {
        *lock(&self.batch) = Batch {
            at,
            token: Some(token),
            at_body,
            began: 0,
        };
    }

    /// The batch is over.
    pub(crate) fn disarm(&self) {
        *lock(&self.batch) = Batch::default();
    }

    /// Notes the cancel of the step at `at`, now.
    pub(crate) fn note_cancel(&self, at: (u32, u32)) {
        lock(&self.cancels).insert(at, self.elapsed_ms());
    }

    /// A body begins: the planned cancel fires if it is the one.
    fn body_began(&self) {
        let mut batch = lock(&self.batch);
        batch.began += 1;
        if batch.at_body == Some(batch.began - 1) {
            if let Some(token) = batch.token.clone() {
                self.note_cancel(batch.at);
                token.cancel();
            }
        }
    }

    fn end(&self, index: usize, end: BodyEnd) {
        if let Some(body) = lock(&self.bodies).get_mut(index) {
            body.end = Some(end);
            body.order.1 = Some(moment());
        }
    }

    /// Notes that the body at `index` failed saying another attempt may follow.
    fn retryable(&self, index: usize) {
        if let Some(body) = lock(&self.bodies).get_mut(index) {
            body.retryable = true;
        }
    }
}

/// A lock whose holder cannot panic while holding it (every critical section here is a plain
/// read or write): poisoning would only mean a panic elsewhere, which the harness reports.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A user's tool, watched: it is the tool in every respect, and its bodies are recorded.
pub(crate) struct Watched {
    pub(crate) inner: Arc<dyn Tool>,
    pub(crate) ground: Arc<Ground>,
}

impl Tool for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn version(&self) -> &str {
        self.inner.version()
    }
    fn input_schema(&self) -> Value {
        self.inner.input_schema()
    }
    fn output_schema(&self) -> Option<Value> {
        self.inner.output_schema()
    }
    fn is_concurrency_safe(&self, args: &Args) -> bool {
        self.inner.is_concurrency_safe(args)
    }
    fn is_retry_safe(&self) -> bool {
        self.inner.is_retry_safe()
    }
    fn is_read_only(&self) -> bool {
        self.inner.is_read_only()
    }
    fn timeout_ms(&self) -> Option<u64> {
        self.inner.timeout_ms()
    }
    fn resources(&self, args: &Args) -> Resources {
        self.inner.resources(args)
    }
    fn evidence<'a>(&'a self, args: &'a Args) -> EvidenceFuture<'a> {
        self.inner.evidence(args)
    }
    fn finalize_content(&self, content: String) -> String {
        self.inner.finalize_content(content)
    }

    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ground = self.ground.clone();
        if let Some(cause) = ground.journal.get().and_then(|j| j.poisoned()) {
            lock(&ground.violations).push(format!(
                "I10 fail-stop: the body of {} began after the journal failed ({cause})",
                ctx.call_id()
            ));
        }
        let index = {
            let mut bodies = lock(&ground.bodies);
            bodies.push(Body {
                call_id: ctx.call_id().to_owned(),
                started_ms: ground.elapsed_ms(),
                end: None,
                key: ctx.idempotency_key().to_owned(),
                attempt: ctx.attempt(),
                retryable: false,
                order: (moment(), None),
            });
            bodies.len() - 1
        };
        ground.body_began();
        let inner = &self.inner;
        // A tool may panic before it returns its future: that is its body panicking too.
        let mut body = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.execute(args, ctx)))
        {
            Ok(body) => body,
            Err(panic) => {
                ground.end(index, BodyEnd::Panicked);
                std::panic::resume_unwind(panic)
            }
        };
        Box::pin(async move {
            std::future::poll_fn(|cx| {
                // The machine is off: the body never takes another step.
                if ground.disk.is_powered_off() {
                    return Poll::Ready(Err(ToolError::new(
                        ErrorCode::Aborted,
                        "the machine lost power",
                    )));
                }
                match std::panic::catch_unwind(AssertUnwindSafe(|| body.as_mut().poll(cx))) {
                    Ok(Poll::Pending) => Poll::Pending,
                    Ok(Poll::Ready(result)) => {
                        // What the model is shown is the content after the tool's own fix-up.
                        ground.end(
                            index,
                            match &result {
                                Ok(out) => BodyEnd::Ok(inner.finalize_content(out.content.clone())),
                                Err(e) => {
                                    BodyEnd::Err(e.code, inner.finalize_content(e.message.clone()))
                                }
                            },
                        );
                        if result.as_ref().is_err_and(|e| e.retryable) {
                            ground.retryable(index);
                        }
                        Poll::Ready(result)
                    }
                    Err(panic) => {
                        ground.end(index, BodyEnd::Panicked);
                        std::panic::resume_unwind(panic)
                    }
                }
            })
            .await
        })
    }
}

/// Asks the person before every call the case plans an approval for.
#[derive(Default)]
pub(crate) struct AsksWhenPlanned {
    pub(crate) planned: Mutex<BTreeSet<String>>,
}

impl PreExecute for AsksWhenPlanned {
    fn name(&self) -> &str {
        "harness-approvals"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if lock(&self.planned).contains(&call.call.call_id) {
            Decision::Ask {
                reason: format!("may {} run?", call.call.call_id),
            }
        } else {
            Decision::Pass
        }
    }
}
