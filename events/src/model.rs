//! The model seam: how a session asks a model for its next assistant message.
//!
//! A [`Model`] is given a [`ModelRequest`] (the conversation so far, the step's visible tools
//! with their input schemas, and settings) and answers with a stream of [`ModelEvent`]s: text
//! deltas, tool calls begun / argument deltas / ended, usage, the provider's response id, the
//! state the provider wants back, and the stop reason. The request is made in two moves,
//! [`Model::body`] then [`Model::send`], so that the agent loop can journal the body's hash and
//! size (`llm/request`) and make the results it carries durable before anything leaves the
//! process. Retries, timeouts, the user's stop and journaling are the loop's
//! (the runtime's `agent`), the same for every provider; an adapter only speaks its wire format and
//! says which failures are worth another attempt ([`ModelError::retryable`]).
//!
//! The HTTP adapters (OpenAI Chat Completions and Responses, Anthropic, Gemini) live in the
//! `tooljournal-llm` crate; the transcript player (the runtime's `transcript::ScriptedModel`)
//! implements the same trait.

use crate::event::StopReason;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::fmt;

pub use history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ProviderState, ToolSpec,
};

/// What a step asks the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The turn the request belongs to.
    pub turn: u32,
    /// The step within the turn, from 1.
    pub step: u32,
    /// The conversation so far (system prompt included), ending with the user's message or the
    /// results of the previous step.
    pub conversation: Conversation,
    /// The tools the model is shown in this step, in `step/tools` order.
    pub tools: Vec<ToolSpec>,
    /// Settings.
    pub settings: ModelSettings,
}

/// Token counts of one response, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens, cached ones included.
    pub input_tokens: u64,
    /// Output tokens (reasoning included where the provider counts it there).
    pub output_tokens: u64,
    /// Input tokens served from the provider's cache.
    pub cached_input_tokens: u64,
}

/// One piece of a streamed answer. Calls are numbered by `index`, their position in the
/// assistant message (0-based, model order); a call's arguments are the concatenation of its
/// deltas, byte for byte.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// Assistant text.
    TextDelta(String),
    /// A tool call begins.
    CallBegin {
        /// Its position in the message.
        index: u32,
        /// The provider's id for it (an adapter makes one up, deterministically, for a provider
        /// that gives none).
        id: String,
        /// The tool it calls.
        name: String,
    },
    /// More of a call's argument text.
    CallArgumentsDelta {
        /// The call's position.
        index: u32,
        /// The next bytes of its argument text.
        delta: String,
    },
    /// A call's arguments are complete.
    CallEnd {
        /// The call's position.
        index: u32,
    },
    /// Token counts (the last one reported wins).
    Usage(Usage),
    /// The provider's id for the response.
    ResponseId(String),
    /// State the provider requires back with this message (see [`ProviderState`]), as JSON
    /// text in that format's shape.
    ProviderState(String),
    /// The provider refused the answer: its own word for why (`refusal`, `content_filter`,
    /// `SAFETY`, …) and what it said of it, verbatim (empty when it said nothing); comes before
    /// [`ModelEvent::Stop`] with [`StopReason::Refusal`].
    Refusal {
        /// The provider's word for the refusal.
        reason: String,
        /// What the provider said of it.
        explanation: String,
    },
    /// Something the adapter noticed and kept rather than refuse (a content block of a type
    /// it does not know, kept verbatim as provider state), in words.
    Note(String),
    /// Why the model stopped: the stream's last event.
    Stop(StopReason),
    /// The provider is still at work, saying nothing the message keeps (a ping, reasoning it
    /// does not show): it only tells the agent loop the stream is alive, so a model that thinks
    /// for minutes is not taken for a dead connection.
    KeepAlive,
}

/// What kind of failure a [`ModelError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelErrorKind {
    /// The connection failed or broke (refused, reset, timed out, a stream cut short): another
    /// attempt may succeed.
    Transport,
    /// The provider answered with an HTTP error status (see [`ModelError::status`]).
    Status,
    /// The provider's answer could not be read (not JSON, not SSE, an unknown shape).
    Malformed,
    /// The request could not be made at all (a missing key, a bad URL): no attempt will help.
    Config,
    /// The request is longer than the model's context window: not retried as is; the context
    /// must be reduced first. The provider said so with an HTTP error status (in
    /// [`ModelError::status`], as for [`ModelErrorKind::Status`]) or in its stream.
    // Last: the journal stores the variant's index.
    ContextOverflow,
}

/// A failed request, as an adapter reports it: never holds a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// What kind of failure.
    pub kind: ModelErrorKind,
    /// The HTTP status, for [`ModelErrorKind::Status`].
    pub status: Option<u16>,
    /// How long the provider asked to wait (`Retry-After`, `retry-after-ms`), in ms.
    pub retry_after_ms: Option<u64>,
    /// One line for people: the provider's own error message verbatim where it gave one, the
    /// URL for a connection failure.
    pub message: String,
}

impl ModelError {
    /// Whether another attempt may succeed: a transport failure, or 408, 409, 429 or 5xx.
    /// 400, 401, 403, 404 and every other status are the request's fault and are not retried;
    /// nor is a context overflow (the same request would overflow again).
    pub fn retryable(&self) -> bool {
        match self.kind {
            ModelErrorKind::Transport => true,
            ModelErrorKind::Status => {
                matches!(self.status, Some(408 | 409 | 429) | Some(500..=599))
            }
            ModelErrorKind::Malformed
            | ModelErrorKind::Config
            | ModelErrorKind::ContextOverflow => false,
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "HTTP {status}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ModelError {}

/// What a model answers: its events, in order, ending with [`ModelEvent::Stop`]. A stream that
/// ends without `Stop`, or with an error, is a broken response.
pub type ModelStream<'a> = BoxStream<'a, Result<ModelEvent, ModelError>>;

/// A model: a provider's API behind a network, or a transcript.
pub trait Model: Send {
    /// The provider, as `recover rebuild --format` names it (`openai-chat`, `openai-responses`,
    /// `anthropic`, `gemini`), or another name for a model that is no provider's
    /// (`scripted`).
    fn provider(&self) -> &str;

    /// The model's name at its provider.
    fn model(&self) -> &str;

    /// Where requests go when that is not the provider's own address (an OpenAI-compatible
    /// server, a proxy), for `session/model`: a resume goes back there. `None` for the
    /// provider's own address, and for a URL that carries credentials (a user, a password),
    /// which is never journaled.
    fn base_url(&self) -> Option<String> {
        None
    }

    /// The request body as it will be sent, credentials excluded: hashed and measured for
    /// `llm/request` before it is sent.
    fn body(&mut self, request: &ModelRequest) -> Result<Vec<u8>, ModelError>;

    /// Sends `body` (from [`Model::body`]); resolves once the response has begun (its status
    /// read), to the stream of its events.
    fn send(&mut self, body: Vec<u8>) -> BoxFuture<'_, Result<ModelStream<'_>, ModelError>>;
}
