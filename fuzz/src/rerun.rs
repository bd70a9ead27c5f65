//! I19, running again only what may safely run again, checked on a resume that re-runs
//! (`tooljournal resume --rerun`), against the first recovery's classification and the case's
//! ground truth (which calls went to the tool that is not idempotent).
//!
//! The bodies that run during the resume are exactly the calls chosen to run again and the
//! resumed turn's new call; no call of unknown outcome of the tool that is not idempotent ever
//! runs again; every approved, never-started call of the interrupted step (and, under `safe`,
//! every unknown call of the idempotent tool there) runs exactly once (one run of attempts);
//! every `started` carries its call's idempotency key, and a re-run numbers its attempts after
//! the crashed run's; after the resume a recovery appends nothing, the history has exactly one
//! result per call id (a re-run call's being what it returned) and every provider accepts it.

use crate::attempts::{retried_as_its_tool_allows, runs};
use crate::read::{events, provider_rejections};
use crate::resume::{resume_rerunning, Resumed, RESUMED_CALL};
use crate::sim::Run;
use crate::tools::{Body, SIM, SIM_IDEMPOTENT};
use crate::{Coverage, Mutant};
use journal::SimStorage;
use recover::conversation::Message;
use recover::Analysis;
use recover::Prober;
use recover::Recovery;
use runtime::event::{idempotency_key, CallRef, Classification, Event, RerunPolicy};
use runtime::state::CallState;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A re-running resume to check: of `run` (of `case`, with `mutant`), whose first recovery
/// gave `a`, under `policy`, probing with `prober` (on the world as the run left it) if any.
pub(crate) struct Resuming<'a> {
    /// The case.
    pub case: &'a crate::case::Case,
    /// What its session left behind.
    pub run: &'a Run,
    /// The first recovery's analysis of the journal the crash left.
    pub a: &'a Analysis,
    /// The policy the resume re-runs under.
    pub policy: RerunPolicy,
    /// The mutant the case runs with, if any.
    pub mutant: Option<Mutant>,
    /// The prober the resume probes the world with (a resume probes its workspace when a
    /// call's outcome is unknown).
    pub prober: Option<&'a Prober>,
}

impl Resuming<'_> {
    /// Resumes `pristine` (the journal as the crash left it; appended to), and checks I19 on
    /// what the resume did, adding to `coverage` what it met.
    pub(crate) fn check(
        &self,
        pristine: &SimStorage,
        coverage: &mut Coverage,
        v: &mut Vec<String>,
    ) {
        let (run, a, policy) = (self.run, self.a, self.policy);
        let resumed = resume_rerunning(
            pristine,
            &run.world,
            self.case,
            policy,
            self.prober,
            self.mutant,
        );
        let resumed = match resumed {
            Ok(r) => r,
            Err(e) => return v.push(format!("I19 re-run (--rerun {}): {e}", policy.as_str())),
        };
        cover(run, &resumed, coverage);
        ran_as_chosen(&resumed, v);
        never_unknown_rerun(run, a, policy, &resumed.bodies, v);
        if resumed.stopped.is_none() {
            run_once(a, policy, &resumed.bodies, v);
        }
        keys_and_attempts(pristine, &resumed, v);
        after(pristine, &resumed, coverage, v);
    }
}

/// Counts what the resume ran again (and kept from running again) in `coverage`.
fn cover(run: &Run, resumed: &Resumed, coverage: &mut Coverage) {
    let Some(analysis) = &resumed.analysis else {
        return;
    };
    coverage.rerun_resumes += 1;
    for c in &resumed.chosen {
        let report = analysis.calls.iter().find(|r| &r.call == c);
        match report.and_then(|r| r.classification) {
            Some(Classification::ToolOutcomeUnknown) => coverage.rerun_unknown += 1,
            _ => coverage.rerun_not_started += 1,
        }
    }
    let step = analysis.recovery.as_ref().and_then(|r| r.interrupted_step);
    coverage.kept_unknown += analysis
        .calls
        .iter()
        .filter(|c| {
            Some((c.call.turn, c.call.step)) == step
                && c.classification == Some(Classification::ToolOutcomeUnknown)
                && c.tool == SIM
                && run.sent(&c.call.call_id).is_some()
        })
        .count() as u64;
}

