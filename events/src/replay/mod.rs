//! Replay: fold a journal back into per-session, per-call state.
//!
//! This is how `recover` learns what happened, so it is strict: every event must fit where it
//! lands (a call's events follow its state machine and point back at its previous event; steps
//! and turns open and close in order). Anything that does not fit is an error naming the
//! record's seq and position, never a silent skip: a journal that checksums fine but does not
//! make sense is corrupt too.
//!
//! The rules are written once (`rules.rs`) and run over a [`Retain`] policy that decides what is
//! kept (`retain.rs`): everything ([`SessionReplay`], for audit, resume and rebuild), or only
//! the calls still open (`recover`'s streaming classifier). Both check a journal alike and
//! refuse it with the same errors.

mod retain;
mod rule;
mod rules;
mod tree;

pub use retain::{Retain, TurnCursor};
pub use rule::Rule;
pub use tree::{AskRecord, CallReplay, ImportedCall, SessionReplay, StepReplay, TurnReplay};

use crate::event::{declared_schema, Event, Record, EVENT_SCHEMA_VERSION};
use crate::state::IllegalTransition;
use journal::{Backend, JournalError, Limits, Position, ReadEnd, Reader, Storage};
use std::sync::Arc;

/// Why a journal could not be replayed. Every variant but `Journal` names the record (its seq,
/// and its segment and offset) that does not decode or does not fit.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The journal could not be read (I/O).
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A payload whose event type this build does not know, in a journal of a schema it does.
    #[error("record seq {seq} at {position}: unknown event type {index}")]
    UnknownEventType {
        /// The record's seq.
        seq: u64,
        /// Where the record is.
        position: Position,
        /// The event type read.
        index: u32,
    },
    /// A payload that does not decode as an event, in a journal of a schema this build knows.
    #[error("record seq {seq} at {position}: payload does not decode as an event: {message}")]
    Undecodable {
        /// The record's seq.
        seq: u64,
        /// Where the record is.
        position: Position,
        /// What the decoder said.
        message: String,
    },
    /// A payload that does not decode, in a journal whose `session/open` declares a newer event
    /// schema than this build's: not corruption, an event or variant this build does not know.
    #[error("record seq {seq} at {position}: written by a newer tooljournal (schema {schema} > {known}): {message}")]
    NewerSchema {
        /// The record's seq.
        seq: u64,
        /// Where the record is.
        position: Position,
        /// The schema the journal declares.
        schema: u32,
        /// The schema this build writes.
        known: u32,
        /// What the decoder said.
        message: String,
    },
    /// An event that decodes but does not fit where it lands (a step out of order, a call
    /// event that does not point back at the call's previous event, ...).
    #[error("record seq {seq} at {position} ({kind}): {message}")]
    Inconsistent {
        /// The record's seq.
        seq: u64,
        /// Where the record is.
        position: Position,
        /// The event's kind (`call event` for a call's transition).
        kind: &'static str,
        /// The structural rule it breaks (docs/FORMAT.md, *Structural rules*); `None` only for
        /// this build's own bug (an event routed to the wrong place), which no journal causes.
        rule: Option<Rule>,
        /// What does not fit.
        message: String,
    },
    /// A call event its state machine refuses.
    #[error("record seq {seq} at {position}: {source}")]
    IllegalTransition {
        /// The record's seq.
        seq: u64,
        /// Where the record is.
        position: Position,
        /// The transition refused.
        source: IllegalTransition,
    },
}

impl ReplayError {
    /// The structural rule an inconsistent journal breaks (a call's state machine for an
    /// illegal transition); `None` for any other error.
    pub fn rule(&self) -> Option<Rule> {
        match self {
            ReplayError::Inconsistent { rule, .. } => *rule,
            ReplayError::IllegalTransition { .. } => Some(Rule::CallStateMachine),
            _ => None,
        }
    }
}

/// Folds records one at a time, by the rules, into what its [`Retain`] policy keeps: by
/// default everything (a [`SessionReplay`]).
#[derive(Debug, Default)]
pub struct Replayer<R = SessionReplay> {
    retain: R,
    decoder: EventDecoder,
    /// The last event applied was a `recovery` (only then may a `recovery/rerun` come).
    after_recovery: bool,
    /// The session's id, from `session/open`: every `started` key is checked against it.
    session_id: Option<String>,
    /// The kind of the last event applied (`import/source` comes right after `session/open`).
    previous_kind: Option<&'static str>,
    /// `import/source` was read: the journal is an imported one.
    imported: bool,
    /// The latest `import/line`: where in the source file the events being read came from.
    import_line: Option<crate::event::ImportLine>,
}

