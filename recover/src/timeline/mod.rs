//! `recover audit --html`: the session as a picture, in one self-contained HTML file.
//!
//! A timeline per turn and step, one bar per call from `received` to `committed` with its
//! phases shaded, the user's stops and the crash drawn as markers, each call's facts a click
//! away. The facts are the audit's ([`crate::audit`]): this is one more sink of its second
//! reading, so the picture and the table cannot disagree.
//!
//! Why it streams and has a bound: the audit reads a journal of any size holding only the
//! calls still open; the file does the same within [`HTML_BYTES_MAX_DEFAULT`] (or the bound
//! given), showing the beginning and the end of the session and saying what it left out
//! between them (module `pages`). Why everything is inline and the page may fetch nothing: an audit
//! is often read where the session happened, offline, or sent on; a page that loads nothing
//! cannot leak what it shows nor change with what it would load (module `page`).

mod items;
mod page;
mod pages;

use crate::audit::{AuditCall, AuditSink, FirstReading, Totals, UsageTotals};
use crate::session::RereadError;
use crate::stream::{MomentKind, Notice};
use events::event::{StepOutcome, ToolDescriptor, TurnOutcome};
use page::{Counted, PAGE_CLOSE};
use pages::{Item, Pages, PAGES_UNCHARGED, PAGE_OVERHEAD_BYTES};
use serde_json::{json, Value};
use std::io::Write;

/// The default bound on the file's size: 32 MiB.
pub const HTML_BYTES_MAX_DEFAULT: u64 = 32 << 20;
/// The smallest bound accepted: below it the summary alone might not fit.
pub const HTML_BYTES_MIN: u64 = 2 << 20;
/// Bytes kept for the summary, which is written last: its lists are capped to fit, within
/// the shares below (what is left holds its texts, each cut to a few hundred characters, and
/// its counts).
const SUMMARY_BYTES_MAX: u64 = 1 << 20;
/// The tools the summary lists take at most this many bytes.
const TOOLS_BYTES_MAX: u64 = 256 << 10;
/// The user's stops and the faults take at most this many bytes, and number at most
/// [`MARKS_MAX`].
const MARKS_BYTES_MAX: u64 = 384 << 10;
/// The crashes a recovery balanced take at most this many bytes, and number at most
/// [`MARKS_MAX`]: a session full of faults still shows where it crashed.
const CRASH_MARKS_BYTES_MAX: u64 = 128 << 10;
/// The most markers of each of the two kinds above the page draws. The marker of how the
/// journal ends (a crash not recovered yet, or where a live session's reading stopped) is
/// always drawn, apart from these.
const MARKS_MAX: usize = 1000;

/// How the page is written.
#[derive(Debug, Clone)]
pub struct HtmlOptions {
    /// The file stays at most this many bytes (at least [`HTML_BYTES_MIN`]).
    pub bytes_max: u64,
}

impl Default for HtmlOptions {
    fn default() -> HtmlOptions {
        HtmlOptions {
            bytes_max: HTML_BYTES_MAX_DEFAULT,
        }
    }
}

/// The audit's second reading written as the page (`name` is the journal as the page names
/// it). The bytes written never exceed `options.bytes_max`.
pub fn stream_html<W: Write>(
    at: impl Into<crate::Place>,
    first: FirstReading,
    name: &str,
    options: &HtmlOptions,
    out: W,
) -> Result<W, RereadError> {
    assert!(
        options.bytes_max >= HTML_BYTES_MIN,
        "the caller checks the bound"
    );
    let title = format!("audit of {name}");
    let reserved = page::fixed_bytes(&title)
        + SUMMARY_BYTES_MAX
        + (PAGES_UNCHARGED + 1) * (PAGE_OVERHEAD_BYTES + PAGE_CLOSE.len() as u64);
    let items_bytes_max = options.bytes_max.saturating_sub(reserved);
    let mut sink = TimelineSink {
        out: Counted { out, bytes: 0 },
        pages: Pages::new(items_bytes_max),
        summary: Summary::new(name, &first),
        step_begun_ms: None,
        step_ended: None,
    };
    sink.out
        .put(&page::head(&title))
        .map_err(RereadError::Output)?;
    crate::audit::reread_into(at, first, &mut sink)?;
    sink.finish(options.bytes_max).map_err(RereadError::Output)
}

/// The page as an audit sink.
struct TimelineSink<W: Write> {
    out: Counted<W>,
    pages: Pages,
    summary: Summary,
    /// The open step's `step/start` time, and its `step/end`'s with how it ended.
    step_begun_ms: Option<u64>,
    step_ended: Option<(u64, String)>,
}

