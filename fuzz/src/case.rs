//! What a simulated session is made of, and how proptest generates (and shrinks) one.

use proptest::prelude::*;
use runtime::event::{AskAnswer, RerunPolicy};

/// A path a call may read or write: few, so calls collide.
pub(crate) const PATHS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// How a simulated call behaves, or how the model gets it wrong.
pub enum Kind {
    /// Sleeps `duration_ms`, then succeeds (or stops when cancelled).
    Ok,
    /// Fails with TOOL_FAILED after a side effect.
    Fails,
    /// Panics.
    Panics,
    /// Keeps running when cancelled (until its duration is over).
    IgnoresCancel,
    /// Reports progress after its result from a background task.
    LateProgress,
    /// A result large enough to spill.
    Big,
    /// A tool that does not exist.
    Unknown,
    /// Arguments that are not JSON.
    BadJson,
    /// The built-in `ask`: a question to the simulated person, who does what the spec says.
    Ask(AskSpec),
    /// A simulated call (as [`Kind::Ok`]) that a listener asks the person to approve, yes or no:
    /// answered so, or never (`None`: the question expires).
    Approval(Option<AskAnswer>),
    /// A call to one of the user's tools (a case of [`crate::harness`]): the user's body runs;
    /// `asked` when a listener asks the person before it may.
    User {
        /// The person is asked first.
        asked: bool,
        /// It calls the built-in `ask`: its body is the runtime's, its result the person's
        /// answer (or what became of the question).
        question: bool,
    },
}

/// Option labels an `ask` offers, in order: `options` of them.
pub(crate) const OPTION_LABELS: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

/// An `ask` call's question and what the simulated person does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskSpec {
    /// How many options it offers (the first of [`OPTION_LABELS`]); 0: a free-text question.
    pub options: usize,
    /// Several options may be chosen.
    pub multiple: bool,
    /// The person may answer in their own words.
    pub free_text: bool,
    /// Its arguments repeat a label: no question (`SCHEMA_ERROR`), nobody is asked.
    pub malformed: bool,
    /// What the person does.
    pub person: Person,
    /// How long the person takes, in simulated ms (a cancel may land meanwhile).
    pub delay_ms: u64,
}

/// What the simulated person does with a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Person {
    /// Answers as the question allows (an option, two when several may be chosen, and words
    /// when they are allowed); `pick` says which option comes first.
    Answers {
        /// The first option chosen, modulo the options offered.
        pick: usize,
    },
    /// Gives an answer that does not fit (a label the question does not offer).
    AnswersWrongly,
    /// Declines to answer.
    Declines,
    /// Never answers: the session's question timeout expires it.
    Silent,
    /// Says it expired.
    Expires,
    /// Withdraws it (the terminal went away).
    Withdraws,
}

#[derive(Debug, Clone)]
/// One tool call the simulated model sends.
pub struct CallSpec {
    /// How the call behaves.
    pub kind: Kind,
    /// Whether the tool declares the call concurrency-safe (it may overlap others).
    pub parallel: bool,
    /// How long the body runs, in simulated ms (0..40).
    pub duration_ms: u64,
    /// Paths (from [`PATHS`]) the call declares it reads; recorded in its `started`.
    pub reads: Vec<&'static str>,
    /// Paths (from [`PATHS`]) the call declares it writes; recorded in its `started`. The
    /// simulated tool replaces each of these files in the simulated world ([`crate::world`])
    /// when its body succeeds (or fails after a side effect), and records the replacement as
    /// evidence in its `started`.
    pub writes: Vec<&'static str>,
    /// The call is to the simulated tool that declares itself idempotent (`sim_idem`, which a
    /// resume under `--rerun safe` may run again when its outcome is unknown) rather than to
    /// the one that does not (`sim`).
    pub idempotent: bool,
    /// Its first attempts fail retryably (a server briefly out of reach): the runtime runs the
    /// call of a retry-safe tool (`sim_idem`) again at once, up to its attempts; `sim`'s call
    /// ends with the failure. `None`: every attempt goes through.
    pub flaky: Option<Flaky>,
}

