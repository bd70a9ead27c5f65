//! `fuzz`: a deterministic simulation of whole sessions (turns, batches, cancels, panics, asks,
//! spill and observer failures) on an in-memory disk that fails or loses power where the case
//! says, with tools that replace files of a simulated world (kept apart from the journal, as a
//! real disk is), followed by recovery, a probe of that world, a resume (which may run
//! interrupted calls again) and a check of every invariant of DESIGN.md §7.
//!
//! Cases come from proptest strategies; a seed picks one, so a violation is replayed from its
//! seed, and proptest shrinks it to a small case.
//!
//! ```
//! let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
//! let campaign = tooljournal_fuzz::campaign(1234, 5, deadline, None);
//! assert_eq!(campaign.ran, 5);
//! assert!(campaign.found.is_none(), "{:?}", campaign.found);
//! ```

#![warn(missing_docs)]

// Rooms are private; the harness a user drives and the campaign's parts are re-exported below.
mod attempts;
mod bounds;
mod case;
mod check;
mod counted;
mod evidence;
mod harness;
mod locked;
mod parallel;
mod parts;
mod person;
mod questions;
mod read;
mod rerun;
mod resume;
mod sim;
mod streaming;
mod tools;
mod world;

// The user harness: a tool of the user's, fuzzed through whole sessions.
pub use harness::{
    turns_of, written_paths, Approval, Budget, Call, CallView, CancelAt, Clock, Crash, FileState,
    Files, Found as HarnessFound, Harness, Observer, Outcome, Progress, Report, Resume, Step,
    ToolFactory, Tools, Turn, UserCase, Word, WorkspaceWorld, WorldId, FILE_TOOLS,
};
// The campaign's parts: a case, its simulated run, and the check of every invariant.
pub use case::{Case, StorageFault};
pub use check::check as check_run;
pub use parallel::campaign_on;
pub use sim::run as simulate;

/// The property-testing crate the cases come from, re-exported for composing strategies.
pub use proptest;
/// The runtime the harness drives, re-exported so a harness's tools need no other dependency.
pub use runtime;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) use locked::Locked;

/// Keeps the simulated tools' and observers' deliberate panics off the screen; every other
/// panic (an assertion, a bug) is reported as usual.
pub fn quiet_simulated_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if !message.starts_with("simulated") {
            default(info);
        }
    }));
}

/// The case a seed stands for, as a tree proptest can shrink.
#[allow(clippy::expect_used)]
pub fn tree_for_seed(seed: u64) -> impl ValueTree<Value = case::Case> {
    // The campaign's strategy has no filter: it never rejects.
    tree_of(&case::case(), seed).expect("the case strategy never rejects")
}

/// The value of `strategy` a seed stands for, as a tree proptest can shrink: the same seed
/// always gives the same tree. `Err` when the strategy rejected every value it drew (a filter
/// that too few values pass).
pub fn tree_of<S: Strategy>(strategy: &S, seed: u64) -> Result<S::Tree, String> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    strategy
        .new_tree(&mut runner)
        .map_err(|why| why.to_string())
}

