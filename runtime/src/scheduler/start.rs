//! The scheduler's start decision: given the calls waiting (in model order, each with its
//! exclusivity and the paths it touches), what is running, `parallel_max` and whether the batch
//! is stopped, which calls start now.
//!
//! Why a pure function over plain data: the rules (pool limit, exclusive barriers, path locks
//! keeping model order) are the scheduler's whole promise about concurrency, and here they can
//! be tested row by row and by property, without a runtime, a journal or a clock.

use crate::event::Resources;

/// A call waiting to start, as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Waiting {
    /// Its index in the batch (its place in model order).
    pub index: usize,
    /// Whether it must run alone: its tool did not say, right before this decision, that the
    /// call is concurrency-safe.
    pub exclusive: bool,
    /// The paths it reads and writes.
    pub resources: Resources,
}

/// What a running call holds.
#[derive(Debug)]
pub(crate) struct Held {
    exclusive: bool,
    resources: Resources,
}

/// What the running calls hold, by their index in the batch (no hashing for a handful of calls).
#[derive(Debug)]
pub(crate) struct HeldSet {
    slots: Vec<Option<Held>>,
    count: usize,
}

impl HeldSet {
    /// An empty pool for a batch of `n` calls.
    pub(crate) fn new(n: usize) -> HeldSet {
        HeldSet {
            slots: (0..n).map(|_| None).collect(),
            count: 0,
        }
    }

    fn insert(&mut self, index: usize, held: Held) {
        if self.slots[index].replace(held).is_none() {
            self.count += 1;
        }
    }

    /// Releases what call `index` held (it settled, or never started after all).
    pub(crate) fn remove(&mut self, index: usize) {
        if self.slots[index].take().is_some() {
            self.count -= 1;
        }
    }

    /// How many calls are running.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether a running call is exclusive (then it is the only one).
    pub(crate) fn any_exclusive(&self) -> bool {
        self.values().any(|h| h.exclusive)
    }

    fn values(&self) -> impl Iterator<Item = &Held> {
        self.slots.iter().flatten()
    }
}

/// Whether two declared paths name overlapping trees: the same path, or one inside the other
/// (a grep of `logs` and a write of `logs/a.txt` touch the same file). `.` and `` are the root.
pub(crate) fn overlap(a: &str, b: &str) -> bool {
    let norm = |p: &str| p.trim_start_matches("./").trim_end_matches('/').to_owned();
    let (a, b) = (norm(a), norm(b));
    if a.is_empty() || a == "." || b.is_empty() || b == "." || a == b {
        return true;
    }
    let inside =
        |x: &str, y: &str| x.len() > y.len() && x.starts_with(y) && x.as_bytes()[y.len()] == b'/';
    inside(&a, &b) || inside(&b, &a)
}

/// Whether two calls may not run side by side: they touch overlapping paths with a write
/// among them.
pub(crate) fn conflicts(a: &Resources, b: &Resources) -> bool {
    let any = |xs: &[String], ys: &[String]| xs.iter().any(|x| ys.iter().any(|y| overlap(x, y)));
    any(&a.writes, &b.writes) || any(&a.writes, &b.reads) || any(&a.reads, &b.writes)
}

