//! Claude Code's session JSONL (docs/IMPORT_FORMATS.md §4): lines chained by
//! `uuid`/`parentUuid`, the Messages API's `tool_use` and `tool_result` blocks inside.
//!
//! Claude Code is closed source: everything here is known from public material only (its SDK
//! documentation and third parties' readings of session files), and read as such. No public
//! source shows a record of a tool starting or a rule by which it provably never ran, so a call
//! with no result is [`Verdict::OutcomeUnknown`], never not started.

use crate::chain;
use crate::input::Input;
use crate::job::{self, Edits, Job};
use crate::lines::{self, parse, parse_owned, Line};
use crate::session::{Item, Session, Source, Verdict};
use crate::text::Store;
use crate::Agent;
use crate::ReadError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;

const UNKNOWN: &str = "Claude Code records no start of a tool call (as far as its public \
                       documentation and readers of its files show): a call with no result may \
                       have run";

/// The starts of the placeholders Claude Code writes as a call's result when it has none (the
/// interruption markers of Claude Code 2.1.332's loader, docs/IMPORT_FORMATS.md §4.2): each
/// is the agent's own text, written whatever the call did, so none is an output.
const PLACEHOLDERS: [&str; 6] = [
    "[Request interrupted by user for tool use]",
    "[Tool call interrupted",
    "[Tool call result not in this copy",
    "[Tool call did not complete",
    "[Tool call not completed",
    "[Tool call skipped",
];

const PLACEHOLDER: &str = "Claude Code wrote its own placeholder in place of this call's \
                           result, whatever the call did: no output was recorded, and nothing \
                           shows whether it ran";

/// The model name Claude Code gives the replies it writes itself ("No response requested.").
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// Line types that hold no message of the model's or a tool's result: the harness's own lines
/// and its metadata (the types Claude Code 2.1.332's loader names, docs/IMPORT_FORMATS.md §4.1).
const OTHER_TYPES: [&str; 18] = [
    "system",
    "attachment",
    "summary",
    "file-history-snapshot",
    "file-history-delta",
    "queue-operation",
    "permission-mode",
    "progress",
    "pr-link",
    "last-prompt",
    "ai-title",
    "custom-title",
    "tag",
    "agent-name",
    "agent-color",
    "agent-setting",
    "content-replacement",
    "continued-in",
];

/// Every line's envelope (the harness's camelCase fields).
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default, rename = "parentUuid")]
    parent_uuid: Option<String>,
    #[serde(default, rename = "sessionId")]
    session_id: Option<String>,
}

#[derive(Deserialize)]
struct UserLine {
    message: UserMessage,
}

#[derive(Deserialize)]
struct UserMessage {
    content: Value,
}

#[derive(Deserialize)]
struct AssistantLine {
    message: AssistantMessage,
}

/// The API's message (snake_case fields).
#[derive(Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A content block, by its `type`.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Block {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "tool_use")]
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(rename = "tool_result")]
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Value,
        #[serde(default)]
        is_error: bool,
    },
    /// Thinking, images, and blocks newer than this reader.
    #[serde(other)]
    Other,
}

/// What reading keeps between lines.
#[derive(Default)]
struct Reading {
    /// The API message id of the last assistant line: one response may be written as several
    /// lines, one block each, that share it.
    last_message_id: Option<String>,
}

/// The session in `input`, its texts kept in `store`.
pub(crate) fn read(input: &Input<'_>, store: Store) -> Result<Session, ReadError> {
    let mut s = Session::new(Agent::ClaudeCode, store);
    let mut reading = Reading::default();
    let mut uuids = HashSet::new();
    let mut parents = Vec::new();
    let lines = lines::each(input, &mut s, |s, line| {
        let envelope = take(s, &mut reading, line)?;
        s.hold_strings(envelope.uuid.iter().chain(&envelope.parent_uuid));
        uuids.extend(envelope.uuid);
        if let Some(parent) = envelope.parent_uuid {
            parents.push((line.at, parent));
        }
        Ok(())
    })?;
    s.quarantined = lines.quarantined;
    s.lossy = lines.lossy_lines;
    s.times = lines.times;
    s.crc = lines.crc;
    for (at, parent) in parents {
        if !uuids.contains(&parent) {
            s.notes.push((
                at,
                format!("parentUuid {parent:?} names no line in the file: it was never written"),
            ));
        }
    }
    s.settle(|_, _| Verdict::OutcomeUnknown { why: UNKNOWN });
    s.finish()
}

