//! Request checks: credentials, body fields, the history's pairing rules, tools; each
//! violation recorded and answered with the provider's error, taking no scripted reply.

use crate::common;

use common::{auth, body, post, post_to, url, KEY};
use serde_json::{json, Value};
use tooljournal_mockllm::{Answer, Format, MockServer};

/// Sends `body` to `format` with `headers`; asserts the status and that the error message
/// names `rule`; the reply queued stays queued and the request is recorded with the rule.
async fn rejected(
    server: &MockServer,
    format: Format,
    headers: &[(String, String)],
    body: &Value,
    status: u16,
    rule: &str,
) -> Value {
    server.push(format, Answer::text("never sent").into());
    let before = server.remaining(format);
    let got = post_to(&url(server, format), headers, body).await;
    assert_eq!(got.status, status, "{format} {rule}: {}", got.text());
    let error = got.json();
    // Every provider's error body has `error.message`.
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(rule), "{format}: `{message}` names {rule}");
    assert_eq!(server.remaining(format), before, "{format}: no reply taken");
    let last = server.requests().pop().unwrap();
    assert_eq!(last.format, format);
    let violation = last.violation.unwrap_or_default();
    assert!(violation.starts_with(rule), "{violation}");
    error
}

#[tokio::test]
async fn a_missing_key_gets_each_providers_auth_error() {
    let server = MockServer::start();
    for format in Format::ALL {
        let mut headers = auth(format, KEY);
        headers.retain(|(n, _)| n == "anthropic-version");
        let status = if format == Format::Gemini { 403 } else { 401 };
        let error = rejected(
            &server,
            format,
            &headers,
            &body(format),
            status,
            "auth.missing_key",
        )
        .await;
        match format {
            Format::OpenAiChat | Format::OpenAiResponses => {
                assert_eq!(error["error"]["type"], "invalid_request_error")
            }
            Format::Anthropic => {
                assert_eq!(error["type"], "error");
                assert_eq!(error["error"]["type"], "authentication_error");
            }
            Format::Gemini => {
                assert_eq!(error["error"]["code"], 403);
                assert_eq!(error["error"]["status"], "PERMISSION_DENIED");
            }
        }
    }
}

#[tokio::test]
async fn the_expected_key_is_enforced() {
    let server = MockServer::start();
    server.expect_key("sk-right");
    for format in Format::ALL {
        let error = rejected(
            &server,
            format,
            &auth(format, "sk-wrong"),
            &body(format),
            if format == Format::Gemini { 400 } else { 401 },
            "auth.wrong_key",
        )
        .await;
        match format {
            Format::OpenAiChat | Format::OpenAiResponses => {
                assert_eq!(error["error"]["code"], "invalid_api_key")
            }
            Format::Anthropic => assert_eq!(error["error"]["type"], "authentication_error"),
            Format::Gemini => {
                assert_eq!(error["error"]["status"], "INVALID_ARGUMENT");
                assert_eq!(error["error"]["details"][0]["reason"], "API_KEY_INVALID");
            }
        }
        let got = post_to(
            &url(&server, format),
            &auth(format, "sk-right"),
            &body(format),
        )
        .await;
        assert_eq!(got.status, 200, "{format}");
    }
    // Gemini also takes the key as `?key=`.
    let g = Format::Gemini;
    server.push(g, Answer::text("ok").into());
    let got = post_to(&format!("{}&key=sk-right", url(&server, g)), &[], &body(g)).await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn body_fields_and_headers_each_provider_requires() {
    let server = MockServer::start();
    let a = Format::Anthropic;
    let mut headers = auth(a, KEY);
    headers.retain(|(n, _)| n != "anthropic-version");
    rejected(
        &server,
        a,
        &headers,
        &body(a),
        400,
        "anthropic.version_header",
    )
    .await;

    for format in [
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
    ] {
        let mut b = body(format);
        b["stream"] = json!(false);
        rejected(&server, format, &auth(format, KEY), &b, 400, "body.stream").await;
        let mut b = body(format);
        b.as_object_mut().unwrap().remove("model");
        rejected(&server, format, &auth(format, KEY), &b, 400, "body.model").await;
    }

    let g = Format::Gemini;
    let no_sse = url(&server, g).replace("?alt=sse", "");
    server.push(g, Answer::text("never").into());
    let got = post_to(&no_sse, &auth(g, KEY), &body(g)).await;
    assert_eq!(got.status, 400);
    assert!(got.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("gemini.alt_sse"));
    assert_eq!(server.remaining(g), 1, "the reply is still queued");

    let f = Format::OpenAiChat;
    let got = common::client()
        .post(url(&server, f))
        .header("authorization", format!("Bearer {KEY}"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 400);
    let last = server.requests().pop().unwrap();
    assert_eq!(last.body, Value::Null);
    assert!(last.violation.unwrap().starts_with("body.not_json"));
}

#[tokio::test]
async fn an_unanswered_call_breaks_each_providers_pairing_rule() {
    let server = MockServer::start();
    let cases = [
        (
            Format::OpenAiChat,
            "messages",
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                 "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "user", "content": "and?"},
            ]),
            "openai_chat.missing_tool_result",
        ),
        (
            Format::OpenAiResponses,
            "input",
            json!([
                {"type": "message", "role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "call_1", "name": "read_file",
                 "arguments": "{}"},
            ]),
            "openai_responses.missing_output",
        ),
        (
            Format::Anthropic,
            "messages",
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                 "name": "read_file", "input": {}}]},
                {"role": "user", "content": [{"type": "text", "text": "and?"}]},
            ]),
            "anthropic.missing_tool_result",
        ),
        (
            Format::Gemini,
            "contents",
            json!([
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "read_file",
                 "args": {}}}]},
                {"role": "user", "parts": [{"text": "and?"}]},
            ]),
            "gemini.",
        ),
    ];
    for (format, key, history, rule) in cases {
        let mut b = body(format);
        b[key] = history;
        rejected(&server, format, &auth(format, KEY), &b, 400, rule).await;
        assert_eq!(
            server.requests().last().unwrap().body,
            b,
            "the body is recorded"
        );
    }
}

