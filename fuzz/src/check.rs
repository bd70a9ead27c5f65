//! The invariants of DESIGN.md §7, checked on what a simulated run left behind. Each violation
//! is a message that starts with the invariant's name and names the call.

use crate::case::Case;
use crate::sim::Run;
use journal::{Limits, Reader, SimStorage, Storage};
use recover::classify::CallReport;
use recover::conversation::Message;
use recover::providers::{render, validate, Format};
use recover::session::{recover_storage, recover_storage_streaming};
use runtime::event::{Classification, Event, OutcomeStatus, Record};
use runtime::state::CallState;
use runtime::ErrorCode;
use std::sync::Arc;

/// Every violation found in `run`.
pub fn check(case: &Case, run: &Run) -> Vec<String> {
    let mut v: Vec<String> = run.live_violations.clone();

    // I3 and I9 on the live results of finished batches.
    for (id, r) in &run.results {
        let ran = run.bodies.iter().any(|b| &b.call_id == id);
        if r.code == Some(ErrorCode::AbortedBeforeDispatch) && ran {
            v.push(format!(
                "I9 cancellation: {id} was reported ABORTED_BEFORE_DISPATCH but its body ran"
            ));
        }
    }
    for b in &run.bodies {
        if let Some(step) = run.steps_of.get(&b.call_id) {
            if let Some(&at) = run.cancels.get(step) {
                if b.started_ms > at {
                    v.push(format!(
                        "I9 cancellation: the body of {} started at {} ms, after the cancel at {at} ms",
                        b.call_id, b.started_ms
                    ));
                }
            }
        }
    }

    // `recover classify` streams: it must say what the full analysis says, and append the same.
    v.extend(streaming_disagreements(&run.image));

    // Recovery on the surviving bytes.
    let first = match recover_storage(Arc::new(run.image.clone()), true) {
        Ok(r) => r,
        Err(e) => {
            v.push(format!(
                "I6/I7 recovery: the surviving journal does not recover: {e}"
            ));
            return v;
        }
    };
    let a = &first.analysis;
    let conv = a.conversation();
    for format in Format::ALL {
        if let Err(e) = validate(format, &render(&conv, format)) {
            v.push(format!(
                "I6 provider validity: {} rejects the rebuilt history: {e}",
                format.as_str()
            ));
        }
    }
    // I3: every assistant message with calls is followed by exactly its results, in order.
    for (i, m) in conv.messages.iter().enumerate() {
        if let Message::Assistant { calls, .. } = m {
            if calls.is_empty() {
                continue;
            }
            match conv.messages.get(i + 1) {
                Some(Message::Results { results }) => {
                    let want: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
                    let got: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
                    if want != got {
                        v.push(format!(
                            "I3 one result per call: calls {want:?} answered by {got:?}"
                        ));
                    }
                }
                _ => v.push(format!(
                    "I3 one result per call: message {i} has calls and no results after it"
                )),
            }
        }
    }
    for c in &a.calls {
        let id = &c.call.call_id;
        let ran = run.bodies.iter().any(|b| &b.call_id == id);
        // I1: a body that ran had a durable `started` first.
        if ran
            && (c.classification == Some(Classification::ToolNotStarted) || !reached_start(c.state))
        {
            v.push(format!(
                "I1 write-ahead: the body of {id} ran, but the journal says {} ({:?})",
                c.state, c.classification
            ));
        }
        // I4: a known result is kept; no success is made up.
        let outcome = a.replay.call(&c.call).and_then(|r| r.outcome.as_ref());
        match outcome {
            Some(o) => {
                let real_error = matches!(o.status, OutcomeStatus::Error { .. });
                if c.recovered && c.result.is_error != real_error {
                    v.push(format!(
                        "I4 no fabrication: {id} settled {:?} but recovery says {:?}",
                        o.status, c.result.code
                    ));
                }
            }
            None => {
                if !c.result.is_error && c.state != CallState::Committed {
                    v.push(format!(
                        "I4 no fabrication: {id} never settled but is reported a success"
                    ));
                }
            }
        }
        // I8: what was journaled as received is what the model sent, byte for byte.
        if let Some(r) = a.replay.call(&c.call) {
            if let Some((_, _, raw)) = run.sent.get(id) {
                if !r.seqs.is_empty() && &r.raw_arguments != raw {
                    v.push(format!(
                        "I8 frozen arguments: {id} was received as {:?}, sent as {raw:?}",
                        r.raw_arguments
                    ));
                }
            }
        }
        // I2: a call whose `settled` was lost has nothing after it that depends on it.
        if c.classification == Some(Classification::ToolOutcomeUnknown) {
            let later_response = a
                .replay
                .turns
                .iter()
                .flat_map(|t| t.steps.iter().map(move |s| (t.turn, s)))
                .any(|(t, s)| (t, s.step) > (c.call.turn, c.call.step) && s.response.is_some());
            if later_response || a.replay.closed {
                v.push(format!("I2 settled before dependents: {id}'s settled is lost but later work was made durable"));
            }
        }
    }
    // I5: a second recovery appends nothing and says the same.
    match recover_storage(Arc::new(run.image.clone()), true) {
        Ok(second) => {
            if second.appended {
                v.push("I5 idempotence: a second recovery appended again".into());
            }
            if recover::report::classify_json("j", &second.analysis)
                != recover::report::classify_json("j", a)
            {
                v.push("I5 idempotence: a second recovery reports differently".into());
            }
        }
        Err(e) => v.push(format!("I5 idempotence: the second recovery failed: {e}")),
    }
    // Resume after recovery: the session goes on, runs only the new call, and ends balanced.
    if case.resume {
        match crate::sim::resume_one_turn(&run.image, case) {
            Ok(ran) => {
                if ran.iter().any(|id| id != "resumed") {
                    v.push(format!(
                        "I5 resume: calls ran again after recovery: {ran:?}"
                    ));
                }
                match recover_storage(Arc::new(run.image.clone()), true) {
                    Ok(after) => {
                        if after.appended {
                            v.push("I5 resume: the resumed session ended unbalanced".into());
                        }
                        let conv = after.analysis.conversation();
                        for format in Format::ALL {
                            if let Err(e) = validate(format, &render(&conv, format)) {
                                v.push(format!(
                                    "I6 after resume: {} rejects the history: {e}",
                                    format.as_str()
                                ));
                            }
                        }
                    }
                    Err(e) => v.push(format!(
                        "I5 resume: the resumed journal does not recover: {e}"
                    )),
                }
            }
            Err(e) => v.push(format!("I5 resume: {e}")),
        }
    }
    v
}

