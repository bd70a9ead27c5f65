//! The spill store: where results too large for the model's context are kept in full.
//!
//! Why it looks like this (DESIGN.md §3, and the sled note in §1): the model gets a head, a
//! tail and an opaque locator; the whole text goes to a session-scoped, content-addressed store
//! (sha256), made durable before the journal event that names it. A store that fails stops the
//! session like a failed journal write (a full disk rarely spares the journal beside it): the
//! call is settled with its real outcome and a preview marked "not kept", then the batch ends.
//!
//! sled 0.34 is beta, flushes in the background and locks its database to one process, so
//! each session opens its own database with a small, explicit cache, and every `put` flushes.
//! After an I/O error sled's own close can wait forever for a flush that will never finish, so
//! a failed store is never closed (its files are left as they are: nothing the journal names
//! depends on a put that failed), and a healthy one is closed with a bounded wait.

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

/// How long closing a healthy store may take before it is left to the process's exit.
const CLOSE_WAIT_MS: u64 = 5_000;

/// A spill store in a sled database of its own.
pub struct SledSpill {
    /// Taken only by `drop`.
    db: Option<sled::Db>,
    dir: std::path::PathBuf,
    failed: std::sync::atomic::AtomicBool,
}

impl SledSpill {
    /// Opens (or creates) the store in `dir`, with at most `cache_bytes` of cache.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<SledSpill, String> {
        // 0700 before sled makes its files (with the process's umask, which is the user's):
        // they hold tool results.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(dir)
            .map_err(|e| format!("cannot create the spill store at {}: {e}", dir.display()))?;
        remove_unfinished_snapshots(dir)?;
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .open()
            .map_err(|e| {
                format!(
                    "cannot open the spill store at {}: {}",
                    dir.display(),
                    sled_text(&e)
                )
            })?;
        Ok(SledSpill {
            db: Some(db),
            dir: dir.to_owned(),
            failed: Default::default(),
        })
    }

    // Cannot fail: only `drop` takes the store.
    #[allow(clippy::expect_used)]
    fn db(&self) -> &sled::Db {
        // Only `drop` takes it.
        self.db.as_ref().expect("the store is open until dropped")
    }

    fn fail(&self, what: &str, e: sled::Error) -> String {
        self.failed
            .store(true, std::sync::atomic::Ordering::Release);
        format!(
            "{}: spill store {what} failed: {}",
            self.dir.display(),
            sled_text(&e)
        )
    }
}

/// Removes the snapshots sled left unfinished in `dir`. sled writes a snapshot to
/// `snap.<lsn>.generating`, syncs it and renames it to `snap.<lsn>`, and every open of a store
/// that changed writes one; a process killed before the rename leaves the file (empty, or
/// without its checksum), and sled 0.34.7 reads it as the latest snapshot and refuses the
/// store as corrupt. Until the rename, the snapshots before it and the log are the store
/// (older ones are removed only after it), so the file holds nothing the store needs. No other
/// process has the store open: it is opened under the journal's writer lock.
fn remove_unfinished_snapshots(dir: &Path) -> Result<(), String> {
    let failed = |e: std::io::Error| {
        format!(
            "cannot clear the spill store at {} of an unfinished snapshot: {e}",
            dir.display()
        )
    };
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            std::fs::remove_file(entry.path()).map_err(failed)?;
        }
    }
    Ok(())
}

/// sled's error as a person reads it: an I/O error as the system says it (sled's own shows
/// Rust's `Debug`, "IO error: Os { code: 28, kind: StorageFull, … }"), with the full-disk note.
fn sled_text(e: &sled::Error) -> String {
    match e {
        sled::Error::Io(io) => format!("{io}{}", journal::full_disk_note(io)),
        other => other.to_string(),
    }
}

impl SpillStore for SledSpill {
    fn put(&self, text: &str) -> Result<String, String> {
        if self.failed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(format!(
                "{}: the spill store failed earlier",
                self.dir.display()
            ));
        }
        let hash = hex::encode(Sha256::digest(text.as_bytes()));
        let db = self.db();
        if !db.contains_key(&hash).map_err(|e| self.fail("read", e))? {
            db.insert(&hash, text.as_bytes())
                .map_err(|e| self.fail("insert", e))?;
        }
        // Durable before the journal names it.
        db.flush().map_err(|e| self.fail("flush", e))?;
        Ok(format!("{LOCATOR_PREFIX}{hash}"))
    }

    fn get(&self, locator: &str) -> Result<Option<String>, String> {
        let Some(hash) = locator.strip_prefix(LOCATOR_PREFIX) else {
            return Ok(None);
        };
        match self.db().get(hash).map_err(|e| sled_text(&e))? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes.to_vec())
                .map(Some)
                .map_err(|e| format!("spilled text is not UTF-8: {e}")),
        }
    }
}

impl Drop for SledSpill {
    fn drop(&mut self) {
        let Some(db) = self.db.take() else { return };
        if self.failed.load(std::sync::atomic::Ordering::Acquire) {
            // sled's close flushes, and after an I/O error that flush can wait forever.
            std::mem::forget(db);
            return;
        }
        // A healthy close flushes too; the disk may have filled since the last put.
        let (done, closed) = std::sync::mpsc::channel();
        let closing = std::thread::Builder::new()
            .name("spill-close".into())
            .spawn(move || {
                drop(db);
                let _ = done.send(());
            });
        if closing.is_ok()
            && closed
                .recv_timeout(std::time::Duration::from_millis(CLOSE_WAIT_MS))
                .is_err()
        {
            tracing::warn!(
                dir = %self.dir.display(),
                "the spill store did not close within {CLOSE_WAIT_MS} ms; left to the process's exit"
            );
        }
    }
}

/// The model's copy of a spilled text: head, tail, and how to get the rest.
pub(crate) fn preview(text: &str, locator: &str, keep_bytes: usize) -> String {
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
