//! `tooljournal run --model` end to end, through the binary, against the loopback mock of
//! every provider (real HTTP, real SSE): a two-step session, retries, a provider's refusal, a
//! stream cut inside a call's arguments, a tool the step does not offer, bad input, and the
//! key never written anywhere.

use crate::common;

use common::models::*;
use mockllm::{Answer, Format, Reply};
use runtime::event::{Event, TurnOutcome};
use serde_json::json;

/// A tool call then a final answer, for every provider: the file is written, the second
/// request pairs the call with its result (the mock checks the pairing as the provider does),
/// and the streamed text is shown.
#[test]
fn a_two_step_session_on_every_provider() {
    for format in FORMATS {
        let case = Case::new();
        let server = &case.server;
        let args = r#"{"path":"hello.txt","content":"written by the model\n"}"#;
        server.push(
            format,
            Answer::calls(vec![("call_w1", "write", args)])
                .with_text("I will write the file.")
                .into(),
        );
        server.push(format, Answer::text("The file is written.").into());
        let out = case.run(format, &["write hello.txt"]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        let written = std::fs::read_to_string(case.workspace().join("hello.txt"));
        assert_eq!(
            written.as_deref().ok(),
            Some("written by the model\n"),
            "{format}"
        );
        let requests = case.requests();
        assert_eq!(requests.len(), 2, "{format}: {requests:#?}");
        for r in &requests {
            assert_eq!(r.violation, None, "{format}: {:#}", r.body);
        }
        let second = &requests[1].body;
        assert_eq!(
            calls_in(format, second),
            vec![(
                if format == Format::Gemini {
                    // Gemini carries ids only when the model gave some; the mock gives none.
                    calls_in(format, second)[0].0.clone()
                } else {
                    "call_w1".to_owned()
                },
                "write".to_owned()
            )],
            "{format}: {second:#}"
        );
        let results = results_for(format, second, "call_w1", "write");
        assert_eq!(results.len(), 1, "{format}: one result: {second:#}");
        assert!(
            !results[0].contains("\"is_error\":true"),
            "{format}: {results:?}"
        );
        let stdout = text(&out.stdout);
        assert!(stdout.contains("I will write the file."), "{stdout}");
        assert!(stdout.contains("The file is written."), "{stdout}");
        assert!(stdout.contains("write"), "a line for the call: {stdout}");
        // The journal closed the session after one completed turn.
        let events = case.events();
        assert!(
            events.iter().any(|e| matches!(
                e,
                Event::TurnEnd {
                    outcome: TurnOutcome::Completed,
                    ..
                }
            )),
            "{format}: {:?}",
            kinds(&events)
        );
        assert_eq!(kinds(&events).last(), Some(&"session/close"), "{format}");
        one_history_two_uses(format, &case, second, "The file is written.");
    }
}

/// The invariant: what `recover rebuild --format F` prints for the journal (the library
/// function the binary prints) is the last request's history plus the final answer, with the
/// request's tools and system prompt.
fn one_history_two_uses(
    format: Format,
    case: &Case,
    last_request: &serde_json::Value,
    answer: &str,
) {
    let recovered = recover::Recovery::of(case.journal())
        .run()
        .expect("the journal recovers");
    let rebuilt = recover::rebuild_body(&recovered.analysis, format)
        .unwrap_or_else(|e| panic!("{format}: {e}"));
    assert!(rebuilt.notes.is_empty(), "{format}: {:?}", rebuilt.notes);
    let rebuilt = rebuilt.body.value();
    let sent = history_of(format, last_request);
    let sent = sent.as_array().expect("a history array");
    let printed = history_of(format, &rebuilt);
    let printed = printed.as_array().expect("a rebuilt history array");
    assert_eq!(
        printed.len(),
        sent.len() + 1,
        "{format}: the request's history and one answer: {rebuilt:#}"
    );
    assert_eq!(&printed[..sent.len()], sent, "{format}: {rebuilt:#}");
    let added = printed[sent.len()].to_string();
    assert!(added.contains(answer), "{format}: {added}");
    assert!(
        !added.contains("\"user\""),
        "{format}: an assistant message: {added}"
    );
    assert_eq!(
        rebuilt["tools"], last_request["tools"],
        "{format}: the tools"
    );
    // The default system prompt went with the request, and rebuild prints it.
    for body in [last_request, &rebuilt] {
        assert!(
            body.to_string().contains("TOOL_OUTCOME_UNKNOWN"),
            "{format}: no system prompt: {body:#}"
        );
    }
    for key in ["system", "instructions", "systemInstruction"] {
        assert_eq!(rebuilt[key], last_request[key], "{format}: `{key}`");
    }
}

/// Several `--prompt`s are successive turns of one session, the second request of the second
/// turn carrying the first turn's exchange.
#[test]
fn each_prompt_is_a_turn() {
    let format = Format::Anthropic;
    let case = Case::new();
    let server = &case.server;
    server.push(format, Answer::text("first answer").into());
    server.push(format, Answer::text("second answer").into());
    let out = case.run(format, &["first question", "second question"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let requests = case.requests();
    assert_eq!(requests.len(), 2);
    let history = history_of(format, &requests[1].body).to_string();
    for said in ["first question", "first answer", "second question"] {
        assert!(history.contains(said), "{said} missing: {history}");
    }
    let starts = case
        .events()
        .iter()
        .filter(|e| matches!(e, Event::TurnStart { .. }))
        .count();
    assert_eq!(starts, 2);
}

/// A 429 asking to wait 0 s, then an answer: the session goes on, the journal shows the failed
/// attempt before the response.
#[test]
fn a_rate_limit_is_retried() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let server = &case.server;
    server.push(format, Reply::rate_limited(format, 0));
    server.push(format, Answer::text("after the retry").into());
    let out = case.run(format, &["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_eq!(case.requests().len(), 2);
    let kinds = kinds(&case.events());
    let failed = kinds.iter().position(|k| *k == "llm/attempt-failed");
    let response = kinds.iter().position(|k| *k == "llm/response");
    assert!(
        matches!((failed, response), (Some(f), Some(r)) if f < r),
        "{kinds:?}"
    );
    assert!(text(&out.stdout).contains("after the retry"));
}

/// A first byte slower than `request_timeout_ms` fails the attempt, and the next one answers.
#[test]
fn a_slow_first_byte_times_out_and_is_retried() {
    let format = Format::Anthropic;
    let case = Case::new();
    case.write_config("request_timeout_ms = 300");
    let server = &case.server;
    server.push(
        format,
        Answer::text("too late").first_byte_delay_ms(3_000).into(),
    );
    server.push(format, Answer::text("in time").into());
    let started = std::time::Instant::now();
    let out = case.run(format, &["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2_500),
        "the slow attempt was abandoned: {:?}",
        started.elapsed()
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("in time") && !stdout.contains("too late"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("retrying"), "{}", shown(&out));
    let failed = case
        .events()
        .iter()
        .filter(|e| e.kind() == "llm/attempt-failed")
        .count();
    assert_eq!(failed, 1);
}

/// A 400 is the request's fault: shown verbatim, not retried, the turn ends, the run exits 0.
#[test]
fn a_provider_error_is_shown_verbatim_and_not_retried() {
    for format in [Format::OpenAiResponses, Format::Gemini] {
        let case = Case::new();
        let server = &case.server;
        let message = "the model m-test does not accept this request (TJ-400-MARK)";
        server.push(format, Reply::error(format, 400, message));
        let out = case.run(format, &["hi"]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        assert!(
            text(&out.stderr).contains(message),
            "{format}: {}",
            shown(&out)
        );
        assert_eq!(case.requests().len(), 1, "{format}: no retry");
        let failed = case.events().into_iter().any(|e| {
            matches!(e, Event::TurnEnd { outcome: TurnOutcome::Failed { message: m }, .. } if m.contains(message))
        });
        assert!(failed, "{format}: the turn ends failed, with the message");
    }
}

/// A stream cut in the middle of a call's arguments: the call never runs from the broken
/// attempt; the retry's whole call runs exactly once.
#[test]
fn a_stream_cut_inside_call_arguments_runs_the_call_once() {
    for format in [Format::OpenAiChat, Format::Anthropic] {
        let case = Case::new();
        let server = &case.server;
        let args = json!({"command": "echo ran >> marker.txt"}).to_string();
        server.push(
            format,
            Answer::calls(vec![("call_b1", "bash", &args)])
                .cut_in_call_arguments(10)
                .into(),
        );
        server.push(
            format,
            Answer::calls(vec![("call_b1", "bash", &args)]).into(),
        );
        server.push(format, Answer::text("done").into());
        let out = case.run(format, &["append"]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        let marker =
            std::fs::read_to_string(case.workspace().join("marker.txt")).unwrap_or_default();
        assert_eq!(marker, "ran\n", "{format}: ran exactly once");
        let kinds = kinds(&case.events());
        assert_eq!(
            kinds.iter().filter(|k| **k == "llm/attempt-failed").count(),
            1,
            "{format}: {kinds:?}"
        );
    }
}

/// A call of a tool the step does not offer is rejected `UNKNOWN_TOOL`, and the model is told.
#[test]
fn a_call_of_an_unknown_tool_is_rejected() {
    let format = Format::OpenAiResponses;
    let case = Case::new();
    let server = &case.server;
    server.push(
        format,
        Answer::calls(vec![("call_t1", "teleport", r#"{"to":"mars"}"#)]).into(),
    );
    server.push(format, Answer::text("I cannot teleport.").into());
    let out = case.run(format, &["go to mars"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let requests = case.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].violation, None);
    let results = results_for(format, &requests[1].body, "call_t1", "teleport");
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("UNKNOWN_TOOL"), "{results:?}");
}

/// One clear line and exit 1 for each way the model cannot be used.
#[test]
fn bad_input_gets_one_clear_line() {
    let case = Case::new();
    let last_line = |out: &std::process::Output| {
        text(&out.stderr)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned()
    };

    // An unknown provider.
    let out = case
        .command(Format::OpenAiChat)
        .args([
            "run",
            "--model",
            "openia:gpt",
            "--prompt",
            "hi",
            "--journal",
        ])
        .arg(case.journal())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        last_line(&out).contains("unknown provider `openia`"),
        "{}",
        shown(&out)
    );
    assert!(!case.journal().exists(), "nothing written for a bad spec");

    // A missing key, naming the variable.
    let out = case
        .command(Format::Anthropic)
        .env_remove("ANTHROPIC_API_KEY")
        .args(case.run_args(Format::Anthropic, &["hi"]))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        last_line(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        shown(&out)
    );
    assert!(!case.journal().exists(), "nothing written without a key");

    // A system prompt file that cannot be read: said, and no session begun behind it.
    case.write_config("system_prompt_file = \"missing-prompt.md\"");
    let out = case
        .command(Format::OpenAiChat)
        .args(case.run_args(Format::OpenAiChat, &["hi"]))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        last_line(&out).contains("missing-prompt.md"),
        "{}",
        shown(&out)
    );
    assert!(
        !case.journal().exists(),
        "nothing written for a missing prompt file"
    );
    case.write_config("");

    // A refused connection, naming the URL.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address").port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    case.write_config("retry_attempts = 0");
    let out = case
        .command(Format::OpenAiChat)
        .args([
            "run",
            "--model",
            "openai-chat:m-test",
            "--base-url",
            &url,
            "--prompt",
            "hi",
            "--config",
        ])
        .arg(case.config())
        .arg("--journal")
        .arg(case.dir.path().join("j-refused"))
        .arg("--workspace")
        .arg(case.workspace())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert_eq!(text(&out.stderr).lines().count(), 1, "{}", shown(&out));
    assert!(
        last_line(&out).contains(&format!("127.0.0.1:{port}")),
        "{}",
        shown(&out)
    );

    // A stream with a line that is not JSON.
    let format = Format::Gemini;
    let case2 = Case::new();
    case2.server.push(
        format,
        Answer::text("some text before the bad line")
            .malformed_line()
            .into(),
    );
    case2.write_config("retry_attempts = 0");
    let out = case2.run(format, &["hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(last_line(&out).starts_with("error: "), "{}", shown(&out));
    assert!(
        last_line(&out).contains("is not what the provider sends"),
        "{}",
        shown(&out)
    );

    // A stream cut short (no clean end), attempts exhausted.
    let format = Format::OpenAiChat;
    let case3 = Case::new();
    case3.server.push(
        format,
        Answer::calls(vec![("c1", "bash", r#"{"command":"true"}"#)])
            .cut_in_call_arguments(4)
            .into(),
    );
    case3.write_config("retry_attempts = 0");
    let out = case3.run(format, &["hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(last_line(&out).starts_with("error: "), "{}", shown(&out));
    assert!(
        last_line(&out).contains(&case3.server.base_url(format)),
        "names the URL: {}",
        shown(&out)
    );
    // The session stays open for a resume, and says so.
    assert!(last_line(&out).contains("resume"), "{}", shown(&out));
}

/// The key never reaches the journal, the spill store, stdout or stderr: neither on a session
/// that works nor on one whose key the provider refuses.
#[test]
fn the_key_is_never_written() {
    let format = Format::OpenAiChat;
    let case = Case::new();
    let server = &case.server;
    // A result big enough to spill, so the spill store has files too.
    let big = json!({"command": "seq 1 40000"}).to_string();
    // A model that looks for the key in its tools' environment.
    let env = json!({"command": "env; echo \"key=$OPENAI_API_KEY\""}).to_string();
    server.push(
        format,
        Answer::calls(vec![("call_k1", "bash", &big), ("call_k2", "bash", &env)]).into(),
    );
    server.push(format, Answer::text("done").into());
    let good = case.run(format, &["count"]);
    assert_eq!(good.status.code(), Some(0), "{}", shown(&good));
    let second = &case.requests()[1].body;
    let env_result = results_for(format, second, "call_k2", "bash");
    assert!(
        env_result.len() == 1 && env_result[0].contains("key="),
        "the env call ran: {env_result:?}"
    );
    // A wrong key: the provider's refusal is shown; the key is not.
    let wrong = "sk-tjtest-WRONG-0d9f-key";
    let refused = case
        .command(format)
        .env(key_var(format), wrong)
        .args(["run", "--model", &spec(format), "--base-url"])
        .arg(server.base_url(format))
        .arg("--journal")
        .arg(case.dir.path().join("j-wrong"))
        .arg("--workspace")
        .arg(case.workspace())
        .args(["--prompt", "hi"])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(1), "{}", shown(&refused));
    let mut places = files_under(case.dir.path());
    assert!(
        places.len() > 5,
        "the journal, its spill store and state are there: {places:?}"
    );
    places.retain(|p| p != &case.config());
    for path in places {
        let bytes = std::fs::read(&path).unwrap_or_default();
        for key in [KEY, wrong] {
            assert!(
                !contains(&bytes, key.as_bytes()),
                "{} holds the key",
                path.display()
            );
        }
    }
    for out in [&good, &refused] {
        for key in [KEY, wrong] {
            assert!(
                !contains(&out.stdout, key.as_bytes()),
                "stdout: {}",
                shown(out)
            );
            assert!(
                !contains(&out.stderr, key.as_bytes()),
                "stderr: {}",
                shown(out)
            );
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A refused answer, in each provider's shape: shown to the user with the provider's word and
/// what it said, journaled as `llm/refusal` after a response whose stop reason is `refusal`,
/// counted by `recover audit`, and named by `recover rebuild` as the last answer.
#[test]
fn a_refusal_is_shown_journaled_audited_and_named_by_rebuild() {
    let anthropic = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_r\",\"usage\":{\"input_tokens\":9,\"output_tokens\":0}}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\",\"stop_details\":{\"type\":\"refusal\",\"category\":\"cyber\",\"explanation\":\"This request was blocked.\"}},\"usage\":{\"output_tokens\":1}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let chat = concat!(
        "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"refusal\":\"I can't help with that.\"}}]}\n\n",
        "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let gemini = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\"}]},\"finishReason\":\"SAFETY\"}]}\n\n";
    for (format, body, reason, said) in [
        (
            Format::Anthropic,
            anthropic,
            "refusal",
            "[cyber] This request was blocked.",
        ),
        (
            Format::OpenAiChat,
            chat,
            "refusal",
            "I can't help with that.",
        ),
        (Format::Gemini, gemini, "SAFETY", "(SAFETY)"),
    ] {
        let case = Case::new();
        case.server
            .push(format, Reply::recorded(vec![body.as_bytes().to_vec()]));
        let out = case.run(format, &["do something risky"]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", shown(&out));
        let stderr = text(&out.stderr);
        let all = format!("{}{stderr}", text(&out.stdout));
        assert!(
            stderr.contains(&format!(
                "refused: the provider refused the answer ({reason})"
            )) && all.contains(said),
            "{format}: {}",
            shown(&out)
        );
        let events = case.events();
        let refusal = events.iter().find_map(|e| match e {
            Event::LlmRefusal(r) => Some(r.clone()),
            _ => None,
        });
        assert_eq!(
            refusal.as_ref().map(|r| r.reason.as_str()),
            Some(reason),
            "{format}: {:?}",
            kinds(&events)
        );
        let audit = std::process::Command::new(common::recover_bin::recover_bin())
            .arg("audit")
            .arg(case.journal())
            .output()
            .expect("recover runs");
        assert!(
            text(&audit.stdout).contains("refused answers: 1"),
            "{format}: {}",
            shown(&audit)
        );
        let rebuild = std::process::Command::new(common::recover_bin::recover_bin())
            .args(["rebuild", "--format", format.as_str()])
            .arg(case.journal())
            .output()
            .expect("recover runs");
        assert!(rebuild.status.success(), "{format}: {}", shown(&rebuild));
        assert!(
            text(&rebuild.stderr).contains("was refused by the provider"),
            "{format}: {}",
            shown(&rebuild)
        );
    }
}

/// A content block of a type no build knows yet, with a delta of a type no build knows: the
/// answer is read, not failed; the block is kept as it came and sent back to the provider in
/// the next request; the binary and the journal say so (`llm/note`).
#[test]
fn an_unknown_block_and_delta_are_kept_sent_back_and_noted() {
    let format = Format::Anthropic;
    let body = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_u\",\"usage\":{\"input_tokens\":9,\"output_tokens\":0}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"future_block\",\"payload\":\"a\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"payload_delta\",\"payload\":\"bc\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"ls\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let case = Case::new();
    case.server
        .push(format, Reply::recorded(vec![body.as_bytes().to_vec()]));
    case.server.push(format, Answer::text("done").into());
    let out = case.run(format, &["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert!(
        text(&out.stderr).contains("future_block"),
        "the note is shown: {}",
        shown(&out)
    );
    let notes: Vec<String> = case
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::LlmNote(n) => Some(n.note.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes.len(),
        2,
        "a note for the block and one for the delta: {notes:?}"
    );
    let second = &case.requests()[1].body;
    let content = second["messages"][1]["content"].clone();
    assert_eq!(
        content[0],
        json!({"type": "future_block", "payload": "abc"}),
        "the block goes back as it came: {content}"
    );
    assert_eq!(content[1]["type"], "tool_use", "{content}");
}

/// `tooljournal resume --prompt` on a finished session: the prompt is a new turn, never
/// dropped. The journal says so (`session/reopen` right after the `session/close`, schema 9),
/// the model is sent the whole session so far and the new prompt, and `recover` reads the
/// reopened journal as any other. Without a prompt there is nothing to do, and it says so.
mod finished {
    use super::common::models::*;
    use mockllm::{Answer, Format};
    use runtime::event::Event;

    /// The user and assistant texts of an OpenAI Chat request body, in order.
    fn conversation(body: &serde_json::Value) -> Vec<(String, String)> {
        body["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "user" || m["role"] == "assistant")
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    fn pair(role: &str, text: &str) -> (String, String) {
        (role.to_owned(), text.to_owned())
    }

    #[test]
    fn a_finished_session_given_a_prompt_goes_on_with_a_new_turn() {
        let format = Format::OpenAiChat;
        let case = Case::new();
        case.server
            .push(format, Answer::text("First answer.").into());
        let out = case.run(format, &["first question"]);
        assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
        assert_eq!(kinds(&case.events()).last(), Some(&"session/close"));

        // Without a prompt: nothing to do, said, nothing written, nothing sent.
        let before = case.events().len();
        let out = case.resume(format, None, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
        let said = text(&out.stdout);
        assert!(
            said.contains("already finished") && said.contains("--prompt"),
            "{}",
            shown(&out)
        );
        assert_eq!(case.events().len(), before, "nothing written");
        assert_eq!(case.requests().len(), 1, "nothing sent");

        // With one: a new turn, the model given the session so far.
        case.server
            .push(format, Answer::text("Second answer.").into());
        let out = case.resume(format, Some("second question"), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
        assert!(
            text(&out.stdout).contains("Second answer."),
            "{}",
            shown(&out)
        );
        let requests = case.requests();
        assert_eq!(requests.len(), 2, "{}", shown(&out));
        assert_eq!(
            conversation(&requests[1].body),
            [
                pair("user", "first question"),
                pair("assistant", "First answer."),
                pair("user", "second question"),
            ]
        );
        let events = case.events();
        let kinds = kinds(&events);
        let reopened: Vec<usize> = (0..kinds.len())
            .filter(|&i| kinds[i] == "session/reopen")
            .collect();
        assert_eq!(reopened.len(), 1, "{kinds:?}");
        assert_eq!(kinds[reopened[0] - 1], "session/close", "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"session/close"), "{kinds:?}");
        let turns: Vec<(u32, &str)> = events
            .iter()
            .filter_map(|e| match e {
                Event::TurnStart { turn, user_text } => Some((*turn, user_text.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(turns, [(1, "first question"), (2, "second question")]);

        // `recover` reads the reopened journal: clean, finished, nothing to append.
        let recovered = recover::Recovery::of(case.journal())
            .write(true)
            .run()
            .expect("readable");
        assert!(recovered.analysis.replay.closed);
        assert!(!recovered.appended);
        assert_eq!(recovered.analysis.replay.turns.len(), 2);
        assert_eq!(case.events().len(), events.len());

        // And again: a finished session can be reopened as often as it is given prompts.
        case.server
            .push(format, Answer::text("Third answer.").into());
        let out = case.resume(format, Some("third question"), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
        let kinds_now = super::common::models::kinds(&case.events())
            .into_iter()
            .filter(|k| *k == "session/reopen")
            .count();
        assert_eq!(kinds_now, 2);
        assert_eq!(case.requests().len(), 3);
    }
}
