//! Recovery without keeping the session ([`Recovery::stream`](super::Recovery::stream)): each
//! call's report goes to a [`ReportSink`] as soon as it is final, so memory grows with the calls
//! open at a time rather than with the journal, and the recovery appended is the one
//! [`Recovery::run`](super::Recovery::run) appends.

use super::changes::{notes, Changes, EarlierCut};
use super::prepare::prepare;
use super::progress::Progress;
use super::repair::{append_recovery, repair};
use super::RecoverError;
use crate::classify::{CallReport, End};
use crate::probe::Prober;
use crate::stream::{Classifier, Mode};
use crate::Place;
use events::event::{CallRef, Classification, Recovery};
use events::replay::ReplayError;
use journal::{Backend, Limits, ReadEnd};
use std::path::Path;
use std::sync::Arc;

/// Where the calls of a streamed recovery go, one report at a time.
pub trait ReportSink {
    /// Before the first call: the session's id (`None` for a journal with no session) and
    /// whether a writer holds it.
    fn start(&mut self, session_id: Option<&str>, live: bool) -> std::io::Result<()>;
    /// One call's report, in the order [`analyze`](crate::classify::analyze) lists them.
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

/// Gives the reports nowhere: for a reading that keeps what it needs itself (the first
/// reading of `audit` and `rebuild`).
impl ReportSink for std::io::Sink {
    fn start(&mut self, _session_id: Option<&str>, _live: bool) -> std::io::Result<()> {
        Ok(())
    }
    fn call(&mut self, _report: CallReport) -> std::io::Result<()> {
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
    /// As [`Recovered::earlier_cut`](super::Recovered::earlier_cut).
    pub earlier_cut: Option<EarlierCut>,
    /// As [`Recovered::read_only_because`](super::Recovered::read_only_because).
    pub read_only_because: Option<String>,
    /// The journal holds `session/close`.
    pub closed: bool,
    /// The most calls the classifier held at once.
    pub retained_calls_max: usize,
    /// Records read and applied (a second reading stops after as many).
    pub records: u64,
    /// Questions withdrawn, and the recovery event (appended with `write` when not live), as
    /// [`Analysis`](crate::classify::Analysis) has them.
    pub pending_asks: Vec<CallRef>,
    /// The event that balances the journal; `None` when it is balanced already (or live).
    pub recovery: Option<Recovery>,
    /// Process groups of calls that never settled (none killed by a resume): they may still
    /// run. Not part of stdout: whether they run is the world's state, not the journal's.
    pub processes: Vec<(CallRef, events::event::ProcessStarted)>,
}

impl Streamed {
    /// As [`Recovered::notes`](super::Recovered::notes).
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

/// [`Recovery::stream`](super::Recovery::stream).
pub(super) fn stream(
    place: &Place,
    write: bool,
    progress: &dyn Fn(u64, u64),
    sink: &mut dyn ReportSink,
    workspace: Option<&Path>,
) -> Result<Streamed, RecoverError> {
    let prober = workspace.map(Prober::open).transpose()?.map(Arc::new);
    let backend = place.open()?;
    let classifier = Classifier::probing(false, prober);
    streaming_with(&backend, write, progress, sink, classifier, &mut |_| {}).map(|(s, _)| s)
}

/// [`Recovery::stream_observing`](super::Recovery::stream_observing).
pub(super) fn stream_observing(
    place: &Place,
    write: bool,
    progress: &dyn Fn(u64, u64),
    sink: &mut dyn ReportSink,
    workspace: Option<&Path>,
    mode: Mode,
    observe: &mut dyn FnMut(&mut Classifier),
) -> Result<(Streamed, Classifier), RecoverError> {
    let prober = workspace.map(Prober::open).transpose()?.map(Arc::new);
    let backend = place.open()?;
    let classifier = Classifier::with_mode(false, prober, mode);
    streaming_with(&backend, write, progress, sink, classifier, observe)
}

/// Why a second reading stopped.
#[derive(Debug, thiserror::Error)]
pub enum RereadError {
    /// Reading failed, or the journal is not what the first reading found.
    #[error(transparent)]
    Recover(#[from] RecoverError),
    /// The observer could not write its output.
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
}

/// [`Recovery::reread`](super::Recovery::reread).
pub(super) fn reread(
    place: &Place,
    records: u64,
    mut classifier: Classifier,
    observe: &mut dyn FnMut(&mut Classifier) -> Result<(), RereadError>,
) -> Result<(), RereadError> {
    let label = place.label();
    let dir = label.as_path();
    let backend = place.open()?;
    let replay_error = |e: ReplayError| RecoverError::from_replay(dir, e);
    let mut reader = journal::Reader::open_backend(&backend, Limits::default())
        .map_err(|e| replay_error(e.into()))?;
    let mut read = 0u64;
    while read < records {
        let Some(record) = reader.next_ref() else {
            break;
        };
        let record = record.map_err(|e| replay_error(e.into()))?;
        classifier.apply(record).map_err(replay_error)?;
        read += 1;
        observe(&mut classifier)?;
    }
    if read < records {
        return Err(RecoverError::Changed {
            dir: dir.to_path_buf(),
            what: format!("{read} records of the {records} read before"),
        }
        .into());
    }
    // How the bytes end only shapes the recovery event, which a second reading does not want.
    classifier.finish(&ReadEnd::Clean, 0);
    observe(&mut classifier)
}

/// The streamed recovery, with `classifier` (its liveness set here) observed after every
/// record and after the last.
fn streaming_with(
    backend: &Backend,
    write: bool,
    progress: &dyn Fn(u64, u64),
    sink: &mut dyn ReportSink,
    mut classifier: Classifier,
    observe: &mut dyn FnMut(&mut Classifier),
) -> Result<(Streamed, Classifier), RecoverError> {
    let location = backend.location();
    let dir = Path::new(&location);
    let mut prepared = prepare(backend, write)?;
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
    classifier.set_live(prepared.live);
    let mut records = 0u64;
    let replay_error = |e: ReplayError| RecoverError::from_replay(dir, e);
    let mut reader = journal::Reader::open_backend(backend, Limits::default())
        .map_err(|e| replay_error(e.into()))?;
    let mut progress = Progress::new(backend, progress).map_err(replay_error)?;
    while let Some(record) = reader.next_ref() {
        let record = record.map_err(|e| replay_error(e.into()))?;
        classifier.apply(record).map_err(replay_error)?;
        records += 1;
        for report in classifier.take_ready() {
            out.give(report);
        }
        observe(&mut classifier);
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
    let repaired = repair(backend, &mut prepared, &end)?;
    let finished = classifier.finish(&end, repaired.dropped_bytes);
    for report in classifier.take_ready() {
        out.give(report);
    }
    observe(&mut classifier);
    let appended = append_recovery(
        dir,
        repaired.journal,
        &finished.pending_asks,
        finished.recovery.as_ref(),
    )?;
    let streamed = Streamed {
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
        records,
        pending_asks: finished.pending_asks,
        recovery: finished.recovery,
        processes: finished.processes,
    };
    Ok((streamed, classifier))
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
