//! The truth property: the journal's final word on every call agrees with the world.
//!
//! For each world, starting from its snapshot when the case began, the harness applies (with
//! the observer's model, [`super::Observer::apply`]) every call of its tools whose final word is
//! a success, none whose word says it never ran ([`super::Word::never_ran`]), and any subset of
//! the rest (`TOOL_OUTCOME_UNKNOWN`, a failure or a stop after the body began: the journal does
//! not claim either way), in the order the harness saw their bodies end (a body that never
//! ended: when it began), so parallel calls and calls a resume ran again take effect when they
//! did, not in model order. The world the
//! session left must be one of the results. When none is, the harness looks for the one call
//! whose word explains the difference (a call said not to have run whose effect is there, a
//! success whose effect is not, an effect taken twice) and names it.

use super::observe::{AnySnapshot, CallView, World};
use super::{Harness, Word};

/// Most calls of undecided outcome one world's check enumerates the subsets of: past this the
/// world goes unchecked (and is counted as such), rather than taking 2^n folds.
pub(crate) const UNDECIDED_MAX: usize = 12;

/// One call, as the truth property weighs it.
pub(crate) struct Subject<'a> {
    pub(crate) view: CallView<'a>,
    pub(crate) word: Word,
    /// When its effect happened, as far as the harness saw (the end of its first body).
    pub(crate) moment: u64,
    /// How many of its bodies began (a resume may have run it again).
    pub(crate) bodies: u32,
}

/// How one call takes part in a fold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Skip,
    Once,
    Twice,
}

/// Checks every world; adds a violation per world that no allowed outcome explains. Returns
/// how many worlds went unchecked.
pub(crate) fn check(
    harness: &Harness,
    subjects: &[Subject<'_>],
    initial: &[AnySnapshot],
    last: &[AnySnapshot],
    v: &mut Vec<String>,
) -> usize {
    let mut unchecked = 0;
    for (i, entry) in harness.worlds.iter().enumerate() {
        let mut mine: Vec<&Subject<'_>> = subjects
            .iter()
            .filter(|s| entry.tools.iter().any(|t| t == s.view.tool))
            .collect();
        // Stable: calls with no body keep model order, last.
        mine.sort_by_key(|s| s.moment);
        let world = Weighing {
            world: entry.world.as_ref(),
            calls: &mine,
            initial: &initial[i],
            last: &last[i],
        };
        match world.verdict() {
            Verdict::Explained => {}
            Verdict::TooMany => unchecked += 1,
            Verdict::Unexplained(why) => v.push(format!(
                "truth ({}): {why}; the world began {} and ended {}",
                entry.tools.join(", "),
                entry.world.show(&initial[i]),
                entry.world.show(&last[i]),
            )),
        }
    }
    unchecked
}

enum Verdict {
    Explained,
    TooMany,
    Unexplained(String),
}

/// One world's calls, weighed against its two snapshots.
struct Weighing<'a> {
    world: &'a dyn World,
    calls: &'a [&'a Subject<'a>],
    initial: &'a AnySnapshot,
    last: &'a AnySnapshot,
}

impl Weighing<'_> {
    fn verdict(&self) -> Verdict {
        let base: Vec<Part> = self
            .calls
            .iter()
            .map(|s| {
                if s.word == Word::Ok {
                    Part::Once
                } else {
                    Part::Skip
                }
            })
            .collect();
        let undecided: Vec<usize> = (0..self.calls.len())
            .filter(|&i| self.calls[i].word != Word::Ok && !self.calls[i].word.never_ran())
            .collect();
        if undecided.len() > UNDECIDED_MAX {
            return Verdict::TooMany;
        }
        if self.explains(&base, &undecided) {
            return Verdict::Explained;
        }
        Verdict::Unexplained(self.diagnose(&base, &undecided))
    }

    /// Whether some subset of `undecided` taking effect, beside `parts`, gives the last world.
    fn explains(&self, parts: &[Part], undecided: &[usize]) -> bool {
        (0u32..1 << undecided.len()).any(|mask| {
            let mut parts = parts.to_vec();
            for (bit, &i) in undecided.iter().enumerate() {
                if mask & (1 << bit) != 0 {
                    parts[i] = Part::Once;
                }
            }
            self.world.same(&self.fold(&parts), self.last)
        })
    }

    fn fold(&self, parts: &[Part]) -> AnySnapshot {
        let mut state = self.world.duplicate(self.initial);
        for (s, part) in self.calls.iter().zip(parts) {
            let times = match part {
                Part::Skip => 0,
                Part::Once => 1,
                Part::Twice => 2,
            };
            for _ in 0..times {
                self.world.apply(&mut state, &s.view);
            }
        }
        state
    }

    /// The one call whose word, changed, explains the world; or what is known.
    fn diagnose(&self, base: &[Part], undecided: &[usize]) -> String {
        // Calls whose body ran more than once first: with equal arguments, an effect taken
        // twice is more likely theirs than another call's.
        let mut order: Vec<usize> = (0..self.calls.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.calls[i].bodies));
        for i in order {
            let s = self.calls[i];
            let (id, word) = (s.view.id, s.word.label());
            let tweaks: &[(Part, &str)] = match (s.word == Word::Ok, s.word.never_ran()) {
                (true, _) => &[
                    (Part::Skip, "is ok, but its effect is not in the world"),
                    (Part::Twice, "took effect twice"),
                ],
                (false, true) => &[(
                    Part::Once,
                    "never ran, the journal says, but its effect is in the world",
                )],
                (false, false) => &[(Part::Twice, "took effect twice")],
            };
            for (part, what) in tweaks {
                let mut parts = base.to_vec();
                parts[i] = *part;
                let rest: Vec<usize> = undecided.iter().copied().filter(|&u| u != i).collect();
                if self.explains(&parts, &rest) {
                    return format!("{id} ({word}) {what}");
                }
            }
        }
        let list = |keep: &dyn Fn(&Subject<'_>) -> bool| -> String {
            let ids: Vec<&str> = self
                .calls
                .iter()
                .filter(|s| keep(s))
                .map(|s| s.view.id)
                .collect();
            format!("[{}]", ids.join(", "))
        };
        format!(
            "no outcome the journal allows explains the world (ok: {}, never ran: {}, either: {})",
            list(&|s| s.word == Word::Ok),
            list(&|s| s.word.never_ran()),
            list(&|s| s.word != Word::Ok && !s.word.never_ran()),
        )
    }
}
