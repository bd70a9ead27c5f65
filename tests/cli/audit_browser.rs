//! `recover audit --html` in a real browser (headless Chromium through chromedriver): the
//! pages of the demo's journal and its crashed copy load without a console error, with one bar
//! per call, the crash marker, a call's side effects on a click and the keys moving between
//! calls; journal text that looks like markup never runs; a session too large for the bound
//! pages. Screenshots go to `target/tmp/audit_browser/` (README's is `demo-crashed.png`).
//!
//! Without Chromium and chromedriver these tests fail saying how to install them.

use crate::common::audit_page;
use crate::common::browser;
use crate::common::recover_bin;

use audit_page::{audit_ids, big_session, demo, markup_script, path_str, run_script, write_page};
use browser::{Browser, Key};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Where this binary's pages and screenshots go (kept after the run, never committed).
fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit_browser");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The call the details panel shows.
fn shown(b: &Browser) -> String {
    b.text("#details h2")
}

/// The call of the focused element.
fn focused(b: &Browser) -> serde_json::Value {
    b.execute(
        "return document.activeElement.dataset.callId || null",
        vec![],
    )
}

/// No console error, or the ones there were.
fn assert_no_console_error(b: &Browser, page: &str) {
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{page}: console errors: {errors:?}");
}

#[test]
fn the_demo_and_its_crash_draw_in_a_browser_with_markers_side_effects_and_keys() {
    let (journal, crashed) = demo();
    for (name, dir, crash) in [("demo", journal, false), ("demo-crashed", crashed, true)] {
        let file = out_dir().join(format!("{name}.html"));
        write_page(path_str(dir), &file, &[]);
        let b = Browser::start();
        b.open_file(&file);

        // One bar per call, each the call's.
        let mut ids = audit_ids(path_str(dir));
        let mut bars: Vec<String> = b
            .find_all(".bar")
            .iter()
            .map(|e| e.attr("data-call-id").expect("a bar names its call"))
            .collect();
        ids.sort();
        bars.sort();
        assert_eq!(bars, ids, "{name}: one bar per call");
        let crashes = b.find_all(".marker.crash").len();
        assert_eq!(crashes, usize::from(crash), "{name}: crash markers");
        if crash {
            assert!(b.text("#summary").contains("not recovered yet"));
            b.click(".row[data-call-id='d13']");
            assert!(b
                .text("#details")
                .contains("no result journaled: not recovered yet"));
            assert!(b
                .text(".row[data-call-id='d12']")
                .contains("TOOL_OUTCOME_UNKNOWN"));
            assert!(b
                .text(".row[data-call-id='d13']")
                .contains("TOOL_NOT_STARTED"));
        } else {
            assert_eq!(
                b.find_all(".marker.stop").len(),
                1,
                "{name}: the user's stop"
            );
        }

        // A click shows the call's side effects: d6 edited notes.txt.
        b.click(".row[data-call-id='d6']");
        assert_eq!(shown(&b), "Call d6");
        let effects = b.text("#details .effects");
        assert!(
            effects.starts_with("wrote notes.txt ("),
            "{name}: {effects}"
        );
        assert!(b.text("#details").contains("allowed by default"));
        // The keys move between calls, focus and panel together.
        b.press(Key::Down);
        assert_eq!(shown(&b), "Call d7");
        assert_eq!(focused(&b), json!("d7"));
        b.press(Key::Up);
        b.press(Key::Up);
        assert_eq!(shown(&b), "Call d5");
        assert_eq!(focused(&b), json!("d5"));
        b.press(Key::End);
        let last = if crash { "d13" } else { "d14" };
        assert_eq!(shown(&b), format!("Call {last}"));

        // The screenshot (README's is `demo-crashed.png`): the last call of the crashed step
        // selected, the page from its top, zoomed out to fit the viewport.
        b.click(&format!(
            ".row[data-call-id='{}']",
            if crash { "d12" } else { "d6" }
        ));
        b.execute(
            "document.documentElement.style.zoom = '0.8'; window.scrollTo(0, 0); return null",
            vec![],
        );
        let png = out_dir().join(format!("{name}.png"));
        b.screenshot(&png);
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{name}: a screenshot"
        );
        assert_no_console_error(&b, name);
        b.close();
    }
}

#[test]
fn journal_text_that_looks_like_markup_never_runs_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let journal = run_script(dir.path(), &markup_script(), &[]);
    let file = out_dir().join("markup.html");
    write_page(path_str(&journal), &file, &[]);
    let b = Browser::start();
    b.open_file(&file);
    assert_eq!(
        b.execute("return typeof window.__pwned", vec![]),
        json!("undefined"),
        "a script of the journal's ran"
    );
    assert!(b.find_all("img").is_empty() && b.find_all("b").is_empty());
    assert_eq!(b.find_all(".bar").len(), 2);
    // The text is shown as the journal has it.
    let turn = b.text("h2.turn");
    assert!(
        turn.contains("</script><script>window.__pwned = 'user'</script>"),
        "{turn}"
    );
    b.click(".row[data-call-id='e1']");
    let result = b.text("#details");
    assert!(
        result.contains(
            "</script><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
        ),
        "{result}"
    );
    b.press(Key::Down);
    assert_eq!(
        shown(&b),
        "Call e2</script><script>window.__pwned=3</script>"
    );
    // Nothing the panel showed became markup either.
    assert!(b.text("#details").contains("<b>bold</b>.txt"));
    assert!(b.find_all("img").is_empty() && b.find_all("b").is_empty());
    assert_eq!(
        b.execute("return typeof window.__pwned", vec![]),
        json!("undefined")
    );
    assert_no_console_error(&b, "markup");
}

