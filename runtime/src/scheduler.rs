//! The batch scheduler (DESIGN.md §4, §5): which approved calls run when, and what happens on
//! cancel, timeout and fault.
//!
//! Calls are planned in model order. A call runs alongside others only if its tool says, right
//! before it starts, that this call is concurrency-safe (an earlier call may have changed the
//! answer), the pool has room, and no running or earlier waiting call touches one of its paths
//! with a write among them: calls on other paths go on, calls on one path keep model order.
//! Any other call is a barrier: it starts alone, after everything before it, and nothing after
//! it starts until it settles. Calls
//! that start together share one fsync for their `started` records. Results are committed in
//! model order as soon as every earlier call is committed, whatever order calls finish in.
//!
//! On cancel nothing new starts; running calls are signalled and awaited until they settle
//! (their locks are held until then); calls that never started are `cancelled-before-start`
//! with `ABORTED_BEFORE_DISPATCH`. An internal fault is not a cancel: running calls drain, a
//! `fault` event is written, the error surfaces, and nothing is said about calls that did not
//! start (recovery will: they are `TOOL_NOT_STARTED`).

use crate::code::ErrorCode;
use crate::event::{Event, Resources};
use crate::pipeline::{self, Ctx, Starting};
use crate::result::ToolResult;
use crate::session::Track;
use crate::state::CallState;
use crate::RuntimeError;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Poll;
use tokio_util::sync::CancellationToken;

/// A call's place in the batch: `Some` when the scheduler holds its track (not started, or
/// finished), `None` while its task does.
type Slot = Option<Track>;

/// What a finished call's future gives back: its index, its track and whether it settled.
type Done = (usize, Track, Result<(), RuntimeError>);

/// What a running call holds.
struct Held {
    exclusive: bool,
    resources: Resources,
}

/// What the running calls hold, by their index in the batch (no hashing for a handful of calls).
struct HeldSet {
    slots: Vec<Option<Held>>,
    count: usize,
}

impl HeldSet {
    fn new(n: usize) -> HeldSet {
        HeldSet {
            slots: (0..n).map(|_| None).collect(),
            count: 0,
        }
    }

    fn insert(&mut self, index: usize, held: Held) {
        if self.slots[index].replace(held).is_none() {
            self.count += 1;
        }
    }

    fn remove(&mut self, index: usize) {
        if self.slots[index].take().is_some() {
            self.count -= 1;
        }
    }

