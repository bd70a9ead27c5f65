//! Power loss at every write and sync point: whatever survives reads as a prefix of what was
//! written (never corruption), every record acknowledged durable is in it, and a writer can
//! reopen and continue. Properties over random workloads: random record sequences round-trip
//! across segment rotations, reopens and process crashes.

use crate::common;

use common::*;
use proptest::prelude::*;
use std::sync::Arc;
use tooljournal_journal::storage::{Fault, Op, TailLoss};
use tooljournal_journal::{Journal, Options, ReadEnd, SimStorage};

const TAILS: [TailLoss; 5] = [
    TailLoss::DropUnsynced,
    TailLoss::Torn {
        granule_bytes: 512,
        granules: 1,
    },
    TailLoss::Torn {
        granule_bytes: 4096,
        granules: 2,
    },
    TailLoss::ZeroFilled {
        granule_bytes: 512,
        granules: 1,
    },
    TailLoss::ZeroFilled {
        granule_bytes: 4096,
        granules: 1,
    },
];

/// Runs a fixed workload; returns the payloads appended and the last seq acknowledged durable.
fn workload(storage: &SimStorage, sizes: &[usize], sync_every: usize) -> (Vec<Vec<u8>>, u64) {
    workload_with(storage, sizes, sync_every, small_limits(400))
}

fn workload_with(
    storage: &SimStorage,
    sizes: &[usize],
    sync_every: usize,
    options: Options,
) -> (Vec<Vec<u8>>, u64) {
    let mut appended = Vec::new();
    let mut durable = 0;
    let Ok((journal, _)) = Journal::open(Arc::new(storage.clone()), options) else {
        return (appended, durable);
    };
    for (i, &len) in sizes.iter().enumerate() {
        let p = payload(i as u64 + 1, len);
        let Ok(seq) = journal.append(&p) else { break };
        appended.push(p);
        if (i + 1) % sync_every == 0 {
            match journal.sync_through_blocking(seq) {
                Ok(()) => durable = seq,
                Err(_) => break,
            }
        }
    }
    if let Ok(last) = journal.close() {
        durable = last;
    }
    (appended, durable)
}

fn check_survivors(after: &SimStorage, appended: &[Vec<u8>], durable: u64, at: &str) {
    check_survivors_with(after, appended, durable, at, small_limits(400))
}

fn check_survivors_with(
    after: &SimStorage,
    appended: &[Vec<u8>],
    durable: u64,
    at: &str,
    options: Options,
) {
    let (records, end) = read_all(after, options);
    assert!(
        !matches!(end, ReadEnd::Corrupt(_)),
        "{at}: power loss read as corruption: {end:?}"
    );
    let got = payloads(&records);
    assert_eq!(
        got,
        appended[..got.len()].to_vec(),
        "{at}: survivors are not a prefix"
    );
    assert!(
        got.len() as u64 >= durable,
        "{at}: {} survived, {durable} were acknowledged",
        got.len()
    );

    let (journal, report) = Journal::open(Arc::new(after.clone()), options)
        .unwrap_or_else(|e| panic!("{at}: reopen failed: {e}"));
    assert_eq!(report.next_seq, got.len() as u64 + 1, "{at}");
    journal
        .append(&payload(9999, 7))
        .expect("append after reopen");
    journal.close().expect("close after reopen");
    let (records, end) = read_all(after, options);
    assert_eq!(end, ReadEnd::Clean, "{at}");
    assert_eq!(records.len(), got.len() + 1, "{at}");
}

#[test]
fn power_loss_at_every_io_point_keeps_every_acknowledged_record() {
    let sizes: Vec<usize> = (0..24).map(|i| (i * 37) % 150).collect();
    let probe = SimStorage::new();
    workload(&probe, &sizes, 3);
    let total_ops = probe.op_count(Op::Any);
    assert!(total_ops > 20, "workload too small: {total_ops} ops");
    for k in 1..=total_ops {
        for (t, tail) in TAILS.iter().enumerate() {
            let storage = SimStorage::new();
            storage.inject(Op::Any, k, Fault::PowerLoss);
            let (appended, durable) = workload(&storage, &sizes, 3);
            assert!(storage.is_powered_off(), "op {k} was reached");
            let after = storage.power_loss(*tail);
            check_survivors(
                &after,
                &appended,
                durable,
                &format!("power loss at op {k}, tail {t}"),
            );
        }
    }
}

