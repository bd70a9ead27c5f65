//! The PostgreSQL record store against a real server the test starts (one per test binary):
//! round trips, leases and fencing, the schema's versions, URLs, and calls from tokio threads.

use crate::common;

use common::{database, refs, rows, stored, url_in, META};
use journal::{JournalError, RecordStore, Row, RowSource, Takeover};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tooljournal_pg::testing::{shared, TempPostgres};
use tooljournal_pg::PgStore;

/// A journal URL of its own on the shared server.
fn fresh_url(lease_ms: Option<u64>) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut url = shared().url(&format!("s{n}-{}", std::process::id()));
    if let Some(ms) = lease_ms {
        url.push_str(&format!("&lease_ms={ms}"));
    }
    url
}

fn session_of(url: &str) -> String {
    let start = url.find("session=").unwrap() + "session=".len();
    url[start..].split('&').next().unwrap().to_string()
}

fn read_all(source: &mut dyn RowSource) -> Vec<Row> {
    let mut out = Vec::new();
    while let Some(row) = source.next_row().unwrap() {
        out.push(row);
    }
    out
}

#[test]
fn rows_come_back_as_written_over_several_pages() {
    let url = fresh_url(None);
    let store = PgStore::open(&url).unwrap();
    assert!(store.rows().unwrap().is_none(), "no journal yet");
    let mut taken = store.take(Takeover::Refuse).unwrap();
    assert_eq!(taken.meta, None);
    assert!(
        store.rows().unwrap().is_none(),
        "taken but not created: still no journal"
    );
    taken.writer.create(META).unwrap();
    let written = rows(1, 2500, 40);
    for (i, batch) in written.chunks(100).enumerate() {
        taken.writer.append(&refs(batch), i % 2 == 0).unwrap();
    }
    let (meta, mut source) = store.rows().unwrap().expect("a journal");
    assert_eq!(meta, META);
    let read = read_all(source.as_mut());
    assert_eq!(read.len(), written.len());
    for (row, (seq, crc, payload)) in read.iter().zip(&written) {
        assert_eq!((row.seq, row.crc, &row.payload), (*seq, *crc, payload));
    }
    let holder = store.holder().unwrap().expect("a holder");
    assert!(holder.live() && holder.epoch == taken.epoch, "{holder:?}");
    assert_eq!(holder.pid, Some(std::process::id()));
    taken.writer.release().unwrap();
    assert_eq!(store.holder().unwrap(), None);
    // A later writer gets the identity back, and the epoch moves on.
    let again = store.take(Takeover::Refuse).unwrap();
    assert_eq!((again.meta, again.epoch), (Some(META), taken.epoch + 1));
}

#[test]
fn a_duplicate_or_out_of_order_seq_is_refused_and_nothing_is_overwritten() {
    let url = fresh_url(None);
    let store = PgStore::open(&url).unwrap();
    let mut taken = store.take(Takeover::Refuse).unwrap();
    taken.writer.create(META).unwrap();
    taken.writer.append(&refs(&rows(1, 3, 8)), true).unwrap();
    let again = rows(3, 2, 99);
    let err = taken.writer.append(&refs(&again), true).unwrap_err();
    assert!(err.to_string().contains("last seq is 3"), "{err}");
    let gap = taken
        .writer
        .append(&refs(&rows(5, 1, 8)), true)
        .unwrap_err();
    assert!(gap.to_string().contains("do not continue"), "{gap}");
    let (_, mut source) = store.rows().unwrap().unwrap();
    let read = read_all(source.as_mut());
    assert_eq!(read.len(), 3);
    assert_eq!(read[2].payload.len(), 8, "seq 3 kept its first payload");
}

