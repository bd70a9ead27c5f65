//! `recover import --from codex|pi|claude-code FILE --journal DIR`: another agent's session
//! file written as a tooljournal journal, so that `classify`, `rebuild` and `audit` work on it.
//!
//! Why a journal and not a report: everything `recover` says of a session it says from a
//! journal, so an imported session gets the same classification, the same four provider
//! histories and the same audit, with no second reading of each format to keep in step.
//!
//! What is written claims nothing the file does not show (DESIGN.md §13). Each call goes from
//! `received` to one `import/outcome`: its recorded output, or the verdict `import` proves
//! (`TOOL_NOT_STARTED` only where the agent's own code shows it never ran, else
//! `TOOL_OUTCOME_UNKNOWN`); no `parsed`, `approved`, `started` or `settled` is made up. Every
//! event after `import/source` stands under the `import/line` of the line it was read from,
//! and carries that line's own `timestamp` when it has one. Lines that did not read are listed
//! in `import/source`, never dropped silently.
//!
//! An import stopped halfway (killed, a full disk) leaves a journal with no `session/close`:
//! `recover` reads its unfinished calls as `TOOL_OUTCOME_UNKNOWN`, never as not started
//! ([`crate::classify::import_cut_short_text`]).

use crate::classify::error_result;
use events::event::{
    CallRef, CommittedResult, Event, ImportLine, ImportNote, ImportOutcome, ImportSource,
    ImportVerdict, ImportedDamage, ModelCall, ModelResponse, Record, SessionModel, SessionOpen,
    StepOutcome, StopReason, ToolDescriptor, ToolSchema, ToolSource, TurnOutcome, VisibleTool,
    EVENT_SCHEMA_VERSION,
};
use events::result::error_content;
use events::ErrorCode;
use import::{Agent, Call, Input, Item, Session, Source, Text, Verdict};
use journal::{Backend, Journal, JournalError, Limits, Options, ReadEnd, Reader, Takeover};
use std::collections::{BTreeSet, HashMap};

mod source;
pub use source::source_lines;
use source::{damage, import_source};

/// What an import wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Records written.
    pub records: u64,
    /// Turns and steps (assistant messages) written.
    pub turns: u32,
    /// Assistant messages written, one step each.
    pub steps: u64,
    /// Calls with a recorded output.
    pub recorded: u64,
    /// Calls proven never to have run.
    pub not_started: u64,
    /// Calls that may have run, with no output.
    pub unknown: u64,
    /// Lines kept out (damaged), as listed in `import/source`.
    pub damaged: Vec<ImportedDamage>,
    /// Notes listed in `import/source`.
    pub notes: Vec<ImportNote>,
}

/// Why an import wrote nothing, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The session file could not be read.
    #[error(transparent)]
    Source(#[from] crate::repair_copy::RepairError),
    /// The destination already holds records: an import goes to an empty journal.
    #[error(
        "{journal}: already holds a journal ({records} records); an import goes to an empty one"
    )]
    NotEmpty {
        /// The destination.
        journal: String,
        /// Records found there.
        records: u64,
    },
    /// A message or output of the file is larger than one journal record may be: nothing is
    /// written.
    #[error(
        "{file}: line {line} (byte {offset}): {what} takes about {size_bytes} bytes, over the \
         {size_bytes_max} bytes one journal record may hold; nothing was written"
    )]
    TooLargeForARecord {
        /// The session file.
        file: String,
        /// The line.
        line: u64,
        /// Its byte offset.
        offset: u64,
        /// What it is, in words.
        what: &'static str,
        /// Its estimated encoded size.
        size_bytes: u64,
        /// What a record may hold.
        size_bytes_max: u64,
    },
    /// The journal failed (open, append, sync): what was written stands, with no
    /// `session/close` after it.
    #[error("{journal}: {source}")]
    Journal {
        /// The destination.
        journal: String,
        /// Why.
        source: JournalError,
    },
}

/// A session file read and found to fit in a journal, ready to be written.
#[derive(Debug)]
pub struct Prepared {
    session: Session,
    source: ImportSource,
}

/// Reads `input`, the session file `file` of `agent`, and checks that each of its messages and
/// outputs fits in one journal record; nothing is written. A file is read a line at a time,
/// its texts kept in a temporary file ([`import::Text`]): the session's index is held, not
/// the file.
pub fn prepare(agent: Agent, file: &str, input: Input<'_>) -> Result<Prepared, ImportError> {
    let refused = |source| {
        ImportError::Source(crate::repair_copy::RepairError::Refused {
            path: file.into(),
            source,
        })
    };
    let session = import::read_from(agent, input).map_err(refused)?;
    fits_in_records(&session, file)?;
    let source = import_source(&session, file, input).map_err(refused)?;
    Ok(Prepared { session, source })
}

