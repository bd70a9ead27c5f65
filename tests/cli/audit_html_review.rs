//! An adversarial review of `recover audit --html`: journals crafted event by event to attack
//! the page's size bound, its escaping, its error paths and its promise that every call the
//! audit lists is on the page. Each test states the promise it checks.

use crate::common::audit_page;
use crate::common::recover_bin;

use audit_page::{assert_sound_page, call_ids, demo, parse_errors, path_str, summary};
use journal::{FsStorage, Journal, Options};
use runtime::event::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A temporary directory, the journal path in it, and a writer creating that journal.
fn fresh() -> (tempfile::TempDir, PathBuf, Writer) {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j");
    let w = Writer::create(&j);
    (dir, j, w)
}

/// Appends records with increasing times.
struct Writer {
    journal: Journal,
    at_ms: u64,
    response_seq: u64,
}

impl Writer {
    fn create(dir: &Path) -> Writer {
        let (journal, _) = Journal::open(
            Arc::new(FsStorage::create(dir).unwrap()),
            Options::default(),
        )
        .unwrap();
        Writer {
            journal,
            at_ms: now_ms() - 600_000,
            response_seq: 0,
        }
    }
    fn reopen(dir: &Path) -> Writer {
        let at_ms = now_ms() + 1_000;
        let (journal, _) =
            Journal::open(Arc::new(FsStorage::open(dir).unwrap()), Options::default()).unwrap();
        Writer {
            journal,
            at_ms,
            response_seq: 0,
        }
    }
    fn put(&mut self, event: Event) -> u64 {
        self.at_ms += 10;
        self.journal
            .append(&Record {
                at_ms: self.at_ms,
                event,
            })
            .unwrap()
    }
    fn open(&mut self, session_id: String, tools: Vec<ToolDescriptor>) {
        self.open_schema(EVENT_SCHEMA_VERSION, session_id, tools);
    }
    fn open_schema(&mut self, schema_version: u32, session_id: String, tools: Vec<ToolDescriptor>) {
        self.put(Event::SessionOpen(SessionOpen {
            schema_version,
            session_id,
            workspace: "/ws".into(),
            tools,
        }));
    }
    fn model(&mut self, model: String) {
        self.put(Event::SessionModel(SessionModel {
            provider: "scripted".into(),
            model,
            system: None,
            settings: Default::default(),
            note: None,
            base_url: None,
        }));
    }
    /// A step of `turn` whose response asks for `calls` (id, tool, arguments), each received.
    fn step(&mut self, turn: u32, step: u32, calls: &[(String, String, String)]) {
        if step == 1 {
            self.put(Event::TurnStart {
                turn,
                user_text: format!("turn {turn}"),
            });
        }
        self.put(Event::StepStart { turn, step });
        let tool_calls = calls
            .iter()
            .map(|(id, name, args)| ModelCall {
                call_id: id.clone(),
                name: name.clone(),
                arguments: args.clone(),
            })
            .collect();
        self.response_seq = self.put(Event::LlmResponse {
            turn,
            step,
            response: ModelResponse {
                text: "on it".into(),
                tool_calls,
                stop_reason: StopReason::ToolUse,
            },
        });
        for (i, (id, name, args)) in calls.iter().enumerate() {
            self.put(Event::Received {
                call: CallRef {
                    turn,
                    step,
                    call_id: id.clone(),
                },
                index: i as u32,
                tool: name.clone(),
                raw_arguments: args.clone(),
                source_seqs: vec![self.response_seq],
            });
        }
    }
    fn fault(&mut self, turn: u32, step: u32, message: String) {
        self.put(Event::Fault {
            turn,
            step,
            message,
        });
    }
    /// Stops writing, as a process that died would (no `session/close`).
    fn close(self) {
        self.journal.close().unwrap();
    }
    fn close_session(mut self) {
        self.put(Event::SessionClose);
        self.journal.close().unwrap();
    }
}

