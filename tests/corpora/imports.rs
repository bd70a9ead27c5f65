//! Other agents' session files (`import-real/<agent>/*.jsonl`), imported and repaired through
//! the `recover` binary.
//!
//! The expectation comes from a reader written here from the agents' formats
//! (docs/IMPORT_FORMATS.md), not from the `import` crate: which lines are not JSON objects, each
//! tool call and whether an output of it is recorded, and which lines the agent replays when it
//! resumes. Each file is
//!
//! - imported: `classify --json` must give each call the verdict this count gives it (an
//!   output recorded: none; none, in a pi message that stopped with `error` or `aborted`:
//!   `TOOL_NOT_STARTED`; otherwise, Claude Code's own placeholders included,
//!   `TOOL_OUTCOME_UNKNOWN`), and `audit --json` must list exactly the lines that are not JSON
//!   objects as kept out;
//! - repaired: the copy must read whole, keep every line of the original (as it was, or with
//!   only its parent link changed) or move it to the quarantine (every line that is not JSON
//!   among them), answer each call it answers with that call's code, and leave no call the
//!   agent replays without exactly one answer on the path it replays, and (pi, Claude Code,
//!   whose providers refuse one) no answer there without its call.

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The agents, by their directory's name.
const AGENTS: [&str; 3] = ["codex", "pi", "claude-code"];

/// The starts of the texts Claude Code writes as a call's result when it has none (Claude Code
/// 2.1.332 lists them as its interruption markers): the agent's words, not the tool's output.
const CLAUDE_PLACEHOLDERS: [&str; 6] = [
    "[Request interrupted by user for tool use]",
    "[Tool call interrupted",
    "[Tool call result not in this copy",
    "[Tool call did not complete",
    "[Tool call not completed",
    "[Tool call skipped",
];

const UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";
const NOT_STARTED: &str = "TOOL_NOT_STARTED";

/// One non-blank line of a file.
struct Line {
    /// 1-based.
    number: u64,
    /// Its text as Node.js reads it (bytes that are not UTF-8 as U+FFFD), without a leading
    /// byte-order mark or trailing `\r`.
    text: String,
    /// Its JSON, when it is an object.
    value: Option<Value>,
}

fn lines(bytes: &[u8]) -> Vec<Line> {
    let mut out = Vec::new();
    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let mut text = String::from_utf8_lossy(raw).into_owned();
        if i == 0 {
            text = text.trim_start_matches('\u{feff}').to_owned();
        }
        let text = text.trim_end_matches('\r').to_owned();
        if text.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str::<Value>(&text)
            .ok()
            .filter(Value::is_object);
        out.push(Line {
            number: i as u64 + 1,
            text,
            value,
        });
    }
    out
}

/// A tool call as the format records it.
#[derive(Debug, Clone)]
struct Call {
    id: String,
    line: u64,
    /// pi: its message stopped with `error` or `aborted`, so pi never ran it.
    never_run: bool,
}

/// A call's output (or the agent's placeholder for one).
#[derive(Debug, Clone)]
struct Output {
    id: String,
    line: u64,
    placeholder: bool,
}

