//! A session file's bytes as the readers take them: a line at a time, from the start, as many
//! times as a repair needs, and one line again by its place.
//!
//! Why not the file in memory: a session file may hold 1 GiB, and reading it, repairing it and
//! checking the repair would hold it several times over. Here only the line being read is held
//! (at most [`LINE_BYTES_MAX`]); every other reading goes back to the file. A file read several
//! times must say the same each time: each whole reading is summed (CRC-32) and a reading that
//! differs from the first is refused ([`ReadError::Changed`]), so a file rewritten underneath is
//! never repaired from two different versions of itself.

use crate::session::Source;
use crate::{ReadError, FILE_BYTES_MAX, LINE_BYTES_MAX};
use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::FileExt;

/// The bytes of a session file: in memory, or a file read where it lies.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    /// Bytes in memory.
    Bytes(&'a [u8]),
    /// A file's first `len_bytes` bytes (the size it had when opened: what an agent appends
    /// while it is read is not read).
    File {
        /// The file.
        file: &'a std::fs::File,
        /// How much of it is read.
        len_bytes: u64,
    },
}

impl<'a> Input<'a> {
    /// `file` as it is now: refused past [`FILE_BYTES_MAX`].
    pub fn file(file: &'a std::fs::File) -> Result<Input<'a>, ReadError> {
        let len_bytes = file.metadata().map_err(ReadError::Io)?.len();
        if len_bytes > FILE_BYTES_MAX {
            return Err(ReadError::TooLarge {
                size_bytes: len_bytes,
            });
        }
        Ok(Input::File { file, len_bytes })
    }

    /// How many bytes are read.
    pub fn len_bytes(&self) -> u64 {
        match self {
            Input::Bytes(bytes) => bytes.len() as u64,
            Input::File { len_bytes, .. } => *len_bytes,
        }
    }

    /// The `len_bytes` bytes at `offset` (a line found by a reading before).
    pub(crate) fn at(&self, offset: u64, len_bytes: u64) -> Result<Vec<u8>, ReadError> {
        let end = offset.saturating_add(len_bytes);
        if end > self.len_bytes() {
            return Err(ReadError::Changed);
        }
        match self {
            Input::Bytes(bytes) => Ok(bytes[offset as usize..end as usize].to_vec()),
            Input::File { file, .. } => {
                // Under LINE_BYTES_MAX: a line a reading found.
                let mut out = vec![0; usize::try_from(len_bytes).unwrap_or(0)];
                file.read_exact_at(&mut out, offset)
                    .map_err(ReadError::Io)?;
                Ok(out)
            }
        }
    }

    /// Hands the bytes to `take` in order, a buffer at a time, and checks they are the bytes
    /// `session` was read from ([`ReadError::Changed`] when not): for what is made of the
    /// whole file besides its session (a hash of it).
    pub fn read_again(
        &self,
        session: &crate::Session,
        mut take: impl FnMut(&[u8]),
    ) -> Result<(), ReadError> {
        let mut reader = self.reader();
        let mut crc = crc32fast::Hasher::new();
        let mut buf = vec![0; READ_BUFFER_BYTES];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(e)),
            };
            crc.update(&buf[..n]);
            take(&buf[..n]);
        }
        match crc.finalize() == session.crc {
            true => Ok(()),
            false => Err(ReadError::Changed),
        }
    }

    fn reader(&self) -> Box<dyn Read + 'a> {
        match *self {
            Input::Bytes(bytes) => Box::new(bytes),
            Input::File { file, len_bytes } => Box::new(At { file, pos: 0 }.take(len_bytes)),
        }
    }

    /// A reading from the start, a line at a time.
    pub(crate) fn lines(&self) -> Lines<'a> {
        Lines {
            reader: BufReader::with_capacity(READ_BUFFER_BYTES, self.reader()),
            offset: 0,
            number: 0,
            crc: crc32fast::Hasher::new(),
        }
    }
}

/// A line longer than this gets room for the longest line at once ([`Lines::read_line`]), and
/// its buffer is let go once it is parsed (`lines::each`).
pub(crate) const LONG_LINE_BYTES: usize = 4 << 20;

/// The reader's buffer: large enough that a file is read in few system calls.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// A file read from `pos` on with positioned reads: several readings of one file at once, each
/// at its own place, none moving the others.
struct At<'a> {
    file: &'a std::fs::File,
    pos: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// One line as read: where it starts, and whether a newline ended it (the last line of a file
/// cut short has none).
pub(crate) struct LineAt {
    pub(crate) at: Source,
    pub(crate) ended: bool,
}

/// A reading of a session file from its start.
pub(crate) struct Lines<'a> {
    reader: BufReader<Box<dyn Read + 'a>>,
    offset: u64,
    number: u64,
    crc: crc32fast::Hasher,
}

