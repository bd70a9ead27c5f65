//! What a [`Classifier`](super::Classifier) notices besides the calls' reports, for the
//! commands that print more than a classification: `audit` (each call's journaled facts, the
//! tools `session/open` names, the responses' token usage) and `rebuild` (the turns, the
//! steps' responses with the result of each call, the latest model, tool schemas and
//! reduction). Handed out in journal order and taken after every record, so that what is held
//! at a time is one record's worth, not the session.

use crate::classify::CallReport;
use events::code::ErrorCode;
use events::event::{
    Approval, CallRef, ContextCompacted, Evidence, LlmResponseDetail, ModelResponse,
    ProcessStarted, SessionModel, SideEffect, StepOutcome, ToolDescriptor, ToolSchema, TurnOutcome,
    VisibleTool,
};
use events::replay::{AskRecord, CallReplay};
use events::state::CallState;
use std::collections::HashMap;

/// What a classifier is read for: what it keeps and hands out besides the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reports only (`recover classify`): nothing else is kept.
    Classify,
    /// Reports with each call's [`CallFacts`], and [`Notice`]s; the final facts of calls handed
    /// out while later events could still move them are kept ([`super::Classifier::moved_facts`]).
    Audit,
    /// Reports and [`Notice`]s; the result of every call that was not final when its step
    /// closed is kept ([`super::Classifier::late_results`]): rebuild's first pass.
    Survey,
    /// [`Notice`]s only, each closed step with the results of its calls that were final when it
    /// closed; no report is made: rebuild's second pass.
    Write,
}

impl Mode {
    pub(super) fn notices(self) -> bool {
        self != Mode::Classify
    }
}

/// One thing noticed, in journal order.
#[derive(Debug)]
pub enum Notice {
    /// `session/open`: the tools the session had.
    Opened(Vec<ToolDescriptor>),
    /// A `session/model`.
    Model(SessionModel),
    /// A `tool/schema`.
    Schema(ToolSchema),
    /// A `context/compacted`.
    Compacted(ContextCompacted),
    /// A turn began with the user's text.
    TurnBegun {
        /// The turn's number.
        turn: u32,
        /// What the user said.
        user_text: String,
    },
    /// A step closed (or was still open at the end of the journal).
    Step(ClosedStep),
    /// A moment a timeline draws ([`Mode::Audit`] only).
    Moment(Moment),
    /// `import/source`: the journal was imported from another agent's session file.
    Imported(events::event::ImportSource),
    /// `session/sandbox` (schema 11): the sandbox the session's processes run under.
    Sandbox(events::event::SandboxBound),
}

/// A moment of the session, as `audit --html` draws it: when, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    /// Wall-clock time, milliseconds since the Unix epoch: the record's, except for what a
    /// recovery closed, which is put at the last record the dead process wrote.
    pub at_ms: u64,
    /// What happened.
    pub what: MomentKind,
}

/// What a [`Moment`] marks.
#[derive(Debug, Clone, PartialEq)]
pub enum MomentKind {
    /// `turn/start`.
    TurnBegun {
        /// The turn.
        turn: u32,
    },
    /// `turn/end`, or a recovery closing the turn (`Interrupted`).
    TurnEnded {
        /// The turn.
        turn: u32,
        /// How it ended.
        outcome: TurnOutcome,
    },
    /// `step/start`.
    StepBegun {
        /// Its turn.
        turn: u32,
        /// The step.
        step: u32,
    },
    /// `step/end`, or a recovery closing the step (`Interrupted`).
    StepEnded {
        /// Its turn.
        turn: u32,
        /// The step.
        step: u32,
        /// How it ended.
        outcome: StepOutcome,
    },
    /// `fault`: a runtime error stopped the step's batch.
    Fault {
        /// Its turn.
        turn: u32,
        /// Its step.
        step: u32,
        /// The error, as text.
        message: String,
    },
    /// A `recovery` event: the process writing the session had died; [`Moment::at_ms`] is the
    /// last record it wrote.
    Recovered {
        /// When `recover` appended the event.
        recovered_at_ms: u64,
        /// Torn bytes cut before it.
        dropped_bytes: u64,
        /// The calls it gave a result.
        calls: usize,
        /// The (turn, step) it closed, when one was open.
        interrupted_step: Option<(u32, u32)>,
    },
    /// `session/close`.
    Closed,
    /// `session/reopen`: the finished session goes on; it is no longer closed.
    Reopened,
}

/// The times a [`Moment`] is put at: the record being applied, and the last one written by the
/// session's own process (a `recovery`, and the `ask/cancelled` that `recover` withdraws
/// pending questions with before it, come after the process died).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Clock {
    pub(super) now_ms: u64,
    pub(super) written_ms: u64,
}

impl Clock {
    pub(super) fn tick(&mut self, at_ms: u64, kind: &'static str) {
        self.now_ms = at_ms;
        if kind != "recovery" && kind != "ask/cancelled" {
            self.written_ms = at_ms;
        }
    }
}

