//! The checks each request goes through before it gets a scripted reply, in the order a
//! provider would make them: credentials, then the body (JSON, `model`, `stream`, the
//! history's pairing rules, the tools' shape). The first one that fails answers the request
//! with the provider's error status and body, naming the violation.

use std::collections::HashMap;

use axum::http::HeaderMap;
use history::providers::{validate, Format};
use serde_json::{json, Map, Value};

use crate::errors;

/// A request turned away: what the client gets, and the violation it is recorded with.
#[derive(Debug)]
pub(crate) struct Rejection {
    pub status: u16,
    pub violation: String,
    pub body: Value,
}

impl Rejection {
    /// A rejection whose error message is the violation itself.
    fn plain(format: Format, status: u16, violation: String) -> Rejection {
        let body = errors::body(format, status, &format!("mockllm: {violation}"));
        Rejection {
            status,
            violation,
            body,
        }
    }
}

/// The request as the checks see it.
pub(crate) struct Incoming<'a> {
    pub format: Format,
    pub headers: &'a HeaderMap,
    pub query: &'a HashMap<String, String>,
    /// The body, or why it is not JSON.
    pub body: Result<&'a Value, &'a str>,
}

/// Runs every check on `req`; the first failure.
pub(crate) fn check(req: &Incoming<'_>, expected_key: Option<&str>) -> Result<(), Rejection> {
    auth(req, expected_key)?;
    let format = req.format;
    let body = req.body.map_err(|e| {
        Rejection::plain(
            format,
            400,
            format!("body.not_json: the body is not JSON ({e})"),
        )
    })?;
    body_fields(req, body).map_err(|v| Rejection::plain(format, 400, v))?;
    // The mock's own checks first: they are written from the providers' documentation apart
    // from `history`'s validators, so that a rule both hold is caught by the mock's words.
    tools(format, body).map_err(|v| Rejection::plain(format, 400, format!("tools.shape: {v}")))?;
    if format == Format::Anthropic {
        anthropic_tools_declared(body).map_err(|v| Rejection::plain(format, 400, v))?;
    }
    validate(format, body).map_err(|v| Rejection::plain(format, 400, v.to_string()))?;
    Ok(())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The provider's credentials: present, and the expected key when one is set.
fn auth(req: &Incoming<'_>, expected: Option<&str>) -> Result<(), Rejection> {
    let format = req.format;
    let (given, where_) = match format {
        Format::OpenAiChat | Format::OpenAiResponses => (
            header(req.headers, "authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim),
            "`Authorization: Bearer` header",
        ),
        Format::Anthropic => (header(req.headers, "x-api-key"), "`x-api-key` header"),
        // Google takes the key as a header or as `?key=`.
        Format::Gemini => (
            header(req.headers, "x-goog-api-key")
                .or_else(|| req.query.get("key").map(String::as_str)),
            "`x-goog-api-key` header",
        ),
    };
    let given = given.filter(|k| !k.is_empty());
    let Some(given) = given else {
        let violation = format!("auth.missing_key: no {where_}");
        return Err(auth_rejection(format, false, violation));
    };
    if let Some(expected) = expected {
        if given != expected {
            let violation = format!("auth.wrong_key: the {where_} holds another key");
            return Err(auth_rejection(format, true, violation));
        }
    }
    if format == Format::Anthropic && header(req.headers, "anthropic-version").is_none() {
        return Err(Rejection::plain(
            format,
            400,
            "anthropic.version_header: anthropic-version: header is required".into(),
        ));
    }
    Ok(())
}

/// What each provider answers a missing (`wrong == false`) or wrong key with.
fn auth_rejection(format: Format, wrong: bool, violation: String) -> Rejection {
    let (status, body) = match (format, wrong) {
        (Format::OpenAiChat | Format::OpenAiResponses, false) => (
            401,
            errors::openai(
                401,
                &format!("You didn't provide an API key. (mockllm: {violation})"),
                None,
            ),
        ),
        (Format::OpenAiChat | Format::OpenAiResponses, true) => (
            401,
            errors::openai(
                401,
                &format!("Incorrect API key provided. (mockllm: {violation})"),
                Some("invalid_api_key"),
            ),
        ),
        (Format::Anthropic, false) => (
            401,
            errors::anthropic(
                401,
                &format!("x-api-key header is required (mockllm: {violation})"),
            ),
        ),
        (Format::Anthropic, true) => (
            401,
            errors::anthropic(401, &format!("invalid x-api-key (mockllm: {violation})")),
        ),
        // Google answers an unknown key with 400 and API_KEY_INVALID, no key at all with 403.
        (Format::Gemini, false) => (
            403,
            errors::gemini(
                403,
                &format!(
                    "Method doesn't allow unregistered callers (callers without established \
                     identity). Please use API Key or other form of API consumer identity to \
                     call this API. (mockllm: {violation})"
                ),
                Vec::new(),
            ),
        ),
        (Format::Gemini, true) => (
            400,
            errors::gemini(
                400,
                &format!("API key not valid. Please pass a valid API key. (mockllm: {violation})"),
                vec![json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                })],
            ),
        ),
    };
    Rejection {
        status,
        violation,
        body,
    }
}

