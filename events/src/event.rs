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
use serde::{Deserialize, Serialize};

/// The version of this event schema, recorded in `session/open`. Bumped on every addition (a
/// new event, variant or field); schema 1 is the schema as `docs/FORMAT.md` lists it for 1;
/// 2 added `session/policy`, `call/process` and `process/killed`; 3 added `session/model`,
/// `tool/schema`, `llm/request`, `llm/attempt-failed`, `llm/response-detail`, the stop
/// reason `interrupted` and the approval policy `ask`; 4 added `ask/question`, `ask/reply`, the
/// answers `answered` and `declined`, the codes `QUESTION_DECLINED` and `QUESTION_UNANSWERED`,
/// `context/summary-requested` and `context/compacted`; 5 added `started` with an idempotency
/// key and evidence (the older `started` is still read) and `recovery/rerun`; 6 added
/// `writer/stolen`; 7 added `import/source`, `import/line` and `import/outcome` (a session
/// another agent wrote, imported by `recover import`); 8 added the stop reason `refusal`,
/// `llm/refusal` and `llm/note` (and wider provider state: every content block, item or part a
/// provider needs back); 9 added `session/reopen` (a finished session given a new prompt goes
/// on) and the code `TOO_MANY_CALLS` (the calls of a message past the runtime's number,
/// answered rather than the message dropped); 10 added `context/calibrated` (the provider's
/// token count of a refused request, which the session's estimates are set against from then on);
/// 11 added `session/sandbox` and the evidence `Sandbox` (what a call's process could touch).
pub const EVENT_SCHEMA_VERSION: u32 = 11;

/// The event schema a `session/open` record declares, read from its prefix without decoding
/// the rest: `at_ms` (u64), the event index (u32, 0 for `session/open`), then `schema_version`
/// (u32), laid out as the record's format version lays integers out (format 1: bytes 12..16).
/// Every schema keeps this prefix. `None` when the record is not a `session/open`.
pub fn declared_schema(record: &journal::RecordRef<'_>) -> Option<u32> {
    let (_at_ms, index, schema): (u64, u32, u32) = record.decode_prefix().ok()?;
    (index == 0).then_some(schema)
}

/// One journal record: when, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened.
    pub event: Event,
}

/// Borrowed form of [`Record`] for writing; encodes to the same bytes.
#[derive(Serialize)]
pub struct RecordRef<'a> {
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened, borrowed.
    pub event: &'a Event,
}

impl Event {
    /// The call a per-call state change names and the seqs it follows: what
    /// the runtime's call tracker lends an event and takes back once it is journaled. `None` for
    /// every event that is no state change of a call. For the runtime's call tracker only:
    /// hidden from the documented face.
    #[doc(hidden)]
    pub fn call_parts_mut(&mut self) -> Option<(&mut CallRef, &mut Vec<u64>)> {
        match self {
            Event::Received {
                call, source_seqs, ..
            }
            | Event::Parsed {
                call, source_seqs, ..
            }
            | Event::Approved {
                call, source_seqs, ..
            }
            | Event::StartedV4 {
                call, source_seqs, ..
            }
            | Event::Settled {
                call, source_seqs, ..
            }
            | Event::Committed {
                call, source_seqs, ..
            }
            | Event::Rejected {
                call, source_seqs, ..
            }
            | Event::CancelledBeforeStart {
                call, source_seqs, ..
            }
            | Event::Started(CallStarted {
                call, source_seqs, ..
            }) => Some((call, source_seqs)),
            _ => None,
        }
    }
}

/// Names one tool call: unique within a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallRef {
    /// The turn the call was sent in, from 1.
    pub turn: u32,
    /// The step within that turn whose model response sent it, from 1.
    pub step: u32,
    /// The model's id for the call, as the provider sent it; unique within one assistant message
    /// (and expected to be within the session).
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
/// Why the model stopped generating the assistant message, as its provider said.
pub enum StopReason {
    /// The model asks for the tool calls in the message.
    ToolUse,
    /// The model considers its turn done: the driver closes the turn after this step. Calls in
    /// the message still run; only `Length` rejects them.
    EndTurn,
    /// The model hit its output length limit: every call in the message is rejected.
    Length,
    /// The stream broke or the user stopped it before the model finished (schema 3): the text
    /// received so far is the message; every call in it is rejected, none runs.
    Interrupted,
    /// The provider refused the answer, or stopped it as unsafe (schema 8: Anthropic
    /// `refusal`, OpenAI `content_filter` or a refusal, Gemini `SAFETY` and its kind): the text
    /// is what the model said, if anything; every call in it is rejected, none runs; the turn
    /// ends, and the step's `llm/refusal` says why.
    // Last: the journal stores the variant's index.
    Refusal,
}

