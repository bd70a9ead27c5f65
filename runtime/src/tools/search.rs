//! `tool_search`: how the model finds deferred tools (seeds 10.3).
//!
//! Why a search step instead of showing everything: a wide tool set costs tokens every step and
//! makes look-alike tools easier to confuse. Deferred tools stay out of the model's view until
//! a search finds them; the search confirms a `ToolsLoaded` side effect, the session adds the
//! names to its loaded set, and the *next* step's visible set (journaled as `step/tools`)
//! includes them. The current step's set never changes under a batch: a call to a deferred tool
//! in the same message as the search that finds it is still `UNKNOWN_TOOL`, because the policy
//! layer planned that batch against the set the model was shown.

use crate::args::Args;
use crate::event::SideEffect;
use crate::registry::Entry;
use crate::tool::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The reserved name.
pub(crate) const NAME: &str = "tool_search";

/// Most tools one search returns.
pub(crate) const RESULTS_MAX: u64 = 20;

/// What the search can find: one deferred tool.
#[derive(Debug, Clone)]
pub(crate) struct CatalogEntry {
    /// The tool's final name.
    pub name: String,
    /// The tool's description, searched and shown in results.
    pub description: String,
    /// The tool's input schema, shown in results so the model can call it next step.
    pub input_schema: Value,
}

impl CatalogEntry {
    /// The catalog entry of a registered tool.
    pub(crate) fn of(entry: &Entry) -> CatalogEntry {
        CatalogEntry {
            name: entry.tool.name().to_owned(),
            description: entry.tool.description().to_owned(),
            input_schema: entry.input.source().clone(),
        }
    }
}

/// The deferred tools loaded so far in a session, shared between the session (which reads it
/// when a step begins) and `tool_search` (which adds to it when a search settles).
#[derive(Debug, Default)]
pub(crate) struct Loaded(Mutex<BTreeSet<String>>);

impl Loaded {
    /// A set holding `names` already (a resumed session's loaded tools, from replay).
    pub(crate) fn new(names: BTreeSet<String>) -> Loaded {
        Loaded(Mutex::new(names))
    }

    /// A copy of the names loaded so far.
    pub(crate) fn snapshot(&self) -> BTreeSet<String> {
        // A poisoned lock only means a holder panicked mid-insert; the set is still a set.
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many tools are loaded (the set only grows: a changed length is a changed set).
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn extend(&self, names: &[String]) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(names.iter().cloned());
    }
}

/// The `tool_search` tool: finds deferred tools by words of their name and description and loads
/// the ones it returns (shown from the next step on). The session registers it itself when any tool
/// is deferred.
pub(crate) struct ToolSearch {
    catalog: Vec<CatalogEntry>,
    loaded: Arc<Loaded>,
}

impl ToolSearch {
    /// A search over `catalog` that adds what it finds to `loaded`.
    pub(crate) fn new(catalog: Vec<CatalogEntry>, loaded: Arc<Loaded>) -> ToolSearch {
        ToolSearch { catalog, loaded }
    }

    /// Catalog entries matching every word of `query` (in name or description, ignoring
    /// case), best first: more words in the name rank higher, then by name.
    fn find(&self, query: &str, limit: usize) -> Vec<&CatalogEntry> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let mut hits: Vec<(usize, &CatalogEntry)> = self
            .catalog
            .iter()
            .filter_map(|e| {
                let name = e.name.to_lowercase();
                let text = format!("{name} {}", e.description.to_lowercase());
                words.iter().all(|w| text.contains(w.as_str())).then(|| {
                    (
                        words.iter().filter(|w| name.contains(w.as_str())).count(),
                        e,
                    )
                })
            })
            .collect();
        hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        hits.into_iter().take(limit).map(|(_, e)| e).collect()
    }
}

impl Tool for ToolSearch {
    fn name(&self) -> &str {
        NAME
    }
    fn description(&self) -> &str {
        "Search the tools that are not shown yet, by words in their name or description. Tools \
         found are loaded: they can be called from the next step on."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 200},
                "limit": {"type": "integer", "minimum": 1, "maximum": RESULTS_MAX}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }
    fn is_read_only(&self) -> bool {
        // It changes what the model is shown, not the world.
        true
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn execute(&self, args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let query = args.str("query").unwrap_or_default();
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(5)
                .min(RESULTS_MAX) as usize;
            let found = self.find(query, limit);
            let names: Vec<String> = found.iter().map(|e| e.name.clone()).collect();
            let content = if found.is_empty() {
                format!("no tool matches {query:?}")
            } else {
                let lines: Vec<String> = found
                    .iter()
                    .map(|e| format!("- {}: {}", e.name, e.description))
                    .collect();
                format!(
                    "{} tool(s) loaded; they can be called from the next step on:\n{}",
                    found.len(),
                    lines.join("\n")
                )
            };
            let tools: Vec<Value> = found
                .iter()
                .map(|e| json!({"name": e.name, "description": e.description, "input_schema": e.input_schema}))
                .collect();
            self.loaded.extend(&names);
            let mut output =
                ToolOutput::text(content).with_value(json!({"loaded": names, "tools": tools}));
            if !names.is_empty() {
                output = output.with_side_effect(SideEffect::ToolsLoaded { names });
            }
            Ok(output)
        })
    }
}
