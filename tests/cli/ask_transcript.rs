//! The `ask` tool's every state through the real `tooljournal run` and a transcript's
//! `answers`: what the journal says (`ask/question`, then `ask/reply`, `ask/expired` or
//! `ask/cancelled`, then `approved` or `rejected`) and what the model reads back; then the
//! rebuilt histories, in all four formats, carrying the question and its answer.
//!
//! Not here: the user's stop while a question waits. A transcript's answer is ready the moment
//! the question is put, so no scripted stop can fall while it waits; the session's handling of
//! that stop is tested in the runtime's own tests with an approver that never answers.

use recover::providers::{validate, Format};
use runtime::event::{Answer, Approval, AskAnswer, Event, Record, Reply};
use runtime::replay::{replay_storage, CallReplay, SessionReplay};
use runtime::ErrorCode;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    journal: PathBuf,
    state: PathBuf,
    script: PathBuf,
}

/// An empty workspace, and the transcript `lines` written beside it.
fn fixture(lines: &[Value]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let script = dir.path().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&script, text.join("\n")).unwrap();
    Fixture {
        ws,
        journal: dir.path().join("journal"),
        state: dir.path().join("state"),
        script,
        _dir: dir,
    }
}

impl Fixture {
    /// `tooljournal run` on the transcript, with `flags` after the usual ones.
    fn run(&self, flags: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_tooljournal"))
            .arg("run")
            .arg("--script")
            .arg(&self.script)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--journal")
            .arg(&self.journal)
            .arg("--json")
            .args(flags)
            .env("XDG_STATE_HOME", &self.state)
            .output()
            .expect("the binary runs")
    }

    /// Runs the transcript, which must succeed.
    fn run_ok(&self, flags: &[&str]) {
        let out = self.run(flags);
        assert_eq!(
            out.status.code(),
            Some(0),
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn events(&self) -> Vec<Event> {
        let storage = Arc::new(journal::FsStorage::open(&self.journal).unwrap());
        journal::Reader::open(storage, journal::Limits::default())
            .unwrap()
            .map(|r| r.unwrap().decode::<Record>().unwrap().event)
            .collect()
    }

    fn replay(&self) -> SessionReplay {
        let storage = journal::FsStorage::open(&self.journal).unwrap();
        let (replay, end) = replay_storage(Arc::new(storage), journal::Limits::default()).unwrap();
        assert_eq!(end, journal::ReadEnd::Clean);
        assert!(replay.closed, "the session closed");
        replay
    }

    /// The kinds of `id`'s events, in journal order.
    fn kinds(&self, id: &str) -> Vec<&'static str> {
        self.events()
            .iter()
            .filter(|e| e.call().is_some_and(|c| c.call_id == id))
            .map(Event::kind)
            .collect()
    }

    /// The `ask/*` events of `id`, in journal order.
    fn ask_events(&self, id: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.call().is_some_and(|c| c.call_id == id))
            .filter(|e| e.kind().starts_with("ask/"))
            .collect()
    }
}

fn call<'a>(replay: &'a SessionReplay, id: &str) -> &'a CallReplay {
    replay
        .calls()
        .find(|c| c.call.call_id == id)
        .unwrap_or_else(|| panic!("no call {id}"))
}

/// What the model read for `id`: its content, and its code if it is an error.
fn result(replay: &SessionReplay, id: &str) -> (String, Option<ErrorCode>) {
    let committed = call(replay, id).committed.clone().expect("committed");
    assert_eq!(committed.is_error, committed.code.is_some());
    (committed.content, committed.code)
}

/// An assistant line of `ask` calls (id, arguments) with `answers` beside them, if any.
fn asks(calls: &[(&str, Value)], answers: Option<Value>) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, args)| json!({"id": id, "name": "ask", "arguments": args.to_string()}))
        .collect();
    let mut line =
        json!({"assistant": {"text": "", "tool_calls": calls, "stop_reason": "tool_use"}});
    if let Some(answers) = answers {
        line["assistant"]["answers"] = answers;
    }
    line
}

fn end() -> Value {
    json!({"assistant": {"text": "done", "stop_reason": "end_turn"}})
}

/// A transcript of one turn that asks `q1` with `args`, answered so (or not at all).
fn one_question(args: Value, answer: Option<Value>) -> Fixture {
    let answers = answer.map(|a| json!({ "q1": a }));
    fixture(&[
        json!({"user": "ask me"}),
        asks(&[("q1", args)], answers),
        end(),
    ])
}

