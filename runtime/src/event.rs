//! The journal's events (DESIGN.md §2): everything that happens in a session, in order.
//!
//! Why these shapes: the journal is the single source of truth, so each event is
//! self-describing (every per-call event names its call by turn, step and call id, and points
//! back at the event it follows with `source_seqs`), and everything a model or a person saw is
//! kept as text, byte for byte: raw arguments, JSON values, content. The codec (bincode) cannot
//! store `serde_json::Value`, and raw text is what must be kept for malformed input anyway.
//!
//! Schema stability (docs/FORMAT.md, *Versioning*): events, variants and fields are only ever
//! added at the end, and every addition bumps [`EVENT_SCHEMA_VERSION`]; a reader that meets a
//! payload it cannot decode in a journal of a newer schema says so instead of calling it
//! corruption. A change that is not an addition bumps the journal format version.

use crate::code::ErrorCode;
use crate::state::CallState;
use serde::{Deserialize, Serialize};

/// The version of this event schema, recorded in `session/open`. Bumped on every addition (a
/// new event, variant or field); schema 1 is the schema as `docs/FORMAT.md` lists it for 1;
/// 2 added `session/policy`, `call/process` and `process/killed`.
pub const EVENT_SCHEMA_VERSION: u32 = 2;

/// The event schema a `session/open` payload declares, read from its fixed prefix without
/// decoding the rest: `at_ms` (u64), the event index (u32, 0 for `session/open`), then
/// `schema_version` (u32), at bytes 12..16. Every schema keeps this prefix. `None` when the
/// payload is not a `session/open`.
pub fn declared_schema(payload: &[u8]) -> Option<u32> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            payload.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    if word(8)? != 0 {
        return None;
    }
    word(12)
}

/// One journal record: when, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub event: Event,
}

/// Borrowed form of [`Record`] for writing; encodes to the same bytes.
#[derive(Serialize)]
pub(crate) struct RecordRef<'a> {
    pub at_ms: u64,
    pub event: &'a Event,
}

/// Names one tool call: unique within a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallRef {
    pub turn: u32,
    pub step: u32,
    pub call_id: String,
}

impl std::fmt::Display for CallRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "call {} (turn {}, step {})",
            self.call_id, self.turn, self.step
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    ToolUse,
    EndTurn,
    /// The model hit its output length limit: every call in the message is rejected.
    Length,
}

/// One tool call as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCall {
    pub call_id: String,
    pub name: String,
    /// Raw argument text, byte for byte (may be empty or invalid JSON).
    pub arguments: String,
}

/// The assistant message of one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelResponse {
    pub text: String,
    pub tool_calls: Vec<ModelCall>,
    pub stop_reason: StopReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolSource {
    BuiltIn,
    /// From outside the process, e.g. an MCP server.
    External {
        server: String,
    },
    /// A tool of an MCP server: `server` is the name the configuration gives it,
    /// `implementation` and `version` what the server said of itself when it started.
    Mcp {
        server: String,
        implementation: String,
        version: String,
    },
}

impl ToolSource {
    /// Built-ins are trusted; everything else came from outside the process.
    pub fn is_external(&self) -> bool {
        !matches!(self, ToolSource::BuiltIn)
    }
}

impl std::fmt::Display for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolSource::BuiltIn => f.write_str("built-in"),
            ToolSource::External { server } => write!(f, "external ({server})"),
            ToolSource::Mcp {
                server,
                implementation,
                version,
            } => write!(f, "mcp {server} ({implementation} {version})"),
        }
    }
}

/// A tool the model was shown in one step: its name and the hash of the schemas it saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisibleTool {
    pub name: String,
    pub schema_hash: String,
}

/// What `session/open` records of each tool: not just its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDescriptor {
    pub name: String,
    pub source: ToolSource,
    pub version: String,
    /// sha256 (hex) of the canonical JSON of the input and output schemas.
    pub schema_hash: String,
}

/// How approval questions that nobody answers are answered, and whether every `bash` call
/// asks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Unanswered questions are answered "allowed once"; `bash` does not ask.
    Allow,
    /// Unanswered questions are denied, and every `bash` call asks first.
    Deny,
}

/// When the session's records are made durable (the journal's `FsyncPolicy`, journaled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPolicy {
    Always,
    Group,
    Never,
}

/// A process a call started: the leader of the call's own process group, named so that a
/// reused pid is not taken for it (its start time in clock ticks since boot, and the boot's id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStarted {
    pub pid: u32,
    pub pgid: u32,
    pub start_ticks: u64,
    pub boot_id: String,
}

/// The configuration file a session was set up from: its path and the sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    pub path: String,
    pub sha256: String,
}

