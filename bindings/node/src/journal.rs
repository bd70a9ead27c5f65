//! `NativeJournal`: one session's journal held by this process, and the operations
//! `index.js` calls. They run on Node's thread; the runtime's own threads do only what they do
//! for the CLI (a sync on the blocking pool, the bodies of tools that may overlap, timers).
//!
//! Why on Node's thread: a step's bodies are JavaScript, which runs only there. A step that
//! ran on a thread of its own would cross threads four times per call (there, to the body,
//! back, and its end), and each crossing wakes a sleeping thread: 8,569 calls/s with fsync off
//! where the goal is 50,000. So the step is a future polled here ([`NativeJournal`]'s
//! `drive`): a body is called directly, a promise's result comes back through `settle`, which
//! polls again; only wakes from the runtime's own threads (a sync on the blocking pool, a body
//! of a tool that overlaps, a time limit) cross back, as `Poll` events. A durable step's sync
//! runs here too when it is the process's one syncing leader, as better-sqlite3 writes on the
//! thread that asks.
//!
//! Operations that run no bodies (`create`, `tool`, `turn`, `history`, `close`) are done at
//! once; `step` and `resume` may end later. While one is in flight every other operation is
//! refused with a `UsageError` (a body calling `turn`, say) rather than waiting for it.

use crate::bridge::{Bridge, Event, JsArgs, JsTool, PollingEnv};
use crate::errors::{fields, to_js, usage};
use embed::{Answer, Call, CreateOptions, EmbedError, FsyncPolicy, Journal, RerunPolicy};
use embed::{HostTool, ResumeOptions, Resuming, StepResult, Stopper, ToolDecl};
use napi::bindgen_prelude::{Function, Unknown};
use napi::Env;
use napi_derive::napi;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

/// A tool as the package declares it (`schema` as JSON text).
#[napi(object)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments, as JSON text.
    pub schema: String,
    /// It changes nothing outside the session (it may overlap its siblings).
    pub read_only: bool,
    /// Running it twice does what running it once does.
    pub idempotent: bool,
    /// It may overlap its siblings although it writes.
    pub concurrent: bool,
    /// Its own time limit.
    pub timeout_ms: Option<u32>,
}

/// One call of a batch in the plain form (arguments as JSON text).
#[napi(object)]
pub struct CallSpec {
    /// The model's id for it (`None`: the journal names it).
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// What an operation gives back: its value as JSON text, and whether the user stopped it.
type Outcome = Result<(String, bool), EmbedError>;

/// What an operation in flight owns, given back when it ends.
enum Held {
    Journal(Journal),
    Resuming(Resuming),
}

/// An operation in flight: its number, the runtime it is polled in, and the future.
struct Flight {
    req: u32,
    handle: tokio::runtime::Handle,
    future: Pin<Box<dyn Future<Output = (Held, Outcome)>>>,
}

/// Wakes the operation in flight: a flag when the wake comes from Node's thread (the poll
/// loop, or `settle`, polls again), a `Poll` event when it comes from another.
struct Wakes {
    node: ThreadId,
    woken: AtomicBool,
    queued: AtomicBool,
    bridge: Arc<Bridge>,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if std::thread::current().id() != self.node && !self.queued.swap(true, Ordering::SeqCst) {
            self.bridge.emit(Event::Poll);
        }
    }
}

/// One session's journal.
#[napi]
pub struct NativeJournal {
    bridge: Arc<Bridge>,
    journal: RefCell<Option<Journal>>,
    flight: RefCell<Option<Flight>>,
    /// An operation is in flight (its future may be out of `flight`, being polled).
    busy: Cell<bool>,
    polling: Cell<bool>,
    /// Node is held running for the operation in flight.
    held: Cell<bool>,
    wakes: Arc<Wakes>,
    stopper: RefCell<Option<Stopper>>,
}

fn fsync_policy(fsync: &str) -> napi::Result<FsyncPolicy> {
    match fsync {
        "group" => Ok(FsyncPolicy::Group),
        "always" => Ok(FsyncPolicy::Always),
        "never" => Ok(FsyncPolicy::Never),
        other => Err(usage(format!(
            "fsync `{other}`: not one of group, always, never"
        ))),
    }
}

fn rerun_policy(rerun: Option<&str>) -> napi::Result<Option<RerunPolicy>> {
    match rerun {
        None | Some("none") => Ok(None),
        Some("not-started") => Ok(Some(RerunPolicy::NotStarted)),
        Some("safe") => Ok(Some(RerunPolicy::Safe)),
        Some(other) => Err(usage(format!(
            "rerun `{other}`: not one of not-started, safe, none"
        ))),
    }
}

