//! A body written as the conversation comes ([`BodyWriter`]) is byte for byte the whole body
//! ([`request_body`]`.to_json_pretty()` and a newline), for random conversations with repeated
//! and long ids, provider state of every kind, any tools and settings, in every format; and
//! the whole body passes its validator (but Anthropic's tools rule, which needs tools).

use proptest::prelude::*;
use serde_json::{json, Value};
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ProviderState, ToolSpec,
};
use tooljournal_history::providers::{
    request_body, validate, BodyWriter, Format, Header, IdSurvey,
};

fn id_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        // Long ids with the characters of composite `callId|blob` ids, and long ids sharing
        // their first 70 characters (cut to 40 or 64 they would be equal).
        "[a-zA-Z0-9|+/=_-]{30,500}",
        "[a-z]{0,3}".prop_map(|tail| format!("{}{tail}", "s".repeat(70))),
        // A small pool, so that ids repeat across (and now and then within) messages.
        "call_[0-3]",
        "call_[0-3]_[2-3]",
        "[a-zA-Z0-9_.:/| -]{0,10}",
        "\\PC{0,6}",
        Just(String::new()),
    ]
}

fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,10}",
        "[a-zA-Z0-9.:/ -]{0,12}",
        "\\PC{0,8}",
        "[a-z]{60,80}",
        Just(String::new()),
    ]
}

fn text_strategy() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), Just(" \n".to_string()), "\\PC{0,20}",]
}

fn arguments_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{}".to_string()),
        Just(r#"{"path":"a.txt","n":[1,2]}"#.to_string()),
        Just("[1,2]".to_string()),
        Just("null".to_string()),
        Just(String::new()),
        Just("{not json".to_string()),
        "\\PC{0,10}",
    ]
}

/// Provider state of any format (another provider's, or one no provider has), its items
/// well-formed, of a kind the format does not send back, or not JSON at all.
fn state_strategy() -> impl Strategy<Value = Option<ProviderState>> {
    let sig = || "[a-zA-Z0-9+/=]{1,12}";
    let item = (0u8..4, any::<u64>()).prop_map(|(kind, n)| match kind {
        0 => json!({"type": "thinking", "thinking": format!("t{n}"), "signature": format!("s{n}")}),
        1 => json!({"type": "redacted_thinking", "data": format!("d{n}")}),
        2 => json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [],
                    "encrypted_content": format!("e{n}")}),
        _ => json!({"type": "message", "n": n}),
    });
    let gemini = (
        prop::option::of(sig()),
        prop::collection::vec(prop::option::of(sig()), 0..5),
    )
        .prop_map(|(text, calls)| json!({"text": text, "calls": calls}).to_string());
    let items = prop_oneof![
        prop::collection::vec(item, 0..4).prop_map(|items| Value::from(items).to_string()),
        gemini,
        Just("not json".to_string()),
    ];
    let format = prop::sample::select(vec![
        "openai-chat",
        "openai-responses",
        "anthropic",
        "gemini",
        "cobol",
    ]);
    prop::option::of((format, items).prop_map(|(format, items)| ProviderState {
        format: format.into(),
        items,
    }))
}

#[derive(Debug, Clone)]
enum Step {
    User(String),
    Assistant(String, Vec<(ConvCall, String, bool)>, Option<ProviderState>),
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let call = (
        id_strategy(),
        name_strategy(),
        arguments_strategy(),
        text_strategy(),
        any::<bool>(),
    )
        .prop_map(|(id, name, arguments, content, is_error)| {
            (
                ConvCall {
                    id,
                    name,
                    arguments,
                },
                content,
                is_error,
            )
        });
    prop_oneof![
        text_strategy().prop_map(Step::User),
        (
            text_strategy(),
            prop::collection::vec(call, 0..=4),
            state_strategy()
        )
            .prop_map(|(text, calls, state)| Step::Assistant(text, calls, state)),
    ]
}

fn conversation_strategy() -> impl Strategy<Value = Conversation> {
    (
        prop::option::of(text_strategy()),
        prop::collection::vec(step_strategy(), 0..10),
    )
        .prop_map(|(system, steps)| {
            let mut messages = Vec::new();
            for step in steps {
                match step {
                    Step::User(text) => messages.push(Message::User { text }),
                    Step::Assistant(text, calls, state) => {
                        let results: Vec<ConvResult> = calls
                            .iter()
                            .map(|(c, content, is_error)| ConvResult {
                                id: c.id.clone(),
                                name: c.name.clone(),
                                content: content.clone(),
                                is_error: *is_error,
                            })
                            .collect();
                        let has_calls = !calls.is_empty();
                        messages.push(Message::Assistant {
                            text,
                            calls: calls.into_iter().map(|(c, _, _)| c).collect(),
                            state,
                        });
                        if has_calls {
                            messages.push(Message::Results { results });
                        }
                    }
                }
            }
            Conversation { system, messages }
        })
}