/// The bodies that ran during the resume are the chosen calls' and the new call's, one run of
/// attempts each; `run_rerun` answered the chosen calls, in their order. A session that stopped
/// while running them again ran some of them, at most once each.
fn ran_as_chosen(resumed: &Resumed, v: &mut Vec<String>) {
    // A run of a call (its attempts, one after another) counts once.
    let mut ran: Vec<&str> = runs(&resumed.bodies)
        .into_iter()
        .flat_map(|(id, of_call)| of_call.into_iter().map(move |_| id))
        .collect();
    let mut want: Vec<&str> = resumed.chosen.iter().map(|c| c.call_id.as_str()).collect();
    if resumed.went_on {
        want.push(RESUMED_CALL);
    }
    ran.sort_unstable();
    want.sort_unstable();
    if resumed.stopped.is_some() {
        let mut once = ran.clone();
        once.dedup();
        if once.len() != ran.len() || ran.iter().any(|id| !want.contains(id)) {
            v.push(format!(
                "I19 re-run: the bodies that ran before the resumed session stopped were \
                 {ran:?}; the calls chosen to run again are {want:?}"
            ));
        }
        return;
    }
    if ran != want {
        v.push(format!(
            "I19 re-run: the bodies that ran during the resume were {ran:?}; the calls chosen \
             to run again, and the new call, are {want:?}"
        ));
    }
    let answered: Vec<&CallRef> = resumed.results.iter().map(|(c, _)| c).collect();
    if answered != resumed.chosen.iter().collect::<Vec<_>>() {
        v.push(format!(
            "I19 re-run: run_rerun answered {answered:?}, the calls chosen were {:?}",
            resumed.chosen
        ));
    }
}

/// No call whose outcome is unknown runs again if its tool is not idempotent, nor under
/// `not-started` whatever its tool declares (`safe` alone runs an idempotent tool's again). The
/// runtime asserts this where it picks the calls; checked here too, so that a build that also
/// loses the assertion is still caught.
fn never_unknown_rerun(
    run: &Run,
    a: &Analysis,
    policy: RerunPolicy,
    bodies: &[Body],
    v: &mut Vec<String>,
) {
    let unknown: HashMap<&str, bool> = a
        .calls
        .iter()
        .map(|c| {
            let unknown = c.classification == Some(Classification::ToolOutcomeUnknown);
            (c.call.call_id.as_str(), unknown)
        })
        .collect();
    for b in bodies {
        let id = b.call_id.as_str();
        let Some((step, i)) = run.sent(id) else {
            continue;
        };
        if unknown.get(id) != Some(&true) {
            continue;
        }
        let spec = &step.calls[i].2;
        if !spec.idempotent {
            v.push(format!(
                "I19 re-run: {id} may have run (TOOL_OUTCOME_UNKNOWN) and its tool {SIM} is not \
                 idempotent, but its body ran again during the resume"
            ));
        } else if policy == RerunPolicy::NotStarted {
            v.push(format!(
                "I19 re-run: {id} may have run (TOOL_OUTCOME_UNKNOWN), but its body ran again \
                 during a resume under --rerun not-started"
            ));
        }
    }
}

/// Every approved, never-started call of the interrupted step (and under `safe` every unknown
/// call of the idempotent tool there) ran exactly once during the resume (one run of attempts).
fn run_once(a: &Analysis, policy: RerunPolicy, bodies: &[Body], v: &mut Vec<String>) {
    let Some(step) = a.recovery.as_ref().and_then(|r| r.interrupted_step) else {
        return;
    };
    let runs: HashMap<&str, usize> = runs(bodies)
        .into_iter()
        .map(|(id, of_call)| (id, of_call.len()))
        .collect();
    for c in &a.calls {
        if (c.call.turn, c.call.step) != step {
            continue;
        }
        let never_started = c.classification == Some(Classification::ToolNotStarted)
            && c.state == CallState::Approved
            && [SIM, SIM_IDEMPOTENT].contains(&c.tool.as_str());
        let safe_again = policy == RerunPolicy::Safe
            && c.classification == Some(Classification::ToolOutcomeUnknown)
            && c.tool == SIM_IDEMPOTENT;
        let id = c.call.call_id.as_str();
        let n = runs.get(id).copied().unwrap_or(0);
        if (never_started || safe_again) && n != 1 {
            v.push(format!(
                "I19 re-run: {id} ({}, {:?}, tool {}) ran {n} times during the resume; under \
                 --rerun {} it runs exactly once",
                c.state,
                c.classification,
                c.tool,
                policy.as_str()
            ));
        }
    }
}

