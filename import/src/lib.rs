//! Other agents' session files, read truthfully, and repaired.
//!
//! Today's agent CLIs answer every interrupted tool call with one canned string, whatever
//! happened. This crate reads their session files (codex's rollout JSONL, pi's session JSONL,
//! Claude Code's session JSONL as public material describes it)
//! and says, for each tool call, only what the file and the agent's own code can prove:
//!
//! - an output was recorded: that is its result ([`Verdict::Result`]);
//! - no output, and the agent's code proves the call never ran: [`Verdict::NotStarted`] (pi
//!   runs no call of an assistant message that stopped with `error` or `aborted`);
//! - no output otherwise: [`Verdict::OutcomeUnknown`] (neither agent records that a tool
//!   started; codex spawns a tool as soon as its call item is recorded).
//!
//! Every rule cites the upstream file and commit behind it in `docs/IMPORT_FORMATS.md`.
//!
//! Lines that do not parse are never skipped silently: each is kept as [`Quarantined`], with
//! its line, byte offset and reason, and a bad line followed by good ones is told apart from a
//! torn last line (the journal's own corruption rule). The bytes are read as bytes: a line torn
//! inside a character is one bad line, not a failed file.
//!
//! **Architecture Invariant:** this crate knows other agents' formats and nothing of ours: no
//! journal, no events, no runtime. `recover` turns a [`Session`] into a journal; this crate
//! never writes one. It never runs or contacts anything.

mod chain;
mod claude_code;
mod codex;
mod input;
mod job;
mod lines;
mod pi;
mod repair;
mod session;
mod text;

pub use input::Input;
pub use repair::{
    check as check_repair, check_input as check_repair_input, repair, repair_into, CopyError,
    Repair, Repaired,
};
pub use session::{Call, Damage, Item, OrphanOutput, Quarantined, Session, Source, Verdict};
pub use text::Text;

/// Which agent wrote a session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// OpenAI's codex CLI: a rollout JSONL (`~/.codex/sessions/…/rollout-*.jsonl`).
    Codex,
    /// pi (badlogic/pi-mono's coding agent): a session JSONL (`~/.pi/agent/sessions/…`).
    Pi,
    /// Anthropic's Claude Code: a session JSONL (`~/.claude/projects/…/<session>.jsonl`), known
    /// from public material only (it is closed source).
    ClaudeCode,
}

impl Agent {
    /// The name `--from` takes.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::Pi => "pi",
            Agent::ClaudeCode => "claude-code",
        }
    }

    /// The agent `--from NAME` names.
    pub fn from_name(name: &str) -> Option<Agent> {
        match name {
            "codex" => Some(Agent::Codex),
            "pi" => Some(Agent::Pi),
            "claude-code" => Some(Agent::ClaudeCode),
            _ => None,
        }
    }
}

/// The most bytes a session file may hold.
pub const FILE_BYTES_MAX: u64 = 1 << 30;

/// The most bytes one line of a session file may hold, its newline excluded: 64 MiB, room for
/// the largest document an agent embeds in a line (Anthropic takes PDFs of 32 MB, 43 MB in
/// base64). A file is read a line at a time against it, so a longer line is refused when this
/// much of it has been read, never held whole.
pub const LINE_BYTES_MAX: u64 = 64 << 20;

/// The most bytes a session's index may hold while a file is read or repaired (its messages'
/// and calls' places, ids and verdicts, its notes, a chained format's links; its texts are
/// kept in a temporary file and not counted): 48 MiB, room for about 60,000 calls, dozens of
/// times the calls of the largest real session files in the corpora. With the line in hand
/// (at most [`LINE_BYTES_MAX`]), it keeps reading any file under 256 MB (`bench bounds`).
pub const INDEX_BYTES_MAX: u64 = 48 << 20;

/// Why a file could not be read as a session at all (a bad line is not such a reason: it is
/// quarantined).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is larger than [`FILE_BYTES_MAX`].
    #[error("{size_bytes} bytes: over the {FILE_BYTES_MAX}-byte limit for a session file")]
    TooLarge {
        /// Its size.
        size_bytes: u64,
    },
    /// A line is longer than [`LINE_BYTES_MAX`].
    #[error(
        "line {line} (at byte {offset}) is longer than {LINE_BYTES_MAX} bytes, the limit for \
         one line of a session file; the file was not read past it"
    )]
    LineTooLong {
        /// The line's number, from 1.
        line: u64,
        /// The byte offset of its first byte.
        offset: u64,
    },
    /// The session's index passed [`INDEX_BYTES_MAX`].
    #[error(
        "line {line} (at byte {offset}): the session's index (its messages, calls and lines' \
         places) passed {INDEX_BYTES_MAX} bytes here, the limit that keeps reading a session \
         file in bounded memory; the file was not read past it"
    )]
    IndexFull {
        /// The line's number, from 1.
        line: u64,
        /// The byte offset of its first byte.
        offset: u64,
    },
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    /// The temporary file that holds the session's texts could not be written or read.
    #[error(
        "cannot keep the session's texts in a temporary file (in TMPDIR, {dir}): {0}",
        dir = std::env::temp_dir().display()
    )]
    Spill(std::io::Error),
    /// The file said something else when it was read again: something rewrote it meanwhile.
    #[error(
        "the file changed while it was read (a second reading differs from the first); \
         repair a copy that nothing writes to"
    )]
    Changed,
}

/// Reads `bytes` as a session file of `agent` (its texts kept in memory).
pub fn read(agent: Agent, bytes: &[u8]) -> Result<Session, ReadError> {
    read_from(agent, Input::Bytes(bytes))
}

/// Reads `input` as a session file of `agent`, a line at a time: a file's texts are kept in a
/// temporary file, so that only its index is held ([`Text`]).
pub fn read_from(agent: Agent, input: Input<'_>) -> Result<Session, ReadError> {
    let size_bytes = input.len_bytes();
    if size_bytes > FILE_BYTES_MAX {
        return Err(ReadError::TooLarge { size_bytes });
    }
    let store = match input {
        Input::Bytes(_) => text::Store::Memory(Vec::new()),
        Input::File { .. } => text::Store::temporary()?,
    };
    let session = match agent {
        Agent::Codex => codex::read(&input, store),
        Agent::Pi => pi::read(&input, store),
        Agent::ClaudeCode => claude_code::read(&input, store),
    }?;
    session.check();
    Ok(session)
}
