//! What two runs of one transcript may differ in, whatever the backend, taken out of a command's
//! output so that the rest can be compared byte for byte.
//!
//! Why only these: the journal's name (a directory or a URL), the session id (random per run)
//! and the idempotency keys (a hash of the session id), times (durations, timestamps) and the
//! ids of processes a run spawned. Anything else that differs between the two backends is a
//! difference the comparison must see.

/// JSON keys whose values are times or process ids.
const MASKED_KEYS: &[&str] = &[
    "at_ms",
    "duration_ms",
    "started_ms",
    "last_activity_ms",
    "pid",
    "pgid",
    "start_ticks",
];

/// `text` with `journal` (the location as printed) replaced by `<JOURNAL>`, and session ids,
/// idempotency keys, times and process ids masked.
pub fn normalise(text: &str, journal: &str) -> String {
    // First: the audit table's columns are counted on the text as printed.
    let text = mask_audit_ms(text);
    let masked_json: Vec<String> = text.lines().map(mask_json_line).collect();
    let mut out = masked_json.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    let out = out.replace(journal, "<JOURNAL>");
    let out = mask_uuids(&out);
    let out = mask_after(&out, "tj1-", |c| c.is_ascii_hexdigit(), "<KEY>");
    let out = mask_after(&out, "process group ", |c| c.is_ascii_digit(), "<PID>");
    // A sandbox's bound names each run's own workspace and temporary directory.
    let out = mask_after(&out, "/tmp/.tmp", |c| c.is_ascii_alphanumeric(), "<TMP>");
    let out = mask_after(
        &out,
        "/tmp/tooljournal-",
        |c| c.is_ascii_alphanumeric() || c == '-',
        "<SANDBOX>",
    );
    mask_after(&out, "process ", |c| c.is_ascii_digit(), "<PID>")
}

/// A JSON line with the values of [`MASKED_KEYS`] replaced; other lines as they are.
fn mask_json_line(line: &str) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_string();
    };
    if !value.is_object() && !value.is_array() {
        return line.to_string();
    }
    mask_value(&mut value);
    value.to_string()
}

fn mask_value(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if MASKED_KEYS.contains(&key.as_str()) && v.is_number() {
                    *v = serde_json::Value::String("<N>".into());
                } else {
                    mask_value(v);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(mask_value),
        _ => {}
    }
}

/// Every `prefix` followed by one or more chars matching `is`: the run of them replaced.
fn mask_after(text: &str, prefix: &str, is: impl Fn(char) -> bool, mask: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let run = after.find(|c: char| !is(c)).unwrap_or(after.len());
        out.push_str(&rest[..at + prefix.len()]);
        if run > 0 {
            out.push_str(mask);
        }
        rest = &after[run..];
    }
    out.push_str(rest);
    out
}

/// Every UUID (8-4-4-4-12 hex digits) replaced by `<UUID>`.
fn mask_uuids(text: &str) -> String {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let len: usize = SHAPE.iter().sum::<usize>() + 4;
    let bytes = text.as_bytes();
    let is_uuid = |at: usize| {
        let Some(candidate) = bytes.get(at..at + len) else {
            return false;
        };
        let mut i = 0;
        SHAPE.iter().enumerate().all(|(n, &k)| {
            let group = candidate[i..i + k].iter().all(u8::is_ascii_hexdigit);
            i += k;
            let dash = n == 4 || candidate[i] == b'-';
            i += 1;
            group && dash
        })
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if is_uuid(at) {
            out.extend_from_slice(b"<UUID>");
            at += len;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII was replaced")
}

/// Chars of an audit row before its `state / class` column: turn, step, call, tool, source,
/// arguments and decision, each padded or cut to its width, and a space after each.
const AUDIT_ROW_FIXED_CHARS: usize = 5 + 5 + 11 + 25 + 33 + 35 + 37;

/// `recover audit`'s text table: each row's `ms` cell masked. The class column may overflow
/// its width, so the cell is found as the first token after the state that is a number or
/// `-` (a state and an error code or classification are words).
fn mask_audit_ms(text: &str) -> String {
    let mut in_table = false;
    let mut lines = Vec::new();
    for line in text.split('\n') {
        in_table |= line.contains(" ms  effects");
        let is_row = in_table
            && line
                .get(..4)
                .is_some_and(|t| t.trim().parse::<u32>().is_ok());
        let chars: Vec<char> = line.chars().collect();
        if !is_row || chars.len() <= AUDIT_ROW_FIXED_CHARS {
            lines.push(line.to_string());
            continue;
        }
        let head: String = chars[..AUDIT_ROW_FIXED_CHARS].iter().collect();
        let rest: String = chars[AUDIT_ROW_FIXED_CHARS..].iter().collect();
        let token = rest
            .split_whitespace()
            .find(|t| *t == "-" || t.chars().all(|c| c.is_ascii_digit()));
        let rest = match token.filter(|t| *t != "-") {
            // The whole right-aligned cell, its padding too: widths differ with the digits.
            Some(t) => match rest.find(&format!(" {t}  ")) {
                Some(at) => format!(
                    "{} <ms>{}",
                    rest[..at].trim_end(),
                    &rest[at + t.len() + 1..]
                ),
                None => rest,
            },
            None => rest,
        };
        lines.push(format!("{head}{rest}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_what_runs_differ_in_and_nothing_else() {
        let text = "j: session 6c04383d-613d-4a37-a8eb-7badccc85e75 process 12 exited 0\n";
        assert_eq!(
            normalise(text, "j"),
            "<JOURNAL>: session <UUID> process <PID> exited 0\n"
        );
        let json = r#"{"duration_ms":5,"state":"x","n":5}"#;
        assert_eq!(
            normalise(json, "zz"),
            r#"{"duration_ms":"<N>","n":5,"state":"x"}"#
        );
    }
}
