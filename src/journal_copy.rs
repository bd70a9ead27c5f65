//! `tooljournal journal copy SRC DST`: a journal copied between a directory and PostgreSQL (either
//! way, or between two of a kind), record by record, each one checked.
//!
//! Why records and not bytes: the two backends keep different bytes (segment files; rows), and a
//! copy must give the same session, not the same files. Each record is read (its checksum
//! checked by the reader), decoded as an event, and appended in the destination's encoding;
//! when all are durable, both journals are read again side by side and every event compared, so
//! a copy that returns 0 is one whose every record is known to be there. The journal keeps its
//! id. A source that ends in a torn tail is copied up to it (the torn bytes are no record);
//! a corrupt one is refused, as is a destination that already holds anything.

use crate::CliError;
use journal::{Backend, FsStorage, Journal, Limits, Options, ReadEnd, Reader, Storage, Takeover};
use runtime::event::Record;
use std::path::Path;
use std::sync::Arc;

/// The destination, opened for writing: a directory is created if missing.
fn destination(dst: &Path) -> Result<Backend, CliError> {
    if let Some(store) = crate::location::store(dst)? {
        return Ok(Backend::Records(store));
    }
    let storage = FsStorage::create(dst).map_err(|e| {
        CliError::Failed(format!(
            "{}: cannot create journal directory: {e}",
            crate::location::shown(dst)
        ))
    })?;
    let storage: Arc<dyn Storage> = Arc::new(storage);
    Ok(Backend::Files(storage))
}

/// Refuses a destination that holds anything: a copy never lands behind or over a journal.
fn check_empty(dst: &Path, backend: &Backend) -> Result<(), CliError> {
    let (end, records) = Reader::open_backend(backend, Limits::default())?.drain()?;
    if records > 0 || end != ReadEnd::Clean {
        return Err(CliError::Failed(format!(
            "{}: already holds a journal ({records} records); a copy goes to an empty place",
            crate::location::shown(dst)
        )));
    }
    Ok(())
}

pub fn copy(src: &Path, dst: &Path) -> Result<(), CliError> {
    let from = crate::location::backend(src)?;
    let to = destination(dst)?;
    check_empty(dst, &to)?;
    // The journal id comes from the source's first record's segment (or its rows' meta).
    let mut reader = Reader::open_backend(&from, Limits::default())?;
    let first = reader.next().transpose()?;
    let options = Options {
        journal_id: reader.journal_id(),
        ..Options::default()
    };
    let (journal, _) = Journal::open_backend(&to, Takeover::Refuse, options)?;
    let mut copied = 0u64;
    for record in first.into_iter().map(Ok).chain(reader.by_ref()) {
        let record = record?;
        let event: Record = record
            .decode()
            .map_err(|e| CliError::Failed(format!("{}: {e}", crate::location::shown(src))))?;
        let seq = journal.append(&event)?;
        if seq != record.seq {
            return Err(CliError::Failed(format!(
                "{}: record {} landed at seq {seq}: the destination is not the copy",
                crate::location::shown(dst),
                record.seq
            )));
        }
        copied += 1;
    }
    let end = reader.end().cloned().ok_or_else(|| {
        CliError::Failed(format!("{}: reading stopped", crate::location::shown(src)))
    })?;
    if let ReadEnd::Corrupt(c) = &end {
        // What was appended stays (it is the source's intact prefix) but the copy failed.
        let _ = journal.close();
        return Err(CliError::Corrupt(format!(
            "{}: {c}; {copied} records before it were copied to {}, the rest cannot be",
            crate::location::shown(src),
            crate::location::shown(dst)
        )));
    }
    journal.close()?;
    let compared = compare(src, &from, dst, &to)?;
    outln!(
        "{} -> {}: {compared} records copied and checked{}",
        crate::location::shown(src),
        crate::location::shown(dst),
        match &end {
            ReadEnd::TornTail(t) => format!(
                " (the source ends in a torn tail at {}: {} bytes not copied)",
                t.position, t.dropped_bytes
            ),
            _ => String::new(),
        }
    )?;
    Ok(())
}

/// Reads both journals side by side and compares every event; returns how many matched.
fn compare(src: &Path, from: &Backend, dst: &Path, to: &Backend) -> Result<u64, CliError> {
    let mut a = Reader::open_backend(from, Limits::default())?;
    let mut b = Reader::open_backend(to, Limits::default())?;
    let mut matched = 0u64;
    loop {
        match (a.next().transpose()?, b.next().transpose()?) {
            (None, None) => break,
            (Some(x), Some(y)) => {
                let (ex, ey): (Record, Record) = (
                    x.decode().map_err(|e| CliError::Failed(e.to_string()))?,
                    y.decode().map_err(|e| CliError::Failed(e.to_string()))?,
                );
                if x.seq != y.seq || ex != ey {
                    return Err(CliError::Failed(format!(
                        "{}: record {} differs from {}'s after the copy",
                        crate::location::shown(dst),
                        y.seq,
                        crate::location::shown(src)
                    )));
                }
                matched += 1;
            }
            (Some(x), None) => {
                return Err(CliError::Failed(format!(
                    "{}: ends before record {} of {}",
                    crate::location::shown(dst),
                    x.seq,
                    crate::location::shown(src)
                )))
            }
            (None, Some(y)) => {
                return Err(CliError::Failed(format!(
                    "{}: holds record {} that {} does not",
                    crate::location::shown(dst),
                    y.seq,
                    crate::location::shown(src)
                )))
            }
        }
    }
    Ok(matched)
}
