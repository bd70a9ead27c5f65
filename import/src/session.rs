//! What a session file says, in one shape for every agent: its messages in file order, its tool
//! calls with their verdicts, and what did not fit (quarantined lines, outputs of no call).

use crate::text::{Store, Text};
use crate::{Agent, ReadError};
use std::collections::{HashMap, HashSet, VecDeque};

/// Where something is in the session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
}

/// Why a line was quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The file's last line, with no newline after it, that does not parse: a write the crash
    /// cut short. Nothing follows it.
    Torn,
    /// A line that is not a JSON object (a bad line in the middle, a last one that ends with a
    /// newline, or JSON that is not an object).
    NotJson {
        /// The parser's words.
        why: String,
    },
    /// JSON, but not what its type says it is (to this reader: the agent may know better, so a
    /// repair keeps the line where it is).
    Shape {
        /// The parser's words, naming the field.
        why: String,
    },
}

/// A line kept out of the session: never skipped silently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where it is.
    pub at: Source,
    /// Its length in bytes, its newline excluded.
    pub len_bytes: u64,
    /// Why it was kept out.
    pub damage: Damage,
    /// Good lines follow it: damage in the middle of the file, not a torn tail.
    pub followed_by_good: bool,
}

/// What is known of one tool call's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its output was recorded.
    Result {
        /// The output's text (images and other blocks named in brackets).
        text: Text,
        /// The agent recorded it as an error.
        is_error: bool,
        /// The output's line.
        at: Source,
    },
    /// No output, and the agent's code proves the call never ran.
    NotStarted {
        /// The rule that proves it, in words (the upstream source is in
        /// `docs/IMPORT_FORMATS.md`).
        why: &'static str,
    },
    /// No output, and nothing proves it did not run.
    OutcomeUnknown {
        /// Why it may have run.
        why: &'static str,
    },
    /// No output: in its place the agent wrote a placeholder of its own that records nothing
    /// of what the call did (Claude Code's "[Tool call interrupted: … its outcome is unknown
    /// …]", "[Request interrupted by user for tool use]"). The agent replays the placeholder
    /// as the call's answer, so a repair adds none; what the call did is unknown.
    Placeholder {
        /// The placeholder's text.
        text: Text,
        /// Its line.
        at: Source,
        /// Why it is no output, in words.
        why: &'static str,
    },
}

impl Verdict {
    /// The line of what the agent recorded as the call's answer: its output or its placeholder.
    pub fn answer_at(&self) -> Option<Source> {
        match self {
            Verdict::Result { at, .. } | Verdict::Placeholder { at, .. } => Some(*at),
            Verdict::NotStarted { .. } | Verdict::OutcomeUnknown { .. } => None,
        }
    }
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The agent's call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// What the agent recorded it as (codex: `function_call`, `custom_tool_call`,
    /// `local_shell_call`, `tool_search_call`; pi: `toolCall`): its output's kind follows.
    pub kind: &'static str,
    /// Its arguments as the model gave them (JSON text, or the free text of a custom tool).
    pub arguments: Text,
    /// The line that recorded it.
    pub at: Source,
    /// The index in [`Session::items`] of the assistant message that holds it.
    pub message: usize,
    /// What is known of its outcome.
    pub verdict: Verdict,
}

/// One message or record of the session, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// The user's words.
    User {
        /// Their text.
        text: Text,
        /// Where.
        at: Source,
    },
    /// The model's turn: its text and the calls it asked for.
    Assistant {
        /// Its text.
        text: Text,
        /// Indexes in [`Session::calls`].
        calls: Vec<usize>,
        /// Why the model stopped, as the agent recorded it (pi's `stopReason`).
        stop: Option<String>,
        /// Where.
        at: Source,
    },
    /// A tool's output, paired with its call.
    Output {
        /// Index in [`Session::calls`].
        call: usize,
        /// Where.
        at: Source,
    },
}

impl Item {
    /// Where it is in the file.
    pub fn at(&self) -> Source {
        match self {
            Item::User { at, .. } | Item::Assistant { at, .. } | Item::Output { at, .. } => *at,
        }
    }
}

/// An output whose call id names no call before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanOutput {
    /// The id it names.
    pub call_id: String,
    /// Where.
    pub at: Source,
    /// Its text.
    pub text: Text,
    /// Recorded as an error.
    pub is_error: bool,
}

