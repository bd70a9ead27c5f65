//! The session's policy as the command line gives it: `--approve`, and the configuration file a
//! resume runs with. What the policy means, how a resume reapplies it and what a change
//! journals is the library's (`tooljournal_session::Settings`, `record`, `changes`).

use crate::config::{self, Loaded};
use crate::CliError;
use journal::FsyncPolicy;
use runtime::event::{ApprovalPolicy, SessionPolicy};
use runtime::Registry;
use std::path::{Path, PathBuf};

pub use session::PARALLEL_MAX_DEFAULT;

/// How calls are approved. `allow`: nothing asks; `deny`: every `bash` call asks, and
/// questions nobody answers are denied; `ask` (a live model only): every call of a tool that
/// may change something asks the person at the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    Ask,
    Allow,
    Deny,
}

impl Approve {
    /// As `session/policy` records it.
    pub fn policy(self) -> ApprovalPolicy {
        match self {
            Approve::Allow => ApprovalPolicy::Allow,
            Approve::Deny => ApprovalPolicy::Deny,
            Approve::Ask => ApprovalPolicy::Ask,
        }
    }

    /// The flag's value for a recorded policy.
    pub fn of(policy: ApprovalPolicy) -> Approve {
        match policy {
            ApprovalPolicy::Allow => Approve::Allow,
            ApprovalPolicy::Deny => Approve::Deny,
            ApprovalPolicy::Ask => Approve::Ask,
        }
    }
}

/// What the user passed to `resume`; None means "as the journal says".
#[derive(Debug, Default, Clone)]
pub struct ResumeFlags {
    pub approve: Option<Approve>,
    pub max_parallel: Option<usize>,
    pub fsync: Option<FsyncPolicy>,
    pub config: Option<PathBuf>,
}

impl ResumeFlags {
    /// The library's overrides of the journaled policy.
    pub fn overrides(&self) -> session::Overrides {
        session::Overrides {
            approval: self.approve.map(Approve::policy),
            parallel_max: self.max_parallel,
            fsync: self.fsync,
        }
    }
}

/// The configuration file a resume runs with: `--config`, else the one the journal records
/// (refused if it changed since), else the user's default.
pub fn config_for_resume(
    journaled: Option<&SessionPolicy>,
    flag: Option<&Path>,
) -> Result<Loaded, CliError> {
    match (flag, journaled) {
        (Some(path), _) => config::load(Some(path)),
        (None, Some(p)) => match &p.config {
            None => Ok(Loaded {
                config: Default::default(),
                file: None,
            }),
            Some(recorded) => {
                let loaded = config::load(Some(Path::new(&recorded.path)))?;
                let now = loaded.file.as_ref().map(|f| f.sha256.as_str());
                if now != Some(recorded.sha256.as_str()) {
                    return Err(CliError::Failed(format!(
                        "{}: the configuration changed since the session's policy was \
                         journaled (sha256 {} -> {}): pass --config {} to resume with it",
                        recorded.path,
                        short(&recorded.sha256),
                        short(now.unwrap_or("?")),
                        recorded.path
                    )));
                }
                Ok(loaded)
            }
        },
        (None, None) => config::load(None),
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The policy a new session runs with, as `session/policy` records it.
pub fn record(
    approve: Approve,
    max_parallel: usize,
    fsync: FsyncPolicy,
    config: Option<runtime::event::ConfigFile>,
    registry: &Registry,
    reason: &str,
) -> SessionPolicy {
    session::record(
        approve.policy(),
        max_parallel,
        fsync,
        config,
        registry,
        reason,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_approve_flag_is_journaled_as_itself() {
        let registry = Registry::new();
        for approve in [Approve::Allow, Approve::Deny, Approve::Ask] {
            let journaled = record(approve, 4, FsyncPolicy::Group, None, &registry, "test");
            assert_eq!(Approve::of(journaled.approval), approve);
        }
        assert_eq!(
            record(Approve::Ask, 4, FsyncPolicy::Group, None, &registry, "t").approval,
            ApprovalPolicy::Ask
        );
    }

    #[test]
    fn a_journaled_configuration_that_changed_is_refused_naming_the_flag() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "").unwrap_or_else(|e| panic!("{e}"));
        let mut journaled = record(
            Approve::Deny,
            4,
            FsyncPolicy::Group,
            Some(runtime::event::ConfigFile {
                path: file.display().to_string(),
                sha256: "0".repeat(64),
            }),
            &Registry::new(),
            "test",
        );
        let refused = config_for_resume(Some(&journaled), None).err();
        assert!(
            matches!(&refused, Some(CliError::Failed(m)) if m.contains("--config")),
            "{refused:?}"
        );
        journaled.config = None;
        assert!(config_for_resume(Some(&journaled), None).is_ok());
    }
}
