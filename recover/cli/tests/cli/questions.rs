//! Questions after a crash: a built-in `ask` whose question was waiting for an answer is
//! withdrawn by recovery and told to the model in words for a question (the batch classifier and
//! the streaming one alike, the same bytes every run), a yes/no approval waiting at the crash
//! keeps the generic text, and `recover audit` shows every question with its options and what
//! became of it (answered, declined, expired, cancelled, pending), in its table and its JSON.
//!
//! The journals are a real session's (the runtime library, with an approver that answers each
//! question its own way), cut right after the record a crash would have been last.

use crate::common;

use common::{recover, text};
use journal::{FsStorage, Journal, Options};
use recover::providers::{validate, Format};
use recover::Recovered;
use recover::Recovery;
use recover::{question_withdrawn_text, CallReport};
use runtime::event::{
    Answer, AskAnswer, Classification, Event, ModelCall, ModelResponse, Question, Record,
    StepOutcome, StopReason, ToolSource, TurnOutcome,
};
use runtime::ManualClock;
use runtime::Registry;
use runtime::{
    Approver, AskFuture, CallInfo, Decision, Hooks, PreExecute, QuestionFuture, QuestionOutcome,
};
use runtime::{Config, ErrorCode, Session, SessionOptions};
use runtime::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

/// What the model reads about a question withdrawn at the crash, written out here (not taken
/// from the code under test).
const WITHDRAWN: &str = "TOOL_NOT_STARTED: the session stopped while this question waited for \
an answer, so it was withdrawn unanswered: nobody answered it and nothing was taken as an \
answer; ask again if you still need the answer";

/// What the model reads about any other call that did not start.
const NOT_STARTED: &str = "TOOL_NOT_STARTED: the session was interrupted before this call \
started; it did not run and may be retried";

/// A tool that changes something: `--approve ask`-like listeners ask before it runs.
struct Mark;

impl Tool for Mark {
    fn name(&self) -> &str {
        "mark"
    }
    fn description(&self) -> &str {
        "marks a file"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}})
    }
    fn execute(&self, _args: runtime::Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async { Ok(ToolOutput::text("marked")) })
    }
}

/// Asks the person before every `mark`.
struct AskFirst;

impl PreExecute for AskFirst {
    fn name(&self) -> &str {
        "ask-first"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        match call.args.str("path") {
            Some(path) => Decision::Ask {
                reason: format!("mark {path}"),
            },
            None => Decision::Pass,
        }
    }
}

/// The person: allows every `mark` once, and answers each question its own way by call id.
struct Person;

