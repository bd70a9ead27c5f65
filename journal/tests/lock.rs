//! One writer per journal directory, enforced by an OS lock on a real directory.

use journal::{FsStorage, Journal, JournalError, Options};
use std::sync::Arc;

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Journal::open(
            Arc::new(FsStorage::create(dir.path()).unwrap()),
            Options::default(),
        )
    };
    let (first, report) = open().unwrap();
    assert!(report.created);
    first.append(&"hello".to_string()).unwrap();
    match open() {
        Err(JournalError::Locked {
            location,
            holder_pid,
        }) => {
            assert_eq!(location, dir.path().display().to_string());
            // The holder recorded its pid in LOCK: here, this very process.
            assert_eq!(holder_pid, Some(std::process::id()));
            let message = JournalError::Locked {
                location,
                holder_pid,
            }
            .to_string();
            assert!(message.contains("locked by another writer"), "{message}");
            assert!(
                message.contains(&format!("pid {}", std::process::id())),
                "{message}"
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("two writers on one journal"),
    }
    first.close().unwrap();
    let (second, report) = open().expect("the lock is released with the first writer");
    assert_eq!(report.next_seq, 2);
    drop(second);
}

#[test]
fn files_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j");
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(&path).unwrap()),
        Options::default(),
    )
    .unwrap();
    journal.close().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o700);
    for entry in std::fs::read_dir(&path).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
}
