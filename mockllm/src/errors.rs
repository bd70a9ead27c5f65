//! Each provider's error body, as its API reference shows it.

use history::providers::Format;
use serde_json::{json, Value};

/// `format`'s error body for `status`, carrying `message`.
pub(crate) fn body(format: Format, status: u16, message: &str) -> Value {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => openai(status, message, None),
        Format::Anthropic => anthropic(status, message),
        Format::Gemini => gemini(status, message, Vec::new()),
    }
}

/// OpenAI: `{"error": {message, type, param, code}}`.
pub(crate) fn openai(status: u16, message: &str, code: Option<&str>) -> Value {
    let (kind, default_code) = match status {
        429 => ("requests", Some("rate_limit_exceeded")),
        500..=599 => ("server_error", None),
        _ => ("invalid_request_error", None),
    };
    json!({"error": {
        "message": message,
        "type": kind,
        "param": null,
        "code": code.or(default_code),
    }})
}

/// Anthropic: `{"type": "error", "error": {type, message}}`.
pub(crate) fn anthropic(status: u16, message: &str) -> Value {
    let kind = match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// Google: `{"error": {code, message, status, details?}}`.
pub(crate) fn gemini(status: u16, message: &str, details: Vec<Value>) -> Value {
    let name = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ if status >= 500 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    };
    let mut error = json!({"code": status, "message": message, "status": name});
    if !details.is_empty() {
        error["details"] = Value::Array(details);
    }
    json!({ "error": error })
}

/// The body of a 429 asking to wait `retry_after_s` seconds.
pub(crate) fn rate_limited(format: Format, retry_after_s: u64) -> Value {
    let message = format!("mockllm: rate limited, retry in {retry_after_s}s");
    match format {
        Format::Gemini => gemini(
            429,
            &message,
            vec![json!({
                "@type": "type.googleapis.com/google.rpc.RetryInfo",
                "retryDelay": format!("{retry_after_s}s"),
            })],
        ),
        _ => body(format, 429, &message),
    }
}

/// The message of OpenAI Responses' context overflow (the same in a 400 and in a stream's
/// `response.failed`; codex-rs `codex-api/src/sse/responses.rs`, test
/// `context_window_error_is_fatal`).
pub(crate) const RESPONSES_OVERFLOW: &str =
    "Your input exceeds the context window of this model. Please adjust your input and try again.";

/// OpenAI's code for a context overflow (Chat and Responses).
pub(crate) const OVERFLOW_CODE: &str = "context_length_exceeded";

/// `format`'s answer to a request longer than the model's context window: the status and the
/// body as the provider sends them (token counts made up).
pub(crate) fn context_overflow(format: Format) -> (u16, Value) {
    let body = match format {
        // As reported from the API in chathub-dev/chathub#126 and crewAIInc/crewAI-examples#121.
        Format::OpenAiChat => json!({"error": {
            "message": "This model's maximum context length is 128000 tokens. However, your \
                        messages resulted in 131072 tokens. Please reduce the length of the \
                        messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": OVERFLOW_CODE,
        }}),
        // The error object dyad-sh/dyad#1672 quotes from a Responses stream, as a response's
        // body.
        Format::OpenAiResponses => json!({"error": {
            "message": RESPONSES_OVERFLOW,
            "type": "invalid_request_error",
            "param": "input",
            "code": OVERFLOW_CODE,
        }}),
        // Anthropic's errors reference (`{"type": "error", "error": {type, message}}`); the
        // message as its API words it (pi-mono's overflow list, packages/ai/src/utils/overflow.ts).
        Format::Anthropic => anthropic(400, "prompt is too long: 213462 tokens > 200000 maximum"),
        // As the Gemini API answered in google-gemini/gemini-cli#5807.
        Format::Gemini => gemini(
            400,
            "The input token count (1091639) exceeds the maximum number of tokens allowed \
             (1048576).",
            Vec::new(),
        ),
    };
    (400, body)
}
