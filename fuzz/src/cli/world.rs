//! What one case of `tooljournal fuzz` acts on: the workspace's files and the MCP servers.
//!
//! Why servers start afresh for every session: a cancelled MCP call may still take effect after
//! the cancel (servers do not confirm one), so a server kept from one session could write into
//! the next case's freshly copied workspace, and a server's own state would leak from case to
//! case. A crashed `tooljournal` loses its servers with it (they are its children), and a
//! resume starts new ones; the harness does the same. Stopping them first is part of resetting
//! the world: nothing of an earlier case may land after the copy.

use crate::config::FileConfig;
use runtime::Tool;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use tooljournal_fuzz::{CallView, Crash, Files, Observer, Tools, WorkspaceWorld};

/// Most bytes of a server's stderr quoted when it fails to start.
const SERVER_LOG_QUOTED_BYTES_MAX: u64 = 2_000;

/// The configured MCP servers, started afresh for every session.
pub struct Servers {
    /// The runtime their transports run on, kept for the whole campaign (each case runs on a
    /// runtime of its own and talks to them through this one).
    rt: tokio::runtime::Handle,
    config: FileConfig,
    logs: PathBuf,
    workspace: PathBuf,
    live: Mutex<Vec<mcp::McpServer>>,
}

impl Servers {
    pub fn new(
        rt: tokio::runtime::Handle,
        config: FileConfig,
        logs: PathBuf,
        workspace: PathBuf,
    ) -> Servers {
        Servers {
            rt,
            config,
            logs,
            workspace,
            live: Mutex::new(Vec::new()),
        }
    }

    fn live(&self) -> MutexGuard<'_, Vec<mcp::McpServer>> {
        // Held only to swap the list; a panic elsewhere leaves it usable.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops every running server (waiting for each to exit).
    pub fn stop(&self) {
        let servers = std::mem::take(&mut *self.live());
        self.rt.block_on(async {
            for server in servers {
                server.shutdown().await;
            }
        });
    }

    /// Stops the running servers and starts new ones; their tools, to register. `Err` says
    /// which server did not start and why (its stderr's end quoted).
    pub fn restart(&self) -> Result<Tools, String> {
        self.stop();
        let started = self.start_all(|name, server_config| {
            // In the workspace unless the configuration says where, as `tooljournal run`
            // starts them in its working directory, the workspace by default.
            let mut server_config = server_config.clone();
            server_config
                .cwd
                .get_or_insert_with(|| self.workspace.clone());
            let log = self
                .logs
                .join(format!("mcp-{}.stderr", mcp::naming::sanitize(name)));
            let file = std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true),
                0o600,
            )
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
            self.rt
                .block_on(mcp::McpServer::start(name, &server_config, file.into()))
                .map_err(|e| format!("{e}{}", quoted_log(&log)))
        })?;
        let tools = started
            .iter()
            .flat_map(|s| s.tools())
            .map(|t| (t.clone() as Arc<dyn Tool>, t.source().clone()))
            .collect();
        *self.live() = started;
        Ok(tools)
    }

    /// Starts every configured server with `start`; the first that fails stops the ones
    /// started before it, and its error is returned (as `tooljournal run` starts them).
    fn start_all(
        &self,
        mut start: impl FnMut(&str, &mcp::ServerConfig) -> Result<mcp::McpServer, String>,
    ) -> Result<Vec<mcp::McpServer>, String> {
        let mut servers = Vec::new();
        for (name, server_config) in &self.config.mcp_servers {
            match start(name, server_config) {
                Ok(server) => servers.push(server),
                Err(e) => {
                    self.rt.block_on(async {
                        for s in servers {
                            s.shutdown().await;
                        }
                    });
                    return Err(e);
                }
            }
        }
        Ok(servers)
    }
}

/// A case's world: the servers stopped, then the files reset; observed by the files.
pub struct CaseWorld {
    pub files: WorkspaceWorld,
    pub servers: Arc<Servers>,
}

impl Observer for CaseWorld {
    type Snapshot = Files;

    fn reset(&self) {
        self.servers.stop();
        self.files.reset()
    }
    fn snapshot(&self) -> Files {
        self.files.snapshot()
    }
    fn apply(&self, state: &mut Files, call: &CallView<'_>) {
        self.files.apply(state, call)
    }
    fn crash(&self, crash: Crash) {
        self.files.crash(crash)
    }
}

/// The end of a server's stderr, for its startup failure's message ("" when it said nothing).
fn quoted_log(log: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(log) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let from = len.saturating_sub(SERVER_LOG_QUOTED_BYTES_MAX);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut tail).is_err() {
        return String::new();
    }
    let tail = String::from_utf8_lossy(&tail);
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends:\n{tail}")
    }
}
