//! Provider formats: a [`Conversation`] laid out as one provider's request-body fragment
//! ([`render`]), and that provider's pairing and ordering rules checked on the JSON itself
//! ([`validate`], DESIGN.md §6), so that a bug in `render` is caught too.
//!
//! What every format shares is decided once, in [`prepare`]:
//! - an assistant message with empty text and no calls carries nothing and is dropped;
//! - each result is paired with the call it answers in the assistant message right before it
//!   (by the call's original id, the first call not yet answered wins);
//! - call ids are made unique in the conversation: the first call with an id keeps it, a later
//!   call reusing it (the runtime only keeps ids unique within one assistant message, and a
//!   scripted model may say `call_1` every turn) becomes `{id}_{n}`, the smallest `n >= 2` that
//!   no call in the conversation uses. Responses and Anthropic both reject a repeated call id;
//!   the result gets the same new id as its call.
//!
//! Anthropic then maps ids and names to its allowed characters ([`anthropic_id`],
//! [`anthropic_name`]); the other formats keep them as they are.

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::conversation::{Conversation, Message};

pub use anthropic::{anthropic_id, anthropic_name};

/// A provider's request format, named on the command line as [`Format::as_str`] spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    OpenAiChat,
    OpenAiResponses,
    Anthropic,
    Gemini,
}

impl Format {
    pub const ALL: [Format; 4] = [
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Gemini,
    ];

    /// The command-line name: `openai-chat`, `openai-responses`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is none of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown format `{}` (expected openai-chat, openai-responses, anthropic or gemini)",
            self.0
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// The first rule a body breaks: where (index into `messages`, `input` or `contents`; 0 for the
/// body itself), which rule (a stable name such as `anthropic.tool_result_not_first`), and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub index: usize,
    pub rule: &'static str,
    pub message: String,
}

impl Violation {
    pub(crate) fn new(index: usize, rule: &'static str, message: impl Into<String>) -> Self {
        Violation {
            index,
            rule,
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at index {}: {}", self.rule, self.index, self.message)
    }
}

impl std::error::Error for Violation {}

/// Lays `conv` out as `format`'s request-body fragment: `{"messages": [...]}` (OpenAI Chat;
/// Anthropic, with a top-level `"system"`), `{"input": [...]}` (OpenAI Responses) or
/// `{"contents": [...]}` (Gemini, with `"systemInstruction"`). A conversation that keeps the
/// invariants of [`Conversation`] always renders to a body [`validate`] accepts.
pub fn render(conv: &Conversation, format: Format) -> Value {
    let msgs = prepare(conv);
    let system = conv.system.as_deref().filter(|s| !is_blank(s));
    match format {
        Format::OpenAiChat => openai_chat::render(system, &msgs),
        Format::OpenAiResponses => openai_responses::render(system, &msgs),
        Format::Anthropic => anthropic::render(system, &msgs),
        Format::Gemini => gemini::render(system, &msgs),
    }
}

/// Checks `body` (as [`render`] produces it) against `format`'s pairing and ordering rules
/// (DESIGN.md §6) and the shape those rules need; returns the first violation.
pub fn validate(format: Format, body: &Value) -> Result<(), Violation> {
    match format {
        Format::OpenAiChat => openai_chat::validate(body),
        Format::OpenAiResponses => openai_responses::validate(body),
        Format::Anthropic => anthropic::validate(body),
        Format::Gemini => gemini::validate(body),
    }
}

/// A call as every format lays it out.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    /// Unique in the conversation (see the module docs).
    pub id: String,
    pub name: &'a str,
    pub arguments: &'a str,
}

/// A result as every format lays it out.
#[derive(Debug)]
pub(crate) struct Res<'a> {
    /// Its call's id as [`Call::id`] has it (the result's own id if no call matches).
    pub id: String,
    /// Its call's name (the result's own name if no call matches).
    pub name: &'a str,
    pub content: &'a str,
    pub is_error: bool,
}

