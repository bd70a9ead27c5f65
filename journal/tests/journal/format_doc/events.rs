//! The *Events* and *Versioning* sections of `docs/FORMAT.md`, by hand: every event and every
//! variant decoded from the bytes with the layouts the document lists, into the shape serde
//! gives the runtime's own types as JSON (externally tagged enums; the names are the
//! document's), so each decoded record can be compared with the record that was written.
//!
//! The runtime is a dev-dependency only to write real events through the public API and to
//! compare; nothing here decodes through it.

use super::{le32, le64, Layout};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// The event schema this reader was written for (FORMAT.md, *Events*).
pub const DOC_SCHEMA: u32 = 11;

/// Why a payload did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// A variant index past the ones the document lists: `(type, index)`.
    UnknownVariant(&'static str, u32),
    /// Anything else: too short, a bad tag, invalid UTF-8, trailing bytes.
    Malformed(String),
}

type R = Result<Value, Bad>;
type Decode = fn(&mut Cur) -> R;

/// A payload being read, in its journal's layout, and the (type, variant) pairs seen so far.
pub struct Cur<'a> {
    bytes: &'a [u8],
    layout: Layout,
    pub seen: &'a mut BTreeSet<(&'static str, u32)>,
}

impl<'a> Cur<'a> {
    /// A cursor at the start of `bytes`, read in `layout`.
    pub fn new(
        bytes: &'a [u8],
        layout: Layout,
        seen: &'a mut BTreeSet<(&'static str, u32)>,
    ) -> Cur<'a> {
        Cur {
            bytes,
            layout,
            seen,
        }
    }
    /// The bytes not read yet.
    pub fn rest(&self) -> &[u8] {
        self.bytes
    }
    pub fn take(&mut self, n: usize) -> Result<&[u8], Bad> {
        if self.bytes.len() < n {
            return Err(Bad::Malformed(format!(
                "{n} bytes wanted, {} left",
                self.bytes.len()
            )));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    /// Format 2's varint: one byte below 251, else 251/252/253 and a `u16`/`u32`/`u64`.
    pub fn varint(&mut self) -> Result<u64, Bad> {
        Ok(match self.take(1)?[0] {
            b @ 0..=250 => u64::from(b),
            251 => u64::from(u16::from_le_bytes(self.take(2)?.try_into().unwrap())),
            252 => u64::from(le32(self.take(4)?, 0)),
            253 => le64(self.take(8)?, 0),
            b => return Err(Bad::Malformed(format!("varint tag {b}"))),
        })
    }
    /// An unsigned integer of `bits`: fixed width in format 1, a varint that must fit in 2.
    pub fn unsigned(&mut self, bits: u32) -> Result<u64, Bad> {
        let v = match self.layout {
            Layout::Fixint => {
                let b = self.take(bits as usize / 8)?;
                let mut word = [0u8; 8];
                word[..b.len()].copy_from_slice(b);
                u64::from_le_bytes(word)
            }
            Layout::Varint => self.varint()?,
        };
        if bits < 64 && v >> bits != 0 {
            return Err(Bad::Malformed(format!("{v} does not fit in {bits} bits")));
        }
        Ok(v)
    }
    pub fn u16(&mut self) -> Result<u16, Bad> {
        Ok(self.unsigned(16)? as u16)
    }
    pub fn u32(&mut self) -> Result<u32, Bad> {
        Ok(self.unsigned(32)? as u32)
    }
    pub fn u64(&mut self) -> Result<u64, Bad> {
        self.unsigned(64)
    }
    /// `i32`: two's complement in format 1; zigzag (0, -1, 1, -2, … as 0, 1, 2, 3, …) then a
    /// varint in format 2.
    pub fn i32(&mut self) -> Result<i32, Bad> {
        match self.layout {
            Layout::Fixint => Ok(self.u32()? as i32),
            Layout::Varint => {
                let z = self.varint()?;
                let v = if z % 2 == 0 {
                    (z / 2) as i64
                } else {
                    -((z / 2) as i64) - 1
                };
                i32::try_from(v).map_err(|_| Bad::Malformed(format!("{v} is not an i32")))
            }
        }
    }
    /// A length or count: a `u64` in either layout.
    pub fn count(&mut self) -> Result<u64, Bad> {
        self.u64()
    }
    /// An enum's variant index: a `u32` in either layout.
    pub fn index(&mut self) -> Result<u32, Bad> {
        self.u32()
    }
    /// `f64`: its 8 bytes in both layouts.
    pub fn f64(&mut self) -> Result<f64, Bad> {
        Ok(f64::from_bits(le64(self.take(8)?, 0)))
    }
}

fn u16v(c: &mut Cur) -> R {
    Ok(json!(c.u16()?))
}
fn u32v(c: &mut Cur) -> R {
    Ok(json!(c.u32()?))
}
fn u64v(c: &mut Cur) -> R {
    Ok(json!(c.u64()?))
}
/// `i32`: four bytes, two's complement.
fn i32v(c: &mut Cur) -> R {
    Ok(json!(c.i32()?))
}
/// `f64`: the IEEE 754 binary64 bits, little-endian.
fn f64v(c: &mut Cur) -> R {
    Ok(json!(c.f64()?))
}
fn boolv(c: &mut Cur) -> R {
    match c.take(1)?[0] {
        0 => Ok(json!(false)),
        1 => Ok(json!(true)),
        b => Err(Bad::Malformed(format!("bool byte {b}"))),
    }
}
fn strv(c: &mut Cur) -> R {
    let n = c.count()? as usize;
    let bytes = c.take(n)?.to_vec();
    String::from_utf8(bytes)
        .map(Value::String)
        .map_err(|_| Bad::Malformed("string is not UTF-8".into()))
}
fn opt(c: &mut Cur, f: Decode) -> R {
    match c.take(1)?[0] {
        0 => Ok(Value::Null),
        1 => f(c),
        t => Err(Bad::Malformed(format!("option tag {t}"))),
    }
}
fn seq(c: &mut Cur, f: Decode) -> R {
    let n = c.count()?;
    (0..n)
        .map(|_| f(c))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}
fn obj(c: &mut Cur, fields: &[(&str, Decode)]) -> R {
    let mut m = Map::new();
    for (name, f) in fields {
        m.insert(name.to_string(), f(c)?);
    }
    Ok(Value::Object(m))
}

/// A variant's fields: none, one unnamed value, or named fields.
enum Shape {
    Unit,
    Newtype(Decode),
    Fields(&'static [(&'static str, Decode)]),
}

