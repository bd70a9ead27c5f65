//! `Reply::ContextOverflow`: each provider's context-overflow error, with its status and body
//! shape, and openai-responses' overflow inside a failed stream.

use crate::common;

use common::{body, named, post};
use serde_json::json;
use tooljournal_mockllm::{Answer, Format, MockServer, Reply};

#[tokio::test]
async fn each_format_answers_a_context_overflow_with_its_provider_s_400() {
    let server = MockServer::start();
    for format in Format::ALL {
        server.push(format, Reply::context_overflow());
        server.push(format, Answer::text("after").into());
        let got = post(&server, format, &body(format)).await;
        assert_eq!(got.status, 400, "{format}");
        assert_eq!(
            got.headers.get("content-type").map(|v| v.to_str().unwrap()),
            Some("application/json"),
            "{format}"
        );
        let error = got.json();
        let e = &error["error"];
        match format {
            Format::OpenAiChat => {
                assert_eq!(e["code"], "context_length_exceeded");
                assert_eq!(e["type"], "invalid_request_error");
                assert_eq!(e["param"], "messages");
                let message = e["message"].as_str().unwrap();
                assert!(
                    message.starts_with("This model's maximum context length is 128000 tokens."),
                    "{message}"
                );
            }
            Format::OpenAiResponses => {
                assert_eq!(e["code"], "context_length_exceeded");
                assert_eq!(e["param"], "input");
                assert_eq!(
                    e["message"],
                    "Your input exceeds the context window of this model. Please adjust your \
                     input and try again."
                );
            }
            Format::Anthropic => {
                assert_eq!(error["type"], "error");
                assert_eq!(e["type"], "invalid_request_error");
                assert_eq!(
                    e["message"],
                    "prompt is too long: 213462 tokens > 200000 maximum"
                );
            }
            Format::Gemini => {
                assert_eq!(
                    *e,
                    json!({
                        "code": 400,
                        "message": "The input token count (1091639) exceeds the maximum number \
                                    of tokens allowed (1048576).",
                        "status": "INVALID_ARGUMENT",
                    })
                );
            }
        }
        // The overflow took one reply; the next request gets the next one.
        assert_eq!(server.remaining(format), 1, "{format}");
        let next = post(&server, format, &body(format)).await;
        assert_eq!(next.status, 200, "{format}");
    }
    assert!(server.requests().iter().all(|r| r.violation.is_none()));
}

#[tokio::test]
async fn openai_responses_can_fail_its_stream_with_the_overflow() {
    let server = MockServer::start();
    let f = Format::OpenAiResponses;
    server.push(f, Reply::context_overflow_in_stream());
    let got = post(&server, f, &body(f)).await;
    assert_eq!(got.status, 200);
    assert!(got.error.is_none(), "the stream ends cleanly");
    let events = got.json_events().await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.failed"
        ]
    );
    let failed = named(&events, "response.failed")[0];
    assert_eq!(failed["type"], "response.failed");
    assert_eq!(failed["sequence_number"], 2);
    assert_eq!(failed["response"]["status"], "failed");
    assert_eq!(
        failed["response"]["error"]["code"],
        "context_length_exceeded"
    );
    assert_eq!(
        failed["response"]["id"], events[0].1["response"]["id"],
        "one response id throughout"
    );
}

#[tokio::test]
async fn an_in_stream_overflow_for_another_format_is_refused_with_a_500() {
    let server = MockServer::start();
    for format in [Format::OpenAiChat, Format::Anthropic, Format::Gemini] {
        server.push(format, Reply::context_overflow_in_stream());
        let got = post(&server, format, &body(format)).await;
        assert_eq!(got.status, 500, "{format}");
        assert!(
            got.text().contains("only as a 400"),
            "{format}: {}",
            got.text()
        );
    }
}

#[test]
fn a_script_names_the_overflow_as_context_overflow() {
    let reply: Reply = serde_json::from_str(r#"{"context_overflow": {}}"#).unwrap();
    assert_eq!(reply, Reply::context_overflow());
    let reply: Reply =
        serde_json::from_str(r#"{"context_overflow": {"in_stream": true}}"#).unwrap();
    assert_eq!(reply, Reply::context_overflow_in_stream());
    assert!(serde_json::from_str::<Reply>(r#"{"context_overflow": {"soon": true}}"#).is_err());
}
