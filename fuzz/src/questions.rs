//! I16, only the person answers, checked on what a simulated run left behind: the `ask` calls'
//! results against what the simulated person said (outside the journal), and the journal's
//! questions, replies and approvals against both.
//!
//! An `ask` runs to a result only on an answer the person gave that fits its question, and the
//! result is that answer as the model reads it ([`Answer::render`]). Every other end is an
//! error: a decline `QUESTION_DECLINED`; an expiry, a withdrawal or an answer that does not fit
//! `QUESTION_UNANSWERED`; a stopped batch or a crash before the call started, the codes that say
//! so. An answered question may still end without a result (the batch stopped or the session
//! died between the reply and the run), but never with a code that says nobody answered.

use crate::case::{AskSpec, Kind, Person, OPTION_LABELS};
use crate::person::Said;
use crate::read::code_of;
use crate::sim::Run;
use recover::{
    answer_undelivered_text, not_started_text, outcome_unknown_text, question_withdrawn_text,
    Analysis, CallReport,
};
use runtime::event::{Answer, Approval, AskAnswer, Reply, Resources};
use runtime::ErrorCode;
use runtime::QuestionOutcome;
use std::collections::HashMap;

/// The person's answer to `id`'s question, if they gave one that fits it, as the session keeps
/// it: labels in the question's order (the options are the first of [`OPTION_LABELS`]), words
/// trimmed.
fn fitting(run: &Run, id: &str, ask: &AskSpec) -> Option<Answer> {
    match (run.said.get(id), ask.person) {
        (Some(Said::Question(QuestionOutcome::Answered(a))), Person::Answers { .. }) => {
            let mut choice = a.choice.clone();
            choice.sort_by_key(|label| OPTION_LABELS.iter().position(|o| o == label));
            let text = a.text.as_deref().map(str::trim).filter(|t| !t.is_empty());
            Some(Answer {
                choice,
                text: text.map(str::to_owned),
            })
        }
        _ => None,
    }
}

/// What the person said to `id`'s question, if anything.
fn said_to_question<'a>(run: &'a Run, id: &str) -> Option<&'a QuestionOutcome> {
    match run.said.get(id) {
        Some(Said::Question(outcome)) => Some(outcome),
        _ => None,
    }
}

/// Whether `content` is recovery's word for a transcript's `ask` call (`spec`) whose question was
/// pending when the session died: withdrawn unanswered, or the answer the person gave and the
/// model never got.
pub(crate) fn withdrawn_by_recovery(
    run: &Run,
    id: &str,
    spec: &crate::case::CallSpec,
    content: &str,
) -> bool {
    if !matches!(spec.kind, Kind::User { question: true, .. }) {
        return false;
    }
    let given = match said_to_question(run, id) {
        Some(QuestionOutcome::Answered(a)) => Some(a),
        _ => None,
    };
    content == question_withdrawn_text()
        || given.is_some_and(|a| content == answer_undelivered_text(ErrorCode::ToolNotStarted, a))
}