fn colours() -> Value {
    json!({
        "question": "Which colour?",
        "options": [
            {"label": "red", "description": "warm"},
            {"label": "green"},
            {"label": "blue", "description": "cold"}
        ]
    })
}

/// An answered question's journal: the question put, the reply, then an approval that points
/// at the answer, and the call run and committed.
fn assert_answered(f: &Fixture, id: &str, answer: &Answer) {
    assert_eq!(
        f.kinds(id),
        [
            "received",
            "parsed",
            "ask/question",
            "ask/reply",
            "approved",
            "started",
            "settled",
            "committed"
        ]
    );
    let replay = f.replay();
    let c = call(&replay, id);
    assert_eq!(c.asks.len(), 1);
    assert_eq!(c.asks[0].reply, Some(Reply::Answered(answer.clone())));
    assert_eq!(c.asks[0].answer, Some(AskAnswer::Answered));
    assert_eq!(
        c.approval,
        Some(Approval::Asked {
            answer: AskAnswer::Answered
        })
    );
    let value: Value = serde_json::from_str(c.committed.as_ref().unwrap().value.as_ref().unwrap())
        .expect("the structured value is JSON");
    assert_eq!(value, json!({"choice": answer.choice, "text": answer.text}));
}

#[test]
fn a_single_choice_is_the_result_and_the_question_is_journaled_whole() {
    let f = one_question(colours(), Some(json!({"choice": ["green"]})));
    f.run_ok(&[]);
    let answer = Answer {
        choice: vec!["green".into()],
        text: None,
    };
    assert_answered(&f, "q1", &answer);
    let replay = f.replay();
    let question = call(&replay, "q1").asks[0].structured.clone().unwrap();
    assert_eq!(question.text, "Which colour?");
    let options: Vec<(&str, &str)> = question
        .options
        .iter()
        .map(|o| (o.label.as_str(), o.description.as_str()))
        .collect();
    assert_eq!(options, [("red", "warm"), ("green", ""), ("blue", "cold")]);
    assert!(!question.multiple && !question.free_text);
    assert_eq!(
        result(&replay, "q1"),
        ("The user chose: green".to_owned(), None)
    );
}

#[test]
fn several_choices_answer_a_question_that_allows_them() {
    let mut args = colours();
    args["multiple"] = json!(true);
    let f = one_question(args, Some(json!({"choice": ["red", "blue"]})));
    f.run_ok(&[]);
    let answer = Answer {
        choice: vec!["red".into(), "blue".into()],
        text: None,
    };
    assert_answered(&f, "q1", &answer);
    assert_eq!(
        result(&f.replay(), "q1"),
        ("The user chose:\n- red\n- blue".to_owned(), None)
    );
}

#[test]
fn free_text_answers_a_question_without_options_and_goes_with_a_choice_when_allowed() {
    let mut with_text = colours();
    with_text["free_text"] = json!(true);
    let f = fixture(&[
        json!({"user": "ask me"}),
        asks(
            &[
                ("q1", json!({"question": "When shall we meet?"})),
                ("q2", with_text),
            ],
            Some(json!({
                "q1": {"text": "Friday at ten"},
                "q2": {"choice": ["blue"], "text": "a dark one"}
            })),
        ),
        end(),
    ]);
    f.run_ok(&[]);
    let words = Answer {
        choice: vec![],
        text: Some("Friday at ten".into()),
    };
    assert_answered(&f, "q1", &words);
    let both = Answer {
        choice: vec!["blue".into()],
        text: Some("a dark one".into()),
    };
    assert_answered(&f, "q2", &both);
    let replay = f.replay();
    assert_eq!(
        result(&replay, "q1"),
        ("The user wrote: Friday at ten".to_owned(), None)
    );
    assert_eq!(
        result(&replay, "q2"),
        (
            "The user chose: blue\nThe user wrote: a dark one".to_owned(),
            None
        )
    );
}

/// A question that is not answered: the question put, then `ended` (one `ask/*` event), then
/// rejected with `code` and nothing run.
fn assert_unanswered(f: &Fixture, id: &str, ended: &str, code: ErrorCode) -> String {
    assert_eq!(
        f.kinds(id),
        [
            "received",
            "parsed",
            "ask/question",
            ended,
            "rejected",
            "committed"
        ]
    );
    let replay = f.replay();
    let c = call(&replay, id);
    assert_eq!(c.approval, None, "never approved");
    assert_eq!(c.started_at_ms, None, "never run");
    let (content, got) = result(&replay, id);
    assert_eq!(got, Some(code), "{content}");
    assert!(
        content.starts_with(&format!("{}: ", code.as_str())),
        "{content}"
    );
    content
}

