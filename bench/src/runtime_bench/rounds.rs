//! The durable measurements and the rounds they run in. Every round runs every measurement
//! once, for the plan's slice, in an order of its own: round `r` (from 0) starts at
//! `RUNS[r % RUNS.len()]` and walks the list with a stride of its own (1 in round 0, then 3, 5,
//! 7, ..., each coprime with the list's length, so the round still runs each one once). A
//! rotation alone would keep every measurement behind the same one in every round but one; the
//! strides give each a different predecessor from round to round (a measurement that leaves the
//! disk busy, such as SQLite's checkpoints or 64 journals' writes, no longer always taxes the
//! same neighbour), and no measurement always holds the same place in a round.

use super::baselines::{self, sqlite::Commit};
use super::many::{raw_writers_run, sessions_run};
use super::measured::{accumulate, raw_overwrite_run, raw_run, Measured};
use super::session::session_run;
use super::{Plan, PAR_CALLS, RAW_APPEND_BYTES};
use crate::disk::in_dir;
use crate::{say, BoxError};
use journal::FsyncPolicy;
use std::path::Path;

/// One durable measurement.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Run {
    Raw,
    RawOverwrite,
    Seq,
    /// After `Seq` in [`RUNS`]: it appends the bytes one seq step wrote, known once seq ran.
    RawStep,
    Par16,
    Jsonl,
    JsonlSamePlan,
    SqliteEvent,
    SqliteCall,
    SqliteSamePlan,
    Sled,
    Sessions1,
    Sessions8,
    Sessions64,
    Raw8,
    Raw64,
}

use Run::*;

/// Every durable measurement; round 0 runs them in this order.
pub(super) const RUNS: [Run; 16] = [
    Raw,
    RawOverwrite,
    Seq,
    RawStep,
    Par16,
    Jsonl,
    JsonlSamePlan,
    SqliteEvent,
    SqliteCall,
    SqliteSamePlan,
    Sled,
    Sessions1,
    Sessions8,
    Sessions64,
    Raw8,
    Raw64,
];

impl Run {
    /// Its name in the progress lines (and its scratch directory's).
    fn label(self) -> &'static str {
        match self {
            Raw => "raw",
            RawOverwrite => "raw_overwrite",
            Seq => "seq",
            RawStep => "raw_step",
            Par16 => "par16",
            Jsonl => "jsonl",
            JsonlSamePlan => "jsonl_same_plan",
            SqliteEvent => "sqlite_event",
            SqliteCall => "sqlite_call",
            SqliteSamePlan => "sqlite_same_plan",
            Sled => "sled",
            Sessions1 => "sessions1",
            Sessions8 => "sessions8",
            Sessions64 => "sessions64",
            Raw8 => "raw8",
            Raw64 => "raw64",
        }
    }

    fn index(self) -> usize {
        // RUNS lists every variant in declaration order.
        self as usize
    }
}

/// Every durable measurement, totalled over the rounds, and the per-round rates the table lists.
pub(super) struct Rounds {
    totals: Vec<Measured>,
    pub(super) raw_per_round: Vec<f64>,
    pub(super) seq_per_round: Vec<f64>,
    /// One seq step's bytes, known after the first seq run (the size `raw_step` appends).
    pub(super) step_bytes: usize,
}

impl Rounds {
    pub(super) fn get(&self, run: Run) -> &Measured {
        &self.totals[run.index()]
    }
}

