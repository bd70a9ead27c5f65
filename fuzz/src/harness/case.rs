//! What one case of a user's harness is: a transcript (the user's turns and the model's
//! responses, calling the user's tools) and a plan of what goes wrong around it (when the user
//! stops a step, how each approval is answered, where the disk fails, how the session resumes).
//! Cases come from proptest strategies, random over the registered tools or around a given
//! transcript; a failing case prints as a transcript the user can run again.

use crate::case::StorageFault;
use proptest::prelude::*;
use runtime::event::{RerunPolicy, StopReason};
use runtime::QuestionOutcome;
use runtime::{ModelStep, ScriptLine};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Most turns, steps per turn and calls per step a random case has.
pub(crate) const TURNS_MAX: usize = 3;
/// See [`TURNS_MAX`].
pub(crate) const STEPS_MAX: usize = 3;
/// See [`TURNS_MAX`].
pub(crate) const CALLS_MAX: usize = 4;

/// One case: the transcript and what goes wrong around it.
#[derive(Debug, Clone, PartialEq)]
pub struct UserCase {
    /// The user's turns, in order.
    pub turns: Vec<Turn>,
    /// Most calls running at once (`Config::parallel_max`).
    pub parallel_max: usize,
    /// What goes wrong with the journal's disk (and, for a power loss, the world's).
    pub fault: StorageFault,
    /// What happens after the session ended with a turn open.
    pub resume: Resume,
}

/// One user turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// What the user says.
    pub user: String,
    /// The model's responses, each one step.
    pub steps: Vec<Step>,
}

/// One model response and what happens around its batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The response's text.
    pub text: String,
    /// Its calls, in model order.
    pub calls: Vec<Call>,
    /// Why the model stopped (`Length`: its calls are refused as truncated).
    pub stop_reason: StopReason,
    /// When the user stops the step; `None`: never.
    pub cancel: Option<CancelAt>,
}

/// One call the model sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Its id (unique in the case).
    pub id: String,
    /// The tool it names.
    pub tool: String,
    /// Its raw arguments, as the model wrote them (need not be JSON).
    pub arguments: String,
    /// Whether a listener asks the person before it runs, and what they answer.
    pub approval: Option<Approval>,
    /// For a call of the built-in `ask`: what becomes of its question (`None`: the person has
    /// no answer and it is withdrawn).
    pub answer: Option<QuestionOutcome>,
}

/// What the person answers when asked whether a call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Yes, this once.
    Allow,
    /// No.
    Deny,
    /// They let it expire.
    Expire,
    /// They never answer: the session's question timeout expires it.
    Silent,
}

impl Approval {
    /// As transcripts spell it (`Silent` has no spelling there: it is left out).
    pub fn as_script(self) -> Option<&'static str> {
        match self {
            Approval::Allow => Some("allow"),
            Approval::Deny => Some("deny"),
            Approval::Expire => Some("expire"),
            Approval::Silent => None,
        }
    }
}

/// When the user stops a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelAt {
    /// Before the model's response arrives: no calls are received.
    StepStart,
    /// This long after the batch starts (0: right away), in ms of the harness's clock.
    AfterMs(u64),
    /// The moment the `n`th body of the batch (from 0) begins to run: mid-batch, whatever the
    /// clock (a step with fewer bodies is never stopped).
    AtBody(usize),
}

/// What happens after a session that ended with a turn open (a crash, a stopped journal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Nothing: `recover` writes its recovery, and that is the final word.
    No,
    /// `tooljournal resume --rerun POLICY`: on the journal as the crash left it, recovery and
    /// then the calls the policy picks run again, and the session closes.
    Rerun(RerunPolicy),
}

/// How the harness draws the plan around a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanSpace {
    /// Cancels may fall after a number of ms (false: only at step start and at a body's start,
    /// which a real clock cannot make vary).
    pub timed_cancels: bool,
    /// Disk faults are drawn (false: the disk never fails).
    pub faults: bool,
    /// Resumes are drawn (false: recovery's word is final).
    pub resumes: bool,
    /// Most `parallel_max` drawn (at least 1).
    pub parallel_max: usize,
}

