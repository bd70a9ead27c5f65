//! What a case's sessions run with besides the simulated tools: the registry, hooks and config,
//! the spill store and the observer, and the calls the simulated model sends.

use crate::case::{CallSpec, Case, Kind};
use crate::person::{ask_arguments, AsksForApproval, SimPerson, QUESTION_TIMEOUT_MS};
use crate::tools::{registry, Shared, SIM, SIM_IDEMPOTENT};
use crate::Locked;
use crate::Mutant;
use runtime::event::{CallRef, ModelCall, Resources};
use runtime::Registry;
use runtime::SpillStore;
use runtime::{Config, ToolResult};
use runtime::{Hooks, Observer};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A spill store in memory, or one that always fails.
pub(crate) struct MemSpill {
    fails: bool,
    blobs: Mutex<HashMap<String, String>>,
}

impl MemSpill {
    /// An empty store; `fails`: every write fails.
    pub(crate) fn new(fails: bool) -> MemSpill {
        MemSpill {
            fails,
            blobs: Mutex::default(),
        }
    }
}

impl SpillStore for MemSpill {
    fn put(&self, text: &str) -> Result<String, String> {
        if self.fails {
            return Err("simulated spill failure".into());
        }
        let locator = format!("spill:sha256:{}", runtime::sha256_hex(text.as_bytes()));
        self.blobs.locked().insert(locator.clone(), text.to_owned());
        Ok(locator)
    }
    fn get(&self, locator: &str) -> Result<Option<String>, String> {
        Ok(self.blobs.locked().get(locator).cloned())
    }
}

struct PanickyObserver;

impl Observer for PanickyObserver {
    fn name(&self) -> &str {
        "panicky"
    }
    fn on_result(&self, _: &CallRef, _: &str, _: &ToolResult) -> Result<(), String> {
        panic!("simulated observer panic")
    }
}

/// The simulated tool's `kind` argument for a call.
fn kind_arg(kind: Kind) -> &'static str {
    match kind {
        Kind::Ok => "ok",
        Kind::Fails => "fails",
        Kind::Panics => "panics",
        Kind::IgnoresCancel => "ignores_cancel",
        Kind::LateProgress => "late_progress",
        Kind::Big => "big",
        Kind::Unknown | Kind::BadJson | Kind::Ask(_) | Kind::Approval(_) | Kind::User { .. } => {
            "ok"
        }
    }
}

/// What the simulated tool declares a call will touch (what its `started` records).
pub(crate) fn declared(spec: &CallSpec) -> Resources {
    Resources {
        reads: spec.reads.iter().map(|p| (*p).to_owned()).collect(),
        writes: spec.writes.iter().map(|p| (*p).to_owned()).collect(),
        intents: vec![format!("simulate {}", kind_arg(spec.kind))],
    }
}

/// The call the simulated model sends for `spec`, with id `id`.
pub(crate) fn model_call(id: &str, spec: &CallSpec) -> ModelCall {
    let kind = kind_arg(spec.kind);
    let approval = matches!(spec.kind, Kind::Approval(_));
    let mut args = json!({"id": id, "kind": kind, "ms": spec.duration_ms, "parallel": spec.parallel,
                      "reads": spec.reads, "writes": spec.writes, "approval": approval});
    if let Some(flaky) = spec.flaky {
        args["fails_retryably"] = json!(flaky.failures);
        args["after_effect"] = json!(flaky.after_effect);
    }
    let sim = if spec.idempotent { SIM_IDEMPOTENT } else { SIM };
    match spec.kind {
        Kind::Unknown => ModelCall {
            call_id: id.into(),
            name: "nope".into(),
            arguments: args.to_string(),
        },
        Kind::BadJson => ModelCall {
            call_id: id.into(),
            name: sim.into(),
            arguments: "{\"kind\": ".into(),
        },
        Kind::Ask(ask) => ModelCall {
            call_id: id.into(),
            name: "ask".into(),
            arguments: ask_arguments(id, &ask).to_string(),
        },
        _ => ModelCall {
            call_id: id.into(),
            name: sim.into(),
            arguments: args.to_string(),
        },
    }
}

/// Attempts the runtime makes of a retry-safe call whose body fails retryably, in one run.
pub(crate) const ATTEMPTS_MAX: u32 = 3;

/// The registry, hooks and config a case runs with (`mutant`: the runtime's, if any). `sim`
/// declares itself retry-safe only when `sim_lies` (a mutant's doing).
pub(crate) fn session_parts(
    case: &Case,
    shared: &Arc<Shared>,
    mutant: Option<Mutant>,
    sim_lies: bool,
) -> (Arc<Registry>, Hooks, Config, Arc<SimPerson>) {
    let registry = registry(shared, sim_lies);
    let approver = Arc::new(SimPerson::default());
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    if case.observer_panics {
        observers.push(Arc::new(PanickyObserver));
    }
    let hooks = Hooks {
        pre_execute: vec![Arc::new(AsksForApproval)],
        approver: Some(approver.clone()),
        observers,
        ..Hooks::default()
    };
    let failpoints = runtime::Failpoints::armable();
    if let Some(name) = mutant.and_then(Mutant::failpoint) {
        failpoints.enable(name);
    }
    let config = Config {
        attempts_max: ATTEMPTS_MAX,
        parallel_max: case.parallel_max,
        timeout_ms: 1_000,
        cancel_grace_ms: 50,
        model_inline_bytes_max: 256,
        spill: Some(Arc::new(MemSpill::new(case.spill_fails))),
        failpoints,
        question_timeout_ms: Some(QUESTION_TIMEOUT_MS),
        ..Config::default()
    };
    (registry, hooks, config, approver)
}
