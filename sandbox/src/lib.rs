//! `sandbox`: what a process started for a tool (a `bash` command, an MCP server) can touch,
//! enforced by the kernel for it and every process it starts, and said in the journal.
//!
//! - **Files: Landlock** (ABI 3 or newer). An allow-list: the system's directories and the
//!   workspace can be read, the workspace and a per-session temporary directory written
//!   (`workspace-write`), nothing written (`read-only`). A path outside every root cannot be
//!   read, listed, created, changed, truncated or removed. Landlock cannot carve a hole in a
//!   root it allows, so the paths the runtime keeps to itself (the journal directory, secret
//!   files) must lie outside every readable root: [`Sandbox::new`] refuses a session where one
//!   does not, rather than let a command read it.
//! - **Network: user and network namespaces.** Without `network`, the command starts in a
//!   network namespace of its own, which has only a loopback device that is down: every
//!   protocol (TCP, UDP, raw, ICMP, abstract Unix sockets) fails, the host's loopback
//!   listeners included. A seccomp filter on `socket(2)` was the other choice; the namespace
//!   needs no per-architecture filter and refuses what a filter would have to list. The user
//!   namespace comes with it: a root runtime's command keeps no capability over the host (it
//!   cannot `setns` back, load a module or mount), and `no_new_privs` (Landlock's) means no
//!   set-user-ID program gives one back.
//! - **Never silently unsandboxed.** What the kernel lacks is found before anything runs
//!   ([`kernel`]); a policy it cannot enforce refuses the session unless the user accepted
//!   running without it, and the bound then says `enforced: false` and why.
//!
//! The ruleset and the namespaces are made once, before any command; [`Sandbox::confine`]
//! hands each child copies of their descriptors, which it enters between fork and exec with
//! system calls only (`child.rs`).

#![warn(missing_docs)]

mod child;
pub mod kernel;
mod namespaces;
mod roots;

pub use events::event::{SandboxBound, SandboxPolicy};
pub use roots::{DEVICES_WRITABLE, SYSTEM_READABLE};

use std::path::{Path, PathBuf};

/// What a session asks of its sandbox.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The policy.
    pub policy: SandboxPolicy,
    /// Whether commands may use the network.
    pub network: bool,
    /// The workspace: readable, and writable under `workspace-write`.
    pub workspace: PathBuf,
    /// More directories commands may read (a toolchain under the home directory, say).
    pub readable: Vec<PathBuf>,
    /// More directories commands may write under `workspace-write`.
    pub writable: Vec<PathBuf>,
    /// What no command may read: the journal directory, the files secrets are read from.
    pub hidden: Vec<PathBuf>,
    /// Run without the kernel's enforcement where it lacks what the policy needs (the choice is
    /// journaled), instead of refusing.
    pub allow_unsandboxed: bool,
    /// Names the per-session temporary directory (`tooljournal-<label>-XXXXXX`).
    pub label: String,
}

impl Spec {
    /// `policy` for `workspace`, with the network off and nothing more readable, writable or
    /// hidden.
    pub fn new(policy: SandboxPolicy, workspace: impl Into<PathBuf>) -> Spec {
        Spec {
            policy,
            network: false,
            workspace: workspace.into(),
            readable: Vec::new(),
            writable: Vec::new(),
            hidden: Vec::new(),
            allow_unsandboxed: false,
            label: "session".to_owned(),
        }
    }
}

