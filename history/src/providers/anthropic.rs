//! Anthropic Messages: `{"messages": [...]}` plus a top-level `"system"`.
//!
//! Roles alternate strictly, so consecutive messages of one role merge: a user turn holds its
//! `tool_result` blocks first, then any text; an assistant turn its `thinking` and
//! `redacted_thinking` blocks (its provider state, verbatim), then its text, then its
//! `tool_use` blocks. A message whose provider state is the whole message (server tools'
//! blocks, citations, thinking between other blocks) is its blocks in order instead, the
//! `tool_use` ones rebuilt from its calls. Blank text (Anthropic rejects whitespace-only text
//! blocks) is left out.

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Map, Value};

use super::{
    arguments_object, body_array, check_id, first_duplicate, fit, fits, is_blank, object,
    state_items, string_field, Format, Msg, Node, Turns, Violation, LEADING_USER_TEXT,
};

const SHAPE: &str = "anthropic.shape";
const FIRST_NOT_USER: &str = "anthropic.first_not_user";
const ROLES_ALTERNATE: &str = "anthropic.roles_alternate";
const EMPTY_CONTENT: &str = "anthropic.empty_content";
const EMPTY_TEXT: &str = "anthropic.empty_text";
const BAD_ID: &str = "anthropic.bad_id";
const BAD_NAME: &str = "anthropic.bad_name";
const MISSING_TOOL_RESULT: &str = "anthropic.missing_tool_result";
const TOOL_RESULT_NOT_FIRST: &str = "anthropic.tool_result_not_first";
const UNKNOWN_TOOL_RESULT: &str = "anthropic.unknown_tool_result";
const DUPLICATE_TOOL_RESULT: &str = "anthropic.duplicate_tool_result";
const EMPTY_ERROR_RESULT: &str = "anthropic.empty_error_result";
const DUPLICATE_TOOL_USE_ID: &str = "anthropic.duplicate_tool_use_id";
const THINKING_NOT_FIRST: &str = "anthropic.thinking_not_first";
const TOOLS_MISSING: &str = "anthropic.tools_missing";
const DUPLICATE_TOOL_NAME: &str = "anthropic.duplicate_tool_name";

/// The longest tool name Anthropic takes.
const MAX_NAME: usize = 64;

/// Content for an error result that came with none (Anthropic rejects an empty error result;
/// results built from a journal always have content).
const EMPTY_ERROR_TEXT: &str = "(error without a message)";

fn valid_name(s: &str) -> bool {
    fits(s, MAX_NAME)
}

/// A tool name in the form Anthropic takes (`^[a-zA-Z0-9_-]{1,64}$`): the name itself if it
/// already is, else mapped as call ids are ([`super::provider_id`]): other characters replaced
/// by `_`, cut to fit 64 with `_` and 8 hex digits of its sha256.
pub fn anthropic_name(original: &str) -> String {
    fit(original, MAX_NAME)
}

