//! `bench`: measures tooljournal against the disk it runs on.
//!
//! Every durable figure is set against the raw fdatasync rate of the same disk, measured in the
//! same run: absolute numbers vary by orders of magnitude between machines, the ratio does not.
//! Missed targets are reported, never turned into a failing exit code: a slow CI disk or a noisy
//! neighbour is not a bug, and the numbers are worth seeing either way.
//!
//! Usage: `cargo run --release --features bench --bin bench -- journal|runtime [--quick] [--json]
//! [--dir DIR]` (the `bench` feature brings in the SQLite and sled baselines, so that
//! `cargo test --workspace` never compiles SQLite).
//!
//! - `journal`: the raw fdatasync rate, durable appends (always/group), unsynced appends, reader,
//!   and the reader on a crafted torn tail (the tail scan's worst case, 1-8 MiB).
//! - `runtime` (issue 8): durable tool calls/s through the whole runtime, side by side with what
//!   a user would otherwise pick (JSON lines with an fsync per record, SQLite WAL with
//!   synchronous=FULL, sled with a flush per record), the pipeline's own cost with fsync off,
//!   and recovery speed and peak memory on a generated journal of 1 GiB (100 MiB quick).

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
    /// Durable tool calls/s through the runtime against JSONL, SQLite and sled; the pipeline's
    /// cost with fsync off; recovery MB/s and peak memory (issue 8).
    Runtime,
    /// Internal: recovers (read only) the journal in DIR and prints one JSON line with the time
    /// taken and this process's peak RSS. Run by `runtime` as a child process so that the peak
    /// is the recovery's alone.
    #[command(hide = true)]
    RecoverChild { dir: PathBuf },
    /// Internal, for profiling: writes the `runtime` benchmark's recovery journal into DIR
    /// (which must not hold one) and keeps it.
    #[command(hide = true)]
    GenerateJournal {
        dir: PathBuf,
        #[arg(long, default_value_t = 100)]
        mib: u64,
    },
    /// Internal, for profiling: one `runtime` session run (seq, par16 or nosync) alone.
    #[command(hide = true)]
    SessionLoop {
        #[arg(long, default_value = "never")]
        policy: FsyncPolicy,
        #[arg(long, default_value_t = 1)]
        calls: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Tokio worker threads (0: a current-thread runtime).
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
}

/// mimalloc: the pipeline allocates a few dozen small objects per call (each event owns its
/// text), and glibc's malloc/free were about a third of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Journal => journal_bench(&cli.common),
        Command::Runtime => runtime_bench::run(&cli.common),
        Command::RecoverChild { dir } => runtime_bench::recover_child(&dir),
        Command::GenerateJournal { dir, mib } => runtime_bench::generate_only(&dir, mib),
        Command::SessionLoop {
            policy,
            calls,
            seconds,
            workers,
        } => runtime_bench::session_loop(&cli.common, policy, calls, seconds, workers),
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
    crafted_tail: Vec<CraftedTailRun>,
    targets: Vec<Target>,
}

/// Reading a journal whose torn tail is crafted so that every fourth offset holds a length
/// field that is plausible and fits: the worst case of the scan for a valid frame after a bad
/// one (issue 14). Linear: the seconds per MiB stay flat as the tail grows.
#[derive(Serialize)]
struct CraftedTailRun {
    tail_bytes: u64,
    seconds: f64,
    tail_mb_per_s: f64,
    candidates: u64,
    /// CRC byte steps per byte of tail: bounded by a constant whatever the size.
    checksummed_per_byte: f64,
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

