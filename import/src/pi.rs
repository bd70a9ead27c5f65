//! pi's session JSONL (docs/IMPORT_FORMATS.md §3): a `session` header, then entries chained by
//! `parentId`, the model's and the tools' messages among them.
//!
//! The rules that decide its verdicts (§3.4): pi runs no call of an assistant message whose
//! `stopReason` is `error` or `aborted` (its loop returns before executing them), so those are
//! provably not started; it runs every call of any other message and records no start, so a
//! call there with no result may have run.

use crate::chain;
use crate::input::Input;
use crate::job::{self, Edits, Job};
use crate::lines::{self, parse, parse_owned, Line};
use crate::session::{Item, Session, Source, Verdict};
use crate::text::Store;
use crate::Agent;
use crate::ReadError;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;

const NOT_STARTED: &str = "pi runs no tool call of an assistant message that stopped with \
                           `error` or `aborted`: its agent loop returns before executing them";
const UNKNOWN: &str = "pi runs every call of a message that did not stop with `error` or \
                       `aborted` and records no start: a call with no result may have run";

/// Entry types pi writes that hold no message of the model's or a tool's.
const OTHER_ENTRIES: [&str; 7] = [
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
];

/// Message roles that are neither the model's nor a tool's: the user's own `!` commands, and
/// extensions' and summaries' messages. Any other role is reported as unknown.
const OTHER_ROLES: [&str; 4] = [
    "bashExecution",
    "custom",
    "branchSummary",
    "compactionSummary",
];

/// Every line's common fields (`id` and `parentId` are absent in version-1 files).
#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "parentId")]
    parent_id: Option<String>,
}

#[derive(Deserialize)]
struct Header {
    id: String,
}

/// A `model_change`: pi writes `provider` and `modelId`; agents built on pi write a `model`
/// of their own naming instead (`"openrouter/…"`), and pi, which checks no field, keeps both.
#[derive(Deserialize)]
struct ModelChange {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default, rename = "modelId")]
    model_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
}

impl ModelChange {
    /// The model it names: `provider/modelId`, else whichever of them it has.
    fn name(self) -> Option<String> {
        match (self.provider, self.model_id, self.model) {
            (Some(provider), Some(id), _) => Some(format!("{provider}/{id}")),
            (_, Some(id), _) => Some(id),
            (_, None, Some(model)) => Some(model),
            (Some(_), None, None) | (None, None, None) => None,
        }
    }
}

#[derive(Deserialize)]
struct MessageEntry {
    message: Message,
}

/// A message, by its `role`.
#[derive(Deserialize)]
#[serde(tag = "role")]
enum Message {
    #[serde(rename = "user")]
    User { content: Value },
    #[serde(rename = "assistant")]
    Assistant {
        content: Vec<Value>,
        #[serde(default, rename = "stopReason")]
        stop_reason: Option<String>,
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        model: Option<String>,
    },
    #[serde(rename = "toolResult")]
    ToolResult {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(default)]
        content: Value,
        #[serde(default, rename = "isError")]
        is_error: bool,
    },
    /// The user's own `!` commands, extensions' messages, and roles newer than this reader:
    /// none is a model's tool call or its result.
    #[serde(other)]
    Other,
}

/// A block of an assistant message's `content`.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Block {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "toolCall")]
    ToolCall {
        id: String,
        name: String,
        #[serde(default)]
        arguments: Value,
    },
    #[serde(other)]
    Other,
}

