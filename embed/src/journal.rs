//! One session's journal, driven by a host: create or resume, register tools, turn, step,
//! history, close. Every call runs through the Rust runtime's pipeline, so the journal a host
//! writes is the one the CLI writes, transition for transition.
//!
//! Why a runtime of its own, on the calling thread: a host calls `step` from its own thread
//! (Python's); the batch runs there (`block_on`), so a tool that runs alone is called with no
//! thread hand-off. A host whose bodies answer later (Node's promises) polls `step_async` on
//! its own thread instead, inside this runtime's context. The runtime is multi-thread with one worker, not
//! current-thread: a lone session's journal leader then syncs in place instead of handing each
//! sync to the blocking pool (ARCHITECTURE, `journal/`), which measured 7,866 against 5,758
//! durable calls/s here (`bindings/python/bench/step_bench.py`).

use crate::error::{EmbedError, ErrorKind};
use crate::host::{HostTool, Hosted, Stopper, ToolDecl};
use crate::response::Answer;
use journal::{FsyncPolicy, Location};
use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};
use runtime::event::{
    ApprovalPolicy, ModelCall, ModelResponse, RerunPolicy, StepOutcome, StopReason, ToolSource,
    TurnOutcome,
};
use runtime::{PreparedSession, Session, SessionBuilder, Tool};
use serde_json::Value;
use session::{Continue, Plan, Resume, ResumeError, Resumed, Settings};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often a running step asks the host whether the user stopped it (a signal the host's
/// own thread must read, such as Python's Ctrl-C).
pub const WATCH_INTERVAL_MS: u64 = 50;

/// How a new session runs.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// The directory the session works in (the built-in tools are confined to it).
    pub workspace: PathBuf,
    /// When the journal syncs: `Group` (the default) makes every `started` durable before its
    /// body runs; `Never` is for benchmarks and tests.
    pub fsync: FsyncPolicy,
    /// Most calls that may overlap run at once.
    pub parallel_max: usize,
    /// Whether the runtime's built-in tools (bash, the file tools, todo, ask) are offered too.
    pub builtins: bool,
}

impl CreateOptions {
    /// The defaults, working in `workspace`: group sync, the CLI's parallelism, no built-ins.
    pub fn new(workspace: impl Into<PathBuf>) -> CreateOptions {
        CreateOptions {
            workspace: workspace.into(),
            fsync: FsyncPolicy::Group,
            parallel_max: session::PARALLEL_MAX_DEFAULT,
            builtins: false,
        }
    }
}

/// How a crashed (or finished) session is taken up again.
#[derive(Default)]
pub struct ResumeOptions {
    /// The session's tools, as it declared them: the re-run runs calls of these.
    pub tools: Vec<(ToolDecl, Arc<dyn HostTool>)>,
    /// Which interrupted calls run again; `None` runs none. `tooljournal resume`'s default
    /// is [`RerunPolicy::NotStarted`].
    pub rerun: Option<RerunPolicy>,
    /// Kill process groups the crashed run left running (refused otherwise).
    pub kill_orphans: bool,
    /// Take a PostgreSQL session from a live lease holder.
    pub steal: bool,
    /// Whether the built-in tools are offered too.
    pub builtins: bool,
}

/// One call's result, as a host returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepResult {
    /// The model's id for the call.
    pub call_id: String,
    /// The call succeeded.
    pub ok: bool,
    /// What the model sees (an error's begins with its code).
    pub content: String,
    /// The error code (`TOOL_FAILED`, `ABORTED_BEFORE_DISPATCH`, ...) when it failed.
    pub code: Option<&'static str>,
}

impl From<runtime::ToolResult> for StepResult {
    fn from(r: runtime::ToolResult) -> StepResult {
        StepResult {
            call_id: r.call_id,
            ok: !r.is_error,
            content: r.content,
            code: r.code.map(|c| c.as_str()),
        }
    }
}

/// What a step did.
#[derive(Debug, Clone)]
pub struct Stepped {
    /// One result per call, in model order.
    pub results: Vec<StepResult>,
    /// The user stopped it: the step and its turn ended `cancelled`, as the CLI ends them on
    /// Ctrl-C.
    pub stopped: bool,
}

enum State {
    /// Locked and ready; tools may still be added. `session/open` is written at the first
    /// turn.
    Prepared(Box<PreparedSession>, CreateOptions),
    Open(Box<Session>),
    Closed,
}

