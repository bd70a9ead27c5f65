//! Repairs of formats whose lines are chained by parent links (pi's `id`/`parentId`, Claude
//! Code's `uuid`/`parentUuid`): which calls the agent replays, where an answer goes, how the
//! chain takes it in, and how a link to a line never written (or moved out) is mended.
//!
//! Why one room for both: the agents rebuild their context by walking parent links up from the
//! last line, so only the calls on that path are sent again, an answer must sit on the path
//! between its call's message and whatever followed it there, and a child of a line that is
//! gone must point where that line pointed (or, when it could not be read, at the line before
//! it), or the walk stops and the conversation above is lost.
//!
//! Claude Code adds one step to the walk (docs/IMPORT_FORMATS.md §4.3): a response written as
//! several lines (one per block, sharing the API message id) is replayed whole when any of its
//! lines is on the walk, together with the result lines hung under any of them (parallel calls'
//! results each hang under their own call's line, off the walk). [`Keys::role`] says which
//! lines are responses and results; the replayed lines are the walk and those.

use crate::input::{Input, Sum};
use crate::job::{Edits, Job};
use crate::lines;
use crate::session::{Call, Item, Session, Source};
use crate::{ReadError, INDEX_BYTES_MAX};

/// What a link takes beside its own size and strings: its place in the walk's and path's sets
/// and its resolved parent.
const LINK_EXTRA_BYTES: usize = 96;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// The names of a format's link fields, and what each line is where that matters: a header
/// (pi), a response's line or results (Claude Code, which replays a response's lines together).
#[derive(Clone, Copy)]
pub(crate) struct Keys {
    pub(crate) id: &'static str,
    pub(crate) parent: &'static str,
    pub(crate) role: Option<fn(&Value) -> Role>,
}

/// What a line is to the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    /// A line of the model's response with this API message id.
    Response(String),
    /// A line of tool results.
    Results,
    /// The file's header (pi's `session` line): its id is the session's, not a link.
    Header,
    /// Anything else.
    Other,
}

/// One line that parses, and its place in the chain.
pub(crate) struct Link {
    pub(crate) at: Source,
    pub(crate) id: Option<String>,
    pub(crate) parent: Option<String>,
    /// Kept in the copy (not moved out).
    kept: bool,
    /// What it is, where the format replays responses whole.
    role: Role,
    /// Its length: the line is read again for the few lines an answer copies fields from or
    /// whose parent is rewritten, rather than every line kept.
    len_bytes: u64,
}

/// A file's chain as the repair leaves it: each kept line's parent resolved, and the path the
/// agent replays.
pub(crate) struct Chain<'a> {
    keys: Keys,
    input: Input<'a>,
    links: Vec<Link>,
    /// For each kept link (by index): its parent in the copy, before answers go in.
    resolved: Vec<Option<String>>,
    /// Offsets of the kept lines on the walk from the last line up the parent links.
    walk: HashSet<u64>,
    /// Offsets of the kept lines the agent replays: the walk and, where the format replays
    /// responses whole, their other lines and the results hung under them.
    path: HashSet<u64>,
}