#[derive(Debug)]
pub(crate) enum Msg<'a> {
    User(&'a str),
    Assistant { text: &'a str, calls: Vec<Call<'a>> },
    Results(Vec<Res<'a>>),
}

/// The provider-neutral decisions every format shares (see the module docs).
pub(crate) fn prepare(conv: &Conversation) -> Vec<Msg<'_>> {
    let originals: HashSet<&str> = conv
        .messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { calls, .. } => calls.iter().map(|c| c.id.as_str()).collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut used: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(conv.messages.len());
    // The calls of the message just before, as (original id, unique id, name, answered).
    let mut prev_calls: Vec<(&str, String, &str, bool)> = Vec::new();
    for message in &conv.messages {
        match message {
            Message::User { text } => {
                prev_calls.clear();
                out.push(Msg::User(text));
            }
            Message::Assistant { text, calls } => {
                prev_calls.clear();
                let calls: Vec<Call<'_>> = calls
                    .iter()
                    .map(|c| {
                        let id = unique_id(&c.id, &originals, &mut used);
                        prev_calls.push((&c.id, id.clone(), &c.name, false));
                        Call {
                            id,
                            name: &c.name,
                            arguments: &c.arguments,
                        }
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                out.push(Msg::Assistant { text, calls });
            }
            Message::Results { results } => {
                let results: Vec<Res<'_>> = results
                    .iter()
                    .map(|r| {
                        let call = prev_calls
                            .iter_mut()
                            .find(|(orig, _, _, answered)| *orig == r.id && !answered);
                        let (id, name) = match call {
                            Some(call) => {
                                call.3 = true;
                                (call.1.clone(), call.2)
                            }
                            None => (r.id.clone(), r.name.as_str()),
                        };
                        Res {
                            id,
                            name,
                            content: &r.content,
                            is_error: r.is_error,
                        }
                    })
                    .collect();
                prev_calls.clear();
                if !results.is_empty() {
                    out.push(Msg::Results(results));
                }
            }
        }
    }
    out
}

/// `id` itself the first time, then `{id}_{n}` for the smallest `n >= 2` no call uses.
fn unique_id(id: &str, originals: &HashSet<&str>, used: &mut HashSet<String>) -> String {
    if used.insert(id.to_string()) {
        return id.to_string();
    }
    let mut n = 2u64;
    loop {
        let candidate = format!("{id}_{n}");
        if !originals.contains(candidate.as_str()) && used.insert(candidate.clone()) {
            return candidate;
        }
        n += 1;
    }
}

/// Tool arguments as the object Anthropic's `input` and Gemini's `args` must be.
pub(crate) fn arguments_object(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        // The model's arguments may be invalid JSON or not an object (a crash may even have
        // come from them). The provider only takes an object here, and the history must stay
        // valid; dropping or "repairing" the arguments would misstate what the model sent, so
        // the raw text is kept, byte for byte, under a key no tool schema uses.
        _ => json!({ "_raw_arguments": raw }),
    }
}

/// The first 8 hex digits of sha256(`s`).
pub(crate) fn short_hash(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    hex::encode(&digest[..4])
}

/// Empty or only whitespace.
pub(crate) fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The text put in a leading user message when a history would otherwise start with the model
/// (Anthropic requires a user message first; Gemini a user turn before a call).
pub(crate) const LEADING_USER_TEXT: &str = "(conversation resumed)";

/// Two-part turns for the formats that merge consecutive messages of one role: `first` holds
/// what must come first (a user turn's results, a model turn's text), `rest` the others.
pub(crate) struct Turn {
    pub role: &'static str,
    pub first: Vec<Value>,
    pub rest: Vec<Value>,
}

impl Turn {
    pub fn into_parts(self) -> Vec<Value> {
        let mut parts = self.first;
        parts.extend(self.rest);
        parts
    }
}

/// The last turn if it has `role`, else a new one: consecutive messages of one role merge.
pub(crate) fn turn<'t>(turns: &'t mut Vec<Turn>, role: &'static str) -> &'t mut Turn {
    if turns.last().is_none_or(|t| t.role != role) {
        turns.push(Turn {
            role,
            first: Vec::new(),
            rest: Vec::new(),
        });
    }
    turns.last_mut().expect("just pushed")
}

// ---- helpers for the validators ----

pub(crate) fn body_array<'a>(
    body: &'a Value,
    key: &str,
    rule: &'static str,
) -> Result<&'a Vec<Value>, Violation> {
    body.as_object()
        .ok_or_else(|| Violation::new(0, rule, "the body is not a JSON object"))?
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| Violation::new(0, rule, format!("the body has no `{key}` array")))
}

pub(crate) fn object<'a>(
    v: &'a Value,
    index: usize,
    rule: &'static str,
    what: &str,
) -> Result<&'a serde_json::Map<String, Value>, Violation> {
    v.as_object()
        .ok_or_else(|| Violation::new(index, rule, format!("{what} is not a JSON object")))
}

pub(crate) fn string_field<'a>(
    obj: &'a serde_json::Map<String, Value>,
    key: &str,
    index: usize,
    rule: &'static str,
    what: &str,
) -> Result<&'a str, Violation> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Violation::new(index, rule, format!("{what} has no string `{key}`")))
}

/// The first string seen twice, if any.
pub(crate) fn first_duplicate<'a>(ids: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = HashSet::new();
    ids.into_iter().find(|id| !seen.insert(*id))
}
