//! The rules the campaign checks itself rather than trusting the runtime's own assertions, each
//! held to a build or a journal that breaks them where the runtime would not object: one key for
//! every attempt of a call (`Mutant::KeyPerAttempt`, now that the simulated tools fail
//! retryably), nothing of unknown outcome run again under `--rerun not-started`
//! (`Mutant::RerunsUnknownUnderNotStarted`), and a call cancelled before it started never ending
//! `ABORTED` (a journal that says it does, as a runtime without its rule would write it).

use std::sync::Arc;
use std::time::{Duration, Instant};
use tooljournal_fuzz::proptest::strategy::ValueTree;
use tooljournal_fuzz::runtime::event::{Event, Record, RecordRef};
use tooljournal_fuzz::runtime::ErrorCode;
use tooljournal_fuzz::Mutant;

fn seed() -> u64 {
    std::env::var("FUZZ_MUTANT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        })
}

/// Runs `mutant`'s campaign of `budget` cases from a random seed (printed) and returns what the
/// first failing case (unshrunk: what the campaign met) violates.
fn caught(mutant: Mutant, budget: u64) -> Vec<String> {
    tooljournal_fuzz::quiet_simulated_panics();
    let seed = seed();
    let hang_guard = Instant::now() + Duration::from_secs(3600);
    let c = tooljournal_fuzz::campaign(seed, budget, hang_guard, Some(mutant));
    let found = c.found.unwrap_or_else(|| {
        panic!(
            "{:?} survived {} cases from seed {seed} (replay: FUZZ_MUTANT_SEED={seed})",
            mutant.name(),
            c.ran
        )
    });
    println!("caught after {} cases from seed {seed}", c.ran);
    let case = tooljournal_fuzz::tree_for_seed(found.seed).current();
    tooljournal_fuzz::check_case(&case, Some(mutant)).violations
}

#[test]
fn a_key_that_mixes_in_the_attempt_is_caught_by_the_one_key_check_within_300_cases() {
    let v = caught(Mutant::KeyPerAttempt, 300);
    assert!(
        v.iter().any(|m| m.starts_with("§6b one key per call")),
        "caught, but not by the one key check: {v:?}"
    );
}

#[test]
fn an_unknown_call_run_again_under_not_started_is_caught_by_the_campaigns_own_check() {
    let v = caught(Mutant::RerunsUnknownUnderNotStarted, 1000);
    assert!(
        v.iter()
            .any(|m| m.contains("its body ran again during a resume under --rerun not-started")),
        "caught, but not by the check of the policy asked for: {v:?}"
    );
}

/// What a runtime that ends a call cancelled before it started `ABORTED` (saying it did not
/// run, as the checker accepts for an ordinary call) would have the model told.
const ABORTED: &str = "ABORTED: the batch was stopped before this call ran; it did not run";

/// The records of a journal that reads back whole; `None` otherwise.
fn records(image: &journal::SimStorage) -> Option<Vec<Record>> {
    let storage: Arc<dyn journal::Storage> = Arc::new(image.clone());
    let mut reader = journal::Reader::open(storage, journal::Limits::default()).ok()?;
    let records: Option<Vec<Record>> = reader
        .by_ref()
        .map(|r| r.ok()?.decode::<Record>().ok())
        .collect();
    matches!(reader.end(), Some(journal::ReadEnd::Clean))
        .then_some(records)
        .flatten()
}

/// A journal holding `records`, in order (their seqs are their places, as they were).
fn journal_of(records: &[Record]) -> journal::SimStorage {
    let disk = journal::SimStorage::new();
    let options = journal::Options {
        journal_id: Some([7; 16]),
        ..journal::Options::default()
    };
    let (journal, _) = journal::Journal::open(Arc::new(disk.clone()), options).unwrap();
    for r in records {
        journal
            .append(&RecordRef {
                at_ms: r.at_ms,
                event: &r.event,
            })
            .unwrap();
    }
    journal.close().unwrap();
    disk
}

#[test]
fn a_call_cancelled_before_it_started_that_ends_aborted_is_caught_from_the_journal() {
    tooljournal_fuzz::quiet_simulated_panics();
    let mut doctored = 0;
    for seed in 0..400u64 {
        let case = tooljournal_fuzz::tree_for_seed(seed).current();
        let mut run = tooljournal_fuzz::simulate(&case, None);
        let Some(mut records) = records(&run.image) else {
            continue;
        };
        // Calls of the simulated tools with arguments that parse: for the others (an `ask`, a
        // tool that does not exist, arguments that are not JSON) other rules say which codes
        // are true, and catch an ABORTED as well.
        let ordinary: Vec<&str> = records
            .iter()
            .filter_map(|r| match &r.event {
                Event::Received {
                    call,
                    tool,
                    raw_arguments,
                    ..
                } if ["sim", "sim_idem"].contains(&tool.as_str())
                    && serde_json::from_str::<serde_json::Value>(raw_arguments).is_ok() =>
                {
                    Some(call.call_id.as_str())
                }
                _ => None,
            })
            .collect();
        let cancelled: Vec<String> = records
            .iter()
            .filter_map(|r| match &r.event {
                Event::CancelledBeforeStart { call, .. }
                    if ordinary.contains(&call.call_id.as_str()) =>
                {
                    Some(call.call_id.clone())
                }
                _ => None,
            })
            .collect();
        let mut committed = Vec::new();
        for r in &mut records {
            if let Event::Committed { call, result, .. } = &mut r.event {
                if cancelled.contains(&call.call_id) {
                    result.content = ABORTED.into();
                    result.code = Some(ErrorCode::Aborted);
                    committed.push(call.call_id.clone());
                }
            }
        }
        if committed.is_empty() {
            continue;
        }
        assert_eq!(
            tooljournal_fuzz::check_run(&case, &run, None),
            Vec::<String>::new(),
            "seed {seed} before it was doctored"
        );
        // The run as that runtime would have left it: the journal, and what the model was told.
        run.image = journal_of(&records);
        let results = run
            .steps
            .iter_mut()
            .flat_map(|s| s.results.iter_mut().flatten());
        for r in results.filter(|r| committed.contains(&r.call_id)) {
            r.content = ABORTED.into();
            r.code = Some(ErrorCode::Aborted);
        }
        let v = tooljournal_fuzz::check_run(&case, &run, None);
        for id in &committed {
            let named = format!(
                "I9 cancellation: {id} was journaled cancelled-before-start but ends with \
                 Some(Aborted)"
            );
            assert!(v.contains(&named), "seed {seed}: {named:?} not in {v:?}");
        }
        // Nothing else holds it: an ABORTED that says it did not run is true of other calls.
        assert!(
            v.iter().all(|m| m.starts_with("I9 cancellation")),
            "seed {seed}: {v:?}"
        );
        doctored += 1;
        if doctored == 3 {
            return;
        }
    }
    panic!("only {doctored} of the first 400 seeds commit a call cancelled before it started");
}
