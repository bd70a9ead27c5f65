//! The streaming reader: yields records in seq order and says how the journal ends.
//!
//! Why it works this way: a crash can leave the last segment ending anywhere, even inside a
//! record, and that is normal (a *torn tail*); damage anywhere else is *corruption* and must
//! never be skipped silently (DESIGN.md I7). The two are told apart by one rule: a bad record is
//! a torn tail only when it is in the last segment and no valid record follows it. So on a bad
//! record the reader scans the rest of the segment for any frame that checks; if one exists, what
//! it stopped at is corruption. That scan is linear in the bytes it reads (`scan.rs`).
//!
//! Memory is bounded by the read window (1 MiB) or the largest record, whichever is larger; after
//! a bad frame, the scan's read-ahead adds up to about twice the record size limit (a candidate's
//! whole frame is read before it is checked, as before).

use crate::error::{Corruption, CorruptionKind, JournalError, Position};
use crate::framing::{self, BadFrame, FrameCheck, FRAME_BYTES_MIN};
use crate::records::RecordStore;
use crate::scan::ScanWork;
use crate::segment::{self, BadHeader, SegmentHeader, HEADER_BYTES};
use crate::storage::{read_full_at, ReadAt, Storage};
use crate::{Backend, Limits};
use std::ops::ControlFlow;
use std::sync::Arc;

mod cursor;
mod record;
mod rows;
use cursor::{is_zero, Cursor};
pub use record::{Record, RecordRef};
use rows::Rows;

/// A torn tail: where the valid data ends and how many bytes follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The first byte that is not part of a valid record.
    pub position: Position,
    /// Bytes from `position` to the end of the last segment (format version 2: to its last byte
    /// that is not zero; the zeros after it were written ahead, never records): what a resume
    /// drops.
    pub dropped_bytes: u64,
    /// What was found at `position`.
    pub reason: TornReason,
}

/// What a torn tail looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TornReason {
    /// A record frame that does not check (cut short, zeros, garbage).
    Frame(BadFrame),
    /// The last segment is shorter than its header.
    ShortHeader,
}

impl std::fmt::Display for TornReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TornReason::Frame(b) => write!(f, "{b}"),
            TornReason::ShortHeader => write!(f, "last segment shorter than its header"),
        }
    }
}

/// How reading a journal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadEnd {
    /// Every byte belongs to a valid record.
    Clean,
    /// Valid records, then a torn tail in the last segment.
    TornTail(TornTail),
    /// Corruption: reading stopped here. Records before it were returned.
    Corrupt(Corruption),
}

/// Where a writer reopening the journal continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail {
    pub journal_id: [u8; 16],
    /// The journal's format version: a writer continuing it keeps writing this one.
    pub format_version: u32,
    /// The last segment with a whole header, and the end of its valid data.
    pub valid_end: Position,
    pub records_in_segment: u64,
    pub next_seq: u64,
}

/// A segment file just opened, before its header is judged.
struct OpenedSegment {
    file: Box<dyn ReadAt>,
    len_bytes: u64,
    /// The header as decoded, or what is wrong with it.
    header: Result<SegmentHeader, BadHeader>,
}

/// Reads a journal's records in order. Iterate it; when it returns `None`, [`Reader::end`] says
/// whether the journal was clean, torn or corrupt. An `Err` item is an I/O error; iteration stops
/// after it and `end` stays `None`.
pub struct Reader {
    /// The segment files read; `None` for a record store's rows.
    storage: Option<Arc<dyn Storage>>,
    /// A record store's rows; `None` for segment files.
    rows: Option<Rows>,
    location: String,
    segments: Vec<u64>,
    next_index: usize,
    tail_only: bool,
    cursor: Option<Cursor>,
    expected_seq: u64,
    journal_id: Option<[u8; 16]>,
    /// The first whole header's format version: every segment of a journal must have it.
    format_version: Option<u32>,
    limits: Limits,
    end: Option<ReadEnd>,
    failed: bool,
    records: u64,
    tail: Option<Tail>,
    salvage: bool,
    skipped: Vec<Skipped>,
    scan_work: ScanWork,
}

