//! `ask`: the model asks the user a question (with options to choose from, several or one, and
//! room for their own words) and gets the answer back as the call's result.
//!
//! The session routes every call of this tool to the approver itself, before any pre-execute
//! listener, so no listener and no missing approver can answer for the user: journaled as
//! `ask/question`, then `ask/reply` (answered or declined), `ask/expired` or `ask/cancelled`.
//! The body runs only once a person answered, and returns that answer; a decline is
//! `QUESTION_DECLINED`, and an expiry or a withdrawal `QUESTION_UNANSWERED`: silence is never an
//! answer, and never consent.

use crate::args::Args;
use crate::code::ErrorCode;
use crate::event::{DESCRIPTION_CHARS_MAX, LABEL_CHARS_MAX, OPTIONS_MAX, TEXT_CHARS_MAX};
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::{json, Value};

/// The `ask` tool: `ask {question, options?, multiple?, free_text?, plan_option?}`.
pub struct Ask;

impl Tool for Ask {
    fn name(&self) -> &str {
        "ask"
    }
    fn description(&self) -> &str {
        "Ask the user a question and wait for the answer. Offer options (a label and what it \
         means) when there are clear choices; set multiple to let several be chosen and \
         free_text to let the user answer in their own words (always allowed without options). \
         The result is the user's answer: the chosen labels and/or their text. In plan mode, \
         offer an option that approves the plan and name it in plan_option: only the user \
         choosing it ends plan mode."
    }
    fn is_read_only(&self) -> bool {
        // Asking changes nothing outside the session.
        true
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": TEXT_CHARS_MAX},
                "options": {
                    "type": "array",
                    "maxItems": OPTIONS_MAX,
                    "items": {
                        "type": "object",
                        "properties": {
                            "label": {"type": "string", "minLength": 1, "maxLength": LABEL_CHARS_MAX},
                            "description": {"type": "string", "maxLength": DESCRIPTION_CHARS_MAX}
                        },
                        "required": ["label"],
                        "additionalProperties": false
                    }
                },
                "multiple": {"type": "boolean", "description": "several options may be chosen"},
                "free_text": {"type": "boolean", "description": "the user may answer in their own words"},
                "plan_option": {
                    "type": "string",
                    "description": "the label of the option that approves the plan (plan mode)"
                }
            },
            "required": ["question"],
            "additionalProperties": false
        })
    }
    fn execute(&self, _args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            // The session runs this body only after a person's answer (`ask/reply`); a body
            // run any other way has nothing to say and must not invent an answer.
            let Some(answer) = ctx.answer() else {
                return Err(ToolError::new(
                    ErrorCode::ToolFailed,
                    "no answer: `ask` runs only inside a session, after the user answered",
                ));
            };
            Ok(ToolOutput::text(answer.render())
                .with_value(json!({"choice": answer.choice, "text": answer.text})))
        })
    }
}
