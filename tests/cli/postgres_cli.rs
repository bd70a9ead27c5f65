//! The binaries against a real PostgreSQL (the test server of `tooljournal-pg`): a journal in
//! the store must be the same journal as one in a directory, as every command shows it.
//!
//! Each transcript runs twice, into a directory and into a PostgreSQL session, from identical
//! workspaces, and every reading command (`journal verify|dump`, `recover verify|classify|
//! rebuild|audit`) must print the same thing for both once the journal's name, the session id
//! and times are masked (`common/normalise.rs`). Then `journal copy` both ways, `store init`,
//! `sessions --store`, and a closed session's lease.

// This file's own helpers, kept in `tests/common/` beside the shared ones but not in `common`:
// `normalise.rs` carries a unit test of its own, which would run again in every test binary
// that declares `common`.
#[path = "../common/normalise.rs"]
mod normalise;
#[path = "../common/pgcli.rs"]
mod pgcli;

use normalise::normalise;
use pgcli::{recover, tooljournal, Fixture, Ran};
use std::path::Path;

const FORMATS: [&str; 4] = ["openai-chat", "openai-responses", "anthropic", "gemini"];

/// A session URL on the shared server, its name unique within this test binary.
fn session_url(name: &str) -> String {
    pg::testing::shared().url(name)
}

/// The shared server's store (no session).
fn shared_store() -> String {
    pgcli::db_url("postgres", None)
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// One reading command: which binary, its arguments with `J` where the journal goes.
type Step = (&'static str, Vec<&'static str>);

/// Every reading command the brief compares, in the order run: the read-only ones first, then
/// those that append the `recovery` event (the same on both backends), then a second look.
fn reading_steps() -> Vec<Step> {
    let mut steps: Vec<Step> = vec![
        ("tooljournal", vec!["journal", "verify", "J"]),
        ("tooljournal", vec!["journal", "dump", "J"]),
        ("recover", vec!["verify", "J"]),
        ("recover", vec!["classify", "--dry-run", "J"]),
        ("recover", vec!["classify", "--dry-run", "--json", "J"]),
        ("recover", vec!["classify", "J"]),
        ("recover", vec!["classify", "--json", "J"]),
    ];
    for format in FORMATS {
        steps.push(("recover", vec!["rebuild", "--format", format, "J"]));
    }
    steps.push(("recover", vec!["audit", "J"]));
    steps.push(("recover", vec!["audit", "--json", "J"]));
    steps.push(("tooljournal", vec!["journal", "verify", "J"]));
    steps.push(("tooljournal", vec!["journal", "dump", "J"]));
    steps
}

fn run_step(step: &Step, journal: &str, state: &Path) -> Ran {
    let args: Vec<&str> = step
        .1
        .iter()
        .map(|a| if *a == "J" { journal } else { a })
        .collect();
    match step.0 {
        "recover" => recover(&args),
        _ => tooljournal(&args, state),
    }
}

/// The step's output with what runs may differ in masked.
fn masked(ran: &Ran, journal: &str) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        ran.code,
        normalise(&ran.stdout, journal),
        normalise(&ran.stderr, journal)
    )
}

/// The first line where `a` and `b` differ, for a message that points at it.
fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        if la.get(i) != lb.get(i) {
            return format!(
                "line {}:\n  dir: {:?}\n  pg:  {:?}",
                i + 1,
                la.get(i),
                lb.get(i)
            );
        }
    }
    "no line differs".into()
}

