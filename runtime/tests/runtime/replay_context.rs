//! Replay and the context reduction's events (`context/summary-requested`,
//! `context/compacted`): a journal where they do not fit the step they name is refused, naming
//! the record; a journal cut after a summary was requested, before its reduction was recorded,
//! reads as reduced by the earlier reduction only (nothing half-applied). Each forged journal
//! starts from one a real agent loop wrote, changed in one place.

use crate::common;

use common::agent::*;
use common::forged::{self, journal_of};
use std::sync::Arc;
use tooljournal_runtime::event::{CompactTrigger, Event, Record};
use tooljournal_runtime::replay::SessionReplay;

/// The records of a three-turn session: turns 1 and 2 long; turn 2's request refused as too
/// long (words that count the tokens: `context/calibrated`), then turn 1 summarized (`context/compacted` through turn 1) and sent again; turn 3 the
/// same, through turn 2.
fn reduced_session() -> Vec<Record> {
    let mut s = setup();
    let answers = vec![
        answer("first answer"),
        Answer::Refuse(overflow_counted()),
        answer("summary of turn 1"),
        answer("second answer"),
        Answer::Refuse(overflow_counted()),
        answer("summary of turns 1 and 2"),
        answer("third answer"),
    ];
    let mut agent = agent(&s, answers, fast());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        turn(&mut s, &mut agent, &"long ".repeat(2_000)).await;
        turn(&mut s, &mut agent, &"second ".repeat(1_000)).await;
        turn(&mut s, &mut agent, "third").await;
    });
    drop(s.session);
    // The journal as written replays: only the changes below make it inconsistent.
    let r = common::replay(&s.storage);
    let compaction = r.compaction.expect("reduced");
    assert_eq!((compaction.turn, compaction.through_turn), (3, 2));
    journal::Reader::open(Arc::new(s.storage), journal::Limits::default())
        .unwrap()
        .map(|r| r.unwrap().decode::<Record>().unwrap())
        .collect()
}

/// The index of the `nth` (from 0) record of `kind`.
fn nth(records: &[Record], kind: &str, nth: usize) -> usize {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.event.kind() == kind)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {kind} number {nth}"))
        .0
}

fn replayed(records: &[Record]) -> SessionReplay {
    common::replay(&journal_of(records))
}

/// Replay refuses `records` at the one at `index`, of `kind`, saying `what`.
fn refused_at(records: &[Record], index: usize, kind: &str, what: &str) {
    forged::refused_at(records, index, kind, what);
}

fn compacted_mut(
    records: &mut [Record],
    at: usize,
) -> &mut tooljournal_runtime::event::ContextCompacted {
    match &mut records[at].event {
        Event::ContextCompacted(c) => c,
        other => panic!("not a context/compacted: {other:?}"),
    }
}

fn summary_requested_mut(
    records: &mut [Record],
    at: usize,
) -> &mut tooljournal_runtime::event::ContextSummaryRequested {
    match &mut records[at].event {
        Event::ContextSummaryRequested(c) => c,
        other => panic!("not a context/summary-requested: {other:?}"),
    }
}

#[test]
fn the_journal_these_forgeries_start_from_replays_with_its_latest_reduction() {
    let records = reduced_session();
    let r = replayed(&records);
    let c = r.compaction.expect("reduced");
    assert_eq!(c.trigger, CompactTrigger::Overflow);
    assert_eq!((c.turn, c.step, c.through_turn), (3, 1, 2));
    assert_eq!(c.summary.as_deref(), Some("summary of turns 1 and 2"));
    assert_eq!(r.turns.len(), 3);
    assert_eq!(r.turns[2].steps[0].attempts, 2);
}

#[test]
fn a_reduction_after_the_step_s_response_is_refused() {
    let mut records = reduced_session();
    // Turn 2's reduction moved after its step's llm/response.
    let at = nth(&records, "context/compacted", 0);
    let moved = records.remove(at);
    let response = nth(&records, "llm/response", 1);
    records.insert(response + 1, moved);
    refused_at(
        &records,
        response + 1,
        "context/compacted",
        "after the step's llm/response",
    );

    // And a summary requested there.
    let mut records = reduced_session();
    let at = nth(&records, "context/summary-requested", 0);
    let moved = records.remove(at);
    // Its reduction would now come before it: drop that one too.
    records.remove(nth(&records, "context/compacted", 0));
    let response = nth(&records, "llm/response", 1);
    records.insert(response + 1, moved);
    refused_at(
        &records,
        response + 1,
        "context/summary-requested",
        "after the step's llm/response",
    );
}

#[test]
fn a_reduction_that_leaves_out_its_own_turn_is_refused() {
    for through_turn in [2, 3, 7] {
        let mut records = reduced_session();
        let at = nth(&records, "context/compacted", 0);
        compacted_mut(&mut records, at).through_turn = through_turn;
        refused_at(
            &records,
            at,
            "context/compacted",
            &format!("leaves out turns to {through_turn}"),
        );
    }
}