impl Default for PlanSpace {
    fn default() -> PlanSpace {
        PlanSpace {
            timed_cancels: true,
            faults: true,
            resumes: true,
            parallel_max: 4,
        }
    }
}

fn cancel(space: PlanSpace) -> BoxedStrategy<CancelAt> {
    if space.timed_cancels {
        prop_oneof![
            1 => Just(CancelAt::StepStart),
            3 => (0u64..60).prop_map(CancelAt::AfterMs),
            3 => (0usize..CALLS_MAX).prop_map(CancelAt::AtBody),
        ]
        .boxed()
    } else {
        prop_oneof![
            1 => Just(CancelAt::StepStart),
            4 => (0usize..CALLS_MAX).prop_map(CancelAt::AtBody),
        ]
        .boxed()
    }
}

fn approval() -> impl Strategy<Value = Option<Approval>> {
    proptest::option::weighted(
        0.15,
        prop_oneof![
            3 => Just(Approval::Allow),
            1 => Just(Approval::Deny),
            1 => Just(Approval::Expire),
            1 => Just(Approval::Silent),
        ],
    )
}

/// What becomes of an `ask` call's question instead of what the transcript says: declined,
/// expired, withdrawn, or no answer at all.
fn question_end() -> impl Strategy<Value = Option<QuestionOutcome>> {
    prop_oneof![
        Just(Some(QuestionOutcome::Declined { text: None })),
        Just(Some(QuestionOutcome::Expired)),
        Just(Some(QuestionOutcome::Withdrawn {
            reason: "the terminal went away".into()
        })),
        Just(None),
    ]
}

fn fault(space: PlanSpace) -> BoxedStrategy<StorageFault> {
    if space.faults {
        crate::case::fault().boxed()
    } else {
        Just(StorageFault::None).boxed()
    }
}

fn resume(space: PlanSpace) -> BoxedStrategy<Resume> {
    if space.resumes {
        prop_oneof![
            2 => Just(Resume::No),
            1 => Just(Resume::Rerun(RerunPolicy::NotStarted)),
            1 => Just(Resume::Rerun(RerunPolicy::Safe)),
        ]
        .boxed()
    } else {
        Just(Resume::No).boxed()
    }
}

/// Random cases over `tools` (each a name and the strategy of its arguments).
pub(crate) fn random_cases(
    tools: Vec<(String, BoxedStrategy<Value>)>,
    space: PlanSpace,
) -> BoxedStrategy<UserCase> {
    assert!(!tools.is_empty(), "a random case needs a tool to call");
    let call = {
        let choices: Vec<BoxedStrategy<(String, Value)>> = tools
            .into_iter()
            .map(|(name, args)| args.prop_map(move |a| (name.clone(), a)).boxed())
            .collect();
        (proptest::strategy::Union::new(choices), approval())
    };
    let step = (
        proptest::collection::vec(call, 0..=CALLS_MAX),
        proptest::bool::weighted(0.05),
        proptest::option::weighted(0.3, cancel(space)),
    );
    (
        proptest::collection::vec(
            proptest::collection::vec(step, 1..=STEPS_MAX),
            1..=TURNS_MAX,
        ),
        1..=space.parallel_max.max(1),
        fault(space),
        resume(space),
    )
        .prop_map(|(turns, parallel_max, fault, resume)| UserCase {
            turns: turns
                .into_iter()
                .enumerate()
                .map(|(t, steps)| {
                    let last = steps.len() - 1;
                    Turn {
                        user: format!("turn {t}"),
                        steps: steps
                            .into_iter()
                            .enumerate()
                            .map(|(s, (calls, truncated, cancel))| {
                                let stop_reason = match (truncated, calls.is_empty() && s == last) {
                                    (true, _) => StopReason::Length,
                                    (false, true) => StopReason::EndTurn,
                                    (false, false) => StopReason::ToolUse,
                                };
                                Step {
                                    text: format!("step {s}"),
                                    calls: calls
                                        .into_iter()
                                        .enumerate()
                                        .map(|(i, ((tool, args), approval))| Call {
                                            id: format!("t{t}s{s}c{i}"),
                                            tool,
                                            arguments: args.to_string(),
                                            approval,
                                            answer: None,
                                        })
                                        .collect(),
                                    stop_reason,
                                    cancel,
                                }
                            })
                            .collect(),
                    }
                })
                .collect(),
            parallel_max,
            fault,
            resume,
        })
        .boxed()
}

