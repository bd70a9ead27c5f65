//! The `journal` benchmark's measurements, each on a journal of its own: durable appends (many
//! writers waiting on their own records), unsynced appends, the reader, and the reader on a
//! crafted torn tail.

use super::report::{CraftedTailRun, Durable, ReaderRun, Unsynced};
use super::DURABLE_RECORD_BYTES;
use crate::disk::segment_bytes;
use crate::{BoxError, MB};
use journal::{FsStorage, FsyncPolicy, Journal, Limits, Options, ReadEnd, Reader, Storage};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn open_journal(dir: &Path, fsync: FsyncPolicy) -> Result<Journal, BoxError> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
    let options = Options {
        fsync,
        ..Options::default()
    };
    let (journal, _report) = Journal::open(storage, options)?;
    Ok(journal)
}

pub(super) struct DurableRun {
    seconds: f64,
    records: u64,
    syncs: u64,
}

impl DurableRun {
    pub(super) fn finish(
        self,
        policy: FsyncPolicy,
        writers: usize,
        fdatasync_per_s: f64,
        same_size_raw: f64,
    ) -> Durable {
        let appends_per_s = self.records as f64 / self.seconds;
        let records_per_sync = self.records as f64 / self.syncs.max(1) as f64;
        let fsyncs_per_s = self.syncs as f64 / self.seconds;
        Durable {
            policy: policy.to_string(),
            writers,
            record_bytes: DURABLE_RECORD_BYTES,
            seconds: self.seconds,
            records: self.records,
            syncs: self.syncs,
            appends_per_s,
            fsyncs_per_s,
            records_per_sync,
            group_vs_limit: appends_per_s / (fdatasync_per_s * records_per_sync),
            vs_same_size_raw: fsyncs_per_s / same_size_raw,
        }
    }
}

/// `writers` loops of append-then-wait-until-durable for `time`. Writers that are mid-append at
/// the deadline finish that record, so the clock stops when the last writer returns.
pub(super) fn durable_run(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    policy: FsyncPolicy,
    writers: usize,
    time: Duration,
) -> Result<DurableRun, BoxError> {
    let journal = Arc::new(open_journal(dir, policy)?);
    // Strings, like the runtime's events (raw JSON text): encoded as length + bytes in one copy.
    let payload = "Z".repeat(DURABLE_RECORD_BYTES);
    let start = Instant::now();
    let deadline = start + time;
    let records: u64 = match policy {
        FsyncPolicy::Always => thread_writers(&journal, &payload, writers, deadline)?,
        _ => rt.block_on(task_writers(&journal, &payload, writers, deadline))?,
    };
    let seconds = start.elapsed().as_secs_f64();
    // Read before close: close adds one sync of its own that no writer waited for.
    let syncs = journal.stats().syncs;
    // Cannot fail: the writers are done (scoped threads joined, tasks awaited), so no clone of
    // the Arc is left.
    #[allow(clippy::expect_used)]
    Arc::into_inner(journal)
        .expect("every writer has finished")
        .close()?;
    Ok(DurableRun {
        seconds,
        records,
        syncs,
    })
}

/// Under `always`, `append` blocks the thread on its own write+sync, so OS threads are the
/// honest model. Returns the records appended.
// A writer's panic is raised again when it is joined: the run means nothing without it.
#[allow(clippy::expect_used)]
fn thread_writers(
    journal: &Journal,
    payload: &str,
    writers: usize,
    deadline: Instant,
) -> Result<u64, BoxError> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                s.spawn(move || -> Result<u64, BoxError> {
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        journal.append(payload)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer thread panicked"))
            .sum::<Result<u64, BoxError>>()
    })
}

/// Under `group`, each writer is a task that appends and awaits its record's sync, as the
/// runtime does. Returns the records appended.
async fn task_writers(
    journal: &Arc<Journal>,
    payload: &str,
    writers: usize,
    deadline: Instant,
) -> Result<u64, BoxError> {
    let handles: Vec<_> = (0..writers)
        .map(|_| {
            let (journal, payload) = (journal.clone(), payload.to_owned());
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let seq = journal.append(&payload)?;
                    journal.sync_through(seq).await?;
                    n += 1;
                }
                Ok::<u64, BoxError>(n)
            })
        })
        .collect();
    let mut total = 0u64;
    for h in handles {
        total += h.await??;
    }
    Ok(total)
}

