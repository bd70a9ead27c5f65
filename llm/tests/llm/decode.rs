//! Each provider's recorded stream (`tests/data/*.sse`, written from the providers' documented
//! wire formats: text, two tool calls with argument deltas, reasoning where the provider has
//! it, usage, the stop) decodes to exactly the events it says; cut short, it ends in a
//! transport error after the events received; a data line that is not JSON is malformed.

use crate::common;

use common::{data, decode_all};
use events::event::StopReason;
use events::model::{ModelError, ModelErrorKind, ModelEvent, Usage};
use serde_json::{json, Value};
use tooljournal_llm::Format;

fn begin(index: u32, id: &str, name: &str) -> ModelEvent {
    ModelEvent::CallBegin {
        index,
        id: id.into(),
        name: name.into(),
    }
}

fn args(index: u32, delta: &str) -> ModelEvent {
    ModelEvent::CallArgumentsDelta {
        index,
        delta: delta.into(),
    }
}

fn end(index: u32) -> ModelEvent {
    ModelEvent::CallEnd { index }
}

fn text(t: &str) -> ModelEvent {
    ModelEvent::TextDelta(t.into())
}

fn usage(input: u64, output: u64, cached: u64) -> ModelEvent {
    ModelEvent::Usage(Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
    })
}

/// The events, every one of them `Ok`.
fn oks(results: Vec<Result<ModelEvent, ModelError>>) -> Vec<ModelEvent> {
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("unexpected error: {e}")))
        .collect()
}

/// Decodes `file` whole, in 1-byte pieces, in 7-byte pieces, and with CRLF line ends: every
/// way gives `expected`.
async fn assert_decodes(format: Format, file: &str, expected: &[ModelEvent]) {
    let bytes = data(file);
    for piece in [bytes.len(), 1, 7, 4096] {
        let got = oks(decode_all(format, &bytes, piece).await);
        assert_eq!(got, expected, "{file} in pieces of {piece} bytes");
    }
    let crlf = String::from_utf8(bytes.clone())
        .expect("fixtures are UTF-8")
        .replace('\n', "\r\n");
    let got = oks(decode_all(format, crlf.as_bytes(), 5).await);
    assert_eq!(got, expected, "{file} with CRLF line ends");
}

#[tokio::test]
async fn openai_chat_stream_decodes_to_its_events() {
    let expected = vec![
        ModelEvent::ResponseId("chatcmpl-BxKq1".into()),
        text("Checking "),
        text("both ✓."),
        begin(0, "call_Ab1", "read_file"),
        args(0, "{\"path\":"),
        args(0, " \"a.txt\"}"),
        begin(1, "call_Cd2", "search"),
        args(1, "{\"q\": \"x\", "),
        args(1, "\"n\": 1.0000000000000000001}"),
        end(0),
        end(1),
        usage(1200, 48, 1024),
        ModelEvent::Stop(StopReason::ToolUse),
    ];
    assert_decodes(Format::OpenAiChat, "openai_chat.sse", &expected).await;
}

#[tokio::test]
async fn openai_responses_stream_decodes_to_its_events() {
    let expected = vec![
        ModelEvent::ResponseId("resp_68a1".into()),
        text("Checking "),
        text("both ✓."),
        begin(0, "call_Ab1", "read_file"),
        args(0, "{\"path\":"),
        args(0, " \"a.txt\"}"),
        end(0),
        begin(1, "call_Cd2", "search"),
        args(1, "{\"q\": \"x\", "),
        args(1, "\"n\": 1.0000000000000000001}"),
        end(1),
        // The reasoning item of `response.output_item.done`, its text as sent (escape kept).
        ModelEvent::ProviderState(
            r#"[{"id":"rs_68a1","type":"reasoning","summary":[{"type":"summary_text","text":"Need both files."}],"encrypted_content":"gAAAAABo-full\u002b=="}]"#
                .into(),
        ),
        usage(1200, 48, 1024),
        ModelEvent::Stop(StopReason::ToolUse),
    ];
    assert_decodes(Format::OpenAiResponses, "openai_responses.sse", &expected).await;
}