#[test]
fn a_reduction_shortening_a_step_it_leaves_out_or_one_to_come_is_refused() {
    // Turn 2's reduction leaves out turn 1: shortening step 1 of turn 1 is shortening nothing
    // sent; step 1 of turn 3 has not happened yet.
    for step in [(1, 1), (3, 1)] {
        let mut records = reduced_session();
        let at = nth(&records, "context/compacted", 0);
        compacted_mut(&mut records, at).shortened = vec![(2, 1), step];
        refused_at(&records, at, "context/compacted", "shorten only kept steps");
    }
    // Nor its own step, whose results do not exist yet (turn 2's reduction is in its step 1).
    let mut records = reduced_session();
    let at = nth(&records, "context/compacted", 0);
    compacted_mut(&mut records, at).shortened = vec![(2, 1)];
    refused_at(&records, at, "context/compacted", "shorten only kept steps");
    // Shortening a kept earlier step is fine.
    let mut records = reduced_session();
    let at = nth(&records, "context/compacted", 0);
    let c = compacted_mut(&mut records, at);
    c.through_turn = 0;
    c.shortened = vec![(1, 1)];
    assert_eq!(
        replayed(&records).turns.len(),
        3,
        "a kept step may be shortened"
    );
}

#[test]
fn a_reduction_while_a_request_is_outstanding_is_refused() {
    // Turn 2's reduction moved after its retried request: that request was sent unreduced.
    let mut records = reduced_session();
    let at = nth(&records, "context/compacted", 0);
    let request = nth(&records, "llm/request", 2);
    assert!(
        request > at,
        "the retried request comes after the reduction"
    );
    let compacted = records.remove(at);
    records.insert(request, compacted);
    refused_at(&records, request, "context/compacted", "outstanding");
}

#[test]
fn a_summary_of_no_turn_or_of_its_own_turn_is_refused() {
    for through_turn in [0, 2, 3] {
        let mut records = reduced_session();
        let at = nth(&records, "context/summary-requested", 0);
        summary_requested_mut(&mut records, at).through_turn = through_turn;
        refused_at(
            &records,
            at,
            "context/summary-requested",
            &format!("a summary of turns 1 to {through_turn} requested in turn 2"),
        );
    }
}

#[test]
fn a_reduction_naming_another_step_is_refused() {
    let mut records = reduced_session();
    let at = nth(&records, "context/compacted", 0);
    compacted_mut(&mut records, at).step = 2;
    refused_at(
        &records,
        at,
        "context/compacted",
        "step 2 of turn 2 is not the open step",
    );
}

#[test]
fn a_journal_cut_after_the_summary_request_reads_as_not_reduced_by_it() {
    let records = reduced_session();
    // A crash during turn 2's summary request: no reduction at all.
    let cut = nth(&records, "context/summary-requested", 0);
    let r = replayed(&records[..=cut]);
    assert_eq!(r.compaction, None);
    assert!(r.turns[1].outcome.is_none(), "turn 2 is left open");
    // A crash during turn 3's: turn 2's reduction still holds, and only it.
    let cut = nth(&records, "context/summary-requested", 1);
    let r = replayed(&records[..=cut]);
    let c = r.compaction.expect("turn 2's reduction");
    assert_eq!((c.turn, c.through_turn), (2, 1));
    assert_eq!(c.summary.as_deref(), Some("summary of turn 1"));
    // Cut right after a `context/compacted`: it holds (the retry's `llm/request` had not been
    // made durable, but the reduction was recorded whole).
    let cut = nth(&records, "context/compacted", 1);
    let r = replayed(&records[..=cut]);
    assert_eq!(r.compaction.expect("turn 3's").through_turn, 2);
}

/// Schema 10: the provider's count of a refused request (`context/calibrated`) stands only
/// right after that request's `context_overflow`, counting something; the latest is kept, so a
/// resume estimates as the live session did.
#[test]
fn a_calibration_stands_only_right_after_its_overflow_and_the_latest_is_kept() {
    let records = reduced_session();
    let r = replayed(&records);
    let c = r
        .calibration
        .expect("the overflow's words counted the tokens");
    // common::agent::OVERFLOW_COUNTED: "prompt is too long: 212000 tokens > 200000 maximum".
    assert_eq!((c.turn, c.step, c.attempt), (3, 1, 1));
    assert_eq!(
        (c.provider_tokens, c.provider_max_tokens),
        (212_000, Some(200_000))
    );
    assert!(c.estimate_tokens > 0);

    // Moved before the attempt it counts failed.
    let mut records = reduced_session();
    let at = nth(&records, "context/calibrated", 0);
    let moved = records.remove(at);
    let failed = nth(&records, "llm/attempt-failed", 0);
    records.insert(failed, moved);
    refused_at(
        &records,
        failed,
        "context/calibrated",
        "not the step's last attempt refused as too long",
    );

    // Counting nothing.
    let mut records = reduced_session();
    let at = nth(&records, "context/calibrated", 0);
    if let Event::ContextCalibrated(c) = &mut records[at].event {
        c.provider_tokens = 0;
    }
    refused_at(&records, at, "context/calibrated", "counting 0 tokens");
}
