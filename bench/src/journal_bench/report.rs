//! The `journal` benchmark's figures: what `--json` prints (serialized as they are) and the
//! table printed otherwise, one section per kind of run.

use super::{Plan, DURABLE_RECORD_BYTES};
use crate::{MB, MIB};
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct Report {
    pub(super) mode: &'static str,
    pub(super) dir: String,
    pub(super) fdatasync_per_s: f64,
    /// The raw rate again, for appends as large as a full group batch (writers × frame bytes):
    /// a bigger write makes each fdatasync slower at the disk, which no journal can avoid.
    pub(super) raw_batch: Vec<RawBatch>,
    pub(super) durable: Vec<Durable>,
    pub(super) unsynced: Vec<Unsynced>,
    pub(super) reader: Vec<ReaderRun>,
    pub(super) crafted_tail: Vec<CraftedTailRun>,
    pub(super) targets: Vec<Target>,
}

/// Reading a journal whose torn tail is crafted so that every fourth offset holds a length
/// field that is plausible and fits: the worst case of the scan for a valid frame after a bad
/// one. Linear: the seconds per MiB stay flat as the tail grows.
#[derive(Serialize)]
pub(super) struct CraftedTailRun {
    pub(super) tail_bytes: u64,
    pub(super) seconds: f64,
    pub(super) tail_mb_per_s: f64,
    pub(super) candidates: u64,
    /// CRC byte steps per byte of tail: bounded by a constant whatever the size.
    pub(super) checksummed_per_byte: f64,
}

#[derive(Serialize)]
pub(super) struct RawBatch {
    pub(super) writers: usize,
    pub(super) write_bytes: usize,
    pub(super) fdatasync_per_s: f64,
}

#[derive(Serialize)]
pub(super) struct Durable {
    pub(super) policy: String,
    pub(super) writers: usize,
    pub(super) record_bytes: usize,
    pub(super) seconds: f64,
    pub(super) records: u64,
    pub(super) syncs: u64,
    pub(super) appends_per_s: f64,
    pub(super) fsyncs_per_s: f64,
    pub(super) records_per_sync: f64,
    /// appends_per_s / (fdatasync_per_s × records_per_sync): 1.0 means every sync ran at the
    /// raw disk rate, so the journal adds nothing but the batching it chose.
    pub(super) group_vs_limit: f64,
    /// fsyncs_per_s against raw fdatasyncs of a batch-sized append (see `raw_batch`): how much
    /// of the gap to 1.0 is the journal's own overhead rather than the disk's.
    pub(super) vs_same_size_raw: f64,
}

#[derive(Serialize)]
pub(super) struct Unsynced {
    pub(super) payload_bytes: usize,
    pub(super) records: u64,
    pub(super) seconds: f64,
    pub(super) payload_mb_per_s: f64,
    pub(super) records_per_s: f64,
}

#[derive(Serialize)]
pub(super) struct ReaderRun {
    pub(super) payload_bytes: usize,
    pub(super) records: u64,
    pub(super) segment_bytes: u64,
    pub(super) first_read_seconds: f64,
    pub(super) first_read_mb_per_s: f64,
    pub(super) warm_read_seconds: f64,
    /// The figure that counts: the second read, with the segments in the page cache, so it
    /// measures the reader's own cost and not the disk's.
    pub(super) warm_read_mb_per_s: f64,
}

#[derive(Serialize)]
pub(super) struct Target {
    pub(super) name: String,
    pub(super) value: f64,
    pub(super) target: f64,
    pub(super) met: bool,
}

pub(super) fn print_table(r: &Report, plan: &Plan) {
    println!(
        "tooljournal bench: journal ({} mode), in {}  [MB = 10^6 bytes]",
        r.mode, r.dir
    );
    println!();
    print_raw(r, plan);
    println!();
    print_durable(r, plan);
    println!();
    print_unsynced(r);
    println!();
    print_reader(r);
    println!();
    print_crafted_tail(r);
    println!();
    print_targets(r);
}

fn print_raw(r: &Report, plan: &Plan) {
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
}

fn print_durable(r: &Report, plan: &Plan) {
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
}

fn print_unsynced(r: &Report) {
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
}

fn print_reader(r: &Report) {
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
}

fn print_crafted_tail(r: &Report) {
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
}

fn print_targets(r: &Report) {
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
