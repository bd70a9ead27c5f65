//! Fuzz your own tools: cancel and crash orderings of *your* tools and sessions, checked against
//! what your tools did to *your* world.
//!
//! Register your tools (any [`runtime::Tool`]) and, for the world each acts on, an
//! [`Observer`]: it snapshots the state the tool touches and says what one call's effect does
//! to it. The harness then runs whole sessions on the simulated disk (by default on tokio's
//! paused clock): random batches over your tools or a transcript you give, stopped at step
//! start, after some ms or the moment a body begins, with approvals answered, denied, expired
//! or never answered, and the disk failing or losing power at any I/O operation. It recovers
//! the journal, may resume it (running again what `--rerun` picks), and checks:
//!
//! - the runtime's invariants (DESIGN.md §7) by name, against what your bodies really did (the
//!   harness wraps each tool to see its bodies begin and end);
//! - **the truth property**, per world: the calls the journal's final word says succeeded took
//!   effect, the ones it says never ran (`TOOL_NOT_STARTED`, `ABORTED_BEFORE_DISPATCH`, a
//!   refusal) did not, and `TOOL_OUTCOME_UNKNOWN` and other failures after the start may have
//!   either way; the world the session left must be one of those (each effect once);
//! - your own properties, on the outcome.
//!
//! A seed picks a case, so a failure replays from its seed; it shrinks to a small case printed
//! as a transcript. The strategies ([`Harness::cases`], [`Harness::script_cases`]) and the
//! checker ([`Harness::check`]) compose in your own `proptest!` tests.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use serde_json::{json, Value};
//! use tooljournal_fuzz::{Harness, Observer, CallView, Budget};
//! use tooljournal_fuzz::proptest::strategy::Strategy;
//! use tooljournal_fuzz::runtime::Args;
//! use tooljournal_fuzz::runtime::{Tool, ToolContext, ToolFuture, ToolOutput};
//!
//! /// A tool that adds to a counter.
//! struct Add(Arc<Mutex<i64>>);
//! impl Tool for Add {
//!     fn name(&self) -> &str { "add" }
//!     fn description(&self) -> &str { "adds n to the counter" }
//!     fn input_schema(&self) -> Value { json!({"type": "object"}) }
//!     fn execute(&self, args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
//!         let n = args.get("n").and_then(Value::as_i64).unwrap_or(0);
//!         *self.0.lock().unwrap() += n;
//!         Box::pin(async move { Ok(ToolOutput::text(format!("added {n}"))) })
//!     }
//! }
//!
//! /// Its world: the counter.
//! struct Counter(Arc<Mutex<i64>>);
//! impl Observer for Counter {
//!     type Snapshot = i64;
//!     fn reset(&self) { *self.0.lock().unwrap() = 0 }
//!     fn snapshot(&self) -> i64 { *self.0.lock().unwrap() }
//!     fn apply(&self, state: &mut i64, call: &CallView<'_>) {
//!         *state += call.args.get("n").and_then(Value::as_i64).unwrap_or(0);
//!     }
//! }
//!
//! let counter = Arc::new(Mutex::new(0));
//! let mut harness = Harness::new();
//! harness.tool_with_args(Arc::new(Add(counter.clone())), (1i64..5).prop_map(|n| json!({"n": n})));
//! harness.observe(Counter(counter), &["add"]);
//! let report = harness.campaign(&harness.cases(), Budget::cases(7, 20));
//! assert_eq!(report.violations(), 0, "{report}");
//! ```

mod case;
mod observe;
mod play;
mod report;
mod stop;
mod truth;
mod verdict;
mod watch;
mod workspace;
pub use workspace::{written_paths, FileState, Files, WorkspaceWorld, FILE_TOOLS};

pub(crate) use case::{random_cases, script_cases, PlanSpace};
pub use case::{turns_of, Approval, Call, CancelAt, Resume, Step, Turn, UserCase};
pub use observe::{CallView, Crash, Observer, WorldId};
pub use report::{Budget, Found, Progress, Report};

use crate::sim::FaultReport;
use observe::{AnySnapshot, Erased, World};
use proptest::strategy::{BoxedStrategy, Strategy};
use runtime::event::ToolSource;
use runtime::ErrorCode;
use runtime::Tool;
use serde_json::Value;
use std::sync::Arc;

/// Tools with where each comes from, as a session registers them.
pub type Tools = Vec<(Arc<dyn Tool>, ToolSource)>;

/// Tools made afresh for every session the harness runs (a tool bound to a workspace the
/// harness copies anew for each case, say). `Err` says why they could not be made.
pub type ToolFactory = Arc<dyn Fn() -> Result<Tools, String> + Send + Sync>;

