//! The `recover` binary at the seams of the journal's life: a closed
//! session with a torn tail, a read-only journal, a corrupt journal that also has a torn tail,
//! and a repair that was killed halfway. Each situation is built on disk, then the binary runs.

use crate::common;

use common::{is_root, recover, text};
use journal::{FsStorage, Journal, Limits, Options};
use runtime::event::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

/// Runs `recover ARGS…` on `dir` (the directory goes after the subcommand).
fn run(dir: &Path, args: &[&str]) -> Output {
    let mut full: Vec<&str> = args.to_vec();
    full.insert(1, dir.to_str().unwrap());
    recover(&full)
}

fn run_ok(dir: &Path, args: &[&str]) -> Output {
    let out = run(dir, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "recover {args:?} on {}: {}",
        dir.display(),
        text(&out.stderr)
    );
    out
}

fn put(journal: &Journal, event: Event) -> u64 {
    journal
        .append(&Record {
            at_ms: 1_000,
            event,
        })
        .unwrap()
}

fn call(id: &str) -> CallRef {
    CallRef {
        turn: 1,
        step: 1,
        call_id: id.into(),
    }
}

/// session/open, turn 1, step 1, and an llm/response naming `ids`; returns the response's seq.
fn begin(journal: &Journal, ids: &[&str]) -> u64 {
    put(
        journal,
        Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "seams".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }),
    );
    put(
        journal,
        Event::TurnStart {
            turn: 1,
            user_text: "mark the files".into(),
        },
    );
    put(journal, Event::StepStart { turn: 1, step: 1 });
    let tool_calls = ids
        .iter()
        .map(|id| ModelCall {
            call_id: id.to_string(),
            name: "mark".into(),
            arguments: format!("{{\"path\":\"{id}.txt\"}}"),
        })
        .collect();
    put(
        journal,
        Event::LlmResponse {
            turn: 1,
            step: 1,
            response: ModelResponse {
                text: if ids.is_empty() { "done" } else { "on it" }.into(),
                tool_calls,
                stop_reason: if ids.is_empty() {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                },
            },
        },
    )
}

/// A session that ended normally: one turn, one step with no calls, `session/close`.
fn closed_session(dir: &Path) {
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir).unwrap()),
        Options::default(),
    )
    .unwrap();
    begin(&journal, &[]);
    put(
        &journal,
        Event::StepEnd {
            turn: 1,
            step: 1,
            outcome: StepOutcome::Completed,
        },
    );
    put(
        &journal,
        Event::TurnEnd {
            turn: 1,
            outcome: TurnOutcome::Completed,
        },
    );
    put(&journal, Event::SessionClose);
    journal.close().unwrap();
}

/// A crashed session: `c1` started (outcome unknown), `c2` approved (not started). Each
/// `parsed` record carries `text_bytes` of arguments, so that small segments make several.
fn crashed_session(dir: &Path, options: Options, text_bytes: usize) {
    let (journal, _) = Journal::open(Arc::new(FsStorage::create(dir).unwrap()), options).unwrap();
    let response_seq = begin(&journal, &["c1", "c2"]);
    for (i, id) in ["c1", "c2"].into_iter().enumerate() {
        let mut last = put(
            &journal,
            Event::Received {
                call: call(id),
                index: i as u32,
                tool: "mark".into(),
                raw_arguments: format!("{{\"path\":\"{id}.txt\"}}"),
                source_seqs: vec![response_seq],
            },
        );
        last = put(
            &journal,
            Event::Parsed {
                call: call(id),
                arguments: "x".repeat(text_bytes),
                source_seqs: vec![last],
            },
        );
        last = put(
            &journal,
            Event::Approved {
                call: call(id),
                approval: Approval::Default,
                source_seqs: vec![last],
            },
        );
        if id == "c1" {
            put(
                &journal,
                Event::StartedV4 {
                    call: call(id),
                    attempt: 1,
                    resources: Resources {
                        writes: vec!["c1.txt".into()],
                        ..Default::default()
                    },
                    source_seqs: vec![last],
                },
            );
        }
    }
    journal.close().unwrap();
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(journal::segment::parse_file_name)
                .is_some()
        })
        .collect();
    names.sort();
    names
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Every entry of a directory: its kind, size, mtime and content hash (a symlink: its target);
/// and the directory's own mtime. Equal snapshots: nothing was created, removed or written.
type Snapshot = BTreeMap<String, String>;

