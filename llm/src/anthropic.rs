//! Anthropic Messages streaming: `message_start`, then per content block
//! `content_block_start` / `content_block_delta`… / `content_block_stop`, then `message_delta`
//! (the stop reason, output usage) and `message_stop`; `ping` keeps the connection alive and
//! `error` reports a failure mid-stream.
//!
//! `tool_use` blocks are the calls (their argument text is the `input_json_delta` fragments).
//! Every other block is put back together verbatim: `thinking` and `redacted_thinking`
//! (thinking text and signature; redacted data), text with its `citations_delta`s, and the
//! server tools' blocks (`server_tool_use` with its input, `web_search_tool_result`,
//! `web_fetch_tool_result`, the code execution results, …), which arrive whole at their start.
//! They are handed back as the message's provider state (`history`'s `ProviderState` says the
//! two shapes): the thinking blocks alone when that is all the message has besides text and
//! calls, else every block of the message in order. A block or delta of a type this build does
//! not know is kept as it came (a delta's string fields appended to the block's fields of the
//! same name) and noted, never refused: providers add types every few months.

use std::collections::HashMap;

use events::event::StopReason;
use events::model::{ModelEvent, Usage};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use history::providers::Format;

use crate::sse::{provider_error, DecodeError, Decoder, Step};

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
    index: Option<u32>,
    content_block: Option<Value>,
    delta: Option<Value>,
    usage: Option<AnthropicUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    usage: Option<AnthropicUsage>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct AnthropicUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

/// The block types Anthropic documents; another is kept verbatim and noted.
const KNOWN_BLOCKS: [&str; 14] = [
    "text",
    "tool_use",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "tool_search_tool_result",
];

/// The delta types Anthropic documents; another is folded in by its field names and noted.
const KNOWN_DELTAS: [&str; 5] = [
    "text_delta",
    "input_json_delta",
    "citations_delta",
    "thinking_delta",
    "signature_delta",
];

/// One content block being put together, as its start gave it plus its deltas.
struct Open {
    /// The block as it will be handed back (its text, thinking, signature and citations grown
    /// by the deltas).
    block: Map<String, Value>,
    /// Its `input_json_delta` fragments (a `tool_use`'s or a server tool's input).
    json: String,
    /// The call, for a `tool_use` block.
    call: Option<u32>,
}

/// Decodes Messages events.
#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    blocks: HashMap<u32, Open>,
    /// The blocks in the order they started, each once stopped.
    content: Vec<(u32, Option<Value>)>,
    calls: u32,
    usage: AnthropicUsage,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
}