#[test]
fn a_declined_question_is_question_declined_in_both_spellings_of_the_transcript() {
    // Today's spelling, and the one from before `answers` (a denial in `approvals`).
    for answers in [
        json!({"answers": {"q1": "decline"}}),
        json!({"approvals": {"q1": "deny"}}),
    ] {
        let mut line = asks(&[("q1", colours())], None);
        for (k, v) in answers.as_object().unwrap() {
            line["assistant"][k] = v.clone();
        }
        let f = fixture(&[json!({"user": "ask me"}), line, end()]);
        f.run_ok(&[]);
        let content = assert_unanswered(&f, "q1", "ask/reply", ErrorCode::QuestionDeclined);
        assert!(
            content.contains("the user declined to answer"),
            "{answers}: {content}"
        );
        let replay = f.replay();
        assert_eq!(
            call(&replay, "q1").asks[0].reply,
            Some(Reply::Declined { text: None })
        );
        assert_eq!(
            call(&replay, "q1").rejection.as_ref().map(|r| r.0),
            Some(ErrorCode::QuestionDeclined),
            "a refusal to answer is not a policy's denial"
        );
    }
}

#[test]
fn an_expired_question_is_unanswered_never_an_answer() {
    let f = one_question(colours(), Some(json!("expire")));
    f.run_ok(&[]);
    let content = assert_unanswered(&f, "q1", "ask/expired", ErrorCode::QuestionUnanswered);
    assert!(
        content.contains("a timeout is never an answer"),
        "{content}"
    );
    let replay = f.replay();
    assert_eq!(call(&replay, "q1").asks[0].answer, Some(AskAnswer::Expired));
    assert_eq!(call(&replay, "q1").asks[0].reply, None);
}

#[test]
fn a_question_the_transcript_does_not_answer_is_withdrawn_even_when_approvals_default_to_allow() {
    // `--approve allow` answers every approval nobody scripted; a question is not one.
    let f = fixture(&[
        json!({"user": "ask me"}),
        asks(
            &[("q1", colours()), ("q2", colours())],
            Some(json!({"q2": "withdraw"})),
        ),
        end(),
    ]);
    f.run_ok(&["--approve", "allow"]);
    for (id, why) in [
        ("q1", runtime::NO_SCRIPTED_ANSWER),
        ("q2", "withdrawn by the transcript"),
    ] {
        let content = assert_unanswered(&f, id, "ask/cancelled", ErrorCode::QuestionUnanswered);
        assert_eq!(
            content,
            format!("QUESTION_UNANSWERED: the question was withdrawn unanswered ({why})")
        );
        let events = f.ask_events(id);
        let Event::AskCancelled { reason, .. } = &events[1] else {
            panic!("{events:?}")
        };
        assert_eq!(reason, why);
        assert_eq!(
            f.replay()
                .calls()
                .find(|c| c.call.call_id == id)
                .unwrap()
                .asks[0]
                .cancel_reason
                .as_deref(),
            Some(why)
        );
    }
}

#[test]
fn an_answer_that_does_not_fit_its_question_is_withdrawn_with_the_reason() {
    let f = fixture(&[
        json!({"user": "ask me"}),
        asks(
            &[
                ("q1", colours()),
                ("q2", colours()),
                ("q3", colours()),
                ("q4", colours()),
            ],
            Some(json!({
                "q1": {"choice": ["purple"]},
                "q2": {"choice": ["red", "blue"]},
                "q3": {"choice": ["red"], "text": "but lighter"},
                "q4": {"choice": []}
            })),
        ),
        end(),
    ]);
    f.run_ok(&[]);
    for (id, why) in [
        ("q1", "\"purple\" is not one of the options"),
        ("q2", "only one option may be chosen"),
        ("q3", "this question takes no free text: choose an option"),
        ("q4", "an answer chooses an option or says something"),
    ] {
        let content = assert_unanswered(&f, id, "ask/cancelled", ErrorCode::QuestionUnanswered);
        let reason = format!("the approver's answer does not fit the question: {why}");
        let events = f.ask_events(id);
        assert!(
            matches!(&events[1], Event::AskCancelled { reason: r, .. } if *r == reason),
            "{id}: {events:?}"
        );
        assert_eq!(
            content,
            format!("QUESTION_UNANSWERED: the question was withdrawn unanswered ({reason})")
        );
        let replay = f.replay();
        assert_eq!(
            call(&replay, id).asks[0].reply,
            None,
            "{id}: nobody's answer"
        );
    }
}

