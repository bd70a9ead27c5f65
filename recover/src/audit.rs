//! `recover audit`: every call with its tool, arguments, decision, state, classification,
//! side effects and timings, then the totals and the session's token usage, for people and,
//! with `--json`, for programs.
//!
//! The audit shows each call's question (the built-in `ask`'s, or a yes/no approval's) with
//! what became of it: its text, options, whether several may be chosen and whether the person
//! may answer in their own words, its state (pending, answered, declined, expired, cancelled)
//! and the answer or the reason. A call is asked at most once by the runtime, so the last
//! question is the one shown. It also shows each call's idempotency key (`-`, or `null`, for a
//! call that never started or a journal from before event schema 5) and the evidence its last
//! `started` recorded, with the process groups it started.
//!
//! [`AuditWriter`] writes a call's line as soon as the call is final and the totals at the end
//! (the JSON's keys are sorted, so `calls` comes first and the totals last), so that
//! [`stream`] holds only the calls still open however long the journal: it reads the journal
//! twice, the first time to find it whole (a corrupt journal prints nothing, as before) and
//! to learn the last facts of the few calls that later events could still move after they
//! were final (a question still pending, a call a `recovery` committed); the second time it
//! writes. [`crate::report::audit_json`] and [`crate::report::audit_text`] say the same of a
//! whole [`Analysis`](crate::classify::Analysis), with the same code.
//!
//! The session's sandbox (`session/sandbox`, schema 11, the latest) is said once, in the head
//! of the table and as the JSON's `sandbox` (`null` for a journal without one); the first
//! reading learns it, since the head is written before the second reads it again.

use crate::call_fields::{classification, resource_list};
use crate::classify::CallReport;
use crate::session::{RecoverError, RereadError, Streamed};
use crate::stream::{CallFacts, Classifier, Mode, Notice};
use events::event::{
    Approval, AskAnswer, Evidence, SandboxBound, SideEffect, ToolDescriptor, ToolSource,
};
use events::model::Usage;
use serde_json::{json, Value};
use std::io::Write;

mod questions;
pub(crate) use questions::question_lines;
use questions::{question_json, question_summary};

/// The call's idempotency key, as its last `started` recorded it (schema 5).
pub(crate) fn idempotency_key(f: Option<&CallFacts>) -> Option<&str> {
    f?.idempotency_key.as_deref()
}

/// What the call recorded for a probe: its last `started`'s evidence, then the process groups
/// it started, as `audit --json` shows them.
fn evidence_json(f: Option<&CallFacts>) -> Vec<Value> {
    let Some(r) = f else {
        return Vec::new();
    };
    let files = r.evidence.iter().map(|e| match e {
        Evidence::FileReplace {
            path,
            before_sha256,
            after_sha256,
        } => json!({
            "kind": "file_replace",
            "path": path,
            "before_sha256": before_sha256,
            "after_sha256": after_sha256,
        }),
        Evidence::Sandbox(bound) => {
            let mut v = crate::bound::json(bound);
            v["kind"] = json!("sandbox");
            v["bound"] = json!(bound.in_words());
            v
        }
    });
    let groups = r.processes.iter().map(|p| {
        json!({
            "kind": "process_group",
            "pgid": p.pgid,
            "pid": p.pid,
            "start_ticks": p.start_ticks,
        })
    });
    files.chain(groups).collect()
}

/// The same, for people: `replaces a.txt (new → 3f2a…)`, `process group 1234`.
pub(crate) fn evidence_text(f: Option<&CallFacts>) -> Vec<String> {
    let Some(r) = f else {
        return Vec::new();
    };
    let short = |h: &str| short_hash(h);
    let files = r.evidence.iter().map(|e| match e {
        Evidence::FileReplace {
            path,
            before_sha256,
            after_sha256,
        } => format!(
            "replaces {} ({} → {})",
            one_line(path, 100),
            before_sha256.as_deref().map_or("absent".into(), short),
            short(after_sha256)
        ),
        Evidence::Sandbox(bound) => format!("sandbox: {}", one_line(&bound.in_words(), 2000)),
    });
    let groups = r
        .processes
        .iter()
        .map(|p| format!("process group {}", p.pgid));
    files.chain(groups).collect()
}

pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_owned()
    } else {
        s.chars().take(max_chars).collect::<String>() + "…"
    }
}

/// A text on one line, hidden characters shown, cut to `max_chars`: for the table
/// (`events::display::one_line`).
pub(crate) fn one_line(s: &str, max_chars: usize) -> String {
    events::display::one_line(s, max_chars)
}

