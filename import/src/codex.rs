//! codex's rollout JSONL (docs/IMPORT_FORMATS.md §2): `{timestamp, type, payload}` a line.
//!
//! The rule that decides its verdicts (§2.4): codex records a call item and spawns its tool at
//! once, and records no start, so a call with no output may have run, whatever ended its turn.
//! No codex call is ever [`Verdict::NotStarted`].

use crate::input::Input;
use crate::job::{self, Edits, Job};
use crate::lines::{self, parse, parse_owned, Line};
use crate::session::{Call, Session, Source, Verdict};
use crate::text::Store;
use crate::Agent;
use crate::ReadError;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

const UNKNOWN: &str = "codex spawns a tool as soon as its call item is recorded and records no \
                       start: a call with no output may have run";

/// `response_item` types that are neither a client tool call nor its output (reasoning,
/// server-side tools, compaction markers): read and left out. Any other type is newer than this
/// reader and is reported as unknown, since it might be a kind of call.
const OTHER_ITEMS: [&str; 8] = [
    "reasoning",
    "web_search_call",
    "image_generation_call",
    "compaction",
    "compaction_summary",
    "context_compaction",
    "ghost_snapshot",
    "other",
];

/// The line's envelope; `payload` is read by `type`.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    payload: Value,
}

#[derive(Deserialize)]
struct SessionMeta {
    id: String,
}

#[derive(Deserialize)]
struct TurnContext {
    #[serde(default)]
    model: Option<String>,
}

/// A `response_item`'s payload: the items we read, by their `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseItem {
    Message {
        role: String,
        #[serde(default)]
        content: Vec<Value>,
    },
    FunctionCall {
        name: String,
        arguments: String,
        call_id: String,
    },
    CustomToolCall {
        name: String,
        input: String,
        call_id: String,
    },
    LocalShellCall {
        #[serde(default)]
        call_id: Option<String>,
        #[serde(default)]
        id: Option<String>,
        action: Value,
    },
    ToolSearchCall {
        #[serde(default)]
        call_id: Option<String>,
        #[serde(default)]
        execution: Option<String>,
        #[serde(default)]
        arguments: Value,
    },
    FunctionCallOutput {
        call_id: String,
        output: Value,
    },
    CustomToolCallOutput {
        call_id: String,
        output: Value,
    },
    ToolSearchOutput {
        #[serde(default)]
        call_id: Option<String>,
        #[serde(default)]
        execution: Option<String>,
        #[serde(default)]
        tools: Value,
    },
    /// Items that are not a client tool call or its output ([`OTHER_ITEMS`]), and any item type
    /// newer than this reader.
    #[serde(other)]
    Other,
}

/// The session in `input`, its texts kept in `store`.
pub(crate) fn read(input: &Input<'_>, store: Store) -> Result<Session, ReadError> {
    let mut s = Session::new(Agent::Codex, store);
    let lines = lines::each(input, &mut s, take)?;
    s.quarantined = lines.quarantined;
    s.lossy = lines.lossy_lines;
    s.times = lines.times;
    s.crc = lines.crc;
    if s.session_id.is_none() {
        let at = lines.first_json.unwrap_or(Source { line: 1, offset: 0 });
        s.notes
            .push((at, "no session_meta line: the session has no id".into()));
    }
    // codex pairs a call and its output by `call_id` alone (§2.3).
    s.pair_late();
    s.settle(|_, _| Verdict::OutcomeUnknown { why: UNKNOWN });
    s.finish()
}

fn take(s: &mut Session, line: &mut Line) -> Result<(), String> {
    let envelope: Envelope = parse_owned(line.value.take(), "the line")?;
    let at = line.at;
    let payload = envelope.payload;
    match envelope.kind.as_str() {
        "session_meta" => {
            let meta: SessionMeta = parse(&payload, "payload")?;
            // codex takes the first as the thread's id (a fork copies its parent's after it).
            s.session_id.get_or_insert(meta.id);
        }
        "turn_context" => {
            let context: TurnContext = parse(&payload, "payload")?;
            if let Some(model) = context.model {
                s.model_named(model, line.at);
            }
        }
        "response_item" => {
            let kind = payload
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let item: ResponseItem = parse_owned(payload, "payload")?;
            if matches!(item, ResponseItem::Other) {
                let kind = kind.as_deref().unwrap_or("");
                if !OTHER_ITEMS.contains(&kind) {
                    s.unknown.push((format!("response_item/{kind}"), at));
                }
            }
            response_item(s, item, at);
        }
        // Events (their tool starts are not persisted), and compactions (their replacement
        // history holds copies of items already read, not new calls).
        "event_msg" | "compacted" => {}
        other => s.unknown.push((other.to_owned(), at)),
    }
    Ok(())
}