/// A deliberately broken build of the runtime, of recovery or of the simulation's tools that
/// the campaign must catch. Each one acts only where the test-only `mutant` features are
/// compiled in (`fuzz`'s dev-dependencies turn them on) and only in a run that asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// `started` written after the body ran.
    StartedAfterBody,
    /// `started` appended before the body but not synced (it rides on a later sync).
    StartedNotSynced,
    /// On cancel, `settled` (ABORTED) written without waiting for the body to stop.
    SettledBeforeEffect,
    /// Recovery classifies a call whose last event is `started` as TOOL_NOT_STARTED.
    StartedReadAsNotStarted,
    /// Results that are ready together committed last first.
    CommitOutOfOrder,
    /// A call journaled `cancelled-before-start` whose body runs anyway.
    CancelledCallRuns,
    /// The simulated tool writes other bytes than the evidence its `started` records (a probe
    /// then cannot say `applied` for a file its body wrote).
    WritesOtherBytes,
    /// A resume runs again a call of unknown outcome of the tool that is not idempotent (the
    /// resume registers it as retry-safe, as a wrong re-run choice would treat it).
    RerunsUnknownNonIdempotent,
    /// The simulated tool also writes a file it did not declare, outside the sandbox bound its
    /// `started` records (as a process escaping its sandbox would).
    WritesOutsideBound,
    /// From its second attempt on, a call's body is handed a key with the attempt number mixed
    /// in, as a runtime deriving the key per attempt would hand it (a second attempt then
    /// deduplicates against nothing). The `started` records keep the call's key: replay checks
    /// those against their derivation. Planted where the simulated tools take their context,
    /// the runtime having no failpoint for it.
    KeyPerAttempt,
    /// A resume asked to `--rerun not-started` chooses and journals its re-runs as
    /// `--rerun safe` would (the policy lost on its way to the runtime): the runtime's own
    /// check, which reads the policy the journal names, has nothing to refuse, and an unknown
    /// call of the idempotent tool runs again. Only the campaign's check of the policy asked
    /// for can catch it.
    RerunsUnknownUnderNotStarted,
}

impl Mutant {
    /// Every mutant, in the order the campaign runs them.
    pub const ALL: [Mutant; 11] = [
        Mutant::StartedAfterBody,
        Mutant::StartedNotSynced,
        Mutant::SettledBeforeEffect,
        Mutant::StartedReadAsNotStarted,
        Mutant::CommitOutOfOrder,
        Mutant::CancelledCallRuns,
        Mutant::WritesOtherBytes,
        Mutant::RerunsUnknownNonIdempotent,
        Mutant::WritesOutsideBound,
        Mutant::KeyPerAttempt,
        Mutant::RerunsUnknownUnderNotStarted,
    ];

    /// A short description of the bug the mutant plants, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::StartedAfterBody => "started written after the body",
            Mutant::StartedNotSynced => "started appended but not synced before the body",
            Mutant::SettledBeforeEffect => "settled before the tool's effect completes",
            Mutant::StartedReadAsNotStarted => "recovery reads a started call as not started",
            Mutant::CommitOutOfOrder => "a commit out of model order",
            Mutant::CancelledCallRuns => "a cancelled-before-start call that runs anyway",
            Mutant::WritesOtherBytes => "a tool writes other bytes than its evidence records",
            Mutant::RerunsUnknownNonIdempotent => {
                "a resume runs again an unknown call of a tool that is not idempotent"
            }
            Mutant::WritesOutsideBound => "a tool writes a file outside its sandbox bound",
            Mutant::KeyPerAttempt => "a second attempt's body is given a key mixing in its attempt",
            Mutant::RerunsUnknownUnderNotStarted => {
                "a resume under --rerun not-started runs again a call of unknown outcome"
            }
        }
    }

    /// The runtime failpoint that turns it on (`None`: it is recovery's or the simulation's).
    pub fn failpoint(self) -> Option<&'static str> {
        match self {
            Mutant::StartedAfterBody => Some("mutant.started_after_body"),
            Mutant::StartedNotSynced => Some("mutant.started_not_synced"),
            Mutant::SettledBeforeEffect => Some("mutant.settled_before_effect"),
            Mutant::StartedReadAsNotStarted => None,
            Mutant::CommitOutOfOrder => Some("mutant.commit_out_of_order"),
            Mutant::CancelledCallRuns => Some("mutant.cancelled_call_runs"),
            Mutant::WritesOtherBytes
            | Mutant::RerunsUnknownNonIdempotent
            | Mutant::WritesOutsideBound
            | Mutant::KeyPerAttempt
            | Mutant::RerunsUnknownUnderNotStarted => None,
        }
    }

    /// Whether the simulation itself plants it (its tools, its resume), not the runtime or
    /// recovery.
    pub fn simulated(self) -> bool {
        matches!(
            self,
            Mutant::WritesOtherBytes
                | Mutant::RerunsUnknownNonIdempotent
                | Mutant::WritesOutsideBound
                | Mutant::KeyPerAttempt
                | Mutant::RerunsUnknownUnderNotStarted
        )
    }

    /// Whether this build can run it at all (its crate's `mutant` feature is on).
    pub fn compiled(self) -> bool {
        match self.failpoint() {
            Some(_) => runtime::MUTANTS_COMPILED,
            None if self.simulated() => cfg!(feature = "mutant"),
            None => recover::MUTANTS_COMPILED,
        }
    }
}

