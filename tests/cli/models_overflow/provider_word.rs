//! The provider's word wins over the estimate. A summary that fails in any way still leaves the earlier
//! turns out (`summary_note` saying why); a refusal is reduced even when the estimate (bytes /
//! 4) says the request fits; and where the refusal counts the tokens, the session's estimates
//! are set against that count from then on, a resume included (`context/calibrated`).

use super::*;
use runtime::event::ContextCalibrated;

/// The leaving-out note a request opens with (FORMAT.md, *Context reduction*).
const LEFT_OUT: &str = "[1 earlier turn(s) were left out to fit the model's context window";

fn calibrations(events: &[Event]) -> Vec<&ContextCalibrated> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ContextCalibrated(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// Each way a summary can fail (a 500, an empty answer, a second refusal), with a refusal that
/// counts nothing (OpenAI Responses' words) and a configured window the estimate says the
/// request fits in: turn 1 is left out with a note saying why, the request goes once more and
/// is answered.
#[test]
fn scenario_133_a_failed_summary_still_leaves_the_earlier_turns_out_saying_why() {
    let format = Format::OpenAiResponses;
    let ways: [(&str, Reply, &str); 3] = [
        (
            "a 500",
            Reply::error(format, 500, "SUMMARY-DOWN"),
            "SUMMARY-DOWN",
        ),
        (
            "an empty answer",
            Answer::text("").into(),
            "summary was empty",
        ),
        (
            "a second refusal",
            Reply::context_overflow(),
            "exceeds the context window",
        ),
    ];
    for (way, summary_reply, note) in ways {
        let case = Case::new();
        // Far more than the estimate of any request here: only the provider says it is too long.
        case.write_config("context_window_tokens = 1000000");
        let server = &case.server;
        server.push(format, Answer::text(&answer_one()).into());
        server.push(format, overflow(format, false));
        server.push(format, summary_reply);
        server.push(format, Answer::text(ANSWER_TWO).into());
        let out = case.run(format, &[PROMPT_ONE, PROMPT_TWO]);
        assert_eq!(out.status.code(), Some(0), "{way}: {}", shown(&out));

        let events = case.events();
        assert_eq!(trail(&events), REDUCED_AFTER_ONE_OVERFLOW, "{way}");
        assert!(calibrations(&events).is_empty(), "{way}: no counts given");
        let c = compactions(&events)[0];
        assert_eq!(c.summary, None, "{way}: {c:?}");
        let said = c.summary_note.as_deref().unwrap_or_default();
        assert!(said.contains(note), "{way}: {said:?}");
        assert!(c.tokens_after * 2 <= c.tokens_before, "{way}: {c:?}");

        let requests = case.requests();
        assert_eq!(requests.len(), 4, "{way}");
        assert_all_valid(format, &requests);
        let last = history_text(format, &requests[3]);
        assert!(last.contains(LEFT_OUT), "{way}: {last:.600}");
        assert!(last.contains(PROMPT_TWO), "{way}");
        assert!(!last.contains(PROMPT_ONE), "{way}: turn 1 still sent");
        assert!(!last.contains(ANSWER_ONE_MARK), "{way}: turn 1 still sent");
        assert!(text(&out.stdout).contains(ANSWER_TWO), "{way}");
    }
}

/// A history in Japanese (CJK), where bytes / 4 counts far fewer tokens than a provider: the
/// estimate says turn 2's request fits the configured window, the provider refuses it counting
/// more than twice the estimate. The count is journaled and the refused request reduced
/// although the summary fails; then a resume, given the journal's count, reduces turn 3's
/// request before it is sent (its estimate alone is under 80 % of the window).
#[test]
fn scenario_134_the_providers_token_count_calibrates_the_estimate_for_the_session_and_its_resume() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let window = 8_000u64;
    case.write_config(&format!("context_window_tokens = {window}"));
    let server = &case.server;
    // 3 bytes a character in UTF-8: about 0.75 tokens by the estimate, 1 or more by a
    // provider's tokenizer.
    let answer_one = format!("{ANSWER_ONE_MARK} {}", "庭園の花壇を計画する。".repeat(300));
    let answer_two = format!("{ANSWER_TWO} {}", "水やりを終えました。".repeat(300));
    server.push(format, Answer::text(&answer_one).into());
    // The refusal counts more than the window, and more than twice the estimate (checked below).
    let refused = 9_000u64;
    let words = format!(
        "This model's maximum context length is {window} tokens. However, your messages \
         resulted in {refused} tokens. Please reduce the length of the messages."
    );
    server.push(format, Reply::error(format, 400, &words));
    server.push(format, Reply::error(format, 500, "SUMMARY-DOWN"));
    server.push(format, Answer::text(&answer_two).into());
    let out = case.run(format, &["花壇の計画を立てて", PROMPT_TWO]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));

    let events = case.events();
    let calibrated = calibrations(&events);
    assert_eq!(calibrated.len(), 1, "{:?}", kinds(&events));
    let c = calibrated[0];
    assert_eq!((c.turn, c.step, c.attempt), (2, 1, 1));
    assert_eq!(
        (c.provider_tokens, c.provider_max_tokens),
        (refused, Some(window))
    );
    // The estimate said it fits (within 80 % of the window), the provider said otherwise.
    assert!(c.estimate_tokens * 100 <= window * 80, "{c:?}");
    assert!(c.estimate_tokens * 2 < refused, "CJK: {c:?}");
    let reduced = compactions(&events)[0].clone();
    assert_eq!(
        (reduced.through_turn, reduced.summary.as_deref()),
        (1, None)
    );
    assert_eq!(reduced.tokens_before, c.estimate_tokens);
    let requests = case.requests();
    assert_eq!(requests.len(), 4);
    assert!(history_text(format, &requests[3]).contains(LEFT_OUT));

    // The resume reads the count from the journal: turn 3's request (turn 2 and the prompt, an
    // estimate far within the window) passes 80 % of it as the provider counts, so it is
    // reduced before it is sent, with no refusal.
    server.push(format, Answer::text(SUMMARY).into());
    server.push(format, Answer::text("TURN-THREE-ANSWER").into());
    let out = case.resume(format, Some("次は何をしますか"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let events = case.events();
    let after: Vec<String> = trail(&events)
        .into_iter()
        .skip_while(|t| !t.contains("t3"))
        .collect();
    assert_eq!(
        after,
        [
            "summary-requested t3 through 2",
            "compacted t3 Threshold through 2",
            "request t3 a1",
            "response t3",
        ]
    );
    let threshold = compactions(&events)[1];
    assert!(
        threshold.tokens_before * 100 < window * 80,
        "the estimate alone would not have reduced: {threshold:?}"
    );
    let requests = case.requests();
    assert_eq!(requests.len(), 6);
    let last = history_text(format, &requests[5]);
    assert!(
        last.contains(SUMMARY) && !last.contains(ANSWER_TWO),
        "{last:.600}"
    );
}
