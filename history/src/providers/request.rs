//! A whole request body: the history, plus the tools the model is shown and the settings, in
//! each provider's shape. Everything a provider needs except the model's name (and, for
//! OpenAI and Anthropic, `stream`) and the credentials.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::{anthropic_name, history, Format, History, Node};
use crate::conversation::{Conversation, Message, ModelSettings, ToolSpec};

/// The `max_tokens` an Anthropic body gets when the settings name none (Anthropic requires
/// one).
pub const ANTHROPIC_MAX_TOKENS_DEFAULT: u32 = 4096;

/// `conv` as [`history`] lays it out, plus `tools` (when there are any, in their order) and
/// `settings`, in `format`'s shape:
/// - `openai-chat`: `tools: [{"type": "function", "function": {name, description,
///   parameters}}]`, `max_completion_tokens`, `temperature`;
/// - `openai-responses`: `tools: [{"type": "function", name, description, parameters,
///   "strict": false}]` (Responses makes function tools strict unless told otherwise, and a
///   strict schema must close every object), `max_output_tokens`, `temperature`;
/// - `anthropic`: `tools: [{name, description, input_schema}]` (names as [`anthropic_name`]
///   maps them, as the history's calls have them), `max_tokens` (always: Anthropic requires
///   it; [`ANTHROPIC_MAX_TOKENS_DEFAULT`] when the settings name none), `temperature`;
/// - `gemini`: `tools: [{"functionDeclarations": [{name, description,
///   parametersJsonSchema}]}]`, `generationConfig: {maxOutputTokens, temperature}`.
///
/// A setting that is `None` is left out (the provider's default), as is `tools` when there
/// are none. Anthropic rejects a body whose messages hold tool calls or results and that
/// defines no tools ([`super::validate`]'s `anthropic.tools_missing`).
pub fn request_body(
    conv: &Conversation,
    tools: &[ToolSpec],
    settings: &ModelSettings,
    format: Format,
) -> History {
    let extra = header_fields(tools, settings, format);
    let History(node) = history(conv, format);
    History(with_fields(node, extra))
}

/// The fields [`request_body`] adds to the history: `tools` (when there are any) and the
/// settings, in `format`'s shape.
pub(crate) fn header_fields(
    tools: &[ToolSpec],
    settings: &ModelSettings,
    format: Format,
) -> Vec<(&'static str, Value)> {
    let mut extra: Vec<(&'static str, Value)> = Vec::new();
    if !tools.is_empty() {
        extra.push(("tools", tools_value(tools, format)));
    }
    let max_tokens = settings.max_tokens.map(|m| json!(m));
    let temperature = settings.temperature.map(|t| json!(t));
    match format {
        Format::OpenAiChat => {
            extra.extend(max_tokens.map(|m| ("max_completion_tokens", m)));
            extra.extend(temperature.map(|t| ("temperature", t)));
        }
        Format::OpenAiResponses => {
            extra.extend(max_tokens.map(|m| ("max_output_tokens", m)));
            extra.extend(temperature.map(|t| ("temperature", t)));
        }
        Format::Anthropic => {
            let max = settings.max_tokens.unwrap_or(ANTHROPIC_MAX_TOKENS_DEFAULT);
            extra.push(("max_tokens", json!(max)));
            extra.extend(temperature.map(|t| ("temperature", t)));
        }
        Format::Gemini => {
            let mut config = serde_json::Map::new();
            config.extend(max_tokens.map(|m| ("maxOutputTokens".to_string(), m)));
            config.extend(temperature.map(|t| ("temperature".to_string(), t)));
            if !config.is_empty() {
                extra.push(("generationConfig", Value::Object(config)));
            }
        }
    }
    extra
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

/// `node` (a rendered body: always an object, as every format's `render` makes it) with
/// `extra`'s fields added.
fn with_fields(node: Node, extra: Vec<(&'static str, Value)>) -> Node {
    match node {
        Node::Value(Value::Object(mut map)) => {
            map.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
            Node::Value(Value::Object(map))
        }
        Node::Object(mut fields) => {
            fields.extend(extra.into_iter().map(|(k, v)| (k, Node::Value(v))));
            Node::Object(fields)
        }
        other => other,
    }
}

/// A stand-in for every tool `conv`'s calls name, in the order first called: the name, no
/// description, and a schema that takes any object. For checking a history's pairing with
/// [`super::validate`] when the tools it was made with are not at hand (Anthropic takes no
/// tool call without tools); never a substitute for the real tools in a request sent.
pub fn stand_in_tools(conv: &Conversation) -> Vec<ToolSpec> {
    let mut seen = HashSet::new();
    conv.messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { calls, .. } => calls.as_slice(),
            _ => &[],
        })
        .filter(|c| seen.insert(c.name.as_str()))
        .map(|c| ToolSpec {
            name: c.name.clone(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect()
}
