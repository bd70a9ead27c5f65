//! The ends of a call that the scheduler writes itself: `committed` (in model order, then the
//! observers), and `cancelled-before-start` for a call that never ran.
//!
//! Why apart from the start loop: commit order (I3) is a rule of its own, checked here in one
//! place whatever order calls finish in.

use super::Slot;
use crate::code::ErrorCode;
use crate::event::Event;
use crate::pipeline::{self, Ctx};
use crate::state::CallState;
use crate::track::Track;
use crate::RuntimeError;
use futures_util::FutureExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tokio_util::sync::CancellationToken;

/// → cancelled-before-start, with its synthetic result.
pub(crate) fn cancel_before_start(
    ctx: &Ctx,
    track: &mut Track,
    reason: &str,
) -> Result<(), RuntimeError> {
    track.transition(
        &ctx.log,
        CallState::CancelledBeforeStart,
        0,
        |call, source_seqs| Event::CancelledBeforeStart {
            call,
            reason: reason.to_owned(),
            source_seqs,
        },
    )?;
    // An `ask` the person already answered: the answer is journaled (`ask/reply`), so the model
    // is given it rather than told to ask again.
    let answer = track.info().and_then(|i| i.answer.as_ref());
    let message = crate::result::cancelled_message(reason, answer);
    pipeline::set_error_result(track, ErrorCode::AbortedBeforeDispatch, message);
    Ok(())
}

/// The mutant `mutant.cancelled_call_runs`: the body of a call just journaled
/// `cancelled-before-start` runs anyway (I9 broken on purpose).
pub(super) async fn run_anyway(ctx: &Ctx, track: &Track) {
    let (Some(entry), Some(info)) = (track.entry(), track.info_shared()) else {
        return;
    };
    let (sink, _progress) = crate::tool::ProgressSink::channel();
    let processes = crate::tool::ProcessLog {
        log: ctx.log.clone(),
        info: info.clone(),
    };
    let tool_ctx = crate::tool::ToolContext::new(
        CancellationToken::new(),
        sink,
        1,
        processes,
        info.answer.clone(),
        Default::default(),
    );
    if let Ok(body) = catch_unwind(AssertUnwindSafe(|| {
        entry.tool.execute(info.args.clone(), tool_ctx)
    })) {
        let _ = AssertUnwindSafe(body).catch_unwind().await;
    }
}

/// Commits, in model order, every call whose result is ready and whose predecessors are
/// committed; then shows each frozen result to the observers.
pub(super) fn commit_ready(
    ctx: &Ctx,
    slots: &mut [Slot],
    committed: &mut usize,
) -> Result<(), RuntimeError> {
    if ctx.config.failpoints.mutant("mutant.commit_out_of_order") {
        // The mutant: the ready calls committed last first (I3's order broken on purpose).
        let mut end = *committed;
        while matches!(slots.get(end), Some(Some(t)) if t.result().is_some()) {
            end += 1;
        }
        for track in slots[*committed..end].iter_mut().rev().flatten() {
            commit_one(ctx, track)?;
        }
        *committed = end;
        return Ok(());
    }
    while let Some(Some(track)) = slots.get_mut(*committed) {
        if !commit_one(ctx, track)? {
            break;
        }
        *committed += 1;
    }
    Ok(())
}

/// Commits one call if its result is ready (and says whether it was).
fn commit_one(ctx: &Ctx, track: &mut Track) -> Result<bool, RuntimeError> {
    let Some(result) = track.result() else {
        return Ok(false);
    };
    // assert: one string compare per commit; the `committed` record names its call and not
    // the result's id, so a result built for another call would be committed under this one
    // unseen: two answers to one call id and none to another (I3).
    assert!(
        result.call_id == track.call().call_id,
        "the result of call {:?} committed as call {:?}",
        result.call_id,
        track.call().call_id
    );
    // The content moves into `committed` and back into the result (the model's text is the
    // journaled one), rather than being copied per call.
    let Some(result) = track.result_mut() else {
        return Ok(false);
    };
    let content = std::mem::take(&mut result.content);
    let mut result = result.committed();
    result.content = content;
    let (_, content) = track.transition_with(
        &ctx.log,
        CallState::Committed,
        0,
        |call, source_seqs| Event::Committed {
            call,
            result,
            source_seqs,
        },
        |committed| match committed {
            Event::Committed { result, .. } => result.content,
            _ => unreachable!("built as committed just above"),
        },
    )?;
    if let Some(result) = track.result_mut() {
        result.content = content;
    }
    if let Some(result) = track.result() {
        for observer in &ctx.hooks.observers {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                observer.on_result(track.call(), track.tool(), result)
            }));
            ctx.stats.observer_outcome(observer.name(), outcome);
        }
    }
    Ok(true)
}
