//! `tooljournal resume --rerun`: which calls of the interrupted step run again, and the
//! recovery that leaves them open for it.
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

use recover::classify::{Analysis, WITHDRAWN_REASON};
use runtime::event::{CallRef, Classification, Event, Recovery, RecoveryRerun, RerunPolicy};
use runtime::registry::Registry;
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

/// Whether the policy could run `c` again, by what the journal says (its tool still to be
/// asked): a call of the interrupted step, approved and never started, or (under `safe`)
/// started with no `settled`. Never the built-in `ask`.
fn eligible(analysis: &Analysis, c: &recover::classify::CallReport, policy: RerunPolicy) -> bool {
    let Some(recovery) = &analysis.recovery else {
        return false;
    };
    // Orphans this recovery would close (not calls an earlier one closed), of its step.
    let in_step = recovery.interrupted_step == Some((c.call.turn, c.call.step))
        && recovery.calls.iter().any(|rc| rc.call == c.call);
    let by_state = match (c.classification, c.state) {
        (Some(Classification::ToolNotStarted), CallState::Approved) => true,
        (Some(Classification::ToolOutcomeUnknown), CallState::Started) => {
            policy == RerunPolicy::Safe
        }
        _ => false,
    };
    in_step && by_state && c.tool != runtime::session::ASK_TOOL
}

/// The calls the policy could run again, before the tools are known: if there are none, a
/// resume recovers the journal as `recover` does.
pub fn candidates(analysis: &Analysis, policy: RerunPolicy) -> Vec<CallRef> {
    analysis
        .calls
        .iter()
        .filter(|c| eligible(analysis, c, policy))
        .map(|c| c.call.clone())
        .collect()
}

/// The calls that run again, the tools known: a not-started call whose tool is registered;
/// an unknown call whose tool declares itself idempotent (retry-safe) or read-only.
pub fn choose(analysis: &Analysis, registry: &Registry, policy: RerunPolicy) -> Vec<CallRef> {
    analysis
        .calls
        .iter()
        .filter(|c| eligible(analysis, c, policy))
        .filter(|c| match registry.lookup(&c.tool) {
            None => false,
            Some(entry) => {
                c.state == CallState::Approved
                    || entry.tool.is_retry_safe()
                    || entry.tool.is_read_only()
            }
        })
        .map(|c| c.call.clone())
        .collect()
}

/// What a recovering resume appends: the pending questions withdrawn, the `recovery` without
/// the calls that run again (leaving their step and turn open when there are any), and
/// `recovery/rerun` naming them. Empty when the journal needs no recovery.
pub fn recovery_events(analysis: &Analysis, rerun: &[CallRef], policy: RerunPolicy) -> Vec<Event> {
    let Some(recovery) = &analysis.recovery else {
        return Vec::new();
    };
    let mut events: Vec<Event> = analysis
        .pending_asks
        .iter()
        .map(|call| Event::AskCancelled {
            call: call.clone(),
            reason: WITHDRAWN_REASON.into(),
        })
        .collect();
    let mut recovery: Recovery = recovery.clone();
    if !rerun.is_empty() {
        recovery.calls.retain(|rc| !rerun.contains(&rc.call));
        recovery.interrupted_step = None;
        recovery.interrupted_turn = None;
    }
    events.push(Event::Recovery(recovery));
    if !rerun.is_empty() {
        events.push(Event::RecoveryRerun(RecoveryRerun {
            policy,
            calls: rerun.to_vec(),
        }));
    }
    events
}

/// The recovery a resume appends itself, under its writer lock, to a journal that ends inside
/// a turn (no `recover` ran: the resume found calls it may run again), with the calls the
/// policy picks now that the tools are known; and the line that says so, for stdout once the
/// events are appended.
pub(crate) fn recovering(
    prepared: &runtime::PreparedSession,
    rerun: Option<RerunPolicy>,
) -> Result<(Vec<Event>, String), crate::CliError> {
    let torn = prepared.torn_tail();
    let end = match torn {
        Some(torn) => journal::ReadEnd::TornTail(torn.clone()),
        None => journal::ReadEnd::Clean,
    };
    let dropped = torn.map_or(0, |t| t.dropped_bytes);
    let analysis = recover::classify::analyze(prepared.replay().clone(), &end, dropped, false);
    let Some(policy) = rerun else {
        // Only a re-running resume leaves a journal unrecovered for us.
        return Err(crate::run::failed(
            "the session was interrupted and not recovered; run `recover classify` on it, or \
             resume it again",
        ));
    };
    let chosen = choose(&analysis, prepared.registry(), policy);
    let events = recovery_events(&analysis, &chosen, policy);
    let classified = analysis.recovery.as_ref().map_or(0, |r| r.calls.len());
    let ids: Vec<&str> = chosen.iter().map(|c| c.call_id.as_str()).collect();
    let said = format!(
        "recovered: {} call(s) classified{}",
        classified - chosen.len(),
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
    Ok((events, said))
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
        .map_err(|e| crate::run::failed(e.to_string()))?;
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
