//! The session loop: plays a [`ScriptedModel`] against a [`Session`].
//!
//! A user step opens a turn (closing the previous one if it is still open); a model response is
//! one step: its batch runs, with the scripted user pressing stop after `cancel_after_ms` if the
//! script says so. A stopped batch ends its step and turn as cancelled, and the rest of that
//! turn's responses are skipped (the user stopped it). A response that ends the turn
//! (`end_turn`) closes it. Approvals are answered from the script's approvals, else the
//! default; questions (`ask` calls) from the script's answers, else withdrawn unanswered.

use crate::event::{AskAnswer, CallRef, Question, StepOutcome, StopReason, TurnOutcome};
use crate::hooks::{Approver, AskFuture, CallInfo, QuestionFuture, QuestionOutcome};
use crate::result::ToolResult;
use crate::session::Session;
use crate::transcript::script::question_outcome_of;
use crate::transcript::{ModelStep, ScriptedModel};
use crate::RuntimeError;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The reason a question nobody was set to answer is withdrawn with: a transcript without an
/// answer for it, or a live run where no person is asked.
pub const NO_SCRIPTED_ANSWER: &str =
    "nobody answers questions in this run: no answer in the transcript, or no --approve ask";

/// Answers the current step's approvals and questions from the script. An approval the script
/// does not answer gets a default; a question never does: a default "allow" is no answer.
#[derive(Debug)]
pub struct ScriptedApprover {
    answers: Mutex<BTreeMap<String, AskAnswer>>,
    questions: Mutex<BTreeMap<String, QuestionOutcome>>,
    default: AskAnswer,
}

impl ScriptedApprover {
    /// An approver with no scripted answers yet: every approval gets `default`, every question
    /// is withdrawn.
    pub fn new(default: AskAnswer) -> ScriptedApprover {
        ScriptedApprover {
            answers: Mutex::new(BTreeMap::new()),
            questions: Mutex::new(BTreeMap::new()),
            default,
        }
    }

    /// The yes/no answers for the next batch's approvals, by call id (others get the default).
    /// For an `ask` call without an answer in [`ScriptedApprover::set_question_answers`], a
    /// denial here declines its question and an expiry expires it, as in a transcript's
    /// `approvals`; an allow answers nothing.
    pub fn set_answers(&self, answers: BTreeMap<String, AskAnswer>) {
        *self.answers.lock().unwrap_or_else(|p| p.into_inner()) = answers;
    }

    /// What becomes of the next batch's questions (the `ask` calls'), by call id; a question
    /// not here is withdrawn unanswered ([`NO_SCRIPTED_ANSWER`]).
    pub fn set_question_answers(&self, answers: BTreeMap<String, QuestionOutcome>) {
        *self.questions.lock().unwrap_or_else(|p| p.into_inner()) = answers;
    }
}

impl ScriptedApprover {
    /// The script's yes/no answer for `call`, if it gives one.
    fn scripted(&self, call: &CallInfo) -> Option<AskAnswer> {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&call.call.call_id)
            .copied()
    }
}

impl Approver for ScriptedApprover {
    /// Only the script's own answer for the call: never the default.
    fn escalate(&self, call: CallInfo, _question: String) -> AskFuture<'_> {
        let answer = self.scripted(&call).unwrap_or(AskAnswer::Denied);
        Box::pin(std::future::ready(answer))
    }

    fn ask(&self, call: CallInfo, _question: String) -> AskFuture<'_> {
        let answer = self.scripted(&call).unwrap_or(self.default);
        Box::pin(async move { answer })
    }

    fn question(&self, call: CallInfo, _question: Question) -> QuestionFuture<'_> {
        let id = &call.call.call_id;
        let scripted = self
            .questions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        // Never the default: only an answer the script gives for this very call counts.
        let outcome = scripted
            .or_else(|| {
                let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
                answers.get(id).copied().and_then(question_outcome_of)
            })
            .unwrap_or_else(|| QuestionOutcome::Withdrawn {
                reason: NO_SCRIPTED_ANSWER.to_owned(),
            });
        Box::pin(async move { outcome })
    }
}

/// What a drive did.
#[derive(Debug, Default)]
pub struct DriveReport {
    /// Turns begun.
    pub turns: u32,
    /// Steps begun (model responses played).
    pub steps: u32,
    /// Every committed result, in order.
    pub results: Vec<(CallRef, String, ToolResult)>,
    /// Responses skipped because their turn was stopped.
    pub skipped: usize,
}

/// Something that can skip the rest of a stopped turn.
pub(crate) trait SkipTurn {
    /// Skips the remaining responses of the current turn; returns how many.
    fn skip_rest_of_turn(&mut self) -> usize;
}