impl<'a> Chain<'a> {
    /// The chain of `input`'s lines with `moved` taken out: a whole reading, checked against
    /// `sum`.
    ///
    /// The chain is held whole, with the session's index (`held_bytes`): past
    /// [`INDEX_BYTES_MAX`] the file is refused at the line.
    pub(crate) fn new(
        input: Input<'a>,
        moved: &HashSet<Source>,
        keys: Keys,
        (sum, held_bytes): (&Sum, u64),
    ) -> Result<Chain<'a>, ReadError> {
        let mut links: Vec<Link> = Vec::new();
        let mut reading = input.lines();
        let mut text = Vec::new();
        let mut held_bytes = held_bytes;
        while let Some(line) = reading.next_line(&mut text)? {
            let at = line.at;
            if held_bytes > INDEX_BYTES_MAX {
                return Err(ReadError::IndexFull {
                    line: at.line,
                    offset: at.offset,
                });
            }
            // Only the two link fields are kept of each line.
            let Ok((value, _)) = lines::object(&text, at.offset == 0) else {
                continue;
            };
            let role = keys.role.map_or(Role::Other, |role| role(&value));
            if role == Role::Header {
                continue;
            }
            let field = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
            let (id, parent) = (field(keys.id), field(keys.parent));
            let role_bytes = match &role {
                Role::Response(id) => id.len(),
                _ => 0,
            };
            // The link, its strings, and its id again in the maps and sets built from it.
            held_bytes += (std::mem::size_of::<Link>() + LINK_EXTRA_BYTES + role_bytes) as u64
                + 3 * id.as_ref().map_or(0, |s| s.len() as u64 + 40)
                + 2 * parent.as_ref().map_or(0, |s| s.len() as u64 + 40);
            links.push(Link {
                at,
                id,
                parent,
                kept: !moved.contains(&at),
                role,
                len_bytes: text.len() as u64,
            });
        }
        sum.check(reading.crc())?;
        let by_id: HashMap<&str, usize> = (links.iter().enumerate())
            .filter_map(|(i, l)| Some((l.id.as_deref()?, i)))
            .collect();
        let mut resolved = Vec::with_capacity(links.len());
        let mut before: Option<String> = None;
        for l in &links {
            resolved.push(resolve(l, &links, &by_id, before.as_deref()));
            if l.kept && l.id.is_some() {
                before.clone_from(&l.id);
            }
        }
        // A file whose entries have no ids (pi's version 1: only its header has one) is chained
        // by its order: every line is on the path.
        let linked = links.iter().skip(1).any(|l| l.kept && l.id.is_some());
        let walk: HashSet<u64> = if !linked {
            (links.iter())
                .filter(|l| l.kept)
                .map(|l| l.at.offset)
                .collect()
        } else {
            replay_path(&links, &resolved, &by_id)
        };
        let path = whole_responses(&links, &resolved, &walk);
        Ok(Chain {
            keys,
            input,
            links,
            resolved,
            walk,
            path,
        })
    }

    /// A link's line as JSON (`Null` only when the file no longer says what it said).
    pub(crate) fn value(&self, link: &Link) -> Result<Value, ReadError> {
        let text = self.input.at(link.at.offset, link.len_bytes)?;
        Ok(lines::object(&text, link.at.offset == 0).map_or(Value::Null, |(v, _)| v))
    }

    /// Whether the line at `at` is replayed by the agent.
    pub(crate) fn on_path(&self, at: Source) -> bool {
        self.path.contains(&at.offset)
    }

    /// Whether the line at `at` is on the walk up the parent links from the last line: where
    /// an answer can be chained in.
    fn on_walk(&self, at: Source) -> bool {
        self.walk.contains(&at.offset)
    }
}

