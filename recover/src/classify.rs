//! Classification: what happened to every call, and what recovery must append to balance the
//! journal (DESIGN.md §6 steps 2, 3 and 5).
//!
//! The rule is the write-ahead rule read backwards: a call's body runs only after its `started`
//! is durable (I1), so a call with no `started` provably did not run (`TOOL_NOT_STARTED`), and a
//! call with `started` but no `settled` may have run (`TOOL_OUTCOME_UNKNOWN`, with what it
//! declared it would touch). A call that `settled` has a known result, committed as it is: never
//! an error it was not, never a success it was not (I4).
//!
//! A built-in `ask` whose question was still waiting for an answer did not start either, and
//! recovery withdraws the question (`ask/cancelled`, [`WITHDRAWN_REASON`]); its result says so
//! in words for a question ([`question_withdrawn_text`]): nobody answered it, ask again.

use crate::bound::{Among, Peers};
use crate::conversation::{ConvCall, ConvResult, Conversation, ProviderState};
use crate::probe::{Probe, Prober};
use events::event::{
    Answer, CallRef, Classification, CommittedResult, Outcome, OutcomeStatus, RecoveredCall,
    Recovery, Reply, Resources, SandboxBound,
};
use events::replay::{CallReplay, SessionReplay};
use events::result::error_content;
use events::state::CallState;
use events::ErrorCode;
use history::layout::{layout, StepView, TurnView};
use journal::ReadEnd;

mod words;
pub use words::{
    answer_undelivered_text, not_started_text, outcome_unknown_text, outcome_unknown_text_bounded,
    question_withdrawn_text, WITHDRAWN_REASON,
};
pub(crate) use words::{import_cut_short_text, outcome_unknown_text_probed};

/// How the journal's bytes ended, as `classify --json` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// The last segment ended in a torn record (a crash mid-write), not at a record boundary.
    pub torn: bool,
    /// Bytes of that torn tail (0 when not torn).
    pub dropped_bytes: u64,
}

/// One call, as recovery sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// Which call: turn, step and the model's id.
    pub call: CallRef,
    /// The tool the model named.
    pub tool: String,
    /// The arguments as the model sent them, byte for byte.
    pub raw_arguments: String,
    /// The last state the journal shows (before any recovery).
    pub state: CallState,
    /// `None` for a call that finished; for an orphan, whether it provably did not start.
    pub classification: Option<Classification>,
    /// What the call said it would touch (named when its outcome is unknown).
    pub resources: Resources,
    /// The one result this call has in the rebuilt history.
    pub result: CommittedResult,
    /// Recovery (this run or an earlier one) gave it its result.
    pub recovered: bool,
    /// The session is live and this call is still in flight: nothing is said about it.
    pub in_flight: bool,
    /// What a probe of the workspace found, for a `TOOL_OUTCOME_UNKNOWN` call when one was
    /// asked for (`--probe`); `None` otherwise.
    pub probe: Option<Probe>,
    /// The sandbox a `TOOL_OUTCOME_UNKNOWN` call's process ran under, as its last `started`
    /// recorded it (schema 11): what it could have touched. `None` for every other call.
    pub sandbox: Option<SandboxBound>,
}

impl CallReport {
    /// A live session's unfinished call: still running, so nothing is said about its outcome
    /// (an empty result, no classification).
    pub fn in_flight(
        call: CallRef,
        tool: String,
        raw_arguments: String,
        state: CallState,
        resources: Resources,
    ) -> CallReport {
        CallReport {
            call,
            tool,
            raw_arguments,
            state,
            classification: None,
            resources,
            result: CommittedResult {
                content: String::new(),
                is_error: false,
                code: None,
                value: None,
            },
            recovered: false,
            in_flight: true,
            probe: None,
            sandbox: None,
        }
    }
}

/// Everything `recover` knows about a session.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The journal folded into turns, steps and calls.
    pub replay: SessionReplay,
    /// How the bytes ended.
    pub end: End,
    /// Every call the model made, in journal order, each with its one result.
    pub calls: Vec<CallReport>,
    /// Questions still pending, to withdraw (`ask/cancelled`) before the recovery event.
    pub pending_asks: Vec<CallRef>,
    /// The event that balances the journal; `None` when it is balanced already (or live).
    pub recovery: Option<Recovery>,
    /// A live writer holds the journal: read-only, nothing classified.
    pub live: bool,
}