    fn len(&self) -> usize {
        self.count
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn values(&self) -> impl Iterator<Item = &Held> {
        self.slots.iter().flatten()
    }
}

/// Whether two declared paths name overlapping trees: the same path, or one inside the other
/// (a grep of `logs` and a write of `logs/a.txt` touch the same file). `.` and `` are the root.
fn overlap(a: &str, b: &str) -> bool {
    let norm = |p: &str| p.trim_start_matches("./").trim_end_matches('/').to_owned();
    let (a, b) = (norm(a), norm(b));
    if a.is_empty() || a == "." || b.is_empty() || b == "." || a == b {
        return true;
    }
    let inside =
        |x: &str, y: &str| x.len() > y.len() && x.starts_with(y) && x.as_bytes()[y.len()] == b'/';
    inside(&a, &b) || inside(&b, &a)
}

fn conflicts(a: &Resources, b: &Resources) -> bool {
    let any = |xs: &[String], ys: &[String]| xs.iter().any(|x| ys.iter().any(|y| overlap(x, y)));
    any(&a.writes, &b.writes) || any(&a.writes, &b.reads) || any(&a.reads, &b.writes)
}

/// Runs every approved call of the batch and commits every result in model order.
pub(crate) async fn run(
    ctx: &Ctx,
    tracks: Vec<Track>,
    cancel: &CancellationToken,
) -> Result<Vec<ToolResult>, RuntimeError> {
    let n = tracks.len();
    let (turn, step) = tracks
        .first()
        .map(|t| (t.call().turn, t.call().step))
        .unwrap_or((0, 0));
    let mut slots: Vec<Slot> = tracks.into_iter().map(Some).collect();
    let mut committed = 0;
    let mut next = 0;
    // The running calls, polled in the scheduler's own task (a task per call cost a spawn, a
    // join and a cross-thread wake-up each). A panic outside the tool body (which the pipeline
    // catches) is a bug of ours: it comes back as `Err`, the call's track lost, and ends the
    // batch.
    let mut running = FuturesUnordered::new();
    // Calls of a start group that finished on their first poll, not handled yet.
    let mut finished = VecDeque::new();
    let mut held = HeldSet::new(n);
    let mut failure: Option<RuntimeError> = None;
    commit_ready(ctx, &mut slots, &mut committed)?;

    loop {
        // Start every call that may start now, scanning in model order. A parallel-safe call
        // may pass earlier calls that wait for a path lock, unless it touches one of their
        // paths with a write among them (so calls on one path keep model order); nothing
        // passes a waiting exclusive call (a barrier).
        let mut group: Vec<(usize, Track, Resources)> = Vec::new();
        let mut waiting: Vec<Resources> = Vec::new();
        let mut i = next;
        while i < n && failure.is_none() && !cancel.is_cancelled() {
            let Some(track) = &slots[i] else {
                i += 1;
                continue;
            };
            if track.state() != CallState::Approved {
                i += 1;
                continue;
            }
            let entry = track.entry().expect("approved calls have a tool").clone();
            let info = track.info().expect("approved calls have arguments");
            // Decided now, not at planning: an earlier call may have changed the answer. A
            // tool that cannot answer is treated as exclusive.
            let safe = catch_unwind(AssertUnwindSafe(|| {
                entry.tool.is_concurrency_safe(&info.args)
            }))
            .unwrap_or(false);
            let resources = catch_unwind(AssertUnwindSafe(|| entry.tool.resources(&info.args)))
                .unwrap_or_default();
            if !safe {
                if held.is_empty() && waiting.is_empty() {
                    let track = slots[i].take().expect("checked above");
                    held.insert(
                        i,
                        Held {
                            exclusive: true,
                            resources: resources.clone(),
                        },
                    );
                    group.push((i, track, resources));
                }
                break;
            }
            // `held` already counts this round's group.
            // A call that declares no paths conflicts with nothing: no need to scan.
            let touches = !resources.reads.is_empty() || !resources.writes.is_empty();
            let conflicting = touches
                && (held.values().any(|h| conflicts(&resources, &h.resources))
                    || waiting.iter().any(|w| conflicts(&resources, w)));
            let may_start = !held.values().any(|h| h.exclusive)
                && held.len() < ctx.config.parallel_max
                && !conflicting;
            if may_start {
                let track = slots[i].take().expect("checked above");
                held.insert(
                    i,
                    Held {
                        exclusive: false,
                        resources: resources.clone(),
                    },
                );
                group.push((i, track, resources));
            } else if held.len() >= ctx.config.parallel_max {
                break;
            } else {
                waiting.push(resources);
            }
            i += 1;
        }
        while next < n && !matches!(&slots[next], Some(t) if t.state() == CallState::Approved) {
            next += 1;
        }
        let started = if group.is_empty() {
            Vec::new()
        } else {
            start_group(ctx, group, &mut held, &mut slots, &mut failure).await
        };
        let first_started = !pipeline::started_after_body(ctx);
        let joined = if started.len() == 1 && running.is_empty() && finished.is_empty() {
            // Alone: nothing else can start before it settles (whatever waits, waits for it),
            // so it is simply awaited, with no set to box it into.
            let (index, track, resources) = started.into_iter().next().expect("one call");
            AssertUnwindSafe(run_call(
                ctx,
                index,
                track,
                resources,
                cancel,
                first_started,
            ))
            .catch_unwind()
            .await
        } else {
            let mut fresh: Vec<_> = started
                .into_iter()
                .map(|(index, track, resources)| {
                    let call = run_call(ctx, index, track, resources, cancel, first_started);
                    Box::pin(AssertUnwindSafe(call).catch_unwind())
                })
                .collect();
            // A start group starts together: every body of it is polled once before any
            // call's completion is handled here (its commit, the next group's start sync), so
            // none of those records can fail before a body of the group began. (A record a
            // call writes inside its own first poll can still fail first: then `run_body`
            // does not start the later bodies at all.)
            let pending: Vec<_> = std::future::poll_fn(|cx| {
                let mut pending = Vec::new();
                for mut call in fresh.drain(..) {
                    match call.as_mut().poll(cx) {
                        Poll::Ready(done) => finished.push_back(done),
                        Poll::Pending => pending.push(call),
                    }
                }
                Poll::Ready(pending)
            })
            .await;
            // Pushed after the poll: `push` takes `&self`, and a shared borrow of the set
            // held in the poll would make the batch's future need `Sync`.
            running.extend(pending);
            match finished.pop_front() {
                Some(done) => done,
                None => match running.next().await {
                    Some(joined) => joined,
                    None => break,
                },
            }
        };
        let (index, track, result) = match joined {
            Ok(done) => done,
            Err(panic) => {
                // A bug of ours, not a tool's (tool panics are caught inside). Its call's
                // progress is unknown: no result is made up for it.
                failure.get_or_insert(RuntimeError::Fault(format!(
                    "a call's task ended abnormally: it panicked: {}",
                    pipeline::panic_message(panic.as_ref())
                )));
                continue;
            }
        };
        held.remove(index);
        slots[index] = Some(track);
        if let Err(e) = result {
            failure.get_or_insert(e);
        }
        if failure.is_none() && ctx.config.failpoints.hit("scheduler.after_settle") {
            failure = Some(RuntimeError::Fault(
                "failpoint scheduler.after_settle".to_owned(),
            ));
        }
        if failure.is_none() {
            // A failed commit write ends the batch like any journal failure: after draining.
            if let Err(e) = commit_ready(ctx, &mut slots, &mut committed) {
                failure = Some(e);
            }
        }
    }

    if let Some(error) = failure {
        // Everything that started has settled (the loop drained it). Record the fault unless
        // the journal itself is what failed.
        if !matches!(error, RuntimeError::Journal(_)) {
            let seq = ctx.log.append(&Event::Fault {
                turn,
                step,
                message: error.to_string(),
            })?;
            // The fault and the drained calls' `settled` records are the evidence: keep them.
            ctx.log.sync_through(seq).await?;
        }
        return Err(error);
    }

    // Stopped by the user: whatever did not start, did not run.
    for track in slots.iter_mut().flatten() {
        if track.state() == CallState::Approved {
            cancel_before_start(ctx, track, "the batch was stopped before this call started")?;
            if ctx.config.failpoints.mutant("mutant.cancelled_call_runs") {
                run_anyway(ctx, track).await;
            }
        }
    }
    commit_ready(ctx, &mut slots, &mut committed)?;
    assert_eq!(committed, n, "every call of the batch is committed (I3)");
    Ok(slots
        .into_iter()
        .map(|s| match s {
            Some(track) => track.into_result().expect("committed calls have results"),
            None => unreachable!("nothing runs after the loop"),
        })
        .collect())
}

/// Makes the group's `started` records durable with one sync and tells the observers; returns
/// the calls that may now run (none after a journal failure).
async fn start_group(
    ctx: &Ctx,
    mut group: Vec<(usize, Track, Resources)>,
    held: &mut HeldSet,
    slots: &mut [Slot],
    failure: &mut Option<RuntimeError>,
) -> Vec<(usize, Track, Resources)> {
    let late = pipeline::started_after_body(ctx);
    let wrote = if late {
        Ok(())
    } else {
        let starting = group
            .iter_mut()
            .map(|(_, track, resources)| Starting {
                track,
                attempt: 1,
                resources,
            })
            .collect();
        pipeline::write_ahead(ctx, starting).await
    };
    if let Err(e) = wrote {
        // No body starts after a journal failure (I10). The tracks go back unstarted; the
        // error ends the batch.
        for (index, track, _) in group {
            held.remove(index);
            slots[index] = Some(track);
        }
        failure.get_or_insert(e);
        return Vec::new();
    }
    for (_, track, _) in &group {
        for observer in &ctx.hooks.observers {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                observer.on_start(track.call(), track.tool())
            }));
            ctx.stats.observer_outcome(observer.name(), outcome);
        }
    }
    group
}

