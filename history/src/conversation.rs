//! The conversation a journal tells, in no provider's format yet.
//!
//! Rebuilding goes journal → [`Conversation`] → provider format, so that the pairing rules
//! (every call answered once, in model order, right after its assistant message) are decided
//! once, here, and each provider module only lays the same conversation out in its own shape.

/// A call as the model made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvCall {
    /// The model's id for the call (mapped to each provider's allowed form when rendered).
    pub id: String,
    /// The tool it calls.
    pub name: String,
    /// Raw argument text, byte for byte (may be invalid JSON).
    pub arguments: String,
}

/// The one result a call gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvResult {
    /// The id of the call it answers.
    pub id: String,
    /// The name of the call it answers.
    pub name: String,
    /// Never empty: an error's content begins with its code.
    pub content: String,
    /// The result is an error (a code begins the content).
    pub is_error: bool,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// What the user said to open a turn.
    User {
        /// The user's text.
        text: String,
    },
    /// An assistant message: its text (may be empty), its calls in model order, and what its
    /// provider requires back with it.
    Assistant {
        /// The assistant's text.
        text: String,
        /// Its tool calls, in model order.
        calls: Vec<ConvCall>,
        /// The provider state that came with it (reasoning, signatures); rendered only in the
        /// format that produced it ([`ProviderState::format`]), dropped in every other.
        state: Option<ProviderState>,
    },
    /// Exactly one result per call of the preceding assistant message, in model order.
    Results {
        /// The results, in the order of the calls.
        results: Vec<ConvResult>,
    },
}

/// A whole conversation, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversation {
    /// The system prompt, when the journal has one.
    pub system: Option<String>,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
}

/// A tool as the model is shown it: its name, what it does, and the JSON Schema of its input.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name as the model calls it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the tool's input (an object schema).
    pub input_schema: serde_json::Value,
}

/// What a provider requires back, verbatim, with the assistant message it came with: reasoning
/// and its signatures. Sent back only to the provider (format) that produced it.
///
/// `items` is JSON text, whose shape depends on `format`:
/// - `anthropic`: an array of the response's `thinking` and `redacted_thinking` content blocks,
///   verbatim and in order (signatures included), when they lead a message of otherwise plain
///   text and calls; rendered first in the assistant's `content`. Otherwise (schema 8: server
///   tools' blocks, text with citations, thinking between other blocks, blocks of kinds not
///   known here) an object `{"content": [...]}`: every block of the message, verbatim and in
///   order, rendered as it is but its `tool_use` blocks (the n-th is the n-th call, rebuilt from
///   the call) and blank text;
/// - `openai-responses`: an array of the response's output items other than its message and
///   its `function_call`s, verbatim: `reasoning` (`id`, `encrypted_content`, `summary`, …) and,
///   schema 8, the hosted tools' calls (`web_search_call`, …) and items of types not known
///   here; rendered right before the assistant's own items, those other than reasoning without
///   their `id`;
/// - `gemini`: an object `{"text": SIG_OR_NULL, "calls": [SIG_OR_NULL, …]}`: the
///   `thoughtSignature` of the first text part, and of each `functionCall` part in call order;
///   or (schema 8, a message with parts of other kinds: executed code and its result, inline
///   data, parts of kinds not known here) `{"parts": [...]}`: every part as it came, rendered as
///   it is but thought summaries (left out) and `functionCall` parts (rebuilt from the calls,
///   with their signatures);
/// - `openai-chat` has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderState {
    /// The format (provider) that produced it, as `Format::as_str` spells it.
    pub format: String,
    /// The state, as JSON text in the shape described above.
    pub items: String,
}

/// Settings a request body carries besides the conversation and the tools.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelSettings {
    /// The longest answer, in tokens (`max_completion_tokens`, `max_output_tokens`,
    /// `max_tokens`, `maxOutputTokens`); the provider's default when `None`, except Anthropic,
    /// which requires one ([`crate::providers::ANTHROPIC_MAX_TOKENS_DEFAULT`]).
    pub max_tokens: Option<u32>,
    /// Sampling temperature; the provider's default when `None`.
    pub temperature: Option<f64>,
}
