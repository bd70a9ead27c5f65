//! A session: turns, steps, and the batch of calls in each step, every transition journaled.
//!
//! The durability plan (DESIGN.md §8): nothing waits for the disk except a tool start. The
//! `llm/response` of a step and the `received`, `parsed`, `approved` records of its calls ride
//! on the sync of the first `started`; each later `started` syncs whatever came before it
//! (earlier calls' `settled` included); `committed` records ride on the next sync, at the
//! latest the one at `turn/end`. A sequential agent loop costs one fsync per step.
//!
//! This module keeps the session's lifecycle (open, resume, turns, steps, close) and receives
//! each batch; `admit` decides, call by call in model order, whether a call may run; the
//! scheduler then runs the admitted calls of a batch in parallel up to `parallel_max` (exclusive
//! calls alone, calls on one path in model order) and commits results in model order as soon as
//! every earlier call is committed.
//!
//! Dependencies go one way: session → scheduler → pipeline → track, config, stats.

mod admit;
mod model_io;
mod phase;
mod rerun;

pub use crate::config::{Config, SessionOptions};
pub use crate::stats::Stats;
use admit::Asking;
pub use admit::ASK_TOOL;
pub use phase::Phase;

use crate::code::ErrorCode;
use crate::event::{
    CallRef, Event, ModelResponse, SessionOpen, StepOutcome, TurnOutcome, EVENT_SCHEMA_VERSION,
};
use crate::eventlog::EventLog;
use crate::hooks::Hooks;
use crate::pipeline::Ctx;
use crate::registry::{Entry, Exposure, Registry};
use crate::result::ToolResult;
use crate::scheduler;
use crate::tools::search::{CatalogEntry, Loaded, ToolSearch};
use crate::track::Track;
use crate::RuntimeError;
use journal::Journal;
use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Up to this many calls in a message, duplicate call ids are found by comparing pairs.
const DUPLICATE_SCAN_CALLS_MAX: usize = 16;

/// What came with a model's response besides the message, journaled right after its
/// `llm/response` and before any of its calls: `llm/response-detail`, then `llm/refusal` (when
/// the stop reason is `refusal`), then the `llm/note`s.
#[derive(Debug, Clone, Default)]
pub struct ResponseDetails {
    /// Usage, the response's id, provider state.
    pub detail: Option<crate::event::LlmResponseDetail>,
    /// Why the answer was refused.
    pub refusal: Option<crate::event::LlmRefusal>,
    /// What the adapter noticed.
    pub notes: Vec<crate::event::LlmNote>,
}

/// A live session over one journal.
pub struct Session {
    log: EventLog,
    registry: Arc<Registry>,
    hooks: Arc<Hooks>,
    config: Arc<Config>,
    /// Shared with every batch's [`Ctx`] (no copy per batch).
    session_id: Arc<str>,
    turn: u32,
    step: u32,
    /// Which of the turn and step is open.
    phase: Phase,
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
    /// What the journal's `tool/schema` records say of each (tool name, schema hash): its
    /// description. A tool is recorded again only when that changes.
    recorded_schemas: std::collections::HashMap<(String, String), String>,
    /// The last `session/model`, to write it again only when it changes.
    recorded_model: Option<crate::event::SessionModel>,
    /// Calls of the crashed run a resume runs again before anything else
    /// ([`Session::run_rerun`]). Boxed as the scheduler holds them (see its `Slot`).
    #[allow(clippy::vec_box)]
    rerun: Vec<Box<Track>>,
}

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

/// A second `session/open` would make the journal unreadable for recovery: a journal holds one
/// session, from its first record. `records` is how many the journal holds.
pub(crate) fn refuse_a_session(records: u64, location: &str) -> Result<(), RuntimeError> {
    if records != 0 {
        return Err(RuntimeError::JournalMoved(format!(
            "{location}: the journal already holds {records} records of a session: resume it instead"
        )));
    }
    Ok(())
}

