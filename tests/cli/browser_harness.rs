//! The browser harness itself (tests/common/browser.rs), proven against tiny pages: the console
//! reports a script's uncaught error and a load the page's CSP refused, a clean page reports
//! none, and the helpers the HTML audit tests use do what they say.

use crate::common::browser;

use browser::{Browser, Key};
use serde_json::json;
use std::path::PathBuf;

/// Writes `html` as `name` in `dir`.
fn page(dir: &tempfile::TempDir, name: &str, html: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, html).expect("write the test page");
    path
}

#[test]
fn an_uncaught_script_error_is_a_console_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = page(
        &dir,
        "throws.html",
        "<!doctype html><title>t</title><script>throw new Error('harness-boom')</script>",
    );
    let browser = Browser::start();
    browser.open_file(&path);
    let errors = browser.console_errors();
    assert!(
        errors.iter().any(|e| e.message.contains("harness-boom")),
        "no SEVERE entry for the thrown error: {errors:?}"
    );
    browser.close();
}

#[test]
fn an_image_the_csp_refuses_is_a_console_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Refused by the policy before any request; were it not, the load would fail differently
    // (connection refused), and the message would not name the policy.
    let path = page(
        &dir,
        "csp.html",
        "<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">\
         <title>t</title><img src=\"http://127.0.0.1:9/blocked.png\">",
    );
    let browser = Browser::start();
    browser.open_file(&path);
    let errors = browser.console_errors();
    assert!(
        errors
            .iter()
            .any(|e| e.message.contains("Content Security Policy")
                && e.message.contains("127.0.0.1:9/blocked.png")),
        "no SEVERE entry for the refused image: {errors:?}"
    );
}

#[test]
fn a_clean_page_has_no_errors_and_the_helpers_work() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = page(
        &dir,
        "clean.html",
        r#"<!doctype html><title>t</title>
<ul><li class="row">one</li><li class="row">two</li><li class="row">three</li></ul>
<p id="sel">0</p><button id="b">press</button><input id="i">
<script>
let sel = 0;
const show = () => { document.getElementById('sel').textContent = String(sel); };
document.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowDown') { sel += 1; show(); }
  if (e.key === 'Enter') { document.getElementById('sel').textContent = 'entered ' + sel; }
});
document.getElementById('b').addEventListener('click', () => { sel = 10; show(); });
</script>"#,
    );
    let browser = Browser::start();
    browser.open_file(&path);
    let rows: Vec<String> = browser
        .find_all("li.row")
        .iter()
        .map(|e| e.text())
        .collect();
    assert_eq!(rows, ["one", "two", "three"]);
    assert!(browser.find_all("li.none").is_empty());
    browser.press(Key::Down);
    browser.press(Key::Down);
    assert_eq!(browser.text("#sel"), "2");
    browser.press(Key::Enter);
    assert_eq!(browser.text("#sel"), "entered 2");
    browser.click("#b");
    assert_eq!(browser.text("#sel"), "10");
    browser.send_keys("#i", "typed");
    browser.press(Key::Tab);
    let focus = browser.execute(
        "return [document.getElementById('i').value, document.activeElement.tagName, arguments[0]];",
        vec![json!(7)],
    );
    assert_eq!(focus, json!(["typed", "BODY", 7]));
    let shot = dir.path().join("shot.png");
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).expect("read the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        browser.console_errors().is_empty(),
        "{:?}",
        browser.console()
    );
}