#[test]
fn take_refuses_a_live_lease_and_steal_fences_the_holder() {
    let url = fresh_url(None);
    let store = PgStore::open(&url).unwrap();
    let mut a = store.take(Takeover::Refuse).unwrap();
    a.writer.create(META).unwrap();
    a.writer.append(&refs(&rows(1, 5, 8)), true).unwrap();
    match store.take(Takeover::Refuse).unwrap_err() {
        JournalError::Leased {
            holder,
            expires_in_ms,
            ..
        } => {
            assert!(
                holder.ends_with(&format!(":{}", std::process::id())),
                "{holder}"
            );
            assert!(
                expires_in_ms > 5_000 && expires_in_ms <= 10_000,
                "{expires_in_ms}"
            );
        }
        other => panic!("want Leased, got {other}"),
    }
    let b = store.take(Takeover::Steal).unwrap();
    let stolen = b.stolen_from.expect("stolen from a live holder");
    assert_eq!((stolen.epoch, b.epoch), (a.epoch, a.epoch + 1));
    assert_eq!(b.meta, Some(META));
    let err = a.writer.append(&refs(&rows(6, 5, 8)), true).unwrap_err();
    assert!(
        matches!(err, JournalError::Fenced { epoch, .. } if epoch == a.epoch),
        "{err}"
    );
    assert_eq!(
        stored(shared(), "postgres", &session_of(&url)).len(),
        5,
        "A stored nothing"
    );
    assert!(matches!(
        a.writer.release(),
        Err(JournalError::Fenced { .. })
    ));
    assert_eq!(
        store.holder().unwrap().unwrap().epoch,
        b.epoch,
        "A's release left B's lease"
    );
}

#[test]
fn the_heartbeat_keeps_a_short_lease_and_an_abandoned_one_expires() {
    let url = fresh_url(Some(600));
    let store = PgStore::open(&url).unwrap();
    let a = store.take(Takeover::Refuse).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        matches!(
            store.take(Takeover::Refuse),
            Err(JournalError::Leased { .. })
        ),
        "the heartbeat renewed the lease past its first 600 ms"
    );
    drop(a); // Its heartbeat stops: the lease runs out, as a crashed writer's would.
    std::thread::sleep(Duration::from_millis(1300));
    let expired = store
        .holder()
        .unwrap()
        .expect("an expired lease is still shown");
    assert!(!expired.live(), "{expired:?}");
    let b = store.take(Takeover::Refuse).unwrap();
    assert_eq!(b.stolen_from, None, "an expired lease is not stolen");
}

#[test]
fn a_steal_racing_appends_leaves_nothing_of_the_old_writer_after_it() {
    let url = fresh_url(None);
    let session = session_of(&url);
    let store = PgStore::open(&url).unwrap();
    let mut a = store.take(Takeover::Refuse).unwrap();
    a.writer.create(META).unwrap();
    let a_epoch = a.epoch as i64;
    let appender = std::thread::spawn(move || {
        let mut next = 1;
        loop {
            match a.writer.append(&refs(&rows(next, 10, 64)), false) {
                Ok(()) => next += 10,
                Err(e) => return (next, e),
            }
        }
    });
    std::thread::sleep(Duration::from_millis(150));
    let mut b = store.take(Takeover::Steal).unwrap();
    let b_first = stored(shared(), "postgres", &session).len() as u64 + 1;
    b.writer
        .append(&refs(&rows(b_first, 10, 64)), true)
        .unwrap();
    let (a_next, a_err) = appender.join().unwrap();
    assert!(matches!(a_err, JournalError::Fenced { .. }), "{a_err}");
    assert_eq!(
        a_next, b_first,
        "A's last append that returned Ok is the last of A's rows"
    );
    let all = stored(shared(), "postgres", &session);
    assert!(b_first > 1, "A appended before the steal");
    for (i, (seq, _, epoch)) in all.iter().enumerate() {
        assert_eq!(*seq, i as i64 + 1, "contiguous seqs");
        let of_a = *epoch == a_epoch;
        assert_eq!(of_a, (*seq as u64) < b_first, "seq {seq} epoch {epoch}");
    }
}

#[test]
fn init_is_idempotent_and_a_newer_schema_is_refused() {
    let server = shared();
    let url = database(server, "newer", true);
    let again = tooljournal_pg::init(&url).unwrap();
    assert_eq!(again.version_before, Some(tooljournal_pg::SCHEMA_VERSION));
    common::sql(server, "newer")
        .batch_execute("UPDATE tooljournal_schema SET version = 99")
        .unwrap();
    let err = tooljournal_pg::init(&url).unwrap_err().to_string();
    assert!(err.contains("version 99, newer"), "{err}");
    let err = PgStore::open(&url).unwrap_err().to_string();
    assert!(err.contains("version 99, newer"), "{err}");
}

#[test]
fn a_store_without_the_schema_says_to_run_init() {
    let server = shared();
    let url = database(server, "bare", false);
    let err = PgStore::open(&url).unwrap_err().to_string();
    assert!(err.contains("run `tooljournal store init URL`"), "{err}");
    let err = tooljournal_pg::sessions(&url).unwrap_err().to_string();
    assert!(err.contains("tooljournal store init"), "{err}");
    let report = tooljournal_pg::init(&url).unwrap();
    assert_eq!(report.version_before, None);
    PgStore::open(&url).unwrap();
}