fn take(s: &mut Session, reading: &mut Reading, line: &mut Line) -> Result<Envelope, String> {
    let envelope: Envelope = parse(&line.value, "the line")?;
    let at = line.at;
    if s.session_id.is_none() {
        s.session_id.clone_from(&envelope.session_id);
    }
    match envelope.kind.as_str() {
        "user" => {
            let user: UserLine = parse_owned(line.value.take(), "user")?;
            user_line(s, user.message.content, at)?;
            reading.last_message_id = None;
        }
        "assistant" => {
            let line: AssistantLine = parse_owned(line.value.take(), "assistant")?;
            assistant_line(s, reading, line.message, at)?;
        }
        kind if OTHER_TYPES.contains(&kind) => {}
        other => s.unknown.push((other.to_owned(), at)),
    }
    Ok(envelope)
}

fn user_line(s: &mut Session, content: Value, at: Source) -> Result<(), String> {
    let blocks = match content {
        Value::String(text) => {
            s.user(text, at);
            return Ok(());
        }
        Value::Array(blocks) => blocks,
        other => {
            return Err(format!(
                "user: message.content: a string or blocks, not {other}"
            ))
        }
    };
    let mut texts = Vec::new();
    for (i, block) in blocks.into_iter().enumerate() {
        let block: Block =
            serde_json::from_value(block).map_err(|e| format!("message.content[{i}]: {e}"))?;
        match block {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let text = result_text(content);
                if PLACEHOLDERS.iter().any(|p| text.starts_with(p)) {
                    s.pair_placeholder(&tool_use_id, text, at, PLACEHOLDER);
                } else {
                    s.pair(&tool_use_id, text, is_error, at);
                }
            }
            Block::Text { text } => texts.push(text),
            Block::ToolUse { .. } | Block::Other => {}
        }
    }
    if !texts.is_empty() {
        s.user(texts.join("\n"), at);
    }
    Ok(())
}

fn assistant_line(
    s: &mut Session,
    reading: &mut Reading,
    message: AssistantMessage,
    at: Source,
) -> Result<(), String> {
    match message.model {
        // Claude Code's own reply, not the model's: the session's model stays what it was.
        Some(model) if model == SYNTHETIC_MODEL => s.notes.push((
            at,
            "a reply Claude Code wrote itself (model <synthetic>), not the model's".to_owned(),
        )),
        Some(model) => s.model_named(model, at),
        None => {}
    }
    let same_response = matches!(s.items.last(), Some(Item::Assistant { .. }))
        && message.id.is_some()
        && message.id == reading.last_message_id;
    if !same_response {
        s.assistant(String::new(), None, at, Vec::new(), "tool_use");
    }
    reading.last_message_id = message.id;
    for (i, block) in message.content.into_iter().enumerate() {
        let block: Block =
            serde_json::from_value(block).map_err(|e| format!("message.content[{i}]: {e}"))?;
        match block {
            Block::Text { text } => s.model_text(text, at),
            Block::ToolUse { id, name, input } => {
                s.model_call((id, name, "tool_use"), input.to_string(), at);
            }
            Block::ToolResult { .. } | Block::Other => {}
        }
    }
    if let (Some(stop), Some(Item::Assistant { stop: last, .. })) =
        (message.stop_reason, s.items.last_mut())
    {
        *last = Some(stop);
    }
    Ok(())
}