impl SkipTurn for ScriptedModel {
    fn skip_rest_of_turn(&mut self) -> usize {
        self.skip_to_next_user()
    }
}

/// Plays `model` to its end against `session` (which stays open: the caller closes it).
pub async fn drive(
    session: &mut Session,
    model: &mut ScriptedModel,
    approver: &ScriptedApprover,
) -> Result<DriveReport, RuntimeError> {
    let mut report = DriveReport::default();
    while let Some(step) = model.next_step() {
        match step {
            ModelStep::User { text } => {
                if session.turn_open() {
                    session.end_turn(TurnOutcome::Completed).await?;
                }
                session.begin_turn(&text)?;
                report.turns += 1;
            }
            ModelStep::Respond(respond) => {
                if !session.turn_open() {
                    return Err(RuntimeError::Misuse(
                        "a model response with no open turn: a user line must come first".into(),
                    ));
                }
                let (turn, step) = (session.turn(), session.begin_step()?);
                report.steps += 1;
                approver.set_answers(respond.approvals.clone());
                approver.set_question_answers(respond.answers.clone());
                let cancel = CancellationToken::new();
                let timer = match respond.cancel_after_ms {
                    Some(0) => {
                        cancel.cancel();
                        None
                    }
                    Some(ms) => {
                        let cancel = cancel.clone();
                        Some(tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            cancel.cancel();
                        }))
                    }
                    None => None,
                };
                let ends_turn = respond.response.stop_reason == StopReason::EndTurn;
                let calls: Vec<_> = respond
                    .response
                    .tool_calls
                    .iter()
                    .map(|c| (c.call_id.clone(), c.name.clone()))
                    .collect();
                let outcome = session
                    .run_batch_cancellable(respond.response, cancel.clone())
                    .await;
                if let Some(timer) = timer {
                    timer.abort();
                }
                let results = outcome?;
                for ((call_id, tool), result) in calls.into_iter().zip(results) {
                    report.results.push((
                        CallRef {
                            turn,
                            step,
                            call_id,
                        },
                        tool,
                        result,
                    ));
                }
                if cancel.is_cancelled() {
                    session.end_step(StepOutcome::Cancelled)?;
                    session.end_turn(TurnOutcome::Cancelled).await?;
                    report.skipped += model.skip_rest_of_turn();
                } else {
                    session.end_step(StepOutcome::Completed)?;
                    if ends_turn {
                        session.end_turn(TurnOutcome::Completed).await?;
                    }
                }
            }
        }
    }
    if session.turn_open() {
        session.end_turn(TurnOutcome::Completed).await?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Answer, ToolSource};

    fn call(id: &str) -> CallInfo {
        CallInfo {
            call: CallRef {
                turn: 1,
                step: 1,
                call_id: id.to_owned(),
            },
            tool: "ask".into(),
            source: ToolSource::BuiltIn,
            read_only: true,
            // Empty arguments parse as `{}`.
            args: crate::args::parse("").expect("empty arguments parse"),
            answer: None,
        }
    }

    fn question() -> Question {
        Question::from_arguments(&serde_json::json!({"question": "which?"})).expect("a question")
    }

    fn outcome(approver: &ScriptedApprover, id: &str) -> QuestionOutcome {
        futures_util::FutureExt::now_or_never(approver.question(call(id), question()))
            .expect("a scripted answer is ready at once")
    }

    #[test]
    fn a_question_gets_its_scripted_answer_and_never_the_default_approval() {
        let approver = ScriptedApprover::new(AskAnswer::AllowedOnce);
        let withdrawn = QuestionOutcome::Withdrawn {
            reason: NO_SCRIPTED_ANSWER.into(),
        };
        assert_eq!(outcome(&approver, "q1"), withdrawn);
        let answer = Answer {
            choice: vec![],
            text: Some("blue".into()),
        };
        approver.set_question_answers(BTreeMap::from([(
            "q1".to_owned(),
            QuestionOutcome::Answered(answer.clone()),
        )]));
        approver.set_answers(BTreeMap::from([
            ("q2".to_owned(), AskAnswer::Denied),
            ("q3".to_owned(), AskAnswer::AllowedOnce),
            ("q4".to_owned(), AskAnswer::Expired),
        ]));
        assert_eq!(outcome(&approver, "q1"), QuestionOutcome::Answered(answer));
        assert_eq!(
            outcome(&approver, "q2"),
            QuestionOutcome::Declined { text: None },
            "a denial given to an ask declines it"
        );
        assert_eq!(
            outcome(&approver, "q3"),
            withdrawn,
            "an allow answers nothing"
        );
        assert_eq!(outcome(&approver, "q4"), QuestionOutcome::Expired);
        assert_eq!(outcome(&approver, "q5"), withdrawn);
    }
}
