//! An [`Answer`] as the frames of one provider's SSE stream, with its faults laid in.
//!
//! The events are written here as bytes (`event:`/`data:` lines of serde_json text, which
//! holds no newline) rather than through axum's `Sse` response, because the faults need
//! byte-level control: a `data:` line cut mid-JSON, a line that is not JSON, silence with
//! the connection open.

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;

use axum::body::Bytes;
use history::providers::Format;
use serde::Serialize;

use crate::script::{Answer, Faults};

/// What the request asked for that changes the stream.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// The model named in the body (OpenAI, Anthropic) or the path (Gemini).
    pub model: String,
    /// The response id to use.
    pub response_id: String,
    /// Unix seconds, for `created` fields.
    pub created_s: u64,
    /// OpenAI Chat: `stream_options.include_usage`.
    pub include_usage: bool,
    /// Responses: `include` names `reasoning.encrypted_content`.
    pub encrypted_reasoning: bool,
    /// Gemini: `generationConfig.thinkingConfig.includeThoughts`.
    pub include_thoughts: bool,
}

/// One step of sending a stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    /// Bytes to send (one SSE event).
    Send(Bytes),
    /// Send these bytes, then break the connection.
    Cut(Bytes),
    /// Send nothing more; hold the connection until the client leaves.
    Hang,
    /// Send `bytes` bytes `a`, in pieces of 64 KiB.
    Fill {
        /// How many.
        bytes: u64,
    },
    /// Send these bytes every `every_ms`, until the client leaves.
    Repeat {
        /// One event.
        bytes: Bytes,
        /// The pause before each.
        every_ms: u64,
    },
}

/// The frames `answer` streams as in `format`, or why the script cannot be sent so.
pub(crate) fn frames(format: Format, answer: &Answer, ctx: &Ctx) -> Result<Vec<Frame>, String> {
    let mut em = Emitter::new(&answer.faults, format == Format::Gemini);
    match format {
        Format::OpenAiChat => openai_chat::stream(&mut em, answer, ctx),
        Format::OpenAiResponses => openai_responses::stream(&mut em, answer, ctx),
        Format::Anthropic => anthropic::stream(&mut em, answer, ctx),
        Format::Gemini => gemini::stream(&mut em, answer, ctx)?,
    }
    Ok(em.frames)
}

/// The frames of a stream that fails because the request overflows the model's context
/// window: only openai-responses reports that inside a stream (`response.failed`).
pub(crate) fn failed_frames(format: Format, ctx: &Ctx) -> Result<Vec<Frame>, String> {
    let faults = Faults::default();
    let mut em = Emitter::new(&faults, false);
    match format {
        Format::OpenAiResponses => openai_responses::failed(
            &mut em,
            ctx,
            crate::errors::OVERFLOW_CODE,
            crate::errors::RESPONSES_OVERFLOW,
        ),
        _ => {
            return Err(format!(
                "{format} reports a context overflow only as a 400, not in a stream"
            ))
        }
    }
    Ok(em.frames)
}

/// The size text and arguments are streamed in, in bytes (a piece never splits a character).
pub const PIECE_BYTES: usize = 7;

/// `s` in pieces of about [`PIECE_BYTES`] bytes, cut at character boundaries; none for "".
pub(crate) fn pieces(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + PIECE_BYTES).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

/// Builds the frames, applying the faults as the provider modules emit events. Once the
/// connection is cut or left hanging, later events are dropped, so that each provider module
/// can be written as the whole stream.
pub(crate) struct Emitter<'a> {
    faults: &'a Faults,
    /// Gemini ends lines with CRLF (the SSE spec allows either).
    crlf: bool,
    frames: Vec<Frame>,
    /// Bytes of call 0's arguments sent so far.
    args0_sent: usize,
    malformed_sent: bool,
    /// Cut or hanging: nothing more is sent.
    over: bool,
}

impl<'a> Emitter<'a> {
    fn new(faults: &'a Faults, crlf: bool) -> Self {
        Emitter {
            faults,
            crlf,
            frames: Vec::new(),
            args0_sent: 0,
            malformed_sent: false,
            over: false,
        }
    }

    /// One event's bytes: `event: name` (when named) and `data: json`.
    fn encode(&self, name: Option<&str>, data: &str) -> String {
        let nl = if self.crlf { "\r\n" } else { "\n" };
        match name {
            Some(name) => format!("event: {name}{nl}data: {data}{nl}{nl}"),
            None => format!("data: {data}{nl}{nl}"),
        }
    }

    fn push(&mut self, frame: Frame) {
        if !self.over {
            self.frames.push(frame);
        }
    }

    /// An event whose data is `data` as JSON.
    pub(crate) fn event(&mut self, name: Option<&str>, data: &impl Serialize) {
        let text = json_text(data);
        let bytes = self.encode(name, &text);
        self.push(Frame::Send(bytes.into()));
    }

