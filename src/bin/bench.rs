//! `bench`: measures tooljournal against the disk it runs on.
//!
//! Every durable figure is set against the raw fdatasync rate of the same disk, measured in the
//! same run: absolute numbers vary by orders of magnitude between machines, the ratio does not.
//! Missed targets are reported, never turned into a failing exit code: a slow CI disk or a noisy
//! neighbour is not a bug, and the numbers are worth seeing either way.
//!
//! Usage: `cargo run --release --bin bench -- journal [--quick] [--json] [--dir DIR]`.

use clap::{Args, Parser, Subcommand};
use journal::{FsStorage, FsyncPolicy, Journal, Limits, Options, ReadEnd, Reader, Storage};
use serde::Serialize;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Parser)]
#[command(name = "bench", about = "Benchmarks for tooljournal")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    common: Common,
}

/// Flags every benchmark takes (global, so they may come before or after the subcommand).
#[derive(Args, Clone, Debug)]
struct Common {
    /// Short runs (well under a minute in total).
    #[arg(long, global = true)]
    quick: bool,
    /// Print one JSON object with every figure instead of the table.
    #[arg(long, global = true)]
    json: bool,
    /// Directory to benchmark in (a temporary directory is made inside it and removed after);
    /// default: the system temporary directory.
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Raw fdatasync limit, durable appends (always/group), unsynced appends, reader speed.
    Journal,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Journal => journal_bench(&cli.common),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

const MB: f64 = 1e6;
const MIB: u64 = 1 << 20;
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

#[derive(Serialize)]
struct Report {
    mode: &'static str,
    dir: String,
    fdatasync_per_s: f64,
    /// The raw rate again, for appends as large as a full group batch (writers × frame bytes):
    /// a bigger write makes each fdatasync slower at the disk, which no journal can avoid.
    raw_batch: Vec<RawBatch>,
    durable: Vec<Durable>,
    unsynced: Vec<Unsynced>,
    reader: Vec<ReaderRun>,
    targets: Vec<Target>,
}

#[derive(Serialize)]
struct RawBatch {
    writers: usize,
    write_bytes: usize,
    fdatasync_per_s: f64,
}

#[derive(Serialize)]
struct Durable {
    policy: String,
    writers: usize,
    record_bytes: usize,
    seconds: f64,
    records: u64,
    syncs: u64,
    appends_per_s: f64,
    fsyncs_per_s: f64,
    records_per_sync: f64,
    /// appends_per_s / (fdatasync_per_s × records_per_sync): 1.0 means every sync ran at the
    /// raw disk rate, so the journal adds nothing but the batching it chose.
    group_vs_limit: f64,
    /// fsyncs_per_s against raw fdatasyncs of a batch-sized append (see `raw_batch`): how much
    /// of the gap to 1.0 is the journal's own overhead rather than the disk's.
    vs_same_size_raw: f64,
}

#[derive(Serialize)]
struct Unsynced {
    payload_bytes: usize,
    records: u64,
    seconds: f64,
    payload_mb_per_s: f64,
    records_per_s: f64,
}

#[derive(Serialize)]
struct ReaderRun {
    payload_bytes: usize,
    records: u64,
    segment_bytes: u64,
    first_read_seconds: f64,
    first_read_mb_per_s: f64,
    warm_read_seconds: f64,
    /// The figure that counts: the second read, with the segments in the page cache, so it
    /// measures the reader's own cost and not the disk's.
    warm_read_mb_per_s: f64,
}

#[derive(Serialize)]
struct Target {
    name: String,
    value: f64,
    target: f64,
    met: bool,
}

fn journal_bench(common: &Common) -> Result<(), BoxError> {
    let plan = Plan::new(common.quick);
    let base = match &common.dir {
        Some(dir) => {
            fs::create_dir_all(dir)?;
            tempfile::tempdir_in(dir)?
        }
        None => tempfile::tempdir()?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().build()?;
    let say = |msg: &str| {
        // Progress goes to stderr so that `--json` output stays one clean object on stdout.
        eprintln!("bench: {msg}");
    };

    say("raw fdatasync rate");
    let fdatasync_per_s = fdatasync_rate(base.path(), DURABLE_RECORD_BYTES, plan.fdatasync_time)?;
    let mut raw_batch = Vec::new();
    for writers in WRITER_COUNTS.into_iter().filter(|&w| w > 1) {
        let write_bytes = writers * DURABLE_FRAME_BYTES;
        say(&format!("raw fdatasync rate, {write_bytes}-byte appends"));
        raw_batch.push(RawBatch {
            writers,
            write_bytes,
            fdatasync_per_s: fdatasync_rate(base.path(), write_bytes, plan.fdatasync_time)?,
        });
    }

    let mut durable = Vec::new();
    for policy in [FsyncPolicy::Always, FsyncPolicy::Group] {
        for writers in WRITER_COUNTS {
            say(&format!("durable appends: {policy}, {writers} writers"));
            let dir = base.path().join(format!("durable-{policy}-{writers}"));
            let run = durable_run(&rt, &dir, policy, writers, plan.durable_time)?;
            // Only group commit batches; `always` writes one record per sync whatever the count.
            let same_size_raw = raw_batch
                .iter()
                .find(|r| policy == FsyncPolicy::Group && r.writers == writers)
                .map_or(fdatasync_per_s, |r| r.fdatasync_per_s);
            durable.push(run.finish(policy, writers, fdatasync_per_s, same_size_raw));
            fs::remove_dir_all(&dir)?;
        }
    }

    let mut unsynced = Vec::new();
    for size in [100, 4096] {
        say(&format!("unsynced appends: {size}-byte payloads"));
        let dir = base.path().join(format!("unsynced-{size}"));
        unsynced.push(unsynced_run(&dir, size, plan.unsynced_bytes)?);
        fs::remove_dir_all(&dir)?;
    }

    let mut reader = Vec::new();
    for size in [100, 4096] {
        say(&format!("reader: {size}-byte payloads"));
        let dir = base.path().join(format!("reader-{size}"));
        reader.push(reader_run(&dir, size, plan.reader_bytes)?);
        fs::remove_dir_all(&dir)?;
    }

    let mut targets = Vec::new();
    for d in durable.iter().filter(|d| d.policy == "group") {
        targets.push(Target {
            name: format!("group_vs_limit, {} writers", d.writers),
            value: d.group_vs_limit,
            target: GROUP_VS_LIMIT_TARGET,
            met: d.group_vs_limit >= GROUP_VS_LIMIT_TARGET,
        });
    }
    for r in &reader {
        targets.push(Target {
            name: format!("reader MB/s (warm), {}-byte payloads", r.payload_bytes),
            value: r.warm_read_mb_per_s,
            target: READER_MB_PER_S_TARGET,
            met: r.warm_read_mb_per_s >= READER_MB_PER_S_TARGET,
        });
    }

    let report = Report {
        mode: plan.mode,
        dir: base.path().display().to_string(),
        fdatasync_per_s,
        raw_batch,
        durable,
        unsynced,
        reader,
        targets,
    };
    if common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, &plan);
    }
    Ok(())
}