/// What a session may do and how it writes, journaled so that a resume reapplies it rather
/// than falling back to defaults. Plan mode is not here: `plan/mode` events already say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPolicy {
    pub approval: ApprovalPolicy,
    pub parallel_max: u32,
    pub fsync: SyncPolicy,
    /// Tools the model is not shown every step: (name, "deferred" | "hidden"), sorted by name.
    pub exposure: Vec<(String, String)>,
    /// None when the session used no configuration file.
    pub config: Option<ConfigFile>,
    /// Why this policy was recorded: the session opened, or what a resume changed.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOpen {
    pub schema_version: u32,
    pub session_id: String,
    pub workspace: String,
    pub tools: Vec<ToolDescriptor>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepOutcome {
    Completed,
    Cancelled,
    Failed {
        message: String,
    },
    /// Closed by recovery: the process died during the step.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TurnOutcome {
    Completed,
    Cancelled,
    Failed {
        message: String,
    },
    /// Closed by recovery: the process died during the turn.
    Interrupted,
}

/// What a call declares it will touch: reported for calls whose outcome is unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    /// Free-text intents, e.g. the command a shell call runs.
    pub intents: Vec<String>,
}

/// A side effect the tool confirms happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SideEffect {
    FsWrite {
        path: String,
        /// sha256 (hex) before the write; `None` when the file did not exist.
        before_sha256: Option<String>,
        after_sha256: String,
    },
    ProcExit {
        pid: u32,
        status: Option<i32>,
        signal: Option<i32>,
    },
    Other {
        kind: String,
        detail: String,
    },
    /// The session's plan (todo table) was replaced whole; the runtime also journals
    /// `plan/replace` right after the call's `settled`.
    PlanReplaced {
        items: Vec<PlanItem>,
    },
    /// `tool_search` loaded these deferred tools: they are visible from the next step on.
    ToolsLoaded {
        names: Vec<String>,
    },
}

/// How a call was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Approval {
    /// A pre-execute listener allowed it.
    Listener { name: String },
    /// No listener decided; the session's default is allow.
    Default,
    /// A person answered a question.
    Asked { answer: AskAnswer },
    /// A person had answered "always" for this tool earlier in the session.
    AlwaysAllowed,
}

/// The answer to an `ask`. Only the two "allowed" answers let a call continue: a timeout or a
/// disconnect is never an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskAnswer {
    AllowedOnce,
    AllowedAlways,
    Denied,
    Expired,
    Cancelled,
}

impl AskAnswer {
    pub fn allows(self) -> bool {
        matches!(self, AskAnswer::AllowedOnce | AskAnswer::AllowedAlways)
    }
}

/// Text that may be too large to keep inline: then a head, a tail and the whole text's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Text {
    Inline(String),
    Preview {
        head: String,
        tail: String,
        total_bytes: u64,
        sha256: String,
        /// Where the whole text is kept, when a spill store took it.
        locator: Option<String>,
    },
}

