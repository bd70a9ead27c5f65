//! A tool's schemas named by one hash: what `session/open`, `tool/schema` and `step/tools`
//! record, and what `recover` matches a rebuilt request's tools by.

use sha2::{Digest, Sha256};

/// sha256 over the canonical JSON (serde_json sorts object keys) of both schemas: the hash
/// `session/open`, `tool/schema` and `step/tools` name a tool's schemas by.
pub fn schema_hash(input: &serde_json::Value, output: Option<&serde_json::Value>) -> String {
    let mut h = Sha256::new();
    h.update(input.to_string().as_bytes());
    h.update(b"\n");
    if let Some(o) = output {
        h.update(o.to_string().as_bytes());
    }
    hex::encode(h.finalize())
}
