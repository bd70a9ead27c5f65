//! The page's shell: the head (with the Content-Security-Policy that forbids every request),
//! the data blocks, and the script, and the one escaping rule for everything the journal says.
//!
//! Why the data is JSON in `<script type="application/json">` blocks and never markup: the
//! browser does not run such a block, and the page's script puts every string into the
//! document as text (`textContent`), never as HTML. The only way journal text could become
//! markup is to end its block early, so [`script_json`] writes `<`, `>`, `&` and `/` as JSON
//! escapes: no `</script>` and no `http://` of the journal's text appears in the file as
//! such. As a second wall, the policy lets only the page's own script run (by its hash).

use base64::Engine;
use sha2::{Digest, Sha256};
use std::io::Write;

const CSS: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// A writer that counts what it writes: the size bound is checked against it.
#[derive(Debug)]
pub(super) struct Counted<W: Write> {
    pub(super) out: W,
    pub(super) bytes: u64,
}

impl<W: Write> Counted<W> {
    pub(super) fn put(&mut self, text: &str) -> std::io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.bytes += text.len() as u64;
        Ok(())
    }
}

/// `value` as JSON text that cannot end a `<script>` block or spell a URL scheme's `//`.
pub(super) fn script_json(value: &serde_json::Value) -> String {
    // expect: a `Value` always serializes (its map keys are strings).
    #[allow(clippy::expect_used)]
    let text = serde_json::to_string(value).expect("a JSON value serializes");
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        // Outside strings JSON has none of these characters, so escaping them everywhere only
        // touches strings, where the escape means the same character.
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '/' => out.push_str("\\/"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Text for an HTML text node or attribute value: the title is the only text written as
/// markup.
pub(super) fn html_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '/' => out.push_str("&#47;"),
            c if c.is_control() => out.push(' '),
            c if events::display::is_hidden(c) => out.push_str(&format!("\\u{{{:04X}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The policy: nothing may be fetched, framed or submitted; only this page's script runs.
fn content_security_policy() -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
    format!(
        "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
         img-src data:; base-uri 'none'; form-action 'none'"
    )
}

/// Everything before the first data block.
pub(super) fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <link rel=\"icon\" href=\"data:,\">\n\
         <title>{title}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n\
         <header id=\"summary\" aria-label=\"Session summary\"></header>\n\
         <nav id=\"pager\" aria-label=\"Pages of calls\"></nav>\n\
         <div id=\"layout\">\n<main id=\"timeline\" aria-label=\"Timeline\"></main>\n\
         <aside id=\"details\" aria-label=\"The selected call\" aria-live=\"polite\" tabindex=\"-1\">\
         <p class=\"hint\">Select a call (click, or the arrow keys) to see its arguments, \
         decision, result, side effects and timings.</p></aside>\n</div>\n\
         <noscript><p>This page draws the timeline with JavaScript, which is off. \
         <code>recover audit --json</code> gives the same facts as text.</p></noscript>\n",
        csp = content_security_policy(),
        title = html_text(title),
    )
}

/// One data block: a page of items (`gap`: calls were elided right before it).
pub(super) fn page_open(gap: bool) -> &'static str {
    if gap {
        "<script type=\"application/json\" class=\"page\" data-gap=\"1\">["
    } else {
        "<script type=\"application/json\" class=\"page\">["
    }
}

/// The end of a page block.
pub(super) const PAGE_CLOSE: &str = "]</script>\n";

/// The summary block, the script, and the end of the document.
pub(super) fn tail(summary: &serde_json::Value) -> String {
    format!(
        "<script type=\"application/json\" id=\"summary-data\">{}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        script_json(summary)
    )
}

/// Bytes of the document besides its data: the head, the script and the markup around them.
pub(super) fn fixed_bytes(title: &str) -> u64 {
    (head(title).len() + SCRIPT.len() + 200) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_text_cannot_end_its_block_or_spell_a_url() {
        let evil = serde_json::json!({"t": "</script><script>alert(1)</script> https://x.example/ & \u{2028}"});
        let text = script_json(&evil);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains("//"));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, evil, "the escapes mean the same text");
    }

    #[test]
    fn the_title_is_text() {
        assert_eq!(html_text("<b>a&b</b>"), "&lt;b&gt;a&amp;b&lt;&#47;b&gt;");
    }
}