impl<W: Write> TimelineSink<W> {
    fn push(&mut self, item: Item) -> std::io::Result<()> {
        self.pages.push(&mut self.out, item)
    }

    fn finish(mut self, bytes_max: u64) -> std::io::Result<W> {
        self.pages.finish(&mut self.out)?;
        let summary = self.summary.json(&self.pages, bytes_max);
        let tail = page::tail(&summary);
        debug_assert!(
            tail.len() as u64 <= page::fixed_bytes("") + SUMMARY_BYTES_MAX,
            "the summary's lists are capped to fit its reserve"
        );
        self.out.put(&tail)?;
        // The bound is the file's promise: broken, it says so rather than hand back a file
        // bigger than stated.
        if self.out.bytes > bytes_max {
            return Err(std::io::Error::other(format!(
                "the page took {} bytes, over its bound of {bytes_max} (a bug: please report it)",
                self.out.bytes
            )));
        }
        self.out.out.flush()?;
        Ok(self.out.out)
    }
}

impl<W: Write> AuditSink for TimelineSink<W> {
    fn notice(&mut self, notice: Notice) -> std::io::Result<()> {
        match notice {
            Notice::Opened(tools) => self.summary.tools(&tools),
            Notice::Model(m) => {
                self.summary.model = Some(items_text(&format!("{}:{}", m.provider, m.model)));
            }
            Notice::TurnBegun { turn, user_text } => {
                let at = self.summary.last_ms;
                self.push(items::turn(turn, at, &user_text))?;
            }
            Notice::Step(closed) => {
                if let Some(d) = &closed.detail {
                    self.summary.usage.add(&d.usage);
                }
                self.summary.last_step = Some((closed.turn, closed.step));
                let item = items::step(&closed, self.step_begun_ms.take(), self.step_ended.take());
                self.push(item)?;
            }
            Notice::Moment(m) => self.moment(m.at_ms, m.what),
            Notice::Imported(source) => {
                let damaged = match source.damaged.len() {
                    0 => String::new(),
                    n => format!(", {n} lines of it kept out (damaged)"),
                };
                let text = format!("{}'s session file {}{damaged}", source.agent, source.file);
                self.summary.imported = Some(items_text(&text));
                let lines = crate::import_journal::source_lines(&source.damaged, &source.notes);
                self.summary.import_lines_elided = lines.len().saturating_sub(IMPORT_LINES_MAX);
                self.summary.import_lines = (lines.iter().take(IMPORT_LINES_MAX))
                    .map(|l| items_text(l))
                    .collect();
            }
            Notice::Sandbox(b) => {
                self.summary.sandbox = Some(items_text(&crate::bound::session_words(&b)));
            }
            Notice::Schema(_) | Notice::Compacted(_) => {}
        }
        Ok(())
    }

    fn call(&mut self, call: AuditCall<'_>) -> std::io::Result<()> {
        self.summary.totals.add(call.report, call.facts);
        if let Some((t, received_ms)) = call
            .facts
            .and_then(|f| Some((f.times, f.times.received_ms?)))
        {
            // A recovery's commit is not the session's own: the crash came before it.
            let committed = t.committed_ms.filter(|_| !call.report.recovered);
            let latest = [
                t.asked_ms,
                t.approved_ms,
                t.refused_ms,
                t.started_ms,
                t.settled_ms,
                committed,
            ];
            let s = &mut self.summary;
            s.last_ms = latest
                .into_iter()
                .flatten()
                .fold(s.last_ms.max(received_ms), u64::max);
        }
        self.push(items::call(call))
    }
}

