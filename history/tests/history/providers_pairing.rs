//! Provider formats' pairing rules (DESIGN.md §6; SCENARIOS.md 23, 24): each validator rejects
//! hand-made bodies that break its pairing of calls and results, and random conversations render
//! with adjacent results that every validator accepts, ids unique and in the format's form.

use crate::common;

use common::conversations::*;
use std::collections::HashSet;

use proptest::prelude::*;
use serde_json::{json, Value};
use tooljournal_history::conversation::{ConvCall, Conversation, Message, ModelSettings};
use tooljournal_history::providers::{
    anthropic_name, provider_id, request_body, stand_in_tools, validate, Format,
};

fn rejected(format: Format, body: &Value) -> &'static str {
    match validate(format, body) {
        Ok(()) => panic!("{format} accepted an invalid body: {body:#}"),
        Err(v) => {
            assert!(!v.message.is_empty());
            assert!(v.to_string().contains(v.rule));
            v.rule
        }
    }
}

// ---- (b) hand-made invalid bodies ----

#[test]
fn openai_chat_rejects_broken_pairing() {
    let f = Format::OpenAiChat;
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}});
    let asst = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|i| call(i)).collect::<Vec<_>>()});
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});
    let u = json!({"role": "user", "content": "hi"});

    let ok = json!({"messages": [u, asst(&["a", "b"]), tool("b"), tool("a")]});
    validate(f, &ok).unwrap();

    // missing result
    let body = json!({"messages": [u, asst(&["a", "b"]), tool("a"), u]});
    assert_eq!(rejected(f, &body), "openai_chat.missing_tool_result");
    let body = json!({"messages": [u, asst(&["a"])]});
    assert_eq!(rejected(f, &body), "openai_chat.missing_tool_result");
    // duplicate result
    let body = json!({"messages": [u, asst(&["a"]), tool("a"), tool("a")]});
    assert_eq!(rejected(f, &body), "openai_chat.duplicate_tool_call_id");
    // duplicate call id in one message
    let body = json!({"messages": [u, asst(&["a", "a"]), tool("a")]});
    assert_eq!(rejected(f, &body), "openai_chat.duplicate_tool_call_id");
    // result for an unknown id
    let body = json!({"messages": [u, asst(&["a"]), tool("a"), tool("z")]});
    assert_eq!(rejected(f, &body), "openai_chat.stray_tool_message");
    // a tool message with no assistant before it
    let body = json!({"messages": [u, tool("a")]});
    assert_eq!(rejected(f, &body), "openai_chat.stray_tool_message");
    // results out of adjacency: a user message in between
    let body = json!({"messages": [u, asst(&["a"]), u, tool("a")]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("openai_chat.missing_tool_result", 1));
    // an assistant message with neither content nor tool calls
    let body = json!({"messages": [u, {"role": "assistant", "content": ""}]});
    assert_eq!(rejected(f, &body), "openai_chat.assistant_content");
    let body = json!({"messages": [u, {"role": "assistant"}]});
    assert_eq!(rejected(f, &body), "openai_chat.assistant_content");
    // shape
    assert_eq!(rejected(f, &json!({"input": []})), "openai_chat.shape");
    let body = json!({"messages": [u, {"role": "assistant", "content": "x", "tool_calls": []}]});
    assert_eq!(rejected(f, &body), "openai_chat.shape");
}

