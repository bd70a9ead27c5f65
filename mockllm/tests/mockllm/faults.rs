//! Faults: a connection cut mid-arguments, status replies (429 with Retry-After, 500 then
//! success, 400 with a body), a slow first byte, slow chunks, a malformed line, a hang.

use crate::common;

use std::time::{Duration, Instant};

use common::{auth, body, client, named, post, url, KEY};
use futures_util::StreamExt;
use serde_json::Value;
use tooljournal_mockllm::{Answer, Format, MockServer, Reply};

const ARGS: &str = r#"{"path":"src/lib.rs","limit":200}"#;

#[tokio::test]
async fn cut_in_arguments_closes_the_connection_mid_call_in_every_format() {
    let server = MockServer::start();
    for format in Format::ALL {
        let answer = Answer::text("Reading.")
            .with_call("call_1", "read_file", ARGS)
            .cut_in_call_arguments(10);
        server.push(format, answer.into());
        let got = post(&server, format, &body(format)).await;
        assert_eq!(got.status, 200, "{format}");
        assert!(
            got.error.is_some(),
            "{format}: the body ends in an error, not cleanly"
        );
        let text = got.text();
        // What was received of the arguments: exactly their first 10 bytes.
        let events = got.events().await;
        let received: String = match format {
            Format::OpenAiChat => events
                .iter()
                .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
                .filter_map(|c| {
                    c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                        .as_str()
                        .map(String::from)
                })
                .collect(),
            Format::OpenAiResponses => events
                .iter()
                .filter(|e| e.event == "response.function_call_arguments.delta")
                .map(|e| {
                    let d: Value = serde_json::from_str(&e.data).unwrap();
                    d["delta"].as_str().unwrap().to_string()
                })
                .collect(),
            Format::Anthropic => events
                .iter()
                .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
                .filter_map(|d| d["delta"]["partial_json"].as_str().map(String::from))
                .collect(),
            Format::Gemini => {
                // The one data line with the call is cut inside `args`.
                assert!(events.iter().all(|e| !e.data.contains("functionCall")));
                let tail = text.rsplit("\r\n\r\n").next().unwrap();
                assert!(tail.starts_with("data: "), "{tail}");
                let at = tail.find("\"args\":").unwrap() + "\"args\":".len();
                tail[at..].to_string()
            }
        };
        assert_eq!(received, ARGS[..10], "{format}");
        for end in [
            "[DONE]",
            "message_stop",
            "response.completed",
            "finishReason",
        ] {
            assert!(!text.contains(end), "{format}: {end} was sent");
        }
    }
}

#[tokio::test]
async fn cut_at_zero_bytes_comes_right_after_the_call_starts() {
    let server = MockServer::start();
    let f = Format::Anthropic;
    server.push(
        f,
        Answer::calls(vec![("toolu_1", "read_file", ARGS)])
            .cut_in_call_arguments(0)
            .into(),
    );
    let got = post(&server, f, &body(f)).await;
    assert!(got.error.is_some());
    let events = got.json_events().await;
    assert_eq!(
        named(&events, "content_block_start").last().unwrap()["content_block"]["id"],
        "toolu_1"
    );
    let json: Vec<&Value> = named(&events, "content_block_delta")
        .into_iter()
        .filter(|d| {
            d["delta"]["partial_json"]
                .as_str()
                .is_some_and(|p| !p.is_empty())
        })
        .collect();
    assert!(json.is_empty());
}

