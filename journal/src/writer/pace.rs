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
//! ([`TRIAL`], longer until [`SAMPLES_MIN`] syncs were asked, at most [`TRIAL_MAX`]). Every
//! sync a leader makes while others are syncing is timed from asking to durable (what a session
//! waits for). The trial is judged once every sync asked in it has ended: a trial cut off when
//! its time is up would count only the syncs that were quick, and keep a way because its slow
//! syncs had not finished (measured: 256 sessions sent 50,000 to 60,000 of 500,000 syncs the
//! slower way, at 60,800 and 70,200 calls/s against 77,700 to 92,800). The trial's way is kept only when its mean latency is clearly lower
//! ([`KEEP_TRIAL_BELOW`]) than the stretch's way both just before it (the stretch's last one or
//! two [`WINDOW`]s) and just after it (a [`TRIAL`] of the stretch's way again, while the trial's
//! last syncs end): sessions come and go, and a load that changed during the trial would
//! otherwise be credited to the way tried.
//! Sharing is the way a group starts with, and the way it takes when the stretch or the trial
//! timed too few syncs to compare. A `syncfs` of [`SLOW_SYNCFS`] or longer turns sharing off
//! at once, for [`BACK_OFF`].
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
/// How long a trial in which fewer than [`SAMPLES_MIN`] syncs were asked goes on at most.
pub(super) const TRIAL_MAX: Duration = Duration::from_millis(250);
/// How long a judgement waits for the trial's last syncs (one lost: its future dropped).
pub(super) const JUDGING_MAX: Duration = Duration::from_secs(1);
/// A stretch's syncs are tallied by windows this long; the last one or two are the yardstick.
pub(super) const WINDOW: Duration = Duration::from_millis(100);
/// Fewer syncs than this in a stretch's yardstick or a trial compare nothing: sharing is taken.
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

/// Syncs timed.
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

    fn plus(self, other: Tally) -> Tally {
        Tally {
            syncs: self.syncs + other.syncs,
            total_ns: self.total_ns + other.total_ns,
        }
    }

    /// Whether this tally's mean is below `KEEP_TRIAL_BELOW` of `other`'s.
    fn clearly_below(&self, other: &Tally) -> bool {
        let (num, den) = KEEP_TRIAL_BELOW;
        // mean(self) < num/den × mean(other), without dividing.
        self.total_ns * u128::from(other.syncs) * den
            < other.total_ns * u128::from(self.syncs) * num
    }
}

/// Where the group is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The way runs; its syncs are tallied by windows.
    Stretch,
    /// The other way is tried for new syncs.
    Trial,
    /// The stretch's way is back for new syncs, timed for the comparison after; the trial's
    /// last syncs are awaited.
    Judging,
}

/// The syncs of a trial.
#[derive(Clone, Copy, Debug, Default)]
struct Tried {
    asked: u64,
    ended: u64,
    timed: Tally,
}

/// The group's way now, and what was measured of each.
#[derive(Debug)]
pub(super) struct Pace {
    /// The stretch's way (new syncs take the other during a trial).
    way: Way,
    phase: Phase,
    /// When the phase ends: a stretch at its length; a trial at its length once enough syncs
    /// were asked, else at `limit`; a judgement when the trial's syncs have ended, else at
    /// `limit`.
    until: Instant,
    limit: Instant,
    /// The stretch's syncs in the window that ends at `window_until`, and in the one before
    /// (empty if no sync came in it).
    window: Tally,
    window_until: Instant,
    earlier: Tally,
    /// In a trial or judgement: the stretch's syncs before it and after it (in the judgement),
    /// and its own; when the trial ended.
    before: Tally,
    after: Tally,
    tried: Tried,
    trial_ended: Instant,
}