    /// An event whose data is `data` verbatim (OpenAI's `[DONE]`).
    pub(crate) fn raw(&mut self, data: &str) {
        let bytes = self.encode(None, data);
        self.push(Frame::Send(bytes.into()));
    }

    /// A delta event: the malformed line, when asked for, follows the first one.
    pub(crate) fn delta(&mut self, name: Option<&str>, data: &impl Serialize) {
        self.event(name, data);
        if self.faults.malformed_line && !self.malformed_sent && !self.over {
            self.malformed_sent = true;
            // Unterminated JSON: the line is `data:` but its text does not parse.
            let bytes = self.encode(name, "{\"mockllm\": \"malformed");
            self.push(Frame::Send(bytes.into()));
        }
    }

    /// The text is all sent: hang here when asked to.
    pub(crate) fn text_end(&mut self) {
        if self.faults.hang_after_text {
            self.push(Frame::Hang);
            self.over = true;
        } else if let Some(every_ms) = self.faults.ping_after_text_ms {
            let bytes = self.encode(Some("ping"), r#"{"type": "ping"}"#);
            self.push(Frame::Repeat {
                bytes: bytes.into(),
                every_ms,
            });
            self.over = true;
        }
    }

    /// What may be sent of `piece`, the next piece of call 0's arguments, and whether the
    /// connection is cut right after it.
    fn call0_piece<'p>(&mut self, piece: &'p str) -> (&'p str, bool) {
        let Some(limit) = self.faults.cut_in_call_arguments else {
            return (piece, false);
        };
        let room = limit.saturating_sub(self.args0_sent);
        if piece.len() < room {
            self.args0_sent += piece.len();
            return (piece, false);
        }
        let mut end = room;
        while !piece.is_char_boundary(end) {
            end -= 1;
        }
        self.args0_sent += end;
        (&piece[..end], true)
    }

    /// Call 0's arguments are all sent: cut now if the limit was not reached before.
    pub(crate) fn call0_end(&mut self) {
        if self.faults.cut_in_call_arguments.is_some() {
            self.cut(Vec::new());
        }
    }

    /// Send `bytes`, then break the connection.
    pub(crate) fn cut(&mut self, bytes: Vec<u8>) {
        self.push(Frame::Cut(bytes.into()));
        self.over = true;
    }

    /// The arguments-cut limit for call 0, when set.
    pub(crate) fn cut_limit(&self) -> Option<usize> {
        self.faults.cut_in_call_arguments
    }

    /// What may be sent of `piece`, the next piece of call `call`'s arguments, and whether
    /// the connection is cut right after it (only call 0 is ever cut).
    pub(crate) fn args_piece<'p>(&mut self, call: usize, piece: &'p str) -> (&'p str, bool) {
        if call == 0 {
            self.call0_piece(piece)
        } else {
            (piece, false)
        }
    }
}

/// `value` as JSON text.
#[allow(clippy::expect_used)]
fn json_text(value: &impl Serialize) -> String {
    // Serializing a `Value` or a struct of strings, numbers and `RawValue`s cannot fail.
    serde_json::to_string(value).expect("a JSON value serializes")
}

/// The stop reason in each provider's words.
pub(crate) fn stop_word(format: Format, answer: &Answer) -> &'static str {
    use crate::script::Stop;
    match (format, answer.stop) {
        (Format::OpenAiChat, Stop::ToolUse) => "tool_calls",
        (Format::OpenAiChat, Stop::EndTurn) => "stop",
        (Format::OpenAiChat, Stop::Length) => "length",
        (Format::Anthropic, Stop::ToolUse) => "tool_use",
        (Format::Anthropic, Stop::EndTurn) => "end_turn",
        (Format::Anthropic, Stop::Length) => "max_tokens",
        (Format::Gemini, Stop::Length) => "MAX_TOKENS",
        (Format::Gemini, _) => "STOP",
        (Format::OpenAiResponses, Stop::Length) => "max_output_tokens",
        (Format::OpenAiResponses, _) => "completed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_keep_characters_whole_and_join_back() {
        let s = "héllo wörld, ünïcode ✓✓✓";
        let p = pieces(s);
        assert!(p.len() > 2);
        assert_eq!(p.concat(), s);
        assert!(p
            .iter()
            .all(|x| !x.is_empty() && x.len() <= PIECE_BYTES + 3));
        assert!(pieces("").is_empty());
    }

    #[test]
    fn cut_limit_counts_bytes_across_pieces() {
        let faults = Faults {
            cut_in_call_arguments: Some(10),
            ..Faults::default()
        };
        let mut em = Emitter::new(&faults, false);
        assert_eq!(em.call0_piece("0123456"), ("0123456", false));
        assert_eq!(em.call0_piece("789abcd"), ("789", true));
        let zero = Faults {
            cut_in_call_arguments: Some(0),
            ..Faults::default()
        };
        let mut em = Emitter::new(&zero, false);
        assert_eq!(em.call0_piece("abc"), ("", true));
    }
}
