//! Histories with what a provider is strict about: call ids it would reject (too long, odd
//! characters) and arguments whose numbers an `f64` cannot hold;
//! through the API and through `recover rebuild`.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use journal::{FsStorage, Journal, Options};
use recover::conversation::{ConvCall, ConvResult, Conversation, Message, ModelSettings};
use recover::providers::{
    provider_id, render, request_body, stand_in_tools, validate, Format, History,
};
use runtime::event::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

fn hash8(s: &str) -> String {
    hex::encode(&Sha256::digest(s.as_bytes())[..4])
}

/// 467 characters with `|`, `+`, `/` and `=`: the shape of a composite `callId|blob` id.
fn long_id(tail: &str) -> String {
    let mut id = String::from("call_Qm9vbGVhbkZsYWc|");
    while id.len() < 467 - tail.len() {
        id.push_str("aB3+/x9Q");
    }
    id.truncate(467 - tail.len());
    id.push_str(tail);
    id
}

/// Big integers, long decimals, `-0`, exponents and unicode escapes, spaced as a model might.
const ARGS_A: &str = r#"{"big": 123456789012345678901234567890, "neg_big":-98765432109876543210987654321,"dec":0.1000000000000000055511151231257827021181583404541015625, "zero": -0, "nzero":-0.0,"exp":[6.02E23, 1e-7, 2.5e+10],"s":"\u00e9\ud83d\ude00\n\u0000"}"#;
const ARGS_B: &str = r#"{"n":18446744073709551616,"f":3.141592653589793238462643383279}"#;

/// Valid JSON, but beyond what a provider's parser (or ours) holds as a number.
const ARGS_HUGE: &str = r#"{"huge": 1E400}"#;

fn number_tokens() -> [&'static str; 11] {
    [
        "123456789012345678901234567890",
        "-98765432109876543210987654321",
        "0.1000000000000000055511151231257827021181583404541015625",
        "-0,",
        "-0.0",
        "6.02E23",
        "1e-7",
        "2.5e+10",
        r#""\u00e9\ud83d\ude00\n\u0000""#,
        "18446744073709551616",
        "3.141592653589793238462643383279",
    ]
}

/// `conv` as a whole body, with stand-ins for the tools it calls (Anthropic takes no tool
/// call without tools).
fn body_of(conv: &Conversation, f: Format) -> History {
    request_body(conv, &stand_in_tools(conv), &ModelSettings::default(), f)
}

/// A crashed session: one model response with its calls, all received, none started; the
/// step shows the model the one tool they call, its schema journaled.
fn journal_with(dir: &Path, calls: &[(&str, &str)]) {
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir).unwrap()),
        Options::default(),
    )
    .unwrap();
    let put = |event: Event| {
        journal
            .append(&Record {
                at_ms: 1_000,
                event,
            })
            .unwrap()
    };
    put(Event::SessionOpen(SessionOpen {
        schema_version: 1,
        session_id: "exact".into(),
        workspace: "/ws".into(),
        tools: vec![],
    }));
    put(Event::TurnStart {
        turn: 1,
        user_text: "count".into(),
    });
    put(Event::StepStart { turn: 1, step: 1 });
    let hash = "c0".repeat(32);
    put(Event::ToolSchema(ToolSchema {
        schema_hash: hash.clone(),
        name: "count".into(),
        description: "Count.".into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }));
    put(Event::StepTools {
        turn: 1,
        step: 1,
        tools: vec![VisibleTool {
            name: "count".into(),
            schema_hash: hash,
        }],
    });
    let response = put(Event::LlmResponse {
        turn: 1,
        step: 1,
        response: ModelResponse {
            text: String::new(),
            tool_calls: calls
                .iter()
                .map(|(id, args)| ModelCall {
                    call_id: id.to_string(),
                    name: "count".into(),
                    arguments: args.to_string(),
                })
                .collect(),
            stop_reason: StopReason::ToolUse,
        },
    });
    for (i, (id, args)) in calls.iter().enumerate() {
        put(Event::Received {
            call: CallRef {
                turn: 1,
                step: 1,
                call_id: id.to_string(),
            },
            index: i as u32,
            tool: "count".into(),
            raw_arguments: args.to_string(),
            source_seqs: vec![response],
        });
    }
    journal.close().unwrap();
}