/// Decodes a journal's records as events, one at a time in seq order, by the versioning rule
/// of docs/FORMAT.md: the first record's prefix declares the journal's event schema; a payload
/// that does not decode is [`ReplayError::NewerSchema`] when that schema is newer than
/// [`EVENT_SCHEMA_VERSION`], and corruption ([`ReplayError::UnknownEventType`],
/// [`ReplayError::Undecodable`]) otherwise.
#[derive(Debug, Default, Clone)]
pub struct EventDecoder {
    first_seen: bool,
    schema: Option<u32>,
}

impl EventDecoder {
    /// A decoder for a journal's first record on.
    pub fn new() -> EventDecoder {
        EventDecoder::default()
    }

    /// The schema the journal's first record declared (`None` before it, or when it is not a
    /// `session/open`).
    pub fn schema(&self) -> Option<u32> {
        self.schema
    }

    /// Decodes the next record (records must come in seq order, from the first).
    pub fn decode(&mut self, record: journal::RecordRef<'_>) -> Result<Record, ReplayError> {
        if !self.first_seen {
            self.first_seen = true;
            self.schema = declared_schema(&record);
        }
        record.decode::<Record>().map_err(|e| {
            if let Some(schema) = self.schema.filter(|&s| s > EVENT_SCHEMA_VERSION) {
                return ReplayError::NewerSchema {
                    seq: record.seq,
                    position: record.position,
                    schema,
                    known: EVENT_SCHEMA_VERSION,
                    message: e.message,
                };
            }
            let index = record
                .decode_prefix::<(u64, u32)>()
                .ok()
                .map(|(_at_ms, index)| index);
            match index {
                Some(index) if index >= Event::VARIANT_COUNT => ReplayError::UnknownEventType {
                    seq: record.seq,
                    position: record.position,
                    index,
                },
                _ => ReplayError::Undecodable {
                    seq: record.seq,
                    position: record.position,
                    message: e.message,
                },
            }
        })
    }
}

impl Replayer<SessionReplay> {
    /// A replayer that keeps the whole session.
    pub fn new() -> Replayer {
        Replayer::default()
    }

    /// The session as read.
    pub fn finish(self) -> SessionReplay {
        self.retain
    }

    /// The session as read so far.
    pub fn state(&self) -> &SessionReplay {
        &self.retain
    }
}

impl<R: Retain> Replayer<R> {
    /// A replayer that keeps what `retain` keeps.
    pub fn with_retention(retain: R) -> Replayer<R> {
        Replayer {
            retain,
            decoder: EventDecoder::new(),
            after_recovery: false,
            session_id: None,
            previous_kind: None,
            imported: false,
            import_line: None,
        }
    }

    /// Decodes and applies one journal record.
    pub fn apply(&mut self, record: &journal::Record) -> Result<(), ReplayError> {
        self.apply_ref(record.as_ref())
    }

    /// [`Replayer::apply`] on a record borrowed from the reader (no copy).
    pub fn apply_ref(&mut self, record: journal::RecordRef<'_>) -> Result<(), ReplayError> {
        let decoded = self.decoder.decode(record)?;
        self.apply_event(record.seq, record.position, decoded.at_ms, decoded.event)
    }

    /// What the policy keeps.
    pub fn retention(&self) -> &R {
        &self.retain
    }

    /// What the policy keeps, to take from (a streaming user hands finished calls out).
    pub fn retention_mut(&mut self) -> &mut R {
        &mut self.retain
    }
}

/// Reads and replays a whole journal. Returns how the bytes ended too: the caller decides what
/// a torn tail or corruption means (the replay covers the records before either).
pub fn replay_storage(
    storage: Arc<dyn Storage>,
    limits: Limits,
) -> Result<(SessionReplay, ReadEnd), ReplayError> {
    replay_backend(&Backend::Files(storage), limits)
}

/// [`replay_storage`] for a journal on any backend (segment files or a record store).
pub fn replay_backend(
    backend: &Backend,
    limits: Limits,
) -> Result<(SessionReplay, ReadEnd), ReplayError> {
    let mut reader = Reader::open_backend(backend, limits)?;
    let mut replayer = Replayer::new();
    for record in reader.by_ref() {
        replayer.apply(&record?)?;
    }
    // Cannot fail: iteration ran to its end (an I/O error returned above), which sets it.
    #[allow(clippy::expect_used)]
    let end = reader
        .end()
        .cloned()
        .expect("the reader finished without an I/O error");
    Ok((replayer.finish(), end))
}