    let mut crafted_tail = Vec::new();
    for size_mib in [1, 2, 4, 8] {
        say(&format!("reader: crafted {size_mib} MiB torn tail"));
        let dir = base.path().join(format!("crafted-{size_mib}"));
        crafted_tail.push(crafted_tail_run(&dir, size_mib * MIB)?);
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
        crafted_tail,
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

/// A three-record journal, then `tail_bytes` of crafted garbage (see [`CraftedTailRun`]) on its
/// segment; times `Reader::open` + drain, which must end in a torn tail.
fn crafted_tail_run(dir: &Path, tail_bytes: u64) -> Result<CraftedTailRun, BoxError> {
    let journal = open_journal(dir, FsyncPolicy::Never)?;
    for _ in 0..3 {
        journal.append(&"~".repeat(100))?;
    }
    journal.close()?;
    let n = tail_bytes as usize;
    let mut tail = vec![0u8; n];
    tail[..4].copy_from_slice(&[0xff; 4]);
    for p in (4..n.saturating_sub(15)).step_by(4) {
        tail[p..p + 4].copy_from_slice(&((n - p - 8) as u32).to_le_bytes());
    }
    let segment = dir.join(journal::segment::file_name(0));
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
        Some(ReadEnd::TornTail(t)) if t.dropped_bytes == tail_bytes => {}
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
    println!(
        "Crafted torn tail (every 4th offset a plausible length reaching the end; Reader drain)"
    );
    println!(
        "  {:<9} {:>10} {:>10} {:>10} {:>14}",
        "tail", "seconds", "MB/s", "candidates", "crc bytes/byte"
    );
    for c in &r.crafted_tail {
        println!(
            "  {:<9} {:>10.3} {:>10.1} {:>10} {:>14.2}",
            format!("{} MiB", c.tail_bytes / MIB),
            c.seconds,
            c.tail_mb_per_s,
            c.candidates,
            c.checksummed_per_byte
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

/// `runtime` (issue 8): durable tool calls per second through the whole runtime, side by side
/// with the plain choices a user would otherwise make, in one run, as ratios (DESIGN.md §8).
mod runtime_bench {
    use super::{segment_bytes, BoxError, Common, MB, MIB};
    use journal::{FsStorage, FsyncPolicy, Journal, Options, Storage};
    use runtime::event::{
        Approval, CallRef, CommittedResult, Event, ModelCall, ModelResponse, Outcome,
        OutcomeStatus, Record, Resources, SessionOpen, SideEffect, StepOutcome, StopReason, Text,
        ToolDescriptor, ToolSource, TurnOutcome, EVENT_SCHEMA_VERSION,
    };
    use runtime::hooks::Hooks;
    use runtime::registry::Registry;
    use runtime::tool::{Tool, ToolContext, ToolFuture, ToolOutput};
    use runtime::{Config, ErrorCode, Session, SessionOptions};
    use serde::{Deserialize, Serialize};
    use serde_json::json;
    use std::fs::{self, OpenOptions};
    use std::io::Write;
    use std::path::Path;
    use std::process::Stdio;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// The raw rate is measured with appends of this size (as in `journal`).
    const RAW_APPEND_BYTES: usize = 100;
    /// Steps run before the clock starts (first allocations, first page of the segment).
    const WARMUP_STEPS: usize = 20;
    /// The arguments every no-op call carries (checked against the tool's schema).
    const NOOP_ARGS: &str = r#"{"path":"src/lib.rs"}"#;
    const PAR_CALLS: usize = 16;

    const SEQ_VS_FSYNC_LIMIT_TARGET: f64 = 0.8;
    const SEQ_VS_JSONL_FSYNC_TARGET: f64 = 5.0;
    const SEQ_VS_SQLITE_CALL_TARGET: f64 = 1.0;
    const PAR16_VS_SEQ_TARGET: f64 = 10.0;
    const NOSYNC_CALLS_PER_S_TARGET: f64 = 100_000.0;
    const RECOVER_MB_PER_S_TARGET: f64 = 400.0;
    const RECOVER_PEAK_RSS_MB_TARGET: f64 = 64.0;

    struct Plan {
        mode: &'static str,
        /// The durable measurements run in this many rounds, each round running every one of
        /// them once, back to back: a shared disk's rate drifts (other processes' syncs), and
        /// interleaving spreads the drift over all of them alike instead of favouring one.
        rounds: usize,
        /// Each durable measurement in each round (the raw rate, the runtime, the baselines).
        slice: Duration,
        nosync_time: Duration,
        recover_bytes: u64,
    }

    impl Plan {
        fn new(quick: bool) -> Plan {
            if quick {
                Plan {
                    mode: "quick",
                    rounds: 2,
                    slice: Duration::from_millis(500),
                    nosync_time: Duration::from_secs(1),
                    recover_bytes: 100 * MIB,
                }
            } else {
                Plan {
                    mode: "full",
                    rounds: 5,
                    slice: Duration::from_millis(1200),
                    nosync_time: Duration::from_secs(4),
                    recover_bytes: 1024 * MIB,
                }
            }
        }
    }

    /// The `--json` object: exactly the keys issue 8 lists.
    #[derive(Serialize)]
    struct Report {
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

    /// One timed run: `calls` tool calls (of `steps` steps) in `seconds`.
    struct Measured {
        calls: u64,
        steps: u64,
        seconds: f64,
        /// fdatasyncs the journal issued in the timed window (runtime runs only).
        syncs: Option<u64>,
        /// Journal bytes per step (runtime runs only).
        bytes_per_step: Option<f64>,
    }

    impl Measured {
        fn calls_per_s(&self) -> f64 {
            self.calls as f64 / self.seconds
        }
        fn syncs_per_step(&self) -> Option<f64> {
            self.syncs.map(|s| s as f64 / self.steps.max(1) as f64)
        }
        /// Adds another round's run: the totals make one measurement.
        fn add(&mut self, other: Measured) {
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

    /// The raw rate (as `journal`'s `fdatasync_rate`: append `write_bytes`, fdatasync, one at
    /// a time) as a [`Measured`]: one "call" per fdatasync.
    fn raw_run(dir: &Path, write_bytes: usize, time: Duration) -> Result<Measured, BoxError> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(dir.join("raw"))?;
        let record = vec![0xA5u8; write_bytes];
        let start = Instant::now();
        let mut syncs = 0u64;
        while start.elapsed() < time {
            file.write_all(&record)?;
            file.sync_data()?;
            syncs += 1;
        }
        Ok(Measured {
            calls: syncs,
            steps: syncs,
            seconds: start.elapsed().as_secs_f64(),
            syncs: Some(syncs),
            bytes_per_step: Some(write_bytes as f64),
        })
    }

    /// Sums a measurement over the rounds.
    fn accumulate(slot: &mut Option<Measured>, m: Measured) {
        match slot {
            Some(total) => total.add(m),
            None => *slot = Some(m),
        }
    }

    /// What the recovery child reports.
    #[derive(Serialize, Deserialize)]
    struct ChildReport {
        seconds: f64,
        bytes: u64,
        hwm_kb_before: u64,
        hwm_kb_after: u64,
        calls: u64,
        outcome_unknown: u64,
        not_started: u64,
    }

    struct GenStats {
        bytes: u64,
        segments: u64,
        records: u64,
        turns: u64,
        steps: u64,
        calls: u64,
        seconds: f64,
    }

    struct Target {
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

    pub fn run(common: &Common) -> Result<(), BoxError> {
        let plan = Plan::new(common.quick);
        let base = match &common.dir {
            Some(dir) => {
                fs::create_dir_all(dir)?;
                tempfile::tempdir_in(dir)?
            }
            None => tempfile::tempdir()?,
        };
        let say = |msg: &str| eprintln!("bench: {msg}");
        // As an agent host runs it (src/run.rs): a multi-thread runtime, one worker per core.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        // The pipeline on one core: one worker thread drives everything.
        let rt1 = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;

        // Every durable measurement, round after round; the figures are the totals.
        let names = [
            "raw",
            "seq",
            "raw_step",
            "par16",
            "jsonl",
            "sqlite_event",
            "sqlite_call",
            "sled",
        ];
        let mut totals: Vec<Option<Measured>> = names.iter().map(|_| None).collect();
        let mut raw_per_round = Vec::new();
        let mut seq_per_round = Vec::new();
        // One step's bytes, known after the first seq run.
        let mut step_bytes = 0usize;
        for round in 1..=plan.rounds {
            say(&format!(
                "round {round}/{}: raw fdatasync, seq, raw at a step's size, par16, jsonl, \
                 sqlite per record, sqlite per call, sled ({:.1} s each)",
                plan.rounds,
                plan.slice.as_secs_f64()
            ));
            for (i, name) in names.iter().enumerate() {
                let m = in_dir(base.path(), name, |d| match *name {
                    "raw" => raw_run(d, RAW_APPEND_BYTES, plan.slice),
                    "seq" => session_run(&rt, d, FsyncPolicy::Group, 1, plan.slice),
                    "raw_step" => raw_run(d, step_bytes.max(1), plan.slice),
                    "par16" => session_run(&rt, d, FsyncPolicy::Group, PAR_CALLS, plan.slice),
                    "jsonl" => jsonl_run(d, plan.slice),
                    "sqlite_event" => sqlite_run(d, false, plan.slice),
                    "sqlite_call" => sqlite_run(d, true, plan.slice),
                    _ => sled_run(d, plan.slice),
                })?;
                match *name {
                    "raw" => raw_per_round.push(m.calls_per_s()),
                    "seq" => {
                        seq_per_round.push(m.calls_per_s());
                        if step_bytes == 0 {
                            step_bytes = m.bytes_per_step.unwrap_or(1.0).round() as usize;
                        }
                    }
                    _ => {}
                }
                accumulate(&mut totals[i], m);
            }
        }
        let mut totals = totals.into_iter().map(|m| m.expect("at least one round"));
        let mut next = || totals.next().expect("one total per name");
        let (raw, seq, raw_step, par16) = (next(), next(), next(), next());
        let (jsonl, sqlite_event, sqlite_call, sled) = (next(), next(), next(), next());
        let fdatasync_per_s = raw.calls_per_s();
        let fdatasync_step_per_s = raw_step.calls_per_s();

        say("nosync: the runtime with fsync policy never, one worker thread");
        let nosync = in_dir(base.path(), "nosync", |d| {
            session_run(&rt1, d, FsyncPolicy::Never, 1, plan.nosync_time)
        })?;
        drop((rt, rt1));

        say(&format!(
            "recover: generating a journal of {} MiB",
            plan.recover_bytes / MIB
        ));
        let recover_dir = base.path().join("recover");
        let generated = generate(&recover_dir, plan.recover_bytes)?;
        say(&format!(
            "recover: classifying (read only) {:.1} MB in a child process",
            generated.bytes as f64 / MB
        ));
        let child = recover_in_child(&recover_dir)?;
        fs::remove_dir_all(&recover_dir)?;
        let recover_mb_per_s = child.bytes as f64 / MB / child.seconds;
        let recover_peak_rss_mb = child.hwm_kb_after as f64 * 1024.0 / MB;

        let report = Report {
            fdatasync_per_s,
            seq_calls_per_s: seq.calls_per_s(),
            par16_calls_per_s: par16.calls_per_s(),
            jsonl_fsync_calls_per_s: jsonl.calls_per_s(),
            sqlite_event_calls_per_s: sqlite_event.calls_per_s(),
            sqlite_call_calls_per_s: sqlite_call.calls_per_s(),
            sled_flush_calls_per_s: sled.calls_per_s(),
            nosync_calls_per_s: nosync.calls_per_s(),
            recover_mb_per_s,
            recover_peak_rss_mb,
            seq_vs_fsync_limit: seq.calls_per_s() / fdatasync_per_s,
            seq_vs_jsonl_fsync: seq.calls_per_s() / jsonl.calls_per_s(),
            seq_vs_sqlite_call: seq.calls_per_s() / sqlite_call.calls_per_s(),
            par16_vs_seq: par16.calls_per_s() / seq.calls_per_s(),
        };
        let targets = [
            Target {
                name: "seq_vs_fsync_limit",
                value: report.seq_vs_fsync_limit,
                target: SEQ_VS_FSYNC_LIMIT_TARGET,
                at_least: true,
            },
            Target {
                name: "seq_vs_jsonl_fsync",
                value: report.seq_vs_jsonl_fsync,
                target: SEQ_VS_JSONL_FSYNC_TARGET,
                at_least: true,
            },
            Target {
                name: "seq_vs_sqlite_call",
                value: report.seq_vs_sqlite_call,
                target: SEQ_VS_SQLITE_CALL_TARGET,
                at_least: true,
            },
            Target {
                name: "par16_vs_seq",
                value: report.par16_vs_seq,
                target: PAR16_VS_SEQ_TARGET,
                at_least: true,
            },
            Target {
                name: "nosync_calls_per_s",
                value: report.nosync_calls_per_s,
                target: NOSYNC_CALLS_PER_S_TARGET,
                at_least: true,
            },
            Target {
                name: "recover_mb_per_s",
                value: report.recover_mb_per_s,
                target: RECOVER_MB_PER_S_TARGET,
                at_least: true,
            },
            Target {
                name: "recover_peak_rss_mb",
                value: report.recover_peak_rss_mb,
                target: RECOVER_PEAK_RSS_MB_TARGET,
                at_least: false,
            },
        ];

        if common.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
            // The object holds only the issue's keys; the verdicts go where people look.
            for t in &targets {
                eprintln!(
                    "bench: target {} {:.2} ({} {}): {}",
                    t.name,
                    t.value,
                    if t.at_least { ">=" } else { "<=" },
                    t.target,
                    if t.met() { "met" } else { "MISSED" }
                );
            }
            return Ok(());
        }

        println!(
            "tooljournal bench: runtime ({} mode), in {}  [MB = 10^6 bytes]",
            plan.mode,
            base.path().display()
        );
        println!();
        println!(
            "Raw disk limit (append + fdatasync, one at a time; {} rounds x {:.1} s)",
            plan.rounds,
            plan.slice.as_secs_f64()
        );
        println!(
            "  fdatasync_per_s         {:>10.1} /s   ({RAW_APPEND_BYTES}-byte appends)",
            fdatasync_per_s
        );
        println!(
            "  {:<23} {:>10.1} /s   (the bytes one seq step writes)",
            format!("{step_bytes}-byte appends"),
            fdatasync_step_per_s
        );
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "  per round: fdatasync/s {}; seq calls/s {}",
            list(&raw_per_round),
            list(&seq_per_round)
        );
        println!();
        println!(
            "Durable tool calls (a no-op tool; a call = 6 transition records; {} rounds x {:.1} s)",
            plan.rounds,
            plan.slice.as_secs_f64()
        );
        println!(
            "  {:<26} {:>10} {:>12} {:>11}  how",
            "", "calls/s", "fsyncs/step", "bytes/step"
        );
        let row = |name: &str, m: &Measured, how: &str| {
            println!(
                "  {:<26} {:>10.1} {:>12} {:>11}  {how}",
                name,
                m.calls_per_s(),
                m.syncs_per_step()
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
                m.bytes_per_step
                    .map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
            )
        };
        row(
            "seq_calls_per_s",
            &seq,
            "runtime, policy group: 1 call per step",
        );
        row(
            "par16_calls_per_s",
            &par16,
            "runtime, policy group: 16 parallel-safe calls per step",
        );
        row(
            "jsonl_fsync_calls_per_s",
            &jsonl,
            "JSON lines, fdatasync after each record",
        );
        row(
            "sqlite_event_calls_per_s",
            &sqlite_event,
            "SQLite WAL, synchronous=FULL, 1 transaction per record",
        );
        row(
            "sqlite_call_calls_per_s",
            &sqlite_call,
            "SQLite WAL, synchronous=FULL, 1 transaction per call",
        );
        row(
            "sled_flush_calls_per_s",
            &sled,
            "sled 0.34.7, flush after each record",
        );
        println!();
        println!(
            "Pipeline cost (policy never, 1 worker thread, 1 call per step, {:.1} s)",
            plan.nosync_time.as_secs_f64()
        );
        println!(
            "  nosync_calls_per_s      {:>10.1} /s   ({:.2} us per call)",
            nosync.calls_per_s(),
            1e6 / nosync.calls_per_s()
        );
        println!();
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
        println!("  recover_mb_per_s        {:>10.1} MB/s", recover_mb_per_s);
        println!(
            "  recover_peak_rss_mb     {:>10.1} MB   (VmHWM; {:.1} MB before recovering)",
            recover_peak_rss_mb,
            child.hwm_kb_before as f64 * 1024.0 / MB
        );
        println!();
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
        println!();
        println!("Targets");
        for t in &targets {
            println!(
                "  {:<22} {:>12.2}  (target {} {})  {}",
                t.name,
                t.value,
                if t.at_least { ">=" } else { "<=" },
                t.target,
                if t.met() { "met" } else { "MISSED" }
            );
        }
        Ok(())
    }

    /// The hidden `generate-journal` subcommand.
    pub fn generate_only(dir: &Path, mib: u64) -> Result<(), BoxError> {
        let g = generate(dir, mib * MIB)?;
        eprintln!(
            "bench: {:.1} MB, {} records, {} calls in {:.1} s",
            g.bytes as f64 / MB,
            g.records,
            g.calls,
            g.seconds
        );
        Ok(())
    }

    /// The hidden `session-loop` subcommand.
    pub fn session_loop(
        common: &Common,
        policy: FsyncPolicy,
        calls: usize,
        seconds: f64,
        workers: usize,
    ) -> Result<(), BoxError> {
        let base = match &common.dir {
            Some(dir) => tempfile::tempdir_in(dir)?,
            None => tempfile::tempdir()?,
        };
        let rt = if workers == 0 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()?
        };
        let m = in_dir(base.path(), "loop", |d| {
            session_run(&rt, d, policy, calls, Duration::from_secs_f64(seconds))
        })?;
        println!(
            "{policy}, {calls} calls/step, {workers} workers: {:.1} calls/s, {:.2} fsyncs/step, {:.0} bytes/step",
            m.calls_per_s(),
            m.syncs_per_step().unwrap_or(0.0),
            m.bytes_per_step.unwrap_or(0.0)
        );
        Ok(())
    }

    /// Runs `f` in a fresh directory under `base`, removed afterwards.
    fn in_dir<T>(
        base: &Path,
        name: &str,
        f: impl FnOnce(&Path) -> Result<T, BoxError>,
    ) -> Result<T, BoxError> {
        let dir = base.join(name);
        fs::create_dir_all(&dir)?;
        let out = f(&dir)?;
        fs::remove_dir_all(&dir)?;
        Ok(out)
    }

    fn now_ms() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    /// A tool that does nothing: what remains is the runtime's cost and the journal's.
    struct Noop {
        name: &'static str,
        parallel: bool,
    }

    impl Tool for Noop {
        fn name(&self) -> &str {
            self.name
        }
        fn description(&self) -> &str {
            "does nothing (benchmark)"
        }
        fn input_schema(&self) -> serde_json::Value {
            json!({"type": "object", "properties": {"path": {"type": "string"}}})
        }
        fn is_concurrency_safe(&self, _args: &runtime::args::Args) -> bool {
            self.parallel
        }
        fn execute(&self, _args: runtime::args::Args, _ctx: ToolContext) -> ToolFuture<'_> {
            Box::pin(async { Ok(ToolOutput::text("ok")) })
        }
    }

    /// One session, one turn, as many steps of `calls_per_step` no-op calls as fit in `time`
    /// (plus the turn's end, whose sync is timed too).
    fn session_run(
        rt: &tokio::runtime::Runtime,
        dir: &Path,
        policy: FsyncPolicy,
        calls_per_step: usize,
        time: Duration,
    ) -> Result<Measured, BoxError> {
        let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
        let mut options = Options {
            fsync: policy,
            ..Options::default()
        };
        if policy == FsyncPolicy::Never {
            // Rotating a segment syncs even under `never` (a sealed segment must be whole);
            // the pipeline's cost is measured without the disk, so no rotation happens here.
            options.limits.segment_size_bytes_max = 1 << 40;
        }
        let (journal, _) = Journal::open(storage, options)?;
        let parallel = calls_per_step > 1;
        let name = if parallel { "noop_parallel" } else { "noop" };
        let mut registry = Registry::new();
        registry.register(Arc::new(Noop { name, parallel }), ToolSource::BuiltIn)?;
        let config = Config {
            // All 16 calls of a par16 step may run (and start, with one sync) together.
            parallel_max: calls_per_step.max(Config::default().parallel_max),
            ..Config::default()
        };
        let options = SessionOptions {
            workspace: "/bench".into(),
            ..SessionOptions::default()
        };
        let body = async move {
            let mut session = Session::open(
                journal,
                Arc::new(registry),
                Hooks::default(),
                config,
                options,
            )?;
            session.begin_turn("run the benchmark")?;
            let mut next_call = 0u64;
            for _ in 0..WARMUP_STEPS {
                one_step(&mut session, name, calls_per_step, &mut next_call).await?;
            }
            let syncs_before = session.event_log().journal().stats().syncs;
            let start = Instant::now();
            let mut steps = 0u64;
            while start.elapsed() < time {
                one_step(&mut session, name, calls_per_step, &mut next_call).await?;
                steps += 1;
            }
            session.end_turn(TurnOutcome::Completed).await?;
            let seconds = start.elapsed().as_secs_f64();
            let syncs = session.event_log().journal().stats().syncs - syncs_before;
            session.close().await?;
            Ok::<_, BoxError>((steps, seconds, syncs))
        };
        // The session runs as a task on a worker thread (as in a server embedding the runtime),
        // not on the thread that blocks on the runtime: there, every task the pipeline spawns
        // (the tool body, the batch's join set) would wake a worker across threads; measured
        // on this machine, nosync went from 25k to 20k calls/s that way.
        let (steps, seconds, syncs) = rt.block_on(rt.spawn(body))??;
        let total_steps = steps + WARMUP_STEPS as u64;
        Ok(Measured {
            calls: steps * calls_per_step as u64,
            steps,
            seconds,
            syncs: Some(syncs),
            bytes_per_step: Some(segment_bytes(dir)? as f64 / total_steps as f64),
        })
    }

    /// begin_step + run_batch(`calls` no-op calls) + end_step.
    async fn one_step(
        session: &mut Session,
        tool: &str,
        calls: usize,
        next_call: &mut u64,
    ) -> Result<(), BoxError> {
        session.begin_step()?;
        let tool_calls = (0..calls)
            .map(|_| {
                *next_call += 1;
                ModelCall {
                    call_id: format!("call_{next_call}"),
                    name: tool.to_owned(),
                    arguments: NOOP_ARGS.to_owned(),
                }
            })
            .collect();
        let results = session
            .run_batch(ModelResponse {
                text: String::new(),
                tool_calls,
                stop_reason: StopReason::ToolUse,
            })
            .await?;
        if results.len() != calls || results.iter().any(|r| r.is_error) {
            let first = results.iter().find(|r| r.is_error).map(|r| &r.content);
            return Err(format!("the no-op tool failed: {first:?}").into());
        }
        session.end_step(StepOutcome::Completed)?;
        Ok(())
    }

    /// The six transition records of call `n` (a no-op call, step `n` of turn 1) as the
    /// runtime journals them, each pointing back at the one before; `seq` is the first one's.
    fn call_events(n: u64, seq: u64) -> [Event; 6] {
        let call = CallRef {
            turn: 1,
            step: n as u32,
            call_id: format!("call_{n}"),
        };
        [
            Event::Received {
                call: call.clone(),
                index: 0,
                tool: "noop".into(),
                raw_arguments: NOOP_ARGS.into(),
                source_seqs: vec![seq.saturating_sub(1)],
            },
            Event::Parsed {
                call: call.clone(),
                arguments: NOOP_ARGS.into(),
                source_seqs: vec![seq],
            },
            Event::Approved {
                call: call.clone(),
                approval: Approval::Default,
                source_seqs: vec![seq + 1],
            },
            Event::Started {
                call: call.clone(),
                attempt: 1,
                resources: Resources::default(),
                source_seqs: vec![seq + 2],
            },
            Event::Settled {
                call: call.clone(),
                outcome: Outcome {
                    status: OutcomeStatus::Success,
                    content: Text::Inline("ok".into()),
                    value: None,
                    details: None,
                    side_effects: Vec::new(),
                    attempts: 1,
                    duration_ms: 0,
                },
                source_seqs: vec![seq + 3],
            },
            Event::Committed {
                call,
                result: CommittedResult {
                    content: "ok".into(),
                    is_error: false,
                    code: None,
                    value: None,
                },
                source_seqs: vec![seq + 4],
            },
        ]
    }

    /// A session log as JSON lines, made durable the plain way: fdatasync after every record.
    fn jsonl_run(dir: &Path, time: Duration) -> Result<Measured, BoxError> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(dir.join("session.jsonl"))?;
        let mut line = Vec::with_capacity(1024);
        let (mut seq, mut calls) = (1u64, 0u64);
        let start = Instant::now();
        while start.elapsed() < time {
            calls += 1;
            for event in call_events(calls, seq) {
                line.clear();
                serde_json::to_writer(
                    &mut line,
                    &Record {
                        at_ms: now_ms(),
                        event,
                    },
                )?;
                line.push(b'\n');
                file.write_all(&line)?;
                file.sync_data()?;
                seq += 1;
            }
        }
        Ok(Measured {
            calls,
            steps: calls,
            seconds: start.elapsed().as_secs_f64(),
            syncs: None,
            bytes_per_step: None,
        })
    }

    /// SQLite (bundled) in WAL mode with synchronous=FULL: each commit fsyncs the WAL. One
    /// transaction per record, or (`per_call`) one per call's six records.
    fn sqlite_run(dir: &Path, per_call: bool, time: Duration) -> Result<Measured, BoxError> {
        let mut conn = rusqlite::Connection::open(dir.join("session.sqlite"))?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        conn.execute_batch(
            "PRAGMA synchronous=FULL;
             CREATE TABLE events (
                 seq INTEGER PRIMARY KEY,
                 at_ms INTEGER NOT NULL,
                 kind TEXT NOT NULL,
                 call_id TEXT,
                 body TEXT NOT NULL
             );",
        )?;
        let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
        if mode != "wal" || synchronous != 2 {
            return Err(format!("SQLite is in {mode} mode, synchronous={synchronous}").into());
        }
        const INSERT: &str =
            "INSERT INTO events (seq, at_ms, kind, call_id, body) VALUES (?1, ?2, ?3, ?4, ?5)";
        fn put(
            stmt: &mut rusqlite::CachedStatement<'_>,
            seq: u64,
            event: Event,
        ) -> Result<(), BoxError> {
            let at_ms = now_ms();
            let kind = event.kind();
            let call_id = event.call().map(|c| c.call_id.clone());
            let body = serde_json::to_string(&Record { at_ms, event })?;
            stmt.execute(rusqlite::params![
                seq as i64,
                at_ms as i64,
                kind,
                call_id,
                body
            ])?;
            Ok(())
        }
        let (mut seq, mut calls) = (1u64, 0u64);
        let start = Instant::now();
        while start.elapsed() < time {
            calls += 1;
            let events = call_events(calls, seq);
            if per_call {
                let tx = conn.transaction()?;
                {
                    let mut stmt = tx.prepare_cached(INSERT)?;
                    for event in events {
                        put(&mut stmt, seq, event)?;
                        seq += 1;
                    }
                }
                tx.commit()?;
            } else {
                // Autocommit: every insert is a transaction of its own.
                let mut stmt = conn.prepare_cached(INSERT)?;
                for event in events {
                    put(&mut stmt, seq, event)?;
                    seq += 1;
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        conn.close().map_err(|(_, e)| e)?;
        Ok(Measured {
            calls,
            steps: calls,
            seconds,
            syncs: None,
            bytes_per_step: None,
        })
    }

    /// sled with its defaults, `flush` (which fsyncs its log) after every record.
    fn sled_run(dir: &Path, time: Duration) -> Result<Measured, BoxError> {
        let db = sled::Config::new().path(dir.join("db")).open()?;
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
        Ok(Measured {
            calls,
            steps: calls,
            seconds,
            syncs: None,
            bytes_per_step: None,
        })
    }

    /// xorshift64*: deterministic, so every run generates the same journal.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// In `lo..hi`.
        fn range(&mut self, lo: u64, hi: u64) -> u64 {
            lo + self.below(hi - lo)
        }
        fn hex64(&mut self) -> String {
            format!(
                "{:016x}{:016x}{:016x}{:016x}",
                self.next(),
                self.next(),
                self.next(),
                self.next()
            )
        }
    }

    const WORDS: &[&str] = &[
        "the",
        "file",
        "function",
        "returns",
        "error",
        "test",
        "value",
        "config",
        "journal",
        "call",
        "session",
        "step",
        "fn",
        "let",
        "mut",
        "impl",
        "struct",
        "pub",
        "use",
        "self",
        "match",
        "Some",
        "None",
        "Ok",
        "Err",
        "result",
        "String",
        "Vec",
        "u64",
        "path",
        "src",
        "line",
        "warning:",
        "passed",
        "failed",
        "assert_eq!",
        "=>",
        "{",
        "}",
        "();",
        "->",
        "async",
        "await",
        "tool",
        "model",
        "request",
        "response",
        "build",
        "cargo",
        "crate",
    ];
    const TOOLS: [&str; 6] = [
        "read_file",
        "write_file",
        "edit_file",
        "bash",
        "grep",
        "list_dir",
    ];

    /// Writes a realistic session straight into a journal (policy never): many turns, each
    /// of several steps with one to four committed calls and a final answer, tool outputs of
    /// a few bytes to tens of kilobytes; the last turn is left open with one call started and
    /// one not (a crash), as `recover` finds it. Stops past `target_bytes` of segments.
    fn generate(dir: &Path, target_bytes: u64) -> Result<GenStats, BoxError> {
        let start = Instant::now();
        let storage: Arc<dyn Storage> = Arc::new(FsStorage::create(dir)?);
        let options = Options {
            fsync: FsyncPolicy::Never,
            ..Options::default()
        };
        let (journal, _) = Journal::open(storage, options)?;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut corpus = String::with_capacity(300 << 10);
        while corpus.len() < 256 << 10 {
            corpus.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
            corpus.push(if rng.below(12) == 0 { '\n' } else { ' ' });
        }
        let mut g = Gen {
            journal,
            rng,
            corpus,
            at_ms: 1_750_000_000_000,
            turns: 0,
            steps: 0,
            calls: 0,
        };
        let tools = TOOLS
            .iter()
            .map(|name| ToolDescriptor {
                name: (*name).to_owned(),
                source: ToolSource::BuiltIn,
                version: "1".into(),
                schema_hash: g.rng.hex64(),
            })
            .collect();
        g.put(Event::SessionOpen(SessionOpen {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: "00000000-bench-4000-8000-000000000000".into(),
            workspace: "/home/dev/project".into(),
            tools,
        }))?;
        let mut turn = 0u32;
        loop {
            if turn.is_multiple_of(16) && segment_bytes(dir)? >= target_bytes {
                break;
            }
            turn += 1;
            g.turn(turn, false)?;
        }
        g.turn(turn + 1, true)?;
        let records = g.journal.close()?;
        let bytes = segment_bytes(dir)?;
        let segments = fs::read_dir(dir)?
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| journal::segment::parse_file_name(n).is_some())
            })
            .count() as u64;
        Ok(GenStats {
            bytes,
            segments,
            records,
            turns: g.turns,
            steps: g.steps,
            calls: g.calls,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    struct Gen {
        journal: Journal,
        rng: Rng,
        corpus: String,
        at_ms: u64,
        turns: u64,
        steps: u64,
        calls: u64,
    }

    /// One call of a generated step.
    struct GenCall {
        call: CallRef,
        tool: &'static str,
        arguments: String,
        resources: Resources,
        last_seq: u64,
    }

    impl Gen {
        fn put(&mut self, event: Event) -> Result<u64, BoxError> {
            self.at_ms += self.rng.range(1, 50);
            Ok(self.journal.append(&Record {
                at_ms: self.at_ms,
                event,
            })?)
        }

        /// `len` bytes of text (the corpus is ASCII).
        fn text(&mut self, lo: u64, hi: u64) -> String {
            let len = self.rng.range(lo, hi) as usize;
            let at = self.rng.below((self.corpus.len() - len) as u64) as usize;
            self.corpus[at..at + len].to_owned()
        }

        fn word(&mut self) -> &'static str {
            WORDS[self.rng.below(WORDS.len() as u64) as usize]
        }

        fn path(&mut self) -> String {
            format!("src/{}/{}.rs", self.word(), self.word())
                .replace(['{', '}', '(', ')', ';', '!', '=', '>', ':', '-'], "x")
        }

        /// A tool output: mostly small, some large, a few very large (kept inline: under
        /// the runtime's 1 MiB inline limit).
        fn output_len(&mut self) -> (u64, u64) {
            match self.rng.below(100) {
                0..=49 => (20, 400),
                50..=84 => (400, 3_000),
                85..=97 => (3_000, 12_000),
                _ => (12_000, 30_000),
            }
        }

        fn new_call(&mut self, turn: u32, step: u32) -> GenCall {
            let tool = TOOLS[self.rng.below(TOOLS.len() as u64) as usize];
            let path = self.path();
            let (arguments, resources) = match tool {
                "read_file" => (
                    json!({ "path": path }),
                    Resources {
                        reads: vec![path],
                        ..Resources::default()
                    },
                ),
                "write_file" => (
                    json!({ "path": path, "content": self.text(50, 2_000) }),
                    Resources {
                        writes: vec![path],
                        ..Resources::default()
                    },
                ),
                "edit_file" => (
                    json!({ "path": path, "old": self.text(10, 200), "new": self.text(10, 300) }),
                    Resources {
                        writes: vec![path],
                        ..Resources::default()
                    },
                ),
                "bash" => {
                    let command = format!("cargo test -p {} -- {}", self.word(), self.word());
                    (
                        json!({ "command": command, "timeout_ms": 120_000 }),
                        Resources {
                            intents: vec![command],
                            ..Resources::default()
                        },
                    )
                }
                "grep" => (
                    json!({ "pattern": self.word(), "path": "src" }),
                    Resources {
                        reads: vec!["src".into()],
                        ..Resources::default()
                    },
                ),
                _ => (
                    json!({ "path": "src" }),
                    Resources {
                        reads: vec!["src".into()],
                        ..Resources::default()
                    },
                ),
            };
            GenCall {
                call: CallRef {
                    turn,
                    step,
                    call_id: format!("toolu_{:016x}", self.rng.next()),
                },
                tool,
                arguments: arguments.to_string(),
                resources,
                last_seq: 0,
            }
        }

        /// One call's event after `c`'s last one.
        fn call_event(
            &mut self,
            c: &mut GenCall,
            make: impl FnOnce(CallRef, Vec<u64>) -> Event,
        ) -> Result<(), BoxError> {
            c.last_seq = self.put(make(c.call.clone(), vec![c.last_seq]))?;
            Ok(())
        }

        fn turn(&mut self, turn: u32, crash: bool) -> Result<(), BoxError> {
            self.turns += 1;
            let user_text = self.text(20, 400);
            self.put(Event::TurnStart { turn, user_text })?;
            let tool_steps = if crash {
                1
            } else {
                self.rng.range(1, 9) as u32
            };
            for step in 1..=tool_steps {
                self.steps += 1;
                self.put(Event::StepStart { turn, step })?;
                let n = match self.rng.below(10) {
                    _ if crash => 2,
                    0..=5 => 1,
                    6..=8 => 2,
                    _ => 4,
                };
                let mut calls: Vec<GenCall> = (0..n).map(|_| self.new_call(turn, step)).collect();
                let text = self.text(0, 300);
                let response_seq = self.put(Event::LlmResponse {
                    turn,
                    step,
                    response: ModelResponse {
                        text,
                        tool_calls: calls
                            .iter()
                            .map(|c| ModelCall {
                                call_id: c.call.call_id.clone(),
                                name: c.tool.into(),
                                arguments: c.arguments.clone(),
                            })
                            .collect(),
                        stop_reason: StopReason::ToolUse,
                    },
                })?;
                for (index, c) in calls.iter_mut().enumerate() {
                    c.last_seq = self.put(Event::Received {
                        call: c.call.clone(),
                        index: index as u32,
                        tool: c.tool.into(),
                        raw_arguments: c.arguments.clone(),
                        source_seqs: vec![response_seq],
                    })?;
                    let arguments = c.arguments.clone();
                    self.call_event(c, |call, source_seqs| Event::Parsed {
                        call,
                        arguments,
                        source_seqs,
                    })?;
                    self.call_event(c, |call, source_seqs| Event::Approved {
                        call,
                        approval: Approval::Default,
                        source_seqs,
                    })?;
                }
                for (i, c) in calls.iter_mut().enumerate() {
                    self.calls += 1;
                    let resources = c.resources.clone();
                    self.call_event(c, |call, source_seqs| Event::Started {
                        call,
                        attempt: 1,
                        resources,
                        source_seqs,
                    })?;
                    if crash && i == 0 {
                        // The process died while the first call ran; the second never started.
                        self.calls += 1;
                        return Ok(());
                    }
                    let (lo, hi) = self.output_len();
                    let content = self.text(lo, hi);
                    let failed = self.rng.below(20) == 0;
                    let status = if failed {
                        OutcomeStatus::Error {
                            code: ErrorCode::ToolFailed,
                            message: content.clone(),
                        }
                    } else {
                        OutcomeStatus::Success
                    };
                    let side_effects = match c.tool {
                        "write_file" | "edit_file" if !failed => vec![SideEffect::FsWrite {
                            path: c.resources.writes[0].clone(),
                            before_sha256: (c.tool == "edit_file").then(|| self.rng.hex64()),
                            after_sha256: self.rng.hex64(),
                        }],
                        "bash" => vec![SideEffect::ProcExit {
                            pid: self.rng.range(1_000, 60_000) as u32,
                            status: Some(i32::from(failed)),
                            signal: None,
                        }],
                        _ => Vec::new(),
                    };
                    let duration_ms = self.rng.range(1, 5_000);
                    let committed = CommittedResult {
                        content: if failed {
                            format!("TOOL_FAILED: {content}")
                        } else {
                            content.clone()
                        },
                        is_error: failed,
                        code: failed.then_some(ErrorCode::ToolFailed),
                        value: None,
                    };
                    self.call_event(c, |call, source_seqs| Event::Settled {
                        call,
                        outcome: Outcome {
                            status,
                            content: Text::Inline(content),
                            value: None,
                            details: None,
                            side_effects,
                            attempts: 1,
                            duration_ms,
                        },
                        source_seqs,
                    })?;
                    self.call_event(c, |call, source_seqs| Event::Committed {
                        call,
                        result: committed,
                        source_seqs,
                    })?;
                }
                self.put(Event::StepEnd {
                    turn,
                    step,
                    outcome: StepOutcome::Completed,
                })?;
            }
            // The final answer: a step with no calls.
            self.steps += 1;
            let step = tool_steps + 1;
            self.put(Event::StepStart { turn, step })?;
            let text = self.text(100, 2_000);
            self.put(Event::LlmResponse {
                turn,
                step,
                response: ModelResponse {
                    text,
                    tool_calls: Vec::new(),
                    stop_reason: StopReason::EndTurn,
                },
            })?;
            self.put(Event::StepEnd {
                turn,
                step,
                outcome: StepOutcome::Completed,
            })?;
            self.put(Event::TurnEnd {
                turn,
                outcome: TurnOutcome::Completed,
            })?;
            Ok(())
        }
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
    pub fn recover_child(dir: &Path) -> Result<(), BoxError> {
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
}