/// Whether `content` is what the model may truthfully be told about the `ask` call `id`, given
/// what the person said. `Err` says why not.
pub(crate) fn truthful_ask(
    run: &Run,
    id: &str,
    ask: &AskSpec,
    truncated: bool,
    content: &str,
    is_error: bool,
) -> Result<(), String> {
    let fail = |why: String| Err(format!("{id} is {content:?}: {why}"));
    let said = said_to_question(run, id);
    let fits = fitting(run, id, ask);
    if !is_error {
        return match &fits {
            Some(a) if content == a.render() => Ok(()),
            Some(a) => fail(format!(
                "the person answered {a:?}, which reads {:?}",
                a.render()
            )),
            None => fail(format!(
                "a result, but the person gave no answer that fits ({said:?})"
            )),
        };
    }
    let Some(code) = code_of(content) else {
        return fail("an error that does not begin with its code".into());
    };
    let declined = matches!(said, Some(QuestionOutcome::Declined { .. }));
    let asked = !truncated && !ask.malformed;
    let true_code = match code {
        // Never ran: recovery's text (its words for a question it withdrew only when one was
        // put), or the stopped batch's.
        // (or, the person having answered, that answer: it is journaled and owed).
        ErrorCode::ToolNotStarted => {
            content == not_started_text()
                || (asked && content == question_withdrawn_text())
                || fits.is_some_and(|a| content == answer_undelivered_text(code, &a))
        }
        ErrorCode::AbortedBeforeDispatch => true,
        ErrorCode::TruncatedCall => truncated,
        ErrorCode::SchemaError => ask.malformed,
        ErrorCode::QuestionDeclined => declined,
        // Nobody gave an answer that fits: it expired, was withdrawn, did not fit, or the
        // session stopped while it waited.
        ErrorCode::QuestionUnanswered => asked && fits.is_none() && !declined,
        // Answered, then the run may have started before the session died.
        ErrorCode::ToolOutcomeUnknown => fits.is_some_and(|a| {
            content == outcome_unknown_text(&Resources::default())
                || content == answer_undelivered_text(code, &a)
        }),
        ErrorCode::Aborted => fits.is_some() && content.contains("it did not run"),
        _ => false,
    };
    if true_code {
        Ok(())
    } else {
        fail(format!("the person said {said:?} ({:?})", ask.person))
    }
}

/// Whether the approval call `id`'s body may have run: only on the person's yes.
pub(crate) fn ran_on_a_yes(run: &Run, id: &str) -> Result<(), String> {
    match run.said.get(id) {
        Some(Said::YesNo(a)) if a.allows() => Ok(()),
        other => Err(format!(
            "the body of {id} ran, but the person said {other:?}"
        )),
    }
}