/// What one case gave.
#[derive(Debug)]
pub struct Verdict {
    /// The invariants the run broke, one message each; empty: the case passed.
    pub violations: Vec<String>,
    /// The fault the case drew and whether it fired; `None` when the case drew none.
    pub fault: Option<sim::FaultReport>,
    /// What the case's probe and re-run checks met.
    pub coverage: Coverage,
}

/// Runs one case (with `mutant`, if any) and checks it.
pub fn check_case(case: &case::Case, mutant: Option<Mutant>) -> Verdict {
    let run = sim::run(case, mutant);
    // Recovery's mutant acts on this thread while the checks recover.
    #[cfg(feature = "mutant")]
    let _recovery_mutant = (mutant == Some(Mutant::StartedReadAsNotStarted))
        .then(|| recover::enable_mutant(recover::STARTED_AS_NOT_STARTED));
    let mut coverage = Coverage::default();
    Verdict {
        violations: check::check_covering(case, &run, mutant, &mut coverage),
        fault: run.fault,
        coverage,
    }
}

/// What the probe and re-run checks met: a check that never meets its case checks nothing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// Probe verdicts given to calls of unknown outcome, by verdict.
    pub verdicts: BTreeMap<&'static str, u64>,
    /// Probed calls whose file the case changed behind the journal's back.
    pub changed_back: u64,
    /// Resumes that re-ran under a policy with a turn open.
    pub rerun_resumes: u64,
    /// Calls run again that had never started.
    pub rerun_not_started: u64,
    /// Calls run again whose outcome was unknown (of the idempotent tool).
    pub rerun_unknown: u64,
    /// Calls of unknown outcome of the tool that is not idempotent, in a re-running resume's
    /// interrupted step (each must not run again).
    pub kept_unknown: u64,
    /// Writes of the world by a call, each held to the bound its call journaled.
    pub bounded_writes: u64,
    /// Calls a probe ruled out as writers of a file it found changed, each held to the world's
    /// history.
    pub ruled_out: u64,
    /// Attempts the runtime made again within a session after a retryable failure, each held
    /// to the call's one key.
    pub retries: u64,
}

impl Coverage {
    /// Adds another case's coverage.
    pub fn add(&mut self, other: &Coverage) {
        for (verdict, n) in &other.verdicts {
            *self.verdicts.entry(verdict).or_default() += n;
        }
        self.changed_back += other.changed_back;
        self.rerun_resumes += other.rerun_resumes;
        self.rerun_not_started += other.rerun_not_started;
        self.rerun_unknown += other.rerun_unknown;
        self.kept_unknown += other.kept_unknown;
        self.bounded_writes += other.bounded_writes;
        self.ruled_out += other.ruled_out;
        self.retries += other.retries;
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "probe verdicts:")?;
        for (verdict, n) in &self.verdicts {
            write!(f, " {verdict} {n}")?;
        }
        write!(
            f,
            " (files changed back: {}; calls ruled out as writers of a changed file: {})\n\
             re-running resumes: {}; run again: {} never started, {} of unknown outcome; unknown \
             calls of the tool that is not idempotent kept: {}\nwrites held to their call's \
             bound: {}; attempts made again after a retryable failure: {}",
            self.changed_back,
            self.ruled_out,
            self.rerun_resumes,
            self.rerun_not_started,
            self.rerun_unknown,
            self.kept_unknown,
            self.bounded_writes,
            self.retries
        )
    }
}