/// What a salvaging reader passed over: where, how many bytes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Where the skipped bytes begin.
    pub position: Position,
    /// How many bytes were skipped.
    pub bytes: u64,
    /// Why they were skipped: the description of the bad frame or header found there.
    pub what: String,
}

impl Reader {
    /// Opens the journal in `storage` for reading. Takes no lock: reading a live journal is
    /// allowed and sees whatever has been written so far.
    pub fn open(storage: Arc<dyn Storage>, limits: Limits) -> Result<Reader, JournalError> {
        Reader::new(storage, limits, false)
    }

    /// A reader that passes over corruption instead of stopping at it, and lists what it
    /// passed over in [`Reader::skipped`]: bad records (to the next valid frame), bad segments
    /// (whole), missing segments and seq gaps. For reading what can be read of a damaged
    /// journal; never for deciding that a journal is fine.
    pub fn open_salvaging(
        storage: Arc<dyn Storage>,
        limits: Limits,
    ) -> Result<Reader, JournalError> {
        let mut reader = Reader::new(storage, limits, false)?;
        reader.salvage = true;
        Ok(reader)
    }

    /// Opens the journal in `backend` for reading, whichever kind it is; takes no lock.
    pub fn open_backend(backend: &Backend, limits: Limits) -> Result<Reader, JournalError> {
        match backend {
            Backend::Files(storage) => Reader::open(storage.clone(), limits),
            Backend::Records(store) => Reader::from_store(store.as_ref(), limits),
        }
    }

    /// [`Reader::open_salvaging`] for either kind of backend.
    pub fn open_salvaging_backend(
        backend: &Backend,
        limits: Limits,
    ) -> Result<Reader, JournalError> {
        let mut reader = match backend {
            Backend::Files(storage) => Reader::new(storage.clone(), limits, false)?,
            Backend::Records(store) => Reader::from_store(store.as_ref(), limits)?,
        };
        reader.salvage = true;
        Ok(reader)
    }

    /// A reader of a record store's rows (an empty journal when the store holds none).
    fn from_store(store: &dyn RecordStore, limits: Limits) -> Result<Reader, JournalError> {
        let location = store.location();
        let rows = match store.rows()? {
            None => None,
            Some((meta, source)) => {
                Some(
                    Rows::new(meta, source).map_err(|version| JournalError::Corrupt {
                        location: location.clone(),
                        corruption: Corruption {
                            position: Position {
                                segment: 0,
                                offset: 0,
                            },
                            kind: CorruptionKind::BadHeader(BadHeader::UnsupportedVersion {
                                found: version,
                                supported: segment::FORMAT_VERSION,
                            }),
                        },
                    })?,
                )
            }
        };
        let mut reader = Reader::empty(None, location, limits, false);
        if let Some(rows) = &rows {
            reader.format_version = Some(rows.encoding.format_version());
            reader.journal_id = Some(rows.journal_id);
        } else {
            reader.end = Some(ReadEnd::Clean);
        }
        reader.rows = rows;
        Ok(reader)
    }

    /// What a salvaging reader passed over, in order.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Reads only the last two segments (enough to find where a writer continues).
    pub(crate) fn open_tail(
        storage: Arc<dyn Storage>,
        limits: Limits,
    ) -> Result<Reader, JournalError> {
        Reader::new(storage, limits, true)
    }

    fn new(
        storage: Arc<dyn Storage>,
        limits: Limits,
        tail_only: bool,
    ) -> Result<Reader, JournalError> {
        let names = storage.list().map_err(|source| JournalError::Io {
            location: storage.location(),
            op: "list",
            file: ".".into(),
            source,
        })?;
        let mut segments: Vec<u64> = names
            .iter()
            .filter_map(|n| segment::parse_file_name(n))
            .collect();
        segments.sort_unstable();
        let next_index = if tail_only {
            segments.len().saturating_sub(2)
        } else {
            0
        };
        let location = storage.location();
        let mut reader = Reader::empty(Some(storage), location, limits, tail_only);
        reader.segments = segments;
        reader.next_index = next_index;
        Ok(reader)
    }

    fn empty(
        storage: Option<Arc<dyn Storage>>,
        location: String,
        limits: Limits,
        tail_only: bool,
    ) -> Reader {
        Reader {
            storage,
            rows: None,
            location,
            segments: Vec::new(),
            next_index: 0,
            tail_only,
            cursor: None,
            expected_seq: 1,
            journal_id: None,
            format_version: None,
            limits,
            end: None,
            failed: false,
            records: 0,
            tail: None,
            salvage: false,
            skipped: Vec::new(),
            scan_work: ScanWork::default(),
        }
    }

