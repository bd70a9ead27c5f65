//! Reopening a journal for append: what [`WriterLock::open`](super::WriterLock::open) finds on
//! the disk and repairs before the first append (temporary segments, a torn tail), and where it
//! continues. Its own module so `writer.rs` keeps to the append path; each step here runs once
//! per open, in the order `open` calls them.

use super::{create_segment, first_filled_end, live_segment, FileIo, State};
use crate::error::{JournalError, Position};
use crate::reader::{ReadEnd, Reader, Tail, TornReason, TornTail};
use crate::segment::{self, SegmentHeader, HEADER_BYTES};
use crate::storage::{read_full_at, write_all_at, Storage};
use crate::Options;
use std::io;
use std::sync::Arc;

/// The `JournalError::Io` maker for `storage`: which operation on which file failed, and why.
fn io_err_in(storage: &dyn Storage) -> impl Fn(&'static str, &str, io::Error) -> JournalError {
    let location = storage.location();
    move |op, file, source| JournalError::Io {
        location: location.clone(),
        op,
        file: file.to_owned(),
        source,
    }
}

/// Removes the temporary segments a crash mid-rotation left behind: they were never renamed
/// into place, so no record in them counts.
pub(super) fn remove_temp_segments(storage: &dyn Storage) -> Result<(), JournalError> {
    let io_err = io_err_in(storage);
    let mut removed_temp = false;
    for name in storage.list().map_err(|e| io_err("list", ".", e))? {
        if segment::is_temp_name(&name) {
            storage
                .remove(&name)
                .map_err(|e| io_err("remove", &name, e))?;
            removed_temp = true;
        }
    }
    if removed_temp {
        storage.sync_dir().map_err(|e| io_err("sync dir", ".", e))?;
    }
    Ok(())
}

/// Reads the last segments to their end: how the journal ends, and where a writer continues
/// (`None` when there is no segment with a whole header).
pub(super) fn read_tail(
    storage: &Arc<dyn Storage>,
    options: &Options,
) -> Result<(ReadEnd, Option<Tail>), JournalError> {
    let mut reader = Reader::open_tail(storage.clone(), options.limits)?;
    for item in reader.by_ref() {
        item?;
    }
    // Cannot fail: the loop above returned on every error, so the reader ran to its end.
    #[allow(clippy::expect_used)]
    let end = reader
        .end()
        .cloned()
        .expect("reader finished without an I/O error");
    Ok((end, reader.into_tail()))
}

/// Copies a torn tail to a quarantine file, then cuts it off its segment (removes the segment
/// when even its header is short), durably, so new records never land behind torn bytes.
/// Returns the quarantine file's name.
pub(super) fn quarantine_and_cut(
    storage: &dyn Storage,
    torn: &TornTail,
) -> Result<String, JournalError> {
    let io_err = io_err_in(storage);
    let quarantine_file = quarantine(storage, torn)?;
    let name = segment::file_name(torn.position.segment);
    if torn.reason == TornReason::ShortHeader {
        storage
            .remove(&name)
            .map_err(|e| io_err("remove", &name, e))?;
        storage.sync_dir().map_err(|e| io_err("sync dir", ".", e))?;
    } else {
        let mut file = storage
            .open_write(&name)
            .map_err(|e| io_err("open", &name, e))?;
        file.truncate(torn.position.offset)
            .map_err(|e| io_err("truncate", &name, e))?;
        file.sync_data().map_err(|e| io_err("sync", &name, e))?;
    }
    Ok(quarantine_file)
}

