//! What `recover` prints: the classification (`classify`) and the audit (`audit`, with the
//! session's token usage), for people and, with `--json`, for programs (the shape of
//! `classify --json` is DESIGN.md §10's).
//!
//! The audit's own module is [`crate::audit`]; [`audit_json`] and [`audit_text`] say it of a
//! whole [`Analysis`].

use crate::audit::{call_json, descriptor, AuditCall, AuditWriter, Totals, UsageTotals};
use crate::call_fields::{classification, resource_list};
use crate::classify::{Analysis, CallReport};
use crate::stream::CallFacts;
use serde_json::{json, Value};

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

/// What `--salvage` skipped, for people; a journal with nothing to pass over (clean, or only
/// torn) is said to be so, never called corrupt.
pub fn salvage_text(s: &crate::session::Salvage) -> String {
    if !s.passed_over() {
        return "salvage: nothing was passed over: the journal has no corruption (nothing was \
                written)\n"
            .to_owned();
    }
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
                #[allow(clippy::expect_used)]
                let probe = serde_json::to_value(p).expect("a probe serializes");
                call["probe"] = probe;
            }
            if let Some(b) = &c.sandbox {
                call["bound"] = json!(b.in_words());
                call["sandbox"] = crate::bound::json(b);
            }
            call
        }).collect::<Vec<_>>(),
    })
}

/// Each call of `a` as the audit shows it, in order, with its facts.
fn audit_calls(a: &Analysis) -> impl Iterator<Item = (&CallReport, Option<CallFacts>)> {
    a.calls
        .iter()
        .map(|c| (c, a.replay.call(&c.call).map(CallFacts::of)))
}

/// The tools `session/open` names.
fn opened_tools(a: &Analysis) -> &[events::event::ToolDescriptor] {
    a.replay.open.as_ref().map_or(&[], |o| o.tools.as_slice())
}

/// The token usage of the session's detailed responses.
fn usage(a: &Analysis) -> UsageTotals {
    let mut usage = UsageTotals::default();
    for s in a.replay.turns.iter().flat_map(|t| t.steps.iter()) {
        usage.response(s.detail.as_ref(), s.refusal.as_ref(), &s.notes);
    }
    usage
}

/// `audit --json`: one object per call, totals, and the token usage of the session's
/// responses.
pub fn audit_json(journal: &str, a: &Analysis) -> Value {
    let tools = opened_tools(a);
    let mut totals = Totals::default();
    let calls: Vec<Value> = audit_calls(a)
        .map(|(c, f)| {
            totals.add(c, f.as_ref());
            call_json(AuditCall {
                report: c,
                facts: f.as_ref(),
                tool: descriptor(tools, &c.tool),
            })
        })
        .collect();
    let mut audit = json!({
        "journal": journal,
        "sandbox": a.replay.sandbox.as_ref().map(crate::bound::json),
        "calls": calls,
        "totals": totals.json(),
        "usage": usage(a).json(),
    });
    if let Some(source) = &a.replay.imported {
        audit["imported"] = crate::audit::imported_json(source);
    }
    audit
}

/// `audit` for people.
pub fn audit_text(journal: &str, a: &Analysis) -> String {
    let tools = opened_tools(a);
    let write = || -> std::io::Result<Vec<u8>> {
        let mut w = AuditWriter::new(Vec::new(), journal, false, a.replay.sandbox.as_ref())?;
        for (c, f) in audit_calls(a) {
            w.call(AuditCall {
                report: c,
                facts: f.as_ref(),
                tool: descriptor(tools, &c.tool),
            })?;
        }
        w.finish(&usage(a), a.replay.imported.as_ref())
    };
    // Cannot fail: writing to a Vec does not fail, and the table is UTF-8 (made of strings).
    #[allow(clippy::expect_used)]
    let text = String::from_utf8(write().expect("an audit written to memory"))
        .expect("an audit table is UTF-8");
    text
}
