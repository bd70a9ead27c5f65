//! Adversarial review of the PostgreSQL record store: each test states a promise
//! the store or the journal above it makes, and tries to break it (each found a defect once,
//! now fixed; the comments say how it showed). Tests that restart the server or change its
//! settings start a server of their own.

use crate::common;

use common::{refs, rows, sql, stored, META};
use journal::{
    Backend, Journal, JournalError, Limits, Options, ReadEnd, Reader, RecordStore, Takeover,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tooljournal_pg::testing::{shared, TempPostgres};
use tooljournal_pg::PgStore;

/// A journal URL of its own on `server`; `lease_ms` appended when given.
fn url_on(server: &TempPostgres, tag: &str, lease_ms: Option<u64>) -> (String, String) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let session = format!("review-{tag}-{n}-{}", std::process::id());
    let mut url = server.url(&session);
    if let Some(ms) = lease_ms {
        url.push_str(&format!("&lease_ms={ms}"));
    }
    (url, session)
}

/// A server whose WAL writer waits 10 s between rounds (its longest), so a commit made with
/// `synchronous_commit = off` stays in the server's memory until something flushes the WAL:
/// an immediate restart then shows what was durable and what was not.
fn server_with_lazy_wal_writer() -> TempPostgres {
    let server = TempPostgres::start();
    let mut admin = sql(&server, "postgres");
    admin
        .batch_execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        .expect("set wal_writer_delay");
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .expect("reload the test server's configuration");
    std::thread::sleep(Duration::from_millis(300)); // The reload reaches the WAL writer.
    server
}

fn records_backend(url: &str) -> Backend {
    let store: Arc<dyn RecordStore> = Arc::new(PgStore::open(url).expect("open the store"));
    Backend::Records(store)
}

/// Every record's payload decoded as a string, and how the read ended.
fn read_strings(backend: &Backend) -> (Vec<String>, ReadEnd) {
    let mut reader = Reader::open_backend(backend, Limits::default()).expect("open a reader");
    let values: Vec<String> = reader
        .by_ref()
        .map(|r| r.expect("a record").decode::<String>().expect("a string"))
        .collect();
    let end = reader.end().cloned().expect("read to the end");
    (values, end)
}

// RecordWriter::append's contract: "An empty `rows` with `durable` still commits durably (the
// lease renewal): rows stored earlier without `durable` become durable with it." PgWriter
// once returned Ok at once for an empty batch, committing nothing.
#[test]
fn an_empty_durable_append_makes_lazily_stored_rows_survive_a_crash() {
    let server = server_with_lazy_wal_writer();
    // A long lease: the heartbeat (every third of it) must not flush the WAL for us.
    let (url, session) = url_on(&server, "empty-durable", Some(600_000));
    let store = PgStore::open(&url).unwrap();
    let mut taken = store.take(Takeover::Refuse).unwrap();
    taken.writer.create(META).unwrap();
    taken.writer.append(&refs(&rows(1, 5, 64)), false).unwrap();
    let mut admin = sql(&server, "postgres");
    let lazy_end: String = admin
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .unwrap()
        .get(0);
    taken.writer.append(&[], true).unwrap();
    let flushed: bool = admin
        .query_one(
            "SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn",
            &[&lazy_end],
        )
        .unwrap()
        .get(0);
    drop(admin);
    server.restart_immediate();
    let after = stored(&server, "postgres", &session).len();
    assert!(
        flushed && after == 5,
        "append(&[], durable=true) returned Ok, yet the 5 rows stored before it without \
         `durable` were not flushed (WAL flushed past them: {flushed}) and {after} of 5 \
         survived an immediate restart"
    );
}

// The same promise as the journal's user meets it: `sync_through(seq)` returns (a tool body may
// run now), the server crashes, and the record is gone. A record is handed to the store lazily
// when the write buffer fills (here at once; by default at 1 MiB: any `started` record with
// more than 1 MiB of arguments).
#[test]
fn sync_through_after_a_full_buffer_flush_is_durable_on_postgres() {
    let server = server_with_lazy_wal_writer();
    let (url, _) = url_on(&server, "sync-through", Some(600_000));
    let backend = records_backend(&url);
    let options = Options {
        write_buffer_bytes_max: 1,
        ..Options::default()
    };
    let (journal, _) = Journal::open_backend(&backend, Takeover::Refuse, options).unwrap();
    let seq = journal
        .append(&"started: rm -rf build/".to_string())
        .unwrap();
    journal.sync_through_blocking(seq).unwrap();
    assert_eq!(journal.stats().durable_seq, seq);
    // The process lives on (a tool runs); the server crashes.
    server.restart_immediate();
    let reread = records_backend(&url);
    let (values, end) = read_strings(&reread);
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(
        values,
        vec!["started: rm -rf build/".to_string()],
        "sync_through({seq}) returned Ok but the record did not survive a server crash"
    );
    drop(journal);
}

