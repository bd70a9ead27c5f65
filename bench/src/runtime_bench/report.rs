//! The `runtime` benchmark's figures: the `--json` object (the keys docs/PERFORMANCE.md lists;
//! the PostgreSQL ones are null when there is no PostgreSQL), the targets they are held to, and
//! the table printed otherwise, one section per kind of run.

use super::closed::CLOSED_DISK_VS_RECORDS_TARGET;
use super::measured::Measured;
use super::postgres::PgState;
use super::procs::{PROCS, SESSIONS_PER_PROC};
use super::rounds::Run;
use super::{Figures, Plan, RAW_APPEND_BYTES};
use crate::bar::Bar;
use crate::{BoxError, MB};
use serde::Serialize;
use std::path::Path;

const SEQ_VS_FSYNC_LIMIT_TARGET: f64 = 0.8;
const SEQ_VS_JSONL_FSYNC_TARGET: f64 = 5.0;
const SEQ_VS_SQLITE_CALL_TARGET: f64 = 1.0;
// Raised with journal format 2 (they were 100,000 and 400).
// Raised with journal format 2 (was 10), then with issue 43 (was 11).
const PAR16_VS_SEQ_TARGET: f64 = 14.0;
const NOSYNC_CALLS_PER_S_TARGET: f64 = 250_000.0;
const RECOVER_MB_PER_S_TARGET: f64 = 1_000.0;
const RECOVER_PEAK_RSS_MB_TARGET: f64 = 64.0;
// The keys added with journal format 2.
const SEQ_VS_RAW_APPEND_TARGET: f64 = 1.0;
const SEQ_VS_JSONL_SAME_PLAN_TARGET: f64 = 1.1;
const SESSIONS64_VS_RAW64_TARGET: f64 = 0.8;
const REBUILD_MB_PER_S_TARGET: f64 = 300.0;
const REBUILD_PEAK_RSS_MB_TARGET: f64 = 64.0;
const AUDIT_PEAK_RSS_MB_TARGET: f64 = 64.0;
// The keys added with issue 43 (many sessions sharing their syncs).
const SESSIONS256_VS_RAW256_TARGET: f64 = 0.8;
const SEQ_VS_SQLITE_SAME_PLAN_TARGET: f64 = 1.3;

/// The `--json` object: the first keys, then those added with journal format 2 (raw rates,
/// the same-plan baselines, many sessions, rebuild and audit), then `audit --html`'s, the
/// PostgreSQL ones, and a closed session's bytes.
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
    raw_overwrite_fdatasync_per_s: f64,
    jsonl_same_plan_calls_per_s: f64,
    sqlite_same_plan_calls_per_s: f64,
    sessions1_calls_per_s: f64,
    sessions8_calls_per_s: f64,
    sessions64_calls_per_s: f64,
    raw8_fdatasync_per_s: f64,
    raw64_fdatasync_per_s: f64,
    sessions256_calls_per_s: f64,
    raw256_fdatasync_per_s: f64,
    sessions256_vs_raw256: f64,
    /// A durable one-call step's time under 64 sessions: 50th and 99th percentiles, in ms.
    p50_call_ms: f64,
    p99_call_ms: f64,
    /// Journal bytes per call in the seq run.
    bytes_per_call: f64,
    /// seq ÷ the append + fdatasync rate at 100 B: `seq_vs_fsync_limit` under a truthful name.
    seq_vs_raw_append: f64,
    seq_vs_jsonl_same_plan: f64,
    seq_vs_sqlite_same_plan: f64,
    sessions64_vs_raw64: f64,
    /// `recover rebuild --dry-run --format anthropic` (both readings), into a sink.
    rebuild_mb_per_s: f64,
    rebuild_peak_rss_mb: f64,
    /// `recover audit --json` (both readings), into a sink.
    audit_peak_rss_mb: f64,
    /// `recover audit --html FILE` (both readings, the default bound of 32 MiB).
    audit_html_peak_rss_mb: f64,
    audit_html_seconds: f64,
    audit_html_bytes: u64,
    /// seq and par16 with the journal in PostgreSQL (null: no PostgreSQL).
    pg_seq_calls_per_s: Option<f64>,
    pg_par16_calls_per_s: Option<f64>,
    pg_seq_vs_seq: Option<f64>,
    pg_par16_vs_par16: Option<f64>,
    /// Both one commit per call at `started`: SQLite's WAL commit, PostgreSQL's transaction.
    pg_seq_vs_sqlite_same_plan: Option<f64>,
    /// 64 sessions over 4 worker processes, on one PostgreSQL and on local segment files.
    pg_sessions64_procs4_calls_per_s: Option<f64>,
    files_sessions64_procs4_calls_per_s: f64,
    pg_vs_files_sessions64_procs4: Option<f64>,
    /// A closed short session's segment files over its records' frames.
    closed_disk_vs_records: f64,
    closed_disk_bytes: u64,
    closed_record_bytes: u64,
}