/// The provider state's JSON (its key order is serde_json's to choose).
fn state_json(events: &[ModelEvent]) -> Value {
    let states: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ProviderState(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(states.len(), 1, "one provider state in {events:?}");
    serde_json::from_str(states[0]).expect("provider state is JSON")
}

/// `events` with the provider state replaced by a marker, to compare the rest exactly.
fn without_state(events: &[ModelEvent]) -> Vec<ModelEvent> {
    events
        .iter()
        .map(|e| match e {
            ModelEvent::ProviderState(_) => ModelEvent::ProviderState("(state)".into()),
            other => other.clone(),
        })
        .collect()
}

#[tokio::test]
async fn anthropic_stream_decodes_to_its_events() {
    let bytes = data("anthropic.sse");
    let expected = vec![
        ModelEvent::ResponseId("msg_01XYZ".into()),
        text("Checking "),
        text("both ✓."),
        begin(0, "toolu_01A", "read_file"),
        args(0, "{\"path\":"),
        args(0, " \"a.txt\"}"),
        end(0),
        begin(1, "toolu_01B", "search"),
        args(1, "{\"q\": \"x\", "),
        args(1, "\"n\": 1.0000000000000000001}"),
        end(1),
        ModelEvent::ProviderState("(state)".into()),
        // input_tokens leaves the cache out: 176 + 1024 read + 0 written.
        usage(1200, 89, 1024),
        ModelEvent::Stop(StopReason::ToolUse),
    ];
    let thinking = json!([
        {
            "type": "thinking",
            "thinking": "Need both files.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
        },
        {
            "type": "redacted_thinking",
            "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
        }
    ]);
    for piece in [bytes.len(), 1, 7] {
        let got = oks(decode_all(Format::Anthropic, &bytes, piece).await);
        assert_eq!(without_state(&got), expected, "pieces of {piece}");
        assert_eq!(state_json(&got), thinking);
    }
}

#[tokio::test]
async fn gemini_stream_decodes_to_its_events() {
    let bytes = data("gemini.sse");
    let expected = vec![
        ModelEvent::ResponseId("mQ3aaN6pJ9Xz".into()),
        text("Checking "),
        text("both ✓."),
        // No ids from Gemini: call_{index}; each call's args whole, as the model wrote them.
        begin(0, "call_0", "read_file"),
        args(0, "{\"path\": \"a.txt\"}"),
        end(0),
        begin(1, "call_1", "search"),
        args(1, "{\"q\": \"x\", \"n\": 1.0000000000000000001}"),
        end(1),
        ModelEvent::ProviderState("(state)".into()),
        // Output: 28 candidates + 20 thoughts.
        usage(1200, 48, 1024),
        ModelEvent::Stop(StopReason::ToolUse),
    ];
    for piece in [bytes.len(), 1, 7] {
        let got = oks(decode_all(Format::Gemini, &bytes, piece).await);
        assert_eq!(without_state(&got), expected, "pieces of {piece}");
        assert_eq!(
            state_json(&got),
            json!({"text": "CiQB0e2Kb-text", "calls": ["CiQB0e2Kb-call0", null]})
        );
    }
}

/// The fixture's bytes up to (not including) the line holding `marker`.
fn before(file: &str, marker: &str) -> Vec<u8> {
    let bytes = String::from_utf8(data(file)).expect("fixtures are UTF-8");
    let at = bytes
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {file}"));
    bytes.as_bytes()[..at].to_vec()
}

fn assert_cut_short(results: &[Result<ModelEvent, ModelError>]) {
    let (last, _) = results.split_last().expect("an error at least");
    let error = last.as_ref().expect_err("the stream ends in an error");
    assert_eq!(error.kind, ModelErrorKind::Transport);
    assert_eq!(
        error.message,
        "the stream ended before the response was complete"
    );
    assert!(error.retryable());
}

#[tokio::test]
async fn streams_cut_short_end_in_a_transport_error_after_the_events_received() {
    // Cut in the middle of the second call's first argument fragment (its event incomplete).
    let chat = before("openai_chat.sse", r#"\"n\": 1.0"#);
    let got = decode_all(Format::OpenAiChat, &chat, 11).await;
    assert_eq!(
        oks(got[..got.len() - 1].to_vec()),
        vec![
            ModelEvent::ResponseId("chatcmpl-BxKq1".into()),
            text("Checking "),
            text("both ✓."),
            begin(0, "call_Ab1", "read_file"),
            args(0, "{\"path\":"),
            args(0, " \"a.txt\"}"),
            begin(1, "call_Cd2", "search"),
            args(1, "{\"q\": \"x\", "),
        ]
    );
    assert_cut_short(&got);

    // Everything but `data: [DONE]`: the finish reason came, so the answer is whole (some
    // OpenAI-compatible servers close the stream without `[DONE]`).
    let chat = before("openai_chat.sse", "data: [DONE]");
    let got = oks(decode_all(Format::OpenAiChat, &chat, 64).await);
    assert_eq!(
        got.last(),
        Some(&ModelEvent::Stop(StopReason::ToolUse)),
        "{got:?}"
    );
    // Cut before the finish reason: still cut short.
    let chat = before("openai_chat.sse", "\"finish_reason\":\"tool_calls\"");
    let chat = &chat[..chat.iter().rposition(|b| *b == b'\n').unwrap_or(0)];
    assert_cut_short(&decode_all(Format::OpenAiChat, chat, 64).await);

    let responses = before("openai_responses.sse", "event: response.completed");
    let got = decode_all(Format::OpenAiResponses, &responses, 64).await;
    assert_eq!(got.len(), 12, "11 events and the error: {got:?}");
    assert_cut_short(&got);

    let anthropic = before("anthropic.sse", "event: message_stop");
    let got = decode_all(Format::Anthropic, &anthropic, 64).await;
    assert_eq!(got.len(), 12, "11 events and the error: {got:?}");
    assert_cut_short(&got);

    // Gemini's last chunk (the calls and the finishReason) never came.
    let gemini = before(
        "gemini.sse",
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\"",
    );
    let got = decode_all(Format::Gemini, &gemini, 64).await;
    assert_eq!(
        oks(got[..got.len() - 1].to_vec()),
        vec![
            ModelEvent::ResponseId("mQ3aaN6pJ9Xz".into()),
            text("Checking "),
            text("both ✓."),
        ]
    );
    assert_cut_short(&got);
}

#[tokio::test]
async fn a_data_line_that_is_not_json_is_malformed_naming_provider_and_event() {
    for (format, file, name) in [
        (Format::OpenAiChat, "openai_chat.sse", "openai-chat"),
        (
            Format::OpenAiResponses,
            "openai_responses.sse",
            "openai-responses",
        ),
        (Format::Anthropic, "anthropic.sse", "anthropic"),
        (Format::Gemini, "gemini.sse", "gemini"),
    ] {
        // The first event's data broken: event 1.
        let bytes = String::from_utf8(data(file)).expect("fixtures are UTF-8");
        let broken = bytes.replacen("data: {", "data: {oops ", 1);
        let got = decode_all(format, broken.as_bytes(), 100).await;
        assert_eq!(got.len(), 1, "{name}: only the error: {got:?}");
        let error = got[0].as_ref().expect_err("malformed");
        assert_eq!(error.kind, ModelErrorKind::Malformed, "{name}");
        assert!(!error.retryable());
        assert!(
            error.message.starts_with(&format!("{name}: event 1 (`")),
            "{name}: {}",
            error.message
        );
        assert!(
            error.message.contains("{oops"),
            "quotes the data: {}",
            error.message
        );
    }
}

#[tokio::test]
async fn a_data_line_of_the_wrong_shape_is_malformed() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n\
               data: {\"choices\":\"none\"}\n\n";
    let got = decode_all(Format::OpenAiChat, sse.as_bytes(), 1000).await;
    assert_eq!(got[0], Ok(text("hi")));
    let error = got[1].as_ref().expect_err("malformed");
    assert_eq!(error.kind, ModelErrorKind::Malformed);
    assert!(
        error
            .message
            .starts_with("openai-chat: event 2 (`message`)"),
        "{}",
        error.message
    );
    assert_eq!(got.len(), 2);

    // A call that begins with no name.
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n";
    let got = decode_all(Format::OpenAiChat, sse.as_bytes(), 1000).await;
    let error = got[0].as_ref().expect_err("malformed");
    assert_eq!(error.kind, ModelErrorKind::Malformed);
    assert!(
        error.message.contains("without a function name"),
        "{}",
        error.message
    );

    // An Anthropic delta for a block that never started.
    let sse = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":5,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n";
    let got = decode_all(Format::Anthropic, sse.as_bytes(), 1000).await;
    let error = got[0].as_ref().expect_err("malformed");
    assert_eq!(error.kind, ModelErrorKind::Malformed);
    assert!(
        error
            .message
            .starts_with("anthropic: event 1 (`content_block_delta`)"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn finish_reasons_and_stops() {
    let chat = |reason: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"{reason}\"}}]}}\n\ndata: [DONE]\n\n"
        )
    };
    for (reason, stop) in [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::Length),
        ("tool_calls", StopReason::ToolUse),
    ] {
        let got = oks(decode_all(Format::OpenAiChat, chat(reason).as_bytes(), 1000).await);
        assert_eq!(got, vec![ModelEvent::Stop(stop)], "{reason}");
    }
    // A server that says "stop" after tool calls (some OpenAI-compatible ones do): the calls
    // are asked for all the same.
    let stop_after_call = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let got = oks(decode_all(Format::OpenAiChat, stop_after_call.as_bytes(), 1000).await);
    assert_eq!(
        got.last(),
        Some(&ModelEvent::Stop(StopReason::ToolUse)),
        "{got:?}"
    );

    let incomplete = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_1\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"input_tokens\":5,\"output_tokens\":7}}}\n\n";
    let got = oks(decode_all(Format::OpenAiResponses, incomplete.as_bytes(), 1000).await);
    assert_eq!(
        got,
        vec![
            ModelEvent::ResponseId("resp_1".into()),
            usage(5, 7, 0),
            ModelEvent::Stop(StopReason::Length)
        ]
    );

    let anthropic = |reason: &str| {
        format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"m\",\"usage\":{{\"input_tokens\":3,\"output_tokens\":1}}}}}}\n\n\
             event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{reason}\"}},\"usage\":{{\"output_tokens\":4}}}}\n\n\
             event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        )
    };
    for (reason, stop) in [
        ("end_turn", StopReason::EndTurn),
        ("stop_sequence", StopReason::EndTurn),
        ("max_tokens", StopReason::Length),
    ] {
        let got = oks(decode_all(Format::Anthropic, anthropic(reason).as_bytes(), 1000).await);
        assert_eq!(
            got,
            vec![
                ModelEvent::ResponseId("m".into()),
                usage(3, 4, 0),
                ModelEvent::Stop(stop)
            ],
            "{reason}"
        );
    }

    let gemini = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ab\"}],\"role\":\"model\"},\"finishReason\":\"MAX_TOKENS\"}]}\n\n";
    let got = oks(decode_all(Format::Gemini, gemini.as_bytes(), 1000).await);
    assert_eq!(got, vec![text("ab"), ModelEvent::Stop(StopReason::Length)]);
}

#[tokio::test]
async fn errors_inside_streams_keep_the_providers_message_and_status() {
    let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n\
                     event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let got = decode_all(Format::Anthropic, anthropic.as_bytes(), 1000).await;
    assert_eq!(got[0], Ok(ModelEvent::ResponseId("m".into())));
    let error = got[1].as_ref().expect_err("an error");
    assert_eq!(
        (error.kind, error.status, error.message.as_str()),
        (ModelErrorKind::Status, Some(529), "Overloaded")
    );
    assert!(error.retryable());

    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model had a problem.\"}}}\n\n";
    let got = decode_all(Format::OpenAiResponses, failed.as_bytes(), 1000).await;
    let error = got[0].as_ref().expect_err("an error");
    assert_eq!(
        (error.kind, error.status, error.message.as_str()),
        (
            ModelErrorKind::Status,
            Some(500),
            "The model had a problem."
        )
    );

    let chat = "data: {\"error\":{\"message\":\"upstream rate limited\",\"code\":429}}\n\n";
    let got = decode_all(Format::OpenAiChat, chat.as_bytes(), 1000).await;
    let error = got[0].as_ref().expect_err("an error");
    assert_eq!(
        (error.status, error.message.as_str()),
        (Some(429), "upstream rate limited")
    );

    let gemini = "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\n\n";
    let got = decode_all(Format::Gemini, gemini.as_bytes(), 1000).await;
    let error = got[0].as_ref().expect_err("an error");
    assert_eq!(
        (error.status, error.message.as_str()),
        (Some(503), "The model is overloaded.")
    );
}

#[tokio::test]
async fn no_argument_calls_and_whole_calls() {
    // Anthropic: a tool_use with no input fragments takes its starting input, `{}`.
    let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n\
                     event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"now\",\"input\":{}}}\n\n\
                     event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
                     event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
                     event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":4}}\n\n\
                     event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let got = oks(decode_all(Format::Anthropic, anthropic.as_bytes(), 1000).await);
    assert_eq!(
        got,
        vec![
            ModelEvent::ResponseId("m".into()),
            begin(0, "t1", "now"),
            args(0, "{}"),
            end(0),
            usage(0, 4, 0),
            ModelEvent::Stop(StopReason::ToolUse)
        ]
    );

    // Responses: a call announced only when done (no added event, no deltas).
    let responses = "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}\n\n\
                     event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n";
    let got = oks(decode_all(Format::OpenAiResponses, responses.as_bytes(), 1000).await);
    assert_eq!(
        got,
        vec![
            begin(0, "c1", "f"),
            args(0, "{\"a\":1}"),
            end(0),
            ModelEvent::ResponseId("r".into()),
            ModelEvent::Stop(StopReason::ToolUse)
        ]
    );

    // Gemini: a call with its own id keeps it; one without args gets `{}`; a made-up id never
    // takes one the provider gave.
    let gemini = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"a\",\"id\":\"call_1\",\"args\":{}}},{\"functionCall\":{\"name\":\"b\"}}]},\"finishReason\":\"STOP\"}]}\n\n";
    let got = oks(decode_all(Format::Gemini, gemini.as_bytes(), 1000).await);
    assert_eq!(
        got,
        vec![
            begin(0, "call_1", "a"),
            args(0, "{}"),
            end(0),
            begin(1, "call_1_2", "b"),
            args(1, "{}"),
            end(1),
            ModelEvent::Stop(StopReason::ToolUse)
        ]
    );
}

#[tokio::test]
async fn a_large_stream_handed_over_whole_decodes() {
    // 20,000 text chunks (≈ 2.6 MB) in one piece, as a bench hands a recording over: the
    // decoder cuts it into small pieces for the SSE parser (events span the cuts).
    let chunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}}]}\n\n";
    let mut sse = chunk.repeat(20_000);
    sse.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    let got = decode_all(Format::OpenAiChat, sse.as_bytes(), sse.len()).await;
    assert_eq!(got.len(), 20_001);
    let text: String = got[..20_000]
        .iter()
        .map(|e| match e {
            Ok(ModelEvent::TextDelta(t)) => t.as_str(),
            other => panic!("not text: {other:?}"),
        })
        .collect();
    assert_eq!(text, "0123456789abcdef".repeat(80_000));
    assert_eq!(got.last(), Some(&Ok(ModelEvent::Stop(StopReason::EndTurn))));
}

