//! One figure with its target, as the benchmarks hand it to the chart (`chart.rs`).
//!
//! Its own room so that the benchmarks (which make bars) and the chart (which runs them and
//! draws their bars) each import it, and not each other.

/// One figure with a target, as the chart draws it.
pub(crate) struct Bar {
    /// The benchmark that measured it (`journal`, `runtime`, `sse`, `bounds`).
    bench: &'static str,
    /// The figure's name, as the benchmark's own table and JSON call it.
    name: String,
    value: f64,
    target: f64,
    /// A floor (the figure must reach the target) or a ceiling (it must stay under).
    at_least: bool,
}

impl Bar {
    pub(crate) fn at_least(
        bench: &'static str,
        name: impl Into<String>,
        value: f64,
        target: f64,
    ) -> Bar {
        Bar {
            bench,
            name: name.into(),
            value,
            target,
            at_least: true,
        }
    }

    pub(crate) fn at_most(
        bench: &'static str,
        name: impl Into<String>,
        value: f64,
        target: f64,
    ) -> Bar {
        Bar {
            bench,
            name: name.into(),
            value,
            target,
            at_least: false,
        }
    }

    /// Met: the margin is 1 or more (a figure of 0, a measurement that did not happen, is not).
    pub(crate) fn met(&self) -> bool {
        self.margin().is_some_and(|m| m >= 1.0)
    }

    /// How far the figure is past its target: 1 on target, above 1 met, below 1 missed. A
    /// figure of 0 (a measurement that did not happen) has no margin.
    pub(crate) fn margin(&self) -> Option<f64> {
        let m = if self.at_least {
            self.value / self.target
        } else {
            self.target / self.value
        };
        (m.is_finite() && m > 0.0).then_some(m)
    }

    pub(crate) fn label(&self) -> String {
        format!("{}: {}", self.bench, self.name)
    }

    /// The figure and its target, as written beside the bar.
    pub(crate) fn note(&self) -> String {
        let bound = if self.at_least { ">=" } else { "<=" };
        let margin = self
            .margin()
            .map_or_else(|| "no figure".to_string(), |m| format!("{m:.2}x"));
        format!(
            "{} (target {bound} {}): {margin}, {}",
            number(self.value),
            number(self.target),
            if self.met() { "met" } else { "MISSED" }
        )
    }
}

/// A figure as the tables print it: two decimals below 100, none above.
fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
