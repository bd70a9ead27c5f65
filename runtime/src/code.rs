//! The stable error codes (DESIGN.md §3). Callers branch on these, never on message text, and
//! the content the model sees for an error begins with the code, so model and people read the
//! same words.

use serde::{Deserialize, Serialize};

/// A machine-routable error code. New codes are appended at the end: the journal stores the
/// variant index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    UnknownTool,
    SyntaxError,
    SchemaError,
    PolicyDenied,
    TruncatedCall,
    Timeout,
    Aborted,
    AbortedBeforeDispatch,
    FsStaleVersion,
    FsOutsideWorkspace,
    ToolPanicked,
    OutputSchemaViolation,
    ToolNotStarted,
    ToolOutcomeUnknown,
    /// The tool ran and reported a failure of its own.
    ToolFailed,
    /// A post-execute listener blocked the result (the tool had run).
    PostExecuteBlocked,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 16] = [
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
    ];

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