/// The turns a transcript plays, as written (its cancels, approvals and answers included).
/// `Err` names the line of a transcript the runtime would refuse: a response before any user
/// line, a call id empty or used twice, more calls in a response than a batch may have.
pub fn turns_of(lines: &[ScriptLine]) -> Result<Vec<Turn>, String> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for line in lines {
        match &line.step {
            ModelStep::User { text } => turns.push(Turn {
                user: text.clone(),
                steps: Vec::new(),
            }),
            ModelStep::Respond(r) => {
                let Some(turn) = turns.last_mut() else {
                    return Err(format!(
                        "line {}: a response before any user line",
                        line.line
                    ));
                };
                let mut calls = Vec::new();
                let calls_max = runtime::Config::default().calls_per_batch_max;
                if r.response.tool_calls.len() > calls_max {
                    return Err(format!(
                        "line {}: {} calls in one response, more than the {calls_max} a batch may have",
                        line.line,
                        r.response.tool_calls.len()
                    ));
                }
                for c in &r.response.tool_calls {
                    if c.call_id.is_empty() {
                        return Err(format!("line {}: a call with an empty id", line.line));
                    }
                    if !ids.insert(c.call_id.clone()) {
                        return Err(format!(
                            "line {}: call id {} is used twice",
                            line.line, c.call_id
                        ));
                    }
                    calls.push(Call {
                        id: c.call_id.clone(),
                        tool: c.name.clone(),
                        arguments: c.arguments.clone(),
                        approval: r.approvals.get(&c.call_id).map(|a| match a {
                            runtime::event::AskAnswer::Denied => Approval::Deny,
                            runtime::event::AskAnswer::Expired => Approval::Expire,
                            _ => Approval::Allow,
                        }),
                        answer: r.answers.get(&c.call_id).cloned(),
                    });
                }
                turn.steps.push(Step {
                    text: r.response.text.clone(),
                    calls,
                    stop_reason: r.response.stop_reason,
                    cancel: r.cancel_after_ms.map(CancelAt::AfterMs),
                });
            }
        }
    }
    Ok(turns)
}

/// Cases that play `turns` as written, with the plan around them drawn: each step's cancel
/// (as written half the time), each call's approval (as written half the time), the fault,
/// `parallel_max` and the resume.
pub(crate) fn script_cases(turns: Vec<Turn>, space: PlanSpace) -> BoxedStrategy<UserCase> {
    let steps: Vec<&Step> = turns.iter().flat_map(|t| &t.steps).collect();
    let calls_n: usize = steps.iter().map(|s| s.calls.len()).sum();
    let steps_n = steps.len();
    (
        proptest::collection::vec(
            prop_oneof![1 => Just(None), 1 => proptest::option::of(cancel(space)).prop_map(Some)],
            steps_n,
        ),
        proptest::collection::vec(
            prop_oneof![1 => Just(None), 1 => approval().prop_map(Some)],
            calls_n,
        ),
        proptest::collection::vec(
            prop_oneof![1 => Just(None), 1 => question_end().prop_map(Some)],
            calls_n,
        ),
        1..=space.parallel_max.max(1),
        fault(space),
        resume(space),
    )
        .prop_map(
            move |(cancels, approvals, answers, parallel_max, fault, resume)| {
                let (mut cancels, mut approvals) = (cancels.into_iter(), approvals.into_iter());
                let mut answers = answers.into_iter();
                let mut turns = turns.clone();
                for step in turns.iter_mut().flat_map(|t| &mut t.steps) {
                    if let Some(Some(drawn)) = cancels.next() {
                        step.cancel = drawn;
                    }
                    for call in &mut step.calls {
                        if let Some(Some(drawn)) = approvals.next() {
                            call.approval = drawn;
                        }
                        if let Some(Some(drawn)) = answers.next() {
                            if call.tool == "ask" {
                                call.answer = drawn;
                            }
                        }
                    }
                }
                UserCase {
                    turns,
                    parallel_max,
                    fault,
                    resume,
                }
            },
        )
        .boxed()
}

