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
//! ([`Recovery::salvage`]); `streaming` reports call by call ([`Recovery::stream`]); `progress`
//! counts bytes read. This file holds the one entry, [`Recovery`], and what its whole-session
//! reading returns, [`Recovered`].

mod changes;
pub(crate) mod error;
mod prepare;
mod progress;
mod repair;
mod salvage;
mod streaming;

pub(crate) use changes::EarlierCut;
pub use error::RecoverError;
pub(crate) use salvage::Salvage;
pub use streaming::{ReportSink, RereadError, Streamed};

use crate::classify::{analyze_probing, Analysis};
use crate::probe::Prober;
use crate::stream::{Classifier, Mode};
use crate::Place;
use changes::{notes, Changes};
use events::replay::ReplayError;
use journal::{Backend, Limits, ReadEnd};
use prepare::prepare;
use progress::Progress;
use repair::{append_recovery, repair};
use std::path::Path;

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

/// No progress to tell: the default of a [`Recovery`].
const NO_PROGRESS: &dyn Fn(u64, u64) = &|_, _| {};

/// One recovery of one journal: where it is, whether it may write, which workspace it probes,
/// whom it tells its progress; then one of the readings ([`run`](Recovery::run),
/// [`stream`](Recovery::stream), [`salvage`](Recovery::salvage), ...). The one entry of this
/// crate: every reading prepares, reads, repairs and classifies the same way. Never runs a
/// tool.
///
/// ```no_run
/// # fn main() -> Result<(), tooljournal_recover::RecoverError> {
/// use tooljournal_recover::Recovery;
/// let recovered = Recovery::of(std::path::Path::new("/path/to/journal"))
///     .write(true)
///     .probe(Some(std::path::Path::new("/path/to/workspace")))
///     .run()?;
/// for call in &recovered.analysis.calls {
///     println!("{}: {:?}", call.call, call.classification);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Recovery<'a> {
    place: Place,
    write: bool,
    workspace: Option<&'a Path>,
    progress: &'a dyn Fn(u64, u64),
}

impl std::fmt::Debug for Recovery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("place", &self.place.label())
            .field("write", &self.write)
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl<'a> Recovery<'a> {
    /// A recovery of the journal `at` (a directory, or an opened backend), reading only, probing
    /// nothing, telling no progress.
    pub fn of(at: impl Into<Place>) -> Recovery<'a> {
        Recovery {
            place: at.into(),
            write: false,
            workspace: None,
            progress: NO_PROGRESS,
        }
    }

    /// With `write`, the reading balances the journal (unless it is live or balanced already):
    /// a torn tail quarantined and cut, the questions withdrawn, one `recovery` event appended.
    /// Without, it only reads.
    pub fn write(mut self, write: bool) -> Recovery<'a> {
        self.write = write;
        self
    }

    /// Probes `workspace` (when given) for every `TOOL_OUTCOME_UNKNOWN` call before the
    /// recovery is built: each such report carries its [`Probe`](crate::probe::Probe), and the
    /// result this run gives such a call states the evidence in plain words. A workspace that
    /// cannot be opened is an error before anything is read or written
    /// ([`RecoverError::Workspace`]). Reads only the paths the journal names, confined to the
    /// workspace; never writes there.
    pub fn probe(mut self, workspace: Option<&'a Path>) -> Recovery<'a> {
        self.workspace = workspace;
        self
    }

    /// Tells `progress` (bytes read, bytes in all) as the journal is read: for people watching
    /// a long journal.
    pub fn progress(mut self, progress: &'a dyn Fn(u64, u64)) -> Recovery<'a> {
        self.progress = progress;
        self
    }

    /// The whole session: every call's report kept in [`Recovered::analysis`].
    pub fn run(self) -> Result<Recovered, RecoverError> {
        // The workspace first: a bad one changes nothing.
        let prober = self.workspace.map(Prober::open).transpose()?;
        let backend = self.place.open()?;
        backend_reporting(&backend, self.write, self.progress, prober.as_ref())
    }

    /// Without keeping the session: every call's report goes to `sink` as soon as it is final,
    /// in the same order and with the same content as [`run`](Recovery::run) keeps them, and
    /// the recovery event appended (with [`write`](Recovery::write)) is the same. Memory grows
    /// with the calls open at a time, not with the journal. Corruption found on the way is an
    /// error after some reports were given.
    pub fn stream(self, sink: &mut dyn ReportSink) -> Result<Streamed, RecoverError> {
        streaming::stream(&self.place, self.write, self.progress, sink, self.workspace)
    }

    /// [`stream`](Recovery::stream) with a classifier in `mode`, handed to `observe` after
    /// every record and after the last (take its notices there): the first of the two readings
    /// of `rebuild` and `audit`. Returns the classifier too, for what it kept to the end.
    pub fn stream_observing(
        self,
        sink: &mut dyn ReportSink,
        mode: Mode,
        observe: &mut dyn FnMut(&mut Classifier),
    ) -> Result<(Streamed, Classifier), RecoverError> {
        streaming::stream_observing(
            &self.place,
            self.write,
            self.progress,
            sink,
            self.workspace,
            mode,
            observe,
        )
    }

    /// The second reading of `rebuild` and `audit`: the first `records` records (what the
    /// first reading applied: not what a recovery it appended, or a writer, added since),
    /// classified by `classifier` (made as the first reading's was: the same liveness), handed
    /// to `observe` after each record and after the last. Writes nothing, whatever
    /// [`write`](Recovery::write) says; probes nothing.
    pub fn reread(
        self,
        records: u64,
        classifier: Classifier,
        observe: &mut dyn FnMut(&mut Classifier) -> Result<(), RereadError>,
    ) -> Result<(), RereadError> {
        streaming::reread(&self.place, records, classifier, observe)
    }

    /// Reads what can be read of a corrupt journal, passing over the damage and saying exactly
    /// what was passed over ([`Recovered::salvage`]). Never writes, whatever
    /// [`write`](Recovery::write) says: a journal with corruption in its middle is evidence,
    /// and a recovery appended behind it would hide that.
    pub fn salvage(self) -> Result<Recovered, RecoverError> {
        salvage::salvage(&self.place, self.workspace)
    }
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
    #[allow(clippy::expect_used)]
    let end = reader
        .end()
        .cloned()
        .expect("the reader finished without an I/O error");
    Ok((replayer.finish(), end))
}

/// [`Recovery::run`] on an opened backend: prepare, read through, repair, classify, append.
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
