//! Fuzzing your own tool: a tool that increments a counter in a store, an observer of that
//! store, a property of your own, and the harness running whole sessions around them with
//! cancels, approvals, disk faults, power losses and resumes.
//!
//! ```text
//! cargo run --example fuzz_my_tool
//! ```
//!
//! It runs the same campaign (same seed, same number of cases) three times: with the correct
//! tool (no violation), with a tool that says ok before its increment is durable, and with one
//! that declares itself retry-safe but ignores its idempotency key. For each buggy tool it
//! prints the violation the harness caught and the case, shrunk, as a transcript you can run
//! again. The store, the tools and the observer are in `fuzz_my_tool/counter.rs`.
//!
//! `cargo test` runs this example's tests too (at the bottom).

// The workspace calls the harness crate `fuzz`; `counter.rs` is written against its published
// name, as your code would be.
extern crate fuzz as tooljournal_fuzz;

#[path = "fuzz_my_tool/counter.rs"]
mod counter;

use counter::Variant;
use tooljournal_fuzz::{Budget, Report};

/// The campaign's first seed: a fixed one, so the output is the same every run.
const SEED: u64 = 22;

/// Cases per campaign: enough to catch both buggy tools from [`SEED`].
const CASES: u64 = 300;

/// Runs the campaign over `variant` from `seed`.
fn campaign(variant: Variant, seed: u64, cases: u64) -> Report {
    let harness = counter::harness(variant);
    harness.campaign(&harness.cases(), Budget::cases(seed, cases))
}

fn main() {
    for variant in Variant::ALL {
        println!("== increment, {}", variant.describe());
        let report = campaign(variant, SEED, CASES);
        // The report ends with the seed to replay a violation with.
        println!("{report}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tooljournal_fuzz::runtime::parse_script;
    use tooljournal_fuzz::turns_of;

    /// The buggy `variant` is caught within the budget, for the truth property, and its shrunk
    /// case is a transcript that parses back to the same calls and fails again when checked.
    fn caught(variant: Variant) {
        let report = campaign(variant, SEED, CASES);
        let Some(found) = &report.found else {
            panic!("{variant:?} survived {CASES} cases from seed {SEED}:\n{report}");
        };
        assert!(
            found.violations.iter().any(|v| v.starts_with("truth")),
            "{variant:?} was caught, but not by the truth property:\n{report}"
        );

        let transcript = found.case.transcript();
        let lines = parse_script(&transcript, "the shrunk case")
            .unwrap_or_else(|e| panic!("the shrunk case is no transcript: {e}\n{transcript}"));
        assert_eq!(lines.len(), transcript.lines().count(), "{transcript}");
        let turns = turns_of(&lines).unwrap_or_else(|e| panic!("{e}\n{transcript}"));
        let calls = |turns: &[tooljournal_fuzz::Turn]| -> Vec<(String, String, String)> {
            turns
                .iter()
                .flat_map(|t| &t.steps)
                .flat_map(|s| &s.calls)
                .map(|c| (c.id.clone(), c.tool.clone(), c.arguments.clone()))
                .collect()
        };
        assert_eq!(calls(&turns), calls(&found.case.turns), "{transcript}");

        let again = counter::harness(variant).check(&found.case);
        assert!(
            !again.passed(),
            "the shrunk case of {variant:?} passes when checked again:\n{report}"
        );
        println!("{report}");
    }

    /// How many calls, over the whole campaign, ended with the word labelled `label`.
    fn reached(report: &Report, label: &str) -> u64 {
        report
            .outcomes
            .iter()
            .filter_map(|(_, words)| words.get(label))
            .sum()
    }

    #[test]
    fn the_correct_tool_passes_the_budget() {
        let report = campaign(Variant::Correct, SEED, CASES);
        assert_eq!(report.ran, CASES, "{report}");
        assert_eq!(report.violations(), 0, "{report}");
        assert!(report
            .to_string()
            .ends_with(&format!("cases: {CASES}, violations: 0")));
        // The budget met what the buggy tools fail on, so passing it means something: calls
        // settled ok, stopped mid-body, of unknown outcome after a crash, and never started.
        for label in ["ok", "ABORTED", "TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"] {
            assert!(
                reached(&report, label) > 0,
                "no call ended {label}:\n{report}"
            );
        }
        let (drawn, fired) = report
            .faults
            .kinds
            .get("power loss")
            .copied()
            .unwrap_or_default();
        assert!(drawn > 0 && fired > 0, "no power loss fired:\n{report}");
    }

    #[test]
    fn acknowledging_before_durable_is_caught() {
        caught(Variant::AckBeforeDurable);
    }

    #[test]
    fn doing_the_effect_twice_on_retry_is_caught() {
        caught(Variant::TwiceOnRetry);
    }
}
