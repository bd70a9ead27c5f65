//! Record frames: how one record sits in a segment file.
//!
//! ```text
//! offset  size  field
//! 0       4     length   u32 LE: bytes after the crc field (8 + payload length), >= 8
//! 4       4     crc      u32 LE: CRC-32 (IEEE, reflected, poly 0xEDB88320) of bytes 0..4
//!                        followed by bytes 8..8+length, i.e. everything but the crc itself
//! 8       8     seq      u64 LE: the record's sequence number
//! 16      n     payload  the encoded value (see codec.rs)
//! ```
//!
//! The seq lives inside the checksummed bytes so that a misplaced or replayed frame cannot pass
//! for the right one; the length is covered too, so a flipped length bit is a checksum failure,
//! not a silent misread.

/// Bytes before the checksummed body: length + crc.
pub const FRAME_PREFIX_BYTES: usize = 8;
/// Bytes of the seq at the start of the body.
pub const SEQ_BYTES: usize = 8;
/// The smallest frame there is: prefix + seq, empty payload.
pub const FRAME_BYTES_MIN: usize = FRAME_PREFIX_BYTES + SEQ_BYTES;

/// What a reader finds at an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameCheck {
    /// A whole, checksummed frame: `frame_bytes` long in total.
    Valid {
        /// The seq stored in the frame.
        seq: u64,
        /// The frame's total size in bytes, prefix included.
        frame_bytes: u64,
    },
    /// Not a valid frame; the reason.
    Bad(BadFrame),
}

/// Why the bytes at an offset are not a valid frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadFrame {
    /// Fewer bytes remain than a frame prefix, or than the length field promises.
    Truncated {
        /// Bytes the frame needs from its offset on.
        needed_bytes: u64,
        /// Bytes left in the file from that offset.
        available_bytes: u64,
    },
    /// The length field is below the minimum (the seq alone needs 8 bytes).
    LengthTooSmall {
        /// The length field as stored.
        length: u32,
    },
    /// The length field is above the configured record size limit.
    LengthOverLimit {
        /// The length field as stored.
        length: u32,
        /// The configured record size limit in bytes.
        length_max: u32,
    },
    /// The stored checksum does not match the bytes.
    Checksum {
        /// The CRC-32 stored in the frame.
        stored: u32,
        /// The CRC-32 of the bytes as read.
        computed: u32,
    },
}

impl std::fmt::Display for BadFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadFrame::Truncated {
                needed_bytes,
                available_bytes,
            } => write!(
                f,
                "record cut short: needs {needed_bytes} bytes, {available_bytes} remain"
            ),
            BadFrame::LengthTooSmall { length } => {
                write!(
                    f,
                    "length field {length} is below the minimum of {SEQ_BYTES}"
                )
            }
            BadFrame::LengthOverLimit { length, length_max } => write!(
                f,
                "length field {length} is over the record size limit of {length_max} bytes"
            ),
            BadFrame::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
        }
    }
}

fn checksum(length_field: &[u8], body: &[u8]) -> u32 {
    let mut hasher = hasher();
    hasher.update(length_field);
    hasher.update(body);
    hasher.finalize()
}

/// A fresh CRC-32 hasher. `Hasher::new` asks the CPU which instructions it has, a handful of
/// feature checks costing about what a short record's checksum does; one hasher made once and
/// copied is the same hasher.
fn hasher() -> crc32fast::Hasher {
    static FRESH: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    FRESH.get_or_init(crc32fast::Hasher::new).clone()
}

/// Reserves a frame prefix and seq at the end of `buf` and returns where the frame starts; the
/// caller then appends the payload and calls [`seal`].
pub fn begin(buf: &mut Vec<u8>, seq: u64) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; FRAME_PREFIX_BYTES]);
    buf.extend_from_slice(&seq.to_le_bytes());
    start
}

/// Fills in length and crc of the frame that starts at `start` and runs to the end of `buf`.
/// Returns the frame's total size in bytes.
pub fn seal(buf: &mut [u8], start: usize) -> u64 {
    let frame = &mut buf[start..];
    assert!(
        frame.len() >= FRAME_BYTES_MIN,
        "seal: frame shorter than its header"
    );
    // Cannot fail: the caller checked the record size limit, which is a u32.
    #[allow(clippy::expect_used)]
    let length = u32::try_from(frame.len() - FRAME_PREFIX_BYTES)
        .expect("seal: caller checked the record size limit, which is a u32");
    // The checksummed bytes are the length then everything after the crc field: with the
    // length put in the crc field for a moment, they are contiguous, and one pass over them
    // costs one checksum call instead of two (every record pays it).
    frame[4..8].copy_from_slice(&length.to_le_bytes());
    let mut hasher = hasher();
    hasher.update(&frame[4..]);
    let crc = hasher.finalize();
    debug_assert_eq!(
        crc,
        checksum(&length.to_le_bytes(), &frame[FRAME_PREFIX_BYTES..])
    );
    frame[0..4].copy_from_slice(&length.to_le_bytes());
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
    frame.len() as u64
}