/// How a call's first attempts fail, each saying another attempt may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flaky {
    /// How many attempts fail (1 to 3), counted by attempt number: a resume's re-run, whose
    /// attempts come after the crashed run's, fails only if its numbers are still that low.
    /// The runtime makes 3 attempts in a run, so 3 fails every attempt of a first run.
    pub failures: u32,
    /// A failed attempt acts on the world first (a timeout after the write went through).
    pub after_effect: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// When the user stops a step.
pub enum Cancel {
    /// The user stops the step before the model answers: no request, no calls.
    AtStepStart,
    /// The user stops the batch this long after it starts (0: right after the message).
    AfterMs(u64),
}

#[derive(Debug, Clone)]
/// One step of a turn: one model response and the batch of calls it asks for.
pub struct StepSpec {
    /// The calls, in model order (0 to 4; none ends the turn).
    pub calls: Vec<CallSpec>,
    /// The response stops at its length limit (`StopReason::Length`) instead of asking for tools.
    pub truncated: bool,
    /// When the user stops this step; `None`: never.
    pub cancel: Option<Cancel>,
}

/// Where a fault lands among the operations of its kind that the session makes (counted by a
/// dry run of the same case: the simulation is deterministic, so the faulted run makes the same
/// operations up to the fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// At this point of the session, in thousandths of its operations of the fault's kind:
    /// the fault fires.
    Inside {
        /// Where, in thousandths (0..1000) of the operations of that kind.
        per_mille: u64,
    },
    /// Just past the session's last operation of that kind: the fault never fires (the no-fault
    /// path, on a disk that would have failed).
    PastEnd,
}

impl At {
    /// The 1-based operation the fault hits, among `count` operations.
    pub fn nth(self, count: u64) -> u64 {
        match self {
            At::Inside { per_mille } => 1 + per_mille.min(999) * count / 1000,
            At::PastEnd => count + 1,
        }
    }
}

/// What goes wrong with the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// Nothing: the disk works throughout.
    None,
    /// Power goes out at an I/O operation (any kind); the unsynced tail is torn or zero-filled
    /// at `granule_bytes` (512 or 4096), keeping `granules` of it.
    PowerLoss {
        /// Which I/O operation the power goes out at.
        at: At,
        /// Granule size of the unsynced tail in bytes: 512 or 4096.
        granule_bytes: u64,
        /// How many granules of the unsynced tail survive (0..3).
        granules: u64,
        /// Whether the surviving unsynced granules read back as zeros.
        zero: bool,
    },
    /// An fsync fails.
    SyncFails {
        /// Which sync fails.
        at: At,
    },
    /// A write finds the disk full.
    NoSpace {
        /// Which write fails.
        at: At,
    },
    /// A write is short (legal; must be completed, not lost).
    ShortWrite {
        /// Which write is short.
        at: At,
    },
}

impl StorageFault {
    /// The fault's name as the campaign's statistics print it.
    pub fn kind(self) -> &'static str {
        match self {
            StorageFault::None => "none",
            StorageFault::PowerLoss { .. } => "power loss",
            StorageFault::SyncFails { .. } => "failed fsync",
            StorageFault::NoSpace { .. } => "disk full",
            StorageFault::ShortWrite { .. } => "short write",
        }
    }

    /// Where the fault lands; `None` for [`StorageFault::None`].
    pub fn at(self) -> Option<At> {
        match self {
            StorageFault::None => None,
            StorageFault::PowerLoss { at, .. }
            | StorageFault::SyncFails { at }
            | StorageFault::NoSpace { at }
            | StorageFault::ShortWrite { at } => Some(at),
        }
    }
}