/// Why a sandbox could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks what the policy needs, and running without it was not accepted.
    #[error(
        "the sandbox policy {policy} cannot be enforced: {missing}; nothing was started. Pass \
         --allow-unsandboxed (or allow_unsandboxed = true under [sandbox]) to run commands \
         without it (the choice is journaled), or choose --sandbox danger-full-access"
    )]
    Unavailable {
        /// The policy asked for.
        policy: &'static str,
        /// What the kernel lacks, in words.
        missing: String,
    },
    /// A path the runtime keeps to itself lies inside a root commands could read.
    #[error(
        "{hidden} lies inside {root}, which the sandbox lets commands read, and Landlock cannot \
         keep a part of a readable directory out of reach: move it out of {root} (the journal: \
         --journal), or leave {root} out of [sandbox] readable"
    )]
    Exposed {
        /// The path to keep out of reach (the journal directory, a secret file).
        hidden: String,
        /// The readable root it lies in.
        root: String,
    },
    /// A root could not be opened or resolved.
    #[error("sandbox root {path}: {source}")]
    Root {
        /// The root.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The per-session temporary directory could not be made.
    #[error("cannot make the session's temporary directory in {dir}: {source}")]
    TempDir {
        /// Where it was to be made.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
    /// Landlock refused the ruleset.
    #[error("cannot build the Landlock ruleset: {0}")]
    Landlock(String),
    /// The filter that refuses Unix sockets could not be built.
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(String),
    /// The sandbox's user and network namespaces could not be made.
    #[error("cannot make the sandbox's namespaces ({0})")]
    Namespaces(String),
}

/// A sandbox ready to confine processes: its bound, and (when enforced) the ruleset and
/// namespaces each process enters.
#[derive(Debug)]
pub struct Sandbox {
    bound: SandboxBound,
    enforcer: Option<child::Enforcer>,
    temp_dir: Option<tempfile::TempDir>,
}

impl Sandbox {
    /// Sets up `spec`: finds what the kernel offers, resolves the roots, refuses a hidden path
    /// inside a readable root, makes the temporary directory and builds the ruleset.
    pub fn new(spec: Spec) -> Result<Sandbox, SandboxError> {
        if spec.policy == SandboxPolicy::DangerFullAccess {
            return Ok(Sandbox::unconfined(false));
        }
        let temp_dir = match spec.policy {
            SandboxPolicy::WorkspaceWrite => Some(roots::make_temp_dir(&spec.label)?),
            _ => None,
        };
        let roots = roots::Roots::resolve(&spec, temp_dir.as_ref().map(|t| t.path()))?;
        roots.refuse_exposed(&spec.hidden)?;
        let kernel = kernel::Kernel::get();
        let mut bound = SandboxBound {
            policy: spec.policy,
            enforced: false,
            writable: roots.writable_strings(),
            readable: roots.readable_strings(),
            network: spec.network,
            mechanism: String::new(),
            escalated: false,
        };
        match kernel.missing(spec.network) {
            Some(missing) if spec.allow_unsandboxed => {
                // What the command could do is everything: the fields say so, the policy
                // names what was asked.
                bound.mechanism = format!(
                    "not enforced: {missing}; running without it was accepted \
                     (allow-unsandboxed)"
                );
                bound.network = true;
                bound.writable.clear();
                bound.readable.clear();
                Ok(Sandbox {
                    bound,
                    enforcer: None,
                    temp_dir,
                })
            }
            Some(missing) => Err(SandboxError::Unavailable {
                policy: spec.policy.as_str(),
                missing,
            }),
            None => {
                let enforcer = child::Enforcer::build(&roots, kernel, spec.network)?;
                bound.enforced = true;
                bound.mechanism = enforcer.mechanism();
                Ok(Sandbox {
                    bound,
                    enforcer: Some(enforcer),
                    temp_dir,
                })
            }
        }
    }

    /// No sandbox: `danger-full-access`, chosen for the session, or for one call the user
    /// approved running outside the session's sandbox (`escalated`).
    pub fn unconfined(escalated: bool) -> Sandbox {
        Sandbox {
            bound: SandboxBound {
                policy: SandboxPolicy::DangerFullAccess,
                enforced: false,
                writable: Vec::new(),
                readable: Vec::new(),
                network: true,
                mechanism: if escalated {
                    "none: the user approved running this call outside the sandbox".to_owned()
                } else {
                    "none: danger-full-access".to_owned()
                },
                escalated,
            },
            enforcer: None,
            temp_dir: None,
        }
    }

    /// What a process confined by this sandbox can touch.
    pub fn bound(&self) -> &SandboxBound {
        &self.bound
    }

    /// The per-session temporary directory (`workspace-write`), commands' `TMPDIR`.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.temp_dir.as_ref().map(|t| t.path())
    }

    /// Makes `command` start confined: its `TMPDIR` set to the session's temporary directory,
    /// and (when enforced) the namespaces and ruleset entered between fork and exec, after any
    /// `pre_exec` already set. Fails only when the ruleset's descriptor cannot be copied.
    pub fn confine(&self, command: &mut tokio::process::Command) -> std::io::Result<()> {
        if let Some(dir) = self.temp_dir() {
            command.env("TMPDIR", dir);
        }
        let Some(enforcer) = &self.enforcer else {
            return Ok(());
        };
        let mut entry = enforcer.entry()?;
        // SAFETY: runs in the child between fork and exec; `Entry::enter` makes system calls
        // only (unshare, open/write of /proc/self files, prctl, landlock_restrict_self), on
        // buffers made before the fork.
        unsafe {
            command.pre_exec(move || entry.enter());
        }
        Ok(())
    }
}