#[test]
fn sessions_lists_each_journal_with_its_holder_and_rows() {
    let server = shared();
    database(server, "listing", true);
    let one = PgStore::open(&url_in(server, "listing", "one")).unwrap();
    let mut w = one.take(Takeover::Refuse).unwrap();
    w.writer.create(META).unwrap();
    w.writer.append(&refs(&rows(1, 7, 4)), true).unwrap();
    let two = PgStore::open(&url_in(server, "listing", "two")).unwrap();
    two.take(Takeover::Refuse)
        .unwrap()
        .writer
        .release()
        .unwrap();
    let list = tooljournal_pg::sessions(&url_in(server, "listing", "any")).unwrap();
    let names: Vec<&str> = list.iter().map(|s| s.session.as_str()).collect();
    assert_eq!(names, ["one", "two"]);
    assert_eq!((list[0].records, list[0].last_seq), (7, 7));
    assert!(list[0].holder.as_ref().is_some_and(|h| h.live()));
    assert_eq!((list[1].records, list[1].holder.clone()), (0, None));
}

#[test]
fn bad_urls_say_what_is_wrong_without_the_password() {
    let cases = [
        ("mysql://u@h/db?session=a", "must start with postgres://"),
        ("postgres://u@h/db", "no `session=ID`"),
        ("postgres://u@h/db?session=", "`session` is empty"),
        ("postgres://u@h/db?session=a&lease_ms=abc", "lease_ms=abc"),
        ("postgres://u@h/db?session=a&lease_ms=5", "at least 30"),
        ("postgres://u@h/db?session=a&sslmode=require", "no TLS"),
        ("postgres://u@h/db?session=a&colour=red", "colour"),
        ("postgres://u@/db?session=a", "no host"),
    ];
    for (url, want) in cases {
        let err = PgStore::open(url).unwrap_err().to_string();
        assert!(err.contains(want), "{url}: {err}");
        assert!(
            err.starts_with(url.split('?').next().unwrap()),
            "names the URL: {err}"
        );
    }
    let url = "postgres://u:hunter2@/db?host=/nonexistent-dir&session=a";
    let err = PgStore::open(url).unwrap_err().to_string();
    assert!(
        err.contains("postgres://u@/db?host=/nonexistent-dir") && !err.contains("hunter2"),
        "{err}"
    );
    let store = PgStore::open(&fresh_url(None)).unwrap();
    assert!(!store.location().contains('\u{0}') && store.location().contains("session="));
}

/// Everything a journal does with its store, from whatever thread this is.
fn exercise(url: &str) -> usize {
    let store = PgStore::open(url).unwrap();
    let mut taken = store.take(Takeover::Refuse).unwrap();
    taken.writer.create(META).unwrap();
    taken.writer.append(&refs(&rows(1, 20, 16)), true).unwrap();
    assert!(store.holder().unwrap().is_some());
    let (_, mut source) = store.rows().unwrap().unwrap();
    let n = read_all(source.as_mut()).len();
    taken.writer.release().unwrap();
    tooljournal_pg::sessions(url).unwrap();
    n
}

#[test]
fn calls_work_from_a_multi_thread_runtime_worker() {
    let url = fresh_url(None);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let n = rt.block_on(async move { tokio::spawn(async move { exercise(&url) }).await.unwrap() });
    assert_eq!(n, 20);
}

#[tokio::test(flavor = "current_thread")]
async fn calls_work_from_a_current_thread_runtime() {
    assert_eq!(exercise(&fresh_url(None)), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_work_from_spawn_blocking() {
    let url = fresh_url(None);
    let n = tokio::task::spawn_blocking(move || exercise(&url))
        .await
        .unwrap();
    assert_eq!(n, 20);
}

#[test]
fn a_stopped_server_is_an_error_naming_the_store() {
    let server = TempPostgres::start();
    let url = server.url("gone");
    let store = PgStore::open(&url).unwrap();
    server.stop();
    let err = store.take(Takeover::Refuse).unwrap_err().to_string();
    assert!(
        err.starts_with("postgres://postgres@/postgres?host="),
        "{err}"
    );
}
