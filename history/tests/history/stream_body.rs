//! A body written as the conversation comes ([`BodyWriter`]) is byte for byte the whole body
//! ([`request_body`]`.to_json_pretty()` and a newline), for random conversations with repeated
//! and long ids, provider state of every kind, any tools and settings, in every format; and
//! the whole body passes its validator (but Anthropic's tools rule, which needs tools).

use proptest::prelude::*;
use serde_json::{json, Value};
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ToolSpec,
};
use tooljournal_history::providers::{
    request_body, validate, BodyWriter, Format, Header, IdSurvey,
};

use crate::common;
use common::conversations::*;

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