/// Whether the call is the built-in `ask` with its question (`ask/question`) still waiting
/// for an answer: recovery withdraws it, and [`question_withdrawn_text`] is its result.
/// Approvals of other tools (`ask/pending`) are not questions to the model's `ask`.
pub(crate) fn question_pending(c: &CallReplay) -> bool {
    c.tool == events::ASK_TOOL
        && c.asks
            .last()
            .is_some_and(|a| a.answer.is_none() && a.structured.is_some())
}

/// The person's answer to a built-in `ask` call's question, when one was journaled
/// (`ask/reply`, answered).
pub(crate) fn answered(c: &CallReplay) -> Option<&Answer> {
    match c.asks.last()?.reply.as_ref()? {
        Reply::Answered(answer) if c.tool == events::ASK_TOOL => Some(answer),
        _ => None,
    }
}

/// The result a settled call's outcome gives, committed as it is.
fn settled_result(outcome: &Outcome) -> CommittedResult {
    match &outcome.status {
        OutcomeStatus::Success => CommittedResult {
            content: outcome.content.render(),
            is_error: false,
            code: None,
            value: outcome.value.clone(),
        },
        OutcomeStatus::Error { code, message } => CommittedResult {
            content: error_content(*code, message),
            is_error: true,
            code: Some(*code),
            value: None,
        },
    }
}

pub(crate) fn error_result(code: ErrorCode, content: String) -> CommittedResult {
    CommittedResult {
        content,
        is_error: true,
        code: Some(code),
        value: None,
    }
}

/// What the journal says about an unfinished call, as far as its classification goes: the
/// one input of [`classify_unfinished`], shared by [`analyze`] and the streaming classifier
/// ([`crate::stream`]) so that both give the same bytes.
pub(crate) struct Unfinished<'a> {
    pub state: CallState,
    pub outcome: Option<&'a Outcome>,
    pub resources: Option<&'a Resources>,
    pub rejection: Option<&'a (ErrorCode, String)>,
    pub cancel_reason: Option<&'a str>,
    /// Its `ask/question` was still waiting for an answer ([`question_pending`]).
    pub question_pending: bool,
    /// The person's answer to its `ask/question`, journaled before the call ended
    /// ([`answered`]): the model is owed it.
    pub answered: Option<&'a Answer>,
    /// What a probe of the workspace found (a `started` call's, when one was asked for).
    pub probe: Option<&'a Probe>,
    /// The sandbox its last `started` recorded it ran under.
    pub sandbox: Option<&'a SandboxBound>,
    /// It was read from another agent's session by an import that stopped before its
    /// `import/outcome` ([`import_cut_short`]).
    pub imported: bool,
}

/// [`import_cut_short_text`] as a classification and result.
pub(crate) fn import_cut_short() -> (Option<Classification>, CommittedResult) {
    (
        Some(Classification::ToolOutcomeUnknown),
        error_result(ErrorCode::ToolOutcomeUnknown, import_cut_short_text()),
    )
}