fn tools_strategy() -> impl Strategy<Value = Vec<ToolSpec>> {
    let tool = ("[a-z_]{1,10}", "\\PC{0,10}").prop_map(|(name, description)| ToolSpec {
        name,
        description,
        input_schema: json!({"type": "object", "properties": {"n": {"type": "number"}}}),
    });
    // Names unique, as a session's tools are.
    prop::collection::vec(tool, 0..3).prop_map(|tools| {
        let mut seen = std::collections::HashSet::new();
        tools
            .into_iter()
            .filter(|t| seen.insert(t.name.clone()))
            .collect()
    })
}

fn settings_strategy() -> impl Strategy<Value = ModelSettings> {
    (prop::option::of(1u32..5000), prop::option::of(0.0f64..2.0)).prop_map(
        |(max_tokens, temperature)| ModelSettings {
            max_tokens,
            temperature,
        },
    )
}

/// The body written message by message, its ids planned by a survey of the same messages.
fn streamed(
    conv: &Conversation,
    tools: &[ToolSpec],
    settings: &ModelSettings,
    format: Format,
) -> String {
    let mut survey = IdSurvey::new(format);
    for m in &conv.messages {
        if let Message::Assistant { calls, .. } = m {
            for c in calls {
                survey.call(1, &c.id);
            }
        }
    }
    let header = Header {
        system: conv.system.clone(),
        tools: tools.to_vec(),
        settings: settings.clone(),
    };
    let mut w = BodyWriter::new(Vec::new(), format, header, survey.plan(|_| true)).unwrap();
    for m in &conv.messages {
        w.message(m).unwrap();
    }
    let (bytes, tools_missing) = w.finish().unwrap();
    let whole = request_body(conv, tools, settings, format);
    // The writer says what the validator says of tools.
    let expected = validate(format, &whole.value())
        .err()
        .filter(|v| v.rule == "anthropic.tools_missing");
    assert_eq!(tools_missing, expected);
    String::from_utf8(bytes).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_streamed_body_is_the_whole_body(
        conv in conversation_strategy(),
        tools in tools_strategy(),
        settings in settings_strategy(),
    ) {
        for format in Format::ALL {
            let whole = request_body(&conv, &tools, &settings, format);
            let expected = format!("{}\n", whole.to_json_pretty());
            prop_assert_eq!(streamed(&conv, &tools, &settings, format), expected, "{}", format);
            match validate(format, &whole.value()) {
                Ok(()) => {}
                Err(v) => prop_assert!(
                    v.rule == "anthropic.tools_missing" && tools.is_empty(),
                    "{format}: {v}"
                ),
            }
        }
    }
}

#[test]
fn an_empty_conversation_streams_as_the_whole_body() {
    let conv = Conversation::default();
    for format in Format::ALL {
        let whole = request_body(&conv, &[], &ModelSettings::default(), format);
        assert_eq!(
            streamed(&conv, &[], &ModelSettings::default(), format),
            format!("{}\n", whole.to_json_pretty())
        );
    }
}

/// Ids repeated many times over: each repeat gets the same new id as in the whole body.
#[test]
fn many_repeats_of_one_id_stream_as_the_whole_body() {
    let mut messages = Vec::new();
    for i in 0..300 {
        messages.push(Message::User {
            text: format!("turn {i}"),
        });
        let calls: Vec<ConvCall> = ["call_1", "call_1_2", "x".repeat(50).as_str()]
            .iter()
            .map(|id| ConvCall {
                id: id.to_string(),
                name: "t".into(),
                arguments: "{}".into(),
            })
            .collect();
        let results = calls
            .iter()
            .map(|c| ConvResult {
                id: c.id.clone(),
                name: c.name.clone(),
                content: "ok".into(),
                is_error: false,
            })
            .collect();
        messages.push(Message::Assistant {
            text: String::new(),
            calls,
            state: None,
        });
        messages.push(Message::Results { results });
    }
    let conv = Conversation {
        system: Some("s".into()),
        messages,
    };
    for format in Format::ALL {
        let whole = request_body(&conv, &[], &ModelSettings::default(), format);
        let expected: Value = whole.value();
        assert_eq!(
            streamed(&conv, &[], &ModelSettings::default(), format),
            format!("{}\n", whole.to_json_pretty()),
            "{format}"
        );
        assert!(expected.is_object());
    }
}
