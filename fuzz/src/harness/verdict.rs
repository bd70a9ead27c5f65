//! Checking one case: the runtime's invariants on the session, the resume's choice (I19), the
//! final word on every call, the truth property and the user's properties.

use super::observe::AnySnapshot;
use super::play::{first_run, rerun_policy, resume, Resumed};
use super::stop::Stop;
use super::truth::{self, Subject};
use super::{CallView, Checked, Harness, Outcome, Settled, UserCase, Word};
use crate::read::copy_of;
use crate::tools::{Body, BodyEnd};
use recover::Recovery;
use recover::{analyze_probing, Analysis};
use recover::{Prober, Verdict};
use runtime::event::Evidence;
use runtime::event::{Classification, RerunPolicy};
use serde_json::Value;
use std::sync::Arc;

/// Runs `case` and checks it; `None` when `stop` (the campaign's deadline) was cancelled before
/// its sessions ended: they were stopped midway, so there is nothing true to check.
pub(crate) fn check(harness: &Harness, case: &UserCase, stop: &Stop) -> Option<Checked> {
    // Recovery's mutant acts on this thread while the checks recover.
    #[cfg(feature = "mutant")]
    let _recovery_mutant = (harness.mutant == Some(crate::Mutant::StartedReadAsNotStarted))
        .then(|| recover::enable_mutant(recover::STARTED_AS_NOT_STARTED));
    let (played, fault) = first_run(harness, case, stop);
    if stop.is_stopped() {
        return None;
    }
    let mut v = Vec::new();
    let Some((_, pristine)) = crate::check::invariants(&played.run, &mut v) else {
        return Some(Checked {
            violations: v,
            calls: Vec::new(),
            fault,
            unchecked_worlds: 0,
            probes: Vec::new(),
        });
    };
    let probes = match &harness.probe {
        Some(dir) => probe_agrees(dir, &pristine, &played.run.bodies, &mut v),
        None => Vec::new(),
    };
    let mut bodies = played.run.bodies.clone();
    // The journal whose word is final: recovered (the invariants appended the recovery), or
    // resumed from the journal as the crash left it.
    let mut last_journal = played.run.image.clone();
    if let Some(policy) = rerun_policy(case) {
        let resumed = resume(harness, case, &pristine, policy, stop);
        if stop.is_stopped() {
            return None;
        }
        match resumed {
            Err(e) => v.push(format!("I5 resume: {e}")),
            Ok(None) => {}
            Ok(Some(resumed)) => {
                rerun_choice(&resumed, policy, &mut v);
                bodies.extend(resumed.bodies);
                crate::check::ended_balanced(&copy_of(&pristine), &mut v);
                last_journal = pristine;
            }
        }
    }
    let last_analysis =
        match Recovery::of(journal::Backend::Files(Arc::new(copy_of(&last_journal)))).run() {
            Ok(r) => r.analysis,
            Err(e) => {
                v.push(format!(
                    "I5 resume: the final journal does not recover: {e}"
                ));
                return Some(Checked {
                    violations: v,
                    calls: Vec::new(),
                    fault,
                    unchecked_worlds: 0,
                    probes,
                });
            }
        };
    let calls = settle(case, &last_analysis, &bodies);
    let last: Vec<AnySnapshot> = harness.worlds.iter().map(|w| w.world.snapshot()).collect();
    // As the body got them: empty arguments are `{}`.
    let args: Vec<Value> = case
        .calls()
        .map(|(_, c)| runtime::parse_args(&c.arguments).map_or(Value::Null, |a| a.value().clone()))
        .collect();
    let started: Vec<(Vec<runtime::event::Evidence>, String)> = calls
        .iter()
        .map(|c| journaled_start(&last_analysis, &c.id))
        .collect();
    let subjects: Vec<Subject<'_>> = calls
        .iter()
        .zip(&args)
        .zip(&started)
        .map(|((c, args), (evidence, key))| Subject {
            view: CallView {
                id: &c.id,
                tool: &c.tool,
                args,
                evidence,
                idempotency_key: key,
            },
            word: c.word,
            moment: moment_of(&bodies, &c.id),
            bodies: c.bodies,
        })
        .collect();
    let unchecked_worlds = truth::check(harness, &subjects, &played.initial, &last, &mut v);
    let outcome = Outcome {
        calls: &calls,
        initial: &played.initial,
        last: &last,
        crash: played.crash,
    };
    for (name, property) in &harness.properties {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| property(&outcome))) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => v.push(format!("property {name}: {why}")),
            Err(_) => v.push(format!("property {name}: it panicked")),
        }
    }
    Some(Checked {
        violations: v,
        calls,
        fault,
        unchecked_worlds,
        probes,
    })
}

