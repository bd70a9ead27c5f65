//! What a simulated session is made of, and how proptest generates (and shrinks) one.

use proptest::prelude::*;
use runtime::event::AskAnswer;

/// A path a call may read or write: few, so calls collide.
pub const PATHS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The `ask` tool, answered so.
    Ask(AskAnswer),
}

#[derive(Debug, Clone)]
pub struct CallSpec {
    pub kind: Kind,
    pub parallel: bool,
    pub duration_ms: u64,
    pub reads: Vec<&'static str>,
    pub writes: Vec<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The user stops the step before the model answers: no request, no calls.
    AtStepStart,
    /// The user stops the batch this long after it starts (0: right after the message).
    AfterMs(u64),
}

#[derive(Debug, Clone)]
pub struct StepSpec {
    pub calls: Vec<CallSpec>,
    pub truncated: bool,
    pub cancel: Option<Cancel>,
}

/// Where a fault lands among the operations of its kind that the session makes (counted by a
/// dry run of the same case: the simulation is deterministic, so the faulted run makes the same
/// operations up to the fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// At this point of the session, in thousandths of its operations of the fault's kind:
    /// the fault fires.
    Inside { per_mille: u64 },
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
    None,
    /// Power goes out at an I/O operation (any kind); the unsynced tail is torn or zero-filled
    /// at `granule_bytes` (512 or 4096), keeping `granules` of it.
    PowerLoss {
        at: At,
        granule_bytes: u64,
        granules: u64,
        zero: bool,
    },
    /// An fsync fails.
    SyncFails {
        at: At,
    },
    /// A write finds the disk full.
    NoSpace {
        at: At,
    },
    /// A write is short (legal; must be completed, not lost).
    ShortWrite {
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
pub struct Case {
    pub turns: Vec<Vec<StepSpec>>,
    pub parallel_max: usize,
    pub fault: StorageFault,
    pub observer_panics: bool,
    pub spill_fails: bool,
    /// After the first recovery, resume and run one more turn, then recover again.
    pub resume: bool,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        8 => Just(Kind::Ok),
        1 => Just(Kind::Fails),
        1 => Just(Kind::Panics),
        1 => Just(Kind::IgnoresCancel),
        1 => Just(Kind::LateProgress),
        1 => Just(Kind::Big),
        1 => Just(Kind::Unknown),
        1 => Just(Kind::BadJson),
        1 => prop_oneof![
            Just(AskAnswer::AllowedOnce),
            Just(AskAnswer::Denied),
            Just(AskAnswer::Expired),
        ]
        .prop_map(Kind::Ask),
    ]
}

fn call() -> impl Strategy<Value = CallSpec> {
    let path = proptest::sample::select(&PATHS[..]);
    (
        kind(),
        proptest::bool::weighted(0.6),
        0u64..40,
        proptest::collection::vec(path.clone(), 0..2),
        proptest::collection::vec(path, 0..2),
    )
        .prop_map(|(kind, parallel, duration_ms, reads, writes)| CallSpec {
            kind,
            parallel,
            duration_ms,
            reads,
            writes,
        })
}

fn step() -> impl Strategy<Value = StepSpec> {
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
}

/// Inside the session 24 times in 25; past its end otherwise (4 %: the no-fault path).
fn at() -> impl Strategy<Value = At> {
    prop_oneof![
        24 => (0u64..1000).prop_map(|per_mille| At::Inside { per_mille }),
        1 => Just(At::PastEnd),
    ]
}

fn fault() -> impl Strategy<Value = StorageFault> {
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
pub fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(proptest::collection::vec(step(), 1..4), 1..4),
        1usize..5,
        fault(),
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.3),
    )
        .prop_map(
            |(turns, parallel_max, fault, observer_panics, spill_fails, resume)| Case {
                turns,
                parallel_max,
                fault,
                observer_panics,
                spill_fails,
                resume,
            },
        )
}
