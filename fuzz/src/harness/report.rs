//! A campaign over a harness's cases: the seeds it ran, which final word each call got how
//! often, and the first violation, shrunk and printed as a transcript.

use super::stop::Stop;
use super::{Harness, UserCase};
use crate::FaultStats;
use proptest::strategy::{BoxedStrategy, ValueTree};
use std::collections::BTreeMap;
use std::time::Instant;

/// Most simplifications a shrink tries.
const SHRINK_STEPS_MAX: u32 = 500;

/// How many cases a campaign runs.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// The first case's seed; the next ones follow it.
    pub first_seed: u64,
    /// Most cases.
    pub cases: u64,
    /// No case begins after this, and a case still running then is stopped (its bodies
    /// cancelled as the user's stop cancels them) and reported as cancelled, not checked.
    pub deadline: Option<Instant>,
}

impl Budget {
    /// `cases` cases from `first_seed`.
    pub fn cases(first_seed: u64, cases: u64) -> Budget {
        Budget {
            first_seed,
            cases,
            deadline: None,
        }
    }
}

/// Where a campaign is, after each case.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Cases run so far.
    pub ran: u64,
    /// The budget's cases.
    pub cases: u64,
    /// Violations found so far (the campaign stops at the first).
    pub violations: u64,
}

/// A violation, shrunk.
#[derive(Debug, Clone)]
pub struct Found {
    /// The seed that drew the case.
    pub seed: u64,
    /// The case, shrunk as far as it keeps failing.
    pub case: UserCase,
    /// What the shrunk case violates.
    pub violations: Vec<String>,
}

/// What a campaign did.
#[derive(Debug, Default)]
pub struct Report {
    /// The first seed.
    pub first_seed: u64,
    /// Cases run to their end and checked (a case cancelled at the deadline is not one).
    pub ran: u64,
    /// The seed of the case the deadline stopped while it ran: it is neither passed nor a
    /// violation, and in no tally.
    pub cancelled: Option<u64>,
    /// Per call (`id (tool)`, in the order first met): each final word's label and how many
    /// cases ended the call with it.
    pub outcomes: Vec<(String, BTreeMap<&'static str, u64>)>,
    /// The first violation, shrunk.
    pub found: Option<Found>,
    /// Worlds whose truth went unchecked (too many calls of undecided outcome), over all cases.
    pub unchecked_worlds: u64,
    /// How the faults the cases drew fared.
    pub faults: FaultStats,
    /// The probe's verdicts on calls of unknown outcome (with [`Harness::probe`]), by verdict.
    pub probe_verdicts: BTreeMap<&'static str, u64>,
}

impl Report {
    /// Cases that broke something: 0 or 1 (the campaign stops at the first).
    pub fn violations(&self) -> u64 {
        u64::from(self.found.is_some())
    }

    /// How many cases ended call `id` with the word labelled `label`.
    pub fn count(&self, id: &str, label: &str) -> u64 {
        self.outcomes
            .iter()
            .filter(|(call, _)| call == id || call.starts_with(&format!("{id} (")))
            .filter_map(|(_, words)| words.get(label))
            .sum()
    }