/// What becomes of a call the journal left unfinished.
pub(crate) fn classify_unfinished(c: Unfinished<'_>) -> (Option<Classification>, CommittedResult) {
    if c.imported {
        return import_cut_short();
    }
    match c.state {
        CallState::Settled => {
            // Cannot fail: the replay records a call as settled with its outcome.
            #[allow(clippy::expect_used)]
            let outcome = c.outcome.expect("settled calls have an outcome");
            (None, settled_result(outcome))
        }
        // The mutant: a started call read as not started (I1 read backwards, broken on purpose).
        #[cfg(feature = "mutant")]
        CallState::Started if crate::mutant::on(crate::mutant::STARTED_AS_NOT_STARTED) => (
            Some(Classification::ToolNotStarted),
            error_result(ErrorCode::ToolNotStarted, not_started_text()),
        ),
        CallState::Started => {
            let text = match c.answered {
                Some(answer) => answer_undelivered_text(ErrorCode::ToolOutcomeUnknown, answer),
                None => outcome_unknown_text_probed(
                    c.resources.unwrap_or(&Resources::default()),
                    c.sandbox,
                    c.probe,
                ),
            };
            (
                Some(Classification::ToolOutcomeUnknown),
                error_result(ErrorCode::ToolOutcomeUnknown, text),
            )
        }
        // Did not start; its own result is known and is what the model gets.
        CallState::Rejected => {
            // Cannot fail: the replay records a call as rejected with its reason.
            #[allow(clippy::expect_used)]
            let (code, reason) = c.rejection.expect("rejected calls have a reason");
            (
                Some(Classification::ToolNotStarted),
                error_result(*code, error_content(*code, reason)),
            )
        }
        CallState::CancelledBeforeStart => {
            let reason = c.cancel_reason.unwrap_or_default();
            let text = events::result::cancelled_message(reason, c.answered);
            (
                Some(Classification::ToolNotStarted),
                error_result(
                    ErrorCode::AbortedBeforeDispatch,
                    error_content(ErrorCode::AbortedBeforeDispatch, &text),
                ),
            )
        }
        CallState::Received | CallState::Parsed | CallState::Approved => {
            let text = match (c.answered, c.question_pending) {
                (Some(answer), _) => answer_undelivered_text(ErrorCode::ToolNotStarted, answer),
                (None, true) => question_withdrawn_text(),
                (None, false) => not_started_text(),
            };
            (
                Some(Classification::ToolNotStarted),
                error_result(ErrorCode::ToolNotStarted, text),
            )
        }
        CallState::Committed => unreachable!("committed calls are not orphans"),
    }
}

fn classify_orphan(
    c: &CallReplay,
    probe: Option<&Probe>,
) -> (Option<Classification>, CommittedResult) {
    classify_unfinished(Unfinished {
        state: c.state,
        outcome: c.outcome.as_ref(),
        resources: c.resources.as_ref(),
        rejection: c.rejection.as_ref(),
        cancel_reason: c.cancel_reason.as_deref(),
        question_pending: question_pending(c),
        answered: answered(c),
        probe,
        sandbox: crate::bound::of_call(c),
        imported: c.imported.is_some(),
    })
}

/// The probe of a call that may have run (`started`, never settled), when a workspace is
/// probed: made before its result is worded, so that the result can state it. `peers`: the
/// calls of unknown outcome that ran a process ([`Peers::all`]).
pub(crate) fn probe_started(
    c: &CallReplay,
    prober: Option<&Prober>,
    peers: Among<'_>,
) -> Option<Probe> {
    probe_if(c.state == CallState::Started, c, prober, peers)
}

/// The probe of `c` when `unknown` (its outcome is unknown) and a workspace is probed.
fn probe_if(
    unknown: bool,
    c: &CallReplay,
    prober: Option<&Prober>,
    peers: Among<'_>,
) -> Option<Probe> {
    prober.filter(|_| unknown).map(|p| p.probe_among(c, peers))
}

/// The sandbox a report keeps: only a `TOOL_OUTCOME_UNKNOWN` call's.
pub(crate) fn kept_sandbox(
    classification: Option<Classification>,
    c: &CallReplay,
) -> Option<SandboxBound> {
    crate::bound::of_call(c)
        .filter(|_| classification == Some(Classification::ToolOutcomeUnknown))
        .cloned()
}

/// Whether a call a recovery committed was left of unknown outcome.
pub(crate) fn left_unknown(rc: &RecoveredCall) -> bool {
    rc.classification == Some(Classification::ToolOutcomeUnknown)
}

/// The probe a report keeps: only a `TOOL_OUTCOME_UNKNOWN` call's.
pub(crate) fn kept_probe(
    classification: Option<Classification>,
    probe: Option<Probe>,
) -> Option<Probe> {
    probe.filter(|_| classification == Some(Classification::ToolOutcomeUnknown))
}

/// How the journal's bytes ended: torn as read now, torn as cut by this run, or torn as an
/// earlier recovery found it (`last_recovery_dropped`).
pub(crate) fn end_of(
    read_end: &ReadEnd,
    dropped_now: u64,
    last_recovery_dropped: Option<u64>,
) -> End {
    match read_end {
        ReadEnd::TornTail(t) => End {
            torn: true,
            dropped_bytes: t.dropped_bytes,
        },
        _ if dropped_now > 0 => End {
            torn: true,
            dropped_bytes: dropped_now,
        },
        _ => match last_recovery_dropped {
            Some(dropped) if dropped > 0 => End {
                torn: true,
                dropped_bytes: dropped,
            },
            _ => End {
                torn: false,
                dropped_bytes: 0,
            },
        },
    }
}