pub(super) fn render(system: Option<&str>, msgs: &[Msg<'_>]) -> Node {
    let mut turns = turns();
    let mut messages = Vec::new();
    for msg in msgs {
        push(msg, &mut turns, &mut messages);
    }
    turns.close(&mut messages);
    let mut body = BTreeMap::new();
    if let Some(system) = system {
        body.insert("system", system_field(system));
    }
    body.insert("messages", Node::Array(messages));
    Node::Object(body)
}

/// The top-level `system`.
pub(super) fn system_field(system: &str) -> Node {
    json!(system).into()
}

/// The turns an Anthropic body's `messages` are made of.
pub(super) fn turns() -> Turns {
    Turns::new("content", || {
        json!({"type": "text", "text": LEADING_USER_TEXT}).into()
    })
}

/// `msg`'s blocks, added to `turns`; turns it closes go to `messages`.
pub(super) fn push(msg: &Msg<'_>, turns: &mut Turns, messages: &mut Vec<Node>) {
    match msg {
        Msg::User(text) => {
            if !is_blank(text) {
                turns
                    .turn("user", messages)
                    .rest
                    .push(json!({"type": "text", "text": text}).into());
            }
        }
        Msg::Assistant { text, calls, state } => {
            if let Some(content) = state.and_then(content_form) {
                push_content(&content, calls, turns.turn("assistant", messages));
                return;
            }
            // Thinking goes with what the message says; alone it would make a turn of
            // nothing but reasoning.
            let says_something = !is_blank(text) || !calls.is_empty();
            let thinking = state
                .filter(|_| says_something)
                .map_or_else(Vec::new, |items| {
                    state_items(items, |t| matches!(t, "thinking" | "redacted_thinking"))
                });
            if !thinking.is_empty() {
                turns.turn("assistant", messages).lead.extend(thinking);
            }
            if !is_blank(text) {
                turns
                    .turn("assistant", messages)
                    .first
                    .push(json!({"type": "text", "text": text}).into());
            }
            for c in calls {
                turns.turn("assistant", messages).rest.push(Node::object([
                    ("type", json!("tool_use").into()),
                    ("id", json!(c.id).into()),
                    ("name", json!(anthropic_name(c.name)).into()),
                    ("input", arguments_object(c.arguments)),
                ]));
            }
        }
        Msg::Results(results) => {
            for r in results {
                let content = if r.is_error && is_blank(r.content) {
                    EMPTY_ERROR_TEXT
                } else {
                    r.content
                };
                turns.turn("user", messages).first.push(
                    json!({
                        "type": "tool_result",
                        "tool_use_id": r.id,
                        "content": content,
                        "is_error": r.is_error,
                    })
                    .into(),
                );
            }
        }
    }
}

/// The blocks of a provider state in its whole-message shape (`{"content": [...]}`, schema 8:
/// every block of the message in order, written when it holds more than text, calls and
/// leading thinking); `None` for the thinking-only shape.
fn content_form(items: &str) -> Option<Vec<Value>> {
    match serde_json::from_str::<Value>(items).ok()? {
        Value::Object(mut fields) => match fields.remove("content")? {
            Value::Array(blocks) => Some(blocks),
            _ => None,
        },
        _ => None,
    }
}

/// A message in its provider state's whole-message shape: every block as the provider sent
/// it, in order, but the `tool_use` blocks, which are the message's calls (the n-th block the
/// n-th call, rebuilt from the journal's call: its id, name and arguments) and blank text,
/// which Anthropic refuses. Calls the blocks do not hold come last.
fn push_content(content: &[Value], calls: &[super::Call<'_>], turn: &mut super::Turn) {
    let mut calls = calls.iter();
    let tool_use = |c: &super::Call<'_>| {
        Node::object([
            ("type", json!("tool_use").into()),
            ("id", json!(c.id).into()),
            ("name", json!(anthropic_name(c.name)).into()),
            ("input", arguments_object(c.arguments)),
        ])
    };
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                if let Some(c) = calls.next() {
                    turn.rest.push(tool_use(c));
                }
            }
            Some("text")
                if block
                    .get("text")
                    .and_then(Value::as_str)
                    .is_none_or(is_blank) => {}
            _ => turn.rest.push(block.clone().into()),
        }
    }
    for c in calls {
        turn.rest.push(tool_use(c));
    }
}

/// A message's content as blocks: a plain string is one text block.
fn blocks(content: &Value) -> Option<Vec<Value>> {
    match content {
        Value::String(s) if s.is_empty() => Some(Vec::new()),
        Value::String(s) => Some(vec![json!({"type": "text", "text": s})]),
        Value::Array(blocks) => Some(blocks.clone()),
        _ => None,
    }
}

/// Whether a tool_result's content has some non-blank text.
fn result_has_text(content: Option<&Value>) -> bool {
    match content {
        Some(Value::String(s)) => !is_blank(s),
        Some(Value::Array(blocks)) => blocks.iter().any(|b| {
            b.get("type").and_then(Value::as_str) == Some("text")
                && b.get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !is_blank(t))
        }),
        _ => false,
    }
}

