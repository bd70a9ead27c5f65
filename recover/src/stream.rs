//! Streaming classification: what [`analyze`](crate::classify::analyze) says about every call,
//! without keeping the session in memory.
//!
//! `analyze` works on a whole [`runtime::replay::SessionReplay`]: every turn, step and call of
//! the journal, kept until the end. `recover classify` needs none of that once a call is
//! finished, so this [`Classifier`] replays the journal record by record with the same checks
//! as `runtime::replay::Replayer` (the same errors, naming the same seq and position) and keeps
//! only what can still change:
//!
//! - the open turn and step, with the step's `llm/response` and all of its calls (the step's
//!   calls are needed whole: `received` checks the call's index, recovery adopts calls the
//!   response names, and the end of the journal classifies the calls it never received);
//! - calls of closed steps that are not committed yet (orphans after a fault, say), and the
//!   calls behind them in report order, which wait for them;
//! - calls already reported whose state machine can still move: a call committed by a
//!   `recovery` event (recovery does not move the machine) or one with a question still
//!   pending. Later events about them are checked as the full replay checks them.
//!
//! A committed call whose step is closed is final: its report is handed out (in the order
//! `analyze` gives, model order within each step) and the call is forgotten. Memory grows with
//! the calls that are open, not with the journal.
//!
//! Where this differs from the full replay, it is only in what a journal the runtime never
//! writes would show: an event naming a call that was committed and forgotten is refused as
//! the full replay refuses it, but with a message that cannot quote the call's last seq; and a
//! `started` that moves a recovered call after it was reported does not change the reported
//! resources.

use crate::classify::{
    classify_unfinished, end_of, error_result, not_started_text, CallReport, End, Unfinished,
};
use journal::{Position, ReadEnd};
use runtime::code::ErrorCode;
use runtime::event::{
    CallRef, Classification, CommittedResult, Event, ModelResponse, Outcome, ProcessStarted,
    RecoveredCall, Recovery, Resources,
};
use runtime::replay::{EventDecoder, ReplayError};
use runtime::state::{CallMachine, CallState};
use std::collections::VecDeque;

/// One call, as far as classification needs it.
#[derive(Debug)]
struct Call {
    call: CallRef,
    index: u32,
    tool: String,
    raw_arguments: String,
    state: CallState,
    machine: CallMachine,
    /// The seq of the call's last event: the next one must point back at it.
    last_seq: u64,
    resources: Option<Resources>,
    /// Kept while the call is settled but not committed (dropped at `committed`).
    outcome: Option<Outcome>,
    rejection: Option<(ErrorCode, String)>,
    cancel_reason: Option<String>,
    committed: Option<CommittedResult>,
    /// The last question asked about the call is still unanswered.
    ask_pending: bool,
    /// The first `recovery` event that committed this call: what it reports.
    recovered_by: Option<RecoveredCall>,
    /// Its place in journal order among the calls of its step (the order of a recovery's
    /// calls), and in model order (the order of reports).
    step_position: usize,
    model_index: usize,
    /// Named by the open step's `llm/response` only (known at the end of the journal).
    never_received: bool,
}

impl Call {
    fn received(call: CallRef, index: u32, tool: String, raw_arguments: String) -> Call {
        Call {
            machine: CallMachine::received(call.clone()),
            call,
            index,
            tool,
            raw_arguments,
            state: CallState::Received,
            last_seq: 0,
            resources: None,
            outcome: None,
            rejection: None,
            cancel_reason: None,
            committed: None,
            ask_pending: false,
            recovered_by: None,
            step_position: 0,
            model_index: usize::MAX,
            never_received: false,
        }
    }

    /// Whether later events may still move this call (it must then be kept after its report
    /// is given, so that they are checked as the full replay checks them).
    fn may_still_move(&self) -> bool {
        self.machine.state() != CallState::Committed || self.ask_pending
    }
}

#[derive(Debug)]
struct OpenStep {
    step: u32,
    /// `step/tools` was seen (once per step, before `llm/response`).
    tools: bool,
    response: Option<ModelResponse>,
    /// In journal order (adopted calls inserted by index, as the full replay does).
    calls: Vec<Call>,
}