/// One started call, to its result; gives its track back.
async fn run_call(
    ctx: &Ctx,
    index: usize,
    mut track: Track,
    resources: Resources,
    cancel: &CancellationToken,
    first_started: bool,
) -> Done {
    let result = execute(ctx, &mut track, &resources, cancel, first_started).await;
    (index, track, result)
}

/// started → settled, with the result ready to commit.
async fn execute(
    ctx: &Ctx,
    track: &mut Track,
    resources: &Resources,
    cancel: &CancellationToken,
    first_started: bool,
) -> Result<(), RuntimeError> {
    let entry = track.entry().expect("started calls have a tool").clone();
    let info = track.info().expect("started calls have arguments").clone();
    let run =
        pipeline::run_body(ctx, &entry, &info, resources, track, cancel, first_started).await?;
    let mut settled = pipeline::settle(&entry, run, resources, ctx.config.content_inline_bytes_max);
    let (locator, spill_failure) = match spill(ctx, &mut settled)? {
        Ok(locator) => (locator, None),
        Err(e) => (None, Some(e)),
    };
    let pipeline::Settled { outcome, for_model } = settled;
    let plans: Vec<_> = outcome
        .side_effects
        .iter()
        .filter_map(|e| match e {
            crate::event::SideEffect::PlanReplaced { items } => Some(items.clone()),
            _ => None,
        })
        .collect();
    track.transition(&ctx.log, CallState::Settled, 0, |source_seqs| {
        Event::Settled {
            call: info.call.clone(),
            outcome,
            source_seqs,
        }
    })?;
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

/// → cancelled-before-start, with its synthetic result.
pub(crate) fn cancel_before_start(
    ctx: &Ctx,
    track: &mut Track,
    reason: &str,
) -> Result<(), RuntimeError> {
    let call = track.call().clone();
    track.transition(
        &ctx.log,
        CallState::CancelledBeforeStart,
        0,
        |source_seqs| Event::CancelledBeforeStart {
            call: call.clone(),
            reason: reason.to_owned(),
            source_seqs,
        },
    )?;
    track.set_error_result(
        ErrorCode::AbortedBeforeDispatch,
        format!("{reason}; it did not run and may be retried"),
    );
    Ok(())
}

/// The mutant `mutant.cancelled_call_runs`: the body of a call just journaled
/// `cancelled-before-start` runs anyway (I9 broken on purpose).
async fn run_anyway(ctx: &Ctx, track: &Track) {
    let (Some(entry), Some(info)) = (track.entry(), track.info()) else {
        return;
    };
    let (sink, _progress) = crate::tool::ProgressSink::channel();
    let processes = crate::tool::ProcessLog {
        log: ctx.log.clone(),
        call: info.call.clone(),
    };
    let tool_ctx = crate::tool::ToolContext::new(CancellationToken::new(), sink, 1, processes);
    if let Ok(body) = catch_unwind(AssertUnwindSafe(|| {
        entry.tool.execute(info.args.clone(), tool_ctx)
    })) {
        let _ = AssertUnwindSafe(body).catch_unwind().await;
    }
}

/// Commits, in model order, every call whose result is ready and whose predecessors are
/// committed; then shows each frozen result to the observers.
fn commit_ready(ctx: &Ctx, slots: &mut [Slot], committed: &mut usize) -> Result<(), RuntimeError> {
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
    let Some(result) = track.result().map(ToolResult::committed) else {
        return Ok(false);
    };
    let call = track.call().clone();
    track.transition(&ctx.log, CallState::Committed, 0, |source_seqs| {
        Event::Committed {
            call,
            result,
            source_seqs,
        }
    })?;
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

#[cfg(test)]
mod tests {
    use super::overlap;

    #[test]
    fn paths_overlap_when_one_contains_the_other() {
        assert!(overlap("logs", "logs/a.txt"));
        assert!(overlap("logs/a.txt", "./logs/"));
        assert!(overlap(".", "x/y"));
        assert!(overlap("a", "a"));
        assert!(!overlap("logs", "logs2/a.txt"));
        assert!(!overlap("a/b", "a/c"));
    }
}
