//! The session loop: plays a [`ScriptedModel`] against a [`Session`].
//!
//! A user step opens a turn (closing the previous one if it is still open); a model response is
//! one step: its batch runs, with the scripted user pressing stop after `cancel_after_ms` if the
//! script says so. A stopped batch ends its step and turn as cancelled, and the rest of that
//! turn's responses are skipped (the user stopped it). A response that ends the turn
//! (`end_turn`) closes it. Asks are answered from the script's approvals, else the default.

use crate::event::{AskAnswer, CallRef, StepOutcome, StopReason, TurnOutcome};
use crate::hooks::{Approver, AskFuture, CallInfo};
use crate::result::ToolResult;
use crate::session::Session;
use crate::transcript::{ModelStep, ScriptedModel};
use crate::RuntimeError;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Answers asks from the current step's approvals, else with a default.
#[derive(Debug)]
pub struct ScriptedApprover {
    answers: Mutex<BTreeMap<String, AskAnswer>>,
    default: AskAnswer,
}

impl ScriptedApprover {
    /// An approver with no scripted answers yet: every question gets `default`.
    pub fn new(default: AskAnswer) -> ScriptedApprover {
        ScriptedApprover {
            answers: Mutex::new(BTreeMap::new()),
            default,
        }
    }

    /// The answers for the next batch's asks, by call id (others get the default).
    pub fn set_answers(&self, answers: BTreeMap<String, AskAnswer>) {
        *self.answers.lock().unwrap_or_else(|p| p.into_inner()) = answers;
    }
}

impl Approver for ScriptedApprover {
    fn ask(&self, call: CallInfo, _question: String) -> AskFuture<'_> {
        let answer = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&call.call.call_id)
            .copied()
            .unwrap_or(self.default);
        Box::pin(async move { answer })
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
pub trait SkipTurn {
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
