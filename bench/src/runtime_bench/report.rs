//! The `runtime` benchmark's figures: the `--json` object (exactly the keys issue 8 lists), the
//! targets they are held to, and the table printed otherwise, one section per kind of run.

use super::measured::Measured;
use super::{Figures, Plan, RAW_APPEND_BYTES};
use crate::{BoxError, MB};
use serde::Serialize;
use std::path::Path;

const SEQ_VS_FSYNC_LIMIT_TARGET: f64 = 0.8;
const SEQ_VS_JSONL_FSYNC_TARGET: f64 = 5.0;
const SEQ_VS_SQLITE_CALL_TARGET: f64 = 1.0;
const PAR16_VS_SEQ_TARGET: f64 = 10.0;
const NOSYNC_CALLS_PER_S_TARGET: f64 = 100_000.0;
const RECOVER_MB_PER_S_TARGET: f64 = 400.0;
const RECOVER_PEAK_RSS_MB_TARGET: f64 = 64.0;

/// The `--json` object: exactly the keys issue 8 lists.
#[derive(Serialize)]
pub(super) struct Report {
    fdatasync_per_s: f64,
    seq_calls_per_s: f64,
    par16_calls_per_s: f64,
    jsonl_fsync_calls_per_s: f64,
    sqlite_event_calls_per_s: f64,
    sqlite_call_calls_per_s: f64,
    sled_flush_calls_per_s: f64,
    nosync_calls_per_s: f64,
    recover_mb_per_s: f64,
    recover_peak_rss_mb: f64,
    seq_vs_fsync_limit: f64,
    seq_vs_jsonl_fsync: f64,
    seq_vs_sqlite_call: f64,
    par16_vs_seq: f64,
}

impl Report {
    pub(super) fn new(f: &Figures) -> Report {
        let r = &f.rounds;
        let fdatasync_per_s = r.raw.calls_per_s();
        let seq = r.seq.calls_per_s();
        Report {
            fdatasync_per_s,
            seq_calls_per_s: seq,
            par16_calls_per_s: r.par16.calls_per_s(),
            jsonl_fsync_calls_per_s: r.jsonl.calls_per_s(),
            sqlite_event_calls_per_s: r.sqlite_event.calls_per_s(),
            sqlite_call_calls_per_s: r.sqlite_call.calls_per_s(),
            sled_flush_calls_per_s: r.sled.calls_per_s(),
            nosync_calls_per_s: f.nosync.calls_per_s(),
            recover_mb_per_s: f.child.mb_per_s(),
            recover_peak_rss_mb: f.child.peak_rss_mb(),
            seq_vs_fsync_limit: seq / fdatasync_per_s,
            seq_vs_jsonl_fsync: seq / r.jsonl.calls_per_s(),
            seq_vs_sqlite_call: seq / r.sqlite_call.calls_per_s(),
            par16_vs_seq: r.par16.calls_per_s() / seq,
        }
    }
}

pub(super) struct Target {
    name: &'static str,
    value: f64,
    target: f64,
    at_least: bool,
}

impl Target {
    fn met(&self) -> bool {
        if self.at_least {
            self.value >= self.target
        } else {
            self.value <= self.target
        }
    }
}

pub(super) fn targets(report: &Report) -> [Target; 7] {
    let at_least = |name, value, target| Target {
        name,
        value,
        target,
        at_least: true,
    };
    [
        at_least(
            "seq_vs_fsync_limit",
            report.seq_vs_fsync_limit,
            SEQ_VS_FSYNC_LIMIT_TARGET,
        ),
        at_least(
            "seq_vs_jsonl_fsync",
            report.seq_vs_jsonl_fsync,
            SEQ_VS_JSONL_FSYNC_TARGET,
        ),
        at_least(
            "seq_vs_sqlite_call",
            report.seq_vs_sqlite_call,
            SEQ_VS_SQLITE_CALL_TARGET,
        ),
        at_least("par16_vs_seq", report.par16_vs_seq, PAR16_VS_SEQ_TARGET),
        at_least(
            "nosync_calls_per_s",
            report.nosync_calls_per_s,
            NOSYNC_CALLS_PER_S_TARGET,
        ),
        at_least(
            "recover_mb_per_s",
            report.recover_mb_per_s,
            RECOVER_MB_PER_S_TARGET,
        ),
        Target {
            name: "recover_peak_rss_mb",
            value: report.recover_peak_rss_mb,
            target: RECOVER_PEAK_RSS_MB_TARGET,
            at_least: false,
        },
    ]
}

/// `--json`: the object on stdout; it holds only the keys, so the verdicts go to
/// stderr, where people look.
pub(super) fn print_json(report: &Report, targets: &[Target]) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string_pretty(report)?);
    for t in targets {
        eprintln!(
            "bench: target {} {:.2} ({} {}): {}",
            t.name,
            t.value,
            if t.at_least { ">=" } else { "<=" },
            t.target,
            if t.met() { "met" } else { "MISSED" }
        );
    }
    Ok(())
}

