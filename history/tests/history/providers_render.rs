//! Provider formats: rendering a conversation into each provider's layout (DESIGN.md §6;
//! SCENARIOS.md 25): format names, a realistic conversation rendered and validated in every
//! format, call ids and tool names mapped to each provider's allowed form.

use serde_json::json;
use sha2::{Digest, Sha256};
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ToolSpec,
};
use tooljournal_history::providers::{
    anthropic_name, provider_id, render, request_body, stand_in_tools, validate, Format,
};

fn hash8(s: &str) -> String {
    hex::encode(&Sha256::digest(s.as_bytes())[..4])
}

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

fn assistant(text: &str, calls: &[(&str, &str, &str)]) -> Message {
    Message::Assistant {
        text: text.into(),
        calls: calls
            .iter()
            .map(|(id, name, arguments)| ConvCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        state: None,
    }
}

fn results(results: &[(&str, &str, &str, bool)]) -> Message {
    Message::Results {
        results: results
            .iter()
            .map(|(id, name, content, is_error)| ConvResult {
                id: (*id).into(),
                name: (*name).into(),
                content: (*content).into(),
                is_error: *is_error,
            })
            .collect(),
    }
}

/// Two turns, parallel calls, an error result, invalid-JSON arguments, an id Anthropic refuses.
fn sample() -> Conversation {
    Conversation {
        system: Some("You are careful.".into()),
        messages: vec![
            user("Read a.txt and b.txt, then write c.txt."),
            assistant(
                "Reading both.",
                &[
                    ("call.1/x", "read", r#"{"path":"a.txt"}"#),
                    ("call_2", "read", r#"{"path":"b.txt"}"#),
                    ("call_3", "write", r#"{"path": "c.txt", "#),
                ],
            ),
            results(&[
                ("call.1/x", "read", "alpha", false),
                (
                    "call_2",
                    "read",
                    "TOOL_OUTCOME_UNKNOWN: started, never settled",
                    true,
                ),
                (
                    "call_3",
                    "write",
                    "INVALID_ARGUMENTS: expected value at line 1 column 18",
                    true,
                ),
            ]),
            user("Now summarize."),
            assistant("", &[("call_4", "summarize", "{}")]),
            results(&[("call_4", "summarize", "a summary", false)]),
            assistant("Done.", &[]),
        ],
    }
}

/// The tools `sample` calls, with their schemas.
fn sample_tools() -> Vec<ToolSpec> {
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}},
                      "required": ["path"]});
    vec![
        ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            input_schema: path.clone(),
        },
        ToolSpec {
            name: "write".into(),
            description: "Write a file.".into(),
            input_schema: path,
        },
        ToolSpec {
            name: "summarize".into(),
            description: "Summarize.".into(),
            input_schema: json!({"type": "object"}),
        },
    ]
}

/// `conv` as a request body with stand-ins for the tools it calls, as a `Value`.
fn with_stand_ins(conv: &Conversation, f: Format) -> serde_json::Value {
    request_body(conv, &stand_in_tools(conv), &ModelSettings::default(), f).value()
}

// ---- the format names ----

#[test]
fn format_names_round_trip() {
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(
        names,
        ["openai-chat", "openai-responses", "anthropic", "gemini"]
    );
    for f in Format::ALL {
        assert_eq!(f.as_str().parse::<Format>(), Ok(f));
        assert_eq!(f.to_string(), f.as_str());
    }
    let err = "openai".parse::<Format>().unwrap_err();
    assert!(err.to_string().contains("openai-chat"), "{err}");
}

// ---- (a) a realistic conversation renders and validates ----

#[test]
fn sample_renders_valid_in_every_format() {
    let conv = sample();
    let settings = ModelSettings {
        max_tokens: Some(1000),
        temperature: Some(0.5),
    };
    for f in Format::ALL {
        let body = request_body(&conv, &sample_tools(), &settings, f).value();
        validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}\n{body:#}"));
        let again = request_body(&conv, &sample_tools(), &settings, f).value();
        assert_eq!(again, body, "{f}: rendering is deterministic");
        // The history is the history `render` gives, whatever else the body holds.
        let history = render(&conv, f);
        for (key, value) in history.as_object().unwrap() {
            assert_eq!(&body[key], value, "{f}: `{key}`");
        }
    }
}

