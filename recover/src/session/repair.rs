//! The only writes recovery makes: a torn tail quarantined and cut, then the pending questions
//! withdrawn and the recovery event appended, all under the writer lock and only after the
//! whole journal was read and found not corrupt.

use super::changes::{unrecorded_cut, EarlierCut};
use super::error::{io_failed, journal_failed};
use super::prepare::Prepared;
use super::RecoverError;
use events::clock::{Clock, SystemClock};
use events::event::{CallRef, Event, Record, Recovery};
use journal::{Backend, Journal, JournalError, Options, ReadEnd};
use std::path::Path;

/// What this run did to the bytes once the whole journal was read and found not corrupt.
pub(super) struct Repaired {
    /// Open for the recovery event when this run writes.
    pub(super) journal: Option<Journal>,
    /// Torn bytes dropped and not yet recorded: cut by this run, or by an earlier one.
    pub(super) dropped_bytes: u64,
    pub(super) quarantine_file: Option<String>,
    pub(super) earlier_cut: Option<EarlierCut>,
}

/// Under the lock (when this run writes): quarantines and cuts a torn tail, and finds a cut
/// an earlier run left unrecorded. Called only after the whole journal was read: corruption
/// anywhere has returned before this.
pub(super) fn repair(
    backend: &Backend,
    prepared: &mut Prepared,
    end: &ReadEnd,
) -> Result<Repaired, RecoverError> {
    let location = backend.location();
    let dir = Path::new(&location);
    // A live writer may be between a cut and its next record: what it dropped is its to say.
    // A record store never has a torn tail to cut.
    let earlier_cut = match (end, backend.files()) {
        (ReadEnd::Clean, Some(storage)) if !prepared.live => {
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
        match lock.open(Options::few_records()) {
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
pub(super) fn append_recovery(
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
                        reason: crate::classify::WITHDRAWN_REASON.into(),
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
