//! The simulated tools a case's sessions run (`sim`, which does not declare itself idempotent,
//! and `sim_idem`, which does), and the registry they are found in. Each tool records what its
//! bodies did (outside the journal): the ground truth the checks hold the journal to.

use crate::case::PATHS;
use crate::world::{content_of, World, Writer};
use crate::Locked;
use crate::Mutant;
use journal::Journal;
use runtime::event::{Evidence, Resources, SideEffect, ToolSource};
use runtime::event::{SandboxBound, SandboxPolicy};
use runtime::ErrorCode;
use runtime::Registry;
use runtime::{EvidenceFuture, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// A body that ran, as the tool saw it (outside the journal).
#[derive(Debug, Clone)]
pub struct Body {
    /// The id of the call the body ran for.
    pub call_id: String,
    /// When the body started, in simulated ms since the run began.
    pub started_ms: u64,
    /// What the body returned; `None` if it never finished (it was dropped while running).
    pub end: Option<BodyEnd>,
    /// The idempotency key the body was given.
    pub key: String,
    /// The attempt number the body was given.
    pub attempt: u32,
    /// It failed saying another attempt may follow (the runtime then runs a retry-safe tool's
    /// call again, up to its attempts).
    pub retryable: bool,
    /// Where its beginning and its end (if it ended) fall among every body's beginnings and
    /// ends (the user harness orders effects by them; 0 and `None` in the simulation).
    pub order: (u64, Option<u64>),
}

/// What a body returned, as the tool recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyEnd {
    /// The body succeeded with this content.
    Ok(String),
    /// The body failed with this code and message.
    Err(ErrorCode, String),
    /// The body panicked.
    Panicked,
}

/// What a session's simulated tools share: the ground truth they record, and the world.
pub(crate) struct Shared {
    pub(crate) epoch: Instant,
    pub(crate) bodies: Mutex<Vec<Body>>,
    pub(crate) journal: OnceLock<Arc<Journal>>,
    pub(crate) violations: Mutex<Vec<String>>,
    pub(crate) world: Mutex<World>,
    /// The mutant this session plants, if any (the simulation's own act on it).
    pub(crate) mutant: Option<Mutant>,
}

impl Shared {
    pub(crate) fn new(epoch: Instant, world: World, mutant: Option<Mutant>) -> Arc<Shared> {
        Arc::new(Shared {
            epoch,
            bodies: Mutex::default(),
            journal: OnceLock::new(),
            violations: Mutex::default(),
            world: Mutex::new(world),
            mutant,
        })
    }

    /// Whether this session plants the simulation's own `mutant` (only where the test-only
    /// `mutant` feature is compiled in).
    pub(crate) fn plants(&self, mutant: Mutant) -> bool {
        cfg!(feature = "mutant") && self.mutant == Some(mutant)
    }
}

/// The workspace every simulated session runs in (its session/open says so): what the bounds'
/// roots are beneath.
pub(crate) const WORKSPACE: &str = "/sim";

/// The sandbox a simulated call that writes `writes` runs under: exactly its declared writes,
/// beneath [`WORKSPACE`], so that a write it did not declare is one outside its bound.
pub(crate) fn bound_of(writes: &[String]) -> SandboxBound {
    let roots: Vec<String> = writes
        .iter()
        .map(|p| Path::new(WORKSPACE).join(p).display().to_string())
        .collect();
    SandboxBound {
        policy: SandboxPolicy::WorkspaceWrite,
        enforced: true,
        writable: roots.clone(),
        readable: roots,
        network: false,
        mechanism: "simulated by the fuzz harness".into(),
        escalated: false,
    }
}

/// The simulated tool that does not declare itself idempotent.
pub(crate) const SIM: &str = "sim";
/// The simulated tool that declares itself idempotent (retry-safe).
pub(crate) const SIM_IDEMPOTENT: &str = "sim_idem";

/// A simulated tool: what it does is in its arguments; what its bodies did goes to the ground
/// truth of the session that runs it.
struct Sim {
    current: Arc<Current>,
    name: &'static str,
    retry_safe: bool,
}

/// The session a thread's simulated tools record to: set as each session's parts are made (a
/// thread runs one session at a time; a body keeps the one it began in).
#[derive(Default)]
struct Current(Mutex<Option<Arc<Shared>>>);

impl Current {
    fn get(&self) -> Option<Arc<Shared>> {
        self.0.locked().clone()
    }
}

/// A registry of the simulated tools, and the session they record to.
type Scoped = (Arc<Registry>, Arc<Current>);

