//! The sandbox `bash` commands run under, as the command line (`--sandbox`, `--network`,
//! `--allow-unsandboxed`) and the configuration file (`[sandbox]`) choose it: a flag wins over
//! the file, the file over what a resumed journal records, and that over the default,
//! `workspace-write` with no network.

use crate::CliError;
use runtime::event::{SandboxBound, SandboxPolicy};
use serde::Deserialize;
use std::path::PathBuf;

/// The policy the CLI runs commands under when nothing chooses one.
pub const POLICY_DEFAULT: SandboxPolicy = SandboxPolicy::WorkspaceWrite;

/// `--sandbox`, `--network`, `--allow-unsandboxed`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SandboxFlags {
    /// Where `bash` commands run: `read-only`, `workspace-write` (the default: writes only to
    /// the workspace and a per-session temporary directory) or `danger-full-access` (no
    /// sandbox). Enforced by the kernel (Landlock, user and network namespaces).
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub sandbox: Option<SandboxPolicy>,
    /// Let sandboxed commands use the network (off by default).
    #[arg(long)]
    pub network: bool,
    /// Where the kernel lacks what the sandbox needs, run commands without it instead of
    /// refusing to start (journaled).
    #[arg(long)]
    pub allow_unsandboxed: bool,
}

fn parse_policy(name: &str) -> Result<SandboxPolicy, String> {
    SandboxPolicy::parse(name).ok_or_else(|| {
        format!("no sandbox policy {name:?}: read-only, workspace-write or danger-full-access")
    })
}

/// `[sandbox]` in the configuration file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `read-only`, `workspace-write` or `danger-full-access`.
    pub policy: Option<String>,
    /// Whether commands may use the network.
    pub network: Option<bool>,
    /// More directories commands may read.
    #[serde(default)]
    pub readable: Vec<PathBuf>,
    /// More directories commands may write (`workspace-write`).
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// As `--allow-unsandboxed`.
    #[serde(default)]
    pub allow_unsandboxed: bool,
}

/// The sandbox a session is built with. `journaled`: what a resumed session ran under.
pub fn spec(
    flags: &SandboxFlags,
    section: &SandboxSection,
    journaled: Option<&SandboxBound>,
) -> Result<sandbox::Spec, CliError> {
    let configured =
        match &section.policy {
            Some(name) => Some(parse_policy(name).map_err(|e| {
                CliError::Failed(format!("the configuration's [sandbox] policy: {e}"))
            })?),
            None => None,
        };
    // An escalated call's bound is not the session's: only `session/sandbox` is passed here.
    let policy = flags
        .sandbox
        .or(configured)
        .or(journaled.map(|b| b.policy))
        .unwrap_or(POLICY_DEFAULT);
    let network = flags.network
        || section
            .network
            .or(journaled.map(|b| b.network))
            .unwrap_or(false);
    // The workspace is the session's: the builder sets it.
    let mut spec = sandbox::Spec::new(policy, PathBuf::new());
    spec.network = network;
    spec.readable = section.readable.clone();
    spec.writable = section.writable.clone();
    spec.allow_unsandboxed = flags.allow_unsandboxed || section.allow_unsandboxed;
    // The password file libpq would read is the runtime's secret, never a command's.
    if let Some(file) = runtime::secret_var("PGPASSFILE") {
        spec.hidden.push(PathBuf::from(file));
    }
    Ok(spec)
}
