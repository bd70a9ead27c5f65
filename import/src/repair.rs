//! A copy of a session file the agent can resume: every call it will replay answered once with
//! the truth, the lines that are not JSON moved out (and pi's results of no call, which the
//! provider would refuse), the chain re-linked where the format has one, and pi's header
//! written where the file has none.
//!
//! Why these and no more: the agents fail on resume for two reasons, an orphan call (codex's
//! "No tool output found", a provider's 400 on pi's `tool_use` without a result) and a broken
//! file (a torn last line swallows the next append; a missing parent cuts pi's context). The
//! answer says what is known ([`Verdict`]'s code and why), never "aborted". Calls the agent
//! itself drops on replay (pi's messages that stopped with `error` or `aborted`) are left as it
//! expects: a result for them would reach the provider with no call. Lines that are JSON of a
//! shape this reader does not know stay where they are: the agent may know them.

use crate::chain::{self, Chain};
use crate::input::{Input, Sum};
use crate::job::{file_lines, Edits, Job};
use crate::session::{Call, Damage, Session, Source, Verdict};
use crate::{claude_code, codex, pi, read_from, Agent, ReadError};
use std::collections::HashSet;
use std::io::Write;

/// What a repair did, its copy aside.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Repair {
    /// The calls answered, with the line of each call.
    pub answered: Vec<(String, Source)>,
    /// The lines moved out: those that are not JSON objects, and [`Repair::stray`].
    pub moved: Vec<Source>,
    /// Of those, the results of no call on the path pi replays (pi would send them, and the
    /// provider refuse them): valid lines, moved whole.
    pub stray: Vec<Source>,
    /// Lines whose parent link was changed (pi, Claude Code).
    pub relinked: Vec<Source>,
    /// Lines whose `ordinal` was moved on past the answers before them (codex, whose newest
    /// rollouts number every line).
    pub renumbered: Vec<Source>,
    /// The session header written as the copy's first line (pi, for a file whose first entry
    /// is not one: pi would throw such a file away and start afresh).
    pub header: Option<String>,
    /// The bytes of the copy written.
    pub copy_bytes: u64,
    /// The bytes of the quarantine written (the lines moved out, each with its newline).
    pub quarantine_bytes: u64,
}

/// A repair made in memory: the copy, its quarantine, and what was done ([`Repair`], which it
/// derefs to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The repaired file.
    pub bytes: Vec<u8>,
    /// The lines moved out, each with its newline, in file order: for `FILE2.quarantine`.
    pub quarantine: Vec<u8>,
    /// What was done.
    pub made: Repair,
}

// A repair in memory is its copy plus what was done: the fields read as the repair's own.
impl std::ops::Deref for Repaired {
    type Target = Repair;
    fn deref(&self) -> &Repair {
        &self.made
    }
}

/// Why a repair wrote no whole copy.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The session file could not be read as one.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The copy could not be written.
    #[error("cannot write the copy: {0}")]
    Copy(std::io::Error),
    /// The quarantine could not be written.
    #[error("cannot write the quarantine: {0}")]
    Quarantine(std::io::Error),
}

/// Repairs `bytes`, a session file of `agent`, in memory.
pub fn repair(agent: Agent, bytes: &[u8]) -> Result<Repaired, ReadError> {
    let mut copy = Vec::with_capacity(bytes.len());
    let mut quarantine = Vec::new();
    match repair_into(agent, Input::Bytes(bytes), &mut copy, &mut quarantine) {
        Ok(made) => Ok(Repaired {
            bytes: copy,
            quarantine,
            made,
        }),
        Err(CopyError::Read(e)) => Err(e),
        // Writing to memory does not fail.
        Err(CopyError::Copy(e) | CopyError::Quarantine(e)) => Err(ReadError::Io(e)),
    }
}