fn declared(spec: ToolSpec, bridge: &Arc<Bridge>) -> napi::Result<(ToolDecl, Arc<dyn HostTool>)> {
    let schema = serde_json::from_str(&spec.schema)
        .map_err(|e| usage(format!("tool `{}`: schema: {e}", spec.name)))?;
    let body = JsTool {
        name: spec.name.clone(),
        bridge: bridge.clone(),
    };
    let decl = ToolDecl {
        name: spec.name,
        description: spec.description,
        schema,
        read_only: spec.read_only,
        idempotent: spec.idempotent,
        concurrent: spec.concurrent,
        timeout_ms: spec.timeout_ms.map(u64::from),
    };
    Ok((decl, Arc::new(body)))
}

fn results_json(results: Vec<StepResult>) -> String {
    let results: Vec<_> = results
        .into_iter()
        .map(|r| {
            serde_json::json!({
                "callId": r.call_id, "ok": r.ok, "content": r.content, "code": r.code,
            })
        })
        .collect();
    serde_json::Value::Array(results).to_string()
}

/// An operation's end as `index.js` reads it: `{"req", "value", "stopped"}` or `{"req",
/// "error": {"kind", "code", "message"}}`, as JSON text.
fn ended(req: u32, outcome: Outcome) -> String {
    match outcome {
        Ok((value, stopped)) => format!(r#"{{"req":{req},"value":{value},"stopped":{stopped}}}"#),
        Err(e) => format!(r#"{{"req":{req},"error":{}}}"#, fields(&e)),
    }
}

fn panicked_error(panicked: &Box<dyn std::any::Any + Send>) -> EmbedError {
    let what = panicked
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panicked.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    EmbedError::new(
        embed::ErrorKind::Failed,
        format!(
            "the runtime panicked during the operation ({what}); the journal was let go: \
             classify it, then resume it"
        ),
    )
}

/// `f`, a panic in it a failure rather than an abort of Node.
fn guarded<T>(f: impl FnOnce() -> Result<T, EmbedError>) -> Result<T, EmbedError> {
    panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panicked_error(&p)))
}

fn call_of(c: CallSpec) -> Call {
    Call {
        id: c.id,
        name: c.name,
        arguments: c.arguments,
    }
}

#[napi]
impl NativeJournal {
    /// A journal not yet opened, whose events go to `dispatch`.
    #[napi(constructor)]
    pub fn new(dispatch: Function<'_, JsArgs, Unknown<'static>>) -> napi::Result<NativeJournal> {
        let bridge = Arc::new(Bridge::new(dispatch)?);
        let wakes = Arc::new(Wakes {
            node: std::thread::current().id(),
            woken: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            bridge: bridge.clone(),
        });
        Ok(NativeJournal {
            bridge,
            journal: RefCell::new(None),
            flight: RefCell::new(None),
            busy: Cell::new(false),
            polling: Cell::new(false),
            held: Cell::new(false),
            wakes,
            stopper: RefCell::new(None),
        })
    }

    fn idle(&self) -> napi::Result<()> {
        if self.busy.get() {
            return Err(usage(
                "a step or resume of this journal is in flight: await it first",
            ));
        }
        Ok(())
    }

    /// Runs `f` on the open journal, unless an operation is in flight.
    fn with<T>(&self, f: impl FnOnce(&mut Journal) -> Result<T, EmbedError>) -> napi::Result<T> {
        self.idle()?;
        let mut journal = self.journal.borrow_mut();
        let journal = journal
            .as_mut()
            .ok_or_else(|| usage("the journal is not open (it was closed, or never created)"))?;
        f(journal).map_err(to_js)
    }

    /// Starts `future` as operation `req` and polls it once: its end (JSON text, see
    /// [`ended`]) when it ended at once, else null (it ends through `settle` or `poll`).
    fn fly(
        &self,
        env: &Env,
        req: u32,
        handle: tokio::runtime::Handle,
        future: Pin<Box<dyn Future<Output = (Held, Outcome)>>>,
    ) -> napi::Result<Option<String>> {
        self.busy.set(true);
        *self.flight.borrow_mut() = Some(Flight {
            req,
            handle,
            future,
        });
        Ok(self.drive(env))
    }