/// A `tool_result`'s text: a string, or blocks.
fn result_text(content: Value) -> String {
    match content {
        Value::String(text) => text,
        Value::Array(blocks) => lines::blocks_text(&blocks),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A `user` line of `tool_result` blocks, its fields in the order Claude Code writes them, the
/// harness's fields copied from the line it follows.
#[derive(Serialize)]
struct ResultLine<'a> {
    #[serde(rename = "parentUuid")]
    parent_uuid: Option<&'a str>,
    #[serde(rename = "isSidechain", skip_serializing_if = "Option::is_none")]
    is_sidechain: Option<&'a Value>,
    #[serde(rename = "userType", skip_serializing_if = "Option::is_none")]
    user_type: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<&'a Value>,
    #[serde(rename = "sessionId", skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a Value>,
    #[serde(rename = "gitBranch", skip_serializing_if = "Option::is_none")]
    git_branch: Option<&'a Value>,
    #[serde(rename = "type")]
    kind: &'static str,
    message: ResultMessage<'a>,
    uuid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a Value>,
}

#[derive(Serialize)]
struct ResultMessage<'a> {
    role: &'static str,
    content: Vec<ResultBlock<'a>>,
}

#[derive(Serialize)]
struct ResultBlock<'a> {
    tool_use_id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    content: String,
    is_error: bool,
}

/// The repair's edits (`repair.rs`, through `chain.rs`): one `user` line holding a
/// `tool_result` for each of a response's calls without one, after its last line or result, as
/// the Messages API wants results right after their calls.
pub(crate) fn repairs(job: &Job<'_>, chain: &chain::Chain<'_>) -> Result<Edits, ReadError> {
    chain::repairs(job, chain, chain::uuid, |anchor, calls, parent, ids| {
        let from = &chain.value(anchor.after)?;
        let mut results = Vec::with_capacity(calls.len());
        for c in calls {
            let (content, is_error) = job::answer_text(job.session, c)?;
            results.push(ResultBlock {
                tool_use_id: &c.id,
                kind: "tool_result",
                content,
                is_error,
            });
        }
        // Claude Code's line ids are random UUIDs, unique across sessions (its loader looks
        // lines up by id across a project's files): the new id is drawn from the session's id,
        // the line it follows and the calls, so two sessions that share a call id never share
        // it, and a repair of the same file still writes the same bytes.
        let seed: Vec<&str> = [from["sessionId"].as_str(), anchor.after.id.as_deref()]
            .into_iter()
            .flatten()
            .chain(calls.iter().map(|c| c.id.as_str()))
            .collect();
        let id = ids.fresh(&seed.join("\n"));
        let field = |k: &str| from.get(k);
        let line = ResultLine {
            parent_uuid: parent,
            is_sidechain: field("isSidechain"),
            user_type: field("userType"),
            cwd: field("cwd"),
            session_id: field("sessionId"),
            version: field("version"),
            git_branch: field("gitBranch"),
            kind: "user",
            message: ResultMessage {
                role: "user",
                content: results,
            },
            uuid: &id,
            timestamp: field("timestamp"),
        };
        // expect: a struct of strings and JSON values always serializes.
        #[allow(clippy::expect_used)]
        let bytes = serde_json::to_vec(&line).expect("a line serializes");
        Ok(vec![(Some(id), bytes)])
    })
}

/// Claude Code's link fields; it replays a response's lines together.
pub(crate) const KEYS: chain::Keys = chain::Keys {
    id: "uuid",
    parent: "parentUuid",
    role: Some(role),
};

/// A line as Claude Code's loader groups them: an assistant line by its API message id, a user
/// line holding a `tool_result` block as results.
fn role(line: &Value) -> chain::Role {
    let message = &line["message"];
    match line["type"].as_str() {
        Some("assistant") => match message["id"].as_str() {
            Some(id) => chain::Role::Response(id.to_owned()),
            None => chain::Role::Other,
        },
        Some("user") => {
            let blocks = message["content"].as_array().into_iter().flatten();
            match blocks.into_iter().any(|b| b["type"] == "tool_result") {
                true => chain::Role::Results,
                false => chain::Role::Other,
            }
        }
        _ => chain::Role::Other,
    }
}
