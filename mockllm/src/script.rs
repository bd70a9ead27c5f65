//! What the server answers: scripted [`Reply`]s, each a streamed [`Answer`] (with its
//! [`Faults`]) or a plain status response.

use history::providers::Format;
use serde::Deserialize;

use crate::errors;

/// One scripted reply, served to the next valid request of its format.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// A streamed answer, in the provider's SSE format.
    Answer(Answer),
    /// A plain response: this status, these headers, this body (sent as is; `content-type:
    /// application/json` is added unless `headers` names a content type).
    Status {
        /// The HTTP status.
        status: u16,
        /// Extra response headers, such as `retry-after`.
        #[serde(default)]
        headers: Vec<(String, String)>,
        /// The body, verbatim.
        #[serde(default)]
        body: String,
    },
    /// Recorded bytes of a real provider's streaming response, sent as they are (a 200 event
    /// stream), each piece of `chunks` its own write: a capture replayed.
    Recorded {
        /// The body, in the pieces it is sent in.
        chunks: Vec<Vec<u8>>,
    },
    /// A 200 event stream of `head`, then `fill_bytes` bytes `a`, then `tail`, all as given:
    /// one event (or line) as long as a test wants without the server holding it (sent in
    /// pieces of 64 KiB, made once).
    LongEvent {
        /// The bytes before the fill (`data: {"…": "`).
        head: String,
        /// How many bytes `a` follow it.
        fill_bytes: u64,
        /// The bytes after the fill (`"}\n\n` and whatever follows).
        tail: String,
    },
    /// The provider's answer to a request longer than the model's context window, in the
    /// request's format, as the provider sends it: a 400 whose body is OpenAI's `code:
    /// "context_length_exceeded"` (Chat and Responses), Anthropic's `invalid_request_error`
    /// "prompt is too long: … tokens > … maximum", or Gemini's `INVALID_ARGUMENT` "The input
    /// token count (…) exceeds the maximum number of tokens allowed (…)." (Anthropic's 413
    /// `request_too_large` is [`Reply::error`] with 413.)
    ContextOverflow {
        /// openai-responses only: a 200 event stream that fails instead (`response.created`,
        /// `response.in_progress`, then `response.failed` whose `error.code` is
        /// `context_length_exceeded`). Another format answers it with a 500 saying it cannot
        /// be sent.
        #[serde(default)]
        in_stream: bool,
    },
}

impl From<Answer> for Reply {
    fn from(answer: Answer) -> Reply {
        Reply::Answer(answer)
    }
}

impl Reply {
    /// A `status` response with `format`'s error body carrying `message` (OpenAI: `{"error":
    /// {message, type, param, code}}`; Anthropic: `{"type": "error", "error": {type,
    /// message}}`; Gemini: `{"error": {code, message, status}}`), the error type or status
    /// name being the one the provider uses for that HTTP status.
    pub fn error(format: Format, status: u16, message: &str) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: errors::body(format, status, message).to_string(),
        }
    }

    /// A 429 as `format` sends it, asking to wait `retry_after_s` seconds: OpenAI and
    /// Anthropic in a `retry-after` header; Gemini in its body only, as a
    /// `google.rpc.RetryInfo` detail with `retryDelay: "{n}s"` (Gemini sends no header).
    pub fn rate_limited(format: Format, retry_after_s: u64) -> Reply {
        let body = errors::rate_limited(format, retry_after_s).to_string();
        let headers = match format {
            Format::Gemini => Vec::new(),
            _ => vec![("retry-after".to_string(), retry_after_s.to_string())],
        };
        Reply::Status {
            status: 429,
            headers,
            body,
        }
    }

    /// A recorded body sent as it is, one piece per write (see [`Reply::Recorded`]).
    pub fn recorded(chunks: Vec<Vec<u8>>) -> Reply {
        Reply::Recorded { chunks }
    }

    /// The request's provider's context-overflow error, as a 400 (see
    /// [`Reply::ContextOverflow`]).
    pub fn context_overflow() -> Reply {
        Reply::ContextOverflow { in_stream: false }
    }

    /// openai-responses' context overflow inside a 200 event stream, as `response.failed` (see
    /// [`Reply::ContextOverflow`]).
    pub fn context_overflow_in_stream() -> Reply {
        Reply::ContextOverflow { in_stream: true }
    }

    /// This reply with one more response header (a [`Reply::Answer`] or
    /// [`Reply::ContextOverflow`] is returned unchanged: their headers are the provider's own).
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }
}

/// How the answer ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The model called tools (OpenAI Chat `tool_calls`, Anthropic `tool_use`, Gemini `STOP`).
    ToolUse,
    /// The model finished (`stop`, `end_turn`, `STOP`).
    #[default]
    EndTurn,
    /// The output token limit was hit (`length`, `max_tokens`, Responses
    /// `response.incomplete` with `max_output_tokens`, Gemini `MAX_TOKENS`).
    Length,
}