impl AnthropicDecoder {
    fn start(
        &mut self,
        index: u32,
        block: Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        let Value::Object(block) = block else {
            return Err(DecodeError::shape("a content block that is not an object"));
        };
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut call = None;
        match kind.as_str() {
            "text" => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    if !text.is_empty() {
                        out.push(ModelEvent::TextDelta(text.to_owned()));
                    }
                }
            }
            "tool_use" => {
                let field = |name: &str| {
                    block
                        .get(name)
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                };
                let (Some(id), Some(name)) = (field("id"), field("name")) else {
                    return Err(DecodeError::shape(
                        "a tool_use block without its id and name",
                    ));
                };
                call = Some(self.calls);
                out.push(ModelEvent::CallBegin {
                    index: self.calls,
                    id,
                    name,
                });
                self.calls += 1;
            }
            "" => return Err(DecodeError::shape("a content block without its `type`")),
            kind if !KNOWN_BLOCKS.contains(&kind) => out.push(ModelEvent::Note(format!(
                "kept a content block of type `{kind}`, which this build does not know, as \
                 the provider sent it"
            ))),
            _ => {}
        }
        self.content.push((index, None));
        self.blocks.insert(
            index,
            Open {
                block,
                json: String::new(),
                call,
            },
        );
        Ok(())
    }

    fn delta(
        &mut self,
        index: u32,
        delta: Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        let open = self.blocks.get_mut(&index).ok_or_else(|| {
            DecodeError::shape(format!("a delta for block {index}, never started"))
        })?;
        let Value::Object(delta) = delta else {
            return Err(DecodeError::shape("a delta that is not an object"));
        };
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("(untyped)")
            .to_owned();
        let block_kind = open
            .block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let text = |name: &str| delta.get(name).and_then(Value::as_str).unwrap_or("");
        let fits = match (kind.as_str(), block_kind.as_str()) {
            ("text_delta", "text") => {
                let piece = text("text");
                append(&mut open.block, "text", piece);
                if !piece.is_empty() {
                    out.push(ModelEvent::TextDelta(piece.to_owned()));
                }
                true
            }
            ("citations_delta", "text") => {
                let citation = delta.get("citation").cloned().unwrap_or(Value::Null);
                match open.block.get_mut("citations") {
                    Some(Value::Array(all)) => all.push(citation),
                    _ => {
                        open.block.insert("citations".into(), json!([citation]));
                    }
                }
                true
            }
            ("input_json_delta", "text" | "thinking" | "redacted_thinking") => false,
            ("input_json_delta", _) => {
                let fragment = text("partial_json");
                open.json.push_str(fragment);
                if let (Some(call), false) = (open.call, fragment.is_empty()) {
                    out.push(ModelEvent::CallArgumentsDelta {
                        index: call,
                        delta: fragment.to_owned(),
                    });
                }
                true
            }
            ("thinking_delta", "thinking") => {
                append(&mut open.block, "thinking", text("thinking"));
                true
            }
            ("signature_delta", "thinking") => {
                append(&mut open.block, "signature", text("signature"));
                true
            }
            (known, _) if KNOWN_DELTAS.contains(&known) => false,
            (unknown, _) => {
                // Not known: its string fields grow the block's fields of the same names.
                for (name, value) in &delta {
                    if let (false, Some(piece)) = (name == "type", value.as_str()) {
                        append(&mut open.block, name, piece);
                    }
                }
                out.push(ModelEvent::Note(format!(
                    "kept a `{unknown}` delta of a `{block_kind}` block, which this build does \
                     not know, folded into the block as sent"
                )));
                true
            }
        };
        if !fits {
            return Err(DecodeError::shape(format!(
                "a `{kind}` delta for block {index}, which is a `{block_kind}` block"
            )));
        }
        Ok(())
    }

    fn stop_block(&mut self, index: u32, out: &mut Vec<ModelEvent>) {
        let Some(Open {
            mut block,
            json,
            call,
        }) = self.blocks.remove(&index)
        else {
            return;
        };
        if !json.is_empty() {
            // A server tool's input, parsed back into the block it is sent in again; a
            // fragment list that is not JSON stays text (a `tool_use`'s arguments are the
            // call's, byte for byte, whatever they are).
            let input = serde_json::from_str(&json).unwrap_or(Value::String(json.clone()));
            block.insert("input".into(), input);
        }
        if let Some(call) = call {
            if json.is_empty() {
                if let Some(input) = block.get("input").filter(|i| !i.is_null()) {
                    out.push(ModelEvent::CallArgumentsDelta {
                        index: call,
                        delta: input.to_string(),
                    });
                }
            }
            out.push(ModelEvent::CallEnd { index: call });
        }
        if let Some(slot) = self.content.iter_mut().find(|(i, _)| *i == index) {
            slot.1 = Some(Value::Object(block));
        }
    }

    fn take_usage(&mut self, usage: &AnthropicUsage) {
        let u = &mut self.usage;
        for (mine, theirs) in [
            (&mut u.input_tokens, usage.input_tokens),
            (&mut u.output_tokens, usage.output_tokens),
            (
                &mut u.cache_read_input_tokens,
                usage.cache_read_input_tokens,
            ),
            (
                &mut u.cache_creation_input_tokens,
                usage.cache_creation_input_tokens,
            ),
        ] {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
    }

    /// The message's provider state: `None` for plain text and calls; the thinking blocks
    /// alone when that is all there is besides them (schema 3's shape, in which they come
    /// first); else every block in order (`{"content": [...]}`, schema 8).
    fn provider_state(&self) -> Option<Value> {
        // A block never stopped is in no state to be handed back.
        let blocks: Vec<&Value> = self
            .content
            .iter()
            .filter_map(|(_, b)| b.as_ref())
            .collect();
        let kind = |b: &Value| b["type"].as_str().unwrap_or_default().to_owned();
        let is_thinking = |b: &Value| matches!(kind(b).as_str(), "thinking" | "redacted_thinking");
        let plain = |b: &Value| match kind(b).as_str() {
            "tool_use" => true,
            "text" => b["citations"].as_array().is_none_or(Vec::is_empty),
            _ => false,
        };
        if blocks.iter().all(|b| plain(b)) {
            return None;
        }
        let thinking_first = blocks
            .iter()
            .skip_while(|b| is_thinking(b))
            .all(|b| plain(b));
        if thinking_first {
            let thinking: Vec<Value> = blocks
                .iter()
                .filter(|b| is_thinking(b))
                .map(|b| (*b).clone())
                .collect();
            return Some(Value::Array(thinking));
        }
        Some(json!({ "content": blocks }))
    }

    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        let mut open: Vec<u32> = self.blocks.keys().copied().collect();
        open.sort_unstable();
        for index in open {
            self.stop_block(index, out);
        }
        if let Some(state) = self.provider_state() {
            out.push(ModelEvent::ProviderState(state.to_string()));
        }
        let u = self.usage;
        let cache_read = u.cache_read_input_tokens.unwrap_or(0);
        // Anthropic's input_tokens leaves out the tokens read from and written to the cache.
        out.push(ModelEvent::Usage(Usage {
            input_tokens: u.input_tokens.unwrap_or(0)
                + cache_read
                + u.cache_creation_input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
            cached_input_tokens: cache_read,
        }));
        let stop = match self.stop_reason.as_deref() {
            Some("end_turn") | Some("stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::Length,
            Some("refusal") => {
                out.push(ModelEvent::Refusal {
                    reason: "refusal".into(),
                    explanation: refusal_explanation(self.stop_details.as_ref()),
                });
                StopReason::Refusal
            }
            Some("pause_turn") => {
                out.push(ModelEvent::Note(
                    "the provider paused the turn (`pause_turn`: a server tool ran long); the \
                     turn ends here, and a new prompt goes on from it"
                        .into(),
                ));
                StopReason::EndTurn
            }
            other => {
                if let Some(reason) = other {
                    out.push(ModelEvent::Note(format!(
                        "the stop reason `{reason}` is not one this build knows; read as the \
                         message's calls say"
                    )));
                }
                if self.calls == 0 {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                }
            }
        };
        out.push(ModelEvent::Stop(stop));
        Ok(())
    }
}

