//! The replay rules, written once for every [`Retain`] policy: whether each event fits where it
//! lands, and what it does to its call. Anything that does not fit is an error naming the
//! record's seq and position.

mod calls;

use super::retain::{Retain, TurnCursor};
use super::rule::{Broken, Rule};
use super::tree::{CallReplay, ImportedCall, StepReplay};
use super::{ReplayError, Replayer};
use crate::event::{
    CallRef, Event, ImportLine, ImportOutcome, Recovery, RecoveryRerun, RerunPolicy, StepOutcome,
    TurnOutcome,
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
    /// An event that does not fit, named by its own kind and the rule it breaks.
    fn bad(self, rule: Rule, message: String) -> ReplayError {
        ReplayError::Inconsistent {
            seq: self.seq,
            position: self.position,
            kind: self.kind,
            rule: Some(rule),
            message,
        }
    }

    /// [`At::bad`] for a rule broken in a helper ([`Broken`]).
    fn broken(self, (rule, message): Broken) -> ReplayError {
        self.bad(rule, message)
    }

    /// An event routed to the wrong place: this build's bug, not the journal's.
    fn bug(self) -> ReplayError {
        ReplayError::Inconsistent {
            seq: self.seq,
            position: self.position,
            kind: self.kind,
            rule: None,
            message: "an event applied out of its place (a bug)".into(),
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
        let bad = |rule: Rule, message: String| at.bad(rule, message);
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
                return Err(bad(
                    Rule::StartedKey,
                    format!(
                        "{}: started with idempotency key {}, but its key is {key}",
                        started.call, started.idempotency_key
                    ),
                ));
            }
        }
        let r = &mut self.retain;
        r.record_seq(seq);
        r.record_time(at_ms, at.kind);
        if !r.opened() && !matches!(event, Event::SessionOpen(_)) {
            return Err(bad(
                Rule::FirstIsSessionOpen,
                "the journal does not begin with session/open".into(),
            ));
        }
        // Only a reopening follows a close (schema 9); it is the only place one may stand.
        match (r.closed(), &event) {
            (true, Event::SessionReopen) => {}
            (true, _) => {
                return Err(bad(
                    Rule::NothingAfterClose,
                    "event after session/close".into(),
                ))
            }
            (false, Event::SessionReopen) => {
                return Err(bad(
                    Rule::ReopenAfterClose,
                    "session/reopen of a session that is not closed".into(),
                ))
            }
            (false, _) => {}
        }
        match event {
            Event::SessionOpen(open) => {
                if r.opened() {
                    return Err(bad(Rule::OneSessionOpen, "a second session/open".into()));
                }
                r.session_opened(open);
            }
            Event::TurnStart { turn, user_text } => {
                if r.open_turn().is_some() {
                    return Err(bad(
                        Rule::TurnStartWithNoOpenTurn,
                        "turn/start while a turn is open".into(),
                    ));
                }
                let begun = r.turns_begun();
                if u64::from(turn) != u64::from(begun) + 1 {
                    return Err(bad(
                        Rule::TurnNumberedNext,
                        format!("turn {turn} after turn {begun}"),
                    ));
                }
                r.turn_begun(turn, user_text);
            }
            Event::StepStart { turn, step } => {
                step_start(r, turn, step).map_err(|b| at.broken(b))?
            }
            Event::StepTools { turn, step, tools } => {
                let s = open_step(r, turn, step).map_err(|b| at.broken(b))?;
                if s.tools.is_some() || s.response.is_some() {
                    return Err(bad(
                        Rule::StepToolsOnce,
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
                let s = open_step(r, turn, step).map_err(|b| at.broken(b))?;
                if s.response.is_some() {
                    return Err(bad(
                        Rule::OneResponse,
                        "a second llm/response in one step".into(),
                    ));
                }
                if s.attempts > 0
                    && s.failed_attempts
                        .last()
                        .is_some_and(|f| f.attempt == s.attempts)
                {
                    return Err(bad(
                        Rule::ResponseOfLiveAttempt,
                        format!("llm/response for attempt {}, which failed", s.attempts),
                    ));
                }
                s.response = Some(response);
            }
            Event::LlmRequest(request) => {
                let s = open_step(r, request.turn, request.step).map_err(|b| at.broken(b))?;
                if s.response.is_some() {
                    return Err(bad(
                        Rule::RequestBeforeResponse,
                        "llm/request after the step's llm/response".into(),
                    ));
                }
                if request.attempt != s.attempts + 1 {
                    return Err(bad(
                        Rule::AttemptNumberedNext,
                        format!("attempt {} after attempt {}", request.attempt, s.attempts),
                    ));
                }
                s.attempts = request.attempt;
            }
            Event::ContextSummaryRequested(asked) => {
                let s = open_step(r, asked.turn, asked.step).map_err(|b| at.broken(b))?;
                if s.response.is_some() {
                    return Err(bad(
                        Rule::SummaryBeforeResponse,
                        "a summary requested after the step's llm/response".into(),
                    ));
                }
                if asked.through_turn == 0 || asked.through_turn >= asked.turn {
                    return Err(bad(
                        Rule::SummaryOfEarlierTurns,
                        format!(
                            "a summary of turns 1 to {} requested in turn {}",
                            asked.through_turn, asked.turn
                        ),
                    ));
                }
            }
            Event::ContextCompacted(compacted) => {
                let s = open_step(r, compacted.turn, compacted.step).map_err(|b| at.broken(b))?;
                if s.response.is_some() {
                    return Err(bad(
                        Rule::ReductionBeforeResponse,
                        "a reduction after the step's llm/response".into(),
                    ));
                }
                // A reduction comes before the step's first request, or after its last attempt
                // failed: a request already sent was sent unreduced.
                let between_attempts = s.attempts == 0
                    || s.failed_attempts
                        .last()
                        .is_some_and(|f| f.attempt == s.attempts);
                if !between_attempts {
                    return Err(bad(
                        Rule::ReductionBetweenAttempts,
                        format!(
                            "a reduction while attempt {} of the step is outstanding",
                            s.attempts
                        ),
                    ));
                }
                let (turn, step) = (compacted.turn, compacted.step);
                let kept = compacted.through_turn < turn
                    && compacted.shortened.iter().all(|&(t, st)| {
                        t > compacted.through_turn && (t < turn || (t == turn && st < step))
                    });
                if !kept {
                    return Err(bad(
                        Rule::ReductionKeepsItsTurn,
                        format!(
                        "a reduction in turn {} that leaves out turns to {} and shortens {:?}: \
                         it must keep the turn it is in and shorten only kept steps",
                        compacted.turn, compacted.through_turn, compacted.shortened
                    ),
                    ));
                }
                r.context_compacted(compacted);
            }
            Event::ContextCalibrated(calibrated) => {
                let s = open_step(r, calibrated.turn, calibrated.step).map_err(|b| at.broken(b))?;
                let after_overflow = s.response.is_none()
                    && s.failed_attempts.last().is_some_and(|f| {
                        f.attempt == calibrated.attempt
                            && f.attempt == s.attempts
                            && f.kind == crate::model::ModelErrorKind::ContextOverflow
                    });
                if !after_overflow {
                    return Err(bad(
                        Rule::CalibrationAfterOverflow,
                        format!(
                            "a calibration for attempt {}, which is not the step's last attempt \
                         refused as too long",
                            calibrated.attempt
                        ),
                    ));
                }
                if calibrated.estimate_tokens == 0 || calibrated.provider_tokens == 0 {
                    return Err(bad(
                        Rule::CalibrationCounts,
                        "a calibration counting 0 tokens".into(),
                    ));
                }
                r.context_calibrated(calibrated);
            }
            Event::LlmAttemptFailed(failed) => {
                let s = open_step(r, failed.turn, failed.step).map_err(|b| at.broken(b))?;
                if s.response.is_some() {
                    return Err(bad(
                        Rule::FailureBeforeResponse,
                        format!(
                            "attempt {} failed after the step's llm/response",
                            failed.attempt
                        ),
                    ));
                }
                if failed.attempt != s.attempts || s.attempts == 0 {
                    return Err(bad(
                        Rule::FailureOfLastAttempt,
                        format!(
                            "attempt {} failed, but the step's last request is attempt {}",
                            failed.attempt, s.attempts
                        ),
                    ));
                }
                if s.failed_attempts
                    .last()
                    .is_some_and(|f| f.attempt == failed.attempt)
                {
                    return Err(bad(
                        Rule::AttemptFailsOnce,
                        format!("attempt {} failed twice", failed.attempt),
                    ));
                }
                s.failed_attempts.push(failed);
            }
            Event::LlmResponseDetail(detail) => {
                let s = open_step(r, detail.turn, detail.step).map_err(|b| at.broken(b))?;
                if s.response.is_none() || s.detail.is_some() || detail.attempt != s.attempts {
                    return Err(bad(Rule::DetailAfterResponse,
                        "llm/response-detail comes once, right after its step's llm/response, for its last attempt".into(),
                    ));
                }
                s.detail = Some(detail);
            }
            Event::LlmRefusal(refusal) => {
                let s = open_step(r, refusal.turn, refusal.step).map_err(|b| at.broken(b))?;
                let refused = s
                    .response
                    .as_ref()
                    .is_some_and(|resp| resp.stop_reason == crate::event::StopReason::Refusal);
                if !refused || s.refusal.is_some() || !s.calls.is_empty() {
                    return Err(bad(
                        Rule::RefusalAfterRefusedResponse,
                        "llm/refusal comes once, after an llm/response whose stop reason is \
                         refusal and before its calls"
                            .into(),
                    ));
                }
                if refusal.attempt != s.attempts {
                    return Err(bad(
                        Rule::RefusalAfterRefusedResponse,
                        format!(
                            "llm/refusal for attempt {}, but the step's last request is attempt {}",
                            refusal.attempt, s.attempts
                        ),
                    ));
                }
                s.refusal = Some(refusal);
            }
            Event::LlmNote(note) => {
                let s = open_step(r, note.turn, note.step).map_err(|b| at.broken(b))?;
                if s.response.is_none() || !s.calls.is_empty() || note.attempt != s.attempts {
                    return Err(bad(
                        Rule::NoteAfterResponse,
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
                open_step(r, turn, step).map_err(|b| at.broken(b))?;
                r.step_ended(outcome);
            }
            Event::TurnEnd { turn, outcome } => {
                open_turn(r, turn).map_err(|b| at.broken(b))?;
                if r.open_step().is_some() {
                    return Err(bad(
                        Rule::TurnEndWithNoOpenStep,
                        "turn/end while a step is open".into(),
                    ));
                }
                r.turn_ended(outcome);
            }
            Event::SessionClose => {
                if r.open_turn().is_some() {
                    return Err(bad(
                        Rule::CloseWithNoOpenTurn,
                        "session/close while a turn is open".into(),
                    ));
                }
                r.session_closed();
            }
            Event::SessionReopen => r.session_reopened(),
            Event::Recovery(recovery) => apply_recovery(r, at, recovery)?,
            Event::RecoveryRerun(rerun) => {
                if !after_recovery {
                    return Err(bad(
                        Rule::RerunAfterRecovery,
                        "recovery/rerun comes right after a recovery".into(),
                    ));
                }
                apply_rerun(r, seq, rerun).map_err(|b| at.broken(b))?
            }
            Event::ImportSource(source) => {
                if previous_kind != Some("session/open") {
                    return Err(bad(
                        Rule::ImportSourceAfterOpen,
                        "import/source comes once, right after session/open".into(),
                    ));
                }
                self.imported = true;
                r.import_source(source);
            }
            Event::ImportLine(line) => {
                if !self.imported {
                    self.imported = true;
                    r.import_source(unproven_source());
                    return Err(bad(
                        Rule::ImportEventsImported,
                        "import/line in a journal that was not imported".into(),
                    ));
                }
                self.import_line = Some(line);
            }
            Event::ImportOutcome(outcome) => {
                if !self.imported {
                    self.imported = true;
                    r.import_source(unproven_source());
                    return Err(bad(
                        Rule::ImportEventsImported,
                        format!(
                            "{}: import/outcome in a journal that was not imported",
                            outcome.call
                        ),
                    ));
                }
                import_outcome(r, at, outcome, self.import_line)?
            }
            Event::Received { ref call, .. } if self.imported => {
                // An imported call keeps the source line it was read from.
                let call = call.clone();
                calls::apply_call_event(r, at, event)?;
                r.call_mut(&call)
                    .map_err(|m| bad(Rule::CallWasReceived, m))?
                    .imported = Some(ImportedCall {
                    line: self.import_line,
                    verdict: None,
                    outcome_line: None,
                });
            }
            other => calls::apply_call_event(r, at, other)?,
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
    let bad = |rule: Rule, message: String| at.bad(rule, message);
    let ImportOutcome {
        call,
        verdict,
        result,
        source_seqs,
    } = outcome;
    let c = r
        .call_mut(&call)
        .map_err(|m| bad(Rule::CallWasReceived, m))?;
    let previous = c.seqs.last().copied().unwrap_or(0);
    if !source_seqs.contains(&previous) || source_seqs.iter().any(|&s| s >= at.seq) {
        return Err(bad(
            Rule::CallPointsBack,
            format!(
            "{call}: import/outcome points back at {source_seqs:?}, not at the call's previous \
             event {previous}"
        ),
        ));
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

/// A `recovery`: commits the calls it names (adopting those only the step's `llm/response`
/// names), then interrupts the step and turn it says.
fn apply_recovery<R: Retain>(r: &mut R, at: At, recovery: Recovery) -> Result<(), ReplayError> {
    let bad = |rule: Rule, message: String| at.bad(rule, message);
    for rc in &recovery.calls {
        // A call the model sent whose `received` never reached the journal (the process died
        // while journaling the batch) is known from `llm/response`.
        if r.call_mut(&rc.call).is_err() {
            adopt_unreceived(r, &rc.call, at.at_ms).map_err(|b| at.broken(b))?;
        }
        let c = r
            .call_mut(&rc.call)
            .map_err(|m| bad(Rule::CallWasReceived, m))?;
        if c.state == CallState::Committed {
            return Err(bad(
                Rule::RecoveryOfUncommitted,
                format!("{}: recovery of a committed call", rc.call),
            ));
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
        open_step(r, turn, step).map_err(|b| at.broken(b))?;
        r.step_ended(StepOutcome::Interrupted);
    }
    if let Some(turn) = recovery.interrupted_turn {
        open_turn(r, turn).map_err(|b| at.broken(b))?;
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
        crate::event::Evidence::Sandbox(_) => None,
    }
}

/// `recovery/rerun`: the calls the `recovery` before it left open in the open step, each
/// approved and never started, or (under `safe`) started with no `settled`.
fn apply_rerun<R: Retain>(r: &mut R, seq: u64, rerun: RecoveryRerun) -> Result<(), Broken> {
    let (Some(turn), Some(step)) = (r.open_turn().map(|t| t.turn), r.open_step()) else {
        return Err((
            Rule::RerunOfOpenCalls,
            "recovery/rerun with no step open".into(),
        ));
    };
    let step = step.step;
    if rerun.calls.is_empty() {
        return Err((
            Rule::RerunOfOpenCalls,
            "recovery/rerun names no call".into(),
        ));
    }
    for call in &rerun.calls {
        if (call.turn, call.step) != (turn, step) {
            return Err((
                Rule::RerunOfOpenCalls,
                format!("{call}: re-run, but turn {turn} step {step} is open"),
            ));
        }
        let c = r.call_mut(call).map_err(|m| (Rule::RerunOfOpenCalls, m))?;
        let fits = match c.state {
            CallState::Approved => true,
            CallState::Started => rerun.policy == RerunPolicy::Safe,
            _ => false,
        };
        if !fits || c.committed.is_some() || c.rerun.is_some() {
            return Err((
                Rule::RerunOfOpenCalls,
                format!(
                    "{call}: re-run under {}, but it is {:?}{}",
                    rerun.policy.as_str(),
                    c.state,
                    if c.rerun.is_some() {
                        " and named twice"
                    } else {
                        ""
                    }
                ),
            ));
        }
        c.rerun = Some(rerun.policy);
        // The re-run's `started` points back at this event.
        c.seqs.push(seq);
    }
    Ok(())
}

/// `step/start`: in the open turn, none open, numbered next.
fn step_start<R: Retain>(r: &mut R, turn: u32, step: u32) -> Result<(), Broken> {
    let t = open_turn(r, turn)?;
    if r.open_step().is_some() {
        return Err((
            Rule::StepStartWithNoOpenStep,
            "step/start while a step is open".into(),
        ));
    }
    if u64::from(step) != u64::from(t.steps) + 1 {
        return Err((
            Rule::StepNumberedNext,
            format!("step {step} after step {}", t.steps),
        ));
    }
    r.step_begun(step);
    Ok(())
}

/// Adds a call that is in its step's `llm/response` but was never `received`.
fn adopt_unreceived<R: Retain>(r: &mut R, call: &CallRef, at_ms: u64) -> Result<(), Broken> {
    let step = open_step(r, call.turn, call.step)?;
    let response = step.response.as_ref().ok_or_else(|| {
        (
            Rule::RecoveryOfAnsweredCall,
            format!("{call}: recovered, but its step has no llm/response"),
        )
    })?;
    let (index, model_call) = response
        .tool_calls
        .iter()
        .enumerate()
        .find(|(_, m)| m.call_id == call.call_id)
        .ok_or_else(|| {
            (
                Rule::RecoveryOfAnsweredCall,
                format!("{call}: recovered, but the step's llm/response has no such call"),
            )
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
fn open_turn<R: Retain>(r: &R, turn: u32) -> Result<TurnCursor, Broken> {
    match r.open_turn() {
        Some(t) if t.turn == turn => Ok(t),
        _ => Err((
            Rule::NamesOpenTurn,
            format!("turn {turn} is not the open turn"),
        )),
    }
}

/// The open step, when it is `step` of the open turn `turn`.
fn open_step<R: Retain>(r: &mut R, turn: u32, step: u32) -> Result<&mut StepReplay, Broken> {
    open_turn(r, turn)?;
    match r.open_step() {
        Some(s) if s.step == step => Ok(s),
        _ => Err((
            Rule::NamesOpenStep,
            format!("step {step} of turn {turn} is not the open step"),
        )),
    }
}