/// Whether the replayed session can be continued: there is one, it is not closed, and no turn
/// is open (an interrupted session must be recovered first). Returns its `session/open`.
pub(crate) fn resumable(
    replay: &crate::replay::SessionReplay,
) -> Result<&SessionOpen, RuntimeError> {
    continuable(replay, false)
}

/// [`resumable`], for a session that is closed (`reopening`: it must be) or not (it must not).
pub(crate) fn continuable(
    replay: &crate::replay::SessionReplay,
    reopening: bool,
) -> Result<&SessionOpen, RuntimeError> {
    let Some(open) = &replay.open else {
        return Err(RuntimeError::Misuse("the journal holds no session".into()));
    };
    match (replay.closed, reopening) {
        (true, false) => return Err(RuntimeError::Misuse("the session is closed".into())),
        (false, true) => {
            return Err(RuntimeError::Misuse(
                "the session is not closed: resume it instead of reopening it".into(),
            ))
        }
        _ => {}
    }
    // Its calls were run by another agent: nothing this runtime would append could be told
    // apart from the import, and the import is a record, not a session to go on with.
    if let Some(source) = &replay.imported {
        return Err(RuntimeError::Misuse(format!(
            "the journal was imported from {}'s session file {}: it is a record of that \
             session and cannot be resumed here",
            source.agent, source.file
        )));
    }
    if let Some(turn) = replay.open_turn() {
        return Err(RuntimeError::Misuse(format!(
            "turn {} is still open: the session was interrupted; recover it first",
            turn.turn
        )));
    }
    Ok(open)
}

/// What `open` and `resume` both hand to a new `Session`.
struct Parts {
    log: EventLog,
    registry: Arc<Registry>,
    hooks: Hooks,
    config: Config,
    loaded: Arc<Loaded>,
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
        config.check()?;
        refuse_a_session(journal.stats().appended_seq, &journal.location())?;
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
        let parts = Parts {
            log,
            registry,
            hooks,
            config,
            loaded,
        };
        let mut session = Session::assemble(parts, session_id, 0, false);
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