#[test]
fn openai_chat_sample() {
    let body = render(&sample(), Format::OpenAiChat);
    let mapped = format!("call_1_x_{}", hash8("call.1/x"));
    assert_eq!(
        body,
        json!({"messages": [
            {"role": "system", "content": "You are careful."},
            {"role": "user", "content": "Read a.txt and b.txt, then write c.txt."},
            {"role": "assistant", "content": "Reading both.", "tool_calls": [
                {"id": mapped, "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"b.txt\"}"}},
                {"id": "call_3", "type": "function",
                 "function": {"name": "write", "arguments": "{\"path\": \"c.txt\", "}},
            ]},
            {"role": "tool", "tool_call_id": mapped, "content": "alpha"},
            {"role": "tool", "tool_call_id": "call_2",
             "content": "TOOL_OUTCOME_UNKNOWN: started, never settled"},
            {"role": "tool", "tool_call_id": "call_3",
             "content": "INVALID_ARGUMENTS: expected value at line 1 column 18"},
            {"role": "user", "content": "Now summarize."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_4", "type": "function",
                 "function": {"name": "summarize", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_4", "content": "a summary"},
            {"role": "assistant", "content": "Done."},
        ]})
    );
}

#[test]
fn openai_responses_sample() {
    let body = render(&sample(), Format::OpenAiResponses);
    let input = body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "message",
            "function_call",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "function_call_output",
            "message",
            "function_call",
            "function_call_output",
            "message",
        ]
    );
    assert_eq!(input[0]["role"], "system");
    assert_eq!(
        input[3],
        json!({"type": "function_call", "call_id": format!("call_1_x_{}", hash8("call.1/x")), "name": "read",
               "arguments": "{\"path\":\"a.txt\"}"})
    );
    assert_eq!(
        input[7],
        json!({"type": "function_call_output", "call_id": "call_2",
               "output": "TOOL_OUTCOME_UNKNOWN: started, never settled"})
    );
    assert_eq!(input[12]["content"], "Done.");
}

#[test]
fn anthropic_sample() {
    let body = render(&sample(), Format::Anthropic);
    let mapped = format!("call_1_x_{}", hash8("call.1/x"));
    assert_eq!(provider_id(Format::Anthropic, "call.1/x"), mapped);
    assert_eq!(
        body,
        json!({
            "system": "You are careful.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Read a.txt and b.txt, then write c.txt."}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": mapped, "name": "read",
                     "input": {"path": "a.txt"}},
                    {"type": "tool_use", "id": "call_2", "name": "read",
                     "input": {"path": "b.txt"}},
                    {"type": "tool_use", "id": "call_3", "name": "write",
                     "input": {"_raw_arguments": "{\"path\": \"c.txt\", "}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": mapped, "content": "alpha",
                     "is_error": false},
                    {"type": "tool_result", "tool_use_id": "call_2",
                     "content": "TOOL_OUTCOME_UNKNOWN: started, never settled",
                     "is_error": true},
                    {"type": "tool_result", "tool_use_id": "call_3",
                     "content": "INVALID_ARGUMENTS: expected value at line 1 column 18",
                     "is_error": true},
                    {"type": "text", "text": "Now summarize."},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_4", "name": "summarize", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_4", "content": "a summary",
                     "is_error": false}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            ]
        })
    );
}

#[test]
fn gemini_sample() {
    let body = render(&sample(), Format::Gemini);
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "You are careful."}]})
    );
    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user", "model", "user", "model"]);
    assert_eq!(contents[1]["parts"][0], json!({"text": "Reading both."}));
    assert_eq!(
        contents[1]["parts"][3],
        json!({"functionCall": {"id": "call_3", "name": "write",
                                "args": {"_raw_arguments": "{\"path\": \"c.txt\", "}}})
    );
    assert_eq!(
        contents[2]["parts"],
        json!([
            {"functionResponse": {"id": format!("call_1_x_{}", hash8("call.1/x")), "name": "read",
                                  "response": {"content": "alpha", "is_error": false}}},
            {"functionResponse": {"id": "call_2", "name": "read",
                                  "response": {"content": "TOOL_OUTCOME_UNKNOWN: started, never settled",
                                               "is_error": true}}},
            {"functionResponse": {"id": "call_3", "name": "write",
                                  "response": {"content": "INVALID_ARGUMENTS: expected value at line 1 column 18",
                                               "is_error": true}}},
            {"text": "Now summarize."},
        ])
    );
}

