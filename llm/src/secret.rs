//! A credential, and its removal from every text that quotes a provider.
//!
//! Why more than a search for the key: a provider (or a proxy in front of it) may echo the key
//! back in an error encoded (Basic auth is base64, a URL percent-encodes, a debug dump prints
//! hex), and quoting cuts a text, so a key may show only in part. [`Secret::redact`] therefore
//! replaces the key in each of its forms (as is, JSON-escaped, percent-encoded, hex, and base64
//! and base64url at each of the three alignments a key can have inside a longer encoded text),
//! and any run of [`FRAGMENT_BYTES_MIN`] or more bytes that is a piece of one of those forms;
//! and every quote is redacted *before* it is cut ([`Secret::quote`]).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use base64::Engine;

/// The shortest piece of a key's form that is redacted wherever it appears. Shorter pieces
/// (a masked key's last four characters, say) are left: they are no longer the key, and would
/// match ordinary text.
pub const FRAGMENT_BYTES_MIN: usize = 8;

/// What replaces a key or a piece of one.
const REDACTED: &str = "[redacted]";

/// A credential. Its `Debug` and `Display` print `[redacted]`; only [`Secret::expose`] gives
/// the text, for the one header that carries it.
#[derive(Clone, Default)]
pub struct Secret(Option<Arc<Forms>>);

/// The key, and every [`FRAGMENT_BYTES_MIN`]-byte window of each form it may be quoted in
/// (computed once: redaction runs on every error).
struct Forms {
    key: String,
    windows: HashSet<[u8; FRAGMENT_BYTES_MIN]>,
}

impl Secret {
    /// Wraps `key`.
    pub fn new(key: impl Into<String>) -> Secret {
        let key = key.into();
        if key.is_empty() {
            return Secret(None);
        }
        let windows = forms_of(key.as_bytes())
            .iter()
            .flat_map(|f| f.windows(FRAGMENT_BYTES_MIN))
            .filter_map(|w| <[u8; FRAGMENT_BYTES_MIN]>::try_from(w).ok())
            .collect();
        Secret(Some(Arc::new(Forms { key, windows })))
    }

    /// The key itself: for the request header, never for a message.
    pub fn expose(&self) -> &str {
        self.0.as_ref().map_or("", |f| f.key.as_str())
    }

