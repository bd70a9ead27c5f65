//! Group commit: callers that wait together share one fdatasync (DESIGN.md §8).

use crate::common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use tooljournal_journal::{FsyncPolicy, Journal, ReadEnd, SimStorage};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_10_many_concurrent_appends_share_fsyncs_and_keep_every_record_in_seq_order() {
    let storage = SimStorage::new();
    // A sync takes as long as a real disk's, so callers overlap as they would in production.
    storage.set_sync_latency(Duration::from_millis(2));
    let (journal, _) = Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
    let journal = Arc::new(journal);
    let syncs_at_open = storage.stats().syncs;
    let (writers, rounds) = (32u64, 10u64);
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let journal = journal.clone();
            tokio::spawn(async move {
                for r in 0..rounds {
                    let seq = journal.append(&payload(w * 1000 + r, 20)).unwrap();
                    journal.sync_through(seq).await.unwrap();
                    assert!(journal.stats().durable_seq >= seq);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let callers = writers * rounds;
    let syncs = storage.stats().syncs - syncs_at_open;
    assert!(
        syncs * 4 <= callers,
        "{callers} sync_through calls took {syncs} fsyncs: not grouped"
    );
    assert_eq!(
        journal.stats().syncs,
        syncs,
        "the journal counts what the disk saw"
    );
    drop(journal);
    let (records, end) = read_all(&storage, small_limits(1 << 20));
    assert_eq!(end, ReadEnd::Clean);
    assert_eq!(records.len() as u64, callers);
}

#[tokio::test]
async fn callers_waiting_together_need_one_fsync() {
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
    let journal = Arc::new(journal);
    let before = storage.stats().syncs;
    let barrier = Arc::new(tokio::sync::Barrier::new(16));
    let tasks: Vec<_> = (0..16u64)
        .map(|i| {
            let (journal, barrier) = (journal.clone(), barrier.clone());
            tokio::spawn(async move {
                let seq = journal.append(&payload(i, 8)).unwrap();
                barrier.wait().await;
                journal.sync_through(seq).await.unwrap();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(storage.stats().syncs - before, 1);
}

#[test]
fn always_syncs_every_append_and_never_syncs_none() {
    for (policy, expect) in [(FsyncPolicy::Always, 20), (FsyncPolicy::Never, 0)] {
        let storage = SimStorage::new();
        let mut options = small_limits(1 << 20);
        options.fsync = policy;
        let (journal, _) = Journal::open(Arc::new(storage.clone()), options).unwrap();
        let before = storage.stats().syncs;
        for i in 0..20 {
            let seq = journal.append(&payload(i, 8)).unwrap();
            journal.sync_through_blocking(seq).unwrap();
        }
        assert_eq!(storage.stats().syncs - before, expect, "{policy}");
        let (records, _) = read_all(&storage.process_crash(), options);
        assert_eq!(records.len(), 20, "{policy}: every record reached the file");
    }
}

#[test]
fn append_does_not_touch_the_disk_until_asked() {
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), small_limits(1 << 20)).unwrap();
    let before = storage.stats();
    for i in 0..50 {
        journal.append(&payload(i, 8)).unwrap();
    }
    assert_eq!(storage.stats(), before, "appends are buffered");
    assert_eq!(journal.stats().durable_seq, 0);
    journal.sync_through_blocking(10).unwrap();
    assert_eq!(
        journal.stats().durable_seq,
        50,
        "one sync covers everything appended before it"
    );
    assert_eq!(storage.stats().syncs - before.syncs, 1);
    assert!(
        journal.sync_through_blocking(51).is_err(),
        "cannot sync what was not appended"
    );
}

#[test]
fn a_full_write_buffer_reaches_the_file_without_a_sync() {
    let storage = SimStorage::new();
    let mut options = small_limits(1 << 20);
    options.write_buffer_bytes_max = 1000;
    let (journal, _) = Journal::open(Arc::new(storage.clone()), options).unwrap();
    let syncs = storage.stats().syncs;
    for i in 0..100 {
        journal.append(&payload(i, 50)).unwrap();
    }
    assert_eq!(storage.stats().syncs, syncs);
    let (records, _) = read_all(&storage.process_crash(), options);
    assert!(
        records.len() >= 90,
        "only {} records reached the file",
        records.len()
    );
}