/// An enum: a `u32` index into `variants`, then that variant's fields.
fn variant(c: &mut Cur, ty: &'static str, variants: &[(&str, Shape)]) -> R {
    let index = c.index()?;
    let (name, shape) = variants
        .get(index as usize)
        .ok_or(Bad::UnknownVariant(ty, index))?;
    c.seen.insert((ty, index));
    Ok(match shape {
        Shape::Unit => json!(name),
        Shape::Newtype(f) => json!({ *name: f(c)? }),
        Shape::Fields(fields) => json!({ *name: obj(c, fields)? }),
    })
}

// The types of FORMAT.md, *Events*, one function each.
fn call_ref(c: &mut Cur) -> R {
    obj(c, &[("turn", u32v), ("step", u32v), ("call_id", strv)])
}
fn opt_call_ref(c: &mut Cur) -> R {
    opt(c, call_ref)
}
fn seqs(c: &mut Cur) -> R {
    seq(c, u64v)
}
fn strings(c: &mut Cur) -> R {
    seq(c, strv)
}
fn opt_str(c: &mut Cur) -> R {
    opt(c, strv)
}
fn opt_i32(c: &mut Cur) -> R {
    opt(c, i32v)
}
fn opt_u32(c: &mut Cur) -> R {
    opt(c, u32v)
}
/// A tuple: its elements one after the other, nothing between (a JSON array).
fn pair_u32(c: &mut Cur) -> R {
    Ok(json!([c.u32()?, c.u32()?]))
}
fn opt_pair_u32(c: &mut Cur) -> R {
    opt(c, pair_u32)
}
fn tool_source(c: &mut Cur) -> R {
    variant(
        c,
        "ToolSource",
        &[
            ("BuiltIn", Shape::Unit),
            ("External", Shape::Fields(&[("server", strv)])),
            (
                "Mcp",
                Shape::Fields(&[
                    ("server", strv),
                    ("implementation", strv),
                    ("version", strv),
                ]),
            ),
        ],
    )
}
fn tool_descriptor(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("name", strv),
            ("source", tool_source),
            ("version", strv),
            ("schema_hash", strv),
        ],
    )
}
fn session_open(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("schema_version", u32v),
            ("session_id", strv),
            ("workspace", strv),
            ("tools", |c| seq(c, tool_descriptor)),
        ],
    )
}
fn stop_reason(c: &mut Cur) -> R {
    let v = [
        ("tool_use", Shape::Unit),
        ("end_turn", Shape::Unit),
        ("length", Shape::Unit),
        ("interrupted", Shape::Unit), // schema 3
        ("refusal", Shape::Unit),     // schema 8
    ];
    variant(c, "StopReason", &v)
}
fn model_call(c: &mut Cur) -> R {
    obj(c, &[("call_id", strv), ("name", strv), ("arguments", strv)])
}
fn model_response(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("text", strv),
            ("tool_calls", |c| seq(c, model_call)),
            ("stop_reason", stop_reason),
        ],
    )
}
fn outcome_of(c: &mut Cur, ty: &'static str) -> R {
    let v = [
        ("Completed", Shape::Unit),
        ("Cancelled", Shape::Unit),
        ("Failed", Shape::Fields(&[("message", strv)])),
        ("Interrupted", Shape::Unit),
    ];
    variant(c, ty, &v)
}
fn step_outcome(c: &mut Cur) -> R {
    outcome_of(c, "StepOutcome")
}
fn turn_outcome(c: &mut Cur) -> R {
    outcome_of(c, "TurnOutcome")
}
fn ask_answer(c: &mut Cur) -> R {
    let names = [
        "allowed_once",
        "allowed_always",
        "denied",
        "expired",
        "cancelled",
        "answered", // schema 4
        "declined", // schema 4
    ];
    let v: Vec<_> = names.iter().map(|n| (*n, Shape::Unit)).collect();
    variant(c, "AskAnswer", &v)
}
fn approval(c: &mut Cur) -> R {
    let v = [
        ("Listener", Shape::Fields(&[("name", strv)])),
        ("Default", Shape::Unit),
        ("Asked", Shape::Fields(&[("answer", ask_answer)])),
        ("AlwaysAllowed", Shape::Unit),
    ];
    variant(c, "Approval", &v)
}
fn resources(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("reads", strings),
            ("writes", strings),
            ("intents", strings),
        ],
    )
}
pub const ERROR_CODES: [&str; 19] = [
    "UNKNOWN_TOOL",
    "SYNTAX_ERROR",
    "SCHEMA_ERROR",
    "POLICY_DENIED",
    "TRUNCATED_CALL",
    "TIMEOUT",
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "FS_STALE_VERSION",
    "FS_OUTSIDE_WORKSPACE",
    "TOOL_PANICKED",
    "OUTPUT_SCHEMA_VIOLATION",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_FAILED",
    "POST_EXECUTE_BLOCKED",
    "QUESTION_DECLINED",   // schema 4
    "QUESTION_UNANSWERED", // schema 4
    "TOO_MANY_CALLS",      // schema 9
];
fn error_code(c: &mut Cur) -> R {
    let v: Vec<_> = ERROR_CODES.iter().map(|n| (*n, Shape::Unit)).collect();
    variant(c, "ErrorCode", &v)
}
fn opt_error_code(c: &mut Cur) -> R {
    opt(c, error_code)
}
fn outcome_status(c: &mut Cur) -> R {
    let v = [
        ("Success", Shape::Unit),
        (
            "Error",
            Shape::Fields(&[("code", error_code), ("message", strv)]),
        ),
    ];
    variant(c, "OutcomeStatus", &v)
}
fn text(c: &mut Cur) -> R {
    let v = [
        ("Inline", Shape::Newtype(strv)),
        (
            "Preview",
            Shape::Fields(&[
                ("head", strv),
                ("tail", strv),
                ("total_bytes", u64v),
                ("sha256", strv),
                ("locator", opt_str),
            ]),
        ),
    ];
    variant(c, "Text", &v)
}
fn plan_item(c: &mut Cur) -> R {
    obj(c, &[("text", strv), ("status", strv)])
}
fn plan_items(c: &mut Cur) -> R {
    seq(c, plan_item)
}
fn side_effect(c: &mut Cur) -> R {
    let v = [
        (
            "FsWrite",
            Shape::Fields(&[
                ("path", strv),
                ("before_sha256", opt_str),
                ("after_sha256", strv),
            ]),
        ),
        (
            "ProcExit",
            Shape::Fields(&[("pid", u32v), ("status", opt_i32), ("signal", opt_i32)]),
        ),
        ("Other", Shape::Fields(&[("kind", strv), ("detail", strv)])),
        ("PlanReplaced", Shape::Fields(&[("items", plan_items)])),
        ("ToolsLoaded", Shape::Fields(&[("names", strings)])),
    ];
    variant(c, "SideEffect", &v)
}
fn outcome(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("status", outcome_status),
            ("content", text),
            ("value", opt_str),
            ("details", opt_str),
            ("side_effects", |c| seq(c, side_effect)),
            ("attempts", u32v),
            ("duration_ms", u64v),
        ],
    )
}
fn committed_result(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("content", strv),
            ("is_error", boolv),
            ("code", opt_error_code),
            ("value", opt_str),
        ],
    )
}
fn call_state(c: &mut Cur) -> R {
    let names = [
        "received",
        "parsed",
        "approved",
        "started",
        "settled",
        "committed",
        "rejected",
        "cancelled-before-start",
    ];
    let v: Vec<_> = names.iter().map(|n| (*n, Shape::Unit)).collect();
    variant(c, "CallState", &v)
}
fn classification(c: &mut Cur) -> R {
    let v = [
        ("TOOL_NOT_STARTED", Shape::Unit),
        ("TOOL_OUTCOME_UNKNOWN", Shape::Unit),
    ];
    variant(c, "Classification", &v)
}
fn recovered_call(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("call", call_ref),
            ("state", call_state),
            ("classification", |c| opt(c, classification)),
            ("result", committed_result),
        ],
    )
}
fn recovery(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("dropped_bytes", u64v),
            ("calls", |c| seq(c, recovered_call)),
            ("interrupted_step", opt_pair_u32),
            ("interrupted_turn", opt_u32),
        ],
    )
}
fn visible_tool(c: &mut Cur) -> R {
    obj(c, &[("name", strv), ("schema_hash", strv)])
}