/// The encode-and-write path alone: no fsync, so this is the CPU and page-cache ceiling.
pub(super) fn unsynced_run(
    dir: &Path,
    payload_bytes: usize,
    total_bytes: u64,
) -> Result<Unsynced, BoxError> {
    let journal = open_journal(dir, FsyncPolicy::Never)?;
    let payload = "<".repeat(payload_bytes);
    let records = total_bytes / payload_bytes as u64;
    let start = Instant::now();
    for _ in 0..records {
        journal.append(&payload)?;
    }
    journal.close()?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(Unsynced {
        payload_bytes,
        records,
        seconds,
        payload_mb_per_s: (records * payload_bytes as u64) as f64 / MB / seconds,
        records_per_s: records as f64 / seconds,
    })
}

fn read_all(dir: &Path, records: u64) -> Result<f64, BoxError> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::open(dir)?);
    let start = Instant::now();
    let (end, read) = Reader::open(storage, Limits::default())?.drain()?;
    let seconds = start.elapsed().as_secs_f64();
    // A reader that stopped early would look fast; refuse to report that.
    if end != ReadEnd::Clean || read != records {
        return Err(format!("reader ended {end:?} after {read} of {records} records").into());
    }
    Ok(seconds)
}

pub(super) fn reader_run(
    dir: &Path,
    payload_bytes: usize,
    total_bytes: u64,
) -> Result<ReaderRun, BoxError> {
    let journal = open_journal(dir, FsyncPolicy::Never)?;
    let payload = "~".repeat(payload_bytes);
    // A frame is 16 bytes (length, crc, seq) plus the codec's 8-byte length prefix beyond the
    // payload; size the journal by what lands on disk.
    let records = total_bytes / (payload_bytes as u64 + 24);
    for _ in 0..records {
        journal.append(&payload)?;
    }
    journal.close()?;
    let bytes = segment_bytes(dir)?;
    let first = read_all(dir, records)?;
    let warm = read_all(dir, records)?;
    Ok(ReaderRun {
        payload_bytes,
        records,
        segment_bytes: bytes,
        first_read_seconds: first,
        first_read_mb_per_s: bytes as f64 / MB / first,
        warm_read_seconds: warm,
        warm_read_mb_per_s: bytes as f64 / MB / warm,
    })
}

/// A three-record journal, then `tail_bytes` of crafted garbage (see [`CraftedTailRun`]) on its
/// segment; times `Reader::open` + drain, which must end in a torn tail.
pub(super) fn crafted_tail_run(dir: &Path, tail_bytes: u64) -> Result<CraftedTailRun, BoxError> {
    let journal = open_journal(dir, FsyncPolicy::Never)?;
    for _ in 0..3 {
        journal.append(&"~".repeat(100))?;
    }
    journal.close()?;
    let segment = dir.join(journal::segment::file_name(0));
    let tail = crafted_tail(tail_bytes as usize);
    // Zeros to a segment's end are where its records end (format 2), not dropped bytes: the
    // reader drops the tail up to its last non-zero byte.
    let trailing_zeros = tail.iter().rev().take_while(|b| **b == 0).count() as u64;
    OpenOptions::new()
        .append(true)
        .open(&segment)?
        .write_all(&tail)?;
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::open(dir)?);
    let start = Instant::now();
    let mut reader = Reader::open(storage, Limits::default())?;
    while let Some(record) = reader.next_ref() {
        record?;
    }
    let seconds = start.elapsed().as_secs_f64();
    match reader.end() {
        Some(ReadEnd::TornTail(t)) if t.dropped_bytes == tail_bytes - trailing_zeros => {}
        other => return Err(format!("crafted tail: reader ended {other:?}").into()),
    }
    let work = reader.scan_work();
    Ok(CraftedTailRun {
        tail_bytes,
        seconds,
        tail_mb_per_s: tail_bytes as f64 / MB / seconds,
        candidates: work.candidates,
        checksummed_per_byte: work.bytes_checksummed as f64 / tail_bytes as f64,
    })
}

/// `n` bytes of garbage that open with an impossible length, then at every fourth offset a
/// length field that is plausible and fits in what is left (see [`CraftedTailRun`]).
fn crafted_tail(n: usize) -> Vec<u8> {
    let mut tail = vec![0u8; n];
    tail[..4].copy_from_slice(&[0xff; 4]);
    for p in (4..n.saturating_sub(15)).step_by(4) {
        tail[p..p + 4].copy_from_slice(&((n - p - 8) as u32).to_le_bytes());
    }
    tail
}
