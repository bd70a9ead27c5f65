//! The reports made at the end of the journal, and of calls whose result is final.

use super::{model_index, Call, Notice, OpenCalls};
use crate::bound::Peers;
use crate::classify::{
    answered, classify_unfinished, imported_classification, kept_probe, kept_sandbox, left_unknown,
    never_received, probe_started, question_pending, CallReport, Unfinished,
};
use crate::probe::Prober;
use events::event::{CallRef, RecoveredCall};
use events::replay::CallReplay;
use events::state::CallState;

/// Every call not handed out yet, in report order: the queue's, then the open step's with the
/// calls its `llm/response` names that were never received (they did not start either),
/// listed after the step's other calls, then all in model order.
pub(super) fn remaining_calls(kept: &mut OpenCalls) -> Vec<Call> {
    let live = kept.live;
    let mut rest: Vec<Call> = kept.queue.drain(..).collect();
    let queued = rest.len();
    let Some((mut calls, closed)) = kept.take_open_step(true) else {
        return rest;
    };
    let (turn, step) = (closed.turn, closed.step);
    if let (Some(response), false) = (&closed.response, live) {
        for (i, m) in response.tool_calls.iter().enumerate() {
            if calls.iter().any(|c| c.replay.call.call_id == m.call_id) {
                continue;
            }
            let call = CallRef {
                turn,
                step,
                call_id: m.call_id.clone(),
            };
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let replay = CallReplay::received(call, index, m.name.clone(), m.arguments.clone(), 0);
            calls.push(Call {
                model_index: model_index(Some(response), &replay.call.call_id),
                replay,
                recovered_by: None,
                recovered_in: 0,
                step_position: 0,
                never_received: true,
            });
        }
    }
    kept.notice(Notice::Step(closed));
    rest.extend(calls);
    if !live {
        rest[queued..].sort_by_key(|c| c.model_index);
    }
    rest
}

/// The report of a call left unfinished (or final but not handed out) at the end of the
/// journal; an orphan's recovery goes to `recovered_calls`, keyed by its journal order.
pub(super) fn report_at_end(
    mut c: Call,
    live: bool,
    imported: bool,
    recovered_calls: &mut Vec<((u32, u32, usize), RecoveredCall)>,
    pending_asks: &mut Vec<CallRef>,
    prober: Option<&Prober>,
    peers: &Peers,
) -> CallReport {
    if c.recovered_by.is_some() || c.replay.state == CallState::Committed {
        return committed_report(&mut c, prober, peers);
    }
    let r = c.replay;
    if live {
        // A running session's unfinished call is running, not orphaned.
        return CallReport::in_flight(
            r.call,
            r.tool,
            r.raw_arguments,
            r.state,
            r.resources.unwrap_or_default(),
        );
    }
    let probe = if c.never_received {
        None
    } else {
        probe_started(&r, prober, peers.all())
    };
    let (classification, result, key) = if c.never_received {
        let (classification, result) = never_received(imported);
        (classification, result, (u32::MAX, u32::MAX, usize::MAX))
    } else {
        if r.ask_pending() {
            pending_asks.push(r.call.clone());
        }
        let (classification, result) = classify_unfinished(Unfinished {
            state: r.state,
            outcome: r.outcome.as_ref(),
            resources: r.resources.as_ref(),
            rejection: r.rejection.as_ref(),
            cancel_reason: r.cancel_reason.as_deref(),
            question_pending: question_pending(&r),
            answered: answered(&r),
            probe: probe.as_ref(),
            sandbox: crate::bound::of_call(&r),
            imported: r.imported.is_some(),
        });
        (
            classification,
            result,
            (r.call.turn, r.call.step, c.step_position),
        )
    };
    recovered_calls.push((
        key,
        RecoveredCall {
            call: r.call.clone(),
            state: r.state,
            classification,
            result: result.clone(),
        },
    ));
    let sandbox = kept_sandbox(classification, &r);
    CallReport {
        call: r.call,
        tool: r.tool,
        raw_arguments: r.raw_arguments,
        state: r.state,
        classification,
        resources: r.resources.unwrap_or_default(),
        result,
        recovered: true,
        in_flight: false,
        probe: kept_probe(classification, probe),
        sandbox,
    }
}

/// With a probe (`probing`), the calls of unknown outcome that ran a process as the whole
/// analysis finds them: the recoveries', then this run's orphans that may have run (`rest`).
pub(super) fn end_peers(kept: &OpenCalls, rest: &[Call], probing: bool) -> Peers {
    let mut peers = Peers::default();
    if !probing {
        return peers;
    }
    peers.clone_from(&kept.peers);
    if !kept.live {
        let orphans = rest.iter().filter(|c| {
            !c.never_received && c.recovered_by.is_none() && c.replay.state == CallState::Started
        });
        for c in orphans {
            peers.unknown(&c.replay.call, crate::bound::of_call(&c.replay));
        }
    }
    peers
}

/// The report of a call whose result is final: from the recovery that committed it, or from
/// its `committed` event.
pub(super) fn committed_report(c: &mut Call, prober: Option<&Prober>, peers: &Peers) -> CallReport {
    // A call an earlier recovery left `TOOL_OUTCOME_UNKNOWN` is probed too (its journaled
    // result stays as it is), among the calls known of unknown outcome as of that recovery.
    let probe = match (&c.recovered_by, prober) {
        (Some(rc), Some(prober)) if left_unknown(rc) => {
            Some(prober.probe_among(&c.replay, peers.as_of(c.recovered_in)))
        }
        _ => None,
    };
    let sandbox = c
        .recovered_by
        .as_ref()
        .and_then(|rc| kept_sandbox(rc.classification, &c.replay));
    let r = &mut c.replay;
    let resources = r.resources.take().unwrap_or_default();
    let call = r.call.clone();
    let tool = std::mem::take(&mut r.tool);
    let raw_arguments = std::mem::take(&mut r.raw_arguments);
    match &c.recovered_by {
        Some(rc) => CallReport {
            call,
            tool,
            raw_arguments,
            state: rc.state,
            classification: rc.classification,
            resources,
            result: rc.result.clone(),
            recovered: true,
            in_flight: false,
            probe,
            sandbox,
        },
        None => {
            // Cannot fail: a call is committed only by `committed` or a `recovery`, and both
            // set its result (a recovered call is the arm above).
            #[allow(clippy::expect_used)]
            let result = r.committed.take().expect("a committed call has its result");
            CallReport {
                call,
                tool,
                raw_arguments,
                state: r.state,
                classification: imported_classification(r),
                resources,
                result,
                recovered: false,
                in_flight: false,
                probe: None,
                sandbox: None,
            }
        }
    }
}
