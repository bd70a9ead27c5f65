//! OpenAI Responses: named events (`event: response.created` …), each `data:` object
//! carrying its `type` and a `sequence_number` counting from 0.
//!
//! `response.created`, `response.in_progress`; then per output item `response.output_item.
//! added` … `response.output_item.done`: a `reasoning` item (its `encrypted_content` only
//! when the request's `include` asked for `reasoning.encrypted_content`), a `message` item
//! (`response.content_part.added`, `response.output_text.delta`s, `.done`,
//! `response.content_part.done`), one `function_call` item per call
//! (`response.function_call_arguments.delta`s and `.done`); then `response.completed` with
//! `usage`, or `response.incomplete` with `incomplete_details.reason: "max_output_tokens"`.
//! A context overflow scripted in the stream: `response.created`, `response.in_progress`,
//! `response.failed`.

use serde_json::{json, Value};

use super::{pieces, Ctx, Emitter};
use crate::script::{Answer, Stop};

struct Seq<'e, 'f> {
    em: &'e mut Emitter<'f>,
    next: u64,
}

impl Seq<'_, '_> {
    fn data(&mut self, kind: &str, mut data: Value) -> Value {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.next);
        self.next += 1;
        data
    }

    fn event(&mut self, kind: &str, data: Value) {
        let data = self.data(kind, data);
        self.em.event(Some(kind), &data);
    }

    fn delta(&mut self, kind: &str, data: Value) {
        let data = self.data(kind, data);
        self.em.delta(Some(kind), &data);
    }
}

fn response(ctx: &Ctx, status: &str, output: &[Value], usage: Value, incomplete: Value) -> Value {
    json!({
        "id": ctx.response_id,
        "object": "response",
        "created_at": ctx.created_s,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "instructions": null,
        "max_output_tokens": null,
        "model": ctx.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "store": false,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": null,
        "metadata": {},
    })
}

pub(super) fn stream(em: &mut Emitter<'_>, answer: &Answer, ctx: &Ctx) {
    let mut s = Seq { em, next: 0 };
    let base = ctx.response_id.trim_start_matches("resp_");
    let length = answer.stop == Stop::Length;
    let mut output: Vec<Value> = Vec::new();
    let empty = response(ctx, "in_progress", &[], Value::Null, Value::Null);
    s.event("response.created", json!({"response": empty}));
    s.event("response.in_progress", json!({"response": empty}));

    if let Some((_, signature)) = &answer.thinking {
        let index = output.len();
        let id = format!("rs_{base}");
        let added = json!({"id": id, "type": "reasoning", "summary": []});
        s.event(
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        );
        let mut done = added.clone();
        if ctx.encrypted_reasoning {
            done["encrypted_content"] = json!(signature);
        }
        s.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
        output.push(done);
    }

    if !answer.text.is_empty() || answer.calls.is_empty() {
        let index = output.len();
        let id = format!("msg_{base}");
        let item = json!({
            "id": id, "type": "message", "status": "in_progress", "role": "assistant",
            "content": [],
        });
        s.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        let part = json!({"type": "output_text", "annotations": [], "logprobs": [], "text": ""});
        let at = json!({"item_id": id, "output_index": index, "content_index": 0});
        let with = |extra: Value| {
            let mut v = at.clone();
            for (k, x) in extra.as_object().into_iter().flatten() {
                v[k] = x.clone();
            }
            v
        };
        s.event("response.content_part.added", with(json!({"part": part})));
        for piece in pieces(&answer.text) {
            s.delta(
                "response.output_text.delta",
                with(json!({"delta": piece, "logprobs": []})),
            );
        }
        s.em.text_end();
        s.event(
            "response.output_text.done",
            with(json!({"text": answer.text, "logprobs": []})),
        );
        let part = json!({
            "type": "output_text", "annotations": [], "logprobs": [], "text": answer.text,
        });
        s.event("response.content_part.done", with(json!({"part": part})));
        let status = if length && answer.calls.is_empty() {
            "incomplete"
        } else {
            "completed"
        };
        let item = json!({
            "id": id, "type": "message", "status": status, "role": "assistant",
            "content": [part],
        });
        s.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        output.push(item);
    } else {
        s.em.text_end();
    }

    for (i, (call_id, name, args)) in answer.calls.iter().enumerate() {
        let index = output.len();
        let id = format!("fc_{base}_{i}");
        let item = |arguments: &str, status: &str| {
            json!({
                "id": id, "type": "function_call", "status": status, "arguments": arguments,
                "call_id": call_id, "name": name,
            })
        };
        s.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item("", "in_progress")}),
        );
        for piece in pieces(args) {
            let (piece, cut) = s.em.args_piece(i, piece);
            if !piece.is_empty() {
                s.delta(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": piece}),
                );
            }
            if cut {
                s.em.cut(Vec::new());
            }
        }
        if i == 0 {
            s.em.call0_end();
        }
        s.event(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": args, "name": name}),
        );
        let last = i + 1 == answer.calls.len();
        let status = if length && last {
            "incomplete"
        } else {
            "completed"
        };
        let done = item(args, status);
        s.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
        output.push(done);
    }

    let (input, out, cached) = answer.usage;
    let usage = json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + out,
    });
    if length {
        let r = response(
            ctx,
            "incomplete",
            &output,
            usage,
            json!({"reason": "max_output_tokens"}),
        );
        s.event("response.incomplete", json!({"response": r}));
    } else {
        let r = response(ctx, "completed", &output, usage, Value::Null);
        s.event("response.completed", json!({"response": r}));
    }
}

/// A response that fails before any output: `response.created`, `response.in_progress`, then
/// `response.failed` whose `response.error` is `{code, message}` (the shape codex-rs reads in
/// `codex-api/src/sse/responses.rs`).
pub(super) fn failed(em: &mut Emitter<'_>, ctx: &Ctx, code: &str, message: &str) {
    let mut s = Seq { em, next: 0 };
    let empty = response(ctx, "in_progress", &[], Value::Null, Value::Null);
    s.event("response.created", json!({"response": empty}));
    s.event("response.in_progress", json!({"response": empty}));
    let mut failed = response(ctx, "failed", &[], Value::Null, Value::Null);
    failed["error"] = json!({"code": code, "message": message});
    s.event("response.failed", json!({"response": failed}));
}