/// A session file as read.
pub struct Session {
    /// Who wrote it.
    pub agent: Agent,
    /// The session's id, from its header (`None`: the file has none).
    pub session_id: Option<String>,
    /// The last model named.
    pub model: Option<String>,
    /// Each model the file names where it names it, as (line, model), in line order: a model
    /// named again is listed only when it changes.
    pub models: Vec<(Source, String)>,
    /// Messages in file order.
    pub items: Vec<Item>,
    /// Tool calls in file order.
    pub calls: Vec<Call>,
    /// Outputs of no call.
    pub orphan_outputs: Vec<OrphanOutput>,
    /// Lines kept out, in file order.
    pub quarantined: Vec<Quarantined>,
    /// Lines whose bytes are not all UTF-8, read with U+FFFD in their place (as Node.js reads
    /// them; codex, which reads strict UTF-8, could not).
    pub lossy: Vec<Source>,
    /// Lines of a type this reader does not know: kept, and named here (type, where).
    pub unknown: Vec<(String, Source)>,
    /// What else the reader noticed (a missing header, a duplicate call id, a parent that was
    /// never written), each with where.
    pub notes: Vec<(Source, String)>,
    /// Each line's `timestamp`, as (line, milliseconds since the Unix epoch), in line order;
    /// lines without one are not listed ([`Session::time_ms`]).
    pub times: Vec<(u64, u64)>,
    /// Every call id seen, and the calls of each id still without an output, oldest first:
    /// reading stays linear in the file however many calls it holds.
    ids: HashSet<String>,
    open: HashMap<String, VecDeque<usize>>,
    /// The texts ([`Session::text`]).
    store: Store,
    /// The sum of the file's reading ([`crate::input::Sum`]).
    pub(crate) crc: u32,
    /// The first failure to keep a text: reading goes on, and ends with it.
    spill_failed: Option<ReadError>,
    /// What the index holds, in bytes ([`Session::held_bytes`]), up to the watermarks.
    held: Held,
}

/// The bytes a session's index holds, counted as it grows: each list by its capacity, and its
/// entries' strings by their length plus an allocation's overhead. An estimate (the
/// allocator's own overhead is not seen); `bench bounds` measures the real peak.
#[derive(Default)]
struct Held {
    /// Strings counted: those of the lists' first `counted` entries, and those held for the
    /// readers ([`Session::hold_strings`]).
    strings_bytes: u64,
    /// How many of calls, notes, unknown, models and orphan outputs are counted.
    counted: [usize; 5],
    /// The whole, once the file is read.
    total_bytes: u64,
}

