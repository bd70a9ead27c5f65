//! Taking a journal, and its writer: epoch-fenced appends, the lease's heartbeat, and the
//! resolution of a commit whose outcome a lost connection hid.
//!
//! Why the resolution is here and not above: only the store can tell whether a transaction it
//! lost sight of committed. After a lost connection the writer reconnects, makes sure the old
//! server process is gone (so its transaction is settled, committed or rolled back, and cannot
//! commit later), and reads back the batch's seqs: all there with this batch's CRCs and epoch,
//! it committed; none there, it did not, and the same transaction is tried once more; anything
//! else is an error that says the outcome is unknown, and the journal stops. It never writes a
//! row twice (the primary key would refuse it anyway) and never guesses.

use crate::conn::{Backend, CallError, Conn, Worker};
use crate::schema::{holder_at_start, this_host};
use crate::Target;
use journal::{Holder, JournalError, JournalMeta, RecordWriter, RowRef, Taken, Takeover};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// The longest a lost connection's outcome is looked for: reconnecting (with backoff) and
/// waiting for the old server process to go, together.
pub const RESOLVE_WAIT_MS_MAX: u64 = 15_000;
const RECONNECT_BACKOFF_MS_FIRST: u64 = 50;
const RECONNECT_BACKOFF_MS_MAX: u64 = 1_000;

/// The lease's milliseconds left by the database's clock (NULL without a lease).
const MS_LEFT: &str = "(extract(epoch FROM (lease_until - clock_timestamp())) * 1000)::bigint";

/// Reads the session's holder.
pub(crate) fn read_holder(conn: &Conn, session: &str) -> Result<Option<Holder>, CallError> {
    let session = session.to_string();
    let host = this_host();
    conn.call(move |w| {
        let rows = w.client.query(HOLDER_SQL, &[&session])?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        Ok(holder_at_start(row, &host)?)
    })
}

const HOLDER_SQL: &str = "SELECT holder, holder_pid, holder_host, epoch,
            (extract(epoch FROM (lease_until - clock_timestamp())) * 1000)::bigint
       FROM tooljournal_sessions WHERE session = $1";

/// What the take transaction found and did.
enum TakeOutcome {
    Taken {
        epoch: i64,
        meta: Option<(Vec<u8>, i32)>,
        stolen_from: Option<Holder>,
    },
    Leased(Holder),
}

/// Makes the caller the journal's writer (see [`journal::RecordStore::take`]).
pub(crate) fn take(target: &Arc<Target>, takeover: Takeover) -> Result<Taken, JournalError> {
    let conn = target.connect("connect")?;
    let session = target.session.clone();
    let lease_ms = target.url.lease_ms as i64;
    let host = this_host();
    let pid = std::process::id();
    let outcome = take_waiting(&conn, &session, lease_ms, &host, pid, takeover)
        .map_err(|e| e.into_store(target.location(), "take"))?;
    let (epoch, meta, stolen_from) = match outcome {
        TakeOutcome::Leased(holder) => {
            return Err(JournalError::Leased {
                location: target.location().to_string(),
                holder: holder.name,
                expires_in_ms: holder.expires_in_ms.max(0) as u64,
            })
        }
        TakeOutcome::Taken {
            epoch,
            meta,
            stolen_from,
        } => (epoch as u64, meta, stolen_from),
    };
    let meta = match meta {
        None => None,
        Some((id, version)) => Some(meta_of(target.location(), &id, version)?),
    };
    let heartbeat = Heartbeat::start(target.clone(), epoch);
    let writer = PgWriter {
        target: target.clone(),
        conn: Some(conn),
        epoch,
        heartbeat: Some(heartbeat),
        lazy_last: None,
    };
    Ok(Taken {
        writer: Box::new(writer),
        meta,
        epoch,
        stolen_from,
    })
}

/// How long a take waits for the session row's lock before it looks at who holds it.
const TAKE_LOCK_WAIT_MS: u64 = 1_000;
/// How many times a take terminates a stalled locker and tries again.
const TAKE_ATTEMPTS_MAX: u32 = 3;

