//! Provider formats: a [`Conversation`] laid out as one provider's request-body fragment
//! ([`render`]), and that provider's pairing and ordering rules checked on the JSON itself
//! ([`validate`], DESIGN.md §6), so that a bug in `render` is caught too.
//!
//! What every format shares is decided once, in `prepare`:
//! - an assistant message with empty text and no calls carries nothing and is dropped;
//! - each result is paired with the call it answers in the assistant message right before it
//!   (by the call's original id, the first call not yet answered wins);
//! - every call id is mapped to the form the format takes ([`provider_id`]: 1 to
//!   [`Format::id_len_max`] characters of `[a-zA-Z0-9_-]`; an id outside it keeps a readable
//!   prefix and gets a sha256 suffix);
//! - call ids are then made unique in the conversation: the first call with an id keeps it, a
//!   later call reusing it (the runtime only keeps ids unique within one assistant message, and
//!   a scripted model may say `call_1` every turn; two long ids may share their prefix and, by
//!   chance, their hash) becomes `{id}_{n}`, the smallest `n >= 2` that no call in the
//!   conversation uses, cut to fit the length. Responses and Anthropic both reject a repeated
//!   call id; the result gets the same new id as its call.
//!
//! An assistant message's provider state ([`crate::conversation::ProviderState`]) is sent back
//! only in the format that produced it, where that provider takes it, its items verbatim;
//! every other format drops it.
//!
//! [`request_body`] adds the tools (with their input schemas) and the settings to make a whole
//! request body; [`BodyWriter`] writes the same body as the conversation's messages come,
//! without holding the conversation ([`stream`]).
//!
//! Anthropic also maps tool names to its allowed form ([`anthropic_name`]); the other formats
//! keep names as they are. Tool arguments are kept byte for byte in every format: a string in
//! the OpenAI formats, the model's own object text (a [`RawValue`]) in Anthropic's `input` and
//! Gemini's `args`, so that no number is rounded ([`History`]).

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;
mod request;
pub mod stream;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::conversation::{Conversation, Message};

pub use anthropic::anthropic_name;
pub use request::{request_body, stand_in_tools, ANTHROPIC_MAX_TOKENS_DEFAULT};
pub use stream::{BodyWriter, Header, IdPlan, IdSurvey};

/// A provider's request format, named on the command line as [`Format::as_str`] spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI Chat Completions (`messages` with `tool_calls` and `tool` messages).
    OpenAiChat,
    /// OpenAI Responses (`input` items: `function_call` and `function_call_output`).
    OpenAiResponses,
    /// Anthropic Messages (`tool_use` and `tool_result` blocks).
    Anthropic,
    /// Gemini `generateContent` (`functionCall` and `functionResponse` parts).
    Gemini,
}

impl Format {
    /// Every format, in the order the CLI lists them.
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