/// One tool call as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCall {
    /// The model's id for the call, as the provider sent it; unique within one assistant message.
    pub call_id: String,
    /// The tool name the model asked for (it may name no tool: the call is then rejected
    /// `UNKNOWN_TOOL`).
    pub name: String,
    /// Raw argument text, byte for byte (may be empty or invalid JSON).
    pub arguments: String,
}

/// The assistant message of one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The message's text besides the tool calls; may be empty.
    pub text: String,
    /// The tool calls, in the order the model wrote them.
    pub tool_calls: Vec<ModelCall>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// Where a tool comes from: built in, or from outside the process (whose tools are trusted less).
pub enum ToolSource {
    /// One of the runtime's own tools (bash, the file tools, `ask`, `todo`, `tool_search`).
    BuiltIn,
    /// From outside the process, e.g. an MCP server.
    External {
        /// The name of what provides the tool, for messages.
        server: String,
    },
    /// A tool of an MCP server: `server` is the name the configuration gives it,
    /// `implementation` and `version` what the server said of itself when it started.
    Mcp {
        /// The server's name in the configuration.
        server: String,
        /// The server's own name for itself (`serverInfo.name` at `initialize`).
        implementation: String,
        /// The server's version (`serverInfo.version` at `initialize`).
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
    /// The tool's final name, as the model calls it.
    pub name: String,
    /// sha256 (hex) of the canonical JSON of the input and output schemas the model was shown.
    pub schema_hash: String,
}

/// What `session/open` records of each tool: not just its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDescriptor {
    /// The tool's final name, as the model calls it.
    pub name: String,
    /// Where the tool comes from.
    pub source: ToolSource,
    /// The tool's own version string (`Tool::version`; `"1"` unless the tool says otherwise).
    pub version: String,
    /// sha256 (hex) of the canonical JSON of the input and output schemas.
    pub schema_hash: String,
}

mod policy;
pub use policy::{ApprovalPolicy, ConfigFile, ProcessStarted, SessionPolicy, SyncPolicy};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// The first event of every journal: which session, where, with which tools.
pub struct SessionOpen {
    /// The event schema the journal is written with ([`EVENT_SCHEMA_VERSION`] when written by this
    /// build); read from a fixed prefix by [`declared_schema`].
    pub schema_version: u32,
    /// The session's id: a random UUID unless the embedding chose one.
    pub session_id: String,
    /// The workspace directory the file tools are confined to, as the embedding gave it (`.` by
    /// default).
    pub workspace: String,
    /// Every registered tool, whether or not the model is shown it, sorted by name.
    pub tools: Vec<ToolDescriptor>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// How a step ended (`step/end`).
pub enum StepOutcome {
    /// The step ran its batch to the end.
    Completed,
    /// The user stopped the step.
    Cancelled,
    /// The step stopped on a runtime error (a `fault` event precedes it when the journal still
    /// worked).
    Failed {
        /// The error, as text.
        message: String,
    },
    /// Closed by recovery: the process died during the step.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// How a turn ended (`turn/end`).
pub enum TurnOutcome {
    /// The turn ended normally (the model stopped asking for tools, or the embedding ended it).
    Completed,
    /// The user stopped the turn.
    Cancelled,
    /// The turn stopped on a runtime error.
    Failed {
        /// The error, as text.
        message: String,
    },
    /// Closed by recovery: the process died during the turn.
    Interrupted,
}

/// How a call was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Approval {
    /// A pre-execute listener allowed it.
    Listener {
        /// The listener's name.
        name: String,
    },
    /// No listener decided; the session's default is allow.
    Default,
    /// A person answered a question.
    Asked {
        /// The answer, one of the two that allow.
        answer: AskAnswer,
    },
    /// A person had answered "always" for this tool earlier in the session.
    AlwaysAllowed,
}

/// The answer to an `ask`. Only the two "allowed" answers let a call continue: a timeout or a
/// disconnect is never an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskAnswer {
    /// Allowed, for this call only.
    AllowedOnce,
    /// Allowed, and the same tool is allowed without asking for the rest of the session.
    AllowedAlways,
    /// The person said no: the call is rejected `POLICY_DENIED`.
    Denied,
    /// Nobody answered in time: the call is rejected (a timeout is never an approval).
    Expired,
    /// The question was withdrawn (the approver went away, or the batch was stopped): the call is
    /// rejected.
    Cancelled,
    /// A structured question (`ask/question`) was answered (`ask/reply`); schema 4. It approves
    /// only the `ask` call that asked it: its body returns the answer.
    Answered,
    /// A structured question was declined (`ask/reply`): the call is rejected
    /// `QUESTION_DECLINED`; schema 4.
    Declined,
}

