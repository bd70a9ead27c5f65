//! Which way a group's journals sync now: one shared `syncfs` per batch, or each its own
//! fdatasync; chosen by measuring both.
//!
//! Why measure: neither way wins everywhere. On this project's disk 64 sessions made 56,500 to
//! 77,500 calls/s sharing and 24,000 on their own, but on a slow device flush (the same disk
//! while others wrote to it) 11,600 to 14,000 sharing against 19,000 to 22,000 on their own:
//! many fdatasyncs in flight overlap their flushes, while a group's `syncfs` runs one after
//! another. And a file system holding much dirty data of others makes every `syncfs` write it.
//!
//! How: a group runs one way for a stretch ([`STRETCH`]), then tries the other for a trial
//! ([`TRIAL`], longer until it timed [`SAMPLES_MIN`] syncs, at most [`TRIAL_MAX`]), timing
//! every sync a leader makes while others are syncing (its latency, from
//! asking to durable: what a session waits for). The trial's way is kept only when its mean
//! latency is clearly lower ([`KEEP_TRIAL_BELOW`]) than the stretch's. Sharing is the way a
//! group starts with, and the way it takes when the stretch or the trial timed too few syncs
//! to compare ([`SAMPLES_MIN`]). A `syncfs` of [`SLOW_SYNCFS`] or longer turns sharing off at
//! once, for [`BACK_OFF`].
//!
//! The choice is about speed only: either way keeps every promise (DESIGN.md I30).

use std::time::{Duration, Instant};

/// A `syncfs` this slow wrote mostly others' data (a disk's flush takes well under this).
pub(super) const SLOW_SYNCFS: Duration = Duration::from_millis(50);
/// After a slow `syncfs`, journals sync on their own this long before sharing is tried again.
pub(super) const BACK_OFF: Duration = Duration::from_secs(1);
/// How long one way runs before the other is tried.
pub(super) const STRETCH: Duration = Duration::from_secs(2);
/// How long the other way is tried at least: 1 % of the time, hundreds of syncs under load.
pub(super) const TRIAL: Duration = Duration::from_millis(20);
/// How long a trial that has not timed [`SAMPLES_MIN`] syncs goes on at most.
pub(super) const TRIAL_MAX: Duration = Duration::from_millis(250);
/// Fewer syncs than this in a stretch or a trial compare nothing: sharing is taken.
pub(super) const SAMPLES_MIN: u64 = 8;
/// The trial's way is kept when its mean latency is below this fraction of the stretch's
/// (numerator, denominator): a clear win, not noise.
pub(super) const KEEP_TRIAL_BELOW: (u128, u128) = (7, 8);

/// A way to sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Way {
    /// One `syncfs` for the batch.
    Shared,
    /// The journal's own fdatasync.
    Own,
}

impl Way {
    fn other(self) -> Way {
        match self {
            Way::Shared => Way::Own,
            Way::Own => Way::Shared,
        }
    }
}

/// Syncs timed in one stretch or trial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    syncs: u64,
    total_ns: u128,
}

impl Tally {
    fn add(&mut self, latency: Duration) {
        self.syncs += 1;
        self.total_ns += latency.as_nanos();
    }

    /// Whether this tally's mean is below `KEEP_TRIAL_BELOW` of `other`'s.
    fn clearly_below(&self, other: &Tally) -> bool {
        let (num, den) = KEEP_TRIAL_BELOW;
        // mean(self) < num/den × mean(other), without dividing.
        self.total_ns * u128::from(other.syncs) * den
            < other.total_ns * u128::from(self.syncs) * num
    }
}

/// The group's way now, and what was measured of each.
#[derive(Debug)]
pub(super) struct Pace {
    way: Way,
    /// Whether `way` is on trial (else it runs a stretch).
    trial: bool,
    /// When the current stretch or trial ends (a trial with too few syncs: at `trial_max`).
    until: Instant,
    trial_max: Instant,
    /// Syncs of `way` timed since it began.
    now: Tally,
    /// While a trial runs: the stretch's syncs it is compared with.
    stretch: Tally,
}

impl Pace {
    /// Sharing, for a first stretch from `now`.
    pub(super) fn new(now: Instant) -> Pace {
        Pace {
            way: Way::Shared,
            trial: false,
            until: now + STRETCH,
            trial_max: now + STRETCH,
            now: Tally::default(),
            stretch: Tally::default(),
        }
    }

    /// The way to sync at `now`.
    pub(super) fn way(&mut self, now: Instant) -> Way {
        let timed_enough = !self.trial || self.now.syncs >= SAMPLES_MIN;
        if now >= self.until && (timed_enough || now >= self.trial_max) {
            self.next(now);
        }
        self.way
    }

    /// A sync made `way` took `latency` (from asking to durable). One of a way no longer
    /// running (asked before a switch) counts for nothing.
    pub(super) fn took(&mut self, way: Way, latency: Duration) {
        if way == self.way {
            self.now.add(latency);
        }
    }

    /// A `syncfs` took `elapsed`, ending at `now`: a slow one turns sharing off for
    /// [`BACK_OFF`], then sharing is tried again.
    pub(super) fn syncfs_took(&mut self, elapsed: Duration, now: Instant) {
        if elapsed >= SLOW_SYNCFS {
            self.way = Way::Own;
            self.trial = false;
            self.until = now + BACK_OFF;
            self.now = Tally::default();
        }
    }

