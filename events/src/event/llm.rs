//! The events a live model's requests leave (event schema 3): which model and prompt
//! (`session/model`), the tools as the model is shown them (`tool/schema`), and each attempt of
//! a step's request (`llm/request`, `llm/attempt-failed`, `llm/response-detail`; schema 8:
//! `llm/refusal`, `llm/note`). Their variants are in [`super::Event`]; DESIGN.md §11 says when
//! each is written.

use serde::{Deserialize, Serialize};

/// `session/model`: which model a session talks to, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionModel {
    /// The provider, as `recover rebuild --format` names it, or `scripted`.
    pub provider: String,
    /// The model's name at the provider.
    pub model: String,
    /// The system prompt sent with every request, byte for byte.
    pub system: Option<String>,
    /// Settings sent with every request.
    pub settings: crate::model::ModelSettings,
    /// What a change dropped, in words (e.g. provider state kept for another provider).
    pub note: Option<String>,
    /// Where requests went when not to the provider's own address (an OpenAI-compatible
    /// server, a proxy), so that a resume goes back there; never a URL holding credentials.
    pub base_url: Option<String>,
}

/// `tool/schema`: one distinct tool schema, recorded once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The hash `step/tools` and `session/open` name it by (sha256 of the canonical JSON of the
    /// input and output schemas).
    pub schema_hash: String,
    /// The tool's name as the model calls it.
    pub name: String,
    /// Its description, as the model is shown it.
    pub description: String,
    /// Its input schema, as canonical JSON text.
    pub input_schema: String,
}

/// `llm/request`: one attempt of a step's request, before it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The turn it belongs to.
    pub turn: u32,
    /// The step it belongs to.
    pub step: u32,
    /// 1 for the first attempt, then 2, 3, … for retries.
    pub attempt: u32,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// sha256 (hex) of the body sent (credentials are never in it).
    pub body_sha256: String,
    /// The body's size.
    pub body_bytes: u64,
}

/// `llm/attempt-failed`: an attempt that did not give a whole response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmAttemptFailed {
    /// The turn it belongs to.
    pub turn: u32,
    /// The step it belongs to.
    pub step: u32,
    /// The attempt that failed.
    pub attempt: u32,
    /// What kind of failure.
    pub kind: crate::model::ModelErrorKind,
    /// The HTTP status, if the provider answered with one.
    pub status: Option<u16>,
    /// The error, as shown (the provider's message verbatim where it gave one).
    pub message: String,
    /// The text that arrived before the failure (never part of the history).
    pub partial_text: String,
    /// Whether another attempt follows (after `backoff_ms`).
    pub retry: bool,
    /// How long the loop waits before the next attempt.
    pub backoff_ms: u64,
}

/// `llm/response-detail`: the rest of a response, right after its `llm/response`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmResponseDetail {
    /// The turn it belongs to.
    pub turn: u32,
    /// The step it belongs to.
    pub step: u32,
    /// The attempt that gave the response.
    pub attempt: u32,
    /// The provider's id for the response.
    pub response_id: Option<String>,
    /// Token counts.
    pub usage: crate::model::Usage,
    /// The state the provider requires back with this message, verbatim: its format's name and
    /// JSON text (see `history::conversation::ProviderState`).
    pub provider_state: Option<(String, String)>,
}

/// `llm/refusal` (schema 8): why the step's answer was refused, right after its
/// `llm/response-detail` when its stop reason is `refusal`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmRefusal {
    /// The turn it belongs to.
    pub turn: u32,
    /// The step it belongs to.
    pub step: u32,
    /// The attempt that gave the response.
    pub attempt: u32,
    /// The provider's own word for it (`refusal`, `content_filter`, `SAFETY`, `RECITATION`, …).
    pub reason: String,
    /// What the provider said of it, verbatim (Anthropic's `stop_details`), or empty.
    pub explanation: String,
}

/// `llm/note` (schema 8): what the adapter noticed in the step's answer and kept rather than
/// refuse, in words; after the step's `llm/response-detail`, before its calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmNote {
    /// The turn it belongs to.
    pub turn: u32,
    /// The step it belongs to.
    pub step: u32,
    /// The attempt that gave the response.
    pub attempt: u32,
    /// The note.
    pub note: String,
}
