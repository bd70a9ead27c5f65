//! Review of the user harness: cases where the harness misjudges a correct tool
//! (a false violation) or breaks what it promises. Each test is a defect of the review's
//! report, and fails until it is fixed.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tooljournal_fuzz::proptest::strategy::Strategy;
use tooljournal_fuzz::runtime::event::{StopReason, ToolSource};
use tooljournal_fuzz::runtime::parse_script;
use tooljournal_fuzz::runtime::Args;
use tooljournal_fuzz::runtime::ErrorCode;
use tooljournal_fuzz::runtime::{Tool, ToolContext, ToolFuture, ToolOutput};
use tooljournal_fuzz::StorageFault;
use tooljournal_fuzz::{
    turns_of, Budget, Call, CallView, Clock, Harness, Observer, Resume, Step, ToolFactory, Turn,
    UserCase, Word, WorkspaceWorld, FILE_TOOLS,
};

/// A one-turn case: one step with `calls`, then a step that ends the turn.
fn one_step(calls: Vec<Call>, parallel_max: usize) -> UserCase {
    UserCase {
        turns: vec![Turn {
            user: "go".into(),
            steps: vec![
                Step {
                    text: "calls".into(),
                    calls,
                    stop_reason: StopReason::ToolUse,
                    cancel: None,
                },
                Step {
                    text: "done".into(),
                    calls: Vec::new(),
                    stop_reason: StopReason::EndTurn,
                    cancel: None,
                },
            ],
        }],
        parallel_max,
        fault: StorageFault::None,
        resume: Resume::No,
    }
}

fn call(id: &str, tool: &str, arguments: &str) -> Call {
    Call {
        id: id.into(),
        tool: tool.into(),
        arguments: arguments.into(),
        approval: None,
        answer: None,
    }
}

/// A counter the tools below change, shared with its observer.
#[derive(Clone, Default)]
struct Cell(Arc<Mutex<i64>>);

impl Cell {
    fn get(&self) -> i64 {
        *self.0.lock().unwrap()
    }
    fn set(&self, v: i64) {
        *self.0.lock().unwrap() = v;
    }
}

/// `tick`: adds 1, whatever its arguments (it takes none).
struct Tick(Cell);

impl Tool for Tick {
    fn name(&self) -> &str {
        "tick"
    }
    fn description(&self) -> &str {
        "adds one"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn execute(&self, _args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            self.0.set(self.0.get() + 1);
            Ok(ToolOutput::text("ticked"))
        })
    }
}

/// The ticks, and every `CallView::args` the harness showed the model.
struct Ticks {
    cell: Cell,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Observer for Ticks {
    type Snapshot = i64;
    fn reset(&self) {
        self.cell.set(0)
    }
    fn snapshot(&self) -> i64 {
        self.cell.get()
    }
    fn apply(&self, state: &mut i64, call: &CallView<'_>) {
        self.seen.lock().unwrap().push(call.args.clone());
        *state += 1;
    }
}

/// Defect 1. `CallView::args` says "`Value::Null` when they are not JSON: such a call never
/// runs". Empty arguments are not JSON, yet the runtime runs the call with `{}`
/// (`runtime::parse_args`), and the harness shows the model `Null` for a call whose body ran.
#[test]
fn a_call_with_empty_arguments_runs_and_its_view_shows_the_arguments_it_ran_with() {
    let cell = Cell::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut harness = Harness::new();
    harness.tool(Arc::new(Tick(cell.clone())));
    harness.observe(
        Ticks {
            cell,
            seen: seen.clone(),
        },
        &["tick"],
    );
    let checked = harness.check(&one_step(vec![call("c1", "tick", "")], 1));
    assert!(checked.passed(), "{:?}", checked.violations);
    assert_eq!(checked.calls[0].word, Word::Ok);
    assert_eq!(checked.calls[0].bodies, 1, "the body ran");
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|a| *a == json!({})),
        "the body ran with {{}}, the model was shown {seen:?}"
    );
}

/// `set {"v": n}`: waits `n` ms, then sets the cell to `n`. Calls may overlap (each set is
/// atomic; the last to finish wins, and each says so truthfully).
struct Set(Cell);

impl Tool for Set {
    fn name(&self) -> &str {
        "set"
    }
    fn description(&self) -> &str {
        "sets the cell to v after v ms"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]})
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn execute(&self, args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        let v = args.get("v").and_then(Value::as_i64).unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(v as u64)).await;
            self.0.set(v);
            Ok(ToolOutput::text(format!("set to {v}")))
        })
    }
}

struct Register(Cell);

impl Observer for Register {
    type Snapshot = i64;
    fn reset(&self) {
        self.0.set(0)
    }
    fn snapshot(&self) -> i64 {
        self.0.get()
    }
    fn apply(&self, state: &mut i64, call: &CallView<'_>) {
        *state = call.args.get("v").and_then(Value::as_i64).unwrap_or(0);
    }
}

