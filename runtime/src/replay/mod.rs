//! Replay: fold a journal back into per-session, per-call state.
//!
//! This is how `recover` learns what happened, so it is strict: every event must fit where it
//! lands (a call's events follow its state machine and point back at its previous event; steps
//! and turns open and close in order). Anything that does not fit is an error naming the
//! record's seq and position, never a silent skip: a journal that checksums fine but does not
//! make sense is corrupt too.

use crate::code::ErrorCode;
use crate::event::{
    declared_schema, Approval, AskAnswer, CallRef, CommittedResult, Event, ModelResponse, Outcome,
    PlanItem, ProcessStarted, Record, Recovery, Resources, SessionOpen, SideEffect, StepOutcome,
    TurnOutcome, VisibleTool, EVENT_SCHEMA_VERSION,
};
use crate::state::{CallMachine, CallState, IllegalTransition};
use journal::{JournalError, Limits, Position, ReadEnd, Reader, Storage};
use std::sync::Arc;

/// Why a journal could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("record seq {seq} at {position}: unknown event type {index}")]
    UnknownEventType {
        seq: u64,
        position: Position,
        index: u32,
    },
    #[error("record seq {seq} at {position}: payload does not decode as an event: {message}")]
    Undecodable {
        seq: u64,
        position: Position,
        message: String,
    },
    /// A payload that does not decode, in a journal whose `session/open` declares a newer event
    /// schema than this build's: not corruption, an event or variant this build does not know.
    #[error("record seq {seq} at {position}: written by a newer tooljournal (schema {schema} > {known}): {message}")]
    NewerSchema {
        seq: u64,
        position: Position,
        schema: u32,
        known: u32,
        message: String,
    },
    #[error("record seq {seq} at {position} ({kind}): {message}")]
    Inconsistent {
        seq: u64,
        position: Position,
        kind: &'static str,
        message: String,
    },
    #[error("record seq {seq} at {position}: {source}")]
    IllegalTransition {
        seq: u64,
        position: Position,
        source: IllegalTransition,
    },
}

/// A question asked about a call, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRecord {
    pub question: String,
    /// `None` while pending.
    pub answer: Option<AskAnswer>,
    pub cancel_reason: Option<String>,
}

/// Everything the journal says about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReplay {
    pub call: CallRef,
    pub index: u32,
    pub tool: String,
    pub raw_arguments: String,
    pub state: CallState,
    pub attempts: u32,
    pub arguments: Option<String>,
    pub approval: Option<Approval>,
    pub rejection: Option<(ErrorCode, String)>,
    pub cancel_reason: Option<String>,
    pub resources: Option<Resources>,
    pub outcome: Option<Outcome>,
    pub committed: Option<CommittedResult>,
    pub asks: Vec<AskRecord>,
    /// Process groups the call started (`call/process`).
    pub processes: Vec<ProcessStarted>,
    /// Every event of the call, in order.
    pub seqs: Vec<u64>,
    pub received_at_ms: u64,
    pub started_at_ms: Option<u64>,
    pub settled_at_ms: Option<u64>,
    /// Committed by a `recovery` event rather than by the runtime.
    pub recovered: bool,
    machine: CallMachine,
}

