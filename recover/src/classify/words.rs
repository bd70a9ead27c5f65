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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Verdict;
    use events::event::SandboxPolicy;

    fn bound() -> SandboxBound {
        SandboxBound {
            policy: SandboxPolicy::WorkspaceWrite,
            enforced: true,
            writable: vec!["/w".into(), "/tmp/s".into()],
            readable: vec!["/usr".into()],
            network: false,
            mechanism: "landlock ABI 6".into(),
            escalated: false,
        }
    }

    #[test]
    fn the_bound_follows_may_have_happened_and_without_one_nothing_changes() {
        let writes = Resources {
            reads: vec![],
            writes: vec!["a.txt".into()],
            intents: vec![],
        };
        // The bytes journals hold and golden data expect: unchanged.
        assert_eq!(
            outcome_unknown_text_bounded(&writes, None),
            "TOOL_OUTCOME_UNKNOWN: the session was interrupted while this call was running: it \
             may have run, and its effects may have happened; check these before retrying: \
             writes a.txt; retry only if the call is idempotent"
        );
        assert_eq!(
            outcome_unknown_text_bounded(&Resources::default(), Some(&bound())),
            "TOOL_OUTCOME_UNKNOWN: the session was interrupted while this call was running: it \
             may have run, and its effects may have happened; its writes, if any, are confined \
             to /w, /tmp/s (workspace-write; a file's mode, owner or times may have changed \
             anywhere); no network; it declared nothing it would touch, so check whatever it \
             could have changed; retry only if the call is idempotent"
        );
    }

    #[test]
    fn a_probe_that_states_the_bound_has_it_said_once() {
        let b = bound();
        let probe = |detail: String| Probe {
            verdict: Verdict::NoEvidence,
            path: None,
            expected_sha256: None,
            before_sha256: None,
            found_sha256: None,
            pgid: None,
            detail,
            ruled_out: Vec::new(),
        };
        let stating = probe(format!("nothing to check; {}", b.in_words()));
        let text = outcome_unknown_text_probed(&Resources::default(), Some(&b), Some(&stating));
        assert_eq!(text.matches(&b.in_words()).count(), 1, "{text}");
        assert!(text.contains("no probe was possible: nothing to check; its writes"));
        let silent = probe("nothing to check".into());
        let text = outcome_unknown_text_probed(&Resources::default(), Some(&b), Some(&silent));
        assert!(
            text.contains("may have happened; its writes, if any, are confined to /w"),
            "{text}"
        );
    }
}