fn response_item(s: &mut Session, item: ResponseItem, at: Source) {
    match item {
        ResponseItem::Message { role, content } => {
            let text = lines::blocks_text(&content);
            if role == "assistant" {
                s.model_text(text, at);
            } else if role == "user" {
                s.user(text, at);
            }
        }
        ResponseItem::FunctionCall {
            name,
            arguments,
            call_id,
        } => s.model_call((call_id, name, "function_call"), arguments, at),
        ResponseItem::CustomToolCall {
            name,
            input,
            call_id,
        } => s.model_call((call_id, name, "custom_tool_call"), input, at),
        ResponseItem::LocalShellCall {
            call_id,
            id,
            action,
        } => {
            let Some(call_id) = call_id.or(id) else {
                s.notes.push((
                    at,
                    "a local_shell_call with no call_id: it cannot be paired".into(),
                ));
                return;
            };
            let call = (call_id, "local_shell".into(), "local_shell_call");
            s.model_call(call, action.to_string(), at);
        }
        ResponseItem::ToolSearchCall {
            call_id,
            execution,
            arguments,
        } => {
            // Only a search the client runs is a tool call of the session's.
            if let (Some(call_id), Some("client")) = (call_id, execution.as_deref()) {
                let call = (call_id, "tool_search".into(), "tool_search_call");
                s.model_call(call, arguments.to_string(), at);
            }
        }
        ResponseItem::FunctionCallOutput { call_id, output }
        | ResponseItem::CustomToolCallOutput { call_id, output } => {
            let (text, is_error) = output_text(output);
            output_of(s, &call_id, text, is_error, at);
        }
        ResponseItem::ToolSearchOutput {
            call_id,
            execution,
            tools,
        } => {
            if let (Some(call_id), Some("client")) = (call_id, execution.as_deref()) {
                output_of(s, &call_id, tools.to_string(), false, at);
            }
        }
        ResponseItem::Other => {}
    }
}

fn output_of(s: &mut Session, call_id: &str, text: String, is_error: bool, at: Source) {
    if call_id.is_empty() {
        // codex answers some calls it refuses itself with an output of no id (§2.3).
        s.notes.push((at, "an output with an empty call_id".into()));
    }
    s.pair(call_id, text, is_error, at);
}

/// An output's text: a string, content items (`input_text`/`output_text`, images named), or an
/// early build's `{content, success}`.
fn output_text(output: Value) -> (String, bool) {
    match output {
        Value::String(text) => (text, false),
        Value::Array(items) => (lines::blocks_text(&items), false),
        Value::Object(o) => {
            let text = o.get("content").and_then(Value::as_str).map(str::to_owned);
            let text = text.unwrap_or_else(|| Value::Object(o.clone()).to_string());
            let failed = o.get("success").and_then(Value::as_bool) == Some(false);
            (text, failed)
        }
        other => (other.to_string(), false),
    }
}

/// A rollout line as codex writes one: `timestamp` first, the line's `ordinal` where the
/// rollout numbers its lines (codex 0.171's paginated history), then the item's tag and payload.
#[derive(serde::Serialize)]
struct OutputLine<'a> {
    timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ordinal: Option<u64>,
    #[serde(rename = "type")]
    kind: &'static str,
    payload: OutputPayload<'a>,
}

/// An output item, its tag first as codex writes it.
#[derive(serde::Serialize)]
struct OutputPayload<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[(); 0]>,
}

impl<'a> OutputPayload<'a> {
    fn text(kind: &'static str, call: &'a Call, text: String) -> OutputPayload<'a> {
        OutputPayload {
            kind,
            call_id: &call.id,
            output: Some(text),
            status: None,
            execution: None,
            tools: None,
        }
    }
}

/// A line's `ordinal`: codex 0.171 numbers every line of a paginated rollout from 0 and, on
/// resume, continues from the last line's (refusing a last line without one).
///
/// Read for that field alone, the rest skipped unkept (a line may hold 64 MiB, and every line
/// is asked); a line that reads only as [`lines::object`] reads it (a byte-order mark, bytes
/// that are not UTF-8) is read that way.
pub(crate) fn ordinal_of(text: &[u8], first: bool) -> Option<u64> {
    #[derive(Deserialize)]
    struct Ordinal {
        #[serde(default)]
        ordinal: Option<Value>,
    }
    if let Ok(line) = serde_json::from_slice::<Ordinal>(text) {
        return line.ordinal?.as_u64();
    }
    let (value, _) = lines::object(text, first).ok()?;
    value.get("ordinal")?.as_u64()
}

/// The numbering of a repaired rollout's lines: from its first kept line's ordinal on, one by
/// one, answers included, as codex would have numbered it had it written the answers itself.
/// The answers' pass and the copy's pass count alike, so each line gets the same number in
/// both.
pub(crate) struct Ordinals {
    next: Option<u64>,
}

