//! A call's question as the audit shows it: the built-in `ask`'s or a yes/no approval's, and
//! what became of it.

use super::one_line;
use crate::stream::CallFacts;
use events::event::{AskAnswer, Reply};
use events::replay::AskRecord;
use serde_json::{json, Value};

/// What became of a question: `pending`, `answered`, `declined`, `expired` or `cancelled`. A
/// yes/no approval's "no" is an answer too (`answer` says which).
fn question_state(ask: &AskRecord) -> &'static str {
    match ask.answer {
        None => "pending",
        Some(
            AskAnswer::Answered
            | AskAnswer::AllowedOnce
            | AskAnswer::AllowedAlways
            | AskAnswer::Denied,
        ) => "answered",
        Some(AskAnswer::Declined) => "declined",
        Some(AskAnswer::Expired) => "expired",
        Some(AskAnswer::Cancelled) => "cancelled",
    }
}

/// A yes/no approval's answer, as `--json` spells it (`allowed_once`, `denied`, ...).
// Cannot fail: an enum of unit variants serializes.
#[allow(clippy::expect_used)]
fn approval_answer(answer: AskAnswer) -> Value {
    serde_json::to_value(answer).expect("an enum of unit variants serializes")
}

/// Why a question has no answer: the person's words when declining (if any), the withdrawal's
/// reason, or the expiry.
fn question_reason(ask: &AskRecord) -> Option<String> {
    match ask.answer? {
        AskAnswer::Declined => match &ask.reply {
            Some(Reply::Declined { text }) => text.clone(),
            _ => None,
        },
        AskAnswer::Expired => Some("nobody answered in time".into()),
        AskAnswer::Cancelled => ask.cancel_reason.clone(),
        _ => None,
    }
}

/// The call's last question, as `audit --json` shows it; `None` for a call never asked about.
pub(super) fn question_json(f: Option<&CallFacts>) -> Option<Value> {
    let ask = f?.last_ask.as_ref()?;
    let state = question_state(ask);
    let reason = question_reason(ask);
    Some(match &ask.structured {
        Some(q) => json!({
            "kind": "question",
            "text": q.text,
            "options": q.options.iter().map(|o| json!({
                "label": o.label,
                "description": o.description,
            })).collect::<Vec<_>>(),
            "multiple": q.multiple,
            "free_text": q.free_text,
            "plan_option": q.plan_option,
            "state": state,
            "answer": match &ask.reply {
                Some(Reply::Answered(answer)) => json!({
                    "choice": answer.choice,
                    "text": answer.text,
                }),
                _ => Value::Null,
            },
            "reason": reason,
        }),
        None => json!({
            "kind": "approval",
            "text": ask.question,
            "state": state,
            "answer": match ask.answer {
                Some(answer @ (AskAnswer::AllowedOnce | AskAnswer::AllowedAlways | AskAnswer::Denied)) => {
                    approval_answer(answer)
                }
                _ => Value::Null,
            },
            "reason": reason,
        }),
    })
}

/// The chosen labels, quoted, and the person's own words: `"blue", "red" + "their words"`.
fn answer_text(choice: &[String], text: Option<&str>, max_chars: usize) -> String {
    let mut parts: Vec<String> = choice
        .iter()
        .map(|l| format!("\"{}\"", one_line(l, max_chars)))
        .collect();
    if let Some(t) = text.filter(|t| !t.trim().is_empty()) {
        parts.push(format!("wrote \"{}\"", one_line(t, max_chars)));
    }
    parts.join(", ")
}

/// What became of the question, for the decision column: `answered "label"`, `declined`,
/// `expired`, `cancelled (why)`, `pending`, or a yes/no approval's `allowed once`.
pub(super) fn question_summary(ask: &AskRecord) -> String {
    match (ask.answer, &ask.reply) {
        (Some(AskAnswer::Answered), Some(Reply::Answered(answer))) => format!(
            "answered {}",
            answer_text(&answer.choice, answer.text.as_deref(), 40)
        ),
        (Some(AskAnswer::AllowedOnce), _) => "allowed once".into(),
        (Some(AskAnswer::AllowedAlways), _) => "allowed always".into(),
        (Some(AskAnswer::Denied), _) => "denied".into(),
        // The reason is on the line below: the column is narrow.
        _ => question_state(ask).into(),
    }
}

/// The lines under a call's row that show its question and what became of it.
pub(crate) fn question_lines(ask: &AskRecord) -> String {
    const INDENT: &str = "          ";
    let mut out = String::new();
    match &ask.structured {
        Some(q) => {
            out.push_str(&format!("{INDENT}question: {}\n", one_line(&q.text, 200)));
            if !q.options.is_empty() {
                let how = match (q.multiple, q.free_text) {
                    (false, false) => "choose one",
                    (false, true) => "choose one, or own words",
                    (true, false) => "choose any",
                    (true, true) => "choose any, and/or own words",
                };
                let options: Vec<String> = q
                    .options
                    .iter()
                    .map(|o| {
                        let plan = if q.plan_option.as_deref() == Some(o.label.as_str()) {
                            " [approves the plan]"
                        } else {
                            ""
                        };
                        if o.description.is_empty() {
                            format!("{}{plan}", one_line(&o.label, 100))
                        } else {
                            format!(
                                "{} ({}){plan}",
                                one_line(&o.label, 100),
                                one_line(&o.description, 80)
                            )
                        }
                    })
                    .collect();
                out.push_str(&format!(
                    "{INDENT}  options ({how}): {}\n",
                    options.join(" | ")
                ));
            }
        }
        None => out.push_str(&format!(
            "{INDENT}question (approval): {}\n",
            one_line(&ask.question, 200)
        )),
    }
    let state = question_state(ask);
    let outcome = match (&ask.reply, question_reason(ask)) {
        (Some(Reply::Answered(answer)), _) => format!(
            "answered: {}",
            answer_text(&answer.choice, answer.text.as_deref(), 200)
        ),
        (_, Some(reason)) => format!("{state}: {}", one_line(&reason, 200)),
        _ => match ask.answer {
            Some(AskAnswer::AllowedOnce | AskAnswer::AllowedAlways | AskAnswer::Denied) => {
                format!("answered: {}", question_summary(ask))
            }
            _ => state.to_owned(),
        },
    };
    out.push_str(&format!("{INDENT}  {outcome}\n"));
    out
}