/// The ids of the `tool_use` blocks of an assistant message (empty for anything else).
fn tool_use_ids(message: &Value) -> Vec<&str> {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter_map(|b| b.get("id").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// Checks a body against Anthropic's rules (DESIGN.md §6); returns the first violation. The
/// body's `tools` are checked last, so that a body that breaks only `anthropic.tools_missing`
/// says so.
pub(super) fn validate(body: &Value) -> Result<(), Violation> {
    let messages = body_array(body, "messages", SHAPE)?;
    check_system(body)?;
    let mut prev_role = None;
    for (i, m) in messages.iter().enumerate() {
        let (obj, role) = message_role(m, i, prev_role)?;
        prev_role = Some(role);
        let blocks = content_blocks(obj, i, role, i + 1 == messages.len())?;
        let mut seen = Seen {
            other: false,
            content: false,
            result_ids: HashSet::new(),
            prev_uses: if i > 0 {
                tool_use_ids(&messages[i - 1])
            } else {
                Vec::new()
            },
        };
        for block in &blocks {
            check_block(block, i, role, &mut seen)?;
        }
        check_uses_answered(messages, i)?;
    }
    check_tools(body, messages)
}

/// `tools`, when there are any: custom tools with a name in Anthropic's form, no name twice,
/// and an object `input_schema`. A body whose messages hold a `tool_use` or `tool_result`
/// block must have some: Anthropic rejects it otherwise ("Requests which include `tool_use`
/// or `tool_result` blocks must define tools").
fn check_tools(body: &Value, messages: &[Value]) -> Result<(), Violation> {
    let tools = match body.get("tools") {
        None => &Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(Violation::new(0, SHAPE, "`tools` is not an array")),
    };
    let mut names = HashSet::new();
    for tool in tools {
        let tool = object(tool, 0, SHAPE, "a tool")?;
        let name = string_field(tool, "name", 0, SHAPE, "a tool")?;
        if !valid_name(name) {
            return Err(Violation::new(
                0,
                BAD_NAME,
                format!("tool name `{name}` does not match ^[a-zA-Z0-9_-]{{1,64}}$"),
            ));
        }
        if !names.insert(name) {
            return Err(Violation::new(
                0,
                DUPLICATE_TOOL_NAME,
                format!("two tools are named `{name}`; tool names must be unique"),
            ));
        }
        // Server tools (`web_search_…`) have a type of their own and no input schema.
        let custom = tool
            .get("type")
            .is_none_or(|t| t.as_str() == Some("custom"));
        if custom && !tool.get("input_schema").is_some_and(Value::is_object) {
            return Err(Violation::new(
                0,
                SHAPE,
                format!("tool `{name}` has no object `input_schema`"),
            ));
        }
    }
    let with_tool_blocks = messages.iter().position(|m| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                blocks.iter().any(|b| {
                    matches!(
                        b.get("type").and_then(Value::as_str),
                        Some("tool_use" | "tool_result")
                    )
                })
            })
    });
    match with_tool_blocks {
        Some(i) if tools.is_empty() => Err(tools_missing(i)),
        _ => Ok(()),
    }
}

/// What a body without tools breaks when message `i` is its first with a tool_use or
/// tool_result block.
pub(super) fn tools_missing(i: usize) -> Violation {
    Violation::new(
        i,
        TOOLS_MISSING,
        "requests which include tool_use or tool_result blocks must define tools",
    )
}

/// Whether a rendered message holds a tool_use or tool_result block.
pub(super) fn has_tool_block(message: &Node) -> bool {
    let Node::Object(fields) = message else {
        return false;
    };
    let Some(Node::Array(blocks)) = fields.get("content") else {
        return false;
    };
    blocks.iter().any(|b| {
        let kind = match b {
            Node::Value(v) => v.get("type").and_then(Value::as_str),
            Node::Object(f) => match f.get("type") {
                Some(Node::Value(v)) => v.as_str(),
                _ => None,
            },
            _ => None,
        };
        matches!(kind, Some("tool_use" | "tool_result"))
    })
}

/// A top-level `system` is a string or an array of blocks, when there is one.
fn check_system(body: &Value) -> Result<(), Violation> {
    match body.get("system") {
        None | Some(Value::String(_) | Value::Array(_)) => Ok(()),
        Some(_) => Err(Violation::new(
            0,
            SHAPE,
            "`system` is neither a string nor an array",
        )),
    }
}

