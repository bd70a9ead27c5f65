//! Reducing the context a request carries (`context/summary-requested`, `context/compacted`).
//!
//! Why a reduction is journaled before the request it shortens, and never retried in place: a
//! request the provider refused as too long would be refused again as it is. So the loop first
//! records how the conversation is reduced (the earlier turns replaced by the model's summary of
//! them, else left out; older results of the current turn cut to a preview), then sends the
//! reduced request once more, with its own attempts. A second refusal ends the turn: there is no
//! loop of reductions. The same happens before a request whose estimate passes
//! `compact_at_percent` of a known context window, so most sessions never see the refusal.
//!
//! The journal keeps every original message: a reduction changes what is sent, not what is
//! kept. `recover` lays the history out with the same record (`history::layout`), so a resumed
//! session sends what the model last saw (I17). A crash during the summary request leaves a
//! `context/summary-requested` with no `context/compacted` after it: nothing was reduced.

use super::calibrate::overflow_counts;
use super::{stream_once, Agent, AgentEvent, Asked, Observer, Streamed};
use crate::event::{CompactTrigger, ContextCalibrated, ContextCompacted, ContextSummaryRequested};
use crate::model::{ModelRequest, ToolSpec};
use crate::session::Session;
use crate::RuntimeError;
use history::layout::{layout, shorten, Compaction};
use history::reduce::{estimate_tokens, plan_summary_scope, plan_toward, summary_request};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

/// Characters a shortened result keeps (half from each end).
pub(crate) const PREVIEW_CHARS: u32 = 2_000;
/// Longest summary kept, in characters (a longer one is cut like a result).
pub(crate) const SUMMARY_CHARS_MAX: u32 = 40_000;

/// How a step's first request goes out.
pub(super) enum Early {
    /// As the conversation stands now; `reduced` when this step already reduced it.
    Go { reduced: bool },
    /// The user stopped during the reduction.
    Stopped,
}

/// What a reduction came to.
enum Reduced {
    Done,
    /// Nothing (more) can be reduced, and why.
    Impossible(String),
    Stopped,
}

/// What the summary request came to.
enum Summary {
    Text(String),
    Failed(String),
    Stopped,
}

impl Agent {
    /// Before a step's first request: reduces the conversation when its estimate passes
    /// `compact_at_percent` of the model's context window (when that is known).
    pub(super) async fn reduce_early(
        &mut self,
        session: &mut Session,
        step: u32,
        stop: &CancellationToken,
        observer: &mut dyn Observer,
    ) -> Result<Early, RuntimeError> {
        let Some(limit) = self.threshold_tokens() else {
            return Ok(Early::Go { reduced: false });
        };
        if self.threshold_spent_turn == Some(session.turn()) {
            return Ok(Early::Go { reduced: false });
        }
        let request = self.request(session, step);
        let estimate = estimate_tokens(&request.conversation, &request.tools);
        if estimate <= limit {
            return Ok(Early::Go { reduced: false });
        }
        let trigger = CompactTrigger::Threshold;
        Ok(
            match self
                .reduce(session, step, trigger, estimate, stop, observer)
                .await?
            {
                Reduced::Done => Early::Go { reduced: true },
                // Nothing left to reduce: the request goes as it is, and the provider decides;
                // the threshold is not tried again this turn.
                Reduced::Impossible(_) => {
                    self.threshold_spent_turn = Some(session.turn());
                    Early::Go { reduced: false }
                }
                Reduced::Stopped => Early::Stopped,
            },
        )
    }