/// The bytes of `bytes` as an array of exactly `N`. Panics, as a slice index out of range does,
/// when `bytes` is not `N` long: callers pass a range of a frame or header they checked.
pub(crate) fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut field = [0; N];
    field.copy_from_slice(bytes);
    field
}

/// The little-endian `u32` at `bytes[at..at + 4]` (a length, a crc, a version).
pub(crate) fn le_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(&bytes[at..at + 4]))
}

/// The little-endian `u64` at `bytes[at..at + 8]` (a seq, a segment number).
pub(crate) fn le_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(&bytes[at..at + 8]))
}

/// The length field of a frame prefix, if there are enough bytes for one.
pub fn length_field(bytes: &[u8]) -> Option<u32> {
    let field: [u8; 4] = bytes.get(0..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(field))
}

/// How many bytes [`check`] needs to see to decide about the frame whose prefix is `prefix`:
/// the whole frame when its length field is plausible, else just the prefix.
pub fn bytes_needed(prefix: &[u8], length_max: u32) -> u64 {
    match length_field(prefix) {
        Some(length) if (SEQ_BYTES as u32..=length_max).contains(&length) => {
            FRAME_PREFIX_BYTES as u64 + u64::from(length)
        }
        _ => FRAME_PREFIX_BYTES as u64,
    }
}

/// Checks the frame at the start of `bytes`. `bytes` holds what remains of the segment from that
/// offset (or at least [`bytes_needed`] of it).
pub fn check(bytes: &[u8], length_max: u32) -> FrameCheck {
    let available = bytes.len() as u64;
    let truncated_prefix = FrameCheck::Bad(BadFrame::Truncated {
        needed_bytes: FRAME_PREFIX_BYTES as u64,
        available_bytes: available,
    });
    if bytes.len() < FRAME_PREFIX_BYTES {
        return truncated_prefix;
    }
    let Some(length) = length_field(bytes) else {
        return truncated_prefix;
    };
    if (length as usize) < SEQ_BYTES {
        return FrameCheck::Bad(BadFrame::LengthTooSmall { length });
    }
    if length > length_max {
        return FrameCheck::Bad(BadFrame::LengthOverLimit { length, length_max });
    }
    let frame_bytes = FRAME_PREFIX_BYTES as u64 + u64::from(length);
    if available < frame_bytes {
        return FrameCheck::Bad(BadFrame::Truncated {
            needed_bytes: frame_bytes,
            available_bytes: available,
        });
    }
    let body = &bytes[FRAME_PREFIX_BYTES..frame_bytes as usize];
    let stored = le_u32(bytes, 4);
    let computed = checksum(&bytes[0..4], body);
    if stored != computed {
        return FrameCheck::Bad(BadFrame::Checksum { stored, computed });
    }
    let seq = le_u64(body, 0);
    FrameCheck::Valid { seq, frame_bytes }
}

/// The payload of a frame that [`check`] found valid.
pub fn payload(frame: &[u8]) -> &[u8] {
    &frame[FRAME_BYTES_MIN..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        let start = begin(&mut buf, seq);
        buf.extend_from_slice(payload);
        seal(&mut buf, start);
        buf
    }

    #[test]
    fn sealed_frame_checks_valid_with_its_seq_and_size() {
        let f = frame(7, b"hello");
        assert_eq!(
            check(&f, 1024),
            FrameCheck::Valid {
                seq: 7,
                frame_bytes: 21
            }
        );
        assert_eq!(payload(&f), b"hello");
    }

    #[test]
    fn crc_covers_the_length_field() {
        let mut f = frame(1, b"abcdefgh");
        // Shrink the length by one: the bytes are all there, only the crc can tell.
        f[0] -= 1;
        assert!(matches!(
            check(&f, 1024),
            FrameCheck::Bad(BadFrame::Checksum { .. })
        ));
    }

    #[test]
    fn zeros_are_a_too_small_length_not_a_frame() {
        assert_eq!(
            check(&[0u8; 64], 1024),
            FrameCheck::Bad(BadFrame::LengthTooSmall { length: 0 })
        );
    }

    #[test]
    fn length_over_limit_is_refused_before_reading_the_body() {
        let f = frame(1, &[9u8; 100]);
        assert_eq!(
            check(&f, 50),
            FrameCheck::Bad(BadFrame::LengthOverLimit {
                length: 108,
                length_max: 50
            })
        );
    }
}