impl From<Option<u64>> for Ordinals {
    fn from(first: Option<u64>) -> Ordinals {
        Ordinals { next: first }
    }
}

impl Ordinals {
    /// A kept line of the original, counted: its text renumbered when its ordinal moves.
    pub(crate) fn line(&mut self, text: &[u8], first: bool) -> Option<Vec<u8>> {
        let n = self.next?;
        let own = ordinal_of(text, first)?;
        self.next = Some(n + 1);
        (own != n).then(|| renumbered(text, own, n))
    }

    /// A kept line, counted, without its text renumbered (the answers' pass).
    fn count(&mut self, text: &[u8], first: bool) {
        if let Some(n) = self.next {
            if ordinal_of(text, first).is_some() {
                self.next = Some(n + 1);
            }
        }
    }

    /// An added line: its ordinal, counted.
    pub(crate) fn added(&mut self) -> Option<u64> {
        let n = self.next?;
        self.next = Some(n + 1);
        Some(n)
    }
}

/// The repair's answers (`repair.rs`): an output line right after each call's line, where
/// codex's own normalization puts its stand-in, of the kind its call asks for. In a rollout
/// whose lines carry ordinals the copy is numbered again in order, answers included
/// ([`Ordinals`]): this pass numbers the answers, the copy's pass the lines.
pub(crate) fn answers(job: &Job<'_>) -> Result<Edits, ReadError> {
    let mut edits = Edits {
        first_ordinal: first_ordinal(job)?,
        ..Edits::default()
    };
    let mut answers: HashMap<u64, Vec<OutputLine<'_>>> = HashMap::new();
    for call in &job.calls {
        answers
            .entry(call.at.offset)
            .or_default()
            .push(answer(job, call)?);
    }
    let mut ordinals = Ordinals::from(edits.first_ordinal);
    let mut reading = job.input.lines();
    let mut text = Vec::new();
    while let Some(line) = reading.next_line(&mut text)? {
        let at = line.at;
        if text.iter().all(u8::is_ascii_whitespace) || job.moved.contains(&at) {
            continue;
        }
        ordinals.count(&text, at.offset == 0);
        for mut answer in answers.remove(&at.offset).into_iter().flatten() {
            answer.ordinal = ordinals.added();
            // expect: strings and JSON values always serialize.
            #[allow(clippy::expect_used)]
            let bytes = serde_json::to_vec(&answer).expect("a line serializes");
            edits.after.entry(at.offset).or_default().push(bytes);
        }
    }
    job.sum.check(reading.crc())?;
    Ok(edits)
}

/// The ordinal of the first kept line that has one.
fn first_ordinal(job: &Job<'_>) -> Result<Option<u64>, ReadError> {
    let mut reading = job.input.lines();
    let mut text = Vec::new();
    while let Some(line) = reading.next_line(&mut text)? {
        if job.moved.contains(&line.at) {
            continue;
        }
        if let Some(n) = ordinal_of(&text, line.at.offset == 0) {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

/// The output line that answers `call` (its ordinal set by the caller).
fn answer<'a>(job: &Job<'_>, call: &'a Call) -> Result<OutputLine<'a>, ReadError> {
    let line = job.text(call.at)?;
    // The call's own time: the answer claims no time of its own.
    let timestamp = lines::object(&line, call.at.offset == 0)
        .ok()
        .and_then(|(v, _)| {
            v.get("timestamp")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    // codex records no error flag with an output.
    let (text, _) = job::answer_text(job.session, call)?;
    let payload = match call.kind {
        "custom_tool_call" => OutputPayload::text("custom_tool_call_output", call, text),
        // A client search's output holds tools, not text: an empty list says none came.
        "tool_search_call" => OutputPayload {
            kind: "tool_search_output",
            call_id: &call.id,
            output: None,
            status: Some("completed"),
            execution: Some("client"),
            tools: Some([]),
        },
        _ => OutputPayload::text("function_call_output", call, text),
    };
    Ok(OutputLine {
        timestamp,
        ordinal: None,
        kind: "response_item",
        payload,
    })
}

/// `text` with its `ordinal` set to `to`: the exact text patched where codex's serialization
/// of it is found once, else the line written again.
fn renumbered(text: &[u8], own: u64, to: u64) -> Vec<u8> {
    let line = String::from_utf8_lossy(text);
    let from = format!("\"ordinal\":{own}");
    if line.matches(&from).count() == 1 {
        return line
            .replacen(&from, &format!("\"ordinal\":{to}"), 1)
            .into_bytes();
    }
    let mut value: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
    value["ordinal"] = to.into();
    value.to_string().into_bytes()
}
