//! Limits on what a provider can make a run hold or wait for, through the binary against the
//! loopback mock: one event and one response bounded in bytes (`[model] event_bytes_max`,
//! `response_bytes_max`), an attempt bounded in time (`attempt_timeout_ms`, retried once), and
//! an answer with more calls than the runtime runs journaled and answered, not dropped.

use crate::common;

use common::models::*;
use common::recover_bin::recover_bin;
use mockllm::{Answer, Format, Reply};
use runtime::event::{Event, LlmAttemptFailed, TurnOutcome};
use runtime::ErrorCode;
use serde_json::json;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `llm/attempt-failed` events of `events`, in order.
fn failed_attempts(events: &[Event]) -> Vec<LlmAttemptFailed> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::LlmAttemptFailed(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

/// Whether the session's (one) turn ended failed with a message holding `needle`.
fn turn_failed_with(events: &[Event], needle: &str) -> bool {
    events.iter().any(|e| {
        matches!(e, Event::TurnEnd { outcome: TurnOutcome::Failed { message }, .. }
            if message.contains(needle))
    })
}

/// The attempt failed once, naming `key`; it was not retried, the turn ended failed, and the
/// run exits 1 saying how the session goes on.
fn assert_refused_naming(case: &Case, out: &Output, key: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", shown(out));
    assert!(
        text(&out.stderr).contains("tooljournal resume --journal"),
        "{}",
        shown(out)
    );
    let named = format!("[model] {key}");
    assert!(text(&out.stderr).contains(&named), "{}", shown(out));
    assert_eq!(case.requests().len(), 1, "not retried: {}", shown(out));
    let events = case.events();
    let failed = failed_attempts(&events);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].message.contains(&named), "{failed:?}");
    assert!(!failed[0].retry, "{failed:?}");
    assert!(turn_failed_with(&events, &named));
}

/// One event longer than `event_bytes_max`, as one long line and as many `data:` lines, fails
/// its attempt naming the limit; nothing after it is read.
#[test]
fn an_event_past_event_bytes_max_fails_the_attempt_naming_the_limit() {
    let format = Format::OpenAiChat;
    // One line of 1 MiB.
    let case = Case::new();
    case.write_config("event_bytes_max = 65536");
    case.server.push(
        format,
        Reply::LongEvent {
            head: r#"data: {"choices": [{"index": 0, "delta": {"content": ""#.into(),
            fill_bytes: 1 << 20,
            tail: "\"}}]}\n\ndata: [DONE]\n\n".into(),
        },
    );
    let out = case.run(format, &["hi"]);
    assert_refused_naming(&case, &out, "event_bytes_max");

    // Many short `data:` lines of one event (the SSE parser would join them), in pieces whose
    // line ends fall between `\r` and `\n`.
    let case = Case::new();
    case.write_config("event_bytes_max = 65536");
    let line = format!("data: {}\r\n", "x".repeat(1000));
    let event: String = line.repeat(100);
    let bytes = event.into_bytes();
    let chunks: Vec<Vec<u8>> = bytes
        .split_inclusive(|&b| b == b'\r')
        .map(<[u8]>::to_vec)
        .collect();
    case.server.push(format, Reply::Recorded { chunks });
    let out = case.run(format, &["hi"]);
    assert_refused_naming(&case, &out, "event_bytes_max");
}

/// A response whose events are each small but together pass `response_bytes_max` fails its
/// attempt naming the limit.
#[test]
fn a_response_past_response_bytes_max_fails_the_attempt_naming_the_limit() {
    let format = Format::Anthropic;
    let case = Case::new();
    case.write_config("response_bytes_max = 65536");
    let words = "every word its own delta ".repeat(4000);
    case.server.push(format, Answer::text(&words).into());
    let out = case.run(format, &["hi"]);
    assert_refused_naming(&case, &out, "response_bytes_max");
    // Under the default limit the same answer is read whole.
    let case = Case::new();
    case.server.push(format, Answer::text(&words).into());
    let out = case.run(format, &["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(failed_attempts(&case.events()).is_empty());
}

/// `command`'s output, or a failure once it runs past `limit` (it is killed first): a run that
/// never ends fails the test instead of hanging it.
fn output_within(mut command: Command, limit: Duration) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tooljournal starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("tooljournal's output"),
        Err(_) => {
            // The pid is the child's, still running: it has not been waited for.
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("tooljournal was still running after {limit:?}");
        }
    }
}

