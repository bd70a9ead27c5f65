//! One sync for many journals: when several journals of the process on one file system want to
//! be durable at once, a thread makes all of them durable with one `syncfs`.
//!
//! Why: a sync per journal costs the kernel a device flush each, and the runtime a thread
//! hand-off each. 64 sessions, each syncing its own journal, measured 17,000 calls/s against
//! 55,000 fdatasyncs/s by 64 raw threads, both cores busy in the kernel (`bench many-loop`);
//! one thread appending to 64 files and calling `syncfs` once per round made 97,000 appends/s
//! durable. A group of journals (one per file system, [`Group`]) has two threads: each takes
//! every request waiting, calls `syncfs` once, and answers them all.
//!
//! What keeps it truthful (DESIGN.md I30):
//! - Only ext2/3/4 share (`storage/fs.rs` says why), on Linux 5.8 or later (before, `syncfs`
//!   reported no error).
//! - Only a write that changes no metadata shares: an overwrite of blocks whose allocation and
//!   size the journal's own fdatasync made durable (`FileIo::data_only`, the preallocated
//!   zeros). A write that grows the file syncs on its own, since `syncfs` on a journal-less
//!   ext4 writes inodes after its device flush.
//! - A journal's leader writes its bytes before it asks, and the thread takes the request only
//!   after, so the `syncfs` that answers starts after the bytes were written.
//! - A `syncfs` that fails makes nothing durable: every journal in the batch is handed back and
//!   syncs on its own, and its own fdatasync tells what happened to its pages.
//! - After a `syncfs` that succeeds, each journal checks its own file
//!   ([`crate::storage::WriteFile::check_written`]): a write-back of that file that failed is
//!   reported there, and poisons the journal as a failed fdatasync would.
//! - Only then does the journal's durable seq move, to what its leader had written.
//!
//! When not:
//! - A journal syncs on its own when nothing else in the process is syncing (a lone session
//!   keeps the lowest latency).
//! - When its own syncs are faster: a group times both ways and takes the faster (`pace.rs`).
//!   A slow device flush favours many fdatasyncs in flight; a file system with much dirty data
//!   of others (a build beside the sessions) makes a `syncfs` wait for all of it. The kernel's
//!   dirty count cannot tell beforehand: it is machine-wide, and counts a whole large folio of
//!   the block device's cache for one dirty inode (64 sessions showed 40 to 60 MB "dirty"
//!   here).

use super::lead::Leader;
use super::pace::{Pace, Way};
use crate::error::JournalError;
use crate::storage::FileSystem;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Threads per group: while one waits for its `syncfs`, the next batch's starts (64 sessions
/// measured 56,500 and 72,100 calls/s with one, 70,200 and 70,400 with two, 70,400 and 77,500
/// with four: two keep the overlap without a thread per core).
const SYNC_THREADS: usize = 2;
/// A group's thread ends after this long without a request (a later one starts it again).
const IDLE_EXIT: Duration = Duration::from_secs(30);

/// Every group of the process, one per file system (few: a linear search is enough).
static GROUPS: Mutex<Vec<Arc<Group>>> = Mutex::new(Vec::new());

/// Syncs of journals on real disks in flight in the process: inline, on the blocking pool or
/// waiting for a group. A journal shares only when another is syncing.
static SYNCING: AtomicUsize = AtomicUsize::new(0);

/// Counts a sync in flight while held.
pub(super) struct Syncing(());

impl Syncing {
    /// Counts this sync; returns it with whether another sync was in flight already.
    pub(super) fn enter() -> (Syncing, bool) {
        let others = SYNCING.fetch_add(1, Ordering::AcqRel);
        (Syncing(()), others > 0)
    }
}

