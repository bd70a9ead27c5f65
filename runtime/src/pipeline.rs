//! One approved call, from `started` to its frozen result: the execute wrapper (write-ahead,
//! timeout, retry, metrics), the tool body, the contract check, post-execute and
//! `finalize_content` (DESIGN.md §3, stages 3 to 6).
//!
//! Why the order is fixed here and not configurable: the write-ahead rule (I1) and "finalize
//! exactly once" are properties of the sequence, not of any one listener.

use crate::code::ErrorCode;
use crate::config::Config;
use crate::error::panic_message;
use crate::event::{
    idempotency_key, CallRef, CallStarted, Event, Evidence, Outcome, OutcomeStatus, Resources,
    SideEffect, Text,
};
use crate::eventlog::EventLog;
use crate::hooks::{CallInfo, Draft, Hooks, Observer, PostDecision, PostExecute};
use crate::registry::Entry;
use crate::result::{error_content, ToolResult};
use crate::state::CallState;
use crate::stats::Stats;
use crate::tool::{
    ProgressReceiver, ProgressSink, StartInfo, ToolContext, ToolError, ToolFuture, ToolOutput,
};
use crate::track::Track;
use crate::RuntimeError;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Bytes of head and of tail kept when a content is too large to journal inline.
const PREVIEW_BYTES: usize = 2048;

/// Largest content the model gets without a spill store: the `committed` record must fit the
/// journal's record limit with room to spare.
const CONTENT_BYTES_MAX: usize = 4 << 20;

/// What the body produced over all its attempts.
pub(crate) struct BodyRun {
    pub result: Result<ToolOutput, ToolError>,
    pub attempts: u32,
    pub duration_ms: u64,
    /// Side effects confirmed by failed attempts before the last.
    pub earlier_effects: Vec<SideEffect>,
}

/// What a running call needs of its session; cheap to clone into a call's task.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// The session's id: every call's idempotency key is derived from it.
    pub session_id: Arc<str>,
    pub config: Arc<Config>,
    pub hooks: Arc<Hooks>,
    pub log: EventLog,
    pub stats: Arc<Stats>,
}

/// A call about to start an attempt.
pub(crate) struct Starting<'a> {
    pub track: &'a mut Track,
    pub attempt: u32,
    pub resources: &'a Resources,
}

/// Most evidence items one `started` records; a tool that reports more has the rest dropped
/// (less evidence is still true).
pub(crate) const EVIDENCE_ITEMS_MAX: usize = 64;

/// What the call's tool can tell before it acts ([`crate::tool::Tool::evidence`]), for its
/// `started`. A panic there is the tool's bug, not the session's: it gives no evidence, and
/// the body (which the same bug will likely fail) settles the call.
pub(crate) async fn gather_evidence(track: &Track) -> Vec<Evidence> {
    let (Some(entry), Some(info)) = (track.entry(), track.info()) else {
        return Vec::new();
    };
    let future = match catch_unwind(AssertUnwindSafe(|| entry.tool.evidence(&info.args))) {
        Ok(future) => future,
        Err(_) => return Vec::new(),
    };
    let mut evidence = futures_util::FutureExt::catch_unwind(AssertUnwindSafe(future))
        .await
        .unwrap_or_default();
    evidence.truncate(EVIDENCE_ITEMS_MAX);
    evidence
}

/// The write-ahead rule (I1): appends `started` for every call in `group`, then waits until
/// all of them are durable, with one sync for the group. Nothing else makes `started` durable,
/// and no body starts except after this returns. Each `started` carries the call's idempotency
/// key and the evidence its tool gave (gathered first, call by call, before anything is
/// appended).
pub(crate) async fn write_ahead(ctx: &Ctx, group: Vec<Starting<'_>>) -> Result<(), RuntimeError> {
    let log = &ctx.log;
    let mut last = 0;
    let mut gathered = Vec::with_capacity(group.len());
    for s in &group {
        gathered.push(gather_evidence(s.track).await);
    }
    for (s, evidence) in group.into_iter().zip(gathered) {
        let (attempt, resources) = (s.attempt, s.resources.clone());
        let key = idempotency_key(&ctx.session_id, s.track.call());
        // The key and the evidence move into `started` and back out for the body.
        let (seq, (idempotency_key, evidence)) = s.track.transition_with(
            log,
            CallState::Started,
            attempt,
            |call, source_seqs| {
                Event::Started(CallStarted {
                    call,
                    attempt,
                    resources,
                    idempotency_key: key,
                    evidence,
                    source_seqs,
                })
            },
            |started| match started {
                Event::Started(started) => (started.idempotency_key, started.evidence),
                _ => unreachable!("built as started just above"),
            },
        )?;
        s.track.set_start(StartInfo {
            session_id: ctx.session_id.clone(),
            idempotency_key,
            evidence,
        });
        last = seq;
    }
    // The mutant: `started` appended but left to ride on a later sync (I1 broken on purpose).
    if last > 0 && !ctx.config.failpoints.mutant("mutant.started_not_synced") {
        log.sync_through(last).await?;
    }
    Ok(())
}

