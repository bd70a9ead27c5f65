//! One POST and how its failures read: the client, the request's headers, and a failed
//! response turned into a [`ModelError`] (status, `Retry-After`, the provider's own message).

use std::time::{Duration, SystemTime};

use events::model::{ModelError, ModelErrorKind};
use history::providers::Format;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, USER_AGENT};
use reqwest::{Client, Response, StatusCode, Url};
use serde_json::Value;

use crate::config::{ConfigError, ModelConfig};
use crate::secret::Secret;

/// At most this much of an error response's body is read, in bytes.
const ERROR_BODY_BYTES_MAX: usize = 64 * 1024;

/// A body that is not the provider's JSON error is quoted up to this many bytes.
const QUOTED_BODY_BYTES_MAX: usize = 1000;

/// The HTTP client for one model: rustls, the configured timeouts, no redirects (a POST that is
/// redirected is a misconfigured base URL, better seen than followed).
pub(crate) fn client(config: &ModelConfig) -> Result<Client, ConfigError> {
    Client::builder()
        .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
        .read_timeout(Duration::from_millis(config.request_timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ConfigError::Client(error_chain(&e)))
}

/// The headers every request of `format` carries: the key (marked sensitive, so that no
/// `Debug` prints it), the API version where the provider wants one, JSON in, SSE out.
pub(crate) fn headers(format: Format, key: &str) -> Result<HeaderMap, ConfigError> {
    let bad_key = || ConfigError::BadKey { format };
    let mut headers = HeaderMap::new();
    let (name, value) = match format {
        Format::OpenAiChat | Format::OpenAiResponses => (
            reqwest::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| bad_key())?,
        ),
        Format::Anthropic => (
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_str(key).map_err(|_| bad_key())?,
        ),
        Format::Gemini => (
            HeaderName::from_static("x-goog-api-key"),
            HeaderValue::from_str(key).map_err(|_| bad_key())?,
        ),
    };
    let mut value = value;
    value.set_sensitive(true);
    headers.insert(name, value);
    if format == Format::Anthropic {
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2023-06-01"),
        );
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("tooljournal-llm/", env!("CARGO_PKG_VERSION"))),
    );
    Ok(headers)
}

