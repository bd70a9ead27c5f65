//! Whole request bodies: the history with the tools (and their input schemas) and settings in
//! each provider's documented shape, and each assistant message's provider state sent back to
//! the provider that produced it, in the place that provider takes it, and to no other.

use serde_json::{json, Value};
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ProviderState, ToolSpec,
};
use tooljournal_history::providers::{
    anthropic_name, history, request_body, validate, Format, ANTHROPIC_MAX_TOKENS_DEFAULT,
};

fn call(id: &str, name: &str, arguments: &str) -> ConvCall {
    ConvCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn result(id: &str, name: &str, content: &str) -> ConvResult {
    ConvResult {
        id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error: false,
    }
}

fn state(format: &str, items: &str) -> Option<ProviderState> {
    Some(ProviderState {
        format: format.into(),
        items: items.into(),
    })
}

/// A system prompt, a user message, an assistant message with text and two calls (with
/// `state`), their results, and a closing assistant message.
fn conversation(state: Option<ProviderState>) -> Conversation {
    Conversation {
        system: Some("You are careful.".into()),
        messages: vec![
            Message::User {
                text: "Read a.txt, then list the server's files.".into(),
            },
            Message::Assistant {
                text: "Reading.".into(),
                calls: vec![
                    call("call_1", "read", r#"{"path":"a.txt"}"#),
                    call("call_2", "mcp.fs/list", "{}"),
                ],
                state,
            },
            Message::Results {
                results: vec![
                    result("call_1", "read", "alpha"),
                    result("call_2", "mcp.fs/list", "a.txt"),
                ],
            },
            Message::Assistant {
                text: "Done.".into(),
                calls: vec![],
                state: None,
            },
        ],
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}),
        },
        ToolSpec {
            name: "mcp.fs/list".into(),
            description: "List files.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        },
    ]
}

fn settings() -> ModelSettings {
    ModelSettings {
        max_tokens: Some(1000),
        temperature: Some(0.25),
    }
}

#[test]
fn every_format_has_the_tools_and_settings_in_its_providers_shape() {
    let conv = conversation(None);
    let [read, list] = [&tools()[0], &tools()[1]].map(|t| t.input_schema.clone());
    for f in Format::ALL {
        let body = request_body(&conv, &tools(), &settings(), f).value();
        validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}\n{body:#}"));
        // The history is `history`'s, whole.
        let history = history(&conv, f).value();
        for (key, value) in history.as_object().unwrap() {
            assert_eq!(&body[key], value, "{f}: `{key}`");
        }
        // Only the model, the stream flag and the credentials are left to add.
        for key in ["model", "stream"] {
            assert!(body.get(key).is_none(), "{f}: `{key}`");
        }
        let mut extra = body.as_object().unwrap().clone();
        extra.retain(|k, _| !history.as_object().unwrap().contains_key(k));
        let want = match f {
            Format::OpenAiChat => json!({
                "tools": [
                    {"type": "function", "function": {"name": "read",
                        "description": "Read a file.", "parameters": read}},
                    {"type": "function", "function": {"name": "mcp.fs/list",
                        "description": "List files.", "parameters": list}},
                ],
                "max_completion_tokens": 1000,
                "temperature": 0.25,
            }),
            Format::OpenAiResponses => json!({
                "tools": [
                    {"type": "function", "name": "read", "description": "Read a file.",
                     "parameters": read, "strict": false},
                    {"type": "function", "name": "mcp.fs/list", "description": "List files.",
                     "parameters": list, "strict": false},
                ],
                "max_output_tokens": 1000,
                "temperature": 0.25,
            }),
            Format::Anthropic => json!({
                "tools": [
                    {"name": "read", "description": "Read a file.", "input_schema": read},
                    {"name": anthropic_name("mcp.fs/list"), "description": "List files.",
                     "input_schema": list},
                ],
                "max_tokens": 1000,
                "temperature": 0.25,
            }),
            Format::Gemini => json!({
                "tools": [{"functionDeclarations": [
                    {"name": "read", "description": "Read a file.",
                     "parametersJsonSchema": read},
                    {"name": "mcp.fs/list", "description": "List files.",
                     "parametersJsonSchema": list},
                ]}],
                "generationConfig": {"maxOutputTokens": 1000, "temperature": 0.25},
            }),
        };
        assert_eq!(Value::Object(extra), want, "{f}");
    }
    // Anthropic's tool names are the names its tool_use blocks call.
    let body = request_body(&conv, &tools(), &settings(), Format::Anthropic).value();
    assert_eq!(
        body["messages"][1]["content"][2]["name"],
        body["tools"][1]["name"]
    );
    // The system prompt is where each provider takes it.
    let system = |f| request_body(&conv, &tools(), &settings(), f).value();
    assert_eq!(
        system(Format::OpenAiChat)["messages"][0],
        json!({"role": "system", "content": "You are careful."})
    );
    assert_eq!(
        system(Format::OpenAiResponses)["input"][0],
        json!({"type": "message", "role": "system", "content": "You are careful."})
    );
    assert_eq!(system(Format::Anthropic)["system"], "You are careful.");
    assert_eq!(
        system(Format::Gemini)["systemInstruction"],
        json!({"parts": [{"text": "You are careful."}]})
    );
}

