//! The worked example's world: a counter in a store, the tool that increments it (correct, and
//! two deliberately buggy variants), the observer the harness snapshots it with, and a property
//! of the user's own. `examples/fuzz_my_tool.rs` runs campaigns over it;
//! `fuzz/tests/fuzz/harness.rs` includes this same file to test the harness with a user's tool.
//!
//! Written against the harness crate's published name (`tooljournal_fuzz`, which re-exports the
//! runtime and proptest), as a user's code would be.

// Two crates include this file and each uses only part of it.
#![allow(dead_code)]
// `pub` is the API a user's crate would export; here the file is a module of an example and of
// a test crate, which export nothing.
#![allow(unreachable_pub)]

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tooljournal_fuzz::proptest::strategy::Strategy;
use tooljournal_fuzz::runtime::Args;
use tooljournal_fuzz::runtime::ErrorCode;
use tooljournal_fuzz::runtime::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use tooljournal_fuzz::{CallView, Crash, Harness, Observer, Outcome, WorldId};

/// The largest `by` a call may ask for (the smallest is 1).
pub const BY_MAX: i64 = 5;

/// How long one increment takes, in ms of the harness's (simulated) clock: long enough for a
/// cancel to land while it works.
pub const WORK_MS: u64 = 3;

/// The name of the property [`harness`] adds.
pub const PROPERTY: &str = "never above the sum";

/// What the store holds.
#[derive(Debug, Default)]
struct State {
    /// The durable value: what survives a crash.
    value: i64,
    /// The idempotency keys of the increments applied, durable with the value (one
    /// transaction writes both).
    applied: BTreeSet<String>,
    /// Increments written but not yet durable (what a real store holds before its fsync or
    /// commit), with their keys.
    buffer: Vec<(String, i64)>,
}

/// A counter in a store, shared by the tool that changes it and the observer that looks at it.
#[derive(Debug, Clone, Default)]
pub struct Store(Arc<Mutex<State>>);

impl Store {
    /// An empty store: value 0, nothing applied, nothing buffered.
    pub fn new() -> Store {
        Store::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change under the lock is a whole transaction: a panic cannot leave half of one.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One transaction: adds `by` and records `key`, durably, unless `key` was applied before.
    /// Returns whether it added.
    pub fn apply_once(&self, key: &str, by: i64) -> bool {
        let mut state = self.lock();
        if !state.applied.insert(key.to_owned()) {
            return false;
        }
        state.value += by;
        true
    }

    /// Adds `by` durably whatever `key` says (a store without deduplication).
    pub fn apply_always(&self, key: &str, by: i64) {
        let mut state = self.lock();
        state.applied.insert(key.to_owned());
        state.value += by;
    }

    /// Writes an increment to the buffer: not durable until [`Store::flush`].
    pub fn write_buffered(&self, key: &str, by: i64) {
        self.lock().buffer.push((key.to_owned(), by));
    }

    /// Makes the buffered increments durable (each once, by its key).
    pub fn flush(&self) {
        let mut state = self.lock();
        for (key, by) in std::mem::take(&mut state.buffer) {
            if state.applied.insert(key) {
                state.value += by;
            }
        }
    }

    /// The value a reader of the store sees now: the durable value and the buffer.
    pub fn value(&self) -> i64 {
        let state = self.lock();
        state.value + state.buffer.iter().map(|(_, by)| by).sum::<i64>()
    }

    /// The durable value alone.
    pub fn durable_value(&self) -> i64 {
        self.lock().value
    }

    /// The process died or the power went out: the buffer is gone.
    pub fn lose_buffer(&self) {
        self.lock().buffer.clear();
    }

    /// Back to empty.
    pub fn clear(&self) {
        *self.lock() = State::default();
    }
}

/// Which implementation of `increment` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Applies the increment durably, once per idempotency key, before it says ok.
    Correct,
    /// Says ok with the increment only in the buffer, flushed when the next call begins: a
    /// crash in between loses an increment the journal says succeeded.
    AckBeforeDurable,
    /// Declares itself retry-safe but ignores the idempotency key: a call of unknown outcome
    /// run again by `resume --rerun safe` applies twice.
    TwiceOnRetry,
}

impl Variant {
    /// Every variant, the correct one first.
    pub const ALL: [Variant; 3] = [
        Variant::Correct,
        Variant::AckBeforeDurable,
        Variant::TwiceOnRetry,
    ];

