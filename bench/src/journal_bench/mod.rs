//! `journal`: the log alone, against the disk's own limit: durable appends under each fsync
//! policy and writer count, unsynced appends, the reader, and the reader on a crafted torn tail.
//! This file holds the plan and the order of the runs; `runs` measures, `report` prints.

mod report;
mod runs;

use crate::bar::Bar;
use crate::disk::{append_fdatasync_loop, scratch_base};
use crate::{say, BoxError, Common, MIB};
use journal::FsyncPolicy;
use report::{Durable, RawBatch, ReaderRun, Report, Target};
use std::fs;
use std::path::Path;
use std::time::Duration;

const DURABLE_RECORD_BYTES: usize = 100;
/// What one durable record puts in the file: 16 bytes of frame (length, crc, seq), the codec's
/// 8-byte length prefix, the payload.
const DURABLE_FRAME_BYTES: usize = 16 + 8 + DURABLE_RECORD_BYTES;
const WRITER_COUNTS: [usize; 3] = [1, 8, 64];
const GROUP_VS_LIMIT_TARGET: f64 = 0.8;
const READER_MB_PER_S_TARGET: f64 = 400.0;

struct Plan {
    mode: &'static str,
    fdatasync_time: Duration,
    durable_time: Duration,
    unsynced_bytes: u64,
    reader_bytes: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                mode: "quick",
                fdatasync_time: Duration::from_millis(500),
                durable_time: Duration::from_millis(500),
                unsynced_bytes: 32 * MIB,
                reader_bytes: 32 * MIB,
            }
        } else {
            Plan {
                mode: "full",
                fdatasync_time: Duration::from_secs(2),
                durable_time: Duration::from_secs(3),
                unsynced_bytes: 256 * MIB,
                reader_bytes: 256 * MIB,
            }
        }
    }
}

pub(crate) fn run(common: &Common) -> Result<(), BoxError> {
    let plan = Plan::new(common.quick);
    let report = measure(common, &plan)?;
    if common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        report::print_table(&report, &plan);
    }
    Ok(())
}

/// `chart`: the figures that have a target (all floors).
pub(crate) fn bars(common: &Common) -> Result<Vec<Bar>, BoxError> {
    let report = measure(common, &Plan::new(common.quick))?;
    Ok(report
        .targets
        .iter()
        .map(|t| Bar::at_least("journal", &t.name, t.value, t.target))
        .collect())
}

fn measure(common: &Common, plan: &Plan) -> Result<Report, BoxError> {
    let base = scratch_base(common.dir.as_deref())?;
    let rt = tokio::runtime::Builder::new_multi_thread().build()?;

    say("raw fdatasync rate");
    let fdatasync_per_s = fdatasync_rate(base.path(), DURABLE_RECORD_BYTES, plan.fdatasync_time)?;
    let raw_batch = raw_batches(base.path(), plan)?;
    let durable = durable_runs(&rt, base.path(), plan, fdatasync_per_s, &raw_batch)?;

    let mut unsynced = Vec::new();
    for size in [100, 4096] {
        say(&format!("unsynced appends: {size}-byte payloads"));
        let dir = base.path().join(format!("unsynced-{size}"));
        unsynced.push(runs::unsynced_run(&dir, size, plan.unsynced_bytes)?);
        fs::remove_dir_all(&dir)?;
    }

    let mut reader = Vec::new();
    for size in [100, 4096] {
        say(&format!("reader: {size}-byte payloads"));
        let dir = base.path().join(format!("reader-{size}"));
        reader.push(runs::reader_run(&dir, size, plan.reader_bytes)?);
        fs::remove_dir_all(&dir)?;
    }

    let mut crafted_tail = Vec::new();
    for size_mib in [1, 2, 4, 8] {
        say(&format!("reader: crafted {size_mib} MiB torn tail"));
        let dir = base.path().join(format!("crafted-{size_mib}"));
        crafted_tail.push(runs::crafted_tail_run(&dir, size_mib * MIB)?);
        fs::remove_dir_all(&dir)?;
    }

    let targets = targets(&durable, &reader);
    Ok(Report {
        mode: plan.mode,
        dir: base.path().display().to_string(),
        fdatasync_per_s,
        raw_batch,
        durable,
        unsynced,
        reader,
        crafted_tail,
        targets,
    })
}

/// The raw rate, as fdatasyncs per second of `write_bytes` appends (see
/// [`append_fdatasync_loop`]).
fn fdatasync_rate(dir: &Path, write_bytes: usize, time: Duration) -> Result<f64, BoxError> {
    let path = dir.join(format!("raw-fdatasync-{write_bytes}"));
    let (syncs, seconds) = append_fdatasync_loop(&path, write_bytes, time)?;
    fs::remove_file(&path)?;
    Ok(syncs as f64 / seconds)
}

/// The raw rate again for appends as large as each group batch (writers × frame bytes).
fn raw_batches(base: &Path, plan: &Plan) -> Result<Vec<RawBatch>, BoxError> {
    let mut raw_batch = Vec::new();
    for writers in WRITER_COUNTS.into_iter().filter(|&w| w > 1) {
        let write_bytes = writers * DURABLE_FRAME_BYTES;
        say(&format!("raw fdatasync rate, {write_bytes}-byte appends"));
        raw_batch.push(RawBatch {
            writers,
            write_bytes,
            fdatasync_per_s: fdatasync_rate(base, write_bytes, plan.fdatasync_time)?,
        });
    }
    Ok(raw_batch)
}

/// Durable appends under `always` and `group`, for every writer count.
fn durable_runs(
    rt: &tokio::runtime::Runtime,
    base: &Path,
    plan: &Plan,
    fdatasync_per_s: f64,
    raw_batch: &[RawBatch],
) -> Result<Vec<Durable>, BoxError> {
    let mut durable = Vec::new();
    for policy in [FsyncPolicy::Always, FsyncPolicy::Group] {
        for writers in WRITER_COUNTS {
            say(&format!("durable appends: {policy}, {writers} writers"));
            let dir = base.join(format!("durable-{policy}-{writers}"));
            let run = runs::durable_run(rt, &dir, policy, writers, plan.durable_time)?;
            // Only group commit batches; `always` writes one record per sync whatever the count.
            let same_size_raw = raw_batch
                .iter()
                .find(|r| policy == FsyncPolicy::Group && r.writers == writers)
                .map_or(fdatasync_per_s, |r| r.fdatasync_per_s);
            durable.push(run.finish(policy, writers, fdatasync_per_s, same_size_raw));
            fs::remove_dir_all(&dir)?;
        }
    }
    Ok(durable)
}

fn targets(durable: &[Durable], reader: &[ReaderRun]) -> Vec<Target> {
    let mut targets = Vec::new();
    for d in durable.iter().filter(|d| d.policy == "group") {
        targets.push(Target {
            name: format!("group_vs_limit, {} writers", d.writers),
            value: d.group_vs_limit,
            target: GROUP_VS_LIMIT_TARGET,
            met: d.group_vs_limit >= GROUP_VS_LIMIT_TARGET,
        });
    }
    for r in reader {
        targets.push(Target {
            name: format!("reader MB/s (warm), {}-byte payloads", r.payload_bytes),
            value: r.warm_read_mb_per_s,
            target: READER_MB_PER_S_TARGET,
            met: r.warm_read_mb_per_s >= READER_MB_PER_S_TARGET,
        });
    }
    targets
}