/// Posts `body` to `url`; resolves to the response once its status is read and it is a 2xx
/// event stream.
pub(crate) async fn post(
    client: &Client,
    format: Format,
    url: &Url,
    headers: &HeaderMap,
    body: Vec<u8>,
    key: &Secret,
) -> Result<Response, ModelError> {
    let response = client
        .post(url.clone())
        .headers(headers.clone())
        .body(body)
        .send()
        .await
        .map_err(|e| transport_error(url, &e))?;
    let status = response.status();
    if !status.is_success() {
        let header_ms = retry_after_ms(response.headers(), SystemTime::now());
        let body = read_capped(response).await;
        // Gemini says how long to wait in its body (`google.rpc.RetryInfo`), not in a header.
        let retry_after_ms = header_ms.or_else(|| retry_info_ms(&body));
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        return Err(ModelError {
            kind: status_kind(format, status.as_u16(), json.as_ref()),
            status: Some(status.as_u16()),
            retry_after_ms,
            message: error_message(status, &body, key),
        });
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_event_stream(content_type) {
        return Err(ModelError {
            kind: ModelErrorKind::Malformed,
            status: None,
            retry_after_ms: None,
            message: format!(
                "{format}: {} answered {} with content-type `{content_type}`, not an event stream \
                 (text/event-stream)",
                shown(url),
                status.as_u16()
            ),
        });
    }
    Ok(response)
}

/// The kind of a provider's error answered with HTTP `status` (or reported in its stream with
/// the status the same error has as a response): [`ModelErrorKind::ContextOverflow`] when it
/// says the request is longer than the model's context window, else
/// [`ModelErrorKind::Status`]. `body` is the error as JSON, in the shape the provider sends
/// it as a response (`{"error": {...}}`, or Gemini's array of those), `None` when it was not
/// JSON.
///
/// By the provider's code where it gives one, else by the start of its message:
/// - any format, 413: the request body itself is too large (Anthropic's `request_too_large`,
///   which Cloudflare answers, perhaps not in JSON; a proxy's limit): only a smaller request
///   can pass;
/// - OpenAI (Chat and Responses), 400 with `error.code` `context_length_exceeded`; for Chat,
///   which other servers copy without that code, also llama.cpp's `error.type`
///   `exceed_context_size_error` and a message saying "maximum context length is" (vLLM, whose
///   error's fields are at the body's top, OpenRouter, and OpenAI's own older wording);
/// - Anthropic, 400 `invalid_request_error` whose message starts "prompt is too long" (or
///   "input length and `max_tokens` exceed context limit", the same window taken by the input
///   and the output asked for);
/// - Gemini, 400 `INVALID_ARGUMENT` whose message starts "The input token count" and says it
///   "exceeds the maximum number of tokens".
pub(crate) fn status_kind(format: Format, status: u16, body: Option<&Value>) -> ModelErrorKind {
    if status == 413 || (status == 400 && body.is_some_and(|b| overflow_body(format, b))) {
        ModelErrorKind::ContextOverflow
    } else {
        ModelErrorKind::Status
    }
}

/// Whether a 400's JSON error body says the context overflowed (see [`status_kind`]).
fn overflow_body(format: Format, body: &Value) -> bool {
    let body = match body {
        Value::Array(items) => items.first().unwrap_or(&Value::Null),
        other => other,
    };
    // vLLM puts the error's fields at the top (`{"object": "error", "message", …}`).
    let error = match body.get("error") {
        Some(error) if error.is_object() => error,
        _ => body,
    };
    let field = |name: &str| error[name].as_str().unwrap_or("");
    let message = field("message").to_ascii_lowercase();
    match format {
        Format::OpenAiResponses => field("code") == "context_length_exceeded",
        Format::OpenAiChat => {
            field("code") == "context_length_exceeded"
                || field("type") == "exceed_context_size_error"
                || message.contains("maximum context length is")
        }
        Format::Anthropic => {
            field("type") == "invalid_request_error"
                && (message.starts_with("prompt is too long")
                    || message.starts_with("input length and `max_tokens` exceed context limit"))
        }
        Format::Gemini => {
            field("status") == "INVALID_ARGUMENT"
                && message.starts_with("the input token count")
                && message.contains("exceeds the maximum number of tokens")
        }
    }
}

/// The HTTP status a provider's error object stands for, from whichever of its documented
/// shapes it has: a number in `status_code` (Groq), `status` or `code` (Gemini, vLLM,
/// OpenRouter), or the same as a string; else the status its type or code names (Anthropic's
/// `type`, OpenAI's `type` and `code`, Google's `status`); else 500, a server's error. A
/// status read here decides whether another attempt is made ([`ModelError::retryable`]: never
/// for a 4xx but 408, 409 and 429).
///
/// [`ModelError::retryable`]: events::model::ModelError::retryable
pub(crate) fn error_status(error: &Value) -> u16 {
    let http = |n: u64| (100..600).contains(&n).then_some(n as u16);
    for key in ["status_code", "status", "code"] {
        let field = &error[key];
        let number = field
            .as_u64()
            .or_else(|| field.as_str().and_then(|s| s.trim().parse().ok()));
        if let Some(status) = number.and_then(http) {
            return status;
        }
    }
    ["type", "code", "status"]
        .iter()
        .filter_map(|k| error[*k].as_str())
        .find_map(named_status)
        .unwrap_or(500)
}

/// The HTTP status an error's name stands for, in the providers' own words.
fn named_status(name: &str) -> Option<u16> {
    Some(match name.to_ascii_lowercase().as_str() {
        "invalid_request_error"
        | "invalid_argument"
        | "failed_precondition"
        | "out_of_range"
        | "context_length_exceeded"
        | "invalid_prompt"
        | "tool_use_failed"
        | "bad_request" => 400,
        "authentication_error" | "unauthenticated" | "invalid_api_key" => 401,
        "billing_error" => 402,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "not_found" | "model_not_found" => 404,
        "aborted" | "already_exists" => 409,
        "request_too_large" => 413,
        "rate_limit_error"
        | "rate_limit_exceeded"
        | "resource_exhausted"
        | "insufficient_quota"
        | "tokens" => 429,
        "cancelled" => 499,
        "api_error" | "server_error" | "internal" | "unknown" => 500,
        "unimplemented" => 501,
        "unavailable" => 503,
        "timeout_error" | "deadline_exceeded" => 504,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// The wait a Google error body asks for: `error.details[]` holding a
/// `type.googleapis.com/google.rpc.RetryInfo` whose `retryDelay` is a duration such as `"7s"`
/// or `"1.5s"`.
pub(crate) fn retry_info_ms(body: &[u8]) -> Option<u64> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value["error"]["details"]
        .as_array()?
        .iter()
        .filter(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            let seconds: f64 = d["retryDelay"].as_str()?.strip_suffix('s')?.parse().ok()?;
            (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).round() as u64)
        })
}

/// `text/event-stream`, parameters (`; charset=utf-8`) and case aside.
fn is_event_stream(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Up to [`ERROR_BODY_BYTES_MAX`] of the body; what was read before a failure.
async fn read_capped(mut response: Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES_MAX {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_BYTES_MAX);
    body
}

/// A failure to reach `url` or to read from it, as a transport error naming the URL and the
/// cause.
pub(crate) fn transport_error(url: &Url, error: &reqwest::Error) -> ModelError {
    let what = if error.is_timeout() {
        "timed out talking to"
    } else if error.is_connect() {
        "could not connect to"
    } else if error.is_body() || error.is_decode() {
        "the connection broke while reading from"
    } else {
        "the request could not be sent to"
    };
    ModelError {
        kind: ModelErrorKind::Transport,
        status: None,
        retry_after_ms: None,
        message: format!("{what} {}: {}", shown(url), error_chain(error)),
    }
}

/// The URL without any user name or password it may carry.
pub(crate) fn shown(url: &Url) -> String {
    let mut url = url.clone();
    // Fails only for a URL that cannot have credentials, which then has none to hide.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.to_string()
}

/// The error's causes, outermost first, joined by `: ` (reqwest's own `Display` says only
/// "error sending request"; the cause, such as "Connection refused", is in its sources).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        // reqwest's own line repeats the URL, which the caller already names.
        let text = match text.find(" for url (") {
            Some(at) => text[..at].to_string(),
            None => text,
        };
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// How long the provider asks to wait, in ms: `retry-after-ms` (ms, OpenAI), else
/// `Retry-After` in seconds or as an HTTP date (from `now`).
pub(crate) fn retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms.round() as u64);
        }
    }
    let value = text("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).round() as u64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}

/// The provider's own message from an error body, verbatim: `error.message` (OpenAI,
/// Anthropic, Gemini; Gemini's streaming endpoint wraps it in an array), else a string
/// `error`, `message` or `detail` (OpenAI-compatible servers), else the body's text cut to
/// [`QUOTED_BODY_BYTES_MAX`], else the status's reason.
pub(crate) fn error_message(status: StatusCode, body: &[u8], key: &Secret) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        if let Some(message) = json_message(&value) {
            return message;
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string();
    }
    key.quote(text, QUOTED_BODY_BYTES_MAX)
}