fn rebuild(dir: &Path, format: Format) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_recover"))
        .args([
            "rebuild",
            dir.to_str().unwrap(),
            "--format",
            format.as_str(),
        ])
        .output()
        .expect("recover runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The longest id each provider takes (ARCHITECTURE.md Decisions, "Rebuilt histories").
fn id_len_max(format: Format) -> usize {
    match format {
        Format::OpenAiChat => 40,
        Format::OpenAiResponses | Format::Anthropic | Format::Gemini => 64,
    }
}

/// (call ids, result ids) in document order.
fn ids(format: Format, body: &Value) -> (Vec<String>, Vec<String>) {
    let s = |v: &Value| v.as_str().expect("an id string").to_string();
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    match format {
        Format::OpenAiChat => {
            for m in body["messages"].as_array().unwrap() {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    calls.push(s(&c["id"]));
                }
                if m["role"] == "tool" {
                    results.push(s(&m["tool_call_id"]));
                }
            }
        }
        Format::OpenAiResponses => {
            for i in body["input"].as_array().unwrap() {
                match i["type"].as_str().unwrap() {
                    "function_call" => calls.push(s(&i["call_id"])),
                    "function_call_output" => results.push(s(&i["call_id"])),
                    _ => {}
                }
            }
        }
        Format::Anthropic => {
            for m in body["messages"].as_array().unwrap() {
                for b in m["content"].as_array().unwrap() {
                    match b["type"].as_str().unwrap() {
                        "tool_use" => calls.push(s(&b["id"])),
                        "tool_result" => results.push(s(&b["tool_use_id"])),
                        _ => {}
                    }
                }
            }
        }
        Format::Gemini => {
            for c in body["contents"].as_array().unwrap() {
                for p in c["parts"].as_array().unwrap() {
                    if let Some(call) = p.get("functionCall") {
                        calls.push(s(&call["id"]));
                    }
                    if let Some(r) = p.get("functionResponse") {
                        results.push(s(&r["id"]));
                    }
                }
            }
        }
    }
    (calls, results)
}

#[test]
fn scenario_25_long_ids_with_odd_characters_fit_every_format_alike_for_call_and_result() {
    // Two 467-character ids that share everything but their last character.
    let (a, b) = (long_id("=="), long_id("=/"));
    assert_eq!((a.len(), b.len()), (467, 467));
    for c in ['|', '+', '/', '='] {
        assert!(a.contains(c));
    }
    let dir = tempfile::tempdir().unwrap();
    journal_with(dir.path(), &[(&a, "{}"), (&b, "{}")]);
    for format in Format::ALL {
        let body: Value = serde_json::from_str(&rebuild(dir.path(), format)).unwrap();
        validate(format, &body).unwrap_or_else(|v| panic!("{format}: {v}"));
        let (calls, results) = ids(format, &body);
        assert_eq!(calls.len(), 2, "{format}: {body}");
        assert_eq!(results, calls, "{format}: each result has its call's id");
        assert_ne!(calls[0], calls[1], "{format}: distinct ids stay distinct");
        for id in &calls {
            assert!(
                id.len() <= id_len_max(format)
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{format}: `{id}` is not an id the provider takes"
            );
            assert!(
                id.starts_with("call_Qm9vbGVhbkZsYWc_"),
                "{format}: `{id}` keeps a readable prefix"
            );
        }
        // The mapping is a function of the journal: a second rebuild says the same.
        let again: Value = serde_json::from_str(&rebuild(dir.path(), format)).unwrap();
        assert_eq!(ids(format, &again), (calls.clone(), results));
    }
}

