//! `runtime`: durable tool calls per second through the whole runtime, side by
//! side with the plain choices a user would otherwise make (the plain way and with the runtime's
//! own durability plan), the disk's raw rates (append, overwrite, many writers), and many
//! sessions at once, in one run, as ratios (DESIGN.md §8).
//!
//! This file holds the plan and the order of the kinds of runs. `rounds` runs the durable
//! measurements in interleaved rounds, each round in an order of its own (its module doc says
//! which); `session` drives the runtime, `many` runs many sessions (and as many raw writers) at
//! once, `baselines` write the same records the plain ways, `generate` and `recovery` measure
//! recovery on a generated journal, `measured` is what every durable run returns, `report`
//! prints, `closed` measures what a closed session leaves on disk. The PostgreSQL runs put the
//! journal in PostgreSQL: `postgres` starts the server, `procs` runs sessions in several worker
//! processes (on PostgreSQL and, beside it, on files).

mod baselines;
mod closed;
pub(crate) mod generate;
pub(crate) mod many;
mod measured;
mod postgres;
pub(crate) mod procs;
pub(crate) mod recovery;
mod report;
mod rounds;
pub(crate) mod session;

use crate::bar::Bar;
use crate::disk::{in_dir, scratch_base};
use crate::{say, BoxError, Common, MIB};
use generate::GenStats;
use journal::FsyncPolicy;
use measured::Measured;
use postgres::PgState;
use recovery::ChildReport;
use rounds::{durable_rounds, Rounds};
use session::session_run;
use std::path::PathBuf;
use std::time::Duration;

/// The raw rate is measured with appends of this size (as in `journal`).
const RAW_APPEND_BYTES: usize = 100;
const PAR_CALLS: usize = 16;

struct Plan {
    mode: &'static str,
    /// The durable measurements run in this many rounds, each round running every one of
    /// them once, back to back: a shared disk's rate drifts (other processes' syncs), and
    /// interleaving spreads the drift over all of them alike instead of favouring one. Each
    /// round runs them in an order of its own (`rounds`).
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

/// Everything one `runtime` run measured.
struct Figures {
    rounds: Rounds,
    /// The PostgreSQL server the PG runs used, or why they were skipped.
    pg: PgState,
    nosync: Measured,
    generated: GenStats,
    child: ChildReport,
    /// A short session's bytes once closed.
    closed: closed::Closed,
}

pub(crate) fn run(common: &Common) -> Result<(), BoxError> {
    let plan = Plan::new(common.quick);
    let (dir, figures) = measure(common, &plan)?;
    let report = report::Report::new(&figures);
    let targets = report::targets(&report);
    if common.json {
        report::print_json(&report, &targets)?;
    } else {
        report::print_table(&plan, &dir, &figures, &report, &targets);
    }
    Ok(())
}

/// `chart`: the figures that have a target.
pub(crate) fn bars(common: &Common) -> Result<Vec<Bar>, BoxError> {
    let (_, figures) = measure(common, &Plan::new(common.quick))?;
    let report = report::Report::new(&figures);
    Ok(report::targets(&report)
        .iter()
        .map(report::Target::bar)
        .collect())
}

/// Every run of the plan; and the scratch directory they ran in (removed since).
fn measure(common: &Common, plan: &Plan) -> Result<(PathBuf, Figures), BoxError> {
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

    // Beside the scratch directory, not in it: as root the server runs as `postgres`, which
    // cannot enter a directory private to root.
    let pg = postgres::start(common.dir.as_deref());
    match &pg {
        PgState::Running(server) => say(&format!(
            "postgres: {} in {}",
            server.description,
            server.dir().display()
        )),
        PgState::Skipped(why) => say(&format!("postgres: skipped: {why}")),
    }
    let rounds = durable_rounds(&rt, base.path(), plan, pg.server())?;

    say("nosync: the runtime with fsync policy never, one worker thread");
    let nosync = in_dir(base.path(), "nosync", |d| {
        session_run(&rt1, d, FsyncPolicy::Never, 1, plan.nosync_time)
    })?;
    say("closed: a short session's bytes on disk once closed");
    let closed = in_dir(base.path(), "closed", |d| closed::measure(&rt, d))?;
    drop((rt, rt1));

    let (generated, child) = recovery::measure(base.path(), plan.recover_bytes)?;
    let figures = Figures {
        rounds,
        pg,
        nosync,
        generated,
        child,
        closed,
    };
    Ok((base.path().to_path_buf(), figures))
}