/// Classifies every call of a replayed session. `live`: a writer holds the journal.
pub fn analyze(
    replay: SessionReplay,
    read_end: &ReadEnd,
    dropped_now: u64,
    live: bool,
) -> Analysis {
    analyze_probing(replay, read_end, dropped_now, live, None)
}

/// [`analyze`], probing the workspace for every `TOOL_OUTCOME_UNKNOWN` call when `prober` is
/// given: each such report carries its [`Probe`], and the result of a call recovered now
/// states it (a call an earlier recovery committed keeps its journaled result).
pub fn analyze_probing(
    replay: SessionReplay,
    read_end: &ReadEnd,
    dropped_now: u64,
    live: bool,
    prober: Option<&Prober>,
) -> Analysis {
    let mut orphans = Orphans::default();
    // Each with the index of the recovery that committed it.
    let earlier: Vec<(usize, &RecoveredCall)> = (replay.recoveries.iter().enumerate())
        .flat_map(|(i, r)| r.calls.iter().map(move |rc| (i, rc)))
        .collect();
    let peers = match prober {
        Some(_) => peers_of(&replay, &earlier, live),
        None => Peers::default(),
    };
    let unreceived = unreceived_calls(&replay);
    let mut calls: Vec<CallReport> = replay
        .calls()
        .map(|c| report_call(c, &earlier, live, &mut orphans, prober, &peers))
        .collect();
    if !live {
        let imported = replay.imported.is_some();
        adopt_unreceived(&mut calls, &mut orphans, unreceived, imported);
        // Model order within each step (adopted calls were appended at the step's end).
        calls.sort_by_key(|c| (c.call.turn, c.call.step, model_index(&replay, &c.call)));
    }
    let recovery = recovery_event(&replay, live, dropped_now, orphans.recovered_calls);
    // The bytes' end as first found: a later run (after truncation) reports what was dropped.
    let end = end_of(
        read_end,
        dropped_now,
        replay.recoveries.last().map(|r| r.dropped_bytes),
    );
    Analysis {
        replay,
        end,
        calls,
        pending_asks: orphans.pending_asks,
        recovery,
        live,
    }
}

/// What this run's recovery must say about the calls it found orphaned.
#[derive(Default)]
struct Orphans {
    /// Each orphan with the result recovery gives it, in the order found.
    recovered_calls: Vec<RecoveredCall>,
    /// Orphans with a question still pending, to withdraw before the recovery event.
    pending_asks: Vec<CallRef>,
}

/// The calls of unknown outcome that ran a process: each recovery's, then this run's orphans
/// that may have run (as the streaming classifier finds them).
fn peers_of(replay: &SessionReplay, earlier: &[(usize, &RecoveredCall)], live: bool) -> Peers {
    let mut peers = Peers::default();
    if let Some(open) = &replay.open {
        peers.journaled_workspace(&open.workspace);
    }
    for r in &replay.recoveries {
        for rc in r.calls.iter().filter(|rc| left_unknown(rc)) {
            let call = replay.calls().find(|c| c.call == rc.call);
            peers.unknown(&rc.call, call.and_then(crate::bound::of_call));
        }
        peers.recovery_read();
    }
    if !live {
        let orphans = replay.calls().filter(|c| {
            c.state == CallState::Started && !earlier.iter().any(|(_, rc)| rc.call == c.call)
        });
        for c in orphans {
            peers.unknown(&c.call, crate::bound::of_call(c));
        }
    }
    peers
}

/// Calls the model sent whose `received` never made it: they did not start either.
fn unreceived_calls(replay: &SessionReplay) -> Vec<(CallRef, String, String)> {
    let mut unreceived = Vec::new();
    if let Some(turn) = replay.open_turn() {
        if let Some(step) = turn.steps.last().filter(|s| s.outcome.is_none()) {
            if let Some(response) = &step.response {
                for m in &response.tool_calls {
                    if !step.calls.iter().any(|c| c.call.call_id == m.call_id) {
                        let call = CallRef {
                            turn: turn.turn,
                            step: step.step,
                            call_id: m.call_id.clone(),
                        };
                        unreceived.push((call, m.name.clone(), m.arguments.clone()));
                    }
                }
            }
        }
    }
    unreceived
}