/// A property of yours, checked on every case's outcome.
type Property = (
    String,
    Box<dyn Fn(&Outcome<'_>) -> Result<(), String> + Send + Sync>,
);

/// Which clock the sessions run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// tokio's paused clock: time moves only when every task waits, so runs are exact
    /// functions of their case (for tools that do not wait on the real world).
    #[default]
    Simulated,
    /// The real clock, for tools that run processes or talk to servers (`tooljournal fuzz`).
    Real,
}

/// How the harness runs its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The clock. With [`Clock::Real`], also turn `plan.timed_cancels` off for reports that
    /// a seed repeats (as `tooljournal fuzz` does).
    pub clock: Clock,
    /// What the plans around transcripts are drawn from.
    pub plan: PlanSpace,
    /// Each call's time limit (`Config::timeout_ms`), in ms of the clock.
    pub timeout_ms: u64,
    /// How long an approval waits for its answer, in ms of the clock.
    pub question_timeout_ms: u64,
    /// How long a cancelled body has to stop before the runtime stops waiting for it
    /// (`Config::cancel_grace_ms`), in ms of the clock.
    pub cancel_grace_ms: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            clock: Clock::Simulated,
            plan: PlanSpace::default(),
            timeout_ms: 1_000,
            question_timeout_ms: 80,
            cancel_grace_ms: 50,
        }
    }
}

/// The journal's final word on a call, after recovery (and the resume, if the case resumed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Word {
    /// Committed as a success.
    Ok,
    /// An error, by its code (`TOOL_NOT_STARTED` and `TOOL_OUTCOME_UNKNOWN` are recovery's).
    Error(ErrorCode),
    /// The journal holds no record of the call (the session ended before it was received).
    Missing,
}

impl Word {
    /// The word as the report prints it: `ok`, the code, or `not in journal`.
    pub fn label(self) -> &'static str {
        match self {
            Word::Ok => "ok",
            Word::Error(code) => code.as_str(),
            Word::Missing => "not in journal",
        }
    }

    /// Whether this word says the call's body never ran (so it had no effect).
    pub fn never_ran(self) -> bool {
        matches!(
            self,
            Word::Missing
                | Word::Error(
                    ErrorCode::ToolNotStarted
                        | ErrorCode::AbortedBeforeDispatch
                        | ErrorCode::UnknownTool
                        | ErrorCode::SyntaxError
                        | ErrorCode::SchemaError
                        | ErrorCode::PolicyDenied
                        | ErrorCode::TruncatedCall
                        | ErrorCode::QuestionDeclined
                        | ErrorCode::QuestionUnanswered
                )
        )
    }
}

/// One call of a case, as it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The call's id.
    pub id: String,
    /// The tool it named.
    pub tool: String,
    /// Its raw arguments.
    pub arguments: String,
    /// The journal's final word on it.
    pub word: Word,
    /// How many of its bodies began (over the session and the resume).
    pub bodies: u32,
}

/// What a case came to: what your properties are given.
pub struct Outcome<'a> {
    /// Every call the model sent, in model order.
    pub calls: &'a [Settled],
    pub(crate) initial: &'a [AnySnapshot],
    pub(crate) last: &'a [AnySnapshot],
    /// How the session ended abruptly, if it did.
    pub crash: Option<Crash>,
}

impl Outcome<'_> {
    /// `world`'s snapshot when the case began.
    pub fn initial<O: Observer>(&self, world: WorldId<O>) -> &O::Snapshot {
        typed::<O>(&self.initial[world.index])
    }

    /// `world`'s snapshot when the case ended (after the crash and the resume).
    pub fn last<O: Observer>(&self, world: WorldId<O>) -> &O::Snapshot {
        typed::<O>(&self.last[world.index])
    }
}

#[allow(clippy::expect_used)]
fn typed<O: Observer>(snapshot: &AnySnapshot) -> &O::Snapshot {
    snapshot
        .downcast_ref::<O::Snapshot>()
        // A WorldId<O> is made only by `observe::<O>`, for the world at its index; one from
        // another harness is a misuse this panic names.
        .expect("a world's snapshots are of its observer's type (a WorldId of this harness?)")
}

/// What checking one case found.
#[derive(Debug)]
pub struct Checked {
    /// Every violation, each starting with the invariant or property it breaks.
    pub violations: Vec<String>,
    /// Every call the model sent, with the journal's final word.
    pub calls: Vec<Settled>,
    /// The fault the case drew and whether it fired.
    pub fault: Option<FaultReport>,
    /// Worlds whose truth could not be checked (too many calls of undecided outcome).
    pub unchecked_worlds: usize,
    /// The probe's verdict on each call of unknown outcome it looked at (with
    /// [`Harness::probe`]), by call id.
    pub probes: Vec<(String, recover::Verdict)>,
}

impl Checked {
    /// No violation.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// A registered tool.
pub(crate) struct Registered {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) source: ToolSource,
    pub(crate) args: Option<BoxedStrategy<Value>>,
}

