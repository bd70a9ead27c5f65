//! OpenAI Chat Completions streaming (`chat.completion.chunk` events, then `data: [DONE]`), as
//! OpenAI and the servers that copy its API (vLLM, Ollama, LiteLLM, OpenRouter) send it.
//!
//! Text comes as `choices[0].delta.content`. A tool call comes as `delta.tool_calls[]` pieces
//! keyed by `index`: the first carries `id` and `function.name`, the later ones fragments of
//! `function.arguments`. The calls end when the choice's `finish_reason` comes; usage comes in
//! a last chunk with no choices (`stream_options.include_usage`).

use std::collections::HashMap;

use events::event::StopReason;
use events::model::{ModelEvent, Usage};
use serde::Deserialize;
use serde_json::Value;

use history::providers::Format;

use crate::http::json_message;
use crate::sse::{provider_error, DecodeError, Decoder, Step};

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

/// A call of the message: its id, and whether it has ended.
struct Call {
    id: String,
    open: bool,
}

/// Decodes Chat Completions chunks.
#[derive(Default)]
pub(crate) struct ChatDecoder {
    calls: Vec<Call>,
    by_index: HashMap<u32, usize>,
    finish: Option<StopReason>,
    usage: Option<Usage>,
    response_id: bool,
    /// The message's `refusal` text came: the model refused.
    refused: bool,
}

impl ChatDecoder {
    /// Our index for the call a delta continues or begins; pushes `CallBegin` for a new one.
    fn call_for(
        &mut self,
        delta: &CallDelta,
        out: &mut Vec<ModelEvent>,
    ) -> Result<usize, DecodeError> {
        let known = match delta.index {
            Some(i) => self.by_index.get(&i).copied(),
            // A server that numbers no calls: a new id begins a call, else the last goes on.
            None => match (&delta.id, self.calls.last()) {
                (Some(id), Some(last)) if *id != last.id => None,
                (_, Some(_)) => Some(self.calls.len() - 1),
                (_, None) => None,
            },
        };
        if let Some(at) = known {
            if !self.calls[at].open {
                return Err(DecodeError::shape(format!(
                    "tool call {at} goes on after its choice finished"
                )));
            }
            return Ok(at);
        }
        let at = self.calls.len();
        let name = delta
            .function
            .as_ref()
            .and_then(|f| f.name.as_deref())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                DecodeError::shape(format!("tool call {at} begins without a function name"))
            })?;
        let id = match delta.id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => id.to_string(),
            None => format!("call_{at}"),
        };
        out.push(ModelEvent::CallBegin {
            index: at as u32,
            id: id.clone(),
            name: name.to_string(),
        });
        if let Some(i) = delta.index {
            self.by_index.insert(i, at);
        }
        self.calls.push(Call { id, open: true });
        Ok(at)
    }

    fn close_calls(&mut self, out: &mut Vec<ModelEvent>) {
        for (at, call) in self.calls.iter_mut().enumerate() {
            if call.open {
                call.open = false;
                out.push(ModelEvent::CallEnd { index: at as u32 });
            }
        }
    }
}

impl ChatDecoder {
    /// The answer's last events: calls closed, usage, the stop reason.
    fn done(&mut self, out: &mut Vec<ModelEvent>) {
        self.close_calls(out);
        if let Some(usage) = self.usage {
            out.push(ModelEvent::Usage(usage));
        }
        // A server that sends no finish_reason: the message says what it asks for.
        let mut stop = self.finish.unwrap_or(if self.calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        });
        // The model's own refusal (its `refusal` text, the message's words) or the content
        // filter's: a refusal either way, the filter's word for it kept.
        if stop == StopReason::Refusal || self.refused {
            let reason = if stop == StopReason::Refusal {
                "content_filter"
            } else {
                "refusal"
            };
            out.push(ModelEvent::Refusal {
                reason: reason.into(),
                explanation: String::new(),
            });
            stop = StopReason::Refusal;
        }
        out.push(ModelEvent::Stop(stop));
    }
}