/// The ceiling for any durable write path on this disk: one small append and one fdatasync at a
/// time, nothing else. Appending (not overwriting) matches what the journal does, so each sync
/// also carries a file-size update, as the journal's do.
fn fdatasync_rate(dir: &Path, write_bytes: usize, time: Duration) -> Result<f64, BoxError> {
    let path = dir.join(format!("raw-fdatasync-{write_bytes}"));
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)?;
    let record = vec![0xA5u8; write_bytes];
    let start = Instant::now();
    let mut syncs = 0u64;
    while start.elapsed() < time {
        file.write_all(&record)?;
        file.sync_data()?;
        syncs += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    drop(file);
    fs::remove_file(&path)?;
    Ok(syncs as f64 / seconds)
}

fn open_journal(dir: &Path, fsync: FsyncPolicy) -> Result<Journal, BoxError> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
    let options = Options {
        fsync,
        ..Options::default()
    };
    let (journal, _report) = Journal::open(storage, options)?;
    Ok(journal)
}

struct DurableRun {
    seconds: f64,
    records: u64,
    syncs: u64,
}

impl DurableRun {
    fn finish(
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
fn durable_run(
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
        // `append` blocks the thread on its own write+sync, so OS threads are the honest model.
        FsyncPolicy::Always => std::thread::scope(|s| {
            let handles: Vec<_> = (0..writers)
                .map(|_| {
                    let (journal, payload) = (&journal, &payload);
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
        })?,
        _ => rt.block_on(async {
            let handles: Vec<_> = (0..writers)
                .map(|_| {
                    let (journal, payload) = (journal.clone(), payload.clone());
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
            Ok::<u64, BoxError>(total)
        })?,
    };
    let seconds = start.elapsed().as_secs_f64();
    // Read before close: close adds one sync of its own that no writer waited for.
    let syncs = journal.stats().syncs;
    Arc::into_inner(journal)
        .expect("every writer has finished")
        .close()?;
    Ok(DurableRun {
        seconds,
        records,
        syncs,
    })
}

/// The encode-and-write path alone: no fsync, so this is the CPU and page-cache ceiling.
fn unsynced_run(dir: &Path, payload_bytes: usize, total_bytes: u64) -> Result<Unsynced, BoxError> {
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

fn segment_bytes(dir: &Path) -> Result<u64, BoxError> {
    let mut total = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name
            .to_str()
            .is_some_and(|n| journal::segment::parse_file_name(n).is_some())
        {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
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

fn reader_run(dir: &Path, payload_bytes: usize, total_bytes: u64) -> Result<ReaderRun, BoxError> {
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

fn print_table(r: &Report, plan: &Plan) {
    println!(
        "tooljournal bench: journal ({} mode), in {}  [MB = 10^6 bytes]",
        r.mode, r.dir
    );
    println!();
    println!(
        "Raw disk limit ({}-byte append + fdatasync, one at a time, {:.1} s)",
        DURABLE_RECORD_BYTES,
        plan.fdatasync_time.as_secs_f64()
    );
    println!("  fdatasync_per_s   {:>10.1} /s", r.fdatasync_per_s);
    for b in &r.raw_batch {
        println!(
            "  {:>6} B appends {:>10.1} /s   (= {} writers' records in one write)",
            b.write_bytes, b.fdatasync_per_s, b.writers
        );
    }
    println!();
    println!(
        "Durable appends ({}-byte records, each writer: append then wait until durable, {:.1} s each)",
        DURABLE_RECORD_BYTES,
        plan.durable_time.as_secs_f64()
    );
    println!(
        "  {:<7} {:>7} {:>12} {:>11} {:>13} {:>15} {:>17}",
        "policy",
        "writers",
        "appends/s",
        "fsyncs/s",
        "records/sync",
        "group_vs_limit",
        "vs same-size raw"
    );
    for d in &r.durable {
        println!(
            "  {:<7} {:>7} {:>12.1} {:>11.1} {:>13.2} {:>15.2} {:>17.2}",
            d.policy,
            d.writers,
            d.appends_per_s,
            d.fsyncs_per_s,
            d.records_per_sync,
            d.group_vs_limit,
            d.vs_same_size_raw
        );
    }
    println!(
        "  group_vs_limit = appends/s / (fdatasync_per_s x records/sync); 1.00 = raw disk rate"
    );
    println!("  vs same-size raw = fsyncs/s / raw rate for appends of one whole batch (above)");
    println!();
    println!("Unsynced appends (policy never, 1 thread, append then close; MB/s of payload)");
    println!(
        "  {:<9} {:>10} {:>10} {:>10} {:>12}",
        "payload", "records", "seconds", "MB/s", "records/s"
    );
    for u in &r.unsynced {
        println!(
            "  {:<9} {:>10} {:>10.3} {:>10.1} {:>12.0}",
            format!("{} B", u.payload_bytes),
            u.records,
            u.seconds,
            u.payload_mb_per_s,
            u.records_per_s
        );
    }
    println!();
    println!("Reader (Reader::open + drain; MB/s of segment file bytes; read twice, the second,");
    println!("warm-cache read is the figure; the first also hits the page cache, just written)");
    println!(
        "  {:<9} {:>10} {:>12} {:>14} {:>14}",
        "payload", "records", "segment MB", "1st read MB/s", "warm MB/s"
    );
    for x in &r.reader {
        println!(
            "  {:<9} {:>10} {:>12.1} {:>14.1} {:>14.1}",
            format!("{} B", x.payload_bytes),
            x.records,
            x.segment_bytes as f64 / MB,
            x.first_read_mb_per_s,
            x.warm_read_mb_per_s
        );
    }
    println!();
    println!("Targets");
    for t in &r.targets {
        println!(
            "  {:<40} {:>9.2}  (target >= {})  {}",
            t.name,
            t.value,
            t.target,
            if t.met { "met" } else { "MISSED" }
        );
    }
}
