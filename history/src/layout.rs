//! A conversation laid out from journal turns, with or without a reduction ([`Compaction`]).
//!
//! The live agent and `recover` both build their [`Conversation`] here, so that a reduction
//! recorded in the journal (`context/compacted`) is applied with the same code by both: what a
//! resumed session sends is what the model last saw.
//!
//! Without a compaction the layout is the flat one: per turn its user message, then per step
//! its assistant message and, when the step made calls, right after it one result per call.
//! With one, the turns it replaces are left out, the first remaining user message says so (or
//! carries the model's summary of them), and the results of the steps it names are cut to a
//! preview ([`shorten`]). A call and its result are never separated: a step is left out whole
//! (its turn is) or kept whole.

use crate::conversation::{ConvCall, ConvResult, Conversation, Message, ProviderState};

/// One turn as the journal tells it: the user's message and the model's steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnView {
    /// The journal's turn number (1 for the first turn); ascending along a slice of turns.
    pub turn: u32,
    /// What the user said to open the turn.
    pub user_text: String,
    /// The steps the model answered, in order. A step the model never answered has no view,
    /// as the flat conversation leaves it out.
    pub steps: Vec<StepView>,
}

/// One answered step: the assistant message and, for each of its calls, the one result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepView {
    /// The journal's step number within its turn (1 for the first step).
    pub step: u32,
    /// The assistant's text (may be empty).
    pub text: String,
    /// Its tool calls, in model order.
    pub calls: Vec<ConvCall>,
    /// The provider state the response came with.
    pub state: Option<ProviderState>,
    /// Exactly one result per call, in call order; empty when there are no calls.
    pub results: Vec<ConvResult>,
}

/// A reduction of the history, as the journal's `context/compacted` event records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compaction {
    /// Turns numbered 1..=`through_turn` are replaced (0: none). The last turn of a layout is
    /// kept whatever this says (see [`layout`]).
    pub through_turn: u32,
    /// The model's summary of the replaced turns; `None` when they are simply dropped.
    pub summary: Option<String>,
    /// (turn, step) pairs whose tool results are cut to a preview ([`shorten`]).
    pub shortened: Vec<(u32, u32)>,
    /// How many characters of a shortened result are kept (half from its start, half from
    /// its end).
    pub preview_chars: u32,
}

/// The conversation `turns` make under `compaction` (none: the flat layout).
///
/// - Without a compaction: per turn `Message::User` with its text; per step
///   `Message::Assistant` with its text, calls and state (an empty one with no calls too: the
///   renderers drop it, as they do for the flat conversation), then, when the step has calls,
///   `Message::Results` with its results.
/// - Turns numbered `<= through_turn` are left out, except the last turn of `turns`, which is
///   always kept: a layout with no user message left would give the model nothing to answer
///   ([`crate::reduce::plan_fallback`] never plans such a compaction).
/// - When N >= 1 turns were left out, the first remaining user message's text gets a prefix:
///   with a summary `[Summary of the N earlier turn(s), written by the model when the context
///   was reduced:]\n{summary}\n[End of summary.]\n\n`, without one `[N earlier turn(s) were
///   left out to fit the model's context window; the session's journal keeps them.]\n\n`.
///   N counts the turns of `turns` actually left out. A prefix (rather than a message of its
///   own) keeps the user/assistant alternation every provider wants.
/// - Each result of a kept step named in `shortened` has its content replaced by
///   [`shorten`]`(content, preview_chars)`.
pub fn layout(
    system: Option<String>,
    turns: &[TurnView],
    compaction: Option<&Compaction>,
) -> Conversation {
    let last = turns.len().saturating_sub(1);
    let left_out =
        |i: usize, t: &TurnView| compaction.is_some_and(|c| i < last && t.turn <= c.through_turn);
    let dropped = turns
        .iter()
        .enumerate()
        .filter(|(i, t)| left_out(*i, t))
        .count();
    let mut lay = Layout::new(compaction.cloned(), turns.len(), dropped);
    let mut messages = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        let Some(user) = lay.user(i, turn.turn, &turn.user_text) else {
            continue;
        };
        messages.push(user);
        for step in &turn.steps {
            messages.extend(lay.step(turn.turn, step.clone()));
        }
    }
    Conversation { system, messages }
}

