//! The `ask` tool's questions answered in `tooljournal chat` through a pseudo-terminal, as a
//! person would: the mock model asks, the menu shows the question and its options, keys answer
//! it (arrows, space, a typed number, the own-words entry, Esc, Ctrl-C), and the journal and the
//! next request to the model say what was answered, declined or withdrawn.

use crate::common;

use common::models::*;
use expectrl::process::unix::WaitStatus;
use expectrl::{ControlCode, Eof, Expect};
use mockllm::{Answer as Reply, Format};
use runtime::event::{Answer, CommittedResult, Event, Question, Reply as AskReply, TurnOutcome};
use runtime::ErrorCode;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DOWN: &str = "\x1b[B";
const ENTER: &str = "\r";
const ESC: &str = "\x1b";
const BACKSPACE: &str = "\x7f";

/// Everything the test read from and wrote to the terminal, for a failure's message.
#[derive(Clone, Default)]
struct Transcript(Arc<Mutex<Vec<u8>>>);

impl Write for Transcript {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Transcript {
    /// The last few thousand characters, escapes shown.
    fn tail(&self) -> String {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let text = String::from_utf8_lossy(&all).into_owned();
        let skip = text.chars().count().saturating_sub(4000);
        text.chars().skip(skip).collect()
    }
}

type Logged = expectrl::Session<
    expectrl::session::OsProcess,
    expectrl::stream::log::LogStream<expectrl::session::OsStream, Transcript>,
>;

/// `tooljournal chat` on a pseudo-terminal, with what it showed kept for failure messages.
struct Chat {
    pty: Logged,
    transcript: Transcript,
}

impl Chat {
    /// `tooljournal chat` on the mock for `format`, at its first prompt.
    fn start(case: &Case, format: Format) -> Chat {
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
        let pty = expectrl::Session::spawn(command).expect("chat starts on a pty");
        let transcript = Transcript::default();
        let mut pty = expectrl::session::log(pty, transcript.clone()).expect("a logged pty");
        // Generous for a loaded machine, and bounded: a hung chat fails the test.
        pty.set_expect_timeout(Some(Duration::from_secs(30)));
        let mut chat = Chat { pty, transcript };
        chat.see("you> ");
        chat
    }

    /// Waits for `text` on the terminal; fails with what was shown if it does not come.
    fn see(&mut self, text: &str) {
        if let Err(e) = self.pty.expect(text) {
            panic!(
                "waited for {text:?}: {e}\n--- the terminal's last output\n{}",
                self.transcript.tail()
            );
        }
    }

    fn keys(&mut self, keys: &str) {
        self.pty.send(keys).expect("keys sent");
    }

    fn line(&mut self, line: &str) {
        self.pty.send_line(line).expect("a line sent");
    }

