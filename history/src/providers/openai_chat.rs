//! OpenAI Chat Completions: `{"messages": [...]}`.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::{body_array, check_id, first_duplicate, object, string_field, Format, Msg, Violation};

const SHAPE: &str = "openai_chat.shape";
const ASSISTANT_CONTENT: &str = "openai_chat.assistant_content";
const MISSING_TOOL_RESULT: &str = "openai_chat.missing_tool_result";
const STRAY_TOOL_MESSAGE: &str = "openai_chat.stray_tool_message";
const DUPLICATE_TOOL_CALL_ID: &str = "openai_chat.duplicate_tool_call_id";
const BAD_ID: &str = "openai_chat.bad_id";

pub(super) fn render(system: Option<&str>, msgs: &[Msg<'_>]) -> Value {
    let mut messages: Vec<Value> = system.map(system_message).into_iter().collect();
    for msg in msgs {
        push(msg, &mut messages);
    }
    json!({ "messages": messages })
}

/// The system prompt's message, first in `messages`.
pub(super) fn system_message(system: &str) -> Value {
    json!({"role": "system", "content": system})
}

/// `msg`'s messages, added to `messages`.
pub(super) fn push(msg: &Msg<'_>, messages: &mut Vec<Value>) {
    match msg {
        Msg::User(text) => messages.push(json!({"role": "user", "content": text})),
        Msg::Assistant { text, calls, .. } if calls.is_empty() => {
            messages.push(json!({"role": "assistant", "content": text}));
        }
        Msg::Assistant { text, calls, .. } => {
            let content = if text.is_empty() {
                Value::Null
            } else {
                Value::from(*text)
            };
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })
                })
                .collect();
            messages.push(json!({
                "role": "assistant",
                "content": content,
                "tool_calls": tool_calls,
            }));
        }
        Msg::Results(results) => {
            for r in results {
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": r.id,
                    "content": r.content,
                }));
            }
        }
    }
}

/// The assistant message whose tool calls the tool messages after it answer.
struct Open<'a> {
    index: usize,
    ids: Vec<&'a str>,
    answered: HashSet<&'a str>,
}

impl Open<'_> {
    fn check_answered(&self) -> Result<(), Violation> {
        match self.ids.iter().find(|id| !self.answered.contains(*id)) {
            None => Ok(()),
            Some(id) => Err(Violation::new(
                self.index,
                MISSING_TOOL_RESULT,
                format!(
                    "an assistant message with 'tool_calls' must be followed by tool messages \
                     responding to each 'tool_call_id'; none answers `{id}`"
                ),
            )),
        }
    }
}

/// Checks a body against OpenAI Chat's rules (DESIGN.md §6); returns the first violation.
pub(super) fn validate(body: &Value) -> Result<(), Violation> {
    let messages = body_array(body, "messages", SHAPE)?;
    let mut open: Option<Open<'_>> = None;
    for (i, m) in messages.iter().enumerate() {
        let m = object(m, i, SHAPE, "the message")?;
        let role = string_field(m, "role", i, SHAPE, "the message")?;
        if role == "tool" {
            check_tool_message(m, i, open.as_mut())?;
            continue;
        }
        if let Some(open) = open.take() {
            open.check_answered()?;
        }
        match role {
            "assistant" => open = check_assistant(m, i)?,
            "user" | "system" | "developer" => check_content(m, i)?,
            other => {
                return Err(Violation::new(i, SHAPE, format!("unknown role `{other}`")));
            }
        }
    }
    if let Some(open) = open {
        open.check_answered()?;
    }
    Ok(())
}

