//! A session: turns, steps, and the batch of calls in each step, every transition journaled.
//!
//! The durability plan (DESIGN.md §8): nothing waits for the disk except a tool start. The
//! `llm/response` of a step and the `received`, `parsed`, `approved` records of its calls ride
//! on the sync of the first `started`; each later `started` syncs whatever came before it
//! (earlier calls' `settled` included); `committed` records ride on the next sync, at the
//! latest the one at `turn/end`. A sequential agent loop costs one fsync per step.
//!
//! This module runs a batch one call at a time, in model order, and commits results in model
//! order as soon as every earlier call is committed.

use crate::args;
use crate::code::ErrorCode;
use crate::event::{
    Approval, AskAnswer, CallRef, Event, ModelResponse, SessionOpen, StepOutcome, StopReason,
    TurnOutcome, EVENT_SCHEMA_VERSION,
};
use crate::eventlog::{Clock, EventLog, SystemClock};
use crate::failpoint::Failpoints;
use crate::hooks::{CallInfo, Decision, Hooks};
use crate::pipeline::{self, panic_message, Ctx};
use crate::registry::{Entry, Exposure, Registry};
use crate::result::{error_content, ToolResult};
use crate::scheduler;
use crate::spill::SpillStore;
use crate::state::{CallMachine, CallState};
use crate::tools::search::{self, CatalogEntry, Loaded, ToolSearch};
use crate::RuntimeError;
use journal::Journal;
use std::collections::{BTreeSet, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Limits and defaults of a session.
#[derive(Clone)]
pub struct Config {
    /// A call's body is cancelled after this long (then awaited until it settles).
    pub timeout_ms: u64,
    /// Attempts for a retry-safe tool whose failure says it is retryable (1 = no retry).
    pub attempts_max: u32,
    /// Pause before retry n is n × this.
    pub retry_backoff_ms: u64,
    /// Content larger than this is journaled in `settled` as head + tail + sha256.
    pub content_inline_bytes_max: usize,
    /// What happens when no pre-execute listener decides: allow (true) or deny.
    pub default_allow: bool,
    /// Most calls one assistant message may carry.
    pub calls_per_batch_max: usize,
    /// Most concurrency-safe calls running at once.
    pub parallel_max: usize,
    /// After cancelling a call, how long before it is reported as ignoring cancellation (it is
    /// still awaited: its resources are released only when it settles).
    pub cancel_grace_ms: u64,
    /// Faults a test can inject into the runtime itself.
    pub failpoints: Failpoints,
    /// Results longer than this reach the model as head + tail + locator (when a spill store
    /// is set) or are cut to it with a note (when none is).
    pub model_inline_bytes_max: usize,
    /// Where spilled results are kept in full; `None`: no spilling.
    pub spill: Option<Arc<dyn SpillStore>>,
    /// Start a new session in plan mode: only read-only tools run until the user approves a
    /// plan (an `ask` answered allow).
    pub plan_mode: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("timeout_ms", &self.timeout_ms)
            .field("attempts_max", &self.attempts_max)
            .field("parallel_max", &self.parallel_max)
            .field("model_inline_bytes_max", &self.model_inline_bytes_max)
            .field("spill", &self.spill.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            timeout_ms: 120_000,
            attempts_max: 3,
            retry_backoff_ms: 50,
            content_inline_bytes_max: 1 << 20,
            default_allow: true,
            calls_per_batch_max: 128,
            parallel_max: 10,
            cancel_grace_ms: 5_000,
            failpoints: Failpoints::default(),
            model_inline_bytes_max: 32 << 10,
            spill: None,
            plan_mode: false,
        }
    }
}

