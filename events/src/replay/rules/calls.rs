//! The rules of one call's events (`received`, its state changes, its questions and
//! processes) and the session facts that only need the call they name to exist: the half of
//! the replay rules that follows a call once its step brought it in.

use super::super::retain::Retain;
use super::super::rule::{Broken, Rule};
use super::super::tree::{AskRecord, CallReplay};
use super::super::ReplayError;
use super::{malformed_hash, open_step, At};
use crate::event::{Approval, AskAnswer, CallRef, CallStarted, Event, Reply};
use crate::state::CallState;

/// The events about one call, and the session-wide facts that need no shape checked.
pub(super) fn apply_call_event<R: Retain>(
    r: &mut R,
    at: At,
    event: Event,
) -> Result<(), ReplayError> {
    let bad = |rule: Rule, message: String| at.bad(rule, message);
    match event {
        Event::Received {
            call,
            index,
            tool,
            raw_arguments,
            source_seqs,
        } => receive(r, at, call, index, tool, raw_arguments, &source_seqs)?,
        Event::Parsed {
            call,
            arguments,
            source_seqs,
        } => advance(r, &call, CallState::Parsed, 0, &source_seqs, at)?.arguments = Some(arguments),
        Event::Approved {
            call,
            approval,
            source_seqs,
        } => {
            // I16 as the journal shows it: "approved as asked" only right after that answer;
            // nothing approved while a question waits; a question of the `ask` tool approved
            // only by its answer.
            let c = r
                .call_mut(&call)
                .map_err(|m| bad(Rule::CallWasReceived, m))?;
            let last = c.asks.last();
            let (last_answer, structured) = (
                last.and_then(|a| a.answer),
                last.is_some_and(|a| a.structured.is_some()),
            );
            let fits = match approval {
                Approval::Asked { answer } => {
                    last_answer == Some(answer)
                        && (answer.allows() || answer == AskAnswer::Answered)
                }
                _ => last.is_none() || (last_answer.is_some() && !structured),
            };
            if !fits {
                let how = match &approval {
                    Approval::Asked { answer } => format!("approved as answered {answer:?}"),
                    other => format!("approved ({other:?}) past a question"),
                };
                return Err(bad(
                    Rule::ApprovalFitsQuestion,
                    format!("{call}: {how}, but its question's answer is {last_answer:?}"),
                ));
            }
            advance(r, &call, CallState::Approved, 0, &source_seqs, at)?.approval = Some(approval)
        }
        Event::StartedV4 {
            call,
            attempt,
            resources,
            source_seqs,
        } => {
            let c = advance(r, &call, CallState::Started, attempt, &source_seqs, at)?;
            c.attempts = attempt;
            c.resources = Some(resources);
            c.started_at_ms.get_or_insert(at.at_ms);
        }
        Event::Started(CallStarted {
            call,
            attempt,
            resources,
            idempotency_key,
            evidence,
            source_seqs,
        }) => {
            if let Some(bad_hash) = evidence.iter().find_map(malformed_hash) {
                return Err(bad(
                    Rule::EvidenceSha256,
                    format!(
                    "{call}: started with evidence whose sha256 {bad_hash:?} is not 64 lowercase \
                     hex digits"
                ),
                ));
            }
            let c = advance(r, &call, CallState::Started, attempt, &source_seqs, at)?;
            c.attempts = attempt;
            c.resources = Some(resources);
            c.idempotency_key = Some(idempotency_key);
            c.evidence = evidence;
            c.started_at_ms.get_or_insert(at.at_ms);
        }
        Event::Settled {
            call,
            outcome,
            source_seqs,
        } => {
            let c = advance(r, &call, CallState::Settled, 0, &source_seqs, at)?;
            c.outcome = Some(outcome);
            c.settled_at_ms = Some(at.at_ms);
            r.call_settled(&call);
        }
        Event::Committed {
            call,
            result,
            source_seqs,
        } => {
            advance(r, &call, CallState::Committed, 0, &source_seqs, at)?.committed = Some(result);
            r.call_committed(&call);
        }
        Event::Rejected {
            call,
            code,
            reason,
            source_seqs,
        } => {
            advance(r, &call, CallState::Rejected, 0, &source_seqs, at)?.rejection =
                Some((code, reason))
        }
        Event::CancelledBeforeStart {
            call,
            reason,
            source_seqs,
        } => {
            advance(
                r,
                &call,
                CallState::CancelledBeforeStart,
                0,
                &source_seqs,
                at,
            )?
            .cancel_reason = Some(reason)
        }
        Event::CallProcess { call, process } => {
            let c = r
                .call_mut(&call)
                .map_err(|m| bad(Rule::CallWasReceived, m))?;
            if c.state != CallState::Started {
                return Err(bad(
                    Rule::ProcessWhileStarted,
                    format!(
                    "call/process for {call}, which is {} (a process is started by a running call)",
                    c.state.as_str()
                ),
                ));
            }
            r.process_started(&call, &process);
            r.call_mut(&call)
                .map_err(|m| bad(Rule::CallWasReceived, m))?
                .processes
                .push(process);
        }
        other => apply_fact(r, at, other)?,
    }
    Ok(())
}