fn approval_policy(c: &mut Cur) -> R {
    variant(
        c,
        "ApprovalPolicy",
        &[
            ("allow", Shape::Unit),
            ("deny", Shape::Unit),
            ("ask", Shape::Unit),
        ],
    )
}
fn sync_policy(c: &mut Cur) -> R {
    use Shape::Unit;
    variant(
        c,
        "SyncPolicy",
        &[("always", Unit), ("group", Unit), ("never", Unit)],
    )
}
/// A `(String, String)` tuple: its two fields in order, no length (serde renders it as a pair).
fn string_pair(c: &mut Cur) -> R {
    Ok(json!([strv(c)?, strv(c)?]))
}
fn config_file(c: &mut Cur) -> R {
    obj(c, &[("path", strv), ("sha256", strv)])
}
fn session_policy(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("approval", approval_policy),
            ("parallel_max", u32v),
            ("fsync", sync_policy),
            ("exposure", |c| seq(c, string_pair)),
            ("config", |c| opt(c, config_file)),
            ("reason", strv),
        ],
    )
}
fn process_started(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("pid", u32v),
            ("pgid", u32v),
            ("start_ticks", u64v),
            ("boot_id", strv),
        ],
    )
}

// Schema 3.
fn model_settings(c: &mut Cur) -> R {
    obj(
        c,
        &[("max_tokens", opt_u32), ("temperature", |c| opt(c, f64v))],
    )
}
fn session_model(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("provider", strv),
            ("model", strv),
            ("system", opt_str),
            ("settings", model_settings),
            ("note", opt_str),
            ("base_url", opt_str),
        ],
    )
}
fn tool_schema(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("schema_hash", strv),
            ("name", strv),
            ("description", strv),
            ("input_schema", strv),
        ],
    )
}
fn llm_request(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("turn", u32v),
            ("step", u32v),
            ("attempt", u32v),
            ("provider", strv),
            ("model", strv),
            ("body_sha256", strv),
            ("body_bytes", u64v),
        ],
    )
}
fn model_error_kind(c: &mut Cur) -> R {
    use Shape::Unit;
    let v = [
        ("transport", Unit),
        ("status", Unit),
        ("malformed", Unit),
        ("config", Unit),
        // Schema 4.
        ("context_overflow", Unit),
    ];
    variant(c, "ModelErrorKind", &v)
}
fn llm_attempt_failed(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("turn", u32v),
            ("step", u32v),
            ("attempt", u32v),
            ("kind", model_error_kind),
            ("status", |c| opt(c, u16v)),
            ("message", strv),
            ("partial_text", strv),
            ("retry", boolv),
            ("backoff_ms", u64v),
        ],
    )
}
fn usage(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("input_tokens", u64v),
            ("output_tokens", u64v),
            ("cached_input_tokens", u64v),
        ],
    )
}
fn llm_response_detail(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("turn", u32v),
            ("step", u32v),
            ("attempt", u32v),
            ("response_id", opt_str),
            ("usage", usage),
            ("provider_state", |c| opt(c, string_pair)),
        ],
    )
}

