//! The frozen result of a call: what the model sees, what programs read, what people see.

use crate::code::ErrorCode;
use crate::event::CommittedResult;
use serde_json::Value;

/// A committed result. Built once by the pipeline and never changed after.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The model's id for the call: what the provider needs to pair the result with the call.
    pub call_id: String,
    /// For the model. An error's content begins with its code: `CODE: message`.
    pub content: String,
    /// For programs.
    pub value: Option<Value>,
    /// For people only (diffs, timings); never sent to the model.
    pub details: Option<Value>,
    /// Whether the call failed (rejected, cancelled, or the tool or a listener reported an error).
    pub is_error: bool,
    /// The error code; `None` exactly when `is_error` is false.
    pub code: Option<ErrorCode>,
}

impl ToolResult {
    /// The journal's form of this result.
    pub fn committed(&self) -> CommittedResult {
        CommittedResult {
            content: self.content.clone(),
            is_error: self.is_error,
            code: self.code,
            value: self.value.as_ref().map(Value::to_string),
        }
    }
}

/// The message of a call stopped before it started (`cancelled-before-start`), given the stop's
/// `reason`: for an `ask` the person had already answered, the answer (it is journaled, and the
/// model is owed it), else that the call did not run. One text for the runtime and `recover`.
pub fn cancelled_message(reason: &str, answer: Option<&crate::event::Answer>) -> String {
    match answer {
        Some(answer) => format!(
            "{reason}, after the user had answered; the answer is this:\n{}",
            answer.render()
        ),
        None => format!("{reason}; it did not run and may be retried"),
    }
}

/// The content of an error result: the code first, so model and people read the same words.
pub fn error_content(code: ErrorCode, message: &str) -> String {
    if message.is_empty() {
        code.as_str().to_owned()
    } else {
        format!("{}: {message}", code.as_str())
    }
}
