//! What a user writes about one MCP server (a `[mcp_servers.NAME]` table of the config file).
//!
//! Why so explicit: a server is code from outside the process. Nothing about it is assumed
//! safe by default: its tools are exclusive (never overlap) unless `parallel_safe`, and not
//! read-only (plan mode refuses them) unless the user says so, or says to trust the server's
//! own `readOnlyHint`s (MCP calls them hints, untrusted by definition).

use runtime::Exposure;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Default time a server gets to start and list its tools.
pub const STARTUP_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Most tools one server may bring.
pub const TOOLS_PER_SERVER_MAX: usize = 256;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
/// One `[mcp_servers.NAME]` table: how to start the server and how its tools are registered.
pub struct ServerConfig {
    /// The program to start (looked up in `PATH` when it has no slash).
    pub command: String,
    #[serde(default)]
    /// Arguments passed to `command`; default none.
    pub args: Vec<String>,
    /// Added to the environment the server inherits.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the server; default: the runtime's.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Whether calls to this server's tools may overlap each other and other parallel-safe
    /// calls. Default false: each call is exclusive.
    #[serde(default)]
    pub parallel_safe: bool,
    /// Time limit of one call to this server; default: the session's.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default = "startup_timeout_ms_default")]
    /// Milliseconds the server gets to start and list its tools before the session refuses to
    /// start; default [`STARTUP_TIMEOUT_MS_DEFAULT`].
    pub startup_timeout_ms: u64,
    /// How this server's tools are shown, unless a `[…tools.NAME]` table says otherwise.
    #[serde(default)]
    pub exposure: Exposure,
    /// Take the server's `readOnlyHint` annotations as declarations (plan mode lets such tools
    /// run). Default false.
    #[serde(default)]
    pub trust_read_only_hints: bool,
    /// The prefix of the final names; default `mcp__<server>__`.
    #[serde(default)]
    pub name_prefix: Option<String>,
    /// Per-tool settings, by the tool's name on the server.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// Start the server under this sandbox policy (`read-only`, `workspace-write`,
    /// `danger-full-access`), with the session's network, readable and writable settings: the
    /// server and every process it starts are confined, and each of its calls journals the
    /// bound. Absent: the server runs unsandboxed and its calls record no bound.
    #[serde(default)]
    pub sandbox: Option<String>,
}

fn startup_timeout_ms_default() -> u64 {
    STARTUP_TIMEOUT_MS_DEFAULT
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
/// One `[mcp_servers.NAME.tools.TOOL]` table: settings for one tool of a server, overriding the
/// server's.
pub struct ToolConfig {
    /// The final name the model calls it by, instead of `<prefix><tool>`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    /// How this tool is shown; `None`: the server's `exposure`.
    pub exposure: Option<Exposure>,
    /// Declares the tool read-only (or not), whatever the server's hints say.
    #[serde(default)]
    pub read_only: Option<bool>,
}

impl ServerConfig {
    /// A server started with `command args…`, everything else default.
    pub fn new(command: impl Into<String>, args: Vec<String>) -> ServerConfig {
        ServerConfig {
            command: command.into(),
            args,
            env: BTreeMap::new(),
            cwd: None,
            parallel_safe: false,
            timeout_ms: None,
            startup_timeout_ms: STARTUP_TIMEOUT_MS_DEFAULT,
            exposure: Exposure::Direct,
            trust_read_only_hints: false,
            name_prefix: None,
            tools: BTreeMap::new(),
            sandbox: None,
        }
    }
}
