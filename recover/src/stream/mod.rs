//! Streaming classification: what [`analyze`](crate::classify::analyze) says about every call,
//! without keeping the session in memory.
//!
//! `analyze` works on a whole [`events::replay::SessionReplay`]: every turn, step and call of
//! the journal, kept until the end. `recover classify` needs none of that once a call is
//! finished, so this [`Classifier`] runs the same replay rules (`events::replay::Replayer`,
//! so the same checks and the same errors, naming the same seq and position) over a
//! [`Retain`] policy, `OpenCalls`, that keeps only what can still change:
//!
//! - the open turn and step, with the step's `llm/response` and all of its calls (the step's
//!   calls are needed whole: `received` checks the call's index, recovery adopts calls the
//!   response names, and the end of the journal classifies the calls it never received);
//! - calls of closed steps that are not committed yet (orphans after a fault, say), and the
//!   calls behind them in report order, which wait for them;
//! - calls already reported that later events may still move
//!   ([`CallReplay::may_still_move`]): a call committed by a `recovery` event (recovery does
//!   not move the machine) or one with a question still pending. Later events about them are
//!   checked as the full replay checks them.
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

use crate::bound::Peers;
use crate::classify::{end_of, left_unknown, CallReport, End};
use crate::probe::Prober;
use events::event::{
    CallRef, ModelResponse, ProcessStarted, RecoveredCall, Recovery, StepOutcome, TurnOutcome,
};
use events::replay::{CallReplay, ReplayError, Replayer, Retain, StepReplay, TurnCursor};
use events::state::CallState;
use journal::ReadEnd;
use notice::{final_result, keep_result, Kept};
pub(crate) use notice::{CallFacts, ClosedStep, Mode, Moment, MomentKind, Notice};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

mod notice;
mod reports;
use reports::{committed_report, end_peers, remaining_calls, report_at_end};

/// A report made final, with its call's facts when the mode keeps them.
type Ready = (CallReport, Option<CallFacts>);

/// A call of a closed step, with what its report needs beyond the replay's record.
#[derive(Debug)]
struct Call {
    replay: CallReplay,
    /// The first `recovery` event that committed this call: what it reports.
    recovered_by: Option<RecoveredCall>,
    /// That recovery's index among the journal's recoveries (0 for the first).
    recovered_in: usize,
    /// Its place in journal order among the calls of its step (the order of a recovery's
    /// calls), and in model order (the order of reports).
    step_position: usize,
    model_index: usize,
    /// Named by the open step's `llm/response` only (known at the end of the journal).
    never_received: bool,
}

/// The open turn: its number, the steps begun in it, and its open step.
#[derive(Debug)]
struct OpenTurn {
    turn: u32,
    steps: u32,
    step: Option<StepReplay>,
}

/// The [`Retain`] policy of streaming classification: only the calls still open, and what
/// the reports and the recovery event need (see the module documentation).
#[derive(Debug)]
struct OpenCalls {
    live: bool,
    opened: bool,
    closed: bool,
    turns: u32,
    turn: Option<OpenTurn>,
    /// Recoveries of the open step's calls, attached to them when the step closes, each with
    /// its recovery's index.
    open_step_recovered: Vec<(RecoveredCall, usize)>,
    /// Calls of closed steps not handed out yet, in report order; the first is not final.
    queue: VecDeque<Call>,
    /// Calls handed out that later events may still move.
    ghosts: Vec<Call>,
    last_recovery_dropped: Option<u64>,
    /// Process groups started by calls that have not settled (nor been killed by a resume):
    /// bounded by the calls running at once.
    processes: Vec<(CallRef, ProcessStarted)>,
    /// The workspace to probe for `TOOL_OUTCOME_UNKNOWN` calls (`--probe`).
    prober: Option<Arc<Prober>>,
    /// With a probe: the calls recoveries left of unknown outcome that ran a process, with
    /// their bounds (a few per crash: they grow with the crashes, not with the journal).
    peers: Peers,
    /// `recovery` events read.
    recoveries_read: usize,
    /// What else is kept and handed out.
    mode: Mode,
    kept: Kept,
    /// [`Mode::Audit`]'s second pass: the last facts of calls that could still move when they
    /// were handed out, as the first pass found them at the end.
    moved_facts: HashMap<CallRef, CallFacts>,
    /// `import/source` was read: a call left unfinished is one the import did not finish.
    imported: bool,
}

