//! Context overflow: each provider's error for a request longer than the model's context window
//! is a `ContextOverflow`, never retried, whether it comes as a response or inside a stream,
//! with its status and message kept; a similar 400 that is not an overflow stays `Status`; and
//! mockllm's overflow replies read as overflows through every adapter.
//!
//! The bodies are the providers' own, each from where it is cited.

use crate::common;

use common::{decode_all, serve, Canned};
use events::model::{
    Conversation, Message, Model, ModelError, ModelErrorKind, ModelEvent, ModelRequest,
    ModelSettings,
};
use futures_util::StreamExt;
use mockllm::{MockServer, Reply};
use tooljournal_llm::{connect, Format, ModelConfig, Secret};

const KEY: &str = "sk-test-overflow";

fn request() -> ModelRequest {
    ModelRequest {
        turn: 1,
        step: 1,
        conversation: Conversation {
            system: None,
            messages: vec![Message::User {
                text: "Summarize the repository.".into(),
            }],
        },
        tools: vec![],
        settings: ModelSettings {
            max_tokens: Some(256),
            temperature: None,
        },
    }
}

/// A model of `format` whose base URL is `base` (with OpenAI's `/v1` already in it).
fn model(format: Format, base: &str) -> Box<dyn Model> {
    let name = match format {
        Format::OpenAiChat | Format::OpenAiResponses => "gpt-4.1-mini",
        Format::Anthropic => "claude-sonnet-4-5",
        Format::Gemini => "gemini-2.5-flash",
    };
    let mut config = ModelConfig::new(format, name, Secret::new(KEY));
    config.base_url = Some(base.to_string());
    connect(config).expect("a valid configuration")
}

/// The loopback base URL for `format` on a `common::serve` server.
fn canned_base(format: Format, server_base: &str) -> String {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => format!("{server_base}/v1"),
        Format::Anthropic | Format::Gemini => server_base.to_string(),
    }
}

/// The error one request ends in: the one `send` gave, or the stream's last item.
async fn error_of(model: &mut dyn Model) -> ModelError {
    let body = model.body(&request()).expect("a body");
    let stream = match model.send(body).await {
        Err(e) => return e,
        Ok(stream) => stream,
    };
    let events: Vec<_> = stream.collect().await;
    match events.last() {
        Some(Err(e)) => e.clone(),
        _ => panic!("expected an error, got {events:?}"),
    }
}

/// What the adapter of `format` makes of `canned`.
async fn answered(format: Format, canned: Canned) -> ModelError {
    let server = serve(canned).await;
    let mut m = model(format, &canned_base(format, &server.base));
    error_of(m.as_mut()).await
}

fn assert_overflow(what: &str, e: &ModelError, status: u16, message: &str) {
    assert_eq!(e.kind, ModelErrorKind::ContextOverflow, "{what}: {e:?}");
    assert_eq!(e.status, Some(status), "{what}");
    assert_eq!(e.message, message, "{what}");
    assert!(!e.retryable(), "{what}: an overflow is not retried as is");
}

// OpenAI Chat's 400, as reported from the API in chathub-dev/chathub#126.
const OPENAI_CHAT_MESSAGE: &str = "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.";
const OPENAI_CHAT_BODY: &str = r#"{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

// OpenAI Responses: the error object dyad-sh/dyad#1672 quotes (there inside a stream's `error`
// event), as a 400's body; the message is the one codex-rs's test `context_window_error_is_fatal`
// has (codex-api/src/sse/responses.rs).
const RESPONSES_MESSAGE: &str =
    "Your input exceeds the context window of this model. Please adjust your input and try again.";
const RESPONSES_BODY: &str = r#"{"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}"#;

// Anthropic: the error shape of its errors reference (docs.claude.com/en/api/errors, with
// `request_id`); the message as pi-mono lists it (packages/ai/src/utils/overflow.ts).
const ANTHROPIC_MESSAGE: &str = "prompt is too long: 213462 tokens > 200000 maximum";
const ANTHROPIC_BODY: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"},"request_id":"req_011CUwZTS7TYAH8UyTro83sP"}"#;

// Gemini's 400, as the API answered in google-gemini/gemini-cli#5807.
const GEMINI_MESSAGE: &str =
    "The input token count (1091639) exceeds the maximum number of tokens allowed (1048576).";
const GEMINI_BODY: &str = r#"{"error":{"code":400,"message":"The input token count (1091639) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#;

