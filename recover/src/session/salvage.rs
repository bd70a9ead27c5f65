//! Reading a corrupt journal anyway (`--salvage`): the damage is passed over and named exactly,
//! and nothing is written, so that the evidence stays as it was.

use super::changes::unrecorded_cut;
use super::error::{io_failed, journal_failed};
use super::prepare::liveness;
use super::{RecoverError, Recovered};
use crate::classify::analyze_probing;
use crate::probe::Prober;
use crate::Place;
use events::event::{CallRef, Record};
use journal::{Limits, ReadEnd};
use std::path::Path;

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

impl Salvage {
    /// Whether anything was really passed over: a skipped byte range or record. A torn tail is
    /// not (it ends the journal, as without `--salvage`).
    pub fn passed_over(&self) -> bool {
        !self.skipped.is_empty() || !self.skipped_events.is_empty()
    }
}

/// [`Recovery::salvage`](super::Recovery::salvage).
pub(super) fn salvage(place: &Place, workspace: Option<&Path>) -> Result<Recovered, RecoverError> {
    let label = place.label();
    let dir = label.as_path();
    let prober = workspace.map(Prober::open).transpose()?;
    let backend = place.open()?;
    let (live, read_only_because) = liveness(&backend);
    let mut reader = journal::Reader::open_salvaging_backend(&backend, Limits::default())
        .map_err(|e| journal_failed(dir, e))?;
    let mut replayer = events::replay::Replayer::new();
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
    let earlier_cut = match (&end, backend.files()) {
        (ReadEnd::Clean, Some(storage)) if !live => {
            unrecorded_cut(storage.as_ref()).map_err(|e| io_failed(dir, e))?
        }
        _ => None,
    };
    let dropped_bytes = earlier_cut.as_ref().map_or(0, |c| c.dropped_bytes);
    let analysis = analyze_probing(
        replayer.finish(),
        &end,
        dropped_bytes,
        live,
        prober.as_ref(),
    );
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
