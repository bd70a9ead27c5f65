//! `recover rebuild --format F` prints a whole request body from what a schema-3 journal keeps
//! (`session/model`, `tool/schema`, `step/tools`, `llm/response-detail`): the system prompt,
//! the tools the model was last shown with their journaled schemas, the settings, and each
//! response's provider state in its own format only. A journal before schema 3 still rebuilds,
//! naming on stderr what it lacks; `audit` totals the responses' token usage.

use crate::common;

use common::*;
use recover::providers::{anthropic_name, validate, Format};
use runtime::event::*;
use runtime::model::{ModelSettings, Usage};
use serde_json::{json, Value};
use std::path::Path;

const SYSTEM: &str = "You are careful.";
const READ_HASH: &str = "aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11";
const LIST_HASH: &str = "bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22";
const READ_SCHEMA: &str =
    r#"{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}"#;
const LIST_SCHEMA: &str = r#"{"properties":{"dir":{"type":"string"}},"type":"object"}"#;

/// Text that appears in a body only if the state it marks was sent.
const MARK: &str = "SIG-MARK-7f3a";

/// The state a provider's adapter would journal for the first response, with `MARK` in it.
fn state_of(format: Format) -> (String, String) {
    let items = match format {
        Format::Anthropic => {
            json!([{"type": "thinking", "thinking": "read first", "signature": MARK}])
        }
        Format::OpenAiResponses => json!([{"type": "reasoning", "id": "rs_1", "summary": [],
                                           "encrypted_content": MARK}]),
        Format::Gemini => json!({"text": MARK, "calls": [format!("{MARK}-call")]}),
        Format::OpenAiChat => unreachable!("openai-chat has no state"),
    };
    (format.as_str().to_owned(), items.to_string())
}

fn usage(input: u64, output: u64, cached: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
    }
}