/// One journaled call's report: as an earlier recovery left it, as committed, in flight (a
/// live session), or else an orphan classified now.
fn report_call(
    c: &CallReplay,
    earlier: &[(usize, &RecoveredCall)],
    live: bool,
    orphans: &mut Orphans,
    prober: Option<&Prober>,
    peers: &Peers,
) -> CallReport {
    if let Some((i, rc)) = earlier.iter().find(|(_, rc)| rc.call == c.call) {
        let probe = probe_if(left_unknown(rc), c, prober, peers.as_of(*i));
        CallReport {
            call: c.call.clone(),
            tool: c.tool.clone(),
            raw_arguments: c.raw_arguments.clone(),
            state: rc.state,
            classification: rc.classification,
            resources: c.resources.clone().unwrap_or_default(),
            result: rc.result.clone(),
            recovered: true,
            in_flight: false,
            probe,
            sandbox: kept_sandbox(rc.classification, c),
        }
    } else if c.state == CallState::Committed {
        // Cannot fail: the replay records a call as committed with its result.
        #[allow(clippy::expect_used)]
        let result = c.committed.clone().expect("committed calls have a result");
        CallReport {
            call: c.call.clone(),
            tool: c.tool.clone(),
            raw_arguments: c.raw_arguments.clone(),
            state: c.state,
            classification: imported_classification(c),
            resources: c.resources.clone().unwrap_or_default(),
            result,
            recovered: false,
            in_flight: false,
            probe: None,
            sandbox: None,
        }
    } else if live {
        // A running session's unfinished call is running, not orphaned.
        CallReport::in_flight(
            c.call.clone(),
            c.tool.clone(),
            c.raw_arguments.clone(),
            c.state,
            c.resources.clone().unwrap_or_default(),
        )
    } else {
        report_orphan(c, orphans, prober, peers.all())
    }
}

/// What an imported call's `import/outcome` proves: `None` for a recorded output (and for
/// every call the runtime committed itself).
pub(crate) fn imported_classification(c: &CallReplay) -> Option<Classification> {
    c.imported
        .as_ref()
        .and_then(|i| i.verdict.as_ref())
        .and_then(|v| v.classification())
}

/// An orphan's report, its result recorded for the recovery event (and its pending question
/// for withdrawal).
fn report_orphan(
    c: &CallReplay,
    orphans: &mut Orphans,
    prober: Option<&Prober>,
    peers: Among<'_>,
) -> CallReport {
    if c.asks.last().is_some_and(|a| a.answer.is_none()) {
        orphans.pending_asks.push(c.call.clone());
    }
    let probe = probe_started(c, prober, peers);
    let (classification, result) = classify_orphan(c, probe.as_ref());
    orphans.recovered_calls.push(RecoveredCall {
        call: c.call.clone(),
        state: c.state,
        classification,
        result: result.clone(),
    });
    CallReport {
        call: c.call.clone(),
        tool: c.tool.clone(),
        raw_arguments: c.raw_arguments.clone(),
        state: c.state,
        classification,
        resources: c.resources.clone().unwrap_or_default(),
        result,
        recovered: true,
        in_flight: false,
        probe: kept_probe(classification, probe),
        sandbox: kept_sandbox(classification, c),
    }
}

/// A call only its step's `llm/response` names: `TOOL_NOT_STARTED` (the runtime journals
/// `received` before anything else of a call), except in an imported journal, whose import
/// stopped before it came to the call ([`import_cut_short`]).
pub(crate) fn never_received(imported: bool) -> (Option<Classification>, CommittedResult) {
    if imported {
        return import_cut_short();
    }
    (
        Some(Classification::ToolNotStarted),
        error_result(ErrorCode::ToolNotStarted, not_started_text()),
    )
}

