//! `mcp`: tools of MCP servers as runtime tools.
//!
//! A server declared in the configuration is started as a child process and spoken to over its
//! stdio with the official Rust SDK (`rmcp`). Each of its tools becomes a [`McpTool`] registered
//! as an external tool named `mcp__<server>__<tool>`, so its calls pass the same pipeline and
//! land in the same journal as a built-in's: write-ahead `started`, settled, committed, and
//! recovery that classifies them the same way. The registry refuses an MCP tool with a
//! built-in's name; this crate refuses two tools of one server that end up with one name.
//!
//! Data flows one way: this crate uses the runtime's `Tool` and `Registry`; the runtime knows
//! nothing of MCP, and `recover` never starts a server.

pub mod config;
pub mod naming;
mod server;
mod tool;

pub use config::{ServerConfig, ToolConfig};
pub use server::McpServer;
pub use tool::McpTool;

use runtime::registry::{Registry, RegistryError};

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server {server}: {message}")]
    Startup { server: String, message: String },
    #[error("MCP server {server}: the configuration sets up tool {tool:?}, which the server does not offer")]
    NoSuchTool { server: String, tool: String },
    #[error("MCP server {server}: tools {:?} and {:?} would both be named {name:?}; give one a `name` in its [mcp_servers.{server}.tools.NAME] table", tools.0, tools.1)]
    NameCollision {
        server: String,
        name: String,
        tools: (String, String),
    },
    #[error("MCP server {server}: {source}")]
    Registry {
        server: String,
        #[source]
        source: RegistryError,
    },
}

/// Registers every tool of `server` in `registry`, with its exposure. The first refusal (a
/// built-in's name, a name already taken) stops it, naming the server.
pub fn register(server: &McpServer, registry: &mut Registry) -> Result<(), McpError> {
    for tool in server.tools() {
        registry
            .register_exposed(tool.clone(), tool.source().clone(), tool.exposure())
            .map_err(|source| McpError::Registry {
                server: server.name().to_owned(),
                source,
            })?;
    }
    Ok(())
}