impl AskAnswer {
    /// Whether the answer lets the call go on: only `AllowedOnce` and `AllowedAlways` do.
    pub fn allows(self) -> bool {
        matches!(self, AskAnswer::AllowedOnce | AskAnswer::AllowedAlways)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// One row of the session's plan (the `todo` tool's table).
pub struct PlanItem {
    /// What is to be done.
    pub text: String,
    /// `pending`, `in_progress` or `done`, as the `todo` tool's schema allows.
    pub status: String,
}

mod outcome;
pub use outcome::{CommittedResult, Outcome, OutcomeStatus, Resources, SideEffect, Text};
mod recovery;
pub use recovery::{Classification, RecoveredCall, Recovery};
mod ask;
pub use ask::{
    Answer, Question, QuestionOption, Reply, DESCRIPTION_CHARS_MAX, LABEL_CHARS_MAX, OPTIONS_MAX,
    TEXT_CHARS_MAX,
};
mod context;
pub use context::{CompactTrigger, ContextCalibrated, ContextCompacted, ContextSummaryRequested};
mod start;
pub use start::{
    idempotency_key, CallStarted, Evidence, RecoveryRerun, RerunPolicy, IDEMPOTENCY_KEY_BYTES,
};
mod writer;
pub use writer::WriterStolen;
mod sandbox;
pub use sandbox::{SandboxBound, SandboxPolicy};
mod import;
pub use import::{
    ImportLine, ImportNote, ImportOutcome, ImportSource, ImportVerdict, ImportedDamage,
};
mod llm;
pub use llm::{
    LlmAttemptFailed, LlmNote, LlmRefusal, LlmRequest, LlmResponseDetail, SessionModel, ToolSchema,
};

/// Every event. Variants are appended only (the journal stores the variant index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// `session/open`: always the journal's first record.
    SessionOpen(SessionOpen),
    /// `turn/start`: the user spoke; a turn runs steps until the model stops asking for tools.
    TurnStart {
        /// The turn's number, from 1.
        turn: u32,
        /// The user's message, byte for byte.
        user_text: String,
    },
    /// `step/start`: one request to the model begins.
    StepStart {
        /// The turn it belongs to.
        turn: u32,
        /// The step's number within the turn, from 1.
        step: u32,
    },
    /// `llm/response`: the model's assistant message for the step, as it sent it.
    LlmResponse {
        /// The turn it belongs to.
        turn: u32,
        /// The step it answers.
        step: u32,
        /// The message, tool calls included.
        response: ModelResponse,
    },
    /// `step/end`: the step's batch is over, every call committed.
    StepEnd {
        /// The turn it belongs to.
        turn: u32,
        /// The step that ended.
        step: u32,
        /// How it ended.
        outcome: StepOutcome,
    },
    /// `turn/end`: the turn is over; a durable point (the runtime syncs it).
    TurnEnd {
        /// The turn that ended.
        turn: u32,
        /// How it ended.
        outcome: TurnOutcome,
    },
    /// `session/close`: the session ended cleanly; nothing may follow it.
    SessionClose,
    /// `received`: the runtime took a tool call from the model's message (every call's first
    /// event).
    Received {
        /// The call this event belongs to.
        call: CallRef,
        /// Position in the assistant message (model order), from 0.
        index: u32,
        /// The tool name as the model wrote it (it may name no tool).
        tool: String,
        /// The argument text as the model sent it, byte for byte (may be empty or invalid JSON).
        raw_arguments: String,
        /// The seq of the step's `llm/response`.
        source_seqs: Vec<u64>,
    },
    /// `parsed`: the arguments are valid JSON and match the tool's input schema.
    Parsed {
        /// The call this event belongs to.
        call: CallRef,
        /// The arguments as parsed (empty text becomes `{}`), as JSON text.
        arguments: String,
        /// Seqs of the events this one follows: the seq of the call's previous event (`received`).
        source_seqs: Vec<u64>,
    },
    /// `approved`: the pre-execute chain (and any question asked) let the call run.
    Approved {
        /// The call this event belongs to.
        call: CallRef,
        /// Who or what approved it.
        approval: Approval,
        /// Seqs of the events this one follows: the seq of the call's previous event (`parsed`, or
        /// the latest `ask/*`).
        source_seqs: Vec<u64>,
    },
    /// `started` as schemas 1 to 4 wrote it (read only; this build writes [`Event::Started`]):
    /// durable before the tool body runs (DESIGN.md I1).
    StartedV4 {
        /// The call this event belongs to.
        call: CallRef,
        /// Which attempt this is: 1, then 2, 3, … for retries of a retry-safe tool.
        attempt: u32,
        /// What the call declares it will touch: what recovery reports if its outcome is unknown.
        resources: Resources,
        /// Seqs of the events this one follows: the seq of the call's previous event (`approved`,
        /// or the previous `started` for a retry).
        source_seqs: Vec<u64>,
    },
    /// `settled`: the body finished (or failed, panicked, timed out); its real outcome.
    Settled {
        /// The call this event belongs to.
        call: CallRef,
        /// What the body produced, before it is shaped for the model.
        outcome: Outcome,
        /// Seqs of the events this one follows: the seq of the call's previous event (the last
        /// `started`).
        source_seqs: Vec<u64>,
    },
    /// `committed`: the result given to the model; every call ends here.
    Committed {
        /// The call this event belongs to.
        call: CallRef,
        /// The result, exactly as the model got it.
        result: CommittedResult,
        /// Seqs of the events this one follows: the seq of the call's previous event (`settled`,
        /// `rejected` or `cancelled-before-start`).
        source_seqs: Vec<u64>,
    },
    /// `rejected`: the call is refused before it runs (unknown tool, bad arguments, denied,
    /// truncated message).
    Rejected {
        /// The call this event belongs to.
        call: CallRef,
        /// Why, as the code the model gets.
        code: ErrorCode,
        /// Why, in words; the model gets `CODE: reason`.
        reason: String,
        /// Seqs of the events this one follows: the seq of the call's previous event (`received`,
        /// `parsed` or the latest `ask/*`).
        source_seqs: Vec<u64>,
    },
    /// `cancelled-before-start`: the batch was stopped before this call's body started; it did not
    /// run.
    CancelledBeforeStart {
        /// The call this event belongs to.
        call: CallRef,
        /// Why it was cancelled (e.g. the user stopped the batch); the model gets it with
        /// `ABORTED_BEFORE_DISPATCH`.
        reason: String,
        /// Seqs of the events this one follows: the seq of the call's previous event (`received`,
        /// `parsed`, `approved` or the latest `ask/*`).
        source_seqs: Vec<u64>,
    },
    /// `ask/pending`: a question to a person about the call was asked (the call is `parsed`).
    AskPending {
        /// The call this event belongs to.
        call: CallRef,
        /// Why approval is needed, as the pre-execute listener or `ask` tool put it.
        question: String,
    },
    /// `ask/answered`: a person answered the question.
    AskAnswered {
        /// The call this event belongs to.
        call: CallRef,
        /// The answer (`allowed_once`, `allowed_always` or `denied`).
        answer: AskAnswer,
    },
    /// `ask/cancelled`: the question was withdrawn unanswered; the call is rejected.
    AskCancelled {
        /// The call this event belongs to.
        call: CallRef,
        /// Why (no approver configured, the batch was stopped, the approver withdrew it).
        reason: String,
    },
    /// `ask/expired`: nobody answered in time; the call is rejected (a timeout never approves).
    AskExpired {
        /// The call this event belongs to.
        call: CallRef,
    },
    /// `plan/replace`: the session's plan was replaced whole (right after the `todo` call's
    /// `settled`).
    PlanReplace {
        /// The new plan, whole.
        items: Vec<PlanItem>,
    },
    /// `spill/stored`: a result too large for the model was stored whole in the spill store, before
    /// the `settled` that names its locator.
    SpillStored {
        /// The spill store's opaque locator for the text, as the model is shown it.
        locator: String,
        /// The text's length in bytes.
        bytes: u64,
        /// sha256 (hex) of the text.
        sha256: String,
    },
    /// `fault`: a runtime error stopped the step's batch (not written when the journal itself
    /// failed); synced with the calls drained before it.
    Fault {
        /// The turn it happened in.
        turn: u32,
        /// The step it happened in.
        step: u32,
        /// The error, as text.
        message: String,
    },
    /// `recovery`: appended by `recover` to balance a crashed session's journal.
    Recovery(Recovery),
    /// The tools the model is shown in this step, right after `step/start`.
    StepTools {
        /// The turn it belongs to.
        turn: u32,
        /// The step it belongs to.
        step: u32,
        /// The tools the model is shown in this step, deferred tools loaded so far included.
        tools: Vec<VisibleTool>,
    },
    /// Plan mode turned on or off; `call` is the `ask` whose approval ended it.
    PlanMode {
        /// Whether plan mode is now on (read-only tools only).
        on: bool,
        /// Why it changed, in words.
        reason: String,
        /// The `ask` call whose approval turned plan mode off; `None` when the embedding switched
        /// it.
        call: Option<CallRef>,
    },
    /// The session's policy: right after `session/open`, and again whenever a resume changes it.
    SessionPolicy(SessionPolicy),
    /// A running call started a process group (made durable before the call goes on).
    CallProcess {
        /// The call that started it.
        call: CallRef,
        /// The group's leader, named so a reused pid is not taken for it.
        process: ProcessStarted,
    },
    /// A resume killed a process group that a call of a crashed run left running.
    ProcessKilled {
        /// The call of the crashed run that started the group.
        call: CallRef,
        /// The process group killed.
        pgid: u32,
        /// The signal number sent to the group (`tooljournal resume` sends SIGKILL, 9).
        signal: i32,
    },
    /// `session/model`: the model a session talks to, its system prompt and settings; written
    /// before the first request, and again when a resume changes any of them.
    SessionModel(SessionModel),
    /// `tool/schema`: a tool as the model is shown it, recorded before the first `step/tools`
    /// that shows it, once per (name, schema hash) and again when its description changes.
    ToolSchema(ToolSchema),
    /// `llm/request`: a request is about to be sent (every attempt has its own).
    LlmRequest(LlmRequest),
    /// `llm/attempt-failed`: an attempt failed before a whole response arrived; what arrived is
    /// kept here and never enters the history, and none of its calls runs.
    LlmAttemptFailed(LlmAttemptFailed),
    /// `llm/response-detail`: what came with the step's `llm/response` besides the message.
    LlmResponseDetail(LlmResponseDetail),
    /// `ask/question`: the built-in `ask` put a question to a person (the call is `parsed`);
    /// its pending state, answered by `ask/reply`, or ended by `ask/expired` or `ask/cancelled`.
    AskQuestion {
        /// The call this event belongs to.
        call: CallRef,
        /// The question as the person is shown it.
        question: Question,
    },
    /// `ask/reply`: the person answered the `ask/question`, or declined to.
    AskReplied {
        /// The call this event belongs to.
        call: CallRef,
        /// What they said.
        reply: Reply,
    },
    /// `context/summary-requested`: the model is asked to summarize earlier turns (synced
    /// before the request leaves).
    ContextSummaryRequested(ContextSummaryRequested),
    /// `context/compacted`: what the model is sent from now on is reduced this way.
    ContextCompacted(ContextCompacted),
    /// `started` (schema 5): durable before the tool body runs (DESIGN.md I1), with the call's
    /// idempotency key and the evidence a probe can check.
    Started(CallStarted),
    /// `recovery/rerun` (schema 5): the calls a resume runs again, left open by the `recovery`
    /// right before it.
    RecoveryRerun(RecoveryRerun),
    /// `writer/stolen` (schema 6): this writer took a record store's journal from a holder
    /// whose lease was live; the holder is fenced off.
    WriterStolen(WriterStolen),
    /// `import/source` (schema 7): right after `session/open`, the other agent's session file
    /// this journal was imported from, and what reading it found.
    ImportSource(ImportSource),
    /// `import/line` (schema 7): the events after it were read from this line of the source.
    ImportLine(ImportLine),
    /// `import/outcome` (schema 7): an imported call's one result and what the source proves
    /// about it; it commits the call from `received`.
    ImportOutcome(ImportOutcome),
    /// `llm/refusal` (schema 8): why the step's answer, whose stop reason is `refusal`, was
    /// refused; right after its `llm/response-detail`.
    LlmRefusal(LlmRefusal),
    /// `llm/note` (schema 8): something the adapter noticed in the step's answer and kept
    /// rather than refuse (a content block of a type this build does not know, kept verbatim).
    LlmNote(LlmNote),
    /// `session/reopen` (schema 9): a finished session goes on (`tooljournal resume --prompt`):
    /// right after its `session/close`, the only event that may follow one; the session is
    /// open again, its next turn the one after its last.
    SessionReopen,
    /// `context/calibrated` (schema 10): the provider counted a refused request's tokens; the
    /// session's estimates are set against that count from here on.
    ContextCalibrated(ContextCalibrated),
    /// `session/sandbox` (schema 11): the sandbox the session's `bash` commands run under, as
    /// the session opened or a resume set it; a policy the kernel could not enforce is journaled
    /// here with `enforced` false before anything runs.
    SessionSandbox(SandboxBound),
}

impl Event {
    /// How many variants this build knows; a stored index at or past it is a future event type.
    pub const VARIANT_COUNT: u32 = 48;

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
            Event::StartedV4 { .. } | Event::Started(_) => "started",
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
            Event::SessionModel(_) => "session/model",
            Event::ToolSchema(_) => "tool/schema",
            Event::LlmRequest(_) => "llm/request",
            Event::LlmAttemptFailed(_) => "llm/attempt-failed",
            Event::LlmResponseDetail(_) => "llm/response-detail",
            Event::AskQuestion { .. } => "ask/question",
            Event::AskReplied { .. } => "ask/reply",
            Event::ContextSummaryRequested(_) => "context/summary-requested",
            Event::ContextCompacted(_) => "context/compacted",
            Event::RecoveryRerun(_) => "recovery/rerun",
            Event::WriterStolen(_) => "writer/stolen",
            Event::ImportSource(_) => "import/source",
            Event::ImportLine(_) => "import/line",
            Event::ImportOutcome(_) => "import/outcome",
            Event::LlmRefusal(_) => "llm/refusal",
            Event::LlmNote(_) => "llm/note",
            Event::SessionReopen => "session/reopen",
            Event::ContextCalibrated(_) => "context/calibrated",
            Event::SessionSandbox(_) => "session/sandbox",
        }
    }

    /// The call a per-call event belongs to.
    pub fn call(&self) -> Option<&CallRef> {
        match self {
            Event::Received { call, .. }
            | Event::Parsed { call, .. }
            | Event::Approved { call, .. }
            | Event::StartedV4 { call, .. }
            | Event::Started(CallStarted { call, .. })
            | Event::Settled { call, .. }
            | Event::Committed { call, .. }
            | Event::Rejected { call, .. }
            | Event::CancelledBeforeStart { call, .. }
            | Event::AskPending { call, .. }
            | Event::AskAnswered { call, .. }
            | Event::AskCancelled { call, .. }
            | Event::AskExpired { call, .. }
            | Event::AskQuestion { call, .. }
            | Event::AskReplied { call, .. }
            | Event::ImportOutcome(ImportOutcome { call, .. }) => Some(call),
            _ => None,
        }
    }
}
