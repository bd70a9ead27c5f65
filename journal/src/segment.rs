//! Segment files: their names and their 48-byte header.
//!
//! ```text
//! offset  size  field
//! 0       8     magic          "TJRNSEG\0"
//! 8       4     format_version u32 LE (this code writes 2 in a new journal, and reads 1 and 2)
//! 12      16    journal_id     random bytes chosen when the journal was created; same in every segment
//! 28      8     segment_number u64 LE, 0 for the first segment, +1 for each next one
//! 36      8     first_seq      u64 LE, the seq of the segment's first record (1 in segment 0)
//! 44      4     header_crc     u32 LE, CRC-32 (IEEE) of bytes 0..44
//! ```
//!
//! A segment is named `{segment_number:020}.segment`. It is born as `….segment.tmp`, its header
//! synced, then renamed and the directory synced, so a segment that exists under its real name
//! always has a whole header. Before the next segment is born the previous one is synced, so
//! only the last segment can have a torn tail.

use crate::codec::Encoding;
use crate::framing;

/// Magic bytes at the start of every segment.
pub const MAGIC: [u8; 8] = *b"TJRNSEG\0";
/// The format version a new journal is written in, and the newest this code reads. A journal
/// keeps the version it was created in: appending to a version-1 journal writes version 1.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest format version this code reads (and appends to).
pub const FORMAT_VERSION_MIN: u32 = 1;
/// Size of the segment header in bytes.
pub const HEADER_BYTES: usize = 48;

const SUFFIX: &str = ".segment";
const TEMP_SUFFIX: &str = ".segment.tmp";

/// The decoded header of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The format version: how everything after the header is laid out (see
    /// [`crate::codec::Encoding::of_format`]). The same in every segment of a journal.
    pub format_version: u32,
    /// The id of the journal the segment belongs to: random at creation, the same in every segment.
    pub journal_id: [u8; 16],
    /// The segment's number; must match its file name.
    pub segment_number: u64,
    /// The seq of the first record in this segment (the previous segment's last seq + 1).
    pub first_seq: u64,
}

/// Why a segment header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadHeader {
    /// Fewer bytes than a header.
    Short {
        /// The file's length in bytes.
        len_bytes: u64,
    },
    /// The first 8 bytes are not the magic.
    Magic {
        /// The 8 bytes found instead.
        found: [u8; 8],
    },
    /// Written by a newer (or unknown) format version.
    UnsupportedVersion {
        /// The version in the header.
        found: u32,
        /// The newest version this build reads ([`FORMAT_VERSION`]).
        supported: u32,
    },
    /// The header's own checksum does not match.
    Checksum {
        /// The CRC-32 stored in the header.
        stored: u32,
        /// The CRC-32 of the header bytes as read.
        computed: u32,
    },
}

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadHeader::Short { len_bytes } => write!(
                f,
                "segment header cut short: {len_bytes} of {HEADER_BYTES} bytes"
            ),
            BadHeader::Magic { found } => write!(f, "bad magic {found:02x?}"),
            BadHeader::UnsupportedVersion { found, supported } => write!(
                f,
                "unsupported format version {found} (this build reads up to {supported})"
            ),
            BadHeader::Checksum { stored, computed } => write!(
                f,
                "segment header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
        }
    }
}

impl SegmentHeader {
    /// The payload encoding of this segment's records, by its format version.
    pub fn encoding(&self) -> Encoding {
        // `decode` refuses unknown versions and the writer only makes known ones.
        Encoding::of_format(self.format_version).unwrap_or(Encoding::Varint)
    }

