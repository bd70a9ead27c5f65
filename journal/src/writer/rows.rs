//! The writer's side of a record store: a batch of frames becomes one transaction of rows.
//!
//! Why the frames are built at all for rows: `append` encodes and checksums every record the
//! same way for both backends, so a row keeps the frame's CRC and a reader checks it as a frame.
//! Segment headers in the batch are ignored (a record store has no segments; the options given
//! to the appenders' side never rotate).

use super::{lock, Io, Journal, State};
use crate::error::JournalError;
use crate::framing::{self, FRAME_PREFIX_BYTES, SEQ_BYTES};
use crate::reader::{ReadEnd, Reader};
use crate::records::{JournalMeta, RecordStore, RecordWriter, RowRef, Taken};
use crate::segment::{self, HEADER_BYTES};
use crate::{Backend, OpenReport, Options};
use std::sync::Arc;

/// A record store's writer, and the last seq it stored.
pub(super) struct RowsIo {
    writer: Box<dyn RecordWriter>,
    written_seq: u64,
    /// Rows were stored without waiting for the store's log since the last durable commit.
    stored_lazily: bool,
    /// The lease was given up (by `close`, or the drop after it).
    released: bool,
}

impl RowsIo {
    /// Stores the batch's frames as rows in one transaction; returns whether that transaction
    /// waited for the store's log (the rows' `sync`). A sync with no new rows still commits
    /// durably when rows were stored lazily before it, so they become durable too.
    pub(super) fn store(
        &mut self,
        chunks: &[super::Chunk],
        durable: bool,
    ) -> Result<bool, JournalError> {
        let mut rows = Vec::new();
        for chunk in chunks {
            rows_of(&chunk.bytes, &mut rows);
        }
        if rows.is_empty() && !(durable && self.stored_lazily) {
            return Ok(false);
        }
        if let Some(first) = rows.first() {
            // Seq continuity on append, as for files: the batch runs on from the last stored.
            assert_eq!(
                first.seq,
                self.written_seq + 1,
                "rows must continue the journal"
            );
            assert!(
                rows.windows(2).all(|w| w[1].seq == w[0].seq + 1),
                "a batch's seqs must run on one by one"
            );
        }
        self.writer.append(&rows, durable)?;
        if let Some(last) = rows.last() {
            self.written_seq = last.seq;
        }
        self.stored_lazily = !durable && (self.stored_lazily || !rows.is_empty());
        Ok(durable)
    }

    /// Gives the lease up (a clean close), once.
    pub(super) fn release(&mut self) -> Result<(), JournalError> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        self.writer.release()
    }
}

/// The rows in `bytes`, whole frames back to back as `State::push` builds them.
fn rows_of<'a>(mut bytes: &'a [u8], rows: &mut Vec<RowRef<'a>>) {
    while !bytes.is_empty() {
        // `push` wrote these frames whole: a short one is a bug in this crate.
        #[allow(clippy::expect_used)] // `push` wrote these frames whole: a prefix is there
        let length = framing::length_field(bytes).expect("a whole frame") as usize;
        let frame_bytes = FRAME_PREFIX_BYTES + length;
        let frame = &bytes[..frame_bytes];
        let crc = framing::le_u32(frame, 4);
        let body = &frame[FRAME_PREFIX_BYTES..];
        let seq = framing::le_u64(body, 0);
        rows.push(RowRef {
            seq,
            crc,
            payload: &body[SEQ_BYTES..],
        });
        bytes = &bytes[frame_bytes..];
    }
}

/// The journal read through under the lease: how many records it holds (its end is where this
/// writer continues); corruption refuses, as for files.
fn records_to_continue(backend: &Backend, options: &Options) -> Result<u64, JournalError> {
    let (end, records) = Reader::open_backend(backend, options.limits)?.drain()?;
    match end {
        ReadEnd::Clean => Ok(records),
        ReadEnd::Corrupt(corruption) => Err(JournalError::Corrupt {
            location: backend.location(),
            corruption,
        }),
        ReadEnd::TornTail(_) => Err(JournalError::Store {
            location: backend.location(),
            op: "open",
            message: "a record store's reader reported a torn tail, which rows cannot have".into(),
        }),
    }
}

/// Opens a taken record store's journal for appending: reads it through under the lease (its
/// end is where this writer continues; corruption refuses, as for files), and gives a new
/// journal its identity.
pub(super) fn open(
    store: Arc<dyn RecordStore>,
    taken: Taken,
    mut options: Options,
) -> Result<(Journal, OpenReport), JournalError> {
    let backend = Backend::Records(store);
    let Taken {
        mut writer, meta, ..
    } = taken;
    let created = meta.is_none();
    // A journal refused here gives its lease up, as a refused directory's lock is released.
    let prepared = records_to_continue(&backend, &options).and_then(|records| {
        let meta = match meta {
            Some(meta) => meta,
            None => {
                let meta = JournalMeta {
                    journal_id: options
                        .journal_id
                        .unwrap_or_else(|| *uuid::Uuid::new_v4().as_bytes()),
                    format_version: segment::FORMAT_VERSION,
                };
                writer.create(meta)?;
                meta
            }
        };
        Ok((records, meta))
    });
    let (records, meta) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            let _ = writer.release();
            return Err(e);
        }
    };
    // One virtual segment: the appenders' side never starts another.
    options.limits.segment_size_bytes_max = u64::MAX;
    let next_seq = records + 1;
    let state = State::new(
        next_seq,
        0,
        HEADER_BYTES as u64,
        records,
        meta.format_version,
    );
    let io = Io::Rows(RowsIo {
        writer,
        written_seq: records,
        stored_lazily: false,
        released: false,
    });
    let report = OpenReport {
        created,
        torn: None,
        quarantine_file: None,
        next_seq,
    };
    let journal = Journal::assemble(backend, options, meta.journal_id, io, state, Box::new(()));
    debug_assert_eq!(lock(&journal.shared.state).next_seq, next_seq);
    Ok((journal, report))
}
