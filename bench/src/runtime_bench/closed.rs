//! What a finished session costs on disk. A format-2 segment is zero-filled ahead of
//! its records while it is written; closing the session cuts the zeros, so a closed session's
//! segment files hold its headers and its frames and nothing else. Measured on a short session
//! (one turn of a few steps, as a small agent task leaves it), where a MiB of zeros left behind
//! would dwarf the records.

use super::session::{At, Driver};
use crate::disk::{journal_bytes, segment_bytes, segment_count};
use crate::BoxError;
use journal::FsyncPolicy;
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// A closed session's segment files over its records' frames: headers only on top.
pub(super) const CLOSED_DISK_VS_RECORDS_TARGET: f64 = 1.01;

/// The bytes a closed session left.
#[derive(Serialize)]
pub(super) struct Closed {
    /// The segment files' lengths, summed.
    pub(super) disk_bytes: u64,
    /// The records' frames, summed (no headers).
    pub(super) record_bytes: u64,
}

impl Closed {
    pub(super) fn ratio(&self) -> f64 {
        self.disk_bytes as f64 / self.record_bytes.max(1) as f64
    }
}

/// Runs a short session in `dir` (the warm-up's steps, then the turn's end and the session's
/// close, through the runtime's own `Session::close`) and measures what it left.
pub(super) fn measure(rt: &tokio::runtime::Runtime, dir: &Path) -> Result<Closed, BoxError> {
    let at = At::Dir(dir.to_owned());
    rt.block_on(async {
        let mut driver = Driver::open(&at, FsyncPolicy::Group, 1)?;
        driver.warm_up().await?;
        driver.timed(Instant::now(), Duration::ZERO).await?;
        Ok::<(), BoxError>(())
    })?;
    let headers = segment_count(dir)? * journal::segment::HEADER_BYTES as u64;
    Ok(Closed {
        disk_bytes: segment_bytes(dir)?,
        record_bytes: journal_bytes(dir)?.saturating_sub(headers),
    })
}