/// Runs the body, attempt after attempt, each behind a durable `started` (the first one written
/// by the caller's group start when `first_started`). Cancellation comes from `cancel` (the
/// batch's token) or the timeout; either way the body is awaited until it settles.
pub(crate) async fn run_body(
    ctx: &Ctx,
    entry: &Arc<Entry>,
    info: &Arc<CallInfo>,
    resources: &Resources,
    track: &mut Track,
    cancel: &CancellationToken,
    first_started: bool,
) -> Result<BodyRun, RuntimeError> {
    let config = &ctx.config;
    let timeout_ms = entry.tool.timeout_ms().unwrap_or(config.timeout_ms);
    let clock = tokio::time::Instant::now();
    let mut earlier_effects = Vec::new();
    let attempts_max = if entry.tool.is_retry_safe() {
        config.attempts_max.max(1)
    } else {
        1
    };
    let late = started_after_body(ctx);
    // Attempts an earlier run started (a resume re-running a call that may have run) keep
    // their numbers: this run's first attempt comes after them.
    let before = track
        .attempt()
        .saturating_sub(u32::from(first_started && !late));
    let mut attempt = before;
    loop {
        attempt += 1;
        // This attempt's `started` is ours to write, unless the group start wrote it.
        let own_start = attempt > before + 1 || !first_started;
        if own_start && !late {
            // A retry's own start (boxed: see `Attempt::run`'s late start).
            let group = vec![Starting {
                track: &mut *track,
                attempt,
                resources,
            }];
            Box::pin(write_ahead(ctx, group)).await?;
        }
        if cancel.is_cancelled() {
            // `started` is durable but the body never ran: say exactly that.
            return Ok(BodyRun {
                result: Err(ToolError::new(
                    ErrorCode::Aborted,
                    "the batch was stopped after this call's start was journaled and before its \
                     body ran; it did not run",
                )),
                attempts: attempt,
                duration_ms: clock.elapsed().as_millis() as u64,
                earlier_effects,
            });
        }
        if let Some(cause) = ctx.log.journal().poisoned() {
            // Another call's record failed to reach the journal after this one's `started` was
            // durable and before its body was first polled (bodies of a group start one by one
            // in this task). Nothing starts after a journal failure (I10): the body never runs,
            // and recovery, which cannot know that, says TOOL_OUTCOME_UNKNOWN.
            return Err(RuntimeError::Journal(journal::JournalError::Poisoned(
                cause,
            )));
        }
        assert_started_durable(ctx, track, late);
        let run = Attempt {
            ctx,
            entry,
            info,
            resources,
            timeout_ms,
            number: attempt,
        };
        let (joined, timed_out) = run.run(track, cancel, late && own_start).await?;
        let result = body_result(joined, timed_out, timeout_ms);
        let retry = matches!(&result, Err(e) if e.retryable)
            && attempt - before < attempts_max
            && !timed_out
            && !cancel.is_cancelled();
        if retry {
            if let Err(e) = result {
                earlier_effects.extend(e.side_effects);
            }
            Box::pin(tokio::time::sleep(Duration::from_millis(
                config.retry_backoff_ms * u64::from(attempt),
            )))
            .await;
            continue;
        }
        return Ok(BodyRun {
            result,
            attempts: attempt,
            duration_ms: clock.elapsed().as_millis() as u64,
            earlier_effects,
        });
    }
}

