//! Gemini: `{"contents": [...]}` plus `"systemInstruction"`.
//!
//! Consecutive turns of one role merge: a user turn holds its `functionResponse` parts first,
//! then any text; a model turn its text, then its `functionCall` parts. Empty text is left out
//! (a part must carry something), unless a thought signature came with it. A model turn's
//! provider state puts its `thoughtSignature`s back on the parts they came on: the message's
//! text part and each of its `functionCall` parts.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{
    arguments_object, body_array, check_id, object, string_field, Format, Msg, Node, Turns,
    Violation, LEADING_USER_TEXT,
};

const SHAPE: &str = "gemini.shape";
const CALL_TURN_POSITION: &str = "gemini.call_turn_position";
const MISSING_RESPONSE_TURN: &str = "gemini.missing_response_turn";
const RESPONSE_COUNT: &str = "gemini.response_count";
const RESPONSE_NAME_MISMATCH: &str = "gemini.response_name_mismatch";
const RESPONSE_ID_MISMATCH: &str = "gemini.response_id_mismatch";
const STRAY_FUNCTION_RESPONSE: &str = "gemini.stray_function_response";
const BAD_ID: &str = "gemini.bad_id";

/// A Gemini message's provider state: the `thoughtSignature` of its first text part, and of
/// each `functionCall` part in call order (`null` for none).
#[derive(Debug, Default, Deserialize)]
struct Signatures {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    calls: Vec<Option<String>>,
}

impl Signatures {
    /// The state's signatures; none for state that is not in this shape (see `state_items`).
    fn parse(items: Option<&str>) -> Signatures {
        items
            .and_then(|items| serde_json::from_str(items).ok())
            .unwrap_or_default()
    }
}

pub(super) fn render(system: Option<&str>, msgs: &[Msg<'_>]) -> Node {
    let mut turns = turns();
    let mut contents = Vec::new();
    for msg in msgs {
        push(msg, &mut turns, &mut contents);
    }
    turns.close(&mut contents);
    let mut body = BTreeMap::new();
    body.insert("contents", Node::Array(contents));
    if let Some(system) = system {
        body.insert("systemInstruction", system_field(system));
    }
    Node::Object(body)
}

/// The top-level `systemInstruction`.
pub(super) fn system_field(system: &str) -> Node {
    json!({"parts": [{"text": system}]}).into()
}

/// The turns a Gemini body's `contents` are made of.
pub(super) fn turns() -> Turns {
    Turns::new("parts", || json!({"text": LEADING_USER_TEXT}).into())
}

/// `msg`'s parts, added to `turns`; turns it closes go to `contents`.
pub(super) fn push(msg: &Msg<'_>, turns: &mut Turns, contents: &mut Vec<Node>) {
    match msg {
        Msg::User(text) => {
            if !text.is_empty() {
                turns
                    .turn("user", contents)
                    .rest
                    .push(json!({"text": text}).into());
            }
        }
        Msg::Assistant { text, calls, state } => {
            if let Some(parts) = state.and_then(whole_parts) {
                push_parts(&parts, calls, turns.turn("model", contents));
                return;
            }
            let sigs = Signatures::parse(*state);
            if !text.is_empty() || sigs.text.is_some() {
                let mut part = json!({ "text": text });
                if let Some(sig) = &sigs.text {
                    part["thoughtSignature"] = json!(sig);
                }
                turns.turn("model", contents).first.push(part.into());
            }
            for (k, c) in calls.iter().enumerate() {
                let sig = sigs.calls.get(k).and_then(|s| s.as_ref()).map(|s| json!(s));
                let part = call_part(c, sig.as_ref());
                turns.turn("model", contents).rest.push(part);
            }
        }
        Msg::Results(results) => {
            for r in results {
                turns.turn("user", contents).first.push(
                    json!({
                        "functionResponse": {
                            "id": r.id,
                            "name": r.name,
                            "response": {"content": r.content, "is_error": r.is_error},
                        }
                    })
                    .into(),
                );
            }
        }
    }
}

/// The parts of a provider state in its whole-message shape (`{"parts": [...]}`, schema 8:
/// every part of the message as it came, written when it holds parts of other kinds than text,
/// thought and call); `None` for the signatures' shape.
fn whole_parts(items: &str) -> Option<Vec<Value>> {
    match serde_json::from_str::<Value>(items).ok()? {
        Value::Object(mut fields) => match fields.remove("parts")? {
            Value::Array(parts) => Some(parts),
            _ => None,
        },
        _ => None,
    }
}

/// A message in its provider state's whole-message shape: every part as it came, in order,
/// but thought summaries (never sent back) and the `functionCall` parts, which are the
/// message's calls (the n-th part the n-th call, rebuilt from the journal's call, with the
/// part's own `thoughtSignature`). Calls the parts do not hold come last.
fn push_parts(parts: &[Value], calls: &[super::Call<'_>], turn: &mut super::Turn) {
    let mut calls = calls.iter();
    for part in parts {
        if part.get("functionCall").is_some() {
            if let Some(c) = calls.next() {
                turn.rest.push(call_part(c, part.get("thoughtSignature")));
            }
        } else if part.get("thought") != Some(&json!(true)) {
            turn.rest.push(part.clone().into());
        }
    }
    for c in calls {
        turn.rest.push(call_part(c, None));
    }
}

/// A call's `functionCall` part, with the thought signature it came with.
fn call_part(c: &super::Call<'_>, sig: Option<&Value>) -> Node {
    let call = Node::object([
        ("id", json!(c.id).into()),
        ("name", json!(c.name).into()),
        ("args", arguments_object(c.arguments)),
    ]);
    let mut part = BTreeMap::new();
    part.insert("functionCall", call);
    if let Some(sig) = sig {
        part.insert("thoughtSignature", sig.clone().into());
    }
    Node::Object(part)
}

/// One content's role and its functionCall / functionResponse parts as (name, id).
struct Content<'a> {
    role: &'a str,
    calls: Vec<(&'a str, Option<&'a str>)>,
    responses: Vec<(&'a str, Option<&'a str>)>,
}

fn parse(i: usize, c: &Value) -> Result<Content<'_>, Violation> {
    let c = object(c, i, SHAPE, "the content")?;
    let role = string_field(c, "role", i, SHAPE, "the content")?;
    if !matches!(role, "user" | "model") {
        return Err(Violation::new(i, SHAPE, format!("unknown role `{role}`")));
    }
    let parts = match c.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        _ => return Err(Violation::new(i, SHAPE, "`parts` is not a non-empty array")),
    };
    let mut content = Content {
        role,
        calls: Vec::new(),
        responses: Vec::new(),
    };
    for part in parts {
        let part = object(part, i, SHAPE, "a part")?;
        if let Some(sig) = part.get("thoughtSignature") {
            if !sig.is_string() || role != "model" {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    "a `thoughtSignature` that is not a string, or in a user turn",
                ));
            }
        }
        if let Some(text) = part.get("text") {
            if !text.is_string() {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    "a text part's `text` is not a string",
                ));
            }
        } else if let Some(call) = part.get("functionCall") {
            if role != "model" {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    "a functionCall part in a user turn",
                ));
            }
            let call = object(call, i, SHAPE, "a functionCall")?;
            let name = string_field(call, "name", i, SHAPE, "a functionCall")?;
            if !call.get("args").is_none_or(Value::is_object) {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    format!("functionCall `{name}` has non-object `args`"),
                ));
            }
            content.calls.push((name, id_of(call, i)?));
        } else if let Some(response) = part.get("functionResponse") {
            if role != "user" {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    "a functionResponse part in a model turn",
                ));
            }
            let response = object(response, i, SHAPE, "a functionResponse")?;
            let name = string_field(response, "name", i, SHAPE, "a functionResponse")?;
            if !response.get("response").is_some_and(Value::is_object) {
                return Err(Violation::new(
                    i,
                    SHAPE,
                    format!("functionResponse `{name}` has no object `response`"),
                ));
            }
            content.responses.push((name, id_of(response, i)?));
        } else {
            return Err(Violation::new(
                i,
                SHAPE,
                "a part is neither text, functionCall nor functionResponse",
            ));
        }
    }
    Ok(content)
}

