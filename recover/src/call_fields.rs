//! A call report's fields as every output says them: its resources as one list, its
//! classification as JSON.

use crate::classify::CallReport;
use serde_json::Value;

/// `resources` as one list: `write:PATH`, `read:PATH`, `intent:TEXT`.
pub(crate) fn resource_list(c: &CallReport) -> Vec<String> {
    let r = &c.resources;
    r.writes
        .iter()
        .map(|p| format!("write:{p}"))
        .chain(r.reads.iter().map(|p| format!("read:{p}")))
        .chain(r.intents.iter().map(|i| format!("intent:{i}")))
        .collect()
}

/// The classification as JSON: its name, or `null` for a call that has none.
pub(crate) fn classification(c: &CallReport) -> Value {
    match c.classification {
        // Cannot fail: an enum of unit variants serializes.
        #[allow(clippy::expect_used)]
        Some(k) => serde_json::to_value(k).expect("an enum of unit variants serializes"),
        None => Value::Null,
    }
}
