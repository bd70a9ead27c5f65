//! Context overflow end to end, through the `tooljournal` binary against the loopback mock of
//! every provider (real HTTP, real SSE): the provider's overflow error, the journaled summary
//! request, the reduction, and one retry; a second overflow ending the turn; a SIGKILL during
//! the summary request, then a resume; and the proactive threshold of a configured window.
//!
//! Every session has two turns: turn 1's answer is long (so that replacing turn 1 by a short
//! summary at least halves the request, as a reduction aims for when the window is unknown),
//! and the overflow is scripted on turn 2's first request.

use crate::common;

use common::models::*;
use history::reduce::SUMMARY_INSTRUCTION;
use mockllm::{Answer, Format, Recorded, Reply};
use runtime::event::{CompactTrigger, ContextCompacted, Event, Record, TurnOutcome};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The events' trail of two turns whose second request is refused once and reduced by a
/// summary of the first: sent again reduced, and answered.
const REDUCED_AFTER_ONE_OVERFLOW: [&str; 8] = [
    "request t1 a1",
    "response t1",
    "request t2 a1",
    "failed t2 a1 ContextOverflow retry=false",
    "summary-requested t2 through 1",
    "compacted t2 Overflow through 1",
    "request t2 a2",
    "response t2",
];

const PROMPT_ONE: &str = "TURN-ONE-PROMPT: plan the garden beds";
const PROMPT_TWO: &str = "TURN-TWO-PROMPT: now water them";
const SUMMARY: &str = "SUMMARY-MARK: the user planned garden beds; watering is next.";
const ANSWER_TWO: &str = "TURN-TWO-ANSWER: watered.";
/// What opens turn 1's long answer.
const ANSWER_ONE_MARK: &str = "TURN-ONE-ANSWER";
/// The filler's repetitions: about 30 000 tokens by the runtime's estimate (bytes / 4), many
/// times the system prompt and tools.
const FILLER_TIMES: usize = 8_000;
const WAIT: Duration = Duration::from_secs(30);

/// Turn 1's answer: long, plain words (no JSON escaping changes its size).
fn answer_one() -> String {
    format!(
        "{ANSWER_ONE_MARK} {}",
        "garden bed row ".repeat(FILLER_TIMES)
    )
}

/// The history a request carried, as JSON text (user and assistant text included).
fn history_text(format: Format, r: &Recorded) -> String {
    history_of(format, &r.body).to_string()
}

/// Each model exchange of the journal, in order, as `kind t{turn} ...`: requests with their
/// attempt, failures with their kind, the summary request, the reduction, the responses.
fn trail(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::LlmRequest(r) => Some(format!("request t{} a{}", r.turn, r.attempt)),
            Event::LlmAttemptFailed(f) => Some(format!(
                "failed t{} a{} {:?} retry={}",
                f.turn, f.attempt, f.kind, f.retry
            )),
            Event::ContextSummaryRequested(s) => Some(format!(
                "summary-requested t{} through {}",
                s.turn, s.through_turn
            )),
            Event::ContextCompacted(c) => Some(format!(
                "compacted t{} {:?} through {}",
                c.turn, c.trigger, c.through_turn
            )),
            Event::LlmResponse { turn, .. } => Some(format!("response t{turn}")),
            _ => None,
        })
        .collect()
}