/// Repairs `input`, a session file of `agent`: the copy written to `copy`, the lines moved out
/// to `quarantine`. Only the file's index and one line are held, however large it is; the
/// file is read several times, each time checked to say the same ([`ReadError::Changed`]).
pub fn repair_into(
    agent: Agent,
    input: Input<'_>,
    copy: &mut dyn Write,
    quarantine: &mut dyn Write,
) -> Result<Repair, CopyError> {
    let sum = Sum::default();
    let session = read_from(agent, input)?;
    sum.check(session.crc)?;
    let lines = file_lines(&input, &sum)?;
    let lossy: HashSet<Source> = session.lossy.iter().copied().collect();
    let mut moved: HashSet<Source> = session
        .quarantined
        .iter()
        .filter(|q| matches!(q.damage, Damage::Torn | Damage::NotJson { .. }))
        .map(|q| q.at)
        .collect();
    let mut stray: Vec<Source> = Vec::new();
    let (calls, chain) = match keys(agent) {
        None => {
            let calls = session.calls.iter().filter(|c| replayed_orphan(agent, c));
            (calls.collect(), None)
        }
        Some(keys) => {
            // pi passes every result on the path it replays to the provider, a result of no
            // call included (a 400): such a result is moved out as well.
            if agent == Agent::Pi {
                let before = Chain::new(input, &moved, keys, (&sum, session.index_bytes()))?;
                let on_path = session.orphan_outputs.iter().map(|o| o.at);
                stray.extend(on_path.filter(|at| before.on_path(*at)));
                moved.extend(stray.iter().copied());
            }
            let chain = Chain::new(input, &moved, keys, (&sum, session.index_bytes()))?;
            let calls = (session.calls.iter())
                .filter(|c| chain.on_path(c.at) && unanswered_on_path(agent, c, &chain));
            (calls.collect(), Some(chain))
        }
    };
    let job = Job {
        session: &session,
        calls,
        input,
        lines,
        moved,
        sum: &sum,
    };
    let edits = match (agent, &chain) {
        (Agent::Pi, Some(chain)) => pi::repairs(&job, chain)?,
        (Agent::ClaudeCode, Some(chain)) => claude_code::repairs(&job, chain)?,
        _ => codex::answers(&job)?,
    };
    drop(chain);
    let header = match agent {
        Agent::Pi => pi::missing_header(&job.input, &job.lines, &job.moved)?,
        _ => None,
    };
    let mut moved_in_order: Vec<Source> = job.moved.iter().copied().collect();
    moved_in_order.sort();
    stray.sort();
    let mut made = Repair {
        answered: job.calls.iter().map(|c| (c.id.clone(), c.at)).collect(),
        moved: moved_in_order,
        stray,
        ..Repair::default()
    };
    let mut sinks = Sinks {
        copy,
        quarantine,
        made: &mut made,
    };
    if let Some(line) = header {
        sinks.copy(line.as_bytes())?;
        sinks.made.header = Some(line);
    }
    write_copy(&job, &edits, &lossy, &mut sinks)?;
    Ok(made)
}

/// Where a repair writes, counting what it wrote.
struct Sinks<'a, 'b> {
    copy: &'a mut dyn Write,
    quarantine: &'a mut dyn Write,
    made: &'b mut Repair,
}

impl Sinks<'_, '_> {
    /// `line` and a newline into the copy.
    fn copy(&mut self, line: &[u8]) -> Result<(), CopyError> {
        (self.copy.write_all(line))
            .and_then(|()| self.copy.write_all(b"\n"))
            .map_err(CopyError::Copy)?;
        self.made.copy_bytes += line.len() as u64 + 1;
        Ok(())
    }

    /// `line` and a newline into the quarantine.
    fn quarantine(&mut self, line: &[u8]) -> Result<(), CopyError> {
        (self.quarantine.write_all(line))
            .and_then(|()| self.quarantine.write_all(b"\n"))
            .map_err(CopyError::Quarantine)?;
        self.made.quarantine_bytes += line.len() as u64 + 1;
        Ok(())
    }
}

/// The copy, a line of the original at a time: a moved line into the quarantine, a kept one
/// with its new parent link or ordinal (or as every agent can read it), then what the repair
/// adds after it.
fn write_copy(
    job: &Job<'_>,
    edits: &Edits,
    lossy: &HashSet<Source>,
    sinks: &mut Sinks<'_, '_>,
) -> Result<(), CopyError> {
    let mut ordinals = codex::Ordinals::from(edits.first_ordinal);
    let mut reading = job.input.lines();
    let mut text = Vec::new();
    while let Some(line) = reading.next_line(&mut text)? {
        let at = line.at;
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if job.moved.contains(&at) {
            sinks.quarantine(&text)?;
            continue;
        }
        if let Some(relinked) = edits.parent.get(&at.offset) {
            sinks.copy(relinked)?;
            sinks.made.relinked.push(at);
        } else {
            let kept = readable(&text, at, lossy);
            match ordinals.line(&kept, at.offset == 0) {
                Some(renumbered) => {
                    sinks.copy(&renumbered)?;
                    sinks.made.renumbered.push(at);
                }
                None => sinks.copy(&kept)?,
            }
        }
        for added in edits.after.get(&at.offset).into_iter().flatten() {
            ordinals.added();
            sinks.copy(added)?;
        }
    }
    job.sum.check(reading.crc())?;
    Ok(())
}

/// A kept line as every agent can read it: without a byte-order mark (codex's JSON reader
/// refuses one), and valid UTF-8 (bytes that are not become U+FFFD, as pi and Claude Code read
/// them anyway; codex could not read the file at all).
fn readable<'a>(text: &'a [u8], at: Source, lossy: &HashSet<Source>) -> std::borrow::Cow<'a, [u8]> {
    let text = match text.strip_prefix(b"\xef\xbb\xbf") {
        Some(rest) if at.offset == 0 => rest,
        _ => text,
    };
    if lossy.contains(&at) {
        return std::borrow::Cow::Owned(String::from_utf8_lossy(text).into_owned().into_bytes());
    }
    std::borrow::Cow::Borrowed(text)
}

