//! The rules a registry holds tools to, and why it refuses one: the names the runtime keeps, the
//! names providers accept, and how many tools one scope may hold. Kept apart from the registry
//! so that the runtime's errors can name a refusal without standing above the registry.

/// Names the runtime keeps for tools of its own.
pub const RESERVED_NAMES: [&str; 1] = ["tool_search"];

/// Most tools one scope may hold.
pub(crate) const TOOLS_PER_SCOPE_MAX: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// Why a tool was not registered. Nothing is registered when one is returned.
pub enum RegistryError {
    #[error("tool name {name:?} is not allowed: names match ^[a-zA-Z0-9_-]{{1,64}}$")]
    /// The name does not match `^[a-zA-Z0-9_-]{1,64}$` (what providers accept).
    BadName {
        /// The name refused.
        name: String,
    },
    #[error("tool name {name:?} is reserved for the runtime")]
    /// The name is one of [`RESERVED_NAMES`], kept for the runtime's own tools.
    Reserved {
        /// The name refused.
        name: String,
    },
    #[error("tool {name:?} is already registered in this scope")]
    /// This scope already has a tool of that name.
    Duplicate {
        /// The name refused.
        name: String,
    },
    #[error(
        "external tool {name:?} (from {server}) has the name of a built-in tool and is refused"
    )]
    /// An external tool (MCP, …) has the name of a built-in, in this scope or a parent.
    ExternalOverridesBuiltIn {
        /// The name refused.
        name: String,
        /// Where the refused tool comes from.
        server: String,
    },
    #[error(
        "tool {name:?} exists in a parent scope; shadow it explicitly with register_shadowing"
    )]
    /// A parent scope has a tool of that name and the registration did not ask to shadow it.
    ShadowsParent {
        /// The name refused.
        name: String,
    },
    #[error("tool {name:?}: {which} schema is invalid: {message}")]
    /// The tool's input or output schema does not compile as JSON Schema.
    BadSchema {
        /// The tool's name.
        name: String,
        /// `"input"` or `"output"`.
        which: &'static str,
        /// The schema compiler's complaint.
        message: String,
    },
    #[error("a scope holds at most {TOOLS_PER_SCOPE_MAX} tools")]
    /// The scope already holds `TOOLS_PER_SCOPE_MAX` tools.
    Full,
}

/// A name providers accept: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