/// An imported call's decision: the agent that ran it decided, so what the audit can say is
/// where the call and its outcome were read and what the source proves.
fn imported_decision(i: &events::replay::ImportedCall) -> String {
    use events::event::ImportVerdict;
    let line = |l: Option<events::event::ImportLine>| match l {
        Some(l) => format!("line {} (byte {})", l.line, l.offset),
        None => "an unknown line".into(),
    };
    let called = format!("imported from {}", line(i.line));
    match &i.verdict {
        Some(ImportVerdict::Recorded) => format!("{called}; output at {}", line(i.outcome_line)),
        Some(ImportVerdict::NotStarted { why }) => format!("{called}; no output; never ran: {why}"),
        Some(ImportVerdict::OutcomeUnknown { why }) => {
            format!("{called}; no output; may have run: {why}")
        }
        None => format!("{called}; the import stopped before its outcome"),
    }
}

pub(crate) fn decision(f: Option<&CallFacts>) -> String {
    let Some(r) = f else {
        return "never received".into();
    };
    if let Some(imported) = &r.imported {
        return imported_decision(imported);
    }
    if let Some(ask) = &r.last_ask {
        let asked = format!("asked: {}", question_summary(ask));
        // Allowed (or answered), then stopped before it started.
        return match (&r.cancel_reason, ask.answer) {
            (Some(reason), Some(answer)) if answer.allows() || answer == AskAnswer::Answered => {
                format!("{asked}; cancelled: {reason}")
            }
            _ => asked,
        };
    }
    if let Some((code, reason)) = &r.rejection {
        return format!("rejected {code}: {reason}");
    }
    if let Some(reason) = &r.cancel_reason {
        return format!("cancelled: {reason}");
    }
    match &r.approval {
        Some(Approval::Listener { name }) => format!("allowed by {name}"),
        Some(Approval::Default) => "allowed by default".into(),
        Some(Approval::Asked { answer }) => format!("asked: {answer:?}"),
        Some(Approval::AlwaysAllowed) => "allowed (always, earlier answer)".into(),
        None => "undecided".into(),
    }
}

pub(crate) fn effects(f: Option<&CallFacts>) -> Vec<String> {
    let Some((_, side_effects)) = f.and_then(|r| r.outcome.as_ref()) else {
        return Vec::new();
    };
    side_effects
        .iter()
        .map(|e| match e {
            SideEffect::FsWrite {
                path,
                before_sha256,
                after_sha256,
            } => format!(
                "wrote {path} ({} → {})",
                before_sha256.as_deref().map_or("new".into(), short_hash),
                short_hash(after_sha256)
            ),
            SideEffect::ProcExit {
                pid,
                status,
                signal,
            } => match (status, signal) {
                (Some(s), _) => format!("process {pid} exited {s}"),
                (None, Some(sig)) => format!("process {pid} killed by signal {sig}"),
                (None, None) => format!("process {pid} ended"),
            },
            SideEffect::Other { kind, detail } => format!("{kind} {detail}"),
            SideEffect::PlanReplaced { items } => format!("plan replaced ({} items)", items.len()),
            SideEffect::ToolsLoaded { names } => format!("loaded tools {}", names.join(", ")),
        })
        .collect()
}

/// The tool as `session/open` recorded it; `None` for a name the session never had.
pub(crate) fn descriptor<'a>(
    tools: &'a [ToolDescriptor],
    tool: &str,
) -> Option<&'a ToolDescriptor> {
    tools.iter().find(|d| d.name == tool)
}

/// Where the tool came from, for people: `built-in 1`, `mcp fs (secure-filesystem-server 0.2.0)`.
pub(crate) fn source_text(d: Option<&ToolDescriptor>) -> String {
    match d {
        Some(d) if d.source == ToolSource::BuiltIn => format!("built-in {}", d.version),
        Some(d) => d.source.to_string(),
        None => "(no such tool)".to_owned(),
    }
}

fn source_json(d: Option<&ToolDescriptor>) -> Value {
    let Some(d) = d else {
        return Value::Null;
    };
    let mut v = match &d.source {
        ToolSource::BuiltIn => json!({"kind": "built-in"}),
        ToolSource::External { server } => json!({"kind": "external", "server": server}),
        ToolSource::Mcp {
            server,
            implementation,
            version,
        } => json!({
            "kind": "mcp", "server": server,
            "implementation": implementation, "server_version": version,
        }),
    };
    v["version"] = json!(d.version);
    v["schema_hash"] = json!(d.schema_hash);
    v
}

