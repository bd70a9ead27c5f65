//! The spill store: where results too large for the model's context are kept in full.
//!
//! Why it looks like this (DESIGN.md §3, and the sled note in §1): the model gets a head, a
//! tail and an opaque locator; the whole text goes to a session-scoped, content-addressed store
//! (sha256), made durable before the journal event that names it. A store that fails only costs
//! a warning: the result stays inline, and a successful call never becomes a failure.
//!
//! sled 0.34 is beta, flushes in the background and locks its database to one process, so
//! each session opens its own database with a small, explicit cache, and every `put` flushes.

use sha2::{Digest, Sha256};
use std::path::Path;

/// Where spilled text lives. Locators are opaque handles, not paths.
pub trait SpillStore: Send + Sync {
    /// Stores `text` durably and returns its locator. Storing the same text twice is cheap.
    fn put(&self, text: &str) -> Result<String, String>;
    /// The text behind a locator, if this store has it.
    fn get(&self, locator: &str) -> Result<Option<String>, String>;
}

const LOCATOR_PREFIX: &str = "spill:sha256:";

/// A spill store in a sled database of its own.
pub struct SledSpill {
    db: sled::Db,
}

impl SledSpill {
    /// Opens (or creates) the store in `dir`, with at most `cache_bytes` of cache.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<SledSpill, String> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .open()
            .map_err(|e| format!("cannot open the spill store at {}: {e}", dir.display()))?;
        Ok(SledSpill { db })
    }
}

impl SpillStore for SledSpill {
    fn put(&self, text: &str) -> Result<String, String> {
        let hash = hex::encode(Sha256::digest(text.as_bytes()));
        if !self.db.contains_key(&hash).map_err(|e| e.to_string())? {
            self.db
                .insert(&hash, text.as_bytes())
                .map_err(|e| format!("spill store insert failed: {e}"))?;
        }
        // Durable before the journal names it.
        self.db
            .flush()
            .map_err(|e| format!("spill store flush failed: {e}"))?;
        Ok(format!("{LOCATOR_PREFIX}{hash}"))
    }

    fn get(&self, locator: &str) -> Result<Option<String>, String> {
        let Some(hash) = locator.strip_prefix(LOCATOR_PREFIX) else {
            return Ok(None);
        };
        match self.db.get(hash).map_err(|e| e.to_string())? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes.to_vec())
                .map(Some)
                .map_err(|e| format!("spilled text is not UTF-8: {e}")),
        }
    }
}

/// The model's copy of a spilled text: head, tail, and how to get the rest.
pub fn preview(text: &str, locator: &str, keep_bytes: usize) -> String {
    let half = keep_bytes / 2;
    let mut head_end = half.min(text.len());
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len().saturating_sub(half).max(head_end);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = tail_start - head_end;
    format!(
        "{}\n[... {omitted} of {} bytes omitted here; the whole result is stored as {locator} \
         (sha256 {}). Narrow the request (a path, a pattern, a range) to see the middle ...]\n{}",
        &text[..head_end],
        text.len(),
        locator.strip_prefix(LOCATOR_PREFIX).unwrap_or(locator),
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_is_content_addressed_and_get_returns_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledSpill::open(dir.path(), 1 << 20).unwrap();
        let a = store.put("hello").unwrap();
        assert_eq!(store.put("hello").unwrap(), a);
        assert_eq!(
            a,
            format!("{LOCATOR_PREFIX}{}", hex::encode(Sha256::digest(b"hello")))
        );
        assert_eq!(store.get(&a).unwrap().as_deref(), Some("hello"));
        assert_eq!(store.get("spill:sha256:00").unwrap(), None);
        assert_eq!(
            store.get("/etc/passwd").unwrap(),
            None,
            "locators are not paths"
        );
    }

    #[test]
    fn preview_keeps_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(1000);
        let p = preview(&text, "spill:sha256:abc", 101);
        assert!(p.starts_with("éé"));
        assert!(p.ends_with("éé"));
        assert!(p.contains("bytes omitted"));
        assert!(p.contains("spill:sha256:abc"));
    }
}