    /// How the journal ends; `None` until iteration has returned `None` (or after an I/O error).
    pub fn end(&self) -> Option<&ReadEnd> {
        self.end.as_ref()
    }

    /// The work done so far looking for a valid frame after a bad one (rule 3 of FORMAT.md):
    /// linear in the bytes scanned, whatever they hold.
    pub fn scan_work(&self) -> ScanWork {
        self.scan_work
    }

    /// The journal's id, once known: from the first segment header read, or a record store's
    /// journal's from the start. `None` before (and for an empty journal).
    pub fn journal_id(&self) -> Option<[u8; 16]> {
        self.journal_id
    }

    /// Records returned so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// Reads to the end, discarding records; returns how the journal ends.
    pub fn drain(mut self) -> Result<(ReadEnd, u64), JournalError> {
        while let Some(item) = self.next_ref() {
            item?;
        }
        // Cannot fail: the loop above returned on every error, so the reader ran to its end.
        #[allow(clippy::expect_used)]
        let end = self
            .end
            .clone()
            .expect("iteration finished without an I/O error");
        Ok((end, self.records))
    }

    pub(crate) fn into_tail(self) -> Option<Tail> {
        self.tail
    }

    fn io_error(&self, op: &'static str, segment: u64, source: std::io::Error) -> JournalError {
        JournalError::Io {
            location: self.location.clone(),
            op,
            file: segment::file_name(segment),
            source,
        }
    }

    /// Records corruption. Returns true when salvaging (the caller passes over `bytes` and
    /// goes on); otherwise reading ends here.
    fn corrupt(&mut self, segment: u64, offset: u64, kind: CorruptionKind, bytes: u64) -> bool {
        let position = Position { segment, offset };
        if self.salvage {
            self.skipped.push(Skipped {
                position,
                bytes,
                what: kind.to_string(),
            });
            return true;
        }
        self.end = Some(ReadEnd::Corrupt(Corruption { position, kind }));
        false
    }

    /// Opens the next segment and checks its header. `Ok(false)` when reading has ended.
    fn open_next_segment(&mut self) -> Result<bool, JournalError> {
        let Some(&number) = self.segments.get(self.next_index) else {
            self.end = Some(ReadEnd::Clean);
            return Ok(false);
        };
        if !self.check_segment_follows(number) {
            return Ok(false);
        }
        let opened = self.read_header(number)?;
        let first_opened = self.journal_id.is_none();
        let header = match self.check_header(number, opened.len_bytes, opened.header) {
            ControlFlow::Continue(header) => header,
            ControlFlow::Break(go_on) => return Ok(go_on),
        };
        if !self.check_first_seq(number, &header, first_opened) {
            return Ok(false);
        }
        self.start_segment(number, opened.file, opened.len_bytes, &header);
        Ok(true)
    }

    /// Whether segment `number` is the one expected next: a gap in the numbers is a missing
    /// segment, which is corruption. True when reading goes on (no gap, or salvaging past it).
    fn check_segment_follows(&mut self, number: u64) -> bool {
        let expected_number = match (self.next_index, self.tail_only) {
            (0, true) => number,
            (0, false) => 0,
            (i, _) => self.segments[i - 1] + 1,
        };
        number == expected_number
            || self.corrupt(
                expected_number,
                0,
                CorruptionKind::MissingSegment {
                    missing: expected_number,
                },
                0,
            )
    }

    /// Opens segment `number` and decodes its header (judged by [`Reader::check_header`]).
    fn read_header(&self, number: u64) -> Result<OpenedSegment, JournalError> {
        let name = segment::file_name(number);
        let storage = self.storage.as_ref().ok_or_else(|| JournalError::Store {
            location: self.location.clone(),
            op: "read",
            message: "a record store has no segment files".into(),
        })?;
        let file = storage
            .open_read(&name)
            .map_err(|e| self.io_error("open", number, e))?;
        let len_bytes = file
            .len_bytes()
            .map_err(|e| self.io_error("stat", number, e))?;
        let mut header = [0u8; HEADER_BYTES];
        let got = read_full_at(file.as_ref(), 0, &mut header)
            .map_err(|e| self.io_error("read", number, e))?;
        Ok(OpenedSegment {
            header: SegmentHeader::decode(&header[..got]),
            file,
            len_bytes,
        })
    }