/// The message of a JSON error value, as [`error_message`] looks for it.
pub(crate) fn json_message(value: &Value) -> Option<String> {
    let value = match value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let obj = value.as_object()?;
    if let Some(error) = obj.get("error") {
        if let Some(message) = error.get("message").and_then(Value::as_str) {
            return Some(message.to_string());
        }
        if let Some(message) = error.as_str() {
            return Some(message.to_string());
        }
    }
    ["message", "detail"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.insert(*k, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(
            retry_after_ms(&map(&[("retry-after", "7")]), now),
            Some(7000)
        );
        assert_eq!(
            retry_after_ms(&map(&[("retry-after", "1.5")]), now),
            Some(1500)
        );
        assert_eq!(
            retry_after_ms(
                &map(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(250)
        );
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(
            retry_after_ms(
                &map(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
                now
            ),
            Some(30_000)
        );
        assert_eq!(
            retry_after_ms(
                &map(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
                now
            ),
            Some(0)
        );
        assert_eq!(retry_after_ms(&map(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after_ms(&map(&[]), now), None);
    }

    #[test]
    fn gemini_s_retry_info_is_a_wait() {
        let body =
            br#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"quota","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;
        assert_eq!(retry_info_ms(body), Some(7_000));
        let fraction = br#"{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}"#;
        assert_eq!(retry_info_ms(fraction), Some(1_500));
        assert_eq!(
            retry_info_ms(br#"{"error":{"message":"no details"}}"#),
            None
        );
        assert_eq!(retry_info_ms(b"not json"), None);
    }

    #[test]
    fn an_error_s_status_is_read_from_each_shape() {
        for (error, status) in [
            (
                json!({"type": "invalid_request_error", "status_code": 400}),
                400,
            ),
            (json!({"code": 429, "status": "RESOURCE_EXHAUSTED"}), 429),
            (
                json!({"code": "400", "message": "Token limit reached"}),
                400,
            ),
            (json!({"code": 400, "message": "Token limit reached"}), 400),
            (json!({"type": "overloaded_error"}), 529),
            (json!({"status": "INVALID_ARGUMENT"}), 400),
            (json!({"code": "context_length_exceeded"}), 400),
            (json!({"code": "rate_limit_exceeded"}), 429),
            (json!({"type": "tool_use_failed"}), 400),
            (json!({"message": "no idea"}), 500),
        ] {
            assert_eq!(error_status(&error), status, "{error}");
        }
    }

    #[test]
    fn error_messages_from_each_shape() {
        let s = StatusCode::BAD_REQUEST;
        assert_eq!(
            error_message(
                s,
                br#"{"error":{"message":"m1","type":"x"}}"#,
                &Secret::default()
            ),
            "m1"
        );
        assert_eq!(
            error_message(
                s,
                br#"[{"error":{"code":400,"message":"m2"}}]"#,
                &Secret::default()
            ),
            "m2"
        );
        assert_eq!(
            error_message(s, br#"{"error":"m3"}"#, &Secret::default()),
            "m3"
        );
        assert_eq!(
            error_message(s, br#"{"detail":"m4"}"#, &Secret::default()),
            "m4"
        );
        assert_eq!(
            error_message(s, b"plain text\n", &Secret::default()),
            "plain text"
        );
        assert_eq!(error_message(s, b"", &Secret::default()), "Bad Request");
        let long = "é".repeat(QUOTED_BODY_BYTES_MAX);
        let quoted = error_message(s, long.as_bytes(), &Secret::default());
        assert!(quoted.ends_with('…'));
        assert!(quoted.len() <= QUOTED_BODY_BYTES_MAX + '…'.len_utf8());
    }

    #[test]
    fn event_stream_content_types() {
        assert!(is_event_stream("text/event-stream"));
        assert!(is_event_stream("Text/Event-Stream; charset=utf-8"));
        assert!(!is_event_stream("application/json"));
        assert!(!is_event_stream(""));
    }
}
