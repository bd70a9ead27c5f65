//! Who writes and syncs for everyone waiting: the leader of a group commit, and where it syncs.
//!
//! Why a room of its own: the rest of the writer is about bytes; this is about threads. One
//! leader per journal at a time (`lead.rs`). A leader alone in the
//! process syncs on its own worker thread (`InlineSync`). A leader that finds other syncs in
//! flight syncs the way its file system's group says (`pace`): it writes its bytes and asks
//! the group for a shared `syncfs` (`shared_sync`), or syncs on its own; it times either, for
//! the group to compare. Where its journal cannot share, it syncs on the blocking pool, so the
//! syncs in flight are not bounded by the runtime's workers.

use super::lead::Leader;
use super::pace::Way;
use super::shared_sync::{Reply, Syncing, STATS_ALONE};
use super::{lock, Shared};
use crate::error::JournalError;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

impl Leader {
    /// Makes everything appended so far durable, for everyone waiting. `None`: the lead was
    /// lost with a shared sync's thread, nothing was published, and the caller leads again.
    pub(super) async fn sync(self, shared: &Arc<Shared>) -> Option<Result<(), JournalError>> {
        if !shared.backend.blocks() {
            return Some(shared.flush(true));
        }
        let (_syncing, others) = Syncing::enter();
        match &shared.sync_group {
            Some(group) if others && group.usable() => {
                let mut timed = group.ask();
                let synced = match timed.way {
                    Way::Shared => self.sync_shared(shared, group).await,
                    Way::Own => Some(self.sync_alone(shared).await),
                };
                timed.durable = matches!(synced, Some(Ok(())));
                synced
            }
            _ => Some(self.sync_alone(shared).await),
        }
    }

    /// Writes everything pending, then asks the group for a `syncfs` that covers it.
    async fn sync_shared(
        self,
        shared: &Arc<Shared>,
        group: &Arc<super::Group>,
    ) -> Option<Result<(), JournalError>> {
        let through_seq = match shared.write_through(false) {
            Ok((seq, true)) => seq,
            // A size or a block changed: the metadata needs this journal's own fdatasync.
            Ok((_, false)) => return Some(self.sync_alone(shared).await),
            Err(e) => return Some(Err(e)),
        };
        match group.sync(self, through_seq).await? {
            Reply::Durable => Some(Ok(())),
            Reply::Failed(e) => Some(Err(e)),
            Reply::OnItsOwn(leader) => Some(leader.sync_on_blocking_pool().await),
        }
    }

    /// This journal's own fdatasync, on this thread or the blocking pool.
    async fn sync_alone(self, shared: &Arc<Shared>) -> Result<(), JournalError> {
        STATS_ALONE.fetch_add(1, Ordering::Relaxed);
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            // On a single thread, a blocking sync would stall every other task for its length.
            Ok(tokio::runtime::RuntimeFlavor::CurrentThread) => self.sync_on_blocking_pool().await,
            // Elsewhere one leader at a time (in the process) syncs on its own worker thread: a
            // handoff costs thread wake-ups on every sync, and one session's syncs never
            // overlap. Other leaders that cannot share go to the blocking pool, so the syncs in
            // flight are not bounded by the runtime's workers.
            _ => match InlineSync::try_take() {
                Some(_inline) => shared.flush(true),
                None => self.sync_on_blocking_pool().await,
            },
        }
    }

    /// Writes and syncs on the blocking pool; the leader travels with the work, so the next
    /// one may lead when it is done whether or not this future is still polled.
    async fn sync_on_blocking_pool(self) -> Result<(), JournalError> {
        let shared = self.shared.clone();
        let leader = self;
        match tokio::task::spawn_blocking(move || leader.shared.flush(true)).await {
            Ok(result) => result,
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(join) => Err(JournalError::Io {
                location: shared.backend.location(),
                op: "sync",
                file: lock(&shared.io).file_name(),
                source: io::Error::other(join.to_string()),
            }),
        }
    }
}

/// Whether a leader is syncing on a runtime worker thread, process-wide.
static INLINE_SYNC: AtomicBool = AtomicBool::new(false);

/// The right to sync on the current worker thread, held by at most one leader in the process;
/// dropping it (also on a panic) gives it back.
struct InlineSync;

impl InlineSync {
    fn try_take() -> Option<InlineSync> {
        INLINE_SYNC
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| InlineSync)
    }
}

impl Drop for InlineSync {
    fn drop(&mut self) {
        INLINE_SYNC.store(false, Ordering::Release);
    }
}