/// A violation, shrunk.
#[derive(Debug)]
pub struct Found {
    /// The seed that generated the case.
    pub seed: u64,
    /// The case, shrunk as far as it keeps failing.
    pub case: case::Case,
    /// What the shrunk case violates.
    pub violations: Vec<String>,
}

/// Shrinks a failing case as far as it keeps failing.
pub fn shrink(seed: u64, mutant: Option<Mutant>) -> Option<Found> {
    let mut tree = tree_for_seed(seed);
    let mut violations = check_case(&tree.current(), mutant).violations;
    if violations.is_empty() {
        return None;
    }
    let mut steps = 0;
    while steps < 500 && tree.simplify() {
        steps += 1;
        let v = check_case(&tree.current(), mutant).violations;
        if v.is_empty() {
            if !tree.complicate() {
                break;
            }
        } else {
            violations = v;
        }
    }
    Some(Found {
        seed,
        case: tree.current(),
        violations,
    })
}

/// How the faults a campaign drew fared.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Per fault kind: cases that drew it, and cases where it fired.
    pub kinds: BTreeMap<&'static str, (u64, u64)>,
    /// The (fault kind, last event appended before it fired) pairs met.
    pub pairs: BTreeSet<(&'static str, String)>,
    /// The (fault kind, first event not yet durable when it fired) pairs met.
    pub at_risk: BTreeSet<(&'static str, String)>,
}

impl FaultStats {
    /// Counts one case's fault: drawn, and if it fired, fired and the events around it.
    pub fn add(&mut self, fault: &sim::FaultReport) {
        let entry = self.kinds.entry(fault.kind).or_default();
        entry.0 += 1;
        if fault.fired {
            entry.1 += 1;
            self.pairs.insert((fault.kind, fault.event_before.clone()));
            self.at_risk
                .insert((fault.kind, fault.first_at_risk.clone()));
        }
    }

    /// The share of drawn faults that fired, per kind.
    pub fn fire_rates(&self) -> Vec<(&'static str, f64)> {
        self.kinds
            .iter()
            .map(|(k, &(drawn, fired))| (*k, fired as f64 / drawn.max(1) as f64))
            .collect()
    }
}

impl std::fmt::Display for FaultStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (kind, &(drawn, fired)) in &self.kinds {
            writeln!(
                f,
                "fault {kind}: drawn {drawn}, fired {fired} ({:.1} %)",
                100.0 * fired as f64 / drawn.max(1) as f64
            )?;
        }
        write!(
            f,
            "fault × event before it: {} distinct pairs:",
            self.pairs.len()
        )?;
        for (kind, event) in &self.pairs {
            write!(f, " {kind}×{event}")?;
        }
        write!(
            f,
            "\nfault × first event not yet durable: {} distinct pairs:",
            self.at_risk.len()
        )?;
        for (kind, event) in &self.at_risk {
            write!(f, " {kind}×{event}")?;
        }
        Ok(())
    }
}

/// What a campaign did.
#[derive(Debug)]
pub struct Campaign {
    /// Cases run.
    pub ran: u64,
    /// The first violation, shrunk.
    pub found: Option<Found>,
    /// How the faults the cases drew fared.
    pub faults: FaultStats,
    /// What the probe and re-run checks met, over all cases.
    pub coverage: Coverage,
}

/// Runs cases for seeds `first_seed`, `first_seed + 1`, … until `cases` ran or `deadline`
/// passed; stops at the first violation (shrunk).
pub fn campaign(
    first_seed: u64,
    cases: u64,
    deadline: std::time::Instant,
    mutant: Option<Mutant>,
) -> Campaign {
    // One case at a time, each checked only when the one before passed (the iterator is lazy).
    let verdicts = (0..cases)
        .take_while(|_| std::time::Instant::now() < deadline)
        .map(|i| {
            (
                i,
                check_case(&tree_for_seed(first_seed.wrapping_add(i)).current(), mutant),
            )
        });
    parallel::merge(first_seed, verdicts, mutant)
}
