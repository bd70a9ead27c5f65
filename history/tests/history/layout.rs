//! The turn-based layout: without a compaction it is the flat conversation; with
//! one, the replaced turns are left out behind the prefix CTX.md gives, and shortened results
//! are cut as `shorten` says. Expected texts are written out by hand from those rules.

use serde_json::json;
use tooljournal_history::conversation::{
    ConvCall, ConvResult, Conversation, Message, ModelSettings, ProviderState, ToolSpec,
};
use tooljournal_history::layout::{layout, shorten, Compaction, StepView, TurnView};
use tooljournal_history::providers::{request_body, stand_in_tools, validate, Format};
use tooljournal_history::reduce::{
    estimate_tokens, plan_summary_scope, summary_request, SUMMARY_INSTRUCTION,
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

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

fn assistant(text: &str, calls: Vec<ConvCall>, state: Option<ProviderState>) -> Message {
    Message::Assistant {
        text: text.into(),
        calls,
        state,
    }
}

fn thinking() -> ProviderState {
    ProviderState {
        format: "anthropic".into(),
        items: r#"[{"type":"thinking","thinking":"hm","signature":"sig"}]"#.into(),
    }
}

/// Three turns: a call, two calls and an empty answer carrying state, a plain answer.
fn turns() -> Vec<TurnView> {
    vec![
        TurnView {
            turn: 1,
            user_text: "fix the bug".into(),
            steps: vec![
                StepView {
                    step: 1,
                    text: "reading".into(),
                    calls: vec![call("c1", "read", r#"{"path":"a"}"#)],
                    state: None,
                    results: vec![result("c1", "read", "contents of a")],
                },
                StepView {
                    step: 2,
                    text: "done".into(),
                    calls: vec![],
                    state: None,
                    results: vec![],
                },
            ],
        },
        TurnView {
            turn: 2,
            user_text: "now test".into(),
            steps: vec![
                StepView {
                    step: 1,
                    text: String::new(),
                    calls: vec![call("c2", "run", "{}"), call("c3", "run", "{not json")],
                    state: None,
                    results: vec![
                        result("c2", "run", "12 passed"),
                        ConvResult {
                            is_error: true,
                            ..result("c3", "run", "TOOL_FAILED: bad arguments")
                        },
                    ],
                },
                StepView {
                    step: 2,
                    text: String::new(),
                    calls: vec![],
                    state: Some(thinking()),
                    results: vec![],
                },
                StepView {
                    step: 3,
                    text: "all green".into(),
                    calls: vec![],
                    state: None,
                    results: vec![],
                },
            ],
        },
        TurnView {
            turn: 3,
            user_text: "thanks".into(),
            steps: vec![StepView {
                step: 1,
                text: "you're welcome".into(),
                calls: vec![],
                state: None,
                results: vec![],
            }],
        },
    ]
}

fn turn_1_messages() -> Vec<Message> {
    vec![
        user("fix the bug"),
        assistant("reading", vec![call("c1", "read", r#"{"path":"a"}"#)], None),
        Message::Results {
            results: vec![result("c1", "read", "contents of a")],
        },
        assistant("done", vec![], None),
    ]
}

/// Turn 2's messages after its user message.
fn turn_2_answers() -> Vec<Message> {
    vec![
        assistant(
            "",
            vec![call("c2", "run", "{}"), call("c3", "run", "{not json")],
            None,
        ),
        Message::Results {
            results: vec![
                result("c2", "run", "12 passed"),
                ConvResult {
                    is_error: true,
                    ..result("c3", "run", "TOOL_FAILED: bad arguments")
                },
            ],
        },
        // Kept as the flat conversation keeps it; the renderers drop it.
        assistant("", vec![], Some(thinking())),
        assistant("all green", vec![], None),
    ]
}

fn compaction(through_turn: u32, summary: Option<&str>) -> Compaction {
    Compaction {
        through_turn,
        summary: summary.map(str::to_string),
        shortened: vec![],
        preview_chars: 100,
    }
}

#[test]
fn layout_without_compaction_is_the_flat_conversation() {
    let mut messages = turn_1_messages();
    messages.push(user("now test"));
    messages.extend(turn_2_answers());
    messages.push(user("thanks"));
    messages.push(assistant("you're welcome", vec![], None));
    let flat = Conversation {
        system: Some("be brief".into()),
        messages,
    };
    assert_eq!(layout(Some("be brief".into()), &turns(), None), flat);
    // A compaction replacing nothing and shortening nothing changes nothing.
    assert_eq!(
        layout(
            Some("be brief".into()),
            &turns(),
            Some(&compaction(0, None))
        ),
        flat
    );
    assert_eq!(
        layout(None, &[], None),
        Conversation {
            system: None,
            messages: vec![]
        }
    );
}

#[test]
fn dropped_turns_are_announced_in_the_first_remaining_user_message() {
    let conv = layout(None, &turns(), Some(&compaction(2, None)));
    assert_eq!(
        conv.messages,
        vec![
            user(
                "[2 earlier turn(s) were left out to fit the model's context window; the \
                 session's journal keeps them.]\n\nthanks"
            ),
            assistant("you're welcome", vec![], None),
        ]
    );
}

#[test]
fn a_summary_replaces_the_turns_it_covers() {
    let summary = "The user asked to fix a bug; a was read.";
    let conv = layout(None, &turns(), Some(&compaction(1, Some(summary))));
    let mut want = vec![user(
        "[Summary of the 1 earlier turn(s), written by the model when the context was \
         reduced:]\nThe user asked to fix a bug; a was read.\n[End of summary.]\n\nnow test",
    )];
    want.extend(turn_2_answers());
    want.push(user("thanks"));
    want.push(assistant("you're welcome", vec![], None));
    assert_eq!(conv.messages, want);
}

#[test]
fn the_last_turn_is_kept_even_when_through_turn_covers_it() {
    for through_turn in [3, 4, u32::MAX] {
        let conv = layout(None, &turns(), Some(&compaction(through_turn, Some("S"))));
        assert_eq!(
            conv.messages,
            vec![
                user(
                    "[Summary of the 2 earlier turn(s), written by the model when the context \
                     was reduced:]\nS\n[End of summary.]\n\nthanks"
                ),
                assistant("you're welcome", vec![], None),
            ],
            "through_turn {through_turn}"
        );
    }
    // A single turn is never left out, so nothing is announced.
    let only = &turns()[..1];
    let conv = layout(None, only, Some(&compaction(1, None)));
    assert_eq!(conv.messages, turn_1_messages());
}

#[test]
fn shortened_steps_cut_every_result_and_only_theirs() {
    let plan = Compaction {
        through_turn: 0,
        summary: None,
        // (1, 2) has no calls and (9, 1) no turn: both change nothing.
        shortened: vec![(2, 1), (1, 2), (9, 1)],
        preview_chars: 6,
    };
    let conv = layout(None, &turns(), Some(&plan));
    let mut want = turn_1_messages();
    want.push(user("now test"));
    want.extend(turn_2_answers());
    want[6] = Message::Results {
        results: vec![
            result(
                "c2",
                "run",
                "12 \n[... result shortened to fit the context: 9 characters in all; the journal \
                 keeps it whole ...]\nsed",
            ),
            ConvResult {
                is_error: true,
                ..result(
                    "c3",
                    "run",
                    "TOO\n[... result shortened to fit the context: 26 characters in all; the \
                     journal keeps it whole ...]\nnts",
                )
            },
        ],
    };
    want.push(user("thanks"));
    want.push(assistant("you're welcome", vec![], None));
    assert_eq!(conv.messages, want);

    // A shortened step in a left-out turn is simply gone with its turn.
    let plan = Compaction {
        through_turn: 1,
        shortened: vec![(1, 1)],
        ..plan
    };
    let conv = layout(None, &turns(), Some(&plan));
    assert!(!conv.messages.iter().any(|m| matches!(
        m,
        Message::Results { results } if results.iter().any(|r| r.id == "c1")
    )));
}

#[test]
fn shorten_keeps_both_ends_and_says_how_long_the_whole_is() {
    let marker = |total: usize| {
        format!(
            "\n[... result shortened to fit the context: {total} characters in all; the journal \
             keeps it whole ...]\n"
        )
    };
    assert_eq!(
        shorten("abcdefghij", 4),
        "ab\n[... result shortened to fit the context: 10 characters in all; the journal keeps \
         it whole ...]\nij"
    );
    // An odd preview keeps preview_chars / 2 at each end.
    assert_eq!(shorten("abcdefghij", 5), shorten("abcdefghij", 4));
    assert_eq!(shorten("abcdefghij", 9), format!("abcd{}ghij", marker(10)));
    // Not longer than the preview: unchanged.
    assert_eq!(shorten("abcdefghij", 10), "abcdefghij");
    assert_eq!(shorten("abcdefghij", 11), "abcdefghij");
    assert_eq!(shorten("", 0), "");
    // A preview of nothing leaves the marker alone.
    assert_eq!(shorten("xy", 0), marker(2));
    assert_eq!(shorten("xy", 1), marker(2));
}

#[test]
fn shorten_counts_and_cuts_characters_not_bytes() {
    // 6 characters, 12 bytes: not cut at a preview of 6 (or 11), though longer in bytes.
    assert_eq!(shorten("αβγδεζ", 6), "αβγδεζ");
    assert_eq!(
        shorten("αβγδεζ", 2),
        "α\n[... result shortened to fit the context: 6 characters in all; the journal keeps it \
         whole ...]\nζ"
    );
    assert_eq!(
        shorten("🎉a🎉b🎉", 4),
        "🎉a\n[... result shortened to fit the context: 5 characters in all; the journal keeps \
         it whole ...]\nb🎉"
    );
}

#[test]
fn estimate_is_the_openai_chat_body_bytes_over_four_rounded_up() {
    let one = |text: &str| Conversation {
        system: None,
        messages: vec![user(text)],
    };
    // {"messages":[{"content":"hello","role":"user"}]} is 48 bytes.
    assert_eq!(estimate_tokens(&one("hello"), &[]), 12);
    // One byte more rounds up.
    assert_eq!(estimate_tokens(&one("hello!"), &[]), 13);
    // {"messages":[]} is 15 bytes.
    assert_eq!(estimate_tokens(&Conversation::default(), &[]), 4);
    // The tools count too.
    let tools = [ToolSpec {
        name: "read".into(),
        description: "reads a file".into(),
        input_schema: json!({"type": "object"}),
    }];
    assert!(estimate_tokens(&one("hello"), &tools) > 12 + "reads a file".len() as u64 / 4);
}

#[test]
fn a_summary_covers_every_turn_before_the_last() {
    let all = turns();
    assert_eq!(plan_summary_scope(&[]), None);
    assert_eq!(plan_summary_scope(&all[..1]), None);
    assert_eq!(plan_summary_scope(&all[..2]), Some(1));
    assert_eq!(plan_summary_scope(&all), Some(2));
    let numbered: Vec<TurnView> = [4, 7, 9]
        .into_iter()
        .map(|turn| TurnView {
            turn,
            user_text: "x".into(),
            steps: vec![],
        })
        .collect();
    assert_eq!(plan_summary_scope(&numbered), Some(7));
}

#[test]
fn the_summary_request_is_the_replaced_turns_then_the_instruction() {
    let conv = summary_request(Some("be brief".into()), &turns(), 2, None);
    let mut want = turn_1_messages();
    want.push(user("now test"));
    want.extend(turn_2_answers());
    want.push(user(SUMMARY_INSTRUCTION));
    assert_eq!(conv.system.as_deref(), Some("be brief"));
    assert_eq!(conv.messages, want);
    for f in Format::ALL {
        let body = request_body(&conv, &stand_in_tools(&conv), &ModelSettings::default(), f);
        validate(f, &body.value()).unwrap_or_else(|v| panic!("{f}: {v}"));
    }
    // Nothing to summarize: the instruction alone.
    let conv = summary_request(None, &turns(), 0, None);
    assert_eq!(conv.messages, vec![user(SUMMARY_INSTRUCTION)]);

    // What CTX.md asks the summary to hold, and text only.
    for point in [
        "goals",
        "constraints",
        "decisions",
        "files changed",
        "commands run",
        "outcomes",
        "open questions",
        "remains",
        "do not call any tool",
    ] {
        assert!(SUMMARY_INSTRUCTION.contains(point), "{point}");
    }
}