/// The session in `input`, its texts kept in `store`.
pub(crate) fn read(input: &Input<'_>, store: Store) -> Result<Session, ReadError> {
    let mut s = Session::new(Agent::Pi, store);
    let mut ids = HashSet::new();
    let mut parents = Vec::new();
    let lines = lines::each(input, &mut s, |s, line| {
        let entry = take(s, line)?;
        s.hold_strings(entry.id.iter().chain(&entry.parent_id));
        ids.extend(entry.id);
        if let Some(parent) = entry.parent_id {
            parents.push((line.at, parent));
        }
        Ok(())
    })?;
    s.quarantined = lines.quarantined;
    s.lossy = lines.lossy_lines;
    s.times = lines.times;
    s.crc = lines.crc;
    if s.session_id.is_none() {
        let at = lines.first_json.unwrap_or(Source { line: 1, offset: 0 });
        s.notes.push((
            at,
            "no session header: pi itself would start this file afresh".into(),
        ));
    }
    // pi's context is the chain from the last entry up: a parent never written cuts it there.
    for (at, parent) in parents {
        if !ids.contains(&parent) {
            s.notes.push((
                at,
                format!("parentId {parent:?} names no entry in the file: pi's context stops here"),
            ));
        }
    }
    s.settle(|s, call| {
        let stopped = match &s.items[call.message] {
            Item::Assistant { stop, .. } => stop.as_deref(),
            _ => None,
        };
        if matches!(stopped, Some("error" | "aborted")) {
            Verdict::NotStarted { why: NOT_STARTED }
        } else {
            Verdict::OutcomeUnknown { why: UNKNOWN }
        }
    });
    s.finish()
}

fn take(s: &mut Session, line: &mut Line) -> Result<Entry, String> {
    let entry: Entry = parse(&line.value, "the entry")?;
    let at = line.at;
    match entry.kind.as_str() {
        "session" => {
            let header: Header = parse(&line.value, "the session header")?;
            s.session_id.get_or_insert(header.id);
        }
        "model_change" => {
            let change: ModelChange = parse(&line.value, "model_change")?;
            match change.name() {
                Some(model) => s.model_named(model, at),
                None => s
                    .notes
                    .push((at, "a model_change that names no model".into())),
            }
        }
        "message" => {
            let role = line.value["message"]["role"].as_str().map(str::to_owned);
            let entry: MessageEntry = parse_owned(line.value.take(), "message")?;
            if matches!(entry.message, Message::Other) {
                let role = role.as_deref().unwrap_or("");
                if !OTHER_ROLES.contains(&role) {
                    s.unknown.push((format!("message/{role}"), at));
                }
            }
            message(s, entry.message, at)?;
        }
        kind if OTHER_ENTRIES.contains(&kind) => {}
        other => s.unknown.push((other.to_owned(), at)),
    }
    Ok(entry)
}

fn message(s: &mut Session, message: Message, at: Source) -> Result<(), String> {
    match message {
        Message::User { content } => s.user(content_text(content), at),
        Message::Assistant {
            content,
            stop_reason,
            provider,
            model,
        } => {
            if let (Some(provider), Some(model)) = (provider, model) {
                s.model_named(format!("{provider}/{model}"), at);
            }
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            for (i, block) in content.into_iter().enumerate() {
                let block: Block = serde_json::from_value(block)
                    .map_err(|e| format!("message.content[{i}]: {e}"))?;
                match block {
                    Block::Text { text } => texts.push(text),
                    Block::ToolCall {
                        id,
                        name,
                        arguments,
                    } => calls.push((id, name, arguments.to_string())),
                    Block::Other => {}
                }
            }
            s.assistant(texts.join("\n"), stop_reason, at, calls, "toolCall");
        }
        Message::ToolResult {
            tool_call_id,
            content,
            is_error,
        } => s.pair(&tool_call_id, content_text(content), is_error, at),
        Message::Other => {}
    }
    Ok(())
}

/// A message's text: a string, or blocks (`text`; an image or another block named in
/// brackets).
fn content_text(content: Value) -> String {
    match content {
        Value::String(text) => text,
        Value::Array(blocks) => lines::blocks_text(&blocks),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A `toolResult` entry as pi writes one (its fields in pi's order).
#[derive(serde::Serialize)]
struct ResultEntry<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "parentId", skip_serializing_if = "Option::is_none")]
    parent_id: Option<Option<&'a str>>,
    timestamp: &'a Value,
    message: ResultMessage<'a>,
}

#[derive(serde::Serialize)]
struct ResultMessage<'a> {
    role: &'static str,
    #[serde(rename = "toolCallId")]
    tool_call_id: &'a str,
    #[serde(rename = "toolName")]
    tool_name: &'a str,
    content: [TextBlock; 1],
    #[serde(rename = "isError")]
    is_error: bool,
    timestamp: &'a Value,
}

