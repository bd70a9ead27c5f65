//! A request body written as the conversation is read ([`BodyWriter`]): the bytes
//! [`request_body`](super::request_body)`(..).to_json_pretty()` gives, without holding the
//! conversation.
//!
//! The body is an object whose keys are sorted; its array (`messages`, `input` or `contents`)
//! is written one element at a time between the keys before it and the keys after it, through
//! the same `serde_json` pretty formatter, so that every byte (indentation, escapes, the
//! arguments' own text) is the one the whole body would have. Each message goes through the
//! same code as the whole body's (`Preparer`, each format's `push`, `Turns`):
//! what is held at a time is one message, and for Anthropic and Gemini the one turn being
//! merged.
//!
//! Making repeated call ids unique needs to know every call's id, before and after: a
//! [`IdSurvey`] of a first reading gathers what that takes in a fixed-size filter, and the
//! [`IdPlan`] it gives answers exactly with only the ids that may repeat (see [`IdSurvey`]).

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};

use super::request::header_fields;
use super::{
    anthropic, gemini, is_blank, openai_chat, openai_responses, provider_id, Format, IdSpace, Node,
    Preparer, Turns,
};
use crate::conversation::{Message, ModelSettings, ToolSpec};

/// Bits of the survey's filter: 2 MiB, whatever the journal's length.
const FILTER_BITS: usize = 1 << 24;
/// Bits set per id.
const FILTER_PROBES: u64 = 4;

/// A first reading's count of a conversation's call ids, in `format`'s form, in little
/// memory: a filter of fixed size notes each id; an id the filter has (maybe) seen is kept as
/// a suspect repeat (its 64-bit hash: an id seen twice is always a suspect; an id seen once
/// is one rarely, by the filter's chance). Ids of the shape a repeat made unique takes
/// (`…_{digits}`) are kept whole with their turn, so that the plan knows exactly which such
/// ids the calls have.
#[derive(Debug)]
pub struct IdSurvey {
    format: Format,
    filter: Vec<u64>,
    suspects: HashSet<u64>,
    shaped: Vec<(u32, String)>,
}

impl IdSurvey {
    /// An empty survey for `format`'s ids.
    pub fn new(format: Format) -> IdSurvey {
        IdSurvey {
            format,
            filter: vec![0; FILTER_BITS / 64],
            suspects: HashSet::new(),
            shaped: Vec::new(),
        }
    }

    /// A call of turn `turn` with the model's id `original`.
    pub fn call(&mut self, turn: u32, original: &str) {
        let id = provider_id(self.format, original);
        let h = hash(&id);
        let mut seen = true;
        for bit in probes(h) {
            let (word, mask) = (bit / 64, 1u64 << (bit % 64));
            seen &= self.filter[word] & mask != 0;
            self.filter[word] |= mask;
        }
        if seen {
            self.suspects.insert(h);
        }
        if repeat_shaped(&id) {
            self.shaped.push((turn, id));
        }
    }

    /// The plan for a conversation of the turns `kept` says are in it.
    pub fn plan(self, kept: impl Fn(u32) -> bool) -> IdPlan {
        IdPlan {
            suspects: self.suspects,
            shaped: self
                .shaped
                .into_iter()
                .filter(|(turn, _)| kept(*turn))
                .map(|(_, id)| id)
                .collect(),
            seen: HashSet::new(),
            made: HashSet::new(),
        }
    }
}

/// What [`BodyWriter`] needs to make repeated call ids unique exactly as the whole body does,
/// holding only the ids that may repeat.
#[derive(Debug, Default)]
pub struct IdPlan {
    /// Hashes of the ids that may occur more than once.
    suspects: HashSet<u64>,
    /// The calls' ids of the shape a repeat's new id takes.
    shaped: HashSet<String>,
    /// Suspect ids given so far.
    seen: HashSet<String>,
    /// Ids made for repeats so far.
    made: HashSet<String>,
}

