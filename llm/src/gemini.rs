//! Gemini `streamGenerateContent?alt=sse`: each event's data is a whole
//! `GenerateContentResponse` chunk; the stream's end, after a chunk with a `finishReason`, is
//! the response's end.
//!
//! Text is `candidates[0].content.parts[].text` (thought summaries, `thought: true`, are not the
//! message). A `functionCall` part arrives whole: its call begins, its `args` text is one delta,
//! and it ends; a call without an `id` gets `call_{index}`. `thoughtSignature`s are handed back
//! as the message's provider state `{"text": SIG_OR_NULL, "calls": [SIG_OR_NULL, …]}`: the
//! first signature on a text part (streamed text is one part in the history, and its signature
//! may come with a later piece of it, even an empty one), and each call's own. A message with
//! parts of other kinds (code the model executed and its result, inline data, parts of kinds
//! this build does not know, noted) is handed back whole instead, `{"parts": [...]}`: every part
//! as it came, in order. A `finishReason` of a safety filter's (`SAFETY`, `RECITATION`, …) is a
//! refusal; a malformed or unexpected call, noted.

use std::collections::HashSet;

use events::event::StopReason;
use events::model::{ModelEvent, Usage};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use history::providers::Format;

use crate::http::json_message;
use crate::sse::{provider_error, stream_error, DecodeError, Decoder, Step};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(borrow)]
    candidates: Option<Vec<Candidate<'a>>>,
    usage_metadata: Option<UsageMetadata>,
    response_id: Option<String>,
    prompt_feedback: Option<PromptFeedback>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow)]
    content: Option<Content<'a>>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow)]
    parts: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    text: Option<String>,
    thought: Option<bool>,
    thought_signature: Option<String>,
    #[serde(borrow)]
    function_call: Option<FunctionCall<'a>>,
}

#[derive(Deserialize)]
struct FunctionCall<'a> {
    name: Option<String>,
    #[serde(borrow)]
    args: Option<&'a RawValue>,
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

/// Decodes Gemini chunks.
#[derive(Default)]
pub(crate) struct GeminiDecoder {
    ids: HashSet<String>,
    calls: u32,
    text_signature: Option<String>,
    call_signatures: Vec<Option<String>>,
    finish: Option<String>,
    finish_message: Option<String>,
    usage: Option<Usage>,
    response_id: bool,
    /// Every part as it came, for a message that must go back whole.
    parts: Vec<Value>,
    /// A part of another kind than text, thought and call came: the message goes back whole.
    whole: bool,
}

/// The part fields Gemini documents; a part with another is kept verbatim and noted.
const KNOWN_PART_FIELDS: [&str; 11] = [
    "text",
    "thought",
    "thoughtSignature",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
    "videoMetadata",
    "partMetadata",
];

/// The part fields a message of text and calls alone has.
const PLAIN_PART_FIELDS: [&str; 4] = ["text", "thought", "thoughtSignature", "functionCall"];

impl GeminiDecoder {
    fn call(
        &mut self,
        call: FunctionCall<'_>,
        signature: Option<String>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), DecodeError> {
        let name = call
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| DecodeError::shape("a functionCall without a name"))?;
        let index = self.calls;
        self.calls += 1;
        let id = match call
            .id
            .filter(|id| !id.is_empty() && !self.ids.contains(id))
        {
            Some(id) => id,
            None => {
                // Unique within the message, should the provider's own ids take `call_{index}`.
                let mut id = format!("call_{index}");
                let mut n = 2;
                while self.ids.contains(&id) {
                    id = format!("call_{index}_{n}");
                    n += 1;
                }
                id
            }
        };
        self.ids.insert(id.clone());
        out.push(ModelEvent::CallBegin { index, id, name });
        let args = call.args.map(RawValue::get).unwrap_or("{}");
        out.push(ModelEvent::CallArgumentsDelta {
            index,
            delta: args.to_string(),
        });
        out.push(ModelEvent::CallEnd { index });
        self.call_signatures.push(signature);
        Ok(())
    }
}

impl GeminiDecoder {
    /// Keeps `raw` for a message that may have to go back whole; a part with a field other
    /// than text, thought and call makes it so (noted when the field is not a documented one).
    fn keep(&mut self, raw: &RawValue, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        let part: Value = serde_json::from_str(raw.get()).map_err(DecodeError::shape)?;
        if let Some(fields) = part.as_object() {
            for name in fields.keys() {
                if !PLAIN_PART_FIELDS.contains(&name.as_str()) {
                    self.whole = true;
                }
                if !KNOWN_PART_FIELDS.contains(&name.as_str()) {
                    out.push(ModelEvent::Note(format!(
                        "kept a part with `{name}`, which this build does not know, as the \
                         provider sent it"
                    )));
                }
            }
        }
        self.parts.push(part);
        Ok(())
    }
}