#[derive(Debug, Clone)]
/// A whole simulated session and what goes wrong in it: what `case()` generates and a seed picks.
pub struct Case {
    /// The user's turns (1 to 3), each a list of steps (1 to 3).
    pub turns: Vec<Vec<StepSpec>>,
    /// The session's `parallel_max`: most calls running at once (1 to 4).
    pub parallel_max: usize,
    /// What goes wrong with the disk.
    pub fault: StorageFault,
    /// Whether an observer that panics on every result it is shown is installed.
    pub observer_panics: bool,
    /// Whether the spill store fails every write (large results cannot be spilled).
    pub spill_fails: bool,
    /// Resume and run one more turn (after the first recovery, or re-running: see `rerun`),
    /// then recover again.
    pub resume: bool,
    /// How the resume goes: `None`, recovered first and then resumed (the calls of the crashed
    /// run never run again); `Some`, resumed on the journal as the crash left it, running again
    /// what the policy picks (`tooljournal resume --rerun`), then one more turn.
    pub rerun: Option<RerunPolicy>,
    /// The files of the simulated world that exist when the session begins (from `PATHS`).
    pub initial: Vec<&'static str>,
    /// Someone changes a file of the world after the session ended (before recovery probes it).
    pub change_back: Option<ChangeBack>,
    /// How far the session's journal is zero-filled ahead of its records
    /// (`journal::Options::preallocate_bytes`): mostly 4 KiB, which the records outgrow (zeros
    /// written ahead again as they pass), sometimes 0 (append only) or the 1 MiB default (a
    /// segment longer than the reader's 1 MiB window). Every journal a case opens uses it.
    pub preallocate_bytes: u64,
}

/// A change to the world after the session ended, behind the journal's back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeBack {
    /// The file changed (from [`PATHS`]).
    pub path: &'static str,
    /// `true`: the last write to it is undone (the file holds what it held before that write,
    /// or is removed if it was absent; nothing happens if nothing wrote it); `false`: it is
    /// given other content.
    pub restore: bool,
}

fn kind() -> BoxedStrategy<Kind> {
    prop_oneof![
        8 => Just(Kind::Ok),
        1 => Just(Kind::Fails),
        1 => Just(Kind::Panics),
        1 => Just(Kind::IgnoresCancel),
        1 => Just(Kind::LateProgress),
        1 => Just(Kind::Big),
        1 => Just(Kind::Unknown),
        1 => Just(Kind::BadJson),
        2 => ask().prop_map(Kind::Ask),
        1 => prop_oneof![
            3 => Just(Some(AskAnswer::AllowedOnce)),
            1 => Just(Some(AskAnswer::Denied)),
            1 => Just(Some(AskAnswer::Expired)),
            1 => Just(None),
        ]
        .prop_map(Kind::Approval),
    ]
    .boxed()
}

fn person() -> impl Strategy<Value = Person> {
    prop_oneof![
        6 => (0usize..4).prop_map(|pick| Person::Answers { pick }),
        1 => Just(Person::AnswersWrongly),
        1 => Just(Person::Declines),
        1 => Just(Person::Silent),
        1 => Just(Person::Expires),
        1 => Just(Person::Withdraws),
    ]
}

fn ask() -> impl Strategy<Value = AskSpec> {
    (
        0usize..=OPTION_LABELS.len(),
        any::<bool>(),
        any::<bool>(),
        proptest::bool::weighted(0.05),
        person(),
        0u64..60,
    )
        .prop_map(
            |(options, multiple, free_text, malformed, person, delay_ms)| AskSpec {
                options,
                multiple: multiple && options > 0,
                free_text,
                malformed,
                person,
                delay_ms,
            },
        )
}

fn call() -> BoxedStrategy<CallSpec> {
    let path = proptest::sample::select(&PATHS[..]);
    (
        kind(),
        proptest::bool::weighted(0.6),
        0u64..40,
        proptest::collection::vec(path.clone(), 0..2),
        proptest::collection::vec(path, 0..2),
        proptest::bool::weighted(0.3),
        proptest::option::weighted(0.25, flaky()),
    )
        .prop_map(
            |(kind, parallel, duration_ms, reads, writes, idempotent, flaky)| CallSpec {
                kind,
                parallel,
                duration_ms,
                reads,
                writes,
                idempotent,
                flaky,
            },
        )
        .boxed()
}