/// A registered world and the tools that act on it.
pub(crate) struct WorldEntry {
    pub(crate) world: Box<dyn World>,
    pub(crate) tools: Vec<String>,
}

/// The harness: your tools, their worlds, your properties, and how sessions run.
#[derive(Default)]
pub struct Harness {
    pub(crate) tools: Vec<Registered>,
    pub(crate) factory: Option<ToolFactory>,
    pub(crate) worlds: Vec<WorldEntry>,
    pub(crate) properties: Vec<Property>,
    pub(crate) settings: Settings,
    pub(crate) mutant: Option<crate::Mutant>,
    /// The workspace `recover --probe` looks at, when the tools act on one.
    pub(crate) probe: Option<std::path::PathBuf>,
}

impl Harness {
    /// A harness with no tools, on the simulated clock.
    pub fn new() -> Harness {
        Harness::default()
    }

    /// Registers `tool` for transcripts (random cases never call it: it has no arguments to
    /// draw).
    pub fn tool(&mut self, tool: Arc<dyn Tool>) -> &mut Harness {
        self.tools.push(Registered {
            tool,
            source: ToolSource::BuiltIn,
            args: None,
        });
        self
    }

    /// Registers `tool`, with the arguments random cases call it with.
    pub fn tool_with_args(
        &mut self,
        tool: Arc<dyn Tool>,
        args: impl Strategy<Value = Value> + 'static,
    ) -> &mut Harness {
        self.tools.push(Registered {
            tool,
            source: ToolSource::BuiltIn,
            args: Some(args.boxed()),
        });
        self
    }

    /// Registers tools made afresh for every session (beside those registered one by one).
    pub fn tools_each_session(&mut self, factory: ToolFactory) -> &mut Harness {
        self.factory = Some(factory);
        self
    }

    /// Registers `observer` as the world the tools named `tools` act on.
    pub fn observe<O: Observer>(&mut self, observer: O, tools: &[&str]) -> WorldId<O> {
        self.worlds.push(WorldEntry {
            world: Box::new(Erased(observer)),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        });
        WorldId::new(self.worlds.len() - 1)
    }

    /// Adds a property of yours, checked on every case; `Err` says how it was broken.
    pub fn property(
        &mut self,
        name: &str,
        property: impl Fn(&Outcome<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> &mut Harness {
        self.properties.push((name.to_owned(), Box::new(property)));
        self
    }

    /// The directory the tools act on, for the probe (`recover --probe DIR`): each call of
    /// unknown outcome whose `started` recorded evidence is probed there after the crash, and
    /// the verdict is held to what its body did (`applied` only if it began; `not_applied` not
    /// for a body that finished its act, unless a later call wrote the same file).
    pub fn probe(&mut self, workspace: impl Into<std::path::PathBuf>) -> &mut Harness {
        self.probe = Some(workspace.into());
        self
    }

    /// How sessions run.
    pub fn settings_mut(&mut self) -> &mut Settings {
        &mut self.settings
    }

    /// Plants a deliberately broken runtime (test builds with the `mutant` feature only): the
    /// harness must catch it with your tools.
    #[cfg(feature = "mutant")]
    pub fn plant(&mut self, mutant: crate::Mutant) -> &mut Harness {
        self.mutant = Some(mutant);
        self
    }

    /// Random cases over the tools registered with arguments.
    ///
    /// # Panics
    ///
    /// When no tool was registered with arguments ([`Harness::tool_with_args`]): there is
    /// nothing to call.
    pub fn cases(&self) -> BoxedStrategy<UserCase> {
        let tools = self
            .tools
            .iter()
            .filter_map(|r| Some((r.tool.name().to_owned(), r.args.clone()?)))
            .collect();
        random_cases(tools, self.settings.plan)
    }

    /// Cases that play `turns` (a transcript: [`turns_of`]) with the plan around it drawn.
    pub fn script_cases(&self, turns: Vec<Turn>) -> BoxedStrategy<UserCase> {
        script_cases(turns, self.settings.plan)
    }

    /// Runs one case and checks it.
    pub fn check(&self, case: &UserCase) -> Checked {
        // Only a stop's deadline cuts a case short, and this one has none.
        #[allow(clippy::expect_used)]
        let checked = verdict::check(self, case, &stop::Stop::default())
            .expect("a case nobody stops is checked");
        checked
    }

    /// Runs cases of `cases` from `budget`'s first seed until its budget is spent, stopping at
    /// the first violation (shrunk).
    pub fn campaign(&self, cases: &BoxedStrategy<UserCase>, budget: Budget) -> Report {
        report::campaign(self, cases, budget, &mut |_| {})
    }

    /// [`Harness::campaign`], telling `progress` after every case.
    pub fn campaign_with(
        &self,
        cases: &BoxedStrategy<UserCase>,
        budget: Budget,
        progress: &mut dyn FnMut(Progress),
    ) -> Report {
        report::campaign(self, cases, budget, progress)
    }
}
