//! Admission: everything between a call's `received` and the decision to run it (`approved`)
//! or not (`rejected`, `cancelled-before-start`): tool lookup, argument parsing and schema
//! check, plan mode, the pre-execute chain, asks, and guards.
//!
//! Why apart from the session's lifecycle: this is where policy lives, and it is read far more
//! often than it changes; the lifecycle code (turns, steps, batches) is about journal shape.

use super::Session;
use crate::args::{self, Args};
use crate::code::ErrorCode;
use crate::error::panic_message;
use crate::event::{Approval, AskAnswer, Event, Question, Reply, StopReason, ToolSource};
use crate::hooks::{CallInfo, Decision, QuestionOutcome};
use crate::pipeline;
use crate::registry::{Entry, Exposure};
use crate::scheduler;
use crate::state::CallState;
use crate::tools::search;
use crate::track::Track;
use crate::RuntimeError;
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The listener name plan-mode denials carry.
pub(super) const PLAN_MODE_POLICY: &str = "plan-mode";
pub use events::ASK_TOOL;

/// A call whose approval waits for a person: what [`Session::plan`] leaves to
/// [`Session::plan_asking`].
pub(super) struct Asking {
    info: Arc<CallInfo>,
    how: How,
}

/// Whom a call's approval is put to.
enum How {
    /// The built-in `ask`: its question, to the approver.
    Question,
    /// Leaving the sandbox: this question, to the person.
    Escalation(String),
    /// The pre-execute chain said ask, for this reason.
    Ask(String),
}

impl Session {
    /// received → parsed → approved, or → rejected: everything up to the decision to run, when
    /// no one has to be asked. `Some` when a person does: [`Session::plan_asking`] finishes.
    ///
    /// Why not async: the approval is the one place admission waits, and almost no call waits
    /// there; an `async` plan was a future of ~1 KB built and moved for every call.
    pub(super) fn plan(
        &mut self,
        track: &mut Track,
        raw: String,
        stop_reason: StopReason,
    ) -> Result<Option<Asking>, RuntimeError> {
        let truncated = match stop_reason {
            StopReason::Length => Some(
                "the assistant message was cut off at the model's length limit; no call in it \
                 runs, because its arguments may be incomplete even where they parse",
            ),
            StopReason::Refusal => Some(
                "the provider refused the assistant message before it was complete; no call in \
                 it runs",
            ),
            StopReason::Interrupted => Some(
                "the assistant message was interrupted before it was complete (the stream \
                 broke or the user stopped it); no call in it runs",
            ),
            _ => None,
        };
        if let Some(reason) = truncated {
            self.reject(track, ErrorCode::TruncatedCall, reason.into())?;
            return Ok(None);
        }
        let entry = match self.resolve(track.tool()) {
            Ok(entry) => entry,
            Err((code, reason)) => {
                self.reject(track, code, reason)?;
                return Ok(None);
            }
        };
        track.set_entry(entry.clone());
        let value = match parse_checked(&entry, track.tool(), &raw) {
            Ok(value) => value,
            Err((code, reason)) => {
                self.reject(track, code, reason)?;
                return Ok(None);
            }
        };
        // The canonical text moves into `parsed` and back out into the frozen arguments, and
        // the raw text the call was received with becomes theirs: no copies per call.
        let canonical = args::canonical(&value);
        let (_, canonical) = track.transition_with(
            &self.log,
            CallState::Parsed,
            0,
            |call, source_seqs| Event::Parsed {
                call,
                arguments: canonical,
                source_seqs,
            },
            |parsed| match parsed {
                Event::Parsed { arguments, .. } => arguments,
                _ => unreachable!("built as parsed just above"),
            },
        )?;
        let args = Args::from_parts(raw, value, canonical);
        // Frozen from here on: every listener gets a clone of the same immutable arguments.
        let info = Arc::new(CallInfo {
            call: track.call().clone(),
            tool: track.tool().to_owned(),
            source: entry.source.clone(),
            read_only: entry.tool.is_read_only(),
            args,
            answer: None,
        });
        track.set_info(info.clone());

        // The built-in `ask` is a question for the user: it goes to the approver whatever the
        // listeners would say, so neither an allow-all listener nor a missing approver can
        // answer it for them. Plan mode does not stop it: asking changes nothing. Its guards
        // run before the person is asked: an answer, once given, is the call's result and ends
        // plan mode when it chooses the plan option, so nothing may refuse the call after it.
        if is_question(&info) {
            if let Some(reason) = self.guard_denial(&info) {
                self.reject(track, ErrorCode::PolicyDenied, reason)?;
                return Ok(None);
            }
            return Ok(Some(Asking {
                info,
                how: How::Question,
            }));
        }
        let escalation = entry.tool.escalation(&info.args);
        let approval = match self.pre_execute(&info) {
            (Decision::Deny { reason }, by) => {
                let by = by.unwrap_or_else(|| "the session's default".to_owned());
                let reason = format!("denied by {by}: {reason}");
                self.reject(track, ErrorCode::PolicyDenied, reason)?;
                return Ok(None);
            }
            // Leaving the sandbox is the person's to allow, whatever else would have allowed
            // the call: the one question asked is the escalation's.
            _ if escalation.is_some() => {
                let question = escalation.unwrap_or_default();
                return Ok(Some(Asking {
                    info,
                    how: How::Escalation(question),
                }));
            }
            (Decision::Ask { reason }, _) => {
                return Ok(Some(Asking {
                    info,
                    how: How::Ask(reason),
                }))
            }
            (_, None) => Approval::Default,
            (_, Some(name)) => Approval::Listener { name },
        };
        self.approve(track, &info, approval, false)?;
        Ok(None)
    }

