//! One key per call, and the runtime's retries, checked on the bodies the tools recorded
//! (outside the journal) and on the world's writes. DESIGN.md §6b: a call has one idempotency
//! key, the same for every attempt, in every process, after any resume; it is what makes a
//! second attempt harmless, so a body given another key is a duplicate the world cannot tell.
//!
//! - Every body of a call, each attempt of each run, was given the call's key (derived from the
//!   session id and the call, as its `started` records it), and every write of the world a body
//!   made carries that key.
//! - A call's bodies in one session form runs: a body goes on with its call's run only right
//!   after that run's last body failed retryably, numbered next. A run goes on only for a
//!   retry-safe tool, to at most [`ATTEMPTS_MAX`] attempts; a call runs once per session; and
//!   in a batch that finished unstopped, no retry-safe call ends on a retryable failure with
//!   attempts left.

use crate::parts::ATTEMPTS_MAX;
use crate::sim::{Body, Run};
use crate::world::{World, Writer};
use crate::Coverage;
use recover::Analysis;
use runtime::event::{idempotency_key, CallRef};
use std::collections::{BTreeMap, HashMap};

/// A call's bodies in one session, in the order they began, split into runs (attempts the
/// runtime made one after the other, each after a retryable failure of the one before).
pub(crate) fn runs(bodies: &[Body]) -> BTreeMap<&str, Vec<Vec<&Body>>> {
    let mut runs: BTreeMap<&str, Vec<Vec<&Body>>> = BTreeMap::new();
    for b in bodies {
        let of_call = runs.entry(b.call_id.as_str()).or_default();
        match of_call.last_mut() {
            Some(run) if goes_on(run, b) => run.push(b),
            _ => of_call.push(vec![b]),
        }
    }
    runs
}

/// Whether `b` is the next attempt of `run`: its last body failed retryably, and `b` is
/// numbered right after it.
fn goes_on(run: &[&Body], b: &Body) -> bool {
    run.last()
        .is_some_and(|last| last.retryable && last.attempt.checked_add(1) == Some(b.attempt))
}

/// Every body among `bodies` (those of one session) was given its call's key, and so was every
/// write in `world` by a call; the calls and the session id are `a`'s (an analysis of that
/// session's journal). `during` says which session, for the message.
pub(crate) fn one_key_per_call(
    bodies: &[Body],
    world: &World,
    a: &Analysis,
    during: &str,
    v: &mut Vec<String>,
) {
    let Some(open) = &a.replay.open else { return };
    let calls: HashMap<&str, &CallRef> = a
        .replay
        .calls()
        .map(|c| (c.call.call_id.as_str(), &c.call))
        .collect();
    let key_of = |id: &str| {
        let call = calls.get(id)?;
        Some(idempotency_key(&open.session_id, call))
    };
    // A body whose call the journal lacks is I1's to report.
    for b in bodies {
        let Some(key) = key_of(&b.call_id) else {
            continue;
        };
        if b.key != key {
            v.push(format!(
                "§6b one key per call: {during}, the body of {}'s attempt {} was given the key \
                 {}, not the call's key {key}",
                b.call_id, b.attempt, b.key
            ));
        }
    }
    for w in world.log() {
        let (Writer::Call(id), Some(written_with)) = (&w.by, &w.key) else {
            continue;
        };
        if let Some(key) = key_of(id).filter(|key| key != written_with) {
            v.push(format!(
                "§6b one key per call: {during}, {id} wrote {} with the key {written_with}, not \
                 the call's key {key}",
                w.path
            ));
        }
    }
}