impl Approver for Person {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(async { AskAnswer::AllowedOnce })
    }
    fn question(&self, call: CallInfo, _question: Question) -> QuestionFuture<'_> {
        let outcome = match call.call.call_id.as_str() {
            "q1" => QuestionOutcome::Answered(Answer {
                choice: vec!["blue".into()],
                text: Some("a light one".into()),
            }),
            "q2" => QuestionOutcome::Declined {
                text: Some("not telling".into()),
            },
            "q3" => QuestionOutcome::Expired,
            "q4" => QuestionOutcome::Withdrawn {
                reason: "the terminal went away".into(),
            },
            // q5: answered, but the journal is cut before the answer.
            _ => QuestionOutcome::Answered(Answer {
                choice: vec!["go".into()],
                text: None,
            }),
        };
        Box::pin(async move { outcome })
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ModelCall {
    ModelCall {
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

async fn turn(session: &mut Session, user: &str, calls: Vec<ModelCall>) {
    session.begin_turn(user).unwrap();
    session.begin_step().unwrap();
    session
        .run_batch(ModelResponse {
            text: "asking".into(),
            tool_calls: calls,
            stop_reason: StopReason::ToolUse,
        })
        .await
        .unwrap();
    session.end_step(StepOutcome::Completed).unwrap();
    session.end_turn(TurnOutcome::Completed).await.unwrap();
}

/// A new session in `dir` on a manual clock, and a runtime to drive it.
fn open_session(
    dir: &Path,
    registry: Registry,
    hooks: Hooks,
    config: Config,
    id: &str,
) -> (Session, tokio::runtime::Runtime) {
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir).unwrap()),
        Options::default(),
    )
    .unwrap();
    let session = Session::open(
        journal,
        Arc::new(registry),
        hooks,
        config,
        SessionOptions {
            session_id: Some(id.into()),
            workspace: "/ws".into(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (session, rt)
}

/// A whole session in `dir`: turn 1 asks q1 (answered), q2 (declined), q3 (expired), q4
/// (withdrawn by the approver) and marks m1 (approved); turn 2 marks m2 (approved), then asks q5.
fn record_session(dir: &Path) {
    let mut registry = Registry::new();
    registry
        .register(Arc::new(runtime::ask::Ask), ToolSource::BuiltIn)
        .unwrap();
    registry
        .register(Arc::new(Mark), ToolSource::BuiltIn)
        .unwrap();
    let hooks = Hooks {
        pre_execute: vec![Arc::new(AskFirst)],
        approver: Some(Arc::new(Person)),
        ..Hooks::default()
    };
    let (mut session, rt) = open_session(dir, registry, hooks, Config::default(), "questions");
    rt.block_on(async {
        turn(
            &mut session,
            "ask me things",
            vec![
                call(
                    "q1",
                    "ask",
                    json!({"question": "Which colour?", "free_text": true, "options": [
                        {"label": "blue", "description": "like the sky"}, {"label": "red"}]}),
                ),
                call("q2", "ask", json!({"question": "Your name?"})),
                call(
                    "q3",
                    "ask",
                    json!({"question": "Deploy now?",
                        "options": [{"label": "yes"}, {"label": "no"}]}),
                ),
                call(
                    "q4",
                    "ask",
                    json!({"question": "Which files?", "multiple": true,
                        "options": [{"label": "a.txt"}, {"label": "b.txt"}]}),
                ),
                call("m1", "mark", json!({"path": "m1.txt"})),
            ],
        )
        .await;
        turn(
            &mut session,
            "and the plan",
            vec![
                call("m2", "mark", json!({"path": "m2.txt"})),
                call(
                    "q5",
                    "ask",
                    json!({"question": "Proceed with the plan?", "options": [
                        {"label": "go", "description": "do it"}, {"label": "stop"}]}),
                ),
            ],
        )
        .await;
        session.close().await.unwrap();
    });
}

/// Cuts the journal right after the first record `last` matches: a crash once it was durable.
fn cut_after(dir: &Path, last: impl Fn(&Event) -> bool) {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    let reader = journal::Reader::open(storage, journal::Limits::default()).unwrap();
    for record in reader {
        let record = record.unwrap();
        let event = record.decode::<Record>().unwrap().event;
        if last(&event) {
            assert_eq!(
                record.position.segment, 0,
                "a journal this small has one segment"
            );
            let end = record.position.offset + record.frame_bytes;
            let file = dir.join(journal::segment::file_name(0));
            let bytes = std::fs::read(&file).unwrap();
            std::fs::write(&file, &bytes[..end as usize]).unwrap();
            return;
        }
    }
    panic!("no such record in the journal");
}

fn is_question_of(event: &Event, id: &str) -> bool {
    matches!(event, Event::AskQuestion { call, .. } if call.call_id == id)
}

/// A session crashed while q5's question waited for its answer.
fn crashed_while_q5_waits(dir: &Path) {
    record_session(dir);
    cut_after(dir, |e| is_question_of(e, "q5"));
}

fn report<'a>(calls: &'a [CallReport], id: &str) -> &'a CallReport {
    calls
        .iter()
        .find(|c| c.call.call_id == id)
        .unwrap_or_else(|| panic!("{id} is reported"))
}

fn batch(dir: &Path) -> Recovered {
    recover::Recovery::of(dir).run().unwrap()
}

fn streamed(dir: &Path) -> Vec<CallReport> {
    let mut reports: Vec<CallReport> = Vec::new();
    Recovery::of(dir).stream(&mut reports).unwrap();
    reports
}

