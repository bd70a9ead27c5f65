//! The tool registry: which tools exist, under which final names, from where.
//!
//! Why strict: a model calls tools by name, so a name that silently changes meaning is the most
//! dangerous bug a plugin ecosystem can have. Final names are unique; an external tool can never
//! take a built-in's name (not even in a child scope); a child scope hides a parent's tool only
//! when asked to explicitly; names the runtime keeps for itself are refused.

use crate::args::Schema;
use crate::event::{ToolDescriptor, ToolSource, VisibleTool};
use crate::registry_rules::valid_name;
pub(crate) use crate::registry_rules::TOOLS_PER_SCOPE_MAX;
pub use crate::registry_rules::{RegistryError, RESERVED_NAMES};
use crate::tool::Tool;
pub(crate) use events::schema::schema_hash;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How a tool is shown to the model, step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposure {
    /// Its schema is shown every step.
    #[default]
    Direct,
    /// Found through `tool_search`; shown from the step after it was found.
    Deferred,
    /// Never shown, never callable by the model.
    Hidden,
}

/// A registered tool with its compiled schemas.
pub struct Entry {
    /// The tool itself.
    pub tool: Arc<dyn Tool>,
    /// Where it comes from.
    pub source: ToolSource,
    /// How the model is shown it.
    pub exposure: Exposure,
    /// The compiled input schema, checked against every call's arguments.
    pub input: Schema,
    /// The compiled output schema, checked against every structured value; `None` when the tool
    /// declares none.
    pub output: Option<Schema>,
    /// sha256 (hex) of the canonical JSON of the input and output schemas, as journaled in
    /// `session/open` and `step/tools`.
    pub schema_hash: String,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.tool.name())
            .field("source", &self.source)
            .finish()
    }
}

/// A scope of tools, optionally inside a parent scope.
#[derive(Debug, Default)]
pub struct Registry {
    parent: Option<Arc<Registry>>,
    tools: BTreeMap<String, Arc<Entry>>,
}

impl Registry {
    /// An empty root scope.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A child scope: sees the parent's tools, may add its own.
    pub fn child(parent: Arc<Registry>) -> Registry {
        Registry {
            parent: Some(parent),
            tools: BTreeMap::new(),
        }
    }

    /// Registers a tool. Refuses a duplicate name in this scope, a name from a parent scope, an
    /// external tool with a built-in's name, bad or reserved names, and invalid schemas.
    pub fn register(
        &mut self,
        tool: Arc<dyn Tool>,
        source: ToolSource,
    ) -> Result<(), RegistryError> {
        self.insert(tool, source, Exposure::Direct, false)
    }

    /// [`Registry::register`] with an exposure other than direct.
    pub fn register_exposed(
        &mut self,
        tool: Arc<dyn Tool>,
        source: ToolSource,
        exposure: Exposure,
    ) -> Result<(), RegistryError> {
        self.insert(tool, source, exposure, false)
    }

    /// Registers a tool that deliberately hides a parent scope's tool of the same name. An
    /// external tool still cannot hide a built-in.
    pub fn register_shadowing(
        &mut self,
        tool: Arc<dyn Tool>,
        source: ToolSource,
    ) -> Result<(), RegistryError> {
        self.insert(tool, source, Exposure::Direct, true)
    }

    /// Changes how a tool of this scope is shown (configuration applied after registration,
    /// before any session holds the entry). Returns whether the tool was found and changed.
    pub fn set_exposure(&mut self, name: &str, exposure: Exposure) -> bool {
        match self.tools.get_mut(name).and_then(Arc::get_mut) {
            Some(entry) => {
                entry.exposure = exposure;
                true
            }
            None => false,
        }
    }

    /// The runtime's own `tool_search`, which only the runtime may register (its name is
    /// reserved). Always shown directly.
    pub(crate) fn register_reserved(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        debug_assert!(RESERVED_NAMES.contains(&tool.name()));
        self.insert_checked(tool, ToolSource::BuiltIn, Exposure::Direct, false)
    }

    fn insert(
        &mut self,
        tool: Arc<dyn Tool>,
        source: ToolSource,
        exposure: Exposure,
        shadow: bool,
    ) -> Result<(), RegistryError> {
        if RESERVED_NAMES.contains(&tool.name()) {
            return Err(RegistryError::Reserved {
                name: tool.name().to_owned(),
            });
        }
        self.insert_checked(tool, source, exposure, shadow)
    }