    /// After the provider refused the step's request as too long (`message`, at `attempt`):
    /// one reduction and one more request, unless this step already reduced (then the turn
    /// ends). Never a loop.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn after_overflow(
        &mut self,
        session: &mut Session,
        step: u32,
        message: String,
        attempt: u32,
        reduced: bool,
        stop: &CancellationToken,
        observer: &mut dyn Observer,
    ) -> Result<Asked, RuntimeError> {
        if reduced {
            return Ok(Asked::Failed(still_too_long(&message)));
        }
        let request = self.request(session, step);
        let estimate = estimate_tokens(&request.conversation, &request.tools);
        // The provider's count of this request, where its error gives one, wins over the
        // estimate for the rest of the session (journaled, so a resume sets it too).
        if let Some((provider_tokens, provider_max_tokens)) = overflow_counts(&message) {
            let calibrated = ContextCalibrated {
                turn: session.turn(),
                step,
                attempt,
                estimate_tokens: estimate.max(1),
                provider_tokens,
                provider_max_tokens,
            };
            session.record_calibration(calibrated.clone())?;
            self.calibration = Some(calibrated);
        }
        let trigger = CompactTrigger::Overflow;
        match self
            .reduce(session, step, trigger, estimate, stop, observer)
            .await?
        {
            Reduced::Stopped => Ok(Asked::Stopped),
            Reduced::Impossible(why) => Ok(Asked::Failed(format!(
                "{message} (the context is longer than the model takes, and {why})"
            ))),
            Reduced::Done => {
                let request = self.request(session, step);
                Ok(
                    match self
                        .ask(session, &request, attempt + 1, stop, observer)
                        .await?
                    {
                        Asked::Overflow(message, _) => Asked::Failed(still_too_long(&message)),
                        asked => asked,
                    },
                )
            }
        }
    }

    /// The model's context window: the most the provider said it takes, else the configured
    /// one (or the known model's).
    fn window_tokens(&self) -> Option<u64> {
        self.calibration
            .as_ref()
            .and_then(|c| c.provider_max_tokens)
            .or(self.config.context_window_tokens)
    }

    /// `tokens` as the provider counts them, in the estimate's units (bytes / 4): scaled by
    /// the provider's latest count of a refused request, as they are without one.
    fn in_estimate(&self, tokens: u64) -> u64 {
        match &self.calibration {
            Some(c) => c.to_estimate(tokens),
            None => tokens,
        }
    }

    /// The estimate past which a request is reduced before it is sent.
    fn threshold_tokens(&self) -> Option<u64> {
        let window = self.window_tokens()?;
        let at = window.saturating_mul(u64::from(self.config.compact_at_percent.min(100))) / 100;
        Some(self.in_estimate(at))
    }

    /// What a reduction aims for: half the context window (room for the answer and the steps
    /// after it), or half the refused request's estimate when the window is unknown. After a
    /// refusal, never more than half the refused request: the provider said it does not fit,
    /// whatever the estimate says.
    fn budget_tokens(&self, estimate: u64, trigger: CompactTrigger) -> u64 {
        let window = self.window_tokens().map(|w| self.in_estimate(w / 2));
        match (window, trigger) {
            (Some(window), CompactTrigger::Threshold) => window,
            (Some(window), CompactTrigger::Overflow) => window.min(estimate / 2),
            (None, _) => estimate / 2,
        }
    }

    /// Reduces the conversation for this step's request, journaling the summary request (if
    /// one is made) and the reduction.
    async fn reduce(
        &mut self,
        session: &mut Session,
        step: u32,
        trigger: CompactTrigger,
        tokens_before: u64,
        stop: &CancellationToken,
        observer: &mut dyn Observer,
    ) -> Result<Reduced, RuntimeError> {
        let tools = session.step_tool_specs();
        let budget = self.budget_tokens(tokens_before, trigger);
        let earlier = self.compaction.clone();
        let mut plan = earlier.clone().unwrap_or(Compaction {
            preview_chars: PREVIEW_CHARS,
            ..Compaction::default()
        });
        let mut summary_note = None;
        // First the model's summary of every turn before this one (unless already replaced).
        // At most one summary request per step: a threshold reduction that could not help and
        // the refusal after it share the step's one request.
        let here = (session.turn(), step);
        let scope = plan_summary_scope(&self.turns)
            .filter(|&k| k > plan.through_turn && self.summary_asked != Some(here));
        if let Some(through_turn) = scope {
            self.summary_asked = Some(here);
            match self
                .summarize(session, step, through_turn, earlier.as_ref(), &tools, stop)
                .await?
            {
                Summary::Text(text) => {
                    plan.through_turn = through_turn;
                    plan.summary = Some(text);
                    plan.shortened.retain(|&(t, _)| t > through_turn);
                }
                Summary::Failed(why) => summary_note = Some(why),
                Summary::Stopped => return Ok(Reduced::Stopped),
            }
        }
        // Still over: the deterministic fallback (earlier turns left out, older results of this
        // turn cut to a preview). A summary is kept when the fallback keeps what follows it.
        let mut over = None;
        if self.estimate(&plan, &tools) > budget {
            let system = self.config.system.as_deref();
            let (fallback, short) = plan_toward(system, &self.turns, &tools, budget, PREVIEW_CHARS);
            over = short;
            if plan.summary.is_some() {
                // A summary covers exactly the turns it says: it is kept only when the fallback
                // leaves out no turn beyond them (an earlier summary with more turns left out
                // would be labelled as covering turns it never saw). Short of the budget, the
                // summary still goes once: the provider decides.
                if fallback.through_turn <= plan.through_turn {
                    plan.shortened = fallback.shortened;
                } else if short.is_none() {
                    plan = fallback;
                }
            } else {
                // Within the budget, or as far as it goes: whatever can be left out is, and the
                // provider decides (a failed summary still leaves the earlier turns out).
                plan = fallback;
            }
        }
        let reduces_nothing =
            plan.through_turn == 0 && plan.summary.is_none() && plan.shortened.is_empty();
        if Some(&plan) == earlier.as_ref() || reduces_nothing {
            let why = match over {
                Some(over) => format!(
                    "even with every earlier turn left out and this turn's older results \
                     shortened, the request is about {over} tokens over the {budget} aimed for"
                ),
                None => "nothing is left to reduce".into(),
            };
            let summary = summary_note
                .map(|why| format!(" ({why})"))
                .unwrap_or_default();
            return Ok(Reduced::Impossible(format!("{why}{summary}")));
        }
        let tokens_after = self.estimate(&plan, &tools);
        if tokens_after >= tokens_before {
            return Ok(Reduced::Impossible(
                "the reduction it allows would not make the request shorter".into(),
            ));
        }
        let compacted = ContextCompacted {
            turn: session.turn(),
            step,
            trigger,
            through_turn: plan.through_turn,
            summary: plan.summary.clone(),
            summary_note: summary_note.filter(|_| plan.summary.is_none()),
            shortened: plan.shortened.clone(),
            preview_chars: plan.preview_chars,
            tokens_before,
            tokens_after,
        };
        session.record_compaction(compacted.clone())?;
        observer.on(AgentEvent::Reduced(&compacted));
        self.compaction = Some(plan);
        Ok(Reduced::Done)
    }

    /// The estimate of this step's request under `plan`.
    fn estimate(&self, plan: &Compaction, tools: &[ToolSpec]) -> u64 {
        let conversation = layout(self.config.system.clone(), &self.turns, Some(plan));
        estimate_tokens(&conversation, tools)
    }

    /// Asks the model, in one attempt of its own, for a summary of turns 1 to `through_turn`
    /// as it last saw them. The request is journaled and synced before it leaves; a failure
    /// (or an empty answer) is a reason to fall back, not to retry.
    async fn summarize(
        &mut self,
        session: &mut Session,
        step: u32,
        through_turn: u32,
        earlier: Option<&Compaction>,
        tools: &[ToolSpec],
        stop: &CancellationToken,
    ) -> Result<Summary, RuntimeError> {
        let system = self.config.system.clone();
        let request = ModelRequest {
            turn: session.turn(),
            step,
            conversation: summary_request(system, &self.turns, through_turn, earlier),
            // Its history holds calls, and Anthropic refuses those without tools defined; the
            // instruction asks for text only, and a call in the answer is not run.
            tools: tools.to_vec(),
            settings: self.config.settings.clone(),
        };
        let body = match self.model.body(&request) {
            Ok(body) => body,
            Err(e) => return Ok(Summary::Failed(format!("the summary request failed: {e}"))),
        };
        session
            .record_summary_request(ContextSummaryRequested {
                turn: session.turn(),
                step,
                through_turn,
                body_sha256: hex::encode(Sha256::digest(&body)),
                body_bytes: body.len() as u64,
            })
            .await?;
        let waits = self.waits();
        // Nobody is shown the summary as it streams: it is not the assistant's answer.
        Ok(
            match stream_once(self.model.as_mut(), body, waits, stop, &mut ()).await {
                Streamed::Whole(assembly) => match assembly.text().trim() {
                    "" => Summary::Failed("the model's summary was empty".into()),
                    text => Summary::Text(shorten(text, SUMMARY_CHARS_MAX)),
                },
                Streamed::Stopped(_) => Summary::Stopped,
                Streamed::Broken(error, _) | Streamed::Late(error, _) => {
                    Summary::Failed(format!("the summary request failed: {error}"))
                }
            },
        )
    }
}

/// The turn's closing message for a request refused as too long after its reduction.
fn still_too_long(message: &str) -> String {
    format!(
        "{message} (the context was reduced once for this request and is still longer than the \
         model takes; the turn ends rather than reduce again: go on with a shorter request, a \
         smaller `max_tokens` if the provider counts it in, or a model with a larger context \
         window)"
    )
}