/// A session's journal, held by this process (the writer lock, or the PostgreSQL lease).
pub struct Journal {
    rt: tokio::runtime::Runtime,
    location: Location,
    state: State,
    stopper: Stopper,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// The signals a host handles on its own thread (Ctrl-C above all): the runtime's threads
/// block them, so the kernel delivers them to a thread of the host's. A process-directed
/// signal taken by a worker would never interrupt the host's code (a Python body in
/// `time.sleep` goes on sleeping). Children the tools start get an empty mask (std resets it
/// before `exec`).
const HOST_SIGNALS: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

fn block_host_signals() {
    let mut set = SigSet::empty();
    for signal in HOST_SIGNALS {
        set.add(signal);
    }
    // Cannot fail with SIG_BLOCK and a valid set; were it to, the thread keeps the host's mask
    // and only the delivery of a signal to this thread is at stake.
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

fn runtime() -> Result<tokio::runtime::Runtime, EmbedError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(block_host_signals)
        .enable_all()
        .build()
        .map_err(|e| EmbedError::new(ErrorKind::Failed, format!("cannot start a runtime: {e}")))
}

fn hosted(decl: ToolDecl, body: Arc<dyn HostTool>, stopper: &Stopper) -> Arc<dyn Tool> {
    Arc::new(Hosted {
        decl,
        body,
        stopper: stopper.clone(),
    })
}

fn host_source() -> ToolSource {
    ToolSource::External {
        server: "embedding".to_owned(),
    }
}

impl Journal {
    /// A new session at `location` (a directory, created if missing, or a `postgres://` URL):
    /// the writer lock is taken first, and a journal that already holds a session is refused
    /// (resume it instead). `session/open` is written at the first turn, with the tools
    /// registered by then.
    pub fn create(location: &str, options: CreateOptions) -> Result<Journal, EmbedError> {
        let location = Location::parse(location)?;
        if !options.workspace.is_dir() {
            return Err(EmbedError::usage(format!(
                "workspace {}: not a directory",
                options.workspace.display()
            )));
        }
        let builder: SessionBuilder = session::builder(&location, &options.workspace)?
            .fsync(options.fsync)
            .parallel_max(options.parallel_max);
        let builder = if options.builtins {
            builder
        } else {
            builder.without_builtins()
        };
        let locked = builder.lock()?;
        if locked.replay().open.is_some() {
            return Err(EmbedError::new(
                ErrorKind::Refused,
                format!("{location}: the journal already holds a session; resume it instead"),
            ));
        }
        let prepared = locked.prepare()?;
        Ok(Journal {
            rt: runtime()?,
            location,
            state: State::Prepared(Box::new(prepared), options),
            stopper: Stopper::default(),
        })
    }

    /// Resumes the session at `location` as `tooljournal resume` does (lease, recovery under
    /// the lock, the journaled policy, orphans, the re-run choice), then runs the re-run: the
    /// calls it picked run once, with their journaled ids and keys. Returns the journal, open
    /// for new turns, and the re-run's results.
    pub fn resume(
        location: &str,
        options: ResumeOptions,
    ) -> Result<(Journal, Vec<StepResult>), EmbedError> {
        let mut resuming = Journal::resuming(location, options)?;
        let Resuming { rt, opened, .. } = &mut resuming;
        let ran = rt.block_on(opened.run_again())?;
        Ok((
            resuming.into_journal(),
            ran.into_iter().map(|(_, r)| r.into()).collect(),
        ))
    }

    /// The first half of [`Journal::resume`]: the session taken up under the lock, its
    /// re-run not yet run (for a host that polls it itself: [`Resuming::rerun`]).
    pub fn resuming(location: &str, options: ResumeOptions) -> Result<Resuming, EmbedError> {
        let location = Location::parse(location)?;
        let stopper = Stopper::default();
        let mut hooks = HostHooks {
            tools: options
                .tools
                .into_iter()
                .map(|(decl, body)| hosted(decl, body, &stopper))
                .collect(),
            builtins: options.builtins,
        };
        let resume = Resume::at(location.clone())
            .rerun(options.rerun)
            .kill_orphans(options.kill_orphans)
            .steal(options.steal);
        let opened = match resume.open(&mut hooks)? {
            Resumed::Session(opened) => opened,
            other => return Err(EmbedError::new(ErrorKind::Refused, other.to_string())),
        };
        Ok(Resuming {
            rt: runtime()?,
            location,
            opened,
            stopper,
        })
    }

