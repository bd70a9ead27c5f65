//! Anthropic Messages: named events whose `data:` objects carry the same `type`.
//!
//! `message_start` (the message with empty `content` and the input usage: `input_tokens`
//! without the cached ones, `cache_read_input_tokens`), a `ping` after the first
//! `content_block_start`, then per block `content_block_start` / `content_block_delta`s /
//! `content_block_stop`: `thinking` (`thinking_delta`s, then one `signature_delta`), `text`
//! (`text_delta`s), one `tool_use` per call (`input: {}` at the start, then
//! `input_json_delta`s, the first with empty `partial_json` as the API sends it); then
//! `message_delta` with `stop_reason` and the cumulative `usage`, and `message_stop`.

use history::providers::Format;
use serde_json::{json, Value};

use super::{pieces, stop_word, Ctx, Emitter};
use crate::script::Answer;

struct Blocks<'e, 'f> {
    em: &'e mut Emitter<'f>,
    next: usize,
    pinged: bool,
}

impl Blocks<'_, '_> {
    /// Starts the next block; its index.
    fn start(&mut self, block: Value) -> usize {
        let index = self.next;
        self.next += 1;
        self.em.event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        if !self.pinged {
            self.pinged = true;
            self.em.event(Some("ping"), &json!({"type": "ping"}));
        }
        index
    }

    fn delta(&mut self, index: usize, delta: Value) {
        self.em.delta(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }

    fn stop(&mut self, index: usize) {
        self.em.event(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
}

pub(super) fn stream(em: &mut Emitter<'_>, answer: &Answer, ctx: &Ctx) {
    let (input, output, cached) = answer.usage;
    let uncached = input.saturating_sub(cached);
    em.event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": ctx.response_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": ctx.model,
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": uncached,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached,
                "output_tokens": 1,
            },
        }}),
    );
    let mut b = Blocks {
        em,
        next: 0,
        pinged: false,
    };
    if let Some((thinking, signature)) = &answer.thinking {
        let i = b.start(json!({"type": "thinking", "thinking": ""}));
        for piece in pieces(thinking) {
            b.delta(i, json!({"type": "thinking_delta", "thinking": piece}));
        }
        b.delta(
            i,
            json!({"type": "signature_delta", "signature": signature}),
        );
        b.stop(i);
    }
    if !answer.text.is_empty() {
        let i = b.start(json!({"type": "text", "text": ""}));
        for piece in pieces(&answer.text) {
            b.delta(i, json!({"type": "text_delta", "text": piece}));
        }
        b.em.text_end();
        b.stop(i);
    } else {
        b.em.text_end();
    }
    for (c, (id, name, args)) in answer.calls.iter().enumerate() {
        let i = b.start(json!({"type": "tool_use", "id": id, "name": name, "input": {}}));
        b.delta(i, json!({"type": "input_json_delta", "partial_json": ""}));
        for piece in pieces(args) {
            let (piece, cut) = b.em.args_piece(c, piece);
            if !piece.is_empty() {
                b.delta(
                    i,
                    json!({"type": "input_json_delta", "partial_json": piece}),
                );
            }
            if cut {
                b.em.cut(Vec::new());
            }
        }
        if c == 0 {
            b.em.call0_end();
        }
        b.stop(i);
    }
    if !b.pinged {
        b.em.event(Some("ping"), &json!({"type": "ping"}));
    }
    message_end(b.em, answer, uncached, cached, output);
}

/// `message_delta` (stop reason, cumulative usage) and `message_stop`.
fn message_end(em: &mut Emitter<'_>, answer: &Answer, uncached: u64, cached: u64, output: u64) {
    em.event(
        Some("message_delta"),
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_word(Format::Anthropic, answer), "stop_sequence": null},
            "usage": {
                "input_tokens": uncached,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached,
                "output_tokens": output,
            },
        }),
    );
    em.event(Some("message_stop"), &json!({"type": "message_stop"}));
}
