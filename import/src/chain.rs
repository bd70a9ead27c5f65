//! Repairs of formats whose lines are chained by parent links (pi's `id`/`parentId`, Claude
//! Code's `uuid`/`parentUuid`): where an answer goes, how the chain takes it in, and how a link
//! to a line never written (or moved out) is mended.
//!
//! Why one room for both: the agents rebuild their context by walking parent links up from the
//! last line, so an answer must sit in the chain between its call's message and whatever
//! followed it there, and a child of a line that is gone must point at the line before it, or
//! the walk stops and the conversation above is lost.

use crate::repair::{Edits, FileLine, Job};
use crate::session::{Call, Item, Session, Source};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// The names of a format's link fields.
#[derive(Clone, Copy)]
pub(crate) struct Keys {
    pub(crate) id: &'static str,
    pub(crate) parent: &'static str,
}

/// One kept line's place in the chain.
pub(crate) struct Link<'a> {
    pub(crate) at: Source,
    pub(crate) id: Option<String>,
    pub(crate) parent: Option<String>,
    /// Its bytes: read again for the few lines an answer copies fields from or whose parent is
    /// rewritten, rather than every line's JSON kept.
    pub(crate) text: &'a [u8],
}

impl Link<'_> {
    /// Its JSON (`Null` never happens: only lines that parse become links).
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(self.text).unwrap_or(Value::Null)
    }
}

/// Where a message's answers go.
pub(crate) struct Anchor<'a> {
    /// The line they follow: the message's last output in the file, or the message.
    pub(crate) after: &'a Link<'a>,
    /// The message's own line.
    pub(crate) message: Option<&'a Link<'a>>,
}

/// Makes new ids not yet in the file, derived from a seed so that a repair of the same file
/// writes the same bytes.
pub(crate) struct Ids {
    taken: HashSet<String>,
    shape: fn(u128) -> String,
}

impl Ids {
    /// A fresh id for `seed`.
    pub(crate) fn fresh(&mut self, seed: &str) -> String {
        let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
        for b in seed.bytes() {
            hash = (hash ^ u128::from(b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
        }
        loop {
            let id = (self.shape)(hash);
            if self.taken.insert(id.clone()) {
                return id;
            }
            hash = hash
                .wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
                .wrapping_add(1);
        }
    }
}

/// The repair's edits: for each message with calls to answer, the lines `answer` makes (each
/// with its id, chained in order after the anchor), the lines that followed the anchor in the
/// chain re-pointed to the last one made; then every line whose parent was never written (or
/// moved out) re-linked to the line before it in the repaired file.
pub(crate) fn repairs(
    job: &Job<'_>,
    keys: Keys,
    shape: fn(u128) -> String,
    mut answer: impl FnMut(
        &Anchor<'_>,
        &[&Call],
        Option<&str>,
        &mut Ids,
    ) -> Vec<(Option<String>, Vec<u8>)>,
) -> Edits {
    let (session, lines) = (job.session, &job.lines);
    let links = links(lines, &job.moved, keys);
    let mut ids = Ids {
        taken: links.iter().filter_map(|l| l.id.clone()).collect(),
        shape,
    };
    let mut edits = Edits::default();
    let mut new_parent: HashMap<u64, String> = HashMap::new();
    // The last answer's id added after a line (by its offset).
    let mut last_added: HashMap<u64, String> = HashMap::new();

    let by_offset: HashMap<u64, &Link<'_>> = links.iter().map(|l| (l.at.offset, l)).collect();
    let outputs = last_outputs(session);
    for (message, answered) in by_message(&job.calls) {
        let Some(anchor) = anchor(session, message, &outputs, &by_offset) else {
            continue;
        };
        let mut parent = anchor.after.id.clone();
        for (id, bytes) in answer(&anchor, &answered, parent.as_deref(), &mut ids) {
            edits
                .after
                .entry(anchor.after.at.offset)
                .or_default()
                .push(bytes);
            if id.is_some() {
                parent = id;
            }
        }
        // What followed the anchor in the chain now follows the answers.
        if let (Some(from), Some(to)) = (&anchor.after.id, &parent) {
            if from != to {
                last_added.insert(anchor.after.at.offset, to.clone());
                for l in links.iter().filter(|l| l.parent.as_ref() == Some(from)) {
                    new_parent.insert(l.at.offset, to.clone());
                }
            }
        }
    }

    let mut before: Option<String> = None;
    for l in &links {
        if let Some(parent) = &l.parent {
            if !ids.taken.contains(parent) && !new_parent.contains_key(&l.at.offset) {
                if let Some(b) = &before {
                    new_parent.insert(l.at.offset, b.clone());
                }
            }
        }
        before = last_added
            .get(&l.at.offset)
            .cloned()
            .or(l.id.clone())
            .or(before);
    }
    for l in &links {
        if let Some(to) = new_parent.get(&l.at.offset) {
            edits.parent.insert(l.at.offset, relinked(l, keys, to));
        }
    }
    edits
}

/// The kept lines that are JSON, with their links.
fn links<'a>(lines: &[FileLine<'a>], moved: &HashSet<Source>, keys: Keys) -> Vec<Link<'a>> {
    lines
        .iter()
        .filter(|l| !moved.contains(&l.at))
        .filter_map(|l| {
            // Only the two link fields are kept of each line.
            let value: Value = serde_json::from_slice(l.text).ok()?;
            let field = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
            Some(Link {
                at: l.at,
                id: field(keys.id),
                parent: field(keys.parent),
                text: l.text,
            })
        })
        .collect()
}