/// A crashed two-step session. Step 1 shows `read` and calls it (settled, committed); step 2
/// shows `read` and `list` and calls `list` (started, never settled). `schema3`: the journal
/// also has `session/model` (system prompt, settings), `tool/schema` for both tools, the
/// requests, and each response's `llm/response-detail` (usage; the first one's provider state
/// is `state`'s); without it, the journal is as one written before schema 3 (`step/tools`
/// only).
fn journal(dir: &Path, schema3: bool, state: Option<(String, String)>) {
    let mut b = Builder::new(dir);
    b.put(Event::SessionOpen(SessionOpen {
        schema_version: if schema3 { 3 } else { 2 },
        session_id: "bodies".into(),
        workspace: "/ws".into(),
        tools: vec![],
    }));
    if schema3 {
        b.put(Event::SessionModel(SessionModel {
            provider: "anthropic".into(),
            model: "a-model".into(),
            system: Some(SYSTEM.into()),
            settings: ModelSettings {
                max_tokens: Some(512),
                temperature: Some(0.5),
            },
            note: None,
            base_url: None,
        }));
        for (hash, name, description, schema) in [
            (READ_HASH, "read", "Read a file.", READ_SCHEMA),
            (LIST_HASH, "mcp.fs/list", "List a directory.", LIST_SCHEMA),
        ] {
            b.put(Event::ToolSchema(ToolSchema {
                schema_hash: hash.into(),
                name: name.into(),
                description: description.into(),
                input_schema: schema.into(),
            }));
        }
    }
    b.put(Event::TurnStart {
        turn: 1,
        user_text: "read a.txt, then list".into(),
    });
    let read = VisibleTool {
        name: "read".into(),
        schema_hash: READ_HASH.into(),
    };
    let list = VisibleTool {
        name: "mcp.fs/list".into(),
        schema_hash: LIST_HASH.into(),
    };
    let steps = [
        (
            1,
            vec![read.clone()],
            "Reading.",
            "c1",
            "read",
            r#"{"path":"a.txt"}"#,
        ),
        (
            2,
            vec![read, list],
            "",
            "c2",
            "mcp.fs/list",
            r#"{"dir":"."}"#,
        ),
    ];
    for (step, shown, text, id, tool, args) in steps {
        b.put(Event::StepStart { turn: 1, step });
        b.put(Event::StepTools {
            turn: 1,
            step,
            tools: shown,
        });
        if schema3 {
            b.put(Event::LlmRequest(LlmRequest {
                turn: 1,
                step,
                attempt: 1,
                provider: "anthropic".into(),
                model: "a-model".into(),
                body_sha256: "00".repeat(32),
                body_bytes: 100,
            }));
        }
        let response = b.put(Event::LlmResponse {
            turn: 1,
            step,
            response: ModelResponse {
                text: text.into(),
                tool_calls: vec![ModelCall {
                    call_id: id.into(),
                    name: tool.into(),
                    arguments: args.into(),
                }],
                stop_reason: StopReason::ToolUse,
            },
        });
        if schema3 {
            b.put(Event::LlmResponseDetail(LlmResponseDetail {
                turn: 1,
                step,
                attempt: 1,
                response_id: Some(format!("resp_{step}")),
                usage: if step == 1 {
                    usage(100, 20, 60)
                } else {
                    usage(150, 30, 100)
                },
                provider_state: if step == 1 { state.clone() } else { None },
            }));
        }
        let call = CallRef {
            turn: 1,
            step,
            call_id: id.into(),
        };
        let seq = b.put(Event::Received {
            call: call.clone(),
            index: 0,
            tool: tool.into(),
            raw_arguments: args.into(),
            source_seqs: vec![response],
        });
        b.last.insert(id.into(), seq);
        follow(&mut b, &call, |call, s| Event::Parsed {
            call,
            arguments: args.into(),
            source_seqs: s,
        });
        follow(&mut b, &call, |call, s| Event::Approved {
            call,
            approval: Approval::Default,
            source_seqs: s,
        });
        follow(&mut b, &call, |call, s| Event::StartedV4 {
            call,
            attempt: 1,
            resources: Resources::default(),
            source_seqs: s,
        });
        if step == 1 {
            follow(&mut b, &call, |call, s| Event::Settled {
                call,
                outcome: Outcome {
                    status: OutcomeStatus::Success,
                    content: Text::Inline("alpha".into()),
                    value: None,
                    details: None,
                    side_effects: vec![],
                    attempts: 1,
                    duration_ms: 3,
                },
                source_seqs: s,
            });
            follow(&mut b, &call, |call, s| Event::Committed {
                call,
                result: CommittedResult {
                    content: "alpha".into(),
                    is_error: false,
                    code: None,
                    value: None,
                },
                source_seqs: s,
            });
            b.put(Event::StepEnd {
                turn: 1,
                step,
                outcome: StepOutcome::Completed,
            });
        }
    }
    b.done();
}

/// `call`'s next event, pointing back at its previous one (`Builder::step` knows step 1 only).
fn follow(b: &mut Builder, call: &CallRef, make: impl FnOnce(CallRef, Vec<u64>) -> Event) {
    let src = vec![b.last[&call.call_id]];
    let seq = b.put(make(call.clone(), src));
    b.last.insert(call.call_id.clone(), seq);
}

/// `recover rebuild DIR --format F --dry-run`: the body (exit 0) and stderr.
fn rebuild(dir: &Path, format: Format) -> (Value, String) {
    let out = recover(&[
        "rebuild",
        dir.to_str().unwrap(),
        "--format",
        format.as_str(),
        "--dry-run",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{format}: {stderr}");
    let body = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{format}: {e}: {}", text(&out.stdout)));
    (body, stderr)
}

/// The tools of `body` as (name, description, input schema), read from `format`'s shape.
fn tools_of(format: Format, body: &Value) -> Vec<(String, String, Value)> {
    let s = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("{format}: {v}"))
            .to_owned()
    };
    let tools = match format {
        Format::Gemini => body["tools"][0]["functionDeclarations"].clone(),
        _ => body["tools"].clone(),
    };
    tools
        .as_array()
        .unwrap_or_else(|| panic!("{format}: no tools in {body:#}"))
        .iter()
        .map(|t| match format {
            Format::OpenAiChat => {
                assert_eq!(t["type"], "function");
                let f = &t["function"];
                (s(&f["name"]), s(&f["description"]), f["parameters"].clone())
            }
            Format::OpenAiResponses => {
                assert_eq!(
                    (&t["type"], &t["strict"]),
                    (&json!("function"), &json!(false))
                );
                (s(&t["name"]), s(&t["description"]), t["parameters"].clone())
            }
            Format::Anthropic => (
                s(&t["name"]),
                s(&t["description"]),
                t["input_schema"].clone(),
            ),
            Format::Gemini => (
                s(&t["name"]),
                s(&t["description"]),
                t["parametersJsonSchema"].clone(),
            ),
        })
        .collect()
}

