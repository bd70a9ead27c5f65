//! The stable error codes (DESIGN.md §3). Callers branch on these, never on message text, and
//! the content the model sees for an error begins with the code, so model and people read the
//! same words.

use serde::{Deserialize, Serialize};

/// A machine-routable error code. New codes are appended at the end: the journal stores the
/// variant index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The call names no tool the model is shown this step (no such tool, a hidden one, or a
    /// deferred one not yet loaded). Rejected before it runs: call a listed tool, or load a
    /// deferred one with `tool_search` first.
    UnknownTool,
    /// The arguments are not valid JSON; the message gives line and column. Rejected before it
    /// runs: send the call again with well-formed arguments.
    SyntaxError,
    /// The arguments are JSON but do not match the tool's input schema; the message says where.
    /// Rejected before it runs: fix the arguments and retry.
    SchemaError,
    /// A pre-execute listener, a guard, plan mode, a person's answer or an unanswered question
    /// refused the call. Rejected before it runs: do not retry it as is; change the approach or
    /// ask the user.
    PolicyDenied,
    /// The model's message hit its length limit (`StopReason::Length`), so every call in it may be
    /// cut short. Rejected before it runs: send the calls again, shorter.
    TruncatedCall,
    /// The body ran past its time limit and was stopped; it may have done part of its work. Check
    /// its effects before retrying, or retry with less work.
    Timeout,
    /// The body was stopped by a cancel (the user stopped the batch) after it started, or it was
    /// stopped between its durable `started` and its body; the message says which. Its effects, if
    /// any, are in the result.
    Aborted,
    /// The batch was stopped before this call's body started (`cancelled-before-start`): it did not
    /// run and may be retried as is.
    AbortedBeforeDispatch,
    /// A file tool refused to change a file that was never read in this session, or changed since
    /// it was last read. Read the file again, then redo the edit.
    FsStaleVersion,
    /// A file tool's path resolves outside the workspace (`..`, an absolute path elsewhere, a
    /// symlink out). Nothing was done: use a path inside the workspace.
    FsOutsideWorkspace,
    /// The tool's body (or its `finalize_content`) panicked; the runtime caught it. Its effects are
    /// unknown to the model beyond what the message says; report it rather than retrying blindly.
    ToolPanicked,
    /// The tool ran, but its structured value is missing or does not match its output schema (or a
    /// post-execute listener replaced it with one that does not). The tool's effects happened; its
    /// result is withheld.
    OutputSchemaViolation,
    /// Set by `recover`: the process died before the call's `started` was durable, so its body
    /// never ran. Safe to retry as is.
    ToolNotStarted,
    /// Set by `recover` (or by a tool that lost track of work it handed off, like an MCP call): the
    /// body started and no outcome was recorded, so it may have done none, some or all of its work.
    /// Check its declared resources before retrying.
    ToolOutcomeUnknown,
    /// The tool ran and reported a failure of its own.
    ToolFailed,
    /// A post-execute listener blocked the result (the tool had run).
    PostExecuteBlocked,
    /// The person chose not to answer an `ask` question (schema 4). Not a denial of anything:
    /// go on without the answer, or ask differently.
    QuestionDeclined,
    /// Nobody answered an `ask` question: it expired, or it was withdrawn (the approver went
    /// away, or none is configured). Never an answer and never consent: ask again if the
    /// answer is still needed (schema 4).
    QuestionUnanswered,
    /// The assistant message carried more calls than the runtime runs from one message
    /// (`calls_per_batch_max`, 128 by default); this call is past that number (schema 9).
    /// Rejected before it runs: ask for it again in a later message.
    TooManyCalls,
}

impl ErrorCode {
    /// Every code, in variant (journal index) order.
    pub const ALL: [ErrorCode; 19] = [
        ErrorCode::UnknownTool,
        ErrorCode::SyntaxError,
        ErrorCode::SchemaError,
        ErrorCode::PolicyDenied,
        ErrorCode::TruncatedCall,
        ErrorCode::Timeout,
        ErrorCode::Aborted,
        ErrorCode::AbortedBeforeDispatch,
        ErrorCode::FsStaleVersion,
        ErrorCode::FsOutsideWorkspace,
        ErrorCode::ToolPanicked,
        ErrorCode::OutputSchemaViolation,
        ErrorCode::ToolNotStarted,
        ErrorCode::ToolOutcomeUnknown,
        ErrorCode::ToolFailed,
        ErrorCode::PostExecuteBlocked,
        ErrorCode::QuestionDeclined,
        ErrorCode::QuestionUnanswered,
        ErrorCode::TooManyCalls,
    ];

    /// The code's stable name, e.g. `UNKNOWN_TOOL`: what the model reads and programs match on.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::SyntaxError => "SYNTAX_ERROR",
            ErrorCode::SchemaError => "SCHEMA_ERROR",
            ErrorCode::PolicyDenied => "POLICY_DENIED",
            ErrorCode::TruncatedCall => "TRUNCATED_CALL",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            ErrorCode::FsStaleVersion => "FS_STALE_VERSION",
            ErrorCode::FsOutsideWorkspace => "FS_OUTSIDE_WORKSPACE",
            ErrorCode::ToolPanicked => "TOOL_PANICKED",
            ErrorCode::OutputSchemaViolation => "OUTPUT_SCHEMA_VIOLATION",
            ErrorCode::ToolNotStarted => "TOOL_NOT_STARTED",
            ErrorCode::ToolOutcomeUnknown => "TOOL_OUTCOME_UNKNOWN",
            ErrorCode::ToolFailed => "TOOL_FAILED",
            ErrorCode::PostExecuteBlocked => "POST_EXECUTE_BLOCKED",
            ErrorCode::QuestionDeclined => "QUESTION_DECLINED",
            ErrorCode::QuestionUnanswered => "QUESTION_UNANSWERED",
            ErrorCode::TooManyCalls => "TOO_MANY_CALLS",
        }
    }

    /// Whether a tool body may report this code about itself. The others describe what the
    /// runtime or recovery decided; a tool claiming one of them would put words in their mouth
    /// (a tool saying TOOL_NOT_STARTED about a call that plainly started), so the pipeline turns
    /// such a report into `TOOL_FAILED`. `TOOL_OUTCOME_UNKNOWN` is allowed: a tool that hands
    /// work to another process (an MCP server) and loses it may not know what happened, and
    /// saying so is never the dangerous lie.
    pub fn tool_may_report(self) -> bool {
        matches!(
            self,
            ErrorCode::Aborted
                | ErrorCode::Timeout
                | ErrorCode::ToolOutcomeUnknown
                | ErrorCode::FsStaleVersion
                | ErrorCode::FsOutsideWorkspace
                | ErrorCode::ToolFailed
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ErrorCode {
    type Err = String;
    fn from_str(s: &str) -> Result<ErrorCode, String> {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown error code {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_their_names_and_serde() {
        for code in ErrorCode::ALL {
            assert_eq!(code.as_str().parse::<ErrorCode>(), Ok(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
