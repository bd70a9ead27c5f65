//! Taking a record store's journal from a writer whose lease is still live (`resume --steal`).
//!
//! Why it is its own act and not a builder setting: the builder never steals, so a session is
//! only ever taken from a live holder on purpose; and the steal is journaled (`writer/stolen`)
//! and synced the moment it happens, before recovery or a resume read anything, so the journal
//! says where the old holder's writes end. The old holder is fenced off by the store (its next
//! append fails and its journal stops, I10); this writer then gives the lease up, and the
//! resume takes the journal again as usual.

use crate::event::{Event, Record, WriterStolen};
use crate::eventlog::Clock;
use journal::{Backend, Holder, Journal, JournalError, Options, Takeover};

/// Takes the journal in `backend` from its live holder, if it has one: fences it off, appends
/// and syncs `writer/stolen`, and gives the lease up. Returns the holder it was taken from;
/// `None` when nobody held it (nothing is appended then). A directory's lock cannot be stolen:
/// for segment files this is [`Journal::lock_backend`]'s refusal of a live writer.
pub fn steal(backend: &Backend, clock: &dyn Clock) -> Result<Option<Holder>, JournalError> {
    let lock = Journal::lock_backend(backend, Takeover::Steal)?;
    let stolen = lock.stolen_from().cloned();
    let epoch = lock.epoch();
    let (journal, _) = lock.open(Options::few_records())?;
    if let (Some(holder), Some(epoch)) = (&stolen, epoch) {
        let seq = journal.append(&Record {
            at_ms: clock.now_ms(),
            event: Event::WriterStolen(WriterStolen {
                epoch,
                holder: holder.name.clone(),
                holder_epoch: holder.epoch,
                lease_left_ms: u64::try_from(holder.expires_in_ms).unwrap_or(0),
            }),
        })?;
        journal.sync_through_blocking(seq)?;
    }
    journal.close()?;
    Ok(stolen)
}