/// The take transaction, never stuck behind a writer stalled inside a transaction (a stopped
/// process, a paused machine: the server keeps its transaction, and the row's lock, open). After
/// [`TAKE_LOCK_WAIT_MS`] the row is read without its lock: a live lease refuses a plain take
/// (`Leased`); otherwise (stealing, or a lease that expired) the stalled transaction's server
/// process is terminated (its writer then finds its epoch gone: `Fenced`) and the take retried.
fn take_waiting(
    conn: &Conn,
    session: &str,
    lease_ms: i64,
    host: &str,
    pid: u32,
    takeover: Takeover,
) -> Result<TakeOutcome, CallError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (session_tx, host_tx) = (session.to_owned(), host.to_owned());
        let taken = conn.call(move |w| take_tx(w, &session_tx, lease_ms, &host_tx, pid, takeover));
        match taken {
            Err(e) if e.code() == Some("55P03") && attempt < TAKE_ATTEMPTS_MAX => {
                let (session_tx, host_tx) = (session.to_owned(), host.to_owned());
                let stalled = conn.call(move |w| stalled_locker(w, &session_tx, &host_tx))?;
                match stalled {
                    (Some(holder), _) if holder.live() && takeover == Takeover::Refuse => {
                        return Ok(TakeOutcome::Leased(holder))
                    }
                    (_, Some(locker)) => {
                        conn.call(move |w| {
                            w.client
                                .execute("SELECT pg_terminate_backend($1)", &[&locker])?;
                            Ok(())
                        })?;
                    }
                    // The lock went meanwhile: try again.
                    (_, None) => {}
                }
            }
            other => return other,
        }
    }
}

/// The session's holder (read without the row's lock) and the server process whose open
/// transaction holds the row's lock, if one does (the row's `xmax` is that transaction's id).
fn stalled_locker(
    w: &mut Worker,
    session: &str,
    host: &str,
) -> Result<(Option<Holder>, Option<i32>), CallError> {
    let row = w.client.query_one(
        &format!(
            "SELECT holder, holder_pid, holder_host, epoch, {MS_LEFT},
                    (SELECT l.pid FROM pg_locks l
                      WHERE l.locktype = 'transactionid' AND l.granted
                        AND l.mode = 'ExclusiveLock'
                        AND l.transactionid::text = s.xmax::text
                        AND l.pid <> pg_backend_pid()
                      LIMIT 1)
               FROM tooljournal_sessions s WHERE session = $1"
        ),
        &[&session],
    )?;
    let holder = holder_at_start(&row, host)?;
    Ok((holder, row.try_get(5)?))
}

fn take_tx(
    w: &mut Worker,
    session: &str,
    lease_ms: i64,
    host: &str,
    pid: u32,
    takeover: Takeover,
) -> Result<TakeOutcome, CallError> {
    let mut tx = w.client.transaction()?;
    tx.batch_execute(&format!("SET LOCAL lock_timeout = {TAKE_LOCK_WAIT_MS}"))?;
    tx.execute(
        "INSERT INTO tooljournal_sessions (session, epoch) VALUES ($1, 0) ON CONFLICT DO NOTHING",
        &[&session],
    )?;
    let row = tx.query_one(
        &format!(
            "SELECT holder, holder_pid, holder_host, epoch, {MS_LEFT}, journal_id, format_version
               FROM tooljournal_sessions WHERE session = $1 FOR UPDATE"
        ),
        &[&session],
    )?;
    let current = holder_at_start(&row, host)?;
    let live = current.filter(Holder::live);
    if let (Some(holder), Takeover::Refuse) = (&live, takeover) {
        return Ok(TakeOutcome::Leased(holder.clone()));
    }
    let journal_id: Option<Vec<u8>> = row.try_get(5)?;
    let format_version: Option<i32> = row.try_get(6)?;
    let name = format!("{host}:{pid}");
    let epoch: i64 = tx
        .query_one(
            "UPDATE tooljournal_sessions
                SET epoch = epoch + 1, holder = $2, holder_pid = $3, holder_host = $4,
                    lease_until = clock_timestamp() + $5::bigint * interval '1 millisecond'
              WHERE session = $1 RETURNING epoch",
            &[&session, &name, &(pid as i32), &host, &lease_ms],
        )?
        .try_get(0)?;
    tx.commit()?;
    Ok(TakeOutcome::Taken {
        epoch,
        meta: journal_id.map(|id| (id, format_version.unwrap_or(0))),
        stolen_from: live,
    })
}

