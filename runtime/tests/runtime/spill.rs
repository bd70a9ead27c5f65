//! Large results: the model gets head + tail + locator, the spill store the whole text, the
//! journal a `spill/stored` before the `settled` that names it; a failing store keeps the result
//! inline and the call successful.

use crate::common;

use common::*;
use journal::SimStorage;
use std::sync::Arc;
use tooljournal_runtime::event::{Event, Text};
use tooljournal_runtime::Config;
use tooljournal_runtime::Hooks;
use tooljournal_runtime::ToolOutput;
use tooljournal_runtime::{SledSpill, SpillStore};

fn big_tool(bytes: usize) -> TestTool {
    TestTool::with("big", move |_, _| {
        Box::pin(async move {
            let text: String = (0..bytes)
                .map(|i| (b'a' + (i % 26) as u8) as char)
                .collect();
            Ok(ToolOutput::text(text))
        })
    })
}

fn events(storage: &SimStorage) -> Vec<(u64, Event)> {
    journal::Reader::open(Arc::new(storage.clone()), journal::Limits::default())
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (
                r.seq,
                r.decode::<tooljournal_runtime::event::Record>()
                    .unwrap()
                    .event,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_5_mib_result_becomes_head_tail_and_locator_and_the_blob_matches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SledSpill::open(&dir.path().join("spill"), 1 << 20).unwrap());
    let config = Config {
        spill: Some(store.clone()),
        ..Config::default()
    };
    let storage = SimStorage::new();
    let size = 5 << 20;
    let mut session = session_on(
        &storage,
        registry(vec![big_tool(size)]),
        Hooks::default(),
        config,
    );
    let results = one_step(&mut session, vec![call("b", "big", "{}")]).await;
    let r = &results[0];
    assert!(!r.is_error);
    assert!(
        r.content.len() < 64 << 10,
        "the model got {} bytes",
        r.content.len()
    );
    assert!(r.content.starts_with("abcdefghij"));
    assert!(r.content.contains("bytes omitted"));

    let events = events(&storage);
    let (spill_seq, locator, bytes, sha) = events
        .iter()
        .find_map(|(seq, e)| match e {
            Event::SpillStored {
                locator,
                bytes,
                sha256,
            } => Some((*seq, locator.clone(), *bytes, sha256.clone())),
            _ => None,
        })
        .expect("spill/stored journaled");
    assert_eq!(bytes, size as u64);
    let blob = store
        .get(&locator)
        .unwrap()
        .expect("the blob is in the store");
    assert_eq!(blob.len(), size);
    assert_eq!(
        tooljournal_runtime::sha256_hex(blob.as_bytes()),
        sha,
        "the blob's hash matches the journal's"
    );
    assert!(r.content.contains(&sha), "the model's copy names the blob");

    let (settled_seq, content) = events
        .iter()
        .find_map(|(seq, e)| match e {
            Event::Settled { outcome, .. } => Some((*seq, outcome.content.clone())),
            _ => None,
        })
        .unwrap();
    assert!(
        spill_seq < settled_seq,
        "spill/stored precedes the settled that names it"
    );
    match content {
        Text::Preview {
            total_bytes,
            sha256,
            locator: Some(l),
            ..
        } => {
            assert_eq!(total_bytes, size as u64);
            assert_eq!(sha256, sha);
            assert_eq!(l, locator);
        }
        other => panic!("settled keeps a preview with the locator, got {other:?}"),
    }
}

struct BrokenStore;
impl SpillStore for BrokenStore {
    fn put(&self, _: &str) -> Result<String, String> {
        Err("disk full".into())
    }
    fn get(&self, _: &str) -> Result<Option<String>, String> {
        Ok(None)
    }
}

