//! Shared by the mockllm tests: valid request bodies, sending them with each provider's
//! credentials, and reading the answer as raw bytes and as SSE events.

#![allow(dead_code)] // each test module uses its own part

use std::convert::Infallible;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use tooljournal_mockllm::{Format, MockServer};

pub const KEY: &str = "sk-mock-test";
pub const GEMINI_MODEL: &str = "gemini-test";

/// A valid first-turn body for `format`, with one tool declared.
pub fn body(format: Format) -> Value {
    match format {
        Format::OpenAiChat => json!({
            "model": "gpt-test",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file",
                "parameters": {"type": "object"},
            }}],
        }),
        Format::OpenAiResponses => json!({
            "model": "gpt-test",
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "input": [{"type": "message", "role": "user", "content": "hi"}],
            "tools": [{"type": "function", "name": "read_file", "description": "Read a file",
                       "parameters": {"type": "object"}, "strict": false}],
        }),
        Format::Anthropic => json!({
            "model": "claude-test",
            "stream": true,
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "tools": [{"name": "read_file", "description": "Read a file",
                       "input_schema": {"type": "object"}}],
        }),
        Format::Gemini => json!({
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Read a file",
                       "parametersJsonSchema": {"type": "object"}}]}],
        }),
    }
}

/// The URL of `format`'s streaming endpoint on `server`, as a client builds it from the base.
pub fn url(server: &MockServer, format: Format) -> String {
    let base = server.base_url(format);
    match format {
        Format::OpenAiChat => format!("{base}/chat/completions"),
        Format::OpenAiResponses => format!("{base}/responses"),
        Format::Anthropic => format!("{base}/v1/messages"),
        Format::Gemini => {
            format!("{base}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse")
        }
    }
}

/// The auth headers `format` takes, holding `key`.
pub fn auth(format: Format, key: &str) -> Vec<(String, String)> {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => {
            vec![("authorization".into(), format!("Bearer {key}"))]
        }
        Format::Anthropic => vec![
            ("x-api-key".into(), key.into()),
            ("anthropic-version".into(), "2023-06-01".into()),
        ],
        Format::Gemini => vec![("x-goog-api-key".into(), key.into())],
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a reqwest client builds")
}

/// What came back: status, headers, every byte received, and the error that ended the body
/// early, if one did.
pub struct Got {
    pub status: u16,
    pub headers: HeaderMap,
    pub raw: Vec<u8>,
    pub error: Option<String>,
}

impl Got {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.raw)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// The SSE events in the bytes received (a trailing unfinished event is not one).
    pub async fn events(&self) -> Vec<eventsource_stream::Event> {
        let chunks =
            futures_util::stream::iter([Ok::<_, Infallible>(self.raw.clone())]).eventsource();
        chunks
            .map(|e| e.expect("SSE parses"))
            .collect::<Vec<_>>()
            .await
    }

    /// The events as (event name, data as JSON); panics on a data line that is not JSON.
    pub async fn json_events(&self) -> Vec<(String, Value)> {
        self.events()
            .await
            .into_iter()
            .map(|e| {
                let data = serde_json::from_str(&e.data)
                    .unwrap_or_else(|err| panic!("data is not JSON ({err}): {}", e.data));
                (e.event, data)
            })
            .collect()
    }
}

/// Sends `body` to `url` with `headers` and reads the whole answer.
pub async fn post_to(url: &str, headers: &[(String, String)], body: &Value) -> Got {
    let mut req = client()
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("a Value serializes"));
    for (n, v) in headers {
        req = req.header(n, v);
    }
    let resp = req.send().await.expect("the request is answered");
    read(resp).await
}

/// Sends `body` to `format`'s endpoint with the right credentials.
pub async fn post(server: &MockServer, format: Format, body: &Value) -> Got {
    post_to(&url(server, format), &auth(format, KEY), body).await
}

/// Reads a response to its end (or its error).
pub async fn read(resp: reqwest::Response) -> Got {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut raw = Vec::new();
    let mut error = None;
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => raw.extend_from_slice(&bytes),
            Err(e) => {
                error = Some(format!("{e:?}"));
                break;
            }
        }
    }
    Got {
        status,
        headers,
        raw,
        error,
    }
}

/// The events named `name`.
pub fn named<'a>(events: &'a [(String, Value)], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v)
        .collect()
}