/// Message `i` and its role: a known one, the user's first, never the previous message's.
fn message_role<'a>(
    m: &'a Value,
    i: usize,
    prev_role: Option<&str>,
) -> Result<(&'a Map<String, Value>, &'a str), Violation> {
    let obj = object(m, i, SHAPE, "the message")?;
    let role = string_field(obj, "role", i, SHAPE, "the message")?;
    if !matches!(role, "user" | "assistant") {
        return Err(Violation::new(i, SHAPE, format!("unknown role `{role}`")));
    }
    if i == 0 && role != "user" {
        return Err(Violation::new(
            i,
            FIRST_NOT_USER,
            "the first message must use the user role",
        ));
    }
    if prev_role == Some(role) {
        return Err(Violation::new(
            i,
            ROLES_ALTERNATE,
            format!("two {role} messages in a row; roles must alternate"),
        ));
    }
    Ok((obj, role))
}

/// The message's content as blocks; only a final assistant message may have none (a prefill).
fn content_blocks(
    obj: &Map<String, Value>,
    i: usize,
    role: &str,
    last: bool,
) -> Result<Vec<Value>, Violation> {
    let blocks = obj
        .get("content")
        .and_then(blocks)
        .ok_or_else(|| Violation::new(i, SHAPE, "`content` is neither a string nor an array"))?;
    let final_assistant = role == "assistant" && last;
    if blocks.is_empty() && !final_assistant {
        return Err(Violation::new(
            i,
            EMPTY_CONTENT,
            format!("the {role} message has empty content"),
        ));
    }
    Ok(blocks)
}

/// What the blocks of one message have shown so far, for the rules that look back.
struct Seen<'a> {
    /// A block other than a tool_result came first: a tool_result now is out of place.
    other: bool,
    /// A text or tool_use block came first: a thinking block now is out of place.
    content: bool,
    /// The tool_use ids answered in this message so far.
    result_ids: HashSet<&'a str>,
    /// The tool_use ids of the message before, which this one's results must answer.
    prev_uses: Vec<&'a str>,
}

/// One content block: a kind the role may hold, checked by that kind's rules.
fn check_block<'a>(
    block: &'a Value,
    i: usize,
    role: &str,
    seen: &mut Seen<'a>,
) -> Result<(), Violation> {
    let block = object(block, i, SHAPE, "a content block")?;
    let kind = string_field(block, "type", i, SHAPE, "a content block")?;
    match (kind, role) {
        ("text", _) => {
            seen.other = true;
            seen.content = true;
            if is_blank(string_field(block, "text", i, SHAPE, "a text block")?) {
                return Err(Violation::new(
                    i,
                    EMPTY_TEXT,
                    "text content blocks must contain non-whitespace text",
                ));
            }
            Ok(())
        }
        ("tool_use", "assistant") => {
            seen.content = true;
            check_tool_use(block, i)
        }
        ("thinking" | "redacted_thinking", "assistant") => check_thinking(block, kind, i, seen),
        ("tool_result", "user") => check_tool_result(block, i, seen),
        // A server tool's use and its result (web search, web fetch, code execution, …) and
        // blocks of kinds not known here: the provider's own content, sent back as it came.
        (_, "assistant") if kind != "tool_result" => {
            seen.other = true;
            seen.content = true;
            Ok(())
        }
        (kind, role) => Err(Violation::new(
            i,
            SHAPE,
            format!("unsupported `{kind}` block in a {role} message"),
        )),
    }
}

/// A thinking block (`thinking` and `signature`) or a redacted one (`data`), before the
/// message's text and tool_use blocks.
fn check_thinking(
    block: &Map<String, Value>,
    kind: &str,
    i: usize,
    seen: &Seen<'_>,
) -> Result<(), Violation> {
    if seen.content {
        return Err(Violation::new(
            i,
            THINKING_NOT_FIRST,
            format!("a {kind} block follows text or tool_use; thinking blocks must come first"),
        ));
    }
    let fields: &[&str] = if kind == "thinking" {
        &["thinking", "signature"]
    } else {
        &["data"]
    };
    for field in fields {
        string_field(block, field, i, SHAPE, &format!("a {kind} block"))?;
    }
    Ok(())
}