/// An independent copy of a simulated disk (clones share theirs).
fn copy_of(s: &SimStorage) -> SimStorage {
    let copy = SimStorage::new();
    for name in s.file_names() {
        if let Some(bytes) = s.read_file(&name) {
            copy.put_file(&name, bytes);
        }
    }
    copy
}

/// The events of a journal, timestamps aside (`None` if it does not read back).
fn events(s: &SimStorage) -> Option<Vec<Event>> {
    let reader = Reader::open(Arc::new(s.clone()) as Arc<dyn Storage>, Limits::default()).ok()?;
    reader
        .map(|r| r.ok()?.decode::<Record>().ok().map(|r| r.event))
        .collect()
}

/// Where the streaming classifier and the full analysis disagree on `image`, read only and
/// writing (each on its own copy).
fn streaming_disagreements(image: &SimStorage) -> Vec<String> {
    let mut v = Vec::new();
    for write in [false, true] {
        let (full_disk, stream_disk) = (copy_of(image), copy_of(image));
        let full = recover_storage(Arc::new(full_disk.clone()), write);
        let mut reports: Vec<CallReport> = Vec::new();
        let streamed = recover_storage_streaming(
            Arc::new(stream_disk.clone()),
            write,
            &|_, _| {},
            &mut reports,
        );
        match (full, streamed) {
            (Ok(full), Ok(s)) => {
                let a = &full.analysis;
                if reports != a.calls {
                    v.push(format!("streaming (write {write}): the reports differ"));
                }
                if (s.end, s.live, &s.recovery, &s.pending_asks, s.appended)
                    != (a.end, a.live, &a.recovery, &a.pending_asks, full.appended)
                {
                    v.push(format!(
                        "streaming (write {write}): the recovery differs: {:?} vs {:?}",
                        s.recovery, a.recovery
                    ));
                }
                if events(&stream_disk) != events(&full_disk) {
                    v.push(format!(
                        "streaming (write {write}): the appended events differ"
                    ));
                }
            }
            (Err(f), Err(s)) if f.to_string() == s.to_string() => {}
            (f, s) => v.push(format!(
                "streaming (write {write}): full {:?}, streamed {:?}",
                f.err().map(|e| e.to_string()),
                s.err().map(|e| e.to_string())
            )),
        }
    }
    v
}

fn reached_start(state: CallState) -> bool {
    matches!(
        state,
        CallState::Started | CallState::Settled | CallState::Committed
    )
}
