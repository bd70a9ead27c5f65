//! The session's disk as the fuzz simulation sees it: every operation the journal makes is
//! noted, so that a dry run of a case tells how many operations of each kind the session makes
//! (and what the journal had appended and made durable at each), and the real run can put its
//! fault inside the session.

use crate::Locked;
use journal::storage::{Op, ReadAt, WriteFile};
use journal::{Journal, SimStorage};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The storage operations a session made, each with the seqs of the last event appended and
/// the last event durable when it ran (0 before the session's journal was open).
pub(crate) struct Ops(pub(crate) Vec<(Op, u64, u64)>);

impl Ops {
    /// How many operations of kind `op` (all of them for `Op::Any`).
    pub(crate) fn count(&self, op: Op) -> u64 {
        self.0
            .iter()
            .filter(|(o, _, _)| op == Op::Any || *o == op)
            .count() as u64
    }

    /// The (appended, durable) seqs noted at the `nth` (1-based) operation of kind `op`.
    pub(crate) fn seqs_at(&self, op: Op, nth: u64) -> Option<(u64, u64)> {
        self.0
            .iter()
            .filter(|(o, _, _)| op == Op::Any || *o == op)
            .nth(usize::try_from(nth).ok()?.checked_sub(1)?)
            .map(|&(_, appended, durable)| (appended, durable))
    }
}

/// The session's disk, noting every operation the journal makes on it (before it runs, so an
/// operation that fails is noted too) with the last seqs appended and durable by then.
#[derive(Debug, Clone)]
pub(crate) struct Counted {
    pub(crate) inner: SimStorage,
    /// Set once the session's journal is open.
    pub(crate) journal: Arc<OnceLock<Weak<Journal>>>,
    pub(crate) ops: Arc<Mutex<Vec<(Op, u64, u64)>>>,
}

impl Counted {
    /// A fresh simulated disk with `inject`'s fault set on it (the `nth` operation of a kind),
    /// and the counting view of it the journal is opened on.
    pub(crate) fn fresh(
        inject: Option<(Op, u64, journal::storage::Fault)>,
    ) -> (SimStorage, Counted) {
        let storage = SimStorage::new();
        if let Some((op, nth, fault)) = inject {
            storage.inject(op, nth, fault);
        }
        let counted = Counted {
            inner: storage.clone(),
            journal: Arc::default(),
            ops: Arc::default(),
        };
        (storage, counted)
    }

    fn note(&self, op: Op) {
        let (appended, durable) = match self.journal.get() {
            None => (0, 0),
            Some(j) => match j.upgrade() {
                Some(j) => {
                    let stats = j.stats();
                    (stats.appended_seq, stats.durable_seq)
                }
                // Closed: nothing was appended after the last noted operation.
                None => self.ops.locked().last().map_or((0, 0), |&(_, a, d)| (a, d)),
            },
        };
        self.ops.locked().push((op, appended, durable));
    }
}

struct CountedFile {
    inner: Box<dyn WriteFile>,
    counted: Counted,
}

impl WriteFile for CountedFile {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> std::io::Result<usize> {
        self.counted.note(Op::Write);
        self.inner.write_at(offset, buf)
    }
    fn len_bytes(&self) -> std::io::Result<u64> {
        self.inner.len_bytes()
    }
    fn sync_data(&mut self) -> std::io::Result<()> {
        self.counted.note(Op::Sync);
        self.inner.sync_data()
    }
    fn truncate(&mut self, len_bytes: u64) -> std::io::Result<()> {
        self.counted.note(Op::Truncate);
        self.inner.truncate(len_bytes)
    }
}

impl journal::Storage for Counted {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        self.inner.list()
    }
    fn open_read(&self, name: &str) -> std::io::Result<Box<dyn ReadAt>> {
        self.inner.open_read(name)
    }
    fn create_new(&self, name: &str) -> std::io::Result<Box<dyn WriteFile>> {
        self.note(Op::Create);
        let inner = self.inner.create_new(name)?;
        Ok(Box::new(CountedFile {
            inner,
            counted: self.clone(),
        }))
    }
    fn open_write(&self, name: &str) -> std::io::Result<Box<dyn WriteFile>> {
        let inner = self.inner.open_write(name)?;
        Ok(Box::new(CountedFile {
            inner,
            counted: self.clone(),
        }))
    }
    fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        self.note(Op::Rename);
        self.inner.rename(from, to)
    }
    fn remove(&self, name: &str) -> std::io::Result<()> {
        self.note(Op::Remove);
        self.inner.remove(name)
    }
    fn sync_dir(&self) -> std::io::Result<()> {
        self.note(Op::SyncDir);
        self.inner.sync_dir()
    }
    fn try_lock(&self) -> std::io::Result<Option<Box<dyn std::any::Any + Send + Sync>>> {
        self.inner.try_lock()
    }
    fn blocks(&self) -> bool {
        self.inner.blocks()
    }
}