/// The text of a result's content: a string, or the `text` of its blocks.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The calls and outputs of one line.
fn line_items(agent: &str, v: &Value, line: u64) -> (Vec<Call>, Vec<Output>) {
    let (mut calls, mut outputs) = (Vec::new(), Vec::new());
    let str_of = |v: &Value| v.as_str().map(str::to_owned);
    match agent {
        "codex" if v["type"] == "response_item" => {
            let p = &v["payload"];
            match p["type"].as_str().unwrap_or("") {
                "function_call" | "custom_tool_call" | "local_shell_call" | "tool_search_call" => {
                    if let Some(id) = str_of(&p["call_id"]).or_else(|| str_of(&p["id"])) {
                        calls.push(Call {
                            id,
                            line,
                            never_run: false,
                        });
                    }
                }
                "function_call_output" | "custom_tool_call_output" | "tool_search_output" => {
                    if let Some(id) = str_of(&p["call_id"]) {
                        outputs.push(Output {
                            id,
                            line,
                            placeholder: false,
                        });
                    }
                }
                _ => {}
            }
        }
        "pi" if v["type"] == "message" => {
            let m = &v["message"];
            match m["role"].as_str().unwrap_or("") {
                "assistant" => {
                    let never_run = matches!(m["stopReason"].as_str(), Some("error" | "aborted"));
                    for b in m["content"].as_array().into_iter().flatten() {
                        if b["type"] == "toolCall" {
                            if let Some(id) = str_of(&b["id"]) {
                                calls.push(Call {
                                    id,
                                    line,
                                    never_run,
                                });
                            }
                        }
                    }
                }
                "toolResult" => {
                    if let Some(id) = str_of(&m["toolCallId"]) {
                        outputs.push(Output {
                            id,
                            line,
                            placeholder: false,
                        });
                    }
                }
                _ => {}
            }
        }
        "claude-code" => {
            let blocks = v["message"]["content"].as_array().into_iter().flatten();
            for b in blocks {
                match (v["type"].as_str(), b["type"].as_str()) {
                    (Some("assistant"), Some("tool_use")) => {
                        if let Some(id) = str_of(&b["id"]) {
                            calls.push(Call {
                                id,
                                line,
                                never_run: false,
                            });
                        }
                    }
                    (Some("user"), Some("tool_result")) => {
                        if let Some(id) = str_of(&b["tool_use_id"]) {
                            let text = content_text(&b["content"]);
                            outputs.push(Output {
                                id,
                                line,
                                placeholder: CLAUDE_PLACEHOLDERS
                                    .iter()
                                    .any(|p| text.starts_with(p)),
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    (calls, outputs)
}

/// Every call of the file with the verdict its outputs give it (`None`: an output recorded).
/// An output answers the latest call of its id before it still without one (codex, which pairs
/// by id alone, also the first such call after it).
fn verdicts(agent: &str, lines: &[Line]) -> Vec<(Call, Option<&'static str>)> {
    let mut calls: Vec<(Call, Option<Output>)> = Vec::new();
    let mut early: Vec<Output> = Vec::new();
    for l in lines {
        let Some(v) = &l.value else { continue };
        let (new_calls, outputs) = line_items(agent, v, l.number);
        calls.extend(new_calls.into_iter().map(|c| (c, None)));
        for o in outputs {
            let open = calls
                .iter_mut()
                .rev()
                .find(|(c, answer)| c.id == o.id && answer.is_none());
            match open {
                Some((_, answer)) => *answer = Some(o),
                None => early.push(o),
            }
        }
    }
    if agent == "codex" {
        for o in early {
            let later = calls
                .iter_mut()
                .find(|(c, answer)| c.id == o.id && answer.is_none() && c.line > o.line);
            if let Some((_, answer)) = later {
                *answer = Some(o);
            }
        }
    }
    calls
        .into_iter()
        .map(|(c, answer)| {
            let verdict = match answer {
                Some(o) if !o.placeholder => None,
                Some(_) => Some(UNKNOWN),
                None if c.never_run => Some(NOT_STARTED),
                None => Some(UNKNOWN),
            };
            (c, verdict)
        })
        .collect()
}

/// The lines the agent replays when it resumes the file, by line number.
fn replayed(agent: &str, lines: &[Line]) -> HashSet<u64> {
    let all = || lines.iter().map(|l| l.number).collect();
    let (id_key, parent_key) = match agent {
        "pi" => ("id", "parentId"),
        "claude-code" => ("uuid", "parentUuid"),
        _ => return all(),
    };
    let entries: Vec<(&Line, &Value)> = lines
        .iter()
        .filter_map(|l| Some((l, l.value.as_ref()?)))
        .filter(|(_, v)| match agent {
            "pi" => v["type"] != "session",
            // Claude Code's transcript lines; the rest is metadata.
            _ => matches!(
                v["type"].as_str(),
                Some("user" | "assistant" | "system" | "attachment")
            ),
        })
        .collect();
    if agent == "pi" && entries.iter().all(|(_, v)| v.get(id_key).is_none()) {
        return all(); // version 1: chained by order
    }
    let by_id: HashMap<&str, (&Line, &Value)> = entries
        .iter()
        .filter_map(|&(l, v)| Some((v[id_key].as_str()?, (l, v))))
        .collect();
    let mut path = HashSet::new();
    let mut at = entries
        .iter()
        .rev()
        .find(|(_, v)| v[id_key].is_string())
        .copied();
    while let Some((l, v)) = at {
        if !path.insert(l.number) {
            break;
        }
        at = v[parent_key].as_str().and_then(|p| by_id.get(p)).copied();
    }
    if agent == "claude-code" {
        // A response written as several lines is replayed whole, with the results hung under
        // any of its lines.
        let on_path = |l: &Line| path.contains(&l.number);
        let responses: HashSet<&str> = entries
            .iter()
            .filter(|(l, v)| on_path(l) && v["type"] == "assistant")
            .filter_map(|(_, v)| v["message"]["id"].as_str())
            .collect();
        let members: Vec<(&Line, &Value)> = entries
            .iter()
            .filter(|(_, v)| {
                v["type"] == "assistant"
                    && v["message"]["id"]
                        .as_str()
                        .is_some_and(|m| responses.contains(m))
            })
            .copied()
            .collect();
        let member_ids: HashSet<&str> = members
            .iter()
            .filter_map(|(_, v)| v["uuid"].as_str())
            .collect();
        let results: Vec<u64> = entries
            .iter()
            .filter(|(_, v)| {
                let holds_result = (v["message"]["content"].as_array().into_iter().flatten())
                    .any(|b| b["type"] == "tool_result");
                v["type"] == "user"
                    && holds_result
                    && v["parentUuid"]
                        .as_str()
                        .is_some_and(|p| member_ids.contains(p))
            })
            .map(|(l, _)| l.number)
            .collect();
        path.extend(members.iter().map(|(l, _)| l.number));
        path.extend(results);
    }
    path
}

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(crate::common::recover_bin::recover_bin())
        .args(args)
        .output()
        .map_err(|e| format!("recover {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "recover {}: exit {:?}: {}",
            args.first().unwrap_or(&""),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn json(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{what}: not JSON: {e}"))
}

/// `recover import`, `classify --json` and `audit --json` against the count.
fn imported(agent: &str, file: &Path, lines: &[Line], dir: &Path) -> Result<(), String> {
    let journal = dir.join("journal");
    let (file_s, journal_s) = (file.to_str().unwrap(), journal.to_str().unwrap());
    run(&["import", "--from", agent, "--journal", journal_s, file_s])?;
    let classified = json(
        &run(&["classify", "--json", "--dry-run", journal_s])?,
        "classify",
    )?;
    let mut found: Vec<(String, Option<String>)> = (classified["calls"].as_array())
        .ok_or("classify --json: no calls")?
        .iter()
        .map(|c| {
            let id = c["call_id"].as_str().unwrap_or_default();
            // A second call of one id in one message is imported as `ID#2`.
            let id = id.split_once('#').map_or(id, |(base, _)| base);
            (
                id.to_owned(),
                c["classification"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let mut expected: Vec<(String, Option<String>)> = verdicts(agent, lines)
        .into_iter()
        .map(|(c, v)| (c.id, v.map(str::to_owned)))
        .collect();
    found.sort();
    expected.sort();
    if found != expected {
        let differ: Vec<String> = expected
            .iter()
            .filter(|e| !found.contains(e))
            .map(|(id, v)| format!("{id}: expected {v:?}"))
            .chain(
                found
                    .iter()
                    .filter(|f| !expected.contains(f))
                    .map(|(id, v)| format!("{id}: classified {v:?}")),
            )
            .take(6)
            .collect();
        return Err(format!(
            "{} calls classified, {} counted; differing: {}",
            found.len(),
            expected.len(),
            differ.join("; ")
        ));
    }
    let audit = json(&run(&["audit", "--json", journal_s])?, "audit")?;
    let kept_out: Vec<u64> = (audit["imported"]["damaged"].as_array())
        .ok_or("audit --json: no imported.damaged")?
        .iter()
        .filter_map(|d| d["line"].as_u64())
        .collect();
    let not_json: Vec<u64> = (lines.iter())
        .filter(|l| l.value.is_none())
        .map(|l| l.number)
        .collect();
    if kept_out != not_json {
        return Err(format!(
            "lines kept out {kept_out:?}, but the lines that are not JSON objects are {not_json:?}"
        ));
    }
    Ok(())
}

/// The line's JSON with its parent link taken out, to compare a relinked line with its
/// original.
fn without_parent(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("parentId");
        o.remove("parentUuid");
    }
    v
}

/// The call ids a line answers, when it is an answer the repair wrote (its text names the
/// verdict), with the code it names.
fn written_answers(agent: &str, v: &Value) -> Vec<(String, &'static str)> {
    let texts: Vec<(String, String)> = match agent {
        "codex" => vec![(
            v["payload"]["call_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            v["payload"]["output"].to_string(),
        )],
        "pi" => vec![(
            v["message"]["toolCallId"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            v["message"]["content"].to_string(),
        )],
        _ => (v["message"]["content"].as_array().into_iter().flatten())
            .map(|b| {
                let id = b["tool_use_id"].as_str().unwrap_or_default().to_owned();
                (id, b["content"].to_string())
            })
            .collect(),
    };
    texts
        .into_iter()
        .filter_map(|(id, text)| {
            let code = [UNKNOWN, NOT_STARTED]
                .into_iter()
                .find(|c| text.contains(c))?;
            Some((id, code))
        })
        .collect()
}

/// `recover repair`: the original untouched, every line kept or moved out, each answer with its
/// call's code, and nothing left unanswered on the path the agent replays.
fn repaired(agent: &str, file: &Path, lines: &[Line], dir: &Path) -> Result<(), String> {
    let before = std::fs::read(file).map_err(|e| e.to_string())?;
    let out = dir.join("repaired.jsonl");
    let (file_s, out_s) = (file.to_str().unwrap(), out.to_str().unwrap());
    run(&["repair", "--from", agent, "--out", out_s, file_s])?;
    if std::fs::read(file).map_err(|e| e.to_string())? != before {
        return Err("repair changed the original".into());
    }
    let copy = lines_of(&out)?;
    if let Some(bad) = copy.iter().find(|l| l.value.is_none()) {
        return Err(format!(
            "line {} of the copy is not a JSON object",
            bad.number
        ));
    }
    let quarantine = match std::fs::read(dir.join("repaired.jsonl.quarantine")) {
        Ok(bytes) => self::lines(&bytes),
        Err(_) => Vec::new(),
    };
    let moved: HashSet<&str> = quarantine.iter().map(|l| l.text.as_str()).collect();
    for l in lines.iter().filter(|l| l.value.is_none()) {
        if !moved.contains(l.text.as_str()) {
            return Err(format!(
                "line {} is not JSON, yet not in the quarantine",
                l.number
            ));
        }
    }

    // The copy is the original's kept lines in order, some relinked, with answers between.
    let expected: HashMap<String, &'static str> = verdicts(agent, lines)
        .into_iter()
        .filter_map(|(c, v)| Some((c.id, v?)))
        .collect();
    let mut kept = lines
        .iter()
        .filter(|l| l.value.is_some() && !moved.contains(l.text.as_str()))
        .peekable();
    for l in &copy {
        let v = l.value.as_ref().expect("checked above");
        if let Some(next) = kept.peek() {
            let same = next.text == l.text
                || without_parent(next.value.as_ref().expect("kept lines parse"))
                    == without_parent(v);
            if same {
                kept.next();
                continue;
            }
        }
        if agent == "pi" && l.number == 1 && v["type"] == "session" {
            continue; // the header a file without one gets
        }
        for (id, code) in written_answers(agent, v) {
            if expected.get(&id) != Some(&code) {
                return Err(format!(
                    "line {} of the copy answers {id} with {code}; the count says {:?}",
                    l.number,
                    expected.get(&id)
                ));
            }
        }
    }
    if let Some(lost) = kept.next() {
        return Err(format!(
            "line {} is neither in the copy nor moved out",
            lost.number
        ));
    }

    // On the path the agent replays: every call it sends has exactly one answer, and (pi,
    // Claude Code) every answer its call (codex drops an output of no call itself).
    let path = replayed(agent, &copy);
    if agent == "pi"
        && copy
            .first()
            .and_then(|l| l.value.as_ref())
            .map(|v| &v["type"])
            != Some(&Value::from("session"))
    {
        return Err("the copy's first line is not pi's session header".into());
    }
    let mut sent: HashMap<String, i64> = HashMap::new();
    for l in copy.iter().filter(|l| path.contains(&l.number)) {
        let (calls, outputs) = line_items(agent, l.value.as_ref().expect("checked"), l.number);
        for c in calls.into_iter().filter(|c| !c.never_run) {
            *sent.entry(c.id).or_default() += 1;
        }
        for o in outputs {
            *sent.entry(o.id).or_default() -= 1;
        }
    }
    let unbalanced: Vec<String> = sent
        .iter()
        .filter(|(_, n)| **n > 0 || (agent != "codex" && **n < 0))
        .map(|(id, n)| match n {
            n if *n > 0 => format!("{id} without an answer"),
            _ => format!("an answer to {id}, which is not on the path"),
        })
        .collect();
    if !unbalanced.is_empty() {
        return Err(format!(
            "on the path the agent replays: {}",
            unbalanced.join("; ")
        ));
    }
    Ok(())
}

fn lines_of(path: &Path) -> Result<Vec<Line>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(lines(&bytes))
}

fn check(agent: &str, file: &Path) -> Result<(), String> {
    let lines = lines_of(file)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    imported(agent, file, &lines, dir.path()).map_err(|e| format!("import: {e}"))?;
    repaired(agent, file, &lines, dir.path()).map_err(|e| format!("repair: {e}"))
}

/// Imports and repairs every session file under `root`; fails naming each that disagrees.
pub fn run_all(root: &Path) {
    let mut jobs: Vec<(&str, PathBuf)> = Vec::new();
    for agent in AGENTS {
        let dir = root.join(agent);
        jobs.extend(crate::files(&dir, ".jsonl").into_iter().map(|f| (agent, f)));
    }
    assert!(!jobs.is_empty(), "no session file under {}", root.display());
    let total = jobs.len();
    let name = |(_, file): &(&str, PathBuf)| {
        let name = file.strip_prefix(root).unwrap_or(file);
        name.display().to_string()
    };
    let failures = crate::on_two_threads(&jobs, name, |(agent, file)| check(agent, file));
    println!("files in agreement: {} of {total}", total - failures.len());
    assert!(
        failures.is_empty(),
        "{} of {total} session files disagree with the independent count:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