    /// Journals the sandbox the session's commands run under (`session/sandbox`): once when
    /// it opens or resumes (the session builder does), before any call runs.
    pub fn record_sandbox(
        &mut self,
        bound: &crate::event::SandboxBound,
    ) -> Result<(), RuntimeError> {
        self.log.append(&Event::SessionSandbox(bound.clone()))?;
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

    /// Whether plan mode is on (only read-only tools run).
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

    /// The id recorded in `session/open`.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The session's counters of failures that changed no result.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The log the session appends to (and its journal).
    pub fn event_log(&self) -> &EventLog {
        &self.log
    }

    /// The current (or last) turn number; 0 before the first.
    pub fn turn(&self) -> u32 {
        self.turn
    }

    /// Whether a turn is open (begun and not yet ended).
    pub fn turn_open(&self) -> bool {
        self.phase.turn_open()
    }

    /// Where the session stands: between turns, in a turn, or in a step.
    pub fn phase(&self) -> Phase {
        self.phase
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
        resumable(replay)?;
        Session::continue_from(journal, registry, hooks, config, options, replay)
    }

    /// Continues a finished session (its journal ends with `session/close`): appends
    /// `session/reopen`, then goes on as [`Session::resume`] does, its next turn the one after
    /// its last. An imported journal is refused as `resume` refuses it.
    pub fn reopen(
        journal: Journal,
        registry: Arc<Registry>,
        hooks: Hooks,
        config: Config,
        options: SessionOptions,
        replay: &crate::replay::SessionReplay,
    ) -> Result<Session, RuntimeError> {
        continuable(replay, true)?;
        let session = Session::continue_from(journal, registry, hooks, config, options, replay)?;
        session.log.append(&Event::SessionReopen)?;
        Ok(session)
    }

    /// The session the journal holds, after its last event (checked by the caller): the
    /// journal must end where it was replayed.
    fn continue_from(
        journal: Journal,
        registry: Arc<Registry>,
        hooks: Hooks,
        config: Config,
        options: SessionOptions,
        replay: &crate::replay::SessionReplay,
    ) -> Result<Session, RuntimeError> {
        config.check()?;
        let Some(open) = &replay.open else {
            return Err(RuntimeError::Misuse("the journal holds no session".into()));
        };
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
        let parts = Parts {
            log,
            registry,
            hooks,
            config,
            loaded,
        };
        let turn = replay.turns.len() as u32;
        let mut session = Session::assemble(parts, open.session_id.clone(), turn, replay.plan_mode);
        session.recorded_schemas = replay
            .tool_schemas
            .iter()
            .map(|(key, schema)| (key.clone(), schema.description.clone()))
            .collect();
        session.recorded_model = replay.model.clone();
        Ok(session)
    }

    /// A session between turns: after `turn` turns, with no step open.
    fn assemble(parts: Parts, session_id: String, turn: u32, plan_mode: bool) -> Session {
        Session {
            log: parts.log,
            registry: parts.registry,
            hooks: Arc::new(parts.hooks),
            config: Arc::new(parts.config),
            session_id: session_id.into(),
            turn,
            step: 0,
            phase: Phase::Idle,
            always_allowed: HashSet::new(),
            stats: Arc::new(Stats::default()),
            loaded: parts.loaded,
            step_visible: BTreeSet::new(),
            step_tools: None,
            plan_mode,
            recorded_schemas: std::collections::HashMap::new(),
            recorded_model: None,
            rerun: Vec::new(),
        }
    }

    /// Opens a turn with the user's message.
    pub fn begin_turn(&mut self, user_text: &str) -> Result<u32, RuntimeError> {
        self.phase.begin_turn(self.turn)?;
        self.turn += 1;
        self.step = 0;
        self.log.append(&Event::TurnStart {
            turn: self.turn,
            user_text: user_text.to_owned(),
        })?;
        Ok(self.turn)
    }

    /// Opens a step: one model request and the calls it asks for.
    pub fn begin_step(&mut self) -> Result<u32, RuntimeError> {
        self.phase.begin_step()?;
        self.step += 1;
        self.log.append(&Event::StepStart {
            turn: self.turn,
            step: self.step,
        })?;
        // The step's tool set is fixed here, before the model answers: a tool loaded during
        // the step is shown from the next one. The loaded set only grows, so its size says
        // whether the cached set is still the one.
        let loaded = self.loaded.len();
        let (turn, step) = (self.turn, self.step);
        // Updated where it is kept, not taken out and put back (an event is ~300 bytes).
        match &mut self.step_tools {
            Some((
                n,
                Event::StepTools {
                    turn: t, step: s, ..
                },
            )) if *n == loaded => {
                (*t, *s) = (turn, step);
            }
            _ => {
                self.step_tools = None;
                let tools = self.registry.visible(&self.loaded.snapshot());
                self.step_visible = tools.iter().map(|t| t.name.clone()).collect();
                self.record_schemas(&tools)?;
                self.step_tools = Some((loaded, Event::StepTools { turn, step, tools }));
            }
        }
        // Always there: both arms above leave it set.
        if let Some((_, event)) = &self.step_tools {
            self.log.append(event)?;
        }
        Ok(self.step)
    }

    /// Closes the open step with its outcome (`step/end`).
    pub fn end_step(&mut self, outcome: StepOutcome) -> Result<(), RuntimeError> {
        self.phase.end_step()?;
        self.log.append(&Event::StepEnd {
            turn: self.turn,
            step: self.step,
            outcome,
        })?;
        Ok(())
    }

    /// Closes the turn and makes everything before it durable.
    pub async fn end_turn(&mut self, outcome: TurnOutcome) -> Result<(), RuntimeError> {
        self.phase.end_turn()?;
        let seq = self.log.append(&Event::TurnEnd {
            turn: self.turn,
            outcome,
        })?;
        self.log.sync_through(seq).await
    }

    /// Records `session/close`, makes the journal durable and closes it.
    pub async fn close(self) -> Result<(), RuntimeError> {
        self.phase.check_idle(self.turn)?;
        let seq = self.log.append(&Event::SessionClose)?;
        self.log.sync_through(seq).await?;
        // `finish`, not `close`: the log's journal is shared (the printer watches it, the
        // scheduler's calls hold the log), so it cannot be taken out of its `Arc` here. Its
        // lock goes when the last holder drops it.
        self.log.journal().finish()?;
        Ok(())
    }

    /// Runs the calls of one assistant message and returns exactly one result per call id, in
    /// model order (I3). See [`Session::run_batch_cancellable`].
    ///
    /// This and `run_batch_cancellable` hand back [`Session::run_response`]'s future itself:
    /// as `async fn`s each wrapped it in a future of its own, a few KB copied per step.
    pub fn run_batch(
        &mut self,
        response: ModelResponse,
    ) -> impl Future<Output = Result<Vec<ToolResult>, RuntimeError>> + '_ {
        self.run_batch_cancellable(response, CancellationToken::new())
    }

