//! What a [`Classifier`](super::Classifier) notices besides the calls' reports, for the
//! commands that print more than a classification: `audit` (each call's journaled facts, the
//! tools `session/open` names, the responses' token usage) and `rebuild` (the turns, the
//! steps' responses with the result of each call, the latest model, tool schemas and
//! reduction). Handed out in journal order and taken after every record, so that what is held
//! at a time is one record's worth, not the session.

use crate::classify::CallReport;
use runtime::code::ErrorCode;
use runtime::event::{
    Approval, CallRef, ContextCompacted, Evidence, LlmResponseDetail, ModelResponse,
    ProcessStarted, SessionModel, SideEffect, ToolDescriptor, ToolSchema, VisibleTool,
};
use runtime::replay::{AskRecord, CallReplay};
use runtime::state::CallState;
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
