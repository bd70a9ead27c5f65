//! The runtime itself under measurement: a no-op tool, so that what remains is the runtime's
//! cost and the journal's, driven through one session's public API as an agent host drives it
//! (`begin_step` + `run_batch` + `end_step`). Also the hidden `session-loop` subcommand, which
//! runs one such session alone, for profiling.

use super::measured::Measured;
use crate::disk::{in_dir, segment_bytes};
use crate::{BoxError, Common};
use journal::{FsStorage, FsyncPolicy, Journal, Options, Storage};
use runtime::event::{ModelCall, ModelResponse, StepOutcome, StopReason, ToolSource, TurnOutcome};
use runtime::hooks::Hooks;
use runtime::registry::Registry;
use runtime::tool::{Tool, ToolContext, ToolFuture, ToolOutput};
use runtime::{Config, Session, SessionOptions};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Steps run before the clock starts (first allocations, first page of the segment).
const WARMUP_STEPS: usize = 20;
/// The arguments every no-op call carries (checked against the tool's schema).
pub(super) const NOOP_ARGS: &str = r#"{"path":"src/lib.rs"}"#;

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
    fn is_concurrency_safe(&self, _args: &runtime::args::Args) -> bool {
        self.parallel
    }
    fn execute(&self, _args: runtime::args::Args, _ctx: ToolContext) -> ToolFuture<'_> {
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
    let journal = open_journal(dir, policy)?;
    let parallel = calls_per_step > 1;
    let name = if parallel { "noop_parallel" } else { "noop" };
    let mut registry = Registry::new();
    registry.register(Arc::new(Noop { name, parallel }), ToolSource::BuiltIn)?;
    let config = Config {
        // All 16 calls of a par16 step may run (and start, with one sync) together.
        parallel_max: calls_per_step.max(Config::default().parallel_max),
        ..Config::default()
    };
    let options = SessionOptions {
        workspace: "/bench".into(),
        ..SessionOptions::default()
    };
    let body = async move {
        let session = Session::open(
            journal,
            Arc::new(registry),
            Hooks::default(),
            config,
            options,
        )?;
        timed_turn(session, name, calls_per_step, time).await
    };
    // The session runs as a task on a worker thread (as in a server embedding the runtime),
    // not on the thread that blocks on the runtime: there, every task the pipeline spawns
    // (the tool body, the batch's join set) would wake a worker across threads; measured
    // on this machine, nosync went from 25k to 20k calls/s that way.
    let (steps, seconds, syncs) = rt.block_on(rt.spawn(body))??;
    let total_steps = steps + WARMUP_STEPS as u64;
    Ok(Measured {
        calls: steps * calls_per_step as u64,
        steps,
        seconds,
        syncs: Some(syncs),
        bytes_per_step: Some(segment_bytes(dir)? as f64 / total_steps as f64),
    })
}

fn open_journal(dir: &Path, policy: FsyncPolicy) -> Result<Journal, BoxError> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
    let mut options = Options {
        fsync: policy,
        ..Options::default()
    };
    if policy == FsyncPolicy::Never {
        // Rotating a segment syncs even under `never` (a sealed segment must be whole);
        // the pipeline's cost is measured without the disk, so no rotation happens here.
        options.limits.segment_size_bytes_max = 1 << 40;
    }
    let (journal, _) = Journal::open(storage, options)?;
    Ok(journal)
}

/// One turn of the open `session`: the warm-up steps, then steps until `time` has passed,
/// then the turn's end. Returns the timed steps, their seconds and the journal's syncs in them.
async fn timed_turn(
    mut session: Session,
    tool: &str,
    calls_per_step: usize,
    time: Duration,
) -> Result<(u64, f64, u64), BoxError> {
    session.begin_turn("run the benchmark")?;
    let mut next_call = 0u64;
    for _ in 0..WARMUP_STEPS {
        one_step(&mut session, tool, calls_per_step, &mut next_call).await?;
    }
    let syncs_before = session.event_log().journal().stats().syncs;
    let start = Instant::now();
    let mut steps = 0u64;
    while start.elapsed() < time {
        one_step(&mut session, tool, calls_per_step, &mut next_call).await?;
        steps += 1;
    }
    session.end_turn(TurnOutcome::Completed).await?;
    let seconds = start.elapsed().as_secs_f64();
    let syncs = session.event_log().journal().stats().syncs - syncs_before;
    session.close().await?;
    Ok((steps, seconds, syncs))
}

/// begin_step + run_batch(`calls` no-op calls) + end_step.
async fn one_step(
    session: &mut Session,
    tool: &str,
    calls: usize,
    next_call: &mut u64,
) -> Result<(), BoxError> {
    session.begin_step()?;
    let tool_calls = (0..calls)
        .map(|_| {
            *next_call += 1;
            ModelCall {
                call_id: format!("call_{next_call}"),
                name: tool.to_owned(),
                arguments: NOOP_ARGS.to_owned(),
            }
        })
        .collect();
    let results = session
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
    session.end_step(StepOutcome::Completed)?;
    Ok(())
}