#[tokio::test]
async fn each_provider_s_overflow_answer_is_a_context_overflow_not_retried() {
    for (format, body, message) in [
        (Format::OpenAiChat, OPENAI_CHAT_BODY, OPENAI_CHAT_MESSAGE),
        (Format::OpenAiResponses, RESPONSES_BODY, RESPONSES_MESSAGE),
        (Format::Anthropic, ANTHROPIC_BODY, ANTHROPIC_MESSAGE),
        (Format::Gemini, GEMINI_BODY, GEMINI_MESSAGE),
    ] {
        let e = answered(format, Canned::json(400, body)).await;
        assert_overflow(format.as_str(), &e, 400, message);
        assert_eq!(e.to_string(), format!("HTTP 400: {message}"));
    }
}

#[tokio::test]
async fn the_other_overflow_wordings_are_overflows_too() {
    // Gemini's streaming endpoint wraps its error in an array (google-gemini/gemini-cli#6678).
    let wrapped = r#"[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","errors":[{"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","domain":"global","reason":"badRequest"}],"status":"INVALID_ARGUMENT"}}]"#;
    let e = answered(Format::Gemini, Canned::json(400, wrapped)).await;
    assert_overflow(
        "gemini, array",
        &e,
        400,
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
    );

    // Anthropic when the input and `max_tokens` together pass the window
    // (anthropics/claude-code#408).
    let message = "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease input length or `max_tokens` and try again";
    let body = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
    let e = answered(Format::Anthropic, Canned::json(400, &body.to_string())).await;
    assert_overflow("anthropic, with max_tokens", &e, 400, message);

    // Anthropic's 413 `request_too_large` (its errors reference); Cloudflare answers it before
    // the API, so it may not even be JSON.
    let too_large = r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#;
    let e = answered(Format::Anthropic, Canned::json(413, too_large)).await;
    assert_overflow(
        "anthropic, 413",
        &e,
        413,
        "Request exceeds the maximum allowed number of bytes.",
    );
    let html = Canned {
        status: 413,
        headers: vec![("content-type", "text/html".into())],
        pieces: vec![
            b"<html><center><h1>413 Request Entity Too Large</h1></center></html>".to_vec(),
        ],
        break_after: false,
    };
    let e = answered(Format::Anthropic, html).await;
    assert_eq!(e.kind, ModelErrorKind::ContextOverflow, "{e:?}");
    assert_eq!(e.status, Some(413));

    // Servers that copy OpenAI Chat without its code. vLLM, its fields at the top
    // (HKUSTDial/Alpha-SQL#5):
    let message = "This model's maximum context length is 32768 tokens. However, you requested 41648 tokens (37552 in the messages, 4096 in the completion). Please reduce the length of the messages or completion. None";
    let vllm = serde_json::json!({"object": "error", "message": message, "type": "BadRequestError", "param": null, "code": 400});
    let e = answered(Format::OpenAiChat, Canned::json(400, &vllm.to_string())).await;
    assert_overflow("vllm", &e, 400, message);
    // llama.cpp's server, by its error type:
    let message =
        "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it";
    let llama = serde_json::json!({"error": {"code": 400, "message": message, "type": "exceed_context_size_error", "n_prompt_tokens": 9412, "n_ctx": 8192}});
    let e = answered(Format::OpenAiChat, Canned::json(400, &llama.to_string())).await;
    assert_overflow("llama.cpp", &e, 400, message);
}

#[tokio::test]
async fn a_similar_400_that_is_not_an_overflow_stays_a_status_error() {
    let cases = [
        // Too many output tokens asked for: the request's fault, not its length.
        (
            Format::OpenAiChat,
            r#"{"error":{"message":"max_tokens is too large: 200000. This model supports at most 32768 completion tokens, whereas you provided 200000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}"#,
        ),
        // Responses goes by the code: its overflow message with another code is not one.
        (
            Format::OpenAiResponses,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"invalid_value"}}"#,
        ),
        // ChatGPTNextWeb/NextChat#4964.
        (
            Format::Anthropic,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620"}}"#,
        ),
        // Anthropic's overflow message under another error type is not its overflow.
        (
            Format::Anthropic,
            r#"{"type":"error","error":{"type":"api_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#,
        ),
        (
            Format::Gemini,
            r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#,
        ),
        // An OpenAI-compatible server's 400 about something else.
        (
            Format::OpenAiChat,
            r#"{"object":"error","message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","param":null,"code":400}"#,
        ),
    ];
    for (format, body) in cases {
        let e = answered(format, Canned::json(400, body)).await;
        assert_eq!(e.kind, ModelErrorKind::Status, "{format}: {body}");
        assert_eq!(e.status, Some(400));
        assert!(!e.retryable());
    }
    // The overflow's code with another status is that status's error (a 500 is retried).
    let e = answered(
        Format::OpenAiChat,
        Canned::json(500, &OPENAI_CHAT_BODY.replace("4097", "8192")),
    )
    .await;
    assert_eq!((e.kind, e.status), (ModelErrorKind::Status, Some(500)));
    assert!(e.retryable());
}