/// The calls to answer grouped by their message, in the order of the calls.
fn by_message<'a>(calls: &[&'a Call]) -> Vec<(usize, Vec<&'a Call>)> {
    let mut out: Vec<(usize, Vec<&Call>)> = Vec::new();
    for call in calls {
        // Calls come in file order, so a message's calls are adjacent.
        match out.last_mut() {
            Some((m, list)) if *m == call.message => list.push(call),
            _ => out.push((call.message, vec![call])),
        }
    }
    out
}

/// Each message's last output line (by the message's index in the items).
fn last_outputs(session: &Session) -> HashMap<usize, Source> {
    let mut out: HashMap<usize, Source> = HashMap::new();
    for item in &session.items {
        if let Item::Output { call, at } = item {
            let last = out.entry(session.calls[*call].message).or_insert(*at);
            *last = (*last).max(*at);
        }
    }
    out
}

/// The line a message's answers go after: its last output in the file, or its last line.
fn anchor<'a>(
    session: &Session,
    message: usize,
    outputs: &HashMap<usize, Source>,
    by_offset: &HashMap<u64, &'a Link<'a>>,
) -> Option<Anchor<'a>> {
    let Item::Assistant { calls, at, .. } = &session.items[message] else {
        return None;
    };
    let own = calls
        .iter()
        .map(|c| session.calls[*c].at)
        .max()
        .unwrap_or(*at);
    let last = outputs.get(&message).map_or(own, |o| (*o).max(own));
    Some(Anchor {
        after: by_offset.get(&last.offset).copied()?,
        message: by_offset.get(&at.offset).copied(),
    })
}

/// `text` with its parent link set to `to`: the exact text patched when the agent's
/// serialization is found once, else the line written again.
fn relinked(link: &Link<'_>, keys: Keys, to: &str) -> Vec<u8> {
    let text = link.text;
    if let Some(old) = &link.parent {
        let from = format!("\"{}\":{}", keys.parent, json!(old));
        let into = format!("\"{}\":{}", keys.parent, json!(to));
        let text_str = String::from_utf8_lossy(text);
        if text_str.matches(&from).count() == 1 {
            return text_str.replacen(&from, &into, 1).into_bytes();
        }
    }
    let mut value = link.value();
    value[keys.parent] = json!(to);
    value.to_string().into_bytes()
}
