//! The road between a step and Node's thread, both ways.
//!
//! A step is polled on Node's thread (`journal.rs`), so a tool that runs alone has its body
//! called right there, directly ([`JsTool::call_inline`]): a function that returns at once
//! settles before the call returns, a promise settles later through `settle`, and the step
//! waits for it without holding the thread. A tool that may overlap its siblings runs on one of
//! the runtime's worker threads, which cannot call JavaScript: it sends the call through the
//! one thread-safe function ([`JsTool::call`]) and waits. Wakes of the step from those threads
//! (a body done, a sync done, a time limit) come back the same way, as `Poll` events.
//!
//! Why one thread-safe function for everything: creating one costs more than a call through
//! it; every event is one `dispatch(kind, id, a, b, c, d, e, n)` into the package's JavaScript.

use embed::{CallCtx, Failure, HostTool, Reply};
use napi::bindgen_prelude::{FnArgs, Function, FunctionRef, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::threadsafe_function::{ThreadsafeCallContext, ThreadsafeFunction};
use napi::{Env, Status};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;

/// How often a blocking-pool thread waiting for a body looks whether the call was cancelled
/// (its time limit, the user's stop), to abort the body's `ctx.signal`.
pub(crate) const CANCEL_POLL_MS: u64 = 10;

/// `dispatch`'s first argument: what the event is.
const CALL: u32 = 0;
const CANCEL: u32 = 1;
const POLL: u32 = 2;

/// `dispatch(kind, id, a, b, c, d, e, n)`.
pub(crate) type JsArgs = FnArgs<(u32, u32, String, String, String, String, String, u32)>;

/// What Node's thread is told.
pub(crate) enum Event {
    /// Call tool `tool`'s body; its result comes back through `settle(slot, ..)`.
    Call {
        slot: u32,
        tool: String,
        arguments: String,
        ctx: CallCtx,
    },
    /// The call in `slot` was cancelled: abort its `ctx.signal`.
    Cancel { slot: u32 },
    /// The operation in flight was woken: poll it.
    Poll,
}

impl Event {
    fn into_args(self) -> JsArgs {
        let none = String::new;
        match self {
            Event::Call {
                slot,
                tool,
                arguments,
                ctx,
            } => (
                CALL,
                slot,
                tool,
                arguments,
                ctx.call_id,
                ctx.idempotency_key,
                ctx.session_id,
                ctx.attempt,
            ),
            Event::Cancel { slot } => (CANCEL, slot, none(), none(), none(), none(), none(), 0),
            Event::Poll => (POLL, 0, none(), none(), none(), none(), none(), 0),
        }
        .into()
    }
}

type Dispatch = ThreadsafeFunction<Event, Unknown<'static>, JsArgs, Status, false, true>;

/// A body's result: its content, or how it failed.
pub(crate) type Settled = Result<String, Failure>;

/// Who waits for a body's result.
enum Waiter {
    /// A step polled on Node's thread.
    Inline(oneshot::Sender<Settled>),
    /// A thread of the runtime's blocking pool, blocked.
    Blocked(SyncSender<Settled>),
}

thread_local! {
    /// Node's environment while this thread polls a step (set by `journal.rs`), for calling
    /// bodies directly.
    static POLLING_ENV: Cell<Option<napi::sys::napi_env>> = const { Cell::new(None) };
}

/// Marks this thread as polling a step in `env` until dropped.
pub(crate) struct PollingEnv(Option<napi::sys::napi_env>);

impl PollingEnv {
    pub(crate) fn enter(env: &Env) -> PollingEnv {
        PollingEnv(POLLING_ENV.with(|e| e.replace(Some(env.raw()))))
    }
}

impl Drop for PollingEnv {
    fn drop(&mut self) {
        POLLING_ENV.with(|e| e.set(self.0));
    }
}

/// The dispatch function, both ways of calling it, and the calls waiting for their bodies.
pub(crate) struct Bridge {
    queued: Dispatch,
    direct: FunctionRef<JsArgs, Unknown<'static>>,
    waiting: Mutex<HashMap<u32, Waiter>>,
    next_slot: AtomicU32,
}

impl Bridge {
    /// A bridge to `dispatch`, a function of the package's JavaScript. Weak: an idle journal
    /// does not keep Node running; [`Bridge::hold`] does while an operation waits.
    pub(crate) fn new(dispatch: Function<'_, JsArgs, Unknown<'static>>) -> napi::Result<Bridge> {
        let queued = dispatch
            .build_threadsafe_function::<Event>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(|ctx: ThreadsafeCallContext<Event>| Ok(ctx.value.into_args()))?;
        Ok(Bridge {
            queued,
            direct: dispatch.create_ref()?,
            waiting: Mutex::new(HashMap::new()),
            next_slot: AtomicU32::new(0),
        })
    }

    fn waiting(&self) -> MutexGuard<'_, HashMap<u32, Waiter>> {
        // Inserts and removes only: nothing a panic could leave half-done.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self, waiter: Waiter) -> u32 {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        self.waiting().insert(slot, waiter);
        slot
    }

    /// Tells Node's thread through its queue, from any thread; false when Node is shutting
    /// down (the event is lost).
    pub(crate) fn emit(&self, event: Event) -> bool {
        self.queued
            .call(event, ThreadsafeFunctionCallMode::NonBlocking)
            == Status::Ok
    }

    /// Keeps Node running (`on`) while an operation is in flight, or lets it exit. On Node's
    /// thread. Best effort: a failure (N-API refusing a valid handle) could only let Node
    /// exit while a step waits, which the journal answers as any crash.
    pub(crate) fn hold(&self, env: &Env, on: bool) {
        let raw = self.queued.raw();
        // SAFETY: `env` is the live environment of the calling (Node's) thread, and `raw` the
        // thread-safe function this bridge owns until it is dropped.
        let status = unsafe {
            if on {
                napi::sys::napi_ref_threadsafe_function(env.raw(), raw)
            } else {
                napi::sys::napi_unref_threadsafe_function(env.raw(), raw)
            }
        };
        debug_assert_eq!(status, napi::sys::Status::napi_ok);
    }

    /// A body's result, from Node's thread: `status` 0 ok, 1 failed, 2 failed and worth
    /// retrying, 3 stopped by the user. False when no call waits in `slot`.
    pub(crate) fn settle(&self, slot: u32, status: u32, content: String) -> bool {
        let Some(waiter) = self.waiting().remove(&slot) else {
            return false;
        };
        let settled = match status {
            0 => Ok(content),
            3 => Err(Failure::Stopped),
            _ => Err(Failure::Failed {
                message: content,
                retryable: status == 2,
            }),
        };
        // The waiting side is there until it has a result; were it gone (its step dropped),
        // nobody needs the result.
        match waiter {
            Waiter::Inline(sender) => {
                let _ = sender.send(settled);
            }
            Waiter::Blocked(sender) => {
                let _ = sender.try_send(settled);
            }
        }
        true
    }
}