fn compactions(events: &[Event]) -> Vec<&ContextCompacted> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ContextCompacted(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn overflow(format: Format, in_stream: bool) -> Reply {
    if in_stream {
        assert_eq!(
            format,
            Format::OpenAiResponses,
            "only Responses fails in-stream"
        );
        Reply::context_overflow_in_stream()
    } else {
        Reply::context_overflow()
    }
}

/// Every request was one the provider would take (the mock checks each as the provider does).
fn assert_all_valid(format: Format, requests: &[Recorded]) {
    for (i, r) in requests.iter().enumerate() {
        assert_eq!(r.violation, None, "{format}: request {i}: {:#}", r.body);
    }
}

/// The summary request: turn 1 as the model saw it, then the instruction; not turn 2.
fn assert_summary_request(format: Format, r: &Recorded) {
    let h = history_text(format, r);
    assert!(
        h.contains(SUMMARY_INSTRUCTION),
        "{format}: no instruction: {h:.600}"
    );
    assert!(h.contains(PROMPT_ONE), "{format}: turn 1 missing: {h:.600}");
    assert!(
        h.contains(ANSWER_ONE_MARK),
        "{format}: turn 1's answer: {h:.600}"
    );
    assert!(
        !h.contains(PROMPT_TWO),
        "{format}: turn 2 is not summarized: {h:.600}"
    );
}

/// The reduced request: turn 2 opened by the summary; turn 1 left out.
fn assert_reduced_request(format: Format, r: &Recorded) {
    let h = history_text(format, r);
    assert!(
        h.contains("[Summary of the 1 earlier turn(s)") && h.contains(SUMMARY),
        "{format}: no summary: {h}"
    );
    assert!(h.contains(PROMPT_TWO), "{format}: {h}");
    assert!(
        !h.contains(PROMPT_ONE),
        "{format}: turn 1's prompt still sent: {h:.600}"
    );
    assert!(
        !h.contains(ANSWER_ONE_MARK),
        "{format}: turn 1's answer still sent: {h:.600}"
    );
    assert!(!h.contains(SUMMARY_INSTRUCTION), "{format}: {h:.600}");
}

/// What `recover rebuild --format F` prints (the library function the recover binary prints;
/// this package's tests cannot run that binary), for every format: valid, without notes. For
/// `format`, it is exactly the history of `last` plus the final answer (one history, two
/// uses). Returns the rebuilt bodies' histories as text, by format.
fn assert_rebuild(format: Format, journal: &Path, last: &Recorded, answer: &str) -> Vec<String> {
    let recovered = recover::Recovery::of(journal)
        .run()
        .expect("the journal recovers");
    let mut texts = Vec::new();
    for f in FORMATS {
        let rebuilt = recover::rebuild_body(&recovered.analysis, f)
            .unwrap_or_else(|e| panic!("{format}: the {f} rebuild: {e}"));
        assert!(
            rebuilt.notes.is_empty(),
            "{format}/{f}: {:?}",
            rebuilt.notes
        );
        let body = rebuilt.body.value();
        recover::providers::validate(f, &body)
            .unwrap_or_else(|v| panic!("{format}/{f}: {v}: {body:#}"));
        texts.push(history_of(f, &body).to_string());
        if f == format {
            let sent = history_of(format, &last.body);
            let sent = sent.as_array().expect("a history array");
            let printed = history_of(format, &body);
            let printed = printed.as_array().expect("a rebuilt history array");
            assert_eq!(
                printed.len(),
                sent.len() + 1,
                "{format}: the last request's history and one answer: {body:#}"
            );
            assert_eq!(&printed[..sent.len()], sent, "{format}: {body:#}");
            assert!(
                printed[sent.len()].to_string().contains(answer),
                "{format}: {body:#}"
            );
        }
    }
    texts
}

/// For every format (and openai-responses' in-stream overflow): turn 2's request is refused
/// as too long, the model is asked for a summary of turn 1, the reduction is journaled, and
/// the reduced request, sent once more, is answered.
#[test]
fn an_overflow_is_reduced_by_a_summary_then_retried_once() {
    let cases = FORMATS
        .iter()
        .map(|f| (*f, false))
        .chain([(Format::OpenAiResponses, true)]);
    for (format, in_stream) in cases {
        let case = Case::new();
        let server = &case.server;
        server.push(format, Answer::text(&answer_one()).into());
        server.push(format, overflow(format, in_stream));
        server.push(format, Answer::text(SUMMARY).into());
        server.push(format, Answer::text(ANSWER_TWO).into());
        let out = case.run(format, &[PROMPT_ONE, PROMPT_TWO]);
        let what = format!("{format} (in stream: {in_stream})");
        assert_eq!(out.status.code(), Some(0), "{what}: {}", shown(&out));

        let events = case.events();
        assert_eq!(trail(&events), REDUCED_AFTER_ONE_OVERFLOW, "{what}");
        let failed = events
            .iter()
            .find_map(|e| match e {
                Event::LlmAttemptFailed(f) => Some(f),
                _ => None,
            })
            .expect("the overflow is journaled");
        // In a stream too: the adapter reads `response.failed` as the same error answered as a
        // response (llm/src/openai_responses.rs `failure`).
        assert_eq!(failed.status, Some(400), "{what}: {failed:?}");
        assert!(
            !failed.message.is_empty(),
            "{what}: the provider's message: {failed:?}"
        );
        let compacted = compactions(&events);
        let c = compacted[0];
        assert_eq!(
            (c.turn, c.step, c.trigger),
            (2, 1, CompactTrigger::Overflow)
        );
        assert_eq!(c.summary.as_deref(), Some(SUMMARY), "{what}");
        assert_eq!(c.summary_note, None, "{what}");
        assert!(c.shortened.is_empty(), "{what}: {c:?}");
        assert!(
            c.tokens_after * 2 <= c.tokens_before,
            "{what}: the summary at least halves the estimate: {c:?}"
        );
        assert!(
            events.iter().any(|e| matches!(
                e,
                Event::TurnEnd {
                    turn: 2,
                    outcome: TurnOutcome::Completed
                }
            )),
            "{what}: {:?}",
            kinds(&events)
        );
        assert_eq!(kinds(&events).last(), Some(&"session/close"), "{what}");

        let requests = case.requests();
        assert_eq!(requests.len(), 4, "{what}: {requests:#?}");
        assert_all_valid(format, &requests);
        // The refused request carried turn 1 whole; the summary request too, then the
        // instruction; the retried one the summary instead.
        let refused = history_text(format, &requests[1]);
        assert!(
            refused.contains(PROMPT_ONE) && refused.contains(PROMPT_TWO),
            "{what}"
        );
        assert_summary_request(format, &requests[2]);
        assert_reduced_request(format, &requests[3]);

        let stdout = text(&out.stdout);
        assert!(stdout.contains(ANSWER_TWO), "{what}: {}", shown(&out));
        assert!(
            !stdout.contains("SUMMARY-MARK"),
            "{what}: the summary is not the answer"
        );
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("note: the context was reduced")
                && stderr.contains("turns 1-1 replaced by the model's summary"),
            "{what}: {}",
            shown(&out)
        );

        // `recover rebuild` prints the reduced history, valid in every format.
        for (f, h) in FORMATS.iter().zip(assert_rebuild(
            format,
            &case.journal(),
            &requests[3],
            ANSWER_TWO,
        )) {
            assert!(
                h.contains(SUMMARY) && h.contains(ANSWER_TWO),
                "{what}/{f}: {h}"
            );
            assert!(!h.contains(PROMPT_ONE), "{what}/{f}: {h:.600}");
        }
    }
}

