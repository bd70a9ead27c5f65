//! The approval policies a session runs under, as pre-execute listeners: what `session/policy`'s
//! `approval` means, so that a resume reapplies it whoever embeds the runtime.
//!
//! `allow` asks nothing. `deny`: every `bash` call asks ([`BashNeedsApproval`]), and a question
//! nobody answers is denied. `ask`: every call of a tool that does not declare itself
//! read-only asks ([`AskBeforeChanges`]). Who answers is the embedder's approver.

use runtime::display::one_line;
use runtime::event::ApprovalPolicy;
use runtime::{CallInfo, Decision, PreExecute};
use std::sync::Arc;

/// `deny`: a `bash` call needs an approval (which an approver may still give).
pub struct BashNeedsApproval;

impl PreExecute for BashNeedsApproval {
    fn name(&self) -> &str {
        "approve-deny"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.tool == "bash" {
            Decision::Ask {
                reason: format!(
                    "run `{}`?",
                    call.args.str("command").unwrap_or("(no command)")
                ),
            }
        } else {
            Decision::Pass
        }
    }
}

/// `ask`: a call of a tool that does not declare itself read-only asks first.
pub struct AskBeforeChanges;

impl PreExecute for AskBeforeChanges {
    fn name(&self) -> &str {
        "approve-ask"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.read_only {
            Decision::Pass
        } else {
            Decision::Ask {
                reason: describe(call),
            }
        }
    }
}

/// The question shown for `call`: the command of a `bash` call, the path of a file tool's.
pub fn describe(call: &CallInfo) -> String {
    if let Some(command) = call.args.str("command") {
        return format!("{} `{}`", call.tool, one_line(command, 200));
    }
    if let Some(path) = call.args.str("path") {
        return format!("{} {}", call.tool, one_line(path, 200));
    }
    format!(
        "{} {}",
        call.tool,
        one_line(&call.args.value().to_string(), 200)
    )
}

/// The listener that enforces `approval`, if it needs one.
pub(crate) fn listener(approval: ApprovalPolicy) -> Option<Arc<dyn PreExecute>> {
    match approval {
        ApprovalPolicy::Allow => None,
        ApprovalPolicy::Deny => Some(Arc::new(BashNeedsApproval)),
        ApprovalPolicy::Ask => Some(Arc::new(AskBeforeChanges)),
    }
}
