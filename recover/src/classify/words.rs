//! The words recovery answers an unfinished call with: deterministic, so that recovering
//! twice, or resuming, gives the same bytes.

use crate::probe::Probe;
use events::event::{Answer, Resources, SandboxBound};
use events::result::error_content;
use events::ErrorCode;

/// What the model is told about a call that did not start. Deterministic: recovering twice,
/// or resuming, gives the same bytes.
pub fn not_started_text() -> String {
    error_content(
        ErrorCode::ToolNotStarted,
        "the session was interrupted before this call started; it did not run and may be retried",
    )
}

/// Why recovery withdraws a question still pending at the crash (`ask/cancelled`'s reason).
pub const WITHDRAWN_REASON: &str = "session interrupted";

/// What the model is told about a built-in `ask` call whose question was still waiting for an
/// answer at the crash: a question, not a call that "may be retried", and never answered.
/// Deterministic, as [`not_started_text`] is.
pub fn question_withdrawn_text() -> String {
    error_content(
        ErrorCode::ToolNotStarted,
        "the session stopped while this question waited for an answer, so it was withdrawn \
         unanswered: nobody answered it and nothing was taken as an answer; ask again if you \
         still need the answer",
    )
}

/// What the model is told about an `ask` the person answered when the session stopped before
/// the answer was delivered: the answer itself (journaled), never "ask again".
pub fn answer_undelivered_text(code: ErrorCode, answer: &Answer) -> String {
    error_content(
        code,
        &format!(
            "the session stopped after the user answered this question and before the answer \
             was delivered; the answer is this:\n{}",
            answer.render()
        ),
    )
}

/// What the model is told about a call that may have run.
pub fn outcome_unknown_text(resources: &Resources) -> String {
    outcome_unknown_text_probed(resources, None, None)
}

/// What the model is told about a call that may have run under the sandbox `bound` (its
/// `started`'s `Evidence::Sandbox`): the bound in words follows "may have happened". Without
/// one, exactly [`outcome_unknown_text`].
pub fn outcome_unknown_text_bounded(resources: &Resources, bound: Option<&SandboxBound>) -> String {
    outcome_unknown_text_probed(resources, bound, None)
}

/// What the model is told about a call that may have run, with the sandbox it ran under and
/// what a probe of the workspace found (if one was made) in plain words. Evidence is not
/// proof: the text still says the outcome is unknown. Without a bound or a probe, exactly
/// [`outcome_unknown_text`].
pub(crate) fn outcome_unknown_text_probed(
    resources: &Resources,
    bound: Option<&SandboxBound>,
    probe: Option<&Probe>,
) -> String {
    let mut touched: Vec<String> = Vec::new();
    touched.extend(resources.writes.iter().map(|p| format!("writes {p}")));
    touched.extend(resources.reads.iter().map(|p| format!("reads {p}")));
    touched.extend(resources.intents.iter().map(|i| format!("intends `{i}`")));
    let what = if touched.is_empty() {
        "it declared nothing it would touch, so check whatever it could have changed".to_owned()
    } else {
        format!("check these before retrying: {}", touched.join("; "))
    };
    let evidence = match probe {
        Some(p) => format!("{}; ", p.words()),
        None => String::new(),
    };
    // Said once: a probe with nothing else to check states the bound itself.
    let bound = match bound.map(SandboxBound::in_words) {
        Some(words) if !evidence.contains(&words) => format!("{words}; "),
        _ => String::new(),
    };
    error_content(
        ErrorCode::ToolOutcomeUnknown,
        &format!(
            "the session was interrupted while this call was running: it may have run, and \
             its effects may have happened; {bound}{what}; {evidence}retry only if the call \
             is idempotent"
        ),
    )
}

/// What the model is told about a call of an imported journal whose import stopped before its
/// outcome was written. The agents imported record no start, so nothing proves the call did
/// not run: its outcome is unknown, whatever state the journal leaves it in. Deterministic.
pub(crate) fn import_cut_short_text() -> String {
    error_content(
        ErrorCode::ToolOutcomeUnknown,
        "this call was imported from another agent's session, and the import stopped before \
         its outcome was written; that agent records no start, so it may have run and its \
         effects may have happened: import the session file again to learn what it recorded, \
         and retry only if the call is idempotent",
    )
}