/// A session row's identity as the journal's.
pub(crate) fn meta_of(
    location: &str,
    id: &[u8],
    version: i32,
) -> Result<JournalMeta, JournalError> {
    let journal_id: [u8; 16] = id.try_into().map_err(|_| JournalError::Store {
        location: location.to_string(),
        op: "read journal id",
        message: format!("journal_id holds {} bytes, not 16", id.len()),
    })?;
    Ok(JournalMeta {
        journal_id,
        format_version: version as u32,
    })
}

/// The writer of a taken journal (see [`journal::RecordWriter`]).
pub struct PgWriter {
    target: Arc<Target>,
    /// `None` after a lost connection whose outcome was settled: the next call reconnects.
    conn: Option<Conn>,
    epoch: u64,
    heartbeat: Option<Heartbeat>,
    /// The last seq stored without waiting for the log since the last durable commit: the next
    /// durable append, even an empty one, checks it is still there and makes it durable.
    lazy_last: Option<i64>,
}

impl std::fmt::Debug for PgWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWriter")
            .field("location", &self.target.location())
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// A batch, owned: it crosses to the connection's thread, maybe twice.
struct Batch {
    session: String,
    epoch: i64,
    lease_ms: i64,
    seqs: Vec<i64>,
    crcs: Vec<i64>,
    payloads: Vec<Vec<u8>>,
    durable: bool,
    /// A batch of no rows (a durable commit for rows stored lazily before it): the last seq the
    /// store must hold.
    expect_last: Option<i64>,
}

/// An append transaction that ran to its end without losing the connection.
enum Appended {
    Stored,
    /// The epoch check found another writer's.
    Fenced,
    /// The rows do not continue the journal: its last stored seq.
    NotNext(i64),
}

impl PgWriter {
    fn err(&self, op: &'static str, message: String) -> JournalError {
        JournalError::Store {
            location: self.target.location().to_string(),
            op,
            message,
        }
    }

    fn fenced(&self) -> JournalError {
        JournalError::Fenced {
            location: self.target.location().to_string(),
            epoch: self.epoch,
        }
    }

    fn conn(&mut self) -> Result<&Conn, JournalError> {
        if self.conn.is_none() {
            self.conn = Some(self.target.connect("connect")?);
        }
        // Set just above when it was None.
        self.conn
            .as_ref()
            .ok_or_else(|| self.err("connect", "no connection".into()))
    }

    fn batch(&self, rows: &[RowRef<'_>], durable: bool) -> Result<Batch, JournalError> {
        let mut seqs = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let seq = i64::try_from(row.seq)
                .map_err(|_| self.err("append", format!("seq {} is over i64", row.seq)))?;
            if i > 0 && seq != seqs[i - 1] + 1 {
                return Err(self.err(
                    "append",
                    format!("seq {seq} does not follow seq {} in the batch", seqs[i - 1]),
                ));
            }
            seqs.push(seq);
        }
        Ok(Batch {
            session: self.target.session.clone(),
            epoch: self.epoch as i64,
            lease_ms: self.target.url.lease_ms as i64,
            seqs,
            crcs: rows.iter().map(|r| i64::from(r.crc)).collect(),
            payloads: rows.iter().map(|r| r.payload.to_vec()).collect(),
            durable,
            expect_last: self.lazy_last.filter(|_| rows.is_empty()),
        })
    }

    /// Runs the append transaction on the current connection.
    fn run(&mut self, batch: &Arc<Batch>) -> Result<Appended, CallError> {
        let batch = batch.clone();
        match self.conn() {
            Ok(conn) => conn.call(move |w| append_tx(w, &batch)),
            Err(_) => Err(CallError::ThreadGone),
        }
    }

