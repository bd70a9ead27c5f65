//! `tooljournal chat` driven through a pseudo-terminal, as a person would: a prompt, the
//! model's text streamed, an approval asked and answered `y`, a Ctrl-C in the middle of a
//! stream (the turn is journaled cancelled), `/exit` (the session is closed).

use crate::common;

use common::models::*;
use expectrl::{ControlCode, Eof, Expect};
use mockllm::{Answer, Format};
use runtime::event::{AskAnswer, Event, TurnOutcome};
use std::time::Duration;

/// `tooljournal chat` on the mock for `format`, at its first prompt.
fn start(case: &Case, format: Format) -> expectrl::session::OsSession {
    let mut command = case.command(format);
    command
        .env("TERM", "xterm")
        .args(["chat", "--model", &spec(format), "--base-url"])
        .arg(case.server.base_url(format))
        .arg("--workspace")
        .arg(case.workspace())
        .arg("--journal")
        .arg(case.journal())
        .arg("--config")
        .arg(case.config());
    let mut chat = expectrl::Session::spawn(command).expect("chat starts on a pty");
    chat.set_expect_timeout(Some(Duration::from_secs(30)));
    chat.expect("you> ").expect("the prompt");
    chat
}

fn exited_0(chat: &expectrl::session::OsSession) {
    let status = chat.get_process().wait().expect("reaped");
    assert!(
        matches!(status, expectrl::process::unix::WaitStatus::Exited(_, 0)),
        "{status:?}"
    );
}

#[test]
fn a_chat_with_an_approval_a_stop_and_an_exit() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let server = &case.server;
    let mut chat = start(&case, format);

    // A call that changes the workspace asks first (the default `--approve ask`).
    let args = r#"{"path":"note.txt","content":"approved\n"}"#;
    server.push(
        format,
        Answer::calls(vec![("call_c1", "write", args)])
            .with_text("Writing the note now.")
            .into(),
    );
    server.push(format, Answer::text("The note is written.").into());
    chat.send_line("write a note").expect("typed");
    chat.expect("Writing the note now.").expect("streamed text");
    chat.expect("allow?").expect("the approval question");
    assert!(
        !case.workspace().join("note.txt").exists(),
        "nothing runs before the answer"
    );
    chat.send_line("y").expect("answered");
    chat.expect("The note is written.")
        .expect("the final answer");
    chat.expect("you> ").expect("the prompt again");
    assert_eq!(
        std::fs::read_to_string(case.workspace().join("note.txt"))
            .ok()
            .as_deref(),
        Some("approved\n")
    );

    // Ctrl-C while the model streams: the turn stops, the chat goes on.
    server.push(
        format,
        Answer::text("Once upon a time, STREAMING-SLOWLY")
            .hang_after_text()
            .into(),
    );
    chat.send_line("tell me a story").expect("typed");
    chat.expect("STREAMING-SLOWLY").expect("the text so far");
    chat.send(ControlCode::EndOfText).expect("Ctrl-C");
    chat.expect("stopped").expect("the turn is stopped");
    chat.expect("you> ").expect("the prompt after the stop");

    chat.send_line("/exit").expect("typed");
    chat.expect("session closed").expect("the session closes");
    chat.expect(Eof).expect("the chat ends");
    exited_0(&chat);

    let events = case.events();
    let answered = events.iter().any(|e| {
        matches!(
            e,
            Event::AskAnswered {
                answer: AskAnswer::AllowedOnce,
                ..
            }
        )
    });
    assert!(answered, "{:?}", kinds(&events));
    let outcomes: Vec<&TurnOutcome> = events
        .iter()
        .filter_map(|e| match e {
            Event::TurnEnd { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![&TurnOutcome::Completed, &TurnOutcome::Cancelled],
        "{:?}",
        kinds(&events)
    );
    assert_eq!(kinds(&events).last(), Some(&"session/close"));
}

/// Two Ctrl-C within a second, the first while the model streams: the turn stops and the
/// session ends, closed.
#[test]
fn a_double_ctrl_c_ends_the_session() {
    let format = Format::Gemini;
    let case = Case::new();
    let server = &case.server;
    let mut chat = start(&case, format);
    server.push(
        format,
        Answer::text("An endless answer HANGING-HERE")
            .hang_after_text()
            .into(),
    );
    chat.send_line("go on forever").expect("typed");
    chat.expect("HANGING-HERE").expect("the text so far");
    chat.send(ControlCode::EndOfText).expect("Ctrl-C");
    // The first press stops the turn; the second, within the second, ends the session.
    chat.expect("stopped").expect("the turn is stopped");
    chat.expect("you> ").expect("the prompt after the stop");
    chat.send(ControlCode::EndOfText).expect("Ctrl-C again");
    chat.expect("session closed").expect("the session closes");
    chat.expect(Eof).expect("the chat ends");
    exited_0(&chat);
    let events = case.events();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::TurnEnd {
                outcome: TurnOutcome::Cancelled,
                ..
            }
        )),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(kinds(&events).last(), Some(&"session/close"));
}