/// A streamed answer: text, then tool calls, with optional thinking before them.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Answer {
    /// The assistant text (streamed in pieces of about [`crate::PIECE_BYTES`] bytes).
    pub text: String,
    /// Tool calls: (id, name, arguments as JSON text), in order. Gemini sends each call's
    /// arguments whole, as an `args` object holding this exact text (which must then be a
    /// JSON object, or empty for no `args`); the others stream the text in pieces.
    pub calls: Vec<(String, String, String)>,
    /// Thinking (text, signature): an Anthropic `thinking` block; a Responses `reasoning`
    /// item whose `encrypted_content` is the signature (when the request asked for
    /// `reasoning.encrypted_content`); Gemini's `thoughtSignature` on the first function call
    /// part (else on the first text part), and a `thought: true` text part when the request
    /// asked for `includeThoughts`. OpenAI Chat streams no reasoning: ignored there.
    pub thinking: Option<(String, String)>,
    /// How it ends.
    pub stop: Stop,
    /// Token usage (input with cached included, output, cached input), reported in each
    /// provider's terms (Anthropic's `input_tokens` leaves the cached ones out).
    pub usage: (u64, u64, u64),
    /// The response id (`chatcmpl-…`, `resp_…`, `msg_…`, Gemini `responseId`); empty: the
    /// server makes one up, unique in the server.
    pub response_id: String,
    /// Faults to inject while streaming.
    pub faults: Faults,
}

/// Faults one streamed answer injects.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Wait this long before sending anything, headers included.
    pub first_byte_delay_ms: u64,
    /// Wait this long before each SSE event after the first.
    pub chunk_delay_ms: u64,
    /// Close the connection (no clean end of the body) right after this many bytes of call
    /// 0's arguments were sent (all of them when it has fewer; Gemini cuts its one `data:`
    /// line there, mid-JSON). Ignored when the answer has no calls.
    pub cut_in_call_arguments: Option<usize>,
    /// Send one `data:` line that is not JSON right after the first delta event; the stream
    /// goes on normally after it.
    pub malformed_line: bool,
    /// Send the text, then nothing more, keeping the connection open until the client
    /// closes it.
    pub hang_after_text: bool,
    /// Send the text, then an event that says nothing (Anthropic's `event: ping`) every this
    /// many ms, until the client closes the connection: a stream that never ends.
    pub ping_after_text_ms: Option<u64>,
}

impl Answer {
    /// An answer that is only `text`, ending the turn.
    pub fn text(text: &str) -> Answer {
        Answer {
            text: text.to_string(),
            ..Answer::default()
        }
    }

    /// An answer that only calls tools: (id, name, arguments JSON text) each; stop
    /// [`Stop::ToolUse`].
    pub fn calls(calls: Vec<(&str, &str, &str)>) -> Answer {
        Answer {
            calls: calls
                .into_iter()
                .map(|(id, name, args)| (id.to_string(), name.to_string(), args.to_string()))
                .collect(),
            stop: Stop::ToolUse,
            ..Answer::default()
        }
    }

    /// With this text.
    pub fn with_text(mut self, text: &str) -> Answer {
        self.text = text.to_string();
        self
    }

    /// With one more call (stop becomes [`Stop::ToolUse`]).
    pub fn with_call(mut self, id: &str, name: &str, arguments: &str) -> Answer {
        self.calls
            .push((id.to_string(), name.to_string(), arguments.to_string()));
        self.stop = Stop::ToolUse;
        self
    }

    /// With thinking (text, signature).
    pub fn with_thinking(mut self, text: &str, signature: &str) -> Answer {
        self.thinking = Some((text.to_string(), signature.to_string()));
        self
    }

    /// Ending so.
    pub fn with_stop(mut self, stop: Stop) -> Answer {
        self.stop = stop;
        self
    }

    /// With this usage: input (cached included), output, cached input tokens.
    pub fn with_usage(mut self, input: u64, output: u64, cached: u64) -> Answer {
        self.usage = (input, output, cached);
        self
    }

    /// With this response id.
    pub fn with_response_id(mut self, id: &str) -> Answer {
        self.response_id = id.to_string();
        self
    }

    /// With these faults.
    pub fn with_faults(mut self, faults: Faults) -> Answer {
        self.faults = faults;
        self
    }

    /// Fault: nothing at all for `ms` milliseconds.
    pub fn first_byte_delay_ms(mut self, ms: u64) -> Answer {
        self.faults.first_byte_delay_ms = ms;
        self
    }

    /// Fault: `ms` milliseconds before each event after the first.
    pub fn chunk_delay_ms(mut self, ms: u64) -> Answer {
        self.faults.chunk_delay_ms = ms;
        self
    }

    /// Fault: the connection closes after `bytes` bytes of call 0's arguments.
    pub fn cut_in_call_arguments(mut self, bytes: usize) -> Answer {
        self.faults.cut_in_call_arguments = Some(bytes);
        self
    }

    /// Fault: one `data:` line that is not JSON, after the first delta.
    pub fn malformed_line(mut self) -> Answer {
        self.faults.malformed_line = true;
        self
    }

    /// Fault: the text, then silence with the connection open.
    pub fn hang_after_text(mut self) -> Answer {
        self.faults.hang_after_text = true;
        self
    }

    /// Fault: the text, then a ping every `every_ms`, forever.
    pub fn ping_after_text(mut self, every_ms: u64) -> Answer {
        self.faults.ping_after_text_ms = Some(every_ms);
        self
    }
}