/// Unreceived calls become orphans ([`never_received`]), each reported after its step's calls.
fn adopt_unreceived(
    calls: &mut Vec<CallReport>,
    orphans: &mut Orphans,
    unreceived: Vec<(CallRef, String, String)>,
    imported: bool,
) {
    for (call, tool, raw_arguments) in unreceived {
        let (classification, result) = never_received(imported);
        orphans.recovered_calls.push(RecoveredCall {
            call: call.clone(),
            state: CallState::Received,
            classification,
            result: result.clone(),
        });
        let at = calls
            .iter()
            .rposition(|c| c.call.turn == call.turn && c.call.step == call.step)
            .map(|i| i + 1)
            .unwrap_or(calls.len());
        calls.insert(
            at,
            CallReport {
                call,
                tool,
                raw_arguments,
                state: CallState::Received,
                classification,
                resources: Resources::default(),
                result,
                recovered: true,
                in_flight: false,
                probe: None,
                sandbox: None,
            },
        );
    }
}

/// The recovery event, when the journal needs one: orphans, an open turn, or bytes cut now.
fn recovery_event(
    replay: &SessionReplay,
    live: bool,
    dropped_now: u64,
    recovered_calls: Vec<RecoveredCall>,
) -> Option<Recovery> {
    let open_turn = replay.open_turn().map(|t| t.turn);
    let open_step = replay.open_turn().and_then(|t| {
        t.steps
            .last()
            .filter(|s| s.outcome.is_none())
            .map(|s| (t.turn, s.step))
    });
    // Nothing may follow `session/close` (replay refuses it): a closed session's cut is
    // recorded by its quarantine file alone.
    let needs_recovery = !live
        && !replay.closed
        && (!recovered_calls.is_empty() || open_turn.is_some() || dropped_now > 0);
    needs_recovery.then_some(Recovery {
        dropped_bytes: dropped_now,
        calls: recovered_calls,
        interrupted_step: open_step,
        interrupted_turn: open_turn,
    })
}

fn model_index(replay: &SessionReplay, call: &CallRef) -> usize {
    replay
        .turns
        .get(call.turn as usize - 1)
        .and_then(|t| t.steps.get(call.step as usize - 1))
        .and_then(|s| s.response.as_ref())
        .and_then(|r| r.tool_calls.iter().position(|m| m.call_id == call.call_id))
        .unwrap_or(usize::MAX)
}

impl Analysis {
    /// The conversation: the system prompt (the latest `session/model`'s), every user message,
    /// every assistant message with the provider state its response came with
    /// (`llm/response-detail`), and right after each assistant message exactly one result per
    /// call, in model order (I3); reduced as the latest `context/compacted` says, so that it is
    /// the history the model was last sent (the journal keeps every original message).
    pub fn conversation(&self) -> Conversation {
        let compaction = self.replay.compaction.as_ref().map(|c| c.compaction());
        layout(
            self.replay.model.as_ref().and_then(|m| m.system.clone()),
            &self.turns(),
            compaction.as_ref(),
        )
    }

    /// The session's turns as the history lays them out: per turn the user's text and each
    /// answered step's message with one result per call (its own, or recovery's).
    pub fn turns(&self) -> Vec<TurnView> {
        let mut turns = Vec::new();
        for turn in &self.replay.turns {
            let mut steps = Vec::new();
            for step in &turn.steps {
                let Some(response) = &step.response else {
                    continue;
                };
                let results = response
                    .tool_calls
                    .iter()
                    .map(|m| {
                        let result = self
                            .calls
                            .iter()
                            .find(|c| {
                                c.call.turn == turn.turn
                                    && c.call.step == step.step
                                    && c.call.call_id == m.call_id
                            })
                            .map(|c| c.result.clone())
                            .unwrap_or_else(|| {
                                error_result(ErrorCode::ToolNotStarted, not_started_text())
                            });
                        ConvResult {
                            id: m.call_id.clone(),
                            name: m.name.clone(),
                            content: result.content,
                            is_error: result.is_error,
                        }
                    })
                    .collect();
                steps.push(StepView {
                    step: step.step,
                    text: response.text.clone(),
                    calls: response
                        .tool_calls
                        .iter()
                        .map(|m| ConvCall {
                            id: m.call_id.clone(),
                            name: m.name.clone(),
                            arguments: m.arguments.clone(),
                        })
                        .collect(),
                    state: step
                        .detail
                        .as_ref()
                        .and_then(|d| d.provider_state.as_ref())
                        .map(|(format, items)| ProviderState {
                            format: format.clone(),
                            items: items.clone(),
                        }),
                    results,
                });
            }
            turns.push(TurnView {
                turn: turn.turn,
                user_text: turn.user_text.clone(),
                steps,
            });
        }
        turns
    }
}
