//! One running MCP server: the child process, the protocol session over its stdio, and the
//! tools it offered at start.
//!
//! Why the tool list is read once: the journal's `session/open` records every tool with its
//! source, version and schema hash, and a step's `step/tools` names what the model saw. A tool
//! set that changed under a running session would make those records lie, so a server's
//! `tools/list_changed` is not followed; restart the session to pick up new tools.

use crate::config::{ServerConfig, TOOLS_PER_SERVER_MAX};
use crate::link::{Link, ProgressRoutes};
use crate::naming;
use crate::tool::McpTool;
use crate::McpError;
use rmcp::model::{ProgressNotificationParam, Tool};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use rmcp::ClientHandler;
use runtime::event::ToolSource;
use std::collections::{BTreeSet, HashMap};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// The client side of the protocol: only progress is of interest.
pub(crate) struct Handler {
    routes: Arc<ProgressRoutes>,
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.routes.route(&params);
        std::future::ready(())
    }
}

/// A started MCP server and the tools it offers.
pub struct McpServer {
    name: String,
    source: ToolSource,
    link: Arc<Link>,
    tools: Vec<Arc<McpTool>>,
    service: Option<RunningService<RoleClient, Handler>>,
    /// The sandbox the server runs under, held as long as it runs (its temporary directory
    /// with it).
    _sandbox: Option<Arc<sandbox::Sandbox>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("pid", &self.link.pid)
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl McpServer {
    /// Starts the server `name` as `config` says, with its stderr going to `stderr`, completes
    /// the protocol's `initialize`, and lists its tools. Fails with an error naming the server
    /// (and the tool, for a per-tool setting that names no tool) if anything goes wrong or takes
    /// longer than `startup_timeout_ms`.
    pub async fn start(
        name: &str,
        config: &ServerConfig,
        stderr: Stdio,
    ) -> Result<McpServer, McpError> {
        McpServer::start_in(name, config, stderr, None).await
    }

    /// [`McpServer::start`], the server's process (and every process it starts) confined by
    /// `sandbox` when there is one; each of its calls' `started` then records the bound.
    pub async fn start_in(
        name: &str,
        config: &ServerConfig,
        stderr: Stdio,
        sandbox: Option<Arc<sandbox::Sandbox>>,
    ) -> Result<McpServer, McpError> {
        let startup = Duration::from_millis(config.startup_timeout_ms);
        let started = McpServer::start_inner(name, config, stderr, sandbox);
        match tokio::time::timeout(startup, started).await {
            Ok(started) => started,
            Err(_) => Err(McpError::Startup {
                server: name.to_owned(),
                message: format!(
                    "did not start and list its tools within {} ms",
                    config.startup_timeout_ms
                ),
            }),
        }
    }

    /// [`McpServer::start`] without its time limit: spawn, `initialize`, list, wrap the tools.
    async fn start_inner(
        name: &str,
        config: &ServerConfig,
        stderr: Stdio,
        sandbox: Option<Arc<sandbox::Sandbox>>,
    ) -> Result<McpServer, McpError> {
        let transport = spawn(name, config, stderr, sandbox.as_deref())?;
        let pid = transport.id();
        let routes = Arc::new(ProgressRoutes::default());
        let handler = Handler {
            routes: routes.clone(),
        };
        let service = handler
            .serve(transport)
            .await
            .map_err(|e| startup(name, initialize_failed(&config.command, &e)))?;
        let source = source_of(name, service.peer());
        let listed = list_tools(name, config, service.peer()).await?;
        let link = Arc::new(Link {
            server: name.to_owned(),
            pid,
            peer: service.peer().clone(),
            routes,
            bound: sandbox.as_ref().map(|s| s.bound().clone()),
        });
        let tools = wrap_tools(name, config, &link, &source, listed)?;
        Ok(McpServer {
            name: name.to_owned(),
            source,
            link,
            tools,
            service: Some(service),
            _sandbox: sandbox,
        })
    }

    /// The server's name, as in its `[mcp_servers.NAME]` table.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the journal records as the source of this server's tools.
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// The server process's id.
    pub fn pid(&self) -> Option<u32> {
        self.link.pid
    }

    /// The server's tools as runtime tools, in the order the server listed them; register them with
    /// [`crate::register`].
    pub fn tools(&self) -> &[Arc<McpTool>] {
        &self.tools
    }

    /// Ends the protocol session; the child process is killed when its transport is dropped.
    pub async fn shutdown(mut self) {
        if let Some(service) = self.service.take() {
            if let Err(e) = service.cancel().await {
                tracing::warn!(server = %self.name, "MCP server did not shut down cleanly: {e}");
            }
        }
    }
}

/// A startup failure of the server `name`.
/// Why `initialize` failed, in words that say what to do: the transport's own ("Send message
/// error Transport [rmcp::transport::child_process::TokioChildProcess] error: Broken pipe")
/// name a library, while what happened is almost always a server that exited at once.
fn initialize_failed(command: &str, e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    let by_hand = format!("run `{command}` by hand to see why; its stderr is shown above");
    match e {
        E::ConnectionClosed(_) => format!(
            "the server closed its output before it answered `initialize`: it exited, or does \
             not speak MCP on stdio ({by_hand})"
        ),
        E::TransportError { error, .. } => {
            let io = error.error.downcast_ref::<std::io::Error>();
            match io {
                Some(io) if io.kind() == std::io::ErrorKind::BrokenPipe => format!(
                    "the server closed its input before `initialize` could be sent: it exited \
                     at once, or does not read stdin ({by_hand})"
                ),
                Some(io) => format!("cannot talk to the server over its stdio: {io}"),
                None => format!("cannot talk to the server over its stdio: {}", error.error),
            }
        }
        E::JsonRpcError(data) => format!("the server refused `initialize`: {}", data.message),
        other => format!("initialize failed: {other}"),
    }
}

fn startup(name: &str, message: String) -> McpError {
    McpError::Startup {
        server: name.to_owned(),
        message,
    }
}

/// Spawns the server's process with its command, arguments, environment and working directory.
fn spawn(
    name: &str,
    config: &ServerConfig,
    stderr: Stdio,
    sandbox: Option<&sandbox::Sandbox>,
) -> Result<TokioChildProcess, McpError> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).envs(&config.env);
    // The sandbox first, as for `bash`: the runtime's own steps then cut the capabilities a new
    // user namespace gives back.
    if let Some(sandbox) = sandbox {
        sandbox
            .confine(&mut command)
            .map_err(|e| startup(name, format!("cannot confine it: {e}")))?;
    }
    // A server is started for the model's calls as `bash` is: kept from the runtime's secrets.
    // SAFETY: runs in the child between fork and exec; system calls only, no allocation.
    unsafe {
        command.pre_exec(runtime::secrets_before_exec);
    }
    if let Some(cwd) = &config.cwd {
        // Checked here: a spawn into a missing directory fails with ENOENT, which reads as
        // if the command were missing.
        if !cwd.is_dir() {
            return Err(startup(
                name,
                format!("its cwd {} is not a directory", cwd.display()),
            ));
        }
        command.current_dir(cwd);
    }
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(stderr)
        .spawn()
        .map_err(|e| startup(name, format!("cannot start {:?}: {e}", config.command)))?;
    Ok(transport)
}