/// Imports `input`, the session file `file` of `agent`, into the empty journal `backend`:
/// [`prepare`], then [`write_into`].
pub fn import_into(
    backend: &Backend,
    agent: Agent,
    file: &str,
    input: Input<'_>,
    now_ms: u64,
) -> Result<ImportReport, ImportError> {
    write_into(backend, prepare(agent, file, input)?, now_ms)
}

/// Writes a prepared session into the empty journal `backend` (one that holds a record is
/// refused, and left as it is).
pub fn write_into(
    backend: &Backend,
    prepared: Prepared,
    now_ms: u64,
) -> Result<ImportReport, ImportError> {
    let label = backend.location();
    let failed = |source| ImportError::Journal {
        journal: label.clone(),
        source,
    };
    let (end, records) = Reader::open_backend(backend, Limits::default())
        .and_then(|r| r.drain())
        .map_err(failed)?;
    if records > 0 || end != ReadEnd::Clean {
        return Err(ImportError::NotEmpty {
            journal: label.clone(),
            records,
        });
    }
    let Prepared { session, source } = prepared;
    let (journal, _) =
        Journal::open_backend(backend, Takeover::Refuse, Options::default()).map_err(failed)?;
    let mut report = ImportReport {
        damaged: session.quarantined.iter().map(damage).collect(),
        notes: source.notes.clone(),
        ..ImportReport::default()
    };
    let mut writer = Writer {
        journal: &journal,
        label: &label,
        file: &source.file.clone(),
        session: &session,
        at_ms: now_ms,
        line: None,
        records: 0,
    };
    write_session(&mut writer, source, &mut report)?;
    report.records = writer.records;
    journal.close().map_err(failed)?;
    Ok(report)
}

/// Bytes a record's fields may take beside the texts counted (ids, numbers, length prefixes),
/// counted per call and once per record: far more than they take.
const FIELD_BYTES: u64 = 256;

/// Checks, before anything is written, that each record the import writes fits in one journal
/// record: a user message, an assistant message with its calls (`llm/response` holds them all),
/// each output. A session file may hold far more than a record (1 GiB to 16 MiB): what does not
/// fit is named, and the journal is not begun.
fn fits_in_records(session: &Session, file: &str) -> Result<(), ImportError> {
    let size_bytes_max = u64::from(Limits::default().record_size_bytes_max);
    let check = |at: Source, what: &'static str, size_bytes: u64| {
        if size_bytes + FIELD_BYTES <= size_bytes_max {
            return Ok(());
        }
        Err(ImportError::TooLargeForARecord {
            file: file.to_owned(),
            line: at.line,
            offset: at.offset,
            what,
            size_bytes,
            size_bytes_max,
        })
    };
    // `session/open` holds the session's id and every tool's name (and `tool/schema` each).
    let names: BTreeSet<&str> = session.calls.iter().map(|c| c.name.as_str()).collect();
    let open_bytes = session.session_id.as_ref().map_or(0, String::len) as u64
        + names
            .iter()
            .map(|n| n.len() as u64 + FIELD_BYTES)
            .sum::<u64>();
    let header = Source { line: 1, offset: 0 };
    check(header, "the session's id with its tools' names", open_bytes)?;
    for item in &session.items {
        match item {
            Item::User { text, at } => check(*at, "the user's message", text.len_bytes())?,
            Item::Assistant {
                text, calls, at, ..
            } => {
                let calls_bytes: u64 = (calls.iter().map(|&i| &session.calls[i]))
                    .map(|c| {
                        c.arguments.len_bytes() + (c.id.len() + c.name.len()) as u64 + FIELD_BYTES
                    })
                    .sum();
                check(
                    *at,
                    "the assistant's message with its calls",
                    text.len_bytes() + calls_bytes,
                )?;
            }
            Item::Output { call, at } => {
                if let Verdict::Result { text, .. } = &session.calls[*call].verdict {
                    check(*at, "a call's output", text.len_bytes())?;
                }
            }
        }
    }
    Ok(())
}