    /// Where the journal is (a URL shown without its secrets).
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Stops the step in progress, from any thread.
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Adds a tool. Only before the first turn: `session/open` journals the session's tools.
    pub fn tool(&mut self, decl: ToolDecl, body: Arc<dyn HostTool>) -> Result<(), EmbedError> {
        let State::Prepared(prepared, _) = &mut self.state else {
            return Err(EmbedError::usage(format!(
                "tool `{}`: tools are added before the first turn (session/open journals them)",
                decl.name
            )));
        };
        let tool = hosted(decl, body, &self.stopper);
        prepared
            .registry_mut()
            .register(tool, host_source())
            .map_err(|e| EmbedError::usage(e.to_string()))
    }

    /// The open session: `session/open` and `session/policy` are written on first use.
    fn session(&mut self) -> Result<&mut Session, EmbedError> {
        if let State::Prepared(..) = self.state {
            let State::Prepared(prepared, options) =
                std::mem::replace(&mut self.state, State::Closed)
            else {
                unreachable!("matched just above")
            };
            let policy = session::record(
                ApprovalPolicy::Allow,
                options.parallel_max,
                options.fsync,
                None,
                prepared.registry(),
                "session opened",
            );
            let (mut session, _) = prepared.open_reporting()?;
            session.record_policy(&policy)?;
            self.state = State::Open(Box::new(session));
        }
        match &mut self.state {
            State::Open(session) => Ok(session),
            _ => Err(EmbedError::usage(format!(
                "{}: the journal is closed",
                self.location
            ))),
        }
    }

    /// The session's id (opening it if it was not yet).
    pub fn session_id(&mut self) -> Result<String, EmbedError> {
        Ok(self.session()?.session_id().to_owned())
    }

    /// Starts a turn with the user's text, ending the open one first (`completed`).
    pub fn turn(&mut self, user_text: &str) -> Result<u32, EmbedError> {
        self.session()?;
        self.end_turn(TurnOutcome::Completed)?;
        Ok(self.session()?.begin_turn(user_text)?)
    }

    fn end_turn(&mut self, outcome: TurnOutcome) -> Result<(), EmbedError> {
        let Journal { rt, state, .. } = self;
        if let State::Open(session) = state {
            if session.turn_open() {
                rt.block_on(session.end_turn(outcome))?;
            }
        }
        Ok(())
    }