/// The lines replayed: those of `walk`, and for each response with a line on it, every kept
/// line of that response and every kept result line whose parent is one of them (Claude
/// Code's loader, which gathers a response's lines by message id and its results by parent).
fn whole_responses(
    links: &[Link],
    resolved: &[Option<String>],
    walk: &HashSet<u64>,
) -> HashSet<u64> {
    let responses: HashSet<&str> = (links.iter())
        .filter(|l| walk.contains(&l.at.offset))
        .filter_map(|l| match &l.role {
            Role::Response(id) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let mut path = walk.clone();
    if responses.is_empty() {
        return path;
    }
    let mut members: HashSet<&str> = HashSet::new();
    for l in links.iter().filter(|l| l.kept) {
        if let Role::Response(id) = &l.role {
            if responses.contains(id.as_str()) {
                path.insert(l.at.offset);
                members.extend(l.id.as_deref());
            }
        }
    }
    for (l, parent) in links.iter().zip(resolved) {
        let under = parent.as_deref().is_some_and(|p| members.contains(p));
        if l.kept && l.role == Role::Results && under {
            path.insert(l.at.offset);
        }
    }
    path
}

/// A kept line's parent in the copy: its own when that line is kept; the moved line's own
/// parent, resolved again, when it was moved out but could be read; the kept line before it
/// when its parent was never written or could not be read.
fn resolve(
    l: &Link,
    links: &[Link],
    by_id: &HashMap<&str, usize>,
    before: Option<&str>,
) -> Option<String> {
    let mut parent = l.parent.as_deref()?;
    // Each step goes to an earlier-read line's parent: at most as many steps as lines.
    for _ in 0..=links.len() {
        match by_id.get(parent).map(|i| &links[*i]) {
            Some(p) if p.kept => return Some(parent.to_owned()),
            Some(p) => match p.parent.as_deref() {
                Some(up) => parent = up,
                None => return None,
            },
            None => return before.map(str::to_owned),
        }
    }
    before.map(str::to_owned)
}

/// The lines from the last kept line with an id up to the root, through resolved parents.
fn replay_path(
    links: &[Link],
    resolved: &[Option<String>],
    by_id: &HashMap<&str, usize>,
) -> HashSet<u64> {
    let mut path = HashSet::new();
    let mut at = links.iter().rposition(|l| l.kept && l.id.is_some());
    while let Some(i) = at {
        if !path.insert(links[i].at.offset) {
            break; // a cycle in a damaged file: the walk has been here
        }
        at = resolved[i].as_deref().and_then(|p| by_id.get(p).copied());
    }
    path
}

/// Where a message's answers go.
pub(crate) struct Anchor<'a> {
    /// The line they follow: the message's last output on the path, or its last line.
    pub(crate) after: &'a Link,
    /// The message's own line.
    pub(crate) message: Option<&'a Link>,
}

/// Makes new ids not yet in the file, derived from a seed so that a repair of the same file
/// writes the same bytes.
pub(crate) struct Ids {
    taken: HashSet<String>,
    shape: fn(u128) -> String,
}

/// FNV-1a's 128-bit hash of `seed`: ids drawn from what they stand for, the same each time.
fn hash(seed: &[u8]) -> u128 {
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in seed {
        hash = (hash ^ u128::from(*b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    hash
}

/// A version 4 UUID's text (8-4-4-4-12 hex digits, the version and variant bits set) made of
/// `hash`'s other bits: the shape of Claude Code's line ids and pi's session ids.
pub(crate) fn uuid(hash: u128) -> String {
    const VERSION_MASK: u128 = 0xf000 << 64;
    const VARIANT_MASK: u128 = 0xc000 << 48;
    let v4 = (hash & !VERSION_MASK & !VARIANT_MASK) | (0x4000 << 64) | (0x8000 << 48);
    let h = format!("{v4:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A UUID drawn from `seed`.
pub(crate) fn seeded_uuid(seed: &[u8]) -> String {
    uuid(hash(seed))
}

impl Ids {
    /// A fresh id for `seed`.
    pub(crate) fn fresh(&mut self, seed: &str) -> String {
        let mut hash = hash(seed.as_bytes());
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
/// with its id, chained in order after the anchor), the path's line that followed the anchor
/// re-pointed to the last one made; every kept line whose parent is gone pointed where
/// [`resolve`] says.
pub(crate) fn repairs(
    job: &Job<'_>,
    chain: &Chain<'_>,
    shape: fn(u128) -> String,
    mut answer: impl FnMut(
        &Anchor<'_>,
        &[&Call],
        Option<&str>,
        &mut Ids,
    ) -> Result<Vec<(Option<String>, Vec<u8>)>, ReadError>,
) -> Result<Edits, ReadError> {
    let session = job.session;
    let links = &chain.links;
    let mut ids = Ids {
        taken: links.iter().filter_map(|l| l.id.clone()).collect(),
        shape,
    };
    let mut edits = Edits::default();
    // The last answer's id added after a line (by that line's id).
    let mut last_added: HashMap<String, String> = HashMap::new();

    let by_offset: HashMap<u64, &Link> = links.iter().map(|l| (l.at.offset, l)).collect();
    let outputs = outputs_on_path(session, chain);
    for (message, answered) in by_message(&job.calls) {
        let Some(anchor) = anchor(session, chain, message, &outputs, &by_offset) else {
            continue;
        };
        let mut parent = anchor.after.id.clone();
        for (id, bytes) in answer(&anchor, &answered, parent.as_deref(), &mut ids)? {
            let after = edits.after.entry(anchor.after.at.offset).or_default();
            after.push(bytes);
            if id.is_some() {
                parent = id;
            }
        }
        if let (Some(from), Some(to)) = (&anchor.after.id, parent) {
            if *from != to {
                last_added.insert(from.clone(), to);
            }
        }
    }

    for (l, resolved) in links.iter().zip(&chain.resolved) {
        if !l.kept {
            continue;
        }
        // What followed an anchor on the walk now follows its answers (a result hung off the
        // walk under a response's line stays there: that is where the agent finds it).
        let to = match resolved {
            Some(p) if chain.on_walk(l.at) => last_added.get(p).unwrap_or(p),
            Some(p) => p,
            None => continue,
        };
        if l.parent.as_ref() != Some(to) {
            edits.parent.insert(l.at.offset, relinked(chain, l, to)?);
        }
    }
    Ok(edits)
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

/// Each message's output lines on the path (by the message's index in the items).
fn outputs_on_path(session: &Session, chain: &Chain<'_>) -> HashMap<usize, Vec<Source>> {
    let mut out: HashMap<usize, Vec<Source>> = HashMap::new();
    for item in &session.items {
        if let Item::Output { call, at } = item {
            if chain.on_path(*at) {
                let message = session.calls[*call].message;
                out.entry(message).or_default().push(*at);
            }
        }
    }
    out
}

/// The line a message's answers go after: the last of its lines and its outputs on the path
/// that is on the walk (a line off the walk, a parallel call's result hung under its own call,
/// would leave the answer on a branch no one replays); the last of them when none is.
fn anchor<'a>(
    session: &Session,
    chain: &Chain<'_>,
    message: usize,
    outputs: &HashMap<usize, Vec<Source>>,
    by_offset: &HashMap<u64, &'a Link>,
) -> Option<Anchor<'a>> {
    let Item::Assistant { calls, at, .. } = &session.items[message] else {
        return None;
    };
    let own = calls.iter().map(|c| session.calls[*c].at);
    let answered = outputs.get(&message).into_iter().flatten().copied();
    let lines: Vec<Source> = own.chain(answered).chain([*at]).collect();
    let last = (lines.iter().copied())
        .filter(|l| chain.on_walk(*l))
        .max()
        .or_else(|| lines.iter().copied().max())?;
    Some(Anchor {
        after: by_offset.get(&last.offset).copied()?,
        message: by_offset.get(&at.offset).copied(),
    })
}

/// `link`'s text with its parent link (`key`) set to `to`: the exact text patched when the
/// agent's serialization is found once, else the line written again.
fn relinked(chain: &Chain<'_>, link: &Link, to: &str) -> Result<Vec<u8>, ReadError> {
    let key = chain.keys.parent;
    let bytes = chain.input.at(link.at.offset, link.len_bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    if let Some(old) = &link.parent {
        let from = format!("\"{key}\":{}", json!(old));
        if text.matches(&from).count() == 1 {
            let into = format!("\"{key}\":{}", json!(to));
            return Ok(text.replacen(&from, &into, 1).into_bytes());
        }
    }
    let mut value = chain.value(link)?;
    value[key] = json!(to);
    Ok(value.to_string().into_bytes())
}