#[test]
fn a_question_waiting_at_the_crash_is_withdrawn_in_words_for_a_question() {
    let dir = tempfile::tempdir().unwrap();
    crashed_while_q5_waits(dir.path());
    assert_eq!(question_withdrawn_text(), WITHDRAWN);

    let full = batch(dir.path());
    let q5 = report(&full.analysis.calls, "q5");
    assert_eq!(q5.classification, Some(Classification::ToolNotStarted));
    assert_eq!(q5.result.code, Some(ErrorCode::ToolNotStarted));
    assert_eq!(q5.result.content, WITHDRAWN);
    assert_eq!(
        full.analysis
            .pending_asks
            .iter()
            .map(|c| c.call_id.as_str())
            .collect::<Vec<_>>(),
        ["q5"]
    );
    // m2, approved before q5 was asked but not started at the crash: the generic words.
    assert_eq!(
        report(&full.analysis.calls, "m2").result.content,
        NOT_STARTED
    );

    // The streaming classifier says the same bytes.
    let reports = streamed(dir.path());
    assert_eq!(reports, full.analysis.calls);
    assert_eq!(report(&reports, "q5").result.content, WITHDRAWN);

    // Recovery writes it: the question withdrawn, never answered, the text in the journal.
    let out = recover(&["classify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let replay = common::replay_dir(dir.path());
    let q5 = replay.calls().find(|c| c.call.call_id == "q5").unwrap();
    assert_eq!(q5.asks.len(), 1);
    assert_eq!(q5.asks[0].answer, Some(AskAnswer::Cancelled));
    assert_eq!(
        q5.asks[0].cancel_reason.as_deref(),
        Some("session interrupted")
    );
    assert_eq!(q5.asks[0].reply, None, "nothing was taken as an answer");
    assert_eq!(q5.committed.as_ref().unwrap().content, WITHDRAWN);

    // Read again after recovery, both classifiers give the recorded text, byte for byte.
    assert_eq!(
        report(&batch(dir.path()).analysis.calls, "q5")
            .result
            .content,
        WITHDRAWN
    );
    assert_eq!(
        report(&streamed(dir.path()), "q5").result.content,
        WITHDRAWN
    );
}

#[test]
fn every_rebuilt_history_validates_with_the_withdrawn_question_in_it() {
    let dir = tempfile::tempdir().unwrap();
    crashed_while_q5_waits(dir.path());
    for format in ["openai-chat", "openai-responses", "anthropic", "gemini"] {
        let out = recover(&["rebuild", dir.path().to_str().unwrap(), "--format", format]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{format}: {}",
            text(&out.stderr)
        );
        let body: Value = serde_json::from_slice(&out.stdout).unwrap();
        let parsed: Format = format.parse().unwrap();
        validate(parsed, &body).unwrap_or_else(|v| panic!("{format}: {v:?}"));
        let shown = body.to_string();
        // The question as the model asked it, its withdrawal, and the answers given before.
        assert!(
            shown.contains("Proceed with the plan?"),
            "{format}: {shown}"
        );
        let withdrawn = serde_json::to_string(WITHDRAWN).unwrap();
        assert!(
            shown.contains(withdrawn.trim_matches('"')),
            "{format}: {shown}"
        );
        assert!(shown.contains("The user chose: blue"), "{format}: {shown}");
    }
}

#[test]
fn an_approval_waiting_at_the_crash_keeps_the_generic_text() {
    let dir = tempfile::tempdir().unwrap();
    record_session(dir.path());
    cut_after(
        dir.path(),
        |e| matches!(e, Event::AskPending { call, .. } if call.call_id == "m2"),
    );
    let full = batch(dir.path());
    let m2 = report(&full.analysis.calls, "m2");
    assert_eq!(m2.classification, Some(Classification::ToolNotStarted));
    assert_eq!(m2.result.content, NOT_STARTED);
    assert_eq!(
        report(&streamed(dir.path()), "m2").result.content,
        NOT_STARTED
    );
    // q5 never got as far as its question: not started, in the generic words.
    assert_eq!(
        report(&full.analysis.calls, "q5").result.content,
        NOT_STARTED
    );
}

fn audit(dir: &Path, json: bool) -> String {
    let mut args = vec!["audit", dir.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let out = recover(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn question_of(audit: &Value, id: &str) -> Value {
    audit["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["call_id"] == id)
        .unwrap_or_else(|| panic!("{id} is audited"))["question"]
        .clone()
}

/// The table's row for `id` and the lines under it, up to the next row.
fn rows_of(table: &str, id: &str) -> String {
    let lines: Vec<&str> = table.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.split_whitespace().nth(2) == Some(id))
        .unwrap_or_else(|| panic!("{id} has a row: {table}"));
    let mut rows = vec![lines[start]];
    rows.extend(
        lines[start + 1..]
            .iter()
            .take_while(|l| l.starts_with("          ")),
    );
    rows.join("\n")
}

#[test]
fn audit_json_shows_every_question_its_options_and_what_became_of_it() {
    let dir = tempfile::tempdir().unwrap();
    crashed_while_q5_waits(dir.path());
    // Before recovery, q5's question is pending, as the journal says.
    let before: Value = serde_json::from_str(&audit(dir.path(), true)).unwrap();
    assert_eq!(question_of(&before, "q5")["state"], "pending");
    assert_eq!(question_of(&before, "q5")["answer"], Value::Null);

    let out = recover(&["classify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_str(&audit(dir.path(), true)).unwrap();
    assert_eq!(
        question_of(&v, "q1"),
        json!({
            "kind": "question",
            "text": "Which colour?",
            "options": [
                {"label": "blue", "description": "like the sky"},
                {"label": "red", "description": ""},
            ],
            "multiple": false,
            "free_text": true,
            "plan_option": null,
            "state": "answered",
            "answer": {"choice": ["blue"], "text": "a light one"},
            "reason": null,
        })
    );
    let q2 = question_of(&v, "q2");
    assert_eq!(
        (&q2["text"], &q2["state"], &q2["answer"], &q2["reason"]),
        (
            &json!("Your name?"),
            &json!("declined"),
            &Value::Null,
            &json!("not telling")
        )
    );
    assert_eq!(q2["options"], json!([]));
    assert_eq!(q2["free_text"], true, "no options: the answer is free text");
    let q3 = question_of(&v, "q3");
    assert_eq!(
        (&q3["state"], &q3["answer"], &q3["reason"]),
        (
            &json!("expired"),
            &Value::Null,
            &json!("nobody answered in time")
        )
    );
    let q4 = question_of(&v, "q4");
    assert_eq!(
        (&q4["state"], &q4["reason"], &q4["multiple"]),
        (
            &json!("cancelled"),
            &json!("the terminal went away"),
            &json!(true)
        )
    );
    let q5 = question_of(&v, "q5");
    assert_eq!(
        (&q5["state"], &q5["answer"], &q5["reason"]),
        (
            &json!("cancelled"),
            &Value::Null,
            &json!("session interrupted")
        )
    );
    assert_eq!(
        q5["options"],
        json!([{"label": "go", "description": "do it"}, {"label": "stop", "description": ""}])
    );
    // A yes/no approval is a question too: its text and its answer.
    assert_eq!(
        question_of(&v, "m1"),
        json!({
            "kind": "approval",
            "text": "mark m1.txt",
            "state": "answered",
            "answer": "allowed_once",
            "reason": null,
        })
    );
}

#[test]
fn the_audit_table_lists_each_question_under_its_call() {
    let dir = tempfile::tempdir().unwrap();
    crashed_while_q5_waits(dir.path());
    let before = audit(dir.path(), false);
    let q5 = rows_of(&before, "q5");
    assert!(q5.contains("asked: pending"), "{q5}");
    assert!(q5.contains("question: Proceed with the plan?"), "{q5}");

    let out = recover(&["classify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = audit(dir.path(), false);
    let expected: [(&str, &[&str]); 6] = [
        (
            "q1",
            &[
                "asked: answered \"blue\"",
                "question: Which colour?",
                "options (choose one, or own words): blue (like the sky) | red",
                "answered: \"blue\", wrote \"a light one\"",
            ],
        ),
        (
            "q2",
            &[
                "asked: declined",
                "question: Your name?",
                "declined: not telling",
            ],
        ),
        (
            "q3",
            &[
                "asked: expired",
                "options (choose one): yes | no",
                "expired: nobody answered in time",
            ],
        ),
        (
            "q4",
            &[
                "asked: cancelled",
                "options (choose any): a.txt | b.txt",
                "cancelled: the terminal went away",
            ],
        ),
        (
            "q5",
            &[
                "asked: cancelled",
                "options (choose one): go (do it) | stop",
                "cancelled: session interrupted",
            ],
        ),
        (
            "m1",
            &[
                "asked: allowed once",
                "question (approval): mark m1.txt",
                "answered: allowed once",
            ],
        ),
    ];
    for (id, wanted) in expected {
        let rows = rows_of(&table, id);
        for w in wanted {
            assert!(rows.contains(w), "{id}: {w:?} in\n{rows}");
        }
    }
    // The question lines sit under their own call, not under the next.
    assert!(!rows_of(&table, "q2").contains("Which colour?"));
}

/// What the model reads about q5 when the session stopped after the person answered it and
/// before the call ran, written out here.
const ANSWERED_UNDELIVERED: &str = "TOOL_NOT_STARTED: the session stopped after the user \
answered this question and before the answer was delivered; the answer is this:\nThe user \
chose: go";

fn is_reply_of(event: &Event, id: &str) -> bool {
    matches!(event, Event::AskReplied { call, .. } if call.call_id == id)
}

#[test]
fn an_answer_journaled_before_the_crash_is_given_to_the_model_not_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    record_session(dir.path());
    cut_after(dir.path(), |e| is_reply_of(e, "q5"));

    let full = batch(dir.path());
    let q5 = report(&full.analysis.calls, "q5");
    assert_eq!(q5.classification, Some(Classification::ToolNotStarted));
    assert_eq!(q5.result.content, ANSWERED_UNDELIVERED);
    assert!(full.analysis.pending_asks.is_empty(), "nothing to withdraw");
    assert_eq!(
        report(&streamed(dir.path()), "q5").result.content,
        ANSWERED_UNDELIVERED
    );

    // Written by recovery, and in every rebuilt history.
    let out = recover(&["classify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let replay = common::replay_dir(dir.path());
    let q5 = replay.calls().find(|c| c.call.call_id == "q5").unwrap();
    assert_eq!(q5.committed.as_ref().unwrap().content, ANSWERED_UNDELIVERED);
    for format in ["openai-chat", "openai-responses", "anthropic", "gemini"] {
        let out = recover(&["rebuild", dir.path().to_str().unwrap(), "--format", format]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{format}: {}",
            text(&out.stderr)
        );
        let body: Value = serde_json::from_slice(&out.stdout).unwrap();
        validate(format.parse().unwrap(), &body).unwrap_or_else(|v| panic!("{format}: {v:?}"));
        assert!(body.to_string().contains("The user chose: go"), "{format}");
    }
}

#[test]
fn a_reply_choosing_the_plan_option_ends_plan_mode_even_when_the_crash_cut_its_plan_mode_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::new();
    registry
        .register(Arc::new(runtime::ask::Ask), ToolSource::BuiltIn)
        .unwrap();
    let hooks = Hooks {
        approver: Some(Arc::new(Person)),
        ..Hooks::default()
    };
    let config = Config {
        plan_mode: true,
        ..Config::default()
    };
    let (mut session, rt) = open_session(dir.path(), registry, hooks, config, "plan");
    rt.block_on(async {
        let plan = json!({"question": "Approve the plan?", "plan_option": "go",
            "options": [{"label": "go"}, {"label": "stop"}]});
        turn(&mut session, "plan it", vec![call("q5", "ask", plan)]).await;
        session.close().await.unwrap();
    });
    // The journal as a crash right after the reply left it: no `plan/mode` off yet.
    cut_after(dir.path(), |e| is_reply_of(e, "q5"));
    let replay = common::replay_dir(dir.path());
    assert!(
        !replay.plan_mode,
        "the person chose the plan option: the plan is approved"
    );
    let whole = batch(dir.path());
    assert_eq!(
        report(&whole.analysis.calls, "q5").result.content,
        ANSWERED_UNDELIVERED
    );
}