    /// Runs one model answer's calls: `started` durable before each body, overlapping where
    /// the tools allow, one result per call in model order. `watch` is asked every
    /// [`WATCH_INTERVAL_MS`] whether the user stopped the step (true: stop it).
    pub fn step(
        &mut self,
        answer: Answer,
        watch: &mut dyn FnMut() -> bool,
    ) -> Result<Stepped, EmbedError> {
        let (response, token) = self.begin_step(answer)?;
        // Asked once before any call can start, so a stop already asked for stops them all;
        // then every WATCH_INTERVAL_MS while the batch runs.
        if watch() {
            self.stopper.stop();
        }
        let Journal {
            rt, state, stopper, ..
        } = self;
        let session = open_session(state)?;
        rt.block_on(async {
            let ran = {
                let batch = session.run_batch_cancellable(response, token);
                tokio::pin!(batch);
                let every = Duration::from_millis(WATCH_INTERVAL_MS);
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        ran = &mut batch => break ran,
                        _ = tick.tick() => if watch() { stopper.stop() },
                    }
                }
            };
            end_step(session, stopper, ran).await
        })
    }

    /// [`Journal::step`] for a host that polls the step itself (on its own thread, inside
    /// [`Journal::handle`]'s runtime: `handle.enter()`), with its bodies answering through
    /// [`Reply::Later`](crate::Reply). A stop comes through [`Journal::stopper`];
    /// `stopped_before` is one that came before the step began (no call starts).
    pub async fn step_async(
        &mut self,
        answer: Answer,
        stopped_before: bool,
    ) -> Result<Stepped, EmbedError> {
        let (response, token) = self.begin_step(answer)?;
        if stopped_before {
            self.stopper.stop();
        }
        let Journal { state, stopper, .. } = self;
        let session = open_session(state)?;
        let ran = session.run_batch_cancellable(response, token).await;
        end_step(session, stopper, ran).await
    }

    /// The journal's runtime: a host polling [`Journal::step_async`] enters it first.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }

    /// Checks that a turn is open, journals the step's beginning, and gives the batch and a
    /// fresh stop token.
    fn begin_step(
        &mut self,
        answer: Answer,
    ) -> Result<(ModelResponse, CancellationToken), EmbedError> {
        let session = self.session()?;
        if !session.turn_open() {
            return Err(EmbedError::usage(
                "no turn is open: call turn(the user's prompt) before step",
            ));
        }
        session.begin_step()?;
        let response = model_response(answer, session.turn(), session.step());
        Ok((response, self.stopper.begin()))
    }

    /// The session so far as a complete request body in `format` (`openai-chat`,
    /// `openai-responses`, `anthropic`, `gemini`): what `recover rebuild` gives for this
    /// journal, read back from it after a sync.
    pub fn history(&mut self, format: &str) -> Result<Value, EmbedError> {
        let Journal { rt, state, .. } = self;
        if let State::Open(session) = state {
            rt.block_on(session.event_log().sync_all())?;
        }
        crate::reading::rebuild_at(&self.location, format, false)
    }

    /// Ends the open turn (`completed`), writes `session/close`, syncs, and lets the lock go.
    /// A journal closed before its first turn still records its session, opened and closed.
    pub fn close(&mut self) -> Result<(), EmbedError> {
        if let State::Closed = self.state {
            return Ok(());
        }
        self.session()?;
        self.end_turn(TurnOutcome::Completed)?;
        let State::Open(session) = std::mem::replace(&mut self.state, State::Closed) else {
            unreachable!("opened just above")
        };
        self.rt.block_on(session.close())?;
        Ok(())
    }

    /// Whether [`Journal::close`] ran.
    pub fn closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }
}

fn open_session(state: &mut State) -> Result<&mut Session, EmbedError> {
    match state {
        State::Open(session) => Ok(session),
        _ => Err(EmbedError::usage("the journal is closed")),
    }
}

/// Ends the step as the batch ended: completed, failed (the error returned), or stopped by
/// the user (the step and its turn cancelled, as the CLI ends them on Ctrl-C).
async fn end_step(
    session: &mut Session,
    stopper: &Stopper,
    ran: Result<Vec<runtime::ToolResult>, runtime::RuntimeError>,
) -> Result<Stepped, EmbedError> {
    let results = match ran {
        Ok(results) => results,
        Err(e) => {
            let message = e.to_string();
            // The step's end is best effort: the journal may be what failed.
            let _ = session.end_step(StepOutcome::Failed {
                message: message.clone(),
            });
            return Err(EmbedError::new(ErrorKind::Failed, message));
        }
    };
    let stopped = stopper.stopped();
    if stopped {
        session.end_step(StepOutcome::Cancelled)?;
        session.end_turn(TurnOutcome::Cancelled).await?;
    } else {
        session.end_step(StepOutcome::Completed)?;
    }
    Ok(Stepped {
        results: results.into_iter().map(StepResult::from).collect(),
        stopped,
    })
}

/// The model's answer as the runtime takes it; a call without an id (Gemini's) is named by
/// its place in the session, which no other call of it shares.
fn model_response(answer: Answer, turn: u32, step: u32) -> ModelResponse {
    let stop_reason = answer.stop.unwrap_or(if answer.calls.is_empty() {
        StopReason::EndTurn
    } else {
        StopReason::ToolUse
    });
    let tool_calls = answer
        .calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| ModelCall {
            call_id: c.id.unwrap_or_else(|| format!("call_{turn}_{step}_{i}")),
            name: c.name,
            arguments: c.arguments,
        })
        .collect();
    ModelResponse {
        text: answer.text,
        tool_calls,
        stop_reason,
    }
}

/// A session taken up under the lock whose re-run has not run yet.
pub struct Resuming {
    rt: tokio::runtime::Runtime,
    location: Location,
    opened: Box<session::Opened>,
    stopper: Stopper,
}