impl CallReplay {
    /// A call as `received` makes it (its event seqs still to be added).
    fn received(
        call: CallRef,
        index: u32,
        tool: String,
        raw_arguments: String,
        at_ms: u64,
    ) -> CallReplay {
        CallReplay {
            machine: CallMachine::received(call.clone()),
            call,
            index,
            tool,
            raw_arguments,
            state: CallState::Received,
            attempts: 0,
            arguments: None,
            approval: None,
            rejection: None,
            cancel_reason: None,
            resources: None,
            outcome: None,
            committed: None,
            asks: Vec::new(),
            processes: Vec::new(),
            seqs: Vec::new(),
            received_at_ms: at_ms,
            started_at_ms: None,
            settled_at_ms: None,
            recovered: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepReplay {
    pub step: u32,
    /// The tools the model was shown (`step/tools`), when the journal says.
    pub tools: Option<Vec<VisibleTool>>,
    pub response: Option<ModelResponse>,
    pub outcome: Option<StepOutcome>,
    pub calls: Vec<CallReplay>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnReplay {
    pub turn: u32,
    pub user_text: String,
    pub outcome: Option<TurnOutcome>,
    pub steps: Vec<StepReplay>,
}

/// A session as its journal tells it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionReplay {
    pub open: Option<SessionOpen>,
    pub closed: bool,
    pub turns: Vec<TurnReplay>,
    pub plan: Option<Vec<PlanItem>>,
    /// Whether plan mode was on at the end of the journal.
    pub plan_mode: bool,
    /// Process groups a resume killed (`process/killed`).
    pub killed_groups: Vec<u32>,
    /// The latest `session/policy`; None for a journal written before it existed (schema 1).
    pub policy: Option<crate::event::SessionPolicy>,
    /// Deferred tools `tool_search` loaded: visible in every later step.
    pub loaded_tools: std::collections::BTreeSet<String>,
    pub faults: Vec<(u32, u32, String)>,
    pub recoveries: Vec<Recovery>,
    pub last_seq: u64,
}

impl SessionReplay {
    /// Every call, in journal order.
    pub fn calls(&self) -> impl Iterator<Item = &CallReplay> {
        self.turns
            .iter()
            .flat_map(|t| t.steps.iter())
            .flat_map(|s| s.calls.iter())
    }

    pub fn call(&self, call: &CallRef) -> Option<&CallReplay> {
        self.turns
            .get(call.turn.checked_sub(1)? as usize)?
            .steps
            .get(call.step.checked_sub(1)? as usize)?
            .calls
            .iter()
            .find(|c| c.call.call_id == call.call_id)
    }

    /// The turn left open (no `turn/end`), if any.
    pub fn open_turn(&self) -> Option<&TurnReplay> {
        self.turns.last().filter(|t| t.outcome.is_none())
    }

    /// Process groups started by calls that never settled and that no resume killed: they may
    /// still run ([`crate::process::still_running`] says whether they do).
    pub fn unsettled_processes(&self) -> Vec<(CallRef, ProcessStarted)> {
        self.calls()
            .filter(|c| c.outcome.is_none())
            .flat_map(|c| c.processes.iter().map(|p| (c.call.clone(), p.clone())))
            .filter(|(_, p)| !self.killed_groups.contains(&p.pgid))
            .collect()
    }
}

/// Folds records one at a time.
#[derive(Debug, Default)]
pub struct Replayer {
    replay: SessionReplay,
    decoder: EventDecoder,
}

/// Decodes a journal's records as events, one at a time in seq order, by the versioning rule
/// of docs/FORMAT.md: the first record's prefix declares the journal's event schema; a payload
/// that does not decode is [`ReplayError::NewerSchema`] when that schema is newer than
/// [`EVENT_SCHEMA_VERSION`], and corruption ([`ReplayError::UnknownEventType`],
/// [`ReplayError::Undecodable`]) otherwise.
#[derive(Debug, Default, Clone)]
pub struct EventDecoder {
    first_seen: bool,
    schema: Option<u32>,
}

impl EventDecoder {
    pub fn new() -> EventDecoder {
        EventDecoder::default()
    }

    /// The schema the journal's first record declared (`None` before it, or when it is not a
    /// `session/open`).
    pub fn schema(&self) -> Option<u32> {
        self.schema
    }

    /// Decodes the next record (records must come in seq order, from the first).
    pub fn decode(&mut self, record: journal::RecordRef<'_>) -> Result<Record, ReplayError> {
        if !self.first_seen {
            self.first_seen = true;
            self.schema = declared_schema(record.payload);
        }
        record.decode::<Record>().map_err(|e| {
            if let Some(schema) = self.schema.filter(|&s| s > EVENT_SCHEMA_VERSION) {
                return ReplayError::NewerSchema {
                    seq: record.seq,
                    position: record.position,
                    schema,
                    known: EVENT_SCHEMA_VERSION,
                    message: e.message,
                };
            }
            let index = record
                .payload
                .get(8..12)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes);
            match index {
                Some(index) if index >= Event::VARIANT_COUNT => ReplayError::UnknownEventType {
                    seq: record.seq,
                    position: record.position,
                    index,
                },
                _ => ReplayError::Undecodable {
                    seq: record.seq,
                    position: record.position,
                    message: e.message,
                },
            }
        })
    }
}

impl Replayer {
    pub fn new() -> Replayer {
        Replayer::default()
    }

    /// Decodes and applies one journal record.
    pub fn apply(&mut self, record: &journal::Record) -> Result<(), ReplayError> {
        let decoded = self.decoder.decode(record.as_ref())?;
        self.apply_event(record.seq, record.position, decoded.at_ms, decoded.event)
    }

    pub fn finish(self) -> SessionReplay {
        self.replay
    }

    pub fn state(&self) -> &SessionReplay {
        &self.replay
    }

    fn apply_event(
        &mut self,
        seq: u64,
        position: Position,
        at_ms: u64,
        event: Event,
    ) -> Result<(), ReplayError> {
        let kind = event.kind();
        let bad = |message: String| ReplayError::Inconsistent {
            seq,
            position,
            kind,
            message,
        };
        let r = &mut self.replay;
        r.last_seq = seq;
        if r.open.is_none() && !matches!(event, Event::SessionOpen(_)) {
            return Err(bad("the journal does not begin with session/open".into()));
        }
        if r.closed {
            return Err(bad("event after session/close".into()));
        }
        match event {
            Event::SessionOpen(open) => {
                if r.open.is_some() {
                    return Err(bad("a second session/open".into()));
                }
                r.open = Some(open);
            }
            Event::TurnStart { turn, user_text } => {
                if r.open_turn().is_some() {
                    return Err(bad("turn/start while a turn is open".into()));
                }
                if turn as usize != r.turns.len() + 1 {
                    return Err(bad(format!("turn {turn} after turn {}", r.turns.len())));
                }
                r.turns.push(TurnReplay {
                    turn,
                    user_text,
                    outcome: None,
                    steps: Vec::new(),
                });
            }
            Event::StepStart { turn, step } => {
                let t = open_turn_mut(r, turn).map_err(bad)?;
                if t.steps.last().is_some_and(|s| s.outcome.is_none()) {
                    return Err(bad("step/start while a step is open".into()));
                }
                if step as usize != t.steps.len() + 1 {
                    return Err(bad(format!("step {step} after step {}", t.steps.len())));
                }
                t.steps.push(StepReplay {
                    step,
                    tools: None,
                    response: None,
                    outcome: None,
                    calls: Vec::new(),
                });
            }
            Event::LlmResponse {
                turn,
                step,
                response,
            } => {
                let s = open_step_mut(r, turn, step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad("a second llm/response in one step".into()));
                }
                s.response = Some(response);
            }
            Event::StepEnd {
                turn,
                step,
                outcome,
            } => {
                let s = open_step_mut(r, turn, step).map_err(bad)?;
                s.outcome = Some(outcome);
            }
            Event::TurnEnd { turn, outcome } => {
                let t = open_turn_mut(r, turn).map_err(bad)?;
                if t.steps.last().is_some_and(|s| s.outcome.is_none()) {
                    return Err(bad("turn/end while a step is open".into()));
                }
                t.outcome = Some(outcome);
            }
            Event::SessionClose => {
                if r.open_turn().is_some() {
                    return Err(bad("session/close while a turn is open".into()));
                }
                r.closed = true;
            }
            Event::Received {
                call,
                index,
                tool,
                raw_arguments,
                source_seqs,
            } => {
                let s = open_step_mut(r, call.turn, call.step).map_err(bad)?;
                let Some(response) = &s.response else {
                    return Err(bad("a call received before the step's llm/response".into()));
                };
                let expected = response.tool_calls.get(index as usize);
                if expected.is_none_or(|m| {
                    m.call_id != call.call_id || m.name != tool || m.arguments != raw_arguments
                }) || index as usize != s.calls.len()
                {
                    return Err(bad(format!(
                        "{call} does not match call {index} of the step's llm/response"
                    )));
                }
                if source_seqs.is_empty() || source_seqs.iter().any(|&s| s >= seq) {
                    return Err(bad(format!(
                        "{call}: source seqs {source_seqs:?} do not point back"
                    )));
                }
                let mut received = CallReplay::received(call, index, tool, raw_arguments, at_ms);
                received.seqs.push(seq);
                s.calls.push(received);
            }
            Event::Parsed {
                call,
                arguments,
                source_seqs,
            } => {
                let c = advance(r, &call, CallState::Parsed, 0, &source_seqs, seq, position)?;
                c.arguments = Some(arguments);
            }
            Event::Approved {
                call,
                approval,
                source_seqs,
            } => {
                let c = advance(
                    r,
                    &call,
                    CallState::Approved,
                    0,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.approval = Some(approval);
            }
            Event::Started {
                call,
                attempt,
                resources,
                source_seqs,
            } => {
                let c = advance(
                    r,
                    &call,
                    CallState::Started,
                    attempt,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.attempts = attempt;
                c.resources = Some(resources);
                c.started_at_ms.get_or_insert(at_ms);
            }
            Event::Settled {
                call,
                outcome,
                source_seqs,
            } => {
                let loaded: Vec<String> = outcome
                    .side_effects
                    .iter()
                    .flat_map(|e| match e {
                        SideEffect::ToolsLoaded { names } => names.clone(),
                        _ => Vec::new(),
                    })
                    .collect();
                let c = advance(r, &call, CallState::Settled, 0, &source_seqs, seq, position)?;
                c.outcome = Some(outcome);
                c.settled_at_ms = Some(at_ms);
                r.loaded_tools.extend(loaded);
            }
            Event::Committed {
                call,
                result,
                source_seqs,
            } => {
                let c = advance(
                    r,
                    &call,
                    CallState::Committed,
                    0,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.committed = Some(result);
            }
            Event::Rejected {
                call,
                code,
                reason,
                source_seqs,
            } => {
                let c = advance(
                    r,
                    &call,
                    CallState::Rejected,
                    0,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.rejection = Some((code, reason));
            }
            Event::CancelledBeforeStart {
                call,
                reason,
                source_seqs,
            } => {
                let c = advance(
                    r,
                    &call,
                    CallState::CancelledBeforeStart,
                    0,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.cancel_reason = Some(reason);
            }
            Event::AskPending { call, question } => {
                let c = find_call(r, &call).map_err(bad)?;
                if c.state != CallState::Parsed
                    || c.asks
                        .last()
                        .is_some_and(|a| a.answer.is_none() && a.cancel_reason.is_none())
                {
                    return Err(bad(format!("{call}: a question while {}", c.state)));
                }
                c.seqs.push(seq);
                c.asks.push(AskRecord {
                    question,
                    answer: None,
                    cancel_reason: None,
                });
            }
            Event::AskAnswered { call, answer } => {
                answer_ask(r, &call, Some(answer), None, seq).map_err(bad)?
            }
            Event::AskExpired { call } => {
                answer_ask(r, &call, Some(AskAnswer::Expired), None, seq).map_err(bad)?
            }
            Event::AskCancelled { call, reason } => {
                answer_ask(r, &call, Some(AskAnswer::Cancelled), Some(reason), seq).map_err(bad)?
            }
            Event::PlanReplace { items } => r.plan = Some(items),
            Event::StepTools { turn, step, tools } => {
                let s = open_step_mut(r, turn, step).map_err(bad)?;
                if s.tools.is_some() || s.response.is_some() {
                    return Err(bad(
                        "step/tools comes once per step, before its llm/response".into(),
                    ));
                }
                s.tools = Some(tools);
            }
            Event::PlanMode { on, call, .. } => {
                if let Some(call) = &call {
                    find_call(r, call).map_err(bad)?;
                }
                r.plan_mode = on;
            }
            Event::SessionPolicy(policy) => r.policy = Some(policy),
            Event::CallProcess { call, process } => {
                let c = find_call(r, &call).map_err(bad)?;
                if c.state != CallState::Started {
                    return Err(bad(format!(
                        "call/process for {call}, which is {} (a process is started by a running call)",
                        c.state.as_str()
                    )));
                }
                c.processes.push(process);
            }
            // Not checked against the call: it comes after the recovery that finished the call,
            // when the streaming classifier no longer holds it (the two must agree).
            Event::ProcessKilled { pgid, .. } => r.killed_groups.push(pgid),
            Event::SpillStored { .. } => {}
            Event::Fault {
                turn,
                step,
                message,
            } => r.faults.push((turn, step, message)),
            Event::Recovery(recovery) => {
                for rc in &recovery.calls {
                    // A call the model sent whose `received` never reached the journal (the
                    // process died while journaling the batch) is known from `llm/response`.
                    if find_call(r, &rc.call).is_err() {
                        adopt_unreceived(r, &rc.call, at_ms).map_err(bad)?;
                    }
                    let c = find_call(r, &rc.call).map_err(bad)?;
                    if c.state == CallState::Committed {
                        return Err(bad(format!("{}: recovery of a committed call", rc.call)));
                    }
                    c.seqs.push(seq);
                    c.committed = Some(rc.result.clone());
                    c.state = CallState::Committed;
                    c.recovered = true;
                }
                if let Some((turn, step)) = recovery.interrupted_step {
                    open_step_mut(r, turn, step).map_err(bad)?.outcome =
                        Some(StepOutcome::Interrupted);
                }
                if let Some(turn) = recovery.interrupted_turn {
                    open_turn_mut(r, turn).map_err(bad)?.outcome = Some(TurnOutcome::Interrupted);
                }
                r.recoveries.push(recovery);
            }
        }
        Ok(())
    }
}

/// Adds a call that is in its step's `llm/response` but was never `received`.
fn adopt_unreceived(r: &mut SessionReplay, call: &CallRef, at_ms: u64) -> Result<(), String> {
    let step = open_step_mut(r, call.turn, call.step)?;
    let response = step
        .response
        .as_ref()
        .ok_or_else(|| format!("{call}: recovered, but its step has no llm/response"))?;
    let index = response
        .tool_calls
        .iter()
        .position(|m| m.call_id == call.call_id)
        .ok_or_else(|| {
            format!("{call}: recovered, but the step's llm/response has no such call")
        })?;
    let model_call = &response.tool_calls[index];
    let adopted = CallReplay::received(
        call.clone(),
        index as u32,
        model_call.name.clone(),
        model_call.arguments.clone(),
        at_ms,
    );
    let at = step
        .calls
        .iter()
        .position(|c| c.index > index as u32)
        .unwrap_or(step.calls.len());
    step.calls.insert(at, adopted);
    Ok(())
}

fn open_turn_mut(r: &mut SessionReplay, turn: u32) -> Result<&mut TurnReplay, String> {
    match r.turns.last_mut() {
        Some(t) if t.turn == turn && t.outcome.is_none() => Ok(t),
        _ => Err(format!("turn {turn} is not the open turn")),
    }
}

fn open_step_mut(r: &mut SessionReplay, turn: u32, step: u32) -> Result<&mut StepReplay, String> {
    match open_turn_mut(r, turn)?.steps.last_mut() {
        Some(s) if s.step == step && s.outcome.is_none() => Ok(s),
        _ => Err(format!("step {step} of turn {turn} is not the open step")),
    }
}

fn find_call<'a>(r: &'a mut SessionReplay, call: &CallRef) -> Result<&'a mut CallReplay, String> {
    r.turns
        .get_mut((call.turn as usize).wrapping_sub(1))
        .and_then(|t| t.steps.get_mut((call.step as usize).wrapping_sub(1)))
        .and_then(|s| s.calls.iter_mut().find(|c| c.call.call_id == call.call_id))
        .ok_or_else(|| format!("{call} was never received"))
}

fn advance<'a>(
    r: &'a mut SessionReplay,
    call: &CallRef,
    to: CallState,
    attempt: u32,
    source_seqs: &[u64],
    seq: u64,
    position: Position,
) -> Result<&'a mut CallReplay, ReplayError> {
    let inconsistent = |message: String| ReplayError::Inconsistent {
        seq,
        position,
        kind: "call event",
        message,
    };
    let c = find_call(r, call).map_err(inconsistent)?;
    let previous = *c
        .seqs
        .last()
        .expect("a call has at least its received event");
    if !source_seqs.contains(&previous) || source_seqs.iter().any(|&s| s >= seq) {
        return Err(inconsistent(format!(
            "{call}: {to} points back at {source_seqs:?}, not at the call's previous event {previous}"
        )));
    }
    let attempt = if to == CallState::Started {
        attempt
    } else {
        c.machine.attempt() + 1
    };
    c.machine
        .advance_attempt(to, attempt)
        .map_err(|source| ReplayError::IllegalTransition {
            seq,
            position,
            source,
        })?;
    c.state = to;
    c.seqs.push(seq);
    Ok(c)
}

fn answer_ask(
    r: &mut SessionReplay,
    call: &CallRef,
    answer: Option<AskAnswer>,
    cancel_reason: Option<String>,
    seq: u64,
) -> Result<(), String> {
    let c = find_call(r, call)?;
    match c.asks.last_mut() {
        Some(a) if a.answer.is_none() => {
            a.answer = answer;
            a.cancel_reason = cancel_reason;
            c.seqs.push(seq);
            Ok(())
        }
        _ => Err(format!("{call}: an answer with no pending question")),
    }
}

/// Reads and replays a whole journal. Returns how the bytes ended too: the caller decides what
/// a torn tail or corruption means (the replay covers the records before either).
pub fn replay_storage(
    storage: Arc<dyn Storage>,
    limits: Limits,
) -> Result<(SessionReplay, ReadEnd), ReplayError> {
    let mut reader = Reader::open(storage, limits)?;
    let mut replayer = Replayer::new();
    for record in reader.by_ref() {
        replayer.apply(&record?)?;
    }
    let end = reader
        .end()
        .cloned()
        .expect("the reader finished without an I/O error");
    Ok((replayer.finish(), end))
}