pub(crate) fn timing_ms(f: Option<&CallFacts>) -> Option<u64> {
    f?.outcome.as_ref().map(|(duration_ms, _)| *duration_ms)
}

/// One call as the audit shows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuditCall<'a> {
    /// Its report.
    pub report: &'a CallReport,
    /// What the journal says of it beyond the report; `None` for a call never received.
    pub facts: Option<&'a CallFacts>,
    /// Its tool as `session/open` recorded it ([`descriptor`]).
    pub tool: Option<&'a ToolDescriptor>,
}

/// A call as `audit --json` shows it.
pub(crate) fn call_json(call: AuditCall<'_>) -> Value {
    let (c, f) = (call.report, call.facts);
    json!({
        "call_id": c.call.call_id,
        "turn": c.call.turn,
        "step": c.call.step,
        "tool": c.tool,
        "source": source_json(call.tool),
        "arguments": c.raw_arguments,
        "decision": decision(f),
        "state": c.state.as_str(),
        "classification": classification(c),
        "result_code": c.result.code.map(|k| k.as_str()),
        "side_effects": effects(f),
        "duration_ms": timing_ms(f),
        "resources": resource_list(c),
        "question": question_json(f),
        "idempotency_key": idempotency_key(f),
        "evidence": evidence_json(f),
    })
}

/// A call as `audit` shows it to people: its row, its key and evidence, and its question.
pub(crate) fn call_text(call: AuditCall<'_>) -> String {
    let (c, f) = (call.report, call.facts);
    // The classification of an orphan, or the code of an error result (an MCP call whose
    // server died settles as TOOL_OUTCOME_UNKNOWN: it shows here).
    let class = match (c.classification, c.result.code) {
        (Some(_), _) => format!(
            "{} {}",
            c.state.as_str(),
            classification(c).as_str().unwrap_or_default()
        ),
        (None, Some(code)) => format!("{} {code}", c.state.as_str()),
        (None, None) => c.state.as_str().to_owned(),
    };
    let mut out = format!(
        "{:>4} {:>4} {:<10} {:<24} {:<32} {:<34} {:<36} {:<22} {:>7}  {}\n",
        c.call.turn,
        c.call.step,
        one_line(&c.call.call_id, 10),
        one_line(&c.tool, 24),
        one_line(&source_text(call.tool), 32),
        one_line(&c.raw_arguments, 34),
        one_line(&decision(f), 36),
        class,
        timing_ms(f)
            .map(|m| m.to_string())
            .unwrap_or_else(|| "-".into()),
        effects(f).join("; ")
    );
    let evidence = evidence_text(f);
    out.push_str(&format!(
        "          key: {}{}\n",
        idempotency_key(f).unwrap_or("-"),
        if evidence.is_empty() {
            String::new()
        } else {
            format!("; evidence: {}", evidence.join("; "))
        }
    ));
    if let Some(ask) = f.and_then(|f| f.last_ask.as_ref()) {
        out.push_str(&question_lines(ask));
    }
    out
}

/// The audit's totals, added up call by call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    calls: usize,
    ok: usize,
    errors: usize,
    not_started: usize,
    outcome_unknown: usize,
    side_effects: usize,
}

impl Totals {
    /// Counts one call.
    pub(crate) fn add(&mut self, c: &CallReport, f: Option<&CallFacts>) {
        use events::event::Classification;
        self.calls += 1;
        self.ok += usize::from(!c.result.is_error && !c.in_flight);
        self.errors += usize::from(c.result.is_error);
        self.not_started += usize::from(c.classification == Some(Classification::ToolNotStarted));
        self.outcome_unknown +=
            usize::from(c.classification == Some(Classification::ToolOutcomeUnknown));
        self.side_effects += effects(f).len();
    }

    /// As `audit --json` shows them.
    pub(crate) fn json(&self) -> Value {
        json!({
            "calls": self.calls,
            "ok": self.ok,
            "errors": self.errors,
            "not_started": self.not_started,
            "outcome_unknown": self.outcome_unknown,
            "side_effects": self.side_effects,
        })
    }
}

/// How many responses the journal details (`llm/response-detail`), their token counts added
/// up, the refused ones (`llm/refusal`) and what the adapters noted (`llm/note`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UsageTotals {
    responses: usize,
    total: Usage,
    refusals: Vec<events::event::LlmRefusal>,
    notes: Vec<events::event::LlmNote>,
}