/// A dump's lines with offsets and lengths taken out.
fn without_positions(masked: &str) -> String {
    masked
        .lines()
        .map(|l| l.split(" offset=").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs every reading step on both journals and fails listing every step whose masked output
/// differs (with its first differing line) or that did not exit 0.
fn assert_same_readings(dir: &str, url: &str, state: &Path) {
    let mut problems = Vec::new();
    for step in reading_steps() {
        let (a, b) = (run_step(&step, dir, state), run_step(&step, url, state));
        let name = format!("{} {}", step.0, step.1.join(" "));
        if a.code != Some(0) || b.code != Some(0) {
            problems.push(format!("{name}: dir {a}\npg {b}"));
            continue;
        }
        let (mut ma, mut mb) = (masked(&a, dir), masked(&b, url));
        // Two runs' records differ in length where they hold a duration or a pid (a bash
        // result's meta, in JSON): positions are compared where the records are the same ones,
        // a journal and its copy (`journal_copy_round_trips_every_transcript_through_postgres`).
        if step.1.contains(&"dump") {
            (ma, mb) = (without_positions(&ma), without_positions(&mb));
        }
        if ma != mb {
            problems.push(format!("{name}: {}", first_difference(&ma, &mb)));
        }
    }
    assert!(
        problems.is_empty(),
        "{dir} and {url} read differently:\n{}",
        problems.join("\n")
    );
}

/// Runs `script` from identical workspaces into a directory and into PostgreSQL session `name`.
fn both_backends(script: &str, name: &str) -> (Fixture, Fixture, String, String) {
    let (fd, fp) = (pgcli::fixture(), pgcli::fixture());
    let dir = fd.path("journal");
    let dir = path_str(&dir).to_string();
    let url = session_url(name);
    if script == "killed.jsonl" {
        // A short lease, so the killed writer's lease runs out soon: until it does the session
        // is (rightly) live, which a directory's released lock never is after a kill.
        let leased = format!("{url}&lease_ms=1000");
        pgcli::run_killed(&fd, &dir);
        pgcli::run_killed(&fp, &leased);
        pgcli::wait_not_running(&shared_store(), &url, &fp.state);
    } else {
        pgcli::run_script(&fd, script, &dir);
        pgcli::run_script(&fp, script, &url);
    }
    (fd, fp, dir, url)
}

fn same_output_on_both_backends(script: &str, name: &str) {
    let (fd, _fp, dir, url) = both_backends(script, name);
    // Something to compare: the run journaled calls, and recovery reads them.
    let audit = recover(&["audit", "--json", &url]);
    assert_eq!(audit.code, Some(0), "{audit}");
    assert!(audit.stdout.contains("\"call_id\""), "{audit}");
    assert_same_readings(&dir, &url, &fd.state);
}

#[test]
fn an_import_reads_the_same_from_a_directory_and_from_postgres() {
    for (agent, name) in [
        ("codex", "parallel_missing"),
        ("pi", "length_cut"),
        ("claude-code", "bad_middle"),
    ] {
        let f = pgcli::fixture();
        let file = pgcli::data(&format!("import/{agent}/{name}.jsonl"));
        let dir = f.path("journal");
        let dir = path_str(&dir).to_string();
        let url = session_url(&format!("import-{agent}-{name}"));
        for journal in [&dir, &url] {
            let ran = recover(&[
                "import",
                "--from",
                agent,
                path_str(&file),
                "--journal",
                journal,
            ]);
            assert_eq!(ran.code, Some(0), "{agent}/{name} into {journal}: {ran}");
        }
        // A second import into the session is refused, as into the directory.
        let again = recover(&[
            "import",
            "--from",
            agent,
            path_str(&file),
            "--journal",
            &url,
        ]);
        assert_eq!(again.code, Some(1), "{again}");
        assert!(again.stderr.contains("already holds a journal"), "{again}");
        assert_same_readings(&dir, &url, &f.state);
    }
}

#[test]
fn basic_reads_the_same_from_a_directory_and_from_postgres() {
    same_output_on_both_backends("basic.jsonl", "same-basic");
}

#[test]
fn cancel_reads_the_same_from_a_directory_and_from_postgres() {
    same_output_on_both_backends("cancel.jsonl", "same-cancel");
}

#[test]
fn killed_reads_the_same_from_a_directory_and_from_postgres() {
    let (fd, _fp, dir, url) = both_backends("killed.jsonl", "same-killed");
    let classify = recover(&["classify", "--dry-run", &url]);
    assert!(
        classify.stdout.contains("TOOL_OUTCOME_UNKNOWN") && !classify.stdout.contains("LIVE"),
        "{classify}"
    );
    assert_same_readings(&dir, &url, &fd.state);
}

/// The record count `journal verify` gives (`…: clean: N records`).
fn record_count(journal: &str, state: &Path) -> u64 {
    let ran = tooljournal(&["journal", "verify", journal], state);
    assert_eq!(ran.code, Some(0), "{ran}");
    ran.stdout
        .split("clean: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no record count in {ran}"))
}

fn copy(src: &str, dst: &str, state: &Path) -> Ran {
    tooljournal(&["journal", "copy", src, dst], state)
}

/// Copies `src` to `dst`; it must exit 0 and say how many records it copied and checked.
fn copy_ok(src: &str, dst: &str, records: u64, state: &Path) -> Ran {
    let ran = copy(src, dst, state);
    assert_eq!(ran.code, Some(0), "copy {src} -> {dst}: {ran}");
    let said = format!("{records} records copied and checked");
    assert!(ran.stdout.contains(&said), "wanted {said:?}: {ran}");
    ran
}

/// The recovery's view of a journal, masked only for its name (a copy keeps the session id).
fn recovery_view(journal: &str, state: &Path) -> Vec<String> {
    let mut steps: Vec<Step> = vec![
        ("recover", vec!["classify", "--json", "J"]),
        ("tooljournal", vec!["journal", "dump", "J"]),
    ];
    for format in FORMATS {
        steps.push(("recover", vec!["rebuild", "--format", format, "J"]));
    }
    steps
        .iter()
        .map(|step| {
            let ran = run_step(step, journal, state);
            assert_eq!(ran.code, Some(0), "{step:?} on {journal}: {ran}");
            let out = format!("{}\n{}", ran.stdout, ran.stderr);
            format!("{step:?}\n{}", out.replace(journal, "<JOURNAL>"))
        })
        .collect()
}

/// Every file under `dir` with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_file())
        .map(|p| (p.display().to_string(), std::fs::read(&p).expect("bytes")))
        .collect();
    files.sort();
    files
}