impl<W: Write> TimelineSink<W> {
    fn moment(&mut self, at_ms: u64, what: MomentKind) {
        let s = &mut self.summary;
        s.last_ms = s.last_ms.max(at_ms);
        s.ended_by_recovery = matches!(
            what,
            MomentKind::Recovered { .. }
                | MomentKind::StepEnded {
                    outcome: StepOutcome::Interrupted,
                    ..
                }
                | MomentKind::TurnEnded {
                    outcome: TurnOutcome::Interrupted,
                    ..
                }
        );
        match what {
            MomentKind::StepBegun { .. } => self.step_begun_ms = Some(at_ms),
            MomentKind::StepEnded {
                turn,
                step,
                outcome,
            } => {
                if outcome == StepOutcome::Cancelled {
                    let text = "the user stopped the step".into();
                    s.mark("stop", at_ms, Some((turn, step)), text);
                    s.stopped_turn = Some(turn);
                }
                self.step_ended = Some((at_ms, items::step_outcome(&outcome)));
            }
            // One stop is one marker: a turn stopped in a step that was stopped is marked
            // there already.
            MomentKind::TurnEnded {
                turn,
                outcome: TurnOutcome::Cancelled,
            } if s.stopped_turn != Some(turn) => {
                let text = "the user stopped the turn".into();
                s.mark("stop", at_ms, Some((turn, 0)), text);
            }
            MomentKind::Fault {
                turn,
                step,
                message,
            } => {
                s.mark(
                    "fault",
                    at_ms,
                    Some((turn, step)),
                    format!("fault: {message}"),
                );
            }
            MomentKind::Recovered {
                recovered_at_ms,
                dropped_bytes,
                calls,
                interrupted_step,
            } => {
                s.recoveries += 1;
                let text = format!(
                    "crash: the last record the process wrote before it died; recover balanced \
                     the journal later ({calls} calls given a result, {dropped_bytes} torn bytes cut)"
                );
                let at_step = interrupted_step.or(s.last_step);
                if let Some(mark) = s.mark("crash", at_ms, at_step, text) {
                    mark["recovered_at"] = json!(recovered_at_ms);
                }
            }
            MomentKind::Closed => s.closed_ms = Some(at_ms),
            MomentKind::Reopened => s.closed_ms = None,
            MomentKind::TurnBegun { .. } | MomentKind::TurnEnded { .. } => {}
        }
    }
}

/// What the summary at the head of the page says, gathered as the journal is read.
struct Summary {
    journal: String,
    session_id: Option<String>,
    live: bool,
    torn_bytes: Option<u64>,
    model: Option<String>,
    tools: Vec<Value>,
    tools_elided: usize,
    totals: Totals,
    usage: UsageTotals,
    /// Stops and faults, then the crashes a recovery balanced, then the ending's marker.
    marks: Marks,
    crash_marks: Marks,
    ending_mark: Option<Value>,
    recoveries: u64,
    closed_ms: Option<u64>,
    /// The latest moment's time.
    last_ms: u64,
    /// The turn whose step the user stopped last.
    stopped_turn: Option<u32>,
    /// The last step seen: a crash that names none is drawn at its end.
    last_step: Option<(u32, u32)>,
    /// The last moment was a recovery's (the journal ends balanced, after a crash).
    ended_by_recovery: bool,
    /// The other agent's session file an imported journal was read from, in words.
    imported: Option<String>,
    /// What reading that file found (lines kept out, notes), at most [`IMPORT_LINES_MAX`].
    import_lines: Vec<String>,
    /// How many more there were.
    import_lines_elided: usize,
    /// The session's sandbox in words (the latest `session/sandbox`).
    sandbox: Option<String>,
}

/// The most lines of what reading an imported file found that the page lists (`recover audit`
/// lists them all).
const IMPORT_LINES_MAX: usize = 40;

impl Summary {
    fn new(journal: &str, first: &FirstReading) -> Summary {
        let s = &first.streamed;
        Summary {
            journal: items_text(journal),
            session_id: s.session_id.as_deref().map(items_text),
            live: s.live,
            torn_bytes: s.end.torn.then_some(s.end.dropped_bytes),
            model: None,
            tools: Vec::new(),
            tools_elided: 0,
            totals: Totals::default(),
            usage: UsageTotals::default(),
            marks: Marks::new(MARKS_BYTES_MAX),
            crash_marks: Marks::new(CRASH_MARKS_BYTES_MAX),
            ending_mark: None,
            recoveries: 0,
            closed_ms: None,
            last_ms: 0,
            last_step: None,
            stopped_turn: None,
            ended_by_recovery: false,
            imported: None,
            import_lines: Vec::new(),
            import_lines_elided: 0,
            sandbox: None,
        }
    }

    fn tools(&mut self, tools: &[ToolDescriptor]) {
        self.tools.clear();
        let mut bytes = 0;
        for d in tools {
            let tool = json!({
                "name": items_text(&d.name),
                "source": items_text(&crate::audit::source_text(Some(d))),
            });
            // Each entry's bytes as written, and its comma.
            bytes += page::script_json(&tool).len() as u64 + 1;
            if bytes > TOOLS_BYTES_MAX {
                break;
            }
            self.tools.push(tool);
        }
        self.tools_elided = tools.len() - self.tools.len();
    }

