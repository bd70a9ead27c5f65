//! `fuzz`: a deterministic simulation of whole sessions (turns, batches, cancels, panics, asks,
//! spill and observer failures) on an in-memory disk that fails or loses power where the case
//! says, followed by recovery and a check of every invariant of DESIGN.md §7.
//!
//! Cases come from proptest strategies; a seed picks one, so a violation is replayed from its
//! seed, and proptest shrinks it to a small case.

pub mod case;
pub mod check;
pub mod sim;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Keeps the simulated tools' and observers' deliberate panics off the screen; every other
/// panic (an assertion, a bug) is reported as usual.
pub fn quiet_simulated_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if !message.starts_with("simulated") {
            default(info);
        }
    }));
}

/// The case a seed stands for, as a tree proptest can shrink.
pub fn tree_for_seed(seed: u64) -> impl ValueTree<Value = case::Case> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    case::case()
        .new_tree(&mut runner)
        .expect("the case strategy never rejects")
}

/// Runs one case and returns its violations.
pub fn check_case(case: &case::Case, mutant: bool) -> Vec<String> {
    let run = sim::run(case, mutant);
    check::check(case, &run)
}

/// A violation, shrunk.
#[derive(Debug)]
pub struct Found {
    pub seed: u64,
    pub case: case::Case,
    pub violations: Vec<String>,
}

/// Shrinks a failing case as far as it keeps failing.
pub fn shrink(seed: u64, mutant: bool) -> Option<Found> {
    let mut tree = tree_for_seed(seed);
    let mut violations = check_case(&tree.current(), mutant);
    if violations.is_empty() {
        return None;
    }
    let mut steps = 0;
    while steps < 500 && tree.simplify() {
        steps += 1;
        let v = check_case(&tree.current(), mutant);
        if v.is_empty() {
            if !tree.complicate() {
                break;
            }
        } else {
            violations = v;
        }
    }
    Some(Found {
        seed,
        case: tree.current(),
        violations,
    })
}

/// Runs cases for seeds `first_seed`, `first_seed + 1`, … until `cases` ran or `deadline`
/// passed; stops at the first violation (shrunk). Returns how many ran.
pub fn campaign(
    first_seed: u64,
    cases: u64,
    deadline: std::time::Instant,
    mutant: bool,
) -> (u64, Option<Found>) {
    let mut ran = 0;
    while ran < cases && std::time::Instant::now() < deadline {
        let seed = first_seed.wrapping_add(ran);
        ran += 1;
        if !check_case(&tree_for_seed(seed).current(), mutant).is_empty() {
            return (ran, shrink(seed, mutant));
        }
    }
    (ran, None)
}
