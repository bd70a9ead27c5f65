//! `recover classify` output, written a call at a time as the streamed recovery hands the
//! reports out ([`crate::Recovery::stream`]).
//!
//! `--json` is byte for byte what [`crate::report::classify_json`] prints for the same journal
//! (one object, keys in order: `calls`, `end`, `journal`, `live`, and `salvage` after a
//! salvaging read), so the calls can go out before the end of the journal is known. The table
//! for people gives the session on its first line and how the journal ended on the line after
//! the last call. With `--probe`, a `TOOL_OUTCOME_UNKNOWN` call's object has a `probe` and the
//! table a `probe` column ([`TextListing::with_probe_column`]); without, both are as before.
//! A `TOOL_OUTCOME_UNKNOWN` call whose process ran under a sandbox (schema 11) has its bound in
//! words (`bound`) and as recorded (`sandbox`), and the table a `sandbox:` line under its row.

use crate::call_fields::resource_list;
use crate::classify::{CallReport, End};
use crate::session::ReportSink;
use events::event::{Classification, Resources};
use serde::Serialize;
use std::io::Write;

/// The longest bound in words the table shows on its line (its roots are the journal's text).
const WORDS_CHARS_MAX: usize = 2000;

fn classification_name(k: Classification) -> &'static str {
    match k {
        Classification::ToolNotStarted => "TOOL_NOT_STARTED",
        Classification::ToolOutcomeUnknown => "TOOL_OUTCOME_UNKNOWN",
    }
}

/// `resources` as [`resource_list`] gives them, serialized without building the list.
struct ResourceList<'a>(&'a Resources);

/// One resource: a prefix and a path or intent, serialized as one string.
struct Prefixed<'a>(&'static str, &'a str);

impl Serialize for Prefixed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{}{}", self.0, self.1))
    }
}

impl Serialize for ResourceList<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let r = self.0;
        let mut seq = s.serialize_seq(Some(r.writes.len() + r.reads.len() + r.intents.len()))?;
        for p in &r.writes {
            seq.serialize_element(&Prefixed("write:", p))?;
        }
        for p in &r.reads {
            seq.serialize_element(&Prefixed("read:", p))?;
        }
        for i in &r.intents {
            seq.serialize_element(&Prefixed("intent:", i))?;
        }
        seq.end()
    }
}

/// One call of `classify --json`; fields in the order `serde_json::Value` prints them.
#[derive(Serialize)]
struct CallJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    bound: Option<String>,
    call_id: &'a str,
    classification: Option<&'static str>,
    /// As a `serde_json::Value`, so that its keys come in the order `classify_json` has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    probe: Option<serde_json::Value>,
    resources: ResourceList<'a>,
    /// As a `serde_json::Value`, for the same reason as `probe`.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<serde_json::Value>,
    state: &'static str,
    step: u32,
    tool: &'a str,
    turn: u32,
}

#[derive(Serialize)]
struct EndJson {
    dropped_bytes: u64,
    kind: &'static str,
}

fn io_error(e: serde_json::Error) -> std::io::Error {
    std::io::Error::other(e)
}

/// `classify --json`, streamed.
pub struct JsonListing<W: Write> {
    out: W,
    journal: String,
    first: bool,
    /// One call's JSON, built here and written at once (cheaper than many small writes).
    buf: Vec<u8>,
}

impl<W: Write> JsonListing<W> {
    /// A listing of `journal`'s calls written to `out` as JSON.
    pub fn new(out: W, journal: &str) -> JsonListing<W> {
        JsonListing {
            out,
            journal: journal.to_owned(),
            first: true,
            buf: Vec::with_capacity(256),
        }
    }

    /// Ends the object: how the journal ended, its name, whether it is live, and what a
    /// salvaging read passed over (already JSON). Flushes.
    pub fn finish(
        mut self,
        end: End,
        live: bool,
        salvage: Option<&serde_json::Value>,
    ) -> std::io::Result<()> {
        if self.first {
            // No call was given: the object still opens with its calls.
            self.out.write_all(b"{\"calls\":[")?;
        }
        self.out.write_all(b"],\"end\":")?;
        let end = EndJson {
            dropped_bytes: end.dropped_bytes,
            kind: if end.torn { "torn_tail" } else { "clean" },
        };
        serde_json::to_writer(&mut self.out, &end).map_err(io_error)?;
        self.out.write_all(b",\"journal\":")?;
        serde_json::to_writer(&mut self.out, &self.journal).map_err(io_error)?;
        self.out.write_all(if live {
            b",\"live\":true"
        } else {
            b",\"live\":false"
        })?;
        if let Some(salvage) = salvage {
            self.out.write_all(b",\"salvage\":")?;
            serde_json::to_writer(&mut self.out, salvage).map_err(io_error)?;
        }
        self.out.write_all(b"}\n")?;
        self.out.flush()
    }
}

