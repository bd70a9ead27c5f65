//! `tooljournal journal verify|dump`: views of a journal directory: `verify` checks frames and
//! events (as `recover` reads them); `dump` lists frames and does not decode events.

use crate::CliError;
use journal::{Limits, ReadEnd, Reader};
use std::path::Path;

fn open_reader(dir: &Path) -> Result<Reader, CliError> {
    let backend = crate::location::backend(dir)?;
    Ok(Reader::open_backend(&backend, Limits::default())?)
}

/// `tooljournal store init URL`: the store's tables created or migrated.
pub fn store_init(url: &str) -> Result<(), CliError> {
    let report = pg::init(url)?;
    match report.version_before {
        None => outln!(
            "{}: created, schema version {}",
            report.location,
            report.version
        )?,
        Some(before) if before == report.version => outln!(
            "{}: already at schema version {}",
            report.location,
            report.version
        )?,
        Some(before) => outln!(
            "{}: migrated from schema version {before} to {}",
            report.location,
            report.version
        )?,
    }
    Ok(())
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

/// Prints how the journal ends (stdout), or fails with exit 2 when it is corrupt.
fn report_end(dir: &Path, end: &ReadEnd, records: u64) -> Result<(), CliError> {
    let line = format!(
        "{}: {}",
        crate::location::shown(dir),
        describe_end(end, records)
    );
    match end {
        ReadEnd::Corrupt(_) => Err(CliError::Corrupt(line)),
        _ => {
            outln!("{line}")?;
            Ok(())
        }
    }
}

/// Frames and events, as `recover` reads them (`recover::verify`): an event that does not
/// decode or fit is the error recover gives, with the same seq, segment and offset.
pub fn verify(dir: &Path) -> Result<(), CliError> {
    let verified = recover::verify(crate::location::place(dir)?).map_err(|e| match e {
        recover::RecoverError::Corrupt(m) => CliError::Corrupt(m),
        recover::RecoverError::Newer(m) => CliError::Newer(m),
        // The rest are I/O failures: exit 1.
        other => CliError::Failed(other.to_string()),
    })?;
    report_end(dir, &verified.end, verified.records)
}

pub fn dump(dir: &Path, json: bool) -> Result<(), CliError> {
    let mut reader = open_reader(dir)?;
    for record in reader.by_ref() {
        let r = record?;
        if json {
            dataln!(
                "{}",
                serde_json::json!({
                    "seq": r.seq,
                    "segment": r.position.segment,
                    "offset": r.position.offset,
                    "length": r.frame_bytes,
                })
            )?;
        } else {
            outln!(
                "seq={} segment={} offset={} length={}",
                r.seq,
                r.position.segment,
                r.position.offset,
                r.frame_bytes
            )?;
        }
    }
    // Cannot fail: the loop above returned on every error, so the reader ran to its end.
    #[allow(clippy::expect_used)]
    let end = reader
        .end()
        .cloned()
        .expect("iteration ended without an I/O error");
    match end {
        ReadEnd::Corrupt(_) => report_end(dir, &end, reader.records_read()),
        // Keep stdout to one line per record; the summary goes to stderr.
        _ => {
            eprintln!(
                "{}: {}",
                crate::location::shown(dir),
                describe_end(&end, reader.records_read())
            );
            Ok(())
        }
    }
}