    fn insert_checked(
        &mut self,
        tool: Arc<dyn Tool>,
        source: ToolSource,
        exposure: Exposure,
        shadow: bool,
    ) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if !valid_name(&name) {
            return Err(RegistryError::BadName { name });
        }
        let overrides_builtin = |existing: &ToolSource| {
            (source.is_external() && *existing == ToolSource::BuiltIn).then(|| {
                RegistryError::ExternalOverridesBuiltIn {
                    name: name.clone(),
                    server: source_server(&source),
                }
            })
        };
        if let Some(existing) = self.tools.get(&name) {
            return Err(overrides_builtin(&existing.source)
                .unwrap_or_else(|| RegistryError::Duplicate { name: name.clone() }));
        }
        if let Some(inherited) = self.parent.as_ref().and_then(|p| p.lookup(&name)) {
            if let Some(refused) = overrides_builtin(&inherited.source) {
                return Err(refused);
            }
            if !shadow {
                return Err(RegistryError::ShadowsParent { name });
            }
        }
        if self.tools.len() >= TOOLS_PER_SCOPE_MAX {
            return Err(RegistryError::Full);
        }
        let bad_schema = |which, message| RegistryError::BadSchema {
            name: name.clone(),
            which,
            message,
        };
        let input_source = tool.input_schema();
        let output_source = tool.output_schema();
        let schema_hash = schema_hash(&input_source, output_source.as_ref());
        let input = Schema::compile(input_source).map_err(|m| bad_schema("input", m))?;
        let output = output_source
            .map(Schema::compile)
            .transpose()
            .map_err(|m| bad_schema("output", m))?;
        self.tools.insert(
            name,
            Arc::new(Entry {
                tool,
                source,
                exposure,
                input,
                output,
                schema_hash,
            }),
        );
        Ok(())
    }

    /// The tool a name resolves to: this scope first, then the parents.
    pub fn lookup(&self, name: &str) -> Option<Arc<Entry>> {
        self.tools
            .get(name)
            .cloned()
            .or_else(|| self.parent.as_ref().and_then(|p| p.lookup(name)))
    }

    /// What the tool `name` declares about running a call again (`None`: no such tool), as
    /// `recover::choose` asks it.
    pub fn nature(&self, name: &str) -> Option<events::tool::ToolNature> {
        self.lookup(name).map(|entry| events::tool::ToolNature {
            read_only: entry.tool.is_read_only(),
            retry_safe: entry.tool.is_retry_safe(),
        })
    }

    /// Every visible tool, by name, as `session/open` records them.
    pub fn descriptors(&self) -> Vec<ToolDescriptor> {
        let mut visible: BTreeMap<String, Arc<Entry>> = BTreeMap::new();
        self.collect(&mut visible);
        visible
            .into_values()
            .map(|e| ToolDescriptor {
                name: e.tool.name().to_owned(),
                source: e.source.clone(),
                version: e.tool.version().to_owned(),
                schema_hash: e.schema_hash.clone(),
            })
            .collect()
    }

    /// Every tool of every scope, by name (a child's shadowing entry replaces its parent's).
    pub fn entries(&self) -> Vec<Arc<Entry>> {
        let mut all: BTreeMap<String, Arc<Entry>> = BTreeMap::new();
        self.collect(&mut all);
        all.into_values().collect()
    }

    /// The tools a step shows the model: every direct tool, and the deferred ones in `loaded`.
    pub fn visible(&self, loaded: &std::collections::BTreeSet<String>) -> Vec<VisibleTool> {
        self.entries()
            .into_iter()
            .filter(|e| e.is_visible(loaded))
            .map(|e| VisibleTool {
                name: e.tool.name().to_owned(),
                schema_hash: e.schema_hash.clone(),
            })
            .collect()
    }

    fn collect(&self, into: &mut BTreeMap<String, Arc<Entry>>) {
        if let Some(parent) = &self.parent {
            parent.collect(into);
        }
        for (name, entry) in &self.tools {
            into.insert(name.clone(), entry.clone());
        }
    }
}

impl Entry {
    /// Whether a step whose loaded deferred tools are `loaded` shows this tool.
    pub fn is_visible(&self, loaded: &std::collections::BTreeSet<String>) -> bool {
        match self.exposure {
            Exposure::Direct => true,
            Exposure::Deferred => loaded.contains(self.tool.name()),
            Exposure::Hidden => false,
        }
    }
}

/// Who an external source is, for error messages.
fn source_server(source: &ToolSource) -> String {
    match source {
        ToolSource::BuiltIn => "built-in".to_owned(),
        ToolSource::External { server } | ToolSource::Mcp { server, .. } => server.clone(),
    }
}
