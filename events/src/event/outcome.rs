//! What a call touches and what it gave: the resources it declares (`started`), the effects it
//! confirms, its real outcome (`settled`) and the one result the model gets (`committed`).
//! Kept apart from the events that carry them because recovery, audit and the history all read
//! them, and they only ever grow at the end (docs/FORMAT.md, *Versioning*).

use crate::code::ErrorCode;
use serde::{Deserialize, Serialize};

use super::PlanItem;

/// What a call declares it will touch: reported for calls whose outcome is unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Paths (or other resources) the call reads, as the tool declares them.
    pub reads: Vec<String>,
    /// Paths (or other resources) the call may change, as the tool declares them.
    pub writes: Vec<String>,
    /// Free-text intents, e.g. the command a shell call runs.
    pub intents: Vec<String>,
}

/// A side effect the tool confirms happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SideEffect {
    /// A file was written.
    FsWrite {
        /// The file's path as shown to the model (relative to the workspace).
        path: String,
        /// sha256 (hex) before the write; `None` when the file did not exist.
        before_sha256: Option<String>,
        /// sha256 (hex) of the file's bytes after the write.
        after_sha256: String,
    },
    /// A process the call started exited (or was killed).
    ProcExit {
        /// The process's pid.
        pid: u32,
        /// Its exit status; `None` when a signal ended it or it could not be waited for.
        status: Option<i32>,
        /// The signal that ended it; `None` when it exited by itself or could not be waited for.
        signal: Option<i32>,
    },
    /// Any other effect, e.g. `fs/mkdir` for a directory a write created.
    Other {
        /// What kind of effect, as `area/verb` (e.g. `fs/mkdir`).
        kind: String,
        /// What it was done to (e.g. the directory's path).
        detail: String,
    },
    /// The session's plan (todo table) was replaced whole; the runtime also journals
    /// `plan/replace` right after the call's `settled`.
    PlanReplaced {
        /// The new plan, whole.
        items: Vec<PlanItem>,
    },
    /// `tool_search` loaded these deferred tools: they are visible from the next step on.
    ToolsLoaded {
        /// The loaded tools' final names.
        names: Vec<String>,
    },
}

/// Text that may be too large to keep inline: then a head, a tail and the whole text's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Text {
    /// The whole text.
    Inline(String),
    /// Only the ends of a text longer than the inline limit.
    Preview {
        /// The text's start: up to 2 KiB (or half the inline limit if that is smaller), cut at a
        /// char boundary.
        head: String,
        /// The text's end, as long as the head, cut at a char boundary.
        tail: String,
        /// The whole text's length in bytes.
        total_bytes: u64,
        /// sha256 (hex) of the whole text.
        sha256: String,
        /// Where the whole text is kept, when a spill store took it.
        locator: Option<String>,
    },
}

impl Text {
    /// The inline text, or a plain rendering of the preview.
    pub fn render(&self) -> String {
        match self {
            Text::Inline(s) => s.clone(),
            Text::Preview {
                head,
                tail,
                total_bytes,
                sha256,
                locator,
            } => {
                let where_ = locator
                    .as_deref()
                    .map(|l| format!("; full text at {l}"))
                    .unwrap_or_default();
                format!(
                    "{head}\n[... {total_bytes} bytes in all, sha256 {sha256}{where_} ...]\n{tail}"
                )
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// Whether the body succeeded.
pub enum OutcomeStatus {
    /// The body (and its contract check) succeeded.
    Success,
    /// The body failed, or its output broke its contract.
    Error {
        /// What kind of failure.
        code: ErrorCode,
        /// The failure's description, without the code.
        message: String,
    },
}

/// A call's real outcome, as the tool body (and its contract check) produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Success, or the error code and message.
    pub status: OutcomeStatus,
    /// The text the tool produced (for an error, its message), inline or as a preview (over
    /// `content_inline_bytes_max`).
    pub content: Text,
    /// The structured value, as JSON text.
    pub value: Option<String>,
    /// Private details for people (diffs, timings), as JSON text; never sent to the model.
    pub details: Option<String>,
    /// Effects the tool confirms happened, over all attempts, in order.
    pub side_effects: Vec<SideEffect>,
    /// How many attempts were started (1 unless a retry-safe tool was retried).
    pub attempts: u32,
    /// Wall time of all attempts together, backoff included, in ms.
    pub duration_ms: u64,
}

/// The result as given to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedResult {
    /// The text the model got; an error's begins with its code (`CODE: message`).
    pub content: String,
    /// Whether the model was told the call failed.
    pub is_error: bool,
    /// The error code; `None` for a success.
    pub code: Option<ErrorCode>,
    /// The structured value, as JSON text.
    pub value: Option<String>,
}