impl Pace {
    /// Sharing, for a first stretch from `now`.
    pub(super) fn new(now: Instant) -> Pace {
        Pace {
            way: Way::Shared,
            phase: Phase::Stretch,
            until: now + STRETCH,
            limit: now + STRETCH,
            window: Tally::default(),
            window_until: now + WINDOW,
            earlier: Tally::default(),
            before: Tally::default(),
            after: Tally::default(),
            tried: Tried::default(),
            trial_ended: now,
        }
    }

    /// The way a sync asked at `now` takes; its end must be reported to [`Pace::ended`].
    pub(super) fn ask(&mut self, now: Instant) -> Way {
        let way = self.current(now);
        if self.phase == Phase::Trial {
            self.tried.asked += 1;
        }
        way
    }

    /// The way a sync asked at `now` would take (nothing counted).
    pub(super) fn current(&mut self, now: Instant) -> Way {
        self.advance(now);
        match self.phase {
            Phase::Trial => self.way.other(),
            Phase::Stretch | Phase::Judging => self.way,
        }
    }

    /// Whether a group's thread should hand back the requests it took at `now` rather than
    /// call `syncfs`: only in a stretch of own syncs (after a slow `syncfs`, or once own syncs
    /// were found faster). Requests queued while sharing is tried, or while a trial of own syncs
    /// runs beside a stretch of sharing, are synced: they are the syncs being timed.
    pub(super) fn hands_back(&mut self, now: Instant) -> bool {
        self.advance(now);
        self.phase == Phase::Stretch && self.way == Way::Own
    }

    /// A sync asked `way` at `asked` ended at `now`; `latency` from asking to durable, `None`
    /// if it failed or was given up (it ends a trial's wait, but times nothing).
    pub(super) fn ended(
        &mut self,
        way: Way,
        asked: Instant,
        latency: Option<Duration>,
        now: Instant,
    ) {
        match self.phase {
            Phase::Trial | Phase::Judging if way != self.way => {
                self.tried.ended += 1;
                if let Some(latency) = latency {
                    self.tried.timed.add(latency);
                }
            }
            // One asked before the trial ended is the stretch's, not the time after.
            Phase::Judging if asked >= self.trial_ended => {
                if let Some(latency) = latency {
                    self.after.add(latency);
                }
            }
            Phase::Stretch if way == self.way => {
                if let Some(latency) = latency {
                    self.roll_windows(now);
                    self.window.add(latency);
                }
            }
            // The stretch's way during a trial, or a way left before the stretch began.
            _ => {}
        }
        self.advance(now);
    }

    /// A `syncfs` took `elapsed`, ending at `now`: a slow one turns sharing off for
    /// [`BACK_OFF`] (a trial under way is dropped), then sharing is tried again.
    pub(super) fn syncfs_took(&mut self, elapsed: Duration, now: Instant) {
        if elapsed >= SLOW_SYNCFS {
            self.way = Way::Own;
            self.stretch(now, BACK_OFF);
        }
    }

    /// Moves to the next phase when the current one is over.
    fn advance(&mut self, now: Instant) {
        match self.phase {
            Phase::Stretch if now >= self.until => {
                self.roll_windows(now);
                self.before = self.earlier.plus(self.window);
                self.after = Tally::default();
                self.tried = Tried::default();
                self.phase = Phase::Trial;
                self.until = now + TRIAL;
                self.limit = now + TRIAL_MAX;
            }
            Phase::Trial
                if now >= self.until && (self.tried.asked >= SAMPLES_MIN || now >= self.limit) =>
            {
                self.phase = Phase::Judging;
                self.trial_ended = now;
                self.limit = now + JUDGING_MAX;
                self.advance(now);
            }
            Phase::Judging if self.judged(now) => {
                let (tried, before, after) = (self.tried.timed, self.before, self.after);
                let counted = [tried, before, after]
                    .iter()
                    .all(|t| t.syncs >= SAMPLES_MIN);
                let faster = tried.clearly_below(&before) && tried.clearly_below(&after);
                self.way = match (counted, faster) {
                    (false, _) => Way::Shared,
                    (true, true) => self.way.other(),
                    (true, false) => self.way,
                };
                self.stretch(now, STRETCH);
            }
            _ => {}
        }
    }