// Schema 4.
fn question_option(c: &mut Cur) -> R {
    obj(c, &[("label", strv), ("description", strv)])
}
fn question(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("text", strv),
            ("options", |c| seq(c, question_option)),
            ("multiple", boolv),
            ("free_text", boolv),
            ("plan_option", opt_str),
        ],
    )
}
fn answer(c: &mut Cur) -> R {
    obj(c, &[("choice", strings), ("text", opt_str)])
}
fn reply(c: &mut Cur) -> R {
    let v = [
        ("Answered", Shape::Newtype(answer)),
        ("Declined", Shape::Fields(&[("text", opt_str)])),
    ];
    variant(c, "Reply", &v)
}

fn compact_trigger(c: &mut Cur) -> R {
    use Shape::Unit;
    let v = [("overflow", Unit), ("threshold", Unit)];
    variant(c, "CompactTrigger", &v)
}
fn context_summary_requested(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("turn", u32v),
            ("step", u32v),
            ("through_turn", u32v),
            ("body_sha256", strv),
            ("body_bytes", u64v),
        ],
    )
}
fn context_compacted(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("turn", u32v),
            ("step", u32v),
            ("trigger", compact_trigger),
            ("through_turn", u32v),
            ("summary", opt_str),
            ("summary_note", opt_str),
            ("shortened", |c| seq(c, pair_u32)),
            ("preview_chars", u32v),
            ("tokens_before", u64v),
            ("tokens_after", u64v),
        ],
    )
}

