//! The truth property of the user's harness (DESIGN.md §12) names the call whose journal word
//! the world contradicts: a tool that says it succeeded and did nothing, a tool that acts while
//! its evidence is gathered (before `started` is durable), and, as the baseline, a tool that
//! fails after acting (the journal claims neither way) which must pass.

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tooljournal_fuzz::proptest::strategy::Strategy;
use tooljournal_fuzz::runtime::event::Evidence;
use tooljournal_fuzz::runtime::Args;
use tooljournal_fuzz::runtime::ErrorCode;
use tooljournal_fuzz::runtime::{
    EvidenceFuture, Tool, ToolContext, ToolError, ToolFuture, ToolOutput,
};
use tooljournal_fuzz::{Budget, CallView, Harness, Observer, Report};

/// Cases each campaign may take: enough for every bug below from seed 1, few enough for CI.
const CASES_MAX: u64 = 300;

/// How a tool of this file goes wrong.
#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    /// None: it adds, then fails every other call with TOOL_FAILED after adding.
    FailsAfterActing,
    /// It reports success and adds nothing.
    Lies,
    /// It adds while its evidence is gathered, before `started` is durable.
    ActsEarly,
}

struct Add {
    total: Arc<Mutex<i64>>,
    flaw: Flaw,
}

fn by(args: &Args) -> i64 {
    args.get("by").and_then(Value::as_i64).unwrap_or(0)
}

impl Tool for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn description(&self) -> &str {
        "adds `by` to a total"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"by": {"type": "integer"}}, "required": ["by"]})
    }
    fn evidence<'a>(&'a self, args: &'a Args) -> EvidenceFuture<'a> {
        if self.flaw == Flaw::ActsEarly {
            *self.total.lock().unwrap() += by(args);
        }
        Box::pin(std::future::ready(Vec::<Evidence>::new()))
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            if ctx.cancel().is_cancelled() {
                return Err(ToolError::new(ErrorCode::Aborted, "stopped before adding"));
            }
            let n = by(&args);
            if self.flaw == Flaw::FailsAfterActing {
                let mut total = self.total.lock().unwrap();
                *total += n;
                if *total % 2 == 0 {
                    return Err(ToolError::new(ErrorCode::ToolFailed, "added, then failed"));
                }
            }
            Ok(ToolOutput::text(format!("added {n}")))
        })
    }
}

struct Total(Arc<Mutex<i64>>);

impl Observer for Total {
    type Snapshot = i64;
    fn reset(&self) {
        *self.0.lock().unwrap() = 0;
    }
    fn snapshot(&self) -> i64 {
        *self.0.lock().unwrap()
    }
    fn apply(&self, state: &mut i64, call: &CallView<'_>) {
        *state += call.args.get("by").and_then(Value::as_i64).unwrap_or(0);
    }
}

fn campaign(flaw: Flaw) -> Report {
    let total = Arc::new(Mutex::new(0));
    let mut harness = Harness::new();
    harness.tool_with_args(
        Arc::new(Add {
            total: total.clone(),
            flaw,
        }),
        (1i64..4).prop_map(|by| json!({ "by": by })),
    );
    harness.observe(Total(total), &["add"]);
    harness.campaign(&harness.cases(), Budget::cases(1, CASES_MAX))
}

fn caught(report: &Report, wanted: &str) {
    let found = report
        .found
        .as_ref()
        .unwrap_or_else(|| panic!("not caught: {report}"));
    assert!(
        found
            .violations
            .iter()
            .any(|v| v.starts_with("truth (add): ") && v.contains(wanted)),
        "caught, but not as {wanted:?}: {report}"
    );
}

#[test]
fn a_tool_that_fails_after_acting_passes_since_the_journal_claims_neither_way() {
    let report = campaign(Flaw::FailsAfterActing);
    assert_eq!(report.violations(), 0, "{report}");
    assert_eq!(report.ran, CASES_MAX);
    // The budget reached both words the flaw is about.
    let words = |label: &str| {
        report
            .outcomes
            .iter()
            .filter_map(|(_, w)| w.get(label))
            .sum::<u64>()
    };
    assert!(words("TOOL_FAILED") > 0 && words("ok") > 0, "{report}");
}

#[test]
fn a_tool_that_reports_a_success_it_did_not_have_is_named() {
    caught(
        &campaign(Flaw::Lies),
        "(ok) is ok, but its effect is not in the world",
    );
}

#[test]
fn a_tool_that_acts_before_its_start_is_durable_is_named() {
    caught(
        &campaign(Flaw::ActsEarly),
        "never ran, the journal says, but its effect is in the world",
    );
}
