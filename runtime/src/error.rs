//! The runtime's errors.

use crate::registry_rules::RegistryError;
use crate::state::IllegalTransition;
use journal::JournalError;

#[derive(Debug, thiserror::Error)]
/// Why a session operation failed. After `Journal` or `Spill` the session is stopped for good.
pub enum RuntimeError {
    /// The journal failed: the session has stopped (DESIGN.md I10). Nothing starts after this.
    #[error("session stopped: {0}")]
    Journal(#[from] JournalError),
    #[error(transparent)]
    /// A tool could not be registered (e.g. the session's own `tool_search`).
    Registry(#[from] RegistryError),
    #[error(transparent)]
    /// The runtime was about to journal a transition the call state machine does not have (a bug);
    /// nothing was written.
    IllegalTransition(#[from] IllegalTransition),
    /// The model's message cannot be journaled as it is (e.g. two calls share an id).
    #[error("invalid model response: {0}")]
    InvalidResponse(String),
    /// An internal fault of the runtime (not a user cancel): started calls were drained and a
    /// `fault` event written; nothing was made up for calls whose progress is unknown.
    #[error("runtime fault: {0}")]
    Fault(String),
    /// The journal is not where the caller thinks: `open` on a journal that already holds
    /// records, or `resume` from a replay that is not the journal's end (another process
    /// appended since it was read). Nothing was appended.
    #[error("{0}")]
    JournalMoved(String),
    /// The spill store could not keep a result: the session stopped like on a journal failure
    /// (the call was settled first, with its real outcome and a preview marked "not kept").
    #[error("session stopped: {0}")]
    Spill(String),
    /// The session was driven out of order (e.g. a batch with no open step).
    #[error("session misuse: {0}")]
    Misuse(String),
}

/// The message a caught panic carried, for a record or a log line (`(no message)` when it
/// carried neither a `&str` nor a `String`). Here because every layer that catches panics
/// (stats, pipeline, scheduler, session) needs it and none of them should depend on another
/// for it.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}
