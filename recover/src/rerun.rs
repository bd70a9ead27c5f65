//! Which calls of an interrupted step a resume runs again (`tooljournal resume --rerun`,
//! DESIGN.md §6b), and the recovery that leaves them open for it.
//!
//! The choice is recovery's to make (it reads the journal's classification) and the tools'
//! (whether a tool that may have run declares itself idempotent or read-only), so it lives
//! here, read-only, for the CLI, embeddings and the fuzz campaign alike; the runtime checks it
//! again where the calls run (`runtime::Session::resume_recovering`, I19). Calls never approved
//! are not run (nobody decided them), nor the built-in `ask` (recovery delivers its answer).

use crate::classify::{Analysis, CallReport, WITHDRAWN_REASON};
use events::event::{CallRef, Classification, Event, Recovery, RecoveryRerun, RerunPolicy};
use events::state::CallState;
pub(crate) use events::tool::ToolNature;

/// Whether the policy could run `c` again, by what the journal says (its tool still to be
/// asked): a call of the interrupted step, approved and never started, or (under `safe`)
/// started with no `settled`. Never the built-in `ask`.
fn eligible(analysis: &Analysis, c: &CallReport, policy: RerunPolicy) -> bool {
    let Some(recovery) = &analysis.recovery else {
        return false;
    };
    // Under fsync `never` a power loss can drop a `started` whose body ran: "approved and
    // never started" is then no proof, and nothing runs again.
    let unsynced = analysis
        .replay
        .policy
        .as_ref()
        .is_some_and(|p| p.fsync == events::event::SyncPolicy::Never);
    if unsynced {
        return false;
    }
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
    in_step && by_state && c.tool != events::ASK_TOOL
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

/// The calls that run again, the tools known: a not-started call whose tool is registered
/// (`tool` names it: `None` for a tool the resume does not have); an unknown call whose tool
/// declares itself idempotent (retry-safe) or read-only.
///
/// In plan mode (`plan_mode`: the journal's, or the resume's `--plan-mode`) only read-only
/// tools run again: plan mode lets nothing else run, whatever was approved before the crash.
pub fn choose(
    analysis: &Analysis,
    tool: impl Fn(&str) -> Option<ToolNature>,
    policy: RerunPolicy,
    plan_mode: bool,
) -> Vec<CallRef> {
    analysis
        .calls
        .iter()
        .filter(|c| eligible(analysis, c, policy))
        .filter(|c| match tool(&c.tool) {
            None => false,
            Some(nature) if plan_mode => nature.read_only,
            Some(nature) => c.state == CallState::Approved || nature.retry_safe || nature.read_only,
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
