//! The session's event log: events in, seqs out, over a `journal::Journal`.
//!
//! Why a wrapper: every event gets its timestamp from one [`Clock`] (a fixed clock makes
//! simulated runs byte-identical), and every append and sync goes through one place, so a
//! journal failure stops the whole session at once (DESIGN.md I10).

use crate::error::RuntimeError;
use crate::event::{Event, RecordRef};
use journal::Journal;
use std::sync::Arc;

pub use events::clock::{Clock, SystemClock};

/// Appends events to a journal. Cheap to clone.
#[derive(Clone)]
pub struct EventLog {
    journal: Arc<Journal>,
    clock: Arc<dyn Clock>,
}

impl EventLog {
    /// A log that appends to `journal`, timestamping with `clock`.
    pub fn new(journal: Arc<Journal>, clock: Arc<dyn Clock>) -> EventLog {
        EventLog { journal, clock }
    }

    /// Appends one event; returns its seq. Not durable until a sync covers it.
    pub fn append(&self, event: &Event) -> Result<u64, RuntimeError> {
        let record = RecordRef {
            at_ms: self.clock.now_ms(),
            event,
        };
        Ok(self.journal.append(&record)?)
    }

    /// Resolves once every event up to `seq` is durable.
    pub async fn sync_through(&self, seq: u64) -> Result<(), RuntimeError> {
        Ok(self.journal.sync_through(seq).await?)
    }

    /// Makes everything appended so far durable.
    pub async fn sync_all(&self) -> Result<(), RuntimeError> {
        let last = self.journal.stats().appended_seq;
        if last == 0 {
            return Ok(());
        }
        self.sync_through(last).await
    }

    /// The journal underneath, e.g. to check whether it is poisoned.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system_time_ms() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    #[test]
    fn the_system_clock_reads_the_milliseconds_system_time_reads() {
        for _ in 0..100 {
            let before = system_time_ms();
            let now = SystemClock.now_ms();
            let after = system_time_ms();
            assert!(
                before <= now && now <= after,
                "{before} <= {now} <= {after}"
            );
        }
    }
}
