//! The recovery a re-running resume appends under its own lock, with the calls the policy picks
//! to run again (the choice itself is `recover::rerun`'s, made now that the tools are known).
//!
//! Decided (docs/DESIGN.md §6b): the default is `not-started`. A call the journal shows
//! approved and never started provably did nothing (I1), and its approval is journaled: running
//! it now is what was decided before the crash, so a crash in the middle of a batch loses no
//! call. `safe` also runs again calls that may have run, but only of tools that declare
//! themselves idempotent (retry-safe) or read-only: a declaration the runtime cannot check, so
//! it is asked for by name. Calls that were never approved (the crash came during admission)
//! are not run: nobody decided them; the model is told `TOOL_NOT_STARTED` and may ask again.
//! The built-in `ask` is never run again: its answer, if any, is delivered by recovery.

use crate::ResumeError;
use recover::Analysis;
use recover::{choose_reruns, recovery_events};
use runtime::event::{Classification, Event, RerunPolicy};
use runtime::replay::SessionReplay;
use runtime::state::CallState;
use std::path::PathBuf;

/// The recovery to append, the line that says what it did, and the analysis it comes from (its
/// results are the history's).
pub(crate) struct Recovering {
    pub(crate) events: Vec<Event>,
    pub(crate) said: String,
    pub(crate) analysis: Analysis,
}

/// The recovery a resume appends itself, under its writer lock, to a journal that ends inside
/// a turn (the resume found calls it may run again), with the calls `policy` picks.
pub(crate) fn recovering(
    prepared: &runtime::PreparedSession,
    policy: RerunPolicy,
    plan_mode: bool,
) -> Result<Recovering, ResumeError> {
    let torn = prepared.torn_tail();
    let end = match torn {
        Some(torn) => journal::ReadEnd::TornTail(torn.clone()),
        None => journal::ReadEnd::Clean,
    };
    let dropped = torn.map_or(0, |t| t.dropped_bytes);
    let replay = prepared.replay().clone();
    let prober = match probe_target_of(&replay, needs_probe(&replay)) {
        Some(root) => {
            Some(recover::Prober::open(&root).map_err(|e| ResumeError::Failed(e.to_string()))?)
        }
        None => None,
    };
    let analysis = recover::analyze_probing(replay, &end, dropped, false, prober.as_ref());
    let plan_mode = plan_mode || prepared.replay().plan_mode;
    let chosen = choose_reruns(
        &analysis,
        |tool| prepared.registry().nature(tool),
        policy,
        plan_mode,
    );
    let events = recovery_events(&analysis, &chosen, policy);
    let classified = analysis.recovery.as_ref().map_or(0, |r| r.calls.len());
    let ids: Vec<&str> = chosen.iter().map(|c| c.call_id.as_str()).collect();
    let unknown: Vec<&str> = analysis
        .recovery
        .iter()
        .flat_map(|r| r.calls.iter())
        .filter(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
        .filter(|c| !chosen.contains(&c.call))
        .map(|c| c.call.call_id.as_str())
        .collect();
    let said = format!(
        "{}{}",
        recovered_words(classified - chosen.len(), &unknown),
        if ids.is_empty() {
            String::new()
        } else {
            format!(
                "; running again (--rerun {}): {}",
                policy.as_str(),
                ids.join(", ")
            )
        }
    );
    Ok(Recovering {
        events,
        said,
        analysis,
    })
}

/// What recovery did, in one line: how many calls it classified, and which of them may have run
/// and are not run again.
pub(crate) fn recovered_words(classified: usize, unknown: &[&str]) -> String {
    let unknown = if unknown.is_empty() {
        String::new()
    } else {
        format!("; may have run, not re-run: {}", unknown.join(", "))
    };
    format!("recovered: {classified} call(s) classified{unknown}")
}

/// The workspace a resume probes: the session's own, when recovery will classify a call as
/// `TOOL_OUTCOME_UNKNOWN` (nothing to probe otherwise).
pub fn probe_target(analysis: &Analysis) -> Option<PathBuf> {
    let unknown = analysis.recovery.as_ref().is_some_and(|r| {
        r.calls
            .iter()
            .any(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
    });
    probe_target_of(&analysis.replay, unknown)
}

/// Whether a journal that ends inside a turn has a call recovery will call unknown: one of the
/// open step that started and did not settle.
fn needs_probe(replay: &SessionReplay) -> bool {
    replay
        .open_turn()
        .and_then(|t| t.steps.last())
        .is_some_and(|s| s.calls.iter().any(|c| c.state == CallState::Started))
}

fn probe_target_of(replay: &SessionReplay, needed: bool) -> Option<PathBuf> {
    let open = replay.open.as_ref().filter(|_| needed)?;
    Some(PathBuf::from(&open.workspace))
}