impl Drop for Syncing {
    fn drop(&mut self) {
        SYNCING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the process's shared syncs did so far (for benchmarks and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharedSyncStats {
    /// `syncfs` calls made by groups' threads.
    pub syncfs: u64,
    /// Journal syncs answered by one of them (a batch of 10 counts 10).
    pub journals_synced: u64,
    /// Journal syncs handed back to sync on their own (a failed `syncfs`, sharing given up
    /// while they waited, a file that cannot check its write-back).
    pub handed_back: u64,
    /// Journal syncs that were their own fdatasync from the start: alone in the process, a
    /// journal that cannot share, a write that changed the file's size or blocks, or a group
    /// whose own syncs are faster now.
    pub alone: u64,
}

static STATS_SYNCFS: AtomicU64 = AtomicU64::new(0);
static STATS_SYNCED: AtomicU64 = AtomicU64::new(0);
static STATS_HANDED_BACK: AtomicU64 = AtomicU64::new(0);
pub(super) static STATS_ALONE: AtomicU64 = AtomicU64::new(0);

/// What the process's shared syncs did so far.
pub fn shared_sync_stats() -> SharedSyncStats {
    SharedSyncStats {
        syncfs: STATS_SYNCFS.load(Ordering::Acquire),
        journals_synced: STATS_SYNCED.load(Ordering::Acquire),
        handed_back: STATS_HANDED_BACK.load(Ordering::Acquire),
        alone: STATS_ALONE.load(Ordering::Acquire),
    }
}

/// The journals of one file system that share their syncs, and the threads that sync them.
pub(super) struct Group {
    fs: Arc<dyn FileSystem>,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// A thread could not start, or stopped on a panic: nobody asks this group again.
    broken: AtomicBool,
    /// Which way the group's journals sync now, and the timings that chose it.
    pace: Mutex<Pace>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("fs", &self.fs).finish()
    }
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Request>,
    /// The group's threads running now, at most [`SYNC_THREADS`].
    threads: usize,
}

/// One journal's leader asking to be made durable through `through_seq`, already written.
struct Request {
    leader: Leader,
    through_seq: u64,
    reply: tokio::sync::oneshot::Sender<Reply>,
}

/// The group's answer to one request.
pub(super) enum Reply {
    /// Durable through the seq asked for.
    Durable,
    /// The journal's own write-back failed: it is poisoned.
    Failed(JournalError),
    /// Not synced: the leader comes back to sync on its own.
    OnItsOwn(Leader),
}

impl Group {
    /// The group of `fs`'s file system, made on first use.
    pub(super) fn of(fs: Arc<dyn FileSystem>) -> Arc<Group> {
        let mut groups = super::lock(&GROUPS);
        if let Some(group) = groups.iter().find(|g| g.fs.id() == fs.id()) {
            return group.clone();
        }
        let group = Arc::new(Group {
            fs,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            broken: AtomicBool::new(false),
            pace: Mutex::new(Pace::new(Instant::now())),
        });
        groups.push(group.clone());
        group
    }

    /// Whether the group can be asked.
    pub(super) fn usable(&self) -> bool {
        !self.broken.load(Ordering::Acquire)
    }

    /// The way a journal of the group that finds others syncing syncs now; the sync is timed
    /// until the returned [`Timed`] is dropped.
    pub(super) fn ask(self: &Arc<Group>) -> Timed {
        let asked = Instant::now();
        let way = super::lock(&self.pace).ask(asked);
        Timed {
            group: self.clone(),
            way,
            asked,
            durable: false,
        }
    }

