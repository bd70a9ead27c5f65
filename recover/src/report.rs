//! What `recover` prints: the classification (`classify`) and the audit (`audit`, with the
//! session's token usage), for people and, with `--json`, for programs (the shape of
//! `classify --json` is DESIGN.md §10's).
//!
//! The audit shows each call's question (the built-in `ask`'s, or a yes/no approval's) with
//! what became of it: its text, options, whether several may be chosen and whether the person
//! may answer in their own words, its state (pending, answered, declined, expired, cancelled)
//! and the answer or the reason. A call is asked at most once by the runtime, so the last
//! question is the one shown. It also shows each call's idempotency key (`-`, or `null`, for a
//! call that never started or a journal from before event schema 5) and the evidence its last
//! `started` recorded, with the process groups it started.

use crate::classify::{Analysis, CallReport};
use runtime::event::{
    Approval, AskAnswer, Evidence, Reply, SideEffect, ToolDescriptor, ToolSource,
};
use runtime::model::Usage;
use runtime::replay::AskRecord;
use serde_json::{json, Value};

/// `resources` as one list: `write:PATH`, `read:PATH`, `intent:TEXT`.
fn resource_list(c: &CallReport) -> Vec<String> {
    let r = &c.resources;
    r.writes
        .iter()
        .map(|p| format!("write:{p}"))
        .chain(r.reads.iter().map(|p| format!("read:{p}")))
        .chain(r.intents.iter().map(|i| format!("intent:{i}")))
        .collect()
}

fn classification(c: &CallReport) -> Value {
    match c.classification {
        Some(k) => serde_json::to_value(k).expect("an enum of unit variants serializes"),
        None => Value::Null,
    }
}

/// What `--salvage` skipped, as JSON.
pub fn salvage_json(s: &crate::session::Salvage) -> Value {
    json!({
        "skipped": s.skipped.iter().map(|k| json!({
            "segment": k.position.segment,
            "offset": k.position.offset,
            "bytes": k.bytes,
            "what": k.what,
        })).collect::<Vec<_>>(),
        "skipped_events": s.skipped_events.iter().map(|(seq, p, what)| json!({
            "seq": seq, "segment": p.segment, "offset": p.offset, "what": what,
        })).collect::<Vec<_>>(),
        "affected_calls": s.affected_calls.iter().map(|c| json!({
            "call_id": c.call_id, "turn": c.turn, "step": c.step,
        })).collect::<Vec<_>>(),
    })
}

/// What `--salvage` skipped, for people.
pub fn salvage_text(s: &crate::session::Salvage) -> String {
    let mut out = String::from(
        "SALVAGED: this journal is corrupt; these parts were passed over (nothing was written):\n",
    );
    for k in &s.skipped {
        out.push_str(&format!(
            "  skipped {} bytes at {}: {}\n",
            k.bytes, k.position, k.what
        ));
    }
    for (seq, p, what) in &s.skipped_events {
        out.push_str(&format!("  skipped record seq {seq} at {p}: {what}\n"));
    }
    let calls: Vec<String> = s.affected_calls.iter().map(|c| c.to_string()).collect();
    out.push_str(&format!(
        "  calls affected: {}\n",
        if calls.is_empty() {
            "none".to_owned()
        } else {
            calls.join(", ")
        }
    ));
    out
}

/// `classify --json`.
pub fn classify_json(journal: &str, a: &Analysis) -> Value {
    json!({
        "journal": journal,
        "end": {
            "kind": if a.end.torn { "torn_tail" } else { "clean" },
            "dropped_bytes": a.end.dropped_bytes,
        },
        "live": a.live,
        "calls": a.calls.iter().map(|c| {
            let mut call = json!({
                "call_id": c.call.call_id,
                "tool": c.tool,
                "turn": c.call.turn,
                "step": c.call.step,
                "state": c.state.as_str(),
                "classification": classification(c),
                "resources": resource_list(c),
            });
            if let Some(p) = &c.probe {
                // Cannot fail: a probe is strings, numbers and a unit enum.
                call["probe"] = serde_json::to_value(p).expect("a probe serializes");
            }
            call
        }).collect::<Vec<_>>(),
    })
}

/// The call's idempotency key, as its last `started` recorded it (schema 5).
fn idempotency_key<'a>(a: &'a Analysis, c: &CallReport) -> Option<&'a str> {
    a.replay.call(&c.call)?.idempotency_key.as_deref()
}

