//! A copy of a session file the agent can resume: every call it will replay answered once with
//! the truth, the lines that are not JSON moved out, the chain re-linked where the format has
//! one.
//!
//! Why these and no more: the agents fail on resume for two reasons, an orphan call (codex's
//! "No tool output found", a provider's 400 on pi's `tool_use` without a result) and a broken
//! file (a torn last line swallows the next append; a missing parent cuts pi's context). The
//! answer says what is known ([`Verdict`]'s code and why), never "aborted". Calls the agent
//! itself drops on replay (pi's messages that stopped with `error` or `aborted`) are left as it
//! expects: a result for them would reach the provider with no call. Lines that are JSON of a
//! shape this reader does not know stay where they are: the agent may know them.

use crate::lines::Damage;
use crate::session::{Call, Session, Source, Verdict};
use crate::{claude_code, codex, pi, read, Agent, ReadError};
use std::collections::{HashMap, HashSet};

/// What a repair made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The repaired file.
    pub bytes: Vec<u8>,
    /// The lines moved out, each with its newline, in file order: for `FILE2.quarantine`.
    pub quarantine: Vec<u8>,
    /// The calls answered, with the line of each call.
    pub answered: Vec<(String, Source)>,
    /// The lines moved out.
    pub moved: Vec<Source>,
    /// Lines whose parent link was changed (pi).
    pub relinked: Vec<Source>,
}

/// A line of the original file.
pub(crate) struct FileLine<'a> {
    pub(crate) at: Source,
    /// Its bytes, without its newline.
    pub(crate) text: &'a [u8],
}

/// What the agent's writer adds: lines to put after a line of the original, and new parent
/// links for lines (by offset).
#[derive(Default)]
pub(crate) struct Edits {
    pub(crate) after: HashMap<u64, Vec<Vec<u8>>>,
    pub(crate) parent: HashMap<u64, Vec<u8>>,
}

/// What a format's writer is given: the session, the calls to answer (in file order), the file's
/// lines, and those moved out.
pub(crate) struct Job<'a> {
    pub(crate) session: &'a Session,
    pub(crate) calls: Vec<&'a Call>,
    pub(crate) lines: Vec<FileLine<'a>>,
    pub(crate) moved: HashSet<Source>,
}

/// Repairs `bytes`, a session file of `agent`.
pub fn repair(agent: Agent, bytes: &[u8]) -> Result<Repaired, ReadError> {
    let session = read(agent, bytes)?;
    let lines = file_lines(bytes);
    let moved: HashSet<Source> = session
        .quarantined
        .iter()
        .filter(|q| matches!(q.damage, Damage::Torn | Damage::NotJson { .. }))
        .map(|q| q.at)
        .collect();
    let answered: Vec<&Call> = session
        .calls
        .iter()
        .filter(|c| replayed_orphan(agent, c))
        .collect();
    let job = Job {
        session: &session,
        calls: answered,
        lines,
        moved,
    };
    let edits = match agent {
        Agent::Codex => codex::answers(&job),
        Agent::Pi => pi::repairs(&job),
        Agent::ClaudeCode => claude_code::repairs(&job),
    };
    let Job {
        calls: answered,
        lines,
        moved,
        ..
    } = job;
    let mut out = Repaired {
        bytes: Vec::with_capacity(bytes.len() + 512 * answered.len()),
        quarantine: Vec::new(),
        answered: answered.iter().map(|c| (c.id.clone(), c.at)).collect(),
        moved: session
            .quarantined
            .iter()
            .filter(|q| moved.contains(&q.at))
            .map(|q| q.at)
            .collect(),
        relinked: Vec::new(),
    };
    for line in &lines {
        if moved.contains(&line.at) {
            out.quarantine.extend_from_slice(line.text);
            out.quarantine.push(b'\n');
            continue;
        }
        match edits.parent.get(&line.at.offset) {
            Some(text) => {
                out.bytes.extend_from_slice(text);
                out.relinked.push(line.at);
            }
            None => out.bytes.extend_from_slice(line.text),
        }
        out.bytes.push(b'\n');
        for added in edits.after.get(&line.at.offset).into_iter().flatten() {
            out.bytes.extend_from_slice(added);
            out.bytes.push(b'\n');
        }
    }
    Ok(out)
}

/// A call without an output that the agent will send to the model again on resume.
fn replayed_orphan(agent: Agent, call: &Call) -> bool {
    match (&call.verdict, agent) {
        (Verdict::Result { .. }, _) => false,
        // pi drops the messages whose calls it never ran: they get no result.
        (Verdict::NotStarted { .. }, Agent::Pi) => false,
        _ => true,
    }
}

/// The answer's text: the code, what the file shows, and why.
pub(crate) fn answer_text(agent: Agent, call: &Call) -> String {
    let (code, why) = match &call.verdict {
        Verdict::NotStarted { why } => ("TOOL_NOT_STARTED", *why),
        Verdict::OutcomeUnknown { why } => ("TOOL_OUTCOME_UNKNOWN", *why),
        Verdict::Result { .. } => unreachable!("only calls without an output are answered"),
    };
    format!(
        "{code}: {} recorded this call (line {} of its session file) but no output: {why}. \
         Check what it did before running it again. [written by tooljournal's recover repair]",
        agent.name(),
        call.at.line
    )
}

/// The file's non-blank lines with where each starts (a last line without a newline included).
pub(crate) fn file_lines(bytes: &[u8]) -> Vec<FileLine<'_>> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    let mut number = 0u64;
    while offset < bytes.len() {
        number += 1;
        let rest = &bytes[offset..];
        let n = rest.iter().position(|b| *b == b'\n');
        let text = &rest[..n.unwrap_or(rest.len())];
        if !text.iter().all(u8::is_ascii_whitespace) {
            out.push(FileLine {
                at: Source {
                    line: number,
                    offset: offset as u64,
                },
                text,
            });
        }
        offset += text.len() + usize::from(n.is_some());
    }
    out
}

/// What every repair keeps: the session it was made from, read again, answers every call it
/// answered with its text (the caller's check, in tests and in `recover repair`).
pub fn check(agent: Agent, repaired: &Repaired) -> Result<Session, String> {
    let again = read(agent, &repaired.bytes).map_err(|e| e.to_string())?;
    let answered: HashSet<&str> = (again.calls.iter())
        .filter(|c| matches!(c.verdict, Verdict::Result { .. }))
        .map(|c| c.id.as_str())
        .collect();
    for (id, _) in &repaired.answered {
        if !answered.contains(id.as_str()) {
            return Err(format!("call {id:?} is not answered in the repaired file"));
        }
    }
    if let Some(orphan) = again.calls.iter().find(|c| replayed_orphan(agent, c)) {
        return Err(format!("call {:?} still has no output", orphan.id));
    }
    Ok(again)
}