impl Report {
    pub(super) fn new(f: &Figures) -> Report {
        let r = &f.rounds;
        let rate = |run| r.get(run).calls_per_s();
        let pg_rate = |run| r.ran(run).map(Measured::calls_per_s);
        let files_procs4 = rate(Run::FilesProcs4);
        let fdatasync_per_s = rate(Run::Raw);
        let seq = rate(Run::Seq);
        Report {
            fdatasync_per_s,
            seq_calls_per_s: seq,
            par16_calls_per_s: rate(Run::Par16),
            jsonl_fsync_calls_per_s: rate(Run::Jsonl),
            sqlite_event_calls_per_s: rate(Run::SqliteEvent),
            sqlite_call_calls_per_s: rate(Run::SqliteCall),
            sled_flush_calls_per_s: rate(Run::Sled),
            nosync_calls_per_s: f.nosync.calls_per_s(),
            recover_mb_per_s: f.child.mb_per_s(),
            recover_peak_rss_mb: f.child.peak_rss_mb(),
            seq_vs_fsync_limit: seq / fdatasync_per_s,
            seq_vs_jsonl_fsync: seq / rate(Run::Jsonl),
            seq_vs_sqlite_call: seq / rate(Run::SqliteCall),
            par16_vs_seq: rate(Run::Par16) / seq,
            raw_overwrite_fdatasync_per_s: rate(Run::RawOverwrite),
            jsonl_same_plan_calls_per_s: rate(Run::JsonlSamePlan),
            sqlite_same_plan_calls_per_s: rate(Run::SqliteSamePlan),
            sessions1_calls_per_s: rate(Run::Sessions1),
            sessions8_calls_per_s: rate(Run::Sessions8),
            sessions64_calls_per_s: rate(Run::Sessions64),
            raw8_fdatasync_per_s: rate(Run::Raw8),
            raw64_fdatasync_per_s: rate(Run::Raw64),
            sessions256_calls_per_s: rate(Run::Sessions256),
            raw256_fdatasync_per_s: rate(Run::Raw256),
            sessions256_vs_raw256: rate(Run::Sessions256) / rate(Run::Raw256),
            p50_call_ms: r
                .get(Run::Sessions64)
                .step_ms_percentile(0.5)
                .unwrap_or(0.0),
            p99_call_ms: r
                .get(Run::Sessions64)
                .step_ms_percentile(0.99)
                .unwrap_or(0.0),
            bytes_per_call: r.get(Run::Seq).bytes_per_call().unwrap_or(0.0),
            seq_vs_raw_append: seq / fdatasync_per_s,
            seq_vs_jsonl_same_plan: seq / rate(Run::JsonlSamePlan),
            seq_vs_sqlite_same_plan: seq / rate(Run::SqliteSamePlan),
            sessions64_vs_raw64: rate(Run::Sessions64) / rate(Run::Raw64),
            rebuild_mb_per_s: f.child.rebuild.as_ref().map_or(0.0, |r| r.mb_per_s()),
            rebuild_peak_rss_mb: f.child.rebuild.as_ref().map_or(0.0, |r| r.peak_rss_mb()),
            audit_peak_rss_mb: f.child.audit.as_ref().map_or(0.0, |r| r.peak_rss_mb()),
            audit_html_peak_rss_mb: f.child.audit_html.as_ref().map_or(0.0, |r| r.peak_rss_mb()),
            audit_html_seconds: f.child.audit_html.as_ref().map_or(0.0, |r| r.seconds),
            audit_html_bytes: f
                .child
                .audit_html
                .as_ref()
                .and_then(|r| r.output_bytes)
                .unwrap_or(0),
            pg_seq_calls_per_s: pg_rate(Run::PgSeq),
            pg_par16_calls_per_s: pg_rate(Run::PgPar16),
            pg_seq_vs_seq: pg_rate(Run::PgSeq).map(|pg| pg / seq),
            pg_par16_vs_par16: pg_rate(Run::PgPar16).map(|pg| pg / rate(Run::Par16)),
            pg_seq_vs_sqlite_same_plan: pg_rate(Run::PgSeq)
                .map(|pg| pg / rate(Run::SqliteSamePlan)),
            pg_sessions64_procs4_calls_per_s: pg_rate(Run::PgProcs4),
            files_sessions64_procs4_calls_per_s: files_procs4,
            pg_vs_files_sessions64_procs4: pg_rate(Run::PgProcs4).map(|pg| pg / files_procs4),
            closed_disk_vs_records: f.closed.ratio(),
            closed_disk_bytes: f.closed.disk_bytes,
            closed_record_bytes: f.closed.record_bytes,
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
    /// `chart`'s bar for this target.
    pub(super) fn bar(&self) -> Bar {
        if self.at_least {
            Bar::at_least("runtime", self.name, self.value, self.target)
        } else {
            Bar::at_most("runtime", self.name, self.value, self.target)
        }
    }

    fn met(&self) -> bool {
        if self.at_least {
            self.value >= self.target
        } else {
            self.value <= self.target
        }
    }
}

pub(super) fn targets(report: &Report) -> [Target; 16] {
    let at_least = |name, value, target| Target {
        name,
        value,
        target,
        at_least: true,
    };
    let at_most = |name, value, target| Target {
        name,
        value,
        target,
        at_least: false,
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
        at_least(
            "seq_vs_raw_append",
            report.seq_vs_raw_append,
            SEQ_VS_RAW_APPEND_TARGET,
        ),
        at_least(
            "seq_vs_jsonl_same_plan",
            report.seq_vs_jsonl_same_plan,
            SEQ_VS_JSONL_SAME_PLAN_TARGET,
        ),
        at_least(
            "sessions64_vs_raw64",
            report.sessions64_vs_raw64,
            SESSIONS64_VS_RAW64_TARGET,
        ),
        at_least(
            "sessions256_vs_raw256",
            report.sessions256_vs_raw256,
            SESSIONS256_VS_RAW256_TARGET,
        ),
        at_least(
            "seq_vs_sqlite_same_plan",
            report.seq_vs_sqlite_same_plan,
            SEQ_VS_SQLITE_SAME_PLAN_TARGET,
        ),
        at_least(
            "rebuild_mb_per_s",
            report.rebuild_mb_per_s,
            REBUILD_MB_PER_S_TARGET,
        ),
        at_most(
            "rebuild_peak_rss_mb",
            report.rebuild_peak_rss_mb,
            REBUILD_PEAK_RSS_MB_TARGET,
        ),
        at_most(
            "audit_peak_rss_mb",
            report.audit_peak_rss_mb,
            AUDIT_PEAK_RSS_MB_TARGET,
        ),
        at_most(
            "closed_disk_vs_records",
            report.closed_disk_vs_records,
            CLOSED_DISK_VS_RECORDS_TARGET,
        ),
    ]
}

/// `--json`: the object on stdout; it holds only the figures' keys, so the verdicts go to
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
    print_durable(plan, f, report);
    println!();
    print_many(plan, f);
    println!();
    print_pg(plan, f);
    println!();
    print_pipeline(plan, &f.nosync);
    println!();
    print_recovery(f, report);
    println!();
    print_closed(report);
    println!();
    print_ratios(report);
    println!();
    print_targets(targets);
}

fn print_raw(plan: &Plan, f: &Figures, report: &Report) {
    let r = &f.rounds;
    println!(
        "Raw disk (write + fdatasync, one at a time per writer; {} rounds x {:.1} s)",
        plan.rounds,
        plan.slice.as_secs_f64()
    );
    let row = |name: &str, rate: f64, how: &str| println!("  {name:<30} {rate:>10.1} /s   ({how})");
    row(
        "fdatasync_per_s",
        report.fdatasync_per_s,
        &format!("{RAW_APPEND_BYTES}-byte appends: every sync also updates the file's size"),
    );
    row(
        "raw_overwrite_fdatasync_per_s",
        report.raw_overwrite_fdatasync_per_s,
        &format!("{RAW_APPEND_BYTES}-byte overwrites in a preallocated, zero-filled file"),
    );
    row(
        &format!("{}-byte appends", r.step_bytes),
        r.get(Run::RawStep).calls_per_s(),
        "the bytes one seq step writes",
    );
    row(
        "raw8_fdatasync_per_s",
        report.raw8_fdatasync_per_s,
        "8 threads at once, each appending 100 bytes to its own file; in total",
    );
    row(
        "raw64_fdatasync_per_s",
        report.raw64_fdatasync_per_s,
        "64 threads at once, the same",
    );
    row(
        "raw256_fdatasync_per_s",
        report.raw256_fdatasync_per_s,
        "256 threads at once, the same",
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

fn print_durable(plan: &Plan, f: &Figures, report: &Report) {
    let r = &f.rounds;
    println!(
        "Durable tool calls (a no-op tool; a call = 6 transition records; {} rounds x {:.1} s)",
        plan.rounds,
        plan.slice.as_secs_f64()
    );
    println!(
        "  {:<29} {:>10} {:>12} {:>11}  how",
        "", "calls/s", "fsyncs/step", "bytes/step"
    );
    let rows = [
        ("seq_calls_per_s", Run::Seq, "runtime, policy group: 1 call per step"),
        (
            "par16_calls_per_s",
            Run::Par16,
            "runtime, policy group: 16 parallel-safe calls per step",
        ),
        (
            "jsonl_fsync_calls_per_s",
            Run::Jsonl,
            "JSON lines, fdatasync after each record",
        ),
        (
            "jsonl_same_plan_calls_per_s",
            Run::JsonlSamePlan,
            "JSON lines, the runtime's plan: 1 write + fdatasync per call, at `started`",
        ),
        (
            "sqlite_event_calls_per_s",
            Run::SqliteEvent,
            "SQLite WAL, synchronous=FULL, 1 transaction per record",
        ),
        (
            "sqlite_call_calls_per_s",
            Run::SqliteCall,
            "SQLite WAL, synchronous=FULL, 1 transaction per call, committed at `committed`",
        ),
        (
            "sqlite_same_plan_calls_per_s",
            Run::SqliteSamePlan,
            "SQLite WAL, synchronous=FULL, the runtime's plan: 1 transaction per call, committed at `started`",
        ),
        (
            "sled_flush_calls_per_s",
            Run::Sled,
            "sled 0.34.7, flush after each record (sync_file_range: not power-loss durable)",
        ),
    ];
    for (name, run, how) in rows {
        durable_row(name, r.get(run), how);
    }
    println!(
        "  bytes_per_call {:>25.0} B    (the seq run's journal bytes per call)",
        report.bytes_per_call
    );
}

fn durable_row(name: &str, m: &Measured, how: &str) {
    println!(
        "  {:<29} {:>10.1} {:>12} {:>11}  {how}",
        name,
        m.calls_per_s(),
        m.syncs_per_step()
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
        m.bytes_per_step
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
    )
}

fn print_many(plan: &Plan, f: &Figures) {
    let r = &f.rounds;
    println!(
        "Many sessions at once (one process, 2-worker runtime; each session its own journal and \
         directory, steps of 1 no-op call; {} rounds x {:.1} s)",
        plan.rounds,
        plan.slice.as_secs_f64()
    );
    println!(
        "  {:<29} {:>10} {:>12} {:>11}  {:>10} {:>7}",
        "", "calls/s", "fsyncs/step", "bytes/step", "raw /s", "ratio"
    );
    let rows = [
        ("sessions1_calls_per_s", Run::Sessions1, Run::Raw),
        ("sessions8_calls_per_s", Run::Sessions8, Run::Raw8),
        ("sessions64_calls_per_s", Run::Sessions64, Run::Raw64),
        ("sessions256_calls_per_s", Run::Sessions256, Run::Raw256),
    ];
    for (name, run, raw) in rows {
        let (m, raw) = (r.get(run), r.get(raw).calls_per_s());
        println!(
            "  {:<29} {:>10.1} {:>12.2} {:>11.0}  {:>10.1} {:>7.2}",
            name,
            m.calls_per_s(),
            m.syncs_per_step().unwrap_or(0.0),
            m.bytes_per_step.unwrap_or(0.0),
            raw,
            m.calls_per_s() / raw
        );
    }
    println!(
        "  (raw /s: as many writer threads appending 100 bytes + fdatasync, each to its own file)"
    );
    let m = r.get(Run::Sessions64);
    println!(
        "  p99_call_ms {:>16.2} ms  (a durable one-call step under 64 sessions; p50 {:.2} ms; no target)",
        m.step_ms_percentile(0.99).unwrap_or(0.0),
        m.step_ms_percentile(0.5).unwrap_or(0.0),
    );
}

fn print_pg(plan: &Plan, f: &Figures) {
    let r = &f.rounds;
    let skipped = match &f.pg {
        PgState::Running(server) => {
            println!(
                "Journal in PostgreSQL (the bench's own server on a Unix socket: {}; \
                 a sync = 1 transaction committed; {} rounds x {:.1} s)",
                server.description,
                plan.rounds,
                plan.slice.as_secs_f64()
            );
            None
        }
        PgState::Skipped(why) => {
            println!("Journal in PostgreSQL: skipped: {why}");
            Some(why)
        }
    };
    println!("  {:<37} {:>10} {:>11}  how", "", "calls/s", "syncs/step");
    let procs = format!(
        "{} sessions: {PROCS} worker processes x {SESSIONS_PER_PROC}, steps of 1 no-op call, \
         summed over one window",
        PROCS * SESSIONS_PER_PROC
    );
    let rows = [
        (
            "pg_seq_calls_per_s",
            Run::PgSeq,
            "as seq: runtime, policy group, 1 call per step".to_owned(),
        ),
        (
            "pg_par16_calls_per_s",
            Run::PgPar16,
            "as par16: 16 parallel-safe calls per step".to_owned(),
        ),
        (
            "pg_sessions64_procs4_calls_per_s",
            Run::PgProcs4,
            format!("{procs}; one PostgreSQL"),
        ),
        (
            "files_sessions64_procs4_calls_per_s",
            Run::FilesProcs4,
            format!("{procs}; segment files"),
        ),
    ];
    for (name, run, how) in rows {
        match (r.ran(run), skipped) {
            (Some(m), _) => println!(
                "  {name:<37} {:>10.1} {:>11}  {how}",
                m.calls_per_s(),
                m.syncs_per_step()
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
            ),
            (None, Some(why)) => println!("  {name:<37} skipped: {why}"),
            (None, None) => println!("  {name:<37} did not run"),
        }
    }
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
    let seconds = |s: &Option<super::recovery::Streamed>| s.as_ref().map_or(0.0, |s| s.seconds);
    println!(
        "  rebuild_mb_per_s        {:>10.1} MB/s (`rebuild --dry-run --format anthropic`: two readings, {:.2} s)",
        report.rebuild_mb_per_s,
        seconds(&child.rebuild)
    );
    println!(
        "  rebuild_peak_rss_mb     {:>10.1} MB   (VmHWM)",
        report.rebuild_peak_rss_mb
    );
    println!(
        "  audit_peak_rss_mb       {:>10.1} MB   (VmHWM; `audit --json`: two readings, {:.2} s)",
        report.audit_peak_rss_mb,
        seconds(&child.audit)
    );
    println!(
        "  audit_html_peak_rss_mb  {:>10.1} MB   (VmHWM; `audit --html`: two readings, {:.2} s, a page of {:.1} MB, bound {:.1} MB)",
        report.audit_html_peak_rss_mb,
        report.audit_html_seconds,
        report.audit_html_bytes as f64 / MB,
        recover::HTML_BYTES_MAX_DEFAULT as f64 / MB
    );
}

/// What bounds `par16_vs_seq`: a par16 step is a seq step (the sync, and what one call costs
/// around it) plus 15 more calls; the ratio meets its target only when each added call costs
/// at most a share of a seq step, however fast the disk. Both from the two measured rates.
struct Par16Bound {
    /// Microseconds each of a par16 step's 15 added calls costs, as measured.
    added_call_us: f64,
    /// Microseconds each may cost for `par16_vs_seq` to reach its target.
    allowed_call_us: f64,
}

impl Par16Bound {
    fn new(seq_calls_per_s: f64, par16_calls_per_s: f64) -> Par16Bound {
        let calls = super::PAR_CALLS as f64;
        let added = calls - 1.0;
        let seq_step_us = 1e6 / seq_calls_per_s;
        let par16_step_us = calls * 1e6 / par16_calls_per_s;
        Par16Bound {
            added_call_us: (par16_step_us - seq_step_us) / added,
            allowed_call_us: seq_step_us * (calls / PAR16_VS_SEQ_TARGET - 1.0) / added,
        }
    }
}

fn print_ratios(report: &Report) {
    println!("Ratios, and what durability each side gives");
    let row = |name: &str, value: f64, how: &str| println!("  {name:<24} {value:>8.2}   {how}");
    row(
        "seq_vs_fsync_limit",
        report.seq_vs_fsync_limit,
        "seq / fdatasync_per_s (append); seq: `started` fdatasync'd before the body, the rest on the next step's sync",
    );
    row(
        "seq_vs_raw_append",
        report.seq_vs_raw_append,
        "the same ratio under the name of what it measures",
    );
    println!(
        "  {:<24} {:>8.2}   seq / raw_overwrite_fdatasync_per_s (not a key)",
        "",
        report.seq_calls_per_s / report.raw_overwrite_fdatasync_per_s
    );
    row(
        "seq_vs_jsonl_fsync",
        report.seq_vs_jsonl_fsync,
        "jsonl: every record fdatasync'd before the next is written (6 syncs per call)",
    );
    row(
        "seq_vs_jsonl_same_plan",
        report.seq_vs_jsonl_same_plan,
        "both: `started` fdatasync'd before the body, `settled`/`committed` on the next call's sync",
    );
    row(
        "seq_vs_sqlite_call",
        report.seq_vs_sqlite_call,
        "sqlite: a call's six records in one WAL commit (fsync) after `committed`",
    );
    row(
        "seq_vs_sqlite_same_plan",
        report.seq_vs_sqlite_same_plan,
        "both: one sync per call at `started` (sqlite: a WAL commit), the rest on the next",
    );
    row(
        "par16_vs_seq",
        report.par16_vs_seq,
        "par16: 16 calls' `started` behind one fdatasync",
    );
    let par16 = Par16Bound::new(report.seq_calls_per_s, report.par16_calls_per_s);
    println!(
        "  {:<24} {:>8.2}   us a par16 call adds to a seq step: (par16 step - seq step) / 15 (not a key)",
        "", par16.added_call_us
    );
    println!(
        "  {:<24} {:>8.2}   us an added call may take for par16_vs_seq {PAR16_VS_SEQ_TARGET}: seq step x (16/{PAR16_VS_SEQ_TARGET} - 1) / 15 (not a key)",
        "", par16.allowed_call_us
    );
    row(
        "sessions64_vs_raw64",
        report.sessions64_vs_raw64,
        "sessions: as seq, syncs shared (one syncfs) when others are in flight; raw: 64 threads append + fdatasync",
    );
    row(
        "sessions256_vs_raw256",
        report.sessions256_vs_raw256,
        "the same with 256 sessions and 256 raw writer threads",
    );
    print_pg_ratios(report);
}

/// The PostgreSQL ratios (a skipped one says so).
fn print_pg_ratios(report: &Report) {
    let row = |name: &str, value: Option<f64>, how: &str| match value {
        Some(v) => println!("  {name:<29} {v:>8.2}   {how}"),
        None => println!("  {name:<29} skipped  {how}"),
    };
    row(
        "pg_seq_vs_seq",
        report.pg_seq_vs_seq,
        "both: `started` durable before the body (PostgreSQL: a commit; files: an fdatasync)",
    );
    row(
        "pg_par16_vs_par16",
        report.pg_par16_vs_par16,
        "both: 16 calls' `started` behind one sync",
    );
    row(
        "pg_seq_vs_sqlite_same_plan",
        report.pg_seq_vs_sqlite_same_plan,
        "both: one commit per call at `started` (sqlite: a WAL commit, in process)",
    );
    row(
        "pg_vs_files_sessions64_procs4",
        report.pg_vs_files_sessions64_procs4,
        "64 sessions over 4 processes: one PostgreSQL / each journal its own files",
    );
}

fn print_closed(report: &Report) {
    println!("Closed session (one turn of warm-up steps, closed by the runtime)");
    println!(
        "  closed_disk_vs_records {:>10.4}   ({} bytes of segment files for {} bytes of frames)",
        report.closed_disk_vs_records, report.closed_disk_bytes, report.closed_record_bytes
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn par16_bound_is_the_measured_cost_per_added_call_and_what_the_target_allows() {
        // A seq step of 100 us and a par16 step of 160 us: 60 us for 15 added calls.
        let bound = Par16Bound::new(10_000.0, 100_000.0);
        assert!(
            (bound.added_call_us - 4.0).abs() < 1e-9,
            "{}",
            bound.added_call_us
        );
        // 14 allows a par16 step of 16 x 100 / 14 = 114.29 us: 0.952 us per added call.
        assert!((bound.allowed_call_us - 100.0 / 105.0).abs() < 1e-9);
        // At exactly the target, the measured cost is what the target allows.
        let at_target = Par16Bound::new(10_000.0, PAR16_VS_SEQ_TARGET * 10_000.0);
        assert!((at_target.added_call_us - at_target.allowed_call_us).abs() < 1e-9);
    }
}
