//! Anthropic Messages streaming: `message_start`, then per content block
//! `content_block_start` / `content_block_delta`… / `content_block_stop`, then `message_delta`
//! (the stop reason, output usage) and `message_stop`; `ping` keeps the connection alive and
//! `error` reports a failure mid-stream.
//!
//! `tool_use` blocks are the calls (their argument text is the `input_json_delta` fragments);
//! `thinking` and `redacted_thinking` blocks are put back together verbatim (thinking text and
//! signature; redacted data) and handed back, in order, as the message's provider state.

use std::collections::HashMap;

use runtime::event::StopReason;
use runtime::model::{ModelEvent, Usage};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use history::providers::Format;

use crate::sse::{provider_error, DecodeError, Decoder, Step};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
    index: Option<u32>,
    #[serde(borrow)]
    content_block: Option<Block<'a>>,
    delta: Option<Delta>,
    usage: Option<AnthropicUsage>,
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    usage: Option<AnthropicUsage>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    name: Option<String>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    data: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    partial_json: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct AnthropicUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

enum Open {
    Text,
    Tool {
        call: u32,
        /// Argument text has been put out.
        arguments: bool,
        /// The block's starting `input` (`{}`), the arguments if no fragment comes.
        input: String,
    },
    /// A thinking block being put back together, at `slot` in the thinking list.
    Thinking {
        slot: usize,
        thinking: String,
        signature: String,
    },
    /// Nothing to collect (a redacted thinking block, kept whole at its start; a block of a
    /// kind the message does not need).
    Other,
}

/// Decodes Messages events.
#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    blocks: HashMap<u32, Open>,
    calls: u32,
    /// `thinking` and `redacted_thinking` blocks, in order (a slot filled at its block's stop).
    thinking: Vec<Value>,
    usage: AnthropicUsage,
    stop_reason: Option<String>,
}

impl AnthropicDecoder {
    fn start(
        &mut self,
        index: u32,
        block: Block<'_>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        let open = match block.kind.as_str() {
            "text" => {
                if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta(text));
                }
                Open::Text
            }
            "tool_use" => {
                let id = block.id.filter(|id| !id.is_empty());
                let name = block.name.filter(|n| !n.is_empty());
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(DecodeError::shape(
                        "a tool_use block without its id and name",
                    ));
                };
                let call = self.calls;
                self.calls += 1;
                out.push(ModelEvent::CallBegin {
                    index: call,
                    id,
                    name,
                });
                Open::Tool {
                    call,
                    arguments: false,
                    input: block.input.map(|r| r.get().to_string()).unwrap_or_default(),
                }
            }
            "thinking" => {
                self.thinking.push(Value::Null);
                Open::Thinking {
                    slot: self.thinking.len() - 1,
                    thinking: block.thinking.unwrap_or_default(),
                    signature: block.signature.unwrap_or_default(),
                }
            }
            "redacted_thinking" => {
                self.thinking.push(json!({
                    "type": "redacted_thinking",
                    "data": block.data.unwrap_or_default(),
                }));
                Open::Other
            }
            _ => Open::Other,
        };
        self.blocks.insert(index, open);
        Ok(())
    }

    fn delta(
        &mut self,
        index: u32,
        delta: Delta,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        let open = self.blocks.get_mut(&index).ok_or_else(|| {
            DecodeError::shape(format!("a delta for block {index}, never started"))
        })?;
        match (delta.kind.as_deref(), open) {
            (Some("text_delta"), Open::Text) => {
                if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta(text));
                }
            }
            (
                Some("input_json_delta"),
                Open::Tool {
                    call, arguments, ..
                },
            ) => {
                if let Some(fragment) = delta.partial_json.filter(|f| !f.is_empty()) {
                    *arguments = true;
                    out.push(ModelEvent::CallArgumentsDelta {
                        index: *call,
                        delta: fragment,
                    });
                }
            }
            (Some("thinking_delta"), Open::Thinking { thinking, .. }) => {
                thinking.push_str(delta.thinking.as_deref().unwrap_or(""));
            }
            (Some("signature_delta"), Open::Thinking { signature, .. }) => {
                signature.push_str(delta.signature.as_deref().unwrap_or(""));
            }
            (_, Open::Other) => {}
            (kind, _) => {
                return Err(DecodeError::shape(format!(
                    "a `{}` delta for block {index}, which is of another kind",
                    kind.unwrap_or("(untyped)")
                )))
            }
        }
        Ok(())
    }

    fn stop_block(&mut self, index: u32, out: &mut Vec<ModelEvent>) {
        match self.blocks.remove(&index) {
            Some(Open::Tool {
                call,
                arguments,
                input,
            }) => {
                if !arguments && !input.is_empty() {
                    out.push(ModelEvent::CallArgumentsDelta {
                        index: call,
                        delta: input,
                    });
                }
                out.push(ModelEvent::CallEnd { index: call });
            }
            Some(Open::Thinking {
                slot,
                thinking,
                signature,
            }) => {
                self.thinking[slot] = json!({
                    "type": "thinking",
                    "thinking": thinking,
                    "signature": signature,
                });
            }
            Some(Open::Text) | Some(Open::Other) | None => {}
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

    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        let mut open: Vec<u32> = self.blocks.keys().copied().collect();
        open.sort_unstable();
        for index in open {
            self.stop_block(index, out);
        }
        // A thinking block never stopped is in no state to be handed back.
        self.thinking.retain(|t| !t.is_null());
        if !self.thinking.is_empty() {
            let items = serde_json::to_string(&self.thinking).map_err(DecodeError::shape)?;
            out.push(ModelEvent::ProviderState(items));
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
            _ if self.calls == 0 => StopReason::EndTurn,
            _ => StopReason::ToolUse,
        };
        out.push(ModelEvent::Stop(stop));
        Ok(())
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
        let event: Event<'_> = serde_json::from_str(data).map_err(DecodeError::shape)?;
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
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
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
                let error = event.error.as_ref();
                let kind = error.and_then(|e| e.kind.as_deref());
                let message = error
                    .and_then(|e| e.message.clone())
                    .unwrap_or_else(|| "an error event (no message given)".to_string());
                // The event is the shape of Anthropic's error response.
                let body = json!({"error": {"type": kind, "message": message}});
                let status = crate::http::error_status(&body["error"]);
                return Err(provider_error(Format::Anthropic, status, &body, message));
            }
            // `ping`, and event types added later.
            _ => {}
        }
        Ok(Step::More)
    }
}
