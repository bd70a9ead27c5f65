//! OpenAI Responses streaming: typed events (`response.output_item.added`,
//! `response.output_text.delta`, `response.function_call_arguments.delta`, …), ending with
//! `response.completed`, `response.incomplete` or `response.failed`.
//!
//! Calls are keyed by `output_index`; a call begins with its `function_call` item (its
//! `call_id` and `name`) and ends with `response.function_call_arguments.done` or its
//! `response.output_item.done`, whichever comes first. Every other item but the message is
//! kept verbatim as `response.output_item.done` has it and handed back as the message's provider
//! state: `reasoning` (with its `encrypted_content` complete; one without it cannot go back
//! under `store: false` and is left out), the hosted tools' calls (`web_search_call`, …), and
//! items of types this build does not know (noted). A message's `refusal` content, or an
//! answer cut by the content filter, is a refusal.

use std::collections::HashMap;

use events::event::StopReason;
use events::model::{ModelEvent, Usage};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use history::providers::Format;

use crate::sse::{provider_error, DecodeError, Decoder, Step};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    output_index: Option<u32>,
    delta: Option<String>,
    arguments: Option<String>,
    #[serde(borrow)]
    item: Option<&'a RawValue>,
    response: Option<Response>,
    code: Option<Value>,
    message: Option<String>,
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    id: Option<String>,
    usage: Option<ResponsesUsage>,
    incomplete_details: Option<IncompleteDetails>,
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct ResponsesUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: Option<Value>,
    message: Option<String>,
}

struct Call {
    /// Argument text has been put out (so a `.done` event's full text is not repeated).
    arguments: bool,
    open: bool,
}

/// Decodes Responses events.
#[derive(Default)]
pub(crate) struct ResponsesDecoder {
    calls: Vec<Call>,
    by_output: HashMap<u32, usize>,
    /// The items kept as provider state (reasoning, hosted tools' calls, unknown items),
    /// verbatim, in order.
    kept: Vec<String>,
    /// The message held a `refusal` content part.
    refused: bool,
    response_id: bool,
}

/// The output item types OpenAI documents; another is kept verbatim and noted.
const KNOWN_ITEMS: [&str; 14] = [
    "message",
    "function_call",
    "reasoning",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "custom_tool_call",
    "compaction",
];

impl ResponsesDecoder {
    fn begin(
        &mut self,
        output: Option<u32>,
        item: &Item,
        out: &mut Vec<ModelEvent>,
    ) -> Result<usize, DecodeError> {
        let at = self.calls.len();
        let id = item.call_id.as_deref().filter(|id| !id.is_empty());
        let name = item.name.as_deref().filter(|n| !n.is_empty());
        let (Some(id), Some(name)) = (id, name) else {
            return Err(DecodeError::shape(
                "a function_call item without its call_id and name",
            ));
        };
        out.push(ModelEvent::CallBegin {
            index: at as u32,
            id: id.to_string(),
            name: name.to_string(),
        });
        self.calls.push(Call {
            arguments: false,
            open: true,
        });
        if let Some(output) = output {
            self.by_output.insert(output, at);
        }
        Ok(at)
    }

    fn call(&self, output: Option<u32>) -> Result<usize, DecodeError> {
        output
            .and_then(|o| self.by_output.get(&o).copied())
            .ok_or_else(|| {
                DecodeError::shape(format!(
                    "output {} is no function call begun",
                    output.map_or("(none)".to_string(), |o| o.to_string())
                ))
            })
    }

    fn arguments(&mut self, at: usize, text: &str, out: &mut Vec<ModelEvent>) {
        if !text.is_empty() {
            self.calls[at].arguments = true;
            out.push(ModelEvent::CallArgumentsDelta {
                index: at as u32,
                delta: text.to_string(),
            });
        }
    }

    /// Ends call `at`, putting out `full` first if no argument text came before.
    fn end_call(&mut self, at: usize, full: Option<&str>, out: &mut Vec<ModelEvent>) {
        if !self.calls[at].open {
            return;
        }
        if !self.calls[at].arguments {
            if let Some(full) = full {
                self.arguments(at, full, out);
            }
        }
        self.calls[at].open = false;
        out.push(ModelEvent::CallEnd { index: at as u32 });
    }

    /// The response's end: open calls closed, reasoning, usage and the stop reason put out.
    fn finish(&mut self, response: Option<&Response>, stop: StopReason, out: &mut Vec<ModelEvent>) {
        for at in 0..self.calls.len() {
            self.end_call(at, None, out);
        }
        if let Some(id) = response.and_then(|r| r.id.as_deref()) {
            self.response_id(id, out);
        }
        if !self.kept.is_empty() {
            out.push(ModelEvent::ProviderState(format!(
                "[{}]",
                self.kept.join(",")
            )));
        }
        if let Some(usage) = response.and_then(|r| r.usage.as_ref()) {
            out.push(ModelEvent::Usage(Usage {
                input_tokens: usage.input_tokens.unwrap_or(0),
                output_tokens: usage.output_tokens.unwrap_or(0),
                cached_input_tokens: usage
                    .input_tokens_details
                    .as_ref()
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
            }));
        }
        out.push(ModelEvent::Stop(stop));
    }

    fn response_id(&mut self, id: &str, out: &mut Vec<ModelEvent>) {
        if !self.response_id && !id.is_empty() {
            self.response_id = true;
            out.push(ModelEvent::ResponseId(id.to_string()));
        }
    }
}