/// A tool message: it answers, once, a call of the assistant message the tool messages follow.
fn check_tool_message<'a>(
    m: &'a Map<String, Value>,
    i: usize,
    open: Option<&mut Open<'a>>,
) -> Result<(), Violation> {
    let id = string_field(m, "tool_call_id", i, SHAPE, "the tool message")?;
    check_id(Format::OpenAiChat, id, i, BAD_ID, "tool_call_id")?;
    check_content(m, i)?;
    let Some(open) = open else {
        return Err(Violation::new(
            i,
            STRAY_TOOL_MESSAGE,
            format!(
                "tool message for `{id}` does not follow an assistant message with \
                 'tool_calls'"
            ),
        ));
    };
    if !open.ids.contains(&id) {
        return Err(Violation::new(
            i,
            STRAY_TOOL_MESSAGE,
            format!(
                "tool message for `{id}` answers no call of the assistant message at \
                 index {}",
                open.index
            ),
        ));
    }
    if !open.answered.insert(id) {
        return Err(Violation::new(
            i,
            DUPLICATE_TOOL_CALL_ID,
            format!("a second tool message for `{id}`"),
        ));
    }
    Ok(())
}

/// An assistant message: content unless it has calls; with calls, the calls now open.
fn check_assistant<'a>(m: &'a Map<String, Value>, i: usize) -> Result<Option<Open<'a>>, Violation> {
    let Some(calls) = tool_calls(m, i)? else {
        let has_content = match m.get("content") {
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(parts)) => !parts.is_empty(),
            _ => false,
        };
        if !has_content {
            return Err(Violation::new(
                i,
                ASSISTANT_CONTENT,
                "an assistant message needs `content` unless it has `tool_calls`",
            ));
        }
        return Ok(None);
    };
    match m.get("content") {
        None | Some(Value::Null | Value::String(_) | Value::Array(_)) => {}
        Some(_) => {
            return Err(Violation::new(
                i,
                SHAPE,
                "`content` is neither a string, an array nor null",
            ));
        }
    }
    let ids = calls
        .iter()
        .map(|call| check_tool_call(call, i))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(id) = first_duplicate(ids.iter().copied()) {
        return Err(Violation::new(
            i,
            DUPLICATE_TOOL_CALL_ID,
            format!("`{id}` names two tool calls of one assistant message"),
        ));
    }
    Ok(Some(Open {
        index: i,
        ids,
        answered: HashSet::new(),
    }))
}

/// The message's `tool_calls`, if any: absent or null, else a non-empty array.
fn tool_calls(m: &Map<String, Value>, i: usize) -> Result<Option<&Vec<Value>>, Violation> {
    match m.get("tool_calls") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(calls)) if calls.is_empty() => Err(Violation::new(
            i,
            SHAPE,
            "`tool_calls` is an empty array (omit it instead)",
        )),
        Some(Value::Array(calls)) => Ok(Some(calls)),
        Some(_) => Err(Violation::new(i, SHAPE, "`tool_calls` is not an array")),
    }
}

/// One tool call of message `i`: an id in Chat's form, a function with a name and arguments.
fn check_tool_call(call: &Value, i: usize) -> Result<&str, Violation> {
    let call = object(call, i, SHAPE, "a tool call")?;
    let id = string_field(call, "id", i, SHAPE, "a tool call")?;
    check_id(Format::OpenAiChat, id, i, BAD_ID, "tool call id")?;
    if call.get("type").and_then(Value::as_str) != Some("function") {
        return Err(Violation::new(
            i,
            SHAPE,
            "a tool call's `type` is not \"function\"",
        ));
    }
    let function = object(
        call.get("function").unwrap_or(&Value::Null),
        i,
        SHAPE,
        "a tool call's `function`",
    )?;
    string_field(function, "name", i, SHAPE, "a tool call's function")?;
    string_field(function, "arguments", i, SHAPE, "a tool call's function")?;
    Ok(id)
}

/// A user, system, developer or tool message's content is a string or an array of parts.
fn check_content(m: &Map<String, Value>, i: usize) -> Result<(), Violation> {
    match m.get("content") {
        Some(Value::String(_) | Value::Array(_)) => Ok(()),
        _ => Err(Violation::new(
            i,
            SHAPE,
            "`content` is neither a string nor an array",
        )),
    }
}