#[test]
fn settings_left_unset_and_no_tools_are_left_out_but_anthropic_always_has_max_tokens() {
    let conv = Conversation {
        system: None,
        messages: vec![Message::User { text: "hi".into() }],
    };
    for f in Format::ALL {
        let body = request_body(&conv, &[], &ModelSettings::default(), f).value();
        validate(f, &body).unwrap_or_else(|v| panic!("{f}: {v}"));
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let want: &[&str] = match f {
            Format::OpenAiChat => &["messages"],
            Format::OpenAiResponses => &["input"],
            Format::Anthropic => &["max_tokens", "messages"],
            Format::Gemini => &["contents"],
        };
        assert_eq!(keys, want, "{f}");
    }
    let body = request_body(&conv, &[], &ModelSettings::default(), Format::Anthropic).value();
    assert_eq!(body["max_tokens"], ANTHROPIC_MAX_TOKENS_DEFAULT);
    // Only a temperature: Gemini's config holds just that.
    let warm = ModelSettings {
        max_tokens: None,
        temperature: Some(1.0),
    };
    let body = request_body(&conv, &[], &warm, Format::Gemini).value();
    assert_eq!(body["generationConfig"], json!({"temperature": 1.0}));
}

#[test]
fn request_body_text_keeps_argument_numbers() {
    let raw = r#"{"n":123456789012345678901234567890}"#;
    let mut conv = conversation(None);
    if let Message::Assistant { calls, .. } = &mut conv.messages[1] {
        calls[0].arguments = raw.into();
    }
    for f in [Format::Anthropic, Format::Gemini] {
        let text = request_body(&conv, &tools(), &settings(), f).to_json();
        assert!(text.contains(raw), "{f}: {text}");
    }
}

// ---- Anthropic requires tools with tool blocks ----

#[test]
fn anthropic_rejects_tool_blocks_without_tools() {
    let f = Format::Anthropic;
    let conv = conversation(None);
    for body in [
        history(&conv, f).value(),
        request_body(&conv, &[], &settings(), f).value(),
    ] {
        let v = validate(f, &body).unwrap_err();
        // The first message holding a tool_use block.
        assert_eq!((v.rule, v.index), ("anthropic.tools_missing", 1), "{v}");
    }
    let mut empty = request_body(&conv, &tools(), &settings(), f).value();
    empty["tools"] = json!([]);
    assert_eq!(
        validate(f, &empty).unwrap_err().rule,
        "anthropic.tools_missing"
    );
    // No tool blocks, no tools needed.
    let plain = json!({"messages": [{"role": "user", "content": "hi"}]});
    validate(f, &plain).unwrap();
}

#[test]
fn anthropic_checks_the_tools_it_is_given() {
    let f = Format::Anthropic;
    let body = |tools: Value| {
        let mut b = request_body(&conversation(None), &[], &settings(), f).value();
        b["tools"] = tools;
        b
    };
    let schema = json!({"type": "object"});
    let named = |name: &str| json!({"name": name, "input_schema": schema});
    let ok = body(json!([
        named("read"),
        named(&anthropic_name("mcp.fs/list"))
    ]));
    validate(f, &ok).unwrap();
    let rule = |b: &Value| validate(f, b).unwrap_err().rule;
    assert_eq!(
        rule(&body(json!([named("read"), named("read")]))),
        "anthropic.duplicate_tool_name"
    );
    assert_eq!(
        rule(&body(json!([named("mcp.fs/list")]))),
        "anthropic.bad_name"
    );
    assert_eq!(rule(&body(json!([{"name": "read"}]))), "anthropic.shape");
    assert_eq!(rule(&body(json!({"name": "read"}))), "anthropic.shape");
    // A server tool has a type of its own and no input schema.
    let server = json!([named("read"), {"type": "web_search_20250305", "name": "web_search"}]);
    validate(f, &body(server)).unwrap();
}

// ---- provider state ----

