//! The invariants of DESIGN.md §7, checked on what a simulated run left behind. Each violation
//! is a message that starts with the invariant's name and names the call.
//!
//! Every check walks the ground truth (the calls the model sent, step by step in model order,
//! and the bodies the simulated tool recorded as run, with what each returned), and looks each
//! one up in the recovered journal: a call the journal should hold and does not is a violation,
//! not a call the check never sees.

use crate::bounds::Journaled;
use crate::case::{CallSpec, Case, Kind};
use crate::read::{code_of, events, provider_rejections};
use crate::sim::{Body, BodyEnd, Run, SentStep};
use crate::streaming::{disagreement, streaming, streaming_read_only};
use crate::{Coverage, Mutant};
use journal::SimStorage;
use recover::conversation::Message;
use recover::Recovery;
use recover::{not_started_text, outcome_unknown_text_bounded, Analysis, CallReport};
use runtime::event::{Classification, Event, OutcomeStatus};
use runtime::state::CallState;
use runtime::ErrorCode;
use std::collections::HashMap;
use std::sync::Arc;

/// Every violation found in `run` (made with `mutant`, if any: the simulation's own act on
/// the resume too).
pub fn check(case: &Case, run: &Run, mutant: Option<Mutant>) -> Vec<String> {
    check_covering(case, run, mutant, &mut Coverage::default())
}

/// [`check`], adding to `coverage` what the probe and re-run checks met.
pub(crate) fn check_covering(
    case: &Case,
    run: &Run,
    mutant: Option<Mutant>,
    coverage: &mut Coverage,
) -> Vec<String> {
    let mut v = Vec::new();
    let Some((a, pristine)) = invariants(run, &mut v) else {
        return v;
    };
    let a = &a;
    // Not among the invariants the user harness shares: there a key handed wrong is caught by
    // what the user's tool does with it (fuzz/tests/fuzz/harness.rs holds it to that).
    crate::attempts::one_key_per_call(&run.bodies, &run.world, a, "in the session", &mut v);
    crate::attempts::retries(run, coverage, &mut v);
    let laid_out = crate::evidence::check(run, a, coverage, &mut v);
    crate::bounds::writes_within(&run.world, a, "in the session", coverage, &mut v);
    if case.resume {
        match case.rerun {
            Some(policy) => {
                let resumed = crate::rerun::Resuming {
                    case,
                    run,
                    a,
                    policy,
                    mutant,
                    prober: laid_out.as_ref().map(|l| &l.prober),
                };
                resumed.check(&pristine, coverage, &mut v);
            }
            None => resume(case, run, &mut v),
        }
    }
    v
}

/// The invariants every run is held to, whoever's tools ran (the simulation's or a user's,
/// [`crate::harness`]): the results the model got, recovery (streaming and not, twice) and the
/// history it rebuilds, each call the model sent against what its body did. Adds violations to
/// `v`; returns the first recovery's analysis and a copy of the journal as the run left it
/// (recovery appends to `run.image`), or `None` when the journal does not recover.
pub(crate) fn invariants(run: &Run, v: &mut Vec<String>) -> Option<(Analysis, SimStorage)> {
    v.extend(run.live_violations.iter().cloned());
    let journaled = Journaled::new(&run.image);
    live(run, &journaled, v);

    // `recover classify` streams: it must say what the full analysis says, and append the same.
    // The journal as the crash left it (recovery appends to `run.image`: clones share bytes)
    // is the copy the read-only comparison leaves untouched. The writing stream is compared
    // with the first recovery below, which is the full analysis writing on the same bytes.
    let (disagreements, pristine) = streaming_read_only(&run.image);
    v.extend(disagreements);
    let streamed = streaming(&run.image, true);

    // Recovery on the surviving bytes.
    let first = Recovery::of(journal::Backend::Files(Arc::new(run.image.clone())))
        .write(true)
        .run();
    let events = events(&run.image);
    // The bounds are read from these (recovery appends no `started`).
    journaled.seed(events.as_deref());
    let (streamed_disk, streamed) = streamed;
    v.extend(disagreement(
        true,
        (first.as_ref(), &run.image, Some(&events)),
        (streamed.as_ref(), &streamed_disk),
    ));
    let first = match first {
        Ok(r) => r,
        Err(e) => {
            v.push(format!(
                "I6/I7 recovery: the surviving journal does not recover: {e}"
            ));
            return None;
        }
    };
    let a = first.analysis;
    let conv = a.conversation();
    for (format, e) in provider_rejections(&conv) {
        v.push(format!(
            "I6 provider validity: {format} rejects the rebuilt history: {e}"
        ));
    }
    let reports: HashMap<&str, &CallReport> = a
        .calls
        .iter()
        .map(|c| (c.call.call_id.as_str(), c))
        .collect();
    presence(run, &reports, v);
    write_ahead(run, &reports, v);
    for step in &run.steps {
        for call in &step.calls {
            let Some(c) = reports.get(call.0.as_str()) else {
                continue;
            };
            recovered_call(run, &journaled, &a, step, call, c, v);
        }
    }
    conversation(run, &journaled, &reports, &conv.messages, v);
    crate::questions::questions(run, &a, &reports, v);
    commit_order(run, events.as_deref(), v);
    idempotence(run, &a, v);
    cancelled_before_start(&a, &reports, v);
    drop(reports);
    Some((a, pristine))
}