impl std::fmt::Debug for Resuming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resuming")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Resuming {
    /// Runs the calls the re-run picked, once each, with their journaled ids and keys. Poll
    /// it inside [`Resuming::handle`]'s runtime.
    pub async fn rerun(&mut self) -> Result<Vec<StepResult>, EmbedError> {
        let ran = self.opened.run_again().await?;
        Ok(ran.into_iter().map(|(_, r)| r.into()).collect())
    }

    /// The runtime [`Resuming::rerun`] is polled in.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }

    /// The journal, open for new turns.
    pub fn into_journal(self) -> Journal {
        Journal {
            rt: self.rt,
            location: self.location,
            state: State::Open(Box::new(self.opened.session)),
            stopper: self.stopper,
        }
    }
}

/// What only the host knows, for the session layer's resume: its tools.
struct HostHooks {
    tools: Vec<Arc<dyn Tool>>,
    builtins: bool,
}

impl session::Hooks for HostHooks {
    fn decide(&mut self, _look: &session::Look<'_>) -> Result<Plan, ResumeError> {
        Ok(Plan {
            continue_with: Continue::NewTurns,
            config_file: None,
        })
    }

    fn wire(
        &mut self,
        builder: SessionBuilder,
        _settings: &Settings,
    ) -> Result<SessionBuilder, ResumeError> {
        let builder = if self.builtins {
            builder
        } else {
            builder.without_builtins()
        };
        Ok(self
            .tools
            .iter()
            .fold(builder, |b, tool| b.tool_from(tool.clone(), host_source())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{CallCtx, Failure};
    use crate::response::Call;
    use std::sync::Mutex;

    /// Records who ran; fails when told to.
    struct Recorder(Mutex<Vec<(String, String)>>);

    impl HostTool for Recorder {
        fn call(&self, arguments: &str, ctx: &CallCtx) -> Result<String, Failure> {
            let mut seen = self.0.lock().unwrap();
            seen.push((ctx.call_id.clone(), ctx.idempotency_key.clone()));
            if arguments.contains("fail") {
                return Err(Failure::Failed {
                    message: "told to".into(),
                    retryable: false,
                });
            }
            Ok(format!("ran {}", ctx.call_id))
        }
    }

    fn answer(calls: &[(Option<&str>, &str)]) -> Answer {
        Answer {
            text: String::new(),
            calls: calls
                .iter()
                .map(|(id, args)| Call {
                    id: id.map(str::to_owned),
                    name: "rec".into(),
                    arguments: (*args).to_owned(),
                })
                .collect(),
            stop: None,
        }
    }

    #[test]
    fn a_host_session_runs_its_calls_in_model_order_names_idless_calls_and_rebuilds() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal");
        let location = journal.to_str().unwrap();
        let recorder = Arc::new(Recorder(Mutex::new(Vec::new())));
        let mut j = Journal::create(location, CreateOptions::new(dir.path())).unwrap();
        j.tool(ToolDecl::new("rec"), recorder.clone()).unwrap();
        j.turn("go").unwrap();
        let stepped = j
            .step(
                answer(&[(Some("a"), "{}"), (None, r#"{"fail":1}"#)]),
                &mut || false,
            )
            .unwrap();
        assert!(!stepped.stopped);
        let ids: Vec<_> = stepped.results.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, ["a", "call_1_1_1"]);
        assert_eq!(stepped.results[0].content, "ran a");
        assert_eq!(stepped.results[1].code, Some("TOOL_FAILED"));
        assert_eq!(stepped.results[1].content, "TOOL_FAILED: told to");
        // Tools are fixed once the session opened.
        let late = j.tool(ToolDecl::new("late"), recorder.clone()).unwrap_err();
        assert_eq!(late.kind, ErrorKind::Usage);
        let body = j.history("openai-chat").unwrap();
        let roles: Vec<_> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
        // A second writer is refused while this one holds the journal.
        let locked = Journal::create(location, CreateOptions::new(dir.path())).unwrap_err();
        assert_eq!((locked.kind, locked.exit_code()), (ErrorKind::Locked, 1));
        j.close().unwrap();
        let refused = Journal::create(location, CreateOptions::new(dir.path())).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Refused);
        let classified = crate::classify(location, false).unwrap();
        let states: Vec<_> = classified["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["state"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(states, ["committed", "committed"]);
    }

    #[test]
    fn a_stop_during_a_step_cancels_it_and_ends_the_turn_as_the_cli_does() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("journal");
        let location = location.to_str().unwrap();
        let recorder = Arc::new(Recorder(Mutex::new(Vec::new())));
        let mut j = Journal::create(location, CreateOptions::new(dir.path())).unwrap();
        j.tool(ToolDecl::new("rec"), recorder.clone()).unwrap();
        j.turn("stop at once").unwrap();
        // The watch says "stopped" at its first look, before the batch begins.
        let stepped = j
            .step(answer(&[(Some("a"), "{}"), (Some("b"), "{}")]), &mut || {
                true
            })
            .unwrap();
        assert!(stepped.stopped);
        // No body ran; the first call may have been dispatched (then `ABORTED`, saying it did
        // not run), the second never was.
        assert!(recorder.0.lock().unwrap().is_empty());
        let codes: Vec<_> = stepped.results.iter().map(|r| r.code).collect();
        assert!(
            matches!(codes[0], Some("ABORTED" | "ABORTED_BEFORE_DISPATCH")),
            "{codes:?}"
        );
        assert_eq!(codes[1], Some("ABORTED_BEFORE_DISPATCH"));
        let usage = j.step(answer(&[]), &mut || false).unwrap_err();
        assert!(usage.message.contains("no turn is open"), "{usage}");
        j.close().unwrap();
    }

    /// Answers later (a timer, as a promise would), never through the blocking `call`.
    struct Later;

    impl HostTool for Later {
        fn call(&self, _: &str, _: &CallCtx) -> Result<String, Failure> {
            panic!("a host that answers later is never asked to block")
        }
        fn call_inline(&self, arguments: &str, ctx: &CallCtx) -> crate::Reply {
            let answer = format!("later {} {arguments}", ctx.call_id);
            crate::Reply::Later(Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(answer)
            }))
        }
    }

    #[test]
    fn a_polled_step_waits_for_bodies_that_answer_later_and_a_stop_before_it_starts_none() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("journal");
        let location = location.to_str().unwrap();
        let mut j = Journal::create(location, CreateOptions::new(dir.path())).unwrap();
        j.tool(ToolDecl::new("rec"), Arc::new(Later)).unwrap();
        j.turn("answer later").unwrap();
        let handle = j.handle();
        let stepped = handle
            .block_on(j.step_async(answer(&[(Some("a"), "{}"), (Some("b"), "{}")]), false))
            .unwrap();
        assert!(!stepped.stopped);
        let contents: Vec<_> = stepped.results.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(contents, ["later a {}", "later b {}"]);
        let stopped = handle
            .block_on(j.step_async(answer(&[(Some("c"), "{}")]), true))
            .unwrap();
        assert!(stopped.stopped);
        assert_eq!(stopped.results[0].code, Some("ABORTED_BEFORE_DISPATCH"));
        j.close().unwrap();
        let states: Vec<_> = crate::classify(location, false).unwrap()["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["state"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(states, ["committed", "committed", "committed"]);
    }

    /// Reads its own thread's blocked-signal mask.
    struct Mask;

    impl HostTool for Mask {
        fn call(&self, _: &str, _: &CallCtx) -> Result<String, Failure> {
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
            Ok(line["SigBlk:".len()..].trim().to_owned())
        }
    }

    #[test]
    fn the_runtimes_threads_block_the_hosts_signals_so_ctrl_c_reaches_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("journal");
        let mut j =
            Journal::create(location.to_str().unwrap(), CreateOptions::new(dir.path())).unwrap();
        let mut overlapping = ToolDecl::new("mask");
        overlapping.concurrent = true;
        j.tool(overlapping, Arc::new(Mask)).unwrap();
        j.turn("where do signals go").unwrap();
        let call = Answer {
            text: String::new(),
            calls: vec![Call {
                id: Some("m".into()),
                name: "mask".into(),
                arguments: "{}".into(),
            }],
            stop: None,
        };
        let stepped = j.step(call, &mut || false).unwrap();
        // An overlapping tool runs on the runtime's blocking pool: its thread's mask.
        let mask = u64::from_str_radix(&stepped.results[0].content, 16).unwrap();
        for signal in HOST_SIGNALS {
            assert_ne!(mask & (1 << (signal as i32 - 1)), 0, "{signal} not blocked");
        }
        j.close().unwrap();
    }
}