#[test]
fn arguments_keep_every_number_and_escape_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    journal_with(
        dir.path(),
        &[
            ("call_a", ARGS_A),
            ("call_b", ARGS_B),
            ("call_c", ARGS_HUGE),
        ],
    );
    for format in Format::ALL {
        let text = rebuild(dir.path(), format);
        let body: Value = serde_json::from_str(&text).unwrap();
        validate(format, &body).unwrap_or_else(|v| panic!("{format}: {v}"));
        // The argument text as the history carries it.
        let rendered: Vec<String> = match format {
            Format::OpenAiChat => body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
                .map(|c| c["function"]["arguments"].as_str().unwrap().to_string())
                .take(2)
                .collect(),
            Format::OpenAiResponses => body["input"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["type"] == "function_call")
                .map(|i| i["arguments"].as_str().unwrap().to_string())
                .take(2)
                .collect(),
            // An object: its text is the model's own only if it appears verbatim.
            Format::Anthropic | Format::Gemini => [ARGS_A, ARGS_B]
                .iter()
                .filter(|raw| text.contains(*raw))
                .map(|raw| raw.to_string())
                .collect(),
        };
        assert_eq!(
            rendered,
            [ARGS_A, ARGS_B],
            "{format}: the arguments are not byte for byte the journal's:\n{text}"
        );
        let all = rendered.concat();
        for token in number_tokens() {
            assert!(all.contains(token), "{format}: `{token}` lost");
        }
        // A number no parser holds: an object-only format gets the text under
        // `_raw_arguments`, still byte for byte.
        let huge = match format {
            Format::OpenAiChat => {
                body["messages"][1]["tool_calls"][2]["function"]["arguments"].clone()
            }
            Format::OpenAiResponses => body["input"][3]["arguments"].clone(),
            Format::Anthropic => {
                body["messages"][1]["content"][2]["input"]["_raw_arguments"].clone()
            }
            Format::Gemini => {
                body["contents"][1]["parts"][2]["functionCall"]["args"]["_raw_arguments"].clone()
            }
        };
        assert_eq!(huge, ARGS_HUGE, "{format}:\n{text}");
    }
}

// ---- through the API ----

/// A conversation with one assistant message calling `ids` in order (with `arguments`), each
/// answered.
fn calling(ids: &[&str], arguments: &str) -> Conversation {
    Conversation {
        system: None,
        messages: vec![
            Message::User { text: "go".into() },
            Message::Assistant {
                text: String::new(),
                calls: ids
                    .iter()
                    .map(|id| ConvCall {
                        id: id.to_string(),
                        name: "read".into(),
                        arguments: arguments.into(),
                    })
                    .collect(),
                state: None,
            },
            Message::Results {
                results: ids
                    .iter()
                    .map(|id| ConvResult {
                        id: id.to_string(),
                        name: "read".into(),
                        content: "ok".into(),
                        is_error: false,
                    })
                    .collect(),
            },
        ],
    }
}

#[test]
fn a_467_character_id_with_odd_characters_fits_every_format() {
    let mut id = String::from("call_Qm9vbGVhbkZsYWc|");
    while id.len() < 465 {
        id.push_str("aB3+/x9Q");
    }
    id.truncate(465);
    id.push_str("==");
    assert_eq!(id.len(), 467);
    let conv = calling(&[&id], "{}");
    for f in Format::ALL {
        let body = body_of(&conv, f).value();
        validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}"));
        let (calls, results) = ids(f, &body);
        let want = format!(
            "{}_{}",
            &id[..f.id_len_max() - 9].replace(['|', '+', '/', '='], "_"),
            hash8(&id)
        );
        assert_eq!(calls, std::slice::from_ref(&want), "{f}");
        assert_eq!(results, [want], "{f}: the result has its call's id");
    }
}

