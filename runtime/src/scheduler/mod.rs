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
//!
//! Which calls start is decided by [`start::starts_now`], a pure function over plain data; this
//! module feeds it and carries its decision out. [`settle`] runs one started call to its
//! result, [`commit`] writes the calls' last records.

mod commit;
mod settle;
mod start;

pub(crate) use commit::cancel_before_start;

use crate::error::panic_message;
use crate::event::{Event, Resources};
use crate::pipeline::{self, Ctx, Starting};
use crate::result::ToolResult;
use crate::state::CallState;
use crate::track::Track;
use crate::RuntimeError;
use commit::commit_ready;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use start::{HeldSet, Waiting};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::Poll;
use tokio_util::sync::CancellationToken;

/// A call's place in the batch: `Some` when the scheduler holds its track (not started, or
/// finished), `None` while its task does. Boxed: a track moves between its slot, its start
/// group and its call's future, and a pointer moves for nothing where the track is ~300 bytes.
type Slot = Option<Box<Track>>;

/// What a finished call's future gives back: its index, its track and whether it settled.
type Done = (usize, Box<Track>, Result<(), RuntimeError>);

/// A started call's end: its [`Done`], or the panic of a bug of ours (a tool's panics are
/// caught inside the pipeline).
type Joined = std::thread::Result<Done>;

/// The batch as the scheduler holds it between two start decisions.
struct Batch {
    slots: Vec<Slot>,
    /// What the running calls hold.
    held: HeldSet,
    /// How many calls, from the first, are committed.
    committed: usize,
    /// Every call before this one has started or ended: where the next scan begins.
    next: usize,
    /// The first fault or journal failure: nothing starts after it, and it ends the batch once
    /// the running calls have drained.
    failure: Option<RuntimeError>,
}

/// Runs every approved call of the batch and commits every result in model order.
// vec_box: boxed on purpose, each track moves out of its Vec (see `Slot`).
#[allow(clippy::vec_box)]
pub(crate) async fn run(
    ctx: &Ctx,
    tracks: Vec<Box<Track>>,
    cancel: &CancellationToken,
) -> Result<Vec<ToolResult>, RuntimeError> {
    let n = tracks.len();
    let (turn, step) = tracks
        .first()
        .map(|t| (t.call().turn, t.call().step))
        .unwrap_or((0, 0));
    let mut batch = Batch {
        slots: tracks.into_iter().map(Some).collect(),
        held: HeldSet::new(n),
        committed: 0,
        next: 0,
        failure: None,
    };
    // The running calls, polled in the scheduler's own task (a task per call cost a spawn, a
    // join and a cross-thread wake-up each). A panic outside the tool body (which the pipeline
    // catches) is a bug of ours: it comes back as `Err`, the call's track lost, and ends the
    // batch. Made on first use: a set costs two allocations, and a batch whose calls run one
    // at a time never needs one.
    let mut running = None;
    // Calls of a start group that finished on their first poll, not handled yet.
    let mut finished = VecDeque::new();
    commit_ready(ctx, &mut batch.slots, &mut batch.committed)?;

    loop {
        let group = batch.next_group(ctx, cancel);
        let started = if group.is_empty() {
            Vec::new()
        } else {
            start_group(ctx, group, &mut batch).await
        };
        let first_started = !pipeline::started_after_body(ctx);
        let idle = running
            .as_ref()
            .is_none_or(|r: &FuturesUnordered<_>| r.is_empty());
        let joined = if started.len() == 1 && idle && finished.is_empty() {
            // Alone: nothing else can start before it settles (whatever waits, waits for it),
            // so it is simply awaited, with no set to box it into.
            // The condition just above says there is exactly one.
            #[allow(clippy::expect_used)]
            let (index, track, resources) = started.into_iter().next().expect("one call");
            let call = run_call(ctx, index, track, resources, cancel, first_started);
            AssertUnwindSafe(call).catch_unwind().await
        } else {
            let fresh = started
                .into_iter()
                .map(|(index, track, resources)| {
                    let call = run_call(ctx, index, track, resources, cancel, first_started);
                    Box::pin(AssertUnwindSafe(call).catch_unwind())
                })
                .collect();
            let running = running.get_or_insert_with(FuturesUnordered::new);
            match join_next(running, &mut finished, fresh).await {
                Some(joined) => joined,
                None => break,
            }
        };
        batch.take_back(ctx, joined);
    }

    if let Some(error) = batch.failure.take() {
        record_fault(ctx, turn, step, &error).await?;
        return Err(error);
    }
    // Stopped by the user: whatever did not start, did not run.
    cancel_unstarted(ctx, &mut batch.slots).await?;
    commit_ready(ctx, &mut batch.slots, &mut batch.committed)?;
    assert_eq!(
        batch.committed, n,
        "every call of the batch is committed (I3)"
    );
    let results: Vec<ToolResult> = batch
        .slots
        .into_iter()
        .map(|s| match s {
            // Committed calls have results: `commit_one` commits nothing else.
            #[allow(clippy::expect_used)]
            Some(track) => track.into_result().expect("committed calls have results"),
            None => unreachable!("nothing runs after the loop"),
        })
        .collect();
    // debug_assert: a set of every call id per batch (an allocation and n hashes, in every
    // batch); one result per call id is what the model is owed (I3), and the fuzzer checks the
    // journal, not this vector.
    debug_assert!(
        {
            let mut ids = std::collections::HashSet::new();
            results.iter().all(|r| ids.insert(r.call_id.as_str()))
        },
        "one result per call id (I3)"
    );
    Ok(results)
}