/// I9 on the journal itself: a call cancelled before it started ends `ABORTED_BEFORE_DISPATCH`
/// (or, committed by recovery, `TOOL_NOT_STARTED`), never `ABORTED`, whose words are for a body
/// that was stopped. The runtime asserts this where it commits; checked here too, so that a
/// build that also loses the assertion is still caught.
fn cancelled_before_start(a: &Analysis, reports: &HashMap<&str, &CallReport>, v: &mut Vec<String>) {
    let allowed = [ErrorCode::AbortedBeforeDispatch, ErrorCode::ToolNotStarted];
    for c in a.replay.calls() {
        if c.cancel_reason.is_none() {
            continue;
        }
        // Committed before the crash: the runtime's code. Not yet: what recovery gives it.
        let code = match &c.committed {
            Some(result) => result.code,
            None => reports
                .get(c.call.call_id.as_str())
                .and_then(|r| code_of(&r.result.content)),
        };
        if !code.is_some_and(|code| allowed.contains(&code)) {
            v.push(format!(
                "I9 cancellation: {} was journaled cancelled-before-start but ends with {code:?}",
                c.call.call_id
            ));
        }
    }
}

/// I1: a body that ran had a durable `started` first, so its call is in the journal, started.
fn write_ahead(run: &Run, reports: &HashMap<&str, &CallReport>, v: &mut Vec<String>) {
    for b in &run.bodies {
        let id = &b.call_id;
        match reports.get(id.as_str()) {
            None => v.push(format!(
                "I1 write-ahead: the body of {id} ran, but the journal has no record of the call"
            )),
            Some(c) => {
                if c.classification == Some(Classification::ToolNotStarted)
                    || !reached_start(c.state)
                {
                    v.push(format!(
                        "I1 write-ahead: the body of {id} ran, but the journal says {} ({:?})",
                        c.state, c.classification
                    ));
                }
            }
        }
    }
}

