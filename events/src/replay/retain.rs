//! What a replay keeps: the [`Retain`] policy the rules ([`super::rules`]) are written
//! against, and the policy that keeps everything ([`SessionReplay`] itself).
//!
//! The rules decide whether an event fits and what it does to a call; a policy decides where
//! turns, steps and calls live and how long. Keeping everything gives the session whole (audit,
//! resume, rebuild); `recover classify` keeps only the calls still open and hands the others
//! out as they finish, so its memory does not grow with the journal.

use super::tree::{CallReplay, SessionReplay, StepReplay, TurnReplay};
use crate::event::{
    CallRef, PlanItem, ProcessStarted, RecoveredCall, Recovery, SessionOpen, SessionPolicy,
    SideEffect, StepOutcome, TurnOutcome,
};

/// The open turn, as far as the rules need it to check what comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnCursor {
    /// Its number.
    pub turn: u32,
    /// Steps begun in it so far.
    pub steps: u32,
}

/// Where a replay keeps what it has read, and what it lets go.
///
/// The rules ask a policy about the shape read so far (the first group of methods), tell it
/// what changed once an event is found to fit (the second), and hand it facts it may keep or
/// drop (the third, which keep nothing unless a policy says otherwise). The open step's calls
/// must be kept whole, and so must every call that [`CallReplay::may_still_move`]: the rules
/// check later events against them. A policy never checks anything itself.
pub trait Retain {
    /// `session/open` was read.
    fn opened(&self) -> bool;
    /// `session/close` was read.
    fn closed(&self) -> bool;
    /// Turns begun so far.
    fn turns_begun(&self) -> u32;
    /// The open turn, if any.
    fn open_turn(&self) -> Option<TurnCursor>;
    /// The open step of the open turn, if any, with its calls.
    fn open_step(&mut self) -> Option<&mut StepReplay>;
    /// A call received earlier; the error says why it is not there (never received, or, for a
    /// policy that forgets, perhaps finished and forgotten).
    fn call_mut(&mut self, call: &CallRef) -> Result<&mut CallReplay, String>;

    /// `session/open`, checked.
    fn session_opened(&mut self, open: SessionOpen);
    /// `session/close`, checked.
    fn session_closed(&mut self);
    /// `session/reopen`, checked (right after `session/close`): the session is open again.
    fn session_reopened(&mut self);
    /// A turn begins (`turn/start`, checked).
    fn turn_begun(&mut self, turn: u32, user_text: String);
    /// The open turn ends: `turn/end`, or a recovery that interrupts it (which may leave a step
    /// open in it).
    fn turn_ended(&mut self, outcome: TurnOutcome);
    /// A step begins in the open turn (`step/start`, checked).
    fn step_begun(&mut self, step: u32);
    /// The open step ends: `step/end`, or a recovery that interrupts it.
    fn step_ended(&mut self, outcome: StepOutcome);

    /// The seq of the record about to be applied (before its checks).
    fn record_seq(&mut self, _seq: u64) {}
    /// The wall-clock time and the kind (`turn/start`, ...) of the record about to be applied
    /// (before its checks).
    fn record_time(&mut self, _at_ms: u64, _kind: &'static str) {}
    /// A call settled (its outcome is on the call now).
    fn call_settled(&mut self, _call: &CallRef) {}
    /// The call's one result is committed: its outcome and arguments are no longer needed to
    /// classify it (a policy that keeps little drops them here).
    fn call_committed(&mut self, _call: &CallRef) {}
    /// A running call started a process group (`call/process`; it is on the call too).
    fn process_started(&mut self, _call: &CallRef, _process: &ProcessStarted) {}
    /// A resume killed a process group (`process/killed`).
    fn process_killed(&mut self, _pgid: u32) {}
    /// A question about the call was answered, expired or withdrawn.
    fn question_closed(&mut self, _call: &CallRef) {}
    /// A `recovery` committed the call (it is marked so already).
    fn call_recovered(&mut self, _recovered: &RecoveredCall) {}
    /// A `recovery` event, once all of it was applied.
    fn recovery_applied(&mut self, _recovery: Recovery) {}
    /// A `fault` the runtime journaled.
    fn fault(&mut self, _turn: u32, _step: u32, _message: String) {}
    /// `plan/replace`.
    fn plan_replaced(&mut self, _items: Vec<PlanItem>) {}
    /// `plan/mode`.
    fn plan_mode(&mut self, _on: bool) {}
    /// `session/policy`.
    fn policy(&mut self, _policy: SessionPolicy) {}
    /// `session/sandbox`.
    fn sandbox(&mut self, _bound: crate::event::SandboxBound) {}
    /// `session/model`.
    fn session_model(&mut self, _model: crate::event::SessionModel) {}
    /// `tool/schema`.
    fn tool_schema(&mut self, _schema: crate::event::ToolSchema) {}
    /// A `context/compacted`: the reduction every later request is sent with.
    fn context_compacted(&mut self, _compacted: crate::event::ContextCompacted) {}
    /// A `context/calibrated`: what later estimates are set against.
    fn context_calibrated(&mut self, _calibrated: crate::event::ContextCalibrated) {}
    /// `import/source`: the journal is an imported one.
    fn import_source(&mut self, _source: crate::event::ImportSource) {}
}

/// Keeps everything: the session whole, as audit, resume and rebuild need it.
impl Retain for SessionReplay {
    fn opened(&self) -> bool {
        self.open.is_some()
    }