#[test]
fn journal_copy_round_trips_every_transcript_through_postgres() {
    for script in ["basic.jsonl", "cancel.jsonl", "killed.jsonl"] {
        let f = pgcli::fixture();
        let (src, back) = (f.path("src"), f.path("back"));
        let (src, back) = (path_str(&src), path_str(&back));
        if script == "killed.jsonl" {
            pgcli::run_killed(&f, src);
        } else {
            pgcli::run_script(&f, script, src);
        }
        let url = session_url(&format!("copy-{script}"));
        let records = record_count(src, &f.state);
        copy_ok(src, &url, records, &f.state);
        copy_ok(&url, back, records, &f.state);
        // The same journal three times: read-only views first, then the writing recoveries.
        let (a, b, c) = (
            recovery_view(src, &f.state),
            recovery_view(&url, &f.state),
            recovery_view(back, &f.state),
        );
        for (i, x) in a.iter().enumerate() {
            assert_eq!(x, &b[i], "{script}: {src} vs {url}");
            assert_eq!(x, &c[i], "{script}: {src} vs {back}");
        }
    }
}

#[test]
fn journal_copy_refuses_a_destination_that_holds_a_journal_and_changes_nothing() {
    let f = pgcli::fixture();
    let (src, dst) = (f.path("src"), f.path("dst"));
    let (src, dst) = (path_str(&src), path_str(&dst));
    pgcli::run_script(&f, "cancel.jsonl", src);
    let url = session_url("copy-refused");
    let records = record_count(src, &f.state);
    copy_ok(src, &url, records, &f.state);
    copy_ok(src, dst, records, &f.state);

    let before = snapshot(Path::new(dst));
    let refused = copy(&url, dst, &f.state);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains(dst), "names {dst}: {refused}");
    assert_eq!(
        snapshot(Path::new(dst)),
        before,
        "the directory was changed"
    );

    let dump_before = tooljournal(&["journal", "dump", &url], &f.state);
    let refused = copy(dst, &url, &f.state);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains(&url), "names {url}: {refused}");
    assert_eq!(record_count(&url, &f.state), records, "rows were added");
    assert_eq!(
        tooljournal(&["journal", "dump", &url], &f.state),
        dump_before
    );
}

/// The journal directory's last segment file.
fn last_segment(dir: &Path) -> std::path::PathBuf {
    let mut segments: Vec<_> = std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "segment"))
        .collect();
    segments.sort();
    segments.pop().expect("a segment file")
}

/// A copy of the directory journal `src` at `dst` (files only: a journal directory is flat).
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for (path, bytes) in snapshot(src) {
        let name = Path::new(&path).file_name().expect("a file name");
        std::fs::write(dst.join(name), bytes).expect("write");
    }
}

