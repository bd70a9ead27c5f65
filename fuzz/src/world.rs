//! The simulated world the simulated tools act on: a few small files, kept outside the journal
//! like a real disk (a power loss of the journal undoes no write), with the ground truth the
//! probe checks hold recovery to: who wrote what, in which order, and what each call recorded
//! as evidence before it acted.

use crate::case::ChangeBack;
use runtime::event::Evidence;
use runtime::sha256_hex;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What a call's body writes to each file it replaces: its own bytes, so that no two calls
/// write the same content (and a call run again writes what it wrote the first time).
pub(crate) fn content_of(call_id: &str) -> String {
    format!("written by {call_id}\n")
}

/// What a file the session finds holds.
fn initial_content(path: &str) -> String {
    format!("{path} as the session found it\n")
}

/// What a file holds after the case changed it behind the journal's back (no call writes it).
const CHANGED_CONTENT: &str = "changed behind the journal's back\n";

/// Who wrote a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writer {
    /// The body of the call with this id.
    Call(String),
    /// The case, after the session ended ([`ChangeBack`]).
    Case,
}

/// One change to a file of the world, in the order they happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The file.
    pub path: String,
    /// Who changed it.
    pub by: Writer,
    /// What it held before; `None`: absent.
    pub before: Option<String>,
    /// What it holds after; `None`: removed.
    pub after: Option<String>,
    /// The idempotency key the writing body was given (`None`: the case's change).
    pub key: Option<String>,
}

/// What a call's tool recorded, right before its `started`, about the world it was about to act
/// on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gathered {
    /// The evidence the tool returned (what its `started` should journal).
    pub evidence: Vec<Evidence>,
    /// How many writes the world had seen then (its [`World::log`]'s length).
    pub log_len: usize,
}

/// The files, and their history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct World {
    files: BTreeMap<String, String>,
    log: Vec<Write>,
    /// By call id, what its tool recorded before each attempt, in order.
    gathered: HashMap<String, Vec<Gathered>>,
}

impl World {
    /// The world a session finds: `initial` exist, nothing else.
    pub fn new(initial: &[&str]) -> World {
        World {
            files: initial
                .iter()
                .map(|p| ((*p).to_owned(), initial_content(p)))
                .collect(),
            ..World::default()
        }
    }

    /// What `path` holds now; `None`: absent.
    pub fn content(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    /// sha256 (hex) of what `path` holds now; `None`: absent.
    pub fn sha256(&self, path: &str) -> Option<String> {
        self.content(path).map(|c| sha256_hex(c.as_bytes()))
    }

    /// Every change made to the world, in order.
    pub fn log(&self) -> &[Write] {
        &self.log
    }

    /// What the tool of `call_id` recorded before its attempt `attempt` started (none if it
    /// never got that far). The runtime asks a tool for its evidence once per attempt, in order,
    /// so the session's `n`th record is its attempt `n`'s.
    pub fn gathered(&self, call_id: &str, attempt: u32) -> Option<&Gathered> {
        let index = usize::try_from(attempt).ok()?.checked_sub(1)?;
        self.gathered.get(call_id)?.get(index)
    }

    /// Notes what the tool of `call_id` recorded, as of now, for its next attempt.
    pub(crate) fn gather(&mut self, call_id: &str, evidence: Vec<Evidence>) {
        let log_len = self.log.len();
        let gathered = Gathered { evidence, log_len };
        self.gathered
            .entry(call_id.to_owned())
            .or_default()
            .push(gathered);
    }

    /// The evidence a call writing `content` to `paths` records now: one file replacement each.
    pub(crate) fn evidence(&self, paths: &[String], content: &str) -> Vec<Evidence> {
        let after_sha256 = sha256_hex(content.as_bytes());
        paths
            .iter()
            .map(|path| Evidence::FileReplace {
                path: path.clone(),
                before_sha256: self.sha256(path),
                after_sha256: after_sha256.clone(),
            })
            .collect()
    }

    /// Replaces (or, with `None`, removes) `path`, noting who did.
    pub(crate) fn write(&mut self, path: &str, by: Writer, after: Option<String>) {
        self.write_keyed(path, by, None, after);
    }

    /// [`World::write`] by a body that was given `key`, noting it.
    pub(crate) fn write_keyed(
        &mut self,
        path: &str,
        by: Writer,
        key: Option<&str>,
        after: Option<String>,
    ) {
        let before = match &after {
            Some(content) => self.files.insert(path.to_owned(), content.clone()),
            None => self.files.remove(path),
        };
        self.log.push(Write {
            path: path.to_owned(),
            by,
            before,
            after,
            key: key.map(str::to_owned),
        });
    }

    /// The case's change after the session ended (see [`ChangeBack`]).
    pub(crate) fn change_back(&mut self, change: ChangeBack) {
        let path = change.path;
        if !change.restore {
            return self.write(path, Writer::Case, Some(CHANGED_CONTENT.to_owned()));
        }
        let last = self.log.iter().rev().find(|w| w.path == path);
        if let Some(before) = last.map(|w| w.before.clone()) {
            self.write(path, Writer::Case, before);
        }
    }

    /// The world as real files in a new temporary directory (removed when dropped), for the
    /// probe to look at.
    pub fn materialize(&self) -> std::io::Result<tempfile::TempDir> {
        let dir = tempfile::tempdir()?;
        for (path, content) in &self.files {
            std::fs::write(dir.path().join(path), content)?;
        }
        Ok(dir)
    }
}

/// One entry of a directory as a snapshot sees it: name, whether it is a plain file, its
/// bytes, its length, modification time and permissions.
type Entry = (
    String,
    bool,
    Option<Vec<u8>>,
    u64,
    Option<std::time::SystemTime>,
    bool,
);

/// Everything in `dir` (one level: the world has no directories), to tell whether anything
/// changed there.
pub(crate) fn snapshot(dir: &Path) -> std::io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.path().symlink_metadata()?;
        let bytes = if meta.is_file() {
            Some(std::fs::read(entry.path())?)
        } else {
            None
        };
        entries.push((
            entry.file_name().to_string_lossy().into_owned(),
            meta.is_file(),
            bytes,
            meta.len(),
            meta.modified().ok(),
            meta.permissions().readonly(),
        ));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}
