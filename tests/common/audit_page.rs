//! Reading a page `recover audit --html` wrote, for `tests/cli/audit_html.rs`: its summary and
//! items (the JSON blocks the page's script draws from), and what an HTML5 parser says of it;
//! and the journals they are written from (the demo's, transcripts run by `tooljournal run`).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub fn tooljournal(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(args)
        .output()
        .expect("tooljournal runs")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The demo's journal and its crashed copy, copied into a directory of this test binary's (the
/// demo's own directory is removed): made once per binary.
pub fn demo() -> &'static (PathBuf, PathBuf) {
    static DEMO: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    let (_, journal, crashed) = DEMO.get_or_init(|| {
        let out = tooljournal(&["demo"]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "the demo runs: {stdout}");
        let journal = PathBuf::from(
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("journal: "))
                .expect("the demo prints its journal"),
        );
        let demo_dir = journal.parent().expect("the demo's directory").to_owned();
        let keep = tempfile::tempdir().unwrap();
        let (j, c) = (
            keep.path().join("journal"),
            keep.path().join("crashed-journal"),
        );
        copy_dir(&journal, &j);
        copy_dir(&demo_dir.join("crashed-journal"), &c);
        std::fs::remove_dir_all(&demo_dir).unwrap();
        (keep, j, c)
    });
    // A tuple of references would do; this keeps one `'static` pair to hand out.
    static PAIR: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PAIR.get_or_init(|| (journal.clone(), crashed.clone()))
}

/// `cp -r from to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The transcript whose every text looks like markup (`tests/data/audit/markup.jsonl`).
pub fn markup_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/audit/markup.jsonl")
}

/// Runs `script` with `tooljournal run` on a fresh workspace under `dir`: the journal's
/// directory.
pub fn run_script(dir: &Path, script: &Path, extra: &[&str]) -> PathBuf {
    let (ws, journal) = (dir.join("ws"), dir.join("j"));
    std::fs::create_dir_all(&ws).unwrap();
    let mut args = vec![
        "run",
        "--script",
        path_str(script),
        "--workspace",
        path_str(&ws),
    ];
    args.extend(["--journal", path_str(&journal)]);
    args.extend(extra);
    let run = tooljournal(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    journal
}

/// `recover audit JOURNAL --html FILE [extra]`: the page, after asserting the run succeeded.
pub fn write_page(journal: &str, file: &Path, extra: &[&str]) -> String {
    let out = Command::new(super::recover_bin::recover_bin())
        .args(["audit", journal, "--html"])
        .arg(file)
        .args(extra)
        .output()
        .expect("recover runs");
    assert!(
        out.status.success(),
        "recover audit {journal} --html: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(file).expect("the page is UTF-8")
}

/// The texts of the page's `<script>` elements whose attributes contain `attrs`.
fn blocks<'a>(html: &'a str, attrs: &str) -> Vec<&'a str> {
    let open = format!("<script {attrs}");
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start..];
        let text_at = body.find('>').expect("a script tag ends") + 1;
        let end = body.find("</script>").expect("a script block ends");
        found.push(&body[text_at..end]);
        rest = &body[end..];
    }
    found
}

/// The summary block, parsed.
pub fn summary(html: &str) -> Value {
    let block = blocks(html, "type=\"application/json\" id=\"summary-data\"");
    assert_eq!(block.len(), 1, "one summary block");
    serde_json::from_str(block[0]).expect("the summary is JSON")
}

/// Every item of every page, in order (a step repeated at the head of a page included).
pub fn items(html: &str) -> Vec<Value> {
    blocks(html, "type=\"application/json\" class=\"page\"")
        .into_iter()
        .flat_map(
            |b| match serde_json::from_str::<Value>(b).expect("a page is JSON") {
                Value::Array(items) => items,
                other => panic!("a page is an array, not {other}"),
            },
        )
        .collect()
}

/// The ids of the calls the pages hold, in order.
pub fn call_ids(html: &str) -> Vec<String> {
    items(html)
        .iter()
        .filter(|i| i["k"] == "call")
        .map(|i| i["id"].as_str().expect("a call has an id").to_owned())
        .collect()
}

/// The call ids `recover audit --json` lists.
pub fn audit_ids(journal: &str) -> Vec<String> {
    let out = Command::new(super::recover_bin::recover_bin())
        .args(["audit", journal, "--json"])
        .output()
        .expect("recover runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let audit: Value = serde_json::from_slice(&out.stdout).expect("audit --json is JSON");
    audit["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["call_id"].as_str().expect("call_id").to_owned())
        .collect()
}

/// What an HTML5 parser (html5ever, as browsers parse) found wrong with the document.
pub fn parse_errors(html: &str) -> Vec<String> {
    scraper::Html::parse_document(html)
        .errors
        .iter()
        .map(|e| e.to_string())
        .collect()
}

/// The parsed document's elements matching `css`, as their outer HTML.
pub fn elements(html: &str, css: &str) -> Vec<String> {
    let doc = scraper::Html::parse_document(html);
    let selector = scraper::Selector::parse(css).expect("a valid selector");
    doc.select(&selector).map(|e| e.html()).collect()
}

/// The checks every page must pass: the calls of `journal` all there, nothing remote, and
/// HTML5 without a parse error.
pub fn assert_sound_page(journal: &str, html: &str) {
    let ids = call_ids(html);
    for id in audit_ids(journal) {
        assert!(ids.contains(&id), "{journal}: call {id} is on the page");
    }
    for scheme in ["http://", "https://"] {
        assert!(!html.contains(scheme), "{journal}: the page names {scheme}");
    }
    assert_eq!(
        parse_errors(html),
        Vec::<String>::new(),
        "{journal}: HTML5 parse errors"
    );
}

/// A transcript of `turns` turns of 3 steps of 50 `read` calls each, every one reading `big.txt`.
pub fn big_transcript(turns: u32) -> String {
    let mut lines = Vec::new();
    for t in 1..=turns {
        lines.push(json!({"user": format!("turn {t}: read it all again")}));
        for s in 1..=3 {
            let calls: Vec<Value> = (1..=50)
                .map(|i| json!({"id": format!("t{t}s{s}c{i}"), "name": "read", "arguments": "{\"path\":\"big.txt\"}"}))
                .collect();
            lines.push(json!({"assistant": {"text": "reading", "tool_calls": calls, "stop_reason": "tool_use"}}));
        }
        lines.push(
            json!({"assistant": {"text": "read", "tool_calls": [], "stop_reason": "end_turn"}}),
        );
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A session of 1500 `read` calls of a 2.7 KB file (10 turns of 3 steps of 50), run under
/// `dir`: the journal's directory.
pub fn big_session(dir: &Path) -> PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("big.txt"), "0123456789abcdef\n".repeat(160)).unwrap();
    let script = dir.join("big.jsonl");
    std::fs::write(&script, big_transcript(10)).unwrap();
    run_script(dir, &script, &["--fsync", "never"])
}
