//! The live segment file: how a batch of encoded records reaches it (one write carrying the
//! zeros ahead), sealing a full segment and creating the next, cutting the zeros off.
//!
//! Why a room of its own: `writer.rs` decides what is written and when it is durable (append,
//! group commit, fail-stop); this is where the bytes meet a segment file, and where the live
//! segment's length, its zeros ahead and its synced part change as records are written
//! (`reopen.rs` sets them when a journal is opened). A record store has no segment files and
//! never comes here (`rows.rs`).

use super::{Chunk, Shared};
use crate::error::JournalError;
use crate::framing;
use crate::segment::{self, SegmentHeader, HEADER_BYTES};
use crate::storage::{write_all_at, Storage, WriteFile};
use crate::{FsyncPolicy, Options};
use std::io;
use std::sync::atomic::Ordering;

/// The file side of segment files.
pub(super) struct FileIo {
    pub(super) file: Box<dyn WriteFile>,
    pub(super) segment: u64,
    /// Where the next record goes in the segment: the end of its records.
    pub(super) pos: u64,
    /// The segment file's size: records, then zeros written ahead (`pos` without preallocation).
    pub(super) filled_end: u64,
    /// How far ahead of `pos` the segment is zero-filled; 0 (append only) for a journal of
    /// format version 1 or with preallocation off.
    pub(super) zero_ahead_bytes: u64,
    /// Whether this writer has written records: one that appended nothing leaves the files
    /// byte for byte as it found them, zeros included (a read-only look stays one).
    pub(super) wrote: bool,
    /// The last seq handed to the file (0 before the first): the next write must start at the
    /// seq after it (`assert_seqs_follow`).
    pub(super) written_seq: u64,
    /// How much of the segment has its blocks and size durable (this writer's own fdatasync
    /// after they last changed): a write below it changes no metadata the data needs, so a
    /// shared `syncfs` may make it durable (`shared_sync`). 0: not known, nothing shares.
    pub(super) synced_end: u64,
}

impl Shared {
    /// Writes `chunks` to the live segment, sealing it and creating the next where a chunk
    /// starts one; with `fsync`, then syncs the segment's data.
    pub(super) fn write_out(
        &self,
        storage: &dyn Storage,
        io: &mut FileIo,
        chunks: &mut [Chunk],
        fsync: bool,
    ) -> Result<(), JournalError> {
        let io_err = |op: &'static str, segment: u64, source: io::Error| JournalError::Io {
            location: storage.location(),
            op,
            file: segment::file_name(segment),
            source,
        };
        for chunk in chunks.iter_mut() {
            // Seq continuity on append: every byte the file gets continues the seqs before it.
            // Re-reading each frame costs a CRC pass over the batch, so debug builds only (the
            // tests and the fuzz campaign); a release build relies on `push` numbering in order.
            if cfg!(debug_assertions) {
                io.written_seq = assert_seqs_follow(&chunk.bytes, io.written_seq, &self.options);
            }
            if let Some(header) = &chunk.starts_segment {
                // Seal the current segment before the next one exists: only the last segment
                // may ever have a torn tail (the reader relies on it). Its zeros written ahead
                // are cut first, so a sealed segment ends at its last record.
                if io.filled_end > io.pos {
                    io.file
                        .truncate(io.pos)
                        .map_err(|e| io_err("truncate", io.segment, e))?;
                    io.filled_end = io.pos;
                }
                io.file
                    .sync_data()
                    .map_err(|e| io_err("sync", io.segment, e))?;
                self.syncs.fetch_add(1, Ordering::AcqRel);
                let filled_end = io.first_filled_end(self.options.limits);
                let file = create_segment(storage, header, filled_end)?;
                io.file = live_segment(file, &self.options);
                io.segment = header.segment_number;
                io.pos = HEADER_BYTES as u64;
                io.filled_end = filled_end;
                // `create_segment` synced the file's zeros and size.
                io.synced_end = filled_end;
            }
            let records = chunk.bytes.len();
            let zeros = io.zeros_to_add(records as u64, self.options.limits);
            // Records and the zeros ahead of them in one write: the zeros cost no I/O of their
            // own, and a fault counted per write lands where it did without preallocation.
            chunk.bytes.resize(records + zeros as usize, 0);
            let written = write_all_at(io.file.as_mut(), io.pos, &chunk.bytes);
            chunk.bytes.truncate(records);
            written.map_err(|e| io_err("write", io.segment, e))?;
            io.wrote |= records > 0;
            io.pos += records as u64;
            io.filled_end = io.filled_end.max(io.pos + zeros);
        }
        if fsync {
            io.file
                .sync_data()
                .map_err(|e| io_err("sync", io.segment, e))?;
            self.syncs.fetch_add(1, Ordering::AcqRel);
            io.synced_end = io.filled_end;
        }
        Ok(())
    }
}