    /// The rest of [`Session::plan`] for a call whose approval waits for a person.
    pub(super) async fn plan_asking(
        &mut self,
        track: &mut Track,
        asking: Asking,
        cancel: &CancellationToken,
    ) -> Result<(), RuntimeError> {
        let Asking { info, how } = asking;
        let question = matches!(how, How::Question);
        let approval = match how {
            How::Question => self.put_question(track, &info, cancel).await?,
            How::Escalation(question) => {
                let asked = self
                    .ask_person(track, &info, &question, true, cancel)
                    .await?;
                self.asked(track, asked)?
            }
            How::Ask(reason) => {
                let asked = self.ask(track, &info, &reason, cancel).await?;
                self.asked(track, asked)?
            }
        };
        match approval {
            Some(approval) => self.approve(track, &info, approval, question),
            None => Ok(()),
        }
    }

    /// → approved, unless a guard refuses the call (a question's guards ran before it was
    /// put).
    fn approve(
        &mut self,
        track: &mut Track,
        info: &CallInfo,
        approval: Approval,
        question: bool,
    ) -> Result<(), RuntimeError> {
        if !question {
            if let Some(reason) = self.guard_denial(info) {
                return self.reject(track, ErrorCode::PolicyDenied, reason);
            }
        }
        track.transition(&self.log, CallState::Approved, 0, |call, source_seqs| {
            Event::Approved {
                call,
                approval,
                source_seqs,
            }
        })?;
        Ok(())
    }

    /// The tool a call names, if the model may call it in this step; else the code and reason
    /// to reject it with.
    fn resolve(&self, tool: &str) -> Result<Arc<Entry>, (ErrorCode, String)> {
        match self.registry.lookup(tool) {
            Some(entry) if self.step_visible.contains(tool) => Ok(entry),
            Some(entry) if entry.exposure == Exposure::Deferred => Err((
                ErrorCode::UnknownTool,
                format!(
                    "tool {tool:?} is not loaded in this step: find it with {} first; it can be \
                     called from the step after",
                    search::NAME
                ),
            )),
            _ => Err((
                ErrorCode::UnknownTool,
                format!("no tool named {tool:?} is available"),
            )),
        }
    }

    /// What a question's end makes of the call: approved, or (journaled here) rejected or
    /// cancelled before it started.
    fn asked(&mut self, track: &mut Track, asked: Asked) -> Result<Option<Approval>, RuntimeError> {
        match asked {
            Asked::Approved(approval) => Ok(Some(approval)),
            Asked::Refused(denial) => {
                self.reject(track, ErrorCode::PolicyDenied, denial)?;
                Ok(None)
            }
            Asked::Stopped => {
                scheduler::cancel_before_start(
                    &self.ctx(),
                    track,
                    "the batch was stopped while this call waited for approval",
                )?;
                Ok(None)
            }
        }
    }