/// The reduced request refused as too long again: the turn ends, saying so; no second
/// reduction, no third request of the turn. A refused request is not fatal: the run exits 0.
#[test]
fn a_second_overflow_ends_the_turn() {
    for format in FORMATS {
        let case = Case::new();
        let server = &case.server;
        server.push(format, Answer::text(&answer_one()).into());
        server.push(format, Reply::context_overflow());
        server.push(format, Answer::text(SUMMARY).into());
        server.push(format, Reply::context_overflow());
        // Taken only by a loop that should not be.
        server.push(format, Answer::text("NEVER-SENT").into());
        let out = case.run(format, &[PROMPT_ONE, PROMPT_TWO]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("error: the provider refused the request")
                && stderr.contains("the context was reduced once for this request")
                && stderr.contains("(the turn ended)"),
            "{format}: {}",
            shown(&out)
        );
        assert!(!text(&out.stdout).contains("NEVER-SENT"), "{format}");

        let requests = case.requests();
        assert_eq!(requests.len(), 4, "{format}: {requests:#?}");
        assert_eq!(server.remaining(format), 1, "{format}");
        assert_all_valid(format, &requests);
        assert_summary_request(format, &requests[2]);
        assert_reduced_request(format, &requests[3]);

        let events = case.events();
        assert_eq!(
            trail(&events),
            [
                "request t1 a1",
                "response t1",
                "request t2 a1",
                "failed t2 a1 ContextOverflow retry=false",
                "summary-requested t2 through 1",
                "compacted t2 Overflow through 1",
                "request t2 a2",
                "failed t2 a2 ContextOverflow retry=false",
            ],
            "{format}"
        );
        let ended = events.iter().find_map(|e| match e {
            Event::TurnEnd {
                turn: 2,
                outcome: TurnOutcome::Failed { message },
            } => Some(message.clone()),
            _ => None,
        });
        assert!(
            ended
                .as_deref()
                .is_some_and(|m| m.contains("reduced once") && m.contains("still longer")),
            "{format}: {ended:?}"
        );
        assert_eq!(kinds(&events).last(), Some(&"session/close"), "{format}");
        // The reduction stays the session's: a rebuild prints the reduced history.
        for h in assert_rebuild_valid(&case.journal()) {
            assert!(
                h.contains(SUMMARY) && !h.contains(PROMPT_ONE),
                "{format}: {h:.600}"
            );
        }
    }
}

