//! The store's tables, their version, and what a store-wide listing reads.
//!
//! Why versioned: journals outlive builds. A store holds the version of its tables in
//! `tooljournal_schema`; `init` creates or migrates them (idempotent, one transaction, under an
//! advisory lock so two inits do not race), and a journal opened on a store whose version is
//! not this build's is refused rather than read with the wrong idea of its tables.

use crate::conn::{CallError, Conn, Worker};
use crate::url;
use journal::{Holder, JournalError};

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = 1;

/// `pg_advisory_xact_lock` key that serializes `init`s ("tj" "init" in ASCII, any constant).
const INIT_LOCK_KEY: i64 = 0x746a_696e_6974;

const CREATE_V1: &str = "
CREATE TABLE tooljournal_sessions (
    session text PRIMARY KEY,
    journal_id bytea,
    format_version int,
    epoch bigint NOT NULL,
    holder text,
    holder_pid int,
    holder_host text,
    lease_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE tooljournal_records (
    session text NOT NULL REFERENCES tooljournal_sessions (session),
    seq bigint NOT NULL CHECK (seq > 0),
    crc bigint NOT NULL CHECK (crc >= 0 AND crc <= 4294967295),
    payload bytea NOT NULL,
    epoch bigint NOT NULL,
    PRIMARY KEY (session, seq)
);
INSERT INTO tooljournal_schema (version) VALUES (1);
";

/// What [`crate::init`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitReport {
    /// The store, as its URL without the password.
    pub location: String,
    /// The schema version found before (`None`: the store had no tooljournal tables).
    pub version_before: Option<i32>,
    /// The schema version now: [`SCHEMA_VERSION`].
    pub version: i32,
}

/// One journal in a store, as [`crate::sessions`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The journal's name in the store (the URL's `session=`).
    pub session: String,
    /// Who holds it for writing (live or expired); `None` when nobody does.
    pub holder: Option<Holder>,
    /// The epoch of its latest writer (0: never taken).
    pub epoch: u64,
    /// How many records it holds.
    pub records: u64,
    /// Its last record's seq (0: none).
    pub last_seq: u64,
}

fn store_err(location: &str, op: &'static str, message: String) -> JournalError {
    JournalError::Store {
        location: location.to_string(),
        op,
        message,
    }
}

/// The version in `tooljournal_schema`, `None` when the table is empty.
fn read_version(worker: &mut Worker) -> Result<Option<i32>, CallError> {
    let rows = worker
        .client
        .query("SELECT version FROM tooljournal_schema", &[])?;
    match rows.as_slice() {
        [] => Ok(None),
        [row] => Ok(Some(row.try_get(0)?)),
        _ => Ok(Some(i32::MAX)),
    }
}

/// Creates or migrates the store's tables to [`SCHEMA_VERSION`].
pub fn init(url: &str) -> Result<InitReport, JournalError> {
    let store = url::parse(url)?;
    let location = store.location.clone();
    let conn = Conn::connect(&store.config).map_err(|e| e.into_store(&location, "connect"))?;
    let before = conn
        .call(|w| {
            let mut tx = w.client.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INIT_LOCK_KEY])?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS tooljournal_schema (version int NOT NULL)",
            )?;
            let rows = tx.query("SELECT version FROM tooljournal_schema", &[])?;
            let before: Option<i32> = match rows.as_slice() {
                [] => None,
                [row] => Some(row.try_get(0)?),
                _ => return Ok(Err("tooljournal_schema holds more than one row".to_string())),
            };
            match before {
                None => tx.batch_execute(CREATE_V1)?,
                Some(v) if v > SCHEMA_VERSION => {
                    return Ok(Err(format!(
                        "the store's schema is version {v}, newer than this build's \
                         {SCHEMA_VERSION}: use a newer tooljournal"
                    )))
                }
                Some(_) => {} // Version 1 is the only one so far: nothing to migrate.
            }
            tx.commit()?;
            Ok(Ok(before))
        })
        .map_err(|e| e.into_store(&location, "init"))?
        .map_err(|message| store_err(&location, "init", message))?;
    Ok(InitReport {
        location,
        version_before: before,
        version: SCHEMA_VERSION,
    })
}