    /// Polls the operation in flight until it waits on nothing this thread can do; its end
    /// when it ended.
    fn drive(&self, env: &Env) -> Option<String> {
        if self.polling.get() {
            // Called from a body during the poll (a `settle`): the poll loop sees the wake.
            return None;
        }
        let mut flight = self.flight.borrow_mut().take()?;
        self.polling.set(true);
        let polled = self.poll_until_waiting(env, &mut flight);
        self.polling.set(false);
        let outcome = match polled {
            None => {
                *self.flight.borrow_mut() = Some(flight);
                // A step in flight keeps Node running: what it waits for may be on another
                // thread (a sync, an overlapping body, a time limit that aborts a body).
                if !self.held.get() {
                    self.bridge.hold(env, true);
                    self.held.set(true);
                }
                return None;
            }
            Some(Ok((held, outcome))) => self.land(held, outcome),
            Some(Err(panicked)) => {
                // The journal went down with the future (its lock with it): say so.
                drop(flight.future);
                Err(panicked_error(&panicked))
            }
        };
        Some(self.end(env, flight.req, outcome))
    }

    /// Polls `flight` in its runtime, with bodies callable here, until it ends or waits on
    /// nothing this thread can do (`None`). A panic is caught: crossing into Node it would
    /// abort the process.
    fn poll_until_waiting(
        &self,
        env: &Env,
        flight: &mut Flight,
    ) -> Option<std::thread::Result<(Held, Outcome)>> {
        self.wakes.queued.store(false, Ordering::SeqCst);
        let _env = PollingEnv::enter(env);
        let _runtime = flight.handle.enter();
        let waker = Waker::from(self.wakes.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            self.wakes.woken.store(false, Ordering::SeqCst);
            let polled =
                panic::catch_unwind(AssertUnwindSafe(|| flight.future.as_mut().poll(&mut cx)));
            match polled {
                Ok(Poll::Ready(done)) => return Some(Ok(done)),
                Ok(Poll::Pending) if self.wakes.woken.load(Ordering::SeqCst) => continue,
                Ok(Poll::Pending) => return None,
                Err(panicked) => return Some(Err(panicked)),
            }
        }
    }

    /// Puts back what the ended operation held (out of the runtime's context: a resume that
    /// failed drops its runtime here).
    fn land(&self, held: Held, outcome: Outcome) -> Outcome {
        match (held, outcome) {
            (Held::Journal(journal), outcome) => {
                *self.journal.borrow_mut() = Some(journal);
                outcome
            }
            (Held::Resuming(resuming), Ok(value)) => {
                let journal = resuming.into_journal();
                *self.stopper.borrow_mut() = Some(journal.stopper());
                *self.journal.borrow_mut() = Some(journal);
                Ok(value)
            }
            (Held::Resuming(resuming), Err(e)) => {
                drop(resuming);
                Err(e)
            }
        }
    }

    /// The operation in flight ended: the journal is free again, Node no longer held.
    fn end(&self, env: &Env, req: u32, outcome: Outcome) -> String {
        self.busy.set(false);
        if self.held.get() {
            self.held.set(false);
            self.bridge.hold(env, false);
        }
        ended(req, outcome)
    }

    /// A new session at `location` (the writer lock is taken first), with `tools`. A tool
    /// refused lets the journal go with nothing written.
    #[napi]
    pub fn create(
        &self,
        location: String,
        workspace: String,
        fsync: String,
        parallel_max: u32,
        builtins: bool,
        tools: Vec<ToolSpec>,
    ) -> napi::Result<()> {
        self.idle()?;
        if self.journal.borrow().is_some() {
            return Err(usage("this journal is open already"));
        }
        let mut options = CreateOptions::new(workspace);
        options.fsync = fsync_policy(&fsync)?;
        options.parallel_max = usize::try_from(parallel_max).unwrap_or(usize::MAX).max(1);
        options.builtins = builtins;
        let tools = tools
            .into_iter()
            .map(|spec| declared(spec, &self.bridge))
            .collect::<napi::Result<Vec<_>>>()?;
        let journal = guarded(|| {
            let mut journal = Journal::create(&location, options)?;
            for (decl, body) in tools {
                journal.tool(decl, body)?;
            }
            Ok(journal)
        })
        .map_err(to_js)?;
        *self.stopper.borrow_mut() = Some(journal.stopper());
        *self.journal.borrow_mut() = Some(journal);
        Ok(())
    }