/// What the call recorded for a probe: its last `started`'s evidence, then the process groups
/// it started, as `audit --json` shows them.
fn evidence_json(a: &Analysis, c: &CallReport) -> Vec<Value> {
    let Some(r) = a.replay.call(&c.call) else {
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
fn evidence_text(a: &Analysis, c: &CallReport) -> Vec<String> {
    let Some(r) = a.replay.call(&c.call) else {
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
    });
    let groups = r
        .processes
        .iter()
        .map(|p| format!("process group {}", p.pgid));
    files.chain(groups).collect()
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_owned()
    } else {
        s.chars().take(max_chars).collect::<String>() + "…"
    }
}

/// A text on one line (control characters as spaces), cut to `max_chars`: for the table.
fn one_line(s: &str, max_chars: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate(&flat, max_chars)
}

/// What became of a question: `pending`, `answered`, `declined`, `expired` or `cancelled`. A
/// yes/no approval's "no" is an answer too (`answer` says which).
fn question_state(ask: &AskRecord) -> &'static str {
    match ask.answer {
        None => "pending",
        Some(
            AskAnswer::Answered
            | AskAnswer::AllowedOnce
            | AskAnswer::AllowedAlways
            | AskAnswer::Denied,
        ) => "answered",
        Some(AskAnswer::Declined) => "declined",
        Some(AskAnswer::Expired) => "expired",
        Some(AskAnswer::Cancelled) => "cancelled",
    }
}

/// A yes/no approval's answer, as `--json` spells it (`allowed_once`, `denied`, ...).
fn approval_answer(answer: AskAnswer) -> Value {
    serde_json::to_value(answer).expect("an enum of unit variants serializes")
}

/// Why a question has no answer: the person's words when declining (if any), the withdrawal's
/// reason, or the expiry.
fn question_reason(ask: &AskRecord) -> Option<String> {
    match ask.answer? {
        AskAnswer::Declined => match &ask.reply {
            Some(Reply::Declined { text }) => text.clone(),
            _ => None,
        },
        AskAnswer::Expired => Some("nobody answered in time".into()),
        AskAnswer::Cancelled => ask.cancel_reason.clone(),
        _ => None,
    }
}

/// The call's last question, as `audit --json` shows it; `None` for a call never asked about.
fn question_json(a: &Analysis, c: &CallReport) -> Option<Value> {
    let ask = a.replay.call(&c.call)?.asks.last()?;
    let state = question_state(ask);
    let reason = question_reason(ask);
    Some(match &ask.structured {
        Some(q) => json!({
            "kind": "question",
            "text": q.text,
            "options": q.options.iter().map(|o| json!({
                "label": o.label,
                "description": o.description,
            })).collect::<Vec<_>>(),
            "multiple": q.multiple,
            "free_text": q.free_text,
            "plan_option": q.plan_option,
            "state": state,
            "answer": match &ask.reply {
                Some(Reply::Answered(answer)) => json!({
                    "choice": answer.choice,
                    "text": answer.text,
                }),
                _ => Value::Null,
            },
            "reason": reason,
        }),
        None => json!({
            "kind": "approval",
            "text": ask.question,
            "state": state,
            "answer": match ask.answer {
                Some(answer @ (AskAnswer::AllowedOnce | AskAnswer::AllowedAlways | AskAnswer::Denied)) => {
                    approval_answer(answer)
                }
                _ => Value::Null,
            },
            "reason": reason,
        }),
    })
}

/// The chosen labels, quoted, and the person's own words: `"blue", "red" + "their words"`.
fn answer_text(choice: &[String], text: Option<&str>, max_chars: usize) -> String {
    let mut parts: Vec<String> = choice
        .iter()
        .map(|l| format!("\"{}\"", one_line(l, max_chars)))
        .collect();
    if let Some(t) = text.filter(|t| !t.trim().is_empty()) {
        parts.push(format!("wrote \"{}\"", one_line(t, max_chars)));
    }
    parts.join(", ")
}

/// What became of the question, for the decision column: `answered "label"`, `declined`,
/// `expired`, `cancelled (why)`, `pending`, or a yes/no approval's `allowed once`.
fn question_summary(ask: &AskRecord) -> String {
    match (ask.answer, &ask.reply) {
        (Some(AskAnswer::Answered), Some(Reply::Answered(answer))) => format!(
            "answered {}",
            answer_text(&answer.choice, answer.text.as_deref(), 40)
        ),
        (Some(AskAnswer::AllowedOnce), _) => "allowed once".into(),
        (Some(AskAnswer::AllowedAlways), _) => "allowed always".into(),
        (Some(AskAnswer::Denied), _) => "denied".into(),
        // The reason is on the line below: the column is narrow.
        _ => question_state(ask).into(),
    }
}