pub(super) fn print_table(
    plan: &Plan,
    dir: &Path,
    f: &Figures,
    report: &Report,
    targets: &[Target],
) {
    println!(
        "tooljournal bench: runtime ({} mode), in {}  [MB = 10^6 bytes]",
        plan.mode,
        dir.display()
    );
    println!();
    print_raw(plan, f, report);
    println!();
    print_durable(plan, f);
    println!();
    print_pipeline(plan, &f.nosync);
    println!();
    print_recovery(f, report);
    println!();
    print_ratios(report);
    println!();
    print_targets(targets);
}

fn print_raw(plan: &Plan, f: &Figures, report: &Report) {
    let r = &f.rounds;
    println!(
        "Raw disk limit (append + fdatasync, one at a time; {} rounds x {:.1} s)",
        plan.rounds,
        plan.slice.as_secs_f64()
    );
    println!(
        "  fdatasync_per_s         {:>10.1} /s   ({RAW_APPEND_BYTES}-byte appends)",
        report.fdatasync_per_s
    );
    println!(
        "  {:<23} {:>10.1} /s   (the bytes one seq step writes)",
        format!("{}-byte appends", r.step_bytes),
        r.raw_step.calls_per_s()
    );
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "  per round: fdatasync/s {}; seq calls/s {}",
        list(&r.raw_per_round),
        list(&r.seq_per_round)
    );
}

fn print_durable(plan: &Plan, f: &Figures) {
    let r = &f.rounds;
    println!(
        "Durable tool calls (a no-op tool; a call = 6 transition records; {} rounds x {:.1} s)",
        plan.rounds,
        plan.slice.as_secs_f64()
    );
    println!(
        "  {:<26} {:>10} {:>12} {:>11}  how",
        "", "calls/s", "fsyncs/step", "bytes/step"
    );
    durable_row(
        "seq_calls_per_s",
        &r.seq,
        "runtime, policy group: 1 call per step",
    );
    durable_row(
        "par16_calls_per_s",
        &r.par16,
        "runtime, policy group: 16 parallel-safe calls per step",
    );
    durable_row(
        "jsonl_fsync_calls_per_s",
        &r.jsonl,
        "JSON lines, fdatasync after each record",
    );
    durable_row(
        "sqlite_event_calls_per_s",
        &r.sqlite_event,
        "SQLite WAL, synchronous=FULL, 1 transaction per record",
    );
    durable_row(
        "sqlite_call_calls_per_s",
        &r.sqlite_call,
        "SQLite WAL, synchronous=FULL, 1 transaction per call",
    );
    durable_row(
        "sled_flush_calls_per_s",
        &r.sled,
        "sled 0.34.7, flush after each record (sync_file_range: not power-loss durable)",
    );
}

fn durable_row(name: &str, m: &Measured, how: &str) {
    println!(
        "  {:<26} {:>10.1} {:>12} {:>11}  {how}",
        name,
        m.calls_per_s(),
        m.syncs_per_step()
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
        m.bytes_per_step
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
    )
}

fn print_pipeline(plan: &Plan, nosync: &Measured) {
    println!(
        "Pipeline cost (policy never, 1 worker thread, 1 call per step, {:.1} s)",
        plan.nosync_time.as_secs_f64()
    );
    println!(
        "  nosync_calls_per_s      {:>10.1} /s   ({:.2} us per call)",
        nosync.calls_per_s(),
        1e6 / nosync.calls_per_s()
    );
}

fn print_recovery(f: &Figures, report: &Report) {
    let (generated, child) = (&f.generated, &f.child);
    println!("Recovery (`recover classify --dry-run` equivalent, in a child process)");
    println!(
        "  journal                 {:>10.1} MB   ({} segments, {} records, {} turns, {} steps, {} calls; written in {:.1} s)",
        generated.bytes as f64 / MB,
        generated.segments,
        generated.records,
        generated.turns,
        generated.steps,
        generated.calls,
        generated.seconds
    );
    println!(
        "  classified              {:>10} calls  ({} outcome unknown, {} not started) in {:.2} s",
        child.calls, child.outcome_unknown, child.not_started, child.seconds
    );
    println!(
        "  recover_mb_per_s        {:>10.1} MB/s",
        report.recover_mb_per_s
    );
    println!(
        "  recover_peak_rss_mb     {:>10.1} MB   (VmHWM; {:.1} MB before recovering)",
        report.recover_peak_rss_mb,
        child.rss_before_mb()
    );
}

fn print_ratios(report: &Report) {
    println!("Ratios");
    println!(
        "  seq_vs_fsync_limit      {:>10.2}   (seq / fdatasync_per_s)",
        report.seq_vs_fsync_limit
    );
    println!(
        "  seq_vs_jsonl_fsync      {:>10.2}   (seq / jsonl)",
        report.seq_vs_jsonl_fsync
    );
    println!(
        "  seq_vs_sqlite_call      {:>10.2}   (seq / sqlite, transaction per call)",
        report.seq_vs_sqlite_call
    );
    println!(
        "  par16_vs_seq            {:>10.2}   (par16 / seq)",
        report.par16_vs_seq
    );
}

fn print_targets(targets: &[Target]) {
    println!("Targets");
    for t in targets {
        println!(
            "  {:<22} {:>12.2}  (target {} {})  {}",
            t.name,
            t.value,
            if t.at_least { ">=" } else { "<=" },
            t.target,
            if t.met() { "met" } else { "MISSED" }
        );
    }
}