impl<W: Write> ReportSink for JsonListing<W> {
    fn start(&mut self, _session_id: Option<&str>, _live: bool) -> std::io::Result<()> {
        Ok(())
    }

    fn call(&mut self, c: CallReport) -> std::io::Result<()> {
        self.buf.clear();
        self.buf
            .extend_from_slice(if self.first { b"{\"calls\":[" } else { b"," });
        self.first = false;
        let probe = match &c.probe {
            Some(p) => Some(serde_json::to_value(p).map_err(io_error)?),
            None => None,
        };
        let call = CallJson {
            bound: c.sandbox.as_ref().map(|b| b.in_words()),
            call_id: &c.call.call_id,
            classification: c.classification.map(classification_name),
            probe,
            resources: ResourceList(&c.resources),
            sandbox: c.sandbox.as_ref().map(crate::bound::json),
            state: c.state.as_str(),
            step: c.call.step,
            tool: &c.tool,
            turn: c.call.turn,
        };
        serde_json::to_writer(&mut self.buf, &call).map_err(io_error)?;
        self.out.write_all(&self.buf)
    }
}

/// `classify` for people, streamed.
pub struct TextListing<W: Write> {
    out: W,
    journal: String,
    started: bool,
    outcome_unknown: u64,
    /// A `probe` column, after the classification (`--probe`).
    probe_column: bool,
}

impl<W: Write> TextListing<W> {
    /// A listing of `journal`'s calls written to `out` as a table.
    pub fn new(out: W, journal: &str) -> TextListing<W> {
        TextListing {
            out,
            journal: journal.to_owned(),
            started: false,
            outcome_unknown: 0,
            probe_column: false,
        }
    }

    /// The listing with a `probe` column: each `TOOL_OUTCOME_UNKNOWN` call's verdict, `-` for
    /// the others.
    pub fn with_probe_column(mut self) -> TextListing<W> {
        self.probe_column = true;
        self
    }

    /// How the journal ended, what to do about calls that may have run, and `trailer` (what a
    /// salvaging read passed over). Flushes.
    pub fn finish(mut self, end: End, live: bool, trailer: Option<&str>) -> std::io::Result<()> {
        let end = if end.torn {
            format!("torn tail, {} bytes dropped", end.dropped_bytes)
        } else {
            "clean".to_owned()
        };
        writeln!(self.out, "{}: end of journal: {end}", self.journal)?;
        if self.outcome_unknown > 0 {
            writeln!(
                self.out,
                "{} call(s) may have run (TOOL_OUTCOME_UNKNOWN): check their resources before retrying; they are never re-run automatically",
                self.outcome_unknown
            )?;
        }
        if live {
            writeln!(self.out, "the session is live: nothing was appended")?;
        }
        if let Some(trailer) = trailer {
            self.out.write_all(trailer.as_bytes())?;
        }
        self.out.flush()
    }
}

impl<W: Write> ReportSink for TextListing<W> {
    fn start(&mut self, session_id: Option<&str>, live: bool) -> std::io::Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        writeln!(
            self.out,
            "{}: session {}{}",
            self.journal,
            session_id.unwrap_or("(empty)"),
            if live { ", LIVE (read only)" } else { "" }
        )?;
        let probe = if self.probe_column {
            format!("{:<12} ", "probe")
        } else {
            String::new()
        };
        writeln!(
            self.out,
            "{:<12} {:<10} {:>4} {:>4}  {:<22} {:<20} {probe}resources",
            "call", "tool", "turn", "step", "state", "classification"
        )
    }

    fn call(&mut self, c: CallReport) -> std::io::Result<()> {
        let k = match (c.in_flight, c.classification) {
            (true, _) => "(running)".to_owned(),
            (_, Some(k)) => {
                if k == Classification::ToolOutcomeUnknown {
                    self.outcome_unknown += 1;
                    format!("{} !", classification_name(k))
                } else {
                    classification_name(k).to_owned()
                }
            }
            (_, None) => "-".to_owned(),
        };
        let probe = if self.probe_column {
            let verdict = c.probe.as_ref().map_or("-", |p| p.verdict.as_str());
            format!("{verdict:<12} ")
        } else {
            String::new()
        };
        writeln!(
            self.out,
            "{:<12} {:<10} {:>4} {:>4}  {:<22} {:<20} {probe}{}",
            c.call.call_id,
            c.tool,
            c.call.turn,
            c.call.step,
            c.state.as_str(),
            k,
            resource_list(&c).join(", ")
        )?;
        // What its process could have touched, then the evidence in words, under the row (the
        // column has only the verdict).
        if let Some(b) = &c.sandbox {
            let words = events::display::one_line(&b.in_words(), WORDS_CHARS_MAX);
            writeln!(self.out, "             sandbox: {words}")?;
        }
        match (&c.probe, self.probe_column) {
            (Some(p), true) => writeln!(self.out, "             probe: {}", p.detail),
            _ => Ok(()),
        }
    }
}
