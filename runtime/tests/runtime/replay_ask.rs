//! Replay and the `ask` tool's questions (event schema 4): a journal whose replies, yes/no answers
//! and approvals do not follow the questions they answer is refused, naming the record. Each
//! forged journal starts from one a real session wrote, changed in one place.

use crate::common;

use common::forged::{self, journal_of};
use common::*;
use journal::SimStorage;
use std::sync::Arc;
use tooljournal_runtime::ask::Ask;
use tooljournal_runtime::event::{
    Answer, Approval, AskAnswer, Event, Question, Record, Reply, ToolSource,
};
use tooljournal_runtime::state::CallState;
use tooljournal_runtime::Config;
use tooljournal_runtime::Registry;
use tooljournal_runtime::{
    Approver, AskFuture, CallInfo, Decision, Hooks, PreExecute, QuestionFuture, QuestionOutcome,
};

/// Answers questions with one outcome and yes/no approvals "yes, once".
struct Person(QuestionOutcome);
impl Approver for Person {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(async { AskAnswer::AllowedOnce })
    }
    fn question(&self, _call: CallInfo, _question: Question) -> QuestionFuture<'_> {
        let outcome = self.0.clone();
        Box::pin(async move { outcome })
    }
}

/// Asks a person about every call but `ask`'s (which are questions already).
struct AskFirst;
impl PreExecute for AskFirst {
    fn name(&self) -> &str {
        "ask-first"
    }
    fn decide(&self, _call: &CallInfo) -> Decision {
        Decision::Ask {
            reason: "may it?".into(),
        }
    }
}

fn picked() -> Answer {
    Answer {
        choice: vec!["b".into()],
        text: None,
    }
}