/// Checks that the store has this build's schema: the error says to run `init` when it has
/// none, or which version it has.
pub(crate) fn check(conn: &Conn, location: &str) -> Result<(), JournalError> {
    let found = conn.call(read_version);
    let message = match found {
        Ok(Some(SCHEMA_VERSION)) => return Ok(()),
        Err(e) if e.code() == Some("42P01") => {
            "the store has no tooljournal schema: run `tooljournal store init URL`".to_string()
        }
        Err(e) => return Err(e.into_store(location, "check schema")),
        Ok(None) => "tooljournal_schema is empty: run `tooljournal store init URL`".to_string(),
        Ok(Some(v)) if v > SCHEMA_VERSION => format!(
            "the store's schema is version {v}, newer than this build's {SCHEMA_VERSION}: \
             use a newer tooljournal"
        ),
        Ok(Some(v)) => format!(
            "the store's schema is version {v}, older than this build's {SCHEMA_VERSION}: \
             run `tooljournal store init URL` to migrate it"
        ),
    };
    Err(store_err(location, "check schema", message))
}

/// The journals in a store, by name.
pub fn sessions(url: &str) -> Result<Vec<SessionInfo>, JournalError> {
    let store = url::parse(url)?;
    let location = store.location.clone();
    let conn = Conn::connect(&store.config).map_err(|e| e.into_store(&location, "connect"))?;
    check(&conn, &location)?;
    let host = this_host();
    conn.call(move |w| {
        let rows = w.client.query(
            "SELECT s.session, s.holder, s.holder_pid, s.holder_host, s.epoch,
                    (extract(epoch FROM (s.lease_until - clock_timestamp())) * 1000)::bigint,
                    (SELECT count(*) FROM tooljournal_records r WHERE r.session = s.session),
                    (SELECT coalesce(max(seq), 0) FROM tooljournal_records r
                      WHERE r.session = s.session)
               FROM tooljournal_sessions s ORDER BY s.session",
            &[],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let epoch: i64 = row.try_get(4)?;
            let holder = holder_of(
                row.try_get(1)?,
                row.try_get(2)?,
                row.try_get(3)?,
                epoch,
                row.try_get(5)?,
                &host,
            );
            out.push(SessionInfo {
                session: row.try_get(0)?,
                holder,
                epoch: epoch as u64,
                records: row.try_get::<_, i64>(6)? as u64,
                last_seq: row.try_get::<_, i64>(7)? as u64,
            });
        }
        Ok(out)
    })
    .map_err(|e| e.into_store(&location, "list sessions"))
}

/// This host's name, for the holder's `host:pid`.
pub(crate) fn this_host() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".into())
}

/// The holder a row names in its first five columns (`holder, holder_pid, holder_host, epoch`,
/// the lease's milliseconds left): how every query of the session row reads it.
pub(crate) fn holder_at_start(
    row: &postgres::Row,
    this_host: &str,
) -> Result<Option<Holder>, postgres::Error> {
    Ok(holder_of(
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        this_host,
    ))
}

/// A holder from a session row's columns; `None` when the row has no holder.
pub(crate) fn holder_of(
    name: Option<String>,
    pid: Option<i32>,
    holder_host: Option<String>,
    epoch: i64,
    expires_in_ms: Option<i64>,
    this_host: &str,
) -> Option<Holder> {
    let name = name?;
    // A pid means something only on the host it was taken on.
    let pid = match holder_host {
        Some(h) if h == this_host => pid.and_then(|p| u32::try_from(p).ok()),
        _ => None,
    };
    Some(Holder {
        name,
        pid,
        epoch: epoch as u64,
        expires_in_ms: expires_in_ms.unwrap_or(0),
    })
}
