//! The durable measurements and the rounds they run in. Every round runs every measurement
//! once, for the plan's slice, in an order of its own: round `r` (from 0) starts at
//! `RUNS[r % RUNS.len()]` and walks the list with a stride of its own (1 in round 0, then 3, 5,
//! 7, ..., each coprime with the list's length, so the round still runs each one once). A
//! rotation alone would keep every measurement behind the same one in every round but one; the
//! strides give each a different predecessor from round to round (a measurement that leaves the
//! disk busy, such as SQLite's checkpoints or 64 journals' writes, no longer always taxes the
//! same neighbour), and no measurement always holds the same place in a round.
//!
//! The journal-in-PostgreSQL runs are in the same rounds, so that their ratios to
//! the file backend's are of the same minutes; without a server they are left out of the list.

use super::baselines::{self, sqlite::Commit};
use super::many::{raw_writers_run, sessions_run};
use super::measured::{accumulate, raw_overwrite_run, raw_run, Measured};
use super::postgres::PgServer;
use super::procs::{procs_run, Journals, PROCS, SESSIONS_PER_PROC};
use super::session::{session_run, session_run_at, At};
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
    Sessions256,
    Raw8,
    Raw64,
    Raw256,
    /// `Seq` with the journal in PostgreSQL.
    PgSeq,
    /// `Par16` with the journal in PostgreSQL.
    PgPar16,
    /// 64 sessions over 4 worker processes, journals in segment files.
    FilesProcs4,
    /// The same 64 sessions over 4 processes, journals in PostgreSQL.
    PgProcs4,
}

use Run::*;

/// Every durable measurement; round 0 runs them in this order.
pub(super) const RUNS: [Run; 22] = [
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
    Sessions256,
    Raw8,
    Raw64,
    Raw256,
    PgSeq,
    PgPar16,
    FilesProcs4,
    PgProcs4,
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
            Sessions256 => "sessions256",
            Raw8 => "raw8",
            Raw64 => "raw64",
            Raw256 => "raw256",
            PgSeq => "pg_seq",
            PgPar16 => "pg_par16",
            FilesProcs4 => "files_procs4",
            PgProcs4 => "pg_procs4",
        }
    }

    /// Whether it needs the PostgreSQL server.
    pub(super) fn needs_pg(self) -> bool {
        matches!(self, PgSeq | PgPar16 | PgProcs4)
    }

    fn index(self) -> usize {
        // RUNS lists every variant in declaration order.
        self as usize
    }
}

/// Every durable measurement, totalled over the rounds, and the per-round rates the table lists.
pub(super) struct Rounds {
    /// By [`Run::index`]; `None` for a run left out (no PostgreSQL).
    totals: Vec<Option<Measured>>,
    pub(super) raw_per_round: Vec<f64>,
    pub(super) seq_per_round: Vec<f64>,
    /// One seq step's bytes, known after the first seq run (the size `raw_step` appends).
    pub(super) step_bytes: usize,
}

/// What a run left out reads as through [`Rounds::get`]: nothing in no time.
static NOT_RUN: Measured = Measured {
    calls: 0,
    steps: 0,
    seconds: 0.0,
    syncs: None,
    bytes_per_step: None,
    step_us: Vec::new(),
};

impl Rounds {
    /// A run that always runs (a left-out one reads as no calls; use [`Rounds::ran`] for those).
    pub(super) fn get(&self, run: Run) -> &Measured {
        self.ran(run).unwrap_or(&NOT_RUN)
    }

    /// A run's totals, if it ran.
    pub(super) fn ran(&self, run: Run) -> Option<&Measured> {
        self.totals[run.index()].as_ref()
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
    pg: Option<&PgServer>,
) -> Result<Rounds, BoxError> {
    let runs: Vec<Run> = RUNS
        .into_iter()
        .filter(|r| pg.is_some() || !r.needs_pg())
        .collect();
    let mut totals: Vec<Option<Measured>> = RUNS.iter().map(|_| None).collect();
    let mut raw_per_round = Vec::new();
    let mut seq_per_round = Vec::new();
    let mut step_bytes = 0usize;
    for round in 0..plan.rounds {
        let order = round_order(round, runs.len());
        let labels: Vec<_> = order.iter().map(|&i| runs[i].label()).collect();
        say(&format!(
            "round {}/{}: {} ({:.1} s each)",
            round + 1,
            plan.rounds,
            labels.join(", "),
            plan.slice.as_secs_f64()
        ));
        for i in order {
            let run = runs[i];
            let m = in_dir(base, run.label(), |d| {
                measure(run, d, rt, plan, step_bytes, pg)
            })?;
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
            accumulate(&mut totals[run.index()], m);
        }
    }
    if runs.iter().any(|r| totals[r.index()].is_none()) {
        return Err("a measurement never ran (no rounds?)".into());
    }
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
    pg: Option<&PgServer>,
) -> Result<Measured, BoxError> {
    let time = plan.slice;
    let server = || pg.ok_or("a PostgreSQL run without a server");
    let on_pg = |label: &str| -> Result<At, BoxError> {
        let server = server()?;
        Ok(At::Store(server.url(&server.fresh_session(label))))
    };
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
        Sessions256 => sessions_run(rt, d, 256, time),
        Raw8 => raw_writers_run(d, 8, RAW_APPEND_BYTES, time),
        Raw64 => raw_writers_run(d, 64, RAW_APPEND_BYTES, time),
        Raw256 => raw_writers_run(d, 256, RAW_APPEND_BYTES, time),
        PgSeq => session_run_at(rt, &on_pg("seq")?, FsyncPolicy::Group, 1, time),
        PgPar16 => session_run_at(rt, &on_pg("par16")?, FsyncPolicy::Group, PAR_CALLS, time),
        FilesProcs4 => procs_run(Journals::Dir(d), PROCS, SESSIONS_PER_PROC, time),
        PgProcs4 => procs_run(Journals::Store(server()?), PROCS, SESSIONS_PER_PROC, time),
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
