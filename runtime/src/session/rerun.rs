//! A resume that runs again what a crash interrupted (`tooljournal resume --rerun`).
//!
//! Why here and not in a new step: the calls belong to the interrupted step's assistant
//! message, and a provider pairs every call id of that message with exactly one result. So
//! the recovery a re-running resume appends leaves those calls (and their step and turn) open,
//! names them in `recovery/rerun`, and the calls then run in their own step, with their own
//! ids and frozen arguments, `started` written ahead as always (I1). Which calls may run again
//! is the caller's decision (`recover` classifies, the CLI applies the policy); this room
//! checks that each one is a call the journal lets run again, and runs them.

use super::{Phase, Session};
use crate::config::{Config, SessionOptions};
use crate::event::{CallRef, Event, RecoveryRerun, RerunPolicy, StepOutcome, TurnOutcome};
use crate::hooks::{CallInfo, Hooks};
use crate::registry::Registry;
use crate::replay::{CallReplay, SessionReplay};
use crate::result::ToolResult;
use crate::scheduler;
use crate::state::CallState;
use crate::track::Track;
use crate::RuntimeError;
use journal::Journal;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Session {
    /// Continues a crashed session that has not been recovered, appending its recovery first.
    /// `recovery` is what balances the journal: `ask/cancelled` for questions still pending,
    /// then the `recovery`; when calls of the interrupted step run again, that `recovery`
    /// leaves them (and their step and turn) open and `recovery/rerun` follows, naming them,
    /// and the session is left inside that step for [`Session::run_rerun`]. Otherwise the
    /// session goes on after the recovered turn.
    pub fn resume_recovering(
        journal: Journal,
        registry: Arc<Registry>,
        hooks: Hooks,
        config: Config,
        options: SessionOptions,
        replay: &SessionReplay,
        recovery: Vec<Event>,
    ) -> Result<Session, RuntimeError> {
        let misuse = |m: String| RuntimeError::Misuse(m);
        if replay.closed {
            return Err(misuse("the session is closed".into()));
        }
        let shape_ok = match recovery.as_slice() {
            [asks @ .., Event::Recovery(_), Event::RecoveryRerun(_)]
            | [asks @ .., Event::Recovery(_)] => {
                asks.iter().all(|e| matches!(e, Event::AskCancelled { .. }))
            }
            _ => false,
        };
        if !shape_ok {
            return Err(misuse(
                "a recovering resume appends ask/cancelled events, a recovery, and \
                 recovery/rerun when calls run again"
                    .into(),
            ));
        }
        let rerun = match recovery.last() {
            Some(Event::RecoveryRerun(rerun)) => {
                let (turn, step) = open_step(replay)?;
                Some((
                    turn,
                    step,
                    rerun_calls(replay, &registry, rerun, (turn, step))?,
                ))
            }
            _ => None,
        };
        let named: Vec<CallRef> = match &rerun {
            Some((_, _, calls)) => calls.iter().map(|(c, _)| c.call.clone()).collect(),
            None => Vec::new(),
        };
        if let Some(Event::Recovery(r)) = recovery.iter().find(|e| matches!(e, Event::Recovery(_)))
        {
            recovery_fits(replay, r, &named)?;
        }
        let mut session =
            Session::continue_from(journal, registry, hooks, config, options, replay)?;
        let mut last_seq = 0;
        for event in &recovery {
            last_seq = session.log.append(event)?;
        }
        // No sync of its own: the first `started` of a re-run, or the next turn's first sync,
        // makes these durable; a crash before that leaves the journal as recovery found it,
        // to be recovered again.
        let Some((turn, step, calls)) = rerun else {
            return Ok(session);
        };
        session.turn = turn;
        session.step = step;
        // The interrupted step, reopened: its response was journaled before the crash.
        session.phase = Phase::Step { answered: true };
        for (c, info) in calls {
            let mut track = Track::rerun(c.call.clone(), c.tool.clone(), c.attempts, last_seq);
            let entry = session
                .registry
                .lookup(&c.tool)
                .ok_or_else(|| misuse(format!("{}: its tool {} is gone", c.call, c.tool)))?;
            track.set_entry(entry);
            track.set_info(info);
            session.rerun.push(track);
        }
        Ok(session)
    }

    /// Runs the calls [`Session::resume_recovering`] named, as one batch (in parallel as their
    /// tools allow, committed in model order), then ends their step (`Completed`) and its turn
    /// (`Interrupted`: the model never continued it; the next turn shows it the results).
    /// Returns each call with its one result, in model order. Nothing to run: nothing done.
    pub async fn run_rerun(
        &mut self,
        cancel: CancellationToken,
    ) -> Result<Vec<(CallRef, ToolResult)>, RuntimeError> {
        if self.rerun.is_empty() {
            return Ok(Vec::new());
        }
        let tracks = std::mem::take(&mut self.rerun);
        let calls: Vec<CallRef> = tracks.iter().map(|t| t.call().clone()).collect();
        let results = scheduler::run(&self.ctx(), tracks, &cancel).await?;
        let outcome = if cancel.is_cancelled() {
            StepOutcome::Cancelled
        } else {
            StepOutcome::Completed
        };
        self.end_step(outcome)?;
        self.end_turn(TurnOutcome::Interrupted).await?;
        Ok(calls.into_iter().zip(results).collect())
    }
}