#[test]
fn openai_responses_rejects_broken_pairing() {
    let f = Format::OpenAiResponses;
    let call = |id: &str| json!({"type": "function_call", "call_id": id, "name": "read", "arguments": "{}"});
    let out = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "ok"});
    let u = json!({"type": "message", "role": "user", "content": "hi"});

    let ok = json!({"input": [u, call("a"), call("b"), out("b"), out("a"), u]});
    validate(f, &ok).unwrap();
    // An easy input message may leave out its type.
    validate(f, &json!({"input": [{"role": "user", "content": "hi"}]})).unwrap();

    // missing result
    let body = json!({"input": [u, call("a"), call("b"), out("a")]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("openai_responses.missing_output", 2));
    // duplicate result
    let body = json!({"input": [u, call("a"), out("a"), out("a")]});
    assert_eq!(rejected(f, &body), "openai_responses.duplicate_output");
    // result for an unknown id
    let body = json!({"input": [u, call("a"), out("a"), out("z")]});
    assert_eq!(rejected(f, &body), "openai_responses.orphan_output");
    // out of order: the output before its call
    let body = json!({"input": [u, out("a"), call("a")]});
    assert_eq!(rejected(f, &body), "openai_responses.orphan_output");
    // duplicate call ids, also across turns
    let body = json!({"input": [u, call("a"), out("a"), u, call("a"), out("a")]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("openai_responses.duplicate_id", 4));
    // duplicate item ids
    let body = json!({"input": [
        {"type": "message", "role": "user", "content": "hi", "id": "msg_1"},
        {"type": "message", "role": "user", "content": "again", "id": "msg_1"},
    ]});
    assert_eq!(rejected(f, &body), "openai_responses.duplicate_id");
    // §6 asks only "after it" of Responses, not adjacency: a message in between is accepted.
    let body = json!({"input": [u, call("a"), u, out("a")]});
    validate(f, &body).unwrap();
    // shape
    let body = json!({"input": [{"type": "function_call", "call_id": "a", "name": "x"}]});
    assert_eq!(rejected(f, &body), "openai_responses.shape");
}

#[test]
fn anthropic_rejects_broken_pairing() {
    let f = Format::Anthropic;
    let u = json!({"role": "user", "content": "hi"});
    let text = |t: &str| json!({"type": "text", "text": t});
    let tool_use = |id: &str| json!({"type": "tool_use", "id": id, "name": "read", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let asst = |blocks: Vec<Value>| json!({"role": "assistant", "content": blocks});
    let usr = |blocks: Vec<Value>| json!({"role": "user", "content": blocks});

    let tools = json!([{"name": "read", "input_schema": {"type": "object"}}]);
    let ok = json!({"tools": tools, "messages": [
        u,
        asst(vec![text("reading"), tool_use("a"), tool_use("b")]),
        usr(vec![result("b"), result("a"), text("and then?")]),
        asst(vec![]),
    ]});
    validate(f, &ok).unwrap();

    // missing result
    let body =
        json!({"messages": [u, asst(vec![tool_use("a"), tool_use("b")]), usr(vec![result("a")])]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("anthropic.missing_tool_result", 1));
    let body = json!({"messages": [u, asst(vec![tool_use("a")])]});
    assert_eq!(rejected(f, &body), "anthropic.missing_tool_result");
    // duplicate result
    let body =
        json!({"messages": [u, asst(vec![tool_use("a")]), usr(vec![result("a"), result("a")])]});
    assert_eq!(rejected(f, &body), "anthropic.duplicate_tool_result");
    // two tool_use blocks with one id
    let body =
        json!({"messages": [u, asst(vec![tool_use("a"), tool_use("a")]), usr(vec![result("a")])]});
    assert_eq!(rejected(f, &body), "anthropic.duplicate_tool_use_id");
    // result for an unknown id
    let body =
        json!({"messages": [u, asst(vec![tool_use("a")]), usr(vec![result("a"), result("z")])]});
    assert_eq!(rejected(f, &body), "anthropic.unknown_tool_result");
    let body = json!({"messages": [usr(vec![result("a")])]});
    assert_eq!(rejected(f, &body), "anthropic.unknown_tool_result");
    // results out of adjacency: a user message in between
    let body = json!({"messages": [
        u, asst(vec![tool_use("a")]), usr(vec![text("wait")]), asst(vec![text("ok")]),
        usr(vec![result("a")]),
    ]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("anthropic.missing_tool_result", 1));
    // tool_result not first
    let body =
        json!({"messages": [u, asst(vec![tool_use("a")]), usr(vec![text("here:"), result("a")])]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("anthropic.tool_result_not_first", 2));
    // an error result with empty content
    for content in [json!(""), json!("  "), json!([]), json!(null)] {
        let mut r = json!({"type": "tool_result", "tool_use_id": "a", "is_error": true});
        if !content.is_null() {
            r["content"] = content;
        }
        let body = json!({"messages": [u, asst(vec![tool_use("a")]), usr(vec![r])]});
        assert_eq!(rejected(f, &body), "anthropic.empty_error_result");
    }
    // empty content and empty text
    let body = json!({"messages": [u, asst(vec![]), usr(vec![text("x")])]});
    assert_eq!(rejected(f, &body), "anthropic.empty_content");
    let body = json!({"messages": [{"role": "user", "content": ""}]});
    assert_eq!(rejected(f, &body), "anthropic.empty_content");
    let body = json!({"messages": [usr(vec![text(" ")])]});
    assert_eq!(rejected(f, &body), "anthropic.empty_text");
    validate(
        f,
        &json!({"messages": [u, {"role": "assistant", "content": ""}]}),
    )
    .unwrap();
    // ids and names
    let body =
        json!({"messages": [u, asst(vec![tool_use("call.1")]), usr(vec![result("call.1")])]});
    assert_eq!(rejected(f, &body), "anthropic.bad_id");
    let long = json!({"type": "tool_use", "id": "a", "name": "n".repeat(65), "input": {}});
    let body = json!({"messages": [u, asst(vec![long]), usr(vec![result("a")])]});
    assert_eq!(rejected(f, &body), "anthropic.bad_name");
    // roles
    let body = json!({"messages": [asst(vec![text("hello")])]});
    assert_eq!(rejected(f, &body), "anthropic.first_not_user");
    let body = json!({"messages": [u, u]});
    assert_eq!(rejected(f, &body), "anthropic.roles_alternate");
    // shape
    let body = json!({"messages": [u, asst(vec![json!({"type": "tool_use", "id": "a", "name": "read", "input": "x"})]), usr(vec![result("a")])]});
    assert_eq!(rejected(f, &body), "anthropic.shape");
}

#[test]
fn gemini_rejects_broken_pairing() {
    let f = Format::Gemini;
    let u = json!({"role": "user", "parts": [{"text": "hi"}]});
    let call = |name: &str| json!({"functionCall": {"name": name, "args": {}}});
    let resp =
        |name: &str| json!({"functionResponse": {"name": name, "response": {"content": "ok"}}});
    let model = |parts: Vec<Value>| json!({"role": "model", "parts": parts});
    let usr = |parts: Vec<Value>| json!({"role": "user", "parts": parts});

    let ok = json!({"contents": [
        u, model(vec![call("read"), call("ls")]), usr(vec![resp("read"), resp("ls")]),
        model(vec![call("ls")]), usr(vec![resp("ls"), json!({"text": "and?"})]),
        model(vec![json!({"text": "done"})]),
    ]});
    validate(f, &ok).unwrap();

    // missing result (count mismatch)
    let body =
        json!({"contents": [u, model(vec![call("read"), call("ls")]), usr(vec![resp("read")])]});
    assert_eq!(rejected(f, &body), "gemini.response_count");
    let body = json!({"contents": [u, model(vec![call("read")])]});
    assert_eq!(rejected(f, &body), "gemini.missing_response_turn");
    // duplicate result
    let body =
        json!({"contents": [u, model(vec![call("read")]), usr(vec![resp("read"), resp("read")])]});
    assert_eq!(rejected(f, &body), "gemini.response_count");
    // result for another call
    let body = json!({"contents": [u, model(vec![call("read")]), usr(vec![resp("write")])]});
    assert_eq!(rejected(f, &body), "gemini.response_name_mismatch");
    let body = json!({"contents": [u, model(vec![call("read"), call("ls")]), usr(vec![resp("ls"), resp("read")])]});
    assert_eq!(rejected(f, &body), "gemini.response_name_mismatch");
    // result for an unknown id
    let with_id =
        |key: &str, id: &str| json!({key: {"id": id, "name": "read", "args": {}, "response": {}}});
    let body = json!({"contents": [u, model(vec![with_id("functionCall", "a")]), usr(vec![with_id("functionResponse", "z")])]});
    assert_eq!(rejected(f, &body), "gemini.response_id_mismatch");
    // results out of adjacency: a user turn in between
    let body = json!({"contents": [u, model(vec![call("read")]), u, usr(vec![resp("read")])]});
    let v = validate(f, &body).unwrap_err();
    assert_eq!((v.rule, v.index), ("gemini.response_count", 1));
    // a response turn after no call
    let body =
        json!({"contents": [u, model(vec![json!({"text": "hm"})]), usr(vec![resp("read")])]});
    assert_eq!(rejected(f, &body), "gemini.stray_function_response");
    // a call turn right after a model turn, or first
    let body = json!({"contents": [u, model(vec![json!({"text": "hm"})]), model(vec![call("read")]), usr(vec![resp("read")])]});
    assert_eq!(rejected(f, &body), "gemini.call_turn_position");
    let body = json!({"contents": [model(vec![call("read")]), usr(vec![resp("read")])]});
    assert_eq!(rejected(f, &body), "gemini.call_turn_position");
    // shape
    let body = json!({"contents": [{"role": "user", "parts": []}]});
    assert_eq!(rejected(f, &body), "gemini.shape");
    let body = json!({"contents": [usr(vec![call("read")])]});
    assert_eq!(rejected(f, &body), "gemini.shape");
}

// ---- (c) random conversations ----

/// The rendered (call ids, call names) and result ids, in document order.
fn rendered_ids(format: Format, body: &Value) -> (Vec<String>, Vec<String>, Vec<String>) {
    let s = |v: &Value| v.as_str().unwrap().to_string();
    let (mut calls, mut names, mut results) = (Vec::new(), Vec::new(), Vec::new());
    match format {
        Format::OpenAiChat => {
            for m in body["messages"].as_array().unwrap() {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    calls.push(s(&c["id"]));
                    names.push(s(&c["function"]["name"]));
                }
                if m["role"] == "tool" {
                    results.push(s(&m["tool_call_id"]));
                }
            }
        }
        Format::OpenAiResponses => {
            for i in body["input"].as_array().unwrap() {
                match i["type"].as_str().unwrap() {
                    "function_call" => {
                        calls.push(s(&i["call_id"]));
                        names.push(s(&i["name"]));
                    }
                    "function_call_output" => results.push(s(&i["call_id"])),
                    _ => {}
                }
            }
        }
        Format::Anthropic => {
            for m in body["messages"].as_array().unwrap() {
                for b in m["content"].as_array().unwrap() {
                    match b["type"].as_str().unwrap() {
                        "tool_use" => {
                            calls.push(s(&b["id"]));
                            names.push(s(&b["name"]));
                        }
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
                        names.push(s(&call["name"]));
                    }
                    if let Some(r) = p.get("functionResponse") {
                        results.push(s(&r["id"]));
                    }
                }
            }
        }
    }
    (calls, names, results)
}

/// How many pieces of provider state `format` should send back for `conv`: each kept
/// assistant message's own state (the format's, not another's) as the format takes it.
fn expected_state(format: Format, conv: &Conversation) -> usize {
    conv.messages
        .iter()
        .map(|m| match m {
            Message::Assistant {
                text,
                calls,
                state: Some(state),
            } if state.format == format.as_str() => {
                let parsed: Value = serde_json::from_str(&state.items).unwrap_or(Value::Null);
                let of_type = |types: &[&str]| {
                    parsed.as_array().map_or(0, |items| {
                        items
                            .iter()
                            .filter(|i| types.contains(&i["type"].as_str().unwrap_or("")))
                            .count()
                    })
                };
                let blank = text.trim().is_empty();
                match format {
                    Format::Anthropic if blank && calls.is_empty() => 0,
                    Format::Anthropic => of_type(&["thinking", "redacted_thinking"]),
                    Format::OpenAiResponses if text.is_empty() && calls.is_empty() => 0,
                    Format::OpenAiResponses => of_type(&["reasoning"]),
                    Format::Gemini if text.is_empty() && calls.is_empty() => 0,
                    Format::Gemini if parsed.is_object() => {
                        usize::from(parsed["text"].is_string())
                            + parsed["calls"].as_array().map_or(0, |sigs| {
                                sigs.iter()
                                    .take(calls.len())
                                    .filter(|s| s.is_string())
                                    .count()
                            })
                    }
                    _ => 0,
                }
            }
            _ => 0,
        })
        .sum()
}

/// The pieces of provider state `body` sends back, counted by every format's shape.
fn rendered_state(body: &Value) -> [usize; 3] {
    let (mut thinking, mut reasoning, mut signatures) = (0, 0, 0);
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")) {
                thinking += 1;
            }
        }
    }
    for i in body["input"].as_array().into_iter().flatten() {
        if i["type"] == "reasoning" {
            reasoning += 1;
        }
    }
    for c in body["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            if p.get("thoughtSignature").is_some() {
                signatures += 1;
            }
        }
    }
    [thinking, reasoning, signatures]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn scenario_24_random_conversations_render_adjacent_results_every_validator_accepts(conv in conversation_strategy()) {
        let originals: Vec<&ConvCall> = conv
            .messages
            .iter()
            .flat_map(|m| match m {
                Message::Assistant { calls, .. } => calls.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        let tools = stand_in_tools(&conv);
        for f in Format::ALL {
            let body = request_body(&conv, &tools, &ModelSettings::default(), f).value();
            if let Err(v) = validate(f, &body) {
                return Err(TestCaseError::fail(format!("{f}: {v}\n{body:#}")));
            }
            let again = request_body(&conv, &tools, &ModelSettings::default(), f).value();
            prop_assert_eq!(&again, &body, "{} is deterministic", f);
            // Each message's own state goes back to its own format, and to no other.
            let want = expected_state(f, &conv);
            let got = rendered_state(&body);
            let own = match f {
                Format::Anthropic => [want, 0, 0],
                Format::OpenAiResponses => [0, want, 0],
                Format::Gemini => [0, 0, want],
                Format::OpenAiChat => [0, 0, 0],
            };
            prop_assert_eq!(got, own, "{}: provider state", f);

            let (calls, names, results) = rendered_ids(f, &body);
            // No call lost, each answered once, in order, by its call's id.
            prop_assert_eq!(calls.len(), originals.len(), "{}", f);
            prop_assert_eq!(&results, &calls, "{}: result ids equal their calls' ids", f);
            // Distinct calls keep distinct ids (repeats made unique, mapping injective).
            let distinct: HashSet<&String> = calls.iter().collect();
            prop_assert_eq!(distinct.len(), calls.len(), "{}: ids stay distinct: {:?}", f, calls);
            // Every id in the format's form.
            for id in &calls {
                prop_assert!(
                    !id.is_empty()
                        && id.len() <= f.id_len_max()
                        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                    "{}: id `{}` is not in the format's form", f, id
                );
            }
            // The first call with an id keeps its mapped form (alike for call and result).
            let mut seen = HashSet::new();
            for ((orig, id), name) in originals.iter().zip(&calls).zip(&names) {
                let want_id = provider_id(f, &orig.id);
                let want_name = match f {
                    Format::Anthropic => anthropic_name(&orig.name),
                    _ => orig.name.clone(),
                };
                if seen.insert(orig.id.as_str()) {
                    prop_assert_eq!(id, &want_id, "{}", f);
                }
                prop_assert_eq!(name, &want_name, "{}", f);
            }
        }
    }
}