#[tokio::test]
async fn anthropic_tool_blocks_need_tools_declared() {
    let server = MockServer::start();
    let a = Format::Anthropic;
    let mut b = body(a);
    b["messages"] = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
         "name": "read_file", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
         "content": "file text"}]},
    ]);
    server.push(a, Answer::text("ok").into());
    let got = post(&server, a, &b).await;
    assert_eq!(got.status, 200, "{}", got.text());
    b.as_object_mut().unwrap().remove("tools");
    rejected(
        &server,
        a,
        &auth(a, KEY),
        &b,
        400,
        "anthropic.tools_required",
    )
    .await;
}

#[tokio::test]
async fn tools_must_have_the_documented_shape() {
    let server = MockServer::start();
    let bad = [
        (
            Format::OpenAiChat,
            json!([{"type": "function", "name": "read_file"}]),
        ),
        (
            Format::OpenAiResponses,
            json!([{"type": "function", "name": "read file", "parameters": {}}]),
        ),
        (
            Format::Anthropic,
            json!([{"name": "read_file", "description": "x"}]),
        ),
        (
            Format::Gemini,
            json!([{"functionDeclarations": [{"name": "1read", "parametersJsonSchema": {}}]}]),
        ),
    ];
    for (format, tools) in bad {
        let mut b = body(format);
        b["tools"] = tools;
        rejected(&server, format, &auth(format, KEY), &b, 400, "tools.shape").await;
    }
}

#[tokio::test]
async fn no_reply_left_and_unknown_routes() {
    let server = MockServer::start();
    let f = Format::OpenAiResponses;
    let got = post(&server, f, &body(f)).await;
    assert_eq!(got.status, 400);
    assert!(got.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("mockllm.no_reply"));
    assert!(server.requests()[0]
        .violation
        .as_deref()
        .unwrap()
        .starts_with("mockllm.no_reply"));

    let base = server.base_url(f);
    let got = post_to(&format!("{base}/completions"), &auth(f, KEY), &body(f)).await;
    assert_eq!(got.status, 404);
    let g = Format::Gemini;
    let wrong = url(&server, g).replace("streamGenerateContent", "generateContent");
    let got = post_to(&wrong, &auth(g, KEY), &body(g)).await;
    assert_eq!(got.status, 404);
    assert_eq!(server.requests().len(), 1, "404s are not recorded");
}

#[tokio::test]
async fn requests_are_recorded_in_arrival_order_across_formats() {
    let server = MockServer::start();
    for format in Format::ALL {
        server.push(format, Answer::text("x").into());
    }
    for format in Format::ALL.into_iter().rev() {
        post(&server, format, &body(format)).await;
    }
    let formats: Vec<Format> = server.requests().iter().map(|r| r.format).collect();
    let mut expected = Format::ALL.to_vec();
    expected.reverse();
    assert_eq!(formats, expected);
    assert!(server.requests().iter().all(|r| r.violation.is_none()));
    assert!(Format::ALL.iter().all(|f| server.remaining(*f) == 0));
}
