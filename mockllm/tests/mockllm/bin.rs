//! The `mockllm` binary: serves a JSON script and prints each request it gets.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{auth, body, named, post_to, KEY};
use tooljournal_mockllm::Format;

const SCRIPT: &str = r#"{
  "expect_key": "sk-mock-test",
  "replies": [
    {"format": "anthropic", "reply": {"answer": {"text": "from the script",
      "calls": [["toolu_1", "read_file", "{\"path\":\"a\"}"]], "stop": "tool_use",
      "faults": {"chunk_delay_ms": 1}}}},
    {"format": "anthropic", "reply": {"status": {"status": 503, "body": "{}"}}}
  ]
}"#;

/// The server process, killed when the test ends, passing or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // Already gone is fine.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn serves_a_script_and_prints_the_requests() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, SCRIPT).unwrap();
    let mut child = Server(
        Command::new(env!("CARGO_BIN_EXE_mockllm"))
            .args(["--port", "0", "--script"])
            .arg(&script)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut next = move || lines.next().unwrap().unwrap();
    let banner: Vec<String> = (0..4).map(|_| next()).collect();
    let anthropic = banner
        .iter()
        .find_map(|l| l.strip_prefix("anthropic: base URL "))
        .unwrap();
    assert!(anthropic.ends_with("(2 replies)"), "{anthropic}");
    let base = anthropic.split(' ').next().unwrap();
    let url = format!("{base}/v1/messages");
    let f = Format::Anthropic;

    let got = post_to(&url, &auth(f, KEY), &body(f)).await;
    assert_eq!(got.status, 200);
    let events = got.json_events().await;
    let text: String = named(&events, "content_block_delta")
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "from the script");
    assert_eq!(
        named(&events, "message_delta")[0]["delta"]["stop_reason"],
        "tool_use"
    );
    assert_eq!(next(), "anthropic POST /v1/messages");

    let got = post_to(&url, &auth(f, "sk-other"), &body(f)).await;
    assert_eq!(got.status, 401);
    assert!(next().starts_with("anthropic POST /v1/messages -> auth.wrong_key"));
    let got = post_to(&url, &auth(f, KEY), &body(f)).await;
    assert_eq!(got.status, 503);
}

#[test]
fn a_bad_script_is_refused_naming_the_file_and_entry() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(
        &script,
        r#"{"replies": [{"format": "openai-legacy", "reply": {"answer": {}}}]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mockllm"))
        .args(["--script"])
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("replies[0]"),
        "{err}"
    );
    assert!(err.contains("openai-legacy"), "{err}");
}
