//! Many sessions on one disk: `n` sessions in one process, each with its own
//! journal in its own directory, each running steps of one no-op call at once; beside them, in
//! the same rounds, `n` raw writers (threads), each appending 100 bytes to its own file and
//! fdatasyncing it: the disk's own limit at that concurrency. Both report the aggregate rate.
//!
//! Each session syncs its own journal: on the multi-thread runtime the leader of a group sync
//! writes and fdatasyncs on its own worker thread (`journal/src/writer.rs`), so the syncs in
//! flight at once are at most the runtime's worker threads, whatever `n` is; the raw writers
//! have one thread each. What the gap between the two costs is what sharing fsyncs between
//! sessions would have to win back.

use super::measured::Measured;
use super::session::{At, Driver, Timed, WARMUP_STEPS};
use crate::disk::journal_bytes;
use crate::usage::Usage;
use crate::BoxError;
use journal::FsyncPolicy;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `sessions` sessions at once, one task each on `rt`, each in `dir/s<i>`. The window opens
/// when every session has warmed up and closes when the last turn's end is durable; the rate is
/// every session's calls over it.
pub(super) fn sessions_run(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    sessions: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let ats: Vec<At> = subdirs(dir, "s", sessions)?
        .into_iter()
        .map(At::Dir)
        .collect();
    let timed = sessions_at(rt, &ats, time, || Ok(()))?;
    sessions_measured(&timed, &ats)
}

/// One session per entry of `ats`, at once, one task each on `rt`, each running steps of one
/// no-op call with policy group. When every session has warmed up, `gate` runs on the calling
/// thread (a worker process waits there for its parent's word); then the window opens, for
/// `time`, and each session's window closes when its turn's end is durable.
pub(super) fn sessions_at(
    rt: &tokio::runtime::Runtime,
    ats: &[At],
    time: Duration,
    gate: impl FnOnce() -> Result<(), BoxError>,
) -> Result<Vec<Timed>, BoxError> {
    let (warmed_tx, mut warmed_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (start_tx, start_rx) = tokio::sync::watch::channel(None::<Instant>);
    let tasks: Vec<_> = ats
        .iter()
        .map(|at| {
            let (at, warmed_tx, mut start_rx) = (at.clone(), warmed_tx.clone(), start_rx.clone());
            rt.spawn(async move {
                let warmed = async {
                    let mut driver = Driver::open(&at, FsyncPolicy::Group, 1)?;
                    driver.warm_up().await?;
                    Ok::<_, BoxError>(driver)
                }
                .await;
                // Every task reports, failed or not, so the gate never waits forever.
                let _ = warmed_tx.send(());
                let start = start_rx
                    .wait_for(Option::is_some)
                    .await
                    .map_err(|_| "the window never opened (the gate failed)")?
                    .unwrap_or_else(Instant::now);
                warmed?.timed(start, time).await
            })
        })
        .collect();
    drop(warmed_tx);
    rt.block_on(async {
        for _ in 0..ats.len() {
            warmed_rx.recv().await;
        }
    });
    // On failure the sender's drop ends every task's wait, with an error.
    gate()?;
    start_tx.send_replace(Some(Instant::now()));
    rt.block_on(async {
        let mut timed = Vec::with_capacity(tasks.len());
        for task in tasks {
            timed.push(task.await??);
        }
        Ok::<Vec<Timed>, BoxError>(timed)
    })
}

/// The sessions' runs as one [`Measured`]: every call over the longest window; bytes per step
/// when every journal is in a directory.
pub(super) fn sessions_measured(timed: &[Timed], ats: &[At]) -> Result<Measured, BoxError> {
    let (mut steps, mut syncs, mut seconds, mut bytes) = (0u64, 0u64, 0f64, Some(0u64));
    let mut step_us = Vec::new();
    for (t, at) in timed.iter().zip(ats) {
        step_us.extend_from_slice(&t.step_us);
        steps += t.steps;
        syncs += t.syncs;
        seconds = seconds.max(t.seconds);
        bytes = match (bytes, at) {
            (Some(b), At::Dir(d)) => Some(b + journal_bytes(d)?),
            _ => None,
        };
    }
    // The warm-up's steps wrote bytes too.
    let written_steps = steps + (WARMUP_STEPS * ats.len()) as u64;
    Ok(Measured {
        calls: steps,
        steps,
        seconds,
        syncs: Some(syncs),
        bytes_per_step: bytes.map(|b| b as f64 / written_steps.max(1) as f64),
        step_us,
    })
}

/// `writers` threads at once, each appending `write_bytes` to its own file in `dir` and
/// fdatasyncing it, one at a time, for `time` (from when all have opened their files).
pub(super) fn raw_writers_run(
    dir: &Path,
    writers: usize,
    write_bytes: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let record = vec![0xA5u8; write_bytes];
    let opened = |i: usize| -> Result<std::fs::File, BoxError> {
        let path = dir.join(format!("raw{i}"));
        Ok(OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)?)
    };
    let syncs = |mut file: std::fs::File, done: &dyn Fn() -> bool| -> Result<u64, BoxError> {
        let mut syncs = 0u64;
        while !done() {
            file.write_all(&record)?;
            file.sync_data()?;
            syncs += 1;
        }
        Ok(syncs)
    };
    threads_run(writers, write_bytes, time, opened, syncs)
}

