//! tooljournal's journal kept in PostgreSQL: [`PgStore`], the [`journal::RecordStore`] that keeps
//! one row per record.
//!
//! Why a database: several workers share journals, and a journal must outlive the machine that
//! wrote it. The journal above this crate (group commit, seq numbering, fail-stop, frame checks
//! on read) is the same code as for segment files; this crate stores its batches, one
//! transaction each, and answers the question a dropped connection leaves: did that commit
//! happen? (See [`PgWriter`]: it reads back what is there, and never writes a row twice.)
//!
//! A store is named by a URL in libpq's syntax, with this crate's own parameters:
//! `session=ID` (the journal's name in the store; required to open one) and `lease_ms=N` (how
//! long a writer's lease lasts unless renewed; default [`LEASE_MS_DEFAULT`]):
//!
//! ```text
//! postgres://USER[:PASSWORD]@HOST[:PORT]/DB?session=ID
//! postgres://USER@/DB?host=/path/to/socket/dir&session=ID      (a Unix socket)
//! ```
//!
//! ```no_run
//! use journal::{RecordStore, RowRef, Takeover, JournalMeta};
//! use tooljournal_pg as pg; // `pg` in the workspace's Cargo.toml
//!
//! # fn main() -> Result<(), journal::JournalError> {
//! let url = "postgres://tj@db.internal/tooljournal?session=run-42";
//! pg::init(url)?; // once per store: creates the tables
//! let store = pg::PgStore::open(url)?;
//! let mut taken = store.take(Takeover::Refuse)?;
//! if taken.meta.is_none() {
//!     taken.writer.create(JournalMeta { journal_id: [7; 16], format_version: 1 })?;
//! }
//! taken.writer.append(&[RowRef { seq: 1, crc: 0x1234, payload: b"hello" }], true)?;
//! taken.writer.release()?;
//! # Ok(())
//! # }
//! ```
//!
//! No TLS yet: the client connects with `NoTls`. A rustls adapter on the ring provider the model
//! adapters already build would do, but TLS untested is TLS not offered, and its test needs a
//! server with certificates, which is not built yet. Until then reach a remote store over a
//! Unix socket, a private network or a tunnel; a URL asking for `sslmode=require` is refused at
//! open, never silently sent in clear.
//!
//! Threads: every call is safe from any thread, tokio's worker threads included (each
//! connection runs on a thread of its own; see `conn.rs`).

mod conn;
mod open;
mod rows;
mod schema;
#[cfg(feature = "testing")]
pub mod testing;
mod url;
mod writer;

pub use journal::location::{is_url, looks_like_url, redact_url};
pub use open::open;
pub use rows::PgRows;
pub use schema::{init, sessions, InitReport, SessionInfo, SCHEMA_VERSION};
pub use url::{session_url, set_default_password, LEASE_MS_DEFAULT, LEASE_MS_MIN};
pub use writer::{PgWriter, RESOLVE_WAIT_MS_MAX};

use conn::Conn;
use journal::{Holder, JournalError, OpenedRows, RecordStore, Taken, Takeover};
use std::sync::{Arc, Mutex};

/// What every connection of one journal needs: where, which session, how long a lease.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) url: url::StoreUrl,
    pub(crate) session: String,
}

impl Target {
    pub(crate) fn location(&self) -> &str {
        &self.url.location
    }

    pub(crate) fn connect(&self, op: &'static str) -> Result<Conn, JournalError> {
        Conn::connect(&self.url.config).map_err(|e| e.into_store(self.location(), op))
    }
}

/// One journal (one session) in a PostgreSQL store.
pub struct PgStore {
    target: Arc<Target>,
    /// For `holder()`; reconnected when lost.
    conn: Mutex<Option<Conn>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.target.location())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Opens the journal the URL names (`session=` is required): connects, and checks that the
    /// store has this build's schema (else the error says to run `tooljournal store init URL`).
    pub fn open(url: &str) -> Result<PgStore, JournalError> {
        let parsed = url::parse(url)?;
        let Some(session) = parsed.session.clone() else {
            return Err(JournalError::Store {
                location: parsed.location,
                op: "parse URL",
                message: "no `session=ID` parameter: it names the journal in the store".into(),
            });
        };
        let target = Arc::new(Target {
            url: parsed,
            session,
        });
        let conn = target.connect("connect")?;
        schema::check(&conn, target.location())?;
        Ok(PgStore {
            target,
            conn: Mutex::new(Some(conn)),
        })
    }

    /// The journal's name in the store.
    pub fn session(&self) -> &str {
        &self.target.session
    }

    /// How long a writer's lease lasts unless renewed, in milliseconds.
    pub fn lease_ms(&self) -> u64 {
        self.target.url.lease_ms
    }
}

impl RecordStore for PgStore {
    fn location(&self) -> String {
        self.target.location().to_string()
    }

    fn take(&self, takeover: Takeover) -> Result<Taken, JournalError> {
        writer::take(&self.target, takeover)
    }

    fn rows(&self) -> Result<Option<OpenedRows>, JournalError> {
        rows::open(&self.target)
    }

    fn holder(&self) -> Result<Option<Holder>, JournalError> {
        // A poisoned lock only means another caller panicked mid-call: the slot is still usable.
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let conn = match slot.take() {
            Some(conn) => conn,
            None => self.target.connect("connect")?,
        };
        match writer::read_holder(&conn, &self.target.session) {
            Ok(holder) => {
                *slot = Some(conn);
                Ok(holder)
            }
            Err(e) => Err(e.into_store(self.target.location(), "read holder")),
        }
    }
}