/// The write-ahead rule (I1), checked where it matters: right before a body is made and first
/// polled, its `started` record is durable.
fn assert_started_durable(ctx: &Ctx, track: &Track, late: bool) {
    // Skipped under the two mutants that break I1 on purpose (`started` after the body, or
    // never synced): the fuzz campaign must catch those from the journal alone. (Tried: without
    // the skip this panic becomes a fault before the body runs, and `started_not_synced`
    // survives the campaign.)
    if late || ctx.config.failpoints.mutant("mutant.started_not_synced") {
        return;
    }
    // assert: an uncontended lock and two loads per attempt, next to an fsync; a body running
    // ahead of its `started` is the one thing recovery can never see, so every fuzz case that
    // reaches a body checks it.
    let durable = ctx.log.journal().stats().durable_seq;
    assert!(
        durable >= track.last_seq(),
        "{}: its body is about to run but its `started` (seq {}) is not durable (durable \
         through seq {durable}) (I1)",
        track.call(),
        track.last_seq()
    );
}

/// One attempt of a call's body.
struct Attempt<'a> {
    ctx: &'a Ctx,
    entry: &'a Arc<Entry>,
    info: &'a Arc<CallInfo>,
    resources: &'a Resources,
    timeout_ms: u64,
    /// 1 for the first attempt.
    number: u32,
}

impl Attempt<'_> {
    /// Makes the body and polls it to its end (see [`Attempt::join`]); with `late_start` (the
    /// mutant), journals `started` only then. Returns how the body ended and whether the timeout
    /// fired.
    async fn run(
        &self,
        track: &mut Track,
        cancel: &CancellationToken,
        late_start: bool,
    ) -> Result<(Joined, bool), RuntimeError> {
        let (ctx, info) = (self.ctx, self.info);
        let token = cancel.child_token();
        // If this future is dropped (a caller gave up on the batch), the body is at least told
        // to stop; it cannot be awaited from a drop. Callers should cancel, not drop.
        let _stop_if_dropped = token.clone().drop_guard();
        let (sink, mut progress) = ProgressSink::channel();
        let processes = crate::tool::ProcessLog {
            log: ctx.log.clone(),
            info: info.clone(),
        };
        let ctx_for_tool = ToolContext::new(
            token.clone(),
            sink,
            self.number,
            processes,
            info.answer.clone(),
            track.take_start(),
        );
        // Polled right here, in the scheduler's task (no task of its own to spawn and join); a
        // panicking body is caught at each poll and becomes TOOL_PANICKED.
        let made = catch_unwind(AssertUnwindSafe(|| {
            self.entry.tool.execute(info.args.clone(), ctx_for_tool)
        }));
        let mut body = Body(None);
        let (joined, timed_out) = match made {
            Err(panic) => (Err(panic), false),
            Ok(fut) => {
                body.0 = Some(fut);
                self.join(&mut body, &mut progress, &token).await
            }
        };
        if late_start {
            // The mutant: `started` only after the body ran (I1 broken on purpose). Boxed, as
            // every path no call takes normally: an await's future is part of this one's, and
            // this one is moved whole wherever it goes.
            let group = vec![Starting {
                track: &mut *track,
                attempt: self.number,
                resources: self.resources,
            }];
            Box::pin(write_ahead(ctx, group)).await?;
        }
        // Progress that arrived before the result is delivered; anything later has no receiver.
        while let Some(message) = progress.try_recv() {
            notify_progress(
                &ctx.hooks.observers,
                &info.call,
                &info.tool,
                &message,
                &ctx.stats,
            );
        }
        Ok((joined, timed_out))
    }

    /// Polls `body` until it finishes, delivering progress as it comes; cancels its token at
    /// the timeout and keeps waiting (saying so when it outlives the grace). Returns how it
    /// ended and whether the timeout fired.
    async fn join(
        &self,
        body: &mut Body<'_>,
        progress: &mut ProgressReceiver,
        token: &CancellationToken,
    ) -> (Joined, bool) {
        // Most bodies finish on their first poll: then no timer is ever set. (A zero timeout
        // must cancel before the body runs, as a timer already due would.)
        if self.timeout_ms != 0 {
            if let Some(joined) = std::future::poll_fn(|cx| Poll::Ready(body.poll_once(cx))).await {
                return (joined, false);
            }
        }
        // Boxed: its timers and `select!` would otherwise sit in every call's future, which
        // the scheduler moves whole, for the bodies that finish at once as much as the others.
        Box::pin(self.join_waiting(body, progress, token)).await
    }

    /// [`Attempt::join`] for a body that did not finish on its first poll.
    async fn join_waiting(
        &self,
        body: &mut Body<'_>,
        progress: &mut ProgressReceiver,
        token: &CancellationToken,
    ) -> (Joined, bool) {
        let (ctx, info) = (self.ctx, self.info);
        let config = &ctx.config;
        let mut timed_out = false;
        let deadline = tokio::time::sleep(Duration::from_millis(self.timeout_ms));
        tokio::pin!(deadline);
        // Armed once the token is cancelled: how long the tool may take to stop before we say
        // it ignores cancellation (we keep waiting; it may be mid-write).
        let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
        loop {
            tokio::select! {
                biased;
                joined = std::future::poll_fn(|cx| match body.poll_once(cx) {
                    Some(joined) => Poll::Ready(joined),
                    None => Poll::Pending,
                }) => return (joined, timed_out),
                message = progress.recv() => notify_progress(&ctx.hooks.observers, &info.call, &info.tool, &message, &ctx.stats),
                _ = &mut deadline, if !timed_out => {
                    timed_out = true;
                    token.cancel();
                }
                _ = token.cancelled(), if grace.is_none() => {
                    if config.failpoints.mutant("mutant.settled_before_effect") {
                        // The mutant: settled as stopped without waiting for the body to stop
                        // (DESIGN.md §5 broken on purpose); the body is dropped.
                        return (Ok(Err(ToolError::new(ErrorCode::Aborted, "stopped"))), timed_out);
                    }
                    grace = Some(Box::pin(tokio::time::sleep(Duration::from_millis(config.cancel_grace_ms))));
                }
                _ = async { if let Some(grace) = grace.as_mut() { grace.await } }, if grace.as_ref().is_some_and(|g| !g.is_elapsed()) => {
                    ctx.stats.ignored_cancellation();
                    tracing::warn!(call = %info.call, tool = %info.tool, grace_ms = config.cancel_grace_ms,
                        "the tool ignores cancellation; waiting for it to settle before releasing its resources");
                }
            }
        }
    }
}

