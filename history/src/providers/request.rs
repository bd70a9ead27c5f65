//! A whole request body: the history, plus the tools the model is shown and the settings, in
//! each provider's shape. Everything a provider needs except the model's name (and, for
//! OpenAI and Anthropic, `stream`) and the credentials.

use serde_json::{json, Map, Value};

use super::{anthropic_name, history, Format, History, Node};
use crate::conversation::{Conversation, ModelSettings, ToolSpec};

/// The `max_tokens` an Anthropic body gets when the settings name none (Anthropic requires
/// one).
pub const ANTHROPIC_MAX_TOKENS_DEFAULT: u32 = 8192;

/// `conv` as [`history`] lays it out, plus `tools` (when there are any) and `settings`, in
/// `format`'s shape:
/// - `openai-chat`: `tools: [{"type": "function", "function": {name, description,
///   parameters}}]`, `max_completion_tokens`, `temperature`;
/// - `openai-responses`: `tools: [{"type": "function", name, description, parameters,
///   "strict": false}]` (Responses makes function tools strict unless told otherwise),
///   `max_output_tokens`, `temperature`;
/// - `anthropic`: `tools: [{name, description, input_schema}]` (names as [`anthropic_name`]
///   maps them, as the history's calls have them), `max_tokens` (always), `temperature`;
/// - `gemini`: `tools: [{"functionDeclarations": [{name, description,
///   parametersJsonSchema}]}]`, `generationConfig: {maxOutputTokens, temperature}`.
pub fn request_body(
    conv: &Conversation,
    tools: &[ToolSpec],
    settings: &ModelSettings,
    format: Format,
) -> History {
    let mut body = history(conv, format);
    let mut extra = Map::new();
    if !tools.is_empty() {
        extra.insert("tools".into(), tools_value(tools, format));
    }
    let temperature = settings.temperature.map(|t| json!(t));
    match format {
        Format::OpenAiChat => {
            put(
                &mut extra,
                "max_completion_tokens",
                settings.max_tokens.map(|m| json!(m)),
            );
            put(&mut extra, "temperature", temperature);
        }
        Format::OpenAiResponses => {
            put(
                &mut extra,
                "max_output_tokens",
                settings.max_tokens.map(|m| json!(m)),
            );
            put(&mut extra, "temperature", temperature);
        }
        Format::Anthropic => {
            let max = settings.max_tokens.unwrap_or(ANTHROPIC_MAX_TOKENS_DEFAULT);
            put(&mut extra, "max_tokens", Some(json!(max)));
            put(&mut extra, "temperature", temperature);
        }
        Format::Gemini => {
            let mut config = Map::new();
            put(
                &mut config,
                "maxOutputTokens",
                settings.max_tokens.map(|m| json!(m)),
            );
            put(&mut config, "temperature", temperature);
            if !config.is_empty() {
                extra.insert("generationConfig".into(), Value::Object(config));
            }
        }
    }
    body.0 = with_fields(
        std::mem::replace(&mut body.0, Node::Array(Vec::new())),
        extra,
    );
    body
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_string(), value);
    }
}

/// The `tools` value in `format`'s shape.
fn tools_value(tools: &[ToolSpec], format: Format) -> Value {
    let each = tools.iter().map(|t| match format {
        Format::OpenAiChat => json!({
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            }
        }),
        Format::OpenAiResponses => json!({
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": false,
        }),
        Format::Anthropic => json!({
            "name": anthropic_name(&t.name),
            "description": t.description,
            "input_schema": t.input_schema,
        }),
        Format::Gemini => json!({
            "name": t.name,
            "description": t.description,
            "parametersJsonSchema": t.input_schema,
        }),
    });
    match format {
        Format::Gemini => json!([{ "functionDeclarations": each.collect::<Vec<_>>() }]),
        _ => Value::Array(each.collect()),
    }
}

/// `node` (a rendered body: always an object) with `extra`'s fields added.
fn with_fields(node: Node, extra: Map<String, Value>) -> Node {
    match node {
        Node::Value(Value::Object(mut map)) => {
            map.extend(extra);
            Node::Value(Value::Object(map))
        }
        Node::Object(mut fields) => {
            for (key, value) in extra {
                fields.insert(leak_key(&key), Node::Value(value));
            }
            Node::Object(fields)
        }
        other => other,
    }
}

/// The body keys `request_body` adds, as the `'static` keys a [`Node::Object`] holds.
fn leak_key(key: &str) -> &'static str {
    const KEYS: [&str; 7] = [
        "tools",
        "max_completion_tokens",
        "max_output_tokens",
        "max_tokens",
        "temperature",
        "generationConfig",
        "stream",
    ];
    // Every key `request_body` inserts is in KEYS.
    KEYS.iter()
        .find(|k| **k == key)
        .copied()
        .unwrap_or("unknown")
}