    /// Runs a batch that `cancel` can stop (the user pressed stop): nothing starts after it,
    /// running calls are signalled and awaited, calls that never started get
    /// `ABORTED_BEFORE_DISPATCH`. Each call's `started` is durable before its body runs (I1);
    /// a journal failure stops the batch and nothing starts after it (I10).
    pub fn run_batch_cancellable(
        &mut self,
        response: ModelResponse,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<Vec<ToolResult>, RuntimeError>> + '_ {
        self.run_response(response, ResponseDetails::default(), cancel)
    }

    /// [`Session::run_batch_cancellable`], with what came with the response
    /// (`ResponseDetails`) journaled right after its `llm/response`, before any call.
    pub fn run_response(
        &mut self,
        response: ModelResponse,
        details: ResponseDetails,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<Vec<ToolResult>, RuntimeError>> + '_ {
        // Boxed, and only when there is any: the batch's future keeps its arguments for its whole
        // life, and is moved whole on every await that holds it (~200 bytes for nothing, per step).
        let details =
            (details.detail.is_some() || details.refusal.is_some() || !details.notes.is_empty())
                .then(|| Box::new(details));
        self.respond(response, details, cancel)
    }

    /// [`Session::run_response`]: the calls received and admitted in model order (a call waits
    /// here only while a person is asked about it), then run by the scheduler.
    async fn respond(
        &mut self,
        response: ModelResponse,
        details: Option<Box<ResponseDetails>>,
        cancel: CancellationToken,
    ) -> Result<Vec<ToolResult>, RuntimeError> {
        let mut receiving = self.answer(response, details)?;
        while let Some((mut track, asking)) = self.receive(&mut receiving, &cancel)? {
            // Boxed: this batch's future would otherwise carry the asking's for every call.
            Box::pin(self.plan_asking(&mut track, asking, &cancel)).await?;
            receiving.tracks.push(track);
        }
        scheduler::run(&self.ctx(), receiving.tracks, &cancel).await
    }

    /// Journals the response (`llm/response`, then what came with it) and readies its calls to
    /// be received. Not async, as [`Session::receive`]: what they keep on the stack is not
    /// carried by the batch's future while its calls run.
    fn answer(
        &mut self,
        response: ModelResponse,
        details: Option<Box<ResponseDetails>>,
    ) -> Result<Receiving, RuntimeError> {
        self.check_response(&response)?;
        self.phase.answer()?;
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
        if let Some(details) = details {
            let ResponseDetails {
                detail,
                refusal,
                notes,
            } = *details;
            if let Some(detail) = detail {
                self.log.append(&Event::LlmResponseDetail(detail))?;
            }
            if let Some(refusal) = refusal {
                self.log.append(&Event::LlmRefusal(refusal))?;
            }
            for note in notes {
                self.log.append(&Event::LlmNote(note))?;
            }
        }
        let calls = response.tool_calls.len();
        Ok(Receiving {
            turn,
            step,
            response_seq,
            stop_reason: response.stop_reason,
            calls,
            next: 0,
            rest: response.tool_calls.into_iter(),
            tracks: Vec::with_capacity(calls),
        })
    }

