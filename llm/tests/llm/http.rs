//! The adapters against a loopback server: what each sends (URL, headers, body), how its
//! failures read (status, Retry-After, the provider's message, a refused connection, a stream
//! cut or broken), and that the key appears in no error.

use crate::common;

use common::{data, refused_base, serve, Canned, Server};
use events::event::StopReason;
use events::model::{
    Conversation, Message, Model, ModelError, ModelErrorKind, ModelEvent, ModelRequest,
    ModelSettings, ToolSpec,
};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tooljournal_llm::{connect, ConfigError, Format, ModelConfig, Secret};

const KEY: &str = "sk-test-7f3a9c1e5b2d8f4a6c0e";

fn request() -> ModelRequest {
    ModelRequest {
        turn: 1,
        step: 1,
        conversation: Conversation {
            system: Some("Be brief.".into()),
            messages: vec![Message::User {
                text: "Read a.txt".into(),
            }],
        },
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        settings: ModelSettings {
            max_tokens: Some(256),
            temperature: None,
        },
    }
}

fn model(format: Format, base: &str, name: &str) -> Box<dyn Model> {
    let mut config = ModelConfig::new(format, name, Secret::new(KEY));
    config.base_url = Some(format!("{base}{}", base_path(format)));
    connect(config).expect("a valid configuration")
}

/// The path part of each provider's base URL (OpenAI's includes `/v1`).
fn base_path(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => "/v1",
        Format::Anthropic | Format::Gemini => "",
    }
}

/// Sends one request; all its events, or the error `send` gave.
/// The events of one request, keep-alives aside (`decode.rs` tests those).
async fn run(model: &mut dyn Model) -> Result<Vec<Result<ModelEvent, ModelError>>, ModelError> {
    let body = model.body(&request())?;
    let stream = model.send(body).await?;
    Ok(stream
        .filter(|e| std::future::ready(!matches!(e, Ok(ModelEvent::KeepAlive))))
        .collect()
        .await)
}

fn seen_one(server: &Server) -> common::Seen {
    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one request");
    seen[0].clone()
}

fn header<'a>(seen: &'a common::Seen, name: &str) -> &'a str {
    seen.headers
        .get(name)
        .unwrap_or_else(|| panic!("header {name}"))
        .to_str()
        .expect("ASCII")
}

#[tokio::test]
async fn each_provider_sends_its_request_and_decodes_its_stream() {
    for (format, file, name) in [
        (Format::OpenAiChat, "openai_chat.sse", "gpt-4.1-mini"),
        (Format::OpenAiResponses, "openai_responses.sse", "o4-mini"),
        (Format::Anthropic, "anthropic.sse", "claude-sonnet-4-5"),
        (Format::Gemini, "gemini.sse", "gemini-2.5-flash"),
    ] {
        let server = serve(Canned::sse(data(file))).await;
        let mut m = model(format, &server.base, name);
        assert_eq!(m.provider(), format.as_str());
        assert_eq!(m.model(), name);
        let events = run(m.as_mut()).await.expect("a response");
        let events: Vec<ModelEvent> = events.into_iter().map(|e| e.expect("no error")).collect();
        assert_eq!(
            events.last(),
            Some(&ModelEvent::Stop(StopReason::ToolUse)),
            "{format}"
        );
        let calls = events
            .iter()
            .filter(|e| matches!(e, ModelEvent::CallEnd { .. }))
            .count();
        assert_eq!(calls, 2, "{format}");

        let seen = seen_one(&server);
        assert_eq!(seen.method, "POST");
        assert_eq!(header(&seen, "accept"), "text/event-stream");
        assert_eq!(header(&seen, "content-type"), "application/json");
        let body: Value = serde_json::from_slice(&seen.body).expect("a JSON body");
        assert_eq!(
            seen.body,
            m.body(&request()).unwrap(),
            "{format}: the body as built"
        );
        match format {
            Format::OpenAiChat => {
                assert_eq!(seen.uri.path(), "/v1/chat/completions");
                assert_eq!(header(&seen, "authorization"), format!("Bearer {KEY}"));
                assert_eq!(body["model"], name);
                assert_eq!(body["stream"], true);
                assert_eq!(body["stream_options"], json!({"include_usage": true}));
                assert_eq!(body["max_completion_tokens"], 256);
                assert_eq!(body["messages"][0]["role"], "system");
            }
            Format::OpenAiResponses => {
                assert_eq!(seen.uri.path(), "/v1/responses");
                assert_eq!(header(&seen, "authorization"), format!("Bearer {KEY}"));
                assert_eq!(body["model"], name);
                assert_eq!(body["stream"], true);
                assert_eq!(body["store"], false);
                assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
                assert_eq!(body["max_output_tokens"], 256);
            }
            Format::Anthropic => {
                assert_eq!(seen.uri.path(), "/v1/messages");
                assert_eq!(header(&seen, "x-api-key"), KEY);
                assert_eq!(header(&seen, "anthropic-version"), "2023-06-01");
                assert!(seen.headers.get("authorization").is_none());
                assert_eq!(body["model"], name);
                assert_eq!(body["stream"], true);
                assert_eq!(body["max_tokens"], 256);
                assert_eq!(body["system"], "Be brief.");
            }
            Format::Gemini => {
                assert_eq!(
                    seen.uri.path(),
                    "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
                );
                assert_eq!(seen.uri.query(), Some("alt=sse"));
                assert_eq!(header(&seen, "x-goog-api-key"), KEY);
                assert!(body.get("model").is_none());
                assert!(body.get("stream").is_none());
                assert_eq!(body["generationConfig"]["maxOutputTokens"], 256);
            }
        }
        history::providers::validate(format, &body).expect("a body the provider's rules accept");
    }
}