impl UsageTotals {
    /// Takes what a closed step says of its response.
    pub(crate) fn step(&mut self, step: &crate::stream::ClosedStep) {
        self.response(step.detail.as_ref(), step.refusal.as_ref(), &step.notes);
    }

    /// Takes what the journal says of one response: its detail, its refusal, its notes.
    pub(crate) fn response(
        &mut self,
        detail: Option<&events::event::LlmResponseDetail>,
        refusal: Option<&events::event::LlmRefusal>,
        notes: &[events::event::LlmNote],
    ) {
        if let Some(d) = detail {
            self.add(&d.usage);
        }
        self.refusals.extend(refusal.cloned());
        self.notes.extend(notes.iter().cloned());
    }

    /// Counts one detailed response.
    pub(crate) fn add(&mut self, u: &Usage) {
        self.responses += 1;
        let t = &mut self.total;
        t.input_tokens = t.input_tokens.saturating_add(u.input_tokens);
        t.output_tokens = t.output_tokens.saturating_add(u.output_tokens);
        t.cached_input_tokens = t.cached_input_tokens.saturating_add(u.cached_input_tokens);
    }

    /// As `audit --json` shows it.
    pub(crate) fn json(&self) -> Value {
        let u = &self.total;
        json!({
            "responses": self.responses,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_input_tokens": u.cached_input_tokens,
            "refusals": self.refusals.iter().map(|r| json!({
                "turn": r.turn,
                "step": r.step,
                "reason": r.reason,
                "explanation": r.explanation,
            })).collect::<Vec<_>>(),
            "notes": self.notes.iter().map(|n| json!({
                "turn": n.turn,
                "step": n.step,
                "note": n.note,
            })).collect::<Vec<_>>(),
        })
    }

    /// The refused answers and the adapters' notes, a line each, for people.
    fn responses_text(&self) -> String {
        let mut text = format!("refused answers: {}\n", self.refusals.len());
        for r in &self.refusals {
            let said = match r.explanation.trim() {
                "" => String::new(),
                e => format!(": {}", one_line(e, 300)),
            };
            text.push_str(&format!(
                "  turn {} step {}: {}{said}\n",
                r.turn,
                r.step,
                one_line(&r.reason, 60)
            ));
        }
        for n in &self.notes {
            text.push_str(&format!(
                "note: turn {} step {}: {}\n",
                n.turn,
                n.step,
                one_line(&n.note, 300)
            ));
        }
        text
    }

    fn text(&self) -> String {
        if self.responses == 0 {
            return "usage: not journaled (no llm/response-detail)\n".to_owned();
        }
        let responses = match self.responses {
            1 => "1 response".to_owned(),
            n => format!("{n} responses"),
        };
        let u = &self.total;
        format!(
            "usage: {} input tokens ({} cached), {} output tokens, over {responses}\n",
            u.input_tokens, u.cached_input_tokens, u.output_tokens
        )
    }
}

/// Writes an audit as it goes: the head, one call at a time, then the totals.
#[derive(Debug)]
pub(crate) struct AuditWriter<W: Write> {
    out: W,
    json: bool,
    journal: String,
    /// The session's sandbox, for the JSON's `sandbox` (the table has it in its head).
    sandbox: Option<SandboxBound>,
    calls: usize,
    totals: Totals,
}

impl<W: Write> AuditWriter<W> {
    /// Writes the head: for people the title, the session's sandbox (when the journal has
    /// one) and the columns; in JSON the object's opening up to its `calls` array (its first
    /// key).
    pub(crate) fn new(
        mut out: W,
        journal: &str,
        json: bool,
        sandbox: Option<&SandboxBound>,
    ) -> std::io::Result<AuditWriter<W>> {
        if json {
            out.write_all(b"{\"calls\":[")?;
        } else {
            writeln!(out, "audit of {journal}")?;
            if let Some(b) = sandbox {
                // On its line whatever the journal's roots and mechanism hold.
                writeln!(out, "{}", one_line(&crate::bound::session_words(b), 2000))?;
            }
            writeln!(
                out,
                "{:>4} {:>4} {:<10} {:<24} {:<32} {:<34} {:<36} {:<22} {:>7}  effects",
                "turn",
                "step",
                "call",
                "tool",
                "source",
                "arguments",
                "decision",
                "state / class",
                "ms"
            )?;
        }
        Ok(AuditWriter {
            out,
            json,
            journal: journal.to_owned(),
            sandbox: sandbox.cloned(),
            calls: 0,
            totals: Totals::default(),
        })
    }