/// Defect 2. The truth property applies effects "in model order", but the calls of a parallel
/// batch take effect in the order their bodies act. Two overlapping sets, both truly ok, no
/// fault at all: the world is the later one's (`a`, 5 ms), the fold says `b`'s.
#[test]
fn parallel_calls_that_act_out_of_model_order_are_not_a_violation() {
    let cell = Cell::default();
    let mut harness = Harness::new();
    harness.tool(Arc::new(Set(cell.clone())));
    harness.observe(Register(cell), &["set"]);
    let case = one_step(
        vec![
            call("a", "set", r#"{"v": 5}"#),
            call("b", "set", r#"{"v": 1}"#),
        ],
        2,
    );
    let checked = harness.check(&case);
    assert_eq!(checked.calls[0].word, Word::Ok);
    assert_eq!(checked.calls[1].word, Word::Ok);
    assert!(
        checked.passed(),
        "a false violation: {:?}",
        checked.violations
    );
}

/// `boom`: its `execute` panics before it returns a future (an argument it unwraps).
struct Boom;

impl Tool for Boom {
    fn name(&self) -> &str {
        "boom"
    }
    fn description(&self) -> &str {
        "panics"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn execute(&self, args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        let _missing = args
            .get("missing")
            .expect("the user's bug: no such argument");
        Box::pin(async move { Ok(ToolOutput::text("unreachable")) })
    }
}

/// Defect 3. A user's tool that panics in `execute` itself (not in its future) is caught by
/// the runtime as TOOL_PANICKED; the harness must not call that a runtime violation.
#[test]
fn a_tool_whose_execute_panics_before_its_future_is_no_runtime_violation() {
    let mut harness = Harness::new();
    harness.tool(Arc::new(Boom));
    let checked = harness.check(&one_step(vec![call("c1", "boom", "{}")], 1));
    assert_eq!(
        checked.calls[0].word,
        Word::Error(ErrorCode::ToolPanicked),
        "{:?}",
        checked.violations
    );
    assert!(
        checked.passed(),
        "a false violation: {:?}",
        checked.violations
    );
}

/// `lie`: says ok, does nothing (a bug the truth property catches at once).
struct Lie;

impl Tool for Lie {
    fn name(&self) -> &str {
        "lie"
    }
    fn description(&self) -> &str {
        "does nothing, says ok"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn execute(&self, _args: Args, _ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move { Ok(ToolOutput::text("done")) })
    }
}

/// Counts what `lie` should have done; each reset is timestamped, and each after the first
/// (the shrink's: the first case catches `lie`) takes 400 ms of real time. The first is quick:
/// a case still running at the deadline is stopped there, not checked, so the first case must
/// end well before it however loaded the machine.
struct Slow {
    cell: Cell,
    resets: Arc<Mutex<Vec<Instant>>>,
}

impl Observer for Slow {
    type Snapshot = i64;
    fn reset(&self) {
        let first = {
            let mut resets = self.resets.lock().unwrap();
            resets.push(Instant::now());
            resets.len() == 1
        };
        if !first {
            std::thread::sleep(Duration::from_millis(400));
        }
        self.cell.set(0)
    }
    fn snapshot(&self) -> i64 {
        self.cell.get()
    }
    fn apply(&self, state: &mut i64, _call: &CallView<'_>) {
        *state += 1;
    }
}

/// Defect 4. `Budget::deadline` (and `tooljournal fuzz --seconds`) says "no case begins after
/// this", but the shrink runs up to 500 more cases after it, unbounded by it.
#[test]
fn no_case_begins_after_the_deadline_not_even_to_shrink() {
    let mut harness = Harness::new();
    harness.tool_with_args(Arc::new(Lie), (0i64..3).prop_map(|n| json!({ "n": n })));
    let resets = Arc::new(Mutex::new(Vec::new()));
    harness.observe(
        Slow {
            cell: Cell::default(),
            resets: resets.clone(),
        },
        &["lie"],
    );
    harness.settings_mut().plan.faults = false;
    // The shrink's cases take 400 ms each, and it takes 8 of them to end by itself.
    let deadline = Instant::now() + Duration::from_secs(2);
    let budget = Budget {
        first_seed: 1,
        cases: 1_000,
        deadline: Some(deadline),
    };
    let report = harness.campaign(&harness.cases(), budget);
    let found = report.found.as_ref().expect("the lying tool is caught");
    assert!(!found.violations.is_empty());
    let late = resets
        .lock()
        .unwrap()
        .iter()
        .filter(|t| **t > deadline)
        .count();
    assert_eq!(
        late, 0,
        "{late} sessions began after the deadline ({} cases ran before it)",
        report.ran
    );
}

/// The builtin tools on `dir`, for every session.
fn builtins_on(dir: PathBuf) -> ToolFactory {
    Arc::new(move || {
        let ws = tooljournal_fuzz::runtime::Workspace::new(&dir, &[]).map_err(|e| e.to_string())?;
        Ok(tooljournal_fuzz::runtime::builtins(&Arc::new(ws))
            .into_iter()
            .map(|t| (t, ToolSource::BuiltIn))
            .collect())
    })
}

/// Defect 5. With a workspace to probe, a `write` of the bytes a file already holds is
/// `applied` by the probe whether or not its body ran (before = after), and the harness calls
/// that a violation when a crash kept the `started` (a torn tail) but the body never began.
/// `tooljournal fuzz` (which probes) reports it for a transcript that rewrites a file as is.
#[test]
fn a_write_of_the_bytes_already_there_is_no_probe_violation() {
    let template = tempfile::tempdir().unwrap();
    std::fs::write(template.path().join("notes.txt"), "TODO\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ws");
    let script = r#"{"user": "rewrite the notes as they are"}
{"assistant": {"text": "", "tool_calls": [{"id": "r1", "name": "read", "arguments": "{\"path\": \"notes.txt\"}"}], "stop_reason": "tool_use"}}
{"assistant": {"text": "", "tool_calls": [{"id": "w1", "name": "write", "arguments": "{\"path\": \"notes.txt\", \"content\": \"TODO\\n\"}"}], "stop_reason": "tool_use"}}
{"assistant": {"text": "Done.", "tool_calls": [], "stop_reason": "end_turn"}}
"#;
    let turns = turns_of(&parse_script(script, "script").unwrap()).unwrap();
    let mut harness = Harness::new();
    let world = WorkspaceWorld::new(
        Some(template.path().to_owned()),
        dir.clone(),
        vec!["notes.txt".into()],
    );
    world.try_reset().unwrap();
    harness.tools_each_session(builtins_on(dir.clone()));
    harness.observe(world, &FILE_TOOLS);
    harness.probe(&dir);
    // As `tooljournal fuzz` runs: the real clock, cancels at events only.
    harness.settings_mut().clock = Clock::Real;
    harness.settings_mut().plan.timed_cancels = false;
    harness.settings_mut().plan.resumes = false;
    let report = harness.campaign(&harness.script_cases(turns), Budget::cases(1, 400));
    assert_eq!(report.violations(), 0, "{report}");
}

/// Counts the sessions (resets) a campaign runs.
struct Counted(Cell, Arc<AtomicU64>);

impl Observer for Counted {
    type Snapshot = i64;
    fn reset(&self) {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.set(0)
    }
    fn snapshot(&self) -> i64 {
        self.0.get()
    }
    fn apply(&self, state: &mut i64, _call: &CallView<'_>) {
        *state += 1;
    }
}

/// Not a defect: the baseline the tests above stand on (a correct tool, one call, passes).
#[test]
fn baseline_one_tick_passes() {
    let cell = Cell::default();
    let sessions = Arc::new(AtomicU64::new(0));
    let mut harness = Harness::new();
    harness.tool(Arc::new(Tick(cell.clone())));
    harness.observe(Counted(cell, sessions.clone()), &["tick"]);
    let checked = harness.check(&one_step(vec![call("c1", "tick", "{}")], 1));
    assert!(checked.passed(), "{:?}", checked.violations);
    assert_eq!(sessions.load(Ordering::SeqCst), 1);
}

/// Defect 6. A transcript the runtime refuses (a call with an empty id: `InvalidResponse`) is
/// accepted by `turns_of`, so `tooljournal fuzz` runs it instead of refusing it as bad input
/// (exit 2); every case then stops at that response.
#[test]
fn a_transcript_the_runtime_refuses_is_refused_by_turns_of() {
    let script = r#"{"user": "tick"}
{"assistant": {"text": "", "tool_calls": [{"id": "", "name": "tick", "arguments": "{}"}], "stop_reason": "tool_use"}}
{"assistant": {"text": "Done.", "tool_calls": [], "stop_reason": "end_turn"}}
"#;
    let lines = parse_script(script, "script").unwrap();
    let turns = turns_of(&lines);
    let cell = Cell::default();
    let mut harness = Harness::new();
    harness.tool(Arc::new(Tick(cell.clone())));
    harness.observe(Counted(cell, Arc::default()), &["tick"]);
    let what_a_case_gives = turns.as_ref().ok().map(|turns| {
        let case = UserCase {
            turns: turns.clone(),
            parallel_max: 1,
            fault: StorageFault::None,
            resume: Resume::No,
        };
        let checked = harness.check(&case);
        (checked.calls, checked.violations)
    });
    assert!(
        turns.is_err(),
        "accepted; a case of it gives {what_a_case_gives:?}"
    );
}