    /// Whether the judgement can be made at `now`: every sync of the trial ended, and the
    /// stretch's way timed after it for a [`TRIAL`] and [`SAMPLES_MIN`] syncs; or waited for
    /// [`JUDGING_MAX`].
    fn judged(&self, now: Instant) -> bool {
        let tried_ended = self.tried.ended >= self.tried.asked;
        let after_timed = now >= self.trial_ended + TRIAL && self.after.syncs >= SAMPLES_MIN;
        (tried_ended && after_timed) || now >= self.limit
    }

    /// A stretch of `self.way` from `now`, `length` long, with fresh windows.
    fn stretch(&mut self, now: Instant, length: Duration) {
        self.phase = Phase::Stretch;
        self.until = now + length;
        self.window = Tally::default();
        self.earlier = Tally::default();
        self.window_until = now + WINDOW;
    }

    /// Starts a new window if the current one ended by `now` (the last one kept only if it
    /// ended less than a window ago).
    fn roll_windows(&mut self, now: Instant) {
        if now < self.window_until {
            return;
        }
        let last_is_recent = now < self.window_until + WINDOW;
        self.earlier = if last_is_recent {
            self.window
        } else {
            Tally::default()
        };
        self.window = Tally::default();
        self.window_until = now + WINDOW;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Runs `pace` from `at` for `length` with `syncs` syncs asked evenly over it, each taking
    /// `shared` or `own` by its way; returns the time after.
    fn run(
        pace: &mut Pace,
        at: Instant,
        length: Duration,
        syncs: u32,
        shared: Duration,
        own: Duration,
    ) -> Instant {
        for i in 0..syncs {
            let asked = at + length * i / syncs;
            let way = pace.ask(asked);
            let latency = if way == Way::Shared { shared } else { own };
            // Ended before the next is asked (time runs one way), its latency as given.
            let next = at + length * (i + 1) / syncs;
            pace.ended(way, asked, Some(latency), (asked + latency).min(next));
        }
        at + length
    }

    /// A stretch, a trial and the time after it, with steady latencies; returns the time after.
    fn cycle(pace: &mut Pace, at: Instant, shared: Duration, own: Duration) -> Instant {
        let t = run(pace, at, STRETCH, 1000, shared, own);
        let t = run(pace, t, TRIAL, 20, shared, own);
        run(pace, t, TRIAL + 10 * MS, 20, shared, own)
    }

    #[test]
    fn a_group_starts_sharing_and_tries_its_own_syncs_after_a_stretch() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        assert_eq!(pace.current(t0), Way::Shared);
        assert_eq!(pace.current(t0 + STRETCH - MS), Way::Shared);
        assert_eq!(pace.current(t0 + STRETCH), Way::Own);
        assert_eq!(pace.current(t0 + STRETCH + TRIAL - MS), Way::Own);
        // A trial in which too few syncs were asked goes on, up to its longest.
        assert_eq!(pace.current(t0 + STRETCH + TRIAL), Way::Own);
        assert_eq!(pace.current(t0 + STRETCH + TRIAL_MAX - MS), Way::Own);
        assert_eq!(pace.current(t0 + STRETCH + TRIAL_MAX), Way::Shared);
    }