/// The same sweep with zeros written ahead in 1 KiB steps inside 8 KiB segments: records land
/// on preallocated zeros, and some writes extend the zeros; a power loss keeps a torn or
/// zero-filled piece of an overwrite inside the file, not only past its end.
#[test]
fn power_loss_at_every_io_point_of_preallocated_segments_keeps_every_acknowledged_record() {
    let options = Options {
        preallocate_bytes: 1024,
        ..small_limits(8 << 10)
    };
    let sizes: Vec<usize> = (0..40).map(|i| (i * 53) % 400).collect();
    let probe = SimStorage::new();
    workload_with(&probe, &sizes, 3, options);
    let total_ops = probe.op_count(Op::Any);
    let segs = segments(&probe);
    assert!(
        segs.len() >= 2,
        "want a rotation, got {} segments",
        segs.len()
    );
    for k in 1..=total_ops {
        for (t, tail) in TAILS.iter().enumerate() {
            let storage = SimStorage::new();
            storage.inject(Op::Any, k, Fault::PowerLoss);
            let (appended, durable) = workload_with(&storage, &sizes, 3, options);
            assert!(storage.is_powered_off(), "op {k} was reached");
            let after = storage.power_loss(*tail);
            check_survivors_with(
                &after,
                &appended,
                durable,
                &format!("preallocated: power loss at op {k}, tail {t}"),
                options,
            );
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Append(usize),
    Sync,
    Reopen,
    KillProcess,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0usize..300).prop_map(Step::Append),
        2 => Just(Step::Sync),
        1 => Just(Step::Reopen),
        1 => Just(Step::KillProcess),
    ]
}

proptest! {
    #[test]
    fn random_sequences_round_trip_across_rotations_and_restarts(
        steps in proptest::collection::vec(step(), 1..120),
        segment_size in 200u64..2000,
    ) {
        let options = small_limits(segment_size);
        let mut storage = SimStorage::new();
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut journal = Some(Journal::open(Arc::new(storage.clone()), options).unwrap().0);
        for step in steps {
            let j = journal.as_ref().expect("open");
            match step {
                Step::Append(len) => {
                    let p = payload(model.len() as u64 + 1, len);
                    prop_assert_eq!(j.append(&p).unwrap(), model.len() as u64 + 1);
                    model.push(p);
                }
                Step::Sync => {
                    let last = j.stats().appended_seq;
                    j.sync_through_blocking(last).unwrap();
                }
                Step::Reopen => {
                    journal.take().expect("open").close().unwrap();
                    let (j, report) = Journal::open(Arc::new(storage.clone()), options).unwrap();
                    prop_assert_eq!(report.next_seq, model.len() as u64 + 1);
                    journal = Some(j);
                }
                Step::KillProcess => {
                    // What the process had not handed to the OS is gone; the rest survives.
                    let durable = j.stats().durable_seq as usize;
                    let after = storage.process_crash();
                    drop(journal.take());
                    storage = after;
                    let (records, end) = read_all(&storage, options);
                    prop_assert!(!matches!(end, ReadEnd::Corrupt(_)), "{:?}", end);
                    let got = payloads(&records);
                    prop_assert!(got.len() >= durable);
                    prop_assert_eq!(&got[..], &model[..got.len()]);
                    model.truncate(got.len());
                    journal = Some(Journal::open(Arc::new(storage.clone()), options).unwrap().0);
                }
            }
        }
        journal.take().expect("open").close().unwrap();
        let (records, end) = read_all(&storage, options);
        prop_assert_eq!(end, ReadEnd::Clean);
        prop_assert_eq!(payloads(&records), model.clone());
        let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
        prop_assert_eq!(seqs, (1..=model.len() as u64).collect::<Vec<_>>());
    }
}
