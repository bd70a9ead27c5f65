//! Gemini `streamGenerateContent?alt=sse`: `data:` lines (CRLF-ended, as Google sends them),
//! each a whole `GenerateContentResponse`, with no end marker.
//!
//! Each chunk has one candidate (`index: 0`) whose `content` (`role: "model"`) holds the new
//! parts, plus `usageMetadata`, `modelVersion` and `responseId`. Text comes in pieces, one
//! `text` part per chunk (after a `thought: true` part with the thinking text when the request
//! set `includeThoughts`); each call comes whole, one chunk each, as a `functionCall` part
//! with `id`, `name` and `args` (the script's own text); the thinking signature rides as
//! `thoughtSignature` on the first `functionCall` part, or on the first text part when there
//! is no call. The last chunk has `finishReason` and the full usage; the earlier ones only the
//! prompt's (Gemini repeats `usageMetadata` on every chunk).

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{json_text, pieces, stop_word, Ctx, Emitter};
use crate::script::Answer;
use history::providers::Format;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    candidates: [Candidate<'a>; 1],
    usage_metadata: Value,
    model_version: &'a str,
    response_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_reason: Option<&'a str>,
    index: u32,
}

#[derive(Serialize)]
struct Content<'a> {
    parts: Vec<Part<'a>>,
    role: &'static str,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

/// `args` is last, so that the cut fault finds where it starts.
#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Box<RawValue>>,
}

/// One chunk to send: its parts, and whether it holds call 0.
struct Planned<'a> {
    part: Part<'a>,
    call0: bool,
    after_text: bool,
}

pub(super) fn stream(em: &mut Emitter<'_>, answer: &Answer, ctx: &Ctx) -> Result<(), String> {
    let signature = answer.thinking.as_ref().map(|(_, s)| s.as_str());
    let mut plan: Vec<Planned<'_>> = Vec::new();
    if let (Some((thinking, _)), true) = (&answer.thinking, ctx.include_thoughts) {
        plan.push(Planned {
            part: Part {
                text: Some(thinking),
                thought: Some(true),
                ..Part::default()
            },
            call0: false,
            after_text: false,
        });
    }
    let text = pieces(&answer.text);
    for (i, piece) in text.iter().enumerate() {
        let signed = i == 0 && answer.calls.is_empty();
        plan.push(Planned {
            part: Part {
                text: Some(piece),
                thought_signature: if signed { signature } else { None },
                ..Part::default()
            },
            call0: false,
            after_text: i + 1 == text.len(),
        });
    }
    for (i, (id, name, args)) in answer.calls.iter().enumerate() {
        let args = if args.is_empty() {
            None
        } else {
            let raw = RawValue::from_string(args.clone()).map_err(|e| {
                format!("call {i} (`{name}`): Gemini sends `args` as a JSON object, and the script's arguments are not JSON ({e})")
            })?;
            if !raw.get().trim_start().starts_with('{') {
                return Err(format!(
                    "call {i} (`{name}`): Gemini sends `args` as a JSON object, and the script's arguments are not an object"
                ));
            }
            Some(raw)
        };
        plan.push(Planned {
            part: Part {
                function_call: Some(FunctionCall { id, name, args }),
                thought_signature: if i == 0 { signature } else { None },
                ..Part::default()
            },
            call0: i == 0,
            after_text: false,
        });
    }
    if text.is_empty() {
        em.text_end();
    }
    if plan.is_empty() {
        plan.push(Planned {
            part: Part {
                text: Some(""),
                thought_signature: signature,
                ..Part::default()
            },
            call0: false,
            after_text: false,
        });
    }
    let (input, output, cached) = answer.usage;
    let last = plan.len() - 1;
    for (n, planned) in plan.into_iter().enumerate() {
        let is_last = n == last;
        let usage = if is_last {
            let mut u = json!({
                "promptTokenCount": input,
                "candidatesTokenCount": output,
                "totalTokenCount": input + output,
            });
            if cached > 0 {
                u["cachedContentTokenCount"] = json!(cached);
            }
            u
        } else {
            json!({"promptTokenCount": input, "totalTokenCount": input})
        };
        let chunk = Chunk {
            candidates: [Candidate {
                content: Content {
                    parts: vec![planned.part],
                    role: "model",
                },
                finish_reason: is_last.then(|| stop_word(Format::Gemini, answer)),
                index: 0,
            }],
            usage_metadata: usage,
            model_version: &ctx.model,
            response_id: &ctx.response_id,
        };
        match em.cut_limit() {
            Some(limit) if planned.call0 => cut_call0(em, &chunk, limit),
            _ => em.delta(None, &chunk),
        }
        if planned.after_text {
            em.text_end();
        }
    }
    Ok(())
}

/// Sends `chunk`'s line up to `limit` bytes into call 0's `args` text, then cuts.
fn cut_call0(em: &mut Emitter<'_>, chunk: &Chunk<'_>, limit: usize) {
    let line = format!("data: {}", json_text(chunk));
    let args_len = chunk.candidates[0].content.parts[0]
        .function_call
        .as_ref()
        .and_then(|c| c.args.as_ref())
        .map_or(0, |a| a.get().len());
    // A string value holds `"args":` only escaped; unescaped, it is the key.
    let start = line
        .find("\"args\":")
        .map_or(line.len(), |at| at + "\"args\":".len());
    let mut end = (start + limit.min(args_len)).min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    em.cut(line.as_bytes()[..end].to_vec());
}