/// Opens the last valid segment for appending after its last valid record: the journal's id,
/// the file side and the appenders' side, as the tail left them.
pub(super) fn continue_segment(
    storage: &dyn Storage,
    tail: &Tail,
    options: &Options,
) -> Result<([u8; 16], FileIo, State), JournalError> {
    let io_err = io_err_in(storage);
    let name = segment::file_name(tail.valid_end.segment);
    let mut file = storage
        .open_write(&name)
        .map_err(|e| io_err("open", &name, e))?;
    // What we just read may still be only in the page cache (the last writer was killed
    // before syncing); make it durable before building on it.
    file.sync_data().map_err(|e| io_err("sync", &name, e))?;
    let filled_end = file.len_bytes().map_err(|e| io_err("stat", &name, e))?;
    let file = live_segment(file, options);
    let state = State::new(
        tail.next_seq,
        tail.valid_end.segment,
        tail.valid_end.offset,
        tail.records_in_segment,
        tail.format_version,
    );
    let io = FileIo {
        file,
        segment: tail.valid_end.segment,
        pos: tail.valid_end.offset,
        filled_end,
        zero_ahead_bytes: zero_ahead_bytes(options, tail.format_version),
        wrote: false,
        written_seq: tail.next_seq - 1,
        // What a crash left may be in the page cache only: the first sync is the writer's own.
        synced_end: 0,
    };
    Ok((tail.journal_id, io, state))
}

/// Starts an empty journal: a new id (unless the options fix one) and segment 0, whose first
/// record will be seq 1, in the current format version.
pub(super) fn create_first_segment(
    storage: &dyn Storage,
    options: &Options,
) -> Result<([u8; 16], FileIo, State), JournalError> {
    let journal_id = options
        .journal_id
        .unwrap_or_else(|| *uuid::Uuid::new_v4().as_bytes());
    let header = SegmentHeader {
        format_version: segment::FORMAT_VERSION,
        journal_id,
        segment_number: 0,
        first_seq: 1,
    };
    let zero_ahead_bytes = zero_ahead_bytes(options, segment::FORMAT_VERSION);
    let filled_end = first_filled_end(zero_ahead_bytes, options.limits);
    let file = create_segment(storage, &header, filled_end)?;
    let file = live_segment(file, options);
    let io = FileIo {
        file,
        segment: 0,
        pos: HEADER_BYTES as u64,
        filled_end,
        zero_ahead_bytes,
        wrote: false,
        written_seq: 0,
        synced_end: filled_end,
    };
    let state = State::new(1, 0, HEADER_BYTES as u64, 0, segment::FORMAT_VERSION);
    Ok((journal_id, io, state))
}

/// How far ahead a writer of a journal in `format_version` zero-fills: preallocation needs the
/// reading rules of version 2 (a zero tail ends a segment's records); version 1 appends.
fn zero_ahead_bytes(options: &Options, format_version: u32) -> u64 {
    match format_version {
        1 => 0,
        _ => options.preallocate_bytes,
    }
}

/// Copies a torn tail's bytes to a new file beside its segment, durably. Returns its name.
fn quarantine(storage: &dyn Storage, torn: &TornTail) -> Result<String, JournalError> {
    let Position { segment, offset } = torn.position;
    let source_name = segment::file_name(segment);
    let io_err = |op: &'static str, file: &str, source: io::Error| JournalError::Io {
        location: storage.location(),
        op,
        file: file.to_owned(),
        source,
    };
    let source = storage
        .open_read(&source_name)
        .map_err(|e| io_err("open", &source_name, e))?;
    let (name, mut out) = (0..1000)
        .find_map(|attempt| {
            let name = segment::quarantine_name(segment, offset, attempt);
            match storage.create_new(&name) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => None,
                other => Some((name, other)),
            }
        })
        .map(|(name, file)| {
            file.map(|f| (name.clone(), f))
                .map_err(|e| io_err("create", &name, e))
        })
        .unwrap_or_else(|| {
            Err(io_err(
                "create",
                &segment::quarantine_name(segment, offset, 0),
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "1000 quarantine files already",
                ),
            ))
        })?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, end) = (offset, offset + torn.dropped_bytes);
    while at < end {
        let want = buf.len().min((end - at) as usize);
        let n = read_full_at(source.as_ref(), at, &mut buf[..want])
            .map_err(|e| io_err("read", &source_name, e))?;
        if n == 0 {
            break;
        }
        write_all_at(out.as_mut(), at - offset, &buf[..n])
            .map_err(|e| io_err("write", &name, e))?;
        at += n as u64;
    }
    out.sync_data().map_err(|e| io_err("sync", &name, e))?;
    storage.sync_dir().map_err(|e| io_err("sync dir", ".", e))?;
    Ok(name)
}
