//! Journals written event by event through the runtime's `EventLog` on a simulated disk, and
//! replayed: what the replay rules accept, and what they refuse.

use journal::{Journal, Limits, Options, ReadEnd, SimStorage};
use std::sync::Arc;
use tooljournal_runtime::event::Event;
use tooljournal_runtime::replay::{replay_storage, ReplayError, SessionReplay};
use tooljournal_runtime::EventLog;
use tooljournal_runtime::ManualClock;

/// Writes `events` through an `EventLog`, then replays the journal.
pub fn replay(events: &[Event]) -> Result<SessionReplay, ReplayError> {
    let storage = SimStorage::new();
    let (journal, _) =
        Journal::open(Arc::new(storage.clone()), Options::default()).expect("journal");
    let journal = Arc::new(journal);
    let log = EventLog::new(
        journal.clone(),
        Arc::new(ManualClock::new(1_700_000_000_000)),
    );
    let mut last = 0;
    for event in events {
        last = log.append(event).expect("append");
    }
    journal.sync_through_blocking(last).expect("sync");
    let (replay, end) = replay_storage(Arc::new(storage), Limits::default())?;
    assert!(matches!(end, ReadEnd::Clean), "{end:?}");
    Ok(replay)
}

/// The refusal of a journal: (seq, kind, message) of the record that does not fit.
pub fn refused(events: &[Event]) -> (u64, &'static str, String) {
    match replay(events) {
        Err(e) => {
            let ReplayError::Inconsistent {
                seq, kind, message, ..
            } = &e
            else {
                panic!("expected an inconsistent journal, got {e}");
            };
            assert!(
                e.to_string().contains(&format!("record seq {seq} ")),
                "the error names its record: {e}"
            );
            (*seq, *kind, message.clone())
        }
        Ok(replay) => panic!("expected an inconsistent journal, read {replay:?}"),
    }
}