/// What a string takes beside its bytes: its `String`, and an allocation's rounding.
const STRING_BYTES: u64 = 40;
/// What a call takes beside its own size and its id's and name's bytes: its id again in the
/// reader's sets and maps, with their overhead.
const CALL_EXTRA_BYTES: u64 = 3 * STRING_BYTES + 64;

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("agent", &self.agent)
            .field("session_id", &self.session_id)
            .field("items", &self.items.len())
            .field("calls", &self.calls.len())
            .field("quarantined", &self.quarantined.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The text `text` of this session. Fails only when its temporary file cannot be read
    /// back (a session read from a file keeps its texts there).
    pub fn text(&self, text: Text) -> Result<String, ReadError> {
        self.store.read_kept(text)
    }

    /// Keeps `text`, or notes the first failure to ([`Session::finish`] returns it).
    pub(crate) fn keep(&mut self, text: &str) -> Text {
        match self.store.put(text) {
            Ok(t) => t,
            Err(e) => {
                self.spill_failed.get_or_insert(e);
                Text::default()
            }
        }
    }

    /// The session read whole: its texts written out, or the first failure to keep one.
    pub(crate) fn finish(mut self) -> Result<Session, ReadError> {
        if let Some(e) = self.spill_failed.take() {
            return Err(e);
        }
        self.store.flush()?;
        self.held.total_bytes = self.held_bytes();
        Ok(self)
    }

    /// What the index of the session read whole holds ([`Session::held_bytes`]).
    pub(crate) fn index_bytes(&self) -> u64 {
        self.held.total_bytes
    }

    /// What the session's index holds, in bytes (an estimate): the lists of its items, calls
    /// and notes; its texts are not counted (they are in the store).
    pub(crate) fn held_bytes(&mut self) -> u64 {
        fn count<T>(list: &[T], counted: &mut usize, bytes: impl Fn(&T) -> u64) -> u64 {
            // A list that shrank (outputs paired late) is not counted down: the estimate errs
            // high.
            let new: u64 = list
                .get(*counted..)
                .unwrap_or_default()
                .iter()
                .map(bytes)
                .sum();
            *counted = list.len();
            new
        }
        let [calls, notes, unknown, models, orphans] = &mut self.held.counted;
        let c = count(&self.calls, calls, |c| {
            (3 * c.id.len() + c.name.len()) as u64 + CALL_EXTRA_BYTES
        });
        let n = count(&self.notes, notes, |(_, t)| t.len() as u64 + STRING_BYTES);
        let u = count(&self.unknown, unknown, |(t, _)| {
            t.len() as u64 + STRING_BYTES
        });
        let m = count(&self.models, models, |(_, t)| t.len() as u64 + STRING_BYTES);
        let o = count(&self.orphan_outputs, orphans, |o| {
            o.call_id.len() as u64 + STRING_BYTES
        });
        self.held.strings_bytes += c + n + u + m + o;
        // By capacity: a growing list holds up to twice what it lists.
        let sized = |capacity: usize, size: usize| (capacity * size) as u64;
        self.held.strings_bytes
            + sized(self.items.capacity(), std::mem::size_of::<Item>() + 8)
            + sized(self.calls.capacity(), std::mem::size_of::<Call>())
            + sized(
                self.notes.capacity(),
                std::mem::size_of::<(Source, String)>(),
            )
            + sized(
                self.unknown.capacity(),
                std::mem::size_of::<(String, Source)>(),
            )
            + sized(
                self.models.capacity(),
                std::mem::size_of::<(Source, String)>(),
            )
            + sized(
                self.orphan_outputs.capacity(),
                std::mem::size_of::<OrphanOutput>(),
            )
    }

    /// Counts strings a reader holds beside the session (a format's line ids).
    pub(crate) fn hold_strings<'a>(&mut self, strings: impl Iterator<Item = &'a String>) {
        self.held.strings_bytes += strings
            .map(|s| 2 * (s.len() as u64 + STRING_BYTES))
            .sum::<u64>();
    }

    /// When the line was written, as its `timestamp` says (`None`: it has none that reads).
    pub fn time_ms(&self, line: u64) -> Option<u64> {
        let i = self.times.binary_search_by_key(&line, |&(l, _)| l).ok()?;
        Some(self.times[i].1)
    }

    /// The line at `at` names `model`: the session's model from here on.
    pub(crate) fn model_named(&mut self, model: String, at: Source) {
        if self.model.as_ref() != Some(&model) {
            self.models.push((at, model.clone()));
        }
        self.model = Some(model);
    }

    pub(crate) fn new(agent: Agent, store: Store) -> Session {
        Session {
            agent,
            session_id: None,
            model: None,
            models: Vec::new(),
            items: Vec::new(),
            calls: Vec::new(),
            orphan_outputs: Vec::new(),
            quarantined: Vec::new(),
            lossy: Vec::new(),
            unknown: Vec::new(),
            notes: Vec::new(),
            times: Vec::new(),
            ids: HashSet::new(),
            open: HashMap::new(),
            store,
            crc: 0,
            spill_failed: None,
            held: Held::default(),
        }
    }

    /// Adds an assistant message and its calls (verdicts settled later by [`Session::pair`]
    /// and [`Session::settle`]).
    pub(crate) fn assistant(
        &mut self,
        text: String,
        stop: Option<String>,
        at: Source,
        calls: Vec<(String, String, String)>,
        kind: &'static str,
    ) {
        let text = self.keep(&text);
        self.items.push(Item::Assistant {
            text,
            calls: Vec::new(),
            stop,
            at,
        });
        for (id, name, arguments) in calls {
            self.push_call(id, name, kind, arguments, at);
        }
    }

    /// Adds the model's text to its message being read (the last item, while nothing came after
    /// it), or as a new message: formats that record a response item by item.
    pub(crate) fn model_text(&mut self, text: String, at: Source) {
        match self.items.last_mut() {
            Some(Item::Assistant { text: all, .. }) => {
                let sep = if !all.is_empty() && !text.is_empty() {
                    "\n"
                } else {
                    ""
                };
                match self.store.append(*all, sep, &text) {
                    Ok(joined) => *all = joined,
                    Err(e) => {
                        self.spill_failed.get_or_insert(e);
                    }
                }
            }
            _ => self.assistant(text, None, at, Vec::new(), ""),
        }
    }

    /// Adds a call to the model's message being read, as [`Session::model_text`] does.
    pub(crate) fn model_call(
        &mut self,
        (id, name, kind): (String, String, &'static str),
        arguments: String,
        at: Source,
    ) {
        if !matches!(self.items.last(), Some(Item::Assistant { .. })) {
            self.assistant(String::new(), None, at, Vec::new(), kind);
        }
        self.push_call(id, name, kind, arguments, at);
    }

    /// A call of the last item, an assistant message.
    fn push_call(
        &mut self,
        id: String,
        name: String,
        kind: &'static str,
        arguments: String,
        at: Source,
    ) {
        if !self.ids.insert(id.clone()) {
            self.notes.push((at, format!("call id {id:?} used again")));
        }
        let index = self.calls.len();
        self.open.entry(id.clone()).or_default().push_back(index);
        let arguments = self.keep(&arguments);
        let message = self.items.len() - 1;
        let Some(Item::Assistant { calls, .. }) = self.items.last_mut() else {
            unreachable!("callers add the assistant message first");
        };
        calls.push(index);
        self.calls.push(Call {
            id,
            name,
            kind,
            arguments,
            at,
            message,
            // Settled once the whole file is read.
            verdict: Verdict::OutcomeUnknown { why: "" },
        });
    }

    /// Pairs an output with a call of that id before it that has none yet: in the latest
    /// message that has such a call (an id reused by a later message names the later call), the
    /// first (outputs come in their calls' order, an id used twice in one message included); an
    /// output of no such call is an orphan.
    pub(crate) fn pair(&mut self, call_id: &str, text: String, is_error: bool, at: Source) {
        self.pair_answer(call_id, text, is_error, at, None);
    }

    /// Pairs the agent's own placeholder for an output (see [`Verdict::Placeholder`]) as
    /// [`Session::pair`] pairs an output.
    pub(crate) fn pair_placeholder(
        &mut self,
        call_id: &str,
        text: String,
        at: Source,
        why: &'static str,
    ) {
        self.pair_answer(call_id, text, true, at, Some(why));
    }

    fn pair_answer(
        &mut self,
        call_id: &str,
        text: String,
        is_error: bool,
        at: Source,
        placeholder: Option<&'static str>,
    ) {
        let calls = &self.calls;
        let open = self.open.get_mut(call_id);
        // The latest message with an open call of this id, and in it the first such call:
        // outputs come in their calls' order (an id used twice in one message).
        let taken = open.and_then(|open| {
            let message = calls[*open.back()?].message;
            let first = open
                .iter()
                .rposition(|&i| calls[i].message != message)
                .map_or(0, |p| p + 1);
            open.remove(first)
        });
        let text = self.keep(&text);
        match (taken, placeholder) {
            (Some(i), Some(why)) => {
                self.calls[i].verdict = Verdict::Placeholder { text, at, why };
                self.items.push(Item::Output { call: i, at });
            }
            (Some(i), None) => self.answer(i, text, is_error, at),
            (None, _) => self.orphan_outputs.push(OrphanOutput {
                call_id: call_id.to_owned(),
                at,
                text,
                is_error,
            }),
        }
    }

    /// Pairs the outputs read before any call of their id with the first such call after them:
    /// for formats that pair by id alone, wherever the output stands (codex).
    pub(crate) fn pair_late(&mut self) {
        let orphans = std::mem::take(&mut self.orphan_outputs);
        for o in orphans {
            match self.open.get_mut(&o.call_id).and_then(VecDeque::pop_front) {
                Some(i) => self.answer(i, o.text, o.is_error, o.at),
                None => self.orphan_outputs.push(o),
            }
        }
    }

    fn answer(&mut self, call: usize, text: Text, is_error: bool, at: Source) {
        self.calls[call].verdict = Verdict::Result { text, is_error, at };
        self.items.push(Item::Output { call, at });
    }

    /// Every call still without an output gets the verdict `rule` gives it.
    pub(crate) fn settle(&mut self, rule: impl Fn(&Session, &Call) -> Verdict) {
        for i in 0..self.calls.len() {
            if self.calls[i].verdict.answer_at().is_none() {
                let verdict = rule(self, &self.calls[i]);
                self.calls[i].verdict = verdict;
            }
        }
    }

    /// The postconditions every reader keeps.
    pub(crate) fn check(&self) {
        for (i, c) in self.calls.iter().enumerate() {
            assert!(
                matches!(self.items.get(c.message), Some(Item::Assistant { calls, .. }) if calls.contains(&i)),
                "a call belongs to its message"
            );
            if let Verdict::NotStarted { why }
            | Verdict::OutcomeUnknown { why }
            | Verdict::Placeholder { why, .. } = c.verdict
            {
                assert!(!why.is_empty(), "every verdict without an output says why");
            }
        }
        assert!(
            self.quarantined.windows(2).all(|w| w[0].at < w[1].at),
            "quarantined lines in file order"
        );
    }

    /// The user's text of a message, for readers.
    pub(crate) fn user(&mut self, text: String, at: Source) {
        let text = self.keep(&text);
        self.items.push(Item::User { text, at });
    }
}