/// Appends records, each under the `import/line` of the line it was read from.
struct Writer<'a> {
    journal: &'a Journal,
    /// The journal and the session file, for errors.
    label: &'a str,
    file: &'a str,
    session: &'a Session,
    /// The latest time a line gave (the import's own clock before the first): a line without
    /// a `timestamp` is put at the time of the line before it.
    at_ms: u64,
    /// The line of the latest `import/line`.
    line: Option<u64>,
    records: u64,
}

impl Writer<'_> {
    /// Appends `event`, read from the line at `from` (`None`: made by the import itself, from
    /// the lines before it: a step's or turn's end, `session/close`).
    fn put(&mut self, from: Option<Source>, event: Event) -> Result<u64, ImportError> {
        self.put_event(from, event)
            .map_err(|source| ImportError::Journal {
                journal: self.label.to_owned(),
                source,
            })
    }

    /// The session's text `text` (kept in a temporary file while the file was read).
    fn text(&self, text: Text) -> Result<String, ImportError> {
        self.session.text(text).map_err(|source| {
            ImportError::Source(crate::repair_copy::RepairError::Refused {
                path: self.file.into(),
                source,
            })
        })
    }

    fn put_event(&mut self, from: Option<Source>, event: Event) -> Result<u64, JournalError> {
        if let Some(at) = from {
            if let Some(ms) = self.session.time_ms(at.line) {
                self.at_ms = ms;
            }
            if self.line != Some(at.line) {
                self.line = Some(at.line);
                self.append(Event::ImportLine(ImportLine {
                    line: at.line,
                    offset: at.offset,
                }))?;
            }
        }
        self.append(event)
    }

    fn append(&mut self, event: Event) -> Result<u64, JournalError> {
        self.records += 1;
        self.journal.append(&Record {
            at_ms: self.at_ms,
            event,
        })
    }
}

/// The session's events: its opening, then its messages in file order (each user message a
/// turn, each assistant message a step of it, each call received and given its outcome), then
/// `session/close`.
fn write_session(
    w: &mut Writer<'_>,
    source: ImportSource,
    report: &mut ImportReport,
) -> Result<(), ImportError> {
    let session = w.session;
    let first = session.items.first().map(|i| i.at());
    if let Some(ms) = first.and_then(|at| session.time_ms(at.line)) {
        w.at_ms = ms;
    }
    let source_agent = source.agent.clone();
    w.put(None, Event::SessionOpen(session_open(session, &source)))?;
    w.put(None, Event::ImportSource(source))?;
    let tools = tools(session);
    for (name, hash) in &tools {
        w.put(
            None,
            Event::ToolSchema(ToolSchema {
                schema_hash: hash.clone(),
                name: name.clone(),
                description: format!(
                    "a tool of {source_agent}, imported: the session file does not record its \
                     description or schema, so any object is taken as its input"
                ),
                input_schema: UNKNOWN_SCHEMA.to_owned(),
            }),
        )?;
    }
    let mut shown = Some(
        (tools.iter())
            .map(|(name, schema_hash)| VisibleTool {
                name: name.clone(),
                schema_hash: schema_hash.clone(),
            })
            .collect::<Vec<_>>(),
    );
    let mut turn = Turn::default();
    let mut models = session.models.iter().peekable();
    for item in &session.items {
        while let Some((at, model)) = models.next_if(|(at, _)| at.line <= item.at().line) {
            w.put(Some(*at), session_model(session, model))?;
        }
        match item {
            Item::User { text, at } => {
                turn.end(w)?;
                let text = w.text(*text)?;
                turn.begin(w, Some(*at), text)?;
                report.turns = turn.number;
            }
            Item::Assistant {
                text,
                calls,
                stop,
                at,
            } => {
                if !turn.open {
                    // The model spoke first (or the user's line was lost): a turn with no words.
                    turn.begin(w, Some(*at), String::new())?;
                    report.turns = turn.number;
                }
                turn.steps += 1;
                report.steps += 1;
                let calls: Vec<&Call> = calls.iter().map(|&i| &session.calls[i]).collect();
                let step = (turn.number, turn.steps);
                let text = w.text(*text)?;
                write_step(w, step, &text, stop.as_deref(), *at, &calls, shown.take())?;
                for c in &calls {
                    match c.verdict {
                        Verdict::Result { .. } => report.recorded += 1,
                        Verdict::NotStarted { .. } => report.not_started += 1,
                        Verdict::OutcomeUnknown { .. } | Verdict::Placeholder { .. } => {
                            report.unknown += 1
                        }
                    }
                }
            }
            // Written with its call, in its step.
            Item::Output { .. } => {}
        }
    }
    for (at, model) in models {
        w.put(Some(*at), session_model(session, model))?;
    }
    turn.end(w)?;
    w.put(None, Event::SessionClose)?;
    Ok(())
}

