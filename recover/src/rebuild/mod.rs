//! `recover rebuild`'s output: the session's conversation as a whole request body in one
//! provider's format (system prompt, the tools the model was last shown with their input
//! schemas, the settings, the history), ready to send once the model's name and the
//! credentials are added. Shared by the CLI and its tests, so that both say one thing.
//!
//! [`body`] makes it of a whole [`Analysis`]; [`streamed`] writes the same bytes as it reads
//! the journal, in memory that does not grow with the journal (the CLI's way).

use crate::classify::Analysis;
use crate::conversation::ToolSpec;
use crate::providers::{request_body, validate, Format, History, Violation};
use events::event::{ToolSchema, VisibleTool};
use std::collections::BTreeMap;

pub(crate) mod streamed;

/// The description of a tool the journal names but does not describe (before schema 3).
pub const SCHEMA_NOT_JOURNALED: &str =
    "(this tool's description and input schema were not journaled: the session was recorded \
     before tooljournal kept them)";

/// The rule Anthropic's validator names a body by that has tool calls but no tools.
const ANTHROPIC_TOOLS_MISSING: &str = "anthropic.tools_missing";

/// A rebuilt request body, and what it could not say.
#[derive(Debug, Clone)]
pub struct Rebuilt {
    /// The body, arguments byte for byte as the journal has them.
    pub body: History,
    /// For people, one line each: tools left out and why, a body a provider would refuse as
    /// it is. Empty when the body is whole.
    pub notes: Vec<String>,
}

/// A rebuilt body that fails its own format's validator: a bug in rebuilding, never a body to
/// hand to a provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the rebuilt {format} body fails its validator: {violation}")]
pub struct InvalidBody {
    /// The format rebuilt.
    pub format: Format,
    /// The first rule it breaks.
    pub violation: Violation,
}

/// The tools the model was shown last, as the journal describes them, and a note for each it
/// cannot describe. The last step that journaled its `step/tools` names them, in its order;
/// each one's description and input schema come from the `tool/schema` its hash names. A
/// journal written before schema 3 has no `tool/schema`: those tools are left out.
pub fn tools(a: &Analysis) -> (Vec<ToolSpec>, Vec<String>) {
    let shown = a
        .replay
        .turns
        .iter()
        .rev()
        .flat_map(|t| t.steps.iter().rev())
        .find_map(|s| s.tools.as_deref());
    let any_step = a.replay.turns.iter().any(|t| !t.steps.is_empty());
    tools_shown(shown, any_step, &a.replay.tool_schemas)
}

/// [`tools`] of what it reads in the journal: the tools the last step that journaled them
/// showed (`shown`), whether any step began, and the `tool/schema`s by (name, hash).
pub(crate) fn tools_shown(
    shown: Option<&[VisibleTool]>,
    any_step: bool,
    schemas: &BTreeMap<(String, String), ToolSchema>,
) -> (Vec<ToolSpec>, Vec<String>) {
    let Some(shown) = shown else {
        let notes = if any_step {
            vec!["no step/tools in the journal: the body has no `tools`".to_owned()]
        } else {
            Vec::new()
        };
        return (Vec::new(), notes);
    };
    let mut specs = Vec::new();
    let mut notes = Vec::new();
    for visible in shown {
        let key = (visible.name.clone(), visible.schema_hash.clone());
        let Some(schema) = schemas.get(&key) else {
            // Anthropic and Gemini refuse a history with calls and no tools: the tool is
            // declared with what the journal knows (its name), and says what it does not.
            notes.push(format!(
                "tool `{}`: its schema {} is not in the journal (no tool/schema: written \
                 before event schema 3); declared with any object as its input",
                visible.name, visible.schema_hash
            ));
            specs.push(ToolSpec {
                name: visible.name.clone(),
                description: SCHEMA_NOT_JOURNALED.to_owned(),
                input_schema: serde_json::json!({"type": "object"}),
            });
            continue;
        };
        let input_schema = match serde_json::from_str(&schema.input_schema) {
            Ok(v) => v,
            Err(e) => {
                notes.push(format!(
                    "tool `{}` left out of `tools`: its journaled input schema {} is not \
                     JSON: {e}",
                    visible.name, visible.schema_hash
                ));
                continue;
            }
        };
        specs.push(ToolSpec {
            name: visible.name.clone(),
            description: schema.description.clone(),
            input_schema,
        });
    }
    (specs, notes)
}

/// The request body `recover rebuild --format format` prints: the conversation
/// ([`Analysis::conversation`]) with [`tools`] and the latest `session/model`'s settings (the
/// defaults when the journal has none), checked against `format`'s validator. An Anthropic
/// body whose tools are not in the journal breaks `anthropic.tools_missing`; that is the
/// journal's limit, not a rebuilding bug, so it is a note, and the body is still given.
pub fn body(a: &Analysis, format: Format) -> Result<Rebuilt, InvalidBody> {
    let (tools, mut notes) = tools(a);
    let last_answered = a
        .replay
        .turns
        .iter()
        .flat_map(|t| &t.steps)
        .rfind(|s| s.response.is_some());
    if let Some(refusal) = last_answered.and_then(|s| s.refusal.as_ref()) {
        notes.push(refusal_note(refusal));
    }
    let settings = a
        .replay
        .model
        .as_ref()
        .map(|m| m.settings.clone())
        .unwrap_or_default();
    let body = request_body(&a.conversation(), &tools, &settings, format);
    match validate(format, &body.value()) {
        Ok(()) => {}
        // Checked after every other rule: the body is otherwise valid.
        Err(v) if v.rule == ANTHROPIC_TOOLS_MISSING => notes.push(tools_missing_note(&v)),
        Err(violation) => return Err(InvalidBody { format, violation }),
    }
    Ok(Rebuilt { body, notes })
}

/// What `rebuild` says when the model's last answer was a refusal: the body ends with what it
/// said, and the provider's reason is not in it.
pub(crate) fn refusal_note(refusal: &events::event::LlmRefusal) -> String {
    let said = match refusal.explanation.trim() {
        "" => String::new(),
        text => format!(": {text}"),
    };
    format!(
        "the model's last answer (turn {}, step {}) was refused by the provider ({}){said}; \
         the body ends with what the model said",
        refusal.turn, refusal.step, refusal.reason
    )
}

/// The note for an Anthropic body with tool blocks and no tools.
fn tools_missing_note(v: &Violation) -> String {
    format!(
        "Anthropic rejects this body as it is: its messages hold tool_use or tool_result \
         blocks but it defines no tools (no tool the model was last shown has its schema \
         in the journal); add `tools` before sending it ({v})"
    )
}