    /// Checks a segment's header: whole, numbered as its file is named, and of this journal
    /// (the first header read decides which journal that is). `Break(go_on)` when the segment
    /// is not to be read: a short header on the last segment is a torn tail, so reading ends;
    /// any other bad header is corruption (see [`Reader::skip_segment`]).
    fn check_header(
        &mut self,
        number: u64,
        len_bytes: u64,
        decoded: Result<SegmentHeader, BadHeader>,
    ) -> ControlFlow<bool, SegmentHeader> {
        let is_last = self.next_index + 1 == self.segments.len();
        let header = match decoded {
            Ok(h) => h,
            Err(BadHeader::Short { .. }) if is_last => {
                self.end = Some(ReadEnd::TornTail(TornTail {
                    position: Position {
                        segment: number,
                        offset: 0,
                    },
                    dropped_bytes: len_bytes,
                    reason: TornReason::ShortHeader,
                }));
                return ControlFlow::Break(false);
            }
            Err(bad) => {
                return self.skip_segment(number, CorruptionKind::BadHeader(bad), len_bytes)
            }
        };
        if header.segment_number != number {
            let kind = CorruptionKind::SegmentNumberMismatch {
                expected: number,
                found: header.segment_number,
            };
            return self.skip_segment(number, kind, len_bytes);
        }
        match self.journal_id {
            Some(id) if id != header.journal_id => {
                return self.skip_segment(number, CorruptionKind::JournalIdMismatch, len_bytes)
            }
            _ => self.journal_id = Some(header.journal_id),
        }
        // One journal, one format version: a writer continues a journal in the version it was
        // created in, so a segment of another version is damage (or a mix-up), never an upgrade.
        match self.format_version {
            Some(expected) if expected != header.format_version => {
                let kind = CorruptionKind::FormatVersionMismatch {
                    expected,
                    found: header.format_version,
                };
                return self.skip_segment(number, kind, len_bytes);
            }
            _ => self.format_version = Some(header.format_version),
        }
        ControlFlow::Continue(header)
    }

    /// Records a whole segment as corrupt and moves past it. `Break(go_on)`: whether reading
    /// goes on is [`Reader::corrupt`]'s answer (only when salvaging).
    fn skip_segment(
        &mut self,
        number: u64,
        kind: CorruptionKind,
        len_bytes: u64,
    ) -> ControlFlow<bool, SegmentHeader> {
        let go_on = self.corrupt(number, 0, kind, len_bytes);
        self.next_index += 1;
        ControlFlow::Break(go_on)
    }

    /// Whether the segment's first seq follows the records before it; a jump is corruption.
    /// True when reading goes on (it follows, it cannot be checked, or salvaging past it).
    fn check_first_seq(&mut self, number: u64, header: &SegmentHeader, first_opened: bool) -> bool {
        // Reading only the tail, the first segment's first seq cannot be checked: trust it.
        let first_seq_known = !(self.tail_only && first_opened);
        !first_seq_known
            || header.first_seq == self.expected_seq
            || self.corrupt(
                number,
                0,
                CorruptionKind::FirstSeqMismatch {
                    expected: self.expected_seq,
                    found: header.first_seq,
                },
                0,
            )
    }

    /// Makes segment `number`, whose header checked, the one being read: records start after
    /// its header, and a writer reopening now would continue there.
    fn start_segment(
        &mut self,
        number: u64,
        file: Box<dyn ReadAt>,
        len_bytes: u64,
        header: &SegmentHeader,
    ) {
        self.expected_seq = header.first_seq;
        self.next_index += 1;
        self.tail = Some(Tail {
            journal_id: header.journal_id,
            format_version: header.format_version,
            valid_end: Position {
                segment: number,
                offset: HEADER_BYTES as u64,
            },
            records_in_segment: 0,
            next_seq: header.first_seq,
        });
        self.cursor = Some(Cursor {
            number,
            encoding: header.encoding(),
            file,
            len_bytes,
            pos: HEADER_BYTES as u64,
            window: Vec::new(),
            window_start: 0,
            records: 0,
            scan: None,
            zero_tail_ends_records: segment::preallocated(header.format_version),
        });
    }