/// `received`: the call the step's `llm/response` names at `index`, next in the step, pointing
/// back at earlier records.
fn receive<R: Retain>(
    r: &mut R,
    at: At,
    call: CallRef,
    index: u32,
    tool: String,
    raw_arguments: String,
    source_seqs: &[u64],
) -> Result<(), ReplayError> {
    let bad = |rule: Rule, message: String| at.bad(rule, message);
    let s = open_step(r, call.turn, call.step).map_err(|b| at.broken(b))?;
    let Some(response) = &s.response else {
        return Err(bad(
            Rule::ReceivedAfterResponse,
            "a call received before the step's llm/response".into(),
        ));
    };
    let expected = response.tool_calls.get(index as usize);
    if expected
        .is_none_or(|m| m.call_id != call.call_id || m.name != tool || m.arguments != raw_arguments)
        || index as usize != s.calls.len()
    {
        return Err(bad(
            Rule::ReceivedMatchesResponse,
            format!("{call} does not match call {index} of the step's llm/response"),
        ));
    }
    if source_seqs.is_empty() || source_seqs.iter().any(|&s| s >= at.seq) {
        return Err(bad(
            Rule::ReceivedPointsBack,
            format!("{call}: source seqs {source_seqs:?} do not point back"),
        ));
    }
    let mut received = CallReplay::received(call, index, tool, raw_arguments, at.at_ms);
    received.seqs.push(at.seq);
    s.calls.push(received);
    Ok(())
}

