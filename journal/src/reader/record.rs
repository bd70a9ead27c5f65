//! A record as the reader hands it out: owned ([`Record`]) or borrowed from the read window
//! ([`RecordRef`], no copy and no allocation per record), each decoded by the encoding of the
//! segment it came from, and a decoding failure naming the record's seq and position.

use crate::codec::{self, Encoding};
use crate::error::{DecodeError, Position};
use serde::de::DeserializeOwned;

/// One record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's sequence number: 1 for the first record, one more for each after.
    pub seq: u64,
    /// Where the record's frame starts.
    pub position: Position,
    /// The frame's total size on disk, prefix included.
    pub frame_bytes: u64,
    /// The encoded value, as the writer appended it; decode with [`Record::decode`].
    pub payload: Vec<u8>,
    /// How the payload is encoded: its segment's format version decides.
    pub encoding: Encoding,
}

impl Record {
    /// Decodes the payload as a `T`. A failure names the record's seq and position.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        self.as_ref().decode()
    }

    /// Decodes a `T` from the start of the payload, ignoring the rest (see
    /// [`RecordRef::decode_prefix`]).
    pub fn decode_prefix<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        self.as_ref().decode_prefix()
    }
}

/// One record as read back, its payload borrowed from the reader's buffer: what
/// [`Reader::next_ref`](super::Reader::next_ref) gives, for reading a long journal without a copy and an allocation per
/// record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The record's sequence number: 1 for the first record, one more for each after.
    pub seq: u64,
    /// Where the record's frame starts.
    pub position: Position,
    /// The frame's total size on disk, prefix included.
    pub frame_bytes: u64,
    /// The encoded value, borrowed until the next read; decode with [`RecordRef::decode`].
    pub payload: &'a [u8],
    /// How the payload is encoded: its segment's format version decides.
    pub encoding: Encoding,
}

impl RecordRef<'_> {
    /// Decodes the payload as a `T`. A failure names the record's seq and position.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        codec::decode(self.payload, self.encoding).map_err(|e| self.decode_error(e))
    }

    /// Decodes a `T` from the start of the payload and ignores the bytes after it: a record's
    /// leading fields (its time, event index, …) without decoding the rest. Where they sit in
    /// the payload depends on the encoding, so read them this way rather than at fixed offsets.
    pub fn decode_prefix<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        codec::decode_prefix(self.payload, self.encoding).map_err(|e| self.decode_error(e))
    }

    fn decode_error(&self, e: codec::CodecError) -> DecodeError {
        DecodeError {
            seq: self.seq,
            position: self.position,
            message: e.message,
        }
    }

    /// Copies the payload out into an owned [`Record`].
    pub fn to_owned(&self) -> Record {
        Record {
            seq: self.seq,
            position: self.position,
            frame_bytes: self.frame_bytes,
            payload: self.payload.to_vec(),
            encoding: self.encoding,
        }
    }
}

impl Record {
    /// The record as a [`RecordRef`].
    pub fn as_ref(&self) -> RecordRef<'_> {
        RecordRef {
            seq: self.seq,
            position: self.position,
            frame_bytes: self.frame_bytes,
            payload: &self.payload,
            encoding: self.encoding,
        }
    }
}
