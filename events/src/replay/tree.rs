//! The session as a full replay keeps it: turns, their steps, the steps' calls, and the
//! session-wide facts. [`CallReplay`] is also what every replay keeps of a call it retains,
//! whatever it retains of the rest (see [`super::Retain`]).

use crate::code::ErrorCode;
use crate::event::{
    Approval, AskAnswer, CallRef, CommittedResult, Evidence, ImportLine, ImportSource,
    ImportVerdict, ModelResponse, Outcome, PlanItem, ProcessStarted, Question, Recovery, Reply,
    RerunPolicy, Resources, SessionOpen, SessionPolicy, StepOutcome, TurnOutcome, VisibleTool,
};
use crate::state::{CallMachine, CallState};

/// A question asked about a call, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRecord {
    /// What the user was asked (`ask/pending`, or an `ask/question`'s text).
    pub question: String,
    /// `None` while pending.
    pub answer: Option<AskAnswer>,
    /// Why the question was withdrawn (`ask/cancelled`).
    pub cancel_reason: Option<String>,
    /// The built-in `ask`'s question whole (`ask/question`); `None` for a yes/no approval.
    pub structured: Option<Question>,
    /// What the person said to it (`ask/reply`).
    pub reply: Option<Reply>,
}

/// Everything the journal says about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReplay {
    /// Which call: its turn, step and id.
    pub call: CallRef,
    /// Its position in the step's `llm/response`.
    pub index: u32,
    /// The tool the model named.
    pub tool: String,
    /// The arguments as the model sent them.
    pub raw_arguments: String,
    /// Its state as the journal leaves it (`Committed` once a recovery gave it a result).
    pub state: CallState,
    /// The attempt of its last `started`.
    pub attempts: u32,
    /// The arguments as parsed (`parsed`).
    pub arguments: Option<String>,
    /// Who allowed it (`approved`).
    pub approval: Option<Approval>,
    /// Why it was refused (`rejected`).
    pub rejection: Option<(ErrorCode, String)>,
    /// Why it was cancelled before it started.
    pub cancel_reason: Option<String>,
    /// What it declared it would touch (`started`).
    pub resources: Option<Resources>,
    /// What its body returned (`settled`).
    pub outcome: Option<Outcome>,
    /// Its one result (`committed`, or a `recovery`).
    pub committed: Option<CommittedResult>,
    /// The questions asked about it, in order.
    pub asks: Vec<AskRecord>,
    /// Process groups the call started (`call/process`).
    pub processes: Vec<ProcessStarted>,
    /// Every event of the call, in order.
    pub seqs: Vec<u64>,
    /// When it was received (or adopted by a recovery).
    pub received_at_ms: u64,
    /// When its first attempt started.
    pub started_at_ms: Option<u64>,
    /// When it settled.
    pub settled_at_ms: Option<u64>,
    /// When its first question was asked (`ask/pending` or `ask/question`).
    pub asked_at_ms: Option<u64>,
    /// When it was approved.
    pub approved_at_ms: Option<u64>,
    /// When it was refused or cancelled before it started.
    pub refused_at_ms: Option<u64>,
    /// When its one result was committed, by the runtime or by a recovery.
    pub committed_at_ms: Option<u64>,
    /// Committed by a `recovery` event rather than by the runtime.
    pub recovered: bool,
    /// Never `received`: a recovery adopted it from its step's `llm/response`, so
    /// `received_at_ms` is the recovery's time, not the session's.
    pub adopted: bool,
    /// Its idempotency key, as its last `started` recorded it (schema 5; `None` for a call
    /// that never started or a journal of an older schema).
    pub idempotency_key: Option<String>,
    /// What its last `started` recorded for a probe (schema 5).
    pub evidence: Vec<Evidence>,
    /// A resume left it open to run it again (`recovery/rerun`), under this policy.
    pub rerun: Option<RerunPolicy>,
    /// Read from another agent's session file (an imported journal): where, and what the
    /// source proves of its outcome.
    pub imported: Option<ImportedCall>,
    /// The state machine its events are checked against: a recovery commits the call without
    /// moving it, so later events are checked as the runtime would have checked them.
    pub(super) machine: CallMachine,
}

impl CallReplay {
    /// A call as `received` makes it, its event seqs still to be added: also how a call that
    /// only its step's `llm/response` names is stood for (adopted by a recovery, or classified
    /// as not started at the end of a journal).
    pub fn received(
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
            asked_at_ms: None,
            approved_at_ms: None,
            refused_at_ms: None,
            committed_at_ms: None,
            recovered: false,
            adopted: false,
            idempotency_key: None,
            evidence: Vec::new(),
            rerun: None,
            imported: None,
        }
    }

    /// Whether a later event may still apply to this call: its state machine has not reached
    /// `committed` (a recovery commits a call without moving it), or a question about it is
    /// still pending. A replay that forgets finished calls must keep these.
    pub fn may_still_move(&self) -> bool {
        self.machine.state() != CallState::Committed || self.ask_pending()
    }

    /// The last question asked about the call is still unanswered.
    pub fn ask_pending(&self) -> bool {
        self.asks.last().is_some_and(|a| a.answer.is_none())
    }
}

