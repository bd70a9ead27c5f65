//! The built-in tools (DESIGN.md §9). Built-ins are trusted; every file tool checks its path
//! with [`Workspace::resolve`] and opens it through the workspace root's handle
//! (`Workspace::open`, `beneath.rs`), and every write confirms its side effect (path, hash
//! before and after).

pub mod ask;
pub mod bash;
pub mod fs;
pub(crate) mod search;
pub mod todo;

pub(crate) use confine::{beneath, workspace};
pub use confine::{sha256_hex, Workspace};

use crate::event::ToolSource;
use crate::registry::{Registry, RegistryError};
use crate::tool::Tool;
use std::sync::Arc;

/// Every built-in tool, for a session in `ws`, `bash` unsandboxed.
pub fn builtins(ws: &Arc<Workspace>) -> Vec<Arc<dyn Tool>> {
    builtins_sandboxed(ws, None)
}

/// Every built-in tool, for a session in `ws`, `bash` under `sandbox` when there is one.
pub(crate) fn builtins_sandboxed(
    ws: &Arc<Workspace>,
    sandbox: Option<Arc<sandbox::Sandbox>>,
) -> Vec<Arc<dyn Tool>> {
    let mut tools = fs::file_tools(ws.clone());
    tools.push(Arc::new(match sandbox {
        Some(sandbox) => bash::Bash::sandboxed(ws.clone(), sandbox),
        None => bash::Bash::new(ws.clone()),
    }));
    tools.push(Arc::new(todo::Todo));
    tools.push(Arc::new(ask::Ask));
    tools
}

/// A registry holding every built-in tool.
pub fn builtin_registry(ws: &Arc<Workspace>) -> Result<Registry, RegistryError> {
    builtin_registry_sandboxed(ws, None)
}

/// A registry holding every built-in tool, `bash` under `sandbox` when there is one.
pub(crate) fn builtin_registry_sandboxed(
    ws: &Arc<Workspace>,
    sandbox: Option<Arc<sandbox::Sandbox>>,
) -> Result<Registry, RegistryError> {
    let mut registry = Registry::new();
    for tool in builtins_sandboxed(ws, sandbox) {
        registry.register(tool, ToolSource::BuiltIn)?;
    }
    Ok(registry)
}
