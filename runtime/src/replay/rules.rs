//! The replay rules, written once for every [`Retain`] policy: whether each event fits where it
//! lands, and what it does to its call. Anything that does not fit is an error naming the
//! record's seq and position.

use super::retain::{Retain, TurnCursor};
use super::tree::{AskRecord, CallReplay, ImportedCall, StepReplay};
use super::{ReplayError, Replayer};
use crate::event::{
    Approval, AskAnswer, CallRef, CallStarted, Event, ImportLine, ImportOutcome, Recovery,
    RecoveryRerun, Reply, RerunPolicy, StepOutcome, TurnOutcome,
};
use crate::state::CallState;
use journal::Position;

/// The record being applied, for its errors.
#[derive(Clone, Copy)]
struct At {
    seq: u64,
    position: Position,
    kind: &'static str,
    /// The record's time.
    at_ms: u64,
}

impl At {
    /// An event that does not fit, named by its own kind.
    fn bad(self, message: String) -> ReplayError {
        ReplayError::Inconsistent {
            seq: self.seq,
            position: self.position,
            kind: self.kind,
            message,
        }
    }
}

impl<R: Retain> Replayer<R> {
    /// Checks one event against what was read before it and applies it.
    pub(super) fn apply_event(
        &mut self,
        seq: u64,
        position: Position,
        at_ms: u64,
        event: Event,
    ) -> Result<(), ReplayError> {
        let at = At {
            seq,
            position,
            kind: event.kind(),
            at_ms,
        };
        let bad = |message: String| at.bad(message);
        let after_recovery = std::mem::replace(
            &mut self.after_recovery,
            matches!(event, Event::Recovery(_)),
        );
        let previous_kind = self.previous_kind.replace(at.kind);
        if let (Event::SessionOpen(open), None) = (&event, &self.session_id) {
            self.session_id = Some(open.session_id.clone());
        }
        if let (Event::Started(started), Some(id)) = (&event, &self.session_id) {
            let key = crate::event::idempotency_key(id, &started.call);
            if key != started.idempotency_key {
                return Err(bad(format!(
                    "{}: started with idempotency key {}, but its key is {key}",
                    started.call, started.idempotency_key
                )));
            }
        }
        let r = &mut self.retain;
        r.record_seq(seq);
        r.record_time(at_ms, at.kind);
        if !r.opened() && !matches!(event, Event::SessionOpen(_)) {
            return Err(bad("the journal does not begin with session/open".into()));
        }
        // Only a reopening follows a close (schema 9); it is the only place one may stand.
        match (r.closed(), &event) {
            (true, Event::SessionReopen) => {}
            (true, _) => return Err(bad("event after session/close".into())),
            (false, Event::SessionReopen) => {
                return Err(bad("session/reopen of a session that is not closed".into()))
            }
            (false, _) => {}
        }
        match event {
            Event::SessionOpen(open) => {
                if r.opened() {
                    return Err(bad("a second session/open".into()));
                }
                r.session_opened(open);
            }
            Event::TurnStart { turn, user_text } => {
                if r.open_turn().is_some() {
                    return Err(bad("turn/start while a turn is open".into()));
                }
                let begun = r.turns_begun();
                if u64::from(turn) != u64::from(begun) + 1 {
                    return Err(bad(format!("turn {turn} after turn {begun}")));
                }
                r.turn_begun(turn, user_text);
            }
            Event::StepStart { turn, step } => step_start(r, turn, step).map_err(bad)?,
            Event::StepTools { turn, step, tools } => {
                let s = open_step(r, turn, step).map_err(bad)?;
                if s.tools.is_some() || s.response.is_some() {
                    return Err(bad(
                        "step/tools comes once per step, before its llm/response".into(),
                    ));
                }
                s.tools = Some(tools);
            }
            Event::LlmResponse {
                turn,
                step,
                response,
            } => {
                let s = open_step(r, turn, step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad("a second llm/response in one step".into()));
                }
                if s.attempts > 0
                    && s.failed_attempts
                        .last()
                        .is_some_and(|f| f.attempt == s.attempts)
                {
                    return Err(bad(format!(
                        "llm/response for attempt {}, which failed",
                        s.attempts
                    )));
                }
                s.response = Some(response);
            }
            Event::LlmRequest(request) => {
                let s = open_step(r, request.turn, request.step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad("llm/request after the step's llm/response".into()));
                }
                if request.attempt != s.attempts + 1 {
                    return Err(bad(format!(
                        "attempt {} after attempt {}",
                        request.attempt, s.attempts
                    )));
                }
                s.attempts = request.attempt;
            }
            Event::ContextSummaryRequested(asked) => {
                let s = open_step(r, asked.turn, asked.step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad(
                        "a summary requested after the step's llm/response".into()
                    ));
                }
                if asked.through_turn == 0 || asked.through_turn >= asked.turn {
                    return Err(bad(format!(
                        "a summary of turns 1 to {} requested in turn {}",
                        asked.through_turn, asked.turn
                    )));
                }
            }
            Event::ContextCompacted(compacted) => {
                let s = open_step(r, compacted.turn, compacted.step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad("a reduction after the step's llm/response".into()));
                }
                // A reduction comes before the step's first request, or after its last attempt
                // failed: a request already sent was sent unreduced.
                let between_attempts = s.attempts == 0
                    || s.failed_attempts
                        .last()
                        .is_some_and(|f| f.attempt == s.attempts);
                if !between_attempts {
                    return Err(bad(format!(
                        "a reduction while attempt {} of the step is outstanding",
                        s.attempts
                    )));
                }
                let (turn, step) = (compacted.turn, compacted.step);
                let kept = compacted.through_turn < turn
                    && compacted.shortened.iter().all(|&(t, st)| {
                        t > compacted.through_turn && (t < turn || (t == turn && st < step))
                    });
                if !kept {
                    return Err(bad(format!(
                        "a reduction in turn {} that leaves out turns to {} and shortens {:?}: \
                         it must keep the turn it is in and shorten only kept steps",
                        compacted.turn, compacted.through_turn, compacted.shortened
                    )));
                }
                r.context_compacted(compacted);
            }
            Event::ContextCalibrated(calibrated) => {
                let s = open_step(r, calibrated.turn, calibrated.step).map_err(bad)?;
                let after_overflow = s.response.is_none()
                    && s.failed_attempts.last().is_some_and(|f| {
                        f.attempt == calibrated.attempt
                            && f.attempt == s.attempts
                            && f.kind == crate::model::ModelErrorKind::ContextOverflow
                    });
                if !after_overflow {
                    return Err(bad(format!(
                        "a calibration for attempt {}, which is not the step's last attempt \
                         refused as too long",
                        calibrated.attempt
                    )));
                }
                if calibrated.estimate_tokens == 0 || calibrated.provider_tokens == 0 {
                    return Err(bad("a calibration counting 0 tokens".into()));
                }
                r.context_calibrated(calibrated);
            }
            Event::LlmAttemptFailed(failed) => {
                let s = open_step(r, failed.turn, failed.step).map_err(bad)?;
                if s.response.is_some() {
                    return Err(bad(format!(
                        "attempt {} failed after the step's llm/response",
                        failed.attempt
                    )));
                }
                if failed.attempt != s.attempts || s.attempts == 0 {
                    return Err(bad(format!(
                        "attempt {} failed, but the step's last request is attempt {}",
                        failed.attempt, s.attempts
                    )));
                }
                if s.failed_attempts
                    .last()
                    .is_some_and(|f| f.attempt == failed.attempt)
                {
                    return Err(bad(format!("attempt {} failed twice", failed.attempt)));
                }
                s.failed_attempts.push(failed);
            }
            Event::LlmResponseDetail(detail) => {
                let s = open_step(r, detail.turn, detail.step).map_err(bad)?;
                if s.response.is_none() || s.detail.is_some() || detail.attempt != s.attempts {
                    return Err(bad(
                        "llm/response-detail comes once, right after its step's llm/response, for its last attempt".into(),
                    ));
                }
                s.detail = Some(detail);
            }
            Event::LlmRefusal(refusal) => {
                let s = open_step(r, refusal.turn, refusal.step).map_err(bad)?;
                let refused = s
                    .response
                    .as_ref()
                    .is_some_and(|resp| resp.stop_reason == crate::event::StopReason::Refusal);
                if !refused || s.refusal.is_some() || !s.calls.is_empty() {
                    return Err(bad(
                        "llm/refusal comes once, after an llm/response whose stop reason is \
                         refusal and before its calls"
                            .into(),
                    ));
                }
                if refusal.attempt != s.attempts {
                    return Err(bad(format!(
                        "llm/refusal for attempt {}, but the step's last request is attempt {}",
                        refusal.attempt, s.attempts
                    )));
                }
                s.refusal = Some(refusal);
            }
            Event::LlmNote(note) => {
                let s = open_step(r, note.turn, note.step).map_err(bad)?;
                if s.response.is_none() || !s.calls.is_empty() || note.attempt != s.attempts {
                    return Err(bad(
                        "llm/note comes after its step's llm/response, before its calls, for \
                         its last attempt"
                            .into(),
                    ));
                }
                s.notes.push(note);
            }
            Event::StepEnd {
                turn,
                step,
                outcome,
            } => {
                open_step(r, turn, step).map_err(bad)?;
                r.step_ended(outcome);
            }
            Event::TurnEnd { turn, outcome } => {
                open_turn(r, turn).map_err(bad)?;
                if r.open_step().is_some() {
                    return Err(bad("turn/end while a step is open".into()));
                }
                r.turn_ended(outcome);
            }
            Event::SessionClose => {
                if r.open_turn().is_some() {
                    return Err(bad("session/close while a turn is open".into()));
                }
                r.session_closed();
            }
            Event::SessionReopen => r.session_reopened(),
            Event::Recovery(recovery) => apply_recovery(r, at, recovery)?,
            Event::RecoveryRerun(rerun) => {
                if !after_recovery {
                    return Err(bad("recovery/rerun comes right after a recovery".into()));
                }
                apply_rerun(r, seq, rerun).map_err(bad)?
            }
            Event::ImportSource(source) => {
                if previous_kind != Some("session/open") {
                    return Err(bad(
                        "import/source comes once, right after session/open".into()
                    ));
                }
                self.imported = true;
                r.import_source(source);
            }
            Event::ImportLine(line) => {
                if !self.imported {
                    self.imported = true;
                    r.import_source(unproven_source());
                    return Err(bad("import/line in a journal that was not imported".into()));
                }
                self.import_line = Some(line);
            }
            Event::ImportOutcome(outcome) => {
                if !self.imported {
                    self.imported = true;
                    r.import_source(unproven_source());
                    return Err(bad(format!(
                        "{}: import/outcome in a journal that was not imported",
                        outcome.call
                    )));
                }
                import_outcome(r, at, outcome, self.import_line)?
            }
            Event::Received { ref call, .. } if self.imported => {
                // An imported call keeps the source line it was read from.
                let call = call.clone();
                apply_call_event(r, at, event)?;
                r.call_mut(&call).map_err(bad)?.imported = Some(ImportedCall {
                    line: self.import_line,
                    verdict: None,
                    outcome_line: None,
                });
            }
            other => apply_call_event(r, at, other)?,
        }
        Ok(())
    }
}

