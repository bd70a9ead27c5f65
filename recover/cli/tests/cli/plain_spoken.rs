//! The `recover` binary is bounded, never stuck, and plain-spoken: a journal it refuses is left
//! as it was found, not even a `LOCK` file created, and `--salvage` says SALVAGED only when it
//! really passed something over.

use crate::common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Every entry of a directory with its bytes: equal listings, nothing created, removed or
/// written.
fn listing(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = if e.file_type().unwrap().is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

/// A crashed batch (`c1` started) as a copy comes: without its `LOCK` file.
fn crashed_copy(dir: &Path) {
    let mut b = Builder::new(dir);
    b.batch(&["c1", "c2"]);
    b.approve("c1");
    b.start("c1");
    b.done();
    std::fs::remove_file(dir.join("LOCK")).unwrap();
}

/// `crashed_copy` with one bit flipped in the middle of its records: corruption, not a tail.
fn corrupt_copy(dir: &Path) {
    crashed_copy(dir);
    let mut bytes = segment_bytes(dir);
    let frames = frame_offsets(&bytes);
    bytes[frames[frames.len() / 2] + 20] ^= 0x01;
    std::fs::write(dir.join(journal::segment::file_name(0)), &bytes).unwrap();
}

/// A journal whose second record is a valid frame holding no event (an event type no schema
/// has): a session/open, then records that are not a session's.
fn not_events_copy(dir: &Path) {
    let mut b = Builder::new(dir);
    b.batch(&[]);
    // `Record` is (at_ms, event), the event's variant index first: 9999 names none.
    b.journal.append(&(1_000u64, 9_999u32)).unwrap();
    b.done();
    std::fs::remove_file(dir.join("LOCK")).unwrap();
}

/// The commands that would write to a journal they accept, run on `dir`: each must refuse it
/// (exit 2, naming the directory) and leave the directory's listing and bytes as they were.
fn refused_and_untouched(dir: &Path, what: &str) {
    let before = listing(dir);
    for args in [
        &["classify"][..],
        &["classify", "--json"],
        &["rebuild", "--format", "openai-chat"],
    ] {
        let mut full = args.to_vec();
        full.insert(1, dir.to_str().unwrap());
        let out = recover(&full);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{what}: recover {args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(dir.to_str().unwrap()),
            "{what}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            listing(dir),
            before,
            "{what}: recover {args:?} created or changed something"
        );
    }
}

#[test]
fn a_refused_journal_is_left_as_it_was_not_even_a_lock_file_created() {
    let corrupt = tempfile::tempdir().unwrap();
    corrupt_copy(corrupt.path());
    refused_and_untouched(corrupt.path(), "a corrupt journal");

    let not_events = tempfile::tempdir().unwrap();
    not_events_copy(not_events.path());
    refused_and_untouched(not_events.path(), "records that are not events");

    // A journal it accepts still gets its lock and its recovery: the check is not a refusal.
    let crashed = tempfile::tempdir().unwrap();
    crashed_copy(crashed.path());
    let out = recover(&["classify", crashed.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("recovery appended"),
        "{}",
        text(&out.stderr)
    );
    assert!(crashed.path().join("LOCK").exists());
}

/// Undoes `chattr +i` on drop, so the temporary directory can be removed.
struct Immutable(Vec<std::path::PathBuf>);

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(p)
                .status();
        }
    }
}

#[test]
fn a_refused_journal_in_a_read_only_directory_is_refused_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    corrupt_copy(dir.path());
    // Permission bits stop anyone but root; `chattr +i` stops root too.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
    refused_and_untouched(dir.path(), "a directory without write permission");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut guard = Immutable(Vec::new());
    let frozen = std::process::Command::new("chattr")
        .arg("+i")
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if frozen {
        guard.0.push(dir.path().to_owned());
        assert!(
            std::fs::File::create(dir.path().join("probe")).is_err(),
            "chattr +i took"
        );
        refused_and_untouched(dir.path(), "an immutable directory");
    } else {
        eprintln!("NOTE: chattr +i is not possible here: the immutable directory is skipped");
    }
}

/// `classify --salvage` (table) and `rebuild --salvage` (its stderr) on `dir`.
fn salvaged_words(dir: &Path) -> (String, String) {
    let classify = recover(&["classify", dir.to_str().unwrap(), "--salvage"]);
    assert_eq!(
        classify.status.code(),
        Some(0),
        "{}",
        text(&classify.stderr)
    );
    let rebuild = recover(&[
        "rebuild",
        dir.to_str().unwrap(),
        "--format",
        "openai-chat",
        "--salvage",
    ]);
    assert_eq!(rebuild.status.code(), Some(0), "{}", text(&rebuild.stderr));
    (text(&classify.stdout), text(&rebuild.stderr))
}

#[test]
fn salvage_calls_a_journal_salvaged_only_when_it_passed_something_over() {
    let clean = tempfile::tempdir().unwrap();
    crashed_copy(clean.path());
    let torn = tempfile::tempdir().unwrap();
    crashed_copy(torn.path());
    let mut bytes = segment_bytes(torn.path());
    let end = *frame_offsets(&bytes).last().unwrap();
    bytes.truncate(end);
    bytes.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(torn.path().join(journal::segment::file_name(0)), &bytes).unwrap();
    for (dir, end) in [
        (&clean, "end of journal: clean"),
        (&torn, "end of journal: torn tail"),
    ] {
        let (table, stderr) = salvaged_words(dir.path());
        assert!(table.contains(end), "{table}");
        for said in [&table, &stderr] {
            assert!(!said.contains("SALVAGED"), "{end}: {said}");
            assert!(!said.contains("is corrupt"), "{end}: {said}");
            assert!(said.contains("nothing was passed over"), "{end}: {said}");
        }
    }
    // Really corrupt: said as before.
    let corrupt = tempfile::tempdir().unwrap();
    corrupt_copy(corrupt.path());
    let (table, stderr) = salvaged_words(corrupt.path());
    for said in [&table, &stderr] {
        assert!(said.contains("SALVAGED: this journal is corrupt"), "{said}");
    }
}

/// A journal directory `recover` may not read: every command says which directory, and that it
/// could not read it (never a bare "Permission denied"). Run as `nobody` when the tests are
/// root, whom permission bits do not stop.
#[test]
fn an_unreadable_journal_directory_is_named_with_what_could_not_be_done() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    std::fs::create_dir(&journal).unwrap();
    crashed_copy(&journal);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o000)).unwrap();
    let exe = env!("CARGO_BIN_EXE_recover");
    let journal_s = journal.to_str().unwrap();
    for args in [
        vec!["classify", journal_s],
        vec!["audit", journal_s],
        vec!["rebuild", journal_s, "--format", "anthropic"],
    ] {
        let mut command = std::process::Command::new(exe);
        command.args(&args);
        if is_root() {
            command.uid(65534).gid(65534);
        }
        let out = command.output().expect("recover runs");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{journal_s}: cannot ")),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("journal directory"), "{args:?}: {stderr}");
    }
    // A segment it may not open: the error, and no report begun as if the session were empty.
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o755)).unwrap();
    let segment = journal.join("00000000000000000000.segment");
    std::fs::set_permissions(&segment, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut command = std::process::Command::new(exe);
    command.args(["classify", journal_s]);
    if is_root() {
        command.uid(65534).gid(65534);
    }
    let out = command.output().expect("recover runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("00000000000000000000.segment"), "{stderr}");
    assert!(!stdout.contains("(empty)"), "{stdout}");
    std::fs::set_permissions(&segment, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o700)).unwrap();
}
