//! Forged journals: records written as given, and the check that replay refuses one naming the
//! record.

use journal::{Journal, Options, SimStorage};
use std::sync::Arc;
use tooljournal_runtime::event::Record;
use tooljournal_runtime::replay::{replay_storage, ReplayError};

/// A journal holding `records` as they are (seqs from 1, in order).
pub fn journal_of(records: &[Record]) -> SimStorage {
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    for r in records {
        journal.append(r).unwrap();
    }
    journal.close().unwrap();
    storage
}

/// Replay refuses `records` at the one at `index` (seq `index + 1`), of `kind`, saying `what`;
/// returns the refusal's message.
pub fn refused_at(records: &[Record], index: usize, kind: &str, what: &str) -> String {
    assert_eq!(records[index].event.kind(), kind, "the forged record");
    let storage = journal_of(records);
    match replay_storage(Arc::new(storage), journal::Limits::default()) {
        Err(e @ ReplayError::Inconsistent { .. }) => {
            let ReplayError::Inconsistent {
                seq,
                kind: named,
                ref message,
                ..
            } = e
            else {
                unreachable!("matched above")
            };
            assert_eq!(seq, index as u64 + 1, "{e}");
            assert_eq!(named, kind, "{e}");
            assert!(message.contains(what), "{e}: says {what:?}");
            assert!(e.to_string().contains(&format!("record seq {seq}")), "{e}");
            message.clone()
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("replayed a journal where {kind} does not fit"),
    }
}