fn system_of(format: Format, body: &Value) -> Value {
    match format {
        Format::OpenAiChat => body["messages"][0].clone(),
        Format::OpenAiResponses => body["input"][0].clone(),
        Format::Anthropic => body["system"].clone(),
        Format::Gemini => body["systemInstruction"].clone(),
    }
}

/// Where `format` puts the state of the first response, read back from `body`.
fn state_in(format: Format, body: &Value) -> Value {
    match format {
        Format::Anthropic => body["messages"][1]["content"][0].clone(),
        // system, user, then the first response's items
        Format::OpenAiResponses => body["input"][2].clone(),
        Format::Gemini => {
            let parts = &body["contents"][1]["parts"];
            json!([parts[0]["thoughtSignature"], parts[1]["thoughtSignature"]])
        }
        Format::OpenAiChat => Value::Null,
    }
}

#[test]
fn rebuild_prints_a_whole_body_with_the_journals_system_tools_settings_and_own_state() {
    let stateful = [Format::Anthropic, Format::OpenAiResponses, Format::Gemini];
    for from in stateful {
        let dir = tempfile::tempdir().unwrap();
        journal(dir.path(), true, Some(state_of(from)));
        for format in Format::ALL {
            let (body, stderr) = rebuild(dir.path(), format);
            let at = format!("{from} state, {format} body");
            validate(format, &body).unwrap_or_else(|v| panic!("{at}: {v}\n{body:#}"));
            assert!(!stderr.contains("note:"), "{at}: {stderr}");

            let want_system = match format {
                Format::OpenAiChat => json!({"role": "system", "content": SYSTEM}),
                Format::OpenAiResponses => {
                    json!({"type": "message", "role": "system", "content": SYSTEM})
                }
                Format::Anthropic => json!(SYSTEM),
                Format::Gemini => json!({"parts": [{"text": SYSTEM}]}),
            };
            assert_eq!(system_of(format, &body), want_system, "{at}");

            // The last step's tools, in its order, with the journal's descriptions and schemas.
            let list_name = match format {
                Format::Anthropic => anthropic_name("mcp.fs/list"),
                _ => "mcp.fs/list".to_owned(),
            };
            let schema = |text: &str| serde_json::from_str::<Value>(text).unwrap();
            assert_eq!(
                tools_of(format, &body),
                [
                    ("read".into(), "Read a file.".into(), schema(READ_SCHEMA)),
                    (list_name, "List a directory.".into(), schema(LIST_SCHEMA)),
                ],
                "{at}"
            );

            let settings = match format {
                Format::OpenAiChat => (&body["max_completion_tokens"], &body["temperature"]),
                Format::OpenAiResponses => (&body["max_output_tokens"], &body["temperature"]),
                Format::Anthropic => (&body["max_tokens"], &body["temperature"]),
                Format::Gemini => (
                    &body["generationConfig"]["maxOutputTokens"],
                    &body["generationConfig"]["temperature"],
                ),
            };
            assert_eq!(settings, (&json!(512), &json!(0.5)), "{at}");

            let text = body.to_string();
            if format == from {
                let items: Value = serde_json::from_str(&state_of(from).1).unwrap();
                let want = match format {
                    Format::Gemini => json!([MARK, format!("{MARK}-call")]),
                    _ => items[0].clone(),
                };
                assert_eq!(state_in(format, &body), want, "{at}: {body:#}");
            } else {
                assert!(!text.contains(MARK), "{at}: another format's state: {text}");
            }
        }
    }
}