    /// The next record, as where its payload sits in the cursor's window.
    fn next_found(&mut self) -> Result<Option<Found>, JournalError> {
        if self.rows.is_some() {
            return self.next_row_found();
        }
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            if self.cursor.is_none() {
                if !self.open_next_segment()? {
                    return Ok(None);
                }
                if self.cursor.is_none() {
                    // A salvaging reader passed over a whole segment.
                    continue;
                }
            }
            let Some(mut cursor) = self.cursor.take() else {
                continue;
            };
            match self.step(&mut cursor)? {
                Step::Record(found) => {
                    self.cursor = Some(cursor);
                    return Ok(Some(found));
                }
                Step::SegmentDone => continue,
                Step::Again => {
                    self.cursor = Some(cursor);
                    continue;
                }
                Step::Ended => return Ok(None),
            }
        }
    }

    /// The next record with its payload borrowed from the reader (no copy): the iterator's
    /// `next` without an allocation per record. `None` at the end (see [`Reader::end`]); an
    /// `Err` is an I/O error, after which reading stops.
    pub fn next_ref(&mut self) -> Option<Result<RecordRef<'_>, JournalError>> {
        if self.failed {
            return None;
        }
        match self.next_found() {
            Ok(Some(found)) => {
                // `next_found` put the record in the row's frame or the cursor's window.
                let (bytes, encoding) = match &self.rows {
                    Some(rows) => (&rows.frame, rows.encoding),
                    None => {
                        let cursor = self.cursor.as_ref()?;
                        (&cursor.window, cursor.encoding)
                    }
                };
                Some(Ok(RecordRef {
                    seq: found.seq,
                    position: found.position,
                    frame_bytes: found.frame_bytes,
                    payload: &bytes[found.payload.clone()],
                    encoding,
                }))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    /// Reads the frame at the cursor.
    fn step(&mut self, cursor: &mut Cursor) -> Result<Step, JournalError> {
        let length_max = self.limits.record_size_bytes_max;
        let (number, pos) = (cursor.number, cursor.pos);
        if pos >= cursor.len_bytes {
            return Ok(Step::SegmentDone);
        }
        let bytes = cursor
            .frame_bytes(pos, length_max)
            .map_err(|e| self.io_error("read", number, e))?;
        let here = Position {
            segment: number,
            offset: pos,
        };
        match framing::check(bytes, length_max) {
            FrameCheck::Valid { seq, frame_bytes } => {
                if seq != self.expected_seq {
                    let expected = self.expected_seq;
                    // Salvaging: a later seq is taken (the gap is listed); an earlier one is a
                    // stray copy and is passed over.
                    let bytes = if seq < expected { frame_bytes } else { 0 };
                    let kind = CorruptionKind::SeqGap {
                        expected,
                        found: seq,
                    };
                    if !self.corrupt(number, pos, kind, bytes) {
                        return Ok(Step::Ended);
                    }
                    if seq < expected {
                        cursor.pos += frame_bytes;
                        return Ok(Step::Again);
                    }
                    self.expected_seq = seq;
                }
                // Where the payload sits in the window (`bytes` is the frame, in the window).
                let frame_at = (pos - cursor.window_start) as usize;
                let payload = frame_at + FRAME_BYTES_MIN..frame_at + frame_bytes as usize;
                cursor.pos += frame_bytes;
                cursor.records += 1;
                self.expected_seq += 1;
                self.records += 1;
                // Cannot fail: the header is read, and the id set, before any record.
                #[allow(clippy::expect_used)]
                let journal_id = self.journal_id.expect("set with the header");
                self.tail = Some(Tail {
                    journal_id,
                    format_version: cursor.encoding.format_version(),
                    valid_end: Position {
                        segment: number,
                        offset: cursor.pos,
                    },
                    records_in_segment: cursor.records,
                    next_seq: self.expected_seq,
                });
                Ok(Step::Record(Found {
                    seq,
                    position: here,
                    frame_bytes,
                    payload,
                }))
            }
            FrameCheck::Bad(bad) => {
                let is_last = self.next_index == self.segments.len();
                // Only a bad frame pays for the look at its first bytes.
                let zero_prefix = is_zero(&bytes[..bytes.len().min(8)]);
                if zero_prefix && cursor.zero_tail_ends_records {
                    return self.zeros_at_frame(cursor, bad, is_last);
                }
                // Format 2: what a torn tail drops ends at its last byte that is not zero.
                let nonzero_end = match cursor.zero_tail_ends_records {
                    true => cursor
                        .nonzero_end(pos)
                        .map_err(|e| self.io_error("read", number, e))?
                        .unwrap_or(cursor.len_bytes),
                    false => cursor.len_bytes,
                };
                let (next_valid, work) = cursor
                    .valid_frame_after(pos, length_max)
                    .map_err(|e| self.io_error("read", number, e))?;
                self.scan_work.add(work);
                let torn = is_last && next_valid.is_none();
                if !torn && self.salvage {
                    let resume_at = next_valid.unwrap_or(cursor.len_bytes);
                    self.corrupt(number, pos, CorruptionKind::BadRecord(bad), resume_at - pos);
                    cursor.pos = resume_at;
                    return Ok(Step::Again);
                }
                self.end = Some(if torn {
                    ReadEnd::TornTail(TornTail {
                        position: here,
                        dropped_bytes: nonzero_end - pos,
                        reason: TornReason::Frame(bad),
                    })
                } else {
                    ReadEnd::Corrupt(Corruption {
                        position: here,
                        kind: CorruptionKind::BadRecord(bad),
                    })
                });
                Ok(Step::Ended)
            }
        }
    }
}

impl Reader {
    /// Format version 2, a frame that starts with zeros at the cursor (a writer never writes
    /// one: a frame's length is at least 8). Zeros to the end of the file: where the segment's
    /// records end (its zeros written ahead). Else, in the last segment: a torn tail up to the
    /// last byte that is not zero, whatever follows (pages of an unsynced batch that reached the
    /// disk out of order leave zeros and then frames; none of them was durable); in a sealed
    /// segment, corruption. Read afresh: a live writer may have written there since the window
    /// was read, and then the frame is read again.
    fn zeros_at_frame(
        &mut self,
        cursor: &mut Cursor,
        bad: BadFrame,
        is_last: bool,
    ) -> Result<Step, JournalError> {
        let (number, pos) = (cursor.number, cursor.pos);
        let length_max = self.limits.record_size_bytes_max;
        cursor.forget_window();
        let nonzero_end = cursor
            .nonzero_end(pos)
            .map_err(|e| self.io_error("read", number, e))?;
        let Some(nonzero_end) = nonzero_end else {
            return Ok(Step::SegmentDone);
        };
        cursor.forget_window();
        let fresh = cursor
            .frame_bytes(pos, length_max)
            .map_err(|e| self.io_error("read", number, e))?;
        if matches!(framing::check(fresh, length_max), FrameCheck::Valid { .. }) {
            return Ok(Step::Again);
        }
        let here = Position {
            segment: number,
            offset: pos,
        };
        if !is_last {
            if self.salvage {
                self.corrupt(
                    number,
                    pos,
                    CorruptionKind::BadRecord(bad),
                    nonzero_end - pos,
                );
                cursor.pos = nonzero_end;
                return Ok(Step::Again);
            }
            self.end = Some(ReadEnd::Corrupt(Corruption {
                position: here,
                kind: CorruptionKind::BadRecord(bad),
            }));
            return Ok(Step::Ended);
        }
        self.end = Some(ReadEnd::TornTail(TornTail {
            position: here,
            dropped_bytes: nonzero_end - pos,
            reason: TornReason::Frame(bad),
        }));
        Ok(Step::Ended)
    }
}

/// A record found at the cursor: its payload is `window[payload]`.
struct Found {
    seq: u64,
    position: Position,
    frame_bytes: u64,
    payload: std::ops::Range<usize>,
}

enum Step {
    Record(Found),
    SegmentDone,
    /// Salvaging passed over something: read on from the cursor.
    Again,
    Ended,
}

impl Iterator for Reader {
    type Item = Result<Record, JournalError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        self.next_ref().map(|r| r.map(|r| r.to_owned()))
    }
}