#[tokio::test]
async fn a_failing_spill_store_settles_the_call_truthfully_then_stops_the_session() {
    let config = Config {
        spill: Some(Arc::new(BrokenStore)),
        ..Config::default()
    };
    let storage = SimStorage::new();
    let size = 100 << 10;
    let tool = big_tool(size);
    let probe = tool.probe();
    let mut session = session_on(&storage, registry(vec![tool]), Hooks::default(), config);
    session.begin_turn("go").unwrap();
    session.begin_step().unwrap();
    let stopped = session
        .run_batch(response(vec![
            call("b", "big", "{}"),
            call("c", "big", "{}"),
        ]))
        .await;
    match stopped {
        Err(tooljournal_runtime::RuntimeError::Spill(m)) => assert!(m.contains("disk full"), "{m}"),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("the session went on past a failed spill store"),
    }
    assert_eq!(session.stats().spill_failures(), 1);
    assert_eq!(probe.runs(), ["b"], "nothing started after the failure");
    let events = events(&storage);
    assert!(!events
        .iter()
        .any(|(_, e)| matches!(e, Event::SpillStored { .. })));
    // The body ran and succeeded: `settled` says so, and keeps what the journal can hold.
    let settled = events.iter().find_map(|(_, e)| match e {
        Event::Settled { call, outcome, .. } if call.call_id == "b" => Some(outcome.clone()),
        _ => None,
    });
    let outcome = settled.expect("b was settled before the session stopped");
    assert_eq!(
        outcome.status,
        tooljournal_runtime::event::OutcomeStatus::Success
    );
    assert!(
        matches!(&outcome.content, Text::Inline(text) if text.len() == size),
        "{:?}",
        outcome.content
    );
    assert!(events
        .iter()
        .any(|(_, e)| matches!(e, Event::Fault { message, .. } if message.contains("disk full"))));
}

#[tokio::test]
async fn small_results_are_not_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SledSpill::open(&dir.path().join("spill"), 1 << 20).unwrap());
    let config = Config {
        spill: Some(store),
        ..Config::default()
    };
    let storage = SimStorage::new();
    let mut session = session_on(
        &storage,
        registry(vec![big_tool(1000)]),
        Hooks::default(),
        config,
    );
    let results = one_step(&mut session, vec![call("b", "big", "{}")]).await;
    assert_eq!(results[0].content.len(), 1000);
    assert!(!events(&storage)
        .iter()
        .any(|(_, e)| matches!(e, Event::SpillStored { .. })));
}

/// The store's snapshot files (`snap.<lsn>`, and a `.generating` one being written), sorted.
fn snapshots(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snap."))
        .collect();
    names.sort();
    names
}

/// A process killed while sled wrote a snapshot (every open of a store that changed writes
/// one: `snap.<lsn>.generating`, written, synced, then renamed) leaves the unfinished file,
/// and sled 0.34.7 takes it for the latest snapshot: "Read corrupted data". The store opens
/// as its last finished snapshot and its log say, with everything put before.
#[test]
fn a_snapshot_a_killed_process_left_unfinished_does_not_break_the_store() {
    for cut in ["empty", "no checksum"] {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill");
        let text = "x".repeat(100_000);
        let locator = SledSpill::open(&spill, 1 << 20)
            .unwrap()
            .put(&text)
            .unwrap();
        // Opened again: the snapshot that opening writes is the one copied below.
        drop(SledSpill::open(&spill, 1 << 20).unwrap());
        let finished = snapshots(&spill)
            .into_iter()
            .rfind(|n| !n.ends_with(".generating"))
            .expect("an open of a store that changed writes a snapshot");
        let bytes = std::fs::read(spill.join(&finished)).unwrap();
        let unfinished = match cut {
            "empty" => Vec::new(),
            _ => bytes[..bytes.len() - 4].to_vec(),
        };
        // The next snapshot's name sorts after every finished one.
        std::fs::write(spill.join("snap.7FFFFFFFFFFFFFFF.generating"), unfinished).unwrap();

        let store = SledSpill::open(&spill, 1 << 20).unwrap_or_else(|e| panic!("{cut}: {e}"));
        assert_eq!(
            store.get(&locator).unwrap().as_deref(),
            Some(text.as_str()),
            "{cut}"
        );
        drop(store);
        assert!(
            !snapshots(&spill).iter().any(|n| n.ends_with(".generating")),
            "{cut}: {:?}",
            snapshots(&spill)
        );
    }
}
