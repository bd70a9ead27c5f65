//! The session's policy: approval, parallelism, fsync, tool exposure and the configuration
//! file, journaled as `session/policy` when a session opens, and reapplied by `resume`.
//!
//! Why: a resume that fell back to defaults ran, after a crash, the very bash call that
//! `--approve deny` had been holding back. The journal is the session's memory, so the policy
//! lives there. A resume flag may change it (journaled as a change, naming the flag); nothing
//! else does, and a journal that records no policy (written before `session/policy` existed,
//! or by a run stopped between `session/open` and its policy) resumes with the strictest
//! approval unless the user says otherwise.

use crate::config::{self, Loaded};
use crate::CliError;
use journal::FsyncPolicy;
use runtime::event::{ApprovalPolicy, SessionPolicy, SyncPolicy};
use runtime::registry::{Exposure, Registry};
use std::path::{Path, PathBuf};

/// Most concurrency-safe calls at once, unless the user or the journal says otherwise.
pub const PARALLEL_MAX_DEFAULT: usize = 10;

/// How calls are approved. `allow`: nothing asks; `deny`: every `bash` call asks, and
/// questions nobody answers are denied; `ask` (a live model only): every call of a tool that
/// may change something asks the person at the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    Ask,
    Allow,
    Deny,
}

/// What the user passed to `resume`; None means "as the journal says".
#[derive(Debug, Default, Clone)]
pub struct ResumeFlags {
    pub approve: Option<Approve>,
    pub max_parallel: Option<usize>,
    pub fsync: Option<FsyncPolicy>,
    pub config: Option<PathBuf>,
}

/// The settings a resume runs with, and what it told the user about how they were chosen.
pub struct Resolved {
    pub approve: Approve,
    pub max_parallel: usize,
    pub fsync: FsyncPolicy,
    pub config: Loaded,
    pub notes: Vec<String>,
}

/// The settings for resuming a session whose journal says `journaled`.
pub fn for_resume(
    journaled: Option<&SessionPolicy>,
    flags: ResumeFlags,
) -> Result<Resolved, CliError> {
    let mut notes = Vec::new();
    let approve = match (flags.approve, journaled) {
        (Some(a), _) => a,
        (None, Some(p)) => approve_of(p.approval),
        (None, None) => {
            notes.push(
                "the journal records no policy (it predates session/policy, or its run was \
                 stopped before it journaled one): resuming with --approve deny; pass \
                 --approve allow to run unapproved commands"
                    .to_owned(),
            );
            Approve::Deny
        }
    };
    let max_parallel = flags
        .max_parallel
        .or(journaled.map(|p| p.parallel_max as usize))
        .unwrap_or(PARALLEL_MAX_DEFAULT);
    let fsync = flags
        .fsync
        .or(journaled.map(|p| fsync_of(p.fsync)))
        .unwrap_or(FsyncPolicy::Group);
    let config = match (flags.config, journaled) {
        (Some(path), _) => config::load(Some(&path))?,
        (None, Some(p)) => match &p.config {
            None => Loaded {
                config: Default::default(),
                file: None,
            },
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
                loaded
            }
        },
        (None, None) => config::load(None)?,
    };
    Ok(Resolved {
        approve,
        max_parallel,
        fsync,
        config,
        notes,
    })
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The policy a session runs with, as `session/policy` records it.
pub fn record(
    approve: Approve,
    max_parallel: usize,
    fsync: FsyncPolicy,
    config: Option<runtime::event::ConfigFile>,
    registry: &Registry,
    reason: &str,
) -> SessionPolicy {
    let exposure = registry
        .entries()
        .into_iter()
        .filter_map(|e| {
            let word = match e.exposure {
                Exposure::Direct => return None,
                Exposure::Deferred => "deferred",
                Exposure::Hidden => "hidden",
            };
            Some((e.tool.name().to_owned(), word.to_owned()))
        })
        .collect();
    SessionPolicy {
        approval: match approve {
            Approve::Allow => ApprovalPolicy::Allow,
            Approve::Deny => ApprovalPolicy::Deny,
            Approve::Ask => ApprovalPolicy::Ask,
        },
        parallel_max: u32::try_from(max_parallel).unwrap_or(u32::MAX),
        fsync: match fsync {
            FsyncPolicy::Always => SyncPolicy::Always,
            FsyncPolicy::Group => SyncPolicy::Group,
            FsyncPolicy::Never => SyncPolicy::Never,
        },
        exposure,
        config,
        reason: reason.to_owned(),
    }
}

/// What changed between the journaled policy and the one a resume runs with, in words; None
/// when nothing did (then no event is written).
pub fn changes(journaled: Option<&SessionPolicy>, now: &SessionPolicy) -> Option<String> {
    let Some(old) = journaled else {
        return Some("resume: the journal recorded no policy before".to_owned());
    };
    let mut changed = Vec::new();
    if old.approval != now.approval {
        changed.push(format!(
            "approval {:?} -> {:?} (--approve)",
            old.approval, now.approval
        ));
    }
    if old.parallel_max != now.parallel_max {
        changed.push(format!(
            "parallel_max {} -> {} (--max-parallel)",
            old.parallel_max, now.parallel_max
        ));
    }
    if old.fsync != now.fsync {
        changed.push(format!(
            "fsync {:?} -> {:?} (--fsync)",
            old.fsync, now.fsync
        ));
    }
    if old.config != now.config {
        changed.push("configuration file (--config)".to_owned());
    }
    if old.exposure != now.exposure {
        changed.push("tool exposure (--config)".to_owned());
    }
    (!changed.is_empty()).then(|| format!("resume: {}", changed.join("; ")))
}

fn approve_of(p: ApprovalPolicy) -> Approve {
    match p {
        ApprovalPolicy::Allow => Approve::Allow,
        ApprovalPolicy::Deny => Approve::Deny,
        ApprovalPolicy::Ask => Approve::Ask,
    }
}

fn fsync_of(p: SyncPolicy) -> FsyncPolicy {
    match p {
        SyncPolicy::Always => FsyncPolicy::Always,
        SyncPolicy::Group => FsyncPolicy::Group,
        SyncPolicy::Never => FsyncPolicy::Never,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_without_a_policy_resumes_with_the_strictest_approval() {
        let resolved = for_resume(
            None,
            ResumeFlags {
                config: Some("/dev/null".into()),
                ..ResumeFlags::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(resolved.approve, Approve::Deny);
        assert!(
            resolved.notes[0].contains("--approve allow"),
            "{:?}",
            resolved.notes
        );
        // The user's explicit word wins.
        let allowed = for_resume(
            None,
            ResumeFlags {
                approve: Some(Approve::Allow),
                config: Some("/dev/null".into()),
                ..ResumeFlags::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(allowed.approve, Approve::Allow);
        assert!(allowed.notes.is_empty());
    }

    #[test]
    fn ask_is_journaled_as_ask_and_resumes_as_ask() {
        let registry = Registry::new();
        for approve in [Approve::Allow, Approve::Deny, Approve::Ask] {
            let journaled = record(approve, 4, FsyncPolicy::Group, None, &registry, "test");
            let resolved = for_resume(
                Some(&journaled),
                ResumeFlags {
                    config: Some("/dev/null".into()),
                    ..ResumeFlags::default()
                },
            )
            .unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(resolved.approve, approve);
        }
        let ask = record(Approve::Ask, 4, FsyncPolicy::Group, None, &registry, "test");
        assert_eq!(ask.approval, ApprovalPolicy::Ask);
    }
}