fn recover(args: &[&str]) -> Output {
    Command::new(recover_bin::recover_bin())
        .args(args)
        .output()
        .expect("recover runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `recover audit DIR --html FILE --html-bytes-max BOUND`; asserts it succeeded and the file is
/// within the bound; the page.
fn page_within(dir: &Path, file: &Path, bound: u64) -> String {
    let out = recover(&[
        "audit",
        path_str(dir),
        "--html",
        path_str(file),
        "--html-bytes-max",
        &bound.to_string(),
    ]);
    assert!(
        out.status.success(),
        "the page is drawn whatever the journal holds; exit {:?}: {}",
        out.status.code(),
        stderr(&out)
    );
    let size = std::fs::metadata(file).unwrap().len();
    assert!(
        size <= bound,
        "the page is {size} bytes, over its bound {bound}"
    );
    std::fs::read_to_string(file).unwrap()
}

/// `n` calls whose arguments are `chars` characters of `<` (6 bytes each once escaped): enough
/// of them fill the items' share of a small bound.
fn fat_calls(prefix: &str, n: usize, chars: usize) -> Vec<(String, String, String)> {
    (0..n)
        .map(|i| (format!("{prefix}{i}"), "read".into(), "<".repeat(chars)))
        .collect()
}

// ---- 1. The size bound -------------------------------------------------------------------

/// The model's name is cut in the summary: one `session/model` record (well within the
/// journal's 16 MiB record limit) once took the page past the default 32 MiB bound.
#[test]
fn bound_a_long_model_name_keeps_the_page_within_the_default_bound() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    w.model("<".repeat(6 << 20));
    w.step(1, 1, &fat_calls("c", 3, 10));
    w.close();
    page_within(&j, &dir.path().join("p.html"), 32 * MIB);
}

/// The session id is cut in the summary (it once went in whole).
#[test]
fn bound_a_long_session_id_keeps_the_page_within_its_bound() {
    let (dir, j, mut w) = fresh();
    w.open("<".repeat(MIB as usize), vec![]);
    w.step(1, 1, &fat_calls("c", 3, 10));
    w.close();
    page_within(&j, &dir.path().join("p.html"), 2 * MIB);
}

/// 500 tools of 300-character names are about 1.8 MB of summary once escaped: past the 1 MiB
/// the summary is kept, once the items fill their share. The tools are listed within their
/// share of the summary, the rest counted.
#[test]
fn bound_many_tools_with_long_names_keep_the_page_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j");
    let tools = (0..500)
        .map(|i| ToolDescriptor {
            name: format!("{i:03}{}", "<".repeat(300)),
            source: ToolSource::External {
                server: "<".repeat(300),
            },
            version: "1".into(),
            schema_hash: "ab".repeat(32),
        })
        .collect();
    let mut w = Writer::create(&j);
    w.open("s".into(), tools);
    w.step(1, 1, &fat_calls("c", 200, 2000));
    w.close();
    page_within(&j, &dir.path().join("p.html"), 2 * MIB);
}

/// 1000 faults of 300 characters are about 1.9 MB of markers once escaped: drawn within
/// their share of the summary, the rest counted.
#[test]
fn bound_many_long_faults_keep_the_page_within_its_bound() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    w.step(1, 1, &fat_calls("c", 200, 2000));
    for _ in 0..1000 {
        w.fault(1, 1, "<".repeat(300));
    }
    w.close();
    page_within(&j, &dir.path().join("p.html"), 2 * MIB);
}

/// Control: the items alone, however fat, stay within the bound (this held).
#[test]
fn bound_fat_calls_alone_stay_within_the_bound() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    for s in 1..=50 {
        let calls: Vec<_> = (0..20)
            .map(|i| {
                (
                    format!("t1s{s}c{i}{}", "<".repeat(400)),
                    "<".repeat(400),
                    "<".repeat(5000),
                )
            })
            .collect();
        w.step(1, s, &calls);
        w.put(Event::StepEnd {
            turn: 1,
            step: s,
            outcome: StepOutcome::Failed {
                message: "<".repeat(5000),
            },
        });
    }
    w.close();
    let page = page_within(&j, &dir.path().join("p.html"), 2 * MIB);
    assert!(summary(&page)["elided"]["calls"].as_u64().unwrap() > 0);
}

// ---- 2. Escaping ---------------------------------------------------------------------------

/// Characters HTML5 calls parse errors in the input stream (DEL, C1 controls, noncharacters)
/// that JSON does not escape: the page must still parse without error, as the suite's own
/// `assert_sound_page` demands.
#[test]
fn escaping_control_and_noncharacters_in_journal_text_are_no_parse_errors() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    let odd = "a\u{7f}b\u{85}c\u{9f}d\u{fdd0}e\u{fffe}f\u{1fffe}g";
    w.step(
        1,
        1,
        &[(format!("odd{odd}"), format!("t{odd}"), odd.into())],
    );
    w.close();
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    assert!(call_ids(&page).contains(&format!("odd{odd}")));
    assert_eq!(parse_errors(&page), Vec::<String>::new());
}