/// Questions, and the facts about the session that only need a call, if named, to exist.
fn apply_fact<R: Retain>(r: &mut R, at: At, event: Event) -> Result<(), ReplayError> {
    let bad = |rule: Rule, message: String| at.bad(rule, message);
    match event {
        Event::AskPending { call, question } => {
            ask_put(r, &call, question, None, at).map_err(|b| at.broken(b))?
        }
        Event::AskQuestion { call, question } => {
            let text = question.text.clone();
            ask_put(r, &call, text, Some(question), at).map_err(|b| at.broken(b))?
        }
        Event::AskReplied { call, reply } => {
            let answer = match &reply {
                Reply::Answered(_) => AskAnswer::Answered,
                Reply::Declined { .. } => AskAnswer::Declined,
            };
            if !last_is_question(r, &call).map_err(|b| at.broken(b))? {
                return Err(bad(
                    Rule::ReplyToPendingQuestion,
                    format!("{call}: a reply with no pending ask/question"),
                ));
            }
            answer_ask(r, &call, answer, None, at.seq).map_err(|b| at.broken(b))?;
            let Some(a) = r
                .call_mut(&call)
                .map_err(|m| bad(Rule::CallWasReceived, m))?
                .asks
                .last_mut()
            else {
                return Err(bad(
                    Rule::ReplyToPendingQuestion,
                    format!("{call}: a reply with no question"),
                ));
            };
            // The reply that chose the plan option is what ends plan mode (its `plan/mode`
            // records it): a crash between the two must not leave a plan the person approved
            // still in force.
            let approves_plan = match (&reply, &a.structured) {
                (Reply::Answered(answer), Some(question)) => question.approves_plan(answer),
                _ => false,
            };
            a.reply = Some(reply);
            if approves_plan {
                r.plan_mode(false);
            }
        }
        Event::AskAnswered { call, answer } => {
            let structured = last_is_question(r, &call).map_err(|b| at.broken(b))?;
            if structured || matches!(answer, AskAnswer::Answered | AskAnswer::Declined) {
                return Err(bad(
                    Rule::YesNoAnswerToApproval,
                    format!("{call}: a yes/no answer ({answer:?}) to a question it does not fit"),
                ));
            }
            answer_ask(r, &call, answer, None, at.seq).map_err(|b| at.broken(b))?
        }
        Event::AskExpired { call } => {
            answer_ask(r, &call, AskAnswer::Expired, None, at.seq).map_err(|b| at.broken(b))?
        }
        Event::AskCancelled { call, reason } => {
            answer_ask(r, &call, AskAnswer::Cancelled, Some(reason), at.seq)
                .map_err(|b| at.broken(b))?
        }
        Event::PlanReplace { items } => r.plan_replaced(items),
        Event::PlanMode { on, call, .. } => {
            if let Some(call) = &call {
                r.call_mut(call)
                    .map_err(|m| bad(Rule::CallWasReceived, m))?;
            }
            r.plan_mode(on);
        }
        Event::SessionPolicy(policy) => r.policy(policy),
        Event::SessionSandbox(bound) => r.sandbox(bound),
        Event::SessionModel(model) => r.session_model(model),
        Event::ToolSchema(schema) => r.tool_schema(schema),
        // Not checked against the call: it comes after the recovery that finished the call,
        // when a policy that forgets finished calls no longer holds it.
        Event::ProcessKilled { pgid, .. } => r.process_killed(pgid),
        Event::Fault {
            turn,
            step,
            message,
        } => r.fault(turn, step, message),
        Event::SpillStored { .. } => {}
        // A takeover changes no call's state: the store fenced the old writer off.
        Event::WriterStolen(_) => {}
        // Applied by `apply_event`, which knows whether the journal is imported.
        Event::ImportSource(_) | Event::ImportLine(_) | Event::ImportOutcome(_) => {
            return Err(at.bug())
        }
        // Shape events and recoveries are applied by `apply_event`; none reaches here.
        Event::SessionOpen(_)
        | Event::TurnStart { .. }
        | Event::StepStart { .. }
        | Event::StepTools { .. }
        | Event::LlmResponse { .. }
        | Event::StepEnd { .. }
        | Event::TurnEnd { .. }
        | Event::SessionClose
        | Event::SessionReopen
        | Event::Recovery(_)
        | Event::RecoveryRerun(_)
        | Event::Received { .. }
        | Event::Parsed { .. }
        | Event::Approved { .. }
        | Event::StartedV4 { .. }
        | Event::Started(_)
        | Event::Settled { .. }
        | Event::Committed { .. }
        | Event::Rejected { .. }
        | Event::CancelledBeforeStart { .. }
        | Event::CallProcess { .. }
        | Event::LlmRequest(_)
        | Event::LlmAttemptFailed(_)
        | Event::ContextSummaryRequested(_)
        | Event::ContextCompacted(_)
        | Event::ContextCalibrated(_)
        | Event::LlmResponseDetail(_)
        | Event::LlmRefusal(_)
        | Event::LlmNote(_) => return Err(at.bug()),
    }
    Ok(())
}