/// The link fields of a format whose lines are chained by them.
fn keys(agent: Agent) -> Option<chain::Keys> {
    match agent {
        Agent::Codex => None,
        Agent::Pi => Some(pi::KEYS),
        Agent::ClaudeCode => Some(claude_code::KEYS),
    }
}

/// A call on the replay path whose output the agent will not find on it: none recorded, or
/// one only on a branch it no longer replays (pi's calls that never ran are left: pi drops
/// their message).
fn unanswered_on_path(agent: Agent, call: &Call, chain: &Chain<'_>) -> bool {
    match &call.verdict {
        Verdict::Result { at, .. } | Verdict::Placeholder { at, .. } => !chain.on_path(*at),
        Verdict::NotStarted { .. } => agent != Agent::Pi,
        Verdict::OutcomeUnknown { .. } => true,
    }
}

/// A call without an output that the agent will send to the model again on resume.
fn replayed_orphan(agent: Agent, call: &Call) -> bool {
    match (&call.verdict, agent) {
        (Verdict::Result { .. } | Verdict::Placeholder { .. }, _) => false,
        // pi drops the messages whose calls it never ran: they get no result.
        (Verdict::NotStarted { .. }, Agent::Pi) => false,
        _ => true,
    }
}

/// What every repair keeps, read again from its copy: no call the agent replays is left
/// without an output on the path it replays, and (pi) no result of no call is on that path.
/// The caller's check, in tests and in `recover repair`.
pub fn check(agent: Agent, repaired: &Repaired) -> Result<Session, String> {
    check_input(agent, Input::Bytes(&repaired.bytes))
}

/// [`check`] of a copy read from `copy`.
pub fn check_input(agent: Agent, copy: Input<'_>) -> Result<Session, String> {
    let again = read_from(agent, copy).map_err(|e| e.to_string())?;
    let sum = Sum::default();
    sum.check(again.crc).map_err(|e| e.to_string())?;
    if agent == Agent::Codex {
        ordinals_in_order(&copy, &sum)?;
    }
    let unanswered: Vec<&Call> = match keys(agent) {
        None => again
            .calls
            .iter()
            .filter(|c| replayed_orphan(agent, c))
            .collect(),
        Some(keys) => {
            let none = HashSet::new();
            if agent == Agent::Pi {
                let lines = file_lines(&copy, &sum).map_err(|e| e.to_string())?;
                let header = pi::missing_header(&copy, &lines, &none).map_err(|e| e.to_string())?;
                if header.is_some() {
                    return Err(
                        "the first line is not a session header: pi would discard the file"
                            .to_owned(),
                    );
                }
            }
            let chain = Chain::new(copy, &none, keys, (&sum, again.index_bytes()))
                .map_err(|e| e.to_string())?;
            if agent == Agent::Pi {
                if let Some(o) = again.orphan_outputs.iter().find(|o| chain.on_path(o.at)) {
                    return Err(format!(
                        "line {}: a result of no call ({:?}) is on the path pi replays",
                        o.at.line, o.call_id
                    ));
                }
            }
            (again.calls.iter())
                .filter(|c| chain.on_path(c.at) && unanswered_on_path(agent, c, &chain))
                .collect()
        }
    };
    match unanswered.first() {
        Some(c) => Err(format!(
            "call {:?} (line {}) still has no output",
            c.id, c.at.line
        )),
        None => Ok(again),
    }
}

/// A codex rollout whose lines carry ordinals numbers them one by one, to its last line (codex
/// continues from the last line's on resume, and refuses a last line without one).
fn ordinals_in_order(copy: &Input<'_>, sum: &Sum) -> Result<(), String> {
    let mut reading = copy.lines();
    let mut text = Vec::new();
    let mut next: Option<u64> = None;
    // The last non-blank line, and whether it had an ordinal.
    let mut last: Option<(u64, bool)> = None;
    while let Some(line) = reading.next_line(&mut text).map_err(|e| e.to_string())? {
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let own = codex::ordinal_of(&text, line.at.offset == 0);
        last = Some((line.at.line, own.is_some()));
        match (own, next) {
            (Some(n), Some(want)) if n != want => {
                return Err(format!(
                    "line {}: ordinal {n} where {want} comes",
                    line.at.line
                ))
            }
            (Some(n), _) => next = Some(n + 1),
            (None, _) => {}
        }
    }
    sum.check(reading.crc()).map_err(|e| e.to_string())?;
    match (next, last) {
        (Some(_), Some((line, false))) => Err(format!("line {line}: the last line has no ordinal")),
        _ => Ok(()),
    }
}