impl OpenCalls {
    /// `live`: a writer holds the journal (a live session's reports keep journal order).
    fn new(live: bool, prober: Option<Arc<Prober>>, mode: Mode) -> OpenCalls {
        OpenCalls {
            live,
            opened: false,
            closed: false,
            turns: 0,
            turn: None,
            open_step_recovered: Vec::new(),
            queue: VecDeque::new(),
            ghosts: Vec::new(),
            last_recovery_dropped: None,
            processes: Vec::new(),
            prober,
            peers: Peers::default(),
            recoveries_read: 0,
            mode,
            kept: Kept::default(),
            moved_facts: HashMap::new(),
            imported: false,
        }
    }

    fn notice(&mut self, notice: Notice) {
        if self.mode.notices() {
            self.kept.notices.push(notice);
        }
    }

    /// [`Mode::Audit`]: a moment for the timeline, at the record's time, or at the last record
    /// the session's process wrote when a recovery closes something (`at_written`).
    fn moment(&mut self, what: MomentKind, at_written: bool) {
        if self.mode == Mode::Audit {
            let clock = self.kept.clock;
            let at_ms = if at_written {
                clock.written_ms
            } else {
                clock.now_ms
            };
            self.kept
                .notices
                .push(Notice::Moment(Moment { at_ms, what }));
        }
    }

    /// The open turn and step, for a moment that names them.
    fn open_turn_step(&self) -> (u32, u32) {
        self.turn.as_ref().map_or((0, 0), |t| {
            (t.turn, t.step.as_ref().map_or(t.steps, |s| s.step))
        })
    }

    /// Calls held now: the open step's, those waiting to be reported, and reported ones that
    /// may still move.
    /// Bytes of outcomes and arguments the held calls carry (what grows with a call's size,
    /// not with their number).
    fn retained_payload_bytes(&self) -> usize {
        let open_step = self.turn.as_ref().and_then(|t| t.step.as_ref());
        let open = open_step.into_iter().flat_map(|s| s.calls.iter());
        let held = self.queue.iter().chain(&self.ghosts).map(|c| &c.replay);
        open.chain(held).map(payload_bytes).sum()
    }

    fn retained_calls(&self) -> usize {
        self.turn
            .as_ref()
            .and_then(|t| t.step.as_ref())
            .map_or(0, |s| s.calls.len())
            + self.queue.len()
            + self.ghosts.len()
    }

