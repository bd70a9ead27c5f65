//! Recovery speed and peak memory: `recover classify --dry-run --json`, `recover rebuild
//! --dry-run --format anthropic` and `recover audit --json` on the generated journal, each in
//! a child process (this binary's hidden `recover-child` subcommand) so that the peak resident
//! set it reports is that command's alone, not the benchmark's. Their output goes to a sink.

use super::generate::{generate, GenStats};
use crate::disk::segment_bytes;
use crate::{say, BoxError, MB, MIB};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

/// What the recovery child reports.
#[derive(Serialize, Deserialize)]
pub(super) struct ChildReport {
    pub(super) seconds: f64,
    pub(super) bytes: u64,
    pub(super) hwm_kb_before: u64,
    pub(super) hwm_kb_after: u64,
    pub(super) calls: u64,
    pub(super) outcome_unknown: u64,
    pub(super) not_started: u64,
    /// `rebuild` and `audit` on the same journal, each in its own child.
    #[serde(default)]
    pub(super) rebuild: Option<Streamed>,
    #[serde(default)]
    pub(super) audit: Option<Streamed>,
    /// `audit --html`, its page written to a file whose size is kept.
    #[serde(default)]
    pub(super) audit_html: Option<Streamed>,
}

/// What a `rebuild` or `audit` child reports.
#[derive(Serialize, Deserialize)]
pub(super) struct Streamed {
    pub(super) seconds: f64,
    pub(super) bytes: u64,
    pub(super) hwm_kb_after: u64,
    /// Bytes of what it wrote, when it wrote a file (`audit --html`).
    #[serde(default)]
    pub(super) output_bytes: Option<u64>,
}

impl Streamed {
    pub(super) fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / MB / self.seconds
    }
    pub(super) fn peak_rss_mb(&self) -> f64 {
        self.hwm_kb_after as f64 * 1024.0 / MB
    }
}

/// What a `recover-child` does.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum ChildWork {
    /// `recover classify --dry-run --json`.
    Classify,
    /// `recover rebuild --dry-run --format anthropic`.
    Rebuild,
    /// `recover audit --json`.
    Audit,
    /// `recover audit --html FILE` (the default bound).
    AuditHtml,
}

impl ChildReport {
    /// Segment bytes recovered per second.
    pub(super) fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / MB / self.seconds
    }
    pub(super) fn peak_rss_mb(&self) -> f64 {
        self.hwm_kb_after as f64 * 1024.0 / MB
    }
    pub(super) fn rss_before_mb(&self) -> f64 {
        self.hwm_kb_before as f64 * 1024.0 / MB
    }
}

/// Generates a journal of `target_bytes` under `base`, recovers it in a child process, and
/// removes it.
pub(super) fn measure(base: &Path, target_bytes: u64) -> Result<(GenStats, ChildReport), BoxError> {
    say(&format!(
        "recover: generating a journal of {} MiB",
        target_bytes / MIB
    ));
    let recover_dir = base.join("recover");
    let generated = generate(&recover_dir, target_bytes)?;
    say(&format!(
        "recover: classifying (read only) {:.1} MB in a child process",
        generated.bytes as f64 / MB
    ));
    let mut child: ChildReport = in_child(&recover_dir, "classify")?;
    say("recover: rebuilding (read only, anthropic) in a child process");
    child.rebuild = Some(in_child(&recover_dir, "rebuild")?);
    say("recover: auditing (--json) in a child process");
    child.audit = Some(in_child(&recover_dir, "audit")?);
    say("recover: auditing (--html, default bound) in a child process");
    child.audit_html = Some(in_child(&recover_dir, "audit-html")?);
    fs::remove_dir_all(&recover_dir)?;
    Ok((generated, child))
}

/// Runs `bench recover-child DIR --work WORK` and reads its report.
fn in_child<T: serde::de::DeserializeOwned>(dir: &Path, work: &str) -> Result<T, BoxError> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .arg("recover-child")
        .arg(dir)
        .arg("--work")
        .arg(work)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("the recovery child failed: {}", out.status).into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// This process's peak resident set so far, in KiB (`VmHWM`).
pub(crate) fn vm_hwm_kb() -> Result<u64, BoxError> {
    let status = fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmHWM in /proc/self/status".into())
}

/// The hidden `recover-child` subcommand: what `recover classify --dry-run --json` does
/// (open, replay and classify streaming, print the calls; append nothing), timed, with the
/// peak RSS of this process. The JSON goes to a sink.
pub(crate) fn recover_child(dir: &Path, work: ChildWork) -> Result<(), BoxError> {
    match work {
        ChildWork::Classify => classify_child(dir),
        ChildWork::Rebuild | ChildWork::Audit | ChildWork::AuditHtml => streamed_child(dir, work),
    }
}

/// `recover rebuild --dry-run --format anthropic` or `recover audit --json`, as the CLI does
/// them (two readings each), into a sink, timed, with the peak RSS of this process.
fn streamed_child(dir: &Path, work: ChildWork) -> Result<(), BoxError> {
    let bytes = segment_bytes(dir)?;
    let start = Instant::now();
    let mut output_bytes = None;
    match work {
        ChildWork::Rebuild => {
            let format = recover::providers::Format::Anthropic;
            let first = recover::rebuild_first_reading(dir, format, false, &|_, _| {}, None)?;
            recover::rebuild_write(dir, first, std::io::sink())?;
        }
        ChildWork::AuditHtml => {
            let page = dir.with_extension("html");
            let out = std::io::BufWriter::new(fs::File::create(&page)?);
            let first = recover::audit_first_reading(dir, &|_, _| {})?;
            let options = recover::HtmlOptions::default();
            recover::stream_html(dir, first, "bench", &options, out)?;
            output_bytes = Some(fs::metadata(&page)?.len());
            fs::remove_file(&page)?;
        }
        _ => {
            let first = recover::audit_first_reading(dir, &|_, _| {})?;
            recover::audit_stream(dir, first, "bench", true, std::io::sink())?;
        }
    }
    let report = Streamed {
        seconds: start.elapsed().as_secs_f64(),
        bytes,
        hwm_kb_after: vm_hwm_kb()?,
        output_bytes,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

fn classify_child(dir: &Path) -> Result<(), BoxError> {
    let bytes = segment_bytes(dir)?;
    let hwm_kb_before = vm_hwm_kb()?;
    let start = Instant::now();
    let mut listing = recover::JsonListing::new(std::io::sink(), "bench");
    let streamed = recover::Recovery::of(dir).stream(&mut listing)?;
    listing.finish(streamed.end, streamed.live, None)?;
    let seconds = start.elapsed().as_secs_f64();
    let hwm_kb_after = vm_hwm_kb()?;
    let report = ChildReport {
        seconds,
        bytes,
        hwm_kb_before,
        hwm_kb_after,
        calls: streamed.calls,
        outcome_unknown: streamed.outcome_unknown,
        not_started: streamed.not_started,
        rebuild: None,
        audit: None,
        audit_html: None,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