/// The records of a session whose one step asks `q` (options a and b), answered `outcome`, and
/// runs `t` (a tool a person approves yes/no).
fn journal_with(outcome: QuestionOutcome) -> Vec<Record> {
    let storage = SimStorage::new();
    let mut registry = Registry::new();
    registry
        .register(Arc::new(Ask), ToolSource::BuiltIn)
        .unwrap();
    registry
        .register(Arc::new(TestTool::ok("t")), ToolSource::BuiltIn)
        .unwrap();
    let hooks = Hooks {
        pre_execute: vec![Arc::new(AskFirst)],
        approver: Some(Arc::new(Person(outcome))),
        ..Hooks::default()
    };
    let mut s = session_on(&storage, Arc::new(registry), hooks, Config::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let args = r#"{"question":"a or b?","options":[{"label":"a"},{"label":"b"}]}"#;
    rt.block_on(one_step(
        &mut s,
        vec![call("q", "ask", args), call("y", "t", "{}")],
    ));
    drop(s);
    // The journal as written replays: only the changes below make it inconsistent.
    replay(&storage);
    journal::Reader::open(Arc::new(storage), journal::Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<Record>().unwrap())
        .collect()
}

/// The index of `call_id`'s first event of `kind`.
fn find(records: &[Record], call_id: &str, kind: &str) -> usize {
    records
        .iter()
        .position(|r| {
            r.event.kind() == kind && r.event.call().is_some_and(|c| c.call_id == call_id)
        })
        .unwrap_or_else(|| panic!("{call_id} has no {kind}"))
}

/// Replay refuses `records` at the one at `index` (seq `index + 1`), a `kind` record of the
/// call it belongs to, saying `what`.
fn refused_at(records: &[Record], index: usize, kind: &str, what: &str) {
    let call = records[index]
        .event
        .call()
        .expect("a call's record")
        .to_string();
    let message = forged::refused_at(records, index, kind, what);
    assert!(message.contains(&call), "{message}: names {call}");
}

/// `approved` as `Asked {answer}` in place of the call's record at `at`, pointing back at the
/// call's event before it.
fn approved_at(records: &mut [Record], at: usize, answer: AskAnswer) {
    let call = records[at].event.call().expect("a call's event").clone();
    let before = records[..at]
        .iter()
        .rposition(|r| r.event.call() == Some(&call))
        .expect("an earlier event of the call");
    records[at].event = Event::Approved {
        call,
        approval: Approval::Asked { answer },
        source_seqs: vec![before as u64 + 1],
    };
}

#[test]
fn the_journals_these_forgeries_start_from_replay_as_written() {
    let answered = journal_with(QuestionOutcome::Answered(picked()));
    let storage = journal_of(&answered);
    let c = replayed(&storage, "q");
    assert_eq!(c.state, CallState::Committed);
    assert_eq!(
        c.approval,
        Some(Approval::Asked {
            answer: AskAnswer::Answered
        })
    );
    assert_eq!(c.asks.len(), 1);
    assert_eq!(c.asks[0].reply, Some(Reply::Answered(picked())));
    let y = replayed(&storage, "y");
    assert_eq!(
        y.approval,
        Some(Approval::Asked {
            answer: AskAnswer::AllowedOnce
        })
    );
    for (outcome, end) in [
        (QuestionOutcome::Declined { text: None }, "ask/reply"),
        (QuestionOutcome::Expired, "ask/expired"),
    ] {
        let records = journal_with(outcome);
        find(&records, "q", end);
        find(&records, "q", "rejected");
    }
}

#[test]
fn a_reply_with_no_pending_question_is_refused() {
    // No question at all: the `ask/question` removed.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    records.remove(find(&records, "q", "ask/question"));
    let reply = find(&records, "q", "ask/reply");
    refused_at(&records, reply, "ask/reply", "no pending ask/question");

    // The question was a yes/no approval (`ask/pending`), not an `ask/question`.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    let question = find(&records, "q", "ask/question");
    records[question].event = Event::AskPending {
        call: records[question].event.call().unwrap().clone(),
        question: "a or b?".into(),
    };
    let reply = find(&records, "q", "ask/reply");
    refused_at(&records, reply, "ask/reply", "no pending ask/question");

    // A second reply to a question already answered.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    let reply = find(&records, "q", "ask/reply");
    let again = records[reply].clone();
    records.insert(reply + 1, again);
    refused_at(&records, reply + 1, "ask/reply", "no pending question");
}

#[test]
fn a_yes_no_answer_to_a_question_is_refused() {
    for answer in [
        AskAnswer::AllowedOnce,
        AskAnswer::Denied,
        AskAnswer::Answered,
    ] {
        let mut records = journal_with(QuestionOutcome::Answered(picked()));
        let reply = find(&records, "q", "ask/reply");
        records[reply].event = Event::AskAnswered {
            call: records[reply].event.call().unwrap().clone(),
            answer,
        };
        refused_at(&records, reply, "ask/answered", "does not fit");
    }
    // A question's answers are no yes/no answers, even to a yes/no question.
    for answer in [AskAnswer::Answered, AskAnswer::Declined] {
        let mut records = journal_with(QuestionOutcome::Answered(picked()));
        let yes = find(&records, "y", "ask/answered");
        records[yes].event = Event::AskAnswered {
            call: records[yes].event.call().unwrap().clone(),
            answer,
        };
        refused_at(&records, yes, "ask/answered", "does not fit");
    }
}

#[test]
fn approved_as_answered_is_refused_unless_the_question_was_answered() {
    // Declined: the `rejected` turned into an approval.
    let mut records = journal_with(QuestionOutcome::Declined { text: None });
    let rejected = find(&records, "q", "rejected");
    approved_at(&mut records, rejected, AskAnswer::Answered);
    refused_at(&records, rejected, "approved", "approved as answered");

    // Expired, so never replied to.
    let mut records = journal_with(QuestionOutcome::Expired);
    let rejected = find(&records, "q", "rejected");
    approved_at(&mut records, rejected, AskAnswer::Answered);
    refused_at(&records, rejected, "approved", "approved as answered");

    // Still pending: the reply removed, the approval right after the question.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    records.remove(find(&records, "q", "ask/reply"));
    let approved = find(&records, "q", "approved");
    approved_at(&mut records, approved, AskAnswer::Answered);
    refused_at(&records, approved, "approved", "approved as answered");

    // A yes/no call approved as if a question had been answered.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    let approved = find(&records, "y", "approved");
    approved_at(&mut records, approved, AskAnswer::Answered);
    refused_at(&records, approved, "approved", "approved as answered");

    // An answered question taken for a yes.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    let approved = find(&records, "q", "approved");
    approved_at(&mut records, approved, AskAnswer::AllowedOnce);
    refused_at(&records, approved, "approved", "approved as answered");
}

#[test]
fn a_question_is_never_passed_by_an_approval_that_is_not_its_answer() {
    // Declined, then approved by "the default" as if no question had been asked.
    let mut records = journal_with(QuestionOutcome::Declined { text: None });
    let rejected = find(&records, "q", "rejected");
    approved_at(&mut records, rejected, AskAnswer::Answered);
    if let Event::Approved { approval, .. } = &mut records[rejected].event {
        *approval = Approval::Default;
    }
    refused_at(&records, rejected, "approved", "past a question");

    // Still pending, approved by a listener.
    let mut records = journal_with(QuestionOutcome::Answered(picked()));
    records.remove(find(&records, "q", "ask/reply"));
    let approved = find(&records, "q", "approved");
    approved_at(&mut records, approved, AskAnswer::Answered);
    if let Event::Approved { approval, .. } = &mut records[approved].event {
        *approval = Approval::Listener {
            name: "allow-all".into(),
        };
    }
    refused_at(&records, approved, "approved", "past a question");
}