#[test]
fn a_malformed_question_is_a_schema_error_and_never_put_to_anyone() {
    let nine: Vec<Value> = (0..9).map(|i| json!({"label": format!("o{i}")})).collect();
    let cases = [
        (
            json!({"question": "Which?", "options": [{"label": "a"}, {"label": "a"}]}),
            "options[1].label \"a\" repeats an earlier label",
        ),
        (
            json!({"question": "Which?", "multiple": true}),
            "`multiple` needs `options` to choose from",
        ),
        (
            json!({"question": "Which?", "options": [{"label": "a"}], "plan_option": "b"}),
            "`plan_option` \"b\" is not one of the options' labels",
        ),
        (
            json!({"question": "Which?", "options": nine}),
            "do not match the input schema of ask",
        ),
    ];
    let calls: Vec<(String, Value)> = cases
        .iter()
        .enumerate()
        .map(|(i, (args, _))| (format!("q{i}"), args.clone()))
        .collect();
    let refs: Vec<(&str, Value)> = calls
        .iter()
        .map(|(id, a)| (id.as_str(), a.clone()))
        .collect();
    // Each has an answer that would fit: it is never used.
    let answers: serde_json::Map<String, Value> = calls
        .iter()
        .map(|(id, _)| (id.clone(), json!({"choice": ["a"]})))
        .collect();
    let f = fixture(&[
        json!({"user": "ask me"}),
        asks(&refs, Some(Value::Object(answers))),
        end(),
    ]);
    f.run_ok(&[]);
    let replay = f.replay();
    for (i, (_, why)) in cases.iter().enumerate() {
        let id = format!("q{i}");
        assert!(
            !f.kinds(&id).iter().any(|k| k.starts_with("ask/")),
            "{id}: {:?}",
            f.kinds(&id)
        );
        let (content, code) = result(&replay, &id);
        assert_eq!(code, Some(ErrorCode::SchemaError), "{id}: {content}");
        assert!(content.contains(why), "{id}: {content}");
    }
}

#[test]
fn a_question_the_user_stopped_before_it_was_put_is_never_asked_nor_answered() {
    // The stop comes before any call starts: the scripted answer is never given.
    let mut line = asks(
        &[("q1", colours())],
        Some(json!({"q1": {"choice": ["red"]}})),
    );
    line["assistant"]["cancel_after_ms"] = json!(0);
    let f = fixture(&[json!({"user": "ask me"}), line, end()]);
    f.run_ok(&[]);
    assert_eq!(
        f.kinds("q1"),
        ["received", "cancelled-before-start", "committed"]
    );
    let (content, code) = result(&f.replay(), "q1");
    assert_eq!(code, Some(ErrorCode::AbortedBeforeDispatch), "{content}");
}