/// `session/model` for a model the file names: the agent is the provider; the system prompt
/// and settings are not in the file.
fn session_model(session: &Session, model: &str) -> Event {
    Event::SessionModel(SessionModel {
        provider: session.agent.name().to_owned(),
        model: model.to_owned(),
        system: None,
        settings: Default::default(),
        note: Some("imported: the agent's system prompt and settings are not known".into()),
        base_url: None,
    })
}

/// The turn being written.
#[derive(Default)]
struct Turn {
    number: u32,
    steps: u32,
    open: bool,
}

impl Turn {
    fn begin(
        &mut self,
        w: &mut Writer<'_>,
        at: Option<Source>,
        user_text: String,
    ) -> Result<(), ImportError> {
        self.number += 1;
        self.steps = 0;
        self.open = true;
        w.put(
            at,
            Event::TurnStart {
                turn: self.number,
                user_text,
            },
        )?;
        Ok(())
    }

    fn end(&mut self, w: &mut Writer<'_>) -> Result<(), ImportError> {
        if std::mem::take(&mut self.open) {
            w.put(
                None,
                Event::TurnEnd {
                    turn: self.number,
                    outcome: TurnOutcome::Completed,
                },
            )?;
        }
        Ok(())
    }
}

/// One assistant message as a step: `step/start`, `llm/response`, each call `received` (from
/// its own line), each call's `import/outcome` (from its output's line, or its own), `step/end`.
fn write_step(
    w: &mut Writer<'_>,
    (turn, step): (u32, u32),
    text: &str,
    stop: Option<&str>,
    at: Source,
    calls: &[&Call],
    tools: Option<Vec<VisibleTool>>,
) -> Result<(), ImportError> {
    let ids = step_ids(calls);
    let arguments: Vec<String> = (calls.iter())
        .map(|c| w.text(c.arguments))
        .collect::<Result<_, _>>()?;
    w.put(Some(at), Event::StepStart { turn, step })?;
    if let Some(tools) = tools {
        w.put(Some(at), Event::StepTools { turn, step, tools })?;
    }
    let response = ModelResponse {
        text: text.to_owned(),
        tool_calls: (calls.iter().zip(&ids).zip(&arguments))
            .map(|((c, id), arguments)| ModelCall {
                call_id: id.clone(),
                name: c.name.clone(),
                arguments: arguments.clone(),
            })
            .collect(),
        stop_reason: stop_reason(stop, !calls.is_empty()),
    };
    let response_seq = w.put(
        Some(at),
        Event::LlmResponse {
            turn,
            step,
            response,
        },
    )?;
    let mut received = Vec::with_capacity(calls.len());
    for (index, ((c, id), arguments)) in calls.iter().zip(&ids).zip(arguments).enumerate() {
        let call = CallRef {
            turn,
            step,
            call_id: id.clone(),
        };
        let seq = w.put(
            Some(c.at),
            Event::Received {
                call: call.clone(),
                index: u32::try_from(index).unwrap_or(u32::MAX),
                tool: c.name.clone(),
                raw_arguments: arguments,
                source_seqs: vec![response_seq],
            },
        )?;
        received.push((call, seq));
    }
    for (c, (call, seq)) in calls.iter().zip(received) {
        let (from, verdict, result) = outcome(w, c)?;
        w.put(
            Some(from),
            Event::ImportOutcome(ImportOutcome {
                call,
                verdict,
                result,
                source_seqs: vec![seq],
            }),
        )?;
    }
    w.put(
        None,
        Event::StepEnd {
            turn,
            step,
            outcome: StepOutcome::Completed,
        },
    )?;
    Ok(())
}

/// The call ids of one step, each unique: a journal names a call by (turn, step, id), so an id
/// the agent used twice in one message gets `#2`, `#3` (the file's notes say it was used twice).
fn step_ids(calls: &[&Call]) -> Vec<String> {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let mut taken: BTreeSet<String> = calls.iter().map(|c| c.id.clone()).collect();
    calls
        .iter()
        .map(|c| {
            let n = seen.entry(c.id.as_str()).or_insert(0);
            *n += 1;
            if *n == 1 {
                return c.id.clone();
            }
            let mut k = *n;
            loop {
                let id = format!("{}#{k}", c.id);
                if taken.insert(id.clone()) {
                    return id;
                }
                k += 1;
            }
        })
        .collect()
}

