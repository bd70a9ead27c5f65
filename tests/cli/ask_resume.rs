//! SIGKILL while the model's `ask` question waits for an answer, then `tooljournal resume`:
//! recovery withdraws the question (never answered by default), the model is told so in the
//! ask's result, and the resumed turn's user text says which question was withdrawn and which
//! file the conversation wrote has changed since; every rebuilt history validates with the
//! question in it.

use crate::common;

use common::models::*;
use mockllm::{Answer, Format};
use runtime::event::{Classification, Event};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const FORMAT: Format = Format::OpenAiChat;
const QUESTION: &str = "Which colour should the notes be?";

/// The ask's result after recovery, written out here.
const WITHDRAWN: &str = "TOOL_NOT_STARTED: the session stopped while this question waited for \
an answer, so it was withdrawn unanswered: nobody answered it and nothing was taken as an \
answer; ask again if you still need the answer";

/// Everything the child wrote on stderr so far, filled by a reader thread.
fn collect_stderr(child: &mut Child) -> Arc<Mutex<Vec<u8>>> {
    let mut stderr = child.stderr.take().expect("piped stderr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    seen
}

/// Waits until `done` holds, killing the child and failing with `what` after [`WAIT`].
fn wait_until(child: &mut Child, what: &str, shown: impl Fn() -> String, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} not seen within {WAIT:?}: {}", shown());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The events of a journal a live process is writing: as many whole records as there are.
fn events_so_far(dir: &Path) -> Vec<Event> {
    let Ok(storage) = journal::FsStorage::open(dir) else {
        return Vec::new();
    };
    let Ok(reader) = journal::Reader::open(Arc::new(storage), journal::Limits::default()) else {
        return Vec::new();
    };
    reader
        .map_while(|r| r.ok())
        .filter_map(|r| r.decode::<runtime::event::Record>().ok())
        .map(|r| r.event)
        .collect()
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_question_pending_at_a_sigkill_is_withdrawn_and_the_resume_says_what_changed() {
    let case = Case::new();
    let write = json!({"path": "notes.txt", "content": "first draft\n"}).to_string();
    let ask = json!({"question": QUESTION, "options": [
        {"label": "blue", "description": "calm"},
        {"label": "red", "description": "loud"},
    ]})
    .to_string();
    case.server.push(
        FORMAT,
        Answer::calls(vec![("call_w1", "write", &write)]).into(),
    );
    case.server
        .push(FORMAT, Answer::calls(vec![("call_q1", "ask", &ask)]).into());

    let mut child = case
        .command(FORMAT)
        .args(case.run_args(FORMAT, &["write the notes, then ask me"]))
        .args(["--approve", "ask"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tooljournal starts");
    let stderr = collect_stderr(&mut child);
    let said = || String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    // The write asks first (`--approve ask`): the person allows it.
    wait_until(&mut child, "the write's approval", said, || {
        said().contains("call_w1")
    });
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(b"y\n").expect("the answer is typed");
    // Then the model's question waits: on stderr, and journaled.
    wait_until(&mut child, "the question", said, || {
        let s = said();
        s.contains("call_q1") && s.contains(QUESTION)
    });
    // The runtime must make `ask/question` durable before it asks: a person may take minutes,
    // and a crash meanwhile must find the question pending, not lose it.
    let journal_dir = case.journal();
    wait_until(&mut child, "ask/question in the journal", said, || {
        events_so_far(&journal_dir)
            .iter()
            .any(|e| matches!(e, Event::AskQuestion { call, .. } if call.call_id == "call_q1"))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL delivered");
    let status = child.wait().expect("the child is reaped");
    assert!(!status.success(), "killed, not finished: {status:?}");
    drop(stdin);
    let notes = case.workspace().join("notes.txt");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first draft\n");
    // Someone edits the file the session wrote before it is resumed.
    std::fs::write(&notes, "edited by hand\n").unwrap();

    case.server
        .push(FORMAT, Answer::text("Understood; I will ask again.").into());
    let before = case.requests().len();
    let out = case
        .command(FORMAT)
        .args(["resume", "--journal"])
        .arg(case.journal())
        .args(["--model", &spec(FORMAT), "--base-url"])
        .arg(case.server.base_url(FORMAT))
        .args(["--prompt", "go on"])
        .stdin(Stdio::null())
        .output()
        .expect("tooljournal resume runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        common::models::shown(&out)
    );

    // The journal: withdrawn by recovery, not started, never answered.
    let events = case.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::AskCancelled { call, reason }
            if call.call_id == "call_q1" && reason == "session interrupted")),
        "{:?}",
        kinds(&events)
    );
    // No reply anywhere; the only yes/no answer is the person's "y" to the write.
    assert!(
        !events.iter().any(|e| matches!(e, Event::AskReplied { .. })),
        "nobody answered: {:?}",
        kinds(&events)
    );
    let answered: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AskAnswered { call, .. } => Some(call.call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["call_w1"]);
    let recovered = events
        .iter()
        .find_map(|e| match e {
            Event::Recovery(r) => r.calls.iter().find(|c| c.call.call_id == "call_q1"),
            _ => None,
        })
        .expect("the recovery names the ask");
    assert_eq!(
        recovered.classification,
        Some(Classification::ToolNotStarted)
    );
    assert_eq!(recovered.result.content, WITHDRAWN);

    // What the model was sent after the resume.
    let requests = case.requests().split_off(before);
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let body = &requests[0].body;
    assert_eq!(requests[0].violation, None, "{body:#}");
    assert_eq!(
        results_for(FORMAT, body, "call_q1", "ask"),
        [serde_json::to_string(WITHDRAWN).unwrap()],
        "{body:#}"
    );
    let users = user_texts(body);
    let last = users.last().expect("the resumed turn's user message");
    for wanted in [
        "ask call_q1",
        QUESTION,
        "withdrew it unanswered",
        "notes.txt (changed)",
    ] {
        assert!(last.contains(wanted), "{wanted:?} in {last:?}");
    }
    assert!(
        last.ends_with("\n\ngo on"),
        "the prompt follows the note: {last:?}"
    );
    // The note is journaled with the turn, so every rebuilt history has it.
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::TurnStart { user_text, .. } if user_text == last)));

    // Every rebuilt history validates, with the question, its withdrawal and the note.
    let recovered = recover::Recovery::of(case.journal())
        .run()
        .expect("the journal recovers");
    for format in FORMATS {
        let rebuilt = recover::rebuild_body(&recovered.analysis, format)
            .unwrap_or_else(|e| panic!("{format}: {e}"));
        let body = rebuilt.body.value();
        recover::providers::validate(format, &body)
            .unwrap_or_else(|v| panic!("{format}: {v:?}: {body:#}"));
        let text = body.to_string();
        for wanted in [
            QUESTION,
            "ask again if you still need the answer",
            "notes.txt (changed)",
        ] {
            assert!(text.contains(wanted), "{format}: {wanted:?} in {body:#}");
        }
    }
}