    /// The first guard that refuses the call, as the reason to reject it with. A guard that
    /// panics refuses (fail closed).
    fn guard_denial(&self, info: &CallInfo) -> Option<String> {
        for guard in &self.hooks.guards {
            let verdict = catch_unwind(AssertUnwindSafe(|| guard.check(info)));
            let denial = match verdict {
                Ok(None) => continue,
                Ok(Some(reason)) => reason,
                Err(panic) => format!("the guard failed ({})", panic_message(panic.as_ref())),
            };
            return Some(format!("guard {}: {denial}", guard.name()));
        }
        None
    }

    /// The pre-execute chain: the first listener that decides wins. Returns the decision and
    /// the listener that made it (`None`: no listener decided, the session's default applies).
    /// A listener that panics denies (fail closed).
    fn pre_execute(&self, info: &CallInfo) -> (Decision, Option<String>) {
        // Plan mode comes before every listener: no listener's allow can let a write through
        // while the plan is unapproved.
        if self.plan_mode && !info.read_only {
            let reason = format!(
                "plan mode is on: only read-only tools run until the user approves the plan (by \
                 choosing the `plan_option` of an ask); {} changes the world",
                info.tool
            );
            return (Decision::Deny { reason }, Some(PLAN_MODE_POLICY.to_owned()));
        }
        for listener in &self.hooks.pre_execute {
            let decision = match catch_unwind(AssertUnwindSafe(|| listener.decide(info))) {
                Ok(Decision::Pass) => continue,
                Ok(decision) => decision,
                Err(panic) => Decision::Deny {
                    reason: format!("the listener failed ({})", panic_message(panic.as_ref())),
                },
            };
            return (decision, Some(listener.name().to_owned()));
        }
        let decision = if self.config.default_allow {
            Decision::Allow
        } else {
            Decision::Deny {
                reason: "no policy allowed this call".into(),
            }
        };
        (decision, None)
    }

    /// An `Ask`: journaled as a question and its answer. Only an "allowed" answer approves.
    async fn ask(
        &mut self,
        track: &mut Track,
        info: &CallInfo,
        reason: &str,
        cancel: &CancellationToken,
    ) -> Result<Asked, RuntimeError> {
        if self.always_allowed.contains(&info.tool) {
            return Ok(Asked::Approved(Approval::AlwaysAllowed));
        }
        let asked = self.ask_person(track, info, reason, false, cancel).await?;
        if let Asked::Approved(Approval::Asked {
            answer: AskAnswer::AllowedAlways,
        }) = &asked
        {
            self.always_allowed.insert(info.tool.clone());
        }
        Ok(asked)
    }

