//! The campaign in CI: bounded, seeded (a fixed seed and a random one, printed), and checked
//! for its own power: every fault kind must fire in nearly every case that draws it, the probe
//! and re-run checks must meet every verdict and both kinds of call run again, and every
//! deliberately broken build (`tooljournal_fuzz::Mutant`) must be caught within its budget from a random
//! seed.

use std::time::{Duration, Instant};
use tooljournal_fuzz::{Campaign, Coverage, FaultStats, Mutant};

/// Cases per campaign (`FUZZ_CASES` changes it).
fn budget() -> u64 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Cases a mutant gets before it counts as having survived (`FUZZ_MUTANT_CASES` changes it).
fn mutant_budget() -> u64 {
    std::env::var("FUZZ_MUTANT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Campaigns here are bounded by their case budget; the deadline only keeps a hang from
/// running forever (the budget takes seconds in a debug build).
fn hang_guard() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn fail_on_violation(c: &Campaign) {
    if let Some(f) = &c.found {
        panic!(
            "violation at seed {} (replay: cargo run --release -p tooljournal-fuzz -- --seed {} --cases 1):\n  {}\nshrunk case: {:#?}",
            f.seed,
            f.seed,
            f.violations.join("\n  "),
            f.case
        );
    }
}

#[test]
fn a_bounded_campaign_finds_no_violation_and_its_faults_fire() {
    tooljournal_fuzz::quiet_simulated_panics();
    let mut faults = FaultStats::default();
    let mut coverage = Coverage::default();
    for seed in [0u64, random_seed()] {
        println!(
            "fuzz campaign from seed {seed} (replay: cargo run --release -p tooljournal-fuzz -- --seed {seed})"
        );
        let c = tooljournal_fuzz::campaign(seed, budget(), hang_guard(), None);
        fail_on_violation(&c);
        println!(
            "cases: {}, violations: 0\n{}\n{}",
            c.ran, c.faults, c.coverage
        );
        coverage.add(&c.coverage);
        assert_eq!(c.ran, budget(), "the campaign stopped before its budget");
        for (kind, (drawn, fired)) in c.faults.kinds {
            let total = faults.kinds.entry(kind).or_default();
            total.0 += drawn;
            total.1 += fired;
        }
        faults.pairs.extend(c.faults.pairs);
        faults.at_risk.extend(c.faults.at_risk);
    }
    println!("both campaigns:\n{faults}\n{coverage}");
    for kind in ["power loss", "failed fsync", "disk full", "short write"] {
        let (drawn, fired) = faults.kinds.get(kind).copied().unwrap_or_default();
        assert!(drawn > 0, "no case drew a {kind}");
        assert!(
            fired * 10 > drawn * 9,
            "{kind} fired in {fired} of the {drawn} cases that drew it (90 % at least)"
        );
    }
    // The probe and re-run checks (I20, I19) checked something.
    for verdict in ["applied", "not_applied", "changed", "no_evidence"] {
        assert!(
            coverage.verdicts.get(verdict).copied().unwrap_or(0) > 0,
            "no call of unknown outcome was probed {verdict}: {coverage}"
        );
    }
    assert!(
        coverage.changed_back > 0,
        "no probed file was changed back: {coverage}"
    );
    assert!(
        coverage.rerun_not_started > 0 && coverage.rerun_unknown > 0,
        "a re-running resume ran no call again of some kind: {coverage}"
    );
    assert!(
        coverage.kept_unknown > 0,
        "no re-running resume met an unknown call it must not run again: {coverage}"
    );
    // The runtime's retry loop ran, each attempt held to the call's one key.
    assert!(
        coverage.retries > 0,
        "no call was run again after a retryable failure: {coverage}"
    );
}

/// Seeds that once found a violation (`REGRESSION_SEEDS`), kept as regressions.
/// - 1795996981457750854: a group of two started together; the first settled, the next group's
///   start sync failed (power loss), and the second body was first polled after the journal
///   had failed (I10). Bodies now check the journal before their first poll. (Found when a
///   fault's position was drawn from 1..400 regardless of the session's length; the seed now
///   stands for another case, kept as one more regression.)
const REGRESSION_SEEDS: &[u64] = &[1795996981457750854];

#[test]
fn seeds_that_once_found_a_violation_stay_clean() {
    tooljournal_fuzz::quiet_simulated_panics();
    for &seed in REGRESSION_SEEDS {
        let c = tooljournal_fuzz::campaign(seed, 1, hang_guard(), None);
        assert_eq!(c.ran, 1);
        if let Some(f) = c.found {
            panic!("seed {}: {}", f.seed, f.violations.join("; "));
        }
    }
}

/// Runs `mutant`'s campaign from `seed`; `Some(cases)` when caught after that many cases.
fn cases_to_catch(mutant: Mutant, seed: u64, budget: u64) -> (Option<u64>, Campaign) {
    let c = tooljournal_fuzz::campaign(seed, budget, hang_guard(), Some(mutant));
    (c.found.as_ref().map(|_| c.ran), c)
}

#[test]
fn the_campaign_catches_every_mutant_from_a_random_seed() {
    tooljournal_fuzz::quiet_simulated_panics();
    let seed = std::env::var("FUZZ_MUTANT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(random_seed);
    println!("mutants from seed {seed} (replay: FUZZ_MUTANT_SEED={seed})");
    let budget = mutant_budget();
    let mut survivors = Vec::new();
    for mutant in Mutant::ALL {
        assert!(
            mutant.compiled(),
            "the mutant {:?} is not compiled in: fuzz's dev-dependencies must turn on the `mutant` features",
            mutant.name()
        );
        match cases_to_catch(mutant, seed, budget) {
            (Some(cases), c) => {
                let found = c.found.expect("caught");
                println!(
                    "mutant {:?}: caught after {cases} cases from seed {seed} (case seed {}): {}",
                    mutant.name(),
                    found.seed,
                    found.violations.join("; ")
                );
            }
            (None, c) => {
                println!(
                    "mutant {:?}: survived {} cases from seed {seed}",
                    mutant.name(),
                    c.ran
                );
                survivors.push(mutant.name());
            }
        }
    }
    assert!(
        survivors.is_empty(),
        "mutants that survived {budget} cases from seed {seed} (replay: FUZZ_MUTANT_SEED={seed}): {survivors:?}"
    );
}

/// The mutant whose tool writes a file it did not declare is caught by the world check against
/// the bound its `started` journaled (I29), within the budget the other mutants get.
#[test]
fn a_write_outside_its_bound_is_caught_by_the_world_check() {
    tooljournal_fuzz::quiet_simulated_panics();
    let seed = std::env::var("FUZZ_MUTANT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(random_seed);
    let (cases, c) = cases_to_catch(Mutant::WritesOutsideBound, seed, mutant_budget());
    let found = c.found.unwrap_or_else(|| {
        panic!(
            "survived {} cases from seed {seed} (replay: FUZZ_MUTANT_SEED={seed})",
            c.ran
        )
    });
    println!(
        "caught after {cases:?} cases from seed {seed}: {:?}",
        found.violations
    );
    assert!(
        found
            .violations
            .iter()
            .any(|v| v.starts_with("I29 sandbox bound") && v.contains("outside the bound")),
        "caught, but not by the bound (seed {seed}): {:?}",
        found.violations
    );
}

/// The campaign's power, measured: for each mutant, the cases needed to catch it in ten
/// campaigns, and their median; once from first seeds 1..=10 (campaigns run consecutive seeds,
/// so these overlap), once from first seeds k·2³² for k = 1..=10 (so that they share no case).
/// `cargo test -p tooljournal-fuzz --test campaign -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run by hand"]
fn cases_to_catch_each_mutant_over_ten_seeds() {
    tooljournal_fuzz::quiet_simulated_panics();
    let budget = 20_000;
    for (label, first_seed) in [
        ("1..=10", (|k| k) as fn(u64) -> u64),
        ("k·2^32, k = 1..=10", |k| k << 32),
    ] {
        for mutant in Mutant::ALL {
            let mut counts: Vec<u64> = (1..=10u64)
                .map(|k| {
                    cases_to_catch(mutant, first_seed(k), budget)
                        .0
                        .unwrap_or(u64::MAX)
                })
                .collect();
            let shown: Vec<String> = counts
                .iter()
                .map(|&n| match n {
                    u64::MAX => format!(">{budget}"),
                    n => n.to_string(),
                })
                .collect();
            counts.sort_unstable();
            // The median of ten: the mean of the fifth and sixth.
            let median = (counts[4].saturating_add(counts[5])) as f64 / 2.0;
            println!(
                "mutant {:?}: cases to catch from seeds {label}: [{}]; median {median}",
                mutant.name(),
                shown.join(", ")
            );
        }
    }
}

/// The campaign's power as a share: for each mutant, how many of twenty campaigns of 600
/// cases (first seeds k·2³², k = 1..=20) catch it, and after how many cases.
/// `cargo test --release -p tooljournal-fuzz --test fuzz -- --ignored --nocapture campaigns_of_600`.
#[test]
#[ignore = "a measurement, not a check: run by hand"]
fn campaigns_of_600_cases_that_catch_each_mutant() {
    tooljournal_fuzz::quiet_simulated_panics();
    for mutant in Mutant::ALL {
        let counts: Vec<Option<u64>> = (1..=20u64)
            .map(|k| cases_to_catch(mutant, k << 32, 600).0)
            .collect();
        let caught = counts.iter().flatten().count();
        let shown: Vec<String> = counts
            .iter()
            .map(|n| n.map_or_else(|| ">600".to_owned(), |n| n.to_string()))
            .collect();
        println!(
            "mutant {:?}: caught by {caught} of 20 campaigns of 600 cases, after [{}] cases",
            mutant.name(),
            shown.join(", ")
        );
    }
}

/// On two threads the campaign runs the same cases, counts the same and reports the same first
/// violation (the lowest seed's, shrunk the same) as on one.
#[test]
fn two_threads_give_what_one_thread_gives() {
    tooljournal_fuzz::quiet_simulated_panics();
    let seed = random_seed();
    println!("from seed {seed}");
    for (mutant, cases) in [(None, 60), (Some(Mutant::KeyPerAttempt), 300)] {
        let one = tooljournal_fuzz::campaign(seed, cases, hang_guard(), mutant);
        let two = tooljournal_fuzz::campaign_on(2, seed, cases, hang_guard(), mutant);
        assert_eq!(one.ran, two.ran, "{mutant:?} from seed {seed}");
        assert_eq!(one.faults, two.faults, "{mutant:?} from seed {seed}");
        assert_eq!(one.coverage, two.coverage, "{mutant:?} from seed {seed}");
        let found = |c: &Campaign| {
            c.found
                .as_ref()
                .map(|f| (f.seed, f.violations.clone(), format!("{:?}", f.case)))
        };
        assert_eq!(found(&one), found(&two), "{mutant:?} from seed {seed}");
        assert_eq!(one.found.is_some(), mutant.is_some(), "from seed {seed}");
    }
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_verdict() {
    tooljournal_fuzz::quiet_simulated_panics();
    use proptest::strategy::ValueTree;
    for seed in 0..20u64 {
        let case = tooljournal_fuzz::tree_for_seed(seed).current();
        let a = tooljournal_fuzz::simulate(&case, None);
        let b = tooljournal_fuzz::simulate(&case, None);
        assert_eq!(a.image.file_names(), b.image.file_names(), "seed {seed}");
        for name in a.image.file_names() {
            assert!(
                a.image.read_file(&name) == b.image.read_file(&name),
                "seed {seed}: {name} differs between two runs"
            );
        }
        assert_eq!(
            tooljournal_fuzz::check_run(&case, &a, None),
            tooljournal_fuzz::check_run(&case, &b, None),
            "seed {seed}"
        );
    }
}
