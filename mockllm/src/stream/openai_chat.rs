//! OpenAI Chat Completions: `data:` lines of `chat.completion.chunk` objects, then
//! `data: [DONE]`.
//!
//! The first chunk carries `role: "assistant"` (with the first call's start when there is no
//! text, as the API does); text comes as `delta.content`; each call as `delta.tool_calls`
//! entries keyed by `index`, the first with `id`, `type` and `function.name` (and empty
//! `arguments`), the rest with `function.arguments` pieces; then a chunk with an empty delta
//! and `finish_reason`; then, when the request set `stream_options.include_usage`, a chunk
//! with no choices and the `usage` (every earlier chunk then has `"usage": null`).

use history::providers::Format;
use serde_json::{json, Value};

use super::{pieces, stop_word, Ctx, Emitter};
use crate::script::Answer;

fn chunk(ctx: &Ctx, delta: Value, finish_reason: Value) -> Value {
    let mut chunk = json!({
        "id": ctx.response_id,
        "object": "chat.completion.chunk",
        "created": ctx.created_s,
        "model": ctx.model,
        "system_fingerprint": "fp_mockllm",
        "choices": [{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
    });
    if ctx.include_usage {
        chunk["usage"] = Value::Null;
    }
    chunk
}

fn call_start(index: usize, id: &str, name: &str) -> Value {
    json!([{
        "index": index,
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }])
}

pub(super) fn stream(em: &mut Emitter<'_>, answer: &Answer, ctx: &Ctx) {
    let calls_first = answer.text.is_empty() && !answer.calls.is_empty();
    if calls_first {
        let (id, name, _) = &answer.calls[0];
        let delta = json!({
            "role": "assistant",
            "content": null,
            "tool_calls": call_start(0, id, name),
            "refusal": null,
        });
        em.event(None, &chunk(ctx, delta, Value::Null));
    } else {
        let delta = json!({"role": "assistant", "content": "", "refusal": null});
        em.event(None, &chunk(ctx, delta, Value::Null));
    }
    for piece in pieces(&answer.text) {
        em.delta(None, &chunk(ctx, json!({"content": piece}), Value::Null));
    }
    em.text_end();
    for (i, (id, name, args)) in answer.calls.iter().enumerate() {
        if !(calls_first && i == 0) {
            let delta = json!({"tool_calls": call_start(i, id, name)});
            em.event(None, &chunk(ctx, delta, Value::Null));
        }
        for piece in pieces(args) {
            let (piece, cut) = em.args_piece(i, piece);
            if !piece.is_empty() {
                let delta = json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]});
                em.delta(None, &chunk(ctx, delta, Value::Null));
            }
            if cut {
                em.cut(Vec::new());
            }
        }
        if i == 0 {
            em.call0_end();
        }
    }
    let finish = stop_word(Format::OpenAiChat, answer);
    em.event(None, &chunk(ctx, json!({}), json!(finish)));
    if ctx.include_usage {
        let (input, output, cached) = answer.usage;
        let usage = json!({
            "id": ctx.response_id,
            "object": "chat.completion.chunk",
            "created": ctx.created_s,
            "model": ctx.model,
            "system_fingerprint": "fp_mockllm",
            "choices": [],
            "usage": {
                "prompt_tokens": input,
                "completion_tokens": output,
                "total_tokens": input + output,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
        });
        em.event(None, &usage);
    }
    em.raw("[DONE]");
}
