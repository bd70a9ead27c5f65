//! `PROVIDER:MODEL` specs, keys and base URLs read as the providers' SDKs read them, and the
//! request bodies: the history crate's body plus each provider's fields, argument text byte
//! for byte.

use std::collections::HashMap;

use events::model::{ConvCall, ConvResult, Conversation, Message, ModelRequest, ModelSettings};
use serde_json::{json, Value};
use tooljournal_llm::{parse_spec, request_body, ConfigError, Format, ModelConfig};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn specs_name_a_provider_and_a_model() {
    assert_eq!(
        parse_spec("openai-chat:gpt-4.1-mini").unwrap(),
        (Format::OpenAiChat, "gpt-4.1-mini".to_string())
    );
    assert_eq!(
        parse_spec("openai-responses:o4-mini").unwrap(),
        (Format::OpenAiResponses, "o4-mini".to_string())
    );
    assert_eq!(
        parse_spec("anthropic:claude-sonnet-4-5").unwrap(),
        (Format::Anthropic, "claude-sonnet-4-5".to_string())
    );
    assert_eq!(
        parse_spec("gemini:gemini-2.5-flash").unwrap(),
        (Format::Gemini, "gemini-2.5-flash".to_string())
    );
    // Ollama's tags keep their own colon.
    assert_eq!(
        parse_spec("openai-chat:llama3.1:8b").unwrap(),
        (Format::OpenAiChat, "llama3.1:8b".to_string())
    );

    let unknown = parse_spec("openai:gpt-4.1").unwrap_err();
    assert_eq!(
        unknown,
        ConfigError::UnknownProvider {
            provider: "openai".into()
        }
    );
    let text = unknown.to_string();
    for name in ["openai-chat", "openai-responses", "anthropic", "gemini"] {
        assert!(text.contains(name), "lists {name}: {text}");
    }
    assert!(text.starts_with("unknown provider `openai`"), "{text}");
    assert!(matches!(
        parse_spec("gpt-4.1").unwrap_err(),
        ConfigError::NoProvider { .. }
    ));
    assert!(matches!(
        parse_spec("anthropic:").unwrap_err(),
        ConfigError::NoModel { .. }
    ));
}

#[test]
fn keys_and_base_urls_come_from_the_providers_variables() {
    let e = env(&[
        ("OPENAI_API_KEY", "sk-openai"),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
    ]);
    let c = ModelConfig::resolve("openai-chat:llama3.1:8b", None, &e).unwrap();
    assert_eq!(c.api_key.expose(), "sk-openai");
    assert_eq!(c.base_url(), "http://localhost:11434/v1");
    assert_eq!(c.model, "llama3.1:8b");
    let c = ModelConfig::resolve("openai-responses:o4-mini", None, &e).unwrap();
    assert_eq!(c.api_key.expose(), "sk-openai");
    let c = ModelConfig::resolve("anthropic:claude-sonnet-4-5", None, &e).unwrap();
    assert_eq!(c.api_key.expose(), "sk-ant");
    assert_eq!(c.base_url, None);
    assert_eq!(c.base_url(), "https://api.anthropic.com");

    // Gemini: GOOGLE_API_KEY wins when both are set (as google-genai does), else GEMINI_API_KEY.
    let both = env(&[
        ("GEMINI_API_KEY", "g-gemini"),
        ("GOOGLE_API_KEY", "g-google"),
    ]);
    let c = ModelConfig::resolve("gemini:gemini-2.5-flash", None, &both).unwrap();
    assert_eq!(c.api_key.expose(), "g-google");
    let gemini_only = env(&[("GEMINI_API_KEY", "g-gemini"), ("GOOGLE_API_KEY", "")]);
    let c = ModelConfig::resolve("gemini:gemini-2.5-flash", None, &gemini_only).unwrap();
    assert_eq!(c.api_key.expose(), "g-gemini");
    assert_eq!(c.base_url(), "https://generativelanguage.googleapis.com");

    // Another variable, and only it.
    let other = env(&[("OPENAI_API_KEY", "sk-openai"), ("OPENROUTER_KEY", "sk-or")]);
    let c = ModelConfig::resolve("openai-chat:x", Some("OPENROUTER_KEY"), &other).unwrap();
    assert_eq!(c.api_key.expose(), "sk-or");
    let e = ModelConfig::resolve("openai-chat:x", Some("MISSING_KEY"), &other).unwrap_err();
    assert_eq!(
        e,
        ConfigError::MissingKey {
            format: Format::OpenAiChat,
            vars: vec!["MISSING_KEY".into()]
        }
    );
    assert_eq!(e.to_string(), "no API key for openai-chat: set MISSING_KEY");
}