/// Moves a call to `to`: it must point back at the call's previous event, and the move must
/// be legal for its state machine.
fn advance<'a, R: Retain>(
    r: &'a mut R,
    call: &CallRef,
    to: CallState,
    attempt: u32,
    source_seqs: &[u64],
    at: At,
) -> Result<&'a mut CallReplay, ReplayError> {
    let inconsistent = |rule: Rule, message: String| {
        At {
            kind: "call event",
            ..at
        }
        .bad(rule, message)
    };
    let c = r
        .call_mut(call)
        .map_err(|m| inconsistent(Rule::CallWasReceived, m))?;
    // Every call kept has its first event (`received`, or the recovery that adopted it), and
    // a call event is only applied to a call kept.
    let previous = c.seqs.last().copied().unwrap_or(0);
    if !source_seqs.contains(&previous) || source_seqs.iter().any(|&s| s >= at.seq) {
        return Err(inconsistent(Rule::CallPointsBack, format!(
            "{call}: {to} points back at {source_seqs:?}, not at the call's previous event {previous}"
        )));
    }
    let attempt = if to == CallState::Started {
        attempt
    } else {
        c.machine.attempt() + 1
    };
    c.machine
        .advance_attempt(to, attempt)
        .map_err(|source| ReplayError::IllegalTransition {
            seq: at.seq,
            position: at.position,
            source,
        })?;
    c.state = to;
    c.seqs.push(at.seq);
    // Every moment a timeline draws is kept here, where every state change passes.
    let moment = match to {
        CallState::Approved => &mut c.approved_at_ms,
        CallState::Rejected | CallState::CancelledBeforeStart => &mut c.refused_at_ms,
        CallState::Committed => &mut c.committed_at_ms,
        _ => return Ok(c),
    };
    *moment = Some(at.at_ms);
    Ok(c)
}

/// A question put about a call (`ask/pending`, or `ask/question` with `structured`): only while
/// it is `parsed` and no other question waits.
fn ask_put<R: Retain>(
    r: &mut R,
    call: &CallRef,
    question: String,
    structured: Option<crate::event::Question>,
    at: At,
) -> Result<(), Broken> {
    let c = r.call_mut(call).map_err(|m| (Rule::CallWasReceived, m))?;
    if c.state != CallState::Parsed || c.ask_pending() {
        return Err((
            Rule::QuestionWhileParsed,
            format!("{call}: a question while {}", c.state),
        ));
    }
    c.seqs.push(at.seq);
    c.asked_at_ms.get_or_insert(at.at_ms);
    c.asks.push(AskRecord {
        question,
        answer: None,
        cancel_reason: None,
        structured,
        reply: None,
    });
    Ok(())
}

/// Whether the call's latest question is the `ask` tool's (`ask/question`), not an approval.
fn last_is_question<R: Retain>(r: &mut R, call: &CallRef) -> Result<bool, Broken> {
    Ok(r.call_mut(call)
        .map_err(|m| (Rule::CallWasReceived, m))?
        .asks
        .last()
        .is_some_and(|a| a.structured.is_some()))
}

/// Answers (or withdraws) the call's pending question.
fn answer_ask<R: Retain>(
    r: &mut R,
    call: &CallRef,
    answer: AskAnswer,
    cancel_reason: Option<String>,
    seq: u64,
) -> Result<(), Broken> {
    let c = r.call_mut(call).map_err(|m| (Rule::CallWasReceived, m))?;
    match c.asks.last_mut() {
        Some(a) if a.answer.is_none() => {
            a.answer = Some(answer);
            a.cancel_reason = cancel_reason;
            c.seqs.push(seq);
        }
        _ => {
            return Err((
                Rule::AnswerEndsPendingQuestion,
                format!("{call}: an answer with no pending question"),
            ))
        }
    }
    r.question_closed(call);
    Ok(())
}