// A writer stalled inside its append transaction (SIGSTOP, a paused VM, a host that vanished:
// the server keeps the transaction open until TCP gives up, two hours by default) holds the
// session row's lock. Its lease runs out; a `take` (even a steal) that waited for that lock
// with no timeout could never take the journal over, and `resume --steal` hung.
#[test]
fn a_take_does_not_hang_behind_a_stalled_writers_open_transaction() {
    let (url, session) = url_on(shared(), "stalled", Some(300));
    let store = Arc::new(PgStore::open(&url).unwrap());
    let mut a = store.take(Takeover::Refuse).unwrap();
    a.writer.create(META).unwrap();
    a.writer.append(&refs(&rows(1, 3, 16)), true).unwrap();
    let a_epoch = a.epoch as i64;
    // A's next append, stopped after its first statement: the epoch check has the row locked.
    let mut stalled = sql(shared(), "postgres");
    stalled.batch_execute("BEGIN").unwrap();
    stalled
        .execute(
            "UPDATE tooljournal_sessions SET lease_until = clock_timestamp()
              WHERE session = $1 AND epoch = $2",
            &[&session, &a_epoch],
        )
        .unwrap();
    drop(a); // Its heartbeat stops, as a stopped process's would.
    std::thread::sleep(Duration::from_millis(400)); // The lease has run out.
    let (done_tx, done_rx) = mpsc::channel();
    let taker = {
        let store = store.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let result = store.take(Takeover::Steal).map(|t| t.epoch);
            let _ = done_tx.send(started.elapsed());
            result
        })
    };
    let waited = done_rx.recv_timeout(Duration::from_secs(5));
    // Let a blocked take go, whatever happened, so the test ends. The take ended the stalled
    // transaction's server process: its connection is gone.
    let rolled_back = stalled.batch_execute("ROLLBACK");
    let taken = taker.join().expect("the taker did not panic");
    assert!(
        waited.is_ok(),
        "take(Steal) of a journal whose lease expired 400 ms ago was still blocked after 5 s \
         behind the stalled writer's open transaction (no lock_timeout in take_tx)"
    );
    assert!(
        rolled_back.is_err(),
        "the stalled transaction was left open (its lock would block the next take)"
    );
    let epoch = taken.expect("the take went through once the stalled transaction ended");
    assert!(epoch as i64 > a_epoch, "epoch {epoch} after {a_epoch}");
}

// A record store's lease is the directory lock's counterpart; "the lease is given up on
// close/drop, never left held by a finished process". A `WriterLock` dropped without opening
// (recover's lock when it then finds corruption, a resume that fails before it opens) drops a
// `PgWriter`; the lease once stayed live, held by nobody, for `lease_ms`.
#[test]
fn a_dropped_writer_lock_gives_the_lease_up_as_a_directory_lock_does() {
    let (url, _) = url_on(shared(), "dropped-lock", None);
    let backend = records_backend(&url);
    let lock = Journal::lock_backend(&backend, Takeover::Refuse).unwrap();
    drop(lock);
    let state = backend.writer_state().unwrap();
    assert!(
        !state.live(),
        "a dropped WriterLock left the lease live: {state:?}"
    );
    match Journal::lock_backend(&backend, Takeover::Refuse) {
        Ok(_) => {}
        Err(e) => {
            panic!("the same process cannot take the journal again after dropping its lock: {e}")
        }
    }
}