    #[test]
    fn own_syncs_clearly_faster_in_the_trial_are_kept_for_a_stretch() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = cycle(&mut pace, t0, 5 * MS, 3 * MS);
        assert_eq!(pace.current(t), Way::Own);
        // Then sharing is tried again, and (still slower) given up after its trial.
        let t = cycle(&mut pace, t, 5 * MS, 3 * MS);
        assert_eq!(pace.current(t), Way::Own);
        // Until the disk changes.
        let t = cycle(&mut pace, t, 2 * MS, 3 * MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn a_trial_not_clearly_faster_goes_back_to_the_stretch_s_way() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        // Own syncs 10 % faster: inside the margin, so sharing goes on.
        let t = cycle(&mut pace, t0, MS, 900 * MS / 1000);
        assert_eq!(pace.current(t), Way::Shared);
        // Own syncs slower: sharing goes on.
        let t = cycle(&mut pace, t, MS, 3 * MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn a_trial_is_judged_once_every_sync_asked_in_it_has_ended() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 1000, 2 * MS, MS);
        // Ten own syncs asked: eight end quickly, two are slow and still running at the end.
        for _ in 0..10 {
            assert_eq!(pace.ask(t), Way::Own);
        }
        for _ in 0..8 {
            pace.ended(Way::Own, t, Some(MS / 2), t + MS);
        }
        // The trial's time is up: new syncs share again, timed; the judgement waits (the eight
        // alone would have kept own syncs).
        let after = run(&mut pace, t + TRIAL, 50 * MS, 20, 2 * MS, MS);
        assert_eq!(pace.current(after), Way::Shared);
        pace.ended(Way::Own, t, Some(100 * MS), t + 100 * MS);
        assert_eq!(pace.current(t + 100 * MS), Way::Shared);
        pace.ended(Way::Own, t, Some(100 * MS), t + 100 * MS);
        // All ten counted: a mean of 20.4 ms against 2 ms. Sharing stays for a stretch.
        assert_eq!(pace.current(t + 100 * MS + STRETCH - MS), Way::Shared);
        assert_eq!(
            pace.current(t + 100 * MS + STRETCH),
            Way::Own,
            "the next trial"
        );
    }