// ---- id and name mapping ----

#[test]
fn ids_and_names_map_to_the_allowed_form() {
    for f in Format::ALL {
        let id = |s: &str| provider_id(f, s);
        assert_eq!(id("toolu_01-AbC"), "toolu_01-AbC");
        assert_eq!(id(""), format!("_{}", hash8("")));
        assert_ne!(id("a.b"), id("a/b"));
        assert_ne!(id("a.b"), id("a_b"));
        assert_eq!(id("é"), format!("__{}", hash8("é")));
        let at_max = "x".repeat(f.id_len_max());
        assert_eq!(id(&at_max), at_max, "{f}");
        let over = "x".repeat(f.id_len_max() + 1);
        let head = "x".repeat(f.id_len_max() - 9);
        assert_eq!(id(&over), format!("{head}_{}", hash8(&over)), "{f}");
    }
    assert_eq!(Format::OpenAiChat.id_len_max(), 40);
    assert_eq!(Format::OpenAiResponses.id_len_max(), 64);

    assert_eq!(anthropic_name("read_file"), "read_file");
    let long_ok = "x".repeat(64);
    assert_eq!(anthropic_name(&long_ok), long_ok);
    let too_long = "y".repeat(65);
    let mapped = anthropic_name(&too_long);
    assert_eq!(mapped.len(), 64);
    assert_eq!(mapped, format!("{}_{}", "y".repeat(55), hash8(&too_long)));
    assert_eq!(anthropic_name(""), format!("_{}", hash8("")));
    assert_eq!(
        anthropic_name("mcp.server/tool"),
        format!("mcp_server_tool_{}", hash8("mcp.server/tool"))
    );
}

#[test]
fn a_call_id_reused_in_a_later_message_becomes_unique_for_call_and_result() {
    let conv = Conversation {
        system: None,
        messages: vec![
            user("go"),
            assistant("", &[("call_1", "read", "{}")]),
            results(&[("call_1", "read", "one", false)]),
            assistant("", &[("call_1", "read", "{}"), ("call_1_2", "read", "{}")]),
            results(&[
                ("call_1", "read", "two", false),
                ("call_1_2", "read", "three", false),
            ]),
        ],
    };
    let body = render(&conv, Format::OpenAiResponses);
    validate(Format::OpenAiResponses, &body).unwrap();
    let ids: Vec<(&str, &str)> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| Some((i["type"].as_str()?, i["call_id"].as_str()?)))
        .collect();
    assert_eq!(
        ids,
        [
            ("function_call", "call_1"),
            ("function_call_output", "call_1"),
            // `call_1_2` is taken by a call of its own, so the repeat becomes `call_1_3`.
            ("function_call", "call_1_3"),
            ("function_call", "call_1_2"),
            ("function_call_output", "call_1_3"),
            ("function_call_output", "call_1_2"),
        ]
    );
    for f in Format::ALL {
        validate(f, &with_stand_ins(&conv, f)).unwrap_or_else(|v| panic!("{f}: {v}"));
    }
}

#[test]
fn empty_assistant_messages_are_dropped_and_a_history_starts_with_the_user() {
    let conv = Conversation {
        system: Some("   ".into()),
        messages: vec![
            assistant("", &[]),
            assistant("thinking aloud", &[]),
            assistant("", &[("c1", "ls", "")]),
            results(&[("c1", "ls", "", true)]),
        ],
    };
    for f in Format::ALL {
        let body = with_stand_ins(&conv, f);
        validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}\n{body:#}"));
        assert!(body.get("system").is_none() && body.get("systemInstruction").is_none());
    }
    let chat = render(&conv, Format::OpenAiChat);
    assert_eq!(chat["messages"].as_array().unwrap().len(), 3);
    let anthropic = render(&conv, Format::Anthropic);
    let messages = anthropic["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    // The two assistant messages merge into one turn: text first, then the tool_use.
    assert_eq!(messages[1]["content"][0]["text"], "thinking aloud");
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(
        messages[1]["content"][1]["input"],
        json!({"_raw_arguments": ""})
    );
    assert_eq!(messages[2]["content"][0]["is_error"], true);
    assert!(!messages[2]["content"][0]["content"]
        .as_str()
        .unwrap()
        .is_empty());
}
