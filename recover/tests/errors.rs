//! `RecoverError` is typed: a caller can tell a directory that cannot be opened from a journal
//! that cannot be written, and the messages stay what `recover` has always printed (the
//! journal's directory once in front).

use journal::storage::{Fault, Op};
use journal::{Journal, Options, SimStorage};
use runtime::event::{Event, Record, SessionOpen};
use std::sync::Arc;
use tooljournal_recover::RecoverError;
use tooljournal_recover::Recovery;

#[test]
fn a_missing_directory_is_open_dir_everywhere_with_the_old_message() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("no such journal");
    let io = std::fs::metadata(&dir).unwrap_err();
    let expected = format!("{}: cannot open the journal directory: {io}", dir.display());
    let mut reports = Vec::new();
    let errors = [
        tooljournal_recover::Recovery::of(&dir).run().err(),
        tooljournal_recover::Recovery::of(&dir).salvage().err(),
        tooljournal_recover::Recovery::of(&dir)
            .stream(&mut reports)
            .err(),
        tooljournal_recover::verify(&dir).err(),
    ];
    for e in errors {
        let e = e.expect("a missing directory is an error");
        assert!(matches!(&e, RecoverError::OpenDir { dir: d, .. } if *d == dir));
        assert_eq!(e.to_string(), expected);
    }
}

#[test]
fn a_recovery_that_cannot_be_appended_is_a_journal_error_said_once() {
    let storage = SimStorage::new();
    let (journal, _) = Journal::open(Arc::new(storage.clone()), Options::default()).unwrap();
    for event in [
        Event::SessionOpen(SessionOpen {
            schema_version: 1,
            session_id: "s".into(),
            workspace: "/ws".into(),
            tools: vec![],
        }),
        Event::TurnStart {
            turn: 1,
            user_text: "cut off".into(),
        },
    ] {
        journal.append(&Record { at_ms: 1, event }).unwrap();
    }
    journal.close().unwrap();
    // The open turn needs a recovery event; its write fails.
    storage.inject(Op::Write, 1, Fault::Error);
    let e = Recovery::of(journal::Backend::Files(Arc::new(storage.clone())))
        .write(true)
        .run()
        .expect_err("the append fails");
    let RecoverError::Journal { dir, source } = &e else {
        panic!("not a journal error: {e:?}");
    };
    assert_eq!(dir.to_str(), Some("sim:"));
    // The journal's error starts with its location already: it is not said twice.
    assert_eq!(e.to_string(), source.to_string());
    assert!(e.to_string().starts_with("sim:: "), "{e}");
}