    /// The open step's calls, numbered, with their recoveries attached, and the step's notice
    /// (its response still to be put in); the step is gone.
    fn take_open_step(&mut self, open_at_end: bool) -> Option<(Vec<Call>, ClosedStep)> {
        let turn = self.turn.as_mut()?;
        let step = turn.step.take()?;
        let turn_number = turn.turn;
        let response = step.response;
        let mut calls: Vec<Call> = step
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, replay)| Call {
                model_index: model_index(response.as_ref(), &replay.call.call_id),
                replay,
                recovered_by: None,
                recovered_in: 0,
                step_position: i,
                never_received: false,
            })
            .collect();
        // A call is recovered at most once (a second recovery of it is refused), and the
        // rules find the first call with its id: the same one found here.
        for (rc, index) in self.open_step_recovered.drain(..) {
            if let Some(c) = calls.iter_mut().find(|c| c.replay.call == rc.call) {
                if c.recovered_by.is_none() {
                    c.recovered_by = Some(rc);
                    c.recovered_in = index;
                }
            }
        }
        let mode = self.mode;
        let results = match mode {
            Mode::Classify => Vec::new(),
            _ => calls
                .iter_mut()
                .map(|c| (c.replay.call.call_id.clone(), final_result(c, mode)))
                .collect(),
        };
        if mode == Mode::Survey {
            let late = calls
                .iter()
                .filter(|c| c.recovered_by.is_none() && c.replay.state != CallState::Committed);
            self.kept.late.extend(late.map(|c| c.replay.call.clone()));
        }
        let closed = ClosedStep {
            turn: turn_number,
            step: step.step,
            tools: step.tools,
            response,
            detail: step.detail,
            refusal: step.refusal,
            notes: step.notes,
            results,
            open_at_end,
        };
        Some((calls, closed))
    }

    /// Closes the open step (if any): its calls join the queue, in report order.
    fn close_step(&mut self) {
        let Some((mut calls, closed)) = self.take_open_step(false) else {
            return;
        };
        self.notice(Notice::Step(closed));
        if !self.live {
            // Model order within the step (`analyze` sorts; a live session's order is the
            // journal's).
            calls.sort_by_key(|c| c.model_index);
        }
        self.queue.extend(calls);
    }

    /// Hands out the reports at the front of the queue that are final.
    fn flush(&mut self, ready: &mut VecDeque<Ready>) {
        while self
            .queue
            .front()
            .is_some_and(|c| c.replay.state == CallState::Committed)
        {
            let Some(mut c) = self.queue.pop_front() else {
                break;
            };
            if self.mode != Mode::Write {
                let facts = self.facts_of(&c);
                let report = committed_report(&mut c, self.prober.as_deref(), &self.peers);
                if self.mode == Mode::Survey && self.kept.late.contains(&report.call) {
                    keep_result(&mut self.kept.late_results, &report);
                }
                ready.push_back((report, facts));
            }
            if c.replay.may_still_move() {
                self.ghosts.push(c);
            }
        }
    }

    /// [`Mode::Audit`]: the facts of a call handed out now; for one that later events may
    /// still move, the last facts the first pass found, when it was given them.
    fn facts_of(&self, c: &Call) -> Option<CallFacts> {
        if self.mode != Mode::Audit || c.never_received {
            return None;
        }
        if c.replay.may_still_move() {
            if let Some(f) = self.moved_facts.get(&c.replay.call) {
                return Some(f.clone());
            }
        }
        Some(CallFacts::of(&c.replay))
    }

    /// Whether the call belongs to the open step.
    fn in_open_step(&self, call: &CallRef) -> bool {
        self.turn.as_ref().is_some_and(|t| {
            t.turn == call.turn && t.step.as_ref().is_some_and(|s| s.step == call.step)
        })
    }

    /// A call of a closed step still held. Ghosts were handed out before the queue's calls
    /// of the same step: first match first, as the full replay finds the first call with the
    /// id in its step.
    fn held_mut(&mut self, call: &CallRef) -> Option<&mut Call> {
        if let Some(i) = self.ghosts.iter().position(|c| c.replay.call == *call) {
            return Some(&mut self.ghosts[i]);
        }
        self.queue.iter_mut().find(|c| c.replay.call == *call)
    }
}

impl Retain for OpenCalls {
    fn opened(&self) -> bool {
        self.opened
    }

    fn closed(&self) -> bool {
        self.closed
    }

    fn turns_begun(&self) -> u32 {
        self.turns
    }

    fn open_turn(&self) -> Option<TurnCursor> {
        self.turn.as_ref().map(|t| TurnCursor {
            turn: t.turn,
            steps: t.steps,
        })
    }

    fn open_step(&mut self) -> Option<&mut StepReplay> {
        self.turn.as_mut()?.step.as_mut()
    }

    fn call_mut(&mut self, call: &CallRef) -> Result<&mut CallReplay, String> {
        if self.in_open_step(call) {
            return self
                .turn
                .as_mut()
                .and_then(|t| t.step.as_mut())
                .and_then(|s| s.calls.iter_mut().find(|c| c.call == *call))
                .ok_or_else(|| format!("{call} was never received"));
        }
        match self.held_mut(call) {
            Some(c) => Ok(&mut c.replay),
            // The full replay would find a committed call here and refuse the event all the
            // same (a committed call takes no further event); this one no longer knows which.
            None => Err(format!(
                "{call} was never received, or was committed before this event"
            )),
        }
    }

    fn session_opened(&mut self, open: events::event::SessionOpen) {
        self.opened = true;
        // As `analyze` has it: the bounds' roots are compared beneath this workspace.
        self.peers.journaled_workspace(&open.workspace);
        self.notice(Notice::Opened(open.tools));
    }

    fn session_closed(&mut self) {
        self.closed = true;
        self.moment(MomentKind::Closed, false);
    }

    fn session_reopened(&mut self) {
        self.closed = false;
        self.moment(MomentKind::Reopened, false);
    }

    fn turn_begun(&mut self, turn: u32, user_text: String) {
        self.moment(MomentKind::TurnBegun { turn }, false);
        self.notice(Notice::TurnBegun { turn, user_text });
        self.turns = turn;
        self.turn = Some(OpenTurn {
            turn,
            steps: 0,
            step: None,
        });
    }

