//! `tooljournal resume --prompt` on a finished session: the prompt is a new turn, never
//! dropped. The journal says so (`session/reopen` right after the `session/close`, schema 9),
//! the model is sent the whole session so far and the new prompt, and `recover` reads the
//! reopened journal as any other. Without a prompt there is nothing to do, and it says so.

mod common;

use common::models::*;
use mockllm::{Answer, Format};
use runtime::event::Event;

/// The user and assistant texts of an OpenAI Chat request body, in order.
fn conversation(body: &serde_json::Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

#[test]
fn a_finished_session_given_a_prompt_goes_on_with_a_new_turn() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    case.server
        .push(format, Answer::text("First answer.").into());
    let out = case.run(format, &["first question"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_eq!(kinds(&case.events()).last(), Some(&"session/close"));

    // Without a prompt: nothing to do, said, nothing written, nothing sent.
    let before = case.events().len();
    let out = case.resume(format, None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let said = text(&out.stdout);
    assert!(
        said.contains("already finished") && said.contains("--prompt"),
        "{}",
        shown(&out)
    );
    assert_eq!(case.events().len(), before, "nothing written");
    assert_eq!(case.requests().len(), 1, "nothing sent");

    // With one: a new turn, the model given the session so far.
    case.server
        .push(format, Answer::text("Second answer.").into());
    let out = case.resume(format, Some("second question"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(
        text(&out.stdout).contains("Second answer."),
        "{}",
        shown(&out)
    );
    let requests = case.requests();
    assert_eq!(requests.len(), 2, "{}", shown(&out));
    assert_eq!(
        conversation(&requests[1].body),
        [
            pair("user", "first question"),
            pair("assistant", "First answer."),
            pair("user", "second question"),
        ]
    );
    let events = case.events();
    let kinds = kinds(&events);
    let reopened: Vec<usize> = (0..kinds.len())
        .filter(|&i| kinds[i] == "session/reopen")
        .collect();
    assert_eq!(reopened.len(), 1, "{kinds:?}");
    assert_eq!(kinds[reopened[0] - 1], "session/close", "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"session/close"), "{kinds:?}");
    let turns: Vec<(u32, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::TurnStart { turn, user_text } => Some((*turn, user_text.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [(1, "first question"), (2, "second question")]);

    // `recover` reads the reopened journal: clean, finished, nothing to append.
    let recovered = recover::session::recover(case.journal(), true).expect("readable");
    assert!(recovered.analysis.replay.closed);
    assert!(!recovered.appended);
    assert_eq!(recovered.analysis.replay.turns.len(), 2);
    assert_eq!(case.events().len(), events.len());

    // And again: a finished session can be reopened as often as it is given prompts.
    case.server
        .push(format, Answer::text("Third answer.").into());
    let out = case.resume(format, Some("third question"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let kinds_now = common::models::kinds(&case.events())
        .into_iter()
        .filter(|k| *k == "session/reopen")
        .count();
    assert_eq!(kinds_now, 2);
    assert_eq!(case.requests().len(), 3);
}