    /// The stretch or trial ended at `now`: a stretch gives way to a trial of the other way; a
    /// trial's way is kept for a stretch only if it was clearly faster.
    fn next(&mut self, now: Instant) {
        if self.trial {
            let tried = std::mem::take(&mut self.now);
            let counted = tried.syncs >= SAMPLES_MIN && self.stretch.syncs >= SAMPLES_MIN;
            self.way = match (counted, tried.clearly_below(&self.stretch)) {
                (false, _) => Way::Shared,
                (true, true) => self.way,
                (true, false) => self.way.other(),
            };
            self.trial = false;
            self.until = now + STRETCH;
        } else {
            self.stretch = std::mem::take(&mut self.now);
            self.way = self.way.other();
            self.trial = true;
            self.until = now + TRIAL;
            self.trial_max = now + TRIAL_MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Runs `pace` from `at` for `length`, timing `syncs` syncs of whatever way it is on at the
    /// start, each taking `shared` or `own`; returns the time after.
    fn run(
        pace: &mut Pace,
        at: Instant,
        length: Duration,
        syncs: u32,
        shared: Duration,
        own: Duration,
    ) -> Instant {
        let way = pace.way(at);
        for _ in 0..syncs {
            pace.took(way, if way == Way::Shared { shared } else { own });
        }
        at + length
    }

    #[test]
    fn a_group_starts_sharing_and_tries_its_own_syncs_after_a_stretch() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        assert_eq!(pace.way(t0), Way::Shared);
        assert_eq!(pace.way(t0 + STRETCH - MS), Way::Shared);
        assert_eq!(pace.way(t0 + STRETCH), Way::Own);
        assert_eq!(pace.way(t0 + STRETCH + TRIAL - MS), Way::Own);
        // A trial that timed too few syncs goes on, up to its longest.
        assert_eq!(pace.way(t0 + STRETCH + TRIAL), Way::Own);
        assert_eq!(pace.way(t0 + STRETCH + TRIAL_MAX - MS), Way::Own);
        assert_eq!(pace.way(t0 + STRETCH + TRIAL_MAX), Way::Shared);
    }

    #[test]
    fn own_syncs_clearly_faster_in_the_trial_are_kept_for_a_stretch() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 100, 5 * MS, 3 * MS);
        let t = run(&mut pace, t, TRIAL, 20, 5 * MS, 3 * MS);
        assert_eq!(pace.way(t), Way::Own);
        assert_eq!(pace.way(t + STRETCH - MS), Way::Own);
        // Then sharing is tried again, and (still slower) given up after its trial.
        let t = run(&mut pace, t, STRETCH, 100, 5 * MS, 3 * MS);
        assert_eq!(pace.way(t), Way::Shared);
        let t = run(&mut pace, t, TRIAL, 20, 5 * MS, 3 * MS);
        assert_eq!(pace.way(t), Way::Own);
    }

    #[test]
    fn a_trial_not_clearly_faster_goes_back_to_the_stretch_s_way() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        // Own syncs 10 % faster: inside the margin, so sharing goes on.
        let t = run(
            &mut pace,
            t0,
            STRETCH,
            100,
            1000 * MS / 1000,
            900 * MS / 1000,
        );
        let t = run(&mut pace, t, TRIAL, 20, MS, 900 * MS / 1000);
        assert_eq!(pace.way(t), Way::Shared);
        // Own syncs slower: sharing goes on.
        let t = run(&mut pace, t, STRETCH, 100, MS, 3 * MS);
        let t = run(&mut pace, t, TRIAL, 20, MS, 3 * MS);
        assert_eq!(pace.way(t), Way::Shared);
    }

    #[test]
    fn too_few_syncs_to_compare_take_sharing() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 100, 5 * MS, MS);
        let t = run(
            &mut pace,
            t,
            TRIAL_MAX,
            (SAMPLES_MIN - 1) as u32,
            5 * MS,
            MS,
        );
        assert_eq!(pace.way(t), Way::Shared);
        // A stretch with too few syncs is no yardstick either.
        let t = run(&mut pace, t, STRETCH, (SAMPLES_MIN - 1) as u32, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL, 100, 5 * MS, MS);
        assert_eq!(pace.way(t), Way::Shared);
        // Nor is a stretch of own syncs after a slow syncfs, with sharing tried too little.
        pace.syncfs_took(SLOW_SYNCFS, t);
        let t = run(&mut pace, t, BACK_OFF, 100, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL_MAX, 3, 5 * MS, MS);
        assert_eq!(pace.way(t), Way::Shared);
    }

    #[test]
    fn syncs_of_a_way_no_longer_running_count_for_nothing() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 100, 5 * MS, MS);
        assert_eq!(pace.way(t), Way::Own);
        // Shared syncs asked before the switch end during the trial: not the trial's.
        for _ in 0..100 {
            pace.took(Way::Shared, 100 * MS);
        }
        assert_eq!(
            pace.way(t + TRIAL),
            Way::Own,
            "the trial timed no own sync yet"
        );
        assert_eq!(pace.way(t + TRIAL_MAX), Way::Shared, "nor ever");
    }

    #[test]
    fn a_slow_syncfs_turns_sharing_off_for_the_back_off_then_sharing_is_tried() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        pace.syncfs_took(SLOW_SYNCFS - MS, t0);
        assert_eq!(pace.way(t0), Way::Shared);
        pace.syncfs_took(SLOW_SYNCFS, t0);
        assert_eq!(pace.way(t0), Way::Own);
        assert_eq!(pace.way(t0 + BACK_OFF - MS), Way::Own);
        assert_eq!(pace.way(t0 + BACK_OFF), Way::Shared);
    }
}