    fn turn_ended(&mut self, outcome: TurnOutcome) {
        let (turn, _) = self.open_turn_step();
        let recovered = outcome == TurnOutcome::Interrupted;
        // A step a recovery left open in it is closed with it.
        self.close_step();
        self.moment(MomentKind::TurnEnded { turn, outcome }, recovered);
        self.turn = None;
    }

    fn step_begun(&mut self, step: u32) {
        if let Some(t) = self.turn.as_mut() {
            t.steps = step;
            t.step = Some(StepReplay::new(step));
        }
        let (turn, step) = self.open_turn_step();
        self.moment(MomentKind::StepBegun { turn, step }, false);
    }

    fn step_ended(&mut self, outcome: StepOutcome) {
        let (turn, step) = self.open_turn_step();
        let recovered = outcome == StepOutcome::Interrupted;
        self.moment(
            MomentKind::StepEnded {
                turn,
                step,
                outcome,
            },
            recovered,
        );
        self.close_step();
    }

    fn record_time(&mut self, at_ms: u64, kind: &'static str) {
        self.kept.clock.tick(at_ms, kind);
    }

    fn fault(&mut self, turn: u32, step: u32, message: String) {
        self.moment(
            MomentKind::Fault {
                turn,
                step,
                message,
            },
            false,
        );
    }

    fn call_settled(&mut self, call: &CallRef) {
        self.processes.retain(|(c, _)| c != call);
    }

    fn call_committed(&mut self, call: &CallRef) {
        // A committed call is reported from its result alone: what it ran with and what its
        // body returned (up to a MiB inline each) would only weigh on the open step.
        let audit = self.mode == Mode::Audit;
        if let Ok(c) = self.call_mut(call) {
            c.arguments = None;
            if audit {
                // The audit shows who allowed it and what it did, not what it returned.
                if let Some(o) = c.outcome.as_mut() {
                    o.content = events::event::Text::Inline(String::new());
                    o.value = None;
                    o.details = None;
                }
            } else {
                c.outcome = None;
                c.approval = None;
            }
        }
    }

    fn process_started(&mut self, call: &CallRef, process: &ProcessStarted) {
        self.processes.push((call.clone(), process.clone()));
    }

    fn process_killed(&mut self, pgid: u32) {
        self.processes.retain(|(_, p)| p.pgid != pgid);
    }

    fn question_closed(&mut self, _call: &CallRef) {
        // A reported call kept only for its question is done with now (no later event may
        // name it: what it shows now is its last word).
        let audit = self.mode == Mode::Audit;
        let moved = &mut self.kept.moved_facts;
        self.ghosts.retain(|c| {
            let keep = c.replay.may_still_move();
            if !keep && audit {
                moved.insert(c.replay.call.clone(), CallFacts::of(&c.replay));
            }
            keep
        });
    }

    fn call_recovered(&mut self, recovered: &RecoveredCall) {
        let index = self.recoveries_read;
        if self.in_open_step(&recovered.call) {
            self.open_step_recovered.push((recovered.clone(), index));
        } else if let Some(c) = self.held_mut(&recovered.call) {
            if c.recovered_by.is_none() {
                c.recovered_by = Some(recovered.clone());
                c.recovered_in = index;
            }
        }
        if self.prober.is_some() && left_unknown(recovered) {
            let bound = self
                .call_mut(&recovered.call)
                .ok()
                .and_then(|c| crate::bound::of_call(c).cloned());
            self.peers.unknown(&recovered.call, bound.as_ref());
        }
    }

    fn recovery_applied(&mut self, recovery: Recovery) {
        self.peers.recovery_read();
        self.recoveries_read += 1;
        let recovered_at_ms = self.kept.clock.now_ms;
        self.moment(
            MomentKind::Recovered {
                recovered_at_ms,
                dropped_bytes: recovery.dropped_bytes,
                calls: recovery.calls.len(),
                interrupted_step: recovery.interrupted_step,
            },
            true,
        );
        self.last_recovery_dropped = Some(recovery.dropped_bytes);
    }

    fn session_model(&mut self, model: events::event::SessionModel) {
        self.notice(Notice::Model(model));
    }

    fn tool_schema(&mut self, schema: events::event::ToolSchema) {
        self.notice(Notice::Schema(schema));
    }

    fn context_compacted(&mut self, compacted: events::event::ContextCompacted) {
        self.notice(Notice::Compacted(compacted));
    }

