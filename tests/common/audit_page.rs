//! Reading a page `recover audit --html` wrote, for `tests/audit_html.rs`: its summary and
//! items (the JSON blocks the page's script draws from), and what an HTML5 parser says of it.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// `recover audit JOURNAL --html FILE [extra]`: the page, after asserting the run succeeded.
pub fn write_page(journal: &str, file: &Path, extra: &[&str]) -> String {
    let out = Command::new(crate::recover_bin::recover_bin())
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
    let out = Command::new(crate::recover_bin::recover_bin())
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
