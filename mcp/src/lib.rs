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
//!
//! ```no_run
//! # extern crate runtime as tooljournal_runtime; // the workspace's short name for it
//! use tooljournal_mcp::{McpServer, ServerConfig};
//! use tooljournal_runtime::Session;
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config: ServerConfig = serde_json::from_value(serde_json::json!({
//!     "command": "npx",
//!     "args": ["@modelcontextprotocol/server-filesystem", "/srv/data"],
//! }))?;
//! let server = McpServer::start("fs", &config, std::process::Stdio::inherit()).await?;
//! let mut prepared = Session::builder("/srv/data", "/var/lib/agent/journal").lock()?.prepare()?;
//! tooljournal_mcp::register(&server, prepared.registry_mut())?; // mcp__fs__read_file, ...
//! let session = prepared.open()?;
//! // ... run the session; then:
//! session.close().await?;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod config;
mod link;
pub mod naming;
mod server;
mod tool;

pub use config::{ServerConfig, ToolConfig};
pub use server::McpServer;
pub use tool::McpTool;

use runtime::{Registry, RegistryError};

#[derive(Debug, thiserror::Error)]
/// Why an MCP server's tools could not be made runtime tools. Each names the server.
pub enum McpError {
    #[error("MCP server {server}: {message}")]
    /// The server did not start, did not complete the MCP handshake, failed to list its tools, or
    /// did not do so within `startup_timeout_ms`.
    Startup {
        /// The server's name in the configuration.
        server: String,
        /// What went wrong.
        message: String,
    },
    #[error("MCP server {server}: the configuration sets up tool {tool:?}, which the server does not offer")]
    /// A `tools.NAME` table names a tool the server does not list (a typo, or a server that
    /// changed).
    NoSuchTool {
        /// The server's name in the configuration.
        server: String,
        /// The tool name from the configuration.
        tool: String,
    },
    #[error("MCP server {server}: tools {:?} and {:?} would both be named {name:?}; give one a `name` in its [mcp_servers.{server}.tools.NAME] table", tools.0, tools.1)]
    /// Two of the server's tools map to one final name (after the prefix and sanitizing, or by a
    /// configured `name`).
    NameCollision {
        /// The server's name in the configuration.
        server: String,
        /// The final name both would get.
        name: String,
        /// The two tools' names on the server: the one that took the name first, then the other.
        tools: (String, String),
    },
    #[error("MCP server {server}: {source}")]
    /// The registry refused one of the server's tools (a built-in's name, or a name already
    /// registered).
    Registry {
        /// The server's name in the configuration.
        server: String,
        #[source]
        /// The registry's refusal.
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
