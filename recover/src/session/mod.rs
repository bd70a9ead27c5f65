//! Opening a crashed session's journal, classifying it, and appending the recovery event.
//!
//! Order matters (SCENARIOS 2, 11, 35): liveness is asked without writing anything (a live
//! session is never repaired, and a read-only journal can be read); the writer lock is taken
//! before the journal is read (when this run may write); the whole journal is read and replayed
//! before anything is changed, so a corrupt journal is left as it was; only then is a torn
//! tail quarantined and cut, and the recovery appended, in one process holding the lock
//! throughout. A closed session takes no event: its cut is recorded by its quarantine file,
//! which a later run finds again, as it finds the cut of a repair stopped before its event.
//!
//! Each room of this module has one job: `error` says why recovery failed ([`RecoverError`]);
//! `prepare` asks about liveness and takes the lock; `repair` cuts and appends; `changes`
//! finds cuts no event records and words the notes; `salvage` reads a corrupt journal
//! ([`salvage()`]); `streaming` reports call by call ([`recover_streaming`]); `progress`
//! counts bytes read. This file holds the whole-session entry points, [`recover`] and
//! [`recover_reporting`], and what they return, [`Recovered`].

mod changes;
pub(crate) mod error;
mod prepare;
mod progress;
mod repair;
mod salvage;
mod streaming;

pub use changes::EarlierCut;
pub use error::RecoverError;
pub use salvage::{salvage, salvage_probing, Salvage};
pub use streaming::{
    recover_storage_streaming, recover_streaming, recover_streaming_observing,
    recover_streaming_probing, reread, ReportSink, RereadError, Streamed,
};

use crate::classify::{analyze_probing, Analysis};
use crate::probe::Prober;
use crate::Place;
use changes::{notes, Changes};
use events::replay::ReplayError;
use journal::{Backend, Limits, ReadEnd, Storage};
use prepare::prepare;
use progress::Progress;
use repair::{append_recovery, repair};
use std::path::Path;
use std::sync::Arc;

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

/// Recovers the session journaled in `dir`. With `write`, balances the journal (unless it is
/// live or already balanced); without, only reads. Never runs a tool.
pub fn recover(at: impl Into<Place>, write: bool) -> Result<Recovered, RecoverError> {
    recover_reporting(at, write, &|_, _| {})
}

/// [`recover`], probing `workspace` (when given) for every `TOOL_OUTCOME_UNKNOWN` call before
/// the recovery is built: each such report carries its [`Probe`](crate::probe::Probe), and the
/// result this run gives such a call (the one appended with `write`) states the evidence in
/// plain words. A workspace that cannot be opened is an error before anything is read or
/// written ([`RecoverError::Workspace`]). Reads only the paths the journal names, confined to
/// the workspace; never writes there, never runs anything.
pub fn recover_probing(
    at: impl Into<Place>,
    write: bool,
    workspace: Option<&Path>,
) -> Result<Recovered, RecoverError> {
    recover_reporting_probing(at, write, &|_, _| {}, workspace)
}

/// [`recover`], telling `progress` (bytes read, bytes in all) as it reads: for people watching
/// a long journal.
pub fn recover_reporting(
    at: impl Into<Place>,
    write: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<Recovered, RecoverError> {
    recover_reporting_probing(at, write, progress, None)
}

/// [`recover_reporting`], probing `workspace` as [`recover_probing`] does.
pub fn recover_reporting_probing(
    at: impl Into<Place>,
    write: bool,
    progress: &dyn Fn(u64, u64),
    workspace: Option<&Path>,
) -> Result<Recovered, RecoverError> {
    let place = at.into();
    // The workspace first: a bad one changes nothing.
    let prober = workspace.map(Prober::open).transpose()?;
    let backend = place.open()?;
    backend_reporting(&backend, write, progress, prober.as_ref())
}

/// Replays a journal, reporting bytes read (segments laid end to end) after each record.
fn replay_with_progress(
    backend: &Backend,
    progress: &dyn Fn(u64, u64),
) -> Result<(events::replay::SessionReplay, ReadEnd), ReplayError> {
    let mut progress = Progress::new(backend, progress)?;
    let mut reader = journal::Reader::open_backend(backend, Limits::default())?;
    let mut replayer = events::replay::Replayer::new();
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

/// [`recover`] on any storage (the simulation included).
pub fn recover_storage(storage: Arc<dyn Storage>, write: bool) -> Result<Recovered, RecoverError> {
    backend_reporting(&Backend::Files(storage), write, &|_, _| {}, None)
}

/// [`recover_reporting`] on any storage: prepare, read through, repair, classify, append.
fn backend_reporting(
    backend: &Backend,
    write: bool,
    progress: &dyn Fn(u64, u64),
    prober: Option<&Prober>,
) -> Result<Recovered, RecoverError> {
    let location = backend.location();
    let dir = Path::new(&location);
    let mut prepared = prepare(backend, write)?;
    let (replay, end) =
        replay_with_progress(backend, progress).map_err(|e| RecoverError::from_replay(dir, e))?;
    if let ReadEnd::Corrupt(c) = &end {
        return Err(RecoverError::Corrupt(format!("{}: {c}", dir.display())));
    }
    let repaired = repair(backend, &mut prepared, &end)?;
    let analysis = analyze_probing(replay, &end, repaired.dropped_bytes, prepared.live, prober);
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
