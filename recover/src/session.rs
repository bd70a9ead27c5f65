//! Opening a crashed session's journal, classifying it, and appending the recovery event.
//!
//! Order matters (SCENARIOS 2, 11, 35): liveness is asked without writing anything (a live
//! session is never repaired, and a read-only journal can be read); the writer lock is taken
//! before the journal is read (when this run may write); the whole journal is read and replayed
//! before anything is changed, so a corrupt journal is left as it was; only then is a torn
//! tail quarantined and cut, and the recovery appended, in one process holding the lock
//! throughout. A closed session takes no event: its cut is recorded by its quarantine file,
//! which a later run finds again, as it finds the cut of a repair stopped before its event.

use crate::classify::{analyze, Analysis, CallReport, End};
use crate::stream::Classifier;
use journal::{FsStorage, Journal, JournalError, Limits, Options, ReadEnd, Storage, WriterLock};
use runtime::event::{CallRef, Classification, Event, Record, Recovery};
use runtime::eventlog::{Clock, SystemClock};
use runtime::replay::ReplayError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why recovery could not be done. `recover`'s `main` turns each into its exit code: 1 for the
/// I/O failures, 2 for [`RecoverError::Corrupt`], 3 for [`RecoverError::Newer`]. Every message
/// starts with the journal's directory.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The journal directory could not be opened: exit 1.
    #[error("{}: cannot open the journal directory: {source}", dir.display())]
    OpenDir {
        /// The directory asked for.
        dir: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: std::io::Error,
    },
    /// Reading, locking or appending to the journal failed (I/O, a record refused, a writer
    /// stopped by an earlier failure): exit 1. A lock held by a live writer is not this: a
    /// live session is read, not refused.
    #[error("{}", placed(dir, source))]
    Journal {
        /// The journal's directory.
        dir: PathBuf,
        /// What the journal said.
        #[source]
        source: JournalError,
    },
    /// A file of the journal directory could not be listed or measured outside the journal's
    /// reader (looking for the quarantine file of an earlier cut, say): exit 1.
    #[error("{}", placed(dir, source))]
    Io {
        /// The journal's directory.
        dir: PathBuf,
        /// What the storage said.
        #[source]
        source: std::io::Error,
    },
    /// The reader stopped without saying how the journal ends (it always does after its last
    /// record; this guards a reader that would not): exit 1.
    #[error("{}: reading ended without a verdict", dir.display())]
    NoVerdict {
        /// The journal's directory.
        dir: PathBuf,
    },
    /// The journal is corrupt (not merely torn), or does not make sense: exit 2.
    #[error("{0}")]
    Corrupt(String),
    /// Written by a newer tooljournal: a payload this build cannot decode in a journal of a
    /// newer event schema (docs/FORMAT.md, *Versioning*): exit 3.
    #[error("{0}")]
    Newer(String),
}

impl RecoverError {
    /// A replay error as the exit-code class it belongs to, named with the journal directory.
    pub fn from_replay(dir: &Path, e: ReplayError) -> RecoverError {
        match e {
            ReplayError::Journal(e) => journal_failed(dir, e),
            e @ ReplayError::NewerSchema { .. } => {
                RecoverError::Newer(format!("{}: {e}", dir.display()))
            }
            other => RecoverError::Corrupt(format!("{}: {other}", dir.display())),
        }
    }
}

/// The error said once with the journal's path in front: a journal error usually starts with
/// it already (its location), and then it is not said twice.
fn placed(dir: &Path, what: &dyn std::fmt::Display) -> String {
    let what = what.to_string();
    let place = format!("{}: ", dir.display());
    if what.starts_with(&place) {
        what
    } else {
        format!("{place}{what}")
    }
}

/// A journal failure in `dir` ([`RecoverError::Journal`]).
fn journal_failed(dir: &Path, source: JournalError) -> RecoverError {
    RecoverError::Journal {
        dir: dir.to_path_buf(),
        source,
    }
}

/// A storage failure in `dir` ([`RecoverError::Io`]).
fn io_failed(dir: &Path, source: std::io::Error) -> RecoverError {
    RecoverError::Io {
        dir: dir.to_path_buf(),
        source,
    }
}