    /// `/exit`, the session closed, the process gone with status 0.
    fn exit(mut self) {
        self.line("/exit");
        self.see("session closed");
        if let Err(e) = self.pty.expect(Eof) {
            panic!("no end: {e}\n{}", self.transcript.tail());
        }
        let status = self.pty.get_process().wait().expect("reaped");
        assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    }
}

/// The model's `ask` call `id` with `args`, then `then` once it has the result.
fn model_asks(case: &Case, format: Format, id: &str, args: serde_json::Value, then: &str) {
    let args = args.to_string();
    case.server.push(
        format,
        Reply::calls(vec![(id, "ask", args.as_str())])
            .with_text("A question first.")
            .into(),
    );
    case.server.push(format, Reply::text(then).into());
}

fn question_of(events: &[Event], id: &str) -> Question {
    events
        .iter()
        .find_map(|e| match e {
            Event::AskQuestion { call, question } if call.call_id == id => Some(question.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ask/question for {id}: {:?}", kinds(events)))
}

fn replies_of(events: &[Event], id: &str) -> Vec<AskReply> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::AskReplied { call, reply } if call.call_id == id => Some(reply.clone()),
            _ => None,
        })
        .collect()
}

fn committed(events: &[Event], id: &str) -> CommittedResult {
    events
        .iter()
        .find_map(|e| match e {
            Event::Committed { call, result, .. } if call.call_id == id => Some(result.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{id} was never committed: {:?}", kinds(events)))
}

/// What the last request to the model gave call `id` as its result.
fn result_sent(case: &Case, format: Format, id: &str) -> Vec<String> {
    let requests = case.requests();
    let last = requests.last().expect("the model was asked");
    assert_eq!(last.violation, None, "the mock refused the request");
    results_for(format, &last.body, id, "ask")
}

#[test]
fn arrow_keys_choose_an_option_and_the_model_gets_its_label() {
    let format = Format::Anthropic;
    let case = Case::new();
    let mut chat = Chat::start(&case, format);
    model_asks(
        &case,
        format,
        "call_q1",
        serde_json::json!({
            "question": "Which database should I set up?",
            "options": [
                {"label": "sqlite", "description": "a file beside the app"},
                {"label": "postgres", "description": "a server"},
                {"label": "none", "description": "keep it in memory"},
            ],
        }),
        "Postgres it is.",
    );
    chat.line("set up a database");
    chat.see("call_q1 asks: Which database should I set up?");
    chat.see("1) sqlite — a file beside the app");
    chat.see("2) postgres — a server");
    chat.see("3) none — keep it in memory");
    chat.see("(decline to answer)");
    chat.keys(DOWN);
    chat.keys(ENTER);
    chat.see("Postgres it is.");
    chat.see("you> ");
    chat.exit();

    let events = case.events();
    let question = question_of(&events, "call_q1");
    let labels: Vec<&str> = question.options.iter().map(|o| o.label.as_str()).collect();
    assert_eq!(labels, ["sqlite", "postgres", "none"]);
    assert_eq!(question.options[1].description, "a server");
    assert!(!question.multiple && !question.free_text);
    assert_eq!(
        replies_of(&events, "call_q1"),
        vec![AskReply::Answered(Answer {
            choice: vec!["postgres".into()],
            text: None,
        })]
    );
    let result = committed(&events, "call_q1");
    assert_eq!((result.code, result.is_error), (None, false));
    assert_eq!(result.content, "The user chose: postgres");
    let sent = result_sent(&case, format, "call_q1");
    assert!(
        sent.len() == 1 && sent[0].contains("The user chose: postgres"),
        "{sent:?}"
    );
}

/// A key pressed while the model still streams (here `3`, which at the menu would leave only
/// option 3 to choose) is dropped when the question is shown: the answer is what is pressed
/// at the menu.
#[test]
fn keys_typed_before_the_question_is_shown_do_not_answer_it() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let mut chat = Chat::start(&case, format);
    let args = serde_json::json!({
        "question": "Which port?",
        "options": [{"label": "80"}, {"label": "8080"}, {"label": "443"}],
    })
    .to_string();
    // The text first, the call a while later: time to type ahead.
    case.server.push(
        format,
        Reply::calls(vec![("call_q6", "ask", args.as_str())])
            .with_text("Let me ask about the port.")
            .chunk_delay_ms(300)
            .into(),
    );
    case.server.push(format, Reply::text("Port chosen.").into());
    chat.line("serve it");
    chat.see("Let me ask about the port.");
    chat.keys("3");
    chat.see("call_q6 asks: Which port?");
    chat.see("(decline to answer)");
    chat.keys(DOWN);
    chat.keys(ENTER);
    chat.see("Port chosen.");
    chat.see("you> ");
    chat.exit();
    assert_eq!(
        replies_of(&case.events(), "call_q6"),
        vec![AskReply::Answered(Answer {
            choice: vec!["8080".into()],
            text: None,
        })]
    );
}

#[test]
fn several_options_marked_with_space_and_a_number_and_own_words_typed() {
    let format = Format::OpenAiResponses;
    let case = Case::new();
    let mut chat = Chat::start(&case, format);
    model_asks(
        &case,
        format,
        "call_q2",
        serde_json::json!({
            "question": "What should the release include?",
            "options": [
                {"label": "tests", "description": "unit and end-to-end"},
                {"label": "docs", "description": "the README"},
                {"label": "benchmarks", "description": "timings"},
            ],
            "multiple": true,
            "free_text": true,
        }),
        "Tests and benchmarks, kept short.",
    );
    chat.line("plan the release");
    chat.see("call_q2 asks: What should the release include?");
    chat.see("(answer in my own words)");
    chat.see("(decline to answer)");
    // Space marks the first; typing 3 leaves only the third, space marks it; the filter
    // cleared, "words" leaves only the own-words entry, marked; enter submits.
    chat.keys(" ");
    chat.keys("3");
    chat.keys(" ");
    chat.keys(BACKSPACE);
    chat.keys("words");
    chat.keys(" ");
    chat.keys(ENTER);
    chat.see("In your own words");
    chat.keys("keep them short");
    chat.keys(ENTER);
    chat.see("Tests and benchmarks, kept short.");
    chat.see("you> ");
    chat.exit();

    let events = case.events();
    let question = question_of(&events, "call_q2");
    assert!(question.multiple && question.free_text);
    let answer = Answer {
        choice: vec!["tests".into(), "benchmarks".into()],
        text: Some("keep them short".into()),
    };
    assert_eq!(
        replies_of(&events, "call_q2"),
        vec![AskReply::Answered(answer)]
    );
    let wanted = "The user chose:\n- tests\n- benchmarks\nThe user wrote: keep them short";
    assert_eq!(committed(&events, "call_q2").content, wanted);
    let sent = result_sent(&case, format, "call_q2");
    // As JSON text: the newline escaped.
    assert!(
        sent.len() == 1 && sent[0].contains(&wanted.replace('\n', "\\n")),
        "{sent:?}"
    );
}

#[test]
fn ctrl_c_at_the_menu_stops_the_turn_and_the_question_is_withdrawn_unanswered() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let mut chat = Chat::start(&case, format);
    model_asks(
        &case,
        format,
        "call_q3",
        serde_json::json!({
            "question": "Delete the old branch?",
            "options": [{"label": "yes"}, {"label": "no"}],
        }),
        "NOT-SENT: the turn was stopped before this",
    );
    chat.line("tidy up");
    chat.see("call_q3 asks: Delete the old branch?");
    chat.see("(decline to answer)");
    chat.keys(DOWN);
    chat.pty.send(ControlCode::EndOfText).expect("Ctrl-C");
    chat.see("stopped");
    chat.see("you> ");
    chat.exit();

    let events = case.events();
    assert_eq!(replies_of(&events, "call_q3"), vec![], "never an answer");
    let withdrawn: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AskCancelled { call, reason } if call.call_id == "call_q3" => {
                Some(reason.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(withdrawn, ["the batch was stopped"], "{:?}", kinds(&events));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::CancelledBeforeStart { call, .. } if call.call_id == "call_q3"
    )));
    let result = committed(&events, "call_q3");
    assert_eq!(result.code, Some(ErrorCode::AbortedBeforeDispatch));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::TurnEnd {
            outcome: TurnOutcome::Cancelled,
            ..
        }
    )));
    // The stopped turn asked the model nothing more.
    assert_eq!(case.requests().len(), 1);
}

