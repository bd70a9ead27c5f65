//! A reduction of the context a live model is sent (`context/summary-requested`,
//! `context/compacted`): journaled before the request it shortens, so the history `recover`
//! rebuilds is the one the model last saw, while every original call and result stays in the
//! journal.
//!
//! Why the reduction names turns and steps, not message positions: both the live loop and
//! `recover` lay a conversation out from the journal's turns (`history::layout`), so the same
//! record gives the same messages to both (I17).

use serde::{Deserialize, Serialize};

/// What set a reduction off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactTrigger {
    /// The provider refused the request as longer than the model's context window.
    Overflow,
    /// The request's estimate passed `compact_at_percent` of the model's context window.
    Threshold,
}

/// `context/summary-requested`: the model is about to be asked for a summary of earlier turns
/// (synced before it is sent). Without a `context/compacted` after it, nothing was reduced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSummaryRequested {
    /// The turn whose request is being reduced.
    pub turn: u32,
    /// The step whose request is being reduced.
    pub step: u32,
    /// The summary is to replace turns 1 to this one.
    pub through_turn: u32,
    /// sha256 (hex) of the body sent.
    pub body_sha256: String,
    /// The body's size.
    pub body_bytes: u64,
}

/// `context/compacted`: from this step's next request on, the model is sent the conversation
/// reduced this way (it replaces any earlier reduction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCompacted {
    /// The turn whose request it shortens.
    pub turn: u32,
    /// The step whose request it shortens.
    pub step: u32,
    /// What set it off.
    pub trigger: CompactTrigger,
    /// Turns 1 to this one are left out (0: none).
    pub through_turn: u32,
    /// The model's summary of those turns, put before the first turn kept; `None`: they are
    /// left out with a note saying so.
    pub summary: Option<String>,
    /// Why there is no summary when turns were left out (the summary request failed: how).
    pub summary_note: Option<String>,
    /// (turn, step) of the kept steps whose tool results are cut to a preview.
    pub shortened: Vec<(u32, u32)>,
    /// How many characters of a shortened result are kept (half from each end).
    pub preview_chars: u32,
    /// The request's estimated size before, in tokens (bytes / 4).
    pub tokens_before: u64,
    /// The reduced request's estimated size.
    pub tokens_after: u64,
}

/// `context/calibrated` (schema 10): the provider's overflow error counted the refused request's
/// tokens. From here on the session sets its estimates (bytes / 4, which undercounts text such
/// as CJK) against windows scaled by `estimate_tokens / provider_tokens`, so the provider's
/// count wins; `provider_max_tokens`, when the error gave it, is the model's window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCalibrated {
    /// The turn of the refused request.
    pub turn: u32,
    /// Its step.
    pub step: u32,
    /// Its attempt (the step's last, failed `context_overflow`).
    pub attempt: u32,
    /// The refused request's estimate (bytes / 4); never 0.
    pub estimate_tokens: u64,
    /// The provider's count of it; never 0.
    pub provider_tokens: u64,
    /// The most the provider said it takes, when it said.
    pub provider_max_tokens: Option<u64>,
}

impl ContextCalibrated {
    /// `tokens` as the provider counts them, converted to the estimate's units (bytes / 4),
    /// rounded down: what the estimate of a request must stay within for the provider to count
    /// at most `tokens`.
    pub fn to_estimate(&self, tokens: u64) -> u64 {
        let scaled = u128::from(tokens) * u128::from(self.estimate_tokens)
            / u128::from(self.provider_tokens.max(1));
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }
}

impl ContextCompacted {
    /// The reduction as the history lays it out (`history::layout`).
    pub fn compaction(&self) -> history::layout::Compaction {
        history::layout::Compaction {
            through_turn: self.through_turn,
            summary: self.summary.clone(),
            shortened: self.shortened.clone(),
            preview_chars: self.preview_chars,
        }
    }
}