/// `field` of `block` with `piece` appended (created when missing).
fn append(block: &mut Map<String, Value>, field: &str, piece: &str) {
    let old = block.get(field).and_then(Value::as_str).unwrap_or("");
    let joined = format!("{old}{piece}");
    block.insert(field.to_owned(), Value::String(joined));
}

/// What a refusal's `stop_details` says: `[category] explanation`, either part when alone.
fn refusal_explanation(details: Option<&Value>) -> String {
    let Some(details) = details else {
        return String::new();
    };
    let field = |name: &str| details[name].as_str().unwrap_or("").trim().to_owned();
    match (field("category"), field("explanation")) {
        (c, e) if c.is_empty() => e,
        (c, e) if e.is_empty() => format!("[{c}]"),
        (c, e) => format!("[{c}] {e}"),
    }
}

impl Decoder for AnthropicDecoder {
    fn provider(&self) -> &'static str {
        "anthropic"
    }

    fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Step, DecodeError> {
        let event: Event = serde_json::from_str(data).map_err(DecodeError::shape)?;
        let kind = event.kind.as_deref().unwrap_or(name);
        let index = || {
            event
                .index
                .ok_or_else(|| DecodeError::shape("no block `index`"))
        };
        match kind {
            "message_start" => {
                let message = event
                    .message
                    .as_ref()
                    .ok_or_else(|| DecodeError::shape("message_start without its message"))?;
                if let Some(id) = message.id.as_deref().filter(|id| !id.is_empty()) {
                    out.push(ModelEvent::ResponseId(id.to_string()));
                }
                if let Some(usage) = &message.usage {
                    self.take_usage(usage);
                }
            }
            "content_block_start" => {
                let index = index()?;
                let block = event
                    .content_block
                    .ok_or_else(|| DecodeError::shape("content_block_start without its block"))?;
                self.start(index, block, out)?;
            }
            "content_block_delta" => {
                let index = index()?;
                let delta = event
                    .delta
                    .ok_or_else(|| DecodeError::shape("content_block_delta without its delta"))?;
                self.delta(index, delta, out)?;
            }
            "content_block_stop" => self.stop_block(index()?, out),
            "message_delta" => {
                if let Some(delta) = &event.delta {
                    if let Some(reason) = delta["stop_reason"].as_str() {
                        self.stop_reason = Some(reason.to_owned());
                    }
                    if let Some(details) = delta.get("stop_details").filter(|d| !d.is_null()) {
                        self.stop_details = Some(details.clone());
                    }
                }
                if let Some(usage) = &event.usage {
                    self.take_usage(usage);
                }
            }
            "message_stop" => {
                self.finish(out)?;
                return Ok(Step::Done);
            }
            "error" => {
                let error = event.error.unwrap_or(Value::Null);
                let message = error["message"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| "an error event (no message given)".to_string());
                // The event is the shape of Anthropic's error response.
                let body = json!({"error": {"type": error["type"], "message": message}});
                let status = crate::http::error_status(&body["error"]);
                return Err(provider_error(Format::Anthropic, status, &body, message));
            }
            // `ping`, and event types added later.
            _ => {}
        }
        Ok(Step::More)
    }
}