fn never_called(why: impl std::fmt::Display) -> Failure {
    Failure::Failed {
        message: format!("the body could not be called: {why}"),
        retryable: false,
    }
}

fn went_away() -> Failure {
    Failure::Failed {
        message: "the body's result never came back (Node.js went away)".to_owned(),
        retryable: false,
    }
}

/// A tool whose body is a JavaScript function of the package's registry, called by name.
pub(crate) struct JsTool {
    pub(crate) name: String,
    pub(crate) bridge: Arc<Bridge>,
}

impl JsTool {
    fn event(&self, slot: u32, arguments: &str, ctx: &CallCtx) -> Event {
        Event::Call {
            slot,
            tool: self.name.clone(),
            arguments: arguments.to_owned(),
            ctx: ctx.clone(),
        }
    }
}

impl HostTool for JsTool {
    /// On a blocking-pool thread: through the queue, then wait (looking for a cancel
    /// meanwhile).
    fn call(&self, arguments: &str, ctx: &CallCtx) -> Result<String, Failure> {
        let (sender, results) = mpsc::sync_channel(1);
        let slot = self.bridge.wait(Waiter::Blocked(sender));
        if !self.bridge.emit(self.event(slot, arguments, ctx)) {
            self.bridge.waiting().remove(&slot);
            return Err(never_called(
                "Node.js is shutting down (the call never reached it)",
            ));
        }
        let mut told = false;
        loop {
            match results.recv_timeout(Duration::from_millis(CANCEL_POLL_MS)) {
                Ok(settled) => return settled,
                Err(RecvTimeoutError::Timeout) => {
                    if !told && ctx.cancelled() {
                        told = self.bridge.emit(Event::Cancel { slot });
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(went_away()),
            }
        }
    }

    /// On Node's thread, polling the step: the body is called right here.
    fn call_inline(&self, arguments: &str, ctx: &CallCtx) -> Reply {
        let Some(raw) = POLLING_ENV.with(Cell::get) else {
            return Reply::Now(self.call(arguments, ctx));
        };
        let env = Env::from_raw(raw);
        let (sender, mut result) = oneshot::channel();
        let slot = self.bridge.wait(Waiter::Inline(sender));
        let called = self
            .bridge
            .direct
            .borrow_back(&env)
            .and_then(|dispatch| dispatch.call(self.event(slot, arguments, ctx).into_args()));
        if let Err(e) = called {
            self.bridge.waiting().remove(&slot);
            return Reply::Now(Err(never_called(e)));
        }
        // A body that returned at once settled during the call.
        match result.try_recv() {
            Ok(settled) => Reply::Now(settled),
            Err(oneshot::error::TryRecvError::Closed) => Reply::Now(Err(went_away())),
            Err(oneshot::error::TryRecvError::Empty) => {
                let (bridge, cancelled) = (self.bridge.clone(), ctx.until_cancelled());
                Reply::Later(Box::pin(async move {
                    tokio::select! {
                        settled = &mut result => return settled.unwrap_or_else(|_| Err(went_away())),
                        () = cancelled => { bridge.emit(Event::Cancel { slot }); }
                    }
                    result.await.unwrap_or_else(|_| Err(went_away()))
                }))
            }
        }
    }
}
