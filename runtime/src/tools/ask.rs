//! `ask`: the model asks the user a yes/no question.
//!
//! The question goes through the same approval path as any `Ask` decision (journaled as
//! `ask/pending` then `ask/answered`, `ask/expired` or `ask/cancelled`), via [`AskPolicy`],
//! which must come first in the pre-execute chain. Only a "yes" lets the body run; a "no", an
//! expiry or a disconnect comes back as `POLICY_DENIED` with the reason: silence is never
//! consent.

use crate::args::Args;
use crate::hooks::{CallInfo, Decision, PreExecute};
use crate::tool::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::{json, Value};

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

/// Turns every `ask` call into an `Ask` decision carrying its question.
pub struct AskPolicy;

impl PreExecute for AskPolicy {
    fn name(&self) -> &str {
        "ask-tool"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.tool == "ask" {
            Decision::Ask {
                reason: call
                    .args
                    .str("question")
                    .unwrap_or("(no question)")
                    .to_owned(),
            }
        } else {
            Decision::Pass
        }
    }
}