fn snapshot(dir: &Path) -> Snapshot {
    let mut s = Snapshot::new();
    let meta = std::fs::metadata(dir).unwrap();
    s.insert(
        ".".into(),
        format!("dir mtime {:?}", meta.modified().unwrap()),
    );
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        let what = if meta.file_type().is_symlink() {
            format!("symlink to {:?}", std::fs::read_link(entry.path()).unwrap())
        } else if meta.is_file() {
            let bytes = std::fs::read(entry.path()).unwrap();
            format!(
                "file {} bytes sha256 {} mtime {:?}",
                bytes.len(),
                hex::encode(Sha256::digest(&bytes)),
                meta.modified().unwrap()
            )
        } else {
            format!("other {:?} mtime {:?}", meta.file_type(), meta.modified())
        };
        s.insert(entry.file_name().to_string_lossy().into_owned(), what);
    }
    s
}

fn replay(dir: &Path) -> runtime::replay::SessionReplay {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    let (replay, end) = runtime::replay::replay_storage(storage, Limits::default())
        .unwrap_or_else(|e| panic!("{}: replay refuses the journal: {e}", dir.display()));
    assert_eq!(end, journal::ReadEnd::Clean, "{}", dir.display());
    replay
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

// Item 1 ---------------------------------------------------------------------------------------

#[test]
fn a_closed_session_with_a_torn_tail_is_cut_and_stays_as_readable_as_before() {
    // A torn frame whose sector never reached the disk past its first bytes: in format 2 the
    // zeros after its last byte that is not zero are not torn bytes (FORMAT.md, *Preallocated
    // tail*), so what is dropped and quarantined ends there; the cut takes the whole sector.
    let mut torn_sector = vec![0u8; 4096];
    torn_sector[..8].copy_from_slice(b"\x40\x00\x00\x00\xab\xcd\xef\x01");
    let tails: [(&str, Vec<u8>); 2] = [
        ("garbage", b"\x13\x00\x00\x00not a record at all".to_vec()),
        (
            "a torn frame, then zeros to the end of its sector",
            torn_sector,
        ),
    ];
    for (what, tail) in tails {
        let kept = &tail[..tail.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)];
        let dir = tempfile::tempdir().unwrap();
        closed_session(dir.path());
        let segment = segments(dir.path()).remove(0);
        let healthy = std::fs::read(&segment).unwrap();
        let healthy_classify = run_ok(dir.path(), &["classify", "--json"]).stdout;
        let healthy_history = run_ok(dir.path(), &["rebuild", "--format", "anthropic"]).stdout;
        append_bytes(&segment, &tail);

        let first = run_ok(dir.path(), &["classify", "--json"]);
        let v = json(&first);
        assert_eq!(
            v["end"],
            serde_json::json!({"kind": "torn_tail", "dropped_bytes": kept.len()}),
            "{what}"
        );
        let quarantine = format!(
            "{}.torn-at-{}",
            journal::segment::file_name(0),
            healthy.len()
        );
        assert!(
            text(&first.stderr).contains(&quarantine),
            "{what}: the cut is reported with its quarantine file: {}",
            text(&first.stderr)
        );
        assert_eq!(
            std::fs::read(dir.path().join(&quarantine)).unwrap(),
            kept,
            "{what}: the torn bytes are kept"
        );
        assert_eq!(
            std::fs::read(&segment).unwrap(),
            healthy,
            "{what}: the segment is exactly the healthy journal again (nothing appended)"
        );
        let r = replay(dir.path());
        assert!(r.closed && r.recoveries.is_empty(), "{what}");

        // As readable as before: every command succeeds, and says what it said before.
        let mut again = v.clone();
        again["end"] = serde_json::json!({"kind": "clean", "dropped_bytes": 0});
        assert_eq!(
            again,
            serde_json::from_slice::<Value>(&healthy_classify).unwrap(),
            "{what}: the same calls as before the damage"
        );
        let second = run_ok(dir.path(), &["classify", "--json"]);
        assert_eq!(
            first.stdout, second.stdout,
            "{what}: the same bytes out (I5)"
        );
        assert_eq!(
            run_ok(dir.path(), &["rebuild", "--format", "anthropic"]).stdout,
            healthy_history,
            "{what}"
        );
        for args in [
            vec!["classify"],
            vec!["classify", "--dry-run"],
            vec!["audit"],
            vec!["audit", "--json"],
            vec!["verify"],
            vec!["rebuild", "--format", "openai-chat"],
        ] {
            run_ok(dir.path(), &args);
        }
        assert_eq!(std::fs::read(&segment).unwrap(), healthy, "{what}");
    }
}