#[derive(Debug)]
struct OpenTurn {
    turn: u32,
    /// Steps started in this turn.
    steps: u32,
    step: Option<OpenStep>,
}

/// What is known once the last record is in.
#[derive(Debug, Clone)]
pub struct Finished {
    pub end: End,
    /// Questions still pending, to withdraw (`ask/cancelled`) before the recovery event.
    pub pending_asks: Vec<CallRef>,
    /// The event that balances the journal; `None` when it is balanced already (or live):
    /// exactly what [`analyze`](crate::classify::analyze) gives.
    pub recovery: Option<Recovery>,
    /// Process groups of calls that never settled and that no resume killed: they may still
    /// run ([`runtime::process::still_running`] says).
    pub processes: Vec<(CallRef, ProcessStarted)>,
}

/// Replays records one at a time, checking them, and hands out each call's report as soon as
/// it is final (see the module documentation).
#[derive(Debug)]
pub struct Classifier {
    live: bool,
    opened: bool,
    closed: bool,
    turns: u32,
    turn: Option<OpenTurn>,
    /// Calls of closed steps not handed out yet, in report order; the first is not final.
    queue: VecDeque<Call>,
    /// Calls handed out that later events may still move.
    ghosts: Vec<Call>,
    /// Reports final and in order, waiting to be taken.
    ready: VecDeque<CallReport>,
    last_recovery_dropped: Option<u64>,
    retained_max: usize,
    /// Process groups started by calls that have not settled (nor been killed by a resume):
    /// bounded by the calls running at once.
    processes: Vec<(CallRef, ProcessStarted)>,
    decoder: EventDecoder,
}

impl Classifier {
    /// `live`: a writer holds the journal, so unfinished calls are running, not orphaned.
    pub fn new(live: bool) -> Classifier {
        Classifier {
            live,
            opened: false,
            closed: false,
            turns: 0,
            turn: None,
            queue: VecDeque::new(),
            ghosts: Vec::new(),
            ready: VecDeque::new(),
            last_recovery_dropped: None,
            retained_max: 0,
            processes: Vec::new(),
            decoder: EventDecoder::new(),
        }
    }

    /// Calls held now: the open step's, those waiting to be reported, and reported ones that
    /// may still move. What the classifier's memory grows with.
    pub fn retained_calls(&self) -> usize {
        self.turn
            .as_ref()
            .and_then(|t| t.step.as_ref())
            .map_or(0, |s| s.calls.len())
            + self.queue.len()
            + self.ghosts.len()
    }

    /// Whether `session/close` was read.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// The most calls held at once so far.
    pub fn retained_calls_max(&self) -> usize {
        self.retained_max
    }