/// A stream of pings never ends an attempt by silence; its deadline does: the attempt fails
/// naming `attempt_timeout_ms`, is retried once, and the second deadline ends the turn although
/// attempts remain.
#[test]
fn an_attempt_that_never_ends_fails_at_its_deadline_and_is_retried_once() {
    let format = Format::Anthropic;
    let case = Case::new();
    case.write_config("request_timeout_ms = 1000\nattempt_timeout_ms = 1500\nretry_attempts = 3");
    for _ in 0..2 {
        let pinging = Answer::text("thinking aloud").ping_after_text(50);
        case.server.push(format, pinging.into());
    }
    case.server
        .push(format, Answer::text("a third attempt").into());
    let mut command = case.command(format);
    command.args(case.run_args(format, &["hi"]));
    let started = Instant::now();
    let out = output_within(command, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        started.elapsed() >= Duration::from_millis(3000),
        "two deadlines of 1.5 s passed: {:?}",
        started.elapsed()
    );
    assert_eq!(case.requests().len(), 2, "{}", shown(&out));
    assert_eq!(case.server.remaining(format), 1, "no third attempt");
    let events = case.events();
    let failed = failed_attempts(&events);
    assert_eq!(failed.len(), 2, "{failed:?}");
    for f in &failed {
        assert!(f.message.contains("[model] attempt_timeout_ms"), "{f:?}");
        assert_eq!(f.partial_text, "thinking aloud", "{f:?}");
    }
    assert!(failed[0].retry && !failed[1].retry, "{failed:?}");
    assert!(turn_failed_with(&events, "attempt_timeout_ms"));
    assert!(
        text(&out.stderr).contains("attempt_timeout_ms"),
        "{}",
        shown(&out)
    );
}

/// An answer with 129 calls, one past the runtime's 128: the answer is journaled whole, the
/// first 128 calls run, the 129th is rejected `TOO_MANY_CALLS` and the model reads why; the
/// session goes on, and `recover audit` shows the rejection.
#[test]
fn an_answer_past_the_call_limit_is_journaled_and_its_extra_calls_answered() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let ids: Vec<String> = (0..129).map(|n| format!("call_{n:03}")).collect();
    let args = json!({"path": "."}).to_string();
    let calls: Vec<(&str, &str, &str)> = ids
        .iter()
        .map(|id| (id.as_str(), "ls", args.as_str()))
        .collect();
    case.server.push(format, Answer::calls(calls).into());
    case.server.push(format, Answer::text("listed").into());
    let out = case.run(format, &["list it 129 times"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(text(&out.stdout).contains("listed"), "{}", shown(&out));

    let events = case.events();
    let response = events.iter().find_map(|e| match e {
        Event::LlmResponse { response, .. } => Some(response),
        _ => None,
    });
    assert_eq!(response.map(|r| r.tool_calls.len()), Some(129));
    let rejected: Vec<(&str, ErrorCode)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected { call, code, .. } => Some((call.call_id.as_str(), *code)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected, vec![("call_128", ErrorCode::TooManyCalls)]);
    let started = events
        .iter()
        .filter(|e| matches!(e, Event::Started(_)))
        .count();
    assert_eq!(started, 128);

    let requests = case.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].violation, None);
    let last = results_for(format, &requests[1].body, "call_128", "ls");
    assert_eq!(last.len(), 1, "{last:?}");
    assert!(last[0].contains("TOO_MANY_CALLS"), "{last:?}");
    assert!(last[0].contains("at most 128"), "{last:?}");
    let first = results_for(format, &requests[1].body, "call_000", "ls");
    assert!(!first[0].contains("TOO_MANY_CALLS"), "{first:?}");

    let audit = Command::new(recover_bin())
        .arg("audit")
        .arg(case.journal())
        .output()
        .expect("recover audit runs");
    assert_eq!(audit.status.code(), Some(0), "{}", shown(&audit));
    assert!(
        text(&audit.stdout).contains("rejected TOO_MANY_CALLS"),
        "{}",
        shown(&audit)
    );
}