/// The runtime's retries in the session of `run` (counted in `coverage`): each call ran once, its attempts numbered
/// from 1, going on after a retryable failure only for a retry-safe tool (`sim_idem`) and to
/// at most [`ATTEMPTS_MAX`] attempts; in a batch that finished unstopped, no call of a
/// retry-safe tool ends on a retryable failure with attempts left.
pub(crate) fn retries(run: &Run, coverage: &mut Coverage, v: &mut Vec<String>) {
    for (id, of_call) in runs(&run.bodies) {
        coverage.retries += of_call.iter().map(|r| r.len() as u64 - 1).sum::<u64>();
        let Some((step, i)) = run.sent(id) else {
            continue;
        };
        let spec = &step.calls[i].2;
        retried_as_its_tool_allows(id, &of_call, spec.idempotent, 1, "in the session", v);
        let [only] = of_call.as_slice() else {
            continue;
        };
        let (Some(last), Some(results)) = (only.last(), &step.results) else {
            continue;
        };
        let unstopped = !run.cancels.contains_key(&(step.turn, step.step));
        let answered = results.iter().any(|r| r.call_id == id);
        if spec.idempotent
            && unstopped
            && answered
            && last.retryable
            && only.len() < ATTEMPTS_MAX as usize
        {
            v.push(format!(
                "§6b retries: {id} of the retry-safe tool ended on a retryable failure of its \
                 attempt {} in a batch that finished unstopped, with {} of {ATTEMPTS_MAX} \
                 attempts made",
                last.attempt,
                only.len()
            ));
        }
    }
}