/// What an import event with no `import/source` before it stands for: the event is refused
/// (the journal is inconsistent), but a reading that passes over damage (`--salvage`) goes on
/// reading the journal as the imported one it is, or its imported calls would read as never
/// started.
fn unproven_source() -> crate::event::ImportSource {
    crate::event::ImportSource {
        agent: "unknown".into(),
        file: "(its import/source could not be read)".into(),
        size_bytes: 0,
        sha256: String::new(),
        source_session_id: None,
        damaged: Vec::new(),
        notes: Vec::new(),
    }
}

/// `import/outcome`: an imported call's one result, from `received` (the only state an imported
/// call is ever in before it), pointing back at it.
fn import_outcome<R: Retain>(
    r: &mut R,
    at: At,
    outcome: ImportOutcome,
    line: Option<ImportLine>,
) -> Result<(), ReplayError> {
    let bad = |message: String| at.bad(message);
    let ImportOutcome {
        call,
        verdict,
        result,
        source_seqs,
    } = outcome;
    let c = r.call_mut(&call).map_err(bad)?;
    let previous = c.seqs.last().copied().unwrap_or(0);
    if !source_seqs.contains(&previous) || source_seqs.iter().any(|&s| s >= at.seq) {
        return Err(bad(format!(
            "{call}: import/outcome points back at {source_seqs:?}, not at the call's previous \
             event {previous}"
        )));
    }
    c.machine
        .commit_imported()
        .map_err(|source| ReplayError::IllegalTransition {
            seq: at.seq,
            position: at.position,
            source,
        })?;
    c.state = CallState::Committed;
    c.seqs.push(at.seq);
    c.committed = Some(result);
    c.committed_at_ms = Some(at.at_ms);
    let imported = c.imported.get_or_insert(ImportedCall {
        line: None,
        verdict: None,
        outcome_line: None,
    });
    imported.verdict = Some(verdict);
    imported.outcome_line = line;
    r.call_committed(&call);
    Ok(())
}

