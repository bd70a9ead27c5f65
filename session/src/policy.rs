//! The session's policy: approval, parallelism and fsync, journaled as `session/policy` when a
//! session opens, reapplied by a resume.
//!
//! Why in the library: a resume that fell back to defaults ran, after a crash, the very bash
//! call that `deny` had been holding back. The journal is the session's memory, so the policy
//! lives there, and every resume (the CLI's or an embedder's) reapplies it. A caller may change
//! a setting ([`Overrides`]; journaled as a change, naming it); nothing else does. A journal
//! that records no policy (written before `session/policy` existed, or by a run stopped between
//! `session/open` and its policy) resumes with the strictest approval unless the caller says
//! otherwise.

use journal::FsyncPolicy;
use runtime::event::{ApprovalPolicy, ConfigFile, SessionPolicy, SyncPolicy};
use runtime::{Exposure, Registry};

/// Most concurrency-safe calls at once, unless the caller or the journal says otherwise.
pub const PARALLEL_MAX_DEFAULT: usize = 10;

/// What a resume's caller changes; `None` keeps what the journal says.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// How calls are approved.
    pub approval: Option<ApprovalPolicy>,
    /// Most concurrency-safe calls at once.
    pub parallel_max: Option<usize>,
    /// When the journal syncs.
    pub fsync: Option<FsyncPolicy>,
}

/// The settings a resume runs with, and what to tell the user about how they were chosen.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How calls are approved.
    pub approval: ApprovalPolicy,
    /// Most concurrency-safe calls at once.
    pub parallel_max: usize,
    /// When the journal syncs (the journal is opened with it).
    pub fsync: FsyncPolicy,
    /// Said once the resume knows it goes on (a default taken for a missing policy).
    pub notes: Vec<String>,
}

impl Settings {
    /// The settings for resuming a session whose journal says `journaled`.
    pub fn for_resume(journaled: Option<&SessionPolicy>, overrides: &Overrides) -> Settings {
        let mut notes = Vec::new();
        let approval = match (overrides.approval, journaled) {
            (Some(a), _) => a,
            (None, Some(p)) => p.approval,
            (None, None) => {
                notes.push(
                    "the journal records no policy (it predates session/policy, or its run was \
                     stopped before it journaled one): resuming with --approve deny; pass \
                     --approve allow to run unapproved commands"
                        .to_owned(),
                );
                ApprovalPolicy::Deny
            }
        };
        let parallel_max = overrides
            .parallel_max
            .or(journaled.map(|p| p.parallel_max as usize))
            .unwrap_or(PARALLEL_MAX_DEFAULT);
        let fsync = overrides
            .fsync
            .or(journaled.map(|p| fsync_of(p.fsync)))
            .unwrap_or(FsyncPolicy::Group);
        Settings {
            approval,
            parallel_max,
            fsync,
            notes,
        }
    }
}

/// The policy a session runs with, as `session/policy` records it.
pub fn record(
    approval: ApprovalPolicy,
    parallel_max: usize,
    fsync: FsyncPolicy,
    config: Option<ConfigFile>,
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
        approval,
        parallel_max: u32::try_from(parallel_max).unwrap_or(u32::MAX),
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
        let resolved = Settings::for_resume(None, &Overrides::default());
        assert_eq!(resolved.approval, ApprovalPolicy::Deny);
        assert!(
            resolved.notes[0].contains("--approve allow"),
            "{:?}",
            resolved.notes
        );
        // The caller's explicit word wins.
        let allowed = Settings::for_resume(
            None,
            &Overrides {
                approval: Some(ApprovalPolicy::Allow),
                ..Overrides::default()
            },
        );
        assert_eq!(allowed.approval, ApprovalPolicy::Allow);
        assert!(allowed.notes.is_empty());
    }

    #[test]
    fn every_approval_is_journaled_as_itself_and_resumes_as_itself() {
        let registry = Registry::new();
        for approval in [
            ApprovalPolicy::Allow,
            ApprovalPolicy::Deny,
            ApprovalPolicy::Ask,
        ] {
            let journaled = record(approval, 4, FsyncPolicy::Group, None, &registry, "test");
            assert_eq!(journaled.approval, approval);
            let resolved = Settings::for_resume(Some(&journaled), &Overrides::default());
            assert_eq!(resolved.approval, approval);
            assert_eq!(resolved.parallel_max, 4);
            assert!(changes(Some(&journaled), &journaled).is_none());
        }
    }
}