/// What an imported journal says of one call beyond its events: the source lines it was read
/// from and the verdict of its `import/outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedCall {
    /// The line its `received` was read from (the `import/line` before it).
    pub line: Option<ImportLine>,
    /// What the source proves of its outcome; `None` until its `import/outcome` (an import cut
    /// short leaves it `None`).
    pub verdict: Option<ImportVerdict>,
    /// The line its `import/outcome` was read from: the output's, or the call's own.
    pub outcome_line: Option<ImportLine>,
}

/// One step of a turn: a model request and the calls it asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReplay {
    /// Its number in the turn, from 1.
    pub step: u32,
    /// The tools the model was shown (`step/tools`), when the journal says.
    pub tools: Option<Vec<VisibleTool>>,
    /// What the model answered (`llm/response`).
    pub response: Option<ModelResponse>,
    /// How it ended; `None` while open.
    pub outcome: Option<StepOutcome>,
    /// Its calls in journal order (calls a recovery adopted inserted by their index).
    pub calls: Vec<CallReplay>,
    /// Requests sent (`llm/request`): the number of the last attempt, 0 for none.
    pub attempts: u32,
    /// Attempts that failed before a whole response arrived (`llm/attempt-failed`).
    pub failed_attempts: Vec<crate::event::LlmAttemptFailed>,
    /// What came with the response (`llm/response-detail`).
    pub detail: Option<crate::event::LlmResponseDetail>,
    /// Why the response was refused (`llm/refusal`, schema 8).
    pub refusal: Option<crate::event::LlmRefusal>,
    /// What the adapter noticed in the response (`llm/note`, schema 8).
    pub notes: Vec<crate::event::LlmNote>,
}

impl StepReplay {
    /// A step as `step/start` opens it.
    pub fn new(step: u32) -> StepReplay {
        StepReplay {
            step,
            tools: None,
            response: None,
            outcome: None,
            calls: Vec::new(),
            attempts: 0,
            failed_attempts: Vec::new(),
            detail: None,
            refusal: None,
            notes: Vec::new(),
        }
    }
}

/// One turn: a user message and the steps that answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnReplay {
    /// Its number in the session, from 1.
    pub turn: u32,
    /// What the user said.
    pub user_text: String,
    /// How it ended; `None` while open.
    pub outcome: Option<TurnOutcome>,
    /// Its steps, in order.
    pub steps: Vec<StepReplay>,
}

/// A session as its journal tells it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionReplay {
    /// The `session/open` the journal begins with.
    pub open: Option<SessionOpen>,
    /// `session/close` was read.
    pub closed: bool,
    /// Every turn, in order.
    pub turns: Vec<TurnReplay>,
    /// The latest `plan/replace`.
    pub plan: Option<Vec<PlanItem>>,
    /// Whether plan mode was on at the end of the journal.
    pub plan_mode: bool,
    /// Process groups a resume killed (`process/killed`).
    pub killed_groups: Vec<u32>,
    /// The latest `session/policy`; None for a journal written before it existed (schema 1).
    pub policy: Option<SessionPolicy>,
    /// The latest `session/sandbox`; None for a journal written before it existed (schema 10
    /// and before) or by an embedding that runs no process.
    pub sandbox: Option<crate::event::SandboxBound>,
    /// Deferred tools `tool_search` loaded: visible in every later step.
    pub loaded_tools: std::collections::BTreeSet<String>,
    /// Faults the runtime journaled: turn, step, message.
    pub faults: Vec<(u32, u32, String)>,
    /// Every `recovery` event, in order.
    pub recoveries: Vec<Recovery>,
    /// The seq of the last record applied.
    pub last_seq: u64,
    /// The latest `session/model`: the model, system prompt and settings requests were sent
    /// with; `None` for a scripted session of schema 2 or before.
    pub model: Option<crate::event::SessionModel>,
    /// The latest `tool/schema` of each tool, by (tool name, schema hash): two tools with the
    /// same schemas share a hash, not a description.
    pub tool_schemas: std::collections::BTreeMap<(String, String), crate::event::ToolSchema>,
    /// The latest `context/compacted`: how every request after it was reduced. A summary
    /// requested with no `context/compacted` after it reduced nothing.
    pub compaction: Option<crate::event::ContextCompacted>,
    /// The latest `context/calibrated`: the provider's count every later estimate is set
    /// against.
    pub calibration: Option<crate::event::ContextCalibrated>,
    /// The `import/source` of an imported journal: the other agent's file it was read from.
    pub imported: Option<ImportSource>,
}

impl SessionReplay {
    /// Every call, in journal order.
    pub fn calls(&self) -> impl Iterator<Item = &CallReplay> {
        self.turns
            .iter()
            .flat_map(|t| t.steps.iter())
            .flat_map(|s| s.calls.iter())
    }

    /// The call named, if it was received (the first with its id in its step).
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