/// The events about one call, and the session-wide facts that need no shape checked.
fn apply_call_event<R: Retain>(r: &mut R, at: At, event: Event) -> Result<(), ReplayError> {
    let bad = |message: String| at.bad(message);
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
            let c = r.call_mut(&call).map_err(bad)?;
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
                return Err(bad(format!(
                    "{call}: {how}, but its question's answer is {last_answer:?}"
                )));
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
                return Err(bad(format!(
                    "{call}: started with evidence whose sha256 {bad_hash:?} is not 64 lowercase \
                     hex digits"
                )));
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
            let c = r.call_mut(&call).map_err(bad)?;
            if c.state != CallState::Started {
                return Err(bad(format!(
                    "call/process for {call}, which is {} (a process is started by a running call)",
                    c.state.as_str()
                )));
            }
            r.process_started(&call, &process);
            r.call_mut(&call).map_err(bad)?.processes.push(process);
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
    let bad = |message: String| at.bad(message);
    let s = open_step(r, call.turn, call.step).map_err(bad)?;
    let Some(response) = &s.response else {
        return Err(bad("a call received before the step's llm/response".into()));
    };
    let expected = response.tool_calls.get(index as usize);
    if expected
        .is_none_or(|m| m.call_id != call.call_id || m.name != tool || m.arguments != raw_arguments)
        || index as usize != s.calls.len()
    {
        return Err(bad(format!(
            "{call} does not match call {index} of the step's llm/response"
        )));
    }
    if source_seqs.is_empty() || source_seqs.iter().any(|&s| s >= at.seq) {
        return Err(bad(format!(
            "{call}: source seqs {source_seqs:?} do not point back"
        )));
    }
    let mut received = CallReplay::received(call, index, tool, raw_arguments, at.at_ms);
    received.seqs.push(at.seq);
    s.calls.push(received);
    Ok(())
}