/// Anthropic's state as an adapter keeps it: the blocks verbatim (spacing and key order
/// included), and one that is not thinking, which is not sent back.
const ANTHROPIC_STATE: &str = r#"[{"type": "thinking", "thinking": "Read first.", "signature": "c2lnLTE="}, {"type":"redacted_thinking","data":"ZW5j"}, {"type": "text", "text": "stray"}]"#;
const RESPONSES_STATE: &str = r#"[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA"},{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"ok"}]}]"#;
const GEMINI_STATE: &str = r#"{"text": "c2lnLXQ=", "calls": [null, "c2lnLWM="]}"#;

#[test]
fn anthropic_state_is_its_thinking_blocks_first_in_the_assistant_message_verbatim() {
    let conv = conversation(state("anthropic", ANTHROPIC_STATE));
    let h = request_body(&conv, &tools(), &settings(), Format::Anthropic);
    let body = h.value();
    validate(Format::Anthropic, &body).unwrap_or_else(|v| panic!("{v}\n{body:#}"));
    let content = body["messages"][1]["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "thinking",
            "redacted_thinking",
            "text",
            "tool_use",
            "tool_use"
        ]
    );
    assert_eq!(
        content[0],
        json!({"type": "thinking", "thinking": "Read first.", "signature": "c2lnLTE="})
    );
    assert_eq!(
        content[1],
        json!({"type": "redacted_thinking", "data": "ZW5j"})
    );
    // Byte for byte, as the provider sent it.
    let text = h.to_json();
    assert!(
        text.contains(
            r#"{"type": "thinking", "thinking": "Read first.", "signature": "c2lnLTE="}"#
        ),
        "{text}"
    );
    assert!(!text.contains("stray"), "{text}");
}

#[test]
fn responses_state_is_its_reasoning_items_right_before_the_assistants_own_items() {
    let conv = conversation(state("openai-responses", RESPONSES_STATE));
    let body = request_body(&conv, &tools(), &settings(), Format::OpenAiResponses).value();
    validate(Format::OpenAiResponses, &body).unwrap_or_else(|v| panic!("{v}\n{body:#}"));
    let input = body["input"].as_array().unwrap();
    let kinds: Vec<String> = input
        .iter()
        .map(|i| match i["type"].as_str().unwrap() {
            "message" => format!("message:{}", i["role"].as_str().unwrap()),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message:system",
            "message:user",
            "reasoning",
            "reasoning",
            "message:assistant",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message:assistant",
        ]
    );
    let items: Value = serde_json::from_str(RESPONSES_STATE).unwrap();
    assert_eq!(input[2], items[0]);
    assert_eq!(input[3], items[1]);
}