    fn tally(&mut self, checked: &super::Checked) {
        for call in &checked.calls {
            let key = format!("{} ({})", call.id, call.tool);
            let at = match self.outcomes.iter().position(|(k, _)| *k == key) {
                Some(at) => at,
                None => {
                    self.outcomes.push((key, BTreeMap::new()));
                    self.outcomes.len() - 1
                }
            };
            *self.outcomes[at].1.entry(call.word.label()).or_default() += 1;
        }
        self.unchecked_worlds += checked.unchecked_worlds as u64;
        for (_, verdict) in &checked.probes {
            *self.probe_verdicts.entry(verdict.as_str()).or_default() += 1;
        }
        if let Some(fault) = &checked.fault {
            self.faults.add(fault);
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "first seed {}", self.first_seed)?;
        for (call, words) in &self.outcomes {
            let words: Vec<String> = words.iter().map(|(w, n)| format!("{w} {n}")).collect();
            writeln!(f, "{call}: {}", words.join(", "))?;
        }
        if self.unchecked_worlds > 0 {
            writeln!(
                f,
                "truth unchecked in {} worlds (too many calls of undecided outcome)",
                self.unchecked_worlds
            )?;
        }
        if !self.probe_verdicts.is_empty() {
            let verdicts: Vec<String> = self
                .probe_verdicts
                .iter()
                .map(|(v, n)| format!("{v} {n}"))
                .collect();
            writeln!(
                f,
                "probe verdicts on unknown calls: {}",
                verdicts.join(", ")
            )?;
        }
        if !self.faults.kinds.is_empty() {
            writeln!(f, "{}", self.faults)?;
        }
        if let Some(found) = &self.found {
            writeln!(
                f,
                "violation at seed {} (replay that case alone: `--seed {} --cases 1`, or \
                 `Budget::cases({}, 1)` in a harness of your own)",
                found.seed, found.seed, found.seed
            )?;
            for v in &found.violations {
                writeln!(f, "  {v}")?;
            }
            writeln!(f, "shrunk case, as a transcript:")?;
            write!(f, "{}", found.case.transcript())?;
            writeln!(f, "and its plan:")?;
            write!(f, "{}", found.case.plan())?;
        }
        if let Some(seed) = self.cancelled {
            writeln!(
                f,
                "cancelled at the deadline: 1 case (seed {seed}), stopped while it ran; neither \
                 passed nor a violation, and not counted below"
            )?;
        }
        write!(f, "cases: {}, violations: {}", self.ran, self.violations())
    }
}

/// Runs the campaign [`Harness::campaign_with`] describes.
pub(crate) fn campaign(
    harness: &Harness,
    cases: &BoxedStrategy<UserCase>,
    budget: Budget,
    progress: &mut dyn FnMut(Progress),
) -> Report {
    let mut report = Report {
        first_seed: budget.first_seed,
        ..Report::default()
    };
    let (stop, _watch) = Stop::at(budget.deadline);
    while report.ran < budget.cases && !stop.is_stopped() {
        let seed = budget.first_seed.wrapping_add(report.ran);
        let checked = match crate::tree_of(cases, seed) {
            Ok(tree) => check_guarded(harness, &tree.current(), &stop),
            Err(why) => Some(not_run(format!("the case strategy drew no case: {why}"))),
        };
        let Some(checked) = checked else {
            report.cancelled = Some(seed);
            break;
        };
        report.ran += 1;
        report.tally(&checked);
        if !checked.passed() {
            report.found = Some(shrink(harness, cases, seed, checked.violations, &stop));
        }
        progress(Progress {
            ran: report.ran,
            cases: budget.cases,
            violations: report.violations(),
        });
        if report.found.is_some() {
            break;
        }
    }
    report
}

/// [`Harness::check`] until `stop` (`None`: it stopped the case), with a panic of the user's
/// code (an observer, a tool's setup) reported as what broke the case rather than ending the
/// campaign.
fn check_guarded(harness: &Harness, case: &UserCase, stop: &Stop) -> Option<super::Checked> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::verdict::check(harness, case, stop)
    })) {
        Ok(checked) => checked,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            Some(not_run(format!("the case could not be run: {why}")))
        }
    }
}

/// A case the harness could not run, saying why.
fn not_run(why: String) -> super::Checked {
    super::Checked {
        violations: vec![format!("harness: {why}")],
        calls: Vec::new(),
        fault: None,
        unchecked_worlds: 0,
        probes: Vec::new(),
    }
}

/// Shrinks the failing case of `seed` (which broke `violations`) as far as it keeps failing,
/// and no further than `stop` (the deadline): a case it stops ends the shrinking.
fn shrink(
    harness: &Harness,
    cases: &BoxedStrategy<UserCase>,
    seed: u64,
    mut violations: Vec<String>,
    stop: &Stop,
) -> Found {
    // It drew a case a moment ago, from the same seed.
    let Ok(mut tree) = crate::tree_of(cases, seed) else {
        return Found {
            seed,
            case: UserCase {
                turns: Vec::new(),
                parallel_max: 1,
                fault: crate::case::StorageFault::None,
                resume: super::Resume::No,
            },
            violations,
        };
    };
    // The smallest case seen failing: the tree's current one after a `complicate` is not
    // always checked.
    let mut smallest = tree.current();
    let mut steps = 0;
    while steps < SHRINK_STEPS_MAX && !stop.is_stopped() && tree.simplify() {
        steps += 1;
        let Some(checked) = check_guarded(harness, &tree.current(), stop) else {
            break;
        };
        if checked.passed() {
            if !tree.complicate() {
                break;
            }
        } else {
            violations = checked.violations;
            smallest = tree.current();
        }
    }
    Found {
        seed,
        case: smallest,
        violations,
    }
}