impl IdSpace for IdPlan {
    fn claim_own(&mut self, id: &str) -> bool {
        // An id the survey saw once cannot have been given before.
        !self.suspects.contains(&hash(id)) || self.seen.insert(id.to_string())
    }
    fn taken(&self, candidate: &str) -> bool {
        // A candidate has the shape, so it is a call's id exactly when it is among these.
        self.shaped.contains(candidate)
    }
    fn claim_candidate(&mut self, candidate: &str) -> bool {
        // Never a call's own id (`taken` said so first), so only earlier repeats can have it.
        self.made.insert(candidate.to_string())
    }
}

/// Ends in `_` and at least one digit: every id a repeat is given has this shape.
fn repeat_shaped(id: &str) -> bool {
    id.rsplit_once('_')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn hash(id: &str) -> u64 {
    // SipHash with fixed keys: the same in both readings.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// The filter's bits for hash `h` (double hashing).
fn probes(h: u64) -> impl Iterator<Item = usize> {
    let (a, b) = (h, (h >> 32) | 1);
    (0..FILTER_PROBES).map(move |i| {
        // FILTER_BITS is a power of two that fits usize.
        (a.wrapping_add(i.wrapping_mul(b)) % FILTER_BITS as u64) as usize
    })
}

/// What a body holds besides its messages.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The system prompt (a blank one is left out, as [`super::history`] does).
    pub system: Option<String>,
    /// The tools the model is shown.
    pub tools: Vec<ToolSpec>,
    /// The settings.
    pub settings: ModelSettings,
}

/// Each format's way of laying messages out, one at a time.
enum Layout {
    Flat,
    Merged(Turns),
}

/// Writes a request body as the conversation's messages come (see the module docs).
pub struct BodyWriter<W: Write> {
    out: W,
    formatter: PrettyFormatter<'static>,
    format: Format,
    prep: Preparer<IdPlan>,
    layout: Layout,
    /// Top-level fields after the array, in order.
    after: Vec<(&'static str, Node)>,
    /// Elements made and not written yet.
    pending: Vec<Node>,
    elements: usize,
    /// The tools are none.
    no_tools: bool,
    /// Anthropic: the index of the first message with a tool_use or tool_result block.
    first_tool_message: Option<usize>,
}

impl<W: Write> BodyWriter<W> {
    /// Writes the body's opening: the fields that sort before its array, and the array's
    /// opening (with OpenAI's system message or item first in it).
    pub fn new(out: W, format: Format, header: Header, ids: IdPlan) -> io::Result<BodyWriter<W>> {
        let system = header.system.filter(|s| !is_blank(s));
        let no_tools = header.tools.is_empty();
        let mut fields: BTreeMap<&'static str, Node> =
            header_fields(&header.tools, &header.settings, format)
                .into_iter()
                .map(|(k, v)| (k, Node::Value(v)))
                .collect();
        let (key, layout, first) = match format {
            Format::OpenAiChat => (
                "messages",
                Layout::Flat,
                system
                    .as_deref()
                    .map(|s| Node::Value(openai_chat::system_message(s))),
            ),
            Format::OpenAiResponses => (
                "input",
                Layout::Flat,
                system.as_deref().map(openai_responses::system_item),
            ),
            Format::Anthropic => {
                if let Some(s) = &system {
                    fields.insert("system", anthropic::system_field(s));
                }
                ("messages", Layout::Merged(anthropic::turns()), None)
            }
            Format::Gemini => {
                if let Some(s) = &system {
                    fields.insert("systemInstruction", gemini::system_field(s));
                }
                ("contents", Layout::Merged(gemini::turns()), None)
            }
        };
        let after = fields.split_off(key).into_iter().collect();
        let mut w = BodyWriter {
            out,
            formatter: PrettyFormatter::new(),
            format,
            prep: Preparer::new(format, ids),
            layout,
            after,
            pending: first.into_iter().collect(),
            elements: 0,
            no_tools,
            first_tool_message: None,
        };
        w.formatter.begin_object(&mut w.out)?;
        let mut first_key = true;
        for (k, v) in &fields {
            w.field(k, v, first_key)?;
            first_key = false;
        }
        w.key(key, first_key)?;
        w.formatter.begin_array(&mut w.out)?;
        w.write_pending()?;
        Ok(w)
    }

    /// Writes what `message` adds to the body (for Anthropic and Gemini, the turns it closes).
    pub fn message(&mut self, message: &Message) -> io::Result<()> {
        let Some(msg) = self.prep.message(message) else {
            return Ok(());
        };
        match (&mut self.layout, self.format) {
            (Layout::Flat, Format::OpenAiChat) => {
                let mut values = Vec::new();
                openai_chat::push(&msg, &mut values);
                self.pending.extend(values.into_iter().map(Node::Value));
            }
            (Layout::Flat, _) => openai_responses::push(&msg, &mut self.pending),
            (Layout::Merged(turns), Format::Anthropic) => {
                anthropic::push(&msg, turns, &mut self.pending)
            }
            (Layout::Merged(turns), _) => gemini::push(&msg, turns, &mut self.pending),
        }
        self.write_pending()
    }

    /// Writes the last turn, closes the array, writes the fields after it and closes the body,
    /// then a newline; hands the output back, flushed, with what the body breaks when it is
    /// Anthropic's with no tools and a message holds a tool_use or tool_result block
    /// (`anthropic.tools_missing`, as [`super::validate`] names it): the journal's limit, not
    /// a writing bug.
    pub fn finish(mut self) -> io::Result<(W, Option<super::Violation>)> {
        if let Layout::Merged(turns) = &mut self.layout {
            turns.close(&mut self.pending);
        }
        self.write_pending()?;
        self.formatter.end_array(&mut self.out)?;
        self.formatter.end_object_value(&mut self.out)?;
        for (k, v) in std::mem::take(&mut self.after) {
            self.field(k, &v, false)?;
        }
        self.formatter.end_object(&mut self.out)?;
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        let tools_missing = self
            .first_tool_message
            .filter(|_| self.no_tools && self.format == Format::Anthropic)
            .map(anthropic::tools_missing);
        Ok((self.out, tools_missing))
    }

    fn write_pending(&mut self) -> io::Result<()> {
        for node in std::mem::take(&mut self.pending) {
            if self.first_tool_message.is_none()
                && self.format == Format::Anthropic
                && anthropic::has_tool_block(&node)
            {
                self.first_tool_message = Some(self.elements);
            }
            self.formatter
                .begin_array_value(&mut self.out, self.elements == 0)?;
            self.value(&node)?;
            self.formatter.end_array_value(&mut self.out)?;
            self.elements += 1;
        }
        Ok(())
    }

    fn key(&mut self, key: &str, first: bool) -> io::Result<()> {
        self.formatter.begin_object_key(&mut self.out, first)?;
        self.value(&key)?;
        self.formatter.end_object_key(&mut self.out)?;
        self.formatter.begin_object_value(&mut self.out)
    }

    fn field(&mut self, key: &str, value: &Node, first: bool) -> io::Result<()> {
        self.key(key, first)?;
        self.value(value)?;
        self.formatter.end_object_value(&mut self.out)
    }

    /// `value` at the place the formatter is at.
    fn value(&mut self, value: &impl Serialize) -> io::Result<()> {
        let mut ser =
            serde_json::Serializer::with_formatter(&mut self.out, Shared(&mut self.formatter));
        value.serialize(&mut ser).map_err(io::Error::from)
    }
}

/// The body's one pretty formatter, lent to the serializer of each value, so that nested
/// values are indented where they stand. Forwards what [`PrettyFormatter`] does itself; the
/// rest is every formatter's default.
struct Shared<'f>(&'f mut PrettyFormatter<'static>);

impl Formatter for Shared<'_> {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}