    /// The longest call id this format takes, in bytes (a mapped id is ASCII). OpenAI Chat
    /// rejects a `tool_calls[].id` over 40 ("string_above_max_length"), Responses a `call_id`
    /// over 64; Anthropic and Gemini document no bound, so 64 as well (ARCHITECTURE.md
    /// Decisions, "Rebuilt histories").
    pub fn id_len_max(self) -> usize {
        match self {
            Format::OpenAiChat => 40,
            Format::OpenAiResponses | Format::Anthropic | Format::Gemini => 64,
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
    /// Index into `messages`, `input` or `contents`; 0 for the body itself.
    pub index: usize,
    /// The rule's stable name.
    pub rule: &'static str,
    /// What is wrong, for people.
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
/// `{"contents": [...]}` (Gemini, with `"systemInstruction"`). Each assistant message's
/// provider state goes with it in the format that produced it, and nowhere else. A
/// conversation that keeps the invariants of [`Conversation`] always renders to a body
/// [`validate`] accepts once it has the tools its calls name ([`request_body`]; Anthropic
/// rejects tool calls without tools: `anthropic.tools_missing`).
///
/// The history to hand to a provider is [`History::to_json_pretty`]: it keeps the arguments'
/// own text. This [`Value`] is for inspecting and validating the body; as any `Value`, it holds
/// a number in Anthropic's `input` or Gemini's `args` as an `f64` or 64-bit integer.
pub fn render(conv: &Conversation, format: Format) -> Value {
    history(conv, format).value()
}

/// `conv` rendered as [`render`] describes it, arguments kept as the model wrote them.
pub fn history(conv: &Conversation, format: Format) -> History {
    let msgs = prepare(conv, format);
    let system = conv.system.as_deref().filter(|s| !is_blank(s));
    History(match format {
        Format::OpenAiChat => Node::Value(openai_chat::render(system, &msgs)),
        Format::OpenAiResponses => openai_responses::render(system, &msgs),
        Format::Anthropic => anthropic::render(system, &msgs),
        Format::Gemini => gemini::render(system, &msgs),
    })
}

/// A rendered body whose argument objects are the model's own text.
#[derive(Debug, Clone)]
pub struct History(pub(crate) Node);

impl History {
    /// The body as a [`Value`] (numbers in argument objects as a `Value` holds them).
    pub fn value(&self) -> Value {
        self.0.to_value()
    }

    /// The body as JSON text, argument objects byte for byte as the journal has them.
    #[allow(clippy::expect_used)]
    pub fn to_json(&self) -> String {
        // Cannot fail: keys are strings and every raw fragment was parsed when it was made.
        serde_json::to_string(&self.0).expect("a rendered body serializes")
    }

    /// [`History::to_json`], indented (the raw argument text inside is left as it is).
    #[allow(clippy::expect_used)]
    pub fn to_json_pretty(&self) -> String {
        // Cannot fail, as in `to_json`.
        serde_json::to_string_pretty(&self.0).expect("a rendered body serializes")
    }
}

/// JSON as a rendered body holds it: plain values, and argument objects as the model's text.
/// Objects keep their keys sorted, as a `Value`'s do.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Value(Value),
    /// A JSON object's text, kept as it was written (checked to be an object).
    Raw(Box<RawValue>),
    Array(Vec<Node>),
    Object(BTreeMap<&'static str, Node>),
}

impl Node {
    /// An object from `fields`.
    pub(crate) fn object<const N: usize>(fields: [(&'static str, Node); N]) -> Node {
        Node::Object(fields.into_iter().collect())
    }

    fn to_value(&self) -> Value {
        match self {
            Node::Value(v) => v.clone(),
            // Parsed when the node was made, so it parses again.
            Node::Raw(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

impl From<Value> for Node {
    fn from(v: Value) -> Self {
        Node::Value(v)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Value(v) => v.serialize(s),
            Node::Raw(raw) => raw.serialize(s),
            Node::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Checks `body` (as [`render`] or [`request_body`] produces it) against `format`'s pairing
/// and ordering rules (DESIGN.md §6) and the shape those rules need; returns the first
/// violation. Provider state is checked where it goes: Anthropic's thinking blocks first in
/// an assistant message, Responses' reasoning items followed by the assistant's own output,
/// Gemini's `thoughtSignature`s strings on model parts. Anthropic's body must define tools
/// when its messages hold tool calls or results; that is checked after every other rule.
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
    pub name: String,
    pub content: &'a str,
    pub is_error: bool,
}

#[derive(Debug)]
pub(crate) enum Msg<'a> {
    User(&'a str),
    Assistant {
        text: &'a str,
        calls: Vec<Call<'a>>,
        /// The message's provider state, as JSON text, when it is the format's own.
        state: Option<&'a str>,
    },
    Results(Vec<Res<'a>>),
}

/// The decisions every format shares (see the module docs), ids in `format`'s form.
pub(crate) fn prepare(conv: &Conversation, format: Format) -> Vec<Msg<'_>> {
    // Every call's mapped id, so that a repeat made unique never takes a later call's id.
    let mapped: HashSet<String> = conv
        .messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { calls, .. } => calls.iter().collect(),
            _ => Vec::new(),
        })
        .map(|c| provider_id(format, &c.id))
        .collect();
    let mut prep = Preparer::new(
        format,
        WholeIds {
            mapped,
            used: HashSet::new(),
        },
    );
    conv.messages
        .iter()
        .filter_map(|m| prep.message(m))
        .collect()
}

/// Which call ids a conversation's calls have, for making repeats unique: the whole set
/// ([`WholeIds`]), or what a first reading of a journal planned (`stream::IdPlan`).
pub(crate) trait IdSpace {
    /// Claims a call's own (mapped) id: false when an earlier call had it.
    fn claim_own(&mut self, id: &str) -> bool;
    /// Whether some call of the conversation has `candidate` as its own mapped id.
    fn taken(&self, candidate: &str) -> bool;
    /// Claims a new id made for a repeat (never any call's own id): false when an earlier
    /// repeat took it.
    fn claim_candidate(&mut self, candidate: &str) -> bool;
}

/// Every call's mapped id, and the ids given so far.
pub(crate) struct WholeIds {
    mapped: HashSet<String>,
    used: HashSet<String>,
}

impl IdSpace for WholeIds {
    fn claim_own(&mut self, id: &str) -> bool {
        self.used.insert(id.to_string())
    }
    fn taken(&self, candidate: &str) -> bool {
        self.mapped.contains(candidate)
    }
    fn claim_candidate(&mut self, candidate: &str) -> bool {
        self.used.insert(candidate.to_string())
    }
}

/// A call of the message just before, for pairing its results.
struct PrevCall {
    original: String,
    id: String,
    name: String,
    answered: bool,
}

/// [`prepare`] one message at a time.
pub(crate) struct Preparer<I> {
    format: Format,
    ids: I,
    prev_calls: Vec<PrevCall>,
}

impl<I: IdSpace> Preparer<I> {
    pub(crate) fn new(format: Format, ids: I) -> Preparer<I> {
        Preparer {
            format,
            ids,
            prev_calls: Vec::new(),
        }
    }

    /// The message as every format lays it out; `None` for one that carries nothing.
    pub(crate) fn message<'a>(&mut self, message: &'a Message) -> Option<Msg<'a>> {
        let format = self.format;
        match message {
            Message::User { text } => {
                self.prev_calls.clear();
                Some(Msg::User(text))
            }
            Message::Assistant { text, calls, state } => {
                self.prev_calls.clear();
                let calls: Vec<Call<'_>> = calls
                    .iter()
                    .map(|c| {
                        let id = unique_id(
                            &provider_id(format, &c.id),
                            &mut self.ids,
                            format.id_len_max(),
                        );
                        self.prev_calls.push(PrevCall {
                            original: c.id.clone(),
                            id: id.clone(),
                            name: c.name.clone(),
                            answered: false,
                        });
                        Call {
                            id,
                            name: &c.name,
                            arguments: &c.arguments,
                        }
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    return None;
                }
                // Another provider's state means nothing here (and would be rejected).
                let state = state
                    .as_ref()
                    .filter(|s| s.format == format.as_str())
                    .map(|s| s.items.as_str());
                Some(Msg::Assistant { text, calls, state })
            }
            Message::Results { results } => {
                let results: Vec<Res<'_>> = results
                    .iter()
                    .map(|r| {
                        let call = self
                            .prev_calls
                            .iter_mut()
                            .find(|c| c.original == r.id && !c.answered);
                        let (id, name) = match call {
                            Some(call) => {
                                call.answered = true;
                                (call.id.clone(), call.name.clone())
                            }
                            None => (provider_id(format, &r.id), r.name.clone()),
                        };
                        Res {
                            id,
                            name,
                            content: &r.content,
                            is_error: r.is_error,
                        }
                    })
                    .collect();
                self.prev_calls.clear();
                (!results.is_empty()).then_some(Msg::Results(results))
            }
        }
    }
}

/// `id` (already in the format's form) itself the first time, then `{id}_{n}` for the smallest
/// `n >= 2` no call uses, `id` cut so that the whole fits `len_max`. Terminates: candidates for
/// distinct `n` differ after their last `_`, and only finitely many ids are taken.
fn unique_id(id: &str, ids: &mut impl IdSpace, len_max: usize) -> String {
    if ids.claim_own(id) {
        return id.to_string();
    }
    let mut n = 2u64;
    loop {
        let suffix = format!("_{n}");
        let mut head = id.to_string();
        // ASCII only (see `provider_id`), so any byte index is a char boundary.
        head.truncate(len_max.saturating_sub(suffix.len()));
        let candidate = head + &suffix;
        if !ids.taken(&candidate) && ids.claim_candidate(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// The characters every format's ids may use (Anthropic's pattern, the strictest).
fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// 1 to `len_max` characters, all of `[a-zA-Z0-9_-]`.
pub(crate) fn fits(s: &str, len_max: usize) -> bool {
    !s.is_empty() && s.len() <= len_max && s.chars().all(id_char)
}

/// `original` itself if it [`fits`], else every other character replaced by `_`, cut to leave
/// room, then `_` and the first 8 hex digits of sha256(`original`): readable, and ids that
/// differ only in replaced or cut characters stay distinct (a hash collision is caught by the
/// uniqueness step of `prepare`). A pure function of `original`, so a call and its result map
/// alike on every run. `len_max` is at least 10.
pub(crate) fn fit(original: &str, len_max: usize) -> String {
    if fits(original, len_max) {
        return original.to_string();
    }
    let hash = short_hash(original);
    let mut head: String = original
        .chars()
        .map(|c| if id_char(c) { c } else { '_' })
        .collect();
    // ASCII only now, so any byte index is a char boundary.
    head.truncate(len_max.saturating_sub(hash.len() + 1));
    format!("{head}_{hash}")
}

/// A call id in the form `format` takes: 1 to [`Format::id_len_max`] characters of
/// `[a-zA-Z0-9_-]`, mapped as `fit` describes when it is not already. Before `prepare` makes
/// repeats unique: the id a rendered call has is this, or this with a `_{n}` suffix.
pub fn provider_id(format: Format, original: &str) -> String {
    fit(original, format.id_len_max())
}

/// The violation for a call id `format` would reject, if `id` is one.
pub(crate) fn check_id(
    format: Format,
    id: &str,
    index: usize,
    rule: &'static str,
    what: &str,
) -> Result<(), Violation> {
    let len_max = format.id_len_max();
    if fits(id, len_max) {
        return Ok(());
    }
    Err(Violation::new(
        index,
        rule,
        format!(
            "{what} `{id}` ({} bytes) does not match ^[a-zA-Z0-9_-]{{1,{len_max}}}$",
            id.len()
        ),
    ))
}

/// Tool arguments as the object Anthropic's `input` and Gemini's `args` must be: the model's
/// own text when it is a JSON object, so that every number and escape stays as it was.
pub(crate) fn arguments_object(raw: &str) -> Node {
    if let Ok(Value::Object(_)) = serde_json::from_str::<Value>(raw) {
        if let Ok(text) = RawValue::from_string(raw.to_string()) {
            return Node::Raw(text);
        }
    }
    // The model's arguments may be invalid JSON or not an object (a crash may even have
    // come from them). The provider only takes an object here, and the history must stay
    // valid; dropping or "repairing" the arguments would misstate what the model sent, so
    // the raw text is kept, byte for byte, under a key no tool schema uses.
    Node::Value(json!({ "_raw_arguments": raw }))
}

/// The first 8 hex digits of sha256(`s`).
pub(crate) fn short_hash(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    hex::encode(&digest[..4])
}

/// The elements of a state that is a JSON array of objects, each kept as its own text, byte
/// for byte, when `keep` accepts its `type`. State that is not such an array yields nothing:
/// it came from the journal, and sending the provider something it did not produce would fail
/// the request (or misstate the reasoning) rather than recover it.
pub(crate) fn state_items(items: &str, keep: impl Fn(&str) -> bool) -> Vec<Node> {
    let Ok(raw) = serde_json::from_str::<Vec<Box<RawValue>>>(items) else {
        return Vec::new();
    };
    raw.into_iter()
        .filter(|item| {
            serde_json::from_str::<Value>(item.get())
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(&keep))
                .unwrap_or(false)
        })
        .map(Node::Raw)
        .collect()
}

/// Empty or only whitespace.
pub(crate) fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The text put in a leading user message when a history would otherwise start with the model
/// (Anthropic requires a user message first; Gemini a user turn before a call).
pub(crate) const LEADING_USER_TEXT: &str = "(conversation resumed)";

/// Three-part turns for the formats that merge consecutive messages of one role: `lead` holds
/// what must open the turn (an assistant turn's thinking blocks), `first` what comes next (a
/// user turn's results, a model turn's text), `rest` the others.
pub(crate) struct Turn {
    pub role: &'static str,
    pub lead: Vec<Node>,
    pub first: Vec<Node>,
    pub rest: Vec<Node>,
}

impl Turn {
    /// A turn holding only `rest`.
    pub(crate) fn of(role: &'static str, rest: Vec<Node>) -> Turn {
        Turn {
            role,
            lead: Vec::new(),
            first: Vec::new(),
            rest,
        }
    }

    pub(crate) fn into_parts(self) -> Vec<Node> {
        let mut parts = self.lead;
        parts.extend(self.first);
        parts.extend(self.rest);
        parts
    }
}

/// The turns of a format that merges consecutive messages of one role, made one message at a
/// time: only the open turn is held; a turn is handed out (as `{"role": ..., KEY: [...]}`) once
/// a message of the other role begins the next, or at the end. A first turn that is not the
/// user's gets a user turn of [`LEADING_USER_TEXT`] before it.
pub(crate) struct Turns {
    open: Option<Turn>,
    /// A turn was handed out.
    started: bool,
    /// `content` (Anthropic) or `parts` (Gemini).
    key: &'static str,
    /// The leading user turn's one part.
    leading: fn() -> Node,
}

impl Turns {
    pub(crate) fn new(key: &'static str, leading: fn() -> Node) -> Turns {
        Turns {
            open: None,
            started: false,
            key,
            leading,
        }
    }

    /// The open turn if it has `role`, else a new one (the open one handed out to `out`).
    pub(crate) fn turn(&mut self, role: &'static str, out: &mut Vec<Node>) -> &mut Turn {
        if self.open.as_ref().is_some_and(|t| t.role != role) {
            self.close(out);
        }
        self.open.get_or_insert_with(|| Turn::of(role, Vec::new()))
    }

    /// Hands out the open turn, if any.
    pub(crate) fn close(&mut self, out: &mut Vec<Node>) {
        let Some(t) = self.open.take() else {
            return;
        };
        if !self.started && t.role != "user" {
            out.push(self.element(Turn::of("user", vec![(self.leading)()])));
        }
        self.started = true;
        out.push(self.element(t));
    }

    fn element(&self, t: Turn) -> Node {
        Node::object([
            ("role", json!(t.role).into()),
            (self.key, Node::Array(t.into_parts())),
        ])
    }
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
