//! The file tools' test session: `file_tools` registered as built-ins, the workspace in a
//! temporary directory, the journal on a simulated disk, and checks of what the journal says of
//! a call; shared by `tools_read_write.rs`, `tools_confinement.rs` and `tools_search.rs`.

use super::*;
use journal::SimStorage;
use serde_json::Value;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use tooljournal_runtime::event::{OutcomeStatus, SideEffect, ToolSource};
use tooljournal_runtime::fs::file_tools;
use tooljournal_runtime::replay::CallReplay;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::Registry;
use tooljournal_runtime::{sha256_hex, Workspace};
use tooljournal_runtime::{Config, ErrorCode, Session, ToolResult};

/// A session whose file tools are confined to `<tmp>/ws`, with the runtime's state directory
/// at `<tmp>/ws/.tooljournal` and a directory outside the workspace at `<tmp>/outside`.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub ws: Arc<Workspace>,
    pub storage: SimStorage,
    pub session: Session,
    pub next_id: u32,
}

impl Env {
    pub fn new() -> Env {
        Env::with_config(Config::default())
    }

    pub fn with_config(config: Config) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join(".tooljournal")).unwrap();
        fs::write(root.join(".tooljournal/journal.bin"), "JOURNAL needle").unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        fs::write(dir.path().join("outside/secret"), "TOPSECRET needle\n").unwrap();
        let ws = Arc::new(Workspace::new(&root, &[root.join(".tooljournal")]).unwrap());
        let mut registry = Registry::new();
        for tool in file_tools(ws.clone()) {
            registry.register(tool, ToolSource::BuiltIn).unwrap();
        }
        let storage = SimStorage::new();
        let session = session_on(&storage, Arc::new(registry), Hooks::default(), config);
        Env {
            dir,
            ws,
            storage,
            session,
            next_id: 0,
        }
    }

    pub fn root(&self) -> PathBuf {
        self.ws.root().to_owned()
    }

    pub fn outside(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join("outside")
    }

    pub fn put(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    pub fn get(&self, rel: &str) -> String {
        fs::read_to_string(self.root().join(rel)).unwrap()
    }

    /// Runs the calls as one batch (one turn, one step) and returns the results in model order.
    pub async fn batch(&mut self, calls: &[(&str, Value)]) -> Vec<ToolResult> {
        let calls = calls
            .iter()
            .map(|(tool, args)| {
                self.next_id += 1;
                call(&format!("c{}", self.next_id), tool, &args.to_string())
            })
            .collect();
        one_step(&mut self.session, calls).await
    }

    pub async fn run(&mut self, tool: &str, args: Value) -> ToolResult {
        self.batch(&[(tool, args)]).await.remove(0)
    }

    /// What the journal says about a call.
    pub fn journaled(&self, r: &ToolResult) -> CallReplay {
        replay(&self.storage)
            .calls()
            .find(|c| c.call.call_id == r.call_id)
            .unwrap_or_else(|| panic!("{} is in the journal", r.call_id))
            .clone()
    }

    /// The settled code (None for success) and confirmed side effects, from the journal; also
    /// checks the committed result agrees with what the model got.
    pub fn settled(&self, r: &ToolResult) -> (Option<ErrorCode>, Vec<SideEffect>) {
        let c = self.journaled(r);
        let outcome = c.outcome.expect("settled");
        let committed = c.committed.expect("committed");
        assert_eq!(committed.content, r.content);
        assert_eq!(committed.is_error, r.is_error);
        assert_eq!(committed.code, r.code);
        let code = match outcome.status {
            OutcomeStatus::Success => None,
            OutcomeStatus::Error { code, .. } => Some(code),
        };
        (code, outcome.side_effects)
    }
}

pub fn ok(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "expected success: {r:?}");
    r.value.as_ref().expect("a value")
}

pub fn assert_error(r: &ToolResult, code: ErrorCode) {
    assert!(r.is_error, "expected {code}: {r:?}");
    assert_eq!(r.code, Some(code), "{r:?}");
    assert!(
        r.content.starts_with(&format!("{}: ", code.as_str())),
        "content begins with its code: {:?}",
        r.content
    );
}

pub fn fs_write(path: &str, before: Option<&[u8]>, after: &[u8]) -> SideEffect {
    SideEffect::FsWrite {
        path: path.into(),
        before_sha256: before.map(sha256_hex),
        after_sha256: sha256_hex(after),
    }
}