#[test]
fn a_journal_before_schema_3_still_rebuilds_naming_the_schemas_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    journal(dir.path(), false, None);
    for format in Format::ALL {
        let (body, stderr) = rebuild(dir.path(), format);
        for (name, hash) in [("read", READ_HASH), ("mcp.fs/list", LIST_HASH)] {
            let line = stderr
                .lines()
                .find(|l| l.contains(&format!("tool `{name}`")) && l.contains("not in the journal"))
                .unwrap_or_else(|| panic!("{format}: no note for {name}: {stderr}"));
            assert!(line.contains(hash), "{format}: {line}");
        }
        // Declared by name, saying what the journal does not know, so that every provider
        // takes the history's calls.
        let declared = tools_of(format, &body);
        assert_eq!(declared.len(), 2, "{format}: {body:#}");
        for (_, description, schema) in &declared {
            assert_eq!(description, recover::SCHEMA_NOT_JOURNALED);
            assert_eq!(schema, &json!({"type": "object"}));
        }
        let first_role = match format {
            Format::OpenAiChat => &body["messages"][0]["role"],
            Format::OpenAiResponses => &body["input"][0]["role"],
            _ => &Value::Null,
        };
        assert_ne!(
            first_role, "system",
            "{format}: no system prompt was journaled"
        );
        assert!(body.get("system").is_none() && body.get("systemInstruction").is_none());
        validate(format, &body).unwrap_or_else(|v| panic!("{format}: {v}"));
    }
    // A journal with no step/tools at all says so.
    let dir = tempfile::tempdir().unwrap();
    settled_unknown_and_not_started(dir.path());
    let (_, stderr) = rebuild(dir.path(), Format::OpenAiChat);
    assert!(stderr.contains("no step/tools in the journal"), "{stderr}");
}

#[test]
fn a_tool_sharing_anothers_schema_hash_gets_no_borrowed_description() {
    // The runtime records each (tool, schema hash) it shows; a journal that lacks one for a
    // tool gets the stand-in, never another tool's description.
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(dir.path());
    b.batch_shown(&["c1"]);
    b.done();
    // A second tool with `mark`'s schemas (so its hash), added to the step's tools.
    let mut r = recover::Recovery::of(dir.path()).run().unwrap();
    r.analysis.replay.turns[0].steps[0]
        .tools
        .as_mut()
        .unwrap()
        .push(VisibleTool {
            name: "stamp".into(),
            schema_hash: MARK_HASH.into(),
        });
    let (tools, notes) = recover::rebuild_tools(&r.analysis);
    let named: Vec<(&str, &str)> = tools
        .iter()
        .map(|t| (t.name.as_str(), t.description.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("mark", "Mark a file."),
            ("stamp", recover::SCHEMA_NOT_JOURNALED)
        ]
    );
    assert_eq!(tools[1].input_schema, json!({"type": "object"}));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("`stamp`"), "{notes:?}");
}

#[test]
fn audit_totals_the_token_usage_of_the_sessions_responses() {
    let dir = tempfile::tempdir().unwrap();
    journal(dir.path(), true, None);
    let path = dir.path().to_str().unwrap();
    let out = recover(&["audit", path, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["usage"],
        json!({"responses": 2, "input_tokens": 250, "output_tokens": 50,
               "cached_input_tokens": 160, "refusals": [], "notes": []})
    );
    let out = recover(&["audit", path]);
    assert!(
        text(&out.stdout)
            .contains("usage: 250 input tokens (160 cached), 50 output tokens, over 2 responses"),
        "{}",
        text(&out.stdout)
    );

    // Before schema 3 nothing was journaled: none claimed.
    let dir = tempfile::tempdir().unwrap();
    journal(dir.path(), false, None);
    let path = dir.path().to_str().unwrap();
    let v: Value = serde_json::from_slice(&recover(&["audit", path, "--json"]).stdout).unwrap();
    assert_eq!(v["usage"]["responses"], 0);
    assert_eq!(v["usage"]["input_tokens"], 0);
    let out = recover(&["audit", path]);
    assert!(
        text(&out.stdout).contains("usage: not journaled (no llm/response-detail)"),
        "{}",
        text(&out.stdout)
    );
}