    /// The journal's answer for a transaction that ran to its end.
    fn answer(&self, batch: &Batch, appended: Appended) -> Result<(), JournalError> {
        match appended {
            Appended::Stored => Ok(()),
            Appended::Fenced => Err(self.fenced()),
            Appended::NotNext(last) => Err(self.err(
                "append",
                match (batch.seqs.first(), batch.expect_last) {
                    (Some(first), _) => format!(
                        "rows from seq {first} do not continue the journal, whose last seq is \
                         {last}"
                    ),
                    (None, expect) => format!(
                        "rows up to seq {} were stored without waiting for the log, but the \
                         journal's last seq is {last} (the server lost them)",
                        expect.unwrap_or(0)
                    ),
                },
            )),
        }
    }

    /// After a lost connection: reconnect, wait out the old backend, read back; retry once
    /// when nothing of the batch is there and `retry` allows.
    fn resolve(
        &mut self,
        batch: &Arc<Batch>,
        lost: CallError,
        retry: bool,
    ) -> Result<(), JournalError> {
        let location = self.target.location().to_string();
        let prefix = match (batch.seqs.first(), batch.seqs.last()) {
            (Some(first), Some(last)) => format!(
                "outcome unknown for seqs {first}..={last} (connection lost: {})",
                lost.describe()
            ),
            _ => format!(
                "durability unknown for seqs up to {} (connection lost: {})",
                batch.expect_last.unwrap_or(0),
                lost.describe()
            ),
        };
        let unknown = |why: String| JournalError::Store {
            location: location.clone(),
            op: "append",
            message: format!("{prefix}: {why}"),
        };
        let old = self.conn.take().map(|c| c.backend.clone());
        let deadline = Instant::now() + Duration::from_millis(RESOLVE_WAIT_MS_MAX);
        let conn = match reconnect(&self.target, deadline) {
            Ok(conn) => conn,
            Err(e) => return Err(unknown(format!("no reconnection: {}", e.describe()))),
        };
        if let Some(old) = old {
            if let Err(why) = wait_gone(&conn, &old, deadline) {
                return Err(unknown(why));
            }
        }
        // A batch of no rows stored nothing: its commit is tried again, which checks the rows
        // before it are there and makes them durable.
        let found = match batch.seqs.is_empty() {
            true => ReadBack::None,
            false => match read_back(&conn, batch) {
                Ok(found) => found,
                Err(e) => return Err(unknown(format!("read back: {}", e.describe()))),
            },
        };
        self.conn = Some(conn);
        match found {
            ReadBack::All => Ok(()),
            ReadBack::None if retry => match self.run(batch) {
                Ok(appended) => self.answer(batch, appended),
                Err(e) if e.lost() => self.resolve(batch, e, false),
                Err(e) => Err(e.into_store(self.target.location(), "append (retry)")),
            },
            ReadBack::None => Err(unknown("not stored, and the one retry was lost too".into())),
            ReadBack::Other(why) => Err(unknown(why)),
        }
    }
}

/// One append, one statement (one round trip, its own transaction): the lease renewed where
/// the epoch is this writer's (no row: fenced), and the rows inserted only when the journal's
/// last seq is the one they follow (else nothing is inserted: `NotNext`).
const APPEND_SQL: &str = "WITH renewed AS (
        UPDATE tooljournal_sessions
           SET lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond'
         WHERE session = $1 AND epoch = $2
     RETURNING (SELECT coalesce(max(seq), 0) FROM tooljournal_records WHERE session = $1)
               AS last
    ), inserted AS (
        INSERT INTO tooljournal_records (session, seq, crc, payload, epoch)
        SELECT $1, t.s, t.c, t.p, $2
          FROM unnest($4::bigint[], $5::bigint[], $6::bytea[]) AS t(s, c, p), renewed
         WHERE renewed.last = $7::bigint
     RETURNING 1
    )
    SELECT (SELECT last FROM renewed), (SELECT count(*) FROM inserted)";