#[tokio::test]
async fn every_prefix_of_every_stream_decodes_to_a_prefix_then_one_error() {
    for (format, file) in [
        (Format::OpenAiChat, "openai_chat.sse"),
        (Format::OpenAiResponses, "openai_responses.sse"),
        (Format::Anthropic, "anthropic.sse"),
        (Format::Gemini, "gemini.sse"),
    ] {
        let bytes = data(file);
        let full = oks(decode_all(format, &bytes, bytes.len()).await);
        // A chat stream is whole once its finish reason's event is complete (a server may
        // close without `[DONE]`); only the usage after it may be missing then.
        let whole_from = (format == Format::OpenAiChat).then(|| {
            let text = String::from_utf8(bytes.clone()).expect("fixtures are UTF-8");
            let line = text
                .find("\"finish_reason\":\"tool_calls\"")
                .expect("a finish reason");
            line + text[line..].find("\n\n").expect("the event's end") + 2
        });
        // Every cut, mid-line and mid-character ones included.
        for at in 0..bytes.len() {
            let got = decode_all(format, &bytes[..at], 64).await;
            if whole_from.is_some_and(|from| at >= from) {
                let got = oks(got);
                let without_usage: Vec<_> = full
                    .iter()
                    .filter(|e| !matches!(e, ModelEvent::Usage(_)))
                    .cloned()
                    .collect();
                let got_without_usage: Vec<_> = got
                    .iter()
                    .filter(|e| !matches!(e, ModelEvent::Usage(_)))
                    .cloned()
                    .collect();
                assert_eq!(got_without_usage, without_usage, "{file} cut at {at}");
                continue;
            }
            let (last, events) = got.split_last().expect("at least the error");
            let events = oks(events.to_vec());
            assert_eq!(events, full[..events.len()], "{file} cut at {at}");
            let e = last
                .as_ref()
                .expect_err(&format!("{file} cut at {at} ends in an error"));
            assert_eq!(e.kind, ModelErrorKind::Transport, "{file} cut at {at}: {e}");
            assert_eq!(
                e.message,
                "the stream ended before the response was complete"
            );
        }
    }
}