/// The journal's stop reason for the agent's: pi's and Claude Code's words, or, for codex,
/// which records none, whether the message asked for tools.
fn stop_reason(stop: Option<&str>, calls: bool) -> StopReason {
    match stop {
        Some("length" | "max_tokens") => StopReason::Length,
        Some("error" | "aborted") => StopReason::Interrupted,
        Some("stop" | "end_turn" | "stop_sequence") if !calls => StopReason::EndTurn,
        _ if calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

/// A call's `import/outcome`: the line it is read from, the verdict, and the result.
fn outcome(
    w: &Writer<'_>,
    c: &Call,
) -> Result<(Source, ImportVerdict, CommittedResult), ImportError> {
    let (at, (verdict, result)) = match &c.verdict {
        Verdict::Result { text, is_error, at } => (
            *at,
            (
                ImportVerdict::Recorded,
                CommittedResult {
                    content: w.text(*text)?,
                    is_error: *is_error,
                    code: None,
                    value: None,
                },
            ),
        ),
        Verdict::NotStarted { why } => (
            c.at,
            (
                ImportVerdict::NotStarted {
                    why: (*why).to_owned(),
                },
                error_result(
                    ErrorCode::ToolNotStarted,
                    error_content(
                        ErrorCode::ToolNotStarted,
                        &format!("this call did not run: {why}; it may be retried"),
                    ),
                ),
            ),
        ),
        Verdict::OutcomeUnknown { why } => (c.at, unknown((*why).to_owned())),
        // Read from the placeholder's line: the agent's own verdict, quoted in the why.
        Verdict::Placeholder { text, at, why } => {
            let text = w.text(*text)?;
            let quoted: String = text.chars().take(PLACEHOLDER_CHARS_MAX).collect();
            let more = if quoted.len() < text.len() { "…" } else { "" };
            (
                *at,
                unknown(format!("{why} (line {}: {quoted:?}{more})", at.line)),
            )
        }
    };
    Ok((at, verdict, result))
}

/// The most characters of an agent's placeholder quoted in a verdict's why.
const PLACEHOLDER_CHARS_MAX: usize = 200;

/// `TOOL_OUTCOME_UNKNOWN` with `why`, and the result the model gets for it.
fn unknown(why: String) -> (ImportVerdict, CommittedResult) {
    let content = error_content(
        ErrorCode::ToolOutcomeUnknown,
        &format!(
            "no output was recorded for this call, and it may have run: {why}; check what it \
             could have changed, and retry only if it is idempotent"
        ),
    );
    (
        ImportVerdict::OutcomeUnknown { why },
        error_result(ErrorCode::ToolOutcomeUnknown, content),
    )
}

/// The input schema an imported tool is declared with: the agents do not record their tools'
/// schemas in their session files, and providers refuse a history with calls but no tools.
const UNKNOWN_SCHEMA: &str = r#"{"type":"object"}"#;

/// Each tool the session called, by name, with the hash of [`UNKNOWN_SCHEMA`].
fn tools(session: &Session) -> Vec<(String, String)> {
    let names: BTreeSet<&str> = session.calls.iter().map(|c| c.name.as_str()).collect();
    // Cannot fail: the constant is JSON.
    #[allow(clippy::expect_used)]
    let schema: serde_json::Value =
        serde_json::from_str(UNKNOWN_SCHEMA).expect("the unknown schema is JSON");
    let hash = events::schema::schema_hash(&schema, None);
    names
        .into_iter()
        .map(|name| (name.to_owned(), hash.clone()))
        .collect()
}

/// `session/open`: the source's session id (or one made from the file's hash), and each tool
/// the session called, as the agent's.
fn session_open(session: &Session, source: &ImportSource) -> SessionOpen {
    SessionOpen {
        schema_version: EVENT_SCHEMA_VERSION,
        session_id: session
            .session_id
            .clone()
            .unwrap_or_else(|| format!("imported-{}", &source.sha256[..16])),
        workspace: ".".into(),
        tools: tools(session)
            .into_iter()
            .map(|(name, schema_hash)| ToolDescriptor {
                name,
                source: ToolSource::External {
                    server: source.agent.clone(),
                },
                version: String::new(),
                schema_hash,
            })
            .collect(),
    }
}