    /// `text` with the key in every form, and every piece of [`FRAGMENT_BYTES_MIN`] bytes or
    /// more of one of those forms, replaced by `[redacted]` (a provider may echo a key back in
    /// its error message).
    pub fn redact(&self, text: &str) -> String {
        let Some(forms) = &self.0 else {
            return text.to_string();
        };
        let ranges = forms.matches(text.as_bytes());
        if ranges.is_empty() {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in ranges {
            // Widened to whole characters: a key is ASCII, the text around it may not be.
            let start = floor_char(text, start).max(at);
            let end = ceil_char(text, end);
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }

    /// `text` redacted, then cut to at most `bytes_max` bytes at a character boundary (`…`
    /// marking a cut): how every quote of a provider's text is made, so that no cut can leave
    /// part of a key unrecognised.
    pub fn quote(&self, text: &str, bytes_max: usize) -> String {
        cut(&self.redact(text), bytes_max)
    }
}

impl Forms {
    /// The byte ranges of `text` that are a form of the key or a piece of one, merged and in
    /// order.
    fn matches(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        // The key as is, however short (a key of a local server, `ollama`, included).
        let key = self.key.as_bytes();
        let mut from = 0;
        while let Some(i) = find(&text[from..], key) {
            ranges.push((from + i, from + i + key.len()));
            from += i + key.len();
        }
        if text.len() >= FRAGMENT_BYTES_MIN && !self.windows.is_empty() {
            for (i, window) in text.windows(FRAGMENT_BYTES_MIN).enumerate() {
                if let Ok(w) = <[u8; FRAGMENT_BYTES_MIN]>::try_from(window) {
                    if self.windows.contains(&w) {
                        ranges.push((i, i + FRAGMENT_BYTES_MIN));
                    }
                }
            }
        }
        merge(ranges)
    }
}

/// The forms a key may be quoted in, each at least [`FRAGMENT_BYTES_MIN`] bytes long (a
/// shorter key is matched whole, in any length, by [`Forms::matches`]).
fn forms_of(key: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = vec![key.to_vec()];
    if let Ok(text) = std::str::from_utf8(key) {
        // As a JSON string holds it (a `/` or a quote escaped).
        if let Ok(json) = serde_json::to_string(text) {
            forms.push(json.trim_matches('"').as_bytes().to_vec());
        }
        forms.push(text.replace('/', "\\/").into_bytes());
    }
    let encoded: String =
        percent_encoding::percent_encode(key, percent_encoding::NON_ALPHANUMERIC).collect();
    forms.push(encoded.clone().into_bytes());
    forms.push(encoded.to_lowercase().into_bytes());
    forms.push(hex::encode(key).into_bytes());
    forms.push(hex::encode_upper(key).into_bytes());
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for shift in 0..3 {
            forms.push(base64_core(engine, key, shift));
        }
    }
    forms.retain(|f| f.len() >= FRAGMENT_BYTES_MIN);
    forms.sort();
    forms.dedup();
    forms
}

/// The characters of the base64 of `key` preceded by `shift` other bytes that depend on the
/// key's bytes alone: what a key `shift` bytes into a longer encoded text always shows.
fn base64_core(engine: &base64::engine::GeneralPurpose, key: &[u8], shift: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; shift];
    bytes.extend_from_slice(key);
    let encoded = engine.encode(&bytes).into_bytes();
    // Character i holds bits 6i..6i+6; the key's bits are 8·shift..8·(shift+n).
    let start = (8 * shift).div_ceil(6);
    let end = (8 * (shift + key.len())) / 6;
    encoded
        .get(start..end.min(encoded.len()))
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Overlapping or touching ranges joined, in order.
fn merge(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `text` cut to at most `bytes_max` bytes at a character boundary, `…` marking a cut.
pub(crate) fn cut(text: &str, bytes_max: usize) -> String {
    if text.len() <= bytes_max {
        return text.to_string();
    }
    format!("{}…", &text[..floor_char(text, bytes_max)])
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-proj-Zq81xW2vLm5nB7cR3tY6uI0o";

    #[test]
    fn each_form_of_the_key_is_redacted() {
        let s = Secret::new(KEY);
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{KEY}"));
        for text in [
            format!("bad key {KEY}."),
            format!("Basic {b64}"),
            format!("hex {}", hex::encode(KEY)),
            format!("HEX {}", hex::encode_upper(KEY)),
            format!(
                "url {}",
                percent_encoding::utf8_percent_encode(KEY, percent_encoding::NON_ALPHANUMERIC)
            ),
        ] {
            let out = s.redact(&text);
            assert!(out.contains(REDACTED), "{text} -> {out}");
            assert!(!out.contains("Zq81xW2v"), "{text} -> {out}");
        }
    }

    #[test]
    fn a_piece_of_eight_bytes_is_redacted_and_a_shorter_one_is_not() {
        let s = Secret::new(KEY);
        assert_eq!(s.redact("tail …tY6uI0o"), "tail …tY6uI0o");
        assert_eq!(s.redact("tail …3tY6uI0o"), "tail …[redacted]");
        assert_eq!(s.redact("head Zq81xW2v…"), "head [redacted]…");
    }

    #[test]
    fn a_quote_is_redacted_before_it_is_cut() {
        let s = Secret::new(KEY);
        for at in 0..=60 {
            let text = format!("{}{KEY} and more", "x".repeat(at));
            let quoted = s.quote(&text, 40);
            assert!(!quoted.contains("sk-proj"), "{at}: {quoted}");
            assert!(!quoted.contains(&KEY[KEY.len() - 4..]), "{at}: {quoted}");
        }
    }

    #[test]
    fn no_key_no_change_and_text_around_a_key_kept_whole() {
        assert_eq!(Secret::default().redact("é sk-x"), "é sk-x");
        let s = Secret::new("ollama");
        assert_eq!(s.redact("é ollama é"), "é [redacted] é");
    }
}