    fn sandbox(&mut self, bound: events::event::SandboxBound) {
        self.notice(Notice::Sandbox(bound));
    }

    fn import_source(&mut self, source: events::event::ImportSource) {
        self.imported = true;
        self.notice(Notice::Imported(source));
    }
}

/// What is known once the last record is in.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How the bytes ended, as `analyze` says it.
    pub end: End,
    /// Questions still pending, to withdraw (`ask/cancelled`) before the recovery event.
    pub pending_asks: Vec<CallRef>,
    /// The event that balances the journal; `None` when it is balanced already (or live):
    /// exactly what [`analyze`](crate::classify::analyze) gives.
    pub recovery: Option<Recovery>,
    /// Process groups of calls that never settled and that no resume killed: they may still
    /// run ([`events::process::still_running`] says).
    pub processes: Vec<(CallRef, ProcessStarted)>,
}

/// Replays records one at a time, checking them, and hands out each call's report as soon as
/// it is final (see the module documentation).
#[derive(Debug)]
pub struct Classifier {
    replayer: Replayer<OpenCalls>,
    /// Reports final and in order, waiting to be taken.
    ready: VecDeque<Ready>,
    retained_max: usize,
}

impl Classifier {
    /// `live`: a writer holds the journal, so unfinished calls are running, not orphaned.
    pub fn new(live: bool) -> Classifier {
        Classifier::probing(live, None)
    }

    /// [`Classifier::new`], probing the workspace `prober` opened for every
    /// `TOOL_OUTCOME_UNKNOWN` call, as [`analyze_probing`](crate::classify::analyze_probing)
    /// does.
    pub fn probing(live: bool, prober: Option<Arc<Prober>>) -> Classifier {
        Classifier::with_mode(live, prober, Mode::Classify)
    }

    /// [`Classifier::probing`], keeping and handing out what `mode` says besides the reports.
    pub fn with_mode(live: bool, prober: Option<Arc<Prober>>, mode: Mode) -> Classifier {
        Classifier {
            replayer: Replayer::with_retention(OpenCalls::new(live, prober, mode)),
            ready: VecDeque::new(),
            retained_max: 0,
        }
    }

    /// `Mode::Audit`'s second pass: the facts [`Classifier::moved_facts`] gave after the
    /// first, so that a call handed out while it could still move shows its last facts, as a
    /// full replay shows them.
    pub fn set_moved_facts(&mut self, facts: HashMap<CallRef, CallFacts>) {
        self.replayer.retention_mut().moved_facts = facts;
    }

    /// `Mode::Audit`: the last facts of the calls handed out while later events could still
    /// move them (complete after [`Classifier::finish`]).
    pub fn moved_facts(&mut self) -> HashMap<CallRef, CallFacts> {
        std::mem::take(&mut self.replayer.retention_mut().kept.moved_facts)
    }

    /// `Mode::Survey`: the result (content, is error) of every call that was not final when
    /// its step closed, and of every call reported at the end of the journal (complete after
    /// [`Classifier::finish`]).
    pub fn late_results(&mut self) -> HashMap<CallRef, (String, bool)> {
        std::mem::take(&mut self.replayer.retention_mut().kept.late_results)
    }

