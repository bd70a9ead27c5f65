//! A session log as JSON lines, made durable the plain way: fdatasync after every record.

use super::{call_events, now_ms};
use crate::runtime_bench::measured::Measured;
use crate::BoxError;
use runtime::event::Record;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

pub(in crate::runtime_bench) fn run(dir: &Path, time: Duration) -> Result<Measured, BoxError> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(dir.join("session.jsonl"))?;
    let mut line = Vec::with_capacity(1024);
    let (mut seq, mut calls) = (1u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < time {
        calls += 1;
        for event in call_events(calls, seq) {
            line.clear();
            serde_json::to_writer(
                &mut line,
                &Record {
                    at_ms: now_ms(),
                    event,
                },
            )?;
            line.push(b'\n');
            file.write_all(&line)?;
            file.sync_data()?;
            seq += 1;
        }
    }
    Ok(Measured::calls_only(calls, start.elapsed().as_secs_f64()))
}
