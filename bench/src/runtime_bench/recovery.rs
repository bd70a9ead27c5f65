//! Recovery speed and peak memory: `recover classify --dry-run --json` on the generated
//! journal, in a child process (this binary's hidden `recover-child` subcommand) so that the peak
//! resident set it reports is the recovery's alone, not the benchmark's.

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
    let child = recover_in_child(&recover_dir)?;
    fs::remove_dir_all(&recover_dir)?;
    Ok((generated, child))
}

/// Runs `bench recover-child DIR` and reads its report.
fn recover_in_child(dir: &Path) -> Result<ChildReport, BoxError> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .arg("recover-child")
        .arg(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("the recovery child failed: {}", out.status).into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// This process's peak resident set so far, in KiB (`VmHWM`).
fn vm_hwm_kb() -> Result<u64, BoxError> {
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
pub(crate) fn recover_child(dir: &Path) -> Result<(), BoxError> {
    let bytes = segment_bytes(dir)?;
    let hwm_kb_before = vm_hwm_kb()?;
    let start = Instant::now();
    let mut listing = recover::listing::JsonListing::new(std::io::sink(), "bench");
    let streamed = recover::session::recover_streaming(dir, false, &|_, _| {}, &mut listing)?;
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
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