#[test]
fn long_ids_sharing_their_prefix_map_to_distinct_ids() {
    let prefix = "p".repeat(64);
    let (a, b) = (format!("{prefix}A"), format!("{prefix}B"));
    // An id already in the form another one maps to: mapping alone would give both the same.
    let taken = provider_id(Format::OpenAiResponses, &a);
    let conv = calling(&[&a, &b, &taken], "{}");
    for f in Format::ALL {
        let body = body_of(&conv, f).value();
        validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}"));
        let (calls, results) = ids(f, &body);
        let distinct: HashSet<&String> = calls.iter().collect();
        assert_eq!(distinct.len(), 3, "{f}: {calls:?}");
        assert_eq!(results, calls, "{f}");
        assert_eq!(calls[0], provider_id(f, &a), "{f}");
        assert_eq!(calls[1], provider_id(f, &b), "{f}");
        assert!(calls.iter().all(|id| id.len() <= f.id_len_max()), "{f}");
    }
    // The third call of Responses met its own mapped form, taken by the first: made unique.
    let (calls, _) = ids(
        Format::OpenAiResponses,
        &render(&conv, Format::OpenAiResponses),
    );
    assert_eq!(calls[2], format!("{}_2", &taken[..62]));
}

#[test]
fn every_validator_rejects_an_over_long_or_odd_id() {
    for f in Format::ALL {
        let max = f.id_len_max();
        let body_with = |id: &str| -> Value {
            match f {
                Format::OpenAiChat => json!({"messages": [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": id, "content": "ok"},
                ]}),
                Format::OpenAiResponses => json!({"input": [
                    {"type": "function_call", "call_id": id, "name": "read", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": id, "output": "ok"},
                ]}),
                Format::Anthropic => json!({
                    "tools": [{"name": "read", "input_schema": {"type": "object"}}],
                    "messages": [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": id, "name": "read", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": id, "content": "ok"}]},
                ]}),
                Format::Gemini => json!({"contents": [
                    {"role": "user", "parts": [{"text": "go"}]},
                    {"role": "model", "parts": [
                        {"functionCall": {"id": id, "name": "read", "args": {}}}]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"id": id, "name": "read", "response": {}}}]},
                ]}),
            }
        };
        let bad_id = match f {
            Format::OpenAiChat => "openai_chat.bad_id",
            Format::OpenAiResponses => "openai_responses.bad_id",
            Format::Anthropic => "anthropic.bad_id",
            Format::Gemini => "gemini.bad_id",
        };
        validate(f, &body_with(&"a".repeat(max))).unwrap_or_else(|v| panic!("{f}: {v}"));
        validate(f, &body_with("A-z_09")).unwrap_or_else(|v| panic!("{f}: {v}"));
        for id in [
            "a".repeat(max + 1),
            "call|1".into(),
            "a+b".into(),
            "a/b".into(),
            "a=".into(),
            "é".into(),
            String::new(),
        ] {
            let v = validate(f, &body_with(&id)).unwrap_err();
            assert_eq!(v.rule, bad_id, "{f}: `{id}`: {v}");
        }
    }
}

#[test]
fn history_text_keeps_argument_numbers_in_every_format() {
    let raw = r#"{"big":123456789012345678901234567890, "dec":0.30000000000000000444, "z":-0, "e":[1E+2,5e-324], "u":"\u00e9\uD83D\uDE00"}"#;
    let conv = calling(&["call_1"], raw);
    for f in Format::ALL {
        let h = body_of(&conv, f);
        let history = render(&conv, f);
        for (key, value) in history.as_object().unwrap() {
            assert_eq!(&h.value()[key], value, "{f}: one rendering");
        }
        let compact = h.to_json();
        let pretty = h.to_json_pretty();
        for text in [&compact, &pretty] {
            let body: Value = serde_json::from_str(text).unwrap();
            validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}"));
            let kept = match f {
                // A string holding the text: compare the string.
                Format::OpenAiChat => {
                    body["messages"][1]["tool_calls"][0]["function"]["arguments"] == raw
                }
                Format::OpenAiResponses => body["input"][1]["arguments"] == raw,
                // An object: its text appears verbatim.
                Format::Anthropic | Format::Gemini => text.contains(raw),
            };
            assert!(kept, "{f}: arguments changed:\n{text}");
        }
    }
}