    /// Operation `req`: resumes the session at `location` and runs the re-run; its value is
    /// the re-run's results.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn resume(
        &self,
        env: Env,
        req: u32,
        location: String,
        tools: Vec<ToolSpec>,
        rerun: Option<String>,
        kill_orphans: bool,
        steal: bool,
        builtins: bool,
    ) -> napi::Result<Option<String>> {
        self.idle()?;
        if self.journal.borrow().is_some() {
            return Err(usage("this journal is open already"));
        }
        let tools = tools
            .into_iter()
            .map(|spec| declared(spec, &self.bridge))
            .collect::<napi::Result<Vec<_>>>()?;
        let options = ResumeOptions {
            tools,
            rerun: rerun_policy(rerun.as_deref())?,
            kill_orphans,
            steal,
            builtins,
        };
        let mut resuming = guarded(|| Journal::resuming(&location, options)).map_err(to_js)?;
        let handle = resuming.handle();
        let future = Box::pin(async move {
            let ran = resuming.rerun().await.map(|r| (results_json(r), false));
            (Held::Resuming(resuming), ran)
        });
        self.fly(&env, req, handle, future)
    }

    /// Registers a tool (before the first turn).
    #[napi]
    pub fn tool(&self, spec: ToolSpec) -> napi::Result<()> {
        let (decl, body) = declared(spec, &self.bridge)?;
        self.with(|j| j.tool(decl, body))
    }

    /// Starts a turn with the user's text; returns its number.
    #[napi]
    pub fn turn(&self, user_text: String) -> napi::Result<u32> {
        self.with(|j| j.turn(&user_text))
    }

    /// Operation `req`: runs a batch, given as `calls` or as a provider's `response` (JSON
    /// text); its value is the results, and `stopped` says the user stopped it
    /// (`stopped_before`: before it began, so no call starts).
    #[napi]
    pub fn step(
        &self,
        env: Env,
        req: u32,
        calls: Option<Vec<CallSpec>>,
        response: Option<String>,
        text: Option<String>,
        stopped_before: bool,
    ) -> napi::Result<Option<String>> {
        self.idle()?;
        let answer = match (calls, response) {
            (Some(calls), None) => Answer {
                text: text.unwrap_or_default(),
                calls: calls.into_iter().map(call_of).collect(),
                stop: None,
            },
            (None, Some(response)) => {
                let value: serde_json::Value =
                    serde_json::from_str(&response).map_err(|e| usage(format!("response: {e}")))?;
                let mut answer = embed::read_response(&value).map_err(to_js)?;
                if let Some(text) = text {
                    answer.text = text;
                }
                answer
            }
            _ => return Err(usage("step takes calls or a provider's response")),
        };
        let mut journal =
            self.journal.borrow_mut().take().ok_or_else(|| {
                usage("the journal is not open (it was closed, or never created)")
            })?;
        let handle = journal.handle();
        let future = Box::pin(async move {
            let stepped = journal
                .step_async(answer, stopped_before)
                .await
                .map(|s| (results_json(s.results), s.stopped));
            (Held::Journal(journal), stepped)
        });
        self.fly(&env, req, handle, future)
    }

    /// Polls the operation in flight (after a `Poll` event); its end when it ended.
    #[napi]
    pub fn poll(&self, env: Env) -> Option<String> {
        self.drive(&env)
    }

    /// A body's result (see `Bridge::settle`), then a poll: the operation's end when it
    /// ended.
    #[napi]
    pub fn settle(&self, env: Env, slot: u32, status: u32, content: String) -> Option<String> {
        if !self.bridge.settle(slot, status, content) {
            return None;
        }
        self.drive(&env)
    }

    /// Stops the step in flight: nothing starts after it, running calls' signals abort.
    /// Then a poll (the stop woke the step here, on Node's thread): its end when it ended.
    #[napi]
    pub fn abort(&self, env: Env) -> Option<String> {
        if let Some(stopper) = self.stopper.borrow().as_ref() {
            stopper.stop();
        }
        self.drive(&env)
    }

    /// The session so far as a request body in `format`, as JSON text.
    #[napi]
    pub fn history(&self, format: String) -> napi::Result<String> {
        self.with(|j| j.history(&format).map(|v| v.to_string()))
    }

    /// The session's id.
    #[napi]
    pub fn session_id(&self) -> napi::Result<String> {
        self.with(|j| j.session_id())
    }

    /// Where the journal is (a URL without its secrets).
    #[napi]
    pub fn location(&self) -> napi::Result<String> {
        self.with(|j| Ok(j.location().to_string()))
    }

    /// Ends the open turn, writes `session/close`, lets the lock go.
    #[napi]
    pub fn close(&self) -> napi::Result<()> {
        self.idle()?;
        let Some(mut journal) = self.journal.borrow_mut().take() else {
            return Ok(());
        };
        // The lock goes with the journal, whether or not the close was written.
        journal.close().map_err(to_js)
    }
}