    fn closed(&self) -> bool {
        self.closed
    }

    fn turns_begun(&self) -> u32 {
        // Turns are numbered by u32 and each needs a record: no journal holds more.
        u32::try_from(self.turns.len()).unwrap_or(u32::MAX)
    }

    fn open_turn(&self) -> Option<TurnCursor> {
        SessionReplay::open_turn(self).map(|t| TurnCursor {
            turn: t.turn,
            steps: u32::try_from(t.steps.len()).unwrap_or(u32::MAX),
        })
    }

    fn open_step(&mut self) -> Option<&mut StepReplay> {
        self.turns
            .last_mut()
            .filter(|t| t.outcome.is_none())?
            .steps
            .last_mut()
            .filter(|s| s.outcome.is_none())
    }

    fn call_mut(&mut self, call: &CallRef) -> Result<&mut CallReplay, String> {
        self.turns
            .get_mut((call.turn as usize).wrapping_sub(1))
            .and_then(|t| t.steps.get_mut((call.step as usize).wrapping_sub(1)))
            .and_then(|s| s.calls.iter_mut().find(|c| c.call.call_id == call.call_id))
            .ok_or_else(|| format!("{call} was never received"))
    }

    fn session_opened(&mut self, open: SessionOpen) {
        self.open = Some(open);
    }

    fn session_closed(&mut self) {
        self.closed = true;
    }

    fn session_reopened(&mut self) {
        self.closed = false;
    }

    fn turn_begun(&mut self, turn: u32, user_text: String) {
        self.turns.push(TurnReplay {
            turn,
            user_text,
            outcome: None,
            steps: Vec::new(),
        });
    }

    fn turn_ended(&mut self, outcome: TurnOutcome) {
        // A step left open by a recovery that interrupts only the turn stays open, as written.
        if let Some(t) = self.turns.last_mut() {
            t.outcome = Some(outcome);
        }
    }

    fn step_begun(&mut self, step: u32) {
        if let Some(t) = self.turns.last_mut() {
            t.steps.push(StepReplay::new(step));
        }
    }

    fn step_ended(&mut self, outcome: StepOutcome) {
        if let Some(s) = Retain::open_step(self) {
            s.outcome = Some(outcome);
        }
    }

    fn record_seq(&mut self, seq: u64) {
        self.last_seq = seq;
    }

    fn call_settled(&mut self, call: &CallRef) {
        // Tools `tool_search` loaded stay visible for the rest of the session.
        let loaded: Vec<String> = self
            .call(call)
            .and_then(|c| c.outcome.as_ref())
            .into_iter()
            .flat_map(|o| o.side_effects.iter())
            .flat_map(|e| match e {
                SideEffect::ToolsLoaded { names } => names.clone(),
                _ => Vec::new(),
            })
            .collect();
        self.loaded_tools.extend(loaded);
    }

    fn process_killed(&mut self, pgid: u32) {
        self.killed_groups.push(pgid);
    }

    fn recovery_applied(&mut self, recovery: Recovery) {
        self.recoveries.push(recovery);
    }

    fn fault(&mut self, turn: u32, step: u32, message: String) {
        self.faults.push((turn, step, message));
    }

    fn plan_replaced(&mut self, items: Vec<PlanItem>) {
        self.plan = Some(items);
    }

    fn plan_mode(&mut self, on: bool) {
        self.plan_mode = on;
    }

    fn policy(&mut self, policy: SessionPolicy) {
        self.policy = Some(policy);
    }

    fn sandbox(&mut self, bound: crate::event::SandboxBound) {
        self.sandbox = Some(bound);
    }

    fn session_model(&mut self, model: crate::event::SessionModel) {
        self.model = Some(model);
    }

    fn tool_schema(&mut self, schema: crate::event::ToolSchema) {
        self.tool_schemas
            .insert((schema.name.clone(), schema.schema_hash.clone()), schema);
    }
    fn context_compacted(&mut self, compacted: crate::event::ContextCompacted) {
        self.compaction = Some(compacted);
    }

    fn context_calibrated(&mut self, calibrated: crate::event::ContextCalibrated) {
        self.calibration = Some(calibrated);
    }

    fn import_source(&mut self, source: crate::event::ImportSource) {
        self.imported = Some(source);
    }
}
