//! `todo`: the session's plan, replaced whole on every call (DESIGN.md §9). Replay keeps the
//! latest table, so a resumed session knows its goals without the chat history.

use crate::args::Args;
use crate::code::ErrorCode;
use crate::event::{PlanItem, SideEffect};
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::{json, Value};

/// Most items a plan may have.
pub const PLAN_ITEMS_MAX: usize = 200;

/// The `todo` tool: `todo {items}` replaces the session's plan whole (at most [`PLAN_ITEMS_MAX`]
/// items). Read-only, so it runs in plan mode.
pub struct Todo;

impl Tool for Todo {
    fn name(&self) -> &str {
        "todo"
    }
    fn description(&self) -> &str {
        "Replace the session's whole todo table. Statuses: pending, in_progress, done."
    }
    fn is_read_only(&self) -> bool {
        // The plan is the session's own state, not the world: planning is what plan mode is for.
        true
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "maxItems": PLAN_ITEMS_MAX,
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "minLength": 1},
                            "status": {"enum": ["pending", "in_progress", "done"]}
                        },
                        "required": ["text", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["items"],
            "additionalProperties": false
        })
    }
    fn execute(&self, args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let items: Vec<PlanItem> = args
                .get("items")
                .and_then(Value::as_array)
                .ok_or_else(|| ToolError::new(ErrorCode::ToolFailed, "items must be a list"))?
                .iter()
                .map(|i| PlanItem {
                    text: i["text"].as_str().unwrap_or_default().to_owned(),
                    status: i["status"].as_str().unwrap_or_default().to_owned(),
                })
                .collect();
            let done = items.iter().filter(|i| i.status == "done").count();
            Ok(
                ToolOutput::text(format!("plan replaced: {} items, {done} done", items.len()))
                    .with_side_effect(SideEffect::PlanReplaced { items }),
            )
        })
    }
}