/// `<!--`, `<script`, `</script>`, quotes and U+2028/2029 in every string the page takes.
#[test]
fn escaping_markup_everywhere_stays_text() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j");
    let evil = "<!--<script>\"'</script><script>x=1</script>\u{2028}\u{2029}-->]]></SCRIPT >";
    let mut w = Writer::create(&j);
    w.open(
        format!("s{evil}"),
        vec![ToolDescriptor {
            name: format!("t{evil}"),
            source: ToolSource::Mcp {
                server: evil.into(),
                implementation: evil.into(),
                version: evil.into(),
            },
            version: evil.into(),
            schema_hash: "ab".repeat(32),
        }],
    );
    w.model(evil.into());
    w.step(
        1,
        1,
        &[(format!("c{evil}"), format!("t{evil}"), evil.into())],
    );
    w.fault(1, 1, evil.into());
    w.close();
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    assert_sound_page(path_str(&j), &page);
    for raw in ["<!--<", "<script>x", "\u{2028}", "</SCRIPT"] {
        assert!(!page.contains(raw), "{raw:?} is in the file as such");
    }
    assert_eq!(audit_page::elements(&page, "script").len(), 3);
}

// ---- 3. Errors -----------------------------------------------------------------------------

/// A record in the middle with a bad CRC: exit 2, and no file (nor a partial one) left.
#[test]
fn errors_a_corrupt_journal_leaves_no_file() {
    let (journal, _) = demo();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("j");
    audit_page::copy_dir(journal, &copy);
    let seg = copy.join("00000000000000000000.segment");
    let mut bytes = std::fs::read(&seg).unwrap();
    // The records' offsets (a zero length: the zeros written ahead).
    let mut offsets = vec![journal::segment::HEADER_BYTES];
    loop {
        let at = *offsets.last().unwrap();
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 || at + len + 8 >= bytes.len() {
            break;
        }
        offsets.push(at + len + 8);
    }
    assert!(offsets.len() > 10, "{offsets:?}");
    let mid = offsets[offsets.len() / 2] + 10;
    bytes[mid] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = recover(&[
        "audit",
        path_str(&copy),
        "--html",
        path_str(&out_dir.join("p.html")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("error:"), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}

/// A destination whose directory is missing: exit 1, and the message names the file asked for,
/// not a temporary name the user never gave.
#[test]
fn errors_a_missing_directory_is_named_as_given() {
    let (journal, _) = demo();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("missing").join("p.html");
    let out = recover(&["audit", path_str(journal), "--html", path_str(&file)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(path_str(&file)), "{err}");
    assert!(
        !err.contains(".partial-"),
        "the error names an internal partial file: {err}"
    );
}

/// A destination under a regular file (not a directory): exit 1, nothing written.
#[test]
fn errors_a_destination_under_a_file_fails_cleanly() {
    let (journal, _) = demo();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, "x").unwrap();
    let out = recover(&[
        "audit",
        path_str(journal),
        "--html",
        path_str(&f.join("p.html")),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(std::fs::read(&f).unwrap(), b"x");
}

#[test]
fn errors_json_and_html_conflict() {
    let (journal, _) = demo();
    let out = recover(&["audit", path_str(journal), "--json", "--html", "-"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

// ---- 4. Resumed sessions -------------------------------------------------------------------

/// Crashed, recovered, resumed, crashed again, recovered, resumed and closed: two crash markers,
/// each at the last record before its crash.
#[test]
fn resumed_twice_crashed_session_has_one_marker_per_crash() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    w.step(1, 1, &fat_calls("a", 2, 10));
    let crash1 = w.at_ms;
    drop(w);
    let classify = recover(&["classify", path_str(&j)]);
    assert!(classify.status.success(), "{}", stderr(&classify));
    let mut w = Writer::reopen(&j);
    w.step(2, 1, &fat_calls("b", 2, 10));
    let crash2 = w.at_ms;
    drop(w);
    let classify = recover(&["classify", path_str(&j)]);
    assert!(classify.status.success(), "{}", stderr(&classify));
    let mut w = Writer::reopen(&j);
    w.step(3, 1, &fat_calls("c", 1, 10));
    w.put(Event::StepEnd {
        turn: 3,
        step: 1,
        outcome: StepOutcome::Cancelled,
    });
    w.put(Event::TurnEnd {
        turn: 3,
        outcome: TurnOutcome::Cancelled,
    });
    w.close_session();
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    assert_sound_page(path_str(&j), &page);
    let s = summary(&page);
    let marks = s["marks"].as_array().unwrap();
    let crashes: Vec<u64> = marks
        .iter()
        .filter(|m| m["kind"] == "crash")
        .map(|m| m["at"].as_u64().unwrap())
        .collect();
    assert_eq!(crashes, vec![crash1, crash2], "{marks:?}");
    let stops = marks.iter().filter(|m| m["kind"] == "stop").count();
    assert_eq!(stops, 1, "{marks:?}");
    assert_eq!(s["ended"]["how"], "closed");
    assert_eq!(s["ended"]["recoveries"], 2);
}

// ---- 5. Every call the audit lists is on the page -------------------------------------------

/// A call id longer than 300 characters is on the page whole (it was once cut, so the audit's
/// id was not there and nothing said it was elided).
#[test]
fn ids_a_long_call_id_is_on_the_page_whole() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j");
    let long = format!("call_{}", "x".repeat(400));
    let mut w = Writer::create(&j);
    w.open("s".into(), vec![]);
    w.step(1, 1, &[(long.clone(), "read".into(), "{}".into())]);
    w.close();
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    assert!(summary(&page)["elided"].is_null());
    assert_eq!(audit_page::audit_ids(path_str(&j)), vec![long.clone()]);
    assert_eq!(call_ids(&page), vec![long]);
}

// ---- 4b. Older journals ------------------------------------------------------------------

/// The demo's journal rewritten as format 1 (as `recover/cli/tests/cli/format_1.rs` does): the same
/// page as format 2's.
#[test]
fn old_a_format_1_journal_draws_as_its_format_2_copy() {
    use journal::codec::Encoding;
    use journal::segment::{self, SegmentHeader};
    use journal::{framing, Limits, Reader};
    let (journal, _) = demo();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("j");
    audit_page::copy_dir(journal, &copy);
    let storage = Arc::new(FsStorage::open(&copy).unwrap());
    let reader = Reader::open(storage, Limits::default()).unwrap();
    let segment0 = std::fs::read(copy.join(segment::file_name(0))).unwrap();
    let header = SegmentHeader {
        format_version: 1,
        journal_id: segment0[12..28].try_into().unwrap(),
        segment_number: 0,
        first_seq: 1,
    };
    let mut bytes = header.encode().to_vec();
    for record in reader {
        let record = record.unwrap();
        let event: Record = record.decode().unwrap();
        let start = framing::begin(&mut bytes, record.seq);
        journal::codec::encode_into(&event, &mut bytes, u64::MAX, Encoding::Fixint).unwrap();
        framing::seal(&mut bytes, start);
    }
    for entry in std::fs::read_dir(&copy).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if segment::parse_file_name(&name).is_some() {
            std::fs::remove_file(copy.join(name)).unwrap();
        }
    }
    std::fs::write(copy.join(segment::file_name(0)), bytes).unwrap();
    let old = page_within(&copy, &dir.path().join("old.html"), 32 * MIB);
    assert_sound_page(path_str(&copy), &old);
    let new = page_within(journal, &dir.path().join("new.html"), 32 * MIB);
    assert_eq!(audit_page::items(&old), audit_page::items(&new));
}

/// A schema-1 journal (no tool schemas, `started` as schemas 1 to 4 wrote it), crashed with a
/// call started: drawn, its calls all there, the crash marked.
#[test]
fn old_a_schema_1_journal_draws() {
    let (dir, j, mut w) = fresh();
    w.open_schema(1, "s".into(), vec![]);
    w.step(1, 1, &fat_calls("c", 2, 10));
    let c0 = CallRef {
        turn: 1,
        step: 1,
        call_id: "c0".into(),
    };
    let received = w.response_seq + 1;
    let parsed = w.put(Event::Parsed {
        call: c0.clone(),
        arguments: "{}".into(),
        source_seqs: vec![received],
    });
    let approved = w.put(Event::Approved {
        call: c0.clone(),
        approval: Approval::Default,
        source_seqs: vec![parsed],
    });
    w.put(Event::StartedV4 {
        call: c0,
        attempt: 1,
        resources: Resources::default(),
        source_seqs: vec![approved],
    });
    w.close();
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    assert_sound_page(path_str(&j), &page);
    let s = summary(&page);
    assert_eq!(s["ended"]["how"], "crashed", "{s}");
    let items = audit_page::items(&page);
    let c0 = items.iter().find(|i| i["id"] == "c0").unwrap();
    assert_eq!(c0["outcome"], "unknown", "{c0}");
}

// ---- 3b. Where the page goes ------------------------------------------------------------------

/// The page written into the journal's own directory (beside the segments): the journal still
/// reads the same afterwards.
#[test]
fn errors_a_page_beside_the_segments_leaves_the_journal_readable() {
    let (journal, _) = demo();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("j");
    audit_page::copy_dir(journal, &copy);
    let before = recover(&["audit", path_str(&copy), "--json"]);
    assert!(before.status.success());
    page_within(&copy, &copy.join("audit.html"), 32 * MIB);
    let after = recover(&["audit", path_str(&copy), "--json"]);
    assert!(after.status.success(), "{}", stderr(&after));
    let verify = recover(&["verify", path_str(&copy)]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

/// A journal directory whose name looks like markup: the title is text.
#[test]
fn escaping_a_journal_path_that_looks_like_markup_is_text() {
    let (journal, _) = demo();
    let dir = tempfile::tempdir().unwrap();
    let evil = dir
        .path()
        .join("<!--<script>x=1<")
        .join("script><title>\"'\u{2028}&amp;");
    std::fs::create_dir_all(evil.parent().unwrap()).unwrap();
    audit_page::copy_dir(journal, &evil);
    let page = page_within(&evil, &dir.path().join("p.html"), 32 * MIB);
    assert_sound_page(path_str(&evil), &page);
    assert_eq!(audit_page::elements(&page, "title").len(), 1);
    assert_eq!(audit_page::elements(&page, "script").len(), 3);
    assert!(!page.contains("<!--<"));
}

/// A call in its step's `llm/response` that the process never `received` before it died, then
/// given a result by a recovery: never drawn as received at the recovery's time (after the
/// crash marker and after its step ended), which the process never did, as it once was.
/// Unrecovered, the same call has no times at all.
#[test]
fn resumed_a_call_never_received_is_not_drawn_after_the_crash() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    w.step(1, 1, &fat_calls("c", 1, 10));
    // The response asked for two calls; the process died after receiving the first.
    w.put(Event::StepEnd {
        turn: 1,
        step: 1,
        outcome: StepOutcome::Completed,
    });
    w.put(Event::StepStart { turn: 1, step: 2 });
    let calls = fat_calls("d", 2, 10);
    let tool_calls = calls
        .iter()
        .map(|(id, name, args)| ModelCall {
            call_id: id.clone(),
            name: name.clone(),
            arguments: args.clone(),
        })
        .collect();
    let response = w.put(Event::LlmResponse {
        turn: 1,
        step: 2,
        response: ModelResponse {
            text: "on it".into(),
            tool_calls,
            stop_reason: StopReason::ToolUse,
        },
    });
    w.put(Event::Received {
        call: CallRef {
            turn: 1,
            step: 2,
            call_id: "d0".into(),
        },
        index: 0,
        tool: "read".into(),
        raw_arguments: "<".repeat(10),
        source_seqs: vec![response],
    });
    let crash = w.at_ms;
    w.close();
    let before = page_within(&j, &dir.path().join("before.html"), 32 * MIB);
    let d1 = audit_page::items(&before)
        .into_iter()
        .find(|i| i["id"] == "d1")
        .unwrap();
    assert!(d1["times"].is_null(), "{d1}");
    let classify = recover(&["classify", path_str(&j)]);
    assert!(classify.status.success(), "{}", stderr(&classify));
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    let s = summary(&page);
    let mark = s["marks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "crash")
        .unwrap()
        .clone();
    assert_eq!(mark["at"], crash, "{mark}");
    let items = audit_page::items(&page);
    let step = items
        .iter()
        .find(|i| i["k"] == "step" && i["step"] == 2)
        .unwrap();
    assert_eq!(step["ended"], crash, "{step}");
    let d1 = items.iter().find(|i| i["id"] == "d1").unwrap();
    let received = &d1["times"]["received"];
    assert!(
        received.is_null() || received.as_u64().unwrap() <= crash,
        "d1 was never received before the crash at {crash}, yet the page has it received at \
         {received} (the recovery ran at {}): {d1}",
        mark["recovered_at"]
    );
}

/// More than 1000 markers before a crash (faults here; stops would do the same): the crash at
/// the end, the one that matters most, is still drawn (the markers were once capped at 1000,
/// keeping the first, so it was not).
#[test]
fn bound_the_crash_is_marked_after_a_thousand_faults() {
    let (dir, j, mut w) = fresh();
    w.open("s".into(), vec![]);
    w.step(1, 1, &fat_calls("c", 1, 10));
    for i in 0..1001 {
        w.fault(1, 1, format!("fault {i}"));
    }
    w.close();
    let page = page_within(&j, &dir.path().join("p.html"), 32 * MIB);
    let s = summary(&page);
    assert_eq!(s["ended"]["how"], "crashed");
    let marks = s["marks"].as_array().unwrap();
    assert!(
        marks.iter().any(|m| m["kind"] == "crash"),
        "no crash marker; marks_elided = {}, last marker {}",
        s["marks_elided"],
        marks.last().unwrap()
    );
}