#[test]
fn a_missing_key_names_the_variables() {
    let none = env(&[("OPENAI_API_KEY", "")]);
    let e = ModelConfig::resolve("openai-chat:gpt-4.1-mini", None, &none).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no API key for openai-chat: set OPENAI_API_KEY"
    );
    let e = ModelConfig::resolve("anthropic:claude", None, &none).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no API key for anthropic: set ANTHROPIC_API_KEY"
    );
    let e = ModelConfig::resolve("gemini:gemini-2.5-flash", None, &none).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no API key for gemini: set GOOGLE_API_KEY or GEMINI_API_KEY"
    );
}

const ARGS: &str = r#"{"n": 1.0000000000000000001, "s": "\u00e9"}"#;

fn request_with_call() -> ModelRequest {
    ModelRequest {
        turn: 1,
        step: 2,
        conversation: Conversation {
            system: None,
            messages: vec![
                Message::User { text: "go".into() },
                Message::Assistant {
                    text: String::new(),
                    calls: vec![ConvCall {
                        id: "call_1".into(),
                        name: "calc".into(),
                        arguments: ARGS.into(),
                    }],
                    state: None,
                },
                Message::Results {
                    results: vec![ConvResult {
                        id: "call_1".into(),
                        name: "calc".into(),
                        content: "2".into(),
                        is_error: false,
                    }],
                },
            ],
        },
        tools: vec![history::conversation::ToolSpec {
            name: "calc".into(),
            description: "Adds numbers.".into(),
            input_schema: json!({"type": "object"}),
        }],
        settings: ModelSettings::default(),
    }
}

#[test]
fn bodies_keep_argument_text_byte_for_byte() {
    let request = request_with_call();

    // OpenAI Chat: the arguments are a JSON string; its content is the model's text exactly.
    let body = request_body(Format::OpenAiChat, "gpt-4.1-mini", &request).unwrap();
    let text = String::from_utf8(body.clone()).unwrap();
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        value["messages"][1]["tool_calls"][0]["function"]["arguments"],
        Value::String(ARGS.into())
    );
    assert_eq!(value["model"], "gpt-4.1-mini");
    assert_eq!(value["stream"], true);
    assert_eq!(value["stream_options"], json!({"include_usage": true}));
    assert!(text.contains("1.0000000000000000001"), "{text}");

    // Anthropic and Gemini: the arguments are an object, the model's own text in the body.
    for (format, key) in [
        (Format::Anthropic, "\"input\":"),
        (Format::Gemini, "\"args\":"),
    ] {
        let body = request_body(format, "m", &request).unwrap();
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains(&format!("{key}{ARGS}")), "{format}: {text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        history::providers::validate(format, &value).unwrap();
    }

    // Responses: a string again, plus its own fields.
    let body = request_body(Format::OpenAiResponses, "o4-mini", &request).unwrap();
    let value: Value = serde_json::from_slice(&body).unwrap();
    let call = value["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap();
    assert_eq!(call["arguments"], Value::String(ARGS.into()));
    assert_eq!(value["store"], false);
}

#[test]
fn a_body_is_built_for_an_empty_tool_list_too() {
    let mut request = request_with_call();
    request.conversation.messages.truncate(1);
    request.tools.clear();
    for format in Format::ALL {
        let body = request_body(format, "m", &request).expect("a body");
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert!(value.get("tools").is_none(), "{format}");
        history::providers::validate(format, &value).unwrap();
    }
}