/// The error `format`'s decoder ends `sse` with.
async fn stream_error(format: Format, sse: &str) -> ModelError {
    let got = decode_all(format, sse.as_bytes(), 64).await;
    match got.last() {
        Some(Err(e)) => e.clone(),
        _ => panic!("{format}: expected an error last, got {got:?}"),
    }
}

#[tokio::test]
async fn an_overflow_inside_a_stream_is_a_context_overflow() {
    // codex-rs's `context_window_error_is_fatal` (codex-api/src/sse/responses.rs).
    let failed = r#"event: response.failed
data: {"type":"response.failed","sequence_number":3,"response":{"id":"resp_5c66275b97b9baef1ed95550adb3b7ec13b17aafd1d2f11b","object":"response","created_at":1759510079,"status":"failed","background":false,"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again."},"usage":null,"user":null,"metadata":{}}}

"#;
    let e = stream_error(Format::OpenAiResponses, failed).await;
    assert_overflow("response.failed", &e, 400, RESPONSES_MESSAGE);

    // A Responses `error` event, the error nested (dyad-sh/dyad#1672) and at the top (the
    // `ResponseErrorEvent` shape).
    let nested = r#"event: error
data: {"type":"error","sequence_number":2,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}

"#;
    let e = stream_error(Format::OpenAiResponses, nested).await;
    assert_overflow("error event, nested", &e, 400, RESPONSES_MESSAGE);
    let top = r#"event: error
data: {"type":"error","sequence_number":1,"code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}

"#;
    let e = stream_error(Format::OpenAiResponses, top).await;
    assert_overflow("error event, top", &e, 400, RESPONSES_MESSAGE);

    // The other formats' in-stream errors are read the same way as their responses.
    let anthropic = format!("event: error\ndata: {ANTHROPIC_BODY}\n\n");
    let e = stream_error(Format::Anthropic, &anthropic).await;
    assert_overflow("anthropic error event", &e, 400, ANTHROPIC_MESSAGE);
    let gemini = format!("data: {GEMINI_BODY}\n\n");
    let e = stream_error(Format::Gemini, &gemini).await;
    assert_overflow("gemini error chunk", &e, 400, GEMINI_MESSAGE);
    let chat = r#"data: {"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}

"#;
    let e = stream_error(Format::OpenAiChat, chat).await;
    assert_overflow("chat error chunk", &e, 400, OPENAI_CHAT_MESSAGE);
}

#[tokio::test]
async fn a_stream_failing_for_another_reason_stays_a_status_error() {
    let failed = r#"event: response.failed
data: {"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"The model had a problem."}}}

"#;
    let e = stream_error(Format::OpenAiResponses, failed).await;
    assert_eq!((e.kind, e.status), (ModelErrorKind::Status, Some(500)));
    assert!(e.retryable());
    let invalid = r#"event: error
data: {"type":"error","code":"invalid_prompt","message":"Invalid prompt."}

"#;
    let e = stream_error(Format::OpenAiResponses, invalid).await;
    assert_eq!((e.kind, e.status), (ModelErrorKind::Status, Some(400)));
}

#[tokio::test]
async fn mockllm_s_overflow_reads_as_a_context_overflow_through_every_adapter() {
    let server = MockServer::start();
    for format in Format::ALL {
        server.push(format, Reply::context_overflow());
        let mut m = model(format, &server.base_url(format));
        let e = error_of(m.as_mut()).await;
        assert_eq!(e.kind, ModelErrorKind::ContextOverflow, "{format}: {e:?}");
        assert_eq!(e.status, Some(400), "{format}");
        assert!(!e.retryable(), "{format}");
    }
    let f = Format::OpenAiResponses;
    server.push(f, Reply::context_overflow_in_stream());
    let mut m = model(f, &server.base_url(f));
    let body = m.body(&request()).expect("a body");
    let stream = m.send(body).await.expect("the stream begins");
    let events: Vec<_> = stream.collect().await;
    let (last, before) = events.split_last().expect("events");
    assert!(
        before
            .iter()
            .all(|e| matches!(e, Ok(ModelEvent::ResponseId(_) | ModelEvent::KeepAlive))),
        "nothing but the response's id before the failure: {before:?}"
    );
    let e = last.as_ref().expect_err("the stream fails");
    assert_overflow("mockllm in stream", e, 400, RESPONSES_MESSAGE);
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert!(
        requests.iter().all(|r| r.violation.is_none()),
        "{requests:?}"
    );
}