/// The lines under a call's row that show its question and what became of it.
fn question_lines(ask: &AskRecord) -> String {
    const INDENT: &str = "          ";
    let mut out = String::new();
    match &ask.structured {
        Some(q) => {
            out.push_str(&format!("{INDENT}question: {}\n", one_line(&q.text, 200)));
            if !q.options.is_empty() {
                let how = match (q.multiple, q.free_text) {
                    (false, false) => "choose one",
                    (false, true) => "choose one, or own words",
                    (true, false) => "choose any",
                    (true, true) => "choose any, and/or own words",
                };
                let options: Vec<String> = q
                    .options
                    .iter()
                    .map(|o| {
                        let plan = if q.plan_option.as_deref() == Some(o.label.as_str()) {
                            " [approves the plan]"
                        } else {
                            ""
                        };
                        if o.description.is_empty() {
                            format!("{}{plan}", one_line(&o.label, 100))
                        } else {
                            format!(
                                "{} ({}){plan}",
                                one_line(&o.label, 100),
                                one_line(&o.description, 80)
                            )
                        }
                    })
                    .collect();
                out.push_str(&format!(
                    "{INDENT}  options ({how}): {}\n",
                    options.join(" | ")
                ));
            }
        }
        None => out.push_str(&format!(
            "{INDENT}question (approval): {}\n",
            one_line(&ask.question, 200)
        )),
    }
    let state = question_state(ask);
    let outcome = match (&ask.reply, question_reason(ask)) {
        (Some(Reply::Answered(answer)), _) => format!(
            "answered: {}",
            answer_text(&answer.choice, answer.text.as_deref(), 200)
        ),
        (_, Some(reason)) => format!("{state}: {}", one_line(&reason, 200)),
        _ => match ask.answer {
            Some(AskAnswer::AllowedOnce | AskAnswer::AllowedAlways | AskAnswer::Denied) => {
                format!("answered: {}", question_summary(ask))
            }
            _ => state.to_owned(),
        },
    };
    out.push_str(&format!("{INDENT}  {outcome}\n"));
    out
}