    /// What the variant does, for the example's output.
    pub fn describe(self) -> &'static str {
        match self {
            Variant::Correct => "correct: durable, once per idempotency key",
            Variant::AckBeforeDurable => "buggy: acknowledges before the increment is durable",
            Variant::TwiceOnRetry => "buggy: does its effect twice on retry (ignores the key)",
        }
    }
}

/// The tool: `increment {"by": n}` adds `n` (1 to [`BY_MAX`]) to the counter.
pub struct Increment {
    store: Store,
    variant: Variant,
}

impl Increment {
    /// The tool acting on `store`, implemented as `variant`.
    pub fn new(store: Store, variant: Variant) -> Increment {
        Increment { store, variant }
    }
}

/// A call's `by` (0 when it has none: the schema keeps such a call from running).
pub fn by_of(args: &Value) -> i64 {
    args.get("by").and_then(Value::as_i64).unwrap_or(0)
}

impl Tool for Increment {
    fn name(&self) -> &str {
        "increment"
    }

    fn description(&self) -> &str {
        "Adds `by` (1 to 5) to the counter."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"by": {"type": "integer", "minimum": 1, "maximum": BY_MAX}},
            "required": ["by"],
            "additionalProperties": false
        })
    }

    /// The store runs each increment as one transaction, so calls may overlap.
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }

    /// The idempotency key makes running a call again harmless (the buggy `TwiceOnRetry` says
    /// so too, wrongly).
    fn is_retry_safe(&self) -> bool {
        true
    }

    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let by = by_of(args.value());
            if self.variant == Variant::AckBeforeDurable {
                // The bug's only flush: at the start of the next call's body.
                self.store.flush();
            }
            // The work takes a little time, and a stop during it leaves the counter untouched.
            tokio::select! {
                biased;
                () = ctx.cancel().cancelled() => {
                    return Err(ToolError::new(ErrorCode::Aborted, "stopped before the increment"));
                }
                () = tokio::time::sleep(Duration::from_millis(WORK_MS)) => {}
            }
            let key = ctx.idempotency_key();
            match self.variant {
                Variant::Correct => {
                    if !self.store.apply_once(key, by) {
                        return Ok(ToolOutput::text(format!("already added {by}")));
                    }
                }
                Variant::AckBeforeDurable => self.store.write_buffered(key, by),
                Variant::TwiceOnRetry => self.store.apply_always(key, by),
            }
            Ok(ToolOutput::text(format!("added {by}")))
        })
    }
}

/// The harness's view of the store.
pub struct Counter(pub Store);

impl Observer for Counter {
    /// The value a reader sees. After a crash [`Observer::crash`] has dropped the buffer, so
    /// it is then exactly the durable value.
    type Snapshot = i64;

    fn reset(&self) {
        self.0.clear()
    }

    fn snapshot(&self) -> i64 {
        self.0.value()
    }

    /// The specification: one call adds its `by`.
    fn apply(&self, state: &mut i64, call: &CallView<'_>) {
        *state += by_of(call.args);
    }

    /// A dead process or a power loss takes the buffer with it (both kinds: the buffer lives
    /// in the process's memory).
    fn crash(&self, _crash: Crash) {
        self.0.lose_buffer()
    }
}

/// The user's own property: the counter never ends above where it began plus every call's
/// `by` (whatever the journal says of them).
pub fn never_above_sum(
    world: WorldId<Counter>,
) -> impl Fn(&Outcome<'_>) -> Result<(), String> + Send + Sync + 'static {
    move |outcome| {
        let sum: i64 = outcome
            .calls
            .iter()
            .map(|c| serde_json::from_str::<Value>(&c.arguments).map_or(0, |a| by_of(&a)))
            .sum();
        let (initial, last) = (*outcome.initial(world), *outcome.last(world));
        if last > initial + sum {
            return Err(format!(
                "the counter went from {initial} to {last}, above the {sum} all calls ask for"
            ));
        }
        Ok(())
    }
}

/// A harness over `increment` implemented as `variant`, its store observed, the property added.
pub fn harness(variant: Variant) -> Harness {
    let store = Store::new();
    let mut harness = Harness::new();
    harness.tool_with_args(
        Arc::new(Increment::new(store.clone(), variant)),
        (1..=BY_MAX).prop_map(|by| json!({ "by": by })),
    );
    let world = harness.observe(Counter(store), &["increment"]);
    harness.property(PROPERTY, never_above_sum(world));
    harness
}