// Item 2 ---------------------------------------------------------------------------------------

/// The commands that must work on a journal nobody may write, and write nothing.
const READ_ONLY_COMMANDS: [&[&str]; 7] = [
    &["classify", "--dry-run"],
    &["classify", "--dry-run", "--json"],
    &["rebuild", "--dry-run", "--format", "openai-chat"],
    &["audit"],
    &["audit", "--json"],
    &["classify", "--salvage"],
    &["verify"],
];

/// A crashed session with a torn tail: classifying it for real would cut and append.
fn crashed_with_a_torn_tail(dir: &Path) {
    crashed_session(dir, Options::default(), 10);
    // A torn write lands where the records end, over the zeros written ahead of them.
    let segment = segments(dir).remove(0);
    let end = records_end(dir);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, b"\x13\x00\x00\x00torn", end).unwrap();
}

/// Where the last record of the journal in `dir` ends, in its last segment.
fn records_end(dir: &Path) -> u64 {
    let storage = std::sync::Arc::new(journal::FsStorage::open(dir).unwrap());
    let mut reader = journal::Reader::open(storage, journal::Limits::default()).unwrap();
    let last = reader.by_ref().map(|r| r.unwrap()).last().unwrap();
    last.position.offset + last.frame_bytes
}

/// Runs every read-only command on `dir`, checking that each succeeds and that nothing in the
/// directory changed; returns the outputs (the directory's name in them replaced by `DIR`).
fn read_only_outputs(dir: &Path, how: &str) -> Vec<String> {
    let before = snapshot(dir);
    let outs = READ_ONLY_COMMANDS
        .iter()
        .map(|args| {
            let out = run(dir, args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{how}: recover {args:?}: {}",
                text(&out.stderr)
            );
            text(&out.stdout).replace(dir.to_str().unwrap(), "DIR")
        })
        .collect();
    assert_eq!(snapshot(dir), before, "{how}: nothing created or written");
    outs
}

/// On a journal even root cannot write: a run asked to write (no `--dry-run`) says it cannot
/// take the writer lock, reads only, and prints what a dry run prints.
fn a_writing_run_reads_only(dir: &Path, how: &str, dry_run_json: &str) {
    let before = snapshot(dir);
    let out = run_ok(dir, &["classify", "--json"]);
    assert!(
        text(&out.stderr).contains("cannot take the writer lock"),
        "{how}: {}",
        text(&out.stderr)
    );
    assert_eq!(
        text(&out.stdout).replace(dir.to_str().unwrap(), "DIR"),
        dry_run_json,
        "{how}"
    );
    assert_eq!(snapshot(dir), before, "{how}: nothing created or written");
}

#[test]
fn a_dry_run_creates_nothing_not_even_a_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    crashed_with_a_torn_tail(dir.path());
    // A copy of a journal may come without its lock file.
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let outs = read_only_outputs(dir.path(), "no LOCK file");
    let v: Value = serde_json::from_str(&outs[1]).unwrap();
    assert_eq!(v["live"], false, "no lock file: no writer");
    assert_eq!(v["end"]["kind"], "torn_tail");
}

/// Undoes `chattr +i` on drop, so the temporary directory can be removed.
struct Immutable(Vec<PathBuf>);

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("chattr").arg("-i").arg(p).status();
        }
    }
}

/// Unmounts on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn succeeded(cmd: &mut Command) -> Result<(), String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("{cmd:?}: {}", text(&o.stderr).trim())),
        Err(e) => Err(format!("{cmd:?}: {e}")),
    }
}

