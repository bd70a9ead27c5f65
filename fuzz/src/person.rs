//! The simulated person: answers the built-in `ask`'s questions and the yes/no approvals a
//! listener asks for, as the case says, and keeps what they said: the ground truth the checks
//! hold the journal to (I16: only the person answers, and only what they said is an answer).

use crate::case::{AskSpec, Kind, Person, StepSpec, OPTION_LABELS};
use crate::Locked;
use runtime::event::{Answer, AskAnswer, Question};
use runtime::{
    Approver, AskFuture, CallInfo, Decision, PreExecute, QuestionFuture, QuestionOutcome,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the session waits for any answer (`Config::question_timeout_ms`), in simulated ms:
/// longer than every [`AskSpec::delay_ms`], so only a silent person's questions expire.
pub(crate) const QUESTION_TIMEOUT_MS: u64 = 80;

/// What the person said about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// What became of its question, as the person's side returned it. A question still waiting
    /// when the session dropped it (a stopped batch, a dead journal) has no entry: nothing was
    /// said.
    Question(QuestionOutcome),
    /// Their yes/no answer to its approval.
    YesNo(AskAnswer),
}

/// What the person will do with a call.
#[derive(Debug, Clone)]
enum Plan {
    Question(AskSpec),
    YesNo(Option<AskAnswer>),
    /// A question's end, as a transcript gives it.
    Given(QuestionOutcome),
}

/// The simulated person, as the session's approver.
#[derive(Debug, Default)]
pub(crate) struct SimPerson {
    plans: Mutex<BTreeMap<String, Plan>>,
    said: Arc<Mutex<HashMap<String, Said>>>,
}

impl SimPerson {
    /// What to do with the next batch's calls: the step's `ask` and approval calls, by call id
    /// (as `call_id(i)` names the step's `i`th call).
    pub(crate) fn plan_step(&self, step: &StepSpec, call_id: impl Fn(usize) -> String) {
        let mut plans = BTreeMap::new();
        for (i, c) in step.calls.iter().enumerate() {
            match c.kind {
                Kind::Ask(spec) => plans.insert(call_id(i), Plan::Question(spec)),
                Kind::Approval(answer) => plans.insert(call_id(i), Plan::YesNo(answer)),
                _ => None,
            };
        }
        *self.plans.locked() = plans;
    }

    /// What to answer to the next batch's yes/no approvals, by call id (an answer, or never:
    /// `None`, the question expires), and how its `ask` calls' questions end.
    pub(crate) fn plan_answers(
        &self,
        answers: impl IntoIterator<Item = (String, Option<AskAnswer>)>,
        questions: impl IntoIterator<Item = (String, QuestionOutcome)>,
    ) {
        let mut plans: BTreeMap<String, Plan> = answers
            .into_iter()
            .map(|(id, answer)| (id, Plan::YesNo(answer)))
            .collect();
        plans.extend(
            questions
                .into_iter()
                .map(|(id, end)| (id, Plan::Given(end))),
        );
        *self.plans.locked() = plans;
    }

    /// Everything the person said, by call id.
    pub(crate) fn said(&self) -> HashMap<String, Said> {
        self.said.locked().clone()
    }

    fn plan(&self, call: &CallInfo) -> Option<Plan> {
        self.plans.locked().get(&call.call.call_id).cloned()
    }

    fn note(&self, call: &CallInfo, said: Said) {
        self.said.locked().insert(call.call.call_id.clone(), said);
    }
}

impl Approver for SimPerson {
    fn ask(&self, call: CallInfo, _question: String) -> AskFuture<'_> {
        let plan = self.plan(&call);
        Box::pin(async move {
            let answer = match plan {
                Some(Plan::YesNo(Some(answer))) => answer,
                Some(Plan::YesNo(None)) => std::future::pending().await,
                // Not a call the case asks about: no consent.
                _ => AskAnswer::Expired,
            };
            self.note(&call, Said::YesNo(answer));
            answer
        })
    }

    fn question(&self, call: CallInfo, question: Question) -> QuestionFuture<'_> {
        let plan = self.plan(&call);
        Box::pin(async move {
            let spec = match plan {
                Some(Plan::Question(spec)) => spec,
                Some(Plan::Given(end)) => {
                    self.note(&call, Said::Question(end.clone()));
                    return end;
                }
                _ => {
                    return QuestionOutcome::Withdrawn {
                        reason: "the simulation has no answer for this call".into(),
                    }
                }
            };
            tokio::time::sleep(Duration::from_millis(spec.delay_ms)).await;
            let outcome = match spec.person {
                Person::Answers { pick } => QuestionOutcome::Answered(answer_to(&question, pick)),
                Person::AnswersWrongly => QuestionOutcome::Answered(Answer {
                    choice: vec!["omega".into()],
                    text: None,
                }),
                Person::Declines => QuestionOutcome::Declined {
                    text: spec.delay_ms.is_multiple_of(2).then(|| "not now".into()),
                },
                Person::Silent => std::future::pending().await,
                Person::Expires => QuestionOutcome::Expired,
                Person::Withdraws => QuestionOutcome::Withdrawn {
                    reason: "the simulated terminal went away".into(),
                },
            };
            self.note(&call, Said::Question(outcome.clone()));
            outcome
        })
    }
}

/// The answer a willing person gives to `question` as shown: option `pick` (and the next one
/// when several may be chosen), and words when words are allowed. It always fits.
pub(crate) fn answer_to(question: &Question, pick: usize) -> Answer {
    let labels: Vec<&str> = question.options.iter().map(|o| o.label.as_str()).collect();
    let mut choice = Vec::new();
    if !labels.is_empty() {
        choice.push(labels[pick % labels.len()].to_owned());
        if question.multiple && labels.len() > 1 {
            choice.push(labels[(pick + 1) % labels.len()].to_owned());
        }
    }
    let words = question.free_text && (labels.is_empty() || pick.is_multiple_of(2));
    Answer {
        choice,
        text: words.then(|| format!("simulated words {pick}")),
    }
}

/// The `ask` arguments for `spec`.
pub(crate) fn ask_arguments(id: &str, spec: &AskSpec) -> Value {
    let mut options: Vec<Value> = OPTION_LABELS[..spec.options]
        .iter()
        .map(|l| json!({"label": l, "description": format!("choose {l}")}))
        .collect();
    if spec.malformed {
        // A repeated label: no question can be made of it.
        options.extend([json!({"label": "twice"}), json!({"label": "twice"})]);
    }
    json!({"question": format!("what should {id} do?"), "options": options,
           "multiple": spec.multiple, "free_text": spec.free_text})
}

/// Asks the person about every simulated call whose arguments say `"approval": true`.
pub(crate) struct AsksForApproval;

impl PreExecute for AsksForApproval {
    fn name(&self) -> &str {
        "asks-for-approval"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.args.get("approval") == Some(&Value::Bool(true)) {
            Decision::Ask {
                reason: format!("may {} run?", call.call.call_id),
            }
        } else {
            Decision::Pass
        }
    }
}
