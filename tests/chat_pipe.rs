//! `tooljournal chat` scripted: its input a pipe, not a terminal. Messages and the answers to
//! approvals come from the one input, line by line in order: the line after a message that
//! leads to an approval answers it, and is never sent to the model as a message.

mod common;

use common::models::*;
use mockllm::{Answer, Format};
use runtime::event::{AskAnswer, Event};
use std::io::Write;
use std::process::Stdio;

/// `tooljournal chat` on the mock for `format`, `input` written to its stdin (then closed);
/// its output once it ended.
fn chat_piped(case: &Case, format: Format, input: &str) -> std::process::Output {
    let mut child = case
        .command(format)
        .args(["chat", "--model", &spec(format), "--base-url"])
        .arg(case.server.base_url(format))
        .arg("--workspace")
        .arg(case.workspace())
        .arg("--journal")
        .arg(case.journal())
        .arg("--config")
        .arg(case.config())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chat starts");
    // All at once, before anything is asked: the way a pipe or a here-doc gives it.
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(input.as_bytes()).expect("input written");
    drop(stdin);
    child.wait_with_output().expect("chat ends")
}

/// The user messages of an OpenAI Chat request body.
fn user_messages(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn piped_lines_answer_the_approval_then_go_on_as_messages_in_order() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let server = &case.server;
    let args = r#"{"path":"note.txt","content":"approved\n"}"#;
    server.push(
        format,
        Answer::calls(vec![("call_c1", "write", args)])
            .with_text("Writing the note now.")
            .into(),
    );
    server.push(format, Answer::text("The note is written.").into());
    server.push(format, Answer::text("You are welcome.").into());

    let out = chat_piped(&case, format, "write a note\ny\nthanks\n");
    let said = shown(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(!said.contains("end of input"), "{said}");
    assert_eq!(
        std::fs::read_to_string(case.workspace().join("note.txt"))
            .ok()
            .as_deref(),
        Some("approved\n"),
        "the piped `y` approved the write: {said}"
    );
    let events = case.events();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::AskAnswered {
                answer: AskAnswer::AllowedOnce,
                ..
            }
        )),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(kinds(&events).last(), Some(&"session/close"));

    // Three requests: the message, the call's result, the next message; `y` is in none.
    let requests = case.requests();
    assert_eq!(requests.len(), 3, "{said}");
    assert_eq!(user_messages(&requests[0].body), ["write a note"]);
    assert_eq!(user_messages(&requests[1].body), ["write a note"]);
    assert_eq!(user_messages(&requests[2].body), ["write a note", "thanks"]);
    assert!(said.contains("You are welcome."), "{said}");
}

#[test]
fn a_piped_line_answers_the_models_question_and_the_next_is_a_message() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let server = &case.server;
    let args = serde_json::json!({
        "question": "Which database should I set up?",
        "options": [{"label": "sqlite"}, {"label": "postgres"}],
    })
    .to_string();
    server.push(
        format,
        Answer::calls(vec![("call_q1", "ask", args.as_str())])
            .with_text("A question first.")
            .into(),
    );
    server.push(format, Answer::text("Postgres it is.").into());
    server.push(format, Answer::text("Done.").into());

    let out = chat_piped(&case, format, "set up a database\n2\nthanks\n");
    let said = shown(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("call_q1 asks: Which database"), "{said}");
    let replies: Vec<runtime::event::Reply> = case
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::AskReplied { call, reply } if call.call_id == "call_q1" => Some(reply),
            _ => None,
        })
        .collect();
    assert_eq!(
        replies,
        [runtime::event::Reply::Answered(runtime::event::Answer {
            choice: vec!["postgres".into()],
            text: None,
        })],
        "{said}"
    );
    let requests = case.requests();
    assert_eq!(requests.len(), 3, "{said}");
    assert_eq!(
        user_messages(&requests[2].body),
        ["set up a database", "thanks"]
    );
}
