//! `tooljournal demo`: the newcomer's first command.
//!
//! Until the runtime lands, the demo shows the journal's promise on its own: records made
//! durable by group commit, a crash that tears the tail, a verify that tells torn from corrupt,
//! and a reopen that keeps the torn bytes as evidence before cutting them.

use crate::journal_cmd::describe_end;
use crate::CliError;
use journal::{FsStorage, Journal, Limits, Options, Reader, Storage};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// A stand-in for the runtime's events: what a journal of tool calls holds.
#[derive(Serialize)]
struct DemoEvent<'a> {
    call_id: String,
    state: &'a str,
    note: String,
}

const STATES: [&str; 6] = [
    "received",
    "parsed",
    "approved",
    "started",
    "settled",
    "committed",
];

fn failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("{what}: {e}"))
}

pub fn run() -> Result<(), CliError> {
    let dir = tempfile::Builder::new()
        .prefix("tooljournal-demo-")
        .tempdir()
        .map_err(|e| failed("cannot create a temporary directory", e))?
        .keep();
    let journal_dir = dir.join("journal");
    outln!("journal: {}", journal_dir.display())?;
    let options = Options {
        // Small segments, so that the demo shows rotation.
        limits: Limits {
            segment_size_bytes_max: 4096,
            ..Limits::default()
        },
        ..Options::default()
    };
    let storage: Arc<dyn Storage> = Arc::new(
        FsStorage::create(&journal_dir).map_err(|e| failed("cannot create the journal", e))?,
    );

    // 1. Eight calls run "in parallel": each journals its six transitions and waits until they
    //    are durable. Group commit lets them share fdatasyncs.
    let (journal, _) = Journal::open(storage.clone(), options)?;
    let journal = Arc::new(journal);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| failed("cannot start the async runtime", e))?;
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for call in 1..=8 {
            let journal = journal.clone();
            tasks.push(tokio::spawn(async move {
                for state in STATES {
                    let seq = journal.append(&DemoEvent {
                        call_id: format!("call_{call}"),
                        state,
                        note: "x".repeat(40 * call),
                    })?;
                    journal.sync_through(seq).await?;
                }
                Ok::<(), journal::JournalError>(())
            }));
        }
        for task in tasks {
            task.await.map_err(|e| failed("a demo task failed", e))??;
        }
        Ok::<(), CliError>(())
    })?;
    let stats = journal.stats();
    outln!(
        "1. wrote {} durable records for 8 concurrent calls with {} fdatasyncs (group commit)",
        stats.appended_seq,
        stats.syncs
    )?;
    drop(journal);
    let segments = count_segments(&journal_dir);
    verify_line("2. verify", &storage)?;
    outln!("   {segments} segment files (cut at 4 KiB for the demo)")?;

    // 3. A crash mid-write: half a record at the end of the last segment.
    let last = last_segment(&journal_dir).map_err(|e| failed("cannot list segments", e))?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&last)
        .and_then(|mut f| f.write_all(&[0x2a, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3]))
        .map_err(|e| failed("cannot tear the tail", e))?;
    outln!(
        "3. simulated a crash: 11 bytes of a half-written record at the end of {}",
        last.display()
    )?;
    verify_line("   verify", &storage)?;

    // 4. Reopen for append: evidence first, then truncation, then new records.
    let (journal, report) = Journal::open(storage.clone(), options)?;
    outln!(
        "4. reopened: torn bytes copied to {} and cut; next seq {}",
        report.quarantine_file.as_deref().unwrap_or("(none)"),
        report.next_seq
    )?;
    let seq = journal.append(&DemoEvent {
        call_id: "call_9".into(),
        state: "received",
        note: "after the crash".into(),
    })?;
    journal.sync_through_blocking(seq)?;
    journal.close()?;
    verify_line("   verify", &storage)?;

    outln!("\nTry:")?;
    outln!("  tooljournal journal verify {}", journal_dir.display())?;
    outln!(
        "  tooljournal journal dump {} --json",
        journal_dir.display()
    )?;
    Ok(())
}

fn verify_line(label: &str, storage: &Arc<dyn Storage>) -> Result<(), CliError> {
    let (end, records) = Reader::open(storage.clone(), Limits::default())?.drain()?;
    outln!("{label}: {}", describe_end(&end, records))?;
    Ok(())
}

fn segment_paths(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(journal::segment::parse_file_name)
                .is_some()
        })
        .collect();
    paths.sort();
    Ok(paths)
}

fn count_segments(dir: &Path) -> usize {
    segment_paths(dir).map(|p| p.len()).unwrap_or(0)
}

fn last_segment(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    segment_paths(dir)?
        .pop()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no segment"))
}
