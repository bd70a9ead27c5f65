//! `tooljournal journal verify|dump`: byte-level views of a journal directory.

use crate::CliError;
use journal::{FsStorage, Limits, ReadEnd, Reader, Storage};
use std::path::Path;
use std::sync::Arc;

fn open_reader(dir: &Path) -> Result<Reader, CliError> {
    let storage = FsStorage::open(dir).map_err(|e| {
        CliError::Failed(format!(
            "{}: cannot open journal directory: {e}",
            dir.display()
        ))
    })?;
    let storage: Arc<dyn Storage> = Arc::new(storage);
    Ok(Reader::open(storage, Limits::default())?)
}

fn corrupt(dir: &Path, end: &ReadEnd) -> Option<CliError> {
    match end {
        ReadEnd::Corrupt(c) => Some(CliError::Corrupt(format!("{}: {c}", dir.display()))),
        _ => None,
    }
}

/// Describes how a journal ends, in one line.
pub fn describe_end(end: &ReadEnd, records: u64) -> String {
    match end {
        ReadEnd::Clean => format!("clean: {records} records"),
        ReadEnd::TornTail(t) => format!(
            "torn tail at {}: {}; {records} valid records before it; a resume would drop {} bytes",
            t.position, t.reason, t.dropped_bytes
        ),
        ReadEnd::Corrupt(c) => format!("{c}; {records} valid records before it"),
    }
}

pub fn verify(dir: &Path) -> Result<(), CliError> {
    let (end, records) = open_reader(dir)?.drain()?;
    if let Some(err) = corrupt(dir, &end) {
        println!("{}: {}", dir.display(), describe_end(&end, records));
        return Err(err);
    }
    println!("{}: {}", dir.display(), describe_end(&end, records));
    Ok(())
}

pub fn dump(dir: &Path, json: bool) -> Result<(), CliError> {
    let mut reader = open_reader(dir)?;
    for record in reader.by_ref() {
        let r = record?;
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "seq": r.seq,
                    "segment": r.position.segment,
                    "offset": r.position.offset,
                    "length": r.frame_bytes,
                })
            );
        } else {
            println!(
                "seq={} segment={} offset={} length={}",
                r.seq, r.position.segment, r.position.offset, r.frame_bytes
            );
        }
    }
    let end = reader
        .end()
        .cloned()
        .expect("iteration ended without an I/O error");
    eprintln!(
        "{}: {}",
        dir.display(),
        describe_end(&end, reader.records_read())
    );
    match corrupt(dir, &end) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}