#[test]
fn journal_copy_takes_the_records_before_a_torn_tail_and_refuses_corruption() {
    let f = pgcli::fixture();
    let src = f.path("src");
    pgcli::run_script(&f, "basic.jsonl", path_str(&src));
    let records = record_count(path_str(&src), &f.state);

    let dump = tooljournal(&["journal", "dump", "--json", path_str(&src)], &f.state);
    let rows: Vec<serde_json::Value> = dump
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let at = |row: &serde_json::Value, key: &str| row[key].as_u64().expect("a number") as usize;
    let last = rows.last().expect("records");
    let end = at(last, "offset") + at(last, "length");

    // The start of a frame where the next record would go (a cleanly closed journal ends at
    // its last record, so the garbage is appended; a journal left preallocated has zeros
    // there, which it overwrites).
    let torn = f.path("torn");
    copy_dir(&src, &torn);
    let segment = last_segment(&torn);
    let mut bytes = std::fs::read(&segment).expect("segment");
    bytes.resize(bytes.len().max(end + 6), 0);
    bytes[end..end + 6].copy_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&segment, &bytes).expect("torn");
    let url = session_url("copy-torn");
    let ran = copy_ok(path_str(&torn), &url, records, &f.state);
    assert!(
        ran.stdout.contains(&format!(
            "torn tail at segment 00000000000000000000.segment offset {end}"
        )),
        "{ran}"
    );
    assert_eq!(record_count(&url, &f.state), records);

    // A payload byte of a record in the middle: records after it are intact, so this is
    // corruption, not a torn tail.
    let corrupt = f.path("corrupt");
    copy_dir(&src, &corrupt);
    let offset = at(&rows[rows.len() / 2], "offset");
    let segment = last_segment(&corrupt);
    let mut bytes = std::fs::read(&segment).expect("segment");
    bytes[offset + 12] ^= 0x10;
    std::fs::write(&segment, &bytes).expect("corrupt");
    let url = session_url("copy-corrupt");
    let ran = copy(path_str(&corrupt), &url, &f.state);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert!(ran.stderr.contains(path_str(&corrupt)), "{ran}");
}

#[test]
fn store_init_creates_a_store_then_finds_it_current() {
    let state = tempfile::tempdir().expect("temp");
    let url = pgcli::createdb("init_fresh");
    let first = tooljournal(&["store", "init", &url], state.path());
    assert_eq!(first.code, Some(0), "{first}");
    assert!(
        first.stdout.contains("created, schema version 1"),
        "{first}"
    );
    let second = tooljournal(&["store", "init", &url], state.path());
    assert_eq!(second.code, Some(0), "{second}");
    assert!(
        second.stdout.contains("already at schema version 1"),
        "{second}"
    );
    // A session in the new store works at once.
    let f = pgcli::fixture();
    pgcli::run_script(&f, "cancel.jsonl", &format!("{url}&session=first"));
}

const SECRET: &str = "pw-s3cret-4711";

/// Runs `args` and checks: exit 1, stderr names `named` (the URL without its password), and
/// the password appears nowhere.
fn assert_refused(binary: &str, args: &[&str], named: &str) {
    let state = tempfile::tempdir().expect("temp");
    let ran = match binary {
        "recover" => recover(args),
        _ => tooljournal(args, state.path()),
    };
    let what = format!("{binary} {}", args.join(" "));
    assert_eq!(ran.code, Some(1), "{what}: {ran}");
    assert!(ran.stderr.contains(named), "{what}: names {named}: {ran}");
    assert!(
        !ran.stderr.contains(SECRET) && !ran.stdout.contains(SECRET),
        "{what}: the password is printed: {ran}"
    );
}

#[test]
fn bad_store_urls_exit_1_naming_the_url_without_its_password() {
    let socket = pg::testing::shared().socket_dir().display().to_string();
    let bad_scheme = format!("mysql://postgres:{SECRET}@/postgres?host={socket}");
    let bad_scheme_named = format!("mysql://postgres@/postgres?host={socket}");
    assert_refused(
        "tooljournal",
        &["store", "init", &bad_scheme],
        &bad_scheme_named,
    );

    let no_session = format!("postgres://postgres:{SECRET}@/postgres?host={socket}");
    let no_session_named = format!("postgres://postgres@/postgres?host={socket}");
    for args in [
        vec!["journal", "verify", no_session.as_str()],
        vec!["journal", "dump", no_session.as_str()],
        vec!["resume", "--journal", no_session.as_str()],
    ] {
        assert_refused("tooljournal", &args, &no_session_named);
    }
    assert_refused("recover", &["classify", &no_session], &no_session_named);

    let gone = "/nonexistent-socket-dir-for-tooljournal";
    let no_host = format!("postgres://postgres:{SECRET}@/postgres?host={gone}");
    let no_host_named = format!("postgres://postgres@/postgres?host={gone}");
    let no_host_session = format!("{no_host}&session=x");
    let no_host_session_named = format!("{no_host_named}&session=x");
    assert_refused("tooljournal", &["store", "init", &no_host], &no_host_named);
    assert_refused(
        "tooljournal",
        &["sessions", "--store", &no_host],
        &no_host_named,
    );
    assert_refused(
        "tooljournal",
        &["journal", "verify", &no_host_session],
        &no_host_session_named,
    );
    assert_refused(
        "recover",
        &["audit", &no_host_session],
        &no_host_session_named,
    );
}