/// The journal's source for the tools of server `name`: the implementation and version it
/// reported at `initialize` ("unknown" when it reported none).
fn source_of(name: &str, peer: &Peer<RoleClient>) -> ToolSource {
    let info = peer.peer_info();
    let implementation = info.as_ref().and_then(|i| i.server_info.clone());
    ToolSource::Mcp {
        server: name.to_owned(),
        implementation: implementation
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |i| i.name.clone()),
        version: implementation
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |i| i.version.clone()),
    }
}

/// The server's tools, once (see the module doc): refused when there are more than
/// [`TOOLS_PER_SERVER_MAX`] or a per-tool setting names a tool the server does not offer.
async fn list_tools(
    name: &str,
    config: &ServerConfig,
    peer: &Peer<RoleClient>,
) -> Result<Vec<Tool>, McpError> {
    let listed = peer
        .list_all_tools()
        .await
        .map_err(|e| startup(name, format!("tools/list failed: {e}")))?;
    if listed.len() > TOOLS_PER_SERVER_MAX {
        return Err(startup(
            name,
            format!(
                "offers {} tools; the limit is {TOOLS_PER_SERVER_MAX}",
                listed.len()
            ),
        ));
    }
    let offered: BTreeSet<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    if let Some(missing) = config.tools.keys().find(|t| !offered.contains(t.as_str())) {
        return Err(McpError::NoSuchTool {
            server: name.to_owned(),
            tool: missing.clone(),
        });
    }
    Ok(listed)
}

/// Makes the listed tools runtime tools, in the server's order: each gets its final name (set,
/// or prefixed and sanitized; two tools with one name are refused) and its read-only flag and
/// exposure (a per-tool setting, else the server's).
fn wrap_tools(
    name: &str,
    config: &ServerConfig,
    link: &Arc<Link>,
    source: &ToolSource,
    listed: Vec<Tool>,
) -> Result<Vec<Arc<McpTool>>, McpError> {
    let mut tools: Vec<Arc<McpTool>> = Vec::with_capacity(listed.len());
    let mut taken: HashMap<String, String> = HashMap::new();
    for remote in listed {
        let settings = config.tools.get(remote.name.as_ref());
        let final_name = match settings.and_then(|s| s.name.as_deref()) {
            Some(explicit) => naming::sanitize(explicit),
            None => naming::final_name(config.name_prefix.as_deref(), name, &remote.name),
        };
        if let Some(other) = taken.insert(final_name.clone(), remote.name.to_string()) {
            return Err(McpError::NameCollision {
                server: name.to_owned(),
                name: final_name,
                tools: (other, remote.name.to_string()),
            });
        }
        let hinted = remote
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let read_only = settings
            .and_then(|s| s.read_only)
            .unwrap_or(config.trust_read_only_hints && hinted);
        let exposure = settings.and_then(|s| s.exposure).unwrap_or(config.exposure);
        tools.push(Arc::new(McpTool::new(
            link.clone(),
            &remote,
            final_name,
            source.clone(),
            read_only,
            config.parallel_safe,
            config.timeout_ms,
            exposure,
        )));
    }
    Ok(tools)
}
