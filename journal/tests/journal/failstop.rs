//! Fail-stop (DESIGN.md I10): after a failed write or sync nothing more is written, every later
//! call returns the original error, and what was synced before reads back intact.

use crate::common;

use common::*;
use std::io::ErrorKind;
use std::sync::Arc;
use tooljournal_journal::storage::{Fault, Op, TailLoss};
use tooljournal_journal::{Journal, JournalError, ReadEnd, SimStorage};

fn open(storage: &SimStorage) -> Journal {
    Journal::open(Arc::new(storage.clone()), small_limits(1 << 20))
        .expect("open")
        .0
}

fn assert_poisoned(journal: &Journal, expect_op: &str) {
    let cause = journal.poisoned().expect("poisoned");
    assert!(
        matches!(&*cause, JournalError::Io { op, .. } if *op == expect_op),
        "{cause}"
    );
    match journal.append(&payload(77, 3)) {
        Err(JournalError::Poisoned(c)) => assert_eq!(c.to_string(), cause.to_string()),
        other => panic!("append after failure: {other:?}"),
    }
    match journal.sync_through_blocking(1) {
        Err(JournalError::Poisoned(_)) => {}
        other => panic!("sync after failure: {other:?}"),
    }
}

#[tokio::test]
async fn failed_fsync_poisons_and_synced_records_survive() {
    let storage = SimStorage::new();
    let journal = open(&storage);
    let a = journal.append(&payload(1, 10)).unwrap();
    journal.sync_through(a).await.unwrap();
    let b = journal.append(&payload(2, 20)).unwrap();
    journal.sync_through(b).await.unwrap();
    storage.inject(Op::Sync, 1, Fault::Error);
    let c = journal.append(&payload(3, 30)).unwrap();
    let err = journal.sync_through(c).await.expect_err("the sync fails");
    assert!(matches!(&err, JournalError::Io { op: "sync", .. }), "{err}");
    let syncs_before = storage.stats().syncs;
    let writes_before = storage.stats().writes;
    assert_poisoned(&journal, "sync");
    // Nothing retried, nothing more written, not even on drop.
    drop(journal);
    assert_eq!(storage.stats().syncs, syncs_before);
    assert_eq!(storage.stats().writes, writes_before);

    // The bytes of c reached the file but were never made durable: after power loss only a
    // and b are certain. Every tail outcome reads as a prefix, never as corruption.
    for tail in [
        TailLoss::DropUnsynced,
        TailLoss::Torn {
            granule_bytes: 512,
            granules: 1,
        },
        TailLoss::ZeroFilled {
            granule_bytes: 4096,
            granules: 1,
        },
    ] {
        let after = storage.power_loss(tail);
        let (records, end) = read_all(&after, small_limits(1 << 20));
        let got = payloads(&records);
        assert!(got.len() >= 2, "{tail:?}: synced records lost");
        assert_eq!(got[..2], [payload(1, 10), payload(2, 20)]);
        assert!(!matches!(end, ReadEnd::Corrupt(_)), "{tail:?}: {end:?}");
    }
}

#[test]
fn enospc_on_write_poisons_with_the_storage_full_error() {
    let storage = SimStorage::new();
    let journal = open(&storage);
    storage.inject(Op::Write, 1, Fault::NoSpace);
    let seq = journal.append(&payload(1, 10)).unwrap();
    match journal.sync_through_blocking(seq) {
        Err(JournalError::Io {
            op: "write",
            source,
            ..
        }) => {
            assert_eq!(source.kind(), ErrorKind::StorageFull)
        }
        other => panic!("{other:?}"),
    }
    assert_poisoned(&journal, "write");
}

#[test]
fn torn_write_poisons_and_leaves_a_torn_tail_that_reopen_cuts() {
    let storage = SimStorage::new();
    let journal = open(&storage);
    let a = journal.append(&payload(1, 10)).unwrap();
    journal.sync_through_blocking(a).unwrap();
    storage.inject(Op::Write, 1, Fault::TornWrite { bytes: 9 });
    let b = journal.append(&payload(2, 50)).unwrap();
    assert!(journal.sync_through_blocking(b).is_err());
    assert_poisoned(&journal, "write");
    drop(journal);

    let after = storage.process_crash();
    let (records, end) = read_all(&after, small_limits(1 << 20));
    assert_eq!(payloads(&records), vec![payload(1, 10)]);
    assert!(
        matches!(&end, ReadEnd::TornTail(t) if t.dropped_bytes == 9),
        "{end:?}"
    );
    let (journal, report) = Journal::open(Arc::new(after.clone()), small_limits(1 << 20)).unwrap();
    assert_eq!(report.next_seq, 2);
    assert_eq!(report.torn.map(|t| t.dropped_bytes), Some(9));
    journal.append(&payload(2, 50)).unwrap();
    journal.close().unwrap();
    let (records, end) = read_all(&after, small_limits(1 << 20));
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(payloads(&records), vec![payload(1, 10), payload(2, 50)]);
}

#[test]
fn short_writes_are_completed_not_lost() {
    let storage = SimStorage::new();
    let journal = open(&storage);
    for nth in 1..=3 {
        storage.inject(Op::Write, nth * 2, Fault::ShortWrite { bytes: 3 });
    }
    let written: Vec<Vec<u8>> = (1..=6).map(|s| payload(s, 40)).collect();
    for p in &written {
        let seq = journal.append(p).unwrap();
        journal.sync_through_blocking(seq).unwrap();
    }
    assert!(journal.poisoned().is_none());
    journal.close().unwrap();
    let (records, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(payloads(&records), written);
}

#[test]
fn failure_while_starting_a_new_segment_poisons_too() {
    for op in [Op::Create, Op::Rename, Op::SyncDir] {
        let storage = SimStorage::new();
        let (journal, _) = Journal::open(Arc::new(storage.clone()), small_limits(150)).unwrap();
        storage.inject(op, 1, Fault::Error);
        let mut failed = false;
        for i in 1..=10 {
            let seq = journal.append(&payload(i, 60)).unwrap_or(0);
            if seq == 0 || journal.sync_through_blocking(seq).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "{op:?}: the rotation fault surfaced");
        assert!(journal.poisoned().is_some(), "{op:?}");
        drop(journal);
        let (records, end) = read_all(
            &storage.power_loss(TailLoss::DropUnsynced),
            small_limits(150),
        );
        assert!(!matches!(end, ReadEnd::Corrupt(_)), "{op:?}: {end:?}");
        assert!(!records.is_empty());
    }
}
