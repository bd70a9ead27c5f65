//! What every durable run of `runtime` returns, whatever it measured (the runtime, a baseline,
//! the raw disk), so that the rounds can total them and the table can print them alike.

use crate::disk::{append_fdatasync_loop, overwrite_fdatasync_loop};
use crate::BoxError;
use std::path::Path;
use std::time::Duration;

/// One timed run: `calls` tool calls (of `steps` steps) in `seconds`.
pub(super) struct Measured {
    pub(super) calls: u64,
    pub(super) steps: u64,
    pub(super) seconds: f64,
    /// fdatasyncs issued in the timed window (the runtime's, counted by its journal; the raw
    /// loops' and the JSON-lines baselines', counted as they issue them).
    pub(super) syncs: Option<u64>,
    /// Bytes written per step (journal segment bytes for the runtime; file bytes for the raw
    /// loops and the JSON-lines baselines).
    pub(super) bytes_per_step: Option<f64>,
    /// Each timed step's time from its start to its calls' results, in microseconds (many
    /// sessions' runs only; empty elsewhere).
    pub(super) step_us: Vec<u32>,
}

impl Measured {
    /// A baseline's run: one call per step, no journal figures.
    pub(super) fn calls_only(calls: u64, seconds: f64) -> Measured {
        Measured {
            calls,
            steps: calls,
            seconds,
            syncs: None,
            bytes_per_step: None,
            step_us: Vec::new(),
        }
    }
    /// A raw loop's run: one "call" and one step per fdatasync of `write_bytes`.
    pub(super) fn raw(syncs: u64, seconds: f64, write_bytes: usize) -> Measured {
        Measured {
            calls: syncs,
            steps: syncs,
            seconds,
            syncs: Some(syncs),
            bytes_per_step: Some(write_bytes as f64),
            step_us: Vec::new(),
        }
    }
    /// A baseline's run that counts its own fdatasyncs and the bytes it wrote: one call per step.
    pub(super) fn counted(calls: u64, seconds: f64, syncs: u64, bytes: u64) -> Measured {
        Measured {
            calls,
            steps: calls,
            seconds,
            syncs: Some(syncs),
            bytes_per_step: Some(bytes as f64 / calls.max(1) as f64),
            step_us: Vec::new(),
        }
    }
    pub(super) fn calls_per_s(&self) -> f64 {
        self.calls as f64 / self.seconds
    }
    /// Bytes per call: per step, over the calls in a step.
    pub(super) fn bytes_per_call(&self) -> Option<f64> {
        self.bytes_per_step
            .map(|b| b * self.steps as f64 / self.calls.max(1) as f64)
    }
    /// The step time below which `p` of the steps took (nearest rank), in milliseconds; `None`
    /// without step times.
    pub(super) fn step_ms_percentile(&self, p: f64) -> Option<f64> {
        if self.step_us.is_empty() {
            return None;
        }
        let mut sorted = self.step_us.clone();
        sorted.sort_unstable();
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        Some(f64::from(sorted[rank - 1]) / 1000.0)
    }
    pub(super) fn syncs_per_step(&self) -> Option<f64> {
        self.syncs.map(|s| s as f64 / self.steps.max(1) as f64)
    }
    /// Adds another round's run: the totals make one measurement.
    fn add(&mut self, mut other: Measured) {
        self.step_us.append(&mut other.step_us);
        self.calls += other.calls;
        self.steps += other.steps;
        self.seconds += other.seconds;
        self.syncs = self.syncs.zip(other.syncs).map(|(a, b)| a + b);
        // Per step: weighted by steps.
        self.bytes_per_step = self.bytes_per_step.zip(other.bytes_per_step).map(|(a, b)| {
            (a * (self.steps - other.steps) as f64 + b * other.steps as f64)
                / self.steps.max(1) as f64
        });
    }
}

/// Sums a measurement over the rounds.
pub(super) fn accumulate(slot: &mut Option<Measured>, m: Measured) {
    match slot {
        Some(total) => total.add(m),
        None => *slot = Some(m),
    }
}

/// The raw rate (as `journal`'s: append `write_bytes`, fdatasync, one at a time) as a
/// [`Measured`]: one "call" per fdatasync.
pub(super) fn raw_run(
    dir: &Path,
    write_bytes: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let (syncs, seconds) = append_fdatasync_loop(&dir.join("raw"), write_bytes, time)?;
    Ok(Measured::raw(syncs, seconds, write_bytes))
}

/// The raw rate of overwrites in a preallocated, zero-filled file (what preallocated segments
/// would get), as a [`Measured`]: one "call" per fdatasync.
pub(super) fn raw_overwrite_run(
    dir: &Path,
    write_bytes: usize,
    time: Duration,
) -> Result<Measured, BoxError> {
    let (syncs, seconds) = overwrite_fdatasync_loop(&dir.join("raw"), write_bytes, time)?;
    Ok(Measured::raw(syncs, seconds, write_bytes))
}