#[tokio::test]
async fn an_answer_a_filter_stopped_runs_none_of_its_calls() {
    let gemini = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"ls\",\"args\":{}}}]},\"finishReason\":\"SAFETY\"}]}\n\n";
    let got = oks(decode_all(Format::Gemini, gemini.as_bytes(), 1000).await);
    // A safety filter's stop is a refusal (whose calls the runtime rejects, as an
    // interrupted answer's); a malformed call's, an interrupted answer noted.
    assert_eq!(
        got.last(),
        Some(&ModelEvent::Stop(StopReason::Refusal)),
        "{got:?}"
    );
    assert!(
        got.contains(&ModelEvent::Refusal {
            reason: "SAFETY".into(),
            explanation: String::new()
        }),
        "{got:?}"
    );
    let malformed = gemini.replace("SAFETY", "MALFORMED_FUNCTION_CALL");
    let got = oks(decode_all(Format::Gemini, malformed.as_bytes(), 1000).await);
    assert_eq!(
        got.last(),
        Some(&ModelEvent::Stop(StopReason::Interrupted)),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|e| matches!(e, ModelEvent::Note(n) if n.contains("MALFORMED_FUNCTION_CALL"))),
        "{got:?}"
    );
    for finished in ["STOP", "FUNCTION_CALL"] {
        let finished = gemini.replace("SAFETY", finished);
        let got = oks(decode_all(Format::Gemini, finished.as_bytes(), 1000).await);
        assert_eq!(
            got.last(),
            Some(&ModelEvent::Stop(StopReason::ToolUse)),
            "{finished}"
        );
    }
}

#[tokio::test]
async fn a_ping_or_unshown_reasoning_is_a_keep_alive() {
    let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n\
                     event: ping\ndata: {\"type\":\"ping\"}\n\n";
    let got = common::decode_with_keep_alives(Format::Anthropic, anthropic.as_bytes()).await;
    let got: Vec<ModelEvent> = got.into_iter().filter_map(Result::ok).collect();
    assert!(got.contains(&ModelEvent::KeepAlive), "{got:?}");
    let responses = "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\",\"delta\":\"thinking\"}\n\n";
    let got = common::decode_with_keep_alives(Format::OpenAiResponses, responses.as_bytes()).await;
    assert!(
        got.iter().any(|e| matches!(e, Ok(ModelEvent::KeepAlive))),
        "{got:?}"
    );
}