impl Batch {
    /// Decides which calls start now ([`start::starts_now`]) and takes their tracks.
    fn next_group(
        &mut self,
        ctx: &Ctx,
        cancel: &CancellationToken,
    ) -> Vec<(usize, Box<Track>, Resources)> {
        let stopped = self.failure.is_some() || cancel.is_cancelled();
        let queue = waiting(&self.slots, self.next, cancel);
        let parallel_max = ctx.config.parallel_max;
        let starting = start::starts_now(queue, &mut self.held, parallel_max, stopped);
        // assert: a counter compare and a scan of the running calls (a handful) per decision;
        // a pool over its limit or an exclusive call beside another would be invisible in the
        // journal's per-call records, so the fuzzer gets it only from here.
        assert!(
            self.held.len() <= parallel_max.max(1)
                && (self.held.len() <= 1 || !self.held.any_exclusive()),
            "{} calls running with parallel_max {parallel_max} (an exclusive one among them: {})",
            self.held.len(),
            self.held.any_exclusive()
        );
        // The queue only yields calls whose slot holds their track.
        let group = starting
            .into_iter()
            .filter_map(|w| Some((w.index, self.slots[w.index].take()?, w.resources)))
            .collect();
        while self.next < self.slots.len()
            && !matches!(&self.slots[self.next], Some(t) if t.state() == CallState::Approved)
        {
            self.next += 1;
        }
        group
    }

    /// Takes a finished call back: its track to its slot, its locks released, its error (or a
    /// panic of ours) as the batch's failure; then commits whatever is ready.
    fn take_back(&mut self, ctx: &Ctx, joined: Joined) {
        let (index, track, result) = match joined {
            Ok(done) => done,
            Err(panic) => {
                // A bug of ours, not a tool's (tool panics are caught inside). Its call's
                // progress is unknown: no result is made up for it.
                self.failure.get_or_insert(RuntimeError::Fault(format!(
                    "a call's task ended abnormally: it panicked: {}",
                    panic_message(panic.as_ref())
                )));
                return;
            }
        };
        self.held.remove(index);
        self.slots[index] = Some(track);
        if let Err(e) = result {
            self.failure.get_or_insert(e);
        }
        if self.failure.is_none() && ctx.config.failpoints.hit("scheduler.after_settle") {
            self.failure = Some(RuntimeError::Fault(
                "failpoint scheduler.after_settle".to_owned(),
            ));
        }
        if self.failure.is_none() {
            // A failed commit write ends the batch like any journal failure: after draining.
            if let Err(e) = commit_ready(ctx, &mut self.slots, &mut self.committed) {
                self.failure = Some(e);
            }
        }
    }
}

/// The calls waiting to start, from `from` on, in model order, each as its tool describes it
/// now. Lazy: a tool is asked about its call only when the decision reads that far. Ends as
/// soon as the batch is stopped.
fn waiting<'a>(
    slots: &'a [Slot],
    from: usize,
    cancel: &'a CancellationToken,
) -> impl Iterator<Item = Waiting> + 'a {
    slots
        .iter()
        .enumerate()
        .skip(from)
        .take_while(move |_| !cancel.is_cancelled())
        .filter_map(|(index, slot)| match slot {
            Some(track) if track.state() == CallState::Approved => Some(describe(index, track)),
            _ => None,
        })
}