fn append_tx(w: &mut Worker, b: &Batch) -> Result<Appended, CallError> {
    // The seq the journal must end at: the one before the rows, or (no rows: a durable commit
    // for rows stored lazily) the last of those, which must all still be there.
    let want_last = match (b.seqs.first(), b.expect_last) {
        (Some(first), _) => first - 1,
        (None, Some(expect)) => expect,
        // `append` sends no batch with nothing to store and nothing to make durable.
        (None, None) => return Ok(Appended::Stored),
    };
    let append = w.prepared(APPEND_SQL)?;
    w.set_synchronous_commit(b.durable)?;
    let row = w.client.query_one(
        &append,
        &[
            &b.session,
            &b.epoch,
            &b.lease_ms,
            &b.seqs,
            &b.crcs,
            &b.payloads,
            &want_last,
        ],
    )?;
    let last: Option<i64> = row.try_get(0)?;
    let inserted: i64 = row.try_get(1)?;
    let Some(last) = last else {
        return Ok(Appended::Fenced);
    };
    if last != want_last {
        return Ok(Appended::NotNext(last));
    }
    // One statement: all of its rows or none (an error, above).
    debug_assert_eq!(
        inserted,
        b.seqs.len() as i64,
        "a statement inserts all or nothing"
    );
    Ok(Appended::Stored)
}

/// Connects again, with backoff, until `deadline`.
fn reconnect(target: &Target, deadline: Instant) -> Result<Conn, CallError> {
    let mut backoff_ms = RECONNECT_BACKOFF_MS_FIRST;
    loop {
        match Conn::connect(&target.url.config) {
            Ok(conn) => return Ok(conn),
            Err(e) if Instant::now() + Duration::from_millis(backoff_ms) >= deadline => {
                return Err(e)
            }
            Err(_) => {
                thread::sleep(Duration::from_millis(backoff_ms));
                backoff_ms = (backoff_ms * 2).min(RECONNECT_BACKOFF_MS_MAX);
            }
        }
    }
}

/// Waits until the old server process is gone, so its transaction is settled. One still there
/// (its client vanished, it has not noticed) is terminated: it must not commit later.
fn wait_gone(conn: &Conn, old: &Backend, deadline: Instant) -> Result<(), String> {
    loop {
        let (pid, start) = (old.pid, old.start.clone());
        let listed = conn.call(move |w| {
            let rows = w.client.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE pid = $1 AND backend_start::text = $2",
                &[&pid, &start],
            )?;
            Ok(!rows.is_empty())
        });
        match listed {
            Ok(false) => return Ok(()),
            Ok(true) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Ok(true) => return Err(format!("the old server process {pid} is still there")),
            Err(e) => {
                return Err(format!(
                    "cannot look for the old server process: {}",
                    e.describe()
                ))
            }
        }
    }
}

enum ReadBack {
    All,
    None,
    Other(String),
}

/// What of the batch is stored: all of it as this writer wrote it, none, or something else.
fn read_back(conn: &Conn, batch: &Arc<Batch>) -> Result<ReadBack, CallError> {
    let b = batch.clone();
    let found: Vec<(i64, i64, i64)> = conn.call(move |w| {
        let rows = w.client.query(
            "SELECT seq, crc, epoch FROM tooljournal_records
              WHERE session = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq",
            &[&b.session, &b.seqs[0], &b.seqs[b.seqs.len() - 1]],
        )?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect()
    })?;
    if found.is_empty() {
        return Ok(ReadBack::None);
    }
    let mine = found.len() == batch.seqs.len()
        && found.iter().zip(batch.seqs.iter().zip(&batch.crcs)).all(
            |(&(seq, crc, epoch), (&want_seq, &want_crc))| {
                seq == want_seq && crc == want_crc && epoch == batch.epoch
            },
        );
    Ok(if mine {
        ReadBack::All
    } else {
        ReadBack::Other(format!(
            "{} of the batch's {} seqs are stored, not all as this writer (epoch {}) wrote them",
            found.len(),
            batch.seqs.len(),
            batch.epoch
        ))
    })
}