    /// The header's bytes as written at the start of a segment file: magic, version, fields and
    /// checksum.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&self.format_version.to_le_bytes());
        out[12..28].copy_from_slice(&self.journal_id);
        out[28..36].copy_from_slice(&self.segment_number.to_le_bytes());
        out[36..44].copy_from_slice(&self.first_seq.to_le_bytes());
        let crc = crc32fast::hash(&out[0..44]);
        out[44..48].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a header. The version is checked before the checksum: a future version may lay
    /// its header out differently, and "written by a newer version" is the useful message then.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, BadHeader> {
        if bytes.len() < HEADER_BYTES {
            return Err(BadHeader::Short {
                len_bytes: bytes.len() as u64,
            });
        }
        let magic: [u8; 8] = framing::array(&bytes[0..8]);
        if magic != MAGIC {
            return Err(BadHeader::Magic { found: magic });
        }
        let version = framing::le_u32(bytes, 8);
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            return Err(BadHeader::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let stored = framing::le_u32(bytes, 44);
        let computed = crc32fast::hash(&bytes[0..44]);
        if stored != computed {
            return Err(BadHeader::Checksum { stored, computed });
        }
        Ok(SegmentHeader {
            format_version: version,
            journal_id: framing::array(&bytes[12..28]),
            segment_number: framing::le_u64(bytes, 28),
            first_seq: framing::le_u64(bytes, 36),
        })
    }
}

/// The file name of segment `number`.
pub fn file_name(number: u64) -> String {
    format!("{number:020}{SUFFIX}")
}

/// The temporary name a segment is born under.
pub fn temp_name(number: u64) -> String {
    format!("{number:020}{TEMP_SUFFIX}")
}

/// The segment number a file name stands for, if it names a segment.
pub fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether a file name is a segment's temporary name (left behind by a crash mid-rotation).
pub fn is_temp_name(name: &str) -> bool {
    name.strip_suffix(TEMP_SUFFIX)
        .is_some_and(|d| d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Where the torn tail of segment `number` at `offset` is kept before truncation.
pub fn quarantine_name(number: u64, offset: u64, attempt: u32) -> String {
    if attempt == 0 {
        format!("{number:020}{SUFFIX}.torn-at-{offset}")
    } else {
        format!("{number:020}{SUFFIX}.torn-at-{offset}.{attempt}")
    }
}

/// Whether segments of `format_version` are zero-filled ahead of their records (version 2 on):
/// zeros to the end of such a segment end its records (docs/FORMAT.md, *Preallocated tail*).
pub fn preallocated(format_version: u32) -> bool {
    format_version >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_detects_a_flipped_bit() {
        let h = SegmentHeader {
            format_version: FORMAT_VERSION,
            journal_id: [3; 16],
            segment_number: 9,
            first_seq: 1234,
        };
        let mut bytes = h.encode();
        assert_eq!(SegmentHeader::decode(&bytes), Ok(h));
        bytes[30] ^= 1;
        assert!(matches!(
            SegmentHeader::decode(&bytes),
            Err(BadHeader::Checksum { .. })
        ));
    }

    #[test]
    fn future_version_is_named_as_such() {
        let header = |format_version| SegmentHeader {
            format_version,
            journal_id: [0; 16],
            segment_number: 0,
            first_seq: 1,
        };
        for (version, encoding) in [(1, Encoding::Fixint), (2, Encoding::Varint)] {
            let decoded = SegmentHeader::decode(&header(version).encode());
            assert_eq!(decoded, Ok(header(version)));
            assert_eq!(decoded.map(|h| h.encoding()), Ok(encoding));
        }
        for found in [0, 3] {
            assert_eq!(
                SegmentHeader::decode(&header(found).encode()),
                Err(BadHeader::UnsupportedVersion {
                    found,
                    supported: 2
                })
            );
        }
    }

    #[test]
    fn names_parse_back_and_others_are_ignored() {
        assert_eq!(parse_file_name(&file_name(42)), Some(42));
        assert_eq!(parse_file_name(&temp_name(42)), None);
        assert!(is_temp_name(&temp_name(42)));
        assert_eq!(parse_file_name(&quarantine_name(1, 5, 0)), None);
        assert_eq!(parse_file_name("LOCK"), None);
        assert_eq!(parse_file_name("0001.segment"), None);
    }
}