/// Who the session is and where its clock comes from.
#[derive(Clone)]
pub struct SessionOptions {
    /// Defaults to a random UUID.
    pub session_id: Option<String>,
    pub workspace: String,
    pub clock: Arc<dyn Clock>,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            session_id: None,
            workspace: ".".to_owned(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// Counters a caller can read; failures of observers land here (and in the log).
#[derive(Debug, Default)]
pub struct Stats {
    observer_failures: AtomicU64,
    ignored_cancellations: AtomicU64,
    spill_failures: AtomicU64,
}

impl Stats {
    pub fn observer_failures(&self) -> u64 {
        self.observer_failures.load(Ordering::Acquire)
    }

    /// Calls that were still running `cancel_grace_ms` after being cancelled.
    pub fn ignored_cancellations(&self) -> u64 {
        self.ignored_cancellations.load(Ordering::Acquire)
    }

    /// Results that should have spilled but stayed inline because the store failed.
    pub fn spill_failures(&self) -> u64 {
        self.spill_failures.load(Ordering::Acquire)
    }

    pub(crate) fn spill_failed(&self) {
        self.spill_failures.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn ignored_cancellation(&self) {
        self.ignored_cancellations.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn observer_outcome(
        &self,
        observer: &str,
        outcome: std::thread::Result<Result<(), String>>,
    ) {
        let message = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(message)) => message,
            Err(panic) => format!("panicked: {}", panic_message(panic.as_ref())),
        };
        self.observer_failures.fetch_add(1, Ordering::AcqRel);
        tracing::warn!(observer, %message, "observer failed; the result is unchanged");
    }
}

/// One call of the current batch: its machine, its last event, and what is known of it.
pub(crate) struct Track {
    machine: CallMachine,
    last_seq: u64,
    tool: String,
    entry: Option<Arc<Entry>>,
    info: Option<CallInfo>,
    result: Option<ToolResult>,
}

impl Track {
    /// Advances the machine and appends the event that records it, pointing back at the call's
    /// previous event.
    pub(crate) fn transition(
        &mut self,
        log: &EventLog,
        to: CallState,
        attempt: u32,
        event: impl FnOnce(Vec<u64>) -> Event,
    ) -> Result<u64, RuntimeError> {
        self.machine.advance_attempt(to, attempt)?;
        let seq = log.append(&event(vec![self.last_seq]))?;
        self.last_seq = seq;
        Ok(seq)
    }

    pub(crate) fn call(&self) -> &CallRef {
        self.machine.call()
    }

    pub(crate) fn state(&self) -> CallState {
        self.machine.state()
    }

    pub(crate) fn tool(&self) -> &str {
        &self.tool
    }

    pub(crate) fn entry(&self) -> Option<&Arc<Entry>> {
        self.entry.as_ref()
    }

    pub(crate) fn info(&self) -> Option<&CallInfo> {
        self.info.as_ref()
    }

    pub(crate) fn result(&self) -> Option<&ToolResult> {
        self.result.as_ref()
    }

    pub(crate) fn set_result(&mut self, result: ToolResult) {
        debug_assert!(self.result.is_none(), "a call gets one result");
        self.result = Some(result);
    }

    pub(crate) fn into_result(self) -> Option<ToolResult> {
        self.result
    }

    /// The result of a call that did not run: the code first, and the tool's
    /// `finalize_content` applied once to the message when the tool is known.
    pub(crate) fn set_error_result(&mut self, code: ErrorCode, message: String) {
        let (content, is_error, code) = match &self.entry {
            Some(entry) => pipeline::finalize(entry, String::new(), Some((code, message))),
            None => (error_content(code, &message), true, Some(code)),
        };
        self.set_result(ToolResult {
            call_id: self.call().call_id.clone(),
            content,
            value: None,
            details: None,
            is_error,
            code,
        });
    }
}

/// A live session over one journal.
pub struct Session {
    log: EventLog,
    registry: Arc<Registry>,
    hooks: Arc<Hooks>,
    config: Arc<Config>,
    session_id: String,
    turn: u32,
    step: u32,
    turn_open: bool,
    step_open: bool,
    step_answered: bool,
    always_allowed: HashSet<String>,
    stats: Arc<Stats>,
    /// Deferred tools `tool_search` found so far.
    loaded: Arc<Loaded>,
    /// The tools the model was shown in the current step (`step/tools`).
    step_visible: BTreeSet<String>,
    /// The last `step/tools` event and how many tools were loaded when it was built: the set
    /// only changes when a search loads a tool, so most steps reuse it (turn and step updated).
    step_tools: Option<(usize, Event)>,
    plan_mode: bool,
}

/// The listener name plan-mode denials carry.
pub const PLAN_MODE_POLICY: &str = "plan-mode";

/// The name the session's own routing of `ask` calls is recorded under (as a listener's would).
pub const ASK_TOOL_POLICY: &str = "ask-tool";

/// The registry a session runs on: the caller's, plus `tool_search` in a scope of its own when
/// any tool is deferred.
fn with_tool_search(
    registry: Arc<Registry>,
    loaded: &Arc<Loaded>,
) -> Result<Arc<Registry>, RuntimeError> {
    let catalog: Vec<CatalogEntry> = registry
        .entries()
        .iter()
        .filter(|e| e.exposure == Exposure::Deferred)
        .map(|e| CatalogEntry::of(e))
        .collect();
    if catalog.is_empty() {
        return Ok(registry);
    }
    let mut scope = Registry::child(registry);
    scope.register_reserved(Arc::new(ToolSearch::new(catalog, loaded.clone())))?;
    Ok(Arc::new(scope))
}

impl Session {
    /// Starts a session: records `session/open` with every visible tool's name, source, version
    /// and schema hash.
    pub fn open(
        journal: Journal,
        registry: Arc<Registry>,
        hooks: Hooks,
        config: Config,
        options: SessionOptions,
    ) -> Result<Session, RuntimeError> {
        // A second `session/open` would make the journal unreadable for recovery: a journal
        // holds one session, from its first record.
        let appended_seq = journal.stats().appended_seq;
        if appended_seq != 0 {
            return Err(RuntimeError::JournalMoved(format!(
                "{}: the journal already holds {appended_seq} records of a session: resume it instead",
                journal.location()
            )));
        }
        let log = EventLog::new(Arc::new(journal), options.clock);
        let session_id = options
            .session_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let loaded = Arc::new(Loaded::default());
        let registry = with_tool_search(registry, &loaded)?;
        log.append(&Event::SessionOpen(SessionOpen {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: session_id.clone(),
            workspace: options.workspace,
            tools: registry.descriptors(),
        }))?;
        let plan_mode = config.plan_mode;
        let mut session = Session {
            log,
            registry,
            hooks: Arc::new(hooks),
            config: Arc::new(config),
            session_id,
            turn: 0,
            step: 0,
            turn_open: false,
            step_open: false,
            step_answered: false,
            always_allowed: HashSet::new(),
            stats: Arc::new(Stats::default()),
            loaded,
            step_visible: BTreeSet::new(),
            step_tools: None,
            plan_mode: false,
        };
        if plan_mode {
            session.set_plan_mode(true, "the session starts in plan mode")?;
        }
        Ok(session)
    }

    /// Journals the session's policy (`session/policy`): once after `open`, and from a resume
    /// whenever it changes. The runtime does not interpret it (approval and fsync are the
    /// embedding's); it is kept so that a resume reapplies what the session was started with.
    pub fn record_policy(
        &mut self,
        policy: &crate::event::SessionPolicy,
    ) -> Result<(), RuntimeError> {
        self.log.append(&Event::SessionPolicy(policy.clone()))?;
        Ok(())
    }

    /// Journals that a resume killed a process group a call of the crashed run left running
    /// (`process/killed`).
    pub fn record_process_killed(
        &mut self,
        call: &CallRef,
        pgid: u32,
        signal: i32,
    ) -> Result<(), RuntimeError> {
        self.log.append(&Event::ProcessKilled {
            call: call.clone(),
            pgid,
            signal,
        })?;
        Ok(())
    }

    /// Turns plan mode on or off, journaled (`plan/mode`). While it is on, only tools declared
    /// read-only run; the others are refused with `POLICY_DENIED`. A no-op when already so.
    pub fn set_plan_mode(&mut self, on: bool, reason: &str) -> Result<(), RuntimeError> {
        self.switch_plan_mode(on, reason, None)
    }

    pub fn plan_mode(&self) -> bool {
        self.plan_mode
    }

    fn switch_plan_mode(
        &mut self,
        on: bool,
        reason: &str,
        call: Option<CallRef>,
    ) -> Result<(), RuntimeError> {
        if self.plan_mode == on {
            return Ok(());
        }
        self.log.append(&Event::PlanMode {
            on,
            reason: reason.to_owned(),
            call,
        })?;
        self.plan_mode = on;
        Ok(())
    }

    /// The tools the model is shown in the current step (after [`Session::begin_step`]): what a
    /// model adapter sends as the request's tool list.
    pub fn step_tools(&self) -> Vec<Arc<Entry>> {
        self.step_visible
            .iter()
            .filter_map(|name| self.registry.lookup(name))
            .collect()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn event_log(&self) -> &EventLog {
        &self.log
    }

    /// The current (or last) turn number; 0 before the first.
    pub fn turn(&self) -> u32 {
        self.turn
    }

    pub fn turn_open(&self) -> bool {
        self.turn_open
    }

    /// Continues a session whose journal was replayed as `replay`, after the last turn. The
    /// journal must be balanced (no open turn: `recover` closes one); a closed session cannot be
    /// continued.
    pub fn resume(
        journal: Journal,
        registry: Arc<Registry>,
        hooks: Hooks,
        config: Config,
        options: SessionOptions,
        replay: &crate::replay::SessionReplay,
    ) -> Result<Session, RuntimeError> {
        let Some(open) = &replay.open else {
            return Err(RuntimeError::Misuse("the journal holds no session".into()));
        };
        if replay.closed {
            return Err(RuntimeError::Misuse("the session is closed".into()));
        }
        if let Some(turn) = replay.open_turn() {
            return Err(RuntimeError::Misuse(format!(
                "turn {} is still open: the session was interrupted; recover it first",
                turn.turn
            )));
        }
        // The writer lock is held from here on; the replay must be of the journal as it is
        // under that lock, or we would continue a story another process has moved on.
        let appended_seq = journal.stats().appended_seq;
        if appended_seq != replay.last_seq {
            return Err(RuntimeError::JournalMoved(format!(
                "{}: the journal ends at seq {appended_seq} but was replayed up to seq {}: \
                 another process wrote to it; replay it again under the lock",
                journal.location(),
                replay.last_seq
            )));
        }
        let log = EventLog::new(Arc::new(journal), options.clock);
        // What the journal says: tools loaded by earlier searches stay loaded, plan mode stays
        // as it was.
        let loaded = Arc::new(Loaded::new(replay.loaded_tools.clone()));
        let registry = with_tool_search(registry, &loaded)?;
        Ok(Session {
            log,
            registry,
            hooks: Arc::new(hooks),
            config: Arc::new(config),
            session_id: open.session_id.clone(),
            turn: replay.turns.len() as u32,
            step: 0,
            turn_open: false,
            step_open: false,
            step_answered: false,
            always_allowed: HashSet::new(),
            stats: Arc::new(Stats::default()),
            loaded,
            step_visible: BTreeSet::new(),
            step_tools: None,
            plan_mode: replay.plan_mode,
        })
    }

    /// Opens a turn with the user's message.
    pub fn begin_turn(&mut self, user_text: &str) -> Result<u32, RuntimeError> {
        if self.turn_open {
            return Err(RuntimeError::Misuse(format!(
                "turn {} is still open",
                self.turn
            )));
        }
        self.turn += 1;
        self.step = 0;
        self.turn_open = true;
        self.log.append(&Event::TurnStart {
            turn: self.turn,
            user_text: user_text.to_owned(),
        })?;
        Ok(self.turn)
    }

    /// Opens a step: one model request and the calls it asks for.
    pub fn begin_step(&mut self) -> Result<u32, RuntimeError> {
        if !self.turn_open || self.step_open {
            return Err(RuntimeError::Misuse(
                "a step begins inside an open turn, after the previous step ended".into(),
            ));
        }
        self.step += 1;
        self.step_open = true;
        self.step_answered = false;
        self.log.append(&Event::StepStart {
            turn: self.turn,
            step: self.step,
        })?;
        // The step's tool set is fixed here, before the model answers: a tool loaded during
        // the step is shown from the next one. The loaded set only grows, so its size says
        // whether the cached set is still the one.
        let loaded = self.loaded.len();
        let (turn, step) = (self.turn, self.step);
        let event = match self.step_tools.take() {
            Some((n, mut event)) if n == loaded => {
                if let Event::StepTools {
                    turn: t, step: s, ..
                } = &mut event
                {
                    (*t, *s) = (turn, step);
                }
                event
            }
            _ => {
                let tools = self.registry.visible(&self.loaded.snapshot());
                self.step_visible = tools.iter().map(|t| t.name.clone()).collect();
                Event::StepTools { turn, step, tools }
            }
        };
        self.log.append(&event)?;
        self.step_tools = Some((loaded, event));
        Ok(self.step)
    }

    pub fn end_step(&mut self, outcome: StepOutcome) -> Result<(), RuntimeError> {
        if !self.step_open {
            return Err(RuntimeError::Misuse("no step is open".into()));
        }
        self.step_open = false;
        self.log.append(&Event::StepEnd {
            turn: self.turn,
            step: self.step,
            outcome,
        })?;
        Ok(())
    }

    /// Closes the turn and makes everything before it durable.
    pub async fn end_turn(&mut self, outcome: TurnOutcome) -> Result<(), RuntimeError> {
        if !self.turn_open || self.step_open {
            return Err(RuntimeError::Misuse(
                "a turn ends after its last step ended".into(),
            ));
        }
        self.turn_open = false;
        let seq = self.log.append(&Event::TurnEnd {
            turn: self.turn,
            outcome,
        })?;
        self.log.sync_through(seq).await
    }

    /// Records `session/close`, makes the journal durable and closes it.
    pub async fn close(self) -> Result<(), RuntimeError> {
        if self.turn_open {
            return Err(RuntimeError::Misuse(format!(
                "turn {} is still open",
                self.turn
            )));
        }
        let seq = self.log.append(&Event::SessionClose)?;
        self.log.sync_through(seq).await?;
        let Session { log, .. } = self;
        if let Ok(journal) = Arc::try_unwrap(log.journal().clone()) {
            drop(log);
            journal.close()?;
        }
        Ok(())
    }

    /// Runs the calls of one assistant message and returns exactly one result per call id, in
    /// model order (I3). See [`Session::run_batch_cancellable`].
    pub async fn run_batch(
        &mut self,
        response: ModelResponse,
    ) -> Result<Vec<ToolResult>, RuntimeError> {
        self.run_batch_cancellable(response, CancellationToken::new())
            .await
    }

    /// Runs a batch that `cancel` can stop (the user pressed stop): nothing starts after it,
    /// running calls are signalled and awaited, calls that never started get
    /// `ABORTED_BEFORE_DISPATCH`. Each call's `started` is durable before its body runs (I1);
    /// a journal failure stops the batch and nothing starts after it (I10).
    pub async fn run_batch_cancellable(
        &mut self,
        response: ModelResponse,
        cancel: CancellationToken,
    ) -> Result<Vec<ToolResult>, RuntimeError> {
        self.check_response(&response)?;
        self.step_answered = true;
        let (turn, step) = (self.turn, self.step);
        // Events own their text; the response is moved into its event and back out rather
        // than copied (this is the per-call hot path).
        let event = Event::LlmResponse {
            turn,
            step,
            response,
        };
        let response_seq = self.log.append(&event)?;
        let Event::LlmResponse { response, .. } = event else {
            unreachable!("built as llm/response just above")
        };
        let stop_reason = response.stop_reason;

        let mut tracks = Vec::with_capacity(response.tool_calls.len());
        for (index, model_call) in response.tool_calls.iter().enumerate() {
            let event = Event::Received {
                call: CallRef {
                    turn,
                    step,
                    call_id: model_call.call_id.clone(),
                },
                index: index as u32,
                tool: model_call.name.clone(),
                raw_arguments: model_call.arguments.clone(),
                source_seqs: vec![response_seq],
            };
            let seq = self.log.append(&event)?;
            let Event::Received { call, tool, .. } = event else {
                unreachable!("built as received just above")
            };
            let mut track = Track {
                machine: CallMachine::received(call),
                last_seq: seq,
                tool,
                entry: None,
                info: None,
                result: None,
            };
            if cancel.is_cancelled() {
                scheduler::cancel_before_start(
                    &self.ctx(),
                    &mut track,
                    "the batch was stopped before this call started",
                )?;
            } else {
                self.plan(&mut track, &model_call.arguments, stop_reason, &cancel)
                    .await?;
            }
            tracks.push(track);
        }
        scheduler::run(&self.ctx(), tracks, &cancel).await
    }

    fn ctx(&self) -> Ctx {
        Ctx {
            config: self.config.clone(),
            hooks: self.hooks.clone(),
            log: self.log.clone(),
            stats: self.stats.clone(),
        }
    }

    fn check_response(&self, response: &ModelResponse) -> Result<(), RuntimeError> {
        if !self.step_open || self.step_answered {
            return Err(RuntimeError::Misuse(
                "a batch runs inside an open step, once per step".into(),
            ));
        }
        if response.tool_calls.len() > self.config.calls_per_batch_max {
            return Err(RuntimeError::InvalidResponse(format!(
                "{} tool calls in one message; the limit is {}",
                response.tool_calls.len(),
                self.config.calls_per_batch_max
            )));
        }
        let mut seen = HashSet::new();
        for call in &response.tool_calls {
            if call.call_id.is_empty() {
                return Err(RuntimeError::InvalidResponse(format!(
                    "a call to {:?} has an empty call id",
                    call.name
                )));
            }
            if !seen.insert(call.call_id.as_str()) {
                return Err(RuntimeError::InvalidResponse(format!(
                    "call id {:?} appears twice in one message",
                    call.call_id
                )));
            }
        }
        Ok(())
    }

    /// received → parsed → approved, or → rejected: everything up to the decision to run.
    async fn plan(
        &mut self,
        track: &mut Track,
        raw: &str,
        stop_reason: StopReason,
        cancel: &CancellationToken,
    ) -> Result<(), RuntimeError> {
        if stop_reason == StopReason::Length {
            return self.reject(
                track,
                ErrorCode::TruncatedCall,
                "the assistant message was cut off at the model's length limit; no call in it \
                 runs, because its arguments may be incomplete even where they parse"
                    .into(),
            );
        }
        let entry = match self.registry.lookup(&track.tool) {
            Some(entry) if self.step_visible.contains(&track.tool) => entry,
            Some(entry) if entry.exposure == Exposure::Deferred => {
                let reason = format!(
                    "tool {:?} is not loaded in this step: find it with {} first; it can be \
                     called from the step after",
                    track.tool,
                    search::NAME
                );
                return self.reject(track, ErrorCode::UnknownTool, reason);
            }
            _ => {
                let reason = format!("no tool named {:?} is available", track.tool);
                return self.reject(track, ErrorCode::UnknownTool, reason);
            }
        };
        track.entry = Some(entry.clone());
        let args = match args::parse(raw) {
            Ok(args) => args,
            Err(e) => return self.reject(track, ErrorCode::SyntaxError, e.to_string()),
        };
        if let Err(v) = entry.input.check(args.value()) {
            let reason = format!(
                "arguments do not match the input schema of {}: {v}",
                track.tool
            );
            return self.reject(track, ErrorCode::SchemaError, reason);
        }
        let call = track.call().clone();
        track.transition(&self.log, CallState::Parsed, 0, |source_seqs| {
            Event::Parsed {
                call: call.clone(),
                arguments: args.canonical().to_owned(),
                source_seqs,
            }
        })?;
        // Frozen from here on: every listener gets a clone of the same immutable arguments.
        let info = CallInfo {
            call: call.clone(),
            tool: track.tool.clone(),
            source: entry.source.clone(),
            read_only: entry.tool.is_read_only(),
            args,
        };
        track.info = Some(info.clone());

        let approval = match self.pre_execute(&info) {
            (Decision::Deny { reason }, by) => {
                let by = by.unwrap_or_else(|| "the session's default".to_owned());
                return self.reject(
                    track,
                    ErrorCode::PolicyDenied,
                    format!("denied by {by}: {reason}"),
                );
            }
            (Decision::Ask { reason }, _) => match self.ask(track, &info, &reason, cancel).await? {
                Asked::Approved(approval) => approval,
                Asked::Refused(denial) => {
                    return self.reject(track, ErrorCode::PolicyDenied, denial)
                }
                Asked::Stopped => {
                    return scheduler::cancel_before_start(
                        &self.ctx(),
                        track,
                        "the batch was stopped while this call waited for approval",
                    )
                }
            },
            (_, None) => Approval::Default,
            (_, Some(name)) => Approval::Listener { name },
        };
        for guard in &self.hooks.guards {
            let verdict = catch_unwind(AssertUnwindSafe(|| guard.check(&info)));
            let denial = match verdict {
                Ok(None) => continue,
                Ok(Some(reason)) => reason,
                Err(panic) => format!("the guard failed ({})", panic_message(panic.as_ref())),
            };
            let reason = format!("guard {}: {denial}", guard.name());
            return self.reject(track, ErrorCode::PolicyDenied, reason);
        }
        track.transition(&self.log, CallState::Approved, 0, |source_seqs| {
            Event::Approved {
                call,
                approval,
                source_seqs,
            }
        })?;
        Ok(())
    }

    /// The pre-execute chain: the first listener that decides wins. Returns the decision and
    /// the listener that made it (`None`: no listener decided, the session's default applies).
    /// A listener that panics denies (fail closed).
    fn pre_execute(&self, info: &CallInfo) -> (Decision, Option<String>) {
        // Plan mode comes before every listener: no listener's allow can let a write through
        // while the plan is unapproved.
        if self.plan_mode && !info.read_only {
            let reason = format!(
                "plan mode is on: only read-only tools run until the plan is approved (an ask \
                 answered allow); {} changes the world",
                info.tool
            );
            return (Decision::Deny { reason }, Some(PLAN_MODE_POLICY.to_owned()));
        }
        // The built-in `ask` is a question for the user: it goes to the approver whatever the
        // listeners would say, so neither an allow-all listener nor a missing approver can
        // turn it into a "yes" nobody gave.
        if info.tool == "ask" && info.source == crate::event::ToolSource::BuiltIn {
            let reason = info
                .args
                .str("question")
                .unwrap_or("(no question)")
                .to_owned();
            return (Decision::Ask { reason }, Some(ASK_TOOL_POLICY.to_owned()));
        }
        for listener in &self.hooks.pre_execute {
            let decision = match catch_unwind(AssertUnwindSafe(|| listener.decide(info))) {
                Ok(Decision::Pass) => continue,
                Ok(decision) => decision,
                Err(panic) => Decision::Deny {
                    reason: format!("the listener failed ({})", panic_message(panic.as_ref())),
                },
            };
            return (decision, Some(listener.name().to_owned()));
        }
        let decision = if self.config.default_allow {
            Decision::Allow
        } else {
            Decision::Deny {
                reason: "no policy allowed this call".into(),
            }
        };
        (decision, None)
    }

    /// An `Ask`: journaled as a question and its answer. Only an "allowed" answer approves.
    async fn ask(
        &mut self,
        track: &mut Track,
        info: &CallInfo,
        reason: &str,
        cancel: &CancellationToken,
    ) -> Result<Asked, RuntimeError> {
        if self.always_allowed.contains(&info.tool) {
            return Ok(Asked::Approved(Approval::AlwaysAllowed));
        }
        let call = info.call.clone();
        // Ask events are the call's events too: what follows points back at the answer.
        track.last_seq = self.log.append(&Event::AskPending {
            call: call.clone(),
            question: reason.to_owned(),
        })?;
        let Some(approver) = self.hooks.approver.clone() else {
            track.last_seq = self.log.append(&Event::AskCancelled {
                call,
                reason: "no approver is configured".into(),
            })?;
            return Ok(Asked::Refused(format!(
                "approval needed ({reason}) but no one is there to answer"
            )));
        };
        let answer = tokio::select! {
            answer = approver.ask(info.clone(), reason.to_owned()) => answer,
            _ = cancel.cancelled() => {
                // Withdrawn, never taken as answered.
                track.last_seq = self.log.append(&Event::AskCancelled {
                    call,
                    reason: "the batch was stopped".into(),
                })?;
                return Ok(Asked::Stopped);
            }
        };
        track.last_seq = self.log.append(&match answer {
            AskAnswer::Expired => Event::AskExpired { call },
            AskAnswer::Cancelled => Event::AskCancelled {
                call,
                reason: "the approver withdrew the question".into(),
            },
            answer => Event::AskAnswered { call, answer },
        })?;
        if answer.allows() && info.tool == "ask" && self.plan_mode {
            let reason = format!("the user approved the plan: {reason}");
            self.switch_plan_mode(false, &reason, Some(info.call.clone()))?;
        }
        Ok(match answer {
            AskAnswer::AllowedOnce => Asked::Approved(Approval::Asked { answer }),
            AskAnswer::AllowedAlways => {
                self.always_allowed.insert(info.tool.clone());
                Asked::Approved(Approval::Asked { answer })
            }
            AskAnswer::Denied => Asked::Refused(format!("the user denied it ({reason})")),
            AskAnswer::Expired => Asked::Refused(format!(
                "the question expired unanswered ({reason}); a timeout is never an approval"
            )),
            AskAnswer::Cancelled => {
                Asked::Refused(format!("the question was withdrawn ({reason})"))
            }
        })
    }

    /// → rejected, with the error result ready to commit.
    fn reject(
        &mut self,
        track: &mut Track,
        code: ErrorCode,
        reason: String,
    ) -> Result<(), RuntimeError> {
        let call = track.call().clone();
        track.transition(&self.log, CallState::Rejected, 0, |source_seqs| {
            Event::Rejected {
                call: call.clone(),
                code,
                reason: reason.clone(),
                source_seqs,
            }
        })?;
        track.set_error_result(code, reason);
        Ok(())
    }
}

/// What became of a question.
enum Asked {
    Approved(Approval),
    Refused(String),
    /// The batch was stopped while waiting.
    Stopped,
}