impl Decoder for GeminiDecoder {
    fn provider(&self) -> &'static str {
        "gemini"
    }

    fn event(
        &mut self,
        _name: &str,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Step, DecodeError> {
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(DecodeError::shape)?;
        if let Some(error) = &chunk.error {
            let status = crate::http::error_status(error);
            let body = json!({ "error": error });
            let message = json_message(&body).unwrap_or_else(|| error.to_string());
            return Err(provider_error(Format::Gemini, status, &body, message));
        }
        if !self.response_id {
            if let Some(id) = chunk.response_id.as_deref().filter(|id| !id.is_empty()) {
                self.response_id = true;
                out.push(ModelEvent::ResponseId(id.to_string()));
            }
        }
        if let Some(usage) = &chunk.usage_metadata {
            // Thinking is billed as output, as the other providers count their reasoning.
            self.usage = Some(Usage {
                input_tokens: usage.prompt_token_count.unwrap_or(0),
                output_tokens: usage.candidates_token_count.unwrap_or(0)
                    + usage.thoughts_token_count.unwrap_or(0),
                cached_input_tokens: usage.cached_content_token_count.unwrap_or(0),
            });
        }
        let candidate = chunk.candidates.and_then(|c| c.into_iter().next());
        let Some(candidate) = candidate else {
            if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
                // The prompt itself was refused: no answer will come for it.
                return Err(stream_error(
                    400,
                    format!("gemini blocked the prompt (blockReason {reason})"),
                ));
            }
            return Ok(Step::More);
        };
        let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
        for raw in parts {
            let part: Part<'_> = serde_json::from_str(raw.get()).map_err(DecodeError::shape)?;
            self.keep(raw, out)?;
            if let Some(call) = part.function_call {
                self.call(call, part.thought_signature, out)?;
                continue;
            }
            if part.thought == Some(true) {
                continue;
            }
            if let Some(text) = part.text {
                if self.text_signature.is_none() {
                    self.text_signature = part.thought_signature;
                }
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta(text));
                }
            }
        }
        if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
            self.finish = Some(reason);
        }
        if let Some(message) = candidate.finish_message.filter(|m| !m.is_empty()) {
            self.finish_message = Some(message);
        }
        Ok(Step::More)
    }

    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        let Some(reason) = self.finish.as_deref() else {
            return Err(DecodeError::Model(crate::sse::cut_short()));
        };
        // An answer Gemini stopped before it was done (a filter, a malformed call) runs none
        // of its calls; any other reason after calls (STOP, Gemini's usual word, or a
        // server's own) asks for them.
        let said = self.finish_message.clone().unwrap_or_default();
        let stop = match reason {
            "MAX_TOKENS" => StopReason::Length,
            "SAFETY"
            | "RECITATION"
            | "LANGUAGE"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION" => {
                out.push(ModelEvent::Refusal {
                    reason: reason.to_owned(),
                    explanation: said,
                });
                StopReason::Refusal
            }
            "MALFORMED_FUNCTION_CALL"
            | "UNEXPECTED_TOOL_CALL"
            | "TOO_MANY_TOOL_CALLS"
            | "OTHER" => {
                let said = if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                };
                out.push(ModelEvent::Note(format!(
                    "gemini stopped the answer with finishReason {reason}{said}"
                )));
                if self.calls == 0 {
                    StopReason::EndTurn
                } else {
                    StopReason::Interrupted
                }
            }
            _ if self.calls == 0 => StopReason::EndTurn,
            _ => StopReason::ToolUse,
        };
        if self.whole {
            let state = json!({ "parts": self.parts });
            out.push(ModelEvent::ProviderState(state.to_string()));
        } else if self.text_signature.is_some() || self.call_signatures.iter().any(Option::is_some)
        {
            let state = json!({ "text": self.text_signature, "calls": self.call_signatures });
            out.push(ModelEvent::ProviderState(state.to_string()));
        }
        if let Some(usage) = self.usage {
            out.push(ModelEvent::Usage(usage));
        }
        out.push(ModelEvent::Stop(stop));
        Ok(())
    }
}