/// A tool_use block: an id and a name in Anthropic's forms, and an object `input`.
fn check_tool_use(block: &Map<String, Value>, i: usize) -> Result<(), Violation> {
    let id = string_field(block, "id", i, SHAPE, "a tool_use block")?;
    let name = string_field(block, "name", i, SHAPE, "a tool_use block")?;
    check_id(Format::Anthropic, id, i, BAD_ID, "tool_use id")?;
    if !valid_name(name) {
        return Err(Violation::new(
            i,
            BAD_NAME,
            format!("tool name `{name}` does not match ^[a-zA-Z0-9_-]{{1,64}}$"),
        ));
    }
    if !block.get("input").is_some_and(Value::is_object) {
        return Err(Violation::new(
            i,
            SHAPE,
            format!("tool_use `{id}` has no object `input`"),
        ));
    }
    Ok(())
}

/// A tool_result block: before any other block, answering a tool_use of the message before,
/// once.
fn check_tool_result<'a>(
    block: &'a Map<String, Value>,
    i: usize,
    seen: &mut Seen<'a>,
) -> Result<(), Violation> {
    let id = string_field(block, "tool_use_id", i, SHAPE, "a tool_result block")?;
    if seen.other {
        return Err(Violation::new(
            i,
            TOOL_RESULT_NOT_FIRST,
            format!(
                "tool_result `{id}` follows other content; tool_result blocks \
                 must come first"
            ),
        ));
    }
    check_id(Format::Anthropic, id, i, BAD_ID, "tool_use_id")?;
    if !seen.prev_uses.contains(&id) {
        return Err(Violation::new(
            i,
            UNKNOWN_TOOL_RESULT,
            format!(
                "unexpected tool_use_id `{id}`: no tool_use block with it in \
                 the previous message"
            ),
        ));
    }
    if !seen.result_ids.insert(id) {
        return Err(Violation::new(
            i,
            DUPLICATE_TOOL_RESULT,
            format!("a second tool_result for `{id}`"),
        ));
    }
    check_result_content(block, id, i)
}

/// A tool_result's content: a string or non-blank text blocks, and some text if it is an error.
fn check_result_content(block: &Map<String, Value>, id: &str, i: usize) -> Result<(), Violation> {
    let content = block.get("content");
    if let Some(Value::Array(inner)) = content {
        for b in inner {
            let text = b.get("text").and_then(Value::as_str);
            if b.get("type").and_then(Value::as_str) == Some("text") && text.is_none_or(is_blank) {
                return Err(Violation::new(
                    i,
                    EMPTY_TEXT,
                    format!("tool_result `{id}` has an empty text block"),
                ));
            }
        }
    } else if !matches!(content, None | Some(Value::String(_))) {
        return Err(Violation::new(
            i,
            SHAPE,
            format!("tool_result `{id}` content is neither a string nor an array"),
        ));
    }
    let is_error = match block.get("is_error") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(Violation::new(
                i,
                SHAPE,
                format!("tool_result `{id}` has a non-boolean `is_error`"),
            ))
        }
    };
    if is_error && !result_has_text(content) {
        return Err(Violation::new(
            i,
            EMPTY_ERROR_RESULT,
            format!("tool_result `{id}` has is_error but no text content"),
        ));
    }
    Ok(())
}

/// Message `i`'s tool_use ids: distinct, and each answered by the message right after it.
fn check_uses_answered(messages: &[Value], i: usize) -> Result<(), Violation> {
    let uses = tool_use_ids(&messages[i]);
    if let Some(id) = first_duplicate(uses.iter().copied()) {
        // Not one of §6's rules by name, but two tool_use blocks with one id cannot each
        // get their one result (SCENARIOS 23).
        return Err(Violation::new(
            i,
            DUPLICATE_TOOL_USE_ID,
            format!("two tool_use blocks share the id `{id}`"),
        ));
    }
    if uses.is_empty() {
        return Ok(());
    }
    let next_results = tool_result_ids(messages.get(i + 1));
    if let Some(id) = uses.iter().find(|id| !next_results.contains(id)) {
        return Err(Violation::new(
            i,
            MISSING_TOOL_RESULT,
            format!(
                "tool_use ids were found without tool_result blocks immediately after: \
                 `{id}`"
            ),
        ));
    }
    Ok(())
}

/// The ids the `tool_result` blocks of a user message answer (empty for anything else).
fn tool_result_ids(message: Option<&Value>) -> Vec<&str> {
    match message {
        Some(next) if next.get("role").and_then(Value::as_str) == Some("user") => {
            match next.get("content") {
                Some(Value::Array(blocks)) => blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
                    .collect(),
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}