/// A question's end as transcripts spell it (`answers`).
fn answer_line(end: &QuestionOutcome) -> Value {
    match end {
        QuestionOutcome::Answered(a) => json!({"choice": a.choice, "text": a.text}),
        QuestionOutcome::Declined { .. } => json!("decline"),
        QuestionOutcome::Expired => json!("expire"),
        QuestionOutcome::Withdrawn { .. } => json!("withdraw"),
    }
}

impl UserCase {
    /// Every call, in model order, with its step.
    pub fn calls(&self) -> impl Iterator<Item = (&Step, &Call)> {
        self.turns
            .iter()
            .flat_map(|t| &t.steps)
            .flat_map(|s| s.calls.iter().map(move |c| (s, c)))
    }

    /// The case's transcript in the format `tooljournal run --script` and `tooljournal fuzz
    /// --script` read (DESIGN.md §10): cancels at a number of ms and approvals are written in
    /// it; the rest of the plan is [`UserCase::plan`].
    pub fn transcript(&self) -> String {
        let mut out = String::new();
        for turn in &self.turns {
            let _ = writeln!(out, "{}", json!({ "user": turn.user }));
            for step in &turn.steps {
                let calls: Vec<Value> = step
                    .calls
                    .iter()
                    .map(|c| json!({"id": c.id, "name": c.tool, "arguments": c.arguments}))
                    .collect();
                let mut assistant = json!({
                    "text": step.text,
                    "tool_calls": calls,
                    "stop_reason": step.stop_reason,
                });
                if let Some(CancelAt::AfterMs(ms)) = step.cancel {
                    assistant["cancel_after_ms"] = json!(ms);
                }
                let approvals: BTreeMap<&str, &str> = step
                    .calls
                    .iter()
                    .filter_map(|c| Some((c.id.as_str(), c.approval?.as_script()?)))
                    .collect();
                if !approvals.is_empty() {
                    assistant["approvals"] = json!(approvals);
                }
                let answers: BTreeMap<&str, Value> = step
                    .calls
                    .iter()
                    .filter_map(|c| Some((c.id.as_str(), answer_line(c.answer.as_ref()?))))
                    .collect();
                if !answers.is_empty() {
                    assistant["answers"] = json!(answers);
                }
                let _ = writeln!(out, "{}", json!({ "assistant": assistant }));
            }
        }
        out
    }

    /// What the transcript cannot say: `parallel_max`, the cancels it has no spelling for, the
    /// approvals never answered, the fault and the resume; one line each.
    pub fn plan(&self) -> String {
        let mut out = format!(
            "parallel_max: {}\nfault: {:?}\n",
            self.parallel_max, self.fault
        );
        let _ = writeln!(out, "resume: {:?}", self.resume);
        for (t, turn) in self.turns.iter().enumerate() {
            for (s, step) in turn.steps.iter().enumerate() {
                match step.cancel {
                    Some(CancelAt::StepStart) => {
                        let _ = writeln!(out, "turn {t} step {s}: stopped before the response");
                    }
                    Some(CancelAt::AtBody(n)) => {
                        let _ = writeln!(out, "turn {t} step {s}: stopped as body {n} begins");
                    }
                    _ => {}
                }
                for c in &step.calls {
                    if c.approval == Some(Approval::Silent) {
                        let _ = writeln!(out, "{}: asked, never answered", c.id);
                    }
                }
            }
        }
        out
    }
}