/// Every `started` of the journal after the resume carries its call's idempotency key; a
/// re-run call's first `started` after `recovery/rerun` numbers its attempt right after the
/// crashed run's last, and its bodies (one run of attempts, numbered on from there, retried
/// only as its tool allows) were given that key.
fn keys_and_attempts(image: &SimStorage, resumed: &Resumed, v: &mut Vec<String>) {
    let Some(events) = events(image) else {
        return v.push("I19 re-run: the resumed journal does not read back".into());
    };
    let Some(session_id) = events.iter().find_map(|e| match e {
        Event::SessionOpen(open) => Some(open.session_id.clone()),
        _ => None,
    }) else {
        return;
    };
    let rerun_at = events
        .iter()
        .position(|e| matches!(e, Event::RecoveryRerun(_)))
        .unwrap_or(events.len());
    // Per re-run call: the crashed run's last attempt, and the attempts started after.
    let mut attempts: BTreeMap<&str, (u32, Vec<u32>)> = resumed
        .chosen
        .iter()
        .map(|c| (c.call_id.as_str(), (0, Vec::new())))
        .collect();
    for (i, e) in events.iter().enumerate() {
        let Event::Started(started) = e else { continue };
        let key = idempotency_key(&session_id, &started.call);
        if started.idempotency_key != key {
            v.push(format!(
                "I19 keys: {}'s started (attempt {}) carries the key {}, not {key}",
                started.call, started.attempt, started.idempotency_key
            ));
        }
        if let Some((before, after)) = attempts.get_mut(started.call.call_id.as_str()) {
            if i < rerun_at {
                *before = (*before).max(started.attempt);
            } else {
                after.push(started.attempt);
            }
        }
    }
    let runs = runs(&resumed.bodies);
    for call in &resumed.chosen {
        let id = call.call_id.as_str();
        let (before, after) = &attempts[id];
        let unstarted_at_stop = resumed.stopped.is_some() && after.is_empty();
        if after.first() != Some(&(before + 1)) && !unstarted_at_stop {
            v.push(format!(
                "I19 re-run: {id} ran again as attempts {after:?}; the crashed run's last was \
                 {before}"
            ));
        }
        let key = idempotency_key(&session_id, call);
        let of_call = runs.get(id).map(Vec::as_slice).unwrap_or_default();
        for b in of_call.iter().flatten() {
            if b.key != key {
                v.push(format!(
                    "I19 re-run: {id}'s body ran again with key {} (attempt {}); its key is {key}",
                    b.key, b.attempt
                ));
            }
        }
        let retry_safe = resumed.retry_safe.iter().any(|r| r == id);
        let during = "during the resume";
        retried_as_its_tool_allows(id, of_call, retry_safe, before + 1, during, v);
    }
}

/// After the resume: a recovery appends nothing (after the one a stopped session needs); the
/// history has exactly one result per call id, a re-run call's being the result it got; every
/// provider accepts it; every write of the world, the re-runs' too, lies inside its call's bound.
fn after(image: &SimStorage, resumed: &Resumed, coverage: &mut Coverage, v: &mut Vec<String>) {
    let recover = || {
        Recovery::of(journal::Backend::Files(Arc::new(image.clone())))
            .write(true)
            .run()
    };
    let mut after = recover();
    if resumed.stopped.is_some() && after.is_ok() {
        after = recover();
    }
    let after = match after {
        Ok(after) => after,
        Err(e) => {
            return v.push(format!(
                "I19 re-run: the resumed journal does not recover: {e}"
            ))
        }
    };
    if after.appended {
        v.push("I19 re-run: a recovery after the resume appended again".into());
    }
    let during = "after the re-running resume";
    crate::bounds::writes_within(&resumed.world, &after.analysis, during, coverage, v);
    crate::attempts::one_key_per_call(&resumed.bodies, &resumed.world, &after.analysis, during, v);
    let conv = after.analysis.conversation();
    for (format, e) in provider_rejections(&conv) {
        v.push(format!(
            "I6 after a re-run: {format} rejects the history: {e}"
        ));
    }
    let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
    let mut results: BTreeMap<&str, Vec<(&str, bool)>> = BTreeMap::new();
    for m in &conv.messages {
        match m {
            Message::Assistant { calls: sent, .. } => {
                for c in sent {
                    *calls.entry(c.id.as_str()).or_default() += 1;
                }
            }
            Message::Results { results: got } => {
                for r in got {
                    let entry = results.entry(r.id.as_str()).or_default();
                    entry.push((r.content.as_str(), r.is_error));
                }
            }
            _ => {}
        }
    }
    for (id, n) in &calls {
        let got = results.get(id).map_or(0, Vec::len);
        if *n != 1 || got != 1 {
            v.push(format!(
                "I19 re-run: after the resume the history has {id} called {n} times and \
                 answered {got} times"
            ));
        }
    }
    if let Some(id) = results.keys().find(|id| !calls.contains_key(*id)) {
        v.push(format!(
            "I19 re-run: after the resume the history answers {id}, which no message calls"
        ));
    }
    for (call, result) in &resumed.results {
        let got = results.get(call.call_id.as_str());
        let want = (result.content.as_str(), result.is_error);
        if got.is_some_and(|g| g != &[want]) {
            v.push(format!(
                "I19 re-run: {call} ran again and got {want:?}, but the history says {got:?}"
            ));
        }
    }
}