/// The body's end as a result: a tool's error made honest (see [`honest_error`]), a panic as
/// TOOL_PANICKED.
fn body_result(joined: Joined, timed_out: bool, timeout_ms: u64) -> Result<ToolOutput, ToolError> {
    match joined {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(e)) => Err(honest_error(e, timed_out, timeout_ms)),
        Err(panic) => Err(ToolError::new(
            ErrorCode::ToolPanicked,
            format!("the tool panicked: {}", panic_message(panic.as_ref())),
        )),
    }
}

/// The deliberately broken variant the fuzz campaign must catch: `started` written after the
/// body. Compiled only with the `mutant` feature, and even then only when a test enables the
/// `mutant.started_after_body` failpoint.
pub(crate) fn started_after_body(ctx: &Ctx) -> bool {
    #[cfg(feature = "mutant")]
    {
        ctx.config.failpoints.enabled("mutant.started_after_body")
    }
    #[cfg(not(feature = "mutant"))]
    {
        let _ = ctx;
        false
    }
}

/// A tool body being polled in the caller's task, with a panic in any poll caught (the body is
/// then dropped, never polled again).
struct Body<'a>(Option<ToolFuture<'a>>);

type Joined = Result<Result<ToolOutput, ToolError>, Box<dyn Any + Send>>;

impl Body<'_> {
    /// Polls the body once; `Some` when it finished or panicked.
    fn poll_once(&mut self, cx: &mut Context<'_>) -> Option<Joined> {
        let fut = self.0.as_mut()?;
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => None,
            Ok(Poll::Ready(result)) => {
                self.0 = None;
                Some(Ok(result))
            }
            Err(panic) => {
                // Its state is unknown: drop it here, where a second panic is caught too.
                let fut = self.0.take();
                let _ = catch_unwind(AssertUnwindSafe(move || drop(fut)));
                Some(Err(panic))
            }
        }
    }
}

/// A tool may not speak for the runtime (see `ErrorCode::tool_may_report`), and an error after
/// a timeout is reported as the timeout, unless the tool says its outcome is unknown: that is
/// what a caller must act on (never re-run blindly), so it keeps the code.
fn honest_error(mut e: ToolError, timed_out: bool, timeout_ms: u64) -> ToolError {
    if !e.code.tool_may_report() {
        e.message = format!("the tool reported {} about itself: {}", e.code, e.message);
        e.code = ErrorCode::ToolFailed;
    }
    if timed_out {
        e.message = format!("timed out after {timeout_ms} ms: {}", e.message);
        if e.code != ErrorCode::ToolOutcomeUnknown {
            e.code = ErrorCode::Timeout;
        }
    }
    e
}

