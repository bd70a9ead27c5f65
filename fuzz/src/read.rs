//! What the checks read from what a run left behind: a journal's events, an independent copy of
//! a simulated disk, the error code a tool result's content begins with, and which provider
//! formats reject a conversation as it would be sent.

use journal::{Limits, Reader, SimStorage, Storage};
use recover::conversation::Conversation;
use recover::providers::{request_body, stand_in_tools, validate, Format};
use runtime::event::{Event, Record};
use runtime::ErrorCode;
use std::sync::Arc;

/// An independent copy of a simulated disk (clones share theirs).
pub(crate) fn copy_of(s: &SimStorage) -> SimStorage {
    let copy = SimStorage::new();
    for name in s.file_names() {
        if let Some(bytes) = s.read_file(&name) {
            copy.put_file(&name, bytes);
        }
    }
    copy
}

/// The events of a journal, timestamps aside (`None` if it does not read back).
pub(crate) fn events(s: &SimStorage) -> Option<Vec<Event>> {
    let reader = Reader::open(Arc::new(s.clone()) as Arc<dyn Storage>, Limits::default()).ok()?;
    reader
        .map(|r| r.ok()?.decode::<Record>().ok().map(|r| r.event))
        .collect()
}

/// Whether two disks hold the same files with the same bytes.
fn same_bytes(a: &SimStorage, b: &SimStorage) -> bool {
    let names = a.file_names();
    names == b.file_names() && names.iter().all(|n| a.read_file(n) == b.read_file(n))
}

/// Whether two disks hold the same events, timestamps aside: the same bytes, or else the same
/// events decoded (`b_events`: `b`'s, if already decoded). Most often the bytes are the same,
/// and nothing is decoded.
pub(crate) fn same_events(
    a: &SimStorage,
    b: &SimStorage,
    b_events: Option<&Option<Vec<Event>>>,
) -> bool {
    if same_bytes(a, b) {
        return true;
    }
    let decoded;
    let b_events = match b_events {
        Some(events) => events,
        None => {
            decoded = events(b);
            &decoded
        }
    };
    &events(a) == b_events
}

/// The error code an error content begins with.
pub(crate) fn code_of(content: &str) -> Option<ErrorCode> {
    ErrorCode::ALL.into_iter().find(|c| {
        content == c.as_str()
            || content
                .strip_prefix(c.as_str())
                .is_some_and(|rest| rest.starts_with(": "))
    })
}

/// Each provider format whose validator rejects the rendered `conv`, with why. With stand-ins
/// for the tools it calls: Anthropic takes no tool calls without tools.
pub(crate) fn provider_rejections(conv: &Conversation) -> Vec<(&'static str, String)> {
    let tools = stand_in_tools(conv);
    Format::ALL
        .into_iter()
        .filter_map(|format| {
            let body = request_body(conv, &tools, &Default::default(), format);
            validate(format, &body.value())
                .err()
                .map(|e| (format.as_str(), e.to_string()))
        })
        .collect()
}
