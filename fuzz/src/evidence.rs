//! I20, evidence before the act and the probe after a crash, checked against the simulated
//! world's ground truth (who wrote which file when, outside the journal).
//!
//! Every started call of a simulated tool journals, in its `started`, exactly the evidence its
//! tool recorded right before. After recovery, the world is laid out as real files and every
//! `TOOL_OUTCOME_UNKNOWN` call is probed there: a call whose body wrote its file, when nothing
//! changed the file since, is `applied` (never `not_applied`); a call whose file nothing wrote
//! since it recorded it is `not_applied` (`applied` only if it would have written what was
//! there); a file something else changed since (another call, or the case behind the journal's
//! back) gets the verdict its content now says. Probing changes nothing in the directory, and
//! an analysis that probes classifies every call as one that does not; the calls its probes
//! rule out as writers of a changed file are held to the world's history (I29,
//! [`crate::bounds`]).

use crate::sim::Run;
use crate::tools::{SIM, SIM_IDEMPOTENT};
use crate::world::{snapshot, World, Writer};
use crate::Coverage;
use journal::ReadEnd;
use recover::{analyze_probing, Analysis, CallReport};
use recover::{Probe, Prober, Verdict};
use runtime::event::{Classification, Evidence};
use runtime::replay::CallReplay;
use std::collections::HashMap;

/// The world laid out as real files, and a prober on them.
pub(crate) struct LaidOut {
    /// The directory, held for its drop (which removes it) while the prober reads it.
    pub _dir: tempfile::TempDir,
    /// A prober on it.
    pub prober: Prober,
}