    /// Receives the response's calls in model order (`received`) and admits each, up to the
    /// first whose approval waits for a person: that one is returned with its asking, for
    /// [`Session::plan_asking`]; `None` once every call is received.
    fn receive(
        &mut self,
        receiving: &mut Receiving,
        cancel: &CancellationToken,
    ) -> Result<Option<(Box<Track>, Asking)>, RuntimeError> {
        let Receiving {
            turn,
            step,
            response_seq,
            stop_reason,
            calls,
            ..
        } = *receiving;
        // The calls past the limit are journaled and answered, never run: the message is the
        // model's, and dropping it would leave the session with no record of what it asked.
        let calls_max = self.config.calls_per_batch_max;
        // Each call's text moves into its `received` and back out, as the response's did.
        for model_call in receiving.rest.by_ref() {
            let index = receiving.next;
            receiving.next += 1;
            let event = Event::Received {
                call: CallRef {
                    turn,
                    step,
                    call_id: model_call.call_id,
                },
                index: index as u32,
                tool: model_call.name,
                raw_arguments: model_call.arguments,
                source_seqs: vec![response_seq],
            };
            let seq = self.log.append(&event)?;
            let Event::Received {
                call,
                tool,
                raw_arguments,
                source_seqs,
                ..
            } = event
            else {
                unreachable!("built as received just above")
            };
            let mut track = Track::received(call, seq, tool, source_seqs);
            if index >= calls_max {
                self.reject(
                    &mut track,
                    ErrorCode::TooManyCalls,
                    too_many(calls, calls_max),
                )?;
            } else if cancel.is_cancelled() {
                scheduler::cancel_before_start(
                    &self.ctx(),
                    &mut track,
                    "the batch was stopped before this call started",
                )?;
            } else if let Some(asking) = self.plan(&mut track, raw_arguments, stop_reason)? {
                return Ok(Some((track, asking)));
            }
            receiving.tracks.push(track);
        }
        Ok(None)
    }

    fn ctx(&self) -> Ctx {
        Ctx {
            session_id: self.session_id.clone(),
            config: self.config.clone(),
            hooks: self.hooks.clone(),
            log: self.log.clone(),
            stats: self.stats.clone(),
        }
    }

    fn check_response(&self, response: &ModelResponse) -> Result<(), RuntimeError> {
        self.phase.check_batch()?;
        // Duplicates by pairwise comparison up to a few calls (no set to build per batch), by
        // a set beyond.
        let mut seen = HashSet::new();
        let small = response.tool_calls.len() <= DUPLICATE_SCAN_CALLS_MAX;
        for (i, call) in response.tool_calls.iter().enumerate() {
            if call.call_id.is_empty() {
                return Err(RuntimeError::InvalidResponse(format!(
                    "a call to {:?} has an empty call id",
                    call.name
                )));
            }
            let repeated = if small {
                response.tool_calls[..i]
                    .iter()
                    .any(|earlier| earlier.call_id == call.call_id)
            } else {
                !seen.insert(call.call_id.as_str())
            };
            if repeated {
                return Err(RuntimeError::InvalidResponse(format!(
                    "call id {:?} appears twice in one message",
                    call.call_id
                )));
            }
        }
        Ok(())
    }
}

/// A response's calls being received ([`Session::receive`]).
struct Receiving {
    turn: u32,
    step: u32,
    /// The `llm/response` every `received` follows.
    response_seq: u64,
    stop_reason: crate::event::StopReason,
    /// How many calls the response holds.
    calls: usize,
    /// The index (model order) of the next call.
    next: usize,
    rest: std::vec::IntoIter<crate::event::ModelCall>,
    /// The calls received so far, admitted or answered; boxed as the scheduler holds them.
    #[allow(clippy::vec_box)]
    tracks: Vec<Box<Track>>,
}

/// Why a call past the runtime's number per message is not run, in words the model reads.
fn too_many(calls: usize, calls_max: usize) -> String {
    format!(
        "the message asked for {calls} calls; at most {calls_max} of one message run, the \
         first {calls_max} in its order, and this one is past them: it did not run. Ask for it \
         again in a later message"
    )
}