/// A failure the stream reports with `code`, read as the same error answered as a response
/// (`{"error": {code, message}}`): a `context_length_exceeded` is a context overflow.
fn failure(code: Option<&Value>, message: String) -> DecodeError {
    let body = json!({"error": {"code": code, "message": message}});
    let status = crate::http::error_status(&body["error"]);
    provider_error(Format::OpenAiResponses, status, &body, message)
}

impl Decoder for ResponsesDecoder {
    fn provider(&self) -> &'static str {
        "openai-responses"
    }

    fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Step, DecodeError> {
        let event: Event<'_> = serde_json::from_str(data).map_err(DecodeError::shape)?;
        let kind = match event.kind.as_deref() {
            Some(kind) => kind,
            // The SSE event's own name says the same, where the data has no `type`.
            None if name != "message" => name,
            None => return Err(DecodeError::shape("an event without a `type`")),
        };
        match kind {
            "response.created" | "response.in_progress" => {
                if let Some(id) = event.response.as_ref().and_then(|r| r.id.as_deref()) {
                    self.response_id(id, out);
                }
            }
            "response.output_item.added" => {
                let item = parse_item(event.item)?;
                if item.kind == "function_call" {
                    let at = self.begin(event.output_index, &item, out)?;
                    if let Some(arguments) = &item.arguments {
                        self.arguments(at, arguments, out);
                    }
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = event.delta.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta(text));
                }
            }
            "response.function_call_arguments.delta" => {
                let at = self.call(event.output_index)?;
                if !self.calls[at].open {
                    return Err(DecodeError::shape(format!(
                        "call {at} goes on after it ended"
                    )));
                }
                self.arguments(at, event.delta.as_deref().unwrap_or(""), out);
            }
            "response.function_call_arguments.done" => {
                let at = self.call(event.output_index)?;
                self.end_call(at, event.arguments.as_deref(), out);
            }
            "response.output_item.done" => {
                let raw = event
                    .item
                    .ok_or_else(|| DecodeError::shape("an output item event without its item"))?;
                let item = parse_item(Some(raw))?;
                match item.kind.as_str() {
                    // With `store: false` a reasoning item is useful to send back only with its
                    // encrypted content: by id alone the API looks for an item it never kept
                    // ("Items are not persisted when store is set to false").
                    "reasoning" if raw.get().contains("\"encrypted_content\":\"") => {
                        self.kept.push(raw.get().to_string())
                    }
                    "reasoning" => {}
                    "message" => {
                        let refusal = serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .and_then(|v| v.get("content").cloned())
                            .and_then(|c| c.as_array().cloned())
                            .is_some_and(|c| c.iter().any(|p| p["type"] == "refusal"));
                        self.refused |= refusal;
                    }
                    "function_call" => {
                        let known = event
                            .output_index
                            .and_then(|o| self.by_output.get(&o).copied());
                        let at = match known {
                            Some(at) => at,
                            // A server that announces the call only when it is done.
                            None => self.begin(event.output_index, &item, out)?,
                        };
                        self.end_call(at, item.arguments.as_deref(), out);
                    }
                    kind => {
                        if !KNOWN_ITEMS.contains(&kind) {
                            out.push(ModelEvent::Note(format!(
                                "kept an output item of type `{kind}`, which this build does \
                                 not know, as the provider sent it"
                            )));
                        }
                        self.kept.push(raw.get().to_string());
                    }
                }
            }
            "response.completed" => {
                let stop = if self.refused {
                    out.push(ModelEvent::Refusal {
                        reason: "refusal".into(),
                        explanation: String::new(),
                    });
                    StopReason::Refusal
                } else if self.calls.is_empty() {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                };
                self.finish(event.response.as_ref(), stop, out);
                return Ok(Step::Done);
            }
            "response.incomplete" => {
                let reason = event
                    .response
                    .as_ref()
                    .and_then(|r| r.incomplete_details.as_ref())
                    .and_then(|d| d.reason.as_deref());
                // An answer the provider did not finish (cut at its length, or by a content
                // filter) runs none of its calls.
                let stop = match reason {
                    Some("max_output_tokens") => StopReason::Length,
                    Some("content_filter") => {
                        out.push(ModelEvent::Refusal {
                            reason: "content_filter".into(),
                            explanation: String::new(),
                        });
                        StopReason::Refusal
                    }
                    _ if self.calls.is_empty() => StopReason::EndTurn,
                    _ => StopReason::Interrupted,
                };
                self.finish(event.response.as_ref(), stop, out);
                return Ok(Step::Done);
            }
            "response.failed" => {
                let error = event.response.as_ref().and_then(|r| r.error.as_ref());
                let code = error.and_then(|e| e.code.as_ref());
                let message = error
                    .and_then(|e| e.message.clone())
                    .unwrap_or_else(|| "the response failed (no message given)".to_string());
                return Err(failure(code, message));
            }
            "error" => {
                // The error nested (`{"type": "error", "error": {code, message, …}}`) or at the
                // top (`{"type": "error", "code", "message", …}`): servers send both.
                let (code, message) = match &event.error {
                    Some(e) => (e.code.as_ref(), e.message.clone()),
                    None => (event.code.as_ref(), event.message.clone()),
                };
                let message =
                    message.unwrap_or_else(|| "an error event (no message given)".to_string());
                return Err(failure(code, message));
            }
            // Content parts, text done, reasoning summaries, …: nothing the message needs.
            _ => {}
        }
        Ok(Step::More)
    }
}

fn parse_item(raw: Option<&RawValue>) -> Result<Item, DecodeError> {
    let raw = raw.ok_or_else(|| DecodeError::shape("an output item event without its item"))?;
    serde_json::from_str(raw.get()).map_err(|e| DecodeError::shape(format!("its item: {e}")))
}
