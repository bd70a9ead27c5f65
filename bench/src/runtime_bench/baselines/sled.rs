//! sled 0.34.7 with its defaults, `flush` after every record. Not durable against power loss:
//! on Linux its log write ends in `sync_file_range` (the pages written and waited for), not
//! `fsync`/`fdatasync`, so neither the disk's write cache nor the file's size is made durable
//! (`pagecache/iobuf.rs`, sled 0.34.7). Measured as what a user of sled's `flush` gets.

use super::{call_events, now_ms};
use crate::runtime_bench::measured::Measured;
use crate::BoxError;
use runtime::event::Record;
use std::path::Path;
use std::time::{Duration, Instant};

pub(in crate::runtime_bench) fn run(dir: &Path, time: Duration) -> Result<Measured, BoxError> {
    // `::sled`: the crate, not this module.
    let db = ::sled::Config::new().path(dir.join("db")).open()?;
    let (mut seq, mut calls) = (1u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < time {
        calls += 1;
        for event in call_events(calls, seq) {
            let body = serde_json::to_vec(&Record {
                at_ms: now_ms(),
                event,
            })?;
            db.insert(seq.to_be_bytes(), body)?;
            db.flush()?;
            seq += 1;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    drop(db);
    Ok(Measured::calls_only(calls, seconds))
}
