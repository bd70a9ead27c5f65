//! The reader's view of one segment file: where it is, a read window over the file, and the two
//! looks past a bad frame (the zeros after it, the first valid frame after it).

use crate::codec::Encoding;
use crate::framing::{self, FRAME_BYTES_MIN};
use crate::scan::{Scan, ScanWork};
use crate::storage::{read_full_at, ReadAt};

/// How much of a segment one read brings into the window.
const READ_WINDOW_BYTES: u64 = 1 << 20;

pub(super) struct Cursor {
    pub(super) number: u64,
    /// The encoding of this segment's payloads (its header's format version).
    pub(super) encoding: Encoding,
    pub(super) file: Box<dyn ReadAt>,
    pub(super) len_bytes: u64,
    pub(super) pos: u64,
    pub(super) window: Vec<u8>,
    pub(super) window_start: u64,
    pub(super) records: u64,
    /// The tail scan's read-ahead, kept for a later scan in this segment.
    pub(super) scan: Option<Scan>,
    /// Zeros after the last record end the segment's records (format version 2: preallocated).
    pub(super) zero_tail_ends_records: bool,
}

impl Cursor {
    /// Up to `n` bytes at `offset` (fewer at the end of the file).
    pub(super) fn bytes(&mut self, offset: u64, n: u64) -> std::io::Result<&[u8]> {
        let end = offset.saturating_add(n).min(self.len_bytes);
        let offset = offset.min(end);
        let window_end = self.window_start + self.window.len() as u64;
        if offset < self.window_start || end > window_end {
            let want = (end - offset)
                .max(READ_WINDOW_BYTES)
                .min(self.len_bytes - offset);
            self.window.resize(want as usize, 0);
            let got = read_full_at(self.file.as_ref(), offset, &mut self.window)?;
            self.window.truncate(got);
            self.window_start = offset;
        }
        let from = (offset - self.window_start) as usize;
        let to = ((end - self.window_start) as usize).min(self.window.len());
        Ok(&self.window[from..to.max(from)])
    }

    /// The bytes of the frame at `offset`, as many as [`framing::check`] needs to judge it.
    pub(super) fn frame_bytes(&mut self, offset: u64, length_max: u32) -> std::io::Result<&[u8]> {
        let prefix = self.bytes(offset, FRAME_BYTES_MIN as u64)?;
        let need = framing::bytes_needed(prefix, length_max);
        self.bytes(offset, need)
    }

    /// Drops the read window, so the next read sees the file as it is now.
    pub(super) fn forget_window(&mut self) {
        self.window.clear();
        self.window_start = 0;
    }

    /// The end of the last byte that is not zero from `offset` to the end of the file, or `None`
    /// when every one is zero.
    pub(super) fn nonzero_end(&mut self, offset: u64) -> std::io::Result<Option<u64>> {
        let mut found = None;
        let mut at = offset;
        while at < self.len_bytes {
            let bytes = self.bytes(at, READ_WINDOW_BYTES)?;
            if bytes.is_empty() {
                break; // the file shrank under us: what was read is what there is
            }
            // Compared a block at a time against zeros (a memcmp): most of a tail is zeros.
            if !is_zero(bytes) {
                let i = bytes.iter().rposition(|&b| b != 0).unwrap_or(0);
                found = Some(at + i as u64 + 1);
            }
            at += bytes.len() as u64;
        }
        Ok(found)
    }

    /// Where the first valid frame after `offset` in this segment starts, if any does, and the
    /// scan's work. Linear in the bytes scanned (see `scan.rs`); a later scan in the same
    /// segment (salvaging) goes on with what an earlier one read.
    pub(super) fn valid_frame_after(
        &mut self,
        offset: u64,
        length_max: u32,
    ) -> std::io::Result<(Option<u64>, ScanWork)> {
        let from = offset + 1;
        let mut scan = match self.scan.take() {
            Some(scan) if scan.covers(from) => scan,
            _ => Scan::new(from),
        };
        let found = scan.first_valid_from(self.file.as_ref(), from, self.len_bytes, length_max);
        let work = std::mem::take(&mut scan.work);
        self.scan = Some(scan);
        Ok((found?, work))
    }
}

/// Whether every byte of `bytes` is zero.
pub(super) fn is_zero(bytes: &[u8]) -> bool {
    const ZEROS: [u8; 4096] = [0; 4096];
    bytes.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()])
}
