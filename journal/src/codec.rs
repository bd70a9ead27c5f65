//! The one place that turns typed values into record payload bytes and back.
//!
//! Why a module of its own: bincode 1.3.3 is frozen and unmaintained (RUSTSEC-2025-0141), so
//! everything that knows it is here, and docs/FORMAT.md describes the bytes without naming it.
//! Swapping the encoder (postcard, say) means changing this file and bumping the format version.
//!
//! Two configurations, one per format version ([`Encoding::of_format`]); both little-endian:
//! - [`Encoding::Fixint`] (format 1), bincode's "legacy" layout: fixed-width integers, `u64`
//!   length prefixes for strings, byte arrays and sequences, `u32` enum variant indexes.
//! - [`Encoding::Varint`] (format 2): the same, except that lengths, variant indexes and every
//!   integer of 16 bits or more are varints (one byte below 251, else a tag byte 251/252/253 and
//!   a `u16`/`u32`/`u64`; signed ones zigzagged first). Most of a call's integers are small, so
//!   this is what makes a format-2 record shorter.
//!
//! Decoding is bounded by the record size limit, so a corrupt length prefix cannot make us
//! allocate more than one record's worth, and trailing bytes are refused (a payload is exactly
//! one value) except by [`decode_prefix`], which reads a payload's leading fields.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// How integers and lengths are laid out in a payload: what a journal's format version decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Format version 1: fixed-width integers, `u64` lengths, `u32` variant indexes.
    Fixint,
    /// Format version 2: varint lengths, variant indexes and integers of 16 bits or more.
    Varint,
}

impl Encoding {
    /// The encoding of payloads in a journal of `format_version`; `None` for a version this
    /// build does not know.
    pub fn of_format(format_version: u32) -> Option<Encoding> {
        match format_version {
            1 => Some(Encoding::Fixint),
            2 => Some(Encoding::Varint),
            _ => None,
        }
    }

    /// The format version whose payloads use this encoding.
    pub fn format_version(self) -> u32 {
        match self {
            Encoding::Fixint => 1,
            Encoding::Varint => 2,
        }
    }
}

/// Why a payload could not be encoded or decoded. The message is bincode's, kept as text so the
/// error type does not leak the encoder into the public API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CodecError {
    /// bincode's description of the failure.
    pub message: String,
    /// The encoding would have exceeded the size limit it was given.
    pub over_limit: bool,
}

fn codec_error(e: bincode::Error) -> CodecError {
    CodecError {
        over_limit: matches!(*e, bincode::ErrorKind::SizeLimit),
        message: plain(&e),
    }
}

/// bincode's failure in the journal's words: bincode's own ("Byte 255 is treated as an
/// extension point … Do you have a mismatched bincode version") blame a library the reader
/// never chose, while what is wrong is a byte of this payload; `serde`'s own messages (a variant
/// index out of range, a missing field) already say what, and are kept.
fn plain(e: &bincode::ErrorKind) -> String {
    use bincode::ErrorKind as K;
    match e {
        K::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "it ends before its last field".into()
        }
        K::Io(io) => format!("it cannot be read: {io}"),
        K::InvalidUtf8Encoding(e) => format!("a string in it is not UTF-8 ({e})"),
        K::InvalidBoolEncoding(b) => format!("a boolean in it is the byte {b}, neither 0 nor 1"),
        K::InvalidCharEncoding => "a character in it is not a Unicode scalar value".into(),
        K::InvalidTagEncoding(tag) => {
            format!("an option or enum tag in it is {tag}, not one written")
        }
        K::SizeLimit => "a length in it reaches past its end".into(),
        K::SequenceMustHaveLength | K::DeserializeAnyNotSupported => {
            format!("it does not fit its type ({e})")
        }
        K::Custom(message) => custom(message),
    }
}

/// [`plain`] for bincode's and serde's messages of their own.
fn custom(message: &str) -> String {
    let message = message.trim();
    if message.starts_with("Byte 255 is treated as an extension point") {
        "an integer in it begins with the byte 255, which no journal writes".into()
    } else if message.starts_with("Invalid value (u128 range)") {
        "an integer in it is marked 128-bit, which no journal writes".into()
    } else if let Some(rest) = message.strip_prefix("Invalid size ") {
        let n = rest.split(':').next().unwrap_or(rest);
        format!("a length in it, {n}, is larger than this machine can address")
    } else if message.starts_with("Invalid u32 ")
        || message.starts_with("Invalid u16 ")
        || message.starts_with("Invalid i32 ")
        || message.starts_with("Invalid i16 ")
    {
        let (kind, n) = message["Invalid ".len()..]
            .split_once(' ')
            .unwrap_or(("integer", ""));
        let n = n.split(':').next().unwrap_or(n);
        format!("an integer in it, {n}, does not fit the field's {kind}")
    } else if message == "Slice had bytes remaining after deserialization" {
        "bytes are left in it after its last field".into()
    } else {
        message.to_owned()
    }
}

/// Runs `$body` with `$opts` bound to the bincode options of `$encoding` (the two
/// configurations are different types, so a plain function cannot return either).
macro_rules! with_options {
    ($encoding:expr, |$opts:ident| $body:expr) => {
        match $encoding {
            Encoding::Fixint => {
                let $opts = bincode::DefaultOptions::new()
                    .with_fixint_encoding()
                    .with_little_endian();
                $body
            }
            Encoding::Varint => {
                let $opts = bincode::DefaultOptions::new()
                    .with_varint_encoding()
                    .with_little_endian();
                $body
            }
        }
    };
}

