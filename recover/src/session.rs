//! Opening a crashed session's journal, classifying it, and appending the recovery event.
//!
//! Order matters (SCENARIOS 2, 11, 35): the writer lock is taken first (a live session is never
//! repaired); reopening quarantines a torn tail's bytes before cutting it; only then is the
//! journal replayed and the recovery appended, in one process holding the lock throughout.

use crate::classify::{analyze, Analysis};
use journal::{FsStorage, Journal, JournalError, Limits, Options, ReadEnd, Storage};
use runtime::event::{CallRef, Event, Record};
use runtime::eventlog::{Clock, SystemClock};
use runtime::replay::ReplayError;
use std::path::Path;
use std::sync::Arc;

/// Why recovery could not be done, by exit code.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// I/O or usage: exit 1.
    #[error("{0}")]
    Failed(String),
    /// The journal is corrupt (not merely torn), or does not make sense: exit 2.
    #[error("{0}")]
    Corrupt(String),
}

/// How long a lock may outlive its writer: a child the writer forked holds an inherited copy of
/// the lock's descriptor until it execs (close-on-exec), so right after a SIGKILL the lock can
/// still be held for a few milliseconds by a process that is not a writer.
const LOCK_GRACE_MS: u64 = 200;

/// Whether a live writer holds the journal: its lock stays held through the grace period.
fn held_by_a_writer(storage: &dyn Storage) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_GRACE_MS);
    loop {
        if storage.try_lock()?.is_some() {
            return Ok(false);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
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
    pub analysis: Analysis,
    /// Present when the journal was read with `--salvage`.
    pub salvage: Option<Salvage>,
    /// A `recovery` event was appended by this run.
    pub appended: bool,
    /// Torn bytes were copied here before the tail was cut.
    pub quarantine_file: Option<String>,
}

fn failed(dir: &Path, what: impl std::fmt::Display) -> RecoverError {
    RecoverError::Failed(format!("{}: {what}", dir.display()))
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
    let storage = FsStorage::open(dir)
        .map_err(|e| failed(dir, format!("cannot open the journal directory: {e}")))?;
    recover_storage_reporting(Arc::new(storage), write, progress)
}

/// Replays a journal, reporting bytes read (segments laid end to end) after each record.
fn replay_with_progress(
    storage: Arc<dyn Storage>,
    progress: &dyn Fn(u64, u64),
) -> Result<(runtime::replay::SessionReplay, ReadEnd), ReplayError> {
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
    let total: u64 = sizes.values().sum();
    let before = |segment: u64| sizes.range(..segment).map(|(_, l)| l).sum::<u64>();
    let mut reader = journal::Reader::open(storage, Limits::default())?;
    let mut replayer = runtime::replay::Replayer::new();
    let mut last_report = 0;
    for record in reader.by_ref() {
        let record = record?;
        replayer.apply(&record)?;
        let done = before(record.position.segment) + record.position.offset + record.frame_bytes;
        if done - last_report >= 1 << 20 || done == total {
            progress(done, total);
            last_report = done;
        }
    }
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
    let storage: Arc<dyn Storage> = Arc::new(
        FsStorage::open(dir)
            .map_err(|e| failed(dir, format!("cannot open the journal directory: {e}")))?,
    );
    let live = held_by_a_writer(storage.as_ref()).map_err(|e| failed(dir, e))?;
    let mut reader =
        journal::Reader::open_salvaging(storage, Limits::default()).map_err(|e| failed(dir, e))?;
    let mut replayer = runtime::replay::Replayer::new();
    let mut salvage = Salvage::default();
    for record in reader.by_ref() {
        let record = record.map_err(|e| failed(dir, e))?;
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
        .expect("a salvaging reader ends without corruption");
    let analysis = analyze(replayer.finish(), &end, 0, live);
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
    })
}

/// [`recover`] on any storage (the simulation included).
pub fn recover_storage(storage: Arc<dyn Storage>, write: bool) -> Result<Recovered, RecoverError> {
    recover_storage_reporting(storage, write, &|_, _| {})
}

fn recover_storage_reporting(
    storage: Arc<dyn Storage>,
    write: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<Recovered, RecoverError> {
    let location = storage.location();
    let dir = Path::new(&location);
    let has_segments = storage
        .list()
        .map_err(|e| failed(dir, e))?
        .iter()
        .any(|n| journal::segment::parse_file_name(n).is_some());
    // With no segment there is nothing to protect: do not even create the lock file.
    let mut live =
        has_segments && held_by_a_writer(storage.as_ref()).map_err(|e| failed(dir, e))?;
    let mut journal = None;
    let mut dropped_now = 0;
    let mut quarantine_file = None;
    // A journal whose first record is not `session/open` (empty, or torn inside its first
    // record) holds no session: nothing to balance, so nothing is written or cut.
    let has_session = has_segments && {
        let mut reader = journal::Reader::open(storage.clone(), Limits::default())
            .map_err(|e| failed(dir, e))?;
        match reader.next() {
            Some(Ok(record)) => matches!(
                record.decode::<Record>(),
                Ok(Record {
                    event: Event::SessionOpen(_),
                    ..
                })
            ),
            _ => false,
        }
    };
    if write && !live && has_session {
        match Journal::open(storage.clone(), Options::default()) {
            Ok((j, report)) => {
                if let Some(torn) = &report.torn {
                    dropped_now = torn.dropped_bytes;
                }
                quarantine_file = report.quarantine_file;
                journal = Some(j);
            }
            Err(JournalError::Locked { .. }) => live = true,
            Err(e @ JournalError::Corrupt { .. }) => {
                return Err(RecoverError::Corrupt(e.to_string()))
            }
            Err(e) => return Err(failed(dir, e)),
        }
    }
    let (replay, end) = replay_with_progress(storage, progress).map_err(|e| match e {
        ReplayError::Journal(e) => failed(dir, e),
        other => RecoverError::Corrupt(format!("{}: {other}", dir.display())),
    })?;
    if let ReadEnd::Corrupt(c) = &end {
        return Err(RecoverError::Corrupt(format!("{}: {c}", dir.display())));
    }
    let analysis = analyze(replay, &end, dropped_now, live);
    let mut appended = false;
    if let (Some(journal), Some(recovery)) = (&journal, &analysis.recovery) {
        let clock = SystemClock;
        for call in &analysis.pending_asks {
            journal
                .append(&Record {
                    at_ms: clock.now_ms(),
                    event: Event::AskCancelled {
                        call: call.clone(),
                        reason: "session interrupted".into(),
                    },
                })
                .map_err(|e| failed(dir, e))?;
        }
        journal
            .append(&Record {
                at_ms: clock.now_ms(),
                event: Event::Recovery(recovery.clone()),
            })
            .map_err(|e| failed(dir, e))?;
        appended = true;
    }
    if let Some(journal) = journal {
        journal.close().map_err(|e| failed(dir, e))?;
    }
    Ok(Recovered {
        analysis,
        salvage: None,
        appended,
        quarantine_file,
    })
}