#[derive(serde::Serialize)]
struct TextBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

/// The repair's edits (`repair.rs`, through `chain.rs`): each answered call's `toolResult`
/// entry after its message's last result (or the message itself), chained by `parentId`.
pub(crate) fn repairs(job: &Job<'_>, chain: &chain::Chain<'_>) -> Result<Edits, ReadError> {
    chain::repairs(job, chain, entry_id, |anchor, calls, parent, ids| {
        let (iso, ms) = match anchor.message {
            Some(l) => {
                let value = chain.value(l)?;
                (
                    value["timestamp"].clone(),
                    value["message"]["timestamp"].clone(),
                )
            }
            None => (Value::Null, Value::Null),
        };
        // A version-1 file has no ids: its entries are chained by their order.
        let linked = anchor.after.id.is_some();
        let mut parent = parent.map(str::to_owned);
        let mut out = Vec::new();
        for call in calls {
            let id = linked.then(|| ids.fresh(&call.id));
            let (text, is_error) = job::answer_text(job.session, call)?;
            let entry = ResultEntry {
                kind: "message",
                id: id.as_deref(),
                parent_id: id.as_ref().map(|_| parent.as_deref()),
                timestamp: &iso,
                message: ResultMessage {
                    role: "toolResult",
                    tool_call_id: &call.id,
                    tool_name: &call.name,
                    content: [TextBlock { kind: "text", text }],
                    is_error,
                    timestamp: &ms,
                },
            };
            // expect: a struct of strings and JSON values always serializes.
            #[allow(clippy::expect_used)]
            out.push((
                id.clone(),
                serde_json::to_vec(&entry).expect("an entry serializes"),
            ));
            if id.is_some() {
                parent = id;
            }
        }
        Ok(out)
    })
}

/// The header to write first when the first line pi would read (the first kept line that
/// parses) is not a session header with a string `id`: pi reads such a file as empty and
/// starts it afresh, discarding every entry (`loadEntriesFromFile`, docs/IMPORT_FORMATS.md
/// §3.5). Its id is drawn from the file's entries (the same copy each time), its timestamp is
/// the first entry's, its `version` 3 when the entries are linked by ids (else none: version
/// 1, which pi migrates by order), and its `cwd` empty: the file does not say where it ran.
pub(crate) fn missing_header(
    input: &Input<'_>,
    lines: &[job::FileLine],
    moved: &HashSet<Source>,
) -> Result<Option<String>, ReadError> {
    let mut first = None;
    for l in lines.iter().filter(|l| !moved.contains(&l.at)) {
        let text = input.at(l.at.offset, l.len_bytes)?;
        if let Ok((value, _)) = lines::object(&text, l.at.offset == 0) {
            first = Some((text, value));
            break;
        }
    }
    let Some((first_text, first)) = first else {
        return Ok(None);
    };
    if first["type"] == "session" && first["id"].is_string() {
        return Ok(None);
    }
    let header = NewHeader {
        kind: "session",
        version: first.get("id").is_some().then_some(3),
        id: chain::seeded_uuid(&first_text),
        timestamp: first["timestamp"].as_str(),
        cwd: "",
    };
    // expect: a struct of strings and numbers always serializes.
    #[allow(clippy::expect_used)]
    let header = serde_json::to_string(&header).expect("a header serializes");
    Ok(Some(header))
}

/// A session header as pi writes one, its fields in pi's order.
#[derive(serde::Serialize)]
struct NewHeader<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    cwd: &'static str,
}

/// pi's link fields.
pub(crate) const KEYS: chain::Keys = chain::Keys {
    id: "id",
    parent: "parentId",
    role: Some(role),
};

/// pi's header is no entry of the tree (`_buildIndex` skips it); every other line is one.
fn role(line: &Value) -> chain::Role {
    match line["type"] == "session" {
        true => chain::Role::Header,
        false => chain::Role::Other,
    }
}

/// An entry id as pi makes them: 8 hex digits.
fn entry_id(hash: u128) -> String {
    format!("{:08x}", hash as u32)
}
