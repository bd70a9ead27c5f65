//! A started call, from its body to its `settled` record and its frozen result (with the
//! result spilled first when it is too large for the model).
//!
//! Why apart from the start loop: this is one call's straight line, with no knowledge of the
//! batch around it; the loop in the parent module only decides when it runs.

use crate::event::{Event, Resources};
use crate::pipeline::{self, Ctx};
use crate::state::CallState;
use crate::track::Track;
use crate::RuntimeError;
use tokio_util::sync::CancellationToken;

/// started → settled, with the result ready to commit.
pub(super) async fn execute(
    ctx: &Ctx,
    track: &mut Track,
    resources: &Resources,
    cancel: &CancellationToken,
    first_started: bool,
) -> Result<(), RuntimeError> {
    // Cannot fail: the session sets both before it approves a call, and only approved calls
    // start.
    #[allow(clippy::expect_used)]
    let entry = track.entry().expect("started calls have a tool").clone();
    #[allow(clippy::expect_used)]
    let info = track
        .info_shared()
        .expect("started calls have arguments")
        .clone();
    let run =
        pipeline::run_body(ctx, &entry, &info, resources, track, cancel, first_started).await?;
    let mut settled = pipeline::settle(&entry, run, resources, ctx.config.content_inline_bytes_max);
    let (locator, spill_failure) = match spill(ctx, &mut settled)? {
        Ok(locator) => (locator, None),
        Err(e) => (None, Some(e)),
    };
    let (outcome, mut for_model) = settled.lend();
    let plans: Vec<_> = outcome
        .side_effects
        .iter()
        .filter_map(|e| match e {
            crate::event::SideEffect::PlanReplaced { items } => Some(items.clone()),
            _ => None,
        })
        .collect();
    track.transition_with(
        &ctx.log,
        CallState::Settled,
        0,
        |call, source_seqs| Event::Settled {
            call,
            outcome,
            source_seqs,
        },
        |settled| for_model.take_back(settled),
    )?;
    // The plan's new state, for replay (it keeps the latest).
    for items in plans {
        ctx.log.append(&Event::PlanReplace { items })?;
    }
    let result = pipeline::finish(
        &entry,
        &info,
        for_model,
        &ctx.hooks.post_execute,
        locator.as_deref(),
        ctx.config.model_inline_bytes_max,
    );
    track.set_result(result);
    // The call's truth is journaled; now the failed store stops the session.
    match spill_failure {
        Some(e) => Err(RuntimeError::Spill(e)),
        None => Ok(()),
    }
}

/// Puts a result too large for the model in the spill store and journals `spill/stored`
/// before the `settled` that names it. The inner error is the store's: the caller settles the
/// call without a locator (its preview says the text was not kept), then stops the session.
fn spill(
    ctx: &Ctx,
    settled: &mut pipeline::Settled,
) -> Result<Result<Option<String>, String>, RuntimeError> {
    let text = &settled.for_model.draft.content;
    let Some(store) = &ctx.config.spill else {
        return Ok(Ok(None));
    };
    if text.len() <= ctx.config.model_inline_bytes_max {
        return Ok(Ok(None));
    }
    let locator = match store.put(text) {
        Ok(locator) => locator,
        Err(e) => {
            ctx.stats.spill_failed();
            return Ok(Err(e));
        }
    };
    let sha256 = crate::tools::sha256_hex(text.as_bytes());
    ctx.log.append(&Event::SpillStored {
        locator: locator.clone(),
        bytes: text.len() as u64,
        sha256,
    })?;
    if let crate::event::Text::Preview { locator: l, .. } = &mut settled.outcome.content {
        *l = Some(locator.clone());
    }
    Ok(Ok(Some(locator)))
}
