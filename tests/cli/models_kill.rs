//! SIGKILL of `tooljournal run --model` mid-stream and mid-tool, then `tooljournal resume`
//! with the model: nothing runs twice, and the first request after the resume pairs every
//! call with exactly one result (the mock checks it as the provider would), the killed
//! call's being `TOOL_OUTCOME_UNKNOWN`.

use crate::common;

use common::models::*;
use mockllm::{Answer, Format};
use serde_json::json;
use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn marker_lines(case: &Case) -> usize {
    std::fs::read_to_string(case.workspace().join("marker.txt"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Reads the child's stdout until it holds `needle`.
fn wait_for_stdout(child: &mut Child, needle: &str) -> String {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(bytes) => seen.extend(bytes),
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no {needle:?} on stdout within {WAIT:?}: {}",
                    String::from_utf8_lossy(&seen)
                );
            }
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

fn kill9(child: &mut Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL delivered");
    let status = child.wait().expect("the child is reaped");
    assert!(!status.success(), "killed, not finished: {status:?}");
}

fn spawn_run(case: &Case, format: Format, prompt: &str) -> Child {
    case.command(format)
        .args(case.run_args(format, &[prompt]))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tooljournal starts")
}

/// Killed while the model streams its second answer: the first step's call ran once and its
/// real result goes back with the resume's request.
#[test]
fn killed_mid_stream_then_resumed() {
    for format in [Format::OpenAiChat, Format::Anthropic] {
        let case = Case::new();
        let server = &case.server;
        let append = json!({"command": "echo once >> marker.txt"}).to_string();
        server.push(
            format,
            Answer::calls(vec![("call_m1", "bash", &append)]).into(),
        );
        server.push(
            format,
            Answer::text("STREAMED-BEFORE-THE-KILL")
                .hang_after_text()
                .into(),
        );
        let mut child = spawn_run(&case, format, "append once");
        wait_for_stdout(&mut child, "STREAMED-BEFORE-THE-KILL");
        kill9(&mut child);
        assert_eq!(marker_lines(&case), 1, "{format}");

        server.push(format, Answer::text("resumed and done").into());
        let before = case.requests().len();
        let out = case.resume(format, Some("what happened?"), &[]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        assert_eq!(marker_lines(&case), 1, "{format}: nothing ran twice");
        let requests = case.requests().split_off(before);
        assert_eq!(requests.len(), 1, "{format}");
        let body = &requests[0].body;
        assert_eq!(requests[0].violation, None, "{format}: {body:#}");
        let results = results_for(format, body, "call_m1", "bash");
        assert_eq!(results.len(), 1, "{format}: {body:#}");
        assert!(!results[0].contains("TOOL_OUTCOME_UNKNOWN"), "{results:?}");
        let history = history_of(format, body).to_string();
        assert!(history.contains("append once"), "{history}");
        assert!(history.contains("what happened?"), "{history}");
        // The broken answer's text never enters the history.
        assert!(!history.contains("STREAMED-BEFORE-THE-KILL"), "{history}");
        assert!(text(&out.stdout).contains("resumed and done"));
    }
}

/// Killed while a `bash` call runs: the resume kills the orphaned process group, the call comes
/// back `TOOL_OUTCOME_UNKNOWN`, and without `--prompt` the interrupted turn is continued.
#[test]
fn killed_mid_tool_then_resumed_without_a_prompt() {
    for format in [Format::OpenAiResponses, Format::Gemini] {
        let case = Case::new();
        let server = &case.server;
        let slow = json!({"command": "echo start >> marker.txt; touch running.flag; sleep 30"})
            .to_string();
        server.push(
            format,
            Answer::calls(vec![("call_s1", "bash", &slow)]).into(),
        );
        let mut child = spawn_run(&case, format, "run the slow thing");
        let flag = case.workspace().join("running.flag");
        let deadline = Instant::now() + WAIT;
        while !flag.exists() {
            assert!(
                Instant::now() < deadline,
                "{format}: the call never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        kill9(&mut child);

        server.push(format, Answer::text("I checked; it had started.").into());
        let before = case.requests().len();
        let out = case.resume(format, None, &["--kill-orphans"]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        assert_eq!(marker_lines(&case), 1, "{format}: nothing ran twice");
        let requests = case.requests().split_off(before);
        assert_eq!(requests.len(), 1, "{format}");
        let body = &requests[0].body;
        assert_eq!(requests[0].violation, None, "{format}: {body:#}");
        let results = results_for(format, body, "call_s1", "bash");
        assert_eq!(results.len(), 1, "{format}: {body:#}");
        assert!(
            results[0].contains("TOOL_OUTCOME_UNKNOWN"),
            "{format}: {results:?}"
        );
        let history = history_of(format, body).to_string();
        assert!(
            history.contains("resumed after an interruption"),
            "{history}"
        );
    }
}
