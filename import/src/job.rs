//! What a format's writer is given for a repair and what it gives back: the session, the calls
//! to answer and the file's lines ([`Job`]); the lines to add and the links to change
//! ([`Edits`]); and the answer a call without an output gets.

use crate::input::{Input, Sum};
use crate::session::{Call, Session, Source, Verdict};
use crate::ReadError;
use std::collections::{HashMap, HashSet};

/// A non-blank line of the original file: where it is and how long (its newline excluded).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileLine {
    pub(crate) at: Source,
    pub(crate) len_bytes: u64,
}

/// What the agent's writer adds: lines to put after a line of the original, and new parent
/// links for lines (by offset).
#[derive(Default)]
pub(crate) struct Edits {
    pub(crate) after: HashMap<u64, Vec<Vec<u8>>>,
    pub(crate) parent: HashMap<u64, Vec<u8>>,
    /// The copy's first `ordinal` (codex's paginated rollouts): its lines are numbered again
    /// in order as they are written, answers included.
    pub(crate) first_ordinal: Option<u64>,
}

/// What a format's writer is given: the session, the calls to answer (in file order), the file
/// (and its lines), and the lines moved out.
pub(crate) struct Job<'a> {
    pub(crate) session: &'a Session,
    pub(crate) calls: Vec<&'a Call>,
    pub(crate) input: Input<'a>,
    pub(crate) lines: Vec<FileLine>,
    pub(crate) moved: HashSet<Source>,
    pub(crate) sum: &'a Sum,
}

impl Job<'_> {
    /// The bytes of the line at `at` (a line of the file).
    pub(crate) fn text(&self, at: Source) -> Result<Vec<u8>, ReadError> {
        text_of(&self.input, &self.lines, at)
    }
}

/// The bytes of the line at `at`, one of `lines` of `input`.
pub(crate) fn text_of(
    input: &Input<'_>,
    lines: &[FileLine],
    at: Source,
) -> Result<Vec<u8>, ReadError> {
    let i = (lines.binary_search_by_key(&at.offset, |l| l.at.offset))
        .map_err(|_| ReadError::Changed)?;
    input.at(at.offset, lines[i].len_bytes)
}

/// The answer's text and whether it is an error: for a call with no output, its code, the line
/// of the call and why; for one whose output is only on a branch the agent no longer replays,
/// that output, as recorded.
pub(crate) fn answer_text(session: &Session, call: &Call) -> Result<(String, bool), ReadError> {
    let agent = session.agent;
    let (code, why) = match &call.verdict {
        Verdict::NotStarted { why } => ("TOOL_NOT_STARTED", *why),
        Verdict::OutcomeUnknown { why } => ("TOOL_OUTCOME_UNKNOWN", *why),
        Verdict::Result { text, is_error, .. } => return Ok((session.text(*text)?, *is_error)),
        // The agent's own answer, moved with the call onto the path as it was written.
        Verdict::Placeholder { text, .. } => return Ok((session.text(*text)?, true)),
    };
    let text = format!(
        "{code}: {} recorded this call (line {} of its session file) but no output: {why}. \
         Check what it did before running it again. [written by tooljournal's recover repair]",
        agent.name(),
        call.at.line
    );
    Ok((text, true))
}

/// The file's non-blank lines with where each starts (a last line without a newline
/// included): a whole reading, checked against `sum`.
pub(crate) fn file_lines(input: &Input<'_>, sum: &Sum) -> Result<Vec<FileLine>, ReadError> {
    let mut out = Vec::new();
    let mut reading = input.lines();
    let mut text = Vec::new();
    while let Some(line) = reading.next_line(&mut text)? {
        if !text.iter().all(u8::is_ascii_whitespace) {
            out.push(FileLine {
                at: line.at,
                len_bytes: text.len() as u64,
            });
        }
    }
    sum.check(reading.crc())?;
    Ok(out)
}