/// The probe's verdicts on the journal as the crash left it (`pristine`) and the workspace
/// `dir` as the crash left it, each held to what the call's body did: `applied` only when its
/// body began, `not_applied` not when its body finished with a success, unless another call
/// (one writing the same bytes, or one whose body began later) touched the same file.
fn probe_agrees(
    dir: &std::path::Path,
    pristine: &journal::SimStorage,
    bodies: &[Body],
    v: &mut Vec<String>,
) -> Vec<(String, Verdict)> {
    let prober = match Prober::open(dir) {
        Ok(p) => p,
        Err(e) => {
            v.push(format!(
                "truth (probe): the workspace cannot be probed: {e}"
            ));
            return Vec::new();
        }
    };
    let storage: Arc<dyn journal::Storage> = Arc::new(copy_of(pristine));
    let Ok((replay, end)) = runtime::replay::replay_storage(storage, journal::Limits::default())
    else {
        // The invariants said why the journal does not replay.
        return Vec::new();
    };
    let dropped = match &end {
        journal::ReadEnd::TornTail(torn) => torn.dropped_bytes,
        _ => 0,
    };
    let analysis = analyze_probing(replay, &end, dropped, false, Some(&prober));
    let touched = |call: &str| -> Vec<(String, String)> {
        analysis
            .calls
            .iter()
            .find(|c| c.call.call_id == call)
            .and_then(|c| analysis.replay.call(&c.call))
            .map(|r| {
                r.evidence
                    .iter()
                    .filter_map(|e| match e {
                        Evidence::FileReplace {
                            path, after_sha256, ..
                        } => Some((path.clone(), after_sha256.clone())),
                        Evidence::Sandbox(_) => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut verdicts = Vec::new();
    for report in &analysis.calls {
        let Some(probe) = &report.probe else { continue };
        let id = &report.call.call_id;
        verdicts.push((id.clone(), probe.verdict));
        let mine = touched(id);
        let body = bodies.iter().rev().find(|b| &b.call_id == id);
        // Another call that touched one of the same files and whose body began (after this
        // one's, for `not_applied`; at all, for `applied`, when it wrote the same bytes).
        let others = |same_bytes: bool| {
            bodies.iter().any(|b| {
                &b.call_id != id
                    && body.is_none_or(|mine_b| same_bytes || b.started_ms >= mine_b.started_ms)
                    && touched(&b.call_id).iter().any(|(p, after)| {
                        mine.iter()
                            .any(|(mp, mafter)| mp == p && (!same_bytes || mafter == after))
                    })
            })
        };
        // A file that already held the bytes the call would write is `applied` whether or not
        // the body ran.
        let no_op = evidence_is_a_no_op(&analysis, report);
        match probe.verdict {
            Verdict::Applied if body.is_none() && !no_op && !others(true) => v.push(format!(
                "truth (probe): {id} is `applied` by the probe, but its body never began"
            )),
            Verdict::NotApplied
                if matches!(body.and_then(|b| b.end.as_ref()), Some(BodyEnd::Ok(_)))
                    && !others(false) =>
            {
                v.push(format!(
                    "truth (probe): {id} is `not_applied` by the probe, but its body finished \
                     with a success"
                ))
            }
            _ => {}
        }
    }
    verdicts
}

/// When the call's effect happened, as far as the harness saw: the end of its first body (most
/// tools act last), or that body's beginning if it never ended (it was stopped or frozen); calls
/// with no body last (no word of theirs allows an effect).
fn moment_of(bodies: &[Body], id: &str) -> u64 {
    bodies
        .iter()
        .filter(|b| b.call_id == id)
        .min_by_key(|b| b.order.0)
        .map_or(u64::MAX, |b| b.order.1.unwrap_or(b.order.0))
}

/// I19: a resume ran again only calls that provably never started, or (under `safe`) calls of
/// unknown outcome whose tool is retry-safe or read-only; and only the calls it chose.
fn rerun_choice(resumed: &Resumed, policy: RerunPolicy, v: &mut Vec<String>) {
    for body in &resumed.bodies {
        if !resumed.chosen.contains(&body.call_id) {
            v.push(format!(
                "I19 re-run: the body of {} ran during the resume, which did not choose it",
                body.call_id
            ));
        }
    }
    for id in &resumed.chosen {
        let Some(report) = resumed
            .analysis
            .calls
            .iter()
            .find(|c| &c.call.call_id == id)
        else {
            v.push(format!(
                "I19 re-run: {id} was chosen but the journal has no such call"
            ));
            continue;
        };
        let may = match report.classification {
            Some(Classification::ToolNotStarted) => true,
            Some(Classification::ToolOutcomeUnknown) => {
                policy == RerunPolicy::Safe && resumed.safe_tools.contains(&report.tool)
            }
            None => false,
        };
        if !may {
            v.push(format!(
                "I19 re-run: {id} ({}) ran again under --rerun {} though it was {:?}",
                report.tool,
                policy.as_str(),
                report.classification
            ));
        }
    }
}

/// Every call of the case with the final word of `analysis` and how many bodies began.
fn settle(case: &UserCase, analysis: &Analysis, bodies: &[Body]) -> Vec<Settled> {
    case.calls()
        .map(|(_, call)| {
            let word = match analysis.calls.iter().find(|c| c.call.call_id == call.id) {
                None => Word::Missing,
                Some(report) if !report.result.is_error => Word::Ok,
                Some(report) => {
                    Word::Error(report.result.code.unwrap_or(runtime::ErrorCode::ToolFailed))
                }
            };
            Settled {
                id: call.id.clone(),
                tool: call.tool.clone(),
                arguments: call.arguments.clone(),
                word,
                bodies: bodies.iter().filter(|b| b.call_id == call.id).count() as u32,
            }
        })
        .collect()
}

/// Whether every file the call's evidence names already held the bytes it would write.
fn evidence_is_a_no_op(analysis: &Analysis, report: &recover::CallReport) -> bool {
    analysis.replay.call(&report.call).is_some_and(|r| {
        !r.evidence.is_empty()
            && r.evidence.iter().all(|e| match e {
                Evidence::FileReplace {
                    before_sha256,
                    after_sha256,
                    ..
                } => before_sha256.as_deref() == Some(after_sha256.as_str()),
                Evidence::Sandbox(_) => true,
            })
    })
}

/// The evidence and idempotency key the call's last `started` journaled (none: empty).
fn journaled_start(analysis: &Analysis, id: &str) -> (Vec<runtime::event::Evidence>, String) {
    analysis
        .calls
        .iter()
        .find(|c| c.call.call_id == id)
        .and_then(|c| analysis.replay.call(&c.call))
        .map(|r| {
            (
                r.evidence.clone(),
                r.idempotency_key.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default()
}