/// Bidi controls and invisible characters in the prompt, the model's text, a call id, a file
/// name, a file's content and a command's output: the page shows each as an escape
/// (`\u{202E}`), never as itself, so `report\u{202E}txt.exe` cannot pass for `reportexe.txt`.
#[test]
fn hidden_characters_show_as_escapes_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/audit/bidi.jsonl");
    let journal = run_script(dir.path(), &script, &[]);
    let file = out_dir().join("bidi.html");
    write_page(path_str(&journal), &file, &[]);
    let b = Browser::start();
    b.open_file(&file);
    let hidden = ['\u{202E}', '\u{202C}', '\u{2066}', '\u{200B}'];
    let no_hidden = |what: &str, text: &str| {
        if let Some(c) = text.chars().find(|c| hidden.contains(c)) {
            panic!("{what} shows U+{:04X} as itself: {text}", c as u32);
        }
    };
    let turn = b.text("h2.turn");
    assert!(
        turn.contains("Rename the \\u{202E}report\\u{202C} and list it"),
        "{turn}"
    );
    for (i, _) in b.find_all(".row").iter().enumerate() {
        b.execute(
            "document.querySelectorAll('.row')[arguments[0]].click()",
            vec![json!(i)],
        );
        let details = b.text("#details");
        no_hidden("the details", &details);
        if details.contains("Call c2") {
            // The command's output: the file's name as `ls` printed it, and the zero width
            // space `printf` wrote.
            assert!(details.contains("report\\u{202E}txt.exe"), "{details}");
            assert!(details.contains("zero\\u{200B}width"), "{details}");
        } else {
            assert!(details.contains("Call c\\u{202E}1"), "{details}");
            assert!(details.contains("report\\u{202E}txt.exe"), "{details}");
        }
    }
    let body = b.text("body");
    no_hidden("the page", &body);
    assert!(body.contains("\\u{202E}"), "{body}");
    for (attr, what) in [("title", "titles"), ("aria-label", "labels")] {
        let all = b.execute(
            &format!(
                "return Array.from(document.querySelectorAll('[{attr}]')).map(e => e.getAttribute('{attr}')).join('\\n')"
            ),
            vec![],
        );
        no_hidden(what, all.as_str().unwrap_or_default());
    }
    assert_no_console_error(&b, "bidi");
}

#[test]
fn a_session_over_the_bound_pages_in_a_browser_and_shows_its_gap() {
    let dir = tempfile::tempdir().unwrap();
    let journal = big_session(dir.path());
    let file = out_dir().join("large.html");
    write_page(path_str(&journal), &file, &["--html-bytes-max", "2097152"]);
    let ids = audit_ids(path_str(&journal));
    let b = Browser::start();
    b.open_file(&file);
    let pages: usize = b
        .text("#where")
        .strip_prefix("Page 1 of ")
        .and_then(|n| n.parse().ok())
        .expect("the pager says which page");
    assert!(pages > 2, "{pages} pages");
    assert!(b.text("#summary").contains("leaves out"));
    let first = b.find_all(".bar");
    assert!(!first.is_empty() && first.len() <= 120);
    assert_eq!(
        first[0].attr("data-call-id").as_deref(),
        Some(ids[0].as_str())
    );
    b.click("#last");
    assert_eq!(b.text("#where"), format!("Page {pages} of {pages}"));
    let last = b.find_all(".bar");
    assert_eq!(
        last.last().and_then(|e| e.attr("data-call-id")).as_deref(),
        ids.last().map(String::as_str)
    );
    // Back page by page to the gap: one page says calls were left out before it.
    let mut gaps = 0;
    for _ in 1..pages {
        gaps += b.find_all(".elided").len();
        b.click("#prev");
    }
    assert_eq!(gaps, 1, "one page marks the gap");
    assert_eq!(b.text("#where"), format!("Page 1 of {pages}"));
    assert_no_console_error(&b, "large");
}

#[test]
fn an_imported_sessions_page_lists_what_reading_its_file_found() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import/claude-code/interrupted_resumed.jsonl");
    let mut source = std::fs::read_to_string(fixture).unwrap();
    for n in 1..=3 {
        source.push_str(&format!("{{\"type\":\"hologram\",\"uuid\":\"h{n}\"}}\n"));
    }
    let file = dir.path().join("session.jsonl");
    std::fs::write(&file, source).unwrap();
    let journal = dir.path().join("j");
    let out = std::process::Command::new(recover_bin::recover_bin())
        .args([
            "import",
            "--from",
            "claude-code",
            "--journal",
            path_str(&journal),
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = out_dir().join("imported.html");
    write_page(path_str(&journal), &page, &[]);
    let b = Browser::start();
    b.open_file(&page);
    let closed = b.text("#summary");
    assert!(
        closed.contains("Reading the file found") && closed.contains("2 lines"),
        "{closed}"
    );
    b.execute(
        "document.querySelectorAll('#summary details').forEach(d => { d.open = true; })",
        vec![],
    );
    let open = b.text("#summary");
    assert!(
        open.contains("note: lines 7, 8 and 9: an item of unknown type hologram")
            && open.contains("note: line 4: a reply Claude Code wrote itself"),
        "{open}"
    );
    assert_no_console_error(&b, "imported");
}