#[tokio::test]
async fn rate_limit_passes_retry_after_through_and_gemini_puts_it_in_the_body() {
    let server = MockServer::start();
    let f = Format::OpenAiChat;
    server.push(f, Reply::rate_limited(f, 7));
    server.push(
        f,
        Reply::Status {
            status: 429,
            headers: vec![("retry-after-ms".into(), "1500".into())],
            body: "{}".into(),
        },
    );
    let got = post(&server, f, &body(f)).await;
    assert_eq!(got.status, 429);
    assert_eq!(got.headers["retry-after"], "7");
    assert_eq!(got.json()["error"]["code"], "rate_limit_exceeded");
    let got = post(&server, f, &body(f)).await;
    assert_eq!(got.status, 429);
    assert_eq!(got.headers["retry-after-ms"], "1500");
    assert_eq!(got.headers["content-type"], "application/json");

    let g = Format::Gemini;
    server.push(g, Reply::rate_limited(g, 3));
    let got = post(&server, g, &body(g)).await;
    assert_eq!(got.status, 429);
    assert!(got.headers.get("retry-after").is_none());
    let error = &got.json()["error"];
    assert_eq!(error["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(error["code"], 429);
    assert_eq!(error["details"][0]["retryDelay"], "3s");

    let a = Format::Anthropic;
    server.push(a, Reply::rate_limited(a, 2));
    let got = post(&server, a, &body(a)).await;
    assert_eq!(got.headers["retry-after"], "2");
    assert_eq!(got.json()["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn server_error_then_success_and_a_bad_request_body() {
    let server = MockServer::start();
    let f = Format::Anthropic;
    server.push(f, Reply::error(f, 500, "boom"));
    server.push(f, Answer::text("recovered").into());
    assert_eq!(server.remaining(f), 2);
    let got = post(&server, f, &body(f)).await;
    assert_eq!(got.status, 500);
    assert_eq!(got.json()["type"], "error");
    assert_eq!(got.json()["error"]["type"], "api_error");
    assert_eq!(got.json()["error"]["message"], "boom");
    assert_eq!(server.remaining(f), 1);
    let got = post(&server, f, &body(f)).await;
    assert_eq!(got.status, 200);
    let text: String = named(&got.json_events().await, "content_block_delta")
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "recovered");
    assert_eq!(server.remaining(f), 0);

    let r = Format::OpenAiResponses;
    server.push(r, Reply::error(r, 400, "Invalid 'input[3]'"));
    let got = post(&server, r, &body(r)).await;
    assert_eq!(got.status, 400);
    assert_eq!(got.json()["error"]["type"], "invalid_request_error");
    assert_eq!(got.json()["error"]["message"], "Invalid 'input[3]'");
}

#[tokio::test]
async fn first_byte_delay_outlasts_a_short_timeout_and_is_observable() {
    let server = MockServer::start();
    let f = Format::Gemini;
    server.push(f, Answer::text("slow").first_byte_delay_ms(400).into());
    server.push(f, Answer::text("slow").first_byte_delay_ms(60).into());
    let short = reqwest::Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut req = short.post(url(&server, f)).body(body(f).to_string());
    for (n, v) in auth(f, KEY) {
        req = req.header(n, v);
    }
    let err = req
        .send()
        .await
        .expect_err("headers come after the timeout");
    assert!(err.is_timeout(), "{err:?}");

    let started = Instant::now();
    let mut req = client().post(url(&server, f)).body(body(f).to_string());
    for (n, v) in auth(f, KEY) {
        req = req.header(n, v);
    }
    let resp = req.send().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(60));
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn chunk_delay_spaces_the_events() {
    let server = MockServer::start();
    let f = Format::OpenAiChat;
    server.push(f, Answer::text("0123456789abcd").chunk_delay_ms(15).into());
    let started = Instant::now();
    let got = post(&server, f, &body(f)).await;
    let events = got.events().await.len() as u32;
    assert!(events >= 5);
    assert!(started.elapsed() >= Duration::from_millis(15) * (events - 1));
}

#[tokio::test]
async fn malformed_line_is_one_data_line_that_is_not_json_mid_stream() {
    let server = MockServer::start();
    for format in [Format::OpenAiChat, Format::Anthropic] {
        server.push(
            format,
            Answer::text("some text here").malformed_line().into(),
        );
        let got = post(&server, format, &body(format)).await;
        assert!(got.error.is_none());
        let events = got.events().await;
        let bad: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.data != "[DONE]" && serde_json::from_str::<Value>(&e.data).is_err())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(bad.len(), 1, "{format}");
        let at = bad[0];
        assert!(at > 0 && at + 1 < events.len(), "{format}: mid-stream");
        // It follows the first delta, and the stream goes on to its normal end.
        assert!(events[at - 1].data.contains("some te") || events[at - 1].data.contains("\"some"));
        let last = &events.last().unwrap().data;
        assert!(
            last == "[DONE]" || last.contains("message_stop"),
            "{format}: {last}"
        );
        if format == Format::Anthropic {
            assert_eq!(events[at].event, "content_block_delta");
        }
    }
}

#[tokio::test]
async fn hang_after_text_sends_the_text_then_holds_the_connection() {
    let server = MockServer::start();
    let f = Format::OpenAiChat;
    let text = "All the text arrives.";
    server.push(
        f,
        Answer::text(text)
            .with_call("c1", "read_file", ARGS)
            .hang_after_text()
            .into(),
    );
    let mut req = client().post(url(&server, f)).body(body(f).to_string());
    for (n, v) in auth(f, KEY) {
        req = req.header(n, v);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let mut stream = resp.bytes_stream();
    let mut raw = Vec::new();
    let timed_out = loop {
        match tokio::time::timeout(Duration::from_millis(200), stream.next()).await {
            Err(_) => break true,
            Ok(Some(Ok(bytes))) => raw.extend_from_slice(&bytes),
            Ok(Some(Err(e))) => panic!("the connection broke: {e}"),
            Ok(None) => break false,
        }
    };
    assert!(
        timed_out,
        "the body did not end: the connection is held open"
    );
    let got = common::Got {
        status,
        headers,
        raw,
        error: None,
    };
    let content: String = got
        .events()
        .await
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(content, text);
    assert!(!got.text().contains("tool_calls") && !got.text().contains("[DONE]"));
}
