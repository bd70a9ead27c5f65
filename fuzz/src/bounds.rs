//! The sandbox bounds calls journaled, as the checks read them.
//!
//! The bounds are read from the journal (not the tool's own record): what recovery states is
//! what the journal says, and the journal is held to the tool's record by I20's own check.

use journal::SimStorage;
use runtime::event::{Event, Evidence, SandboxBound};
use std::cell::OnceCell;
use std::collections::HashMap;

/// The bound among a `started`'s evidence, if any.
pub(crate) fn of_evidence(evidence: &[Evidence]) -> Option<&SandboxBound> {
    evidence.iter().find_map(|e| match e {
        Evidence::Sandbox(bound) => Some(bound),
        Evidence::FileReplace { .. } => None,
    })
}

/// The bound each call's last `started` journaled, by call id, read from the journal the first
/// time one is asked for (most cases never ask: only a `TOOL_OUTCOME_UNKNOWN` text needs it).
pub(crate) struct Journaled<'a> {
    image: &'a SimStorage,
    bounds: OnceCell<HashMap<String, SandboxBound>>,
}

impl<'a> Journaled<'a> {
    pub(crate) fn new(image: &'a SimStorage) -> Journaled<'a> {
        Journaled {
            image,
            bounds: OnceCell::new(),
        }
    }

    /// The bound `call_id`'s last `started` journaled; `None`: it journaled none (or did not
    /// start).
    pub(crate) fn bound(&self, call_id: &str) -> Option<&SandboxBound> {
        self.bounds
            .get_or_init(|| {
                let mut bounds = HashMap::new();
                for e in crate::read::events(self.image).unwrap_or_default() {
                    if let Event::Started(s) = e {
                        // A later `started` (a re-run) replaces an earlier one, with or without.
                        match of_evidence(&s.evidence) {
                            Some(b) => bounds.insert(s.call.call_id, b.clone()),
                            None => bounds.remove(&s.call.call_id),
                        };
                    }
                }
                bounds
            })
            .get(call_id)
    }
}