/// [`layout`] one turn and one step at a time, for a caller that reads the turns as it goes
/// (`recover rebuild` writes a journal's history as it reads it) and knows beforehand how many
/// turns there are and how many of them are left out.
#[derive(Debug, Clone)]
pub struct Layout {
    compaction: Option<Compaction>,
    /// The index of the last turn (always kept).
    last: usize,
    /// What the first kept user message opens with, until it is used.
    prefix: Option<String>,
}

impl Layout {
    /// A layout of `turns` turns under `compaction`, `dropped` of which are left out (as
    /// [`Layout::left_out`] says of each).
    pub fn new(compaction: Option<Compaction>, turns: usize, dropped: usize) -> Layout {
        let prefix = match &compaction {
            Some(c) if dropped > 0 => Some(left_out_prefix(dropped, c.summary.as_deref())),
            _ => None,
        };
        Layout {
            compaction,
            last: turns.saturating_sub(1),
            prefix,
        }
    }

    /// Whether the turn at index `i`, numbered `turn`, is left out.
    pub fn left_out(&self, i: usize, turn: u32) -> bool {
        self.compaction
            .as_ref()
            .is_some_and(|c| i < self.last && turn <= c.through_turn)
    }

    /// The user message that opens the turn at index `i`, numbered `turn`; `None` when the
    /// turn is left out (and then so are its steps).
    pub fn user(&mut self, i: usize, turn: u32, user_text: &str) -> Option<Message> {
        if self.left_out(i, turn) {
            return None;
        }
        let text = match self.prefix.take() {
            Some(prefix) => prefix + user_text,
            None => user_text.to_owned(),
        };
        Some(Message::User { text })
    }

    /// The messages of a kept turn's step: its assistant message and, when it made calls, its
    /// results (cut to a preview when the compaction names the step).
    pub fn step(&self, turn: u32, step: StepView) -> impl Iterator<Item = Message> {
        let shortened = self
            .compaction
            .as_ref()
            .filter(|c| c.shortened.contains(&(turn, step.step)))
            .map(|c| c.preview_chars);
        let results = (!step.calls.is_empty()).then(|| {
            let results = step
                .results
                .into_iter()
                .map(|r| match shortened {
                    Some(preview_chars) => ConvResult {
                        content: shorten(&r.content, preview_chars),
                        ..r
                    },
                    None => r,
                })
                .collect();
            Message::Results { results }
        });
        let assistant = Message::Assistant {
            text: step.text,
            calls: step.calls,
            state: step.state,
        };
        std::iter::once(assistant).chain(results)
    }
}

/// What opens the first remaining user message when `n` earlier turns were left out.
fn left_out_prefix(n: usize, summary: Option<&str>) -> String {
    match summary {
        Some(summary) => format!(
            "[Summary of the {n} earlier turn(s), written by the model when the context was \
             reduced:]\n{summary}\n[End of summary.]\n\n"
        ),
        None => format!(
            "[{n} earlier turn(s) were left out to fit the model's context window; the \
             session's journal keeps them.]\n\n"
        ),
    }
}

/// `content` cut to a preview: unchanged when it has at most `preview_chars` characters,
/// else its first `preview_chars / 2` and last `preview_chars / 2` characters (Unicode scalar
/// values, so never inside one) with `\n[... result shortened to fit the context: {total}
/// characters in all; the journal keeps it whole ...]\n` between them.
pub fn shorten(content: &str, preview_chars: u32) -> String {
    let total = content.chars().count();
    let preview = usize::try_from(preview_chars).unwrap_or(usize::MAX);
    if total <= preview {
        return content.to_string();
    }
    let half = preview / 2;
    let head: String = content.chars().take(half).collect();
    let tail: String = content.chars().skip(total - half).collect();
    format!(
        "{head}\n[... result shortened to fit the context: {total} characters in all; the \
         journal keeps it whole ...]\n{tail}"
    )
}
