//! `runtime` (issue 8): durable tool calls per second through the whole runtime, side by side
//! with the plain choices a user would otherwise make, in one run, as ratios (DESIGN.md §8).
//!
//! This file holds the plan and the order of the runs. `session` drives the runtime, `baselines`
//! write the same records the plain ways, `generate` and `recovery` measure recovery on a
//! generated journal, `measured` is what every durable run returns, `report` prints.

mod baselines;
pub(crate) mod generate;
mod measured;
pub(crate) mod recovery;
mod report;
pub(crate) mod session;

use crate::disk::{in_dir, scratch_base};
use crate::{say, BoxError, Common, MIB};
use generate::GenStats;
use journal::FsyncPolicy;
use measured::{accumulate, raw_run, Measured};
use recovery::ChildReport;
use session::session_run;
use std::path::Path;
use std::time::Duration;

/// The raw rate is measured with appends of this size (as in `journal`).
const RAW_APPEND_BYTES: usize = 100;
const PAR_CALLS: usize = 16;

/// The durable measurements, in the order every round runs them.
const NAMES: [&str; 8] = [
    "raw",
    "seq",
    "raw_step",
    "par16",
    "jsonl",
    "sqlite_event",
    "sqlite_call",
    "sled",
];

struct Plan {
    mode: &'static str,
    /// The durable measurements run in this many rounds, each round running every one of
    /// them once, back to back: a shared disk's rate drifts (other processes' syncs), and
    /// interleaving spreads the drift over all of them alike instead of favouring one.
    rounds: usize,
    /// Each durable measurement in each round (the raw rate, the runtime, the baselines).
    slice: Duration,
    nosync_time: Duration,
    recover_bytes: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                mode: "quick",
                rounds: 2,
                slice: Duration::from_millis(500),
                nosync_time: Duration::from_secs(1),
                recover_bytes: 100 * MIB,
            }
        } else {
            Plan {
                mode: "full",
                rounds: 5,
                slice: Duration::from_millis(1200),
                nosync_time: Duration::from_secs(4),
                recover_bytes: 1024 * MIB,
            }
        }
    }
}

/// Every durable measurement, totalled over the rounds, and the per-round rates the table lists.
struct Rounds {
    raw: Measured,
    seq: Measured,
    raw_step: Measured,
    par16: Measured,
    jsonl: Measured,
    sqlite_event: Measured,
    sqlite_call: Measured,
    sled: Measured,
    raw_per_round: Vec<f64>,
    seq_per_round: Vec<f64>,
    /// One seq step's bytes, known after the first seq run (the size `raw_step` appends).
    step_bytes: usize,
}

/// Everything one `runtime` run measured.
struct Figures {
    rounds: Rounds,
    nosync: Measured,
    generated: GenStats,
    child: ChildReport,
}

pub(crate) fn run(common: &Common) -> Result<(), BoxError> {
    let plan = Plan::new(common.quick);
    let base = scratch_base(common.dir.as_deref())?;
    // As an agent host runs it (src/run.rs): a multi-thread runtime, one worker per core.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // The pipeline on one core: one worker thread drives everything.
    let rt1 = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;

    let rounds = durable_rounds(&rt, base.path(), &plan)?;

    say("nosync: the runtime with fsync policy never, one worker thread");
    let nosync = in_dir(base.path(), "nosync", |d| {
        session_run(&rt1, d, FsyncPolicy::Never, 1, plan.nosync_time)
    })?;
    drop((rt, rt1));

    let (generated, child) = recovery::measure(base.path(), plan.recover_bytes)?;
    let figures = Figures {
        rounds,
        nosync,
        generated,
        child,
    };
    let report = report::Report::new(&figures);
    let targets = report::targets(&report);
    if common.json {
        report::print_json(&report, &targets)?;
    } else {
        report::print_table(&plan, base.path(), &figures, &report, &targets);
    }
    Ok(())
}

/// Every durable measurement, round after round; the figures are the totals.
fn durable_rounds(
    rt: &tokio::runtime::Runtime,
    base: &Path,
    plan: &Plan,
) -> Result<Rounds, BoxError> {
    let mut totals: Vec<Option<Measured>> = NAMES.iter().map(|_| None).collect();
    let mut raw_per_round = Vec::new();
    let mut seq_per_round = Vec::new();
    let mut step_bytes = 0usize;
    for round in 1..=plan.rounds {
        say(&format!(
            "round {round}/{}: raw fdatasync, seq, raw at a step's size, par16, jsonl, \
             sqlite per record, sqlite per call, sled ({:.1} s each)",
            plan.rounds,
            plan.slice.as_secs_f64()
        ));
        for (i, name) in NAMES.iter().enumerate() {
            let m = in_dir(base, name, |d| measure(name, d, rt, plan, step_bytes))?;
            match *name {
                "raw" => raw_per_round.push(m.calls_per_s()),
                "seq" => {
                    seq_per_round.push(m.calls_per_s());
                    if step_bytes == 0 {
                        step_bytes = m.bytes_per_step.unwrap_or(1.0).round() as usize;
                    }
                }
                _ => {}
            }
            accumulate(&mut totals[i], m);
        }
    }
    let mut totals = totals.into_iter().map(|m| m.expect("at least one round"));
    let mut next = || totals.next().expect("one total per name");
    // Fields are evaluated in the order written: the order of NAMES.
    Ok(Rounds {
        raw: next(),
        seq: next(),
        raw_step: next(),
        par16: next(),
        jsonl: next(),
        sqlite_event: next(),
        sqlite_call: next(),
        sled: next(),
        raw_per_round,
        seq_per_round,
        step_bytes,
    })
}

/// One round's run of the durable measurement `name`, in the fresh directory `d`.
fn measure(
    name: &str,
    d: &Path,
    rt: &tokio::runtime::Runtime,
    plan: &Plan,
    step_bytes: usize,
) -> Result<Measured, BoxError> {
    match name {
        "raw" => raw_run(d, RAW_APPEND_BYTES, plan.slice),
        "seq" => session_run(rt, d, FsyncPolicy::Group, 1, plan.slice),
        "raw_step" => raw_run(d, step_bytes.max(1), plan.slice),
        "par16" => session_run(rt, d, FsyncPolicy::Group, PAR_CALLS, plan.slice),
        "jsonl" => baselines::jsonl::run(d, plan.slice),
        "sqlite_event" => baselines::sqlite::run(d, false, plan.slice),
        "sqlite_call" => baselines::sqlite::run(d, true, plan.slice),
        _ => baselines::sled::run(d, plan.slice),
    }
}