/// The body's result after the contract check, in both forms: the journal's outcome and the
/// draft post-execute sees. An inline outcome's text is the draft's: [`Settled::lend`] moves it
/// into the outcome for its `settled`, [`ForModel::take_back`] moves it back.
pub(crate) struct Settled {
    pub outcome: Outcome,
    pub for_model: ForModel,
}

impl Settled {
    /// The outcome, with the draft's text lent to it when it is journaled inline; and what the
    /// model's result is made of, without that text until it is taken back.
    pub(crate) fn lend(self) -> (Outcome, ForModel) {
        let Settled {
            mut outcome,
            mut for_model,
        } = self;
        if let Text::Inline(text) = &mut outcome.content {
            *text = std::mem::take(&mut for_model.draft.content);
        }
        (outcome, for_model)
    }
}

impl ForModel {
    /// Takes back the text [`Settled::lend`] lent to the outcome, from the `settled` it went
    /// into (a preview lent nothing).
    pub(crate) fn take_back(&mut self, settled: Event) {
        if let Event::Settled {
            outcome:
                Outcome {
                    content: Text::Inline(text),
                    ..
                },
            ..
        } = settled
        {
            self.draft.content = text;
        }
    }
}

/// What post-execute and `finalize_content` work on (apart from the journal's outcome, so that
/// the outcome can move into its event instead of being copied).
pub(crate) struct ForModel {
    pub draft: Draft,
    pub details: Option<Value>,
    pub error: Option<(ErrorCode, String)>,
}

/// Checks the output contract and builds the `settled` outcome.
pub(crate) fn settle(
    entry: &Entry,
    run: BodyRun,
    resources: &Resources,
    inline_max: usize,
) -> Settled {
    let mut side_effects = run.earlier_effects;
    let (content, value, details, error) = match run.result {
        Ok(output) => {
            side_effects.extend(output.side_effects);
            let violation = match (&entry.output, &output.value) {
                (None, _) => None,
                (Some(_), None) => Some("the tool returned no structured value".to_owned()),
                (Some(schema), Some(v)) => schema.check(v).err().map(|v| v.to_string()),
            };
            let error = violation.map(|v| {
                (
                    ErrorCode::OutputSchemaViolation,
                    format!("the tool's result does not match its output schema: {v}"),
                )
            });
            (output.content, output.value, output.details, error)
        }
        Err(e) => {
            side_effects.extend(e.side_effects);
            (e.message.clone(), None, None, Some((e.code, e.message)))
        }
    };
    let status = match &error {
        None => OutcomeStatus::Success,
        Some((code, message)) => OutcomeStatus::Error {
            code: *code,
            message: message.clone(),
        },
    };
    let outcome = Outcome {
        status,
        // A text that fits is journaled as it is: the draft's own, lent when `settled` is
        // written (`Settled::lend`), not copied here.
        content: if content.len() <= inline_max {
            Text::Inline(String::new())
        } else {
            inline_or_preview(&content, inline_max)
        },
        value: value.as_ref().map(Value::to_string),
        details: details.as_ref().map(Value::to_string),
        side_effects,
        attempts: run.attempts,
        duration_ms: run.duration_ms,
    };
    Settled {
        outcome,
        for_model: ForModel {
            draft: Draft {
                content,
                value,
                is_error: error.is_some(),
                resources: resources.clone(),
            },
            details,
            error,
        },
    }
}

