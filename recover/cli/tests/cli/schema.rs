//! The versioning rule (docs/FORMAT.md, *Versioning*) through the `recover` binary: a payload
//! that does not decode is "written by a newer tooljournal" (exit 3) in a journal whose
//! `session/open` declares a newer event schema, and corruption (exit 2) otherwise.

use journal::{FsStorage, Journal, Options};
use runtime::event::{Event, Record, SessionOpen, EVENT_SCHEMA_VERSION};
use serde::ser::{Serialize, SerializeTuple, Serializer};
use std::process::{Command, Output};
use std::sync::Arc;

/// Bytes appended as a payload exactly as they are (a tuple encodes with no length prefix).
struct Raw(Vec<u8>);

impl Serialize for Raw {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(self.0.len())?;
        for b in &self.0 {
            t.serialize_element(b)?;
        }
        t.end()
    }
}

/// `session/open` declaring `schema`, then a record of an event type this build does not know.
fn journal_with_unknown_event(schema: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(
        Arc::new(FsStorage::create(dir.path()).unwrap()),
        Options::default(),
    )
    .unwrap();
    journal
        .append(&Record {
            at_ms: 1,
            event: Event::SessionOpen(SessionOpen {
                schema_version: schema,
                session_id: "s".into(),
                workspace: "/w".into(),
                tools: vec![],
            }),
        })
        .unwrap();
    // `at_ms` 2, then the event index, as format 2 lays them out: one varint byte each.
    let index = u8::try_from(Event::VARIANT_COUNT).expect("fewer than 251 events: one byte");
    let unknown = vec![2, index];
    journal.append(&Raw(unknown)).unwrap();
    journal.close().unwrap();
    dir
}

fn recover(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recover"))
        .args(args)
        .output()
        .expect("recover runs")
}

#[test]
fn every_reading_command_says_newer_for_a_newer_schema_and_corrupt_otherwise() {
    let newer = journal_with_unknown_event(EVENT_SCHEMA_VERSION + 1);
    let known = journal_with_unknown_event(EVENT_SCHEMA_VERSION);
    let commands: [&[&str]; 5] = [
        &["verify"],
        &["classify", "--dry-run"],
        &["classify", "--dry-run", "--json"],
        &["rebuild", "--dry-run", "--format", "anthropic"],
        &["audit"],
    ];
    for args in commands {
        let run = |dir: &tempfile::TempDir| {
            let mut all = args.to_vec();
            all.insert(1, dir.path().to_str().unwrap());
            recover(&all)
        };
        let out = run(&newer);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(
            stderr.contains("record seq 2 at segment 00000000000000000000.segment offset ")
                && stderr.contains(&format!(
                    "written by a newer tooljournal (schema {} > {EVENT_SCHEMA_VERSION})",
                    EVENT_SCHEMA_VERSION + 1
                )),
            "{args:?}: {stderr}"
        );
        let out = run(&known);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("unknown event type {}", Event::VARIANT_COUNT))
                && !stderr.contains("newer"),
            "{args:?}: {stderr}"
        );
    }
}
