//! What the page is told of each call, step and turn: the audit's facts, as JSON, with every
//! text cut to a stated length so that one item stays small whatever the journal holds.

use super::page::script_json;
use super::pages::{Item, ItemKind, STEP_ITEM_BYTES_MAX};
use crate::audit::{
    decision, effects, evidence_text, idempotency_key, question_lines, source_text, timing_ms,
    truncate, AuditCall,
};
use crate::call_fields::resource_list;
use crate::classify::CallReport;
use crate::stream::{CallFacts, ClosedStep};
use events::code::ErrorCode;
use events::event::{Classification, StepOutcome, StopReason};
use events::state::CallState;
use serde_json::{json, Value};

/// The longest arguments and result shown (characters); the item says how long they were.
pub(super) const PREVIEW_CHARS_MAX: usize = 2000;
/// The longest of any other text (a decision, an effect, a reason).
pub(super) const TEXT_CHARS_MAX: usize = 300;
/// The most side effects, evidence lines or resources listed per call.
pub(super) const LIST_ITEMS_MAX: usize = 40;

/// How a call came out, as the page colours and labels it: `ok`, `error`, `refused` (never
/// ran: rejected or cancelled before it started), `not_started`, `unknown`, `in_flight`.
fn outcome(c: &CallReport) -> &'static str {
    if c.in_flight {
        return "in_flight";
    }
    match c.classification {
        Some(Classification::ToolNotStarted) => return "not_started",
        Some(Classification::ToolOutcomeUnknown) => return "unknown",
        None => {}
    }
    if c.result.code == Some(ErrorCode::ToolOutcomeUnknown) {
        return "unknown";
    }
    if matches!(
        c.state,
        CallState::Rejected | CallState::CancelledBeforeStart
    ) {
        return "refused";
    }
    if c.result.is_error {
        "error"
    } else {
        "ok"
    }
}

/// The outcome in words, for the page without colour: the classification, the error code, or
/// `ok`.
fn outcome_label(c: &CallReport) -> String {
    if c.in_flight {
        return "in flight (live session)".into();
    }
    if let Some(k) = c.classification {
        let code = match k {
            Classification::ToolNotStarted => "TOOL_NOT_STARTED",
            Classification::ToolOutcomeUnknown => "TOOL_OUTCOME_UNKNOWN",
        };
        return match &c.probe {
            Some(p) => format!("{code} (probe: {})", p.verdict.as_str()),
            None => code.into(),
        };
    }
    match (c.result.is_error, c.result.code) {
        (true, Some(code)) => code.as_str().into(),
        (true, None) => "error".into(),
        (false, _) => "ok".into(),
    }
}

fn capped(lines: Vec<String>) -> Value {
    let n = lines.len();
    let mut shown: Vec<Value> = lines
        .into_iter()
        .take(LIST_ITEMS_MAX)
        .map(|l| Value::String(truncate(&l, TEXT_CHARS_MAX)))
        .collect();
    if n > LIST_ITEMS_MAX {
        shown.push(json!(format!("… and {} more", n - LIST_ITEMS_MAX)));
    }
    Value::Array(shown)
}

fn times(f: Option<&CallFacts>) -> Value {
    // A call never received has no time of the session's: it is drawn as one not timed.
    let Some(t) = f.map(|f| f.times).filter(|t| t.received_ms.is_some()) else {
        return Value::Null;
    };
    json!({
        "received": t.received_ms,
        "asked": t.asked_ms,
        "approved": t.approved_ms,
        "refused": t.refused_ms,
        "started": t.started_ms,
        "settled": t.settled_ms,
        "committed": t.committed_ms,
    })
}

/// A call's item.
pub(super) fn call(call: AuditCall<'_>) -> Item {
    let (c, f) = (call.report, call.facts);
    let question = f
        .and_then(|f| f.last_ask.as_ref())
        .map(|ask| truncate(question_lines(ask).trim(), PREVIEW_CHARS_MAX));
    // The id whole: it is what names the call (an item too big for the bound is elided, and
    // counted as such).
    let value = json!({
        "k": "call",
        "id": c.call.call_id,
        "turn": c.call.turn,
        "step": c.call.step,
        "tool": truncate(&c.tool, TEXT_CHARS_MAX),
        "source": truncate(&source_text(call.tool), TEXT_CHARS_MAX),
        "state": c.state.as_str(),
        "outcome": outcome(c),
        "label": outcome_label(c),
        "recovered": c.recovered,
        "times": times(f),
        "duration_ms": timing_ms(f),
        "arguments": truncate(&c.raw_arguments, PREVIEW_CHARS_MAX),
        "arguments_bytes": c.raw_arguments.len(),
        "decision": truncate(&decision(f), TEXT_CHARS_MAX),
        "result": truncate(&c.result.content, PREVIEW_CHARS_MAX),
        "result_bytes": c.result.content.len(),
        "effects": capped(effects(f)),
        "evidence": capped(evidence_text(f)),
        "resources": capped(resource_list(c)),
        "key": idempotency_key(f),
        "question": question,
    });
    Item {
        text: script_json(&value),
        kind: ItemKind::Call,
        turn: c.call.turn,
    }
}

/// How a step ended, in words; `None` while it is open.
pub(super) fn step_outcome(outcome: &StepOutcome) -> String {
    match outcome {
        StepOutcome::Completed => "completed".into(),
        StepOutcome::Cancelled => "stopped by the user".into(),
        StepOutcome::Failed { message } => format!("failed: {}", truncate(message, TEXT_CHARS_MAX)),
        StepOutcome::Interrupted => "interrupted: the process died".into(),
    }
}

fn stop_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::ToolUse => "tool_use",
        StopReason::EndTurn => "end_turn",
        StopReason::Length => "length",
        StopReason::Interrupted => "interrupted",
        StopReason::Refusal => "refusal",
    }
}

/// A step's item: its span, how it ended and why the model stopped.
pub(super) fn step(
    closed: &ClosedStep,
    begun_ms: Option<u64>,
    ended: Option<(u64, String)>,
) -> Item {
    let (ended_ms, outcome) = match ended {
        Some((at, how)) => (Some(at), Some(how)),
        None => (None, None),
    };
    let value = json!({
        "k": "step",
        "turn": closed.turn,
        "step": closed.step,
        "begun": begun_ms,
        "ended": ended_ms,
        "outcome": outcome,
        "open": closed.open_at_end,
        "stop_reason": closed.response.as_ref().map(|r| stop_reason(r.stop_reason)),
        "calls": closed.results.len(),
        "text": closed.response.as_ref().map(|r| truncate(&r.text, TEXT_CHARS_MAX)),
    });
    let text = script_json(&value);
    debug_assert!(
        text.len() as u64 <= STEP_ITEM_BYTES_MAX,
        "a step item's texts are cut"
    );
    Item {
        text,
        kind: ItemKind::Step,
        turn: closed.turn,
    }
}

/// A turn's item: what the user said.
pub(super) fn turn(turn: u32, at_ms: u64, user_text: &str) -> Item {
    let value = json!({
        "k": "turn",
        "turn": turn,
        "begun": at_ms,
        "text": truncate(user_text, TEXT_CHARS_MAX),
    });
    Item {
        text: script_json(&value),
        kind: ItemKind::Turn,
        turn,
    }
}