impl RecordWriter for PgWriter {
    fn create(&mut self, meta: JournalMeta) -> Result<(), JournalError> {
        let session = self.target.session.clone();
        let epoch = self.epoch as i64;
        let id = meta.journal_id.to_vec();
        let version = meta.format_version as i32;
        let session_again = session.clone();
        let result = self.conn()?.call(move |w| {
            let rows = w.client.query(
                "UPDATE tooljournal_sessions SET journal_id = $3, format_version = $4
                  WHERE session = $1 AND epoch = $2
                    AND (journal_id IS NULL OR (journal_id = $3 AND format_version = $4))
              RETURNING 1",
                &[&session, &epoch, &id, &version],
            )?;
            Ok(!rows.is_empty())
        });
        match result {
            Ok(true) => Ok(()),
            Ok(false) => match read_holder(self.conn()?, &session_again) {
                Ok(Some(h)) if h.epoch == self.epoch => Err(self.err(
                    "create",
                    "the journal already has another identity (journal id or format version)"
                        .into(),
                )),
                Ok(_) => Err(self.fenced()),
                Err(e) => Err(e.into_store(self.target.location(), "create")),
            },
            Err(e) => {
                if e.lost() {
                    self.conn = None;
                }
                Err(e.into_store(self.target.location(), "create"))
            }
        }
    }

    fn append(&mut self, rows: &[RowRef<'_>], durable: bool) -> Result<(), JournalError> {
        // No rows: nothing to do, unless rows stored lazily wait for a durable commit (the
        // trait's promise: an empty durable append makes them durable, as an fdatasync would).
        if rows.is_empty() && !(durable && self.lazy_last.is_some()) {
            return Ok(());
        }
        let batch = Arc::new(self.batch(rows, durable)?);
        let result = match self.run(&batch) {
            Ok(appended) => self.answer(&batch, appended),
            Err(e) if e.lost() => self.resolve(&batch, e, true),
            Err(e) => Err(e.into_store(self.target.location(), "append")),
        };
        if result.is_ok() {
            self.lazy_last = match durable {
                true => None,
                false => batch.seqs.last().copied().or(self.lazy_last),
            };
        }
        result
    }

    fn release(&mut self) -> Result<(), JournalError> {
        self.heartbeat = None; // Stops it; its renewals also require a holder.
        let session = self.target.session.clone();
        let epoch = self.epoch as i64;
        let released = self
            .conn()?
            .call(move |w| {
                Ok(w.client.execute(
                    "UPDATE tooljournal_sessions
                        SET holder = NULL, holder_pid = NULL, holder_host = NULL,
                            lease_until = NULL
                      WHERE session = $1 AND epoch = $2",
                    &[&session, &epoch],
                )?)
            })
            .map_err(|e| e.into_store(self.target.location(), "release"))?;
        if released == 0 {
            return Err(self.fenced());
        }
        Ok(())
    }
}

/// Renews the lease every third of it, on a connection of its own, while the epoch is this
/// writer's and a holder is set. Dropping it stops it (its thread ends at its next tick).
struct Heartbeat {
    _stop: mpsc::Sender<()>,
}

impl Heartbeat {
    fn start(target: Arc<Target>, epoch: u64) -> Heartbeat {
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let interval = Duration::from_millis((target.url.lease_ms / 3).max(1));
        // A heartbeat that cannot start leaves the lease to the appends' renewals: not fatal.
        let _ = thread::Builder::new()
            .name("tooljournal-pg-lease".into())
            .spawn(move || heartbeat_loop(&target, epoch as i64, interval, &stop_rx));
        Heartbeat { _stop: stop_tx }
    }
}

fn heartbeat_loop(target: &Target, epoch: i64, interval: Duration, stop: &mpsc::Receiver<()>) {
    let lease_ms = target.url.lease_ms as i64;
    let mut client: Option<postgres::Client> = None;
    // A plain thread outside any runtime: the sync client is safe here.
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(interval) {
        if client.is_none() {
            client = target.url.config.connect(postgres::NoTls).ok();
        }
        let Some(c) = client.as_mut() else { continue };
        let renewed = c.execute(
            "UPDATE tooljournal_sessions
                SET lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond'
              WHERE session = $1 AND epoch = $2 AND holder IS NOT NULL",
            &[&target.session, &epoch, &lease_ms],
        );
        match renewed {
            Ok(0) => return, // Fenced or released: nothing more to renew.
            Ok(_) => {}
            Err(_) => client = None,
        }
    }
}
