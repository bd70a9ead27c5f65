//! Anthropic Messages streams: message_start, thinking / text / tool_use blocks with their
//! deltas, message_delta with stop_reason and usage, message_stop, ping.

use crate::common;

use common::{body, named, post};
use serde_json::{json, Value};
use tooljournal_mockllm::{Answer, Format, MockServer, Stop};

const F: Format = Format::Anthropic;

#[tokio::test]
async fn thinking_text_and_calls_stream_as_documented_events() {
    let server = MockServer::start();
    let args0 = r#"{"path":"README.md","n":1.5}"#;
    server.push(
        F,
        Answer::text("Reading both files now.")
            .with_thinking("The user wants two files read.", "sig-EqoBCkgI")
            .with_call("toolu_01", "read_file", args0)
            .with_call("toolu_02", "read_file", r#"{"path":"b"}"#)
            .with_usage(1000, 64, 800)
            .with_response_id("msg_01abc")
            .into(),
    );
    let got = post(&server, F, &body(F)).await;
    assert_eq!(got.status, 200);
    let events = got.json_events().await;
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_str());
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert!(names.contains(&"ping"));
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);

    let start = &events[0].1["message"];
    assert_eq!(start["id"], "msg_01abc");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["model"], "claude-test");
    assert_eq!(start["content"], json!([]));
    assert!(start["stop_reason"].is_null());
    // Anthropic's input_tokens leave the cached ones out.
    assert_eq!(start["usage"]["input_tokens"], 200);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 800);

    let starts = named(&events, "content_block_start");
    let kinds: Vec<&Value> = starts.iter().map(|s| &s["content_block"]["type"]).collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use", "tool_use"]);
    let indexes: Vec<&Value> = starts.iter().map(|s| &s["index"]).collect();
    assert_eq!(indexes, [0, 1, 2, 3]);
    assert_eq!(starts[2]["content_block"]["id"], "toolu_01");
    assert_eq!(starts[2]["content_block"]["name"], "read_file");
    assert_eq!(starts[2]["content_block"]["input"], json!({}));
    let stops: Vec<&Value> = named(&events, "content_block_stop")
        .iter()
        .map(|s| &s["index"])
        .collect();
    assert_eq!(stops, [0, 1, 2, 3]);

    let deltas = named(&events, "content_block_delta");
    let of = |index: u64, kind: &str, field: &str| -> Vec<String> {
        deltas
            .iter()
            .filter(|d| d["index"] == index && d["delta"]["type"] == kind)
            .map(|d| d["delta"][field].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        of(0, "thinking_delta", "thinking").concat(),
        "The user wants two files read."
    );
    assert_eq!(of(0, "signature_delta", "signature"), ["sig-EqoBCkgI"]);
    let text = of(1, "text_delta", "text");
    assert!(text.len() >= 3);
    assert_eq!(text.concat(), "Reading both files now.");
    let json0 = of(2, "input_json_delta", "partial_json");
    assert_eq!(
        json0[0], "",
        "the first input_json_delta is empty, as the API sends it"
    );
    assert!(json0.len() >= 4);
    assert_eq!(json0.concat(), args0);
    assert_eq!(
        of(3, "input_json_delta", "partial_json").concat(),
        r#"{"path":"b"}"#
    );
    // The signature comes after the thinking text, before the block stops.
    let sig_at = events
        .iter()
        .position(|(_, d)| d["delta"]["type"] == "signature_delta")
        .unwrap();
    let last_thinking = events
        .iter()
        .rposition(|(_, d)| d["delta"]["type"] == "thinking_delta")
        .unwrap();
    assert!(last_thinking < sig_at);

    let delta = &named(&events, "message_delta")[0];
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["delta"]["stop_sequence"].is_null());
    assert_eq!(delta["usage"]["output_tokens"], 64);

    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("sk-mock-test"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
}

#[tokio::test]
async fn stop_reasons_and_a_ping_without_blocks() {
    let server = MockServer::start();
    server.push(F, Answer::text("fine").into());
    server.push(F, Answer::text("trunc").with_stop(Stop::Length).into());
    server.push(F, Answer::default().into());
    for expected in ["end_turn", "max_tokens", "end_turn"] {
        let got = post(&server, F, &body(F)).await;
        let events = got.json_events().await;
        assert_eq!(
            named(&events, "message_delta")[0]["delta"]["stop_reason"],
            expected
        );
        assert_eq!(named(&events, "ping").len(), 1);
    }
}