thread_local! {
    /// This thread's registries (the simulated tools, `sim` truthful or lying, and the built-in
    /// `ask`), built once: compiling their schemas for every session was 6 % of a case.
    static REGISTRIES: RefCell<[Option<Scoped>; 2]> = RefCell::default();
}

/// The registry a session records to `shared` with: `sim`, retry-safe only when `sim_lies`,
/// `sim_idem` and the built-in `ask`.
pub(crate) fn registry(shared: &Arc<Shared>, sim_lies: bool) -> Arc<Registry> {
    REGISTRIES.with(|registries| {
        let mut registries = registries.borrow_mut();
        let (registry, current) =
            registries[usize::from(sim_lies)].get_or_insert_with(|| new_registry(sim_lies));
        *current.0.locked() = Some(shared.clone());
        registry.clone()
    })
}

fn new_registry(sim_lies: bool) -> Scoped {
    let current = Arc::new(Current::default());
    let mut registry = Registry::new();
    let tools: [Arc<dyn Tool>; 3] = [
        Arc::new(Sim {
            current: current.clone(),
            name: SIM,
            retry_safe: sim_lies,
        }),
        Arc::new(Sim {
            current: current.clone(),
            name: SIM_IDEMPOTENT,
            retry_safe: true,
        }),
        Arc::new(runtime::ask::Ask),
    ];
    for tool in tools {
        // Three distinct valid names on a new registry: registering cannot fail.
        #[allow(clippy::expect_used)]
        registry
            .register(tool, ToolSource::BuiltIn)
            .expect("the simulated tools and ask register");
    }
    (Arc::new(registry), current)
}

/// A list of strings among the arguments.
fn list(args: &runtime::Args, key: &str) -> Vec<String> {
    args.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl Tool for Sim {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "a simulated tool"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_concurrency_safe(&self, args: &runtime::Args) -> bool {
        args.get("parallel").and_then(Value::as_bool) == Some(true)
    }
    fn is_retry_safe(&self) -> bool {
        self.retry_safe
    }
    fn resources(&self, args: &runtime::Args) -> Resources {
        Resources {
            reads: list(args, "reads"),
            writes: list(args, "writes"),
            intents: vec![format!("simulate {}", args.str("kind").unwrap_or("?"))],
        }
    }
    /// One file replacement per path it writes, as the world is now, and the bound it runs
    /// under; noted in the ground truth.
    fn evidence<'a>(&'a self, args: &'a runtime::Args) -> EvidenceFuture<'a> {
        let writes = list(args, "writes");
        let evidence = match (args.str("id"), self.current.get()) {
            (Some(id), Some(shared)) if !writes.is_empty() => {
                let mut world = shared.world.locked();
                let mut evidence = world.evidence(&writes, &content_of(id));
                evidence.push(Evidence::Sandbox(bound_of(&writes)));
                world.gather(id, evidence.clone());
                evidence
            }
            _ => Vec::new(),
        };
        Box::pin(std::future::ready(evidence))
    }
    fn execute(&self, args: runtime::Args, ctx: ToolContext) -> ToolFuture<'_> {
        let Some(shared) = self.current.get() else {
            // Parts are made before their session runs: not reached.
            let no_session = ToolError::new(ErrorCode::ToolFailed, "no simulated session");
            return Box::pin(std::future::ready(Err(no_session)));
        };
        let started_ms = shared.epoch.elapsed().as_millis() as u64;
        if let Some(j) = shared.journal.get() {
            if let Some(cause) = j.poisoned() {
                shared.violations.locked().push(format!(
                    "I10 fail-stop: the body of {} started after the journal failed ({cause})",
                    ctx.call_id()
                ));
            }
        }
        let key = key_given(&shared, &ctx);
        let index = {
            let mut bodies = shared.bodies.locked();
            bodies.push(Body {
                call_id: ctx.call_id().to_owned(),
                started_ms,
                end: None,
                key: key.clone(),
                attempt: ctx.attempt(),
                retryable: false,
                order: (0, None),
            });
            bodies.len() - 1
        };
        Box::pin(async move {
            if args.str("kind") == Some("panics") {
                shared.bodies.locked()[index].end = Some(BodyEnd::Panicked);
                panic!("simulated panic");
            }
            let act = || act(&shared, &args, &ctx, &key);
            let result = body(&args, &ctx, act).await;
            // Recorded when the body returns, not before: a body dropped while running has no end.
            let mut bodies = shared.bodies.locked();
            let recorded = &mut bodies[index];
            recorded.end = Some(match &result {
                Ok(output) => BodyEnd::Ok(output.content.clone()),
                Err(e) => BodyEnd::Err(e.code, e.message.clone()),
            });
            recorded.retryable = result.as_ref().is_err_and(|e| e.retryable);
            drop(bodies);
            result
        })
    }
}