    /// Reports that are final, in order; take them after every record.
    pub fn take_ready(&mut self) -> impl Iterator<Item = CallReport> + '_ {
        self.ready.drain(..)
    }

    /// Decodes and applies one journal record (`record.as_ref()` for an owned one); the
    /// errors are `Replayer::apply`'s.
    pub fn apply(&mut self, record: journal::RecordRef<'_>) -> Result<(), ReplayError> {
        let decoded = self.decoder.decode(record)?;
        self.apply_event(record.seq, record.position, decoded.event)?;
        self.flush();
        self.retained_max = self.retained_max.max(self.retained_calls());
        Ok(())
    }

    fn apply_event(
        &mut self,
        seq: u64,
        position: Position,
        event: Event,
    ) -> Result<(), ReplayError> {
        let kind = event.kind();
        let bad = |message: String| ReplayError::Inconsistent {
            seq,
            position,
            kind,
            message,
        };
        if !self.opened && !matches!(event, Event::SessionOpen(_)) {
            return Err(bad("the journal does not begin with session/open".into()));
        }
        if self.closed {
            return Err(bad("event after session/close".into()));
        }
        match event {
            Event::SessionOpen(_) => {
                if self.opened {
                    return Err(bad("a second session/open".into()));
                }
                self.opened = true;
            }
            Event::TurnStart { turn, .. } => {
                if self.turn.is_some() {
                    return Err(bad("turn/start while a turn is open".into()));
                }
                if turn != self.turns.wrapping_add(1) {
                    return Err(bad(format!("turn {turn} after turn {}", self.turns)));
                }
                self.turns = turn;
                self.turn = Some(OpenTurn {
                    turn,
                    steps: 0,
                    step: None,
                });
            }
            Event::StepStart { turn, step } => {
                let t = open_turn_mut(&mut self.turn, turn).map_err(bad)?;
                if t.step.is_some() {
                    return Err(bad("step/start while a step is open".into()));
                }
                if step != t.steps.wrapping_add(1) {
                    return Err(bad(format!("step {step} after step {}", t.steps)));
                }
                t.steps = step;
                t.step = Some(OpenStep {
                    step,
                    tools: false,
                    response: None,
                    calls: Vec::new(),
                });
            }
            Event::LlmResponse {
                turn,
                step,
                response,
            } => {
                let s = open_step_mut(&mut self.turn, turn, step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad("a second llm/response in one step".into()));
                }
                s.response = Some(response);
            }
            Event::StepEnd { turn, step, .. } => {
                open_step_mut(&mut self.turn, turn, step).map_err(bad)?;
                self.close_step();
            }
            Event::TurnEnd { turn, .. } => {
                let t = open_turn_mut(&mut self.turn, turn).map_err(bad)?;
                if t.step.is_some() {
                    return Err(bad("turn/end while a step is open".into()));
                }
                self.turn = None;
            }
            Event::SessionClose => {
                if self.turn.is_some() {
                    return Err(bad("session/close while a turn is open".into()));
                }
                self.closed = true;
            }
            Event::Received {
                call,
                index,
                tool,
                raw_arguments,
                source_seqs,
            } => {
                let s = open_step_mut(&mut self.turn, call.turn, call.step).map_err(bad)?;
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
                let mut received = Call::received(call, index, tool, raw_arguments);
                received.last_seq = seq;
                s.calls.push(received);
            }
            Event::Parsed {
                call, source_seqs, ..
            } => {
                self.advance(&call, CallState::Parsed, 0, &source_seqs, seq, position)?;
            }
            Event::Approved {
                call, source_seqs, ..
            } => {
                self.advance(&call, CallState::Approved, 0, &source_seqs, seq, position)?;
            }
            Event::Started {
                call,
                attempt,
                resources,
                source_seqs,
            } => {
                let c = self.advance(
                    &call,
                    CallState::Started,
                    attempt,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.resources = Some(resources);
            }
            Event::Settled {
                call,
                outcome,
                source_seqs,
            } => {
                let c = self.advance(&call, CallState::Settled, 0, &source_seqs, seq, position)?;
                c.outcome = Some(outcome);
                self.processes.retain(|(c, _)| *c != call);
            }
            Event::CallProcess { call, process } => {
                let c = self.find_call(&call).map_err(bad)?;
                if c.state != CallState::Started {
                    return Err(bad(format!(
                        "call/process for {call}, which is {} (a process is started by a running call)",
                        c.state.as_str()
                    )));
                }
                self.processes.push((call, process));
            }
            Event::ProcessKilled { pgid, .. } => {
                self.processes.retain(|(_, p)| p.pgid != pgid);
            }
            Event::Committed {
                call,
                result,
                source_seqs,
            } => {
                let c =
                    self.advance(&call, CallState::Committed, 0, &source_seqs, seq, position)?;
                c.committed = Some(result);
                // A committed call is never classified from its outcome again.
                c.outcome = None;
            }
            Event::Rejected {
                call,
                code,
                reason,
                source_seqs,
            } => {
                let c = self.advance(&call, CallState::Rejected, 0, &source_seqs, seq, position)?;
                c.rejection = Some((code, reason));
            }
            Event::CancelledBeforeStart {
                call,
                reason,
                source_seqs,
            } => {
                let c = self.advance(
                    &call,
                    CallState::CancelledBeforeStart,
                    0,
                    &source_seqs,
                    seq,
                    position,
                )?;
                c.cancel_reason = Some(reason);
            }
            Event::AskPending { call, .. } => {
                let c = self.find_call(&call).map_err(bad)?;
                if c.state != CallState::Parsed || c.ask_pending {
                    return Err(bad(format!("{call}: a question while {}", c.state)));
                }
                c.last_seq = seq;
                c.ask_pending = true;
            }
            Event::AskAnswered { call, .. } => self.answer_ask(&call, seq).map_err(bad)?,
            Event::AskExpired { call } => self.answer_ask(&call, seq).map_err(bad)?,
            Event::AskCancelled { call, .. } => self.answer_ask(&call, seq).map_err(bad)?,
            Event::PlanReplace { .. }
            | Event::SpillStored { .. }
            | Event::Fault { .. }
            | Event::SessionPolicy(_) => {}
            Event::StepTools { turn, step, .. } => {
                let s = open_step_mut(&mut self.turn, turn, step).map_err(bad)?;
                if s.tools || s.response.is_some() {
                    return Err(bad(
                        "step/tools comes once per step, before its llm/response".into(),
                    ));
                }
                s.tools = true;
            }
            Event::PlanMode { call, .. } => {
                if let Some(call) = &call {
                    self.find_call(call).map_err(bad)?;
                }
            }
            Event::Recovery(recovery) => {
                for rc in &recovery.calls {
                    // A call the model sent whose `received` never reached the journal (the
                    // process died while journaling the batch) is known from `llm/response`.
                    if self.find_call(&rc.call).is_err() {
                        adopt_unreceived(&mut self.turn, &rc.call).map_err(bad)?;
                    }
                    let c = self.find_call(&rc.call).map_err(bad)?;
                    if c.state == CallState::Committed {
                        return Err(bad(format!("{}: recovery of a committed call", rc.call)));
                    }
                    c.last_seq = seq;
                    c.committed = Some(rc.result.clone());
                    c.state = CallState::Committed;
                    c.recovered_by.get_or_insert_with(|| rc.clone());
                }
                if let Some((turn, step)) = recovery.interrupted_step {
                    open_step_mut(&mut self.turn, turn, step).map_err(bad)?;
                    self.close_step();
                }
                if let Some(turn) = recovery.interrupted_turn {
                    open_turn_mut(&mut self.turn, turn).map_err(bad)?;
                    // A step left open in it is closed with it.
                    self.close_step();
                    self.turn = None;
                }
                self.last_recovery_dropped = Some(recovery.dropped_bytes);
            }
        }
        Ok(())
    }

    /// Closes the open step (if any): its calls join the queue, in report order.
    fn close_step(&mut self) {
        let Some(step) = self.turn.as_mut().and_then(|t| t.step.take()) else {
            return;
        };
        let mut calls = step.calls;
        number_calls(&mut calls, step.response.as_ref());
        if !self.live {
            // Model order within the step (`analyze` sorts; a live session's order is the
            // journal's).
            calls.sort_by_key(|c| c.model_index);
        }
        self.queue.extend(calls);
    }

    /// Hands out the reports at the front of the queue that are final.
    fn flush(&mut self) {
        while self
            .queue
            .front()
            .is_some_and(|c| c.state == CallState::Committed)
        {
            let Some(mut c) = self.queue.pop_front() else {
                break;
            };
            self.ready.push_back(committed_report(&mut c));
            if c.may_still_move() {
                self.ghosts.push(c);
            }
        }
    }

    fn find_call(&mut self, call: &CallRef) -> Result<&mut Call, String> {
        let in_open_step = self.turn.as_ref().is_some_and(|t| {
            t.turn == call.turn && t.step.as_ref().is_some_and(|s| s.step == call.step)
        });
        if in_open_step {
            if let Some(c) = self
                .turn
                .as_mut()
                .and_then(|t| t.step.as_mut())
                .and_then(|s| s.calls.iter_mut().find(|c| c.call == *call))
            {
                return Ok(c);
            }
            return Err(format!("{call} was never received"));
        }
        // Ghosts were handed out before the queue's calls of the same step: first match first,
        // as the full replay finds the first call with the id in its step.
        if let Some(i) = self.ghosts.iter().position(|c| c.call == *call) {
            return Ok(&mut self.ghosts[i]);
        }
        if let Some(i) = self.queue.iter().position(|c| c.call == *call) {
            return Ok(&mut self.queue[i]);
        }
        // The full replay would find a committed call here and refuse the event all the same
        // (a committed call takes no further event); this one no longer knows which it was.
        Err(format!(
            "{call} was never received, or was committed before this event"
        ))
    }

    fn advance(
        &mut self,
        call: &CallRef,
        to: CallState,
        attempt: u32,
        source_seqs: &[u64],
        seq: u64,
        position: Position,
    ) -> Result<&mut Call, ReplayError> {
        let inconsistent = |message: String| ReplayError::Inconsistent {
            seq,
            position,
            kind: "call event",
            message,
        };
        let c = self.find_call(call).map_err(inconsistent)?;
        let previous = c.last_seq;
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
        c.machine.advance_attempt(to, attempt).map_err(|source| {
            ReplayError::IllegalTransition {
                seq,
                position,
                source,
            }
        })?;
        c.state = to;
        c.last_seq = seq;
        Ok(c)
    }

    fn answer_ask(&mut self, call: &CallRef, seq: u64) -> Result<(), String> {
        let c = self.find_call(call)?;
        if !c.ask_pending {
            return Err(format!("{call}: an answer with no pending question"));
        }
        c.ask_pending = false;
        c.last_seq = seq;
        // A reported call kept only for its question is done with now.
        self.ghosts.retain(Call::may_still_move);
        Ok(())
    }

    /// Classifies what is left once the last record is in: every call not yet handed out, in
    /// order (take them with [`Classifier::take_ready`]), then the end of the bytes and the
    /// recovery event that balances the journal, exactly as
    /// [`analyze`](crate::classify::analyze) gives them.
    pub fn finish(&mut self, read_end: &ReadEnd, dropped_now: u64) -> Finished {
        let live = self.live;
        let open_turn = self.turn.as_ref().map(|t| t.turn);
        let open_step = self
            .turn
            .as_ref()
            .and_then(|t| t.step.as_ref().map(|s| (t.turn, s.step)));
        let mut rest: Vec<Call> = self.queue.drain(..).collect();
        let queued = rest.len();
        if let Some(t) = self.turn.as_mut() {
            if let Some(step) = t.step.take() {
                let mut calls = step.calls;
                number_calls(&mut calls, step.response.as_ref());
                // Calls the model sent whose `received` never made it: they did not start
                // either. Listed after the step's other calls, then all in model order.
                if let (Some(response), false) = (&step.response, live) {
                    for (i, m) in response.tool_calls.iter().enumerate() {
                        if calls.iter().any(|c| c.call.call_id == m.call_id) {
                            continue;
                        }
                        let call = CallRef {
                            turn: t.turn,
                            step: step.step,
                            call_id: m.call_id.clone(),
                        };
                        let mut c =
                            Call::received(call, i as u32, m.name.clone(), m.arguments.clone());
                        c.never_received = true;
                        c.model_index = model_index(Some(response), &c.call.call_id);
                        calls.push(c);
                    }
                }
                rest.extend(calls);
                if !live {
                    rest[queued..].sort_by_key(|c| c.model_index);
                }
            }
        }

        // A recovery lists its calls in journal order, the never received ones last.
        let mut recovered_calls: Vec<((u32, u32, usize), RecoveredCall)> = Vec::new();
        let mut pending_asks = Vec::new();
        for mut c in rest {
            let report = if c.recovered_by.is_some() || c.state == CallState::Committed {
                committed_report(&mut c)
            } else if live {
                // A running session's unfinished call is running, not orphaned.
                CallReport::in_flight(
                    c.call,
                    c.tool,
                    c.raw_arguments,
                    c.state,
                    c.resources.unwrap_or_default(),
                )
            } else {
                let (classification, result, key) = if c.never_received {
                    (
                        Some(Classification::ToolNotStarted),
                        error_result(ErrorCode::ToolNotStarted, not_started_text()),
                        (u32::MAX, u32::MAX, usize::MAX),
                    )
                } else {
                    if c.ask_pending {
                        pending_asks.push(c.call.clone());
                    }
                    let (classification, result) = classify_unfinished(Unfinished {
                        state: c.state,
                        outcome: c.outcome.as_ref(),
                        resources: c.resources.as_ref(),
                        rejection: c.rejection.as_ref(),
                        cancel_reason: c.cancel_reason.as_deref(),
                    });
                    (
                        classification,
                        result,
                        (c.call.turn, c.call.step, c.step_position),
                    )
                };
                recovered_calls.push((
                    key,
                    RecoveredCall {
                        call: c.call.clone(),
                        state: c.state,
                        classification,
                        result: result.clone(),
                    },
                ));
                CallReport {
                    call: c.call,
                    tool: c.tool,
                    raw_arguments: c.raw_arguments,
                    state: c.state,
                    classification,
                    resources: c.resources.unwrap_or_default(),
                    result,
                    recovered: true,
                    in_flight: false,
                }
            };
            self.ready.push_back(report);
        }
        // Stable: the never received calls (equal keys) keep model order, as `analyze` has them.
        recovered_calls.sort_by_key(|(k, _)| *k);
        let recovered_calls: Vec<RecoveredCall> =
            recovered_calls.into_iter().map(|(_, rc)| rc).collect();
        self.turn = None;

        // Nothing may follow `session/close` (replay refuses it): a closed session's cut is
        // recorded by its quarantine file alone.
        let needs_recovery = !live
            && !self.closed
            && (!recovered_calls.is_empty() || open_turn.is_some() || dropped_now > 0);
        let recovery = needs_recovery.then_some(Recovery {
            dropped_bytes: dropped_now,
            calls: recovered_calls,
            interrupted_step: open_step,
            interrupted_turn: open_turn,
        });
        Finished {
            end: end_of(read_end, dropped_now, self.last_recovery_dropped),
            pending_asks,
            recovery,
            processes: std::mem::take(&mut self.processes),
        }
    }
}

