//! FORMAT.md's *Structural rules*, by the document: its table read from the text, a checker of
//! each rule written from the table's words over events the independent reader decoded, and a
//! forged journal breaking each rule. Replay and the document's checker must refuse each at the
//! same record naming the same rule, and accept the journals the forgeries start from; the
//! table's rules must be exactly replay's (`Rule::ALL`). So a rule added to replay without the
//! document, or to the document without replay, fails here.

use super::{events, payloads_of, Layout};
use runtime::event::*;
use runtime::replay::{replay_storage, Rule};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The verdict every row gives (FORMAT.md, *Structural rules*).
const VERDICT: &str = "inconsistent at that record";

/// The table's rows: (identifier, verdict).
fn table() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMAT.md"))
        .expect("docs/FORMAT.md");
    let section = doc
        .split("### Structural rules")
        .nth(1)
        .expect("a *Structural rules* section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| rule |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 3, "a row of three cells: {l}");
            (cells[0].trim_matches('`').to_owned(), cells[2].to_owned())
        })
        .collect()
}

#[test]
fn the_table_is_every_rule_replay_enforces_each_with_its_verdict() {
    let rows = table();
    let documented: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    let enforced: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
    assert_eq!(
        documented, enforced,
        "FORMAT.md's table against replay's rules"
    );
    for (id, verdict) in &rows {
        assert_eq!(verdict, VERDICT, "{id}");
    }
}

// ---- The document's checker ----

/// A step as the checker follows it.
#[derive(Default)]
struct Step {
    turn: u64,
    step: u64,
    tools: bool,
    response: Option<Value>,
    attempts: u64,
    /// (attempt, kind) of each failed attempt.
    failed: Vec<(u64, String)>,
    detail: bool,
    refusal: bool,
    received: u64,
}

/// A question of a call: the `ask` tool's own, and its answer once it has one.
struct Ask {
    structured: bool,
    answer: Option<String>,
}

struct Call {
    state: &'static str,
    latest: u64,
    attempt: u64,
    asks: Vec<Ask>,
    rerun: bool,
}

/// The rules of the table, applied record by record to the decoded events.
#[derive(Default)]
struct Doc {
    opened: bool,
    closed: bool,
    session_id: String,
    turns: u64,
    open_turn: Option<u64>,
    steps: u64,
    step: Option<Step>,
    calls: BTreeMap<(u64, u64, String), Call>,
    previous: Option<&'static str>,
    imported: bool,
}

type Check = Result<(), &'static str>;

fn n(v: &Value) -> u64 {
    v.as_u64().expect("a number")
}

fn key(call: &Value) -> (u64, u64, String) {
    (
        n(&call["turn"]),
        n(&call["step"]),
        call["call_id"].as_str().expect("a call id").to_owned(),
    )
}

/// FORMAT.md, *Idempotency keys*.
fn idempotency_key(session_id: &str, call: &Value) -> String {
    let (turn, step, id) = key(call);
    let mut h = Sha256::new();
    h.update((session_id.len() as u64).to_le_bytes());
    h.update(session_id.as_bytes());
    h.update(turn.to_le_bytes());
    h.update(step.to_le_bytes());
    h.update((id.len() as u64).to_le_bytes());
    h.update(id.as_bytes());
    format!("tj1-{}", hex::encode(h.finalize()))
}

/// *Calls*: the state a change leads to from `from`, when the machine allows it.
fn allowed(from: &str, to: &str) -> bool {
    matches!(
        (from, to),
        ("received", "parsed" | "rejected" | "cancelled-before-start")
            | ("parsed", "approved" | "rejected" | "cancelled-before-start")
            | ("approved", "started" | "cancelled-before-start")
            | ("started", "started" | "settled")
            | (
                "settled" | "rejected" | "cancelled-before-start",
                "committed"
            )
    )
}

fn points_back(sources: &Value, latest: u64, seq: u64) -> bool {
    let sources: Vec<u64> = sources.as_array().expect("seqs").iter().map(n).collect();
    sources.contains(&latest) && sources.iter().all(|&s| s < seq)
}

impl Doc {
    /// The open turn, when `turn` names it.
    fn turn(&self, turn: u64) -> Check {
        (self.open_turn == Some(turn))
            .then_some(())
            .ok_or("names-open-turn")
    }