/// A step as it closed: what the model was shown and said, and the results of its calls.
#[derive(Debug)]
pub struct ClosedStep {
    /// Its turn.
    pub turn: u32,
    /// Its number in the turn.
    pub step: u32,
    /// The tools it showed the model (`step/tools`).
    pub tools: Option<Vec<VisibleTool>>,
    /// What the model answered.
    pub response: Option<ModelResponse>,
    /// What came with the response.
    pub detail: Option<LlmResponseDetail>,
    /// Why the response was refused (`llm/refusal`).
    pub refusal: Option<events::event::LlmRefusal>,
    /// What the adapter noticed in it (`llm/note`).
    pub notes: Vec<events::event::LlmNote>,
    /// Its calls in journal order: each call's id and, in [`Mode::Write`], its result's content
    /// and whether it is an error when the result was final as the step closed (`None`: decided
    /// later, by a later `recovery` or at the end of the journal).
    pub results: Vec<(String, Option<(String, bool)>)>,
    /// The step was still open at the end of the journal.
    pub open_at_end: bool,
}

/// What `audit` shows of a call beyond its report, as the journal left the call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallFacts {
    /// Who allowed it.
    pub approval: Option<Approval>,
    /// Why it was refused.
    pub rejection: Option<(ErrorCode, String)>,
    /// Why it was cancelled before it started.
    pub cancel_reason: Option<String>,
    /// The last question asked about it.
    pub last_ask: Option<AskRecord>,
    /// Its outcome's duration and side effects, once it settled.
    pub outcome: Option<(u64, Vec<SideEffect>)>,
    /// Its idempotency key (schema 5).
    pub idempotency_key: Option<String>,
    /// What its last `started` recorded for a probe.
    pub evidence: Vec<Evidence>,
    /// Process groups it started.
    pub processes: Vec<ProcessStarted>,
    /// When each of its state changes was written.
    pub times: CallTimes,
    /// Read from another agent's session file: its lines and verdict.
    pub imported: Option<events::replay::ImportedCall>,
}

/// When a call's state changes were written: wall-clock milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTimes {
    /// `received`; `None` for a call never received (a recovery adopted it from its step's
    /// `llm/response`: the process died before it wrote one).
    pub received_ms: Option<u64>,
    /// Its first question.
    pub asked_ms: Option<u64>,
    /// `approved`.
    pub approved_ms: Option<u64>,
    /// `rejected` or `cancelled-before-start`.
    pub refused_ms: Option<u64>,
    /// Its first `started`.
    pub started_ms: Option<u64>,
    /// `settled`.
    pub settled_ms: Option<u64>,
    /// `committed`, or the `recovery` that gave it its result.
    pub committed_ms: Option<u64>,
}

impl CallFacts {
    /// The facts of a call as replayed.
    pub fn of(c: &CallReplay) -> CallFacts {
        CallFacts {
            approval: c.approval.clone(),
            rejection: c.rejection.clone(),
            cancel_reason: c.cancel_reason.clone(),
            last_ask: c.asks.last().cloned(),
            outcome: c
                .outcome
                .as_ref()
                .map(|o| (o.duration_ms, o.side_effects.clone())),
            idempotency_key: c.idempotency_key.clone(),
            evidence: c.evidence.clone(),
            processes: c.processes.clone(),
            times: CallTimes {
                received_ms: (!c.adopted).then_some(c.received_at_ms),
                asked_ms: c.asked_at_ms,
                approved_ms: c.approved_at_ms,
                refused_ms: c.refused_at_ms,
                started_ms: c.started_at_ms,
                settled_ms: c.settled_at_ms,
                committed_ms: c.committed_at_ms,
            },
            imported: c.imported.clone(),
        }
    }
}

/// What the modes beyond [`Mode::Classify`] keep across the journal: a few calls each.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// Notices not taken yet.
    pub(super) notices: Vec<Notice>,
    /// [`Mode::Survey`]: calls not final when their step closed.
    pub(super) late: std::collections::HashSet<CallRef>,
    /// [`Mode::Survey`]: their results (the first report of each), and those of every call
    /// reported at the end of the journal.
    pub(super) late_results: HashMap<CallRef, (String, bool)>,
    /// [`Mode::Audit`]: the last facts of calls handed out while they could still move.
    pub(super) moved_facts: HashMap<CallRef, CallFacts>,
    /// [`Mode::Audit`]: when the record being applied was written.
    pub(super) clock: Clock,
}

/// A call's result when final ([`Mode::Write`] only): its recovery's, or its own committed
/// one, whose text is taken (no report is made of the call in that mode; the rules only ask
/// whether it has one).
pub(super) fn final_result(c: &mut super::Call, mode: Mode) -> Option<(String, bool)> {
    if mode != Mode::Write {
        return None;
    }
    if let Some(rc) = &c.recovered_by {
        return Some((rc.result.content.clone(), rc.result.is_error));
    }
    if c.replay.state != CallState::Committed {
        return None;
    }
    let r = c.replay.committed.as_mut()?;
    Some((std::mem::take(&mut r.content), r.is_error))
}

/// Keeps a report's result, the first for its call.
pub(super) fn keep_result(results: &mut HashMap<CallRef, (String, bool)>, report: &CallReport) {
    results
        .entry(report.call.clone())
        .or_insert_with(|| (report.result.content.clone(), report.result.is_error));
}
