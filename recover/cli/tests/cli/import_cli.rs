//! `recover import` through the binary: another agent's session file becomes a journal on which
//! `classify`, `rebuild` (all four formats) and `audit` (text, JSON, HTML) tell what the file
//! proves; the source is never modified, a journal that holds records is never written to, and
//! an import cut short at any record never says a call did not start.

use crate::common;
use common::imported::{
    classify, cut, fixture, import, line_offsets, rebuilt, s, AGENTS, FIXTURES, FORMATS,
};
use common::{recover, text};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The fixture's hand-written verdicts, as `classify --json` words them.
fn expected(agent: &str, name: &str) -> Vec<(String, Value)> {
    let path = fixture(agent, name).with_extension("expected.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let calls = v["calls"].as_object().expect("calls by id");
    let mut out: Vec<(String, Value)> = calls
        .iter()
        .map(|(id, verdict)| {
            let c = match verdict.as_str() {
                Some("result") => Value::Null,
                Some("unknown") => Value::from("TOOL_OUTCOME_UNKNOWN"),
                Some("not_started") => Value::from("TOOL_NOT_STARTED"),
                other => panic!("{agent}/{name}: verdict {other:?}"),
            };
            (id.clone(), c)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn each_fixture_imports_with_the_verdicts_its_file_proves() {
    let tmp = tempfile::tempdir().unwrap();
    for agent in AGENTS {
        for name in FIXTURES {
            let journal = tmp.path().join(format!("{agent}-{name}"));
            let said = import(agent, &fixture(agent, name), &journal);
            let last = said.lines().last().unwrap_or_default();
            assert!(last.starts_with("imported "), "{said}");
            let mut got = classify(&journal);
            got.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(got, expected(agent, name), "{agent}/{name}");
            // A whole import is balanced and closed: classify has nothing to append.
            let v = recover(&["verify", s(&journal)]);
            assert!(v.status.success(), "{agent}/{name}: {}", text(&v.stderr));
            assert!(text(&v.stdout).contains("clean"), "{}", text(&v.stdout));
        }
    }
}

#[test]
fn rebuilt_histories_of_every_import_validate_in_all_four_formats() {
    let tmp = tempfile::tempdir().unwrap();
    for agent in AGENTS {
        for name in FIXTURES {
            let journal = tmp.path().join(format!("{agent}-{name}"));
            import(agent, &fixture(agent, name), &journal);
            let unknown = classify(&journal)
                .iter()
                .filter(|(_, c)| c == "TOOL_OUTCOME_UNKNOWN")
                .count();
            for format in FORMATS {
                let what = format!("{agent}/{name}");
                let (body, noted) = rebuilt(&journal, format, &[], &what);
                // No note: the body is whole as it is (tools declared, one result per call).
                assert_eq!(noted, "", "{what} {format}");
                assert_eq!(
                    body.to_string().matches("TOOL_OUTCOME_UNKNOWN").count(),
                    unknown,
                    "{agent}/{name} {format}: one unknown result per unknown call"
                );
            }
        }
    }
}

#[test]
fn a_repaired_copy_imports_with_no_orphan_and_rebuilds_valid() {
    let tmp = tempfile::tempdir().unwrap();
    for agent in AGENTS {
        for name in FIXTURES {
            let copy = tmp.path().join(format!("{agent}-{name}.jsonl"));
            let o = recover(&[
                "repair",
                "--from",
                agent,
                s(&fixture(agent, name)),
                "--out",
                s(&copy),
            ]);
            assert!(o.status.success(), "{agent}/{name}: {}", text(&o.stderr));
            let journal = tmp.path().join(format!("{agent}-{name}.journal"));
            import(agent, &copy, &journal);
            for (id, c) in classify(&journal) {
                // Every call the agent replays now has an output; pi's calls of `error` and
                // `aborted` messages stay as pi wants them: provably not run.
                let pi_dropped = agent == "pi" && c == "TOOL_NOT_STARTED";
                assert!(
                    c.is_null() || pi_dropped,
                    "{agent}/{name}: {id} is {c} after repair"
                );
            }
            for format in FORMATS {
                rebuilt(&journal, format, &["--dry-run"], &format!("{agent}/{name}"));
            }
        }
    }
}

#[test]
fn the_audit_of_an_import_names_each_calls_source_line_and_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("j");
    import("pi", &fixture("pi", "length_cut"), &journal);
    let o = recover(&["audit", s(&journal), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let calls = v["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    let decisions: Vec<&str> = calls
        .iter()
        .map(|c| c["decision"].as_str().unwrap())
        .collect();
    assert!(
        decisions[0].starts_with("imported from line 4 (byte 458); no output; may have run"),
        "{decisions:?}"
    );
    assert!(
        decisions[1].starts_with("imported from line 5 (byte 1022); no output; never ran"),
        "{decisions:?}"
    );
    assert_eq!(v["totals"]["not_started"], 2, "{}", v["totals"]);
    assert_eq!(v["totals"]["outcome_unknown"], 1, "{}", v["totals"]);

    // The picture: the source named in the header, every call drawn, how it ended told.
    let page = tmp.path().join("audit.html");
    let o = recover(&["audit", s(&journal), "--html", s(&page)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("pi's session file"), "the source is named");
    assert!(
        html.contains(r#""how":"imported""#),
        "the ending says imported"
    );
    for id in ["toolu_len", "toolu_err", "toolu_abt"] {
        assert!(html.contains(id), "{id} is on the page");
    }
    assert!(!html.contains("http://") && !html.contains("https://"));
}

#[test]
fn import_never_modifies_its_source_and_never_writes_over_a_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rollout.jsonl");
    std::fs::copy(fixture("codex", "torn_tail"), &file).unwrap();
    let before = std::fs::read(&file).unwrap();
    let journal = tmp.path().join("j");
    import("codex", &file, &journal);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the source is untouched"
    );

    // A second import into the same journal is refused, and the journal stays as it was.
    let records = |j: &Path| {
        let o = recover(&["verify", s(j)]);
        text(&o.stdout)
    };
    let was = records(&journal);
    let o = recover(&[
        "import",
        "--from",
        "codex",
        s(&file),
        "--journal",
        s(&journal),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("not empty"), "{}", text(&o.stderr));
    assert_eq!(records(&journal), was);

    // What is not a session file is named.
    let o = recover(&[
        "import",
        "--from",
        "pi",
        "/dev/zero",
        "--journal",
        s(&tmp.path().join("z")),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("/dev/zero: not a regular file"),
        "{}",
        text(&o.stderr)
    );
    let missing = tmp.path().join("missing.jsonl");
    let o = recover(&[
        "import",
        "--from",
        "pi",
        s(&missing),
        "--journal",
        s(&tmp.path().join("m")),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("missing.jsonl: cannot read"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn an_import_cut_short_at_any_record_never_says_a_call_did_not_start() {
    let tmp = tempfile::tempdir().unwrap();
    for (agent, name) in [
        ("codex", "parallel_missing"),
        ("pi", "length_cut"),
        ("claude-code", "parallel_missing"),
    ] {
        let whole = tmp.path().join(format!("{agent}-whole"));
        import(agent, &fixture(agent, name), &whole);
        let full: std::collections::HashMap<String, Value> = classify(&whole).into_iter().collect();
        let records: u64 = text(&recover(&["verify", s(&whole)]).stdout)
            .split_whitespace()
            .rev()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("verify prints the record count");
        for keep in 1..records {
            let part = tmp.path().join(format!("{agent}-{keep}"));
            cut(&whole, &part, keep as usize);
            for (id, c) in classify(&part) {
                // What the whole import says, or unknown: never a "did not start" it did not
                // prove.
                let proven = full.get(&id).cloned().unwrap_or(Value::Null);
                assert!(
                    c == proven || c == "TOOL_OUTCOME_UNKNOWN",
                    "{agent}/{name} cut after {keep} records: {id} is {c}, the file proves {proven}"
                );
            }
            // And a rebuild of the cut import is still a valid history.
            let o = recover(&["rebuild", s(&part), "--format", "anthropic", "--dry-run"]);
            assert!(
                o.status.success(),
                "{agent} cut {keep}: {}",
                text(&o.stderr)
            );
        }
    }
}

/// A codex rollout of `calls` calls, every other one with its output, one step per output.
fn big_rollout(path: &Path, calls: usize) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let head = std::fs::read_to_string(fixture("codex", "parallel_missing")).unwrap();
    for line in head.lines().take(3) {
        writeln!(f, "{line}").unwrap();
    }
    for i in 0..calls {
        writeln!(
            f,
            r#"{{"timestamp":"2026-11-20T10:00:03.000Z","type":"response_item","payload":{{"type":"function_call","name":"shell","arguments":"{{\"command\":[\"touch\",\"f{i}\"]}}","call_id":"call_{i}"}}}}"#
        )
        .unwrap();
        if i.is_multiple_of(2) {
            writeln!(
                f,
                r#"{{"timestamp":"2026-11-20T10:00:03.500Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"call_{i}","output":"done {i}"}}}}"#
            )
            .unwrap();
        }
    }
    f.flush().unwrap();
}

#[test]
fn an_import_killed_at_a_random_moment_is_recovered_without_a_false_not_started() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rollout.jsonl");
    big_rollout(&file, 40_000);
    // How long a whole import takes here: the kills land inside it.
    let started = std::time::Instant::now();
    import("codex", &file, &tmp.path().join("whole"));
    let whole_ms = started.elapsed().as_millis().max(10) as u64;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut killed_midway = 0;
    for k in 0..4u64 {
        // splitmix64: a different moment each try, printed so a failure can be replayed.
        let mut z = seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let after_ms = (z ^ (z >> 31)) % whole_ms;
        let journal = tmp.path().join(format!("j{k}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_recover"))
            .args([
                "import",
                "--from",
                "codex",
                s(&file),
                "--journal",
                s(&journal),
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        if !status.success() {
            killed_midway += 1;
        }
        if !journal.exists() {
            continue; // killed before it made the directory: nothing to read
        }
        // classify writes: it balances the cut import with a recovery.
        let o = recover(&["classify", s(&journal), "--json"]);
        assert!(
            o.status.success(),
            "seed {seed} try {k} ({after_ms} ms): {}",
            text(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        for c in v["calls"].as_array().unwrap() {
            let id = c["call_id"].as_str().unwrap();
            let n: usize = id.trim_start_matches("call_").parse().unwrap();
            // codex never proves a call did not run; an output recorded is its result.
            let want = if n.is_multiple_of(2) {
                Value::Null
            } else {
                Value::from("TOOL_OUTCOME_UNKNOWN")
            };
            let c = &c["classification"];
            assert!(
                *c == want || *c == "TOOL_OUTCOME_UNKNOWN",
                "seed {seed} try {k} ({after_ms} ms): {id} is {c}"
            );
        }
        rebuilt(
            &journal,
            "openai-chat",
            &[],
            &format!("seed {seed} try {k}"),
        );
    }
    eprintln!("seed {seed}: {killed_midway} of 4 imports killed before they finished ({whole_ms} ms whole)");
}

#[test]
fn a_resume_refuses_an_imported_journal_even_when_recovery_left_it_open() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    import("codex", &fixture("codex", "normal"), &whole);
    // Cut before `session/close` and balanced by recover: no longer closed, still imported.
    let records: u64 = text(&recover(&["verify", s(&whole)]).stdout)
        .split_whitespace()
        .rev()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    let part = tmp.path().join("part");
    cut(&whole, &part, records as usize - 3);
    let o = recover(&["classify", s(&part)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let workspace = tmp.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let e = match runtime::Session::builder(&workspace, &part).resume() {
        Ok(_) => panic!("an imported journal was resumed"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("imported from codex's session file") && e.contains("cannot be resumed"),
        "{e}"
    );
}

mod prefixes {
    //! For all prefixes: any prefix of any fixture (a crash of the agent at any byte) imports
    //! without a panic into a journal that replays, and a call whose output the prefix holds
    //! whole is never reported as not started or unknown.

    use super::{fixture, AGENTS, FIXTURES};
    use import::{Agent, Verdict};
    use proptest::prelude::*;
    use recover::import_into;

    fn cases() -> u32 {
        // Bounded in CI; the crate's own test cuts every fixture at every byte.
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(48)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        #[test]
        fn any_prefix_imports_and_keeps_each_recorded_output(
            agent in 0usize..3,
            name in 0usize..7,
            cut in 0.0f64..=1.0,
        ) {
            let (agent, name) = (AGENTS[agent], FIXTURES[name]);
            let bytes = std::fs::read(fixture(agent, name)).unwrap();
            let prefix = &bytes[..(bytes.len() as f64 * cut) as usize];
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("j");
            let storage = std::sync::Arc::new(journal::FsStorage::create(&dir).unwrap());
            let backend = journal::Backend::Files(storage);
            let a = Agent::from_name(agent).unwrap();
            import_into(&backend, a, "prefix.jsonl", import::Input::Bytes(prefix), 1_700_000_000_000)
                .unwrap();
            let recovered = recover::Recovery::of(dir.as_path()).run()
                .expect("an imported prefix replays");
            let read = import::read(a, prefix).unwrap();
            for call in &read.calls {
                if let Verdict::Result { .. } = call.verdict {
                    let report = recovered
                        .analysis
                        .calls
                        .iter()
                        .find(|r| r.call.call_id == call.id)
                        .expect("every call is imported");
                    prop_assert_eq!(
                        report.classification,
                        None,
                        "{}/{} cut at {}: {} has its output",
                        agent,
                        name,
                        prefix.len(),
                        &call.id
                    );
                }
            }
            prop_assert_eq!(recovered.analysis.calls.len(), read.calls.len());
        }
    }
}

#[test]
fn damaged_lines_are_named_where_they_are_and_kept_in_the_journal() {
    let tmp = tempfile::tempdir().unwrap();
    for (agent, name, follows) in [
        ("codex", "bad_middle", "good lines follow it"),
        ("pi", "torn_tail", "nothing good follows it"),
    ] {
        let file = fixture(agent, name);
        let bytes = std::fs::read(&file).unwrap();
        let offsets = line_offsets(&bytes);
        let journal = tmp.path().join(format!("{agent}-{name}"));
        let said = import(agent, &file, &journal);
        let kept_out: Vec<&str> = said.lines().filter(|l| l.starts_with("kept out")).collect();
        assert!(!kept_out.is_empty(), "{said}");
        let replay = common::replay_dir(&journal);
        let source = replay.imported.expect("import/source");
        assert_eq!(source.agent, agent);
        assert_eq!(source.size_bytes, bytes.len() as u64);
        assert_eq!(source.damaged.len(), kept_out.len(), "{said}");
        for (d, line) in source.damaged.iter().zip(&kept_out) {
            assert_eq!(
                d.offset,
                offsets[d.line as usize - 1],
                "{agent}/{name}: {d:?}"
            );
            assert!(
                line.starts_with(&format!("kept out line {} (byte {},", d.line, d.offset))
                    && line.ends_with(follows),
                "{line}"
            );
        }
    }
}

#[test]
fn every_imported_call_names_the_lines_that_recorded_it_and_their_times() {
    let tmp = tempfile::tempdir().unwrap();
    for agent in AGENTS {
        for name in FIXTURES {
            let file = fixture(agent, name);
            let bytes = std::fs::read(&file).unwrap();
            let offsets = line_offsets(&bytes);
            let line_text = |n: u64| {
                let start = offsets[n as usize - 1] as usize;
                let end = offsets.get(n as usize).map_or(bytes.len(), |&o| o as usize);
                String::from_utf8_lossy(&bytes[start..end]).into_owned()
            };
            let journal = tmp.path().join(format!("{agent}-{name}"));
            import(agent, &file, &journal);
            let replay = common::replay_dir(&journal);
            for c in replay.calls() {
                let i = c.imported.as_ref().expect("an imported call");
                for l in [i.line, i.outcome_line] {
                    let l = l.expect("each of its records stands under a line");
                    assert_eq!(l.offset, offsets[l.line as usize - 1], "{agent}/{name}");
                    assert!(
                        line_text(l.line).contains(&c.call.call_id),
                        "{agent}/{name}: line {} does not name {}",
                        l.line,
                        c.call.call_id
                    );
                }
            }
        }
    }
    // The times are the file's own: call_p2's line says 2026-11-20T10:00:02.210Z.
    let journal = tmp.path().join("codex-parallel_missing");
    let replay = common::replay_dir(&journal);
    let p2 = replay
        .calls()
        .find(|c| c.call.call_id == "call_p2")
        .unwrap();
    assert_eq!(p2.received_at_ms, 1_795_168_802_210);
}
