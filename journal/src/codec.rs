//! The one place that turns typed values into record payload bytes and back.
//!
//! Why a module of its own: bincode 1.3.3 is frozen and unmaintained (RUSTSEC-2025-0141), so
//! everything that knows it is here, and docs/FORMAT.md describes the bytes without naming it.
//! Swapping the encoder (postcard, say) means changing this file and bumping the format version.
//!
//! The configuration is bincode's "legacy" layout: fixed-width little-endian integers, `u64`
//! length prefixes for strings, byte arrays and sequences, `u32` enum variant indexes. Decoding is
//! bounded by the record size limit, so a corrupt length prefix cannot make us allocate more than
//! one record's worth, and trailing bytes are refused (a payload is exactly one value).

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

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
        message: e.to_string(),
    }
}

fn options(size_bytes_max: u64) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .reject_trailing_bytes()
        .with_limit(size_bytes_max)
}

/// Appends the encoding of `value` to `out`. Fails, leaving `out` as it was, when the encoding
/// would exceed `size_bytes_max` or the value cannot be serialized (e.g. a map with non-string
/// keys is fine, but a `serde_json::Value` is not: store JSON as text).
pub fn encode_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
    size_bytes_max: u64,
) -> Result<(), CodecError> {
    let start = out.len();
    // Encoded unbounded and measured after: a bound makes bincode encode everything twice (a
    // sizing pass first), and every record pays for that; an oversized one is rare.
    let encoded = bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .serialize_into(&mut *out, value);
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
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    options(bytes.len() as u64 + 1)
        .deserialize(bytes)
        .map_err(codec_error)
}