/// Every format's rebuild of the journal, valid, as history text.
fn assert_rebuild_valid(journal: &Path) -> Vec<String> {
    let recovered = recover::Recovery::of(journal)
        .run()
        .expect("the journal recovers");
    FORMATS
        .iter()
        .map(|&f| {
            let rebuilt = recover::rebuild_body(&recovered.analysis, f)
                .unwrap_or_else(|e| panic!("the {f} rebuild: {e}"));
            assert!(rebuilt.notes.is_empty(), "{f}: {:?}", rebuilt.notes);
            history_of(f, &rebuilt.body.value()).to_string()
        })
        .collect()
}

/// The events of a journal a live (or killed) process wrote: as many whole records as there
/// are.
fn events_so_far(dir: &Path) -> Vec<Event> {
    let Ok(storage) = journal::FsStorage::open(dir) else {
        return Vec::new();
    };
    let Ok(reader) = journal::Reader::open(Arc::new(storage), journal::Limits::default()) else {
        return Vec::new();
    };
    reader
        .map_while(|r| r.ok())
        .filter_map(|r| r.decode::<Record>().ok())
        .map(|r| r.event)
        .collect()
}

/// The child's output so far (written to files in the case), for failure messages.
fn logs(case: &Case) -> String {
    let read = |name: &str| std::fs::read_to_string(case.dir.path().join(name)).unwrap_or_default();
    format!(
        "--- stdout\n{:.2000}\n--- stderr\n{}",
        read("run.out"),
        read("run.err")
    )
}

fn spawn_run(case: &Case, format: Format) -> Child {
    let file = |name: &str| std::fs::File::create(case.dir.path().join(name)).expect("a log file");
    case.command(format)
        .args(case.run_args(format, &[PROMPT_ONE, PROMPT_TWO]))
        .stdin(Stdio::null())
        .stdout(file("run.out"))
        .stderr(file("run.err"))
        .spawn()
        .expect("tooljournal starts")
}

/// Waits until `done` holds; kills the child and fails after [`WAIT`], or as soon as the child
/// ended by itself.
fn wait_until(case: &Case, child: &mut Child, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the run ended ({status}) before {what}: {}", logs(case));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} not seen within {WAIT:?}: {}", logs(case));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill9(child: &mut Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL delivered");
    let status = child.wait().expect("the child is reaped");
    assert!(!status.success(), "killed, not finished: {status:?}");
}