    /// Asks the group to make the leader's journal durable through `through_seq` (written
    /// already). `None`: the group's thread is gone and took the leader with it (the journal's
    /// lead is released, nothing was published): the caller leads again.
    pub(super) async fn sync(self: &Arc<Group>, leader: Leader, through_seq: u64) -> Option<Reply> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        {
            let mut queue = super::lock(&self.queue);
            queue.waiting.push(Request {
                leader,
                through_seq,
                reply,
            });
            if queue.threads < SYNC_THREADS {
                if let Err(request) = self.start_thread(&mut queue) {
                    drop(queue);
                    STATS_HANDED_BACK.fetch_add(1, Ordering::AcqRel);
                    return Some(Reply::OnItsOwn(request.leader));
                }
            } else if queue.waiting.len() == 1 {
                // Threads wait only while the queue is empty.
                self.wake.notify_one();
            }
        }
        answer.await.ok()
    }

    /// Starts the group's thread; on failure the group is broken and the request just queued
    /// comes back.
    fn start_thread(self: &Arc<Group>, queue: &mut Queue) -> Result<(), Request> {
        let group = self.clone();
        let spawned = std::thread::Builder::new()
            .name("tooljournal-sync".into())
            .spawn(move || group.run());
        match spawned {
            Ok(_) => {
                queue.threads += 1;
                Ok(())
            }
            Err(_) => {
                self.broken.store(true, Ordering::Release);
                // Nobody else can have queued: the queue lock was held since the push.
                match queue.waiting.pop() {
                    Some(request) => Err(request),
                    None => Ok(()),
                }
            }
        }
    }

    /// The group's thread: batches until idle for [`IDLE_EXIT`].
    fn run(self: Arc<Group>) {
        // A panic leaves the group broken and drops the requests it held: their leaders are
        // released and their callers lead again, on their own.
        let _broken_on_panic = BrokenOnPanic(&self);
        while let Some(batch) = self.next_batch() {
            self.answer(batch);
        }
    }

    /// Waits for requests and takes them all; `None` when idle for too long (the thread ends).
    fn next_batch(&self) -> Option<Vec<Request>> {
        let mut queue = super::lock(&self.queue);
        loop {
            if !queue.waiting.is_empty() {
                return Some(std::mem::take(&mut queue.waiting));
            }
            let (q, timeout) = self
                .wake
                .wait_timeout(queue, IDLE_EXIT)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            queue = q;
            if timeout.timed_out() && queue.waiting.is_empty() {
                queue.threads -= 1;
                return None;
            }
        }
    }

    /// One `syncfs` for the whole batch, then each journal's own check; or the batch handed
    /// back.
    fn answer(&self, batch: Vec<Request>) {
        // Asked before sharing was given up: handed back rather than a `syncfs` known slow.
        // A statement of its own: the guard is dropped before the `syncfs` locks again.
        let hand_back = super::lock(&self.pace).hands_back(Instant::now());
        let synced = !hand_back && {
            STATS_SYNCFS.fetch_add(1, Ordering::AcqRel);
            let began = Instant::now();
            let synced = self.fs.sync_all().is_ok();
            let ended = Instant::now();
            super::lock(&self.pace).syncfs_took(ended - began, ended);
            synced
        };
        for request in batch {
            let reply = if synced {
                match request
                    .leader
                    .shared
                    .finish_shared_sync(request.through_seq)
                {
                    Ok(true) => Reply::Durable,
                    Ok(false) => Reply::OnItsOwn(request.leader),
                    Err(e) => Reply::Failed(e),
                }
            } else {
                Reply::OnItsOwn(request.leader)
            };
            match &reply {
                Reply::Durable => STATS_SYNCED.fetch_add(1, Ordering::AcqRel),
                Reply::OnItsOwn(_) => STATS_HANDED_BACK.fetch_add(1, Ordering::AcqRel),
                Reply::Failed(_) => 0,
            };
            // A caller gone (its future dropped) drops the reply, and the leader with it.
            let _ = request.reply.send(reply);
        }
    }
}

/// One sync asked of a group's way, timed until dropped (also when its future is: the group's
/// trial then stops waiting for it).
pub(super) struct Timed {
    group: Arc<Group>,
    pub(super) way: Way,
    asked: Instant,
    /// Set once the journal is durable: only such a sync is timed.
    pub(super) durable: bool,
}

impl Drop for Timed {
    fn drop(&mut self) {
        let ended = Instant::now();
        let latency = self.durable.then(|| ended - self.asked);
        super::lock(&self.group.pace).ended(self.way, self.asked, latency, ended);
    }
}

struct BrokenOnPanic<'a>(&'a Group);

impl Drop for BrokenOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.broken.store(true, Ordering::Release);
            super::lock(&self.0.queue).threads -= 1;
        }
    }
}
