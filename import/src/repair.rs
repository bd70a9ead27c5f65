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
    /// The lines moved out: those that are not JSON objects, and [`Repaired::stray`].
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
    /// Lines whose `ordinal` the answers before them moved on (codex's paginated rollouts).
    pub(crate) renumbered: HashMap<u64, Vec<u8>>,
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
                let before = Chain::new(&lines, &moved, keys);
                let on_path = session.orphan_outputs.iter().map(|o| o.at);
                stray.extend(on_path.filter(|at| before.on_path(*at)));
                moved.extend(stray.iter().copied());
            }
            let chain = Chain::new(&lines, &moved, keys);
            let calls = (session.calls.iter())
                .filter(|c| chain.on_path(c.at) && unanswered_on_path(agent, c, &chain));
            (calls.collect(), Some(chain))
        }
    };
    let job = Job {
        session: &session,
        calls,
        lines,
        moved,
    };
    let edits = match (agent, &chain) {
        (Agent::Pi, Some(chain)) => pi::repairs(&job, chain),
        (Agent::ClaudeCode, Some(chain)) => claude_code::repairs(&job, chain),
        _ => codex::answers(&job),
    };
    drop(chain);
    let Job {
        calls: answered,
        lines,
        moved,
        ..
    } = job;
    let mut moved_in_order: Vec<Source> = moved.iter().copied().collect();
    moved_in_order.sort();
    let header = match agent {
        Agent::Pi => pi::missing_header(&lines, &moved),
        _ => None,
    };
    stray.sort();
    let mut out = Repaired {
        bytes: Vec::with_capacity(bytes.len() + 512 * answered.len()),
        quarantine: Vec::new(),
        answered: answered.iter().map(|c| (c.id.clone(), c.at)).collect(),
        moved: moved_in_order,
        stray,
        relinked: Vec::new(),
        renumbered: Vec::new(),
        header: None,
    };
    if let Some(line) = header {
        out.bytes.extend_from_slice(line.as_bytes());
        out.bytes.push(b'\n');
        out.header = Some(line);
    }
    for line in &lines {
        if moved.contains(&line.at) {
            out.quarantine.extend_from_slice(line.text);
            out.quarantine.push(b'\n');
            continue;
        }
        match (
            edits.parent.get(&line.at.offset),
            edits.renumbered.get(&line.at.offset),
        ) {
            (Some(text), _) => {
                out.bytes.extend_from_slice(text);
                out.relinked.push(line.at);
            }
            (None, Some(text)) => {
                out.bytes.extend_from_slice(text);
                out.renumbered.push(line.at);
            }
            (None, None) => out.bytes.extend_from_slice(&readable(line, &lossy)),
        }
        out.bytes.push(b'\n');
        for added in edits.after.get(&line.at.offset).into_iter().flatten() {
            out.bytes.extend_from_slice(added);
            out.bytes.push(b'\n');
        }
    }
    Ok(out)
}

/// A kept line as every agent can read it: without a byte-order mark (codex's JSON reader
/// refuses one), and valid UTF-8 (bytes that are not become U+FFFD, as pi and Claude Code read
/// them anyway; codex could not read the file at all).
fn readable<'a>(line: &FileLine<'a>, lossy: &HashSet<Source>) -> std::borrow::Cow<'a, [u8]> {
    let text = match line.text.strip_prefix(b"\xef\xbb\xbf") {
        Some(rest) if line.at.offset == 0 => rest,
        _ => line.text,
    };
    if lossy.contains(&line.at) {
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

/// The answer's text and whether it is an error: for a call with no output, its code, the line
/// of the call and why; for one whose output is only on a branch the agent no longer replays,
/// that output, as recorded.
pub(crate) fn answer_text(agent: Agent, call: &Call) -> (String, bool) {
    let (code, why) = match &call.verdict {
        Verdict::NotStarted { why } => ("TOOL_NOT_STARTED", *why),
        Verdict::OutcomeUnknown { why } => ("TOOL_OUTCOME_UNKNOWN", *why),
        Verdict::Result { text, is_error, .. } => return (text.clone(), *is_error),
        // The agent's own answer, moved with the call onto the path as it was written.
        Verdict::Placeholder { text, .. } => return (text.clone(), true),
    };
    let text = format!(
        "{code}: {} recorded this call (line {} of its session file) but no output: {why}. \
         Check what it did before running it again. [written by tooljournal's recover repair]",
        agent.name(),
        call.at.line
    );
    (text, true)
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

/// What every repair keeps, read again from its copy: no call the agent replays is left
/// without an output on the path it replays, and (pi) no result of no call is on that path.
/// The caller's check, in tests and in `recover repair`.
pub fn check(agent: Agent, repaired: &Repaired) -> Result<Session, String> {
    let again = read(agent, &repaired.bytes).map_err(|e| e.to_string())?;
    if agent == Agent::Codex {
        ordinals_in_order(&repaired.bytes)?;
    }
    let unanswered: Vec<&Call> = match keys(agent) {
        None => again
            .calls
            .iter()
            .filter(|c| replayed_orphan(agent, c))
            .collect(),
        Some(keys) => {
            let lines = file_lines(&repaired.bytes);
            let none = HashSet::new();
            if agent == Agent::Pi && pi::missing_header(&lines, &none).is_some() {
                return Err(
                    "the first line is not a session header: pi would discard the \
                            file"
                        .to_owned(),
                );
            }
            let chain = Chain::new(&lines, &none, keys);
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
fn ordinals_in_order(bytes: &[u8]) -> Result<(), String> {
    let lines = file_lines(bytes);
    let ordinal = |l: &FileLine<'_>| {
        let (value, _) = crate::lines::object(l.text, l.at.offset == 0).ok()?;
        value.get("ordinal")?.as_u64()
    };
    let Some(first) = lines.iter().find_map(ordinal) else {
        return Ok(());
    };
    let mut next = first;
    for (i, l) in lines.iter().enumerate() {
        match ordinal(l) {
            Some(n) if n == next => next += 1,
            Some(n) => {
                return Err(format!(
                    "line {}: ordinal {n} where {next} comes",
                    l.at.line
                ))
            }
            None if i + 1 == lines.len() => {
                return Err(format!("line {}: the last line has no ordinal", l.at.line))
            }
            None => {}
        }
    }
    Ok(())
}