/// The journal directory could not be opened ([`RecoverError::OpenDir`]).
fn open_failed(dir: &Path, source: std::io::Error) -> RecoverError {
    RecoverError::OpenDir {
        dir: dir.to_path_buf(),
        source,
    }
}

/// How long a lock may outlive its writer: a child the writer forked holds an inherited copy of
/// the lock's descriptor until it execs (close-on-exec), so right after a SIGKILL the lock can
/// still be held for a few milliseconds by a process that is not a writer.
const LOCK_GRACE_MS: u64 = 200;

/// Whether a live writer holds the journal: its lock stays held through the grace period.
/// Asked without creating or writing anything; an error means it cannot be told.
fn held_by_a_writer(storage: &dyn Storage) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_GRACE_MS);
    loop {
        if !storage.writer_lock_held()? {
            return Ok(false);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether a writer holds the journal, and why that could not be told (then: not live, and
/// nothing is written).
fn liveness(storage: &dyn Storage) -> (bool, Option<String>) {
    match held_by_a_writer(storage) {
        Ok(live) => (live, None),
        Err(e) => (
            false,
            Some(format!(
                "cannot tell whether a writer holds the journal (LOCK: {e})"
            )),
        ),
    }
}

/// A cut that no event records, found again by its quarantine file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierCut {
    /// The file the torn bytes were kept in.
    pub quarantine_file: String,
    /// How many bytes were cut.
    pub dropped_bytes: u64,
}

/// The newest quarantine file of the last segment, when that segment ends exactly where the
/// file's bytes were cut: nothing was written after the cut, so no event records it (a repair
/// stopped between its cut and its recovery event, or a closed session, which takes no event).
/// Once anything follows the cut, the event that follows it (a recovery) records it.
fn unrecorded_cut(storage: &dyn Storage) -> std::io::Result<Option<EarlierCut>> {
    use journal::segment::{file_name, parse_file_name, quarantine_name};
    let names: std::collections::HashSet<String> = storage.list()?.into_iter().collect();
    let Some(last) = names.iter().filter_map(|n| parse_file_name(n)).max() else {
        return Ok(None);
    };
    let len_bytes = storage.open_read(&file_name(last))?.len_bytes()?;
    // The writer numbers a cut's quarantine files from 0 up, taking the first free number.
    let newest = (0..)
        .map(|attempt| quarantine_name(last, len_bytes, attempt))
        .take_while(|name| names.contains(name))
        .last();
    let Some(name) = newest else {
        return Ok(None);
    };
    let dropped_bytes = storage.open_read(&name)?.len_bytes()?;
    Ok((dropped_bytes > 0).then_some(EarlierCut {
        quarantine_file: name,
        dropped_bytes,
    }))
}

/// What `--salvage` passed over to read a corrupt journal.
#[derive(Debug, Default)]
pub struct Salvage {
    /// Byte ranges the reader skipped.
    pub skipped: Vec<journal::Skipped>,
    /// Records that were intact but did not fit the session (their neighbours were lost).
    pub skipped_events: Vec<(u64, journal::Position, String)>,
    /// Calls whose story is incomplete because of what was skipped: calls named by a skipped
    /// event, and every call left unfinished.
    pub affected_calls: Vec<CallRef>,
}

/// What a recovery found and did.
#[derive(Debug)]
pub struct Recovered {
    /// What the journal says, call by call, with the recovery it needs (if any).
    pub analysis: Analysis,
    /// Present when the journal was read with `--salvage`.
    pub salvage: Option<Salvage>,
    /// A `recovery` event was appended by this run.
    pub appended: bool,
    /// Torn bytes were copied here before the tail was cut.
    pub quarantine_file: Option<String>,
    /// A cut an earlier run made that no event recorded (this run records it when it writes).
    pub earlier_cut: Option<EarlierCut>,
    /// Why this run wrote nothing although it may have had to.
    pub read_only_because: Option<String>,
}

impl Recovered {
    /// What this run changed, found changed, or could not do: for stderr.
    pub fn notes(&self) -> Vec<String> {
        notes(&Changes {
            quarantine_file: self.quarantine_file.as_deref(),
            earlier_cut: self.earlier_cut.as_ref(),
            appended: self.appended,
            closed: self.analysis.replay.closed,
            read_only_because: self.read_only_because.as_deref(),
        })
    }
}

struct Changes<'a> {
    quarantine_file: Option<&'a str>,
    earlier_cut: Option<&'a EarlierCut>,
    appended: bool,
    closed: bool,
    read_only_because: Option<&'a str>,
}

fn notes(c: &Changes<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(why) = c.read_only_because {
        notes.push(format!("{why}: read only, nothing cut or appended"));
    }
    if let Some(q) = c.quarantine_file {
        notes.push(format!("torn bytes kept in {q} before the tail was cut"));
    }
    if let Some(cut) = c.earlier_cut {
        notes.push(format!(
            "an earlier run cut {} torn bytes (kept in {}) and no event records it{}",
            cut.dropped_bytes,
            cut.quarantine_file,
            if c.appended { "; recorded now" } else { "" }
        ));
    }
    if c.closed && (c.quarantine_file.is_some() || c.earlier_cut.is_some()) {
        notes.push(
            "the session was closed and nothing may follow its session/close: the quarantine \
             file is the record of the cut"
                .into(),
        );
    }
    if c.appended {
        notes.push("recovery appended; the journal is balanced".into());
    }
    notes
}

/// Recovers the session journaled in `dir`. With `write`, balances the journal (unless it is
/// live or already balanced); without, only reads. Never runs a tool.
pub fn recover(dir: &Path, write: bool) -> Result<Recovered, RecoverError> {
    recover_reporting(dir, write, &|_, _| {})
}

/// [`recover`], telling `progress` (bytes read, bytes in all) as it reads: for people watching
/// a long journal.
pub fn recover_reporting(
    dir: &Path,
    write: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<Recovered, RecoverError> {
    let storage = FsStorage::open(dir).map_err(|e| open_failed(dir, e))?;
    recover_storage_reporting(Arc::new(storage), write, progress)
}

/// Replays a journal, reporting bytes read (segments laid end to end) after each record.
fn replay_with_progress(
    storage: Arc<dyn Storage>,
    progress: &dyn Fn(u64, u64),
) -> Result<(runtime::replay::SessionReplay, ReadEnd), ReplayError> {
    let mut progress = Progress::new(storage.as_ref(), progress)?;
    let mut reader = journal::Reader::open(storage, Limits::default())?;
    let mut replayer = runtime::replay::Replayer::new();
    for record in reader.by_ref() {
        let record = record?;
        replayer.apply(&record)?;
        progress.record(record.position, record.frame_bytes);
    }
    // Cannot fail: iteration ran to its end (an I/O error returned above), which sets it.
    let end = reader
        .end()
        .cloned()
        .expect("the reader finished without an I/O error");
    Ok((replayer.finish(), end))
}

/// Reads what can be read of a corrupt journal, passing over the damage and saying exactly what
/// was passed over. Never writes: a journal with corruption in its middle is evidence, and a
/// recovery appended behind it would hide that.
pub fn salvage(dir: &Path) -> Result<Recovered, RecoverError> {
    let storage: Arc<dyn Storage> =
        Arc::new(FsStorage::open(dir).map_err(|e| open_failed(dir, e))?);
    let (live, read_only_because) = liveness(storage.as_ref());
    let mut reader = journal::Reader::open_salvaging(storage.clone(), Limits::default())
        .map_err(|e| journal_failed(dir, e))?;
    let mut replayer = runtime::replay::Replayer::new();
    let mut salvage = Salvage::default();
    for record in reader.by_ref() {
        let record = record.map_err(|e| journal_failed(dir, e))?;
        if let Err(e) = replayer.apply(&record) {
            if let Ok(Record { event, .. }) = record.decode::<Record>() {
                if let Some(call) = event.call() {
                    salvage.affected_calls.push(call.clone());
                }
            }
            salvage
                .skipped_events
                .push((record.seq, record.position, e.to_string()));
        }
    }
    salvage.skipped = reader.skipped().to_vec();
    let end = reader
        .end()
        .cloned()
        .ok_or_else(|| RecoverError::NoVerdict {
            dir: dir.to_path_buf(),
        })?;
    // The same end as a dry run reports, a cut no event records included.
    let earlier_cut = match end {
        ReadEnd::Clean if !live => {
            unrecorded_cut(storage.as_ref()).map_err(|e| io_failed(dir, e))?
        }
        _ => None,
    };
    let dropped_bytes = earlier_cut.as_ref().map_or(0, |c| c.dropped_bytes);
    let analysis = analyze(replayer.finish(), &end, dropped_bytes, live);
    for c in &analysis.calls {
        if c.recovered && !salvage.affected_calls.contains(&c.call) {
            salvage.affected_calls.push(c.call.clone());
        }
    }
    Ok(Recovered {
        analysis,
        salvage: Some(salvage),
        appended: false,
        quarantine_file: None,
        earlier_cut,
        read_only_because,
    })
}

/// [`recover`] on any storage (the simulation included).
pub fn recover_storage(storage: Arc<dyn Storage>, write: bool) -> Result<Recovered, RecoverError> {
    recover_storage_reporting(storage, write, &|_, _| {})
}

/// What recovery found before reading the journal through: whether a writer holds it, the
/// writer lock when this run may write (held until the recovery is appended), and the
/// session's id (from its first record).
struct Prepared {
    live: bool,
    lock: Option<WriterLock>,
    session_id: Option<String>,
    /// Why this run will write nothing although asked to (or could not tell liveness).
    read_only_because: Option<String>,
}

/// Whether an I/O error says the journal cannot be written (a read-only mount, an immutable
/// file, no permission), rather than that something failed.
fn is_not_writable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

fn prepare(storage: &Arc<dyn Storage>, write: bool) -> Result<Prepared, RecoverError> {
    let location = storage.location();
    let dir = Path::new(&location);
    let has_segments = storage
        .list()
        .map_err(|e| io_failed(dir, e))?
        .iter()
        .any(|n| journal::segment::parse_file_name(n).is_some());
    // With no segment there is nothing to protect, and no writer to ask about.
    let (mut live, mut read_only_because) = if has_segments {
        liveness(storage.as_ref())
    } else {
        (false, None)
    };
    // A journal whose first record is not `session/open` (empty, or torn inside its first
    // record) holds no session: nothing to balance, so nothing is written or cut.
    let session_id = if has_segments {
        let mut reader = journal::Reader::open(storage.clone(), Limits::default())
            .map_err(|e| journal_failed(dir, e))?;
        match reader.next() {
            Some(Ok(record)) => match record.decode::<Record>() {
                Ok(Record {
                    event: Event::SessionOpen(open),
                    ..
                }) => Some(open.session_id),
                _ => None,
            },
            _ => None,
        }
    } else {
        None
    };
    let mut lock = None;
    if write && !live && read_only_because.is_none() && session_id.is_some() {
        match Journal::lock(storage.clone()) {
            Ok(l) => lock = Some(l),
            Err(JournalError::Locked { .. }) => live = true,
            Err(JournalError::Io { source, .. }) if is_not_writable(&source) => {
                read_only_because = Some(format!("cannot take the writer lock ({source})"));
            }
            Err(e) => return Err(journal_failed(dir, e)),
        }
    }
    Ok(Prepared {
        live,
        lock,
        session_id,
        read_only_because,
    })
}

/// What this run did to the bytes once the whole journal was read and found not corrupt.
struct Repaired {
    /// Open for the recovery event when this run writes.
    journal: Option<Journal>,
    /// Torn bytes dropped and not yet recorded: cut by this run, or by an earlier one.
    dropped_bytes: u64,
    quarantine_file: Option<String>,
    earlier_cut: Option<EarlierCut>,
}

/// Under the lock (when this run writes): quarantines and cuts a torn tail, and finds a cut
/// an earlier run left unrecorded. Called only after the whole journal was read: corruption
/// anywhere has returned before this.
fn repair(
    storage: &Arc<dyn Storage>,
    prepared: &mut Prepared,
    end: &ReadEnd,
) -> Result<Repaired, RecoverError> {
    let location = storage.location();
    let dir = Path::new(&location);
    // A live writer may be between a cut and its next record: what it dropped is its to say.
    let earlier_cut = match end {
        ReadEnd::Clean if !prepared.live => {
            unrecorded_cut(storage.as_ref()).map_err(|e| io_failed(dir, e))?
        }
        _ => None,
    };
    let mut repaired = Repaired {
        journal: None,
        dropped_bytes: earlier_cut.as_ref().map_or(0, |c| c.dropped_bytes),
        quarantine_file: None,
        earlier_cut,
    };
    if let Some(lock) = prepared.lock.take() {
        match lock.open(Options::default()) {
            Ok((journal, report)) => {
                if let Some(torn) = &report.torn {
                    repaired.dropped_bytes = torn.dropped_bytes;
                }
                repaired.quarantine_file = report.quarantine_file;
                repaired.journal = Some(journal);
            }
            Err(e @ JournalError::Corrupt { .. }) => {
                return Err(RecoverError::Corrupt(e.to_string()))
            }
            Err(e) => return Err(journal_failed(dir, e)),
        }
    }
    Ok(repaired)
}

/// Withdraws the pending questions and appends the recovery event (when there is one), then
/// closes the journal. Returns whether the recovery was appended.
fn append_recovery(
    dir: &Path,
    journal: Option<Journal>,
    pending_asks: &[CallRef],
    recovery: Option<&Recovery>,
) -> Result<bool, RecoverError> {
    let mut appended = false;
    if let (Some(journal), Some(recovery)) = (&journal, recovery) {
        let clock = SystemClock;
        for call in pending_asks {
            journal
                .append(&Record {
                    at_ms: clock.now_ms(),
                    event: Event::AskCancelled {
                        call: call.clone(),
                        reason: "session interrupted".into(),
                    },
                })
                .map_err(|e| journal_failed(dir, e))?;
        }
        journal
            .append(&Record {
                at_ms: clock.now_ms(),
                event: Event::Recovery(recovery.clone()),
            })
            .map_err(|e| journal_failed(dir, e))?;
        appended = true;
    }
    if let Some(journal) = journal {
        journal.close().map_err(|e| journal_failed(dir, e))?;
    }
    Ok(appended)
}

fn recover_storage_reporting(
    storage: Arc<dyn Storage>,
    write: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<Recovered, RecoverError> {
    let location = storage.location();
    let dir = Path::new(&location);
    let mut prepared = prepare(&storage, write)?;
    let (replay, end) = replay_with_progress(storage.clone(), progress)
        .map_err(|e| RecoverError::from_replay(dir, e))?;
    if let ReadEnd::Corrupt(c) = &end {
        return Err(RecoverError::Corrupt(format!("{}: {c}", dir.display())));
    }
    let repaired = repair(&storage, &mut prepared, &end)?;
    let analysis = analyze(replay, &end, repaired.dropped_bytes, prepared.live);
    let appended = append_recovery(
        dir,
        repaired.journal,
        &analysis.pending_asks,
        analysis.recovery.as_ref(),
    )?;
    Ok(Recovered {
        analysis,
        salvage: None,
        appended,
        quarantine_file: repaired.quarantine_file,
        earlier_cut: repaired.earlier_cut,
        read_only_because: prepared.read_only_because,
    })
}

/// Where the calls of a streamed recovery go, one report at a time.
pub trait ReportSink {
    /// Before the first call: the session's id (`None` for a journal with no session) and
    /// whether a writer holds it.
    fn start(&mut self, session_id: Option<&str>, live: bool) -> std::io::Result<()>;
    /// One call's report, in the order [`analyze`] lists them.
    fn call(&mut self, report: CallReport) -> std::io::Result<()>;
}

/// Collects the reports (for tests, and callers that want them all after all).
impl ReportSink for Vec<CallReport> {
    fn start(&mut self, _session_id: Option<&str>, _live: bool) -> std::io::Result<()> {
        Ok(())
    }
    fn call(&mut self, report: CallReport) -> std::io::Result<()> {
        self.push(report);
        Ok(())
    }
}

/// What a streamed recovery found and did (its calls went to the sink).
#[derive(Debug)]
pub struct Streamed {
    /// The sink could not take a report (stdout closed, say): it was given nothing more, but
    /// reading went on and the recovery was appended all the same, as a run that prints at the
    /// end would have done.
    pub output_error: Option<std::io::Error>,
    /// How the bytes ended.
    pub end: End,
    /// A live writer holds the journal: read only, nothing classified.
    pub live: bool,
    /// The session's id, when the journal opens one.
    pub session_id: Option<String>,
    /// Calls reported, and how many were classified each way.
    pub calls: u64,
    /// Calls classified `TOOL_OUTCOME_UNKNOWN`.
    pub outcome_unknown: u64,
    /// Calls classified `TOOL_NOT_STARTED`.
    pub not_started: u64,
    /// A `recovery` event was appended by this run.
    pub appended: bool,
    /// Torn bytes were copied here before the tail was cut.
    pub quarantine_file: Option<String>,
    /// As [`Recovered::earlier_cut`].
    pub earlier_cut: Option<EarlierCut>,
    /// As [`Recovered::read_only_because`].
    pub read_only_because: Option<String>,
    /// The journal holds `session/close`.
    pub closed: bool,
    /// The most calls the classifier held at once.
    pub retained_calls_max: usize,
    /// Questions withdrawn, and the recovery event (appended with `write` when not live), as
    /// [`Analysis`] has them.
    pub pending_asks: Vec<CallRef>,
    /// The event that balances the journal; `None` when it is balanced already (or live).
    pub recovery: Option<Recovery>,
    /// Process groups of calls that never settled (none killed by a resume): they may still
    /// run. Not part of stdout: whether they run is the world's state, not the journal's.
    pub processes: Vec<(CallRef, runtime::event::ProcessStarted)>,
}

impl Streamed {
    /// As [`Recovered::notes`].
    pub fn notes(&self) -> Vec<String> {
        notes(&Changes {
            quarantine_file: self.quarantine_file.as_deref(),
            earlier_cut: self.earlier_cut.as_ref(),
            appended: self.appended,
            closed: self.closed,
            read_only_because: self.read_only_because.as_deref(),
        })
    }
}

/// [`recover_reporting`] without keeping the session: every call's report goes to `sink` as
/// soon as it is final, in the same order and with the same content, and the recovery event
/// appended (with `write`) is the same. Memory grows with the calls open at a time, not with
/// the journal. Corruption found on the way is an error after some reports were given.
pub fn recover_streaming(
    dir: &Path,
    write: bool,
    progress: &dyn Fn(u64, u64),
    sink: &mut dyn ReportSink,
) -> Result<Streamed, RecoverError> {
    let storage = FsStorage::open(dir).map_err(|e| open_failed(dir, e))?;
    recover_storage_streaming(Arc::new(storage), write, progress, sink)
}

/// [`recover_streaming`] on any storage (the simulation included).
pub fn recover_storage_streaming(
    storage: Arc<dyn Storage>,
    write: bool,
    progress: &dyn Fn(u64, u64),
    sink: &mut dyn ReportSink,
) -> Result<Streamed, RecoverError> {
    let location = storage.location();
    let dir = Path::new(&location);
    let mut prepared = prepare(&storage, write)?;
    let mut out = Output {
        sink,
        error: None,
        calls: 0,
        outcome_unknown: 0,
        not_started: 0,
    };
    out.error = out
        .sink
        .start(prepared.session_id.as_deref(), prepared.live)
        .err();
    let mut classifier = Classifier::new(prepared.live);
    let replay_error = |e: ReplayError| RecoverError::from_replay(dir, e);
    let mut reader = journal::Reader::open(storage.clone(), Limits::default())
        .map_err(|e| replay_error(e.into()))?;
    let mut progress = Progress::new(storage.as_ref(), progress).map_err(replay_error)?;
    while let Some(record) = reader.next_ref() {
        let record = record.map_err(|e| replay_error(e.into()))?;
        classifier.apply(record).map_err(replay_error)?;
        for report in classifier.take_ready() {
            out.give(report);
        }
        progress.record(record.position, record.frame_bytes);
    }
    let end = reader
        .end()
        .cloned()
        .ok_or_else(|| RecoverError::NoVerdict {
            dir: dir.to_path_buf(),
        })?;
    if let ReadEnd::Corrupt(c) = &end {
        return Err(RecoverError::Corrupt(format!("{}: {c}", dir.display())));
    }
    let repaired = repair(&storage, &mut prepared, &end)?;
    let finished = classifier.finish(&end, repaired.dropped_bytes);
    for report in classifier.take_ready() {
        out.give(report);
    }
    let appended = append_recovery(
        dir,
        repaired.journal,
        &finished.pending_asks,
        finished.recovery.as_ref(),
    )?;
    Ok(Streamed {
        output_error: out.error,
        end: finished.end,
        live: prepared.live,
        session_id: prepared.session_id,
        calls: out.calls,
        outcome_unknown: out.outcome_unknown,
        not_started: out.not_started,
        appended,
        quarantine_file: repaired.quarantine_file,
        earlier_cut: repaired.earlier_cut,
        read_only_because: prepared.read_only_because,
        closed: classifier.closed(),
        retained_calls_max: classifier.retained_calls_max(),
        pending_asks: finished.pending_asks,
        recovery: finished.recovery,
        processes: finished.processes,
    })
}

/// The sink, and the first error it gave (after which it is given nothing more).
struct Output<'a> {
    sink: &'a mut dyn ReportSink,
    error: Option<std::io::Error>,
    calls: u64,
    outcome_unknown: u64,
    not_started: u64,
}

impl Output<'_> {
    fn give(&mut self, report: CallReport) {
        self.calls += 1;
        match report.classification {
            Some(Classification::ToolOutcomeUnknown) => self.outcome_unknown += 1,
            Some(Classification::ToolNotStarted) => self.not_started += 1,
            None => {}
        }
        if self.error.is_none() {
            self.error = self.sink.call(report).err();
        }
    }
}

/// Bytes read so far (segments laid end to end), told every MiB and at the end.
struct Progress<'a> {
    /// Each segment's number and the bytes of the segments before it.
    starts: Vec<(u64, u64)>,
    total: u64,
    last_report: u64,
    /// The segment of the last record and where it starts.
    current: (u64, u64),
    report: &'a dyn Fn(u64, u64),
}

