//! Helpers shared by the PostgreSQL store's tests: rows to append, and the tables read directly.
#![allow(dead_code)]

use journal::{JournalMeta, RowRef};
use tooljournal_pg::testing::TempPostgres;

/// Owned rows for `append`: seqs `from..from+n`, payloads of `size_bytes` bytes.
pub fn rows(from: u64, n: u64, size_bytes: usize) -> Vec<(u64, u32, Vec<u8>)> {
    (from..from + n)
        .map(|seq| {
            let payload: Vec<u8> = (0..size_bytes).map(|i| (seq as usize + i) as u8).collect();
            (seq, crc32fast::hash(&payload) ^ seq as u32, payload)
        })
        .collect()
}

/// Borrowed as the writer takes them.
pub fn refs(rows: &[(u64, u32, Vec<u8>)]) -> Vec<RowRef<'_>> {
    rows.iter()
        .map(|(seq, crc, payload)| RowRef {
            seq: *seq,
            crc: *crc,
            payload,
        })
        .collect()
}

pub const META: JournalMeta = JournalMeta {
    journal_id: [9; 16],
    format_version: 3,
};

/// A direct client to the test server's database `db`.
pub fn sql(server: &TempPostgres, db: &str) -> postgres::Client {
    postgres::Config::new()
        .host_path(server.socket_dir())
        .user("postgres")
        .dbname(db)
        .connect(postgres::NoTls)
        .expect("direct connection to the test server")
}

/// Every stored row of `session`: (seq, crc, epoch), in seq order.
pub fn stored(server: &TempPostgres, db: &str, session: &str) -> Vec<(i64, i64, i64)> {
    sql(server, db)
        .query(
            "SELECT seq, crc, epoch FROM tooljournal_records WHERE session = $1 ORDER BY seq",
            &[&session],
        )
        .expect("read the records table")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// A fresh database on the server, initialised; returns a URL template's base for it.
pub fn database(server: &TempPostgres, db: &str, init: bool) -> String {
    sql(server, "postgres")
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .expect("create a test database");
    let url = url_in(server, db, "x");
    if init {
        tooljournal_pg::init(&url).expect("init the test database");
    }
    url
}

/// The URL of journal `session` in database `db`.
pub fn url_in(server: &TempPostgres, db: &str, session: &str) -> String {
    format!(
        "postgres://postgres@/{db}?host={}&session={session}",
        server.socket_dir().display()
    )
}
