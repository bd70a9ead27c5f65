//! OpenAI Responses: `{"input": [...]}`.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::{body_array, check_id, object, string_field, Format, Msg, Violation};

const SHAPE: &str = "openai_responses.shape";
const MISSING_OUTPUT: &str = "openai_responses.missing_output";
const ORPHAN_OUTPUT: &str = "openai_responses.orphan_output";
const DUPLICATE_OUTPUT: &str = "openai_responses.duplicate_output";
const DUPLICATE_ID: &str = "openai_responses.duplicate_id";
const BAD_ID: &str = "openai_responses.bad_id";

pub(super) fn render(system: Option<&str>, msgs: &[Msg<'_>]) -> Value {
    let mut input = Vec::new();
    if let Some(system) = system {
        input.push(json!({"type": "message", "role": "system", "content": system}));
    }
    for msg in msgs {
        match msg {
            Msg::User(text) => {
                input.push(json!({"type": "message", "role": "user", "content": text}));
            }
            Msg::Assistant { text, calls } => {
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": text}));
                }
                for c in calls {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments,
                    }));
                }
            }
            Msg::Results(results) => {
                for r in results {
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": r.id,
                        "output": r.content,
                    }));
                }
            }
        }
    }
    json!({ "input": input })
}

/// Each `function_call`'s `call_id` -> (index of its item, answered yet).
type Calls<'a> = HashMap<&'a str, (usize, bool)>;

/// Checks a body against OpenAI Responses' rules (DESIGN.md §6); returns the first violation.
pub(super) fn validate(body: &Value) -> Result<(), Violation> {
    let input = body_array(body, "input", SHAPE)?;
    let mut calls: Calls<'_> = HashMap::new();
    let mut item_ids: HashSet<&str> = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        let item = object(item, i, SHAPE, "the item")?;
        check_item_id(item, i, &mut item_ids)?;
        match item_kind(item, i)? {
            "message" => check_message(item, i)?,
            "function_call" => check_function_call(item, i, &mut calls)?,
            "function_call_output" => check_function_call_output(item, i, &mut calls)?,
            other => {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    format!("unsupported item type `{other}`"),
                ));
            }
        }
    }
    let unanswered = calls
        .iter()
        .filter(|(_, (_, answered))| !answered)
        .min_by_key(|(_, (index, _))| *index);
    if let Some((call_id, (index, _))) = unanswered {
        return Err(Violation::new(
            *index,
            MISSING_OUTPUT,
            format!("no tool output found for function call `{call_id}`"),
        ));
    }
    Ok(())
}

/// An item's own `id`, when it has one: a string no earlier item has.
fn check_item_id<'a>(
    item: &'a Map<String, Value>,
    i: usize,
    item_ids: &mut HashSet<&'a str>,
) -> Result<(), Violation> {
    let Some(id) = item.get("id") else {
        return Ok(());
    };
    let id = id
        .as_str()
        .ok_or_else(|| Violation::new(i, SHAPE, "the item's `id` is not a string"))?;
    if !item_ids.insert(id) {
        return Err(Violation::new(
            i,
            DUPLICATE_ID,
            format!("duplicate item id `{id}`"),
        ));
    }
    Ok(())
}

/// The item's `type`; a message may leave out `"type": "message"`.
fn item_kind(item: &Map<String, Value>, i: usize) -> Result<&str, Violation> {
    match item.get("type") {
        Some(t) => t
            .as_str()
            .ok_or_else(|| Violation::new(i, SHAPE, "the item's `type` is not a string")),
        None if item.contains_key("role") => Ok("message"),
        None => Err(Violation::new(i, SHAPE, "the item has no `type`")),
    }
}

/// A message item: a known role, and content that is a string or an array of parts.
fn check_message(item: &Map<String, Value>, i: usize) -> Result<(), Violation> {
    let role = string_field(item, "role", i, SHAPE, "the message")?;
    if !matches!(role, "user" | "assistant" | "system" | "developer") {
        return Err(Violation::new(i, SHAPE, format!("unknown role `{role}`")));
    }
    if !matches!(
        item.get("content"),
        Some(Value::String(_) | Value::Array(_))
    ) {
        return Err(Violation::new(
            i,
            SHAPE,
            "the message's `content` is neither a string nor an array",
        ));
    }
    Ok(())
}

/// A function_call: a `call_id` in Responses' form that no earlier call has, a name, arguments.
fn check_function_call<'a>(
    item: &'a Map<String, Value>,
    i: usize,
    calls: &mut Calls<'a>,
) -> Result<(), Violation> {
    let call_id = string_field(item, "call_id", i, SHAPE, "the function_call")?;
    check_id(Format::OpenAiResponses, call_id, i, BAD_ID, "call_id")?;
    string_field(item, "name", i, SHAPE, "the function_call")?;
    string_field(item, "arguments", i, SHAPE, "the function_call")?;
    if let Some((first, _)) = calls.insert(call_id, (i, false)) {
        return Err(Violation::new(
            i,
            DUPLICATE_ID,
            format!("duplicate call_id `{call_id}` (first at index {first})"),
        ));
    }
    Ok(())
}

/// A function_call_output: it answers, once, a function_call that came before it.
fn check_function_call_output(
    item: &Map<String, Value>,
    i: usize,
    calls: &mut Calls<'_>,
) -> Result<(), Violation> {
    let call_id = string_field(item, "call_id", i, SHAPE, "the function_call_output")?;
    check_id(Format::OpenAiResponses, call_id, i, BAD_ID, "call_id")?;
    if !matches!(item.get("output"), Some(Value::String(_) | Value::Array(_))) {
        return Err(Violation::new(
            i,
            SHAPE,
            "the function_call_output's `output` is neither a string nor an array",
        ));
    }
    match calls.get_mut(call_id) {
        None => Err(Violation::new(
            i,
            ORPHAN_OUTPUT,
            format!("no tool call found for function call output with call_id `{call_id}`"),
        )),
        Some((_, answered)) if *answered => Err(Violation::new(
            i,
            DUPLICATE_OUTPUT,
            format!("a second function_call_output for call_id `{call_id}`"),
        )),
        Some((_, answered)) => {
            *answered = true;
            Ok(())
        }
    }
}
