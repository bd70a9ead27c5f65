//! The conversation a journal tells, in no provider's format yet.
//!
//! Rebuilding goes journal → [`Conversation`] → provider format, so that the pairing rules
//! (every call answered once, in model order, right after its assistant message) are decided
//! once, here, and each provider module only lays the same conversation out in its own shape.

/// A call as the model made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvCall {
    pub id: String,
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
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    User {
        text: String,
    },
    /// An assistant message: its text (may be empty) and its calls in model order.
    Assistant {
        text: String,
        calls: Vec<ConvCall>,
    },
    /// Exactly one result per call of the preceding assistant message, in model order.
    Results {
        results: Vec<ConvResult>,
    },
}

/// A whole conversation, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversation {
    pub system: Option<String>,
    pub messages: Vec<Message>,
}
