//! The record-store seam, through an in-memory store: the journal's writer and reader give the
//! same records, seqs and positions as on segment files; a fenced append stops the journal;
//! a changed row is corruption; a sync with nothing new still makes lazily stored rows durable.
//! (PostgreSQL's implementation is tested against a real server in `pg/tests/`.)

use std::sync::{Arc, Mutex};
use tooljournal_journal::{
    Backend, CorruptionKind, FsStorage, Holder, Journal, JournalError, JournalMeta, OpenedRows,
    Options, ReadEnd, Reader, RecordStore, RecordWriter, Row, RowRef, RowSource, Taken, Takeover,
};

#[derive(Debug, Default)]
struct Inner {
    meta: Option<JournalMeta>,
    rows: Vec<Row>,
    epoch: u64,
    holder: Option<u64>,
    /// Appends with `durable`, and how many rows each carried.
    durable_appends: Vec<usize>,
    lazy_rows: usize,
}

#[derive(Debug, Default, Clone)]
struct MemStore(Arc<Mutex<Inner>>);

struct MemWriter {
    store: MemStore,
    epoch: u64,
}

struct MemRows(std::vec::IntoIter<Row>);

impl RecordStore for MemStore {
    fn location(&self) -> String {
        "mem:".into()
    }
    fn take(&self, takeover: Takeover) -> Result<Taken, JournalError> {
        let mut inner = self.0.lock().unwrap();
        if let (Some(epoch), Takeover::Refuse) = (inner.holder, takeover) {
            return Err(JournalError::Leased {
                location: self.location(),
                holder: format!("epoch {epoch}"),
                expires_in_ms: 1000,
            });
        }
        let stolen_from = inner.holder.map(|epoch| Holder {
            name: "mem".into(),
            pid: None,
            epoch,
            expires_in_ms: 1000,
        });
        inner.epoch += 1;
        inner.holder = Some(inner.epoch);
        Ok(Taken {
            writer: Box::new(MemWriter {
                store: self.clone(),
                epoch: inner.epoch,
            }),
            meta: inner.meta,
            epoch: inner.epoch,
            stolen_from,
        })
    }
    fn rows(&self) -> Result<Option<OpenedRows>, JournalError> {
        let inner = self.0.lock().unwrap();
        Ok(inner.meta.map(|meta| {
            let rows: Box<dyn RowSource> = Box::new(MemRows(inner.rows.clone().into_iter()));
            (meta, rows)
        }))
    }
    fn holder(&self) -> Result<Option<Holder>, JournalError> {
        Ok(self.0.lock().unwrap().holder.map(|epoch| Holder {
            name: "mem".into(),
            pid: None,
            epoch,
            expires_in_ms: 1000,
        }))
    }
}

