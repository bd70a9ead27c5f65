//! `ask`: the model asks the user a yes/no question.
//!
//! The question goes through the same approval path as any `Ask` decision (journaled as
//! `ask/pending` then `ask/answered`, `ask/expired` or `ask/cancelled`): the session routes
//! every call of this tool there itself, before any pre-execute listener, so no listener and no
//! missing approver can answer for the user. Only a "yes" lets the body run; a "no", an expiry,
//! a disconnect or no approver at all comes back as `POLICY_DENIED` with the reason: silence is
//! never consent.

use crate::args::Args;
use crate::tool::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::{json, Value};

/// The `ask` tool: `ask {question}`. Its body only runs once the user said yes, so it always
/// answers yes; every other answer is the session's rejection.
pub struct Ask;

impl Tool for Ask {
    fn name(&self) -> &str {
        "ask"
    }
    fn description(&self) -> &str {
        "Ask the user a yes/no question and wait for the answer."
    }
    fn is_read_only(&self) -> bool {
        // Asking changes nothing outside the session.
        true
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"question": {"type": "string", "minLength": 1, "maxLength": 4000}},
            "required": ["question"],
            "additionalProperties": false
        })
    }
    fn execute(&self, args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let question = args.str("question").unwrap_or_default().to_owned();
            Ok(
                ToolOutput::text(format!("The user answered yes to: {question}"))
                    .with_value(json!({"answer": "yes"})),
            )
        })
    }
}