/// I16 in the recovered journal: every reply and every yes/no answer is one the person gave,
/// and every `ask` call's end follows from how its question ended.
pub(crate) fn questions(
    run: &Run,
    a: &Analysis,
    reports: &HashMap<&str, &CallReport>,
    v: &mut Vec<String>,
) {
    for step in &run.steps {
        for (id, _, spec) in &step.calls {
            let (Some(report), Some(c)) = (
                reports.get(id.as_str()),
                reports
                    .get(id.as_str())
                    .and_then(|r| a.replay.call(&r.call)),
            ) else {
                continue;
            };
            let mut bad = |why: String| v.push(format!("I16 only the person answers: {id} {why}"));
            match spec.kind {
                Kind::Ask(ask) => {
                    let fits = fitting(run, id, &ask);
                    for q in &c.asks {
                        if q.structured.is_none() {
                            bad(format!(
                                "was asked yes/no ({:?}), not its question",
                                q.question
                            ));
                        }
                        match &q.reply {
                            Some(Reply::Answered(answer)) if Some(answer) != fits.as_ref() => {
                                bad(format!(
                                "has the reply {answer:?}; the person's fitting answer was {fits:?}"
                            ))
                            }
                            Some(Reply::Declined { .. })
                                if !matches!(
                                    said_to_question(run, id),
                                    Some(QuestionOutcome::Declined { .. })
                                ) =>
                            {
                                bad("has a decline the person did not give".into())
                            }
                            _ => {}
                        }
                    }
                    let last = c.asks.last();
                    let result = &report.result;
                    if !result.is_error {
                        let Some(Some(Reply::Answered(answer))) = last.map(|q| &q.reply) else {
                            bad(format!(
                                "committed a result with no answer: {:?}",
                                result.content
                            ));
                            continue;
                        };
                        if result.content != answer.render() {
                            bad(format!(
                                "committed {:?}, not the answer {answer:?}",
                                result.content
                            ));
                        }
                        let value =
                            serde_json::json!({"choice": answer.choice, "text": answer.text});
                        let kept = result
                            .value
                            .as_deref()
                            .map(serde_json::from_str::<serde_json::Value>);
                        if !matches!(kept, Some(Ok(ref kept)) if *kept == value) {
                            bad(format!(
                                "committed the value {:?}, not {value}",
                                result.value
                            ));
                        }
                        if c.approval
                            != Some(Approval::Asked {
                                answer: AskAnswer::Answered,
                            })
                        {
                            bad(format!("ran approved {:?}", c.approval));
                        }
                        continue;
                    }
                    let code = result.code;
                    // The codes an end may have after the question ended so.
                    let allowed: &[ErrorCode] = match last.map(|q| (q.answer, &q.reply)) {
                        Some((_, Some(Reply::Answered(_)))) => &[
                            ErrorCode::AbortedBeforeDispatch,
                            ErrorCode::ToolNotStarted,
                            ErrorCode::ToolOutcomeUnknown,
                            ErrorCode::Aborted,
                        ],
                        Some((_, Some(Reply::Declined { .. }))) => {
                            &[ErrorCode::QuestionDeclined, ErrorCode::ToolNotStarted]
                        }
                        Some((Some(AskAnswer::Expired | AskAnswer::Cancelled), None)) => &[
                            ErrorCode::QuestionUnanswered,
                            ErrorCode::AbortedBeforeDispatch,
                            ErrorCode::ToolNotStarted,
                        ],
                        // Pending at the end (recovery ends it), or never asked.
                        _ => continue,
                    };
                    if !code.is_some_and(|c| allowed.contains(&c)) {
                        bad(format!(
                            "ended {code:?} after its question ended {:?} {:?}",
                            last.and_then(|q| q.answer),
                            last.and_then(|q| q.reply.as_ref())
                        ));
                    }
                }
                // A transcript's `ask`: every reply is what the person said, and a success
                // is an answer.
                Kind::User { question: true, .. } => {
                    let said = said_to_question(run, id);
                    for q in &c.asks {
                        match &q.reply {
                            Some(Reply::Answered(answer)) if !matches!(said, Some(QuestionOutcome::Answered(a)) if a == answer) => {
                                bad(format!(
                                    "has the reply {answer:?}; the person said {said:?}"
                                ))
                            }
                            Some(Reply::Declined { .. })
                                if !matches!(said, Some(QuestionOutcome::Declined { .. })) =>
                            {
                                bad("has a decline the person did not give".into())
                            }
                            _ => {}
                        }
                    }
                    let answered = matches!(
                        c.asks.last().and_then(|q| q.reply.as_ref()),
                        Some(Reply::Answered(_))
                    );
                    if !report.result.is_error && !answered {
                        bad(format!(
                            "committed {:?} with no answer",
                            report.result.content
                        ));
                    }
                }
                Kind::Approval(_) | Kind::User { asked: true, .. } => {
                    for q in &c.asks {
                        if q.structured.is_some() || q.reply.is_some() {
                            bad("was put a structured question".into());
                        }
                        let said = run.said.get(id.as_str());
                        if let Some(answer) = q.answer.filter(|a| {
                            matches!(
                                a,
                                AskAnswer::AllowedOnce
                                    | AskAnswer::AllowedAlways
                                    | AskAnswer::Denied
                            )
                        }) {
                            if said != Some(&Said::YesNo(answer)) {
                                bad(format!(
                                    "has the answer {answer:?}; the person said {said:?}"
                                ));
                            }
                        }
                    }
                    if let Some(Approval::Asked { answer }) = &c.approval {
                        if run.said.get(id.as_str()) != Some(&Said::YesNo(*answer))
                            || !answer.allows()
                        {
                            bad(format!(
                                "was approved {answer:?}; the person said {:?}",
                                run.said.get(id.as_str())
                            ));
                        }
                    }
                }
                _ => {
                    if !c.asks.is_empty() {
                        bad(format!("was asked about: {:?}", c.asks));
                    }
                }
            }
        }
    }
}