/// Mostly one failure then a success (the retry loop's common path), sometimes two, and
/// sometimes every attempt of a first run.
fn flaky() -> impl Strategy<Value = Flaky> {
    (
        prop_oneof![3 => Just(1u32), 1 => Just(2u32), 1 => Just(3u32)],
        any::<bool>(),
    )
        .prop_map(|(failures, after_effect)| Flaky {
            failures,
            after_effect,
        })
}

fn step() -> BoxedStrategy<StepSpec> {
    (
        proptest::collection::vec(call(), 0..5),
        proptest::bool::weighted(0.08),
        proptest::option::weighted(
            0.25,
            prop_oneof![1 => Just(Cancel::AtStepStart), 4 => (0u64..60).prop_map(Cancel::AfterMs)],
        ),
    )
        .prop_map(|(calls, truncated, cancel)| StepSpec {
            calls,
            truncated,
            cancel,
        })
        .boxed()
}

/// Inside the session 24 times in 25; past its end otherwise (4 %: the no-fault path).
fn at() -> impl Strategy<Value = At> {
    prop_oneof![
        24 => (0u64..1000).prop_map(|per_mille| At::Inside { per_mille }),
        1 => Just(At::PastEnd),
    ]
}

pub(crate) fn fault() -> impl Strategy<Value = StorageFault> {
    prop_oneof![
        1 => Just(StorageFault::None),
        6 => (at(), prop_oneof![Just(512u64), Just(4096u64)], 0u64..3, any::<bool>())
            .prop_map(|(at, granule_bytes, granules, zero)| StorageFault::PowerLoss { at, granule_bytes, granules, zero }),
        1 => at().prop_map(|at| StorageFault::SyncFails { at }),
        1 => at().prop_map(|at| StorageFault::NoSpace { at }),
        1 => at().prop_map(|at| StorageFault::ShortWrite { at }),
    ]
}

/// A whole session and what goes wrong in it.
pub(crate) fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(proptest::collection::vec(step(), 1..4), 1..4),
        1usize..5,
        fault(),
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.3),
        rerun(),
        proptest::sample::subsequence(&PATHS[..], 0..=PATHS.len()),
        proptest::option::weighted(0.3, change_back()),
        preallocate_bytes(),
    )
        .prop_map(
            |(
                turns,
                parallel_max,
                fault,
                observer_panics,
                spill_fails,
                resume,
                rerun,
                initial,
                change_back,
                preallocate_bytes,
            )| Case {
                turns,
                parallel_max,
                fault,
                observer_panics,
                spill_fails,
                resume,
                rerun,
                initial,
                change_back,
                preallocate_bytes,
            },
        )
}

/// The default's whole MiB costs every read of a case's journal a MiB of zeros (the campaign
/// reads each journal a dozen times), so it is drawn rarely; 4 KiB keeps the zeros ahead and
/// has the records pass them.
fn preallocate_bytes() -> impl Strategy<Value = u64> {
    prop_oneof![
        98 => Just(4096u64),
        1 => Just(0u64),
        1 => Just(journal::PREALLOCATE_BYTES_DEFAULT),
    ]
}

/// Half the resumes run again what the crash interrupted, under either policy.
fn rerun() -> impl Strategy<Value = Option<RerunPolicy>> {
    prop_oneof![
        2 => Just(None),
        1 => Just(Some(RerunPolicy::NotStarted)),
        1 => Just(Some(RerunPolicy::Safe)),
    ]
}

fn change_back() -> impl Strategy<Value = ChangeBack> {
    (proptest::sample::select(&PATHS[..]), any::<bool>())
        .prop_map(|(path, restore)| ChangeBack { path, restore })
}