/// The calls of `queue` that start now, in model order; each is added to `held`.
///
/// `queue` is the calls waiting to start, in model order. It is consumed lazily and only as
/// far as the decision needs: the scheduler asks each tool about its call (is it
/// concurrency-safe now? which paths?) only when the scan reaches it. The rules, scanning in
/// model order: nothing starts when `stopped`; an exclusive call starts only when nothing runs
/// and no earlier call waits, and nothing after it starts this round (a barrier); a
/// concurrency-safe call starts when no exclusive call runs, the pool has room (fewer than
/// `parallel_max` running, counting this round's starts) and it conflicts with no running call
/// and no earlier waiting call (so calls on one path keep model order while calls on other
/// paths pass them). A full pool ends the scan.
pub(crate) fn starts_now(
    queue: impl IntoIterator<Item = Waiting>,
    held: &mut HeldSet,
    parallel_max: usize,
    stopped: bool,
) -> Vec<Waiting> {
    let mut start = Vec::new();
    if stopped {
        return start;
    }
    let mut waiting: Vec<Resources> = Vec::new();
    // Whether an exclusive call runs: the loop below only adds one to an empty pool and then
    // ends, so this holds for the whole scan (asked once, not once per waiting call).
    let exclusive_running = held.any_exclusive();
    for call in queue {
        if call.exclusive {
            if held.is_empty() && waiting.is_empty() {
                let resources = call.resources.clone();
                held.insert(
                    call.index,
                    Held {
                        exclusive: true,
                        resources,
                    },
                );
                start.push(call);
            }
            break;
        }
        // A call that declares no paths conflicts with nothing: no need to scan.
        let resources = &call.resources;
        let touches = !resources.reads.is_empty() || !resources.writes.is_empty();
        let conflicting = touches
            && (held.values().any(|h| conflicts(resources, &h.resources))
                || waiting.iter().any(|w| conflicts(resources, w)));
        let may_start = !exclusive_running && held.len() < parallel_max && !conflicting;
        if may_start {
            let resources = call.resources.clone();
            held.insert(
                call.index,
                Held {
                    exclusive: false,
                    resources,
                },
            );
            start.push(call);
        } else if held.len() >= parallel_max {
            break;
        } else {
            waiting.push(call.resources);
        }
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paths_overlap_when_one_contains_the_other() {
        assert!(overlap("logs", "logs/a.txt"));
        assert!(overlap("logs/a.txt", "./logs/"));
        assert!(overlap(".", "x/y"));
        assert!(overlap("a", "a"));
        assert!(!overlap("logs", "logs2/a.txt"));
        assert!(!overlap("a/b", "a/c"));
    }

    /// A call from a short spec: `x` exclusive; otherwise safe, with space-separated `r:PATH`
    /// and `w:PATH` (`-` for a safe call that declares no path).
    fn call(index: usize, spec: &str) -> Waiting {
        let mut resources = Resources::default();
        for part in spec.split_whitespace() {
            if let Some(p) = part.strip_prefix("r:") {
                resources.reads.push(p.to_owned());
            } else if let Some(p) = part.strip_prefix("w:") {
                resources.writes.push(p.to_owned());
            }
        }
        Waiting {
            index,
            exclusive: spec == "x",
            resources,
        }
    }

    /// What starts now, by batch index. `running` are the specs of the calls running (batch
    /// indices 0..); `queue` are the waiting calls' specs (batch indices after them).
    struct Input<'a> {
        running: &'a [&'a str],
        queue: &'a [&'a str],
        parallel_max: usize,
        stopped: bool,
    }

    fn check(input: Input<'_>, expected: &[usize]) {
        let n = input.running.len() + input.queue.len();
        let mut held = HeldSet::new(n);
        let mut ahead = input.running.iter().enumerate().map(|(i, s)| call(i, s));
        let _ = starts_now(&mut ahead, &mut held, usize::MAX, false);
        assert_eq!(
            held.len(),
            input.running.len(),
            "the running calls all hold"
        );
        let queue = (input.queue.iter().enumerate()).map(|(i, s)| call(input.running.len() + i, s));
        let started = starts_now(queue, &mut held, input.parallel_max, input.stopped);
        let started: Vec<usize> = started.iter().map(|w| w.index).collect();
        assert_eq!(
            started, expected,
            "running {:?}, queue {:?}, parallel_max {}, stopped {}",
            input.running, input.queue, input.parallel_max, input.stopped
        );
    }

    fn start(running: &'static [&'static str], queue: &'static [&'static str]) -> Input<'static> {
        Input {
            running,
            queue,
            parallel_max: 10,
            stopped: false,
        }
    }

    #[test]
    fn which_calls_start_now() {
        // Safe calls on disjoint paths, or none, start together.
        check(start(&[], &["-", "r:a", "w:b"]), &[0, 1, 2]);
        // The pool limit counts this round's starts and ends the scan.
        let full = Input {
            parallel_max: 2,
            ..start(&[], &["-", "-", "-"])
        };
        check(full, &[0, 1]);
        let one_free = Input {
            parallel_max: 2,
            ..start(&["-"], &["-", "-"])
        };
        check(one_free, &[1]);
        // An exclusive call starts alone, and only when nothing runs or waits before it.
        check(start(&[], &["x", "-"]), &[0]);
        check(start(&["-"], &["x", "-"]), &[]);
        check(start(&[], &["-", "x", "-"]), &[0]);
        // Nothing starts beside a running exclusive call.
        check(start(&["x"], &["-", "r:a"]), &[]);
        // A write waits for a running read of the same tree; a call on another path passes it.
        check(start(&["r:logs"], &["w:logs/a", "r:other"]), &[2]);
        // Two reads of one path run together.
        check(start(&["r:a"], &["r:a"]), &[1]);
        // A later call on a waiting call's path keeps model order, even if it could run now.
        check(start(&["r:a"], &["w:a", "r:a"]), &[]);
        check(start(&["w:a"], &["r:a", "r:b", "w:b"]), &[2]);
        // A safe call with no paths passes waiting ones.
        check(start(&["w:a"], &["r:a", "-"]), &[2]);
        // The root overlaps everything.
        check(start(&["w:."], &["r:x/y", "-"]), &[2]);
        // A stopped batch starts nothing.
        let stopped = Input {
            stopped: true,
            ..start(&[], &["-", "x"])
        };
        check(stopped, &[]);
        // Nothing waiting, nothing starts.
        check(start(&["-"], &[]), &[]);
    }

    #[test]
    fn the_queue_is_read_only_as_far_as_needed() {
        // The scheduler asks a tool about its call only when the scan reaches it: a barrier or
        // a full pool ends the reading.
        let mut asked = 0;
        let queue = ["-", "x", "-", "-"].iter().enumerate().map(|(i, s)| {
            asked += 1;
            call(i, s)
        });
        let started = starts_now(queue, &mut HeldSet::new(4), 10, false);
        assert_eq!(started.len(), 1);
        assert_eq!(asked, 2);
    }

    /// A call of a generated batch: exclusive, or safe with paths from a small tree.
    fn arb_call() -> impl Strategy<Value = (bool, Vec<String>, Vec<String>)> {
        let path = prop::sample::select(vec!["a", "a/b", "b", "c/d", "."]).prop_map(String::from);
        (
            prop::bool::weighted(0.2),
            prop::collection::vec(path.clone(), 0..2),
            prop::collection::vec(path, 0..2),
        )
    }

    proptest! {
        /// Runs a whole batch through the decision, finishing running calls in an order the
        /// test picks, and checks at every start: never more than `parallel_max` running, an
        /// exclusive call never beside another, and model order among conflicting calls (a
        /// call starts only after every earlier call it conflicts with has finished). And the
        /// batch always ends: with nothing running, something starts.
        #[test]
        fn the_decision_keeps_the_pool_the_barriers_and_the_order(
            calls in prop::collection::vec(arb_call(), 0..12),
            parallel_max in 1usize..5,
            finish_picks in prop::collection::vec(any::<prop::sample::Index>(), 24),
        ) {
            let n = calls.len();
            let batch: Vec<Waiting> = calls
                .into_iter()
                .enumerate()
                .map(|(index, (exclusive, reads, writes))| Waiting {
                    index,
                    exclusive,
                    resources: Resources { reads, writes, intents: Vec::new() },
                })
                .collect();
            let mut held = HeldSet::new(n);
            let mut started = vec![false; n];
            let mut finished = vec![false; n];
            let mut running: Vec<usize> = Vec::new();
            let mut picks = finish_picks.iter().cycle();
            while finished.iter().any(|f| !f) {
                let queue = batch.iter().filter(|w| !started[w.index]).cloned();
                let now = starts_now(queue, &mut held, parallel_max, false);
                prop_assert!(
                    !now.is_empty() || !running.is_empty(),
                    "nothing runs and nothing starts: the batch would hang"
                );
                for w in &now {
                    for earlier in &batch[..w.index] {
                        let conflict = earlier.exclusive
                            || w.exclusive
                            || conflicts(&earlier.resources, &w.resources);
                        prop_assert!(
                            !conflict || finished[earlier.index],
                            "call {} started before call {}, which it conflicts with, finished",
                            w.index, earlier.index
                        );
                    }
                    started[w.index] = true;
                    running.push(w.index);
                }
                prop_assert!(running.len() <= parallel_max, "{} running, parallel_max {}", running.len(), parallel_max);
                prop_assert_eq!(held.len(), running.len());
                let exclusive_running = running.iter().any(|&i| batch[i].exclusive);
                prop_assert!(!exclusive_running || running.len() == 1, "an exclusive call beside another: {:?}", running);
                // One running call finishes; which one, the test picks.
                if let Some(pick) = picks.next() {
                    let done = running.remove(pick.index(running.len()));
                    held.remove(done);
                    finished[done] = true;
                }
            }
        }
    }
}
