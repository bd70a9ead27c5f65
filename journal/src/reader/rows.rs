//! Reading a record store's rows: each row is made back into its frame and checked as a frame
//! in a segment is (`framing::check`), so a row changed inside the database is corruption.
//!
//! Positions: a record store has no files, so a row's position is where its frame would sit if
//! the journal were one segment (segment 0, after its header, frames back to back). A journal
//! of one segment copied between the two backends reports the same positions in both.
//!
//! There is no torn tail here: a store commits a batch whole or not at all. A bad row or a seq
//! out of order is corruption wherever it is (a salvaging reader passes over it, as it does in
//! a segment).

use super::{Found, Reader};
use crate::codec::Encoding;
use crate::error::{CorruptionKind, JournalError, Position};
use crate::framing::{self, FrameCheck, FRAME_PREFIX_BYTES, SEQ_BYTES};
use crate::records::{JournalMeta, RowSource};
use crate::segment::HEADER_BYTES;
use crate::ReadEnd;

/// A record store's rows being read.
pub(super) struct Rows {
    source: Box<dyn RowSource>,
    /// The current row's frame: what [`Reader::next_ref`] borrows its payload from.
    pub(super) frame: Vec<u8>,
    /// Where the next frame would start in a single segment.
    offset: u64,
    pub(super) encoding: Encoding,
    pub(super) journal_id: [u8; 16],
}

impl Rows {
    /// Fails with the journal's format version when it is not one this build reads.
    pub(super) fn new(meta: JournalMeta, source: Box<dyn RowSource>) -> Result<Rows, u32> {
        let encoding = Encoding::of_format(meta.format_version).ok_or(meta.format_version)?;
        Ok(Rows {
            source,
            frame: Vec::new(),
            offset: HEADER_BYTES as u64,
            encoding,
            journal_id: meta.journal_id,
        })
    }
}

impl Reader {
    /// The next row that checks, or `None` at the end (clean, or corrupt when not salvaging).
    pub(super) fn next_row_found(&mut self) -> Result<Option<Found>, JournalError> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            let Some(rows) = self.rows.as_mut() else {
                return Ok(None);
            };
            let Some(row) = rows.source.next_row()? else {
                self.end = Some(ReadEnd::Clean);
                return Ok(None);
            };
            // The frame as a segment would hold it: length, the stored crc, seq, payload.
            rows.frame.clear();
            framing::begin(&mut rows.frame, row.seq);
            rows.frame.extend_from_slice(&row.payload);
            let length = u32::try_from(rows.frame.len() - FRAME_PREFIX_BYTES).unwrap_or(u32::MAX);
            rows.frame[0..4].copy_from_slice(&length.to_le_bytes());
            rows.frame[4..8].copy_from_slice(&row.crc.to_le_bytes());
            let offset = rows.offset;
            let frame_bytes = rows.frame.len() as u64;
            rows.offset += frame_bytes;
            let position = Position { segment: 0, offset };
            let payload = FRAME_PREFIX_BYTES + SEQ_BYTES..rows.frame.len();
            let expected = self.expected_seq;
            let (kind, skipped_bytes) =
                match framing::check(&rows.frame, self.limits.record_size_bytes_max) {
                    FrameCheck::Valid { seq, .. } if seq == expected => {
                        return Ok(Some(self.found(seq, position, frame_bytes, payload)));
                    }
                    // Salvaging, as in a segment: a later seq is taken (the gap is listed), an
                    // earlier one is a stray copy and is passed over.
                    FrameCheck::Valid { seq, .. } => (
                        CorruptionKind::SeqGap {
                            expected,
                            found: seq,
                        },
                        if seq < expected { frame_bytes } else { 0 },
                    ),
                    FrameCheck::Bad(bad) => (CorruptionKind::BadRecord(bad), frame_bytes),
                };
            if !self.corrupt(0, offset, kind, skipped_bytes) {
                return Ok(None);
            }
            if skipped_bytes == 0 {
                return Ok(Some(self.found(row.seq, position, frame_bytes, payload)));
            }
        }
    }

    fn found(
        &mut self,
        seq: u64,
        position: Position,
        frame_bytes: u64,
        payload: std::ops::Range<usize>,
    ) -> Found {
        self.expected_seq = seq + 1;
        self.records += 1;
        Found {
            seq,
            position,
            frame_bytes,
            payload,
        }
    }
}
