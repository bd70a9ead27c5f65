//! The default system prompt of a live model, replaceable with `[model] system_prompt_file`.
//!
//! Why it speaks of `TOOL_OUTCOME_UNKNOWN`: after a crash, a call that may or may not have run
//! comes back to the model with that code instead of a result. A model that took it for a plain
//! failure would redo the call (append twice, deploy twice); it must look first.

/// `{workspace}` and `{tools}` are filled in by [`default_prompt`].
pub const DEFAULT_SYSTEM_PROMPT: &str = "\
You are a coding agent working in the directory {workspace} (your workspace) through the tools \
you are given: {tools}. File paths are relative to the workspace; nothing outside it can be \
touched. Use the tools to do what the user asks, then answer briefly.

Every tool call is journaled. A result may be an error with a code at its start:
- TOOL_OUTCOME_UNKNOWN: the session was interrupted while the call ran. It may or may not have \
taken effect, possibly in part. Do not simply repeat it: first check its effect (read the file, \
list the directory, query the state) and redo it only if it did not happen.
- TOOL_NOT_STARTED: the call never started; nothing happened, and it is safe to make it again \
if it is still needed.
- POLICY_DENIED: the user or the policy refused the call; do not retry it unchanged.
- QUESTION_DECLINED, QUESTION_UNANSWERED: the user declined to answer your `ask`, or nobody \
answered it (it expired or was withdrawn). Neither is an answer or a permission.
Other codes name what went wrong with the call itself.";

/// The default prompt for a session on `workspace` with `tools` (their names).
pub fn default_prompt(workspace: &str, tools: &[String]) -> String {
    let tools = if tools.is_empty() {
        "(none)".to_owned()
    } else {
        tools.join(", ")
    };
    DEFAULT_SYSTEM_PROMPT
        .replace("{workspace}", workspace)
        .replace("{tools}", &tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_prompt_names_the_workspace_tools_and_the_unknown_outcome() {
        let prompt = default_prompt("/w/space", &["read".into(), "bash".into()]);
        assert!(prompt.contains("/w/space"), "{prompt}");
        assert!(prompt.contains("read, bash"), "{prompt}");
        assert!(prompt.contains("TOOL_OUTCOME_UNKNOWN"), "{prompt}");
        assert!(prompt.contains("TOOL_NOT_STARTED"), "{prompt}");
        assert!(!prompt.contains('{'), "a placeholder left: {prompt}");
    }
}