fn id_of(obj: &Map<String, Value>, i: usize) -> Result<Option<&str>, Violation> {
    match obj.get("id") {
        None => Ok(None),
        Some(Value::String(id)) => {
            check_id(Format::Gemini, id, i, BAD_ID, "an id")?;
            Ok(Some(id))
        }
        Some(_) => Err(Violation::new(i, SHAPE, "an `id` is not a string")),
    }
}

pub(super) fn validate(body: &Value) -> Result<(), Violation> {
    let contents = body_array(body, "contents", SHAPE)?;
    if let Some(system) = body.get("systemInstruction") {
        if !system.get("parts").is_some_and(Value::is_array) {
            return Err(Violation::new(
                0,
                SHAPE,
                "`systemInstruction` has no `parts` array",
            ));
        }
    }
    let parsed = contents
        .iter()
        .enumerate()
        .map(|(i, c)| parse(i, c))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, c) in parsed.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| &parsed[p]);
        if !c.responses.is_empty() && prev.is_none_or(|p| p.role != "model" || p.calls.is_empty()) {
            return Err(Violation::new(
                i,
                STRAY_FUNCTION_RESPONSE,
                "a functionResponse turn that does not follow a model turn with functionCall parts",
            ));
        }
        if c.calls.is_empty() {
            continue;
        }
        if prev.is_none_or(|p| p.role != "user") {
            return Err(Violation::new(
                i,
                CALL_TURN_POSITION,
                "a model turn with functionCall parts must come right after a user turn or a \
                 function response turn",
            ));
        }
        let Some(next) = parsed.get(i + 1).filter(|n| n.role == "user") else {
            return Err(Violation::new(
                i,
                MISSING_RESPONSE_TURN,
                "a model turn with functionCall parts must be followed right away by a user \
                 turn with its functionResponse parts",
            ));
        };
        if next.responses.len() != c.calls.len() {
            return Err(Violation::new(
                i,
                RESPONSE_COUNT,
                format!(
                    "{} functionCall parts but {} functionResponse parts in the next turn",
                    c.calls.len(),
                    next.responses.len()
                ),
            ));
        }
        for (k, ((call_name, call_id), (resp_name, resp_id))) in
            c.calls.iter().zip(&next.responses).enumerate()
        {
            if call_name != resp_name {
                return Err(Violation::new(
                    i,
                    RESPONSE_NAME_MISMATCH,
                    format!(
                        "functionResponse {k} is named `{resp_name}`, its functionCall \
                         `{call_name}`"
                    ),
                ));
            }
            if let (Some(call_id), Some(resp_id)) = (call_id, resp_id) {
                if call_id != resp_id {
                    return Err(Violation::new(
                        i,
                        RESPONSE_ID_MISMATCH,
                        format!(
                            "functionResponse {k} has id `{resp_id}`, its functionCall \
                             `{call_id}`"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}
