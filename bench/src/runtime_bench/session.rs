//! The runtime itself under measurement: a no-op tool, so that what remains is the runtime's
//! cost and the journal's, driven through one session's public API as an agent host drives it
//! (`begin_step` + `run_batch` + `end_step`). [`Driver`] is one such session (`many` runs many
//! at once); also the hidden `session-loop` subcommand, which runs one alone, for profiling.
//! A session's journal is segment files in a directory or rows in PostgreSQL ([`At`]): the
//! same driver measures both.
use super::measured::Measured;
use crate::disk::{in_dir, journal_bytes};
use crate::{BoxError, Common};
use journal::{Backend, FsStorage, FsyncPolicy, Journal, Options, RecordStore, Storage, Takeover};
use runtime::event::{ModelCall, ModelResponse, StepOutcome, StopReason, ToolSource, TurnOutcome};
use runtime::Hooks;
use runtime::Registry;
use runtime::{Config, Session, SessionOptions};
use runtime::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Steps run before the clock starts (first allocations, first page of the segment).
pub(super) const WARMUP_STEPS: usize = 20;
/// The arguments every no-op call carries (checked against the tool's schema).
pub(super) const NOOP_ARGS: &str = r#"{"path":"src/lib.rs"}"#;

/// Whether the sessions' journals may share their syncs (`many-loop --own-syncs` clears it, to
/// measure what sharing wins); every measured run keeps the default.
pub(crate) static SHARE_SYNCS: AtomicBool = AtomicBool::new(true);

/// Where a session's journal lives.
#[derive(Clone, Debug)]
pub(crate) enum At {
    /// Segment files in this directory (which holds no journal yet).
    Dir(PathBuf),
    /// This session's URL in a PostgreSQL store (`session=` naming one it does not hold yet).
    Store(String),
}

/// A tool that does nothing: what remains is the runtime's cost and the journal's.
struct Noop {
    name: &'static str,
    parallel: bool,
}

impl Tool for Noop {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "does nothing (benchmark)"
    }
    fn input_schema(&self) -> serde_json::Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}})
    }
    fn is_concurrency_safe(&self, _args: &runtime::Args) -> bool {
        self.parallel
    }
    fn execute(&self, _args: runtime::Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async { Ok(ToolOutput::text("ok")) })
    }
}

/// The hidden `session-loop` subcommand.
pub(crate) fn session_loop(
    common: &Common,
    policy: FsyncPolicy,
    calls: usize,
    seconds: f64,
    workers: usize,
) -> Result<(), BoxError> {
    let base = match &common.dir {
        Some(dir) => tempfile::tempdir_in(dir)?,
        None => tempfile::tempdir()?,
    };
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    let m = in_dir(base.path(), "loop", |d| {
        session_run(&rt, d, policy, calls, Duration::from_secs_f64(seconds))
    })?;
    println!(
        "{policy}, {calls} calls/step, {workers} workers: {:.1} calls/s, {:.2} fsyncs/step, {:.0} bytes/step",
        m.calls_per_s(),
        m.syncs_per_step().unwrap_or(0.0),
        m.bytes_per_step.unwrap_or(0.0)
    );
    Ok(())
}

/// One session, one turn, as many steps of `calls_per_step` no-op calls as fit in `time`
/// (plus the turn's end, whose sync is timed too).
pub(super) fn session_run(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    policy: FsyncPolicy,
    calls_per_step: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    session_run_at(rt, &At::Dir(dir.to_owned()), policy, calls_per_step, time)
}

/// [`session_run`] with the journal wherever `at` says.
pub(super) fn session_run_at(
    rt: &tokio::runtime::Runtime,
    at: &At,
    policy: FsyncPolicy,
    calls_per_step: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let owned = at.clone();
    let body = async move {
        let mut driver = Driver::open(&owned, policy, calls_per_step)?;
        driver.warm_up().await?;
        driver.timed(Instant::now(), time).await
    };
    // The session runs as a task on a worker thread (as in a server embedding the runtime),
    // not on the thread that blocks on the runtime: there, every task the pipeline spawns
    // (the tool body, the batch's join set) would wake a worker across threads; measured
    // on this machine, nosync went from 25k to 20k calls/s that way.
    let timed = rt.block_on(rt.spawn(body))??;
    timed.measured(at, calls_per_step)
}

/// What one session's timed window measured.
pub(super) struct Timed {
    pub(super) steps: u64,
    /// From the window's start to the turn's end being durable.
    pub(super) seconds: f64,
    /// The journal's syncs in the window.
    pub(super) syncs: u64,
    /// Each step's time, in microseconds.
    pub(super) step_us: Vec<u32>,
}

