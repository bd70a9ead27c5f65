//! The reader's answers, as JSON text `index.js` parses: `classify`, `rebuild`, `audit` and
//! `readResponse`. Reading only, unless `balance` is asked for.

use crate::errors::{to_js, usage};
use napi_derive::napi;

/// `recover classify --json` of the journal at `location`.
#[napi]
pub(crate) fn classify(location: String, balance: bool) -> napi::Result<String> {
    embed::classify(&location, balance)
        .map(|v| v.to_string())
        .map_err(to_js)
}

/// `recover rebuild --format format` of the journal at `location`.
#[napi]
pub(crate) fn rebuild(location: String, format: String, balance: bool) -> napi::Result<String> {
    embed::rebuild(&location, &format, balance)
        .map(|v| v.to_string())
        .map_err(to_js)
}

/// `recover audit --json` of the journal at `location`.
#[napi]
pub(crate) fn audit(location: String, balance: bool) -> napi::Result<String> {
    embed::audit(&location, balance)
        .map(|v| v.to_string())
        .map_err(to_js)
}

/// A provider's response (JSON text) read as a step reads it: `{"text", "calls": [{"id",
/// "name", "arguments"}]}` as JSON text.
#[napi]
pub(crate) fn read_response(response: String) -> napi::Result<String> {
    let value: serde_json::Value =
        serde_json::from_str(&response).map_err(|e| usage(format!("response: {e}")))?;
    let answer = embed::read_response(&value).map_err(to_js)?;
    let calls: Vec<_> = answer
        .calls
        .into_iter()
        .map(|c| serde_json::json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
        .collect();
    Ok(serde_json::json!({"text": answer.text, "calls": calls}).to_string())
}
