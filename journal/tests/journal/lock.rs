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

#[test]
fn a_closed_writer_s_lock_still_held_by_a_forked_child_does_not_refuse_the_next_writer() {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Journal::open(
            Arc::new(FsStorage::create(dir.path()).unwrap()),
            Options::default(),
        )
    };
    let (first, _) = open().unwrap();
    // Any thread of an embedding process may fork (a tool, a test running a binary): until
    // its exec, the child holds a copy of every descriptor, the lock's among them.
    let (mut forked, in_child) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut command = std::process::Command::new("true");
    // SAFETY: between fork and exec the closure only writes a byte and sleeps (write and
    // nanosleep are async-signal-safe) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            (&in_child).write_all(b"f")?;
            std::thread::sleep(std::time::Duration::from_millis(100));
            Ok(())
        });
    }
    let spawner = std::thread::spawn(move || command.status().unwrap());
    forked.read_exact(&mut [0u8; 1]).unwrap();
    first.close().unwrap();
    let (second, _) = open().expect("a closed writer's lock is not held by a child's copy");
    drop(second);
    assert!(spawner.join().unwrap().success());
}