async fn status_error(canned: Canned) -> ModelError {
    let server = serve(canned).await;
    let mut m = model(Format::OpenAiChat, &server.base, "gpt-4.1-mini");
    match run(m.as_mut()).await {
        Err(e) => e,
        Ok(events) => panic!("expected an error, got {events:?}"),
    }
}

#[tokio::test]
async fn http_statuses_map_to_status_errors() {
    let openai_429 = r#"{"error":{"message":"Rate limit reached for gpt-4.1-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
    let e = status_error(Canned::json(429, openai_429).header("retry-after", "7")).await;
    assert_eq!(e.kind, ModelErrorKind::Status);
    assert_eq!(e.status, Some(429));
    assert_eq!(e.retry_after_ms, Some(7000));
    assert_eq!(
        e.message,
        "Rate limit reached for gpt-4.1-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199000."
    );
    assert!(e.retryable());

    let e = status_error(
        Canned::json(429, openai_429)
            .header("retry-after-ms", "1500")
            .header("retry-after", "2"),
    )
    .await;
    assert_eq!(e.retry_after_ms, Some(1500));

    let e = status_error(Canned::json(
        500,
        r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error"}}"#,
    ))
    .await;
    assert_eq!((e.status, e.retry_after_ms), (Some(500), None));
    assert_eq!(
        e.message,
        "The server had an error while processing your request. Sorry about that!"
    );
    assert!(e.retryable());

    // A 400's message kept verbatim, quotes and all; not worth another attempt.
    let message = "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with maximum length 40, but got a string with length 41 instead.";
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": "messages[2].tool_calls[0].id", "code": "string_above_max_length"}});
    let e = status_error(Canned::json(400, &body.to_string())).await;
    assert_eq!(e.status, Some(400));
    assert_eq!(e.message, message);
    assert!(!e.retryable());
    assert_eq!(e.to_string(), format!("HTTP 400: {message}"));

    // A body that is not the provider's JSON: its text.
    let e = status_error(Canned {
        status: 502,
        headers: vec![("content-type", "text/html".into())],
        pieces: vec![b"<html>Bad Gateway</html>".to_vec()],
        break_after: false,
    })
    .await;
    assert_eq!(
        (e.status, e.message.as_str()),
        (Some(502), "<html>Bad Gateway</html>")
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error_naming_the_url() {
    let base = refused_base().await;
    let mut m = model(Format::OpenAiChat, &base, "gpt-4.1-mini");
    let e = run(m.as_mut()).await.expect_err("nothing listens");
    assert_eq!(e.kind, ModelErrorKind::Transport);
    assert_eq!(e.status, None);
    assert!(
        e.message.starts_with(&format!(
            "could not connect to {base}/v1/chat/completions: "
        )),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("refused"),
        "names the cause: {}",
        e.message
    );
    assert!(e.retryable());
}

#[tokio::test]
async fn a_2xx_that_is_not_an_event_stream_is_malformed() {
    let server = serve(Canned::json(200, r#"{"id":"chatcmpl-1","choices":[]}"#)).await;
    let mut m = model(Format::OpenAiChat, &server.base, "gpt-4.1-mini");
    let e = run(m.as_mut()).await.expect_err("not SSE");
    assert_eq!(e.kind, ModelErrorKind::Malformed);
    assert!(e.message.contains("application/json"), "{}", e.message);
    assert!(!e.retryable());
}

#[tokio::test]
async fn a_stream_that_ends_or_breaks_early_is_a_transport_error_after_its_events() {
    let full = String::from_utf8(data("anthropic.sse")).unwrap();
    let cut = full[..full
        .find("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3")
        .unwrap()]
        .to_string();
    for break_after in [false, true] {
        let server = serve(Canned {
            pieces: vec![cut.as_bytes().to_vec()],
            break_after,
            ..Canned::sse(Vec::new())
        })
        .await;
        let mut m = model(Format::Anthropic, &server.base, "claude-sonnet-4-5");
        let events = run(m.as_mut()).await.expect("the response began");
        let (last, received) = events.split_last().expect("events");
        let received: Vec<ModelEvent> = received.iter().map(|e| e.clone().unwrap()).collect();
        assert_eq!(
            received,
            vec![
                ModelEvent::ResponseId("msg_01XYZ".into()),
                ModelEvent::TextDelta("Checking ".into()),
                ModelEvent::TextDelta("both ✓.".into()),
            ],
            "break_after {break_after}"
        );
        let e = last.as_ref().expect_err("an error last");
        assert_eq!(e.kind, ModelErrorKind::Transport, "{e}");
        if !break_after {
            assert_eq!(
                e.message,
                "the stream ended before the response was complete"
            );
        } else {
            assert!(
                e.message.contains(&server.base),
                "a broken connection names the URL: {}",
                e.message
            );
        }
    }
}

/// `text` holds no part of the key that would identify it.
fn assert_no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "{what} shows the key: {text}");
    assert!(
        !text.contains("7f3a9c1e5b2d"),
        "{what} shows part of the key: {text}"
    );
}

fn assert_error_has_no_key(what: &str, e: &ModelError) {
    assert_no_key(what, &e.to_string());
    assert_no_key(what, &format!("{e:?}"));
}

#[tokio::test]
async fn the_key_appears_in_no_error_nor_debug_output() {
    // Configuration: the secret, the configuration, and every configuration error.
    let secret = Secret::new(KEY);
    assert_eq!(secret.to_string(), "[redacted]");
    assert_eq!(format!("{secret:?}"), "[redacted]");
    let config = ModelConfig::new(Format::Anthropic, "claude-sonnet-4-5", secret.clone());
    assert_no_key("ModelConfig", &format!("{config:?}"));

    let env = |name: &str| (name == "MY_KEY").then(|| format!("{KEY}\n"));
    let mut config_errors: Vec<ConfigError> = vec![
        ModelConfig::resolve("openai-chat:gpt-4.1-mini", None, env).unwrap_err(),
        ModelConfig::resolve("nope:gpt", None, env).unwrap_err(),
        ModelConfig::resolve("gpt", None, env).unwrap_err(),
        ModelConfig::resolve("gemini:", None, env).unwrap_err(),
    ];
    // A key no header can carry.
    let bad_key = ModelConfig::resolve("anthropic:claude", Some("MY_KEY"), env).unwrap();
    config_errors.push(connect(bad_key).err().expect("a newline in the key"));
    let mut bad_url = ModelConfig::new(Format::OpenAiChat, "m", secret.clone());
    bad_url.base_url = Some("ftp://example.invalid".into());
    config_errors.push(connect(bad_url).err().expect("not http"));
    let bad_model = ModelConfig::new(Format::Gemini, "a/b", secret.clone());
    config_errors.push(connect(bad_model).err().expect("not one segment"));
    assert!(matches!(config_errors[4], ConfigError::BadKey { .. }));
    for e in &config_errors {
        assert_no_key("ConfigError", &e.to_string());
        assert_no_key("ConfigError", &format!("{e:?}"));
    }

    // Model errors of every kind, the server echoing the key wherever it can.
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error"}}}}"#
    );
    let e = status_error(Canned::json(401, &echo)).await;
    assert_eq!(e.message, "Incorrect API key provided: [redacted].");
    assert_error_has_no_key("status", &e);

    let e = status_error(Canned {
        status: 403,
        headers: vec![("content-type", "text/plain".into())],
        pieces: vec![format!("key {KEY} is not allowed").into_bytes()],
        break_after: false,
    })
    .await;
    assert_error_has_no_key("status, text body", &e);

    let mut not_sse = Canned::json(200, &echo);
    not_sse.headers.push(("x-echo", KEY.to_string()));
    let e = status_error(not_sse).await;
    assert_eq!(e.kind, ModelErrorKind::Malformed);
    assert_error_has_no_key("malformed response", &e);

    let base = refused_base().await;
    let mut m = model(Format::OpenAiChat, &base, "gpt-4.1-mini");
    let e = run(m.as_mut()).await.expect_err("refused");
    assert_error_has_no_key("transport", &e);

    // Inside the stream: a data line that is not JSON, an error event, a cut.
    for (format, sse) in [
        (Format::OpenAiChat, format!("data: {{not json {KEY}\n\n")),
        (
            Format::Anthropic,
            format!("event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"authentication_error\",\"message\":\"bad key {KEY}\"}}}}\n\n"),
        ),
        (Format::Gemini, format!("data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"{KEY}\"}}]}}}}]}}\n\n")),
    ] {
        let server = serve(Canned::sse(sse.into_bytes())).await;
        let mut m = model(format, &server.base, "m");
        let events = run(m.as_mut()).await.expect("the response began");
        let e = events
            .last()
            .and_then(|r| r.as_ref().err())
            .unwrap_or_else(|| panic!("{format}: an error last: {events:?}"));
        assert_error_has_no_key(format.as_str(), e);
    }
}

/// The forms a key may come back in, each as the text a provider would quote: the key, its
/// percent-encoding and hex, and its base64 and base64url after 0, 1 and 2 other bytes (as in
/// `Basic base64(user:KEY)`). Each with the 6-byte windows that hold the key's bytes alone.
fn key_forms() -> Vec<(String, Vec<String>)> {
    use base64::Engine;
    let windows = |core: &str| -> Vec<String> {
        let b = core.as_bytes();
        b.windows(6)
            .map(|w| String::from_utf8(w.to_vec()).unwrap())
            .collect()
    };
    let mut forms = Vec::new();
    let pct: String =
        percent_encoding::utf8_percent_encode(KEY, percent_encoding::NON_ALPHANUMERIC).to_string();
    for plain in [
        KEY.to_owned(),
        pct,
        hex::encode(KEY),
        hex::encode_upper(KEY),
    ] {
        let w = windows(&plain);
        forms.push((plain, w));
    }
    for engine in [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ] {
        for prefix in ["", "u", "u:"] {
            let encoded = engine.encode(format!("{prefix}{KEY}"));
            // Characters 4..len-4 hold bits of the key alone (at most 2 bytes before it, the
            // padding after it).
            let core = &encoded[4..encoded.len() - 4];
            let w = windows(core);
            forms.push((encoded, w));
        }
    }
    forms
}

fn assert_no_piece(what: &str, message: &str, windows: &[String]) {
    if let Some(w) = windows.iter().find(|w| message.contains(w.as_str())) {
        panic!("{what}: the message quotes `{w}` of the key: {message}");
    }
}

/// Every message that quotes a provider is redacted before it is cut: a key in any of its
/// forms, at every offset around the cut (the 1,000 bytes of a body that is not the
/// provider's JSON, the 200 bytes of an event that is not what the provider sends), never
/// shows, whole or in part, and the quote is still there around it.
#[tokio::test]
async fn a_key_at_every_offset_around_every_cut_is_never_quoted() {
    // The two cuts (`http::QUOTED_BODY_BYTES_MAX`, `sse::QUOTED_DATA_BYTES_MAX`), and the bytes
    // of the quote that come before the event's data in the stream's case.
    const BODY_CUT: usize = 1000;
    const DATA_CUT: usize = 200;
    for (form, windows) in key_forms() {
        let len = form.len();
        for at in BODY_CUT.saturating_sub(len + 2)..=BODY_CUT + 2 {
            let body = format!("{}{form} trailing words", "x".repeat(at));
            let e = status_error(Canned {
                status: 502,
                headers: vec![("content-type", "text/html".into())],
                pieces: vec![body.into_bytes()],
                break_after: false,
            })
            .await;
            assert!(e.message.starts_with("xxxx"), "a quote: {}", e.message);
            assert_no_piece(&format!("body, {form} at {at}"), &e.message, &windows);
        }
        for at in DATA_CUT.saturating_sub(len + 2)..=DATA_CUT + 2 {
            let data = format!("{}{form} not json", "x".repeat(at));
            let server = serve(Canned::sse(format!("data: {data}\n\n").into_bytes())).await;
            let mut m = model(Format::OpenAiChat, &server.base, "gpt-4.1-mini");
            let events = run(m.as_mut()).await.expect("a stream");
            let e = events
                .into_iter()
                .find_map(Result::err)
                .expect("the event is refused");
            assert_eq!(e.kind, ModelErrorKind::Malformed, "{}", e.message);
            assert!(e.message.contains("data: xxxx"), "a quote: {}", e.message);
            assert_no_piece(&format!("event, {form} at {at}"), &e.message, &windows);
        }
    }
}
