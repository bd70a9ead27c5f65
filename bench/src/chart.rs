//! `chart`: the four benchmarks run one after the other, and every figure that has a target
//! drawn as its ratio to that target, into one SVG (docs/performance.svg, shown by
//! docs/PERFORMANCE.md).
//!
//! A bar is the figure's margin over its target: the figure ÷ the target for a floor ("at
//! least"), the target ÷ the figure for a ceiling ("at most", peak memory), so that 1 is exactly
//! on target and a bar right of 1 is met whichever way the target points. Bars grow from the
//! target line on a logarithmic axis (twice as good and twice as bad are the same length), each
//! labelled with the measured figure and its target. The figures are this run's alone: nothing
//! is read from an earlier run, and a missed target is drawn as missed.
//!
//! The SVG is drawn by `plotters` with its SVG backend only: its text is SVG text, laid out by
//! an estimate of the glyphs' widths (no font is loaded), and rendered by whatever shows it.

use crate::bar::Bar;
use crate::{bounds_bench, journal_bench, runtime_bench, say, sse_bench, BoxError, Common};
use plotters::prelude::*;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub(crate) fn run(common: &Common, out: &Path) -> Result<(), BoxError> {
    let started = Instant::now();
    let load_before = load_average();
    let mut bars = Vec::new();
    say("chart: journal");
    bars.extend(journal_bench::bars(common)?);
    say("chart: runtime");
    bars.extend(runtime_bench::bars(common)?);
    say("chart: sse");
    bars.extend(sse_bench::bars(common)?);
    say("chart: bounds");
    bars.extend(bounds_bench::bars(common)?);
    let seconds = started.elapsed().as_secs_f64();
    // Other work on the machine moves every figure; the chart says how busy it was.
    let load = match (load_before, load_average()) {
        (Some(before), Some(after)) => format!(", load average {before:.1} then {after:.1}"),
        _ => String::new(),
    };

    for b in &bars {
        println!("  {:<48} {}", b.label(), b.note());
    }
    let met = bars.iter().filter(|b| b.met()).count();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let caption = format!(
        "tooljournal bench{}, {}, {cores} cores{load}: {met} of {} targets met",
        if common.quick { " --quick" } else { "" },
        today(),
        bars.len()
    );
    println!("{caption} ({seconds:.0} s of measuring)");
    draw(out, &caption, &bars)?;
    say(&format!("wrote {}", out.display()));
    Ok(())
}

/// Pixels per bar, and around the bars.
const ROW: u32 = 24;
const WIDTH: u32 = 1200;
const LABELS: u32 = 380;
const TOP_BOTTOM: u32 = 120;

fn draw(out: &Path, caption: &str, bars: &[Bar]) -> Result<(), BoxError> {
    let rows = bars.len();
    let height = TOP_BOTTOM + ROW * rows as u32;
    let root = SVGBackend::new(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;

    // The axis spans every margin and 0.1 to 10 at least (a little past 0.1, so that its
    // label is drawn), with room on the right for the notes.
    let margins = bars.iter().filter_map(Bar::margin);
    let low = (margins.clone().fold(1.0_f64, f64::min) / 1.25).min(0.09);
    let high = (margins.fold(1.0_f64, f64::max) * 6.0).max(20.0);
    let (low, high) = (low.max(0.01), high.min(1e4));

    // Row 0 is the top one: y runs from the last row (bottom) to the first.
    let top = rows as f64 - 0.5;
    let y_of = |i: usize| (rows - 1 - i) as f64;
    let labels: Vec<String> = bars.iter().map(Bar::label).collect();
    let label_of = |y: &f64| {
        let i = y.round();
        if (y - i).abs() > 1e-6 || i < 0.0 || i as usize >= rows {
            return String::new();
        }
        labels[rows - 1 - i as usize].clone()
    };

    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(LABELS)
        .build_cartesian_2d((low..high).log_scale(), -0.5..top)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows * 2 + 2)
        .y_label_formatter(&label_of)
        .y_label_style(("sans-serif", 13))
        .x_labels(12)
        .x_label_formatter(&|x| format!("{}x", short(*x)))
        .x_desc(
            "the figure's margin over its target (log scale): figure / target for a floor, \
             target / figure for a ceiling; right of 1 is met",
        )
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    let met_colour = RGBColor(46, 139, 87);
    let missed_colour = RGBColor(200, 60, 60);
    chart.draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
        let m = b.margin()?.clamp(low, high);
        let colour = if b.met() { met_colour } else { missed_colour };
        let y = y_of(i);
        Some(Rectangle::new(
            [(1.0, y - 0.34), (m, y + 0.34)],
            colour.filled(),
        ))
    }))?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(1.0, -0.5), (1.0, top)],
        BLACK.stroke_width(2),
    )))?;
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let x = b.margin().unwrap_or(1.0).max(1.0) * 1.06;
        Text::new(
            b.note(),
            (x, y_of(i) + 0.25),
            ("sans-serif", 12).into_font().color(&BLACK),
        )
    }))?;
    root.present()?;
    Ok(())
}

/// An axis label: at most two decimals, trailing zeros dropped (0.1, 1, 10).
fn short(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The 1-minute load average, where the system says it (`/proc/loadavg`).
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Today's date (UTC), as YYYY-MM-DD, from the days since 1970 (the civil calendar's rule,
/// as `date -u +%F` gives it).
fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    civil(days as i64)
}

/// The date `days` after 1970-01-01.
fn civil(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ceiling_and_a_floor_are_met_right_of_one() {
        let floor = Bar::at_least("t", "floor", 2.0, 1.0);
        let ceiling = Bar::at_most("t", "ceiling", 32.0, 64.0);
        let missed = Bar::at_most("t", "missed", 128.0, 64.0);
        assert_eq!(floor.margin(), Some(2.0));
        assert_eq!(ceiling.margin(), Some(2.0));
        assert_eq!(missed.margin(), Some(0.5));
        assert!(floor.met() && ceiling.met() && !missed.met());
        assert_eq!(Bar::at_least("t", "none", 0.0, 1.0).margin(), None);
        assert_eq!(Bar::at_most("t", "none", 0.0, 1.0).margin(), None);
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(short(0.1), "0.1");
        assert_eq!(short(1.0), "1");
        assert_eq!(short(10.0), "10");
        assert_eq!(short(0.25), "0.25");
    }

    #[test]
    fn dates_are_the_civil_ones() {
        assert_eq!(civil(0), "1970-01-01");
        assert_eq!(civil(11_016), "2000-02-29");
        assert_eq!(civil(19_723), "2024-01-01");
        assert_eq!(civil(20_454), "2026-01-01");
    }
}