/// Questions, and the facts about the session that only need a call, if named, to exist.
fn apply_fact<R: Retain>(r: &mut R, at: At, event: Event) -> Result<(), ReplayError> {
    let bad = |message: String| at.bad(message);
    match event {
        Event::AskPending { call, question } => {
            ask_put(r, &call, question, None, at).map_err(bad)?
        }
        Event::AskQuestion { call, question } => {
            let text = question.text.clone();
            ask_put(r, &call, text, Some(question), at).map_err(bad)?
        }
        Event::AskReplied { call, reply } => {
            let answer = match &reply {
                Reply::Answered(_) => AskAnswer::Answered,
                Reply::Declined { .. } => AskAnswer::Declined,
            };
            if !last_is_question(r, &call).map_err(bad)? {
                return Err(bad(format!("{call}: a reply with no pending ask/question")));
            }
            answer_ask(r, &call, answer, None, at.seq).map_err(bad)?;
            let Some(a) = r.call_mut(&call).map_err(bad)?.asks.last_mut() else {
                return Err(bad(format!("{call}: a reply with no question")));
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
            let structured = last_is_question(r, &call).map_err(bad)?;
            if structured || matches!(answer, AskAnswer::Answered | AskAnswer::Declined) {
                return Err(bad(format!(
                    "{call}: a yes/no answer ({answer:?}) to a question it does not fit"
                )));
            }
            answer_ask(r, &call, answer, None, at.seq).map_err(bad)?
        }
        Event::AskExpired { call } => {
            answer_ask(r, &call, AskAnswer::Expired, None, at.seq).map_err(bad)?
        }
        Event::AskCancelled { call, reason } => {
            answer_ask(r, &call, AskAnswer::Cancelled, Some(reason), at.seq).map_err(bad)?
        }
        Event::PlanReplace { items } => r.plan_replaced(items),
        Event::PlanMode { on, call, .. } => {
            if let Some(call) = &call {
                r.call_mut(call).map_err(bad)?;
            }
            r.plan_mode(on);
        }
        Event::SessionPolicy(policy) => r.policy(policy),
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
            return Err(bad("an event applied out of its place (a bug)".into()))
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
        | Event::LlmNote(_) => return Err(bad("an event applied out of its place (a bug)".into())),
    }
    Ok(())
}

/// A `recovery`: commits the calls it names (adopting those only the step's `llm/response`
/// names), then interrupts the step and turn it says.
fn apply_recovery<R: Retain>(r: &mut R, at: At, recovery: Recovery) -> Result<(), ReplayError> {
    let bad = |message: String| at.bad(message);
    for rc in &recovery.calls {
        // A call the model sent whose `received` never reached the journal (the process died
        // while journaling the batch) is known from `llm/response`.
        if r.call_mut(&rc.call).is_err() {
            adopt_unreceived(r, &rc.call, at.at_ms).map_err(bad)?;
        }
        let c = r.call_mut(&rc.call).map_err(bad)?;
        if c.state == CallState::Committed {
            return Err(bad(format!("{}: recovery of a committed call", rc.call)));
        }
        c.seqs.push(at.seq);
        c.committed = Some(rc.result.clone());
        c.state = CallState::Committed;
        c.committed_at_ms = Some(at.at_ms);
        c.recovered = true;
        r.call_recovered(rc);
    }
    // A re-run this recovery follows was interrupted: its calls left open may be named again.
    if let Some(step) = r.open_step() {
        for c in step.calls.iter_mut().filter(|c| c.committed.is_none()) {
            c.rerun = None;
        }
    }
    if let Some((turn, step)) = recovery.interrupted_step {
        open_step(r, turn, step).map_err(bad)?;
        r.step_ended(StepOutcome::Interrupted);
    }
    if let Some(turn) = recovery.interrupted_turn {
        open_turn(r, turn).map_err(bad)?;
        r.turn_ended(TurnOutcome::Interrupted);
    }
    r.recovery_applied(recovery);
    Ok(())
}

/// A hash in `evidence` that is not a sha256 as the runtime writes it (64 lowercase hex
/// digits): what reads it (a probe, an audit) may then rely on its shape.
fn malformed_hash(evidence: &crate::event::Evidence) -> Option<&str> {
    let well_formed = |h: &str| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    match evidence {
        crate::event::Evidence::FileReplace {
            before_sha256,
            after_sha256,
            ..
        } => before_sha256
            .iter()
            .chain(std::iter::once(after_sha256))
            .map(String::as_str)
            .find(|h| !well_formed(h)),
    }
}

/// `recovery/rerun`: the calls the `recovery` before it left open in the open step, each
/// approved and never started, or (under `safe`) started with no `settled`.
fn apply_rerun<R: Retain>(r: &mut R, seq: u64, rerun: RecoveryRerun) -> Result<(), String> {
    let (Some(turn), Some(step)) = (r.open_turn().map(|t| t.turn), r.open_step()) else {
        return Err("recovery/rerun with no step open".into());
    };
    let step = step.step;
    if rerun.calls.is_empty() {
        return Err("recovery/rerun names no call".into());
    }
    for call in &rerun.calls {
        if (call.turn, call.step) != (turn, step) {
            return Err(format!(
                "{call}: re-run, but turn {turn} step {step} is open"
            ));
        }
        let c = r.call_mut(call)?;
        let fits = match c.state {
            CallState::Approved => true,
            CallState::Started => rerun.policy == RerunPolicy::Safe,
            _ => false,
        };
        if !fits || c.committed.is_some() || c.rerun.is_some() {
            return Err(format!(
                "{call}: re-run under {}, but it is {:?}{}",
                rerun.policy.as_str(),
                c.state,
                if c.rerun.is_some() {
                    " and named twice"
                } else {
                    ""
                }
            ));
        }
        c.rerun = Some(rerun.policy);
        // The re-run's `started` points back at this event.
        c.seqs.push(seq);
    }
    Ok(())
}

/// `step/start`: in the open turn, none open, numbered next.
fn step_start<R: Retain>(r: &mut R, turn: u32, step: u32) -> Result<(), String> {
    let t = open_turn(r, turn)?;
    if r.open_step().is_some() {
        return Err("step/start while a step is open".into());
    }
    if u64::from(step) != u64::from(t.steps) + 1 {
        return Err(format!("step {step} after step {}", t.steps));
    }
    r.step_begun(step);
    Ok(())
}

/// Adds a call that is in its step's `llm/response` but was never `received`.
fn adopt_unreceived<R: Retain>(r: &mut R, call: &CallRef, at_ms: u64) -> Result<(), String> {
    let step = open_step(r, call.turn, call.step)?;
    let response = step
        .response
        .as_ref()
        .ok_or_else(|| format!("{call}: recovered, but its step has no llm/response"))?;
    let (index, model_call) = response
        .tool_calls
        .iter()
        .enumerate()
        .find(|(_, m)| m.call_id == call.call_id)
        .ok_or_else(|| {
            format!("{call}: recovered, but the step's llm/response has no such call")
        })?;
    let index = index as u32;
    let mut adopted = CallReplay::received(
        call.clone(),
        index,
        model_call.name.clone(),
        model_call.arguments.clone(),
        at_ms,
    );
    adopted.adopted = true;
    let at = step
        .calls
        .iter()
        .position(|c| c.index > index)
        .unwrap_or(step.calls.len());
    step.calls.insert(at, adopted);
    Ok(())
}

/// The open turn, when it is `turn`.
fn open_turn<R: Retain>(r: &R, turn: u32) -> Result<TurnCursor, String> {
    match r.open_turn() {
        Some(t) if t.turn == turn => Ok(t),
        _ => Err(format!("turn {turn} is not the open turn")),
    }
}

/// The open step, when it is `step` of the open turn `turn`.
fn open_step<R: Retain>(r: &mut R, turn: u32, step: u32) -> Result<&mut StepReplay, String> {
    open_turn(r, turn)?;
    match r.open_step() {
        Some(s) if s.step == step => Ok(s),
        _ => Err(format!("step {step} of turn {turn} is not the open step")),
    }
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
    let inconsistent = |message: String| {
        At {
            kind: "call event",
            ..at
        }
        .bad(message)
    };
    let c = r.call_mut(call).map_err(inconsistent)?;
    // Every call kept has its first event (`received`, or the recovery that adopted it), and
    // a call event is only applied to a call kept.
    let previous = c.seqs.last().copied().unwrap_or(0);
    if !source_seqs.contains(&previous) || source_seqs.iter().any(|&s| s >= at.seq) {
        return Err(inconsistent(format!(
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
) -> Result<(), String> {
    let c = r.call_mut(call)?;
    if c.state != CallState::Parsed || c.ask_pending() {
        return Err(format!("{call}: a question while {}", c.state));
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
fn last_is_question<R: Retain>(r: &mut R, call: &CallRef) -> Result<bool, String> {
    Ok(r.call_mut(call)?
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
) -> Result<(), String> {
    let c = r.call_mut(call)?;
    match c.asks.last_mut() {
        Some(a) if a.answer.is_none() => {
            a.answer = Some(answer);
            a.cancel_reason = cancel_reason;
            c.seqs.push(seq);
        }
        _ => return Err(format!("{call}: an answer with no pending question")),
    }
    r.question_closed(call);
    Ok(())
}
