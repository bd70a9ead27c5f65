//! The model seam: what drives a session, one step at a time.
//!
//! A [`Model`] yields the next thing that happens in a session: the user opens a turn, or the
//! model answers in the open turn. The transcript player (`crate::transcript`) implements it for
//! JSON-lines transcripts; a network model implements the same trait.

use crate::event::{AskAnswer, ModelResponse};
use std::collections::BTreeMap;

/// The next thing that happens.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelStep {
    /// The user says something: a new turn.
    User {
        /// The user's message, journaled in `turn/start`.
        text: String,
    },
    /// The model answers in the open turn.
    Respond(Respond),
}

/// A model response, with what the (scripted) user does meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct Respond {
    /// The assistant message, tool calls included.
    pub response: ModelResponse,
    /// The user presses stop this long after the batch starts.
    pub cancel_after_ms: Option<u64>,
    /// Answers to `ask` decisions, by call id.
    pub approvals: BTreeMap<String, AskAnswer>,
}

/// A source of session steps: a transcript, or a real model behind a network.
pub trait Model: Send {
    /// The next step, or `None` when the session is over.
    fn next_step(&mut self) -> Option<ModelStep>;
}