// Schema 5 (`Sandbox`: schema 11).
fn evidence(c: &mut Cur) -> R {
    let v = [
        (
            "FileReplace",
            Shape::Fields(&[
                ("path", strv),
                ("before_sha256", opt_str),
                ("after_sha256", strv),
            ]),
        ),
        ("Sandbox", Shape::Newtype(sandbox_bound)),
    ];
    variant(c, "Evidence", &v)
}
// Schema 11.
fn sandbox_policy(c: &mut Cur) -> R {
    use Shape::Unit;
    let v = [
        ("ReadOnly", Unit),
        ("WorkspaceWrite", Unit),
        ("DangerFullAccess", Unit),
    ];
    variant(c, "SandboxPolicy", &v)
}
fn sandbox_bound(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("policy", sandbox_policy),
            ("enforced", boolv),
            ("writable", strings),
            ("readable", strings),
            ("network", boolv),
            ("mechanism", strv),
            ("escalated", boolv),
        ],
    )
}
fn call_started(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("call", call_ref),
            ("attempt", u32v),
            ("resources", resources),
            ("idempotency_key", strv),
            ("evidence", |c| seq(c, evidence)),
            ("source_seqs", seqs),
        ],
    )
}
fn rerun_policy(c: &mut Cur) -> R {
    use Shape::Unit;
    let v = [("not_started", Unit), ("safe", Unit)];
    variant(c, "RerunPolicy", &v)
}
fn recovery_rerun(c: &mut Cur) -> R {
    obj(
        c,
        &[("policy", rerun_policy), ("calls", |c| seq(c, call_ref))],
    )
}

