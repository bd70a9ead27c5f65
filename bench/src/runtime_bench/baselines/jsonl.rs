//! A session log as JSON lines, made durable two ways: the plain way, an fdatasync after every
//! record (`run`), and the runtime's own plan (`run_same_plan`): one write and one fdatasync
//! per call, at its `started` record, carrying every record since the last one.

use super::{call_events, now_ms};
use crate::runtime_bench::measured::Measured;
use crate::BoxError;
use runtime::event::{Event, Record};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

fn create(dir: &Path) -> Result<File, BoxError> {
    Ok(OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(dir.join("session.jsonl"))?)
}

/// Appends `event` as one JSON line to `out`.
fn encode(out: &mut Vec<u8>, event: Event) -> Result<(), BoxError> {
    serde_json::to_writer(
        &mut *out,
        &Record {
            at_ms: now_ms(),
            event,
        },
    )?;
    out.push(b'\n');
    Ok(())
}

/// Every record written and fdatasynced on its own: six syncs per call, each record durable
/// before the next is written.
pub(in crate::runtime_bench) fn run(dir: &Path, time: Duration) -> Result<Measured, BoxError> {
    let mut file = create(dir)?;
    let mut line = Vec::with_capacity(1024);
    let (mut seq, mut calls, mut syncs, mut bytes) = (1u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < time {
        calls += 1;
        for event in call_events(calls, seq) {
            line.clear();
            encode(&mut line, event)?;
            file.write_all(&line)?;
            file.sync_data()?;
            (syncs, bytes) = (syncs + 1, bytes + line.len() as u64);
            seq += 1;
        }
    }
    Ok(Measured::counted(
        calls,
        start.elapsed().as_secs_f64(),
        syncs,
        bytes,
    ))
}

/// The runtime's plan for a step of one call (`runtime/src/pipeline.rs`, `write_ahead`): the
/// records are buffered as they happen; at `started` everything buffered (the previous call's
/// `settled` and `committed`, this call's `received` to `started`) goes out in one write and
/// one fdatasync, before the body would run; `settled` and `committed` ride on the next call's
/// sync. The last call's two are synced at the end, inside the timed window, as the runtime's
/// `end_turn` syncs its last step's.
pub(in crate::runtime_bench) fn run_same_plan(
    dir: &Path,
    time: Duration,
) -> Result<Measured, BoxError> {
    let mut file = create(dir)?;
    let mut pending = Vec::with_capacity(4096);
    let (mut seq, mut calls, mut syncs, mut bytes) = (1u64, 0u64, 0u64, 0u64);
    let mut sync = |file: &mut File, pending: &mut Vec<u8>| -> Result<(), BoxError> {
        file.write_all(pending)?;
        file.sync_data()?;
        (syncs, bytes) = (syncs + 1, bytes + pending.len() as u64);
        pending.clear();
        Ok(())
    };
    let start = Instant::now();
    while start.elapsed() < time {
        calls += 1;
        for event in call_events(calls, seq) {
            let started = matches!(event, Event::Started(_));
            encode(&mut pending, event)?;
            if started {
                sync(&mut file, &mut pending)?;
            }
            seq += 1;
        }
    }
    sync(&mut file, &mut pending)?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(Measured::counted(calls, seconds, syncs, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each call's six records reach the file, with one fdatasync per call plus the last one.
    #[test]
    fn the_same_plan_writes_six_records_per_call_and_syncs_once_per_call() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let m = run_same_plan(dir.path(), Duration::from_millis(50)).expect("the run");
        let text = std::fs::read_to_string(dir.path().join("session.jsonl")).expect("the log");
        assert!(m.calls > 0);
        assert_eq!(text.lines().count() as u64, 6 * m.calls);
        assert_eq!(m.syncs, Some(m.calls + 1));
        assert_eq!(m.bytes_per_step, Some(text.len() as f64 / m.calls as f64));
    }

    #[test]
    fn the_plain_way_syncs_every_record() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let m = run(dir.path(), Duration::from_millis(30)).expect("the run");
        let text = std::fs::read_to_string(dir.path().join("session.jsonl")).expect("the log");
        assert_eq!(text.lines().count() as u64, 6 * m.calls);
        assert_eq!(m.syncs, Some(6 * m.calls));
    }
}