    /// The open step, when (`turn`, `step`) names it.
    fn step(&mut self, turn: u64, step: u64) -> Result<&mut Step, &'static str> {
        self.turn(turn)?;
        match &mut self.step {
            Some(s) if s.step == step => Ok(s),
            _ => Err("names-open-step"),
        }
    }

    fn step_of(&mut self, f: &Value) -> Result<&mut Step, &'static str> {
        self.step(n(&f["turn"]), n(&f["step"]))
    }

    fn call(&mut self, call: &Value) -> Result<&mut Call, &'static str> {
        self.calls.get_mut(&key(call)).ok_or("call-was-received")
    }

    fn check(&mut self, seq: u64, name: &'static str, f: &Value) -> Check {
        if !self.opened && name != "session/open" {
            return Err("first-is-session-open");
        }
        match (self.closed, name) {
            (true, "session/reopen") => self.closed = false,
            (true, _) => return Err("nothing-after-close"),
            (false, "session/reopen") => return Err("reopen-after-close"),
            _ => {}
        }
        let previous = self.previous.replace(name);
        match name {
            "session/open" => {
                if self.opened {
                    return Err("one-session-open");
                }
                self.opened = true;
                self.session_id = f["session_id"].as_str().unwrap_or_default().to_owned();
            }
            "session/close" => {
                if self.open_turn.is_some() {
                    return Err("close-with-no-open-turn");
                }
                self.closed = true;
            }
            "turn/start" => {
                if self.open_turn.is_some() {
                    return Err("turn-start-with-no-open-turn");
                }
                if n(&f["turn"]) != self.turns + 1 {
                    return Err("turn-numbered-next");
                }
                self.turns += 1;
                (self.open_turn, self.steps) = (Some(self.turns), 0);
            }
            "turn/end" => {
                self.turn(n(&f["turn"]))?;
                if self.step.is_some() {
                    return Err("turn-end-with-no-open-step");
                }
                self.open_turn = None;
            }
            "step/start" => {
                self.turn(n(&f["turn"]))?;
                if self.step.is_some() {
                    return Err("step-start-with-no-open-step");
                }
                if n(&f["step"]) != self.steps + 1 {
                    return Err("step-numbered-next");
                }
                self.steps += 1;
                self.step = Some(Step {
                    turn: n(&f["turn"]),
                    step: self.steps,
                    ..Step::default()
                });
            }
            "step/end" => {
                self.step_of(f)?;
                self.step = None;
            }
            _ => return self.check_step(seq, name, f, previous),
        }
        Ok(())
    }

    /// The model's side of a step.
    fn check_step(
        &mut self,
        seq: u64,
        name: &'static str,
        f: &Value,
        previous: Option<&str>,
    ) -> Check {
        match name {
            "step/tools" => {
                let s = self.step_of(f)?;
                if s.tools || s.response.is_some() {
                    return Err("step-tools-once");
                }
                s.tools = true;
            }
            "llm/response" => {
                let s = self.step_of(f)?;
                if s.response.is_some() {
                    return Err("one-response");
                }
                if s.attempts > 0 && s.failed.last().is_some_and(|f| f.0 == s.attempts) {
                    return Err("response-of-live-attempt");
                }
                s.response = Some(f["response"].clone());
            }
            "llm/request" => {
                let s = self.step_of(f)?;
                if s.response.is_some() {
                    return Err("request-before-response");
                }
                if n(&f["attempt"]) != s.attempts + 1 {
                    return Err("attempt-numbered-next");
                }
                s.attempts += 1;
            }
            "llm/attempt-failed" => {
                let s = self.step_of(f)?;
                let attempt = n(&f["attempt"]);
                if s.response.is_some() {
                    return Err("failure-before-response");
                }
                if attempt != s.attempts || s.attempts == 0 {
                    return Err("failure-of-last-attempt");
                }
                if s.failed.last().is_some_and(|f| f.0 == attempt) {
                    return Err("attempt-fails-once");
                }
                s.failed
                    .push((attempt, f["kind"].as_str().unwrap_or("").to_owned()));
            }
            "llm/response-detail" => {
                let s = self.step_of(f)?;
                if s.response.is_none() || s.detail || n(&f["attempt"]) != s.attempts {
                    return Err("detail-after-response");
                }
                s.detail = true;
            }
            "llm/refusal" => {
                let s = self.step_of(f)?;
                let refused = s
                    .response
                    .as_ref()
                    .is_some_and(|r| r["stop_reason"] == "refusal");
                if !refused || s.refusal || s.received > 0 || n(&f["attempt"]) != s.attempts {
                    return Err("refusal-after-refused-response");
                }
                s.refusal = true;
            }
            "llm/note" => {
                let s = self.step_of(f)?;
                if s.response.is_none() || s.received > 0 || n(&f["attempt"]) != s.attempts {
                    return Err("note-after-response");
                }
            }
            "context/summary-requested" => {
                let turn = n(&f["turn"]);
                let s = self.step_of(f)?;
                if s.response.is_some() {
                    return Err("summary-before-response");
                }
                let through = n(&f["through_turn"]);
                if through == 0 || through >= turn {
                    return Err("summary-of-earlier-turns");
                }
            }
            "context/compacted" => {
                let (turn, step) = (n(&f["turn"]), n(&f["step"]));
                let s = self.step_of(f)?;
                if s.response.is_some() {
                    return Err("reduction-before-response");
                }
                if !(s.attempts == 0 || s.failed.last().is_some_and(|f| f.0 == s.attempts)) {
                    return Err("reduction-between-attempts");
                }
                let through = n(&f["through_turn"]);
                let kept = through < turn
                    && f["shortened"].as_array().expect("pairs").iter().all(|p| {
                        let (t, st) = (n(&p[0]), n(&p[1]));
                        t > through && (t < turn || (t == turn && st < step))
                    });
                if !kept {
                    return Err("reduction-keeps-its-turn");
                }
            }
            "context/calibrated" => {
                let attempt = n(&f["attempt"]);
                let s = self.step_of(f)?;
                let after_overflow = s.response.is_none()
                    && s.failed.last().is_some_and(|(a, kind)| {
                        *a == attempt && *a == s.attempts && kind == "context_overflow"
                    });
                if !after_overflow {
                    return Err("calibration-after-overflow");
                }
                if n(&f["estimate_tokens"]) == 0 || n(&f["provider_tokens"]) == 0 {
                    return Err("calibration-counts");
                }
            }
            _ => return self.check_call(seq, name, f, previous),
        }
        Ok(())
    }

    /// A call's events, and the records that bring calls in or close them.
    fn check_call(
        &mut self,
        seq: u64,
        name: &'static str,
        f: &Value,
        previous: Option<&str>,
    ) -> Check {
        match name {
            "received" => {
                let call = &f["call"];
                let s = self.step(n(&call["turn"]), n(&call["step"]))?;
                let Some(response) = &s.response else {
                    return Err("received-after-response");
                };
                let index = n(&f["index"]);
                let expected = &response["tool_calls"][index as usize];
                if expected.is_null()
                    || expected["call_id"] != call["call_id"]
                    || expected["name"] != f["tool"]
                    || expected["arguments"] != f["raw_arguments"]
                    || index != s.received
                {
                    return Err("received-matches-response");
                }
                let sources = f["source_seqs"].as_array().expect("seqs");
                if sources.is_empty() || sources.iter().any(|s| n(s) >= seq) {
                    return Err("received-points-back");
                }
                s.received += 1;
                self.calls.insert(key(call), Call::new(seq));
            }
            "parsed"
            | "approved"
            | "started"
            | "settled"
            | "committed"
            | "rejected"
            | "cancelled-before-start" => self.change(seq, name, f)?,
            "ask/pending" | "ask/question" => {
                let c = self.call(&f["call"])?;
                if c.state != "parsed" || c.pending() {
                    return Err("question-while-parsed");
                }
                c.asks.push(Ask {
                    structured: name == "ask/question",
                    answer: None,
                });
                c.latest = seq;
            }
            "ask/reply" => {
                let c = self.call(&f["call"])?;
                if !c
                    .asks
                    .last()
                    .is_some_and(|a| a.structured && a.answer.is_none())
                {
                    return Err("reply-to-pending-question");
                }
                let answer = if f["reply"].get("Answered").is_some() {
                    "answered"
                } else {
                    "declined"
                };
                c.answer(seq, answer)?;
            }
            "ask/answered" => {
                let c = self.call(&f["call"])?;
                let answer = f["answer"].as_str().expect("an answer");
                if c.asks.last().is_some_and(|a| a.structured)
                    || matches!(answer, "answered" | "declined")
                {
                    return Err("yes-no-answer-to-approval");
                }
                c.answer(seq, answer)?;
            }
            "ask/expired" => self.call(&f["call"])?.answer(seq, "expired")?,
            "ask/cancelled" => self.call(&f["call"])?.answer(seq, "cancelled")?,
            "call/process" if self.call(&f["call"])?.state != "started" => {
                return Err("process-while-started")
            }
            "plan/mode" if !f["call"].is_null() => {
                self.call(&f["call"])?;
            }
            "recovery" => self.recovery(seq, f)?,
            "recovery/rerun" => {
                if previous != Some("recovery") {
                    return Err("rerun-after-recovery");
                }
                let open = self.step.as_ref().map(|s| (s.turn, s.step));
                let calls = f["calls"].as_array().expect("calls");
                if open.is_none() || calls.is_empty() {
                    return Err("rerun-of-open-calls");
                }
                let safe = f["policy"] == "safe";
                for call in calls {
                    let (turn, step, _) = key(call);
                    let c = self.call(call).map_err(|_| "rerun-of-open-calls")?;
                    let fits = c.state == "approved" || (safe && c.state == "started");
                    if open != Some((turn, step)) || !fits || c.rerun {
                        return Err("rerun-of-open-calls");
                    }
                    (c.rerun, c.latest) = (true, seq);
                }
            }
            "import/source" => {
                if previous != Some("session/open") {
                    return Err("import-source-after-open");
                }
                self.imported = true;
            }
            "import/line" if !self.imported => return Err("import-events-imported"),
            "import/outcome" => {
                if !self.imported {
                    return Err("import-events-imported");
                }
                let c = self.call(&f["call"])?;
                if !points_back(&f["source_seqs"], c.latest, seq) {
                    return Err("call-points-back");
                }
                if c.state != "received" {
                    return Err("call-state-machine");
                }
                (c.state, c.latest) = ("committed", seq);
            }
            // Every other event has no rule of its own.
            _ => {}
        }
        Ok(())
    }

    /// A call's state change (*Calls*, *Questions*, *Idempotency keys*, *Evidence*).
    fn change(&mut self, seq: u64, name: &'static str, f: &Value) -> Check {
        let started_key = f.get("idempotency_key").map(|k| k.as_str().unwrap_or(""));
        if started_key.is_some_and(|k| k != idempotency_key(&self.session_id, &f["call"])) {
            return Err("started-key");
        }
        let c = self.call(&f["call"])?;
        if name == "approved" {
            let last = c.asks.last();
            let fits = match f["approval"].get("Asked") {
                Some(asked) => {
                    let answer = asked["answer"].as_str().expect("an answer");
                    last.and_then(|a| a.answer.as_deref()) == Some(answer)
                        && matches!(answer, "allowed_once" | "allowed_always" | "answered")
                }
                None => last.is_none_or(|a| a.answer.is_some() && !a.structured),
            };
            if !fits {
                return Err("approval-fits-question");
            }
        }
        let hex64 = |h: &Value| {
            h.as_str().is_some_and(|h| {
                h.len() == 64
                    && h.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
        };
        let evidence = f.get("evidence").and_then(Value::as_array);
        let bad_hash = evidence.into_iter().flatten().any(|e| {
            let e = &e["FileReplace"];
            !hex64(&e["after_sha256"])
                || !(e["before_sha256"].is_null() || hex64(&e["before_sha256"]))
        });
        if bad_hash {
            return Err("evidence-sha256");
        }
        if !points_back(&f["source_seqs"], c.latest, seq) {
            return Err("call-points-back");
        }
        let attempt = f.get("attempt").map_or(0, n);
        let next_attempt = match (c.state, name) {
            ("approved", "started") => attempt == 1,
            ("started", "started") => attempt == c.attempt + 1,
            _ => true,
        };
        if !allowed(c.state, name) || !next_attempt {
            return Err("call-state-machine");
        }
        if name == "started" {
            c.attempt = attempt;
        }
        (c.state, c.latest) = (name, seq);
        Ok(())
    }

    /// *Recovery*: the calls it commits (taking in those only the response names), then the
    /// step and turn it interrupts.
    fn recovery(&mut self, seq: u64, f: &Value) -> Check {
        for rc in f["calls"].as_array().expect("calls") {
            let call = &rc["call"];
            if self.call(call).is_err() {
                let s = self.step(n(&call["turn"]), n(&call["step"]))?;
                let answered = s.response.as_ref().is_some_and(|r| {
                    r["tool_calls"]
                        .as_array()
                        .expect("calls")
                        .iter()
                        .any(|m| m["call_id"] == call["call_id"])
                });
                if !answered {
                    return Err("recovery-of-answered-call");
                }
                self.calls.insert(key(call), Call::new(seq));
            }
            let c = self.call(call)?;
            if c.state == "committed" {
                return Err("recovery-of-uncommitted");
            }
            (c.state, c.latest) = ("committed", seq);
        }
        if let Some(pair) = f["interrupted_step"].as_array() {
            self.step(n(&pair[0]), n(&pair[1]))?;
            self.step = None;
        }
        if !f["interrupted_turn"].is_null() {
            self.turn(n(&f["interrupted_turn"]))?;
            self.open_turn = None;
        }
        Ok(())
    }
}

impl Call {
    fn new(seq: u64) -> Call {
        Call {
            state: "received",
            latest: seq,
            attempt: 0,
            asks: Vec::new(),
            rerun: false,
        }
    }

    fn pending(&self) -> bool {
        self.asks.last().is_some_and(|a| a.answer.is_none())
    }

    /// Ends the pending question with `answer`.
    fn answer(&mut self, seq: u64, answer: &str) -> Check {
        match self.asks.last_mut() {
            Some(a) if a.answer.is_none() => {
                a.answer = Some(answer.to_owned());
                self.latest = seq;
                Ok(())
            }
            _ => Err("answer-ends-pending-question"),
        }
    }
}

/// The document's verdict on `events`, written in format 2 and read back by the independent
/// reader: the seq and rule of the first record it refuses.
fn doc_verdict(events: &[Event]) -> Option<(u64, &'static str)> {
    let records: Vec<Record> = events
        .iter()
        .enumerate()
        .map(|(i, event)| Record {
            at_ms: i as u64,
            event: event.clone(),
        })
        .collect();
    let mut seen = BTreeSet::new();
    let mut doc = Doc::default();
    for (i, payload) in payloads_of(&records, 2).iter().enumerate() {
        let decoded = events::decode_record(payload, Layout::Varint, &mut seen)
            .unwrap_or_else(|e| panic!("record {}: {e:?}", i + 1));
        let seq = i as u64 + 1;
        if let Err(rule) = doc.check(seq, decoded.name, &decoded.fields) {
            return Some((seq, rule));
        }
    }
    None
}

/// Replay's verdict on `events`: the seq and rule of the record it refuses.
fn replay_verdict(events: &[Event]) -> Option<(u64, &'static str)> {
    let storage = tooljournal_journal::SimStorage::new();
    let (j, _) = tooljournal_journal::Journal::open(
        Arc::new(storage.clone()),
        tooljournal_journal::Options::default(),
    )
    .expect("open");
    for (i, event) in events.iter().enumerate() {
        j.append(&Record {
            at_ms: i as u64,
            event: event.clone(),
        })
        .expect("append");
    }
    j.close().expect("close");
    match replay_storage(Arc::new(storage), tooljournal_journal::Limits::default()) {
        Ok(_) => None,
        Err(e) => {
            let seq = match &e {
                runtime::replay::ReplayError::Inconsistent { seq, .. }
                | runtime::replay::ReplayError::IllegalTransition { seq, .. } => *seq,
                other => panic!("not a structural refusal: {other}"),
            };
            Some((seq, e.rule().expect("a rule named").id()))
        }
    }
}

mod forged;

#[test]
fn every_rule_is_refused_at_its_record_by_replay_and_by_the_document() {
    for (what, base) in [
        ("session", forged::session()),
        ("imported", forged::imported()),
    ] {
        assert_eq!(
            replay_verdict(&base),
            None,
            "{what}: replay accepts the base"
        );
        assert_eq!(
            doc_verdict(&base),
            None,
            "{what}: the document accepts the base"
        );
    }
    let forgeries = forged::forgeries();
    let forged_ids: BTreeSet<&str> = forgeries.iter().map(|f| f.0).collect();
    let table_ids: BTreeSet<String> = table().into_iter().map(|(id, _)| id).collect();
    assert_eq!(
        forged_ids,
        table_ids.iter().map(String::as_str).collect(),
        "a forgery for every rule of the table"
    );
    for (id, events, at) in &forgeries {
        let seq = *at as u64 + 1;
        assert_eq!(replay_verdict(events), Some((seq, *id)), "replay, {id}");
        assert_eq!(doc_verdict(events), Some((seq, *id)), "the document, {id}");
    }
}