/// I4, I8 and I2 on one call the model sent in `step` (id, raw arguments, spec) that the
/// recovered journal holds as `c`.
fn recovered_call(
    run: &Run,
    journaled: &Journaled<'_>,
    a: &Analysis,
    step: &SentStep,
    (id, raw, spec): &(String, String, CallSpec),
    c: &CallReport,
    v: &mut Vec<String>,
) {
    no_fabrication(run, journaled, a, step, (id, spec), c, v);
    // I8: what was journaled as received is what the model sent, byte for byte.
    if &c.raw_arguments != raw {
        v.push(format!(
            "I8 frozen arguments: {id} was received as {:?}, sent as {raw:?}",
            c.raw_arguments
        ));
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

/// I4 on one recovered call: a settled result is what recovery gives back, a committed one is
/// what the model was given, and no success is made up.
fn no_fabrication(
    run: &Run,
    journaled: &Journaled<'_>,
    a: &Analysis,
    step: &SentStep,
    (id, spec): (&str, &CallSpec),
    c: &CallReport,
    v: &mut Vec<String>,
) {
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
    // What the model was given is what recovery gives back.
    let live = step.results.iter().flatten().find(|r| r.call_id == id);
    if let Some(live) = live.filter(|_| c.state == CallState::Committed) {
        if (live.content.as_str(), live.is_error) != (c.result.content.as_str(), c.result.is_error)
        {
            v.push(format!(
                "I4 no fabrication: {id} was committed as {:?} but recovery says {:?}",
                live.content, c.result.content
            ));
        }
    }
    if let Err(e) = truthful(
        run,
        journaled,
        id,
        spec,
        step.truncated,
        &c.result.content,
        c.result.is_error,
    ) {
        v.push(format!("I4 no fabrication: recovery's result for {e}"));
    }
}

/// I5: a second recovery appends nothing and says the same as the first (`a`).
fn idempotence(run: &Run, a: &Analysis, v: &mut Vec<String>) {
    match Recovery::of(journal::Backend::Files(Arc::new(run.image.clone())))
        .write(true)
        .run()
    {
        Ok(second) => {
            if second.appended {
                v.push("I5 idempotence: a second recovery appended again".into());
            }
            if recover::classify_json("j", &second.analysis) != recover::classify_json("j", a) {
                v.push("I5 idempotence: a second recovery reports differently".into());
            }
        }
        Err(e) => v.push(format!("I5 idempotence: the second recovery failed: {e}")),
    }
}

/// Resume after recovery: the session goes on, runs only the new call, and ends balanced,
/// with a history every provider accepts.
fn resume(case: &Case, run: &Run, v: &mut Vec<String>) {
    let ran = match crate::resume::resume_one_turn(&run.image, &run.world, case) {
        Ok(ran) => ran,
        Err(e) => return v.push(format!("I5 resume: {e}")),
    };
    if ran.iter().any(|id| id != crate::resume::RESUMED_CALL) {
        v.push(format!(
            "I5 resume: calls ran again after recovery: {ran:?}"
        ));
    }
    ended_balanced(&run.image, v);
}

/// After a resume: recovering `journal` appends nothing (the session ended balanced), and the
/// history it rebuilds is accepted by every provider.
pub(crate) fn ended_balanced(journal: &SimStorage, v: &mut Vec<String>) {
    match Recovery::of(journal::Backend::Files(Arc::new(journal.clone())))
        .write(true)
        .run()
    {
        Ok(after) => {
            if after.appended {
                v.push("I5 resume: the resumed session ended unbalanced".into());
            }
            for (format, e) in provider_rejections(&after.analysis.conversation()) {
                v.push(format!(
                    "I6 after resume: {format} rejects the history: {e}"
                ));
            }
        }
        Err(e) => v.push(format!(
            "I5 resume: the resumed journal does not recover: {e}"
        )),
    }
}

/// I3 and I9 on the results the model got from batches that finished: one per call it sent, in
/// the order it sent them, each telling what the body did; nothing started after the cancel.
fn live(run: &Run, journaled: &Journaled<'_>, v: &mut Vec<String>) {
    for step in &run.steps {
        let Some(results) = &step.results else {
            continue;
        };
        let want: Vec<&str> = step.calls.iter().map(|(id, _, _)| id.as_str()).collect();
        let got: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
        if want != got {
            v.push(format!(
                "I3 one result per call: the model sent {want:?} and got results for {got:?}"
            ));
        }
        for r in results {
            let id = &r.call_id;
            if r.code == Some(ErrorCode::AbortedBeforeDispatch) && run.body(id).is_some() {
                v.push(format!(
                    "I9 cancellation: {id} was reported ABORTED_BEFORE_DISPATCH but its body ran"
                ));
            }
            let Some((_, i)) = run.sent(id) else { continue };
            if let Err(e) = truthful(
                run,
                journaled,
                id,
                &step.calls[i].2,
                step.truncated,
                &r.content,
                r.is_error,
            ) {
                v.push(format!("I3 true results: the model's result for {e}"));
            }
        }
    }
    for b in &run.bodies {
        let Some((step, _)) = run.sent(&b.call_id) else {
            continue;
        };
        if let Some(&at) = run.cancels.get(&(step.turn, step.step)) {
            if b.started_ms > at {
                v.push(format!(
                    "I9 cancellation: the body of {} started at {} ms, after the cancel at {at} ms",
                    b.call_id, b.started_ms
                ));
            }
        }
    }
}

/// I3: the journal holds a prefix of what the model sent, call by call: a step is there with
/// every one of its calls or not at all, and no step is missing before one that is there.
fn presence(run: &Run, reports: &HashMap<&str, &CallReport>, v: &mut Vec<String>) {
    let mut missing_before: Option<&str> = None;
    for step in &run.steps {
        let there: Vec<bool> = step
            .calls
            .iter()
            .map(|(id, _, _)| reports.contains_key(id.as_str()))
            .collect();
        if there.iter().any(|&t| t) {
            for ((id, _, _), t) in step.calls.iter().zip(&there) {
                if !t {
                    v.push(format!(
                        "I3 one result per call: {id} is missing from the journal, though other calls of turn {} step {} are there",
                        step.turn, step.step
                    ));
                }
            }
            if let Some(gone) = missing_before {
                v.push(format!(
                    "I3 one result per call: {gone} is missing from the journal, though calls the model sent after it are there"
                ));
            }
        } else if let Some((id, _, _)) = step.calls.first() {
            missing_before.get_or_insert(id);
        }
    }
}

/// Whether `content` is what the model may truthfully be told about call `id`, given what its
/// body did (the tool's own record) or, when it did not run or its outcome was lost, the
/// synthetic text the classification implies (with the bound `journaled` says the call ran
/// under). `Err` says why not.
fn truthful(
    run: &Run,
    journaled: &Journaled<'_>,
    id: &str,
    spec: &CallSpec,
    truncated: bool,
    content: &str,
    is_error: bool,
) -> Result<(), String> {
    let code = if is_error { code_of(content) } else { None };
    let fail = |why: &str| Err(format!("{id} is {content:?}: {why}"));
    if let Kind::Ask(ask) = &spec.kind {
        // The ask tool's body is the runtime's own: its truth is what the person said.
        return crate::questions::truthful_ask(run, id, ask, truncated, content, is_error);
    }
    let asked = matches!(
        spec.kind,
        Kind::Approval(_) | Kind::User { asked: true, .. }
    );
    if let (true, Some(_)) = (asked, run.body(id)) {
        crate::questions::ran_on_a_yes(run, id).or_else(|why| fail(&why))?;
    }
    // Texts only recovery writes, exactly as its classification says.
    match code {
        Some(ErrorCode::ToolNotStarted)
            if content != not_started_text()
                && !crate::questions::withdrawn_by_recovery(run, id, spec, content) =>
        {
            return fail("not the TOOL_NOT_STARTED text");
        }
        // A tool may say so itself (an MCP call it lost track of): its own words, then.
        Some(ErrorCode::ToolOutcomeUnknown)
            if matches!(run.body(id).and_then(|b| b.end.as_ref()),
                Some(BodyEnd::Err(ErrorCode::ToolOutcomeUnknown, message)) if content.contains(message.as_str())) =>
        {
            return Ok(());
        }
        Some(ErrorCode::ToolOutcomeUnknown) => {
            let declared = run
                .declared
                .get(id)
                .cloned()
                .unwrap_or_else(|| crate::sim::declared(spec));
            // With the bound the call's last `started` journaled, if it journaled one.
            if content != outcome_unknown_text_bounded(&declared, journaled.bound(id)) {
                return fail(
                    "not the TOOL_OUTCOME_UNKNOWN text for what the call declared and its bound",
                );
            }
            return Ok(());
        }
        _ => {}
    }
    if is_error && code.is_none() {
        return fail("an error that does not begin with its code");
    }
    let body = run.body(id);
    match body.map(|b| &b.end) {
        Some(Some(BodyEnd::Ok(text))) => {
            // A spilled result names its text by hash: hashed only when it is not the text.
            let spilled = || content.contains(&runtime::sha256_hex(text.as_bytes()));
            if is_error || (content != text && !spilled()) {
                return fail(&format!("its body returned {text:?}"));
            }
        }
        Some(Some(BodyEnd::Err(body_code, message))) => {
            let code_ok = code == Some(*body_code) || code == Some(ErrorCode::ToolFailed);
            let stopped_before_retry = body.is_some_and(|b| retried(spec, b))
                && code == Some(ErrorCode::Aborted)
                && content.contains("it did not run");
            if !stopped_before_retry
                && (!is_error || !code_ok || !content.contains(message.as_str()))
            {
                return fail(&format!("its body failed {body_code}: {message:?}"));
            }
        }
        Some(Some(BodyEnd::Panicked)) => {
            if code != Some(ErrorCode::ToolPanicked) {
                return fail("its body panicked");
            }
        }
        Some(None) => {
            return fail("its body never finished, so its outcome cannot be known (settled before the tool stopped?)");
        }
        None => {
            // Did not run: an error saying so, and which one depends on the call.
            let allowed: &[ErrorCode] = if truncated {
                &[
                    ErrorCode::TruncatedCall,
                    ErrorCode::ToolNotStarted,
                    ErrorCode::AbortedBeforeDispatch,
                ]
            } else {
                match spec.kind {
                    Kind::Unknown => &[
                        ErrorCode::UnknownTool,
                        ErrorCode::ToolNotStarted,
                        ErrorCode::AbortedBeforeDispatch,
                    ],
                    Kind::BadJson => &[
                        ErrorCode::SyntaxError,
                        ErrorCode::ToolNotStarted,
                        ErrorCode::AbortedBeforeDispatch,
                    ],
                    Kind::User { asked, question } => user_not_run(
                        asked && crate::questions::ran_on_a_yes(run, id).is_err(),
                        question,
                    ),
                    // Refused unless the person said yes (I16: silence is no consent).
                    Kind::Approval(_) if crate::questions::ran_on_a_yes(run, id).is_err() => &[
                        ErrorCode::PolicyDenied,
                        ErrorCode::ToolNotStarted,
                        ErrorCode::AbortedBeforeDispatch,
                        ErrorCode::Aborted,
                    ],
                    _ => &[
                        ErrorCode::ToolNotStarted,
                        ErrorCode::AbortedBeforeDispatch,
                        ErrorCode::Aborted,
                    ],
                }
            };
            if !code.is_some_and(|c| allowed.contains(&c)) {
                return fail("its body never ran");
            }
            if code == Some(ErrorCode::Aborted) && !content.contains("it did not run") {
                return fail("ABORTED for a body that never ran must say it did not run");
            }
        }
    }
    Ok(())
}

/// Whether the runtime runs `spec`'s call again after its body `b` (the last that began):
/// it failed retryably, and the call's tool is retry-safe with attempts left (a user's tool,
/// whose nature the case does not hold, is taken to be). A batch stopped before the next
/// attempt's body then ends the call `ABORTED`, saying it did not run.
fn retried(spec: &CallSpec, b: &Body) -> bool {
    let retry_safe = match spec.kind {
        Kind::User { .. } => true,
        _ => spec.idempotent && b.attempt < crate::parts::ATTEMPTS_MAX,
    };
    b.retryable && retry_safe
}

/// The codes a call to a user's tool whose body never ran may end with: refused before
/// dispatch (no such tool, arguments that are not JSON or not of its schema), never started,
/// stopped first; `refused`: the person did not say yes to its approval; `question`: a call of
/// the built-in `ask`, which ends unanswered or declined without its body.
fn user_not_run(refused: bool, question: bool) -> &'static [ErrorCode] {
    // Ordered so that each case is one run of it: the question's codes, those of every call,
    // then a refusal's.
    const CODES: [ErrorCode; 9] = [
        ErrorCode::QuestionUnanswered,
        ErrorCode::QuestionDeclined,
        ErrorCode::UnknownTool,
        ErrorCode::SchemaError,
        ErrorCode::SyntaxError,
        ErrorCode::ToolNotStarted,
        ErrorCode::AbortedBeforeDispatch,
        ErrorCode::Aborted,
        ErrorCode::PolicyDenied,
    ];
    let from = if question { 0 } else { 2 };
    let to = if refused {
        CODES.len()
    } else {
        CODES.len() - 1
    };
    &CODES[from..to]
}

/// I3 in the rebuilt history: every step of the journal is the model's message with its calls
/// in the order it sent them, followed by exactly one result for each, in that order, each one
/// true to what its body did.
fn conversation(
    run: &Run,
    journaled: &Journaled<'_>,
    reports: &HashMap<&str, &CallReport>,
    messages: &[Message],
    v: &mut Vec<String>,
) {
    for step in &run.steps {
        let Some((first, _, _)) = step.calls.first() else {
            continue;
        };
        if !reports.contains_key(first.as_str()) {
            continue;
        }
        let want: Vec<&str> = step.calls.iter().map(|(id, _, _)| id.as_str()).collect();
        let at = messages.iter().position(|m| {
            matches!(m, Message::Assistant { calls, .. } if calls.iter().any(|c| &c.id == first))
        });
        let Some(at) = at else {
            v.push(format!(
                "I3 one result per call: {first} is in the journal but in no assistant message of the rebuilt history"
            ));
            continue;
        };
        if let Message::Assistant { calls, .. } = &messages[at] {
            let got: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
            if got != want {
                v.push(format!(
                    "I3 one result per call: the model sent {want:?}, the history says it sent {got:?}"
                ));
            }
        }
        match messages.get(at + 1) {
            Some(Message::Results { results }) => {
                let got: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
                if got != want {
                    v.push(format!(
                        "I3 one result per call: calls {want:?} answered by {got:?}"
                    ));
                }
                for (r, (id, _, spec)) in results.iter().zip(&step.calls) {
                    if &r.id != id {
                        continue;
                    }
                    if let Err(e) = truthful(
                        run,
                        journaled,
                        id,
                        spec,
                        step.truncated,
                        &r.content,
                        r.is_error,
                    ) {
                        v.push(format!(
                            "I3 true results: the rebuilt history's result for {e}"
                        ));
                    }
                }
            }
            _ => v.push(format!(
                "I3 one result per call: the calls {want:?} have no results after them"
            )),
        }
    }
}

/// I3: each step's `committed` records are in the journal in model order, with no gap (a call
/// is committed only after every call before it).
fn commit_order(run: &Run, events: Option<&[Event]>, v: &mut Vec<String>) {
    let Some(events) = events else { return };
    let committed: HashMap<&str, usize> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Event::Committed { call, .. } => Some((call.call_id.as_str(), i)),
            _ => None,
        })
        .collect();
    for step in &run.steps {
        let mut last: Option<(&str, usize)> = None;
        let mut gap: Option<&str> = None;
        for (id, _, _) in &step.calls {
            match committed.get(id.as_str()) {
                None => {
                    gap.get_or_insert(id);
                }
                Some(&at) => {
                    if let Some(before) = gap {
                        v.push(format!(
                            "I3 committed in model order: {id} is committed, {before} before it is not"
                        ));
                    }
                    if let Some((prev, prev_at)) = last {
                        if prev_at > at {
                            v.push(format!(
                                "I3 committed in model order: {id} was committed before {prev}, which the model sent first"
                            ));
                        }
                    }
                    last = Some((id, at));
                }
            }
        }
    }
}

fn reached_start(state: CallState) -> bool {
    matches!(
        state,
        CallState::Started | CallState::Settled | CallState::Committed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_before_the_next_attempt_is_true_only_after_a_retryable_failure_with_attempts_left() {
        let spec = |idempotent| CallSpec {
            kind: Kind::Ok,
            parallel: false,
            duration_ms: 0,
            reads: vec![],
            writes: vec![],
            idempotent,
            flaky: None,
        };
        let body = |attempt, retryable| Body {
            call_id: "c".into(),
            started_ms: 0,
            end: Some(BodyEnd::Err(ErrorCode::ToolFailed, "transient".into())),
            key: "tj1-k".into(),
            attempt,
            retryable,
            order: (0, None),
        };
        assert!(retried(&spec(true), &body(1, true)));
        assert!(retried(&spec(true), &body(2, true)));
        // The last attempt, a tool that is not retry-safe, a failure that is not retryable.
        assert!(!retried(
            &spec(true),
            &body(crate::parts::ATTEMPTS_MAX, true)
        ));
        assert!(!retried(&spec(false), &body(1, true)));
        assert!(!retried(&spec(true), &body(1, false)));
    }
}