impl Decoder for ChatDecoder {
    fn provider(&self) -> &'static str {
        "openai-chat"
    }

    /// Some OpenAI-compatible servers close the stream after the finish reason without
    /// `[DONE]`: the answer is whole once its finish reason came; before that it was cut short.
    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        if self.finish.is_none() {
            return Err(DecodeError::Model(crate::sse::cut_short()));
        }
        self.done(out);
        Ok(())
    }

    fn event(
        &mut self,
        _name: &str,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Step, DecodeError> {
        if data.trim() == "[DONE]" {
            self.done(out);
            return Ok(Step::Done);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(DecodeError::shape)?;
        if let Some(error) = &chunk.error {
            // A server's error in the stream (vLLM, OpenRouter, Groq): its status from whichever
            // shape it has (`crate::http::error_status`).
            let status = crate::http::error_status(error);
            let body = serde_json::json!({ "error": error });
            let message = json_message(&body).unwrap_or_else(|| error.to_string());
            return Err(provider_error(Format::OpenAiChat, status, &body, message));
        }
        if !self.response_id {
            if let Some(id) = chunk.id.as_deref().filter(|id| !id.is_empty()) {
                self.response_id = true;
                out.push(ModelEvent::ResponseId(id.to_string()));
            }
        }
        for choice in chunk.choices.iter().flatten() {
            // One choice is asked for (n = 1); another's pieces are not this message's.
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = &choice.delta {
                for text in [&delta.content, &delta.refusal].into_iter().flatten() {
                    if !text.is_empty() {
                        out.push(ModelEvent::TextDelta(text.clone()));
                    }
                }
                self.refused |= delta.refusal.as_ref().is_some_and(|r| !r.is_empty());
                for call in delta.tool_calls.iter().flatten() {
                    let at = self.call_for(call, out)?;
                    let fragment = call.function.as_ref().and_then(|f| f.arguments.as_ref());
                    if let Some(fragment) = fragment.filter(|a| !a.is_empty()) {
                        out.push(ModelEvent::CallArgumentsDelta {
                            index: at as u32,
                            delta: fragment.clone(),
                        });
                    }
                }
            }
            if let Some(reason) = &choice.finish_reason {
                self.close_calls(out);
                self.finish = Some(match reason.as_str() {
                    // Some OpenAI-compatible servers say "stop" after tool calls; the calls
                    // are still asked for, and their results must reach the model.
                    "stop" if !self.calls.is_empty() => StopReason::ToolUse,
                    "stop" => StopReason::EndTurn,
                    "content_filter" => StopReason::Refusal,
                    "tool_calls" | "function_call" => StopReason::ToolUse,
                    "length" => StopReason::Length,
                    _ if self.calls.is_empty() => StopReason::EndTurn,
                    _ => StopReason::ToolUse,
                });
            }
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens.unwrap_or(0),
                output_tokens: usage.completion_tokens.unwrap_or(0),
                cached_input_tokens: usage
                    .prompt_tokens_details
                    .as_ref()
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
            });
        }
        Ok(Step::More)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnumbered_calls_follow_their_ids() {
        let mut d = ChatDecoder::default();
        let mut out = Vec::new();
        let chunks = [
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
        ];
        for c in chunks {
            d.event("message", c, &mut out).unwrap();
        }
        assert_eq!(
            out,
            vec![
                ModelEvent::CallBegin {
                    index: 0,
                    id: "a".into(),
                    name: "f".into()
                },
                ModelEvent::CallArgumentsDelta {
                    index: 0,
                    delta: "{".into()
                },
                ModelEvent::CallArgumentsDelta {
                    index: 0,
                    delta: "}".into()
                },
                ModelEvent::CallBegin {
                    index: 1,
                    id: "b".into(),
                    name: "g".into()
                },
                ModelEvent::CallArgumentsDelta {
                    index: 1,
                    delta: "{}".into()
                },
            ]
        );
    }
}
