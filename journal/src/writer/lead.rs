//! The lead of a journal's group commit: at most one caller at a time writes and syncs for
//! everyone waiting (a flag, so no await holds a lock), and the lead is given up when its
//! [`Leader`] is dropped, wherever that happens: in the caller, on the blocking pool, or on a
//! shared sync's thread. Where a leader syncs is `leader.rs`; a room of its own so that the
//! shared syncs' group (`shared_sync.rs`) can carry a lead without knowing how it syncs.

use super::{lock, Shared};
use std::sync::Arc;

/// Who leads, and how many blocking callers wait for the leader.
#[derive(Default)]
pub(super) struct Leading {
    pub(super) now: bool,
    pub(super) blocked: usize,
}

/// The one caller that writes and syncs for everyone waiting; dropping it lets the next one
/// lead. It owns its share of the journal so that it can travel into the blocking pool: the
/// release then happens when the sync is done, whether or not the awaiting future is polled.
pub(super) struct Leader {
    pub(super) shared: Arc<Shared>,
}

impl Leader {
    pub(super) fn try_new(shared: &Arc<Shared>) -> Option<Leader> {
        let mut leading = lock(&shared.leading);
        if leading.now {
            return None;
        }
        leading.now = true;
        Some(Leader {
            shared: shared.clone(),
        })
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        let blocked = {
            let mut leading = lock(&self.shared.leading);
            leading.now = false;
            leading.blocked > 0
        };
        // A condvar's notify is a syscall even with no one waiting: only when someone is.
        if blocked {
            self.shared.leader_done.notify_all();
        }
        self.shared.leader_released.notify_waiters();
    }
}
