//! The agent loop: a turn of a live model against a session, every request journaled.
//!
//! A turn is steps: each step asks the [`Model`] for an assistant message, runs its calls
//! as a batch, and feeds their results to the next step, until the model stops asking for
//! tools, the user stops the turn, a provider error ends it, or the steps run out.
//!
//! Per step, in order: `step/start` and `step/tools` (with `tool/schema` for a schema not yet
//! recorded), then per attempt `llm/request` (hash and size of the body, synced: the results
//! the request carries are durable before the model sees them), then either the answer
//! (`llm/response`, `llm/response-detail`, the batch) or `llm/attempt-failed`. What failed:
//! - a transport failure, a stream cut short, a first byte or next piece slower than
//!   `idle_timeout_ms`, or 408/409/429/5xx: retried after a backoff (exponential, jittered, at
//!   least the provider's `Retry-After`) while attempts remain. The broken attempt's partial
//!   text is kept in `llm/attempt-failed` and never enters the history; none of its calls run,
//!   even those whose arguments arrived whole (the answer as a whole did not);
//! - an attempt still streaming at `attempt_timeout_ms` (events that say nothing keep the idle
//!   rule content, so only a deadline ends a stream that never ends): retried once, not more
//!   (a second attempt that runs as long says the provider is not going to finish);
//! - anything else (400, 401, 403, 404, an unreadable body) or the last attempt: the provider's
//!   message ends the step and the turn as failed ([`TurnEnd::Failed`]).
//!
//! The user's stop ([`Agent::run_turn`]'s token) during a backoff ends the turn at once; during
//! a stream it keeps what arrived as the step's assistant message with stop reason
//! `interrupted` (its calls never run), so the model sees what it had said.
//!
//! The conversation the loop sends is kept beside the journal as the steps go, and rendered by
//! the same code as `recover rebuild` (the `history` crate), so after any completed step the
//! last request plus its answer is what `rebuild` prints for the journal.

mod assemble;
mod backoff;
mod calibrate;
mod reduce;

use crate::event::{
    LlmAttemptFailed, LlmRequest, ModelResponse, SessionModel, StepOutcome, StopReason, TurnOutcome,
};
use crate::model::{
    ConvCall, ConvResult, Conversation, Message, Model, ModelError, ModelErrorKind, ModelEvent,
    ModelRequest, ModelSettings, ProviderState,
};
use crate::result::ToolResult;
use crate::session::Session;
use crate::RuntimeError;
use assemble::Assembly;
use futures_util::StreamExt;
use history::layout::{layout, Compaction, StepView, TurnView};
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Limits and settings of the loop.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Steps (requests answered) per turn before the loop ends the turn.
    pub steps_max: u32,
    /// Attempts per step's request, the first included.
    pub attempts_max: u32,
    /// The first backoff; each retry doubles it.
    pub backoff_base_ms: u64,
    /// The longest backoff; a provider asking to wait longer is a failure, not a wait.
    pub backoff_max_ms: u64,
    /// The longest wait for the response to begin or for its next piece.
    pub idle_timeout_ms: u64,
    /// The longest an attempt may take as a whole, from its request to its last event.
    pub attempt_timeout_ms: u64,
    /// The system prompt sent with every request.
    pub system: Option<String>,
    /// Settings sent with every request.
    pub settings: ModelSettings,
    /// The model's context window, in tokens, when known (a table per model, or configured):
    /// a request estimated past `compact_at_percent` of it is reduced before it is sent.
    pub context_window_tokens: Option<u64>,
    /// The share of the context window (in %) a request may reach before it is reduced.
    pub compact_at_percent: u32,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            steps_max: 50,
            attempts_max: 4,
            backoff_base_ms: 500,
            backoff_max_ms: 30_000,
            // As long as the adapters' read timeout: a reasoning model may think for minutes
            // before its first token.
            idle_timeout_ms: 600_000,
            attempt_timeout_ms: ATTEMPT_TIMEOUT_MS_DEFAULT,
            system: None,
            settings: ModelSettings::default(),
            context_window_tokens: None,
            compact_at_percent: 80,
        }
    }
}

