//! A campaign on several threads, giving what the campaign on one gives for the same seeds: the
//! cases are taken in seed order, their verdicts merged in seed order, and the first violation
//! reported is the lowest seed's, so it replays alone (`--seed S --cases 1`) as it would have.

use crate::{check_case, shrink, tree_for_seed, Campaign, Coverage, FaultStats, Mutant, Verdict};
use proptest::strategy::ValueTree;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// [`crate::campaign`] on `threads` threads (one: that campaign itself). The same seeds give
/// the same cases run, statistics and first violation as on one thread; only a deadline may
/// cut them at another case.
pub fn campaign_on(
    threads: usize,
    first_seed: u64,
    cases: u64,
    deadline: Instant,
    mutant: Option<Mutant>,
) -> Campaign {
    if threads <= 1 {
        return crate::campaign(first_seed, cases, deadline, mutant);
    }
    // The next case to take, and the lowest case found violating so far (none is taken past
    // it: its verdict ends the campaign).
    let (next, first_violating) = (AtomicU64::new(0), AtomicU64::new(u64::MAX));
    let (sender, verdicts) = mpsc::channel::<(u64, Verdict)>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let sender = sender.clone();
            let (next, first_violating) = (&next, &first_violating);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cases
                    || i > first_violating.load(Ordering::Relaxed)
                    || Instant::now() >= deadline
                {
                    return;
                }
                let seed = first_seed.wrapping_add(i);
                let verdict = check_case(&tree_for_seed(seed).current(), mutant);
                if !verdict.violations.is_empty() {
                    first_violating.fetch_min(i, Ordering::Relaxed);
                }
                if sender.send((i, verdict)).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        merge(first_seed, verdicts.into_iter(), mutant)
    })
}

/// Takes the verdicts of cases 0, 1, … (as they come, in any order) in case order, until the
/// first that violates or the last; the statistics are those of the cases taken.
pub(crate) fn merge(
    first_seed: u64,
    verdicts: impl Iterator<Item = (u64, Verdict)>,
    mutant: Option<Mutant>,
) -> Campaign {
    let (mut ran, mut faults, mut coverage) = (0, FaultStats::default(), Coverage::default());
    let mut waiting: BTreeMap<u64, Verdict> = BTreeMap::new();
    for (i, verdict) in verdicts {
        waiting.insert(i, verdict);
        while let Some(verdict) = waiting.remove(&ran) {
            let seed = first_seed.wrapping_add(ran);
            ran += 1;
            if let Some(fault) = &verdict.fault {
                faults.add(fault);
            }
            coverage.add(&verdict.coverage);
            if !verdict.violations.is_empty() {
                return Campaign {
                    ran,
                    found: shrink(seed, mutant),
                    faults,
                    coverage,
                };
            }
        }
    }
    Campaign {
        ran,
        found: None,
        faults,
        coverage,
    }
}
