//! OpenAI Responses streams: named events with matching `type`, sequence numbers, reasoning,
//! message and function_call items, `response.completed` / `response.incomplete`.

use crate::common;

use common::{body, named, post};
use serde_json::{json, Value};
use tooljournal_mockllm::{Answer, Format, MockServer, Stop};

const F: Format = Format::OpenAiResponses;

#[tokio::test]
async fn reasoning_text_and_call_stream_as_documented_events() {
    let server = MockServer::start();
    let args = r#"{"path":"a/b/c.txt","offset":0}"#;
    server.push(
        F,
        Answer::text("Let me look at that file.")
            .with_thinking("I should read it", "gAAAA-encrypted")
            .with_call("call_1", "read_file", args)
            .with_usage(50, 30, 10)
            .with_response_id("resp_xyz")
            .into(),
    );
    let got = post(&server, F, &body(F)).await;
    assert_eq!(got.status, 200);
    let events = got.json_events().await;

    // The event name is the data's type; sequence numbers count from 0.
    for (n, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], n);
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..2], ["response.created", "response.in_progress"]);
    assert_eq!(names.last(), Some(&"response.completed"));
    assert_eq!(events[0].1["response"]["id"], "resp_xyz");
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    assert_eq!(events[0].1["response"]["model"], "gpt-test");

    // Items in order: reasoning (0), message (1), function_call (2).
    let added = named(&events, "response.output_item.added");
    let kinds: Vec<&Value> = added.iter().map(|e| &e["item"]["type"]).collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"]);
    let indexes: Vec<&Value> = added.iter().map(|e| &e["output_index"]).collect();
    assert_eq!(indexes, [0, 1, 2]);
    let done = named(&events, "response.output_item.done");
    assert_eq!(done[0]["item"]["encrypted_content"], "gAAAA-encrypted");
    assert_eq!(done[0]["item"]["summary"], json!([]));

    let message_id = added[1]["item"]["id"].as_str().unwrap();
    let text_deltas = named(&events, "response.output_text.delta");
    assert!(text_deltas.len() >= 3);
    assert!(text_deltas
        .iter()
        .all(|d| d["item_id"] == message_id && d["output_index"] == 1 && d["content_index"] == 0));
    let text: String = text_deltas
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Let me look at that file.");
    assert_eq!(
        named(&events, "response.output_text.done")[0]["text"],
        "Let me look at that file."
    );
    assert_eq!(
        named(&events, "response.content_part.added")[0]["part"]["type"],
        "output_text"
    );
    assert_eq!(
        done[1]["item"]["content"][0]["text"],
        "Let me look at that file."
    );
    assert_eq!(done[1]["item"]["role"], "assistant");

    let call = &added[2]["item"];
    assert_eq!(call["call_id"], "call_1");
    assert_eq!(call["name"], "read_file");
    assert_eq!(call["arguments"], "");
    let call_item_id = call["id"].as_str().unwrap();
    let arg_deltas = named(&events, "response.function_call_arguments.delta");
    assert!(arg_deltas.len() >= 3);
    assert!(arg_deltas.iter().all(|d| d["item_id"] == call_item_id));
    let joined: String = arg_deltas
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(joined, args);
    let args_done = named(&events, "response.function_call_arguments.done");
    assert_eq!(args_done[0]["arguments"], args);
    assert_eq!(args_done[0]["name"], "read_file");
    assert_eq!(done[2]["item"]["arguments"], args);
    assert_eq!(done[2]["item"]["status"], "completed");

    let completed = &named(&events, "response.completed")[0]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"].as_array().unwrap().len(), 3);
    assert_eq!(completed["output"][2]["call_id"], "call_1");
    assert_eq!(completed["usage"]["input_tokens"], 50);
    assert_eq!(completed["usage"]["output_tokens"], 30);
    assert_eq!(completed["usage"]["total_tokens"], 80);
    assert_eq!(
        completed["usage"]["input_tokens_details"]["cached_tokens"],
        10
    );
}

#[tokio::test]
async fn encrypted_content_only_when_included() {
    let server = MockServer::start();
    server.push(
        F,
        Answer::text("hi").with_thinking("t", "secret-sig").into(),
    );
    let mut b = body(F);
    b.as_object_mut().unwrap().remove("include");
    let got = post(&server, F, &b).await;
    let events = got.json_events().await;
    let done = named(&events, "response.output_item.done");
    assert_eq!(done[0]["item"]["type"], "reasoning");
    assert!(done[0]["item"].get("encrypted_content").is_none());
    assert!(!got.text().contains("secret-sig"));
}

#[tokio::test]
async fn length_ends_with_response_incomplete() {
    let server = MockServer::start();
    server.push(
        F,
        Answer::text("partial answ").with_stop(Stop::Length).into(),
    );
    let got = post(&server, F, &body(F)).await;
    let events = got.json_events().await;
    assert!(named(&events, "response.completed").is_empty());
    let incomplete = named(&events, "response.incomplete");
    assert_eq!(incomplete.len(), 1);
    assert_eq!(incomplete[0]["response"]["status"], "incomplete");
    assert_eq!(
        incomplete[0]["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    assert_eq!(events.last().unwrap().0, "response.incomplete");
}