#[test]
fn gemini_state_is_the_thought_signatures_on_the_text_part_and_each_call_part() {
    let conv = conversation(state("gemini", GEMINI_STATE));
    let body = request_body(&conv, &tools(), &settings(), Format::Gemini).value();
    validate(Format::Gemini, &body).unwrap_or_else(|v| panic!("{v}\n{body:#}"));
    let parts = body["contents"][1]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        parts[0],
        json!({"text": "Reading.", "thoughtSignature": "c2lnLXQ="})
    );
    assert!(parts[1].get("thoughtSignature").is_none(), "{:#}", parts[1]);
    assert_eq!(parts[1]["functionCall"]["name"], "read");
    assert_eq!(parts[2]["thoughtSignature"], "c2lnLWM=");
    assert_eq!(parts[2]["functionCall"]["name"], "mcp.fs/list");

    // A signature that came on empty text still goes back, on an empty text part.
    let mut conv = conversation(state("gemini", r#"{"text": "c2ln", "calls": []}"#));
    if let Message::Assistant { text, .. } = &mut conv.messages[1] {
        text.clear();
    }
    let body = request_body(&conv, &tools(), &settings(), Format::Gemini).value();
    validate(Format::Gemini, &body).unwrap();
    assert_eq!(
        body["contents"][1]["parts"][0],
        json!({"text": "", "thoughtSignature": "c2ln"})
    );
}

#[test]
fn state_goes_to_its_own_format_only() {
    let states = [
        ("anthropic", ANTHROPIC_STATE),
        ("openai-responses", RESPONSES_STATE),
        ("gemini", GEMINI_STATE),
        ("openai-chat", "[]"),
    ];
    for (from, items) in states {
        let conv = conversation(state(from, items));
        for f in Format::ALL {
            let body = request_body(&conv, &tools(), &settings(), f).value();
            validate(f, &body).unwrap_or_else(|v| panic!("{from} in {f}: {v}"));
            if f.as_str() != from {
                assert_eq!(
                    body,
                    request_body(&conversation(None), &tools(), &settings(), f).value(),
                    "{from}'s state in {f}"
                );
            }
        }
    }
    // Own-format state that is not in the format's shape is not sent.
    for (f, junk) in [
        (Format::Anthropic, "not json"),
        (Format::OpenAiResponses, r#"{"type":"reasoning"}"#),
        (Format::Gemini, "[1,2]"),
    ] {
        let body = request_body(
            &conversation(state(f.as_str(), junk)),
            &tools(),
            &settings(),
            f,
        );
        assert_eq!(
            body.value(),
            request_body(&conversation(None), &tools(), &settings(), f).value(),
            "{f}"
        );
    }
}

#[test]
fn anthropic_merged_assistant_messages_keep_all_thinking_first() {
    let conv = Conversation {
        system: None,
        messages: vec![
            Message::User { text: "go".into() },
            Message::Assistant {
                text: "First.".into(),
                calls: vec![],
                state: state(
                    "anthropic",
                    r#"[{"type":"thinking","thinking":"a","signature":"s1"}]"#,
                ),
            },
            Message::Assistant {
                text: String::new(),
                calls: vec![call("c1", "read", "{}")],
                state: state("anthropic", r#"[{"type":"redacted_thinking","data":"d"}]"#),
            },
            Message::Results {
                results: vec![result("c1", "read", "ok")],
            },
        ],
    };
    let body = request_body(&conv, &tools(), &settings(), Format::Anthropic).value();
    validate(Format::Anthropic, &body).unwrap_or_else(|v| panic!("{v}\n{body:#}"));
    let kinds: Vec<&str> = body["messages"][1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["thinking", "redacted_thinking", "text", "tool_use"]);
}

#[test]
fn validators_check_provider_state_where_it_goes() {
    let a = Format::Anthropic;
    let tools = json!([{"name": "read", "input_schema": {"type": "object"}}]);
    let thinking = json!({"type": "thinking", "thinking": "t", "signature": "s"});
    let text = json!({"type": "text", "text": "x"});
    let asst = |blocks: Value| {
        json!({"tools": tools, "messages": [
        {"role": "user", "content": "go"}, {"role": "assistant", "content": blocks}]})
    };
    validate(a, &asst(json!([thinking, text]))).unwrap();
    let v = validate(a, &asst(json!([text, thinking]))).unwrap_err();
    assert_eq!((v.rule, v.index), ("anthropic.thinking_not_first", 1));
    let v = validate(
        a,
        &asst(json!([{"type": "thinking", "thinking": "t"}, text])),
    )
    .unwrap_err();
    assert_eq!(v.rule, "anthropic.shape", "{v}");
    let v = validate(a, &asst(json!([{"type": "redacted_thinking"}, text]))).unwrap_err();
    assert_eq!(v.rule, "anthropic.shape", "{v}");
    let in_user = json!({"messages": [{"role": "user", "content": [thinking]}]});
    assert_eq!(validate(a, &in_user).unwrap_err().rule, "anthropic.shape");

    let r = Format::OpenAiResponses;
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": []});
    let user = json!({"type": "message", "role": "user", "content": "go"});
    let said = json!({"type": "message", "role": "assistant", "content": "ok"});
    let fcall = json!({"type": "function_call", "call_id": "c", "name": "read", "arguments": "{}"});
    let output = json!({"type": "function_call_output", "call_id": "c", "output": "ok"});
    validate(r, &json!({"input": [user, reasoning, said]})).unwrap();
    validate(r, &json!({"input": [user, reasoning, fcall, output]})).unwrap();
    for alone in [
        json!({"input": [user, reasoning]}),
        json!({"input": [user, reasoning, user]}),
        json!({"input": [user, fcall, reasoning, output]}),
    ] {
        let v = validate(r, &alone).unwrap_err();
        assert_eq!(v.rule, "openai_responses.reasoning_alone", "{alone}: {v}");
    }
    let no_summary = json!({"input": [user, {"type": "reasoning", "id": "rs_1"}, said]});
    assert_eq!(
        validate(r, &no_summary).unwrap_err().rule,
        "openai_responses.shape"
    );

    let g = Format::Gemini;
    let go = json!({"role": "user", "parts": [{"text": "go"}]});
    validate(
        g,
        &json!({"contents": [go, {"role": "model", "parts": [{"text": "ok", "thoughtSignature": "s"}]}]}),
    )
    .unwrap();
    for bad in [
        json!({"contents": [{"role": "user", "parts": [{"text": "go", "thoughtSignature": "s"}]}]}),
        json!({"contents": [go, {"role": "model", "parts": [{"text": "ok", "thoughtSignature": 7}]}]}),
    ] {
        assert_eq!(validate(g, &bad).unwrap_err().rule, "gemini.shape", "{bad}");
    }
}