/// Whether `recovery` balances the journal around the calls `named` to run again: it closes
/// every other unfinished call of the open step and none of those, and it interrupts the open
/// step and turn exactly when nothing runs again.
fn recovery_fits(
    replay: &SessionReplay,
    recovery: &crate::event::Recovery,
    named: &[CallRef],
) -> Result<(), RuntimeError> {
    let misuse = |m: String| RuntimeError::Misuse(m);
    if let Some(rc) = recovery.calls.iter().find(|rc| named.contains(&rc.call)) {
        return Err(misuse(format!(
            "{}: the recovery closes a call it also leaves to run again",
            rc.call
        )));
    }
    let open_turn = replay.open_turn().map(|t| t.turn);
    let closes = recovery.interrupted_turn.is_some() || recovery.interrupted_step.is_some();
    if named.is_empty() {
        if recovery.interrupted_turn != open_turn {
            return Err(misuse(format!(
                "the recovery interrupts turn {:?}, but turn {open_turn:?} is open",
                recovery.interrupted_turn
            )));
        }
    } else if closes {
        return Err(misuse(
            "the recovery interrupts the step whose calls run again".into(),
        ));
    }
    let open_calls = replay
        .open_turn()
        .and_then(|t| t.steps.last().filter(|s| s.outcome.is_none()))
        .map(|s| s.calls.as_slice())
        .unwrap_or_default();
    for c in open_calls.iter().filter(|c| c.committed.is_none()) {
        if !named.contains(&c.call) && !recovery.calls.iter().any(|rc| rc.call == c.call) {
            return Err(misuse(format!(
                "{}: left unfinished by the recovery and not run again",
                c.call
            )));
        }
    }
    Ok(())
}

/// The open turn and step of a journal that ends inside a step.
fn open_step(replay: &SessionReplay) -> Result<(u32, u32), RuntimeError> {
    let turn = replay
        .open_turn()
        .ok_or_else(|| RuntimeError::Misuse("no turn is open: nothing to run again".into()))?;
    let step = turn
        .steps
        .last()
        .filter(|s| s.outcome.is_none())
        .ok_or_else(|| RuntimeError::Misuse("no step is open: nothing to run again".into()))?;
    Ok((turn.turn, step.step))
}

/// The calls `rerun` names, each checked: in the open step, approved and never started (or,
/// under `safe`, started without `settled`), its arguments parsed, its tool registered.
fn rerun_calls<'r>(
    replay: &'r SessionReplay,
    registry: &Registry,
    rerun: &RecoveryRerun,
    (turn, step): (u32, u32),
) -> Result<Vec<(&'r CallReplay, CallInfo)>, RuntimeError> {
    let misuse = |m: String| RuntimeError::Misuse(m);
    let step_calls = &replay.turns[turn as usize - 1].steps[step as usize - 1].calls;
    let mut calls = Vec::with_capacity(rerun.calls.len());
    for (i, call) in rerun.calls.iter().enumerate() {
        if rerun.calls[..i].contains(call) {
            return Err(misuse(format!("{call}: named twice to run again")));
        }
        let c = step_calls
            .iter()
            .find(|c| &c.call == call)
            .ok_or_else(|| misuse(format!("{call}: not a call of the open step")))?;
        if c.tool == super::ASK_TOOL {
            // Its answer, if any, is recovery's to deliver; a question is never put again.
            return Err(misuse(format!("{call}: the built-in ask never runs again")));
        }
        let fits = match c.state {
            CallState::Approved => true,
            CallState::Started => rerun.policy == RerunPolicy::Safe,
            _ => false,
        };
        if !fits || c.committed.is_some() {
            return Err(misuse(format!(
                "{call}: {} cannot run again under {}",
                c.state.as_str(),
                rerun.policy.as_str()
            )));
        }
        let entry = registry
            .lookup(&c.tool)
            .ok_or_else(|| misuse(format!("{call}: no tool named {}", c.tool)))?;
        if replay.plan_mode && !entry.tool.is_read_only() {
            return Err(misuse(format!(
                "{call}: plan mode is on and {} is not read-only",
                c.tool
            )));
        }
        // I19: a call that may have run runs again only if its tool says that is harmless.
        let harmless = entry.tool.is_retry_safe() || entry.tool.is_read_only();
        if c.state == CallState::Started && !harmless {
            return Err(misuse(format!(
                "{call}: may have run, and {} declares itself neither idempotent nor read-only: \
                 it is never run again",
                c.tool
            )));
        }
        let text = c.arguments.as_deref().unwrap_or("{}");
        let args = crate::args::parse(text)
            .map_err(|e| misuse(format!("{call}: its journaled arguments: {e}")))?;
        let info = CallInfo {
            call: call.clone(),
            tool: c.tool.clone(),
            source: entry.source.clone(),
            read_only: entry.tool.is_read_only(),
            args,
            answer: None,
        };
        calls.push((c, info));
    }
    // Committed in model order, as the step would have.
    calls.sort_by_key(|(c, _)| c.index);
    Ok(calls)
}