/// Gives the calls of a step their journal positions (their order now) and model indexes.
fn number_calls(calls: &mut [Call], response: Option<&ModelResponse>) {
    for (i, c) in calls.iter_mut().enumerate() {
        c.step_position = i;
        c.model_index = model_index(response, &c.call.call_id);
    }
}

/// The position of the call's id in its step's response (first match), as `analyze` sorts.
fn model_index(response: Option<&ModelResponse>, call_id: &str) -> usize {
    response
        .and_then(|r| r.tool_calls.iter().position(|m| m.call_id == call_id))
        .unwrap_or(usize::MAX)
}

/// The report of a call whose result is final: from the recovery that committed it, or from
/// its `committed` event.
fn committed_report(c: &mut Call) -> CallReport {
    let resources = c.resources.take().unwrap_or_default();
    let call = c.call.clone();
    let tool = std::mem::take(&mut c.tool);
    let raw_arguments = std::mem::take(&mut c.raw_arguments);
    match &c.recovered_by {
        Some(rc) => CallReport {
            call,
            tool,
            raw_arguments,
            state: rc.state,
            classification: rc.classification,
            resources,
            result: rc.result.clone(),
            recovered: true,
            in_flight: false,
        },
        None => CallReport {
            call,
            tool,
            raw_arguments,
            state: c.state,
            classification: None,
            resources,
            // Cannot fail: a call is committed only by `committed` or a `recovery`, and both
            // set its result (a recovered call is the arm above).
            result: c.committed.take().expect("a committed call has its result"),
            recovered: false,
            in_flight: false,
        },
    }
}

/// Adds a call that is in its step's `llm/response` but was never `received`.
fn adopt_unreceived(turn: &mut Option<OpenTurn>, call: &CallRef) -> Result<(), String> {
    let step = open_step_mut(turn, call.turn, call.step)?;
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
    let adopted = Call::received(
        call.clone(),
        index as u32,
        model_call.name.clone(),
        model_call.arguments.clone(),
    );
    let at = step
        .calls
        .iter()
        .position(|c| c.index > index as u32)
        .unwrap_or(step.calls.len());
    step.calls.insert(at, adopted);
    Ok(())
}

fn open_turn_mut(turn: &mut Option<OpenTurn>, number: u32) -> Result<&mut OpenTurn, String> {
    match turn {
        Some(t) if t.turn == number => Ok(t),
        _ => Err(format!("turn {number} is not the open turn")),
    }
}

fn open_step_mut(
    turn: &mut Option<OpenTurn>,
    number: u32,
    step: u32,
) -> Result<&mut OpenStep, String> {
    match open_turn_mut(turn, number)?.step.as_mut() {
        Some(s) if s.step == step => Ok(s),
        _ => Err(format!("step {step} of turn {number} is not the open step")),
    }
}
