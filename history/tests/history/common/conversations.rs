//! Random conversations for the history crate's property tests: ids that repeat and run long,
//! names, texts, arguments, provider state of every kind, steps of calls and results.
#![allow(dead_code)]

use proptest::prelude::*;
use serde_json::{json, Value};
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ProviderState,
};

pub fn id_strategy() -> impl Strategy<Value = String> {
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

pub fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,10}",
        "[a-zA-Z0-9.:/ -]{0,12}",
        "\\PC{0,8}",
        "[a-z]{60,80}",
        Just(String::new()),
    ]
}

pub fn text_strategy() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), Just(" \n".to_string()), "\\PC{0,20}",]
}

pub fn arguments_strategy() -> impl Strategy<Value = String> {
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
pub fn state_strategy() -> impl Strategy<Value = Option<ProviderState>> {
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
pub enum Step {
    User(String),
    Assistant(String, Vec<(ConvCall, String, bool)>, Option<ProviderState>),
}

pub fn step_strategy() -> impl Strategy<Value = Step> {
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

pub fn conversation_strategy() -> impl Strategy<Value = Conversation> {
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
