//! The sandbox bound recovery states (schema 11): what a call's process could touch, as its
//! last `started` journaled it (`Evidence::Sandbox`), and the session's sandbox
//! (`session/sandbox`), as every output says them.
//!
//! Why recovery names other calls' bounds: a probe that finds a file in neither of the states a
//! call recorded knows only that something else changed it. The calls of unknown outcome that
//! ran a process are candidates, and a bound rules out those whose writable roots the file lies
//! outside of (evidence, not proof: the verdict stays what it was).

use events::event::{CallRef, Evidence, SandboxBound};
use events::replay::CallReplay;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The bound the call's last `started` recorded, if it ran a process.
pub(crate) fn of_call(c: &CallReplay) -> Option<&SandboxBound> {
    of_evidence(&c.evidence)
}

/// The bound among a `started`'s evidence, if any.
pub(crate) fn of_evidence(evidence: &[Evidence]) -> Option<&SandboxBound> {
    evidence.iter().find_map(|e| match e {
        Evidence::Sandbox(bound) => Some(bound),
        Evidence::FileReplace { .. } => None,
    })
}

/// The bound as `--json` shows it: the policy as the command line spells it.
pub(crate) fn json(b: &SandboxBound) -> Value {
    json!({
        "policy": b.policy.as_str(),
        "enforced": b.enforced,
        "writable": b.writable,
        "readable": b.readable,
        "network": b.network,
        "mechanism": b.mechanism,
        "escalated": b.escalated,
    })
}

/// The session's sandbox in one line, for the head of an audit: `sandbox: workspace-write,
/// enforced by landlock ABI 6; user and network namespaces (writable: /w, /tmp/s; no
/// network)`, or `sandbox: NOT ENFORCED: …`.
pub(crate) fn session_words(b: &SandboxBound) -> String {
    if b.confines() {
        let writable = if b.writable.is_empty() {
            "nothing".to_owned()
        } else {
            b.writable.join(", ")
        };
        let network = if b.network {
            "network allowed"
        } else {
            "no network"
        };
        return format!(
            "sandbox: {}, enforced by {} (writable: {writable}; {network})",
            b.policy.as_str(),
            b.mechanism
        );
    }
    let why = if b.policy == events::event::SandboxPolicy::DangerFullAccess {
        "danger-full-access: commands run with all of the user's access".to_owned()
    } else {
        format!(
            "{} was not enforced ({}): commands run with all of the user's access",
            b.policy.as_str(),
            b.mechanism
        )
    };
    format!("sandbox: NOT ENFORCED: {why}")
}

/// The calls of unknown outcome that ran a process, with their bounds: first those each
/// `recovery` of the journal left `TOOL_OUTCOME_UNKNOWN`, recovery by recovery, then the
/// orphans this run classifies. Kept only when a workspace is probed.
///
/// Why "as of" a recovery: a streamed reading probes a call an earlier recovery committed as
/// soon as that recovery is read, before the rest of the journal; the whole analysis names the
/// same calls, so that both give the same words.
#[derive(Debug, Default, Clone)]
pub(crate) struct Peers {
    calls: Vec<(CallRef, SandboxBound)>,
    /// How many of `calls` were known once each recovery had been read.
    after_recovery: Vec<usize>,
    /// The workspace as the session ran (session/open's), when absolute: what the bounds'
    /// roots name, wherever the probed copy lies.
    workspace: Option<PathBuf>,
}

/// The peers a probe names, and the workspace their roots were resolved in (`None`: the
/// probed one).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Among<'a> {
    pub(crate) calls: &'a [(CallRef, SandboxBound)],
    pub(crate) workspace: Option<&'a Path>,
}

impl Peers {
    /// The session's workspace as session/open journaled it. A relative one (an embedding's
    /// `.`) names no place the roots can be compared with: the probed root stands in.
    pub(crate) fn journaled_workspace(&mut self, workspace: &str) {
        let path = Path::new(workspace);
        self.workspace = path.is_absolute().then(|| path.to_path_buf());
    }

    /// A call a recovery (or this run) leaves of unknown outcome; one that ran no process
    /// bounds nothing and is not kept.
    pub(crate) fn unknown(&mut self, call: &CallRef, bound: Option<&SandboxBound>) {
        if let Some(bound) = bound {
            self.calls.push((call.clone(), bound.clone()));
        }
    }

    /// A recovery was read whole.
    pub(crate) fn recovery_read(&mut self) {
        self.after_recovery.push(self.calls.len());
    }

    /// The calls known once the recovery `index` (0 for the journal's first) was read.
    pub(crate) fn as_of(&self, index: usize) -> Among<'_> {
        let n = self
            .after_recovery
            .get(index)
            .copied()
            .unwrap_or(self.calls.len());
        Among {
            calls: &self.calls[..n],
            workspace: self.workspace.as_deref(),
        }
    }

    /// Every call known.
    pub(crate) fn all(&self) -> Among<'_> {
        Among {
            calls: &self.calls,
            workspace: self.workspace.as_deref(),
        }
    }
}