fn writer_stolen(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("epoch", u64v),
            ("holder", strv),
            ("holder_epoch", u64v),
            ("lease_left_ms", u64v),
        ],
    )
}

// Schema 7.
fn imported_damage(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("line", u64v),
            ("offset", u64v),
            ("bytes", u64v),
            ("reason", strv),
            ("followed", boolv),
        ],
    )
}
fn import_note(c: &mut Cur) -> R {
    obj(c, &[("line", u64v), ("offset", u64v), ("text", strv)])
}
fn import_source(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("agent", strv),
            ("file", strv),
            ("size_bytes", u64v),
            ("sha256", strv),
            ("source_session_id", opt_str),
            ("damaged", |c| seq(c, imported_damage)),
            ("notes", |c| seq(c, import_note)),
        ],
    )
}
fn import_line(c: &mut Cur) -> R {
    obj(c, &[("line", u64v), ("offset", u64v)])
}
fn import_verdict(c: &mut Cur) -> R {
    let v = [
        ("Recorded", Shape::Unit),
        ("NotStarted", Shape::Fields(&[("why", strv)])),
        ("OutcomeUnknown", Shape::Fields(&[("why", strv)])),
    ];
    variant(c, "ImportVerdict", &v)
}
fn import_outcome(c: &mut Cur) -> R {
    obj(
        c,
        &[
            ("call", call_ref),
            ("verdict", import_verdict),
            ("result", committed_result),
            ("source_seqs", seqs),
        ],
    )
}

