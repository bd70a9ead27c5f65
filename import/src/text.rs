//! The texts a session file says (messages, arguments, outputs), kept apart from what is known
//! of them.
//!
//! Why apart: the texts are nearly all of a file's bytes, and a file may hold 1 GiB. A session
//! read from memory keeps its texts in memory; one read from a file writes them to an unnamed
//! temporary file (in `TMPDIR`, gone when the session is dropped, a crash included) and keeps
//! only where each is, so reading a file holds its index and one line, never its texts. A
//! [`Text`] is a place in its session's store, read with [`crate::Session::text`].

use crate::ReadError;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

/// A text of a session: where it is in the session's store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Text {
    offset: u64,
    len_bytes: u64,
}

impl Text {
    /// Its length in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }
}

/// Where a session's texts are.
pub(crate) enum Store {
    /// In memory (a session read from memory).
    Memory(Vec<u8>),
    /// In a temporary file, written through a buffer: `len_bytes` is what was written.
    File {
        file: BufWriter<std::fs::File>,
        len_bytes: u64,
    },
}

impl Store {
    /// A store in a new unnamed temporary file.
    pub(crate) fn temporary() -> Result<Store, ReadError> {
        let file = tempfile::tempfile().map_err(ReadError::Spill)?;
        Ok(Store::File {
            file: BufWriter::with_capacity(256 * 1024, file),
            len_bytes: 0,
        })
    }

    fn end(&self) -> u64 {
        match self {
            Store::Memory(bytes) => bytes.len() as u64,
            Store::File { len_bytes, .. } => *len_bytes,
        }
    }

    /// Keeps `text`.
    pub(crate) fn put(&mut self, text: &str) -> Result<Text, ReadError> {
        let offset = self.end();
        self.write(text.as_bytes())?;
        Ok(Text {
            offset,
            len_bytes: text.len() as u64,
        })
    }

    /// `text` followed by `sep` and `more`: in place when `text` is the last thing kept, else
    /// copied to the end first.
    pub(crate) fn append(&mut self, text: Text, sep: &str, more: &str) -> Result<Text, ReadError> {
        let joined = if text.offset + text.len_bytes == self.end() {
            text
        } else {
            let copy = self.read(text)?;
            self.put(&copy)?
        };
        self.write(sep.as_bytes())?;
        self.write(more.as_bytes())?;
        Ok(Text {
            offset: joined.offset,
            len_bytes: joined.len_bytes + (sep.len() + more.len()) as u64,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), ReadError> {
        match self {
            Store::Memory(all) => all.extend_from_slice(bytes),
            Store::File { file, len_bytes } => {
                file.write_all(bytes).map_err(ReadError::Spill)?;
                *len_bytes += bytes.len() as u64;
            }
        }
        Ok(())
    }

    /// Writes out what is buffered, so that every text kept can be read.
    pub(crate) fn flush(&mut self) -> Result<(), ReadError> {
        if let Store::File { file, .. } = self {
            file.flush().map_err(ReadError::Spill)?;
        }
        Ok(())
    }

    /// The text at `text` (written out first when it is still in the buffer).
    pub(crate) fn read(&mut self, text: Text) -> Result<String, ReadError> {
        self.flush()?;
        self.read_kept(text)
    }

    /// The text at `text`, everything kept having been written out ([`Store::flush`]).
    pub(crate) fn read_kept(&self, text: Text) -> Result<String, ReadError> {
        let bytes = match self {
            Store::Memory(all) => {
                let range = text.offset as usize..(text.offset + text.len_bytes) as usize;
                all.get(range).unwrap_or_default().to_vec()
            }
            Store::File { file, .. } => {
                // A text is at most a line's length: it fits a usize.
                let mut out = vec![0; usize::try_from(text.len_bytes).unwrap_or(0)];
                (file.get_ref().read_exact_at(&mut out, text.offset))
                    .map_err(|e| ReadError::Spill(io::Error::new(e.kind(), e)))?;
                out
            }
        };
        // Only `str`s are kept, whole: the bytes are UTF-8.
        String::from_utf8(bytes).map_err(|_| {
            ReadError::Spill(io::Error::new(
                io::ErrorKind::InvalidData,
                "a text read back is not the text kept",
            ))
        })
    }
}