/// Appends the encoding of `value` to `out`. Fails, leaving `out` as it was, when the encoding
/// would exceed `size_bytes_max` or the value cannot be serialized (e.g. a map with non-string
/// keys is fine, but a `serde_json::Value` is not: store JSON as text).
pub fn encode_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
    size_bytes_max: u64,
    encoding: Encoding,
) -> Result<(), CodecError> {
    let start = out.len();
    // Encoded unbounded and measured after: a bound makes bincode encode everything twice (a
    // sizing pass first), and every record pays for that; an oversized one is rare.
    let encoded = with_options!(encoding, |o| o.serialize_into(&mut *out, value));
    let result = match encoded {
        Ok(()) if (out.len() - start) as u64 > size_bytes_max => {
            Err(codec_error(Box::new(bincode::ErrorKind::SizeLimit)))
        }
        Ok(()) => Ok(()),
        Err(e) => Err(codec_error(e)),
    };
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Decodes exactly one value from `bytes`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], encoding: Encoding) -> Result<T, CodecError> {
    let limit = bytes.len() as u64 + 1;
    with_options!(encoding, |o| o
        .reject_trailing_bytes()
        .with_limit(limit)
        .deserialize(bytes))
    .map_err(codec_error)
}

/// Decodes a `T` from the start of `bytes`, ignoring what follows it: a payload's leading
/// fields (say `(u64, u32, u32)` for a record's time, event index and first field) without
/// decoding the rest, whatever the encoding lays them out as.
pub fn decode_prefix<T: DeserializeOwned>(
    bytes: &[u8],
    encoding: Encoding,
) -> Result<T, CodecError> {
    let limit = bytes.len() as u64 + 1;
    with_options!(encoding, |o| o
        .allow_trailing_bytes()
        .with_limit(limit)
        .deserialize(bytes))
    .map_err(codec_error)
}

#[cfg(test)]
mod plain_words {
    use super::*;

    /// No decoding failure a damaged payload can cause reaches the reader in bincode's words.
    #[test]
    fn a_bad_payload_is_described_in_the_journal_s_words() {
        let v = Encoding::Varint;
        let cases = [
            (decode::<u64>(&[255], v).err(), "begins with the byte 255"),
            (
                decode::<String>(&[3, b'a'], v).err(),
                "ends before its last field",
            ),
            (decode::<u8>(&[1, 2], v).err(), "bytes are left in it"),
            (
                decode::<u32>(&[253, 0, 0, 0, 0, 1, 0, 0, 0], v).err(),
                "does not fit the field's u32",
            ),
        ];
        for (decoded, said) in cases {
            let message = decoded.expect("a bad payload is an error").message;
            assert!(message.contains(said), "{message}");
            for theirs in [
                "bincode",
                "extension point",
                "Slice had",
                "io error",
                "disagreement",
            ] {
                assert!(!message.contains(theirs), "{message}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Serialize>(value: &T, encoding: Encoding) -> Vec<u8> {
        let mut out = Vec::new();
        encode_into(value, &mut out, u64::MAX, encoding).expect("encodes");
        out
    }

    #[test]
    fn varints_take_the_documented_widths() {
        let v = Encoding::Varint;
        assert_eq!(bytes(&250u64, v), [250]);
        assert_eq!(bytes(&251u64, v), [251, 251, 0]);
        assert_eq!(bytes(&65_535u32, v), [251, 0xFF, 0xFF]);
        assert_eq!(bytes(&65_536u32, v), [252, 0, 0, 1, 0]);
        assert_eq!(bytes(&(1u64 << 32), v), [253, 0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(bytes(&-1i32, v), [1]);
        assert_eq!(bytes(&1i32, v), [2]);
        assert_eq!(bytes(&-129i64, v), [251, 0x01, 0x01]);
        assert_eq!(bytes(&7u8, v), [7]);
        assert_eq!(bytes(&"ab", v), [2, b'a', b'b']);
        assert_eq!(bytes(&Some(true), v), [1, 1]);
        assert_eq!(bytes(&0.5f64, v), [0, 0, 0, 0, 0, 0, 0xE0, 0x3F]);
        assert_eq!(bytes(&300u16, Encoding::Fixint), [0x2C, 0x01]);
    }

    #[test]
    fn decode_refuses_trailing_bytes_and_decode_prefix_ignores_them() {
        for e in [Encoding::Fixint, Encoding::Varint] {
            let mut b = bytes(&(5u64, 6u32), e);
            b.push(9);
            assert!(decode::<(u64, u32)>(&b, e).is_err());
            assert_eq!(decode_prefix::<(u64, u32)>(&b, e), Ok((5, 6)));
        }
    }

    #[test]
    fn a_value_too_wide_for_its_type_is_refused() {
        // A u32 field holding a varint of 2^32 (tag 253): bincode refuses it rather than wrap.
        let b = bytes(&(1u64 << 32), Encoding::Varint);
        assert!(decode::<u32>(&b, Encoding::Varint).is_err());
        assert_eq!(Encoding::of_format(3), None);
        assert_eq!(Encoding::of_format(2), Some(Encoding::Varint));
        assert_eq!(Encoding::Fixint.format_version(), 1);
    }
}