/// The event table of FORMAT.md: index → (name, fields).
fn events() -> Vec<(&'static str, Shape)> {
    use Shape::{Fields, Newtype, Unit};
    vec![
        ("session/open", Newtype(session_open)),
        ("turn/start", Fields(&[("turn", u32v), ("user_text", strv)])),
        ("step/start", Fields(&[("turn", u32v), ("step", u32v)])),
        (
            "llm/response",
            Fields(&[("turn", u32v), ("step", u32v), ("response", model_response)]),
        ),
        (
            "step/end",
            Fields(&[("turn", u32v), ("step", u32v), ("outcome", step_outcome)]),
        ),
        (
            "turn/end",
            Fields(&[("turn", u32v), ("outcome", turn_outcome)]),
        ),
        ("session/close", Unit),
        (
            "received",
            Fields(&[
                ("call", call_ref),
                ("index", u32v),
                ("tool", strv),
                ("raw_arguments", strv),
                ("source_seqs", seqs),
            ]),
        ),
        (
            "parsed",
            Fields(&[
                ("call", call_ref),
                ("arguments", strv),
                ("source_seqs", seqs),
            ]),
        ),
        (
            "approved",
            Fields(&[
                ("call", call_ref),
                ("approval", approval),
                ("source_seqs", seqs),
            ]),
        ),
        // Schemas 1 to 4: still read, no longer written (event 37 replaces it).
        (
            "started",
            Fields(&[
                ("call", call_ref),
                ("attempt", u32v),
                ("resources", resources),
                ("source_seqs", seqs),
            ]),
        ),
        (
            "settled",
            Fields(&[
                ("call", call_ref),
                ("outcome", outcome),
                ("source_seqs", seqs),
            ]),
        ),
        (
            "committed",
            Fields(&[
                ("call", call_ref),
                ("result", committed_result),
                ("source_seqs", seqs),
            ]),
        ),
        (
            "rejected",
            Fields(&[
                ("call", call_ref),
                ("code", error_code),
                ("reason", strv),
                ("source_seqs", seqs),
            ]),
        ),
        (
            "cancelled-before-start",
            Fields(&[("call", call_ref), ("reason", strv), ("source_seqs", seqs)]),
        ),
        (
            "ask/pending",
            Fields(&[("call", call_ref), ("question", strv)]),
        ),
        (
            "ask/answered",
            Fields(&[("call", call_ref), ("answer", ask_answer)]),
        ),
        (
            "ask/cancelled",
            Fields(&[("call", call_ref), ("reason", strv)]),
        ),
        ("ask/expired", Fields(&[("call", call_ref)])),
        ("plan/replace", Fields(&[("items", plan_items)])),
        (
            "spill/stored",
            Fields(&[("locator", strv), ("bytes", u64v), ("sha256", strv)]),
        ),
        (
            "fault",
            Fields(&[("turn", u32v), ("step", u32v), ("message", strv)]),
        ),
        ("recovery", Newtype(recovery)),
        (
            "step/tools",
            Fields(&[
                ("turn", u32v),
                ("step", u32v),
                ("tools", |c| seq(c, visible_tool)),
            ]),
        ),
        (
            "plan/mode",
            Fields(&[("on", boolv), ("reason", strv), ("call", opt_call_ref)]),
        ),
        // Schema 2.
        ("session/policy", Newtype(session_policy)),
        (
            "call/process",
            Fields(&[("call", call_ref), ("process", process_started)]),
        ),
        (
            "process/killed",
            Fields(&[("call", call_ref), ("pgid", u32v), ("signal", i32v)]),
        ),
        // Schema 3.
        ("session/model", Newtype(session_model)),
        ("tool/schema", Newtype(tool_schema)),
        ("llm/request", Newtype(llm_request)),
        ("llm/attempt-failed", Newtype(llm_attempt_failed)),
        ("llm/response-detail", Newtype(llm_response_detail)),
        // Schema 4.
        (
            "ask/question",
            Fields(&[("call", call_ref), ("question", question)]),
        ),
        ("ask/reply", Fields(&[("call", call_ref), ("reply", reply)])),
        (
            "context/summary-requested",
            Newtype(context_summary_requested),
        ),
        ("context/compacted", Newtype(context_compacted)),
        // Schema 5.
        ("started", Newtype(call_started)),
        ("recovery/rerun", Newtype(recovery_rerun)),
        // Schema 6.
        ("writer/stolen", Newtype(writer_stolen)),
        // Schema 7.
        ("import/source", Newtype(import_source)),
        ("import/line", Newtype(import_line)),
        ("import/outcome", Newtype(import_outcome)),
        // Schema 8.
        (
            "llm/refusal",
            Fields(&[
                ("turn", u32v),
                ("step", u32v),
                ("attempt", u32v),
                ("reason", strv),
                ("explanation", strv),
            ]),
        ),
        (
            "llm/note",
            Fields(&[
                ("turn", u32v),
                ("step", u32v),
                ("attempt", u32v),
                ("note", strv),
            ]),
        ),
        // Schema 9.
        ("session/reopen", Unit),
        // Schema 10.
        (
            "context/calibrated",
            Fields(&[
                ("turn", u32v),
                ("step", u32v),
                ("attempt", u32v),
                ("estimate_tokens", u64v),
                ("provider_tokens", u64v),
                ("provider_max_tokens", |c| opt(c, u64v)),
            ]),
        ),
        // Schema 11.
        ("session/sandbox", Newtype(sandbox_bound)),
    ]
}

