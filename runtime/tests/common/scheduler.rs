//! The scheduler tests' bodies and sessions: a log of which bodies ran alongside which, a
//! worker tool that holds its place for paused time, where events landed in the journal, and a
//! pool of a chosen size; shared by `scheduler_overlap.rs` and `scheduler_cancel.rs`.

use super::*;
use journal::SimStorage;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ToolOutput;
use tooljournal_runtime::{Config, Session, ToolResult};

/// Every body start (`+id`) and end (`-id`) in the order they happened, and how many ran at once.
#[derive(Clone, Default)]
pub struct Bodies {
    log: Arc<Mutex<Vec<String>>>,
    running: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
}

impl Bodies {
    pub fn enter(&self, id: &str) {
        self.log.lock().unwrap().push(format!("+{id}"));
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }

    pub fn leave(&self, id: &str) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.log.lock().unwrap().push(format!("-{id}"));
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Where `id`'s body started and ended in the log.
    pub fn span(&self, id: &str) -> (usize, usize) {
        let log = self.log();
        let at = |mark: String| {
            log.iter()
                .position(|l| *l == mark)
                .unwrap_or_else(|| panic!("{mark} in {log:?}"))
        };
        (at(format!("+{id}")), at(format!("-{id}")))
    }

    pub fn overlap(&self, a: &str, b: &str) -> bool {
        let ((a0, a1), (b0, b1)) = (self.span(a), self.span(b));
        a0 < b1 && b0 < a1
    }

    /// Whether no other body ran while `id`'s did.
    pub fn alone(&self, id: &str) -> bool {
        let (start, end) = self.span(id);
        end == start + 1
    }
}

/// A body that holds its place for `ms` (argument, default 10) of paused time.
pub fn worker(name: &str, bodies: &Bodies) -> TestTool {
    let bodies = bodies.clone();
    TestTool::with(name, move |args, ctx| {
        let bodies = bodies.clone();
        let ms = args.get("ms").and_then(|v| v.as_u64()).unwrap_or(10);
        Box::pin(async move {
            let id = ctx.call_id().to_owned();
            bodies.enter(&id);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            bodies.leave(&id);
            Ok(ToolOutput::text(format!("done {id}")))
        })
    })
}

/// The seq of `call_id`'s (first) event of `kind`.
pub fn seq(storage: &SimStorage, kind: &str, call_id: &str) -> u64 {
    events(storage)
        .into_iter()
        .find(|(_, e)| e.kind() == kind && e.call().is_some_and(|c| c.call_id == call_id))
        .unwrap_or_else(|| panic!("{call_id} has a {kind} event"))
        .0
}

/// The call ids of every event of `kind`, in journal order.
pub fn order(storage: &SimStorage, kind: &str) -> Vec<String> {
    events(storage)
        .into_iter()
        .filter(|(_, e)| e.kind() == kind)
        .filter_map(|(_, e)| e.call().map(|c| c.call_id.clone()))
        .collect()
}

pub fn ids(results: &[ToolResult]) -> Vec<&str> {
    results.iter().map(|r| r.call_id.as_str()).collect()
}

pub fn session(
    storage: &SimStorage,
    tools: Vec<TestTool>,
    hooks: Hooks,
    config: Config,
) -> Session {
    session_on(storage, registry(tools), hooks, config)
}

pub fn pool(parallel_max: usize) -> Config {
    Config {
        parallel_max,
        ..Config::default()
    }
}
