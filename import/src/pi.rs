//! pi's session JSONL (docs/IMPORT_FORMATS.md §3): a `session` header, then entries chained by
//! `parentId`, the model's and the tools' messages among them.
//!
//! The rules that decide its verdicts (§3.4): pi runs no call of an assistant message whose
//! `stopReason` is `error` or `aborted` (its loop returns before executing them), so those are
//! provably not started; it runs every call of any other message and records no start, so a
//! call there with no result may have run.

use crate::lines::{self, parse, Line};
use crate::repair::{self, Edits, FileLine};
use crate::session::{Call, Item, Session, Source, Verdict};
use crate::Agent;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

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

#[derive(Deserialize)]
struct ModelChange {
    provider: String,
    #[serde(rename = "modelId")]
    model_id: String,
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

/// The session in `bytes`.
pub(crate) fn read(bytes: &[u8]) -> Session {
    let (good, bad) = lines::split(bytes);
    let mut s = Session::new(Agent::Pi);
    s.quarantined = bad;
    let mut last_good = None;
    let mut ids = HashSet::new();
    let mut parents = Vec::new();
    for line in &good {
        match take(&mut s, line) {
            Ok(entry) => {
                last_good = Some(line.at);
                ids.extend(entry.id);
                if let Some(parent) = entry.parent_id {
                    parents.push((line.at, parent));
                }
            }
            Err(why) => s.quarantined.push(lines::unparseable(line, why)),
        }
    }
    lines::order(&mut s.quarantined, last_good);
    if s.session_id.is_none() {
        let at = good.first().map_or(Source { line: 1, offset: 0 }, |l| l.at);
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
    s
}

fn take(s: &mut Session, line: &Line) -> Result<Entry, String> {
    let entry: Entry = parse(&line.value, "the entry")?;
    let at = line.at;
    match entry.kind.as_str() {
        "session" => {
            let header: Header = parse(&line.value, "the session header")?;
            s.session_id.get_or_insert(header.id);
        }
        "model_change" => {
            let change: ModelChange = parse(&line.value, "model_change")?;
            s.model = Some(format!("{}/{}", change.provider, change.model_id));
        }
        "message" => {
            let entry: MessageEntry = parse(&line.value, "message")?;
            if matches!(entry.message, Message::Other) {
                let role = line.value["message"]["role"].as_str().unwrap_or("");
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
        Message::User { content } => s.user(content_text(&content), at),
        Message::Assistant {
            content,
            stop_reason,
            provider,
            model,
        } => {
            if let (Some(provider), Some(model)) = (provider, model) {
                s.model = Some(format!("{provider}/{model}"));
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
        } => s.pair(&tool_call_id, content_text(&content), is_error, at),
        Message::Other => {}
    }
    Ok(())
}

/// A message's text: a string, or blocks (`text`; an image or another block named in
/// brackets).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => lines::blocks_text(blocks),
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

/// One kept line's place in pi's chain.
struct Link {
    at: Source,
    id: Option<String>,
    parent: Option<String>,
    /// Its JSON, to rewrite its parent when the exact text cannot be patched.
    value: Value,
}

/// The repair's edits (`repair.rs`): each answered call's result entry after its message's last
/// result (or the message itself), chained by `parentId` with the entries that followed there
/// re-pointed to the last one added; and every entry whose parent was never written (or was
/// moved out) re-linked to the kept entry before it in the file, as pi's own migration of
/// unlinked files chains them.
pub(crate) fn repairs(
    session: &Session,
    calls: &[&Call],
    lines: &[FileLine<'_>],
    moved: &[Source],
) -> Edits {
    let links: Vec<Link> = lines
        .iter()
        .filter(|l| !moved.contains(&l.at))
        .filter_map(|l| {
            let value: Value = serde_json::from_slice(l.text).ok()?;
            Some(Link {
                at: l.at,
                id: value.get("id").and_then(Value::as_str).map(str::to_owned),
                parent: value
                    .get("parentId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                value,
            })
        })
        .collect();
    let mut ids: HashSet<String> = links.iter().filter_map(|l| l.id.clone()).collect();
    let mut edits = Edits::default();
    let mut new_parent: HashMap<u64, String> = HashMap::new();
    // The last answer's id added after a line (by its offset).
    let mut last_added: HashMap<u64, String> = HashMap::new();

    // Each message's answers, in the order of its calls.
    let mut by_message: Vec<(usize, Vec<&Call>)> = Vec::new();
    for call in calls {
        match by_message.iter_mut().find(|(m, _)| *m == call.message) {
            Some((_, list)) => list.push(call),
            None => by_message.push((call.message, vec![call])),
        }
    }
    for (message, answered) in by_message {
        let Some(anchor) = anchor(session, message, &links) else {
            continue;
        };
        let assistant = links.iter().find(|l| l.at == session.items[message].at());
        let (iso, ms) = assistant.map_or((Value::Null, Value::Null), |l| {
            (
                l.value["timestamp"].clone(),
                l.value["message"]["timestamp"].clone(),
            )
        });
        let mut parent = anchor.id.clone();
        for call in answered {
            let id = anchor.id.as_ref().map(|_| fresh_id(&call.id, &mut ids));
            let entry = ResultEntry {
                kind: "message",
                id: id.as_deref(),
                parent_id: id.as_ref().map(|_| parent.as_deref()),
                timestamp: &iso,
                message: ResultMessage {
                    role: "toolResult",
                    tool_call_id: &call.id,
                    tool_name: &call.name,
                    content: [TextBlock {
                        kind: "text",
                        text: repair::answer_text(Agent::Pi, call),
                    }],
                    is_error: true,
                    timestamp: &ms,
                },
            };
            // expect: a struct of strings and JSON values always serializes.
            let entry = serde_json::to_vec(&entry).expect("an entry serializes");
            edits.after.entry(anchor.at.offset).or_default().push(entry);
            if id.is_some() {
                parent = id;
            }
        }
        if let Some(last) = &parent {
            if Some(last) != anchor.id.as_ref() {
                last_added.insert(anchor.at.offset, last.clone());
            }
        }
        // What followed the anchor in the chain now follows the answers.
        if let (Some(from), Some(to)) =
            (&anchor.id, parent.filter(|p| Some(p) != anchor.id.as_ref()))
        {
            for l in links.iter().filter(|l| l.parent.as_ref() == Some(from)) {
                new_parent.insert(l.at.offset, to.clone());
            }
        }
    }

    // A parent never written (or moved out): the entry before it in the repaired file.
    let mut before: Option<String> = None;
    for l in &links {
        if let Some(parent) = &l.parent {
            if !ids.contains(parent) && !new_parent.contains_key(&l.at.offset) {
                if let Some(b) = &before {
                    new_parent.insert(l.at.offset, b.clone());
                }
            }
        }
        before = last_added
            .get(&l.at.offset)
            .cloned()
            .or(l.id.clone())
            .or(before);
    }
    for l in &links {
        if let Some(to) = new_parent.get(&l.at.offset) {
            let text = lines
                .iter()
                .find(|x| x.at == l.at)
                .map_or(&[][..], |x| x.text);
            edits.parent.insert(l.at.offset, relinked(text, l, to));
        }
    }
    edits
}

/// The line an answer goes after: the message's last result in the file, or the message.
fn anchor<'a>(session: &Session, message: usize, links: &'a [Link]) -> Option<&'a Link> {
    let Item::Assistant { calls, at, .. } = &session.items[message] else {
        return None;
    };
    let results = session.items.iter().filter_map(|item| match item {
        Item::Output { call, at } if calls.contains(call) => Some(*at),
        _ => None,
    });
    let last = results.max().unwrap_or(*at);
    links.iter().find(|l| l.at == last)
}

/// `text` with its `parentId` set to `to`: the exact text patched when pi's serialization is
/// found once, else the line written again.
fn relinked(text: &[u8], link: &Link, to: &str) -> Vec<u8> {
    if let Some(old) = &link.parent {
        let from = format!("\"parentId\":{}", json!(old));
        let into = format!("\"parentId\":{}", json!(to));
        let text_str = String::from_utf8_lossy(text);
        if text_str.matches(&from).count() == 1 {
            return text_str.replacen(&from, &into, 1).into_bytes();
        }
    }
    let mut value = link.value.clone();
    value["parentId"] = json!(to);
    value.to_string().into_bytes()
}

/// An entry id as pi makes them (8 hex digits), not yet in `ids`, derived from `seed` so that a
/// repair of the same file writes the same bytes.
fn fresh_id(seed: &str, ids: &mut HashSet<String>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    loop {
        let id = format!("{:08x}", hash as u32);
        if ids.insert(id.clone()) {
            return id;
        }
        hash = hash.wrapping_mul(0x0100_0000_01b3).wrapping_add(1);
    }
}
