//! One writer per journal directory, enforced by an OS lock on a real directory.

use std::sync::Arc;
use tooljournal_journal::{FsStorage, Journal, JournalError, Options};

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

#[test]
fn asking_whether_a_writer_holds_the_lock_creates_and_writes_nothing() {
    use tooljournal_journal::Storage;
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FsStorage::create(dir.path()).unwrap());
    assert!(
        !storage.writer_lock_held().unwrap(),
        "no lock file: no writer"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "asking created nothing"
    );
    let (journal, _) = Journal::open(storage.clone(), Options::default()).unwrap();
    assert!(storage.writer_lock_held().unwrap(), "the writer holds it");
    assert!(
        Journal::lock(storage.clone()).is_err(),
        "and asking did not take it from the writer"
    );
    journal.close().unwrap();
    // A lock file with content (a writer may record itself in it) is asked the same way.
    std::fs::write(dir.path().join("LOCK"), b"4242\n").unwrap();
    assert!(
        !storage.writer_lock_held().unwrap(),
        "released with the writer"
    );
    assert_eq!(
        std::fs::read(dir.path().join("LOCK")).unwrap(),
        b"4242\n",
        "asking wrote nothing"
    );
    let _lock = Journal::lock(storage.clone()).expect("asking left the lock free");
    assert!(
        storage.writer_lock_held().unwrap(),
        "a held writer lock is seen"
    );
}