/// How long an attempt may take as a whole, by default: an hour, the longest answer a model
/// writes today (128k tokens) at a slow 40 tokens a second, after minutes of thinking.
pub(crate) const ATTEMPT_TIMEOUT_MS_DEFAULT: u64 = 3_600_000;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model stopped asking for tools.
    Completed,
    /// The user stopped it.
    Stopped,
    /// A provider error ended it (shown verbatim), or the attempts ran out.
    Failed(String),
    /// It used `steps_max` steps.
    StepsExhausted,
    /// The provider refused the answer (the step's `llm/refusal`); the turn is over.
    Refused(crate::event::LlmRefusal),
}

/// What the loop tells whoever shows the session, as it happens.
#[derive(Debug)]
pub enum AgentEvent<'a> {
    /// A step began.
    Step {
        /// The turn.
        turn: u32,
        /// The step.
        step: u32,
    },
    /// A piece of the model's answer as it streams.
    Stream(&'a ModelEvent),
    /// An attempt failed; `retry_in_ms` when another follows.
    AttemptFailed {
        /// The attempt that failed.
        attempt: u32,
        /// The error, as shown.
        error: &'a ModelError,
        /// The wait before the next attempt, if there is one.
        retry_in_ms: Option<u64>,
    },
    /// The step's assistant message, as journaled.
    Response(&'a ModelResponse),
    /// The batch's results, in model order.
    Results(&'a [ToolResult]),
    /// The conversation was reduced before the step's request (`context/compacted`).
    Reduced(&'a crate::event::ContextCompacted),
}

/// Whoever shows a session: a terminal, a log. Every method has a default that does nothing.
pub trait Observer: Send {
    /// Called as the loop goes.
    fn on(&mut self, _event: AgentEvent<'_>) {}
}

/// An observer that shows nothing.
impl Observer for () {}

/// A live model driving a session, turn by turn.
pub struct Agent {
    model: Box<dyn Model>,
    config: AgentConfig,
    /// The conversation by journal turn, as `recover` lays it out too.
    turns: Vec<TurnView>,
    /// How requests are reduced (the latest `context/compacted`), if they are.
    compaction: Option<Compaction>,
    /// The turn in which a reduction before a request (the threshold) found nothing to reduce:
    /// not tried again in that turn, so a session does not ask for a summary at every step.
    threshold_spent_turn: Option<u32>,
    /// The (turn, step) that last asked the model for a summary: one per step at most.
    summary_asked: Option<(u32, u32)>,
    /// The provider's latest count of a refused request (`context/calibrated`): windows are
    /// set against the estimate by it.
    calibration: Option<crate::event::ContextCalibrated>,
}

/// What one step's request came to.
enum Asked {
    /// An answer to run (whole, or what arrived before the user's stop).
    Answer(Assembly, u32),
    /// The user stopped before any answer.
    Stopped,
    /// The request failed for good.
    Failed(String),
    /// The provider refused the request as longer than the context window (at this attempt).
    Overflow(String, u32),
}

/// What one attempt's stream came to.
enum Streamed {
    Whole(Assembly),
    Stopped(Assembly),
    Broken(ModelError, Assembly),
    /// The attempt's deadline came while it went on.
    Late(ModelError, Assembly),
}

impl Agent {
    /// A loop over `model`, starting a new conversation.
    pub fn new(model: Box<dyn Model>, config: AgentConfig) -> Agent {
        Agent {
            model,
            config,
            turns: Vec::new(),
            compaction: None,
            threshold_spent_turn: None,
            summary_asked: None,
            calibration: None,
        }
    }

    /// Continues a resumed session: its turns and latest reduction, as `recover` read them
    /// (`Analysis::turns`, `SessionReplay::compaction`). The configured system prompt is used.
    pub fn with_history(mut self, turns: Vec<TurnView>, compaction: Option<Compaction>) -> Agent {
        self.turns = turns;
        self.compaction = compaction;
        self
    }

    /// Continues with the provider's latest count of a refused request, as the journal says
    /// (`SessionReplay::calibration`): a resumed session estimates as the live one did.
    pub fn with_calibration(
        mut self,
        calibration: Option<crate::event::ContextCalibrated>,
    ) -> Agent {
        self.calibration = calibration;
        self
    }

    /// The conversation the next request carries: the turns so far, reduced as the latest
    /// reduction says.
    pub fn conversation(&self) -> Conversation {
        layout(
            self.config.system.clone(),
            &self.turns,
            self.compaction.as_ref(),
        )
    }

    /// Runs one turn: the user says `user_text`, then steps until the turn ends. `stop` is the
    /// user's stop button. Errors are the session's (the journal failed, a misuse); a provider's
    /// failure is a [`TurnEnd::Failed`].
    pub async fn run_turn(
        &mut self,
        session: &mut Session,
        user_text: &str,
        stop: &CancellationToken,
        observer: &mut dyn Observer,
    ) -> Result<TurnEnd, RuntimeError> {
        let provider = self.model.provider().to_owned();
        session.record_model(SessionModel {
            note: dropped_state_note(&self.conversation(), &provider),
            provider,
            model: self.model.model().to_owned(),
            system: self.config.system.clone(),
            settings: self.config.settings.clone(),
            base_url: self.model.base_url(),
        })?;
        session.begin_turn(user_text)?;
        self.turns.push(TurnView {
            turn: session.turn(),
            user_text: user_text.to_owned(),
            steps: Vec::new(),
        });
        for _ in 0..self.config.steps_max {
            if stop.is_cancelled() {
                session.end_turn(TurnOutcome::Cancelled).await?;
                return Ok(TurnEnd::Stopped);
            }
            let step = session.begin_step()?;
            observer.on(AgentEvent::Step {
                turn: session.turn(),
                step,
            });
            let (asked, reduced) = match self.reduce_early(session, step, stop, observer).await? {
                reduce::Early::Stopped => (Asked::Stopped, true),
                reduce::Early::Go { reduced } => {
                    let request = self.request(session, step);
                    (
                        self.ask(session, &request, 1, stop, observer).await?,
                        reduced,
                    )
                }
            };
            let asked = match asked {
                Asked::Overflow(message, attempt) => {
                    self.after_overflow(session, step, message, attempt, reduced, stop, observer)
                        .await?
                }
                asked => asked,
            };
            match asked {
                Asked::Answer(assembly, attempt) => {
                    if let Some(end) = self
                        .run_answer(session, assembly, attempt, stop, observer)
                        .await?
                    {
                        return Ok(end);
                    }
                }
                Asked::Stopped => {
                    session.end_step(StepOutcome::Cancelled)?;
                    session.end_turn(TurnOutcome::Cancelled).await?;
                    return Ok(TurnEnd::Stopped);
                }
                Asked::Overflow(message, _) | Asked::Failed(message) => {
                    session.end_step(StepOutcome::Failed {
                        message: message.clone(),
                    })?;
                    session
                        .end_turn(TurnOutcome::Failed {
                            message: message.clone(),
                        })
                        .await?;
                    return Ok(TurnEnd::Failed(message));
                }
            }
        }
        session
            .end_turn(TurnOutcome::Failed {
                message: format!(
                    "the turn used its {} steps; say how to go on",
                    self.config.steps_max
                ),
            })
            .await?;
        Ok(TurnEnd::StepsExhausted)
    }

    /// Journals and runs one answer; `Some` when it ends the turn.
    async fn run_answer(
        &mut self,
        session: &mut Session,
        assembly: Assembly,
        attempt: u32,
        stop: &CancellationToken,
        observer: &mut dyn Observer,
    ) -> Result<Option<TurnEnd>, RuntimeError> {
        let response = assembly.response(StopReason::Interrupted);
        let detail = assembly.detail(
            session.turn(),
            session.step(),
            attempt,
            self.model.provider(),
        );
        observer.on(AgentEvent::Response(&response));
        let state = detail
            .provider_state
            .clone()
            .map(|(format, items)| ProviderState { format, items });
        let step = StepView {
            step: session.step(),
            text: response.text.clone(),
            calls: response
                .tool_calls
                .iter()
                .map(|c| ConvCall {
                    id: c.call_id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            state,
            results: Vec::new(),
        };
        let (turn, step_n) = (session.turn(), session.step());
        let details = crate::session::ResponseDetails {
            detail: Some(detail),
            refusal: assembly.refusal(turn, step_n, attempt),
            notes: assembly.notes(turn, step_n, attempt),
        };
        let refusal = details.refusal.clone();
        let results = session
            .run_response(response.clone(), details, stop.clone())
            .await?;
        observer.on(AgentEvent::Results(&results));
        let step = StepView {
            results: response
                .tool_calls
                .iter()
                .zip(&results)
                .map(|(call, result)| ConvResult {
                    id: call.call_id.clone(),
                    name: call.name.clone(),
                    content: result.content.clone(),
                    is_error: result.is_error,
                })
                .collect(),
            ..step
        };
        if let Some(turn) = self.turns.last_mut() {
            turn.steps.push(step);
        }
        if stop.is_cancelled() {
            session.end_step(StepOutcome::Cancelled)?;
            session.end_turn(TurnOutcome::Cancelled).await?;
            return Ok(Some(TurnEnd::Stopped));
        }
        session.end_step(StepOutcome::Completed)?;
        if response.stop_reason == StopReason::ToolUse && !response.tool_calls.is_empty() {
            return Ok(None);
        }
        session.end_turn(TurnOutcome::Completed).await?;
        match refusal {
            Some(refusal) => Ok(Some(TurnEnd::Refused(refusal))),
            None => Ok(Some(TurnEnd::Completed)),
        }
    }

    /// The step's request, attempt after attempt.
    /// The step's request as the conversation stands.
    fn request(&self, session: &Session, step: u32) -> ModelRequest {
        ModelRequest {
            turn: session.turn(),
            step,
            conversation: self.conversation(),
            tools: session.step_tool_specs(),
            settings: self.config.settings.clone(),
        }
    }

    /// The step's request, attempt after attempt, numbered from `first_attempt` (a request
    /// retried after a reduction goes on with the step's numbering).
    async fn ask(
        &mut self,
        session: &mut Session,
        request: &ModelRequest,
        first_attempt: u32,
        stop: &CancellationToken,
        observer: &mut dyn Observer,
    ) -> Result<Asked, RuntimeError> {
        let attempts_max = self.config.attempts_max.max(1);
        let last_attempt = first_attempt.saturating_add(attempts_max - 1);
        let mut late_attempts = 0u32;
        for attempt in first_attempt..=last_attempt {
            let body = match self.model.body(request) {
                Ok(body) => body,
                Err(e) => return Ok(Asked::Failed(e.to_string())),
            };
            session
                .record_request(LlmRequest {
                    turn: request.turn,
                    step: request.step,
                    attempt,
                    provider: self.model.provider().to_owned(),
                    model: self.model.model().to_owned(),
                    body_sha256: hex::encode(Sha256::digest(&body)),
                    body_bytes: body.len() as u64,
                })
                .await?;
            let waits = self.waits();
            let (error, partial) =
                match stream_once(self.model.as_mut(), body, waits, stop, observer).await {
                    Streamed::Whole(assembly) => return Ok(Asked::Answer(assembly, attempt)),
                    Streamed::Stopped(assembly) => return Ok(Asked::Answer(assembly, attempt)),
                    Streamed::Broken(error, partial) => (error, partial),
                    Streamed::Late(error, partial) => {
                        late_attempts += 1;
                        (error, partial)
                    }
                };
            // A deadline is retried once: a second attempt as long says the provider will not
            // finish, and every further one would cost the whole deadline again.
            let retryable = error.retryable() && late_attempts < 2;
            let backoff = (retryable && attempt < last_attempt)
                .then(|| {
                    backoff::delay_ms(
                        attempt,
                        error.retry_after_ms,
                        self.config.backoff_base_ms,
                        self.config.backoff_max_ms,
                        0.5 + fastrand::f64() / 2.0,
                    )
                })
                .flatten();
            session.record_attempt_failed(LlmAttemptFailed {
                turn: request.turn,
                step: request.step,
                attempt,
                kind: error.kind,
                status: error.status,
                message: error.message.clone(),
                partial_text: partial.text().to_owned(),
                retry: backoff.is_some(),
                backoff_ms: backoff.unwrap_or(0),
            })?;
            observer.on(AgentEvent::AttemptFailed {
                attempt,
                error: &error,
                retry_in_ms: backoff,
            });
            let Some(backoff_ms) = backoff else {
                if error.kind == ModelErrorKind::ContextOverflow {
                    return Ok(Asked::Overflow(error.to_string(), attempt));
                }
                let waits_too_long = retryable && attempt < last_attempt;
                let tries = attempt + 1 - first_attempt;
                return Ok(Asked::Failed(failure_text(&error, tries, waits_too_long)));
            };
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(Asked::Stopped),
                _ = tokio::time::sleep(Duration::from_millis(backoff_ms)) => {}
            }
        }
        unreachable!("the last attempt returns: a failure there gets no backoff")
    }

    /// How long an attempt may wait, per piece and as a whole.
    fn waits(&self) -> Waits {
        Waits {
            idle_ms: self.config.idle_timeout_ms,
            attempt_ms: self.config.attempt_timeout_ms,
        }
    }
}

/// The two waits of one attempt, in ms.
#[derive(Debug, Clone, Copy)]
struct Waits {
    /// The longest silence: before the response begins, between its pieces.
    idle_ms: u64,
    /// The whole attempt.
    attempt_ms: u64,
}

/// What a change of provider leaves behind: provider state is sent back only to the provider
/// that produced it (the renderers drop the rest), and the journal says so.
fn dropped_state_note(conversation: &Conversation, provider: &str) -> Option<String> {
    let mut dropped: Vec<&str> = conversation
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant {
                state: Some(state), ..
            } if state.format != provider => Some(state.format.as_str()),
            _ => None,
        })
        .collect();
    let answers = dropped.len();
    if answers == 0 {
        return None;
    }
    dropped.sort_unstable();
    dropped.dedup();
    Some(format!(
        "the provider state of {answers} earlier answer(s) (from {}) is not sent to {provider}",
        dropped.join(", ")
    ))
}

/// The turn's closing message for a request that failed for good: `waits_too_long` when
/// attempts remained but the provider asked to wait past the backoff limit.
fn failure_text(error: &ModelError, attempt: u32, waits_too_long: bool) -> String {
    if waits_too_long {
        format!(
            "{error} (the provider asked to wait {} ms, longer than the backoff limit)",
            error.retry_after_ms.unwrap_or(0)
        )
    } else if error.retryable() && attempt > 1 {
        format!("{error} (after {attempt} attempts)")
    } else {
        error.to_string()
    }
}

/// Sends `body` and reads its stream to the end, the user's stop, a failure, or the attempt's
/// deadline.
async fn stream_once(
    model: &mut dyn Model,
    body: Vec<u8>,
    waits: Waits,
    stop: &CancellationToken,
    observer: &mut dyn Observer,
) -> Streamed {
    let mut assembly = Assembly::default();
    let Waits {
        idle_ms,
        attempt_ms,
    } = waits;
    let idle = Duration::from_millis(idle_ms);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(attempt_ms);
    let late = || ModelError {
        kind: ModelErrorKind::Transport,
        status: None,
        retry_after_ms: None,
        message: format!(
            "the attempt was still going on after {attempt_ms} ms, its deadline \
             ([model] attempt_timeout_ms)"
        ),
    };
    let slow = || ModelError {
        kind: ModelErrorKind::Transport,
        status: None,
        retry_after_ms: None,
        message: format!("no response within {idle_ms} ms"),
    };
    let sent = tokio::select! {
        biased;
        _ = stop.cancelled() => return Streamed::Stopped(assembly),
        _ = tokio::time::sleep_until(deadline) => return Streamed::Late(late(), assembly),
        sent = tokio::time::timeout(idle, model.send(body)) => sent,
    };
    let mut stream = match sent {
        Err(_) => return Streamed::Broken(slow(), assembly),
        Ok(Err(e)) => return Streamed::Broken(e, assembly),
        Ok(Ok(stream)) => stream,
    };
    loop {
        let next = tokio::select! {
            biased;
            _ = stop.cancelled() => return Streamed::Stopped(assembly),
            _ = tokio::time::sleep_until(deadline) => return Streamed::Late(late(), assembly),
            next = tokio::time::timeout(idle, stream.next()) => next,
        };
        match next {
            Err(_) => return Streamed::Broken(slow(), assembly),
            Ok(Some(Err(e))) => return Streamed::Broken(e, assembly),
            Ok(None) => {
                let error = ModelError {
                    kind: ModelErrorKind::Transport,
                    status: None,
                    retry_after_ms: None,
                    message: "the stream ended before the response was complete".into(),
                };
                return Streamed::Broken(error, assembly);
            }
            Ok(Some(Ok(event))) => {
                observer.on(AgentEvent::Stream(&event));
                let last = matches!(event, ModelEvent::Stop(_));
                assembly.apply(event);
                if last {
                    return Streamed::Whole(assembly);
                }
            }
        }
    }
}