/// How many events, and how many variants of each enum, the document lists.
pub fn variant_counts() -> Vec<(&'static str, u32)> {
    vec![
        ("Event", events().len() as u32),
        ("ToolSource", 3),
        ("StopReason", 5),
        ("StepOutcome", 4),
        ("TurnOutcome", 4),
        ("Approval", 4),
        ("AskAnswer", 7),
        ("OutcomeStatus", 2),
        ("Text", 2),
        ("SideEffect", 5),
        ("CallState", 8),
        ("Classification", 2),
        ("ApprovalPolicy", 3),
        ("SyncPolicy", 3),
        ("ModelErrorKind", 5),
        ("Reply", 2),
        ("CompactTrigger", 2),
        ("Evidence", 2),
        ("SandboxPolicy", 3),
        ("RerunPolicy", 2),
        ("ImportVerdict", 3),
        ("ErrorCode", ERROR_CODES.len() as u32),
    ]
}

/// A decoded record: `at_ms`, the event's name, and its fields (as serde renders the variant's
/// content: an object, one value for a newtype, `null` for a unit event).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub at_ms: u64,
    pub name: &'static str,
    pub fields: Value,
}

/// Decodes one payload: exactly one `Record`, no trailing bytes.
pub fn decode_record(
    payload: &[u8],
    layout: Layout,
    seen: &mut BTreeSet<(&'static str, u32)>,
) -> Result<Decoded, Bad> {
    let mut c = Cur {
        bytes: payload,
        layout,
        seen,
    };
    let at_ms = c.u64()?;
    let index = c.index()?;
    let table = events();
    let (name, shape) = table
        .get(index as usize)
        .ok_or(Bad::UnknownVariant("Event", index))?;
    c.seen.insert(("Event", index));
    let fields = match shape {
        Shape::Unit => Value::Null,
        Shape::Newtype(f) => f(&mut c)?,
        Shape::Fields(fields) => obj(&mut c, fields)?,
    };
    if !c.bytes.is_empty() {
        return Err(Bad::Malformed(format!("{} trailing bytes", c.bytes.len())));
    }
    Ok(Decoded {
        at_ms,
        name,
        fields,
    })
}

/// The schema a journal declares: its first payload's first field after `at_ms` and the event
/// index, when that index is 0, `session/open` (FORMAT.md, *Versioning*). In format 1 that is
/// bytes 12..16 when bytes 8..12 are 0.
pub fn declared_schema(first_payload: &[u8], layout: Layout) -> Option<u32> {
    let mut seen = BTreeSet::new();
    let mut c = Cur {
        bytes: first_payload,
        layout,
        seen: &mut seen,
    };
    c.u64().ok()?;
    (c.index().ok()? == 0).then(|| c.u32().ok())?
}

/// The verdict on a journal's payloads by the versioning rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Read(usize),
    /// The payload at this index (seq − 1) does not decode, in a journal of a newer schema.
    Newer {
        index: usize,
        schema: u32,
    },
    /// The payload at this index does not decode, in a journal of a schema this reader knows.
    Corrupt {
        index: usize,
    },
}

pub fn verdict(payloads: &[Vec<u8>], layout: Layout) -> Verdict {
    let schema = payloads.first().and_then(|p| declared_schema(p, layout));
    let mut seen = BTreeSet::new();
    for (index, p) in payloads.iter().enumerate() {
        if decode_record(p, layout, &mut seen).is_err() {
            return match schema {
                Some(schema) if schema > DOC_SCHEMA => Verdict::Newer { index, schema },
                _ => Verdict::Corrupt { index },
            };
        }
    }
    Verdict::Read(payloads.len())
}