// `Journal::open_backend` on a corrupt journal returns Corrupt, as for files, and must not
// leave the lease it took live (`recover` run right after would report the session as live,
// and `resume` wait out the lease of a process that already exited).
#[test]
fn a_failed_open_of_a_corrupt_journal_gives_the_lease_up() {
    let (url, session) = url_on(shared(), "corrupt-open", None);
    let backend = records_backend(&url);
    let (journal, _) =
        Journal::open_backend(&backend, Takeover::Refuse, Options::default()).unwrap();
    for value in ["one", "two", "three"] {
        journal.append(&value.to_string()).unwrap();
    }
    journal.close().unwrap();
    sql(shared(), "postgres")
        .execute(
            "UPDATE tooljournal_records SET payload = payload || '\\x00'::bytea
              WHERE session = $1 AND seq = 2",
            &[&session],
        )
        .unwrap();
    match Journal::open_backend(&backend, Takeover::Refuse, Options::default()) {
        Err(JournalError::Corrupt { .. }) => {}
        Err(e) => panic!("want Corrupt, got {e}"),
        Ok(_) => panic!("a corrupt journal was opened for appending"),
    }
    let state = backend.writer_state().unwrap();
    assert!(
        !state.live(),
        "the refused open left its lease live: {state:?}"
    );
}

// A journal poisoned by a failed append (here: the rows do not continue the journal, an error
// whose outcome is known) and then dropped gives its lease up, as a directory's lock is
// released when a poisoned journal is dropped.
#[test]
fn a_poisoned_journal_dropped_gives_its_lease_up() {
    let (url, session) = url_on(shared(), "poisoned-drop", None);
    let backend = records_backend(&url);
    let (journal, _) =
        Journal::open_backend(&backend, Takeover::Refuse, Options::default()).unwrap();
    let seq = journal.append(&"one".to_string()).unwrap();
    journal.sync_through_blocking(seq).unwrap();
    let epoch: i64 = {
        let mut c = sql(shared(), "postgres");
        let epoch: i64 = c
            .query_one(
                "SELECT epoch FROM tooljournal_sessions WHERE session = $1",
                &[&session],
            )
            .unwrap()
            .get(0);
        // Someone else's row at the next seq (same epoch): the next append is NotNext.
        c.execute(
            "INSERT INTO tooljournal_records (session, seq, crc, payload, epoch)
             VALUES ($1, 2, 0, '\\x00'::bytea, $2)",
            &[&session, &epoch],
        )
        .unwrap();
        epoch
    };
    let seq = journal.append(&"two".to_string()).unwrap();
    assert!(journal.sync_through_blocking(seq).is_err(), "NotNext");
    assert!(journal.poisoned().is_some());
    drop(journal);
    let state = backend.writer_state().unwrap();
    assert!(
        !state.live(),
        "a poisoned journal (epoch {epoch}, not fenced) dropped in a live process left its \
         lease live: {state:?}"
    );
}

// Passwords stay out of messages (the store's location is its URL without the password). A
// password holding `/` (common in generated ones; libpq and this client read everything up to
// the last `@` as credentials) was once shown whole.
#[test]
fn a_password_with_a_slash_is_not_shown_in_errors() {
    let url = "postgres://u:s3/cr3t@/db?host=/nonexistent-dir&session=a";
    let err = PgStore::open(url).unwrap_err().to_string();
    assert!(!err.contains("cr3t"), "the password leaked: {err}");
}

// Not tested elsewhere: `session_url` and `PgStore::open` agree on odd ids
// (the URL syntax's own characters, spaces, percent signs, non-ASCII), and each id names its
// own journal.
#[test]
fn odd_session_ids_round_trip_through_session_url_and_name_distinct_journals() {
    let base = shared().url("ignored");
    let ids = [
        "a&b=c", "a b", "a+b", "100%", "a%20b", "x/y?z#w", "é日本", "a;b", "'quote\"",
    ];
    for (i, id) in ids.iter().enumerate() {
        let url = tooljournal_pg::session_url(&base, id);
        let store = PgStore::open(&url).unwrap_or_else(|e| panic!("{id:?}: {e}"));
        assert_eq!(store.session(), *id, "{url}");
        let mut taken = store.take(Takeover::Refuse).unwrap();
        taken.writer.create(META).unwrap();
        taken
            .writer
            .append(&refs(&rows(1, i as u64 + 1, 4)), true)
            .unwrap();
        taken.writer.release().unwrap();
    }
    let listed = tooljournal_pg::sessions(&base).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let info = listed
            .iter()
            .find(|s| s.session == *id)
            .unwrap_or_else(|| panic!("{id:?} not listed"));
        assert_eq!(info.records, i as u64 + 1, "{id:?}");
        assert_eq!(info.holder, None, "{id:?} released");
    }
}