impl Timed {
    /// As a [`Measured`], with the bytes per step of a journal in a directory (the warm-up's
    /// steps counted, as their bytes are; none for a store's rows, which have no segment bytes).
    pub(super) fn measured(&self, at: &At, calls_per_step: usize) -> Result<Measured, BoxError> {
        let total_steps = self.steps + WARMUP_STEPS as u64;
        let bytes_per_step = match at {
            At::Dir(dir) => Some(journal_bytes(dir)? as f64 / total_steps as f64),
            At::Store(_) => None,
        };
        Ok(Measured {
            calls: self.steps * calls_per_step as u64,
            steps: self.steps,
            seconds: self.seconds,
            syncs: Some(self.syncs),
            bytes_per_step,
            step_us: self.step_us.clone(),
        })
    }
}

/// One session over a fresh journal, driven as an agent host drives it: one turn, steps of
/// `calls_per_step` no-op calls. Opened and run inside the Tokio runtime.
pub(super) struct Driver {
    session: Session,
    tool: &'static str,
    calls_per_step: usize,
    next_call: u64,
}

impl Driver {
    /// A session over a new journal at `at` (which holds none yet).
    pub(super) fn open(
        at: &At,
        policy: FsyncPolicy,
        calls_per_step: usize,
    ) -> Result<Driver, BoxError> {
        let journal = open_journal(at, policy)?;
        let parallel = calls_per_step > 1;
        let tool = if parallel { "noop_parallel" } else { "noop" };
        let mut registry = Registry::new();
        registry.register(
            Arc::new(Noop {
                name: tool,
                parallel,
            }),
            ToolSource::BuiltIn,
        )?;
        let config = Config {
            // All 16 calls of a par16 step may run (and start, with one sync) together.
            parallel_max: calls_per_step.max(Config::default().parallel_max),
            ..Config::default()
        };
        let options = SessionOptions {
            workspace: "/bench".into(),
            ..SessionOptions::default()
        };
        let session = Session::open(
            journal,
            Arc::new(registry),
            Hooks::default(),
            config,
            options,
        )?;
        Ok(Driver {
            session,
            tool,
            calls_per_step,
            next_call: 0,
        })
    }

    /// The turn's start and the steps run before the clock starts.
    pub(super) async fn warm_up(&mut self) -> Result<(), BoxError> {
        self.session.begin_turn("run the benchmark")?;
        for _ in 0..WARMUP_STEPS {
            self.step().await?;
        }
        Ok(())
    }

    /// Steps until `time` has passed since `start`, then the turn's end (durable) and the
    /// session's close; the seconds run from `start` to the turn's end.
    pub(super) async fn timed(mut self, start: Instant, time: Duration) -> Result<Timed, BoxError> {
        let syncs_before = self.syncs();
        let mut steps = 0u64;
        let mut step_us = Vec::new();
        while start.elapsed() < time {
            let began = Instant::now();
            self.step().await?;
            step_us.push(u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX));
            steps += 1;
        }
        self.session.end_turn(TurnOutcome::Completed).await?;
        let seconds = start.elapsed().as_secs_f64();
        let syncs = self.syncs() - syncs_before;
        self.session.close().await?;
        Ok(Timed {
            steps,
            seconds,
            syncs,
            step_us,
        })
    }

    fn syncs(&self) -> u64 {
        self.session.event_log().journal().stats().syncs
    }

    /// begin_step + run_batch(`calls_per_step` no-op calls) + end_step.
    async fn step(&mut self) -> Result<(), BoxError> {
        let calls = self.calls_per_step;
        self.session.begin_step()?;
        let tool_calls = (0..calls)
            .map(|_| {
                self.next_call += 1;
                ModelCall {
                    call_id: format!("call_{}", self.next_call),
                    name: self.tool.to_owned(),
                    arguments: NOOP_ARGS.to_owned(),
                }
            })
            .collect();
        let results = self
            .session
            .run_batch(ModelResponse {
                text: String::new(),
                tool_calls,
                stop_reason: StopReason::ToolUse,
            })
            .await?;
        if results.len() != calls || results.iter().any(|r| r.is_error) {
            let first = results.iter().find(|r| r.is_error).map(|r| &r.content);
            return Err(format!("the no-op tool failed: {first:?}").into());
        }
        self.session.end_step(StepOutcome::Completed)?;
        Ok(())
    }
}

fn open_journal(at: &At, policy: FsyncPolicy) -> Result<Journal, BoxError> {
    let backend = match at {
        At::Dir(dir) => {
            let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
            Backend::Files(storage)
        }
        At::Store(url) => {
            let store: Arc<dyn RecordStore> = Arc::new(pg::PgStore::open(url)?);
            Backend::Records(store)
        }
    };
    let mut options = Options {
        fsync: policy,
        share_syncs: SHARE_SYNCS.load(Ordering::Relaxed),
        ..Options::default()
    };
    if policy == FsyncPolicy::Never {
        // Rotating a segment syncs even under `never` (a sealed segment must be whole);
        // the pipeline's cost is measured without the disk, so no rotation happens here.
        options.limits.segment_size_bytes_max = 1 << 40;
    }
    let (journal, _) = Journal::open_backend(&backend, Takeover::Refuse, options)?;
    Ok(journal)
}