impl FileIo {
    /// Cuts the zeros written ahead off the segment, synced unless the policy never syncs.
    pub(super) fn trim(&mut self, storage: &dyn Storage, sync: bool) -> Result<(), JournalError> {
        if self.filled_end == self.pos || !self.wrote {
            return Ok(());
        }
        let (segment, pos) = (self.segment, self.pos);
        let io_err = |op: &'static str, source: io::Error| JournalError::Io {
            location: storage.location(),
            op,
            file: segment::file_name(segment),
            source,
        };
        // Until the cut size is durable, no write is known to leave the metadata alone.
        self.synced_end = 0;
        self.file.truncate(pos).map_err(|e| io_err("truncate", e))?;
        if sync {
            self.file.sync_data().map_err(|e| io_err("sync", e))?;
            self.synced_end = pos;
        }
        self.filled_end = pos;
        Ok(())
    }

    /// Whether everything written lies in blocks this writer's own sync made durable with the
    /// file's size: then the data is all a sync has to make durable, which a shared `syncfs`
    /// does (ext4 flushes the device after the data's write-back, journal or not), whereas a
    /// size or an allocation would need the metadata write `fdatasync` makes and `syncfs` on a
    /// journal-less ext4 makes only after its flush.
    pub(super) fn data_only(&self) -> bool {
        self.filled_end <= self.synced_end
    }

    /// The size a new segment is created with: its header and the zeros ahead of its records.
    pub(super) fn first_filled_end(&self, limits: crate::Limits) -> u64 {
        first_filled_end(self.zero_ahead_bytes, limits)
    }

    /// How many zeros to write after `records` bytes at `pos`: none while they fit in the
    /// zero-filled part; else enough to be `zero_ahead_bytes` ahead again, ending on a 4 KiB
    /// boundary and not past the segment size limit.
    pub(super) fn zeros_to_add(&self, records: u64, limits: crate::Limits) -> u64 {
        let end = self.pos + records;
        if self.zero_ahead_bytes == 0 || end <= self.filled_end {
            return 0;
        }
        let ahead = end
            .saturating_add(self.zero_ahead_bytes)
            .checked_next_multiple_of(4096)
            .unwrap_or(u64::MAX);
        ahead.min(limits.segment_size_bytes_max).max(end) - end
    }
}

/// Checks that `bytes` are whole frames whose seqs run on from `written_seq` without a gap or a
/// repeat, and returns the last one: a chunk lost, doubled or reordered between `push` and the
/// file would otherwise surface only when a reader calls the journal corrupt.
fn assert_seqs_follow(bytes: &[u8], written_seq: u64, options: &Options) -> u64 {
    let mut last = written_seq;
    let mut offset = 0;
    while offset < bytes.len() {
        match framing::check(&bytes[offset..], options.limits.record_size_bytes_max) {
            framing::FrameCheck::Valid { seq, frame_bytes } => {
                assert_eq!(
                    seq,
                    last + 1,
                    "seq continuity: frame at byte {offset} of a write"
                );
                last = seq;
                offset += frame_bytes as usize;
            }
            framing::FrameCheck::Bad(bad) => {
                panic!("the writer built a bad frame at byte {offset} of a write: {bad:?}")
            }
        }
    }
    last
}

/// The size a new segment is created with when it is zero-filled `zero_ahead_bytes` ahead: not
/// past the segment size limit, never less than its header.
pub(super) fn first_filled_end(zero_ahead_bytes: u64, limits: crate::Limits) -> u64 {
    let header = HEADER_BYTES as u64;
    header
        .saturating_add(zero_ahead_bytes)
        .min(limits.segment_size_bytes_max)
        .max(header)
}

/// The live segment's file, as the writer appends to it: under `FsyncPolicy::Never` its writes
/// over the zeros ahead become copies into the page cache where the storage can
/// (`storage/fs/mapped.rs`); a file that cannot keeps writing.
pub(super) fn live_segment(mut file: Box<dyn WriteFile>, options: &Options) -> Box<dyn WriteFile> {
    if options.fsync == FsyncPolicy::Never {
        file.map_writes();
    }
    file
}

/// Creates a segment atomically: temp file, header and zeros up to `filled_end` (one write),
/// sync, rename, directory sync.
pub(super) fn create_segment(
    storage: &dyn Storage,
    header: &SegmentHeader,
    filled_end: u64,
) -> Result<Box<dyn WriteFile>, JournalError> {
    let temp = segment::temp_name(header.segment_number);
    let name = segment::file_name(header.segment_number);
    let io_err = |op: &'static str, file: &str, source: io::Error| JournalError::Io {
        location: storage.location(),
        op,
        file: file.to_owned(),
        source,
    };
    let mut file = storage
        .create_new(&temp)
        .map_err(|e| io_err("create", &temp, e))?;
    let mut bytes = header.encode().to_vec();
    bytes.resize(filled_end as usize, 0);
    write_all_at(file.as_mut(), 0, &bytes).map_err(|e| io_err("write", &temp, e))?;
    file.sync_data().map_err(|e| io_err("sync", &temp, e))?;
    storage
        .rename(&temp, &name)
        .map_err(|e| io_err("rename", &temp, e))?;
    storage.sync_dir().map_err(|e| io_err("sync dir", ".", e))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(seqs: &[u64]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for &seq in seqs {
            let start = framing::begin(&mut bytes, seq);
            bytes.extend_from_slice(b"payload");
            framing::seal(&mut bytes, start);
        }
        bytes
    }

    #[test]
    fn seqs_that_run_on_pass_and_return_the_last() {
        let options = Options::default();
        assert_eq!(assert_seqs_follow(&frames(&[5, 6, 7]), 4, &options), 7);
        assert_eq!(assert_seqs_follow(&[], 4, &options), 4);
    }

    #[test]
    #[should_panic(expected = "seq continuity")]
    fn a_gap_in_a_write_is_caught() {
        assert_seqs_follow(&frames(&[5, 7]), 4, &Options::default());
    }

    #[test]
    #[should_panic(expected = "seq continuity")]
    fn a_write_that_repeats_the_last_seq_is_caught() {
        assert_seqs_follow(&frames(&[4]), 4, &Options::default());
    }
}