/// A waiting call as the start decision sees it. Decided now, not at planning: an earlier call
/// may have changed the answer. A tool that cannot answer is treated as exclusive.
fn describe(index: usize, track: &Track) -> Waiting {
    // The session sets both before it approves a call, and only approved calls wait.
    #[allow(clippy::expect_used)]
    let entry = track.entry().expect("approved calls have a tool");
    #[allow(clippy::expect_used)]
    let info = track.info().expect("approved calls have arguments");
    let safe = catch_unwind(AssertUnwindSafe(|| {
        entry.tool.is_concurrency_safe(&info.args)
    }))
    .unwrap_or(false);
    let resources =
        catch_unwind(AssertUnwindSafe(|| entry.tool.resources(&info.args))).unwrap_or_default();
    Waiting {
        index,
        exclusive: !safe,
        resources,
    }
}

/// Polls every call of a fresh start group once, adds those still pending to `running`, and
/// returns the next finished call (`None`: nothing runs).
///
/// A start group starts together: every body of it is polled once before any call's
/// completion is handled (its commit, the next group's start sync), so none of those records
/// can fail before a body of the group began. (A record a call writes inside its own first
/// poll can still fail first: then `run_body` does not start the later bodies at all.)
async fn join_next<F>(
    running: &mut FuturesUnordered<Pin<Box<F>>>,
    finished: &mut VecDeque<Joined>,
    mut fresh: Vec<Pin<Box<F>>>,
) -> Option<Joined>
where
    F: Future<Output = Joined>,
{
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
    // Pushed after the poll: `push` takes `&self`, and a shared borrow of the set held in the
    // poll would make the batch's future need `Sync`.
    running.extend(pending);
    match finished.pop_front() {
        Some(done) => Some(done),
        None => running.next().await,
    }
}

/// Records an internal fault: everything that started has settled (the loop drained it). Not
/// when the journal itself is what failed.
async fn record_fault(
    ctx: &Ctx,
    turn: u32,
    step: u32,
    error: &RuntimeError,
) -> Result<(), RuntimeError> {
    if matches!(error, RuntimeError::Journal(_)) {
        return Ok(());
    }
    let seq = ctx.log.append(&Event::Fault {
        turn,
        step,
        message: error.to_string(),
    })?;
    // The fault and the drained calls' `settled` records are the evidence: keep them.
    ctx.log.sync_through(seq).await
}

/// After a stop: every call still approved did not start, and is `cancelled-before-start`.
async fn cancel_unstarted(ctx: &Ctx, slots: &mut [Slot]) -> Result<(), RuntimeError> {
    for track in slots.iter_mut().flatten() {
        if track.state() == CallState::Approved {
            cancel_before_start(ctx, track, "the batch was stopped before this call started")?;
            if ctx.config.failpoints.mutant("mutant.cancelled_call_runs") {
                commit::run_anyway(ctx, track).await;
            }
        }
    }
    Ok(())
}

/// Makes the group's `started` records durable with one sync and tells the observers; returns
/// the calls that may now run (none after a journal failure).
async fn start_group(
    ctx: &Ctx,
    mut group: Vec<(usize, Box<Track>, Resources)>,
    batch: &mut Batch,
) -> Vec<(usize, Box<Track>, Resources)> {
    let late = pipeline::started_after_body(ctx);
    let wrote = if late {
        Ok(())
    } else {
        let starting = group
            .iter_mut()
            .map(|(_, track, resources)| Starting {
                // 1, unless a resume re-runs a call an earlier run started.
                attempt: track.attempt() + 1,
                track,
                resources,
            })
            .collect();
        pipeline::write_ahead(ctx, starting).await
    };
    if let Err(e) = wrote {
        // No body starts after a journal failure (I10). The tracks go back unstarted; the
        // error ends the batch.
        for (index, track, _) in group {
            batch.held.remove(index);
            batch.slots[index] = Some(track);
        }
        batch.failure.get_or_insert(e);
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
    mut track: Box<Track>,
    resources: Resources,
    cancel: &CancellationToken,
    first_started: bool,
) -> Done {
    let result = settle::execute(ctx, &mut track, &resources, cancel, first_started).await;
    (index, track, result)
}
