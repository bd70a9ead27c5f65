//! OpenAI Chat Completions streams: `chat.completion.chunk` data lines, tool call deltas by
//! index, finish_reason, the usage chunk, `[DONE]`.

use crate::common;

use common::{body, post};
use serde_json::Value;
use tooljournal_mockllm::{Answer, Format, MockServer, Stop};

const F: Format = Format::OpenAiChat;

/// The chunks (every data line but the final `[DONE]`, which must be there).
async fn chunks(got: &common::Got) -> Vec<Value> {
    let events = got.events().await;
    assert!(
        events.iter().all(|e| e.event == "message"),
        "no event: names"
    );
    let (last, rest) = events.split_last().expect("some events");
    assert_eq!(last.data, "[DONE]");
    rest.iter()
        .map(|e| serde_json::from_str(&e.data).expect("chunk is JSON"))
        .collect()
}

fn deltas(chunks: &[Value]) -> Vec<&Value> {
    chunks
        .iter()
        .filter_map(|c| c["choices"].get(0).map(|ch| &ch["delta"]))
        .collect()
}

#[tokio::test]
async fn text_and_two_calls_stream_as_documented_chunks() {
    let server = MockServer::start();
    let text = "Hello, world! This is streamed.";
    let args0 = r#"{"path":"src/main.rs","limit":10}"#;
    server.push(
        F,
        Answer::text(text)
            .with_call("call_a", "read_file", args0)
            .with_call("call_b", "list_dir", r#"{"dir":"."}"#)
            .with_usage(100, 20, 40)
            .with_response_id("chatcmpl-abc")
            .into(),
    );
    let got = post(&server, F, &body(F)).await;
    assert_eq!(got.status, 200);
    assert!(got.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(got.error.is_none());
    let chunks = chunks(&got).await;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], "chatcmpl-abc");
        assert_eq!(c["model"], "gpt-test");
        assert!(c["created"].is_u64());
    }
    let deltas = deltas(&chunks);
    assert_eq!(deltas[0]["role"], "assistant");

    let content: Vec<&str> = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(content.concat(), text);
    assert!(content.iter().filter(|p| !p.is_empty()).count() >= 4);
    assert!(content.iter().all(|p| p.len() <= 7));

    // Tool call deltas after all the text; the first per index has id, type and name.
    let first_call = deltas
        .iter()
        .position(|d| d.get("tool_calls").is_some())
        .unwrap();
    let last_text = deltas
        .iter()
        .rposition(|d| d["content"].as_str().is_some_and(|c| !c.is_empty()))
        .unwrap();
    assert!(last_text < first_call);
    for (index, id, name, args) in [
        (0, "call_a", "read_file", args0),
        (1, "call_b", "list_dir", r#"{"dir":"."}"#),
    ] {
        let parts: Vec<&Value> = deltas
            .iter()
            .filter_map(|d| d["tool_calls"].as_array())
            .flatten()
            .filter(|tc| tc["index"] == index)
            .collect();
        assert_eq!(parts[0]["id"], id);
        assert_eq!(parts[0]["type"], "function");
        assert_eq!(parts[0]["function"]["name"], name);
        assert!(parts[1..].iter().all(|p| p.get("id").is_none()));
        let joined: String = parts
            .iter()
            .filter_map(|p| p["function"]["arguments"].as_str())
            .collect();
        assert_eq!(joined, args);
        assert!(parts.len() >= 3, "arguments come in several deltas");
    }

    let finishes: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|ch| &ch["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finishes, vec!["tool_calls"]);

    // include_usage: every chunk has "usage", null but on the last, which has no choices.
    let (usage, before) = chunks.split_last().unwrap();
    assert!(before
        .iter()
        .all(|c| c["usage"].is_null() && c.get("usage").is_some()));
    assert_eq!(usage["choices"], serde_json::json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 100);
    assert_eq!(usage["usage"]["completion_tokens"], 20);
    assert_eq!(usage["usage"]["total_tokens"], 120);
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 40);

    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(recorded[0].body, body(F));
    assert_eq!(
        recorded[0].header("authorization"),
        Some("Bearer sk-mock-test")
    );
    assert_eq!(recorded[0].violation, None);
    assert_eq!(server.remaining(F), 0);
}

#[tokio::test]
async fn calls_only_answer_starts_with_the_call_and_no_usage_unless_asked() {
    let server = MockServer::start();
    server.push(F, Answer::calls(vec![("c1", "read_file", "{}")]).into());
    let mut b = body(F);
    b.as_object_mut().unwrap().remove("stream_options");
    let got = post(&server, F, &b).await;
    let chunks = chunks(&got).await;
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    assert!(first["content"].is_null());
    assert_eq!(first["tool_calls"][0]["id"], "c1");
    assert_eq!(first["tool_calls"][0]["function"]["name"], "read_file");
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert!(chunks
        .iter()
        .all(|c| c["choices"].as_array().unwrap().len() == 1));
    // A made-up id when the script gives none.
    assert!(chunks[0]["id"].as_str().unwrap().starts_with("chatcmpl-"));
}

#[tokio::test]
async fn finish_reason_follows_the_stop() {
    let server = MockServer::start();
    server.push(F, Answer::text("done").into());
    server.push(F, Answer::text("cut short").with_stop(Stop::Length).into());
    for expected in ["stop", "length"] {
        let got = post(&server, F, &body(F)).await;
        let chunks = chunks(&got).await;
        let finish: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"].get(0))
            .map(|ch| &ch["finish_reason"])
            .filter(|f| !f.is_null())
            .collect();
        assert_eq!(finish, vec![expected]);
    }
}