    /// What was noticed since last taken, in journal order; take it after every record and
    /// after [`Classifier::finish`].
    pub fn take_notices(&mut self) -> std::vec::Drain<'_, Notice> {
        self.replayer.retention_mut().kept.notices.drain(..)
    }

    /// Sets whether a writer holds the journal (known once the lock was asked about), before
    /// the first record.
    pub fn set_live(&mut self, live: bool) {
        self.replayer.retention_mut().live = live;
    }

    /// Calls held now: the open step's, those waiting to be reported, and reported ones that
    /// may still move. What the classifier's memory grows with.
    pub fn retained_calls(&self) -> usize {
        self.replayer.retention().retained_calls()
    }

    /// Whether `session/close` was read.
    pub fn closed(&self) -> bool {
        self.replayer.retention().closed
    }

    /// Bytes of outcomes and arguments held now: committed calls hold none.
    pub fn retained_payload_bytes(&self) -> usize {
        self.replayer.retention().retained_payload_bytes()
    }

    /// The most calls held at once so far.
    pub fn retained_calls_max(&self) -> usize {
        self.retained_max
    }

    /// Reports that are final, in order; take them after every record.
    pub fn take_ready(&mut self) -> impl Iterator<Item = CallReport> + '_ {
        self.ready.drain(..).map(|(report, _)| report)
    }

    /// [`Classifier::take_ready`], each report with its call's facts (`Mode::Audit`; `None`
    /// in other modes, and for a call the journal never received).
    pub fn take_ready_with_facts(
        &mut self,
    ) -> impl Iterator<Item = (CallReport, Option<CallFacts>)> + '_ {
        self.ready.drain(..)
    }

    /// Decodes and applies one journal record (`record.as_ref()` for an owned one); the
    /// errors are `Replayer::apply`'s.
    pub fn apply(&mut self, record: journal::RecordRef<'_>) -> Result<(), ReplayError> {
        self.replayer.apply_ref(record)?;
        self.replayer.retention_mut().flush(&mut self.ready);
        self.retained_max = self.retained_max.max(self.retained_calls());
        Ok(())
    }

    /// Classifies what is left once the last record is in: every call not yet handed out, in
    /// order (take them with [`Classifier::take_ready`]), then the end of the bytes and the
    /// recovery event that balances the journal, exactly as
    /// [`analyze`](crate::classify::analyze) gives them.
    pub fn finish(&mut self, read_end: &ReadEnd, dropped_now: u64) -> Finished {
        let kept = self.replayer.retention_mut();
        let live = kept.live;
        let open_turn = kept.turn.as_ref().map(|t| t.turn);
        let open_step = kept
            .turn
            .as_ref()
            .and_then(|t| t.step.as_ref().map(|s| (t.turn, s.step)));
        let rest = remaining_calls(kept);
        kept.turn = None;
        let prober = kept.prober.clone();
        let mode = kept.mode;
        if mode == Mode::Audit {
            // What the ghosts show now is their last word.
            let moved = kept
                .ghosts
                .iter()
                .map(|c| (c.replay.call.clone(), CallFacts::of(&c.replay)));
            kept.kept.moved_facts.extend(moved.collect::<Vec<_>>());
        }

        let peers = end_peers(kept, &rest, prober.is_some());

        // A recovery lists its calls in journal order, the never received ones last.
        let mut recovered_calls: Vec<((u32, u32, usize), RecoveredCall)> = Vec::new();
        let mut pending_asks = Vec::new();
        for c in rest {
            let facts = kept.facts_of(&c);
            let report = report_at_end(
                c,
                live,
                kept.imported,
                &mut recovered_calls,
                &mut pending_asks,
                prober.as_deref(),
                &peers,
            );
            match mode {
                Mode::Survey => keep_result(&mut kept.kept.late_results, &report),
                Mode::Write => continue,
                Mode::Classify | Mode::Audit => {}
            }
            self.ready.push_back((report, facts));
        }
        // Stable: the never received calls (equal keys) keep model order, as `analyze` has them.
        recovered_calls.sort_by_key(|(k, _)| *k);
        let recovered_calls: Vec<RecoveredCall> =
            recovered_calls.into_iter().map(|(_, rc)| rc).collect();

        // Nothing may follow `session/close` (replay refuses it): a closed session's cut is
        // recorded by its quarantine file alone.
        let needs_recovery = !live
            && !kept.closed
            && (!recovered_calls.is_empty() || open_turn.is_some() || dropped_now > 0);
        let recovery = needs_recovery.then_some(Recovery {
            dropped_bytes: dropped_now,
            calls: recovered_calls,
            interrupted_step: open_step,
            interrupted_turn: open_turn,
        });
        Finished {
            end: end_of(read_end, dropped_now, kept.last_recovery_dropped),
            pending_asks,
            recovery,
            processes: std::mem::take(&mut kept.processes),
        }
    }
}

/// The position of the call's id in its step's response (first match), as `analyze` sorts.
fn model_index(response: Option<&ModelResponse>, call_id: &str) -> usize {
    response
        .and_then(|r| r.tool_calls.iter().position(|m| m.call_id == call_id))
        .unwrap_or(usize::MAX)
}

/// The bytes of a call's outcome content and parsed arguments.
fn payload_bytes(c: &CallReplay) -> usize {
    let content = match c.outcome.as_ref().map(|o| &o.content) {
        Some(events::event::Text::Inline(text)) => text.len(),
        Some(events::event::Text::Preview { head, tail, .. }) => head.len() + tail.len(),
        None => 0,
    };
    content + c.arguments.as_ref().map_or(0, String::len)
}