impl Text {
    /// The inline text, or a plain rendering of the preview.
    pub fn render(&self) -> String {
        match self {
            Text::Inline(s) => s.clone(),
            Text::Preview {
                head,
                tail,
                total_bytes,
                sha256,
                locator,
            } => {
                let where_ = locator
                    .as_deref()
                    .map(|l| format!("; full text at {l}"))
                    .unwrap_or_default();
                format!(
                    "{head}\n[... {total_bytes} bytes in all, sha256 {sha256}{where_} ...]\n{tail}"
                )
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutcomeStatus {
    Success,
    Error { code: ErrorCode, message: String },
}

/// A call's real outcome, as the tool body (and its contract check) produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub status: OutcomeStatus,
    pub content: Text,
    /// The structured value, as JSON text.
    pub value: Option<String>,
    /// Private details for people (diffs, timings), as JSON text; never sent to the model.
    pub details: Option<String>,
    pub side_effects: Vec<SideEffect>,
    pub attempts: u32,
    pub duration_ms: u64,
}

/// The result as given to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedResult {
    pub content: String,
    pub is_error: bool,
    pub code: Option<ErrorCode>,
    /// The structured value, as JSON text.
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub text: String,
    pub status: String,
}

/// What recovery decided about an unfinished call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Classification {
    ToolNotStarted,
    ToolOutcomeUnknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveredCall {
    pub call: CallRef,
    /// The last state the journal shows.
    pub state: CallState,
    /// `None` when the call had settled: its real result is committed as is.
    pub classification: Option<Classification>,
    pub result: CommittedResult,
}

/// Appended by `recover` so that a second recovery, or a resume, starts from a balanced journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    pub dropped_bytes: u64,
    pub calls: Vec<RecoveredCall>,
    pub interrupted_step: Option<(u32, u32)>,
    pub interrupted_turn: Option<u32>,
}

/// Every event. Variants are appended only (the journal stores the variant index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    SessionOpen(SessionOpen),
    TurnStart {
        turn: u32,
        user_text: String,
    },
    StepStart {
        turn: u32,
        step: u32,
    },
    LlmResponse {
        turn: u32,
        step: u32,
        response: ModelResponse,
    },
    StepEnd {
        turn: u32,
        step: u32,
        outcome: StepOutcome,
    },
    TurnEnd {
        turn: u32,
        outcome: TurnOutcome,
    },
    SessionClose,
    Received {
        call: CallRef,
        /// Position in the assistant message (model order), from 0.
        index: u32,
        tool: String,
        raw_arguments: String,
        source_seqs: Vec<u64>,
    },
    Parsed {
        call: CallRef,
        /// The arguments as parsed (empty text becomes `{}`), as JSON text.
        arguments: String,
        source_seqs: Vec<u64>,
    },
    Approved {
        call: CallRef,
        approval: Approval,
        source_seqs: Vec<u64>,
    },
    /// Durable before the tool body runs (DESIGN.md I1).
    Started {
        call: CallRef,
        attempt: u32,
        resources: Resources,
        source_seqs: Vec<u64>,
    },
    Settled {
        call: CallRef,
        outcome: Outcome,
        source_seqs: Vec<u64>,
    },
    Committed {
        call: CallRef,
        result: CommittedResult,
        source_seqs: Vec<u64>,
    },
    Rejected {
        call: CallRef,
        code: ErrorCode,
        reason: String,
        source_seqs: Vec<u64>,
    },
    CancelledBeforeStart {
        call: CallRef,
        reason: String,
        source_seqs: Vec<u64>,
    },
    AskPending {
        call: CallRef,
        question: String,
    },
    AskAnswered {
        call: CallRef,
        answer: AskAnswer,
    },
    AskCancelled {
        call: CallRef,
        reason: String,
    },
    AskExpired {
        call: CallRef,
    },
    PlanReplace {
        items: Vec<PlanItem>,
    },
    SpillStored {
        locator: String,
        bytes: u64,
        sha256: String,
    },
    Fault {
        turn: u32,
        step: u32,
        message: String,
    },
    Recovery(Recovery),
    /// The tools the model is shown in this step, right after `step/start`.
    StepTools {
        turn: u32,
        step: u32,
        tools: Vec<VisibleTool>,
    },
    /// Plan mode turned on or off; `call` is the `ask` whose approval ended it.
    PlanMode {
        on: bool,
        reason: String,
        call: Option<CallRef>,
    },
    /// The session's policy: right after `session/open`, and again whenever a resume changes it.
    SessionPolicy(SessionPolicy),
    /// A running call started a process group (made durable before the call goes on).
    CallProcess {
        call: CallRef,
        process: ProcessStarted,
    },
    /// A resume killed a process group that a call of a crashed run left running.
    ProcessKilled {
        call: CallRef,
        pgid: u32,
        signal: i32,
    },
}

impl Event {
    /// How many variants this build knows; a stored index at or past it is a future event type.
    pub const VARIANT_COUNT: u32 = 28;

    /// The event's name as DESIGN.md spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionOpen(_) => "session/open",
            Event::TurnStart { .. } => "turn/start",
            Event::StepStart { .. } => "step/start",
            Event::LlmResponse { .. } => "llm/response",
            Event::StepEnd { .. } => "step/end",
            Event::TurnEnd { .. } => "turn/end",
            Event::SessionClose => "session/close",
            Event::Received { .. } => "received",
            Event::Parsed { .. } => "parsed",
            Event::Approved { .. } => "approved",
            Event::Started { .. } => "started",
            Event::Settled { .. } => "settled",
            Event::Committed { .. } => "committed",
            Event::Rejected { .. } => "rejected",
            Event::CancelledBeforeStart { .. } => "cancelled-before-start",
            Event::AskPending { .. } => "ask/pending",
            Event::AskAnswered { .. } => "ask/answered",
            Event::AskCancelled { .. } => "ask/cancelled",
            Event::AskExpired { .. } => "ask/expired",
            Event::PlanReplace { .. } => "plan/replace",
            Event::SpillStored { .. } => "spill/stored",
            Event::Fault { .. } => "fault",
            Event::Recovery(_) => "recovery",
            Event::StepTools { .. } => "step/tools",
            Event::PlanMode { .. } => "plan/mode",
            Event::SessionPolicy(_) => "session/policy",
            Event::CallProcess { .. } => "call/process",
            Event::ProcessKilled { .. } => "process/killed",
        }
    }

    /// The call a per-call event belongs to.
    pub fn call(&self) -> Option<&CallRef> {
        match self {
            Event::Received { call, .. }
            | Event::Parsed { call, .. }
            | Event::Approved { call, .. }
            | Event::Started { call, .. }
            | Event::Settled { call, .. }
            | Event::Committed { call, .. }
            | Event::Rejected { call, .. }
            | Event::CancelledBeforeStart { call, .. }
            | Event::AskPending { call, .. }
            | Event::AskAnswered { call, .. }
            | Event::AskCancelled { call, .. }
            | Event::AskExpired { call, .. } => Some(call),
            _ => None,
        }
    }
}