fn decision(a: &Analysis, c: &CallReport) -> String {
    let Some(r) = a.replay.call(&c.call) else {
        return "never received".into();
    };
    if let Some(ask) = r.asks.last() {
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

fn effects(a: &Analysis, c: &CallReport) -> Vec<String> {
    let Some(outcome) = a.replay.call(&c.call).and_then(|r| r.outcome.as_ref()) else {
        return Vec::new();
    };
    outcome
        .side_effects
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
fn descriptor<'a>(a: &'a Analysis, c: &CallReport) -> Option<&'a ToolDescriptor> {
    a.replay
        .open
        .as_ref()?
        .tools
        .iter()
        .find(|d| d.name == c.tool)
}

/// Where the tool came from, for people: `built-in 1`, `mcp fs (secure-filesystem-server 0.2.0)`.
fn source_text(a: &Analysis, c: &CallReport) -> String {
    match descriptor(a, c) {
        Some(d) if d.source == ToolSource::BuiltIn => format!("built-in {}", d.version),
        Some(d) => d.source.to_string(),
        None => "(no such tool)".to_owned(),
    }
}

fn source_json(a: &Analysis, c: &CallReport) -> Value {
    let Some(d) = descriptor(a, c) else {
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

fn timing_ms(a: &Analysis, c: &CallReport) -> Option<u64> {
    let r = a.replay.call(&c.call)?;
    r.outcome.as_ref().map(|o| o.duration_ms)
}

/// How many responses the journal details (`llm/response-detail`), and their token counts
/// added up.
fn usage(a: &Analysis) -> (usize, Usage) {
    let details = a
        .replay
        .turns
        .iter()
        .flat_map(|t| t.steps.iter())
        .filter_map(|s| s.detail.as_ref());
    let mut responses = 0;
    let mut total = Usage::default();
    for d in details {
        responses += 1;
        total.input_tokens = total.input_tokens.saturating_add(d.usage.input_tokens);
        total.output_tokens = total.output_tokens.saturating_add(d.usage.output_tokens);
        total.cached_input_tokens = total
            .cached_input_tokens
            .saturating_add(d.usage.cached_input_tokens);
    }
    (responses, total)
}

fn usage_json(a: &Analysis) -> Value {
    let (responses, u) = usage(a);
    json!({
        "responses": responses,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cached_input_tokens": u.cached_input_tokens,
    })
}

/// `audit --json`: one object per call, totals, and the token usage of the session's
/// responses.
pub fn audit_json(journal: &str, a: &Analysis) -> Value {
    let calls: Vec<Value> = a
        .calls
        .iter()
        .map(|c| {
            json!({
                "call_id": c.call.call_id,
                "turn": c.call.turn,
                "step": c.call.step,
                "tool": c.tool,
                "source": source_json(a, c),
                "arguments": c.raw_arguments,
                "decision": decision(a, c),
                "state": c.state.as_str(),
                "classification": classification(c),
                "result_code": c.result.code.map(|k| k.as_str()),
                "side_effects": effects(a, c),
                "duration_ms": timing_ms(a, c),
                "resources": resource_list(c),
                "question": question_json(a, c),
                "idempotency_key": idempotency_key(a, c),
                "evidence": evidence_json(a, c),
            })
        })
        .collect();
    json!({
        "journal": journal,
        "calls": calls,
        "totals": totals(a),
        "usage": usage_json(a),
    })
}

fn totals(a: &Analysis) -> Value {
    let count = |f: &dyn Fn(&CallReport) -> bool| a.calls.iter().filter(|c| f(c)).count();
    json!({
        "calls": a.calls.len(),
        "ok": count(&|c| !c.result.is_error && !c.in_flight),
        "errors": count(&|c| c.result.is_error),
        "not_started": count(&|c| c.classification == Some(runtime::event::Classification::ToolNotStarted)),
        "outcome_unknown": count(&|c| c.classification == Some(runtime::event::Classification::ToolOutcomeUnknown)),
        "side_effects": a.calls.iter().map(|c| effects(a, c).len()).sum::<usize>(),
    })
}

/// `audit` for people.
pub fn audit_text(journal: &str, a: &Analysis) -> String {
    let mut out = format!("audit of {journal}\n");
    out.push_str(&format!(
        "{:>4} {:>4} {:<10} {:<24} {:<32} {:<34} {:<36} {:<22} {:>7}  effects\n",
        "turn", "step", "call", "tool", "source", "arguments", "decision", "state / class", "ms"
    ));
    for c in &a.calls {
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
        out.push_str(&format!(
            "{:>4} {:>4} {:<10} {:<24} {:<32} {:<34} {:<36} {:<22} {:>7}  {}\n",
            c.call.turn,
            c.call.step,
            truncate(&c.call.call_id, 10),
            truncate(&c.tool, 24),
            truncate(&source_text(a, c), 32),
            truncate(&c.raw_arguments, 34),
            truncate(&decision(a, c), 36),
            class,
            timing_ms(a, c)
                .map(|m| m.to_string())
                .unwrap_or_else(|| "-".into()),
            effects(a, c).join("; ")
        ));
        let evidence = evidence_text(a, c);
        out.push_str(&format!(
            "          key: {}{}\n",
            idempotency_key(a, c).unwrap_or("-"),
            if evidence.is_empty() {
                String::new()
            } else {
                format!("; evidence: {}", evidence.join("; "))
            }
        ));
        if let Some(ask) = a.replay.call(&c.call).and_then(|r| r.asks.last()) {
            out.push_str(&question_lines(ask));
        }
    }
    let t = totals(a);
    out.push_str(&format!(
        "totals: {} calls, {} ok, {} errors, {} not started, {} outcome unknown, {} side effects\n",
        t["calls"], t["ok"], t["errors"], t["not_started"], t["outcome_unknown"], t["side_effects"]
    ));
    let (responses, u) = usage(a);
    if responses == 0 {
        out.push_str("usage: not journaled (no llm/response-detail)\n");
    } else {
        let responses = match responses {
            1 => "1 response".to_owned(),
            n => format!("{n} responses"),
        };
        out.push_str(&format!(
            "usage: {} input tokens ({} cached), {} output tokens, over {responses}\n",
            u.input_tokens, u.cached_input_tokens, u.output_tokens
        ));
    }
    out
}

/// A hash's first 12 characters, for a table: cut by characters, since a journal written by
/// hand may hold anything there.
fn short_hash(h: &str) -> String {
    h.chars().take(12).collect()
}