    /// Puts `reason` to the person (the approver; as an escalation, [`Approver::escalate`]),
    /// journaled as `ask/pending` and its end; only "allowed" approves. No earlier "always"
    /// answers it, and it records none.
    async fn ask_person(
        &mut self,
        track: &mut Track,
        info: &CallInfo,
        reason: &str,
        escalation: bool,
        cancel: &CancellationToken,
    ) -> Result<Asked, RuntimeError> {
        let call = info.call.clone();
        // Ask events are the call's events too: what follows points back at the answer.
        let asked_seq = track.note(
            &self.log,
            &Event::AskPending {
                call: call.clone(),
                question: reason.to_owned(),
            },
        )?;
        // Durable before anyone is asked: a crash while the person thinks must find the
        // question, so recovery withdraws it rather than forgetting it was asked.
        self.log.sync_through(asked_seq).await?;
        let Some(approver) = self.hooks.approver.clone() else {
            track.note(
                &self.log,
                &Event::AskCancelled {
                    call,
                    reason: "no approver is configured".into(),
                },
            )?;
            return Ok(Asked::Refused(format!(
                "approval needed ({reason}) but no one is there to answer"
            )));
        };
        let asked: crate::hooks::AskFuture<'_> = if escalation {
            // An "always" leaves the sandbox this once only: journaled as what it did.
            let asked = approver.escalate(info.clone(), reason.to_owned());
            Box::pin(async move {
                match asked.await {
                    AskAnswer::AllowedAlways => AskAnswer::AllowedOnce,
                    answer => answer,
                }
            })
        } else {
            approver.ask(info.clone(), reason.to_owned())
        };
        let answer = tokio::select! {
            answer = within(self.config.question_timeout_ms, asked) => {
                answer.unwrap_or(AskAnswer::Expired)
            }
            _ = cancel.cancelled() => {
                // Withdrawn, never taken as answered.
                track.note(
                    &self.log,
                    &Event::AskCancelled {
                        call,
                        reason: "the batch was stopped".into(),
                    },
                )?;
                return Ok(Asked::Stopped);
            }
        };
        track.note(
            &self.log,
            &match answer {
                AskAnswer::Expired => Event::AskExpired { call },
                AskAnswer::Cancelled => Event::AskCancelled {
                    call,
                    reason: "the approver withdrew the question".into(),
                },
                // Not answers to a yes/no question: withdrawn, never taken as either.
                AskAnswer::Answered | AskAnswer::Declined => Event::AskCancelled {
                    call,
                    reason: "the approver gave no yes/no answer".into(),
                },
                answer => Event::AskAnswered { call, answer },
            },
        )?;
        Ok(match answer {
            AskAnswer::AllowedOnce | AskAnswer::AllowedAlways => {
                Asked::Approved(Approval::Asked { answer })
            }
            AskAnswer::Denied => Asked::Refused(format!("the user denied it ({reason})")),
            AskAnswer::Expired => Asked::Refused(format!(
                "the question expired unanswered ({reason}); a timeout is never an approval"
            )),
            AskAnswer::Cancelled | AskAnswer::Answered | AskAnswer::Declined => {
                Asked::Refused(format!("the question was withdrawn ({reason})"))
            }
        })
    }

    /// The built-in `ask`'s question: journaled as `ask/question`, then `ask/reply`,
    /// `ask/expired` or `ask/cancelled`. Only a reply that answers the question approves the call
    /// (its body returns the answer); a decline, an expiry or a withdrawal rejects it with its own
    /// code, and a stopped batch cancels it before start.
    async fn put_question(
        &mut self,
        track: &mut Track,
        info: &CallInfo,
        cancel: &CancellationToken,
    ) -> Result<Option<Approval>, RuntimeError> {
        let question = match Question::from_arguments(info.args.value()) {
            Ok(question) => question,
            Err(why) => {
                let reason = format!("arguments do not make a question: {why}");
                self.reject(track, ErrorCode::SchemaError, reason)?;
                return Ok(None);
            }
        };
        let call = info.call.clone();
        let asked_seq = track.note(
            &self.log,
            &Event::AskQuestion {
                call: call.clone(),
                question: question.clone(),
            },
        )?;
        // Durable before the person is shown it (see `ask`).
        self.log.sync_through(asked_seq).await?;
        let outcome = match self.hooks.approver.clone() {
            None => QuestionOutcome::Withdrawn {
                reason: "no approver is configured".into(),
            },
            Some(approver) => {
                let asked = approver.question(info.clone(), question.clone());
                tokio::select! {
                    outcome = within(self.config.question_timeout_ms, asked) => {
                        outcome.unwrap_or(QuestionOutcome::Expired)
                    }
                    _ = cancel.cancelled() => {
                        // The user's stop: withdrawn, never taken as answered.
                        track.note(
                            &self.log,
                            &Event::AskCancelled {
                                call,
                                reason: "the batch was stopped".into(),
                            },
                        )?;
                        scheduler::cancel_before_start(
                            &self.ctx(),
                            track,
                            "the batch was stopped while this question waited for an answer",
                        )?;
                        return Ok(None);
                    }
                }
            }
        };
        // An answer that does not fit the question is nobody's answer.
        let outcome = match outcome {
            QuestionOutcome::Answered(answer) => match question.fit(answer) {
                Ok(answer) => QuestionOutcome::Answered(answer),
                Err(why) => QuestionOutcome::Withdrawn {
                    reason: format!("the approver's answer does not fit the question: {why}"),
                },
            },
            other => other,
        };
        let (code, reason) = match outcome {
            QuestionOutcome::Answered(answer) => {
                track.note(
                    &self.log,
                    &Event::AskReplied {
                        call: call.clone(),
                        reply: Reply::Answered(answer.clone()),
                    },
                )?;
                // The reply is final (the guards ran before the question), so the plan option
                // chosen ends plan mode here; replay ends it at the reply too.
                if self.plan_mode && question.approves_plan(&answer) {
                    let reason = format!(
                        "the user chose {:?} to: {}",
                        question.plan_option.as_deref().unwrap_or_default(),
                        question.text
                    );
                    self.switch_plan_mode(false, &reason, Some(call.clone()))?;
                }
                let mut answered = info.clone();
                answered.answer = Some(answer);
                track.set_info(answered);
                return Ok(Some(Approval::Asked {
                    answer: AskAnswer::Answered,
                }));
            }
            QuestionOutcome::Declined { text } => {
                let text = text.map(|t| bounded(&t)).filter(|t| !t.is_empty());
                track.note(
                    &self.log,
                    &Event::AskReplied {
                        call,
                        reply: Reply::Declined { text: text.clone() },
                    },
                )?;
                let said = text.map(|t| format!(": {t}")).unwrap_or_default();
                let reason = format!("the user declined to answer{said}");
                (ErrorCode::QuestionDeclined, reason)
            }
            QuestionOutcome::Expired => {
                track.note(&self.log, &Event::AskExpired { call })?;
                let reason = "nobody answered the question in time; a timeout is never an \
                              answer";
                (ErrorCode::QuestionUnanswered, reason.to_owned())
            }
            QuestionOutcome::Withdrawn { reason } => {
                let reason = bounded(&reason);
                track.note(
                    &self.log,
                    &Event::AskCancelled {
                        call,
                        reason: reason.clone(),
                    },
                )?;
                let reason = format!("the question was withdrawn unanswered ({reason})");
                (ErrorCode::QuestionUnanswered, reason)
            }
        };
        self.reject(track, code, reason)?;
        Ok(None)
    }

    /// → rejected, with the error result ready to commit.
    pub(super) fn reject(
        &mut self,
        track: &mut Track,
        code: ErrorCode,
        reason: String,
    ) -> Result<(), RuntimeError> {
        track.transition(&self.log, CallState::Rejected, 0, |call, source_seqs| {
            Event::Rejected {
                call,
                code,
                reason: reason.clone(),
                source_seqs,
            }
        })?;
        pipeline::set_error_result(track, code, reason);
        Ok(())
    }
}

