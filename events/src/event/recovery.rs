//! What `recover` appends to balance a crashed session's journal: each unfinished call's
//! classification and the result it commits for it, and the step and turn it interrupts.

use super::{CallRef, CommittedResult};
use crate::state::CallState;
use serde::{Deserialize, Serialize};

/// What recovery decided about an unfinished call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Classification {
    /// The journal shows the body never started (`started` was never durable): safe to retry.
    ToolNotStarted,
    /// `started` is durable but no `settled`: the body may have run partly or fully; check its
    /// declared resources before retrying.
    ToolOutcomeUnknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// One call `recover` committed a result for: an orphan, or a settled call whose commit was lost.
pub struct RecoveredCall {
    /// The call recovery closed.
    pub call: CallRef,
    /// The last state the journal shows.
    pub state: CallState,
    /// `None` when the call had settled: its real result is committed as is.
    pub classification: Option<Classification>,
    /// The result committed for it: its real result if it settled, else the classification's error.
    pub result: CommittedResult,
}

/// Appended by `recover` so that a second recovery, or a resume, starts from a balanced journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// Bytes of torn tail cut off the last segment (kept in a quarantine file) before this event
    /// was appended; 0 when the journal ended clean.
    pub dropped_bytes: u64,
    /// The unfinished calls recovery committed a result for, in journal order.
    pub calls: Vec<RecoveredCall>,
    /// The (turn, step) that was open and recovery closed as `Interrupted`; `None` when no step was
    /// open.
    pub interrupted_step: Option<(u32, u32)>,
    /// The turn that was open and recovery closed as `Interrupted`; `None` when no turn was open.
    pub interrupted_turn: Option<u32>,
}