/// Every I20 violation in `run`, whose first recovery gave `a`. Adds the verdicts met to
/// `coverage`. Returns the world laid out, if a call's outcome is unknown (a resume probes it
/// too).
pub(crate) fn check(
    run: &Run,
    a: &Analysis,
    coverage: &mut Coverage,
    v: &mut Vec<String>,
) -> Option<LaidOut> {
    journaled(run, a, v);
    let unknown: Vec<&CallReport> = a
        .calls
        .iter()
        .filter(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
        .collect();
    if unknown.is_empty() {
        return None;
    }
    let dir = match run.world.materialize() {
        Ok(dir) => dir,
        Err(e) => {
            v.push(format!("I20 probe: cannot lay the world out to probe: {e}"));
            return None;
        }
    };
    let prober = match Prober::open(dir.path()) {
        Ok(p) => p,
        Err(e) => {
            v.push(format!("I20 probe: the world's directory: {e}"));
            return None;
        }
    };
    let before = snapshot(dir.path()).map_err(|e| e.to_string());
    let mut probes = HashMap::new();
    for c in unknown {
        let id = c.call.call_id.as_str();
        let Some(replay) = a.replay.call(&c.call) else {
            v.push(format!("I20 probe: {id} is reported but not in the replay"));
            continue;
        };
        let probe = prober.probe(replay);
        *coverage.verdicts.entry(probe.verdict.as_str()).or_default() += 1;
        let changed_back = run.world.log().iter().any(|w| {
            w.by == Writer::Case
                && replay.evidence.iter().any(|e| match e {
                    Evidence::FileReplace { path, .. } => path == &w.path,
                    Evidence::Sandbox(_) => false,
                })
        });
        coverage.changed_back += u64::from(changed_back);
        if let Err(e) = as_expected(&run.world, id, replay, &probe) {
            v.push(format!("I20 probe: {id}: {e}"));
        }
        probes.insert(id, probe);
    }
    // The analysis probes each call among the others of unknown outcome, as a resume does.
    let probed = analyze_probing(a.replay.clone(), &ReadEnd::Clean, 0, false, Some(&prober));
    classification_stays(a, &probed, &probes, v);
    let among = probed
        .calls
        .iter()
        .filter_map(|c| Some((c.call.call_id.as_str(), c.probe.as_ref()?)));
    crate::bounds::ruled_out_truly(&run.world, among, coverage, v);
    let after = snapshot(dir.path()).map_err(|e| e.to_string());
    if before.is_err() || before != after {
        v.push(format!(
            "I20 probe: the world's directory was {before:?} before probing and {after:?} after"
        ));
    }
    Some(LaidOut { _dir: dir, prober })
}

/// Every started call of a simulated tool journals, in its last `started`, what its tool
/// recorded right before that attempt.
fn journaled(run: &Run, a: &Analysis, v: &mut Vec<String>) {
    for c in a.replay.calls() {
        if ![SIM, SIM_IDEMPOTENT].contains(&c.tool.as_str()) || c.attempts == 0 {
            continue;
        }
        let id = c.call.call_id.as_str();
        let recorded = run
            .world
            .gathered(id, c.attempts)
            .map(|g| g.evidence.clone())
            .unwrap_or_default();
        if c.evidence != recorded {
            v.push(format!(
                "I20 evidence: {id}'s started journals {:?}, but its tool recorded {recorded:?} \
                 right before it",
                c.evidence
            ));
        }
    }
}

/// Whether `probe` is the verdict the ground truth calls for on the unknown call `id`. `Err`
/// says what was expected, and why.
fn as_expected(world: &World, id: &str, call: &CallReplay, probe: &Probe) -> Result<(), String> {
    if call.evidence.is_empty() {
        return match probe.verdict {
            Verdict::NoEvidence => Ok(()),
            got => Err(format!(
                "it recorded no evidence, yet the probe says {}",
                got.as_str()
            )),
        };
    }
    let Some(gathered) = world.gathered(id, call.attempts) else {
        return Err("it journals evidence its tool never recorded".into());
    };
    let items: Vec<(Verdict, String)> = call
        .evidence
        .iter()
        .filter_map(|e| match e {
            Evidence::FileReplace {
                path,
                before_sha256,
                after_sha256,
            } => Some(expected_item(
                world,
                id,
                gathered.log_len,
                path,
                before_sha256.as_deref(),
                after_sha256,
            )),
            Evidence::Sandbox(_) => None,
        })
        .collect();
    let all = |verdict: Verdict| items.iter().all(|(v, _)| *v == verdict);
    let expected = if all(Verdict::Applied) {
        Verdict::Applied
    } else if all(Verdict::NotApplied) {
        Verdict::NotApplied
    } else {
        Verdict::Changed
    };
    if probe.verdict == expected {
        return Ok(());
    }
    let why: Vec<&str> = items.iter().map(|(_, why)| why.as_str()).collect();
    Err(format!(
        "{}, so the probe should say {}, but it says {} ({})",
        why.join("; "),
        expected.as_str(),
        probe.verdict.as_str(),
        probe.detail
    ))
}

/// The verdict one recorded file replacement of call `id` calls for, and why: by who wrote the
/// file since the call recorded it (the world's first `since` writes came before).
fn expected_item(
    world: &World,
    id: &str,
    since: usize,
    path: &str,
    before: Option<&str>,
    after: &str,
) -> (Verdict, String) {
    let last = world.log()[since.min(world.log().len())..]
        .iter()
        .rfind(|w| w.path == path);
    match last {
        Some(w) if w.by == Writer::Call(id.to_owned()) => (
            Verdict::Applied,
            format!("its body wrote {path} and nothing changed it since"),
        ),
        None if before == Some(after) => (
            Verdict::Applied,
            format!("nothing wrote {path} since, and it held what the call would write"),
        ),
        None => (
            Verdict::NotApplied,
            format!("nothing wrote {path} since the call recorded it"),
        ),
        Some(w) => {
            let now = world.sha256(path);
            let verdict = if now.as_deref() == Some(after) {
                Verdict::Applied
            } else if now.as_deref() == before {
                Verdict::NotApplied
            } else {
                Verdict::Changed
            };
            (
                verdict,
                format!(
                    "{path} was changed since by {:?}, and now holds {now:?}",
                    w.by
                ),
            )
        }
    }
}

/// An analysis that probes (`probed`, of the journal as the crash left it, as a resume makes
/// one) classifies every call as the first recovery did, and carries the probe of each unknown
/// call (`probes`, each made alone) and of no other, naming the other calls besides.
fn classification_stays(
    a: &Analysis,
    probed: &Analysis,
    probes: &HashMap<&str, Probe>,
    v: &mut Vec<String>,
) {
    let first: HashMap<&str, &CallReport> = a
        .calls
        .iter()
        .map(|c| (c.call.call_id.as_str(), c))
        .collect();
    for c in &probed.calls {
        let id = c.call.call_id.as_str();
        let Some(was) = first.get(id) else {
            v.push(format!(
                "I20 probe: {id} is in the probing analysis, not in the first recovery's"
            ));
            continue;
        };
        if c.classification != was.classification {
            v.push(format!(
                "I20 probe: probing classifies {id} {:?}; without probing it is {:?}",
                c.classification, was.classification
            ));
        }
        if c.probe.as_ref().map(without_peers).as_ref() != probes.get(id) {
            v.push(format!(
                "I20 probe: the probing analysis gives {id} the probe {:?}; probed alone it is \
                 {:?}",
                c.probe,
                probes.get(id)
            ));
        }
    }
}

/// How the probe of a call among others begins the words it adds on the others.
const PEERS: &str = "of the other calls of unknown outcome that ran a process,";

/// `probe` without what it says of other calls: what a probe of the call alone says.
fn without_peers(probe: &Probe) -> Probe {
    let detail: Vec<&str> = (probe.detail.split("; "))
        .filter(|s| !s.starts_with(PEERS))
        .collect();
    Probe {
        detail: detail.join("; "),
        ruled_out: Vec::new(),
        ..probe.clone()
    }
}