/// A URL of another scheme given where a journal or a store goes is taken for a directory
/// path: its error prints the password, and `sessions --store` lists nothing and exits 0.
#[test]
fn a_journal_url_of_another_scheme_is_refused_without_its_password() {
    let socket = pg::testing::shared().socket_dir().display().to_string();
    let url = format!("mysql://postgres:{SECRET}@/postgres?host={socket}&session=x");
    let named = format!("mysql://postgres@/postgres?host={socket}&session=x");
    assert_refused("tooljournal", &["journal", "verify", &url], &named);
    let store = format!("mysql://postgres:{SECRET}@/postgres?host={socket}");
    let store_named = format!("mysql://postgres@/postgres?host={socket}");
    assert_refused(
        "tooljournal",
        &["sessions", "--store", &store],
        &store_named,
    );
}

#[test]
fn sessions_lists_every_session_of_a_store_with_its_status_and_calls() {
    let store = pgcli::createdb("sessions_list");
    let state = tempfile::tempdir().expect("temp");
    let init = tooljournal(&["store", "init", &store], state.path());
    assert_eq!(init.code, Some(0), "{init}");
    let url = |s: &str| format!("{store}&session={s}");
    let f = pgcli::fixture();
    pgcli::run_script(&f, "basic.jsonl", &url("basic"));
    let f2 = pgcli::fixture();
    pgcli::run_script(&f2, "cancel.jsonl", &url("cancel"));

    let f3 = pgcli::fixture();
    let killed = format!("{}&lease_ms=1000", url("killed"));
    let mut child = pgcli::start_killed(&f3, &killed);
    let live_row = pgcli::session_row(&store, &url("killed"), &f.state);
    let live_classify = recover(&["classify", "--dry-run", &url("killed")]);
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert_eq!(live_row["status"], "running", "{live_row}");
    assert!(live_classify.stdout.contains("LIVE"), "{live_classify}");

    pgcli::wait_not_running(&store, &url("killed"), &f.state);
    let rows = pgcli::session_rows(&store, &f.state);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let expect = [
        ("basic", "finished", 15, 0),
        ("cancel", "finished", 4, 0),
        ("killed", "interrupted", 2, 2),
    ];
    for (session, status, calls, orphans) in expect {
        let row = pgcli::session_row(&store, &url(session), &f.state);
        assert_eq!(row["status"], status, "{session}: {row}");
        assert_eq!(row["calls"], calls, "{session}: {row}");
        assert_eq!(row["orphans"], orphans, "{session}: {row}");
    }
    let text = tooljournal(&["sessions", "--store", &store], &f.state);
    assert_eq!(text.code, Some(0), "{text}");
    assert_eq!(text.stdout.matches("finished").count(), 2, "{text}");
    assert_eq!(text.stdout.matches("interrupted").count(), 1, "{text}");
}

#[test]
fn a_closed_session_gives_its_lease_up() {
    let f = pgcli::fixture();
    let url = session_url("closed-lease");
    pgcli::run_script(&f, "basic.jsonl", &url);

    let classify = recover(&["classify", "--dry-run", "--json", &url]);
    assert_eq!(classify.code, Some(0), "{classify}");
    assert!(classify.stdout.contains("\"live\":false"), "{classify}");
    let text = recover(&["classify", &url]);
    assert_eq!(text.code, Some(0), "{text}");
    assert!(!text.stdout.contains("LIVE"), "{text}");
    let row = pgcli::session_row(&shared_store(), &url, &f.state);
    assert_eq!(row["status"], "finished", "{row}");

    let script = pgcli::data("basic.jsonl");
    let started = std::time::Instant::now();
    let resume = tooljournal(
        &["resume", "--journal", &url, "--script", path_str(&script)],
        &f.state,
    );
    let took = started.elapsed();
    assert_eq!(resume.code, Some(0), "{resume}");
    assert!(
        !resume.stderr.contains("waiting up to"),
        "resume waited for the lease of a closed session ({took:?}): {resume}"
    );
    assert!(resume.stdout.contains("already finished"), "{resume}");
}