#[test]
fn a_read_only_journal_is_read_and_nothing_in_it_changes() {
    let original = tempfile::tempdir().unwrap();
    crashed_with_a_torn_tail(original.path());
    let copy = |to: &Path| {
        for entry in std::fs::read_dir(original.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    };
    // What a writable journal's read-only commands print: every read-only copy prints the same.
    let expected = read_only_outputs(original.path(), "writable");
    let mut kinds_run = Vec::new();

    // A copy without write permission (stops anyone but root).
    let chmodded = tempfile::tempdir().unwrap();
    copy(chmodded.path());
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(chmodded.path()).unwrap() {
        let p = entry.unwrap().path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o400)).unwrap();
    }
    std::fs::set_permissions(chmodded.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
    assert_eq!(read_only_outputs(chmodded.path(), "chmod"), expected);
    std::fs::set_permissions(chmodded.path(), std::fs::Permissions::from_mode(0o700)).unwrap();

    // `chattr +i` on every file and the directory (stops root too).
    let frozen = tempfile::tempdir().unwrap();
    copy(frozen.path());
    let mut paths: Vec<PathBuf> = std::fs::read_dir(frozen.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.push(frozen.path().to_owned());
    let mut guard = Immutable(Vec::new());
    let chattr = paths.iter().try_for_each(|p| {
        succeeded(Command::new("chattr").arg("+i").arg(p))?;
        guard.0.push(p.clone());
        Ok::<(), String>(())
    });
    match chattr {
        Ok(()) => {
            assert!(
                std::fs::File::create(frozen.path().join("probe")).is_err(),
                "chattr +i took"
            );
            assert_eq!(read_only_outputs(frozen.path(), "chattr +i"), expected);
            a_writing_run_reads_only(frozen.path(), "chattr +i", &expected[1]);
            kinds_run.push("chattr +i");
        }
        Err(e) => eprintln!("NOTE: chattr +i not possible here, that case is skipped: {e}"),
    }
    drop(guard);

    // A read-only bind mount (root only).
    let source = tempfile::tempdir().unwrap();
    copy(source.path());
    let mount_point = tempfile::tempdir().unwrap();
    let mounted = if is_root() {
        succeeded(
            Command::new("mount")
                .arg("--bind")
                .arg(source.path())
                .arg(mount_point.path()),
        )
        .map(|()| Mounted(mount_point.path().to_owned()))
        .and_then(|m| {
            succeeded(
                Command::new("mount")
                    .args(["-o", "remount,bind,ro"])
                    .arg(&m.0),
            )
            .map(|()| m)
        })
    } else {
        Err("not running as root".to_owned())
    };
    match mounted {
        Ok(m) => {
            assert!(
                std::fs::File::create(m.0.join("probe")).is_err(),
                "the mount is read-only"
            );
            assert_eq!(read_only_outputs(&m.0, "read-only bind mount"), expected);
            a_writing_run_reads_only(&m.0, "read-only bind mount", &expected[1]);
            kinds_run.push("read-only mount");
        }
        Err(e) => eprintln!("NOTE: no read-only bind mount here, that case is skipped: {e}"),
    }
    if kinds_run.is_empty() {
        // Permission bits do not stop root: without chattr or a mount nothing here was really
        // read-only, so say so instead of passing quietly.
        eprintln!(
            "SKIPPED: neither `chattr +i` nor a read-only mount is possible here (running as \
             root: {}), so no journal was truly read-only",
            is_root()
        );
    }
    eprintln!("read-only cases run: {kinds_run:?}");
}

#[test]
fn when_liveness_cannot_be_told_it_says_so_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    crashed_with_a_torn_tail(dir.path());
    // A lock file that cannot be opened at all: a symlink to itself.
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    std::os::unix::fs::symlink("LOCK", dir.path().join("LOCK")).unwrap();
    let before = snapshot(dir.path());
    for args in [
        &["classify", "--json"][..],
        &["classify", "--dry-run"],
        &["rebuild", "--format", "gemini"],
        &["audit"],
        &["classify", "--salvage"],
    ] {
        let out = run_ok(dir.path(), args);
        assert!(
            text(&out.stderr).contains("cannot tell whether a writer holds"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(snapshot(dir.path()), before, "nothing written");
}

// Item 3 ---------------------------------------------------------------------------------------

#[test]
fn a_corrupt_journal_with_a_torn_tail_is_left_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        limits: Limits {
            segment_size_bytes_max: 400,
            ..Limits::default()
        },
        ..Options::default()
    };
    crashed_session(dir.path(), options, 200);
    let segs = segments(dir.path());
    assert!(segs.len() >= 3, "several segments: {segs:?}");
    // Damage the payload of segment 0's second record (the first names the session, which
    // recovery reads on its own); tear the last segment's tail.
    let mut first = std::fs::read(&segs[0]).unwrap();
    let header = journal::segment::HEADER_BYTES;
    let second =
        header + 8 + u32::from_le_bytes(first[header..header + 4].try_into().unwrap()) as usize;
    first[second + 20] ^= 0x40;
    std::fs::write(&segs[0], &first).unwrap();
    append_bytes(segs.last().unwrap(), &[0u8; 512]);
    let before = snapshot(dir.path());
    for args in [
        &["classify"][..],
        &["classify", "--json"],
        &["rebuild", "--format", "openai-responses"],
        &["audit"],
    ] {
        let out = run(dir.path(), args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let at = format!("segment {} offset {second}", journal::segment::file_name(0));
        assert!(
            text(&out.stderr).contains(&at),
            "{args:?} names the corruption ({at}): {}",
            text(&out.stderr)
        );
        assert_eq!(snapshot(dir.path()), before, "{args:?}: not a byte changed");
    }
    // Salvage reads past it, and writes nothing either.
    run_ok(dir.path(), &["classify", "--salvage"]);
    assert_eq!(snapshot(dir.path()), before);
}

// Item 4 ---------------------------------------------------------------------------------------

#[test]
fn a_repair_killed_after_the_cut_is_reported_and_recorded_by_the_rerun() {
    let dir = tempfile::tempdir().unwrap();
    crashed_session(dir.path(), Options::default(), 10);
    let segment = segments(dir.path()).remove(0);
    let tail = [0x55u8; 300];
    append_bytes(&segment, &tail);
    let untouched = run_ok(dir.path(), &["classify", "--dry-run", "--json"]).stdout;

    // The repair's first half: the writer's reopen quarantines and cuts the tail; the process
    // dies before the recovery event is appended.
    let (journal, report) = Journal::open(
        Arc::new(FsStorage::open(dir.path()).unwrap()),
        Options::default(),
    )
    .unwrap();
    let quarantine = report.quarantine_file.clone().expect("quarantined");
    drop(journal);
    assert_eq!(std::fs::read(dir.path().join(&quarantine)).unwrap(), tail);
    assert!(
        replay(dir.path()).recoveries.is_empty(),
        "nothing recorded yet"
    );

    let dry = run_ok(dir.path(), &["classify", "--dry-run", "--json"]);
    assert_eq!(
        json(&dry)["end"],
        serde_json::json!({"kind": "torn_tail", "dropped_bytes": tail.len()}),
        "the dry run says what was dropped"
    );
    assert_eq!(dry.stdout, untouched, "as it said before the cut");
    let salvaged = run_ok(dir.path(), &["classify", "--salvage", "--json"]);
    assert_eq!(
        json(&salvaged)["end"],
        json(&dry)["end"],
        "salvage says the same"
    );

    let rerun = run_ok(dir.path(), &["classify", "--json"]);
    assert_eq!(
        rerun.stdout, untouched,
        "the rerun says what the repair would have"
    );
    assert!(
        text(&rerun.stderr).contains(&quarantine),
        "the rerun names the quarantine file: {}",
        text(&rerun.stderr)
    );
    let r = replay(dir.path());
    assert_eq!(r.recoveries.len(), 1);
    assert_eq!(
        r.recoveries[0].dropped_bytes,
        tail.len() as u64,
        "the recovery records the dropped bytes"
    );
    let third = run_ok(dir.path(), &["classify", "--json"]);
    assert_eq!(third.stdout, untouched);
    assert_eq!(replay(dir.path()).recoveries.len(), 1, "recorded once");
}