/// The idempotency key a body is given: its call's, the same for every attempt (the mutant
/// mixes the attempt number in from the second attempt on).
fn key_given(shared: &Shared, ctx: &ToolContext) -> String {
    let key = ctx.idempotency_key();
    if shared.plants(Mutant::KeyPerAttempt) && ctx.attempt() >= 2 {
        let mixed = format!("{key}/attempt {}", ctx.attempt());
        return format!("tj1-{}", runtime::sha256_hex(mixed.as_bytes()));
    }
    key.to_owned()
}

/// The body's act on the world: replaces every file it writes with its content, all at once,
/// unless the world is no longer as its evidence recorded (then, like `write`, it writes
/// nothing and fails `FS_STALE_VERSION`).
fn act(
    shared: &Shared,
    args: &runtime::Args,
    ctx: &ToolContext,
    key: &str,
) -> Result<(), ToolError> {
    let writes = list(args, "writes");
    let Some(id) = args.str("id").filter(|_| !writes.is_empty()) else {
        return Ok(());
    };
    let content = content_of(id);
    let after = runtime::sha256_hex(content.as_bytes());
    let mut world = shared.world.locked();
    for path in &writes {
        let recorded = ctx.evidence().iter().find_map(|e| match e {
            Evidence::FileReplace {
                path: p,
                before_sha256,
                after_sha256,
            } => (p == path).then_some((before_sha256, after_sha256)),
            Evidence::Sandbox(_) => None,
        });
        if let Some((before, recorded_after)) = recorded {
            if &world.sha256(path) != before || recorded_after != &after {
                return Err(ToolError::new(
                    ErrorCode::FsStaleVersion,
                    format!("{path} is no longer as it was recorded before this call started"),
                ));
            }
        }
    }
    let written = if shared.plants(Mutant::WritesOtherBytes) {
        format!("{content}and more than it recorded\n")
    } else {
        content
    };
    let by = || Writer::Call(id.to_owned());
    for path in &writes {
        world.write_keyed(path, by(), Some(key), Some(written.clone()));
    }
    if shared.plants(Mutant::WritesOutsideBound) {
        let undeclared = PATHS.iter().find(|p| !writes.iter().any(|w| w == *p));
        let path = undeclared.copied().unwrap_or("beyond");
        world.write_keyed(path, by(), Some(key), Some(written));
    }
    Ok(())
}

/// What the simulated tool does, by its `kind` argument; `act` is its effect on the world, made
/// once its work is done (never when it stopped first, nor when it panics). An attempt numbered
/// up to `fails_retryably` fails saying another may follow, after acting when `after_effect`.
async fn body(
    args: &runtime::Args,
    ctx: &ToolContext,
    act: impl FnOnce() -> Result<(), ToolError>,
) -> Result<ToolOutput, ToolError> {
    let kind = args.str("kind").unwrap_or("ok");
    let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
    let effect = SideEffect::Other {
        kind: "sim".into(),
        detail: ctx.call_id().to_owned(),
    };
    if kind == "ignores_cancel" {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    } else {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = ctx.cancel().cancelled() => {
                // Stopping takes a moment (a write to finish), as in a real tool.
                tokio::time::sleep(Duration::from_millis(1 + ms % 4)).await;
                return Err(ToolError::new(ErrorCode::Aborted, "stopped").with_side_effect(effect));
            }
        }
    }
    let failures = args.get("fails_retryably").and_then(Value::as_u64);
    if failures.is_some_and(|n| u64::from(ctx.attempt()) <= n) {
        let failure = ToolError::new(
            ErrorCode::ToolFailed,
            format!("simulated transient failure of attempt {}", ctx.attempt()),
        )
        .retryable();
        if args.get("after_effect").and_then(Value::as_bool) == Some(true) {
            act()?;
            return Err(failure.with_side_effect(effect));
        }
        return Err(failure);
    }
    act()?;
    match kind {
        "ignores_cancel" => Ok(ToolOutput::text("finished regardless").with_side_effect(effect)),
        "fails" => {
            Err(ToolError::new(ErrorCode::ToolFailed, "simulated failure").with_side_effect(effect))
        }
        "big" => Ok(ToolOutput::text("x".repeat(2000)).with_side_effect(effect)),
        "late_progress" => {
            let sink = ctx.progress().clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let _ = sink.report("too late");
            });
            Ok(ToolOutput::text("done").with_side_effect(effect))
        }
        _ => Ok(ToolOutput::text(format!("done {}", ctx.call_id())).with_side_effect(effect)),
    }
}
