//! The events of an imported journal (schema 7): a session another agent wrote (codex, pi,
//! Claude Code), read by `recover import` and written as a tooljournal journal.
//!
//! Why events of their own: such a session was never run by this runtime, so its calls have no
//! `parsed`, `approved`, `started` or `settled` to show, and writing them would claim what no
//! one saw. An imported call goes from `received` straight to its one result, with the verdict
//! that the source can prove: its recorded output, or no output and either proof that it never
//! ran or none. Every event after `import/source` is imported, and each `import/line` says
//! which line of the source file the events after it were read from.

use super::{CallRef, CommittedResult};
use serde::{Deserialize, Serialize};

/// A line of the source file kept out of the import (torn, not JSON, or not the shape the
/// agent writes), with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedDamage {
    /// Its 1-based line number in the source file.
    pub line: u64,
    /// The byte offset of its first byte.
    pub offset: u64,
    /// Its length in bytes, without the newline.
    pub bytes: u64,
    /// What is wrong with it, in words.
    pub reason: String,
    /// Good lines follow it: damage in the middle, not a torn tail.
    pub followed: bool,
}

/// Something the reader noticed in the source file that is not damage (an unknown item type,
/// a parent link to a line never written, a call id used twice), with where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportNote {
    /// Its 1-based line number in the source file.
    pub line: u64,
    /// The byte offset of its first byte.
    pub offset: u64,
    /// What was noticed, in words.
    pub text: String,
}

/// `import/source` (schema 7): right after `session/open`, the file the journal was imported
/// from and what reading it found. Its presence makes the journal an imported one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportSource {
    /// The agent that wrote the file: `codex`, `pi` or `claude-code`.
    pub agent: String,
    /// The file, as the user named it.
    pub file: String,
    /// Its size in bytes when it was read.
    pub size_bytes: u64,
    /// sha256 (hex) of its bytes as read.
    pub sha256: String,
    /// The session's id as the file records it (`None`: it records none).
    pub source_session_id: Option<String>,
    /// Lines kept out, in file order.
    pub damaged: Vec<ImportedDamage>,
    /// What else the reader noticed, in file order.
    pub notes: Vec<ImportNote>,
}

/// `import/line` (schema 7): the events after it, up to the next `import/line`, were read from
/// this line of the source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportLine {
    /// The 1-based line number.
    pub line: u64,
    /// The byte offset of the line's first byte.
    pub offset: u64,
}

/// What the source proves about an imported call's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImportVerdict {
    /// The agent recorded the call's output: its real result (the line is the `import/line`
    /// before the `import/outcome`).
    Recorded,
    /// No output, and the agent's own code proves the call never ran: `TOOL_NOT_STARTED`.
    NotStarted {
        /// The rule that proves it, in words (its upstream source is in
        /// `docs/IMPORT_FORMATS.md`).
        why: String,
    },
    /// No output, and nothing proves it did not run: `TOOL_OUTCOME_UNKNOWN`.
    OutcomeUnknown {
        /// Why it may have run.
        why: String,
    },
}

/// `import/outcome` (schema 7): an imported call's one result, right after its `received` in
/// the machine's order (it commits the call); only in an imported journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportOutcome {
    /// The call.
    pub call: CallRef,
    /// What the source proves.
    pub verdict: ImportVerdict,
    /// The result the model gets in a rebuilt history: the recorded output, or the verdict's
    /// error.
    pub result: CommittedResult,
    /// Seqs of the events this one follows: the call's `received`.
    pub source_seqs: Vec<u64>,
}

impl ImportVerdict {
    /// The classification it amounts to: `None` for a recorded output (the call finished).
    pub fn classification(&self) -> Option<super::Classification> {
        match self {
            ImportVerdict::Recorded => None,
            ImportVerdict::NotStarted { .. } => Some(super::Classification::ToolNotStarted),
            ImportVerdict::OutcomeUnknown { .. } => Some(super::Classification::ToolOutcomeUnknown),
        }
    }
}