/// The order round `round` (from 0) runs `n` measurements in: indices into a list of `n`,
/// starting at `round % n`, with the first stride from `2 * round + 1` up that is coprime with
/// `n` (so each index comes once).
pub(super) fn round_order(round: usize, n: usize) -> Vec<usize> {
    if n <= 1 {
        return (0..n).collect();
    }
    let mut stride = (2 * round + 1) % n;
    while stride == 0 || gcd(stride, n) != 1 {
        stride = (stride + 1) % n;
    }
    (0..n).map(|i| (round + i * stride) % n).collect()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Every durable measurement, round after round; the figures are the totals.
pub(super) fn durable_rounds(
    rt: &tokio::runtime::Runtime,
    base: &Path,
    plan: &Plan,
) -> Result<Rounds, BoxError> {
    let mut totals: Vec<Option<Measured>> = RUNS.iter().map(|_| None).collect();
    let mut raw_per_round = Vec::new();
    let mut seq_per_round = Vec::new();
    let mut step_bytes = 0usize;
    for round in 0..plan.rounds {
        let order = round_order(round, RUNS.len());
        let labels: Vec<_> = order.iter().map(|&i| RUNS[i].label()).collect();
        say(&format!(
            "round {}/{}: {} ({:.1} s each)",
            round + 1,
            plan.rounds,
            labels.join(", "),
            plan.slice.as_secs_f64()
        ));
        for i in order {
            let run = RUNS[i];
            let m = in_dir(base, run.label(), |d| measure(run, d, rt, plan, step_bytes))?;
            match run {
                Raw => raw_per_round.push(m.calls_per_s()),
                Seq => {
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
    let totals = totals
        .into_iter()
        .map(|m| m.ok_or("a measurement never ran (no rounds?)"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rounds {
        totals,
        raw_per_round,
        seq_per_round,
        step_bytes,
    })
}

/// One round's run of the durable measurement `run`, in the fresh directory `d`.
fn measure(
    run: Run,
    d: &Path,
    rt: &tokio::runtime::Runtime,
    plan: &Plan,
    step_bytes: usize,
) -> Result<Measured, BoxError> {
    let time = plan.slice;
    match run {
        Raw => raw_run(d, RAW_APPEND_BYTES, time),
        RawOverwrite => raw_overwrite_run(d, RAW_APPEND_BYTES, time),
        Seq => session_run(rt, d, FsyncPolicy::Group, 1, time),
        RawStep => raw_run(d, step_bytes.max(1), time),
        Par16 => session_run(rt, d, FsyncPolicy::Group, PAR_CALLS, time),
        Jsonl => baselines::jsonl::run(d, time),
        JsonlSamePlan => baselines::jsonl::run_same_plan(d, time),
        SqliteEvent => baselines::sqlite::run(d, Commit::PerRecord, time),
        SqliteCall => baselines::sqlite::run(d, Commit::PerCall, time),
        SqliteSamePlan => baselines::sqlite::run(d, Commit::AtStarted, time),
        Sled => baselines::sled::run(d, time),
        Sessions1 => sessions_run(rt, d, 1, time),
        Sessions8 => sessions_run(rt, d, 8, time),
        Sessions64 => sessions_run(rt, d, 64, time),
        Raw8 => raw_writers_run(d, 8, RAW_APPEND_BYTES, time),
        Raw64 => raw_writers_run(d, 64, RAW_APPEND_BYTES, time),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_every_measurement_once_and_starts_where_it_should() {
        for n in [1, 2, 7, 16] {
            for round in 0..6 {
                let mut order = round_order(round, n);
                assert_eq!(order[0], round % n, "round {round} of {n}");
                order.sort_unstable();
                assert_eq!(order, (0..n).collect::<Vec<_>>(), "round {round} of {n}");
            }
        }
    }

    #[test]
    fn no_measurement_has_the_same_predecessor_in_every_round() {
        let n = RUNS.len();
        let orders: Vec<_> = (0..2).map(|r| round_order(r, n)).collect();
        for m in 0..n {
            let before: Vec<_> = orders
                .iter()
                .map(|o| {
                    o.iter()
                        .position(|&x| x == m)
                        .and_then(|p| p.checked_sub(1).map(|p| o[p]))
                })
                .collect();
            assert_ne!(
                before[0], before[1],
                "measurement {m} follows {:?} in both rounds",
                before[0]
            );
        }
    }

    #[test]
    fn round_zero_runs_seq_before_the_step_sized_raw_rate() {
        let order = round_order(0, RUNS.len());
        let at = |run: Run| order.iter().position(|&i| RUNS[i] == run);
        assert!(at(Seq) < at(RawStep));
        assert!(RUNS.iter().enumerate().all(|(i, r)| r.index() == i));
    }
}