    /// Adds a marker: a crash a recovery balanced, or a stop or a fault.
    fn mark(
        &mut self,
        kind: &str,
        at_ms: u64,
        at_step: Option<(u32, u32)>,
        text: String,
    ) -> Option<&mut Value> {
        let mark = mark_json(kind, at_ms, at_step, &text);
        if kind == "crash" {
            self.crash_marks.push(mark)
        } else {
            self.marks.push(mark)
        }
    }

    /// How the journal ended, in words, and the marker it adds (the end of a crashed journal).
    fn ending(&mut self) -> (&'static str, String) {
        if self.live {
            self.ending_mark = Some(mark_json(
                "live",
                self.last_ms,
                self.last_step,
                "live: the session was still being written when read",
            ));
            return (
                "live",
                "live: a writer holds the journal; this is what it held when read".into(),
            );
        }
        if let (Some(_), Some(_)) = (&self.imported, self.closed_ms) {
            return (
                "imported",
                "imported whole from another agent's session file; how that session ended is \
                 what its calls show"
                    .into(),
            );
        }
        if self.closed_ms.is_some() {
            return ("closed", "closed cleanly (session/close)".into());
        }
        if self.ended_by_recovery {
            return (
                "recovered",
                "the process died; recover balanced the journal".into(),
            );
        }
        let torn = match self.torn_bytes {
            Some(n) => format!(" in the middle of a record ({n} torn bytes)"),
            None => String::new(),
        };
        self.ending_mark = Some(mark_json(
            "crash",
            self.last_ms,
            self.last_step,
            &format!(
                "the journal ends here{torn}, with no session/close: the process died or was killed"
            ),
        ));
        (
            "crashed",
            format!("no session/close: the process died or was killed{torn}; not recovered yet"),
        )
    }

    /// Every marker kept, in time order.
    fn marks_in_order(&self) -> Vec<&Value> {
        let mut all: Vec<&Value> = (self.marks.kept.iter())
            .chain(&self.crash_marks.kept)
            .chain(&self.ending_mark)
            .collect();
        all.sort_by_key(|m| m["at"].as_u64());
        all
    }

    fn json(&mut self, pages: &Pages, bytes_max: u64) -> Value {
        let (how, text) = self.ending();
        let e = &pages.elided;
        json!({
            "journal": self.journal,
            "session": self.session_id,
            "imported": self.imported,
            "import_lines": self.import_lines,
            "import_lines_elided": self.import_lines_elided,
            "model": self.model,
            "sandbox": self.sandbox,
            "tools": self.tools,
            "tools_elided": self.tools_elided,
            "totals": self.totals.json(),
            "usage": self.usage.json(),
            "ended": {"how": how, "text": text, "recoveries": self.recoveries},
            "marks": self.marks_in_order(),
            "marks_elided": self.marks.elided + self.crash_marks.elided,
            "elided": (!e.is_empty()).then(|| json!({
                "calls": e.calls,
                "steps": e.steps,
                "first_turn": e.turns.map(|(f, _)| f),
                "last_turn": e.turns.map(|(_, l)| l),
            })),
            "pages": pages.count(),
            "bytes_max": bytes_max,
            // The characters the page shows as escapes, as the terminal displays do.
            "hidden": events::display::HIDDEN_RANGES,
        })
    }
}

/// Markers of one kind, within their share of the summary.
struct Marks {
    kept: Vec<Value>,
    bytes: u64,
    bytes_max: u64,
    /// Markers counted but not drawn.
    elided: u64,
}

impl Marks {
    fn new(bytes_max: u64) -> Marks {
        Marks {
            kept: Vec::new(),
            bytes: 0,
            bytes_max,
            elided: 0,
        }
    }

    /// Keeps `mark` if it fits (the kept one, to add to), else counts it.
    fn push(&mut self, mark: Value) -> Option<&mut Value> {
        // Its bytes as written, its comma, and room for a `recovered_at` added later.
        let bytes = page::script_json(&mark).len() as u64 + 40;
        if self.kept.len() >= MARKS_MAX || self.bytes + bytes > self.bytes_max {
            self.elided += 1;
            return None;
        }
        self.bytes += bytes;
        self.kept.push(mark);
        self.kept.last_mut()
    }
}

/// A marker as the page reads it.
fn mark_json(kind: &str, at_ms: u64, at_step: Option<(u32, u32)>, text: &str) -> Value {
    json!({
        "kind": kind,
        "at": at_ms,
        "turn": at_step.map(|(t, _)| t),
        "step": at_step.map(|(_, s)| s),
        "text": items_text(text),
    })
}

/// A text of the summary, cut as the items' are.
fn items_text(s: &str) -> String {
    crate::audit::truncate(s, items::TEXT_CHARS_MAX)
}
