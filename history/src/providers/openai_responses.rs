//! OpenAI Responses: `{"input": [...]}`. An assistant message's provider state (its `reasoning`
//! items, the hosted tools' calls such as `web_search_call`, and items of types not known here,
//! each as the response gave it) comes right before its own message and `function_call` items.
//! The items other than reasoning go back without their `id`: under `store: false` nothing was
//! kept to look an id up by (a reasoning item carries its encrypted content instead).

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::{
    body_array, check_id, object, state_items, string_field, Format, Msg, Node, Violation,
};

const SHAPE: &str = "openai_responses.shape";
const MISSING_OUTPUT: &str = "openai_responses.missing_output";
const ORPHAN_OUTPUT: &str = "openai_responses.orphan_output";
const DUPLICATE_OUTPUT: &str = "openai_responses.duplicate_output";
const DUPLICATE_ID: &str = "openai_responses.duplicate_id";
const BAD_ID: &str = "openai_responses.bad_id";
const REASONING_ALONE: &str = "openai_responses.reasoning_alone";

pub(super) fn render(system: Option<&str>, msgs: &[Msg<'_>]) -> Node {
    let mut input: Vec<Node> = system.map(system_item).into_iter().collect();
    for msg in msgs {
        push(msg, &mut input);
    }
    Node::object([("input", Node::Array(input))])
}

/// The system prompt's item, first in `input`.
pub(super) fn system_item(system: &str) -> Node {
    json!({"type": "message", "role": "system", "content": system}).into()
}

/// `msg`'s items, added to `input`.
pub(super) fn push(msg: &Msg<'_>, input: &mut Vec<Node>) {
    match msg {
        Msg::User(text) => {
            input.push(json!({"type": "message", "role": "user", "content": text}).into());
        }
        Msg::Assistant { text, calls, state } => {
            if let Some(items) = state {
                // The message and its calls are the journal's, rendered below, never the state's.
                let kept =
                    |t: &str| !matches!(t, "message" | "function_call" | "function_call_output");
                input.extend(state_items(items, kept).into_iter().map(without_id));
            }
            if !text.is_empty() {
                input.push(json!({"type": "message", "role": "assistant", "content": text}).into());
            }
            for c in calls {
                input.push(
                    json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments,
                    })
                    .into(),
                );
            }
        }
        Msg::Results(results) => {
            for r in results {
                input.push(
                    json!({
                        "type": "function_call_output",
                        "call_id": r.id,
                        "output": r.content,
                    })
                    .into(),
                );
            }
        }
    }
}

/// A state item as it goes back: a reasoning item as it came, any other without its `id`.
fn without_id(item: Node) -> Node {
    let Node::Raw(raw) = &item else {
        return item;
    };
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Object(mut fields)) if fields.get("type") != Some(&json!("reasoning")) => {
            fields.remove("id");
            Node::Value(Value::Object(fields))
        }
        _ => item,
    }
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
            "reasoning" => check_reasoning(item, i, input.get(i + 1))?,
            // Output the provider produced and needs back (a hosted tool's call, an item of a
            // type not known here), as it came: nothing of ours to check in it.
            _ if !item.contains_key("role") => {}
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

/// A reasoning item: a `summary` array, and the assistant's own output right after it (more
/// reasoning, its message or a function_call). OpenAI rejects a reasoning item "provided
/// without its required following item".
fn check_reasoning(
    item: &Map<String, Value>,
    i: usize,
    next: Option<&Value>,
) -> Result<(), Violation> {
    if !item.get("summary").is_some_and(Value::is_array) {
        return Err(Violation::new(
            i,
            SHAPE,
            "the reasoning item has no `summary` array",
        ));
    }
    let follows = next.is_some_and(|n| match n.get("type").and_then(Value::as_str) {
        Some("message") | None => n.get("role").and_then(Value::as_str) == Some("assistant"),
        Some("function_call_output") => false,
        // Reasoning, a function_call, a hosted tool's call: the assistant's own output.
        Some(_) => true,
    });
    if !follows {
        return Err(Violation::new(
            i,
            REASONING_ALONE,
            "a reasoning item must be followed by the assistant's own output (reasoning, its \
             message or a function_call)",
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
