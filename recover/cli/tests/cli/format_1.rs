//! Journals of format 1 (fixint payloads, what builds before format 2 wrote) are read by every
//! `recover` command with the same answers as the same session in format 2, and a recovery
//! appended to one keeps it format 1.

use crate::common;

use common::*;
use journal::codec::Encoding;
use journal::segment::{self, SegmentHeader};
use journal::{framing, FsStorage, Limits, Reader};
use std::path::Path;
use std::sync::Arc;

/// Rewrites the journal in `dir` as format 1: every record decoded and encoded again with
/// format 1's layout, in one version-1 segment 0, as an older build would have left it.
fn rewrite_as_format_1(dir: &Path) {
    let storage = Arc::new(FsStorage::open(dir).unwrap());
    let reader = Reader::open(storage, Limits::default()).unwrap();
    let segment0 = std::fs::read(dir.join(segment::file_name(0))).unwrap();
    let header = SegmentHeader {
        format_version: 1,
        journal_id: segment0[12..28].try_into().unwrap(),
        segment_number: 0,
        first_seq: 1,
    };
    let mut bytes = header.encode().to_vec();
    for record in reader {
        let record = record.unwrap();
        assert_eq!(
            record.encoding,
            Encoding::Varint,
            "a new journal is format 2"
        );
        let event: runtime::event::Record = record.decode().unwrap();
        let start = framing::begin(&mut bytes, record.seq);
        journal::codec::encode_into(&event, &mut bytes, u64::MAX, Encoding::Fixint).unwrap();
        framing::seal(&mut bytes, start);
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if segment::parse_file_name(&name).is_some() {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
    }
    std::fs::write(dir.join(segment::file_name(0)), bytes).unwrap();
}

/// The format versions of the segments in `dir`.
fn versions(dir: &Path) -> Vec<u32> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| segment::parse_file_name(n).is_some())
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| {
            let b = std::fs::read(dir.join(n)).unwrap();
            u32::from_le_bytes(b[8..12].try_into().unwrap())
        })
        .collect()
}

/// An interrupted session: c1 settled, c2 started with no outcome, c3 only received.
fn session(dir: &Path) {
    let mut b = Builder::new(dir);
    b.batch(&["c1", "c2", "c3"]);
    b.approve("c1");
    b.start("c1");
    b.settle("c1", true);
    b.approve("c2");
    b.start("c2");
    b.done();
}

/// `recover` run with `args`, the journal directory second; its exit code and its output with
/// the directory's path taken out.
fn run(args: &[&str], dir: &Path) -> (Option<i32>, String, String) {
    let mut all = args.to_vec();
    let path = dir.to_str().unwrap();
    all.insert(1, path);
    let out = recover(&all);
    let clean = |b: &[u8]| text(b).replace(path, "DIR");
    (out.status.code(), clean(&out.stdout), clean(&out.stderr))
}

#[test]
fn every_command_reads_a_format_1_journal_as_it_reads_format_2() {
    let (v1, v2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    session(v1.path());
    session(v2.path());
    rewrite_as_format_1(v1.path());
    assert_eq!(versions(v1.path()), [1]);
    assert_eq!(versions(v2.path()), [2]);
    let smaller = std::fs::metadata(v2.path().join(segment::file_name(0)))
        .unwrap()
        .len();
    let larger = std::fs::metadata(v1.path().join(segment::file_name(0)))
        .unwrap()
        .len();
    assert!(
        smaller < larger,
        "format 2: {smaller} bytes, format 1: {larger}"
    );

    let commands: [&[&str]; 6] = [
        &["verify"],
        &["classify", "--dry-run"],
        &["classify", "--dry-run", "--json"],
        &["rebuild", "--dry-run", "--format", "anthropic"],
        &["audit"],
        &["audit", "--json"],
    ];
    for args in commands {
        let (code, stdout, stderr) = run(args, v1.path());
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stdout.is_empty(), "{args:?} printed nothing");
        assert_eq!(
            (code, stdout, stderr),
            run(args, v2.path()),
            "{args:?}: format 1 and 2 read alike"
        );
    }

    // A recovery appends to each journal in its own format.
    let classify: &[&str] = &["classify", "--json"];
    let (code, first, stderr) = run(classify, v1.path());
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!((code, first.clone(), stderr), run(classify, v2.path()));
    let v = serde_json::from_str::<serde_json::Value>(&first).unwrap();
    assert_eq!(by_id(&v, "c2")["classification"], "TOOL_OUTCOME_UNKNOWN");
    assert!(versions(v1.path()).iter().all(|&v| v == 1));
    assert!(versions(v2.path()).iter().all(|&v| v == 2));
    let replay = replay_dir(v1.path());
    assert_eq!(replay.recoveries.len(), 1, "the recovery was appended");
    for args in [&["verify"][..], &["audit"]] {
        let (code, stdout, stderr) = run(args, v1.path());
        assert_eq!(code, Some(0), "{args:?} after the recovery: {stderr}");
        assert_eq!((code, stdout, stderr), run(args, v2.path()), "{args:?}");
    }
}