/// SIGKILL while the model writes its summary (the mock holds the summary request): the
/// journal has `context/summary-requested` and no `context/compacted`, so nothing was reduced.
/// The resume closes the interrupted turn and sends the history unreduced.
#[test]
fn a_kill_during_the_summary_request_then_resume() {
    for format in [Format::Anthropic, Format::OpenAiResponses] {
        let case = Case::new();
        // The held summary request must not time out before the kill.
        case.write_config("request_timeout_ms = 120000");
        let server = &case.server;
        server.push(format, Answer::text(&answer_one()).into());
        // Words that count no tokens: a count would be journaled (`context/calibrated`) and
        // rightly make the resume reduce before it sends (provider_word.rs tests that); here
        // the resume is to send what the kill left, unreduced.
        let refusal = match format {
            Format::Anthropic => Reply::error(format, 400, "prompt is too long"),
            _ => Reply::context_overflow(),
        };
        server.push(format, refusal);
        server.push(
            format,
            Answer::text("HELD-SUMMARY")
                .first_byte_delay_ms(120_000)
                .into(),
        );
        let mut child = spawn_run(&case, format);
        // The held reply taken by the summary request (not left for the resume's request).
        wait_until(&case, &mut child, "the summary request at the mock", || {
            case.requests().len() >= 3
        });
        // Synced before the request left, so it is there already.
        let so_far = events_so_far(&case.journal());
        assert!(
            so_far.iter().any(|e| matches!(e, Event::ContextSummaryRequested(s) if s.turn == 2 && s.through_turn == 1)),
            "{format}: {:?}",
            kinds(&so_far)
        );
        kill9(&mut child);
        let requests = case.requests();
        assert_eq!(requests.len(), 3, "{format}: {requests:#?}");
        assert_all_valid(format, &requests);
        assert_summary_request(format, &requests[2]);
        let killed = events_so_far(&case.journal());
        assert!(
            compactions(&killed).is_empty(),
            "{format}: {:?}",
            kinds(&killed)
        );

        server.push(format, Answer::text("RESUMED-ANSWER").into());
        let out: Output = case.resume(format, Some("again"), &[]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        assert!(
            text(&out.stdout).contains("RESUMED-ANSWER"),
            "{format}: {}",
            shown(&out)
        );

        let events = case.events();
        assert!(
            compactions(&events).is_empty(),
            "{format}: {:?}",
            kinds(&events)
        );
        let recovery = events
            .iter()
            .find_map(|e| match e {
                Event::Recovery(r) => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{format}: no recovery: {:?}", kinds(&events)));
        assert_eq!(
            recovery.interrupted_step,
            Some((2, 1)),
            "{format}: {recovery:?}"
        );
        assert_eq!(recovery.interrupted_turn, Some(2), "{format}: {recovery:?}");
        // The recovery closed turn 2 as interrupted: the replay of the journal says so.
        let recovered = recover::Recovery::of(case.journal())
            .run()
            .expect("recovers");
        let outcomes: Vec<_> = recovered
            .analysis
            .replay
            .turns
            .iter()
            .map(|t| (t.turn, t.outcome.clone()))
            .collect();
        assert_eq!(
            outcomes,
            [
                (1, Some(TurnOutcome::Completed)),
                (2, Some(TurnOutcome::Interrupted)),
                (3, Some(TurnOutcome::Completed)),
            ],
            "{format}"
        );

        let requests = case.requests();
        assert_eq!(requests.len(), 4, "{format}: {requests:#?}");
        let resumed = &requests[3];
        assert_eq!(resumed.violation, None, "{format}: {:#}", resumed.body);
        let h = history_text(format, resumed);
        assert!(
            h.contains(PROMPT_ONE) && h.contains(ANSWER_ONE_MARK),
            "{format}: unreduced: {h:.600}"
        );
        assert!(h.contains("again"), "{format}: {h:.600}");
        assert!(
            !h.contains("[Summary of") && !h.contains("HELD-SUMMARY"),
            "{format}: {h:.600}"
        );
        assert!(!h.contains(SUMMARY_INSTRUCTION), "{format}: {h:.600}");

        for (f, h) in FORMATS.iter().zip(assert_rebuild(
            format,
            &case.journal(),
            resumed,
            "RESUMED-ANSWER",
        )) {
            assert!(h.contains(PROMPT_ONE), "{format}/{f}: unreduced: {h:.600}");
        }
    }
}

/// A configured context window: turn 2's request passes 80 % of it, so it is reduced before
/// it is sent (trigger threshold), no overflow involved; the mock's second request is the
/// summary request.
#[test]
fn a_request_past_the_threshold_is_reduced_before_it_is_sent() {
    // Turn 1's request (system prompt, tools, prompt: a few thousand tokens) is within 80 %
    // of it; turn 2's (turn 1's answer alone is about 30 000 tokens) is past it; with the
    // summary instead of turn 1 it is within half the window, which the reduction aims for.
    let window_tokens = 30_000u64;
    for format in [Format::OpenAiChat, Format::Gemini] {
        let case = Case::new();
        case.write_config(&format!("context_window_tokens = {window_tokens}"));
        let server = &case.server;
        server.push(format, Answer::text(&answer_one()).into());
        server.push(format, Answer::text(SUMMARY).into());
        server.push(format, Answer::text(ANSWER_TWO).into());
        let out = case.run(format, &[PROMPT_ONE, PROMPT_TWO]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));

        let events = case.events();
        assert_eq!(
            trail(&events),
            [
                "request t1 a1",
                "response t1",
                "summary-requested t2 through 1",
                "compacted t2 Threshold through 1",
                "request t2 a1",
                "response t2",
            ],
            "{format}"
        );
        let c = compactions(&events)[0];
        assert_eq!(c.summary.as_deref(), Some(SUMMARY), "{format}");
        assert!(
            c.tokens_before * 100 > window_tokens * 80 && c.tokens_after * 2 <= window_tokens,
            "{format}: {c:?}"
        );

        let requests = case.requests();
        assert_eq!(requests.len(), 3, "{format}: {requests:#?}");
        assert_all_valid(format, &requests);
        assert_summary_request(format, &requests[1]);
        assert_reduced_request(format, &requests[2]);
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("note: the context was reduced"),
            "{format}: {}",
            shown(&out)
        );
        assert!(
            text(&out.stdout).contains(ANSWER_TWO),
            "{format}: {}",
            shown(&out)
        );
        assert_rebuild(format, &case.journal(), &requests[2], ANSWER_TWO);
    }
}

/// SIGKILL after the reduction, while the retried request streams: the reduction was made
/// durable with that request, so the resume sends the reduced history (the summary, not
/// turn 1), as `recover rebuild` prints it.
#[test]
fn a_kill_after_the_reduction_resumes_with_the_reduced_history() {
    for format in [Format::OpenAiChat, Format::Gemini] {
        let case = Case::new();
        let server = &case.server;
        server.push(format, Answer::text(&answer_one()).into());
        server.push(format, Reply::context_overflow());
        server.push(format, Answer::text(SUMMARY).into());
        server.push(
            format,
            Answer::text("STREAMED-BEFORE-THE-KILL")
                .hang_after_text()
                .into(),
        );
        let mut child = spawn_run(&case, format);
        let out_file = case.dir.path().join("run.out");
        wait_until(&case, &mut child, "the retried request's text", || {
            std::fs::read_to_string(&out_file).is_ok_and(|s| s.contains("STREAMED-BEFORE-THE-KILL"))
        });
        kill9(&mut child);
        assert_eq!(case.requests().len(), 4, "{format}");
        let killed = events_so_far(&case.journal());
        assert_eq!(
            compactions(&killed).len(),
            1,
            "{format}: {:?}",
            kinds(&killed)
        );

        server.push(format, Answer::text("RESUMED-ANSWER").into());
        let out = case.resume(format, Some("again"), &[]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        let requests = case.requests();
        assert_eq!(requests.len(), 5, "{format}: {requests:#?}");
        let resumed = &requests[4];
        assert_eq!(resumed.violation, None, "{format}: {:#}", resumed.body);
        assert_reduced_request(format, resumed);
        let h = history_text(format, resumed);
        assert!(h.contains("again"), "{format}: {h}");
        assert!(!h.contains("STREAMED-BEFORE-THE-KILL"), "{format}: {h}");
        // Still the one reduction; the resume made none of its own.
        assert_eq!(compactions(&case.events()).len(), 1, "{format}");
        for (f, h) in FORMATS.iter().zip(assert_rebuild(
            format,
            &case.journal(),
            resumed,
            "RESUMED-ANSWER",
        )) {
            assert!(
                h.contains(SUMMARY) && !h.contains(PROMPT_ONE),
                "{format}/{f}: {h:.600}"
            );
        }
    }
}

mod provider_word;
