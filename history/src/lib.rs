//! Conversation histories as the model providers take them.
//!
//! A [`conversation::Conversation`] is what a session said, in no provider's format: user
//! messages, assistant messages with their tool calls (and the provider state they came with),
//! and exactly one result per call. [`providers::history`] lays it out as OpenAI Chat
//! Completions, OpenAI Responses, Anthropic Messages or Gemini, [`providers::request_body`]
//! adds the tools and settings to make a whole request body, and [`providers::validate`]
//! checks a body against that provider's pairing and ordering rules. The live runtime (the
//! request it sends) and `recover rebuild` (the body it prints) both render with this crate, so that what a resumed session sends is what the
//! crashed one would have sent. It knows nothing of journals or of running tools.
//!
//! [`layout::layout`] builds the conversation from journal turns, applying a reduction
//! ([`layout::Compaction`]) when the context window was too small; [`reduce`] estimates a
//! history's tokens, plans a deterministic reduction to a budget, and builds the request for
//! a summary of earlier turns.
//!
//! ```
//! use tooljournal_history::conversation::{Conversation, Message};
//! use tooljournal_history::providers::{history, validate, Format};
//! let conv = Conversation {
//!     system: None,
//!     messages: vec![Message::User { text: "hello".into() }],
//! };
//! let body = history(&conv, Format::Anthropic);
//! assert!(validate(Format::Anthropic, &body.value()).is_ok());
//! ```

#![warn(missing_docs)]

pub mod conversation;
pub mod layout;
pub mod providers;
pub mod reduce;