/// What [`who_could_write`] finds: the words, and the calls the file lies outside the bounds of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Who {
    pub(crate) words: String,
    pub(crate) could_not: Vec<CallRef>,
}

/// Which of `peers` other than `me` could have written `path` (absolute) and which could not,
/// in words to follow a probe's finding that the file changed; `None` when `peers` names no
/// other call.
pub(crate) fn who_could_write(
    path: &Path,
    me: &CallRef,
    peers: &[(CallRef, SandboxBound)],
) -> Option<Who> {
    let mut could: Vec<&CallRef> = Vec::new();
    let mut could_not: Vec<&CallRef> = Vec::new();
    for (call, bound) in peers.iter().filter(|(c, _)| c != me) {
        if bound.could_write(path) {
            could.push(call);
        } else {
            could_not.push(call);
        }
    }
    // The order found differs between readings; the words must not.
    could.sort();
    could_not.sort();
    let list = |calls: &[&CallRef]| {
        calls
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let outside = |calls: &[&CallRef]| {
        let whose = if calls.len() == 1 { "its" } else { "their" };
        format!("it lies outside {whose} writable roots")
    };
    let head = "of the other calls of unknown outcome that ran a process,";
    let words = match (could.is_empty(), could_not.is_empty()) {
        (true, true) => return None,
        (false, true) => format!("{head} {} could have written it", list(&could)),
        (true, false) => format!(
            "{head} {} could not have written it: {}",
            list(&could_not),
            outside(&could_not)
        ),
        (false, false) => format!(
            "{head} {} could have written it, and {} could not: {}",
            list(&could),
            list(&could_not),
            outside(&could_not)
        ),
    };
    Some(Who {
        words,
        could_not: could_not.into_iter().cloned().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use events::event::SandboxPolicy;

    fn bound(writable: &[&str], enforced: bool) -> SandboxBound {
        SandboxBound {
            policy: SandboxPolicy::WorkspaceWrite,
            enforced,
            writable: writable.iter().map(|w| (*w).to_owned()).collect(),
            readable: vec!["/usr".into()],
            network: false,
            mechanism: "landlock ABI 6; user and network namespaces".into(),
            escalated: false,
        }
    }

    fn call(id: &str) -> CallRef {
        CallRef {
            turn: 1,
            step: 2,
            call_id: id.into(),
        }
    }

    #[test]
    fn the_calls_that_could_write_a_path_are_told_from_those_that_could_not() {
        let peers = vec![
            (call("me"), bound(&["/w"], true)),
            (call("tmp"), bound(&["/tmp/s"], true)),
            (call("ws"), bound(&["/w"], true)),
            (call("free"), bound(&["/tmp/s"], false)),
        ];
        let who = who_could_write(Path::new("/w/a.txt"), &call("me"), &peers).unwrap();
        assert_eq!(who.could_not, vec![call("tmp")]);
        assert_eq!(
            who.words,
            "of the other calls of unknown outcome that ran a process, call free (turn 1, step \
             2), call ws (turn 1, step 2) could have written it, and call tmp (turn 1, step 2) \
             could not: it lies outside its writable roots"
        );
        let outside = who_could_write(Path::new("/etc/x"), &call("free"), &peers[..3])
            .unwrap()
            .words;
        assert!(
            outside.ends_with("could not have written it: it lies outside their writable roots"),
            "{outside}"
        );
        assert_eq!(
            who_could_write(Path::new("/w"), &call("me"), &peers[..1]),
            None
        );
    }

    #[test]
    fn peers_are_known_as_of_each_recovery_then_all() {
        let mut p = Peers::default();
        p.unknown(&call("a"), Some(&bound(&["/w"], true)));
        p.unknown(&call("no-process"), None);
        p.recovery_read();
        p.recovery_read();
        p.unknown(&call("b"), Some(&bound(&["/w"], true)));
        assert_eq!(p.as_of(0).calls.len(), 1);
        assert_eq!(p.as_of(1).calls.len(), 1);
        assert_eq!(p.all().calls.len(), 2);
    }

    #[test]
    fn only_an_absolute_journaled_workspace_stands_for_the_roots() {
        let mut p = Peers::default();
        assert_eq!(p.all().workspace, None);
        p.journaled_workspace("/home/u/project");
        assert_eq!(p.as_of(0).workspace, Some(Path::new("/home/u/project")));
        p.journaled_workspace(".");
        assert_eq!(p.all().workspace, None);
    }

    #[test]
    fn the_session_is_said_enforced_or_not() {
        let words = session_words(&bound(&["/w", "/tmp/s"], true));
        assert_eq!(
            words,
            "sandbox: workspace-write, enforced by landlock ABI 6; user and network namespaces \
             (writable: /w, /tmp/s; no network)"
        );
        let mut off = bound(&["/w"], false);
        off.mechanism = "the kernel has no landlock".into();
        assert_eq!(
            session_words(&off),
            "sandbox: NOT ENFORCED: workspace-write was not enforced (the kernel has no \
             landlock): commands run with all of the user's access"
        );
    }
}