/// `model` and `stream` (OpenAI, Anthropic), `?alt=sse` (Gemini).
fn body_fields(req: &Incoming<'_>, body: &Value) -> Result<(), String> {
    if req.format == Format::Gemini {
        if req.query.get("alt").map(String::as_str) != Some("sse") {
            // Without it Google streams one JSON array, which this server does not serve.
            return Err("gemini.alt_sse: the query has no `alt=sse`".into());
        }
        return Ok(());
    }
    match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        _ => return Err("body.model: the body has no non-empty string `model`".into()),
    }
    if body.get("stream") != Some(&Value::Bool(true)) {
        return Err("body.stream: `stream` is not true (this server only streams)".into());
    }
    Ok(())
}

/// `^[a-zA-Z0-9_-]{1,64}$`: OpenAI's function names and Anthropic's tool names.
fn plain_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Gemini's function names: a letter or `_` first, then letters, digits, `_ . : -`; 128 at
/// most.
fn gemini_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    first_ok
        && name.len() <= 128
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b))
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} is not an object"))
}

/// `key` is absent or of the kind `is` accepts.
fn optional(
    map: &Map<String, Value>,
    key: &str,
    what: &str,
    kind: &str,
    is: fn(&Value) -> bool,
) -> Result<(), String> {
    match map.get(key) {
        Some(v) if !is(v) => Err(format!("{what}.{key} is not {kind}")),
        _ => Ok(()),
    }
}

fn name_field<'a>(
    map: &'a Map<String, Value>,
    what: &str,
    valid: fn(&str) -> bool,
) -> Result<&'a str, String> {
    let name = map
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what} has no string `name`"))?;
    if !valid(name) {
        return Err(format!(
            "{what}.name `{name}` is not a name the provider takes"
        ));
    }
    Ok(name)
}

/// Each `tools` entry in the documented shape of a function tool.
fn tools(format: Format, body: &Value) -> Result<(), String> {
    let Some(tools) = body.get("tools") else {
        return Ok(());
    };
    let tools = tools.as_array().ok_or("`tools` is not an array")?;
    for (i, tool) in tools.iter().enumerate() {
        let what = format!("tools[{i}]");
        let tool = obj(tool, &what)?;
        match format {
            Format::OpenAiChat => {
                if tool.get("type").and_then(Value::as_str) != Some("function") {
                    return Err(format!("{what}.type is not \"function\""));
                }
                let what = format!("{what}.function");
                let function = obj(tool.get("function").unwrap_or(&Value::Null), &what)?;
                name_field(function, &what, plain_name)?;
                optional(function, "description", &what, "a string", Value::is_string)?;
                optional(function, "parameters", &what, "an object", Value::is_object)?;
            }
            Format::OpenAiResponses => {
                if tool.get("type").and_then(Value::as_str) != Some("function") {
                    return Err(format!("{what}.type is not \"function\""));
                }
                name_field(tool, &what, plain_name)?;
                optional(tool, "description", &what, "a string", Value::is_string)?;
                optional(tool, "parameters", &what, "an object", Value::is_object)?;
                optional(tool, "strict", &what, "a boolean", Value::is_boolean)?;
            }
            Format::Anthropic => {
                name_field(tool, &what, plain_name)?;
                optional(tool, "description", &what, "a string", Value::is_string)?;
                let schema = tool
                    .get("input_schema")
                    .ok_or_else(|| format!("{what} has no `input_schema`"))?;
                let schema = obj(schema, &format!("{what}.input_schema"))?;
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    return Err(format!("{what}.input_schema.type is not \"object\""));
                }
            }
            Format::Gemini => {
                let decls = tool
                    .get("functionDeclarations")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("{what} has no `functionDeclarations` array"))?;
                for (j, decl) in decls.iter().enumerate() {
                    let what = format!("{what}.functionDeclarations[{j}]");
                    let decl = obj(decl, &what)?;
                    name_field(decl, &what, gemini_name)?;
                    optional(decl, "description", &what, "a string", Value::is_string)?;
                    optional(decl, "parameters", &what, "an object", Value::is_object)?;
                    optional(
                        decl,
                        "parametersJsonSchema",
                        &what,
                        "an object",
                        Value::is_object,
                    )?;
                    if decl.contains_key("parameters") && decl.contains_key("parametersJsonSchema")
                    {
                        return Err(format!(
                            "{what} has both `parameters` and `parametersJsonSchema`"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Anthropic: "Requests which include `tool_use` or `tool_result` blocks must define tools."
fn anthropic_tools_declared(body: &Value) -> Result<(), String> {
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if has_tools {
        return Ok(());
    }
    let messages = body.get("messages").and_then(Value::as_array);
    let uses_tools = messages.into_iter().flatten().any(|m| {
        m.get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|b| {
                matches!(
                    b.get("type").and_then(Value::as_str),
                    Some("tool_use" | "tool_result")
                )
            })
    });
    if uses_tools {
        return Err(
            "anthropic.tools_required: requests which include `tool_use` or \
                    `tool_result` blocks must define tools"
                .into(),
        );
    }
    Ok(())
}