/// A call's arguments, parsed and checked against its tool's input schema; else the code and
/// reason to reject it with.
fn parse_checked(entry: &Entry, tool: &str, raw: &str) -> Result<Value, (ErrorCode, String)> {
    let value = args::parse_value(raw).map_err(|e| (ErrorCode::SyntaxError, e.to_string()))?;
    if let Err(v) = entry.input.check(&value) {
        let reason = format!("arguments do not match the input schema of {tool}: {v}");
        return Err((ErrorCode::SchemaError, reason));
    }
    Ok(value)
}

/// Whether the call is the built-in `ask` (a question, not an approval).
fn is_question(info: &CallInfo) -> bool {
    info.tool == ASK_TOOL && info.source == ToolSource::BuiltIn
}

/// An approver's words (a decline's, a withdrawal's), trimmed and cut to the longest text a
/// question takes: they go into the journal and to the model.
fn bounded(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(crate::event::TEXT_CHARS_MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `asked`, unless `timeout_ms` passes first (`None`).
async fn within<T>(
    timeout_ms: Option<u64>,
    asked: impl std::future::Future<Output = T>,
) -> Option<T> {
    match timeout_ms {
        None => Some(asked.await),
        Some(ms) => tokio::time::timeout(std::time::Duration::from_millis(ms), asked)
            .await
            .ok(),
    }
}

/// What became of a question.
enum Asked {
    Approved(Approval),
    Refused(String),
    /// The batch was stopped while waiting.
    Stopped,
}