impl RecordWriter for MemWriter {
    fn create(&mut self, meta: JournalMeta) -> Result<(), JournalError> {
        self.store.0.lock().unwrap().meta = Some(meta);
        Ok(())
    }
    fn append(&mut self, rows: &[RowRef<'_>], durable: bool) -> Result<(), JournalError> {
        let mut inner = self.store.0.lock().unwrap();
        if inner.epoch != self.epoch {
            return Err(JournalError::Fenced {
                location: "mem:".into(),
                epoch: self.epoch,
            });
        }
        for row in rows {
            assert!(inner.rows.iter().all(|r| r.seq != row.seq), "a row twice");
            inner.rows.push(Row {
                seq: row.seq,
                crc: row.crc,
                payload: row.payload.to_vec(),
            });
        }
        if durable {
            inner.durable_appends.push(rows.len());
            inner.lazy_rows = 0;
        } else {
            inner.lazy_rows += rows.len();
        }
        Ok(())
    }
    fn release(&mut self) -> Result<(), JournalError> {
        let mut inner = self.store.0.lock().unwrap();
        if inner.holder == Some(self.epoch) {
            inner.holder = None;
        }
        Ok(())
    }
}

impl RowSource for MemRows {
    fn next_row(&mut self) -> Result<Option<Row>, JournalError> {
        Ok(self.0.next())
    }
}

fn backend(store: &MemStore) -> Backend {
    Backend::Records(Arc::new(store.clone()))
}

fn options() -> Options {
    Options {
        journal_id: Some([7; 16]),
        ..Options::default()
    }
}

/// (seq, position, payload) of every record, and how the journal ends.
fn read_all(backend: &Backend) -> (Vec<(u64, String, String)>, ReadEnd) {
    let mut reader = Reader::open_backend(backend, Default::default()).unwrap();
    let records = reader
        .by_ref()
        .map(|r| {
            let r = r.unwrap();
            (r.seq, r.position.to_string(), r.decode::<String>().unwrap())
        })
        .collect();
    (records, reader.end().unwrap().clone())
}

fn write(backend: &Backend, values: &[&str]) -> Journal {
    let (journal, _) = Journal::open_backend(backend, Takeover::Refuse, options()).unwrap();
    for value in values {
        let seq = journal.append(&value.to_string()).unwrap();
        journal.sync_through_blocking(seq).unwrap();
    }
    journal
}

#[test]
fn rows_read_back_as_the_same_records_at_the_same_positions_as_segment_files() {
    let values = ["a", "bb", "ccc", "a longer value with spaces"];
    let dir = tempfile::tempdir().unwrap();
    let files = Backend::Files(Arc::new(FsStorage::create(dir.path()).unwrap()));
    write(&files, &values).close().unwrap();
    let store = MemStore::default();
    let rows = backend(&store);
    write(&rows, &values).close().unwrap();

    let (from_files, end) = read_all(&files);
    assert_eq!(end, ReadEnd::Clean);
    let (from_rows, end) = read_all(&rows);
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(from_rows, from_files);
    assert_eq!(from_rows.len(), values.len());
    // Every append was synced on its own: one durable transaction per record.
    assert_eq!(store.0.lock().unwrap().durable_appends, vec![1, 1, 1, 1]);
}

#[test]
fn a_reopened_record_journal_continues_its_seqs_and_keeps_its_identity() {
    let store = MemStore::default();
    let rows = backend(&store);
    let first = write(&rows, &["one", "two"]);
    assert_eq!(first.journal_id(), [7; 16]);
    first.close().unwrap();
    let (second, report) = Journal::open_backend(
        &rows,
        Takeover::Refuse,
        Options {
            journal_id: Some([9; 16]),
            ..Options::default()
        },
    )
    .unwrap();
    assert!(!report.created);
    assert_eq!(report.next_seq, 3);
    assert_eq!(
        second.journal_id(),
        [7; 16],
        "the identity set at creation stays"
    );
    assert_eq!(second.append(&"three".to_string()).unwrap(), 3);
    second.close().unwrap();
    let (records, _) = read_all(&rows);
    let seqs: Vec<u64> = records.iter().map(|r| r.0).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

#[test]
fn a_live_holder_is_refused_and_a_stolen_journal_fences_its_old_writer() {
    let store = MemStore::default();
    let rows = backend(&store);
    let a = write(&rows, &["a1"]);
    match Journal::open_backend(&rows, Takeover::Refuse, options()) {
        Err(JournalError::Leased { .. }) => {}
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("two writers on one journal"),
    }
    let lock = Journal::lock_backend(&rows, Takeover::Steal).unwrap();
    assert_eq!(lock.stolen_from().map(|h| h.epoch), Some(1));
    assert_eq!(lock.epoch(), Some(2));
    let (b, report) = lock.open(options()).unwrap();
    assert_eq!(report.next_seq, 2);

    // A's next append is refused by the store, and A stops for good (I10).
    let seq = a.append(&"a2".to_string()).unwrap();
    match a.sync_through_blocking(seq) {
        Err(JournalError::Fenced { epoch: 1, .. }) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(matches!(
        a.append(&"a3".to_string()),
        Err(JournalError::Poisoned(_))
    ));
    b.append(&"b2".to_string()).unwrap();
    b.close().unwrap();
    let (records, end) = read_all(&rows);
    assert_eq!(end, ReadEnd::Clean);
    let values: Vec<&str> = records.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(
        values,
        vec!["a1", "b2"],
        "nothing of A's lands after B's take"
    );
}

#[test]
fn a_changed_row_is_corruption_at_its_position_and_the_writer_refuses_it() {
    let store = MemStore::default();
    let rows = backend(&store);
    write(&rows, &["one", "two", "three"]).close().unwrap();
    store.0.lock().unwrap().rows[1].payload[1] ^= 0x20;
    let (records, end) = read_all(&rows);
    assert_eq!(records.len(), 1);
    match end {
        ReadEnd::Corrupt(c) => {
            assert!(matches!(c.kind, CorruptionKind::BadRecord(_)), "{c}");
            // Where the frame would sit in one segment: after the header and the first frame.
            let first_frame_bytes = 16 + 4; // prefix + seq, then "one" encoded (varint length)
            assert_eq!(c.position.offset, 48 + first_frame_bytes);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    match Journal::open_backend(&rows, Takeover::Steal, options()) {
        Err(JournalError::Corrupt { .. }) => {}
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a writer continued a corrupt journal"),
    }
}

#[test]
fn a_sync_with_nothing_new_makes_lazily_stored_rows_durable() {
    let store = MemStore::default();
    let rows = backend(&store);
    let (journal, _) = Journal::open_backend(
        &rows,
        Takeover::Refuse,
        Options {
            // Every append is handed to the store at once, without waiting for its log.
            write_buffer_bytes_max: 1,
            ..options()
        },
    )
    .unwrap();
    let seq = journal.append(&"lazy".to_string()).unwrap();
    assert_eq!(store.0.lock().unwrap().lazy_rows, 1);
    assert!(store.0.lock().unwrap().durable_appends.is_empty());
    journal.sync_through_blocking(seq).unwrap();
    assert_eq!(store.0.lock().unwrap().durable_appends, vec![0]);
    assert_eq!(store.0.lock().unwrap().lazy_rows, 0);
    assert_eq!(journal.stats().durable_seq, 1);
    journal.close().unwrap();
}
