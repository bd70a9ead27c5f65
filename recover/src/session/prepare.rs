//! Before the journal is read through: whether a live writer holds it (asked without writing
//! anything, since a live session is never repaired), the writer lock when this run may write,
//! and the session's id. Kept apart because the order of these questions is what makes a
//! recovery safe to run next to a writer (SCENARIOS 2, 11, 35).

use super::error::{io_failed, journal_failed};
use super::RecoverError;
use events::event::{Event, Record};
use journal::{Backend, Journal, JournalError, Limits, Storage, Takeover, WriterLock};
use std::path::Path;

/// How long a lock may outlive its writer: a child the writer forked holds an inherited copy of
/// the lock's descriptor until it execs (close-on-exec), so right after a SIGKILL the lock can
/// still be held for a few milliseconds by a process that is not a writer.
const LOCK_GRACE_MS: u64 = 200;

/// Whether a live writer holds the journal: its lock stays held through the grace period.
/// Asked without creating or writing anything; an error means it cannot be told.
fn held_by_a_writer(storage: &dyn Storage) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_GRACE_MS);
    loop {
        if !storage.writer_lock_held()? {
            return Ok(false);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether a writer holds the journal, and why that could not be told (then: not live, and
/// nothing is written). For a record store, a writer is live while its lease is: a crashed
/// worker's session is live until its lease expires.
pub(super) fn liveness(backend: &Backend) -> (bool, Option<String>) {
    let storage = match backend {
        Backend::Files(storage) => storage,
        Backend::Records(_) => {
            return match backend.writer_state() {
                Ok(state) => (state.live(), None),
                Err(e) => (
                    false,
                    Some(format!(
                        "cannot tell whether a writer holds the journal (lease: {e})"
                    )),
                ),
            }
        }
    };
    match held_by_a_writer(storage.as_ref()) {
        Ok(live) => (live, None),
        Err(e) => (
            false,
            Some(format!(
                "cannot tell whether a writer holds the journal (LOCK: {e})"
            )),
        ),
    }
}

/// Whether the backend holds any journal to read: a segment file, for a directory (an empty
/// one holds nothing to protect and no writer to ask about); a record store's rows are asked
/// by reading them.
fn has_journal(backend: &Backend, dir: &Path) -> Result<bool, RecoverError> {
    match backend {
        Backend::Files(storage) => Ok(storage
            .list()
            .map_err(|e| io_failed(dir, e))?
            .iter()
            .any(|n| journal::segment::parse_file_name(n).is_some())),
        Backend::Records(_) => Ok(true),
    }
}

/// What recovery found before reading the journal through: whether a writer holds it, the
/// writer lock when this run may write (held until the recovery is appended), and the
/// session's id (from its first record).
pub(super) struct Prepared {
    pub(super) live: bool,
    pub(super) lock: Option<WriterLock>,
    pub(super) session_id: Option<String>,
    /// Why this run will write nothing although asked to (or could not tell liveness).
    pub(super) read_only_because: Option<String>,
}

/// Whether an I/O error says the journal cannot be written (a read-only mount, an immutable
/// file, no permission), rather than that something failed.
fn is_not_writable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

/// Asks liveness, reads the session's id, then takes the writer lock when this run may write.
pub(super) fn prepare(backend: &Backend, write: bool) -> Result<Prepared, RecoverError> {
    let location = backend.location();
    let dir = Path::new(&location);
    let has_segments = has_journal(backend, dir)?;
    // With no segment there is nothing to protect, and no writer to ask about.
    let (mut live, mut read_only_because) = if has_segments {
        liveness(backend)
    } else {
        (false, None)
    };
    // A journal whose first record is not `session/open` (empty, or torn inside its first
    // record) holds no session: nothing to balance, so nothing is written or cut.
    let session_id = if has_segments {
        let mut reader = journal::Reader::open_backend(backend, Limits::default())
            .map_err(|e| journal_failed(dir, e))?;
        match reader.next() {
            Some(Ok(record)) => match record.decode::<Record>() {
                Ok(Record {
                    event: Event::SessionOpen(open),
                    ..
                }) => Some(open.session_id),
                _ => None,
            },
            // A journal that cannot be read is not an empty session: said now, before any
            // report begins ("session (empty)" and then the error).
            Some(Err(e @ journal::JournalError::Io { .. })) => return Err(journal_failed(dir, e)),
            _ => None,
        }
    } else {
        None
    };
    let mut lock = None;
    if write
        && !live
        && read_only_because.is_none()
        && session_id.is_some()
        && lock_file_worth_making(backend, dir)?
    {
        match Journal::lock_backend(backend, Takeover::Refuse) {
            Ok(l) => lock = Some(l),
            Err(JournalError::Locked { .. } | JournalError::Leased { .. }) => live = true,
            Err(JournalError::Io { source, .. }) if is_not_writable(&source) => {
                read_only_because = Some(format!("cannot take the writer lock ({source})"));
            }
            Err(e) => return Err(journal_failed(dir, e)),
        }
    }
    Ok(Prepared {
        live,
        lock,
        session_id,
        read_only_because,
    })
}

/// Whether taking the writer lock creates no file in vain. A directory without its `LOCK` file
/// (a copy of a journal) gets one from the lock; if the journal is then refused (corrupt, not
/// events, newer) the reading would have left a file behind. So such a journal is checked
/// first, writing nothing; one that would be refused is then read without the lock, and the
/// reading refuses it as it would have under the lock, creating nothing.
fn lock_file_worth_making(backend: &Backend, dir: &Path) -> Result<bool, RecoverError> {
    let Some(storage) = backend.files() else {
        return Ok(true);
    };
    let names = storage.list().map_err(|e| io_failed(dir, e))?;
    if names.iter().any(|n| n == journal::storage::LOCK_FILE) {
        return Ok(true);
    }
    Ok(match crate::verify::verify_backend(backend, dir) {
        Ok(verified) => !matches!(verified.end, journal::ReadEnd::Corrupt(_)),
        Err(_) => false,
    })
}