    #[test]
    fn a_trial_whose_syncs_never_all_end_is_judged_after_the_longest_wait() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 1000, 5 * MS, MS);
        for _ in 0..9 {
            assert_eq!(pace.ask(t), Way::Own);
        }
        for _ in 0..8 {
            pace.ended(Way::Own, t, Some(MS), t + MS);
        }
        // One own sync was dropped and never ends.
        let t = run(&mut pace, t + TRIAL, 50 * MS, 20, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Shared);
        let judged = t - 50 * MS + JUDGING_MAX;
        assert_eq!(pace.current(judged - MS), Way::Shared);
        assert_eq!(
            pace.current(judged),
            Way::Own,
            "eight syncs of 1 ms against 5 ms"
        );
    }

    #[test]
    fn a_trial_is_compared_with_the_stretch_just_before_it() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        // Shared syncs took 10 ms under an earlier load, 1 ms in the last 200 ms.
        let t = run(&mut pace, t0, STRETCH - 2 * WINDOW, 1000, 10 * MS, MS);
        let t = run(&mut pace, t, 2 * WINDOW, 100, MS, MS);
        // Own syncs of 3 ms: faster than the stretch's mean, slower than its end.
        let t = run(&mut pace, t, TRIAL, 20, MS, 3 * MS);
        let t = run(&mut pace, t, TRIAL + 10 * MS, 20, 10 * MS, MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn a_trial_is_compared_with_the_stretch_s_way_just_after_it_too() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        // Shared syncs of 10 ms, then the load falls as the trial begins: own syncs of 2 ms,
        // shared ones of 1 ms after it. The trial is not credited with the fall.
        let t = run(&mut pace, t0, STRETCH, 1000, 10 * MS, MS);
        let t = run(&mut pace, t, TRIAL, 20, MS, 2 * MS);
        let t = run(&mut pace, t, TRIAL + 10 * MS, 20, MS, 2 * MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn a_stretch_whose_syncs_stopped_a_while_ago_is_no_yardstick() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        // Slow shared syncs, then none for the stretch's last 300 ms.
        let t = run(&mut pace, t0, STRETCH - 3 * WINDOW, 1000, 10 * MS, MS);
        let t = t + 3 * WINDOW;
        let t = run(&mut pace, t, TRIAL, 20, 10 * MS, MS);
        let t = run(&mut pace, t, TRIAL + 10 * MS, 20, 10 * MS, MS);
        assert_eq!(
            pace.current(t),
            Way::Shared,
            "compared with nothing: sharing"
        );
    }

    #[test]
    fn too_few_syncs_in_a_trial_take_sharing() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 1000, 5 * MS, MS);
        let t = run(
            &mut pace,
            t,
            TRIAL_MAX,
            (SAMPLES_MIN - 1) as u32,
            5 * MS,
            MS,
        );
        let t = run(&mut pace, t, JUDGING_MAX, 1000, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn a_stretch_with_too_few_syncs_is_no_yardstick() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, (SAMPLES_MIN - 1) as u32, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL, 100, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL + 10 * MS, 20, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn a_trial_without_syncs_after_it_is_judged_after_the_longest_wait_and_takes_sharing() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 1000, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL, 100, 5 * MS, MS);
        assert_eq!(pace.current(t + JUDGING_MAX - MS), Way::Shared);
        assert_eq!(pace.current(t + JUDGING_MAX), Way::Shared);
        assert_eq!(pace.current(t + JUDGING_MAX + STRETCH - MS), Way::Shared);
    }

    #[test]
    fn own_syncs_after_a_slow_syncfs_with_sharing_tried_too_little_take_sharing() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        pace.syncfs_took(SLOW_SYNCFS, t0);
        let t = run(&mut pace, t0, BACK_OFF, 1000, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL_MAX, 3, 5 * MS, MS);
        let t = run(&mut pace, t, JUDGING_MAX, 1000, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Shared);
    }

    #[test]
    fn syncs_of_the_stretch_s_way_during_a_trial_count_for_nothing() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        let t = run(&mut pace, t0, STRETCH, 1000, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Own);
        // Shared syncs asked before the trial end during it: not the trial's.
        for _ in 0..100 {
            pace.ended(Way::Shared, t - 99 * MS, Some(100 * MS), t + MS);
        }
        assert_eq!(pace.current(t + TRIAL), Way::Own, "no own sync asked yet");
        assert_eq!(pace.current(t + TRIAL_MAX), Way::Shared, "nor ever");
    }

    #[test]
    fn requests_are_handed_back_only_in_a_stretch_of_own_syncs() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        assert!(!pace.hands_back(t0), "sharing");
        // A trial of own syncs beside sharing: what is queued was asked to share.
        let t = run(&mut pace, t0, STRETCH, 1000, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Own);
        assert!(!pace.hands_back(t));
        let t = run(&mut pace, t, TRIAL, 20, 5 * MS, MS);
        let t = run(&mut pace, t, TRIAL + 10 * MS, 20, 5 * MS, MS);
        // Own syncs kept: a stretch of them.
        assert_eq!(pace.current(t), Way::Own);
        assert!(pace.hands_back(t));
        // Sharing tried again: its queued requests are the trial's, and its judgement's.
        let t = run(&mut pace, t, STRETCH, 1000, 5 * MS, MS);
        assert_eq!(pace.current(t), Way::Shared);
        assert!(!pace.hands_back(t));
        let t = run(&mut pace, t, TRIAL, 20, 5 * MS, MS);
        assert!(!pace.hands_back(t), "judging a trial of sharing");
    }

    #[test]
    fn a_slow_syncfs_turns_sharing_off_for_the_back_off_then_sharing_is_tried() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        pace.syncfs_took(SLOW_SYNCFS - MS, t0);
        assert_eq!(pace.current(t0), Way::Shared);
        pace.syncfs_took(SLOW_SYNCFS, t0);
        assert_eq!(pace.current(t0), Way::Own);
        assert!(
            pace.hands_back(t0),
            "a syncfs known slow is not called again"
        );
        assert_eq!(pace.current(t0 + BACK_OFF - MS), Way::Own);
        assert_eq!(pace.current(t0 + BACK_OFF), Way::Shared);
    }
}
