//! What a process started for a tool could touch (schema 11): the sandbox a session runs its
//! `bash` commands and sandboxed MCP servers under, journaled once for the session
//! (`session/sandbox`) and again in the `started` of every call that runs a process
//! ([`super::Evidence::Sandbox`]), so that a call whose outcome is unknown comes with its bound:
//! "may have run; its writes, if any, are confined to these paths; no network".
//!
//! Why with every call and not only once: a call may run outside the session's sandbox after
//! the user approved it (escalation), and the bound recovery states must be the one that call
//! ran under, durable before its body, as its `started` is (I1).

use serde::{Deserialize, Serialize};
use std::path::Path;

/// A sandbox policy, named as users of other agents know them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SandboxPolicy {
    /// Reads the readable set; writes nothing.
    ReadOnly,
    /// Reads the readable set; writes the workspace and the session's temporary directory.
    WorkspaceWrite,
    /// No sandbox: the process can do whatever the user can.
    DangerFullAccess,
}

impl SandboxPolicy {
    /// Every policy, in the order the command line lists them.
    pub const ALL: [SandboxPolicy; 3] = [
        SandboxPolicy::ReadOnly,
        SandboxPolicy::WorkspaceWrite,
        SandboxPolicy::DangerFullAccess,
    ];

    /// As the command line and the configuration file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxPolicy::ReadOnly => "read-only",
            SandboxPolicy::WorkspaceWrite => "workspace-write",
            SandboxPolicy::DangerFullAccess => "danger-full-access",
        }
    }

    /// The policy `name` spells, if any.
    pub fn parse(name: &str) -> Option<SandboxPolicy> {
        SandboxPolicy::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// What a process ran under: the policy, whether the kernel enforced it, and the bound it
/// sets (`session/sandbox`, and `started`'s [`super::Evidence::Sandbox`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxBound {
    /// The policy.
    pub policy: SandboxPolicy,
    /// Whether the kernel enforced the policy. False under `danger-full-access`, and when the
    /// kernel lacked what the policy needs and the user accepted running without it
    /// (`--allow-unsandboxed`; [`SandboxBound::mechanism`] says what was missing).
    pub enforced: bool,
    /// Absolute paths the process could create, change or remove files beneath (empty under
    /// `read-only`). Besides these, only the null and random devices could be written.
    pub writable: Vec<String>,
    /// Absolute paths the process could read beneath (the writable ones included).
    pub readable: Vec<String>,
    /// Whether the process could use the network.
    pub network: bool,
    /// How the kernel enforced it (`landlock ABI 6; user and network namespaces`), or why it
    /// did not.
    pub mechanism: String,
    /// The call ran outside the session's sandbox because the user approved it (escalation).
    pub escalated: bool,
}

impl SandboxBound {
    /// Whether the bound confines anything: enforced, and not `danger-full-access`.
    pub fn confines(&self) -> bool {
        self.enforced && self.policy != SandboxPolicy::DangerFullAccess
    }

    /// Whether the process could have changed `path` (absolute): anywhere when unconfined,
    /// else only beneath a writable root. Compared by components, as written (the roots are
    /// journaled resolved).
    pub fn could_write(&self, path: &Path) -> bool {
        !self.confines() || self.writable.iter().any(|root| path.starts_with(root))
    }

    /// The bound in words, as recovery states it for a call of unknown outcome: "its writes,
    /// if any, are confined to /w, /tmp/s (…); no network", or why there is none.
    pub fn in_words(&self) -> String {
        if !self.confines() {
            let why = if self.escalated {
                "it ran outside the sandbox, as the user approved".to_owned()
            } else if self.policy == SandboxPolicy::DangerFullAccess {
                "it ran without a sandbox (danger-full-access)".to_owned()
            } else {
                format!(
                    "it ran without a sandbox: {} was not enforced ({})",
                    self.policy.as_str(),
                    self.mechanism
                )
            };
            return format!("its effects are not bounded: {why}");
        }
        let network = if self.network {
            "network allowed"
        } else {
            "no network"
        };
        // Landlock confines what is written, not a file's metadata: said, never implied.
        let metadata = "a file's mode, owner or times may have changed anywhere";
        if self.writable.is_empty() {
            format!(
                "it could write no file ({}; {metadata}); {network}",
                self.policy.as_str()
            )
        } else {
            format!(
                "its writes, if any, are confined to {} ({}; {metadata}); {network}",
                self.writable.join(", "),
                self.policy.as_str()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(policy: SandboxPolicy, enforced: bool) -> SandboxBound {
        SandboxBound {
            policy,
            enforced,
            writable: vec!["/w".into(), "/tmp/s".into()],
            readable: vec!["/usr".into(), "/w".into()],
            network: false,
            mechanism: "landlock ABI 6".into(),
            escalated: false,
        }
    }

    #[test]
    fn a_confining_bound_names_its_roots_and_the_network() {
        let b = bound(SandboxPolicy::WorkspaceWrite, true);
        assert_eq!(
            b.in_words(),
            "its writes, if any, are confined to /w, /tmp/s (workspace-write; a file's mode, owner \
             or times may have changed anywhere); no network"
        );
        assert!(b.could_write(Path::new("/w/a/b")));
        assert!(!b.could_write(Path::new("/wx")));
        assert!(!b.could_write(Path::new("/etc/passwd")));
    }

    #[test]
    fn an_unenforced_bound_bounds_nothing_and_says_why() {
        let b = bound(SandboxPolicy::WorkspaceWrite, false);
        assert!(b.could_write(Path::new("/etc/passwd")));
        assert!(b.in_words().contains("was not enforced (landlock ABI 6)"));
        let full = bound(SandboxPolicy::DangerFullAccess, true);
        assert!(full.in_words().contains("danger-full-access"));
        assert!(full.could_write(Path::new("/anything")));
    }

    #[test]
    fn names_round_trip() {
        for p in SandboxPolicy::ALL {
            assert_eq!(SandboxPolicy::parse(p.as_str()), Some(p));
        }
        assert_eq!(SandboxPolicy::parse("full"), None);
    }
}