/// [`raw_writers_run`] with overwrites: each thread overwrites its own preallocated file, as
/// a journal's preallocated segment is (no sync carries a size change).
fn raw_overwriters_run(
    dir: &Path,
    writers: usize,
    write_bytes: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let opened = |i: usize| crate::disk::preallocated_file(&dir.join(format!("over{i}")));
    let syncs = |file: std::fs::File, done: &dyn Fn() -> bool| {
        crate::disk::overwrite_fdatasync(&file, write_bytes, done)
    };
    threads_run(writers, write_bytes, time, opened, syncs)
}

/// `writers` threads, each opening its file (`open`), then, from when all have, syncing with
/// `sync` until `time` has passed; the syncs of all as one raw [`Measured`].
fn threads_run(
    writers: usize,
    write_bytes: usize,
    time: Duration,
    open: impl Fn(usize) -> Result<std::fs::File, BoxError> + Sync,
    sync: impl Fn(std::fs::File, &dyn Fn() -> bool) -> Result<u64, BoxError> + Sync,
) -> Result<Measured, BoxError> {
    let barrier = std::sync::Barrier::new(writers);
    let start = OnceLock::new();
    let results: Vec<Result<(u64, f64), BoxError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|i| {
                let (barrier, start, open, sync) = (&barrier, &start, &open, &sync);
                scope.spawn(move || {
                    let file = open(i);
                    // Every thread reaches the barrier, failed or not, so none waits forever.
                    barrier.wait();
                    let start: Instant = *start.get_or_init(Instant::now);
                    let syncs = sync(file?, &|| start.elapsed() >= time)?;
                    Ok((syncs, start.elapsed().as_secs_f64()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a raw writer thread panicked".into()))
            })
            .collect()
    });
    let (mut syncs, mut seconds) = (0u64, 0f64);
    for r in results {
        let (s, t) = r?;
        syncs += s;
        seconds = seconds.max(t);
    }
    Ok(Measured::raw(syncs, seconds, write_bytes))
}

/// `count` new directories `dir/<prefix><i>`.
pub(super) fn subdirs(dir: &Path, prefix: &str, count: usize) -> Result<Vec<PathBuf>, BoxError> {
    (0..count)
        .map(|i| {
            let d = dir.join(format!("{prefix}{i}"));
            std::fs::create_dir(&d)?;
            Ok(d)
        })
        .collect()
}

/// One thread holding `files` files in `dir`: appends `write_bytes` to each, then one
/// `syncfs` makes them all durable (with whatever else the file system holds dirty), over and
/// over for `time`: one writer thread for many journals, sharing a sync. Returns the appends
/// made durable (in the [`Measured`]'s calls) and the syncfs calls (its syncs).
fn syncfs_run(
    dir: &Path,
    files: usize,
    write_bytes: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let mut open = (0..files)
        .map(|i| {
            OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(dir.join(format!("shared{i}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let record = vec![0xA5u8; write_bytes];
    let (mut appends, mut syncs) = (0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < time {
        for file in &mut open {
            file.write_all(&record)?;
        }
        rustix::fs::syncfs(&open[0])?;
        (appends, syncs) = (appends + files as u64, syncs + 1);
    }
    Ok(Measured {
        calls: appends,
        steps: appends,
        seconds: start.elapsed().as_secs_f64(),
        syncs: Some(syncs),
        bytes_per_step: Some(write_bytes as f64),
        step_us: Vec::new(),
    })
}

/// `run` in a fresh directory `base/name`, with what it cost the process per call.
fn with_usage(
    base: &Path,
    name: &str,
    run: impl FnOnce(&Path) -> Result<Measured, BoxError>,
) -> Result<(Measured, String), BoxError> {
    let before = Usage::now();
    let m = crate::disk::in_dir(base, name, run)?;
    let usage = Usage::per_call_since(before, m.calls);
    Ok((m, usage))
}

/// The hidden `many-loop` subcommand, for deciding whether sessions in one process should share
/// fsyncs: `sessions` sessions at once on a runtime of `workers` worker threads, then as many
/// raw writer threads (append + fdatasync each), then one thread appending to as many files
/// and making them durable with one `syncfs`; each for `seconds`.
pub(crate) fn many_loop(
    common: &crate::Common,
    sessions: usize,
    workers: usize,
    seconds: f64,
) -> Result<(), BoxError> {
    let base = crate::disk::scratch_base(common.dir.as_deref())?;
    let time = Duration::from_secs_f64(seconds);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()?;
    // The usage counts the warm-up too: a few steps per session, against thousands.
    let before = Usage::now();
    let shared_before = journal::shared_sync_stats();
    let m = crate::disk::in_dir(base.path(), "sessions", |d| {
        sessions_run(&rt, d, sessions, time)
    })?;
    println!(
        "{sessions} sessions, {workers} workers: {:.1} calls/s, {:.2} fsyncs/step, step p50 {:.2} ms, p99 {:.2} ms\n  {}",
        m.calls_per_s(),
        m.syncs_per_step().unwrap_or(0.0),
        m.step_ms_percentile(0.5).unwrap_or(0.0),
        m.step_ms_percentile(0.99).unwrap_or(0.0),
        Usage::per_call_since(before, m.calls),
    );
    let shared = journal::shared_sync_stats();
    println!(
        "  shared syncs: {} syncfs for {} journal syncs, {} handed back, {} alone",
        shared.syncfs - shared_before.syncfs,
        shared.journals_synced - shared_before.journals_synced,
        shared.handed_back - shared_before.handed_back,
        shared.alone - shared_before.alone,
    );
    drop(rt);
    let (m, usage) = with_usage(base.path(), "raw", |d| {
        raw_writers_run(d, sessions, 100, time)
    })?;
    println!(
        "{sessions} raw writer threads: {:.1} append+fdatasync/s in total\n  {usage}",
        m.calls_per_s(),
    );
    let (m, usage) = with_usage(base.path(), "over", |d| {
        raw_overwriters_run(d, sessions, 100, time)
    })?;
    println!(
        "{sessions} raw overwriter threads (preallocated files): {:.1} overwrite+fdatasync/s in total\n  {usage}",
        m.calls_per_s(),
    );
    let (m, usage) = with_usage(base.path(), "syncfs", |d| {
        syncfs_run(d, sessions, 100, time)
    })?;
    println!(
        "1 thread, {sessions} files, 1 syncfs per round of appends: {:.1} durable appends/s ({:.1} syncfs/s)\n  {usage}",
        m.calls_per_s(),
        m.syncs.unwrap_or(0) as f64 / m.seconds,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_at_once_each_journal_their_calls_with_one_sync_per_step() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let m = sessions_run(&rt, dir.path(), 3, Duration::from_millis(100)).expect("the run");
        assert!(m.calls >= 3, "{} calls", m.calls);
        assert_eq!(m.calls, m.steps);
        // One sync per step, plus each session's turn end.
        assert_eq!(m.syncs, Some(m.steps + 3));
        for i in 0..3 {
            assert!(journal_bytes(&dir.path().join(format!("s{i}"))).expect("bytes") > 0);
        }
    }

    #[test]
    fn raw_writers_each_write_their_own_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let m = raw_writers_run(dir.path(), 3, 100, Duration::from_millis(30)).expect("the run");
        let bytes: u64 = (0..3)
            .map(|i| {
                std::fs::metadata(dir.path().join(format!("raw{i}")))
                    .expect("a writer's file")
                    .len()
            })
            .sum();
        assert_eq!(bytes, 100 * m.calls);
    }
}