#[test]
fn esc_at_a_question_without_options_declines_it() {
    let format = Format::Gemini;
    let case = Case::new();
    let mut chat = Chat::start(&case, format);
    model_asks(
        &case,
        format,
        "call_q4",
        serde_json::json!({"question": "What should the project be called?"}),
        "Then I will pick a name myself.",
    );
    chat.line("name the project");
    chat.see("call_q4 asks: What should the project be called?");
    chat.see("Your answer:");
    // Empty input is no answer: the prompt stays.
    chat.keys(ENTER);
    chat.see("type an answer");
    chat.keys(ESC);
    chat.see("Then I will pick a name myself.");
    chat.see("you> ");
    chat.exit();

    let events = case.events();
    assert!(question_of(&events, "call_q4").free_text);
    assert_eq!(
        replies_of(&events, "call_q4"),
        vec![AskReply::Declined { text: None }]
    );
    let result = committed(&events, "call_q4");
    assert_eq!(result.code, Some(ErrorCode::QuestionDeclined));
    let sent = result_sent(&case, format, "call_q4");
    assert!(
        sent.len() == 1 && sent[0].contains("QUESTION_DECLINED"),
        "{sent:?}"
    );
}

/// `question_timeout_ms` from the configuration file: the question expires while its menu is
/// up; the model is told it went unanswered, and the chat prompt waits until the person ends
/// the stale menu, whose answer is not used.
#[test]
fn a_question_expires_by_the_configured_timeout_and_its_late_answer_is_not_used() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    std::fs::write(
        case.config(),
        "question_timeout_ms = 1500\n\
         [model]\nbackoff_base_ms = 10\nbackoff_max_ms = 200\nrequest_timeout_ms = 10000\n",
    )
    .expect("the configuration");
    let mut chat = Chat::start(&case, format);
    model_asks(
        &case,
        format,
        "call_q5",
        serde_json::json!({
            "question": "Ship it now?",
            "options": [{"label": "ship"}, {"label": "wait"}],
        }),
        "Nobody answered; I will wait.",
    );
    chat.line("release");
    chat.see("call_q5 asks: Ship it now?");
    chat.see("(decline to answer)");
    // Nothing pressed: the question expires, the turn goes on without an answer.
    chat.see("Nobody answered; I will wait.");
    chat.see("a withdrawn question is still on the screen");
    chat.keys(ENTER);
    chat.see("that answer was not used");
    chat.see("you> ");
    chat.exit();

    let events = case.events();
    assert_eq!(
        replies_of(&events, "call_q5"),
        vec![],
        "a late answer is not one"
    );
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::AskExpired { call } if call.call_id == "call_q5"
        )),
        "{:?}",
        kinds(&events)
    );
    let result = committed(&events, "call_q5");
    assert_eq!(result.code, Some(ErrorCode::QuestionUnanswered));
    let sent = result_sent(&case, format, "call_q5");
    assert!(
        sent.len() == 1 && sent[0].contains("QUESTION_UNANSWERED"),
        "{sent:?}"
    );
}