    /// Writes one call, in the order the calls are reported.
    pub(crate) fn call(&mut self, call: AuditCall<'_>) -> std::io::Result<()> {
        self.totals.add(call.report, call.facts);
        if self.json {
            if self.calls > 0 {
                self.out.write_all(b",")?;
            }
            serde_json::to_writer(&mut self.out, &call_json(call))?;
        } else {
            self.out.write_all(call_text(call).as_bytes())?;
        }
        self.calls += 1;
        Ok(())
    }

    /// Writes the totals and the usage (and for an imported journal what reading its source
    /// found), and hands the output back (flushed).
    pub(crate) fn finish(
        mut self,
        usage: &UsageTotals,
        imported: Option<&events::event::ImportSource>,
    ) -> std::io::Result<W> {
        let t = &self.totals;
        if self.json {
            // `imported`, `journal`, `sandbox`, `totals` and `usage` sort after `calls`.
            self.out.write_all(b"]")?;
            if let Some(source) = imported {
                self.out.write_all(b",\"imported\":")?;
                serde_json::to_writer(&mut self.out, &imported_json(source))?;
            }
            self.out.write_all(b",\"journal\":")?;
            serde_json::to_writer(&mut self.out, &self.journal)?;
            self.out.write_all(b",\"sandbox\":")?;
            let sandbox = self.sandbox.as_ref().map(crate::bound::json);
            serde_json::to_writer(&mut self.out, &sandbox)?;
            self.out.write_all(b",\"totals\":")?;
            serde_json::to_writer(&mut self.out, &t.json())?;
            self.out.write_all(b",\"usage\":")?;
            serde_json::to_writer(&mut self.out, &usage.json())?;
            self.out.write_all(b"}\n")?;
        } else {
            writeln!(
                self.out,
                "totals: {} calls, {} ok, {} errors, {} not started, {} outcome unknown, {} side effects",
                t.calls, t.ok, t.errors, t.not_started, t.outcome_unknown, t.side_effects
            )?;
            self.out.write_all(usage.text().as_bytes())?;
            self.out.write_all(usage.responses_text().as_bytes())?;
            if let Some(source) = imported {
                self.out.write_all(imported_text(source).as_bytes())?;
            }
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// An imported journal's source, for `audit --json`: the file, and every line kept out and
/// every note with where it was.
pub(crate) fn imported_json(source: &events::event::ImportSource) -> Value {
    json!({
        "agent": source.agent,
        "file": source.file,
        "size_bytes": source.size_bytes,
        "sha256": source.sha256,
        "source_session_id": source.source_session_id,
        "damaged": source.damaged.iter().map(|d| json!({
            "line": d.line,
            "offset": d.offset,
            "bytes": d.bytes,
            "reason": d.reason,
            "followed": d.followed,
        })).collect::<Vec<_>>(),
        "notes": source.notes.iter().map(|n| json!({
            "line": n.line,
            "offset": n.offset,
            "text": n.text,
        })).collect::<Vec<_>>(),
    })
}

/// An imported journal's source, for people: the file, then what reading it found.
fn imported_text(source: &events::event::ImportSource) -> String {
    let mut text = format!(
        "imported from {}'s session file {} ({} bytes, sha256 {}): {} lines kept out, {} notes\n",
        source.agent,
        source.file,
        source.size_bytes,
        short_hash(&source.sha256),
        source.damaged.len(),
        source.notes.len()
    );
    for line in crate::import_journal::source_lines(&source.damaged, &source.notes) {
        text.push_str("  ");
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// What the first reading of an audit found: the journal whole, and what the second needs.
#[derive(Debug)]
pub struct FirstReading {
    /// The streamed recovery, read only (its notes are for stderr).
    pub streamed: Streamed,
    moved: std::collections::HashMap<events::event::CallRef, CallFacts>,
    /// The workspace the second reading probes too (`--probe`).
    prober: Option<std::sync::Arc<crate::probe::Prober>>,
    /// The session's sandbox: the latest `session/sandbox`.
    pub(crate) sandbox: Option<SandboxBound>,
}

/// The first reading: the journal checked whole and read only, as `audit` read it before it
/// streamed (the same errors, before anything is printed).
pub fn first_reading(
    at: impl Into<crate::Place>,
    progress: &dyn Fn(u64, u64),
) -> Result<FirstReading, RecoverError> {
    first_reading_probing(at, progress, None)
}

/// [`first_reading`], the `TOOL_OUTCOME_UNKNOWN` calls' reports probing `workspace` (read
/// only, as `classify --probe` does), in both readings.
pub fn first_reading_probing(
    at: impl Into<crate::Place>,
    progress: &dyn Fn(u64, u64),
    workspace: Option<&std::path::Path>,
) -> Result<FirstReading, RecoverError> {
    let prober = workspace
        .map(crate::probe::Prober::open)
        .transpose()?
        .map(std::sync::Arc::new);
    let mut sandbox = None;
    let (streamed, mut classifier) = crate::Recovery::of(at)
        .progress(progress)
        .probe(workspace)
        .stream_observing(&mut std::io::sink(), Mode::Audit, &mut |c| {
            for notice in c.take_notices() {
                if let Notice::Sandbox(bound) = notice {
                    sandbox = Some(bound);
                }
            }
        })?;
    Ok(FirstReading {
        streamed,
        moved: classifier.moved_facts(),
        prober,
        sandbox,
    })
}

/// What an audit's second reading hands out, in journal order: every notice (the tools, the
/// model, each step, each moment), and each call once it is final. `audit`'s table and JSON
/// are one sink, `audit --html` another.
pub(crate) trait AuditSink {
    /// Something noticed besides the calls.
    fn notice(&mut self, notice: Notice) -> std::io::Result<()>;
    /// A call, final.
    fn call(&mut self, call: AuditCall<'_>) -> std::io::Result<()>;
}

/// The second reading: the journal read again as the first reading found it, each notice and
/// each final call handed to `sink` as it comes. An error of the sink stops it.
pub(crate) fn reread_into(
    at: impl Into<crate::Place>,
    first: FirstReading,
    sink: &mut dyn AuditSink,
) -> Result<(), RereadError> {
    let mut tools: Vec<ToolDescriptor> = Vec::new();
    let mut classifier = Classifier::with_mode(first.streamed.live, first.prober, Mode::Audit);
    classifier.set_moved_facts(first.moved);
    crate::Recovery::of(at).reread(
        first.streamed.records,
        classifier,
        &mut |c: &mut Classifier| {
            for notice in c.take_notices() {
                if let Notice::Opened(opened) = &notice {
                    tools.clone_from(opened);
                }
                sink.notice(notice).map_err(RereadError::Output)?;
            }
            for (report, facts) in c.take_ready_with_facts() {
                sink.call(AuditCall {
                    report: &report,
                    facts: facts.as_ref(),
                    tool: descriptor(&tools, &report.tool),
                })
                .map_err(RereadError::Output)?;
            }
            Ok(())
        },
    )
}

/// The table (or JSON) as a sink: the calls, the responses' usage for the totals, and an
/// imported journal's source.
struct TableSink<W: Write> {
    writer: AuditWriter<W>,
    usage: UsageTotals,
    imported: Option<events::event::ImportSource>,
}

impl<W: Write> AuditSink for TableSink<W> {
    fn notice(&mut self, notice: Notice) -> std::io::Result<()> {
        match notice {
            Notice::Step(step) => self.usage.step(&step),
            Notice::Imported(source) => self.imported = Some(source),
            _ => {}
        }
        Ok(())
    }

    fn call(&mut self, call: AuditCall<'_>) -> std::io::Result<()> {
        self.writer.call(call)
    }
}

/// The second reading: the audit written to `out` as the journal is read (`name` is the
/// journal as the head names it). An error writing stops it.
pub fn stream<W: Write>(
    at: impl Into<crate::Place>,
    first: FirstReading,
    name: &str,
    json: bool,
    out: W,
) -> Result<W, RereadError> {
    let sandbox = first.sandbox.clone();
    let mut sink = TableSink {
        writer: AuditWriter::new(out, name, json, sandbox.as_ref()).map_err(RereadError::Output)?,
        usage: UsageTotals::default(),
        imported: None,
    };
    reread_into(at, first, &mut sink)?;
    let TableSink {
        writer,
        usage,
        imported,
    } = sink;
    (writer.finish(&usage, imported.as_ref())).map_err(RereadError::Output)
}

/// A hash's first 12 characters, for a table: cut by characters, since a journal written by
/// hand may hold anything there.
fn short_hash(h: &str) -> String {
    h.chars().take(12).collect()
}