/// The runs of call `id` in one session (`during`, for the message): one run, its first
/// attempt numbered `first`, going on only if `retry_safe` and to at most [`ATTEMPTS_MAX`]
/// attempts.
pub(crate) fn retried_as_its_tool_allows(
    id: &str,
    of_call: &[Vec<&Body>],
    retry_safe: bool,
    first: u32,
    during: &str,
    v: &mut Vec<String>,
) {
    let attempts = |run: &[&Body]| run.iter().map(|b| b.attempt).collect::<Vec<_>>();
    if of_call.len() > 1 {
        let all: Vec<Vec<u32>> = of_call.iter().map(|r| attempts(r)).collect();
        v.push(format!(
            "§6b retries: {during}, {id} ran {} times (attempts {all:?}), not once",
            of_call.len()
        ));
    }
    let Some(run) = of_call.first() else { return };
    if run.first().map(|b| b.attempt) != Some(first) {
        v.push(format!(
            "§6b retries: {during}, {id}'s attempts were {:?}; the first is numbered {first}",
            attempts(run)
        ));
    }
    if run.len() > 1 && !retry_safe {
        v.push(format!(
            "§6b retries: {during}, {id} ran attempts {:?}, but its tool is not retry-safe",
            attempts(run)
        ));
    }
    if run.len() > ATTEMPTS_MAX as usize {
        v.push(format!(
            "§6b retries: {during}, {id} ran attempts {:?}, more than {ATTEMPTS_MAX}",
            attempts(run)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::BodyEnd;
    use proptest::strategy::ValueTree;
    use runtime::ErrorCode;
    use std::sync::Arc;

    fn body(id: &str, attempt: u32, retryable: bool) -> Body {
        let end = if retryable {
            BodyEnd::Err(ErrorCode::ToolFailed, "transient".into())
        } else {
            BodyEnd::Ok("done".into())
        };
        Body {
            call_id: id.into(),
            started_ms: 0,
            end: Some(end),
            key: "tj1-k".into(),
            attempt,
            retryable,
            order: (0, None),
        }
    }

    fn attempts(runs: &[Vec<&Body>]) -> Vec<Vec<u32>> {
        runs.iter()
            .map(|r| r.iter().map(|b| b.attempt).collect())
            .collect()
    }

    #[test]
    fn a_run_goes_on_only_after_a_retryable_failure_numbered_next() {
        let bodies = [
            body("a", 1, true),
            body("b", 1, false),
            body("a", 2, false),
            body("b", 2, false),
            body("c", 1, true),
            body("c", 3, false),
        ];
        let runs = runs(&bodies);
        assert_eq!(attempts(&runs["a"]), [vec![1, 2]]);
        assert_eq!(attempts(&runs["b"]), [vec![1], vec![2]]);
        assert_eq!(attempts(&runs["c"]), [vec![1], vec![3]]);
    }

    #[test]
    fn a_second_run_a_retry_of_a_tool_not_retry_safe_and_a_fourth_attempt_are_named() {
        let named = |bodies: &[Body], retry_safe: bool, first: u32| {
            let runs = runs(bodies);
            let mut v = Vec::new();
            retried_as_its_tool_allows("c", &runs["c"], retry_safe, first, "here", &mut v);
            v
        };
        let retried = [body("c", 1, true), body("c", 2, true), body("c", 3, false)];
        assert_eq!(named(&retried, true, 1), Vec::<String>::new());
        let v = named(&retried, false, 1);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].ends_with("but its tool is not retry-safe"), "{v:?}");
        let v = named(&retried, true, 2);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("the first is numbered 2"), "{v:?}");
        let four = [
            body("c", 1, true),
            body("c", 2, true),
            body("c", 3, true),
            body("c", 4, false),
        ];
        let v = named(&four, true, 1);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].ends_with("more than 3"), "{v:?}");
        let twice = [body("c", 1, false), body("c", 1, false)];
        let v = named(&twice, true, 1);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("ran 2 times"), "{v:?}");
    }

    /// The first run from seed 0 on with a call whose first attempt failed retryably and whose
    /// second went through, in a batch that finished unstopped; and that call's id.
    fn a_run_with_a_retry() -> (Run, String) {
        (0u64..500)
            .find_map(|seed| {
                let case = crate::tree_for_seed(seed).current();
                let run = crate::sim::run(&case, None);
                let id = runs(&run.bodies).into_iter().find_map(|(id, of_call)| {
                    let (step, _) = run.sent(id)?;
                    let retried = matches!(of_call.as_slice(), [only] if only.len() == 2
                        && !only[1].retryable && only[1].end.is_some());
                    let unstopped = !run.cancels.contains_key(&(step.turn, step.step));
                    (retried && unstopped && step.results.is_some()).then(|| id.to_owned())
                })?;
                Some((run, id))
            })
            .unwrap()
    }

    #[test]
    fn a_body_or_a_write_given_another_key_than_its_calls_is_named() {
        let (mut run, id) = a_run_with_a_retry();
        let image = journal::Backend::Files(Arc::new(crate::read::copy_of(&run.image)));
        let a = recover::Recovery::of(image).run().unwrap().analysis;
        let mut v = Vec::new();
        one_key_per_call(&run.bodies, &run.world, &a, "here", &mut v);
        assert_eq!(v, Vec::<String>::new());

        let second = run.bodies.iter().rposition(|b| b.call_id == id).unwrap();
        run.bodies[second].key = "tj1-another".into();
        run.world
            .write_keyed("a", Writer::Call(id.clone()), Some("tj1-other"), None);
        one_key_per_call(&run.bodies, &run.world, &a, "here", &mut v);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].starts_with(&format!(
                "§6b one key per call: here, the body of {id}'s attempt 2 was given the key \
                 tj1-another, not the call's key tj1-"
            )),
            "{v:?}"
        );
        assert!(
            v[1].starts_with(&format!(
                "§6b one key per call: here, {id} wrote a with the key tj1-other"
            )),
            "{v:?}"
        );
    }

    #[test]
    fn a_retry_of_a_tool_not_retry_safe_or_a_retry_given_up_with_attempts_left_is_named() {
        let (mut run, id) = a_run_with_a_retry();
        let (mut coverage, mut v) = (Coverage::default(), Vec::new());
        retries(&run, &mut coverage, &mut v);
        assert_eq!(v, Vec::<String>::new());
        assert!(coverage.retries >= 1);

        // The second attempt never made: the first one's failure was where the runtime stopped.
        let second = run.bodies.iter().rposition(|b| b.call_id == id).unwrap();
        let retried = run.bodies.remove(second);
        retries(&run, &mut coverage, &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].starts_with(&format!(
                "§6b retries: {id} of the retry-safe tool ended on a retryable failure of its \
                 attempt 1"
            )),
            "{v:?}"
        );

        // Both attempts, but the call's tool is the one that is not retry-safe.
        run.bodies.insert(second, retried);
        let sent = run.steps.iter_mut().flat_map(|s| s.calls.iter_mut());
        let spec = sent.filter(|(c, _, _)| c == &id).map(|c| &mut c.2).next();
        spec.unwrap().idempotent = false;
        v.clear();
        retries(&run, &mut coverage, &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].ends_with("but its tool is not retry-safe"), "{v:?}");
    }
}