impl<'a> Progress<'a> {
    fn new(
        storage: &dyn Storage,
        report: &'a dyn Fn(u64, u64),
    ) -> Result<Progress<'a>, ReplayError> {
        let mut sizes = std::collections::BTreeMap::new();
        for name in storage.list().map_err(|e| {
            ReplayError::Journal(JournalError::Io {
                location: storage.location(),
                op: "list",
                file: ".".into(),
                source: e,
            })
        })? {
            if let Some(number) = journal::segment::parse_file_name(&name) {
                let len = storage
                    .open_read(&name)
                    .and_then(|f| f.len_bytes())
                    .unwrap_or(0);
                sizes.insert(number, len);
            }
        }
        let mut starts = Vec::with_capacity(sizes.len());
        let mut total = 0;
        for (number, len) in sizes {
            starts.push((number, total));
            total += len;
        }
        Ok(Progress {
            starts,
            total,
            last_report: 0,
            current: (u64::MAX, 0),
            report,
        })
    }

    fn record(&mut self, position: journal::Position, frame_bytes: u64) {
        let segment = position.segment;
        if self.current.0 != segment {
            // The bytes before `segment`: where the first segment at or after it starts.
            let before = self
                .starts
                .iter()
                .find(|(n, _)| *n >= segment)
                .map_or(self.total, |&(_, s)| s);
            self.current = (segment, before);
        }
        let done = self.current.1 + position.offset + frame_bytes;
        if done - self.last_report >= 1 << 20 || done == self.total {
            (self.report)(done, self.total);
            self.last_report = done;
        }
    }
}
