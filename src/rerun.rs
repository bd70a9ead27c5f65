//! `tooljournal resume --rerun`: the flag, the recovery a re-running resume appends under its
//! lock (the choice itself is `recover::rerun`'s), the calls run again, their results put into
//! the model's history.
//!
//! Decided (docs/DESIGN.md §6b): the default is `not-started`. A call the journal shows
//! approved and never started provably did nothing (I1), and its approval is journaled: running
//! it now is what was decided before the crash, so a crash in the middle of a batch loses no
//! call. `safe` also runs again calls that may have run, but only of tools that declare
//! themselves idempotent (retry-safe) or read-only: a declaration the runtime cannot check, so
//! it is asked for by name. `none` runs nothing again (every orphan gets its classification).
//! Calls that were never approved (the crash came during admission) are not run: nobody
//! decided them; the model is told `TOOL_NOT_STARTED` and may ask again. The built-in `ask` is
//! never run again: its answer, if any, is delivered by recovery.

use recover::classify::Analysis;
use recover::rerun::{choose, recovery_events};
use runtime::event::{CallRef, Classification, Event, RerunPolicy};
use runtime::state::CallState;

/// `--rerun`, as the command line takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RerunFlag {
    /// The interrupted step's approved calls that provably never started (the default).
    NotStarted,
    /// Those, and calls of unknown outcome whose tool declares itself idempotent or read-only.
    Safe,
    /// Nothing: every interrupted call gets its classification.
    None,
}

impl RerunFlag {
    /// The policy, or `None` for `none`.
    pub fn policy(self) -> Option<RerunPolicy> {
        match self {
            RerunFlag::NotStarted => Some(RerunPolicy::NotStarted),
            RerunFlag::Safe => Some(RerunPolicy::Safe),
            RerunFlag::None => None,
        }
    }
}

/// The recovery a resume appends itself, under its writer lock, to a journal that ends inside
/// a turn (no `recover` ran: the resume found calls it may run again), with the calls the
/// policy picks now that the tools are known; the line that says so, for stdout once the
/// events are appended; and the analysis they come from (its results are the history's).
pub(crate) fn recovering(
    prepared: &runtime::PreparedSession,
    rerun: Option<RerunPolicy>,
    plan_mode: bool,
) -> Result<(Vec<Event>, String, Analysis), crate::CliError> {
    let torn = prepared.torn_tail();
    let end = match torn {
        Some(torn) => journal::ReadEnd::TornTail(torn.clone()),
        None => journal::ReadEnd::Clean,
    };
    let dropped = torn.map_or(0, |t| t.dropped_bytes);
    let replay = prepared.replay().clone();
    let prober = match probe_target_of(&replay, analysis_needs_probe(&replay)) {
        Some(root) => {
            Some(recover::probe::Prober::open(&root).map_err(|e| crate::failed(e.to_string()))?)
        }
        None => None,
    };
    let analysis =
        recover::classify::analyze_probing(replay, &end, dropped, false, prober.as_ref());
    let Some(policy) = rerun else {
        // Only a re-running resume leaves a journal unrecovered for us.
        return Err(crate::failed(
            "the session was interrupted and not recovered; run `recover classify` on it, or \
             resume it again",
        ));
    };
    let plan_mode = plan_mode || prepared.replay().plan_mode;
    let chosen = choose(
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
        "recovered: {} call(s) classified{}{}",
        classified - chosen.len(),
        if unknown.is_empty() {
            String::new()
        } else {
            format!("; may have run, not re-run: {}", unknown.join(", "))
        },
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
    Ok((events, said, analysis))
}

/// Runs the calls the recovering resume left to run again, if any, and says how each ended.
pub(crate) fn run_again(
    rt: &tokio::runtime::Runtime,
    session: &mut runtime::Session,
) -> Result<Vec<(CallRef, runtime::ToolResult)>, crate::CliError> {
    // Not stoppable by Ctrl-C: an interrupted re-run is a crash like any other, and recovery
    // tells its truth.
    let results = rt
        .block_on(session.run_rerun(tokio_util::sync::CancellationToken::new()))
        .map_err(|e| crate::failed(e.to_string()))?;
    for (call, result) in &results {
        let how = match result.code {
            None => "ok".to_owned(),
            Some(code) => code.as_str().to_owned(),
        };
        outln!("ran again: {call}: {how}")?;
    }
    Ok(results)
}

/// Puts the results of the calls that ran again into the history the model is sent, in place
/// of what recovery would have said (one result per call id either way).
pub(crate) fn put_results(
    turns: &mut [recover::layout::TurnView],
    results: &[(CallRef, runtime::ToolResult)],
) {
    for (call, result) in results {
        let step = turns
            .iter_mut()
            .filter(|t| t.turn == call.turn)
            .flat_map(|t| t.steps.iter_mut())
            .find(|s| s.step == call.step);
        let Some(step) = step else { continue };
        if let Some(slot) = step.results.iter_mut().find(|r| r.id == call.call_id) {
            slot.content = result.content.clone();
            slot.is_error = result.is_error;
        }
    }
}

/// The workspace a resume probes: the session's own, when recovery will classify a call as
/// `TOOL_OUTCOME_UNKNOWN` (nothing to probe otherwise).
pub(crate) fn probe_target(analysis: &Analysis) -> Option<std::path::PathBuf> {
    let unknown = analysis.recovery.as_ref().is_some_and(|r| {
        r.calls
            .iter()
            .any(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
    });
    probe_target_of(&analysis.replay, unknown)
}

/// Whether a journal that ends inside a turn has a call recovery will call unknown: one of the
/// open step that started and did not settle.
fn analysis_needs_probe(replay: &runtime::replay::SessionReplay) -> bool {
    replay
        .open_turn()
        .and_then(|t| t.steps.last())
        .is_some_and(|s| s.calls.iter().any(|c| c.state == CallState::Started))
}

fn probe_target_of(
    replay: &runtime::replay::SessionReplay,
    needed: bool,
) -> Option<std::path::PathBuf> {
    let open = replay.open.as_ref().filter(|_| needed)?;
    Some(std::path::PathBuf::from(&open.workspace))
}
