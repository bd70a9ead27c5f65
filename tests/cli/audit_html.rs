//! `recover audit --html` through the binaries: the page of the demo's journal, of its crashed
//! copy, of a live session, of a session in PostgreSQL and of one too large for the page's
//! bound; journal text that looks like markup stays text. `audit_browser.rs` opens the same
//! pages in a real browser.

use crate::common::audit_page;
use crate::common::recover_bin;

use audit_page::{
    assert_sound_page, big_session, call_ids, copy_dir, demo, elements, items, markup_script,
    path_str, run_script, summary, tooljournal, write_page,
};
use serde_json::{json, Value};
use std::process::Command;

fn by_id<'a>(items: &'a [Value], id: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["k"] == "call" && i["id"] == id)
        .unwrap_or_else(|| panic!("call {id} is on the page"))
}

#[test]
fn the_demo_and_its_crashed_copy_as_pages_hold_every_call_and_nothing_remote() {
    let (journal, crashed) = demo();
    let out = tempfile::tempdir().unwrap();

    let page = write_page(path_str(journal), &out.path().join("demo.html"), &[]);
    assert_sound_page(path_str(journal), &page);
    let s = summary(&page);
    assert_eq!(s["ended"]["how"], "closed", "{s}");
    assert_eq!(s["totals"]["calls"], 14, "{s}");
    let marks = s["marks"].as_array().unwrap();
    let stops: Vec<&Value> = marks.iter().filter(|m| m["kind"] == "stop").collect();
    assert_eq!(stops.len(), 1, "one stop, one marker: {marks:?}");
    assert_eq!(
        (&stops[0]["turn"], &stops[0]["step"]),
        (&json!(2), &json!(1))
    );
    assert!(
        !marks.iter().any(|m| m["kind"] == "crash"),
        "no crash: {marks:?}"
    );
    let all = items(&page);
    let d6 = by_id(&all, "d6");
    assert_eq!(d6["outcome"], "ok");
    assert!(
        d6["effects"][0]
            .as_str()
            .unwrap()
            .starts_with("wrote notes.txt"),
        "{d6}"
    );
    let t = &d6["times"];
    for phase in ["received", "approved", "started", "settled", "committed"] {
        assert!(t[phase].is_u64(), "d6 has its {phase} time: {t}");
    }
    assert!(t["received"].as_u64() <= t["started"].as_u64());
    assert!(t["started"].as_u64() <= t["settled"].as_u64());

    let page = write_page(path_str(crashed), &out.path().join("crashed.html"), &[]);
    assert_sound_page(path_str(crashed), &page);
    let s = summary(&page);
    assert_eq!(s["ended"]["how"], "crashed", "{s}");
    let crash: Vec<&Value> = s["marks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "crash")
        .collect();
    assert_eq!(crash.len(), 1, "one crash marker: {s}");
    assert_eq!(
        (crash[0]["turn"].clone(), crash[0]["step"].clone()),
        (json!(2), json!(1))
    );
    let all = items(&page);
    let (d12, d13) = (by_id(&all, "d12"), by_id(&all, "d13"));
    assert_eq!(d12["outcome"], "unknown", "{d12}");
    assert_eq!(d12["label"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(d13["outcome"], "not_started", "{d13}");
    // The crash is the last record written: d12's `started`.
    assert_eq!(crash[0]["at"], d12["times"]["started"]);
    // The page is read only: the crashed copy keeps its torn tail.
    let verify = tooljournal(&["journal", "verify", path_str(crashed)]);
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("torn tail"),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn a_recovered_crash_is_marked_where_the_process_died_not_where_recovery_ran() {
    let (_, crashed) = demo();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("j");
    copy_dir(crashed, &copy);
    // Recovery runs measurably later than the crash.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let classify = Command::new(recover_bin::recover_bin())
        .args(["classify", path_str(&copy)])
        .output()
        .unwrap();
    assert!(classify.status.success());
    let page = write_page(path_str(&copy), &dir.path().join("p.html"), &[]);
    assert_sound_page(path_str(&copy), &page);
    let s = summary(&page);
    assert_eq!(s["ended"]["how"], "recovered", "{s}");
    assert_eq!(s["ended"]["recoveries"], 1);
    let crash = s["marks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "crash")
        .expect("the crash is marked");
    let all = items(&page);
    let d12 = by_id(&all, "d12");
    assert_eq!(crash["at"], d12["times"]["started"], "{crash}");
    assert!(crash["recovered_at"].as_u64().unwrap() >= crash["at"].as_u64().unwrap() + 50);
    assert_eq!(d12["recovered"], true);
    let step = all
        .iter()
        .find(|i| i["k"] == "step" && i["turn"] == 2 && i["step"] == 1)
        .unwrap();
    assert_eq!(step["outcome"], "interrupted: the process died");
    assert_eq!(
        step["ended"], crash["at"],
        "the step ends where the process died"
    );
}

#[test]
fn journal_text_that_looks_like_markup_stays_text_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let journal = run_script(dir.path(), &markup_script(), &[]);
    let page = write_page(path_str(&journal), &dir.path().join("p.html"), &[]);
    assert_sound_page(path_str(&journal), &page);
    for raw in ["<script>window", "<img", "<b>bold"] {
        assert!(
            !page.contains(raw),
            "the journal's {raw:?} is in the file as markup"
        );
    }
    // Three script elements: the page of items, the summary, the page's own script.
    assert_eq!(elements(&page, "script").len(), 3);
    assert_eq!(elements(&page, "img").len(), 0);
    assert_eq!(elements(&page, "b").len(), 0);
    // ... and the journal's text comes back whole from the data.
    let all = items(&page);
    let e1 = by_id(&all, "e1");
    assert!(
        e1["result"]
            .as_str()
            .unwrap()
            .contains("</script><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2> https://example.invalid/"),
        "{e1}"
    );
    assert!(call_ids(&page).contains(&"e2</script><script>window.__pwned=3</script>".to_owned()));
    let turn = all.iter().find(|i| i["k"] == "turn").unwrap();
    assert!(turn["text"]
        .as_str()
        .unwrap()
        .starts_with("</script><script>"));
}

#[test]
fn a_large_session_stays_under_its_bound_and_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let journal = big_session(dir.path());
    let all_ids = audit_page::audit_ids(path_str(&journal));
    assert_eq!(all_ids.len(), 1500);

    let bound: u64 = 2 << 20;
    let file = dir.path().join("big.html");
    let page = write_page(
        path_str(&journal),
        &file,
        &["--html-bytes-max", &bound.to_string()],
    );
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(
        size <= bound,
        "the page is {size} bytes, over its bound {bound}"
    );
    assert_eq!(audit_page::parse_errors(&page), Vec::<String>::new());
    assert!(!page.contains("http://") && !page.contains("https://"));
    let s = summary(&page);
    assert_eq!(s["bytes_max"], bound);
    let shown = call_ids(&page);
    let elided = s["elided"]["calls"].as_u64().expect("calls were left out");
    assert!(elided > 0 && !shown.is_empty());
    assert_eq!(
        shown.len() as u64 + elided,
        1500,
        "every call is shown or counted"
    );
    // The beginning and the end are there, in order; what is left out is one stretch between.
    assert_eq!(shown.first(), all_ids.first());
    assert_eq!(shown.last(), all_ids.last());
    let head = shown
        .iter()
        .zip(&all_ids)
        .take_while(|(a, b)| a == b)
        .count();
    assert_eq!(
        shown[head..],
        all_ids[head + elided as usize..],
        "one gap, after call {head}"
    );
    assert_eq!(s["totals"]["calls"], 1500, "the totals count every call");
    assert_eq!(
        elements(&page, "script[data-gap]").len(),
        1,
        "one page says calls were left out before it"
    );
    assert!(s["pages"].as_u64().unwrap() > 2);

    // The same session under the default bound: whole.
    let page = write_page(path_str(&journal), &dir.path().join("whole.html"), &[]);
    assert_eq!(call_ids(&page), all_ids);
    assert!(summary(&page)["elided"].is_null());

    // A bound too small to hold a page is refused, naming the flag, and writes nothing.
    let refused = Command::new(recover_bin::recover_bin())
        .args(["audit", path_str(&journal), "--html"])
        .arg(dir.path().join("tiny.html"))
        .args(["--html-bytes-max", "1000"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--html-bytes-max 1000"));
    assert!(!dir.path().join("tiny.html").exists());
}

#[test]
fn a_live_session_is_drawn_read_only_with_its_calls_in_flight() {
    let (_, crashed) = demo();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("j");
    copy_dir(crashed, &copy);
    let before = std::fs::read(copy.join("00000000000000000000.segment")).unwrap();
    // A writer holds the journal (this process, as a running session would).
    let storage = std::sync::Arc::new(journal::FsStorage::open(&copy).unwrap());
    let _writer = journal::Journal::lock(storage).expect("the writer's lock");

    let page = write_page(path_str(&copy), &dir.path().join("live.html"), &[]);
    assert_sound_page(path_str(&copy), &page);
    let s = summary(&page);
    assert_eq!(s["ended"]["how"], "live", "{s}");
    assert!(s["marks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == "live"));
    let all = items(&page);
    assert_eq!(by_id(&all, "d12")["outcome"], "in_flight");
    assert_eq!(by_id(&all, "d13")["outcome"], "in_flight");
    let after = std::fs::read(copy.join("00000000000000000000.segment")).unwrap();
    assert!(before == after, "reading a live session changes nothing");
}

#[test]
fn a_session_in_postgresql_draws_as_its_copy_in_a_directory_does() {
    let (journal, _) = demo();
    let url = pg::testing::shared().url("audit-html-demo");
    let copied = tooljournal(&["journal", "copy", path_str(journal), &url]);
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let from_dir = write_page(path_str(journal), &dir.path().join("dir.html"), &[]);
    let from_pg = write_page(&url, &dir.path().join("pg.html"), &[]);
    assert_sound_page(&url, &from_pg);
    assert_eq!(
        items(&from_pg),
        items(&from_dir),
        "the same calls, steps and times"
    );
    let (mut a, mut b) = (summary(&from_dir), summary(&from_pg));
    assert_ne!(a["journal"], b["journal"]);
    a["journal"] = Value::Null;
    b["journal"] = Value::Null;
    assert_eq!(a, b);
}

#[test]
fn a_probe_verdict_is_shown_with_the_unknown_call_it_is_about() {
    let (_, crashed) = demo();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let page = write_page(
        path_str(crashed),
        &dir.path().join("p.html"),
        &["--probe", path_str(&ws)],
    );
    let all = items(&page);
    // d12 (`echo running; sleep 30`) recorded no file it would replace and its process group
    // is gone: nothing to check.
    assert_eq!(
        audit_page_label(&all, "d12"),
        "TOOL_OUTCOME_UNKNOWN (probe: no_evidence)"
    );
    // Only unknown calls are probed.
    assert_eq!(audit_page_label(&all, "d13"), "TOOL_NOT_STARTED");
    let without = write_page(path_str(crashed), &dir.path().join("q.html"), &[]);
    assert_eq!(
        audit_page_label(&items(&without), "d12"),
        "TOOL_OUTCOME_UNKNOWN"
    );
}

fn audit_page_label(items: &[Value], id: &str) -> String {
    by_id(items, id)["label"].as_str().unwrap().to_owned()
}