/// What a person sees at the terminal is what the bytes say: a right-to-left override in the
/// model's streamed text, in a question and in an option's label is shown as `\u{202E}`, never
/// as itself; the answer and the journal keep the label's bytes.
#[test]
fn hidden_characters_show_as_escapes_in_chat_and_its_menu() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let mut chat = Chat::start(&case, format);
    let args = serde_json::json!({
        "question": "Open report\u{202E}txt.exe?",
        "options": [
            {"label": "yes\u{2066}", "description": "it is a \u{200B}text file"},
            {"label": "no", "description": "leave it"},
        ],
    })
    .to_string();
    case.server.push(
        format,
        Reply::calls(vec![("call_b1", "ask", args.as_str())])
            .with_text("I found report\u{202E}txt.exe.")
            .into(),
    );
    case.server.push(format, Reply::text("Opened.").into());
    chat.line("look at the reports");
    chat.see("I found report\\u{202E}txt.exe.");
    chat.see("call_b1 asks: Open report\\u{202E}txt.exe?");
    chat.see("1) yes\\u{2066} — it is a \\u{200B}text file");
    chat.keys(ENTER);
    chat.see("Opened.");
    chat.see("you> ");
    let transcript = chat.transcript.clone();
    chat.exit();
    let shown = String::from_utf8_lossy(&transcript.0.lock().unwrap()).into_owned();
    for c in ['\u{202E}', '\u{2066}', '\u{200B}'] {
        assert!(
            !shown.contains(c),
            "the terminal showed U+{:04X} as itself:\n{}",
            c as u32,
            transcript.tail()
        );
    }
    let events = case.events();
    assert_eq!(
        replies_of(&events, "call_b1"),
        vec![AskReply::Answered(Answer {
            choice: vec!["yes\u{2066}".into()],
            text: None,
        })]
    );
}

/// `tooljournal chat` scripted: its input a pipe, not a terminal. Messages and the answers to
/// approvals come from the one input, line by line in order: the line after a message that
/// leads to an approval answers it, and is never sent to the model as a message.
mod pipe {
    use super::common::models::*;
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
}

/// A bash call that asks to leave the sandbox (`"unsandboxed": true`), in `chat`: the terminal
/// asks, naming the command and saying it runs unsandboxed, with no "always"; `y` runs it
/// outside (its write outside the workspace lands), `n` refuses it (nothing lands), and each
/// attempt's bound is journaled.
#[test]
fn an_escalation_is_asked_at_the_terminal_and_runs_outside_only_on_yes() {
    let format = Format::Anthropic;
    let case = Case::new();
    let outside = |n: u32| case.dir.path().join(format!("outside-{n}.txt"));
    let mut chat = Chat::start(&case, format);
    for (n, answer, then) in [(1, "y", "Written."), (2, "n", "Not written.")] {
        let args = serde_json::json!({
            "command": format!("echo {n} > {}", outside(n).display()),
            "unsandboxed": true,
        })
        .to_string();
        let id = format!("call_e{n}");
        case.server.push(
            format,
            Reply::calls(vec![(id.as_str(), "bash", args.as_str())]).into(),
        );
        case.server.push(format, Reply::text(then).into());
        chat.line("write it outside");
        chat.see("OUTSIDE the sandbox (workspace-write): unsandboxed");
        chat.see("allow, this once? [y]es / [n]o: ");
        chat.line(answer);
        chat.see(then);
        chat.see("you> ");
    }
    chat.exit();
    assert_eq!(std::fs::read_to_string(outside(1)).unwrap(), "1\n");
    assert!(!outside(2).exists());
    let events = case.events();
    let refused = committed(&events, "call_e2");
    assert_eq!(
        refused.code,
        Some(ErrorCode::PolicyDenied),
        "{}",
        refused.content
    );
    let escalated = events.iter().find_map(|e| match e {
        Event::Started(s) if s.call.call_id == "call_e1" => {
            s.evidence.iter().find_map(|ev| match ev {
                runtime::event::Evidence::Sandbox(b) => Some(b.clone()),
                _ => None,
            })
        }
        _ => None,
    });
    let escalated = escalated.expect("call_e1 started with its bound");
    assert!(
        escalated.escalated && !escalated.confines(),
        "{escalated:?}"
    );
}
