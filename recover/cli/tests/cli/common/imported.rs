//! What the tests of `recover import` share: the fixtures, importing one through the binary,
//! and reading back what was written.

use super::{recover, text};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The agents `--from` names.
pub const AGENTS: [&str; 3] = ["codex", "pi", "claude-code"];

/// The seven kinds of session file read (a normal one, then each way one goes wrong): each
/// agent has a fixture of each.
pub const FIXTURES: [&str; 7] = [
    "normal",
    "no_output",
    "parallel_missing",
    "length_cut",
    "torn_tail",
    "bad_middle",
    "unknown_item",
];

/// The four formats `rebuild` writes.
pub const FORMATS: [&str; 4] = ["openai-chat", "openai-responses", "anthropic", "gemini"];

/// `tests/data/import/AGENT/NAME.jsonl`.
pub fn fixture(agent: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/import")
        .join(agent)
        .join(format!("{name}.jsonl"))
}

/// A temporary path as the binary's argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// `recover import --from AGENT FILE --journal DIR`, which must succeed; its stdout.
pub fn import(agent: &str, file: &Path, journal: &Path) -> String {
    let o = recover(&["import", "--from", agent, s(file), "--journal", s(journal)]);
    assert!(
        o.status.success(),
        "import {agent} {}: exit {:?}: {}",
        file.display(),
        o.status.code(),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// `classify --json --dry-run`: each call's id and classification (`null` for a finished call).
pub fn classify(journal: &Path) -> Vec<(String, Value)> {
    let o = recover(&["classify", s(journal), "--json", "--dry-run"]);
    assert!(o.status.success(), "classify: {}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("classify --json is JSON");
    v["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            let id = c["call_id"].as_str().expect("call_id").to_owned();
            (id, c["classification"].clone())
        })
        .collect()
}

/// The journal's records, as (at_ms, event).
pub fn records(journal: &Path) -> Vec<(u64, runtime::event::Event)> {
    use journal::{FsStorage, Limits, Reader};
    let source = std::sync::Arc::new(FsStorage::open(journal).unwrap());
    let reader = Reader::open(source, Limits::default()).unwrap();
    reader
        .map(|r| {
            let r: runtime::event::Record = r.unwrap().decode().unwrap();
            (r.at_ms, r.event)
        })
        .collect()
}

/// The byte offset of each line of `bytes` (1-based line `n` at index `n - 1`).
pub fn line_offsets(bytes: &[u8]) -> Vec<u64> {
    let mut offsets = vec![0];
    offsets.extend(
        (bytes.iter().enumerate())
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i as u64 + 1),
    );
    offsets
}

/// `recover rebuild JOURNAL --format FORMAT` with `extra` arguments, which must succeed with a
/// body that passes the provider's validator; the body and what went to stderr. `what` names
/// the case in failures.
pub fn rebuilt(journal: &Path, format: &str, extra: &[&str], what: &str) -> (Value, String) {
    let mut args = vec!["rebuild", s(journal), "--format", format];
    args.extend_from_slice(extra);
    let o = recover(&args);
    assert!(o.status.success(), "{what} {format}: {}", text(&o.stderr));
    let body: Value = serde_json::from_slice(&o.stdout).expect("a body is JSON");
    let f: recover::providers::Format = format.parse().expect("a format");
    recover::providers::validate(f, &body).unwrap_or_else(|v| panic!("{what} {format}: {v}"));
    (body, text(&o.stderr))
}

/// The first `keep` records of `from` in a new journal `to`: an import cut short there.
pub fn cut(from: &Path, to: &Path, keep: usize) {
    use journal::{FsStorage, Journal, Limits, Options, Reader, Takeover};
    let storage = std::sync::Arc::new(FsStorage::create(to).unwrap());
    let backend = journal::Backend::Files(storage);
    let (j, _) = Journal::open_backend(&backend, Takeover::Refuse, Options::default()).unwrap();
    let source = std::sync::Arc::new(FsStorage::open(from).unwrap());
    let reader = Reader::open(source, Limits::default()).unwrap();
    for record in reader.take(keep) {
        let record: runtime::event::Record = record.unwrap().decode().unwrap();
        j.append(&record).unwrap();
    }
    j.close().unwrap();
}

/// JSON values as the lines of a JSONL file.
pub fn lines(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        out.extend_from_slice(v.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}
