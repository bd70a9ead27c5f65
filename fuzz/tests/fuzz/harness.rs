//! The user harness (`tooljournal_fuzz::Harness`) through its public API, with a user's tool:
//! the worked example's `increment` (`examples/fuzz_my_tool/counter.rs`, included as is). It
//! has power (a broken runtime is caught with the user's tool, not only the internal
//! campaign's), composes with proptest, replays from a seed, and fuzzes a transcript.

#[path = "../../../examples/fuzz_my_tool/counter.rs"]
mod counter;

use counter::Variant;
use proptest::prelude::*;
use tooljournal_fuzz::runtime::parse_script;
use tooljournal_fuzz::Mutant;
use tooljournal_fuzz::StorageFault;
use tooljournal_fuzz::{turns_of, Budget, Report};

/// The fixed first seed of the campaigns here.
const SEED: u64 = 7;

/// Cases the planted mutant gets before it counts as having survived (the internal campaign
/// catches it in 1 to 5).
const MUTANT_CASES: u64 = 100;

/// A transcript over the example's tool: a parallel batch of two, then one call, then the end.
const SCRIPT: &str = r#"{"user": "count to nine"}
{"assistant": {"text": "Two at once.", "tool_calls": [{"id": "a", "name": "increment", "arguments": "{\"by\":2}"}, {"id": "b", "name": "increment", "arguments": "{\"by\":3}"}], "stop_reason": "tool_use"}}
{"assistant": {"text": "One more.", "tool_calls": [{"id": "c", "name": "increment", "arguments": "{\"by\":4}"}], "cancel_after_ms": 1, "stop_reason": "tool_use"}}
{"assistant": {"text": "Done.", "tool_calls": [], "stop_reason": "end_turn"}}
"#;

fn random_campaign(variant: Variant, mutant: Option<Mutant>, budget: Budget) -> Report {
    random_campaign_with(variant, mutant, budget, true)
}

fn random_campaign_with(
    variant: Variant,
    mutant: Option<Mutant>,
    budget: Budget,
    resumes: bool,
) -> Report {
    let mut harness = counter::harness(variant);
    harness.settings_mut().plan.resumes = resumes;
    if let Some(mutant) = mutant {
        harness.plant(mutant);
    }
    harness.campaign(&harness.cases(), budget)
}

#[test]
fn a_runtime_mutant_is_caught_with_the_users_tool() {
    let mutant = Mutant::StartedAfterBody;
    let budget = Budget::cases(SEED, MUTANT_CASES);
    let planted = random_campaign(Variant::Correct, Some(mutant), budget);
    let Some(found) = &planted.found else {
        panic!(
            "{} survived {MUTANT_CASES} cases from seed {SEED}:\n{planted}",
            mutant.name()
        );
    };
    assert!(!found.violations.is_empty(), "{planted}");
    println!(
        "{}: caught after {} cases\n{planted}",
        mutant.name(),
        planted.ran
    );

    let clean = random_campaign(Variant::Correct, None, budget);
    assert_eq!(clean.ran, MUTANT_CASES, "{clean}");
    assert_eq!(clean.violations(), 0, "{clean}");
}

/// The mutant hands the body the key of a `started` not yet written (empty), so the correct
/// tool, deduplicating by key, drops every increment after the first and is caught without any
/// crash. A tool that ignores the key (the `TwiceOnRetry` variant, correct when no resume runs
/// a call again) sees only what the mutant is about: a crash between the body and its late
/// `started` leaves an effect the journal says never happened.
#[test]
fn a_runtime_mutant_is_caught_by_a_crash_with_a_tool_that_ignores_the_key() {
    let mutant = Mutant::StartedAfterBody;
    let budget = Budget::cases(SEED, MUTANT_CASES);
    let planted = random_campaign_with(Variant::TwiceOnRetry, Some(mutant), budget, false);
    let Some(found) = &planted.found else {
        panic!(
            "{} survived {MUTANT_CASES} cases from seed {SEED}:\n{planted}",
            mutant.name()
        );
    };
    assert_ne!(found.case.fault, StorageFault::None, "{planted}");
    assert!(
        found.violations.iter().any(|v| v.starts_with("truth")),
        "{planted}"
    );

    let clean = random_campaign_with(Variant::TwiceOnRetry, None, budget, false);
    assert_eq!(clean.violations(), 0, "{clean}");
}

#[test]
fn the_same_seed_gives_the_same_report() {
    for variant in [Variant::Correct, Variant::AckBeforeDurable] {
        let budget = Budget::cases(SEED, 40);
        let first = random_campaign(variant, None, budget).to_string();
        let second = random_campaign(variant, None, budget).to_string();
        assert_eq!(first, second, "{variant:?}: two runs of one seed differ");
    }
}

#[test]
fn a_transcript_is_fuzzed_around_its_calls() {
    let lines = parse_script(SCRIPT, "SCRIPT").expect("SCRIPT is a transcript");
    let turns = turns_of(&lines).expect("SCRIPT's calls have unique ids");
    let budget = Budget::cases(SEED, 60);

    let harness = counter::harness(Variant::Correct);
    let report = harness.campaign(&harness.script_cases(turns.clone()), budget);
    assert_eq!(report.violations(), 0, "{report}");
    assert_eq!(report.ran, 60, "{report}");
    // Only the script's calls are played, and the plans drawn around them make them end more
    // than one way: the written cancel stops `c` in some cases and not in others, and crashes
    // leave some call of unknown outcome.
    let ids: Vec<&str> = report.outcomes.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        ids,
        ["a (increment)", "b (increment)", "c (increment)"],
        "{report}"
    );
    assert!(report.count("c", "ok") > 0, "{report}");
    assert!(report.count("c", "ABORTED") > 0, "{report}");
    let unknown: u64 = ["a", "b", "c"]
        .iter()
        .map(|id| report.count(id, "TOOL_OUTCOME_UNKNOWN"))
        .sum();
    assert!(unknown > 0, "{report}");

    // The buggy tool is caught on the same transcript.
    let buggy = counter::harness(Variant::AckBeforeDurable);
    let report = buggy.campaign(&buggy.script_cases(turns), Budget::cases(SEED, 200));
    let found = report.found.as_ref().unwrap_or_else(|| {
        panic!("acknowledging before durable survived the transcript:\n{report}")
    });
    assert!(
        found.violations.iter().any(|v| v.starts_with("truth")),
        "{report}"
    );
    println!("{report}");
}

proptest! {
    // Each case is a whole session (a few ms in a debug build): a few dozen keep CI quick.
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The harness's strategy and checker in a user's own `proptest!`.
    #[test]
    fn the_correct_tool_passes_in_a_users_proptest(case in counter::harness(Variant::Correct).cases()) {
        let checked = counter::harness(Variant::Correct).check(&case);
        prop_assert!(
            checked.passed(),
            "{:?}\n{}{}",
            checked.violations,
            case.transcript(),
            case.plan()
        );
    }
}