impl Lines<'_> {
    /// The next line into `text` (its newline excluded), or `None` at the end. A line longer
    /// than [`LINE_BYTES_MAX`] is refused once that much of it is read.
    pub(crate) fn next_line(&mut self, text: &mut Vec<u8>) -> Result<Option<LineAt>, ReadError> {
        text.clear();
        let ended = self.read_line(text)?;
        if text.is_empty() && !ended {
            return Ok(None);
        }
        self.number += 1;
        let at = Source {
            line: self.number,
            offset: self.offset,
        };
        self.offset += text.len() as u64 + u64::from(ended);
        if text.len() as u64 > LINE_BYTES_MAX {
            return Err(ReadError::LineTooLong {
                line: at.line,
                offset: at.offset,
            });
        }
        Ok(Some(LineAt { at, ended }))
    }

    /// Reads up to a newline (consumed, not kept) or the end into `text`, never more than one
    /// byte past [`LINE_BYTES_MAX`]. Whether a newline ended it.
    ///
    /// Why not `read_until`: its buffer grows by doubling, and each doubling of a long line
    /// holds the old buffer and the new at once. Here a line past [`LONG_LINE_BYTES`] gets room
    /// for the longest line at once (memory is touched only as it is filled), so a long line
    /// is copied once, not at every doubling.
    fn read_line(&mut self, text: &mut Vec<u8>) -> Result<bool, ReadError> {
        let room_bytes = usize::try_from(LINE_BYTES_MAX + 1).unwrap_or(usize::MAX);
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(e)),
            };
            if buf.is_empty() {
                return Ok(false);
            }
            let (take, ended) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            let take = take.min(room_bytes - text.len());
            let want = text.len() + take;
            if want > text.capacity() && want > LONG_LINE_BYTES {
                text.reserve_exact(room_bytes - text.len());
            }
            text.extend_from_slice(&buf[..take]);
            self.crc.update(&buf[..take]);
            let newline = ended && text.len() < room_bytes;
            if newline {
                self.crc.update(b"\n");
            }
            self.reader.consume(take + usize::from(newline));
            if newline {
                return Ok(true);
            }
            if text.len() >= room_bytes {
                // Past the limit: the caller refuses the line; nothing more of it is read.
                return Ok(false);
            }
        }
    }

    /// The sum of what was read: the whole file's once the reading has ended.
    pub(crate) fn crc(&self) -> u32 {
        self.crc.clone().finalize()
    }
}

/// The sum of a file's first whole reading, against which each later one is checked.
#[derive(Default)]
pub(crate) struct Sum(Cell<Option<u32>>);

impl Sum {
    /// Takes the sum of a whole reading: the first sets it, a later one must equal it.
    pub(crate) fn check(&self, crc: u32) -> Result<(), ReadError> {
        match self.0.get() {
            None => {
                self.0.set(Some(crc));
                Ok(())
            }
            Some(first) if first == crc => Ok(()),
            Some(_) => Err(ReadError::Changed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_of(bytes: &[u8]) -> Result<Vec<(Source, bool, usize)>, ReadError> {
        let mut reading = Input::Bytes(bytes).lines();
        let mut text = Vec::new();
        let mut out = Vec::new();
        while let Some(l) = reading.next_line(&mut text)? {
            out.push((l.at, l.ended, text.len()));
        }
        Ok(out)
    }

    #[test]
    fn lines_carry_their_place_and_whether_a_newline_ended_them() {
        let got = lines_of(b"ab\n\ncd").unwrap();
        let at = |line, offset| Source { line, offset };
        assert_eq!(
            got,
            vec![
                (at(1, 0), true, 2),
                (at(2, 3), true, 0),
                (at(3, 4), false, 2)
            ]
        );
    }

    #[test]
    fn a_line_of_the_limit_is_read_and_one_byte_more_is_refused_at_its_place() {
        let limit = LINE_BYTES_MAX as usize;
        let mut bytes = b"{}\n".to_vec();
        bytes.resize(3 + limit, b'a');
        bytes.push(b'\n');
        let got = lines_of(&bytes).unwrap();
        assert_eq!(got[1].2, limit);
        bytes.pop();
        bytes.extend_from_slice(b"a\n{}\n");
        match lines_of(&bytes) {
            Err(ReadError::LineTooLong { line: 2, offset: 3 }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_rewritten_after_it_was_read_is_refused_as_changed() {
        let mut file = tempfile::tempfile().unwrap();
        let line =
            br#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}"#;
        file.write_all(line).unwrap();
        file.write_all(b"\n").unwrap();
        let input = Input::file(&file).unwrap();
        let session = crate::read_from(crate::Agent::Codex, input).unwrap();
        let mut seen = 0;
        input.read_again(&session, |b| seen += b.len()).unwrap();
        assert_eq!(seen as u64, input.len_bytes());
        // The same length, other bytes: what a rewrite in place leaves.
        file.write_all_at(b"X", 30).unwrap();
        assert!(matches!(
            input.read_again(&session, |_| {}),
            Err(ReadError::Changed)
        ));
        let sum = Sum::default();
        sum.check(1).unwrap();
        assert!(matches!(sum.check(2), Err(ReadError::Changed)));
    }
}