/// Keeps text inline up to `inline_max` bytes; beyond, a head, a tail and the whole text's hash.
pub(crate) fn inline_or_preview(text: &str, inline_max: usize) -> Text {
    if text.len() <= inline_max {
        return Text::Inline(text.to_owned());
    }
    let head_end = floor_char_boundary(text, PREVIEW_BYTES.min(inline_max / 2));
    let tail_start = ceil_char_boundary(text, text.len() - PREVIEW_BYTES.min(inline_max / 2));
    Text::Preview {
        head: text[..head_end].to_owned(),
        tail: text[tail_start..].to_owned(),
        total_bytes: text.len() as u64,
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
        locator: None,
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Post-execute, then `finalize_content` exactly once, then the frozen result.
pub(crate) fn finish(
    entry: &Entry,
    info: &CallInfo,
    for_model: ForModel,
    post_execute: &[Arc<dyn PostExecute>],
    spilled: Option<&str>,
    model_inline_bytes_max: usize,
) -> ToolResult {
    let ForModel {
        mut draft,
        details,
        mut error,
    } = for_model;
    let mut replaced = false;
    if error.is_none() {
        for listener in post_execute {
            let decision = catch_unwind(AssertUnwindSafe(|| listener.inspect(info, &draft)));
            match decision {
                Ok(PostDecision::Accept) => {}
                Ok(PostDecision::ReplaceContent(content)) => {
                    draft.content = content;
                    replaced = true;
                }
                Ok(PostDecision::ReplaceValue(value)) => {
                    if let Some(Err(v)) = entry.output.as_ref().map(|s| s.check(&value)) {
                        error = Some((
                            ErrorCode::OutputSchemaViolation,
                            format!(
                                "post-execute listener {} replaced the value with one that does not match the output schema: {v}",
                                listener.name()
                            ),
                        ));
                        break;
                    }
                    draft.content =
                        serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
                    draft.value = Some(value);
                    replaced = true;
                }
                Ok(PostDecision::Block { feedback }) => {
                    error = Some((
                        ErrorCode::PostExecuteBlocked,
                        format!("blocked by {}: {feedback}", listener.name()),
                    ));
                    break;
                }
                Err(panic) => {
                    // Fail closed: a listener that could not inspect the result may have been
                    // the one meant to redact it.
                    tracing::warn!(listener = listener.name(), "post-execute listener panicked");
                    error = Some((
                        ErrorCode::PostExecuteBlocked,
                        format!(
                            "post-execute listener {} failed ({}); the result is withheld",
                            listener.name(),
                            panic_message(panic.as_ref())
                        ),
                    ));
                    break;
                }
            }
        }
    }
    // The model's copy of a large result: head, tail and locator; with no store, a cut with a
    // note (the record must fit the journal). A listener's replacement is its own business.
    if !replaced && draft.content.len() > model_inline_bytes_max {
        draft.content = match spilled {
            Some(locator) => crate::spill::preview(&draft.content, locator, model_inline_bytes_max),
            None if draft.content.len() > CONTENT_BYTES_MAX => crate::spill::preview(
                &draft.content,
                "(not kept: no spill store)",
                CONTENT_BYTES_MAX,
            ),
            None => draft.content,
        };
    }
    let message_error = error.map(|(code, message)| {
        if message.len() > CONTENT_BYTES_MAX {
            (
                code,
                crate::spill::preview(&message, "(not kept)", CONTENT_BYTES_MAX),
            )
        } else {
            (code, message)
        }
    });
    let (content, is_error, code) = finalize(entry, draft.content, message_error);
    ToolResult {
        call_id: info.call.call_id.clone(),
        content,
        value: if is_error { None } else { draft.value },
        details,
        is_error,
        code,
    }
}

/// Gives a call that did not run its result: the code first, and the tool's
/// `finalize_content` applied once to the message when the tool is known.
pub(crate) fn set_error_result(track: &mut Track, code: ErrorCode, message: String) {
    let (content, is_error, code) = match track.entry() {
        Some(entry) => finalize(entry, String::new(), Some((code, message))),
        None => (error_content(code, &message), true, Some(code)),
    };
    let result = ToolResult {
        call_id: track.call().call_id.clone(),
        content,
        value: None,
        details: None,
        is_error,
        code,
    };
    track.set_result(result);
}

/// Calls the tool's `finalize_content` exactly once: on the content, or on an error's message
/// (the code is put back in front afterwards, so the model always sees it first).
pub(crate) fn finalize(
    entry: &Entry,
    content: String,
    error: Option<(ErrorCode, String)>,
) -> (String, bool, Option<ErrorCode>) {
    let tool = &entry.tool;
    match error {
        None => match catch_unwind(AssertUnwindSafe(|| tool.finalize_content(content))) {
            Ok(content) => (content, false, None),
            Err(panic) => (
                error_content(
                    ErrorCode::ToolPanicked,
                    &format!(
                        "finalize_content panicked: {}",
                        panic_message(panic.as_ref())
                    ),
                ),
                true,
                Some(ErrorCode::ToolPanicked),
            ),
        },
        Some((code, message)) => {
            let message = catch_unwind(AssertUnwindSafe(|| tool.finalize_content(message.clone())))
                .unwrap_or(message);
            (error_content(code, &message), true, Some(code))
        }
    }
}

fn notify_progress(
    observers: &[Arc<dyn Observer>],
    call: &CallRef,
    tool: &str,
    message: &str,
    stats: &Stats,
) {
    for observer in observers {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            observer.on_progress(call, tool, message)
        }));
        stats.observer_outcome(observer.name(), outcome);
    }
}