#[test]
fn answers_a_transcript_cannot_mean_are_refused_before_anything_is_journaled() {
    let cases = [
        (
            json!({"approvals": {"q1": "allow"}}),
            "call q1 is an ask: give its answer in answers",
        ),
        (
            json!({"answers": {"r1": {"text": "x"}}}),
            "answers names call r1, which is not an `ask`",
        ),
        (
            json!({"answers": {"q1": "maybe"}}),
            "the answer to call q1 is not an answer",
        ),
    ];
    for (extra, wanted) in cases {
        let mut line = asks(&[("q1", colours())], None);
        line["assistant"]["tool_calls"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": "r1", "name": "ls", "arguments": "{}"}));
        for (k, v) in extra.as_object().unwrap() {
            line["assistant"][k] = v.clone();
        }
        let f = fixture(&[json!({"user": "ask me"}), line, end()]);
        let out = f.run(&[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra}: {stderr}");
        assert!(
            stderr.contains(&format!("script.jsonl:2: {wanted}")),
            "{extra}: {stderr}"
        );
        assert!(!f.journal.exists(), "{extra}: nothing journaled");
    }
}

/// A tool call of a rebuilt body: its id, tool name and arguments.
type BodyCall = (String, String, Value);
/// A tool result of a rebuilt body: its call's id and the text the model reads.
type BodyResult = (String, String);

/// The tool calls and results of a rebuilt body, in its format's shape: (call id, tool name,
/// arguments) and (call id, the text the model reads).
fn calls_and_results(format: Format, body: &Value) -> (Vec<BodyCall>, Vec<BodyResult>) {
    let s = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("not a string: {v}"))
            .to_owned()
    };
    let parse = |v: &Value| serde_json::from_str::<Value>(v.as_str().unwrap()).unwrap();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    match format {
        Format::OpenAiChat => {
            for m in body["messages"].as_array().unwrap() {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let f = &c["function"];
                    calls.push((s(&c["id"]), s(&f["name"]), parse(&f["arguments"])));
                }
                if m["role"] == "tool" {
                    results.push((s(&m["tool_call_id"]), s(&m["content"])));
                }
            }
        }
        Format::OpenAiResponses => {
            for item in body["input"].as_array().unwrap() {
                match item["type"].as_str() {
                    Some("function_call") => calls.push((
                        s(&item["call_id"]),
                        s(&item["name"]),
                        parse(&item["arguments"]),
                    )),
                    Some("function_call_output") => {
                        results.push((s(&item["call_id"]), s(&item["output"])))
                    }
                    _ => {}
                }
            }
        }
        Format::Anthropic => {
            for m in body["messages"].as_array().unwrap() {
                for b in m["content"].as_array().into_iter().flatten() {
                    match b["type"].as_str() {
                        Some("tool_use") => {
                            calls.push((s(&b["id"]), s(&b["name"]), b["input"].clone()))
                        }
                        Some("tool_result") => {
                            results.push((s(&b["tool_use_id"]), s(&b["content"])))
                        }
                        _ => {}
                    }
                }
            }
        }
        Format::Gemini => {
            for c in body["contents"].as_array().unwrap() {
                for p in c["parts"].as_array().unwrap() {
                    if let Some(f) = p.get("functionCall") {
                        calls.push((s(&f["id"]), s(&f["name"]), f["args"].clone()));
                    }
                    if let Some(f) = p.get("functionResponse") {
                        results.push((s(&f["id"]), s(&f["response"]["content"])));
                    }
                }
            }
        }
    }
    (calls, results)
}

#[test]
fn every_rebuilt_history_validates_and_carries_the_questions_and_their_answers() {
    let pick = json!({
        "question": "Which release should I cut?",
        "options": [{"label": "patch"}, {"label": "minor"}],
        "free_text": true
    });
    let refuse = json!({"question": "May I delete the old tags?"});
    let f = fixture(&[
        json!({"user": "cut a release"}),
        asks(
            &[("q1", pick.clone()), ("q2", refuse.clone())],
            Some(json!({
                "q1": {"choice": ["minor"], "text": "and tag it"},
                "q2": "decline"
            })),
        ),
        end(),
    ]);
    f.run_ok(&[]);
    // What `recover rebuild DIR --format F` prints (recover/cli/src/main.rs): the same recovery and
    // rebuild, through the library, since this package's tests cannot run recover's binary.
    let recovered = recover::Recovery::of(&f.journal)
        .write(true)
        .run()
        .unwrap_or_else(|e| panic!("{e:?}"));
    for format in [
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Gemini,
    ] {
        let name = format.as_str();
        let rebuilt = recover::rebuild_body(&recovered.analysis, format)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = format!("{}\n", rebuilt.body.to_json_pretty());
        let body: Value = serde_json::from_str(&printed).unwrap();
        validate(format, &body).unwrap_or_else(|v| panic!("{name}: {v:?}"));
        let (calls, results) = calls_and_results(format, &body);
        assert_eq!(calls.len(), 2, "{name}: {calls:?}");
        assert_eq!(results.len(), 2, "{name}: {results:?}");
        for ((id, tool, args), wanted) in calls.iter().zip([&pick, &refuse]) {
            assert_eq!(tool, "ask", "{name}");
            assert_eq!(args, wanted, "{name}: the question, as the model asked it");
            assert_eq!(
                results.iter().filter(|(r, _)| r == id).count(),
                1,
                "{name}: one result for {id}"
            );
        }
        let text_of = |i: usize| {
            let id = &calls[i].0;
            results.iter().find(|(r, _)| r == id).unwrap().1.clone()
        };
        assert_eq!(
            text_of(0),
            "The user chose: minor\nThe user wrote: and tag it",
            "{name}"
        );
        assert!(
            text_of(1).starts_with("QUESTION_DECLINED: the user declined to answer"),
            "{name}: {}",
            text_of(1)
        );
    }
}
