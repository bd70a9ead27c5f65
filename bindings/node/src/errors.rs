//! Failures as the package's JavaScript receives them: a synchronous call throws an `Error`
//! whose message is `tooljournal:` and a JSON object (`kind`, `code`, `message`), which
//! `index.js` turns into its own classes (`JournalLocked`, `Corrupt`, ...); an operation that
//! ends later reports the same three fields in its end (`journal.rs`).
//!
//! Why JSON in a message: N-API has no way to throw an instance of a class the addon did not
//! define, and the package's classes live in JavaScript, where users can import them.

use embed::EmbedError;

/// The prefix `index.js` recognises.
pub(crate) const PREFIX: &str = "tooljournal:";

/// `e` as the error a synchronous call throws.
pub(crate) fn to_js(e: EmbedError) -> napi::Error {
    napi::Error::from_reason(format!("{PREFIX}{}", fields(&e)))
}

/// A usage error (a bad argument) as thrown.
pub(crate) fn usage(message: impl Into<String>) -> napi::Error {
    to_js(EmbedError::usage(message))
}

/// The three fields, as JSON text.
pub(crate) fn fields(e: &EmbedError) -> String {
    serde_json::json!({
        "kind": e.kind.name(),
        "code": e.kind.exit_code(),
        "message": e.message,
    })
    .to_string()
}
