//! Questions withdrawn by a crash, and what a resume tells the model about them.
//!
//! When recovery withdrew the built-in `ask`'s questions of the last turn (they waited for an
//! answer when the session stopped), a resume with a live model begins its first turn's user text
//! with a note ([`withdrawal_note`]): which questions (call id and text) were withdrawn unanswered,
//! and whether the files the conversation's calls wrote (each path's latest `FsWrite` hash, at most
//! [`WRITTEN_PATHS_CHECKED_MAX`], most recently written first) are still as the journal left them,
//! or which changed or were deleted. Decided: the note goes in the user text, not in the withdrawn
//! call's result, so that the result stays what recovery recorded (the same bytes on every
//! rebuild), while the note, which depends on the workspace now, is journaled once in `turn/start`
//! and so is in every history rebuilt after it. The note is decided under the writer lock, from the
//! journal as it ends then; the withdrawn question is never answered by it, nor re-asked for the
//! model.

use runtime::replay::SessionReplay;
use std::path::Path;

/// Most files a resume checks against the journal's hashes for its note, most recently
/// written first: a bound on the reading a resume does before it goes on.
pub const WRITTEN_PATHS_CHECKED_MAX: usize = 64;

/// Longest question text quoted in the note, in characters.
const QUESTION_CHARS_MAX: usize = 200;

/// The built-in `ask` questions of the last turn that recovery withdrew (they waited for an
/// answer at the crash): (call id, question text), in journal order.
fn withdrawn_questions(replay: &SessionReplay) -> Vec<(String, String)> {
    let Some(turn) = replay.turns.last() else {
        return Vec::new();
    };
    turn.steps
        .iter()
        .flat_map(|s| s.calls.iter())
        .filter(|c| c.tool == runtime::ASK_TOOL)
        .filter_map(|c| {
            let ask = c.asks.last()?;
            let withdrawn = c.recovered
                && ask.structured.is_some()
                && ask.answer == Some(runtime::event::AskAnswer::Cancelled)
                && ask.cancel_reason.as_deref() == Some(recover::WITHDRAWN_REASON);
            // A re-running resume recovers the journal itself, after this note is decided:
            // a question still pending in the open turn is one its recovery withdraws.
            let to_withdraw =
                turn.outcome.is_none() && ask.structured.is_some() && ask.answer.is_none();
            (withdrawn || to_withdraw).then(|| (c.call.call_id.clone(), ask.question.clone()))
        })
        .collect()
}

/// The files the conversation's calls wrote (`FsWrite` in settled outcomes): each path with
/// the hash its latest write left, most recently written first, at most `max`; and how many
/// paths were written in all.
fn written_files(replay: &SessionReplay, max: usize) -> (Vec<(String, String)>, usize) {
    // Each path's latest write, numbered in journal order.
    let mut latest: std::collections::HashMap<&str, (usize, &str)> = Default::default();
    let writes = replay
        .calls()
        .filter_map(|c| c.outcome.as_ref())
        .flat_map(|o| o.side_effects.iter())
        .filter_map(|e| match e {
            runtime::event::SideEffect::FsWrite {
                path, after_sha256, ..
            } => Some((path.as_str(), after_sha256.as_str())),
            _ => None,
        });
    for (n, (path, sha256)) in writes.enumerate() {
        latest.insert(path, (n, sha256));
    }
    let total = latest.len();
    let mut recent: Vec<(usize, &str, &str)> = latest
        .into_iter()
        .map(|(path, (n, sha256))| (n, path, sha256))
        .collect();
    recent.sort_unstable_by_key(|r| std::cmp::Reverse(r.0));
    let checked = recent
        .into_iter()
        .take(max)
        .map(|(_, path, sha256)| (path.to_owned(), sha256.to_owned()))
        .collect();
    (checked, total)
}

/// A written file as the workspace has it now, against the hash the journal has.
#[derive(Debug, PartialEq, Eq)]
enum FileNow {
    AsLeft,
    Changed,
    Deleted,
    /// It could not be read (why).
    Unchecked(String),
}

/// Compares `rel` (a path as the file tools show it: relative to the workspace) with `sha256`.
fn file_now(workspace: &Path, rel: &str, sha256: &str) -> FileNow {
    use sha2::Digest;
    use std::path::Component;
    // The file tools keep paths beneath the workspace; a journal saying otherwise is not
    // followed out of it.
    let relative = Path::new(rel);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return FileNow::Unchecked("not a path inside the workspace".into());
    }
    let path = workspace.join(relative);
    // Asked before opening, without following a link: a FIFO left in its place would wait
    // for a writer, and a symlink is not the regular file the write left (nor is it followed
    // out of the workspace).
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return FileNow::Changed,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return FileNow::Deleted
        }
        Err(e) => return FileNow::Unchecked(e.to_string()),
    }
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) => return FileNow::Unchecked(e.to_string()),
    };
    let mut hasher = sha2::Sha256::new();
    if let Err(e) = std::io::copy(&mut std::io::BufReader::new(file), &mut hasher) {
        return FileNow::Unchecked(e.to_string());
    }
    if hex::encode(hasher.finalize()) == sha256 {
        FileNow::AsLeft
    } else {
        FileNow::Changed
    }
}

/// The note a resume's first turn begins with when recovery withdrew questions of the last
/// turn (see the module documentation); `None` when it withdrew none.
pub fn withdrawal_note(replay: &SessionReplay, workspace: &Path) -> Option<String> {
    let questions = withdrawn_questions(replay);
    if questions.is_empty() {
        return None;
    }
    let (written, total) = written_files(replay, WRITTEN_PATHS_CHECKED_MAX);
    let files: Vec<(String, FileNow)> = written
        .into_iter()
        .map(|(path, sha256)| {
            let now = file_now(workspace, &path, &sha256);
            (path, now)
        })
        .collect();
    Some(note_text(&questions, &files, total))
}

/// The note's words, from what was withdrawn and what the files are now.
fn note_text(
    questions: &[(String, String)],
    files: &[(String, FileNow)],
    written: usize,
) -> String {
    let listed: Vec<String> = questions
        .iter()
        .map(|(id, text)| format!("ask {id} ({:?})", quoted(text)))
        .collect();
    let (these, them) = match questions.len() {
        1 => ("this question", "it"),
        _ => ("these questions", "them"),
    };
    let mut note = format!(
        "[resumed] The session stopped while {these} waited for an answer, so recovery \
         withdrew {them} unanswered: {}. Nobody answered; ask again if you still need the \
         answer.",
        listed.join(", ")
    );
    let differ: Vec<String> = files
        .iter()
        .filter_map(|(path, now)| match now {
            FileNow::AsLeft => None,
            FileNow::Changed => Some(format!("{path} (changed)")),
            FileNow::Deleted => Some(format!("{path} (deleted)")),
            FileNow::Unchecked(why) => Some(format!("{path} (could not be checked: {why})")),
        })
        .collect();
    // Only what the journal can prove: writes by the file tools record the hash they left;
    // `bash` and calls of unknown outcome record none, so they are named as unchecked.
    let unchecked = "files changed by bash, or by calls whose outcome is unknown, were not checked";
    if written == 0 {
        note.push_str(&format!(
            " No file tool wrote a file in this session; {unchecked}"
        ));
    } else if differ.is_empty() {
        note.push_str(&format!(
            " Of the {written} file(s) the journal records writes of, those checked are as the \
             journal left them; {unchecked}"
        ));
    } else {
        note.push_str(&format!(
            " Of the {written} file(s) the journal records writes of, these differ from what \
             it recorded: {}; {unchecked}",
            differ.join(", ")
        ));
    }
    if written > files.len() {
        note.push_str(&format!(
            " (the {} most recently written of {written} files were checked)",
            files.len()
        ));
    }
    note.push('.');
    note
}

/// `text` on one line, cut to [`QUESTION_CHARS_MAX`] characters.
fn quoted(text: &str) -> String {
    runtime::display::one_line(text, QUESTION_CHARS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(bytes))
    }

    #[test]
    fn files_are_compared_with_the_hash_the_journal_recorded() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("same.txt"), "kept").unwrap();
        std::fs::write(ws.path().join("edited.txt"), "edited since").unwrap();
        std::fs::create_dir(ws.path().join("dir")).unwrap();
        let now = |rel: &str, sha256: &str| file_now(ws.path(), rel, sha256);
        assert_eq!(now("same.txt", &sha(b"kept")), FileNow::AsLeft);
        assert_eq!(now("edited.txt", &sha(b"as written")), FileNow::Changed);
        assert_eq!(now("gone.txt", &sha(b"x")), FileNow::Deleted);
        assert_eq!(now("dir", &sha(b"x")), FileNow::Changed, "no longer a file");
        assert!(matches!(
            now("../outside.txt", &sha(b"x")),
            FileNow::Unchecked(_)
        ));
        assert!(matches!(
            now("/etc/hostname", &sha(b"x")),
            FileNow::Unchecked(_)
        ));
    }

    /// A replay of one turn whose calls each wrote one file: (path, hash) in journal order.
    fn replay_writing(writes: &[(&str, &str)]) -> SessionReplay {
        use runtime::event::{CallRef, Outcome, OutcomeStatus, SideEffect, Text};
        let mut step = runtime::replay::StepReplay::new(1);
        for (i, (path, sha256)) in writes.iter().enumerate() {
            let call = CallRef {
                turn: 1,
                step: 1,
                call_id: format!("w{i}"),
            };
            let mut c = runtime::replay::CallReplay::received(
                call,
                i as u32,
                "write".into(),
                "{}".into(),
                0,
            );
            c.outcome = Some(Outcome {
                status: OutcomeStatus::Success,
                content: Text::Inline("written".into()),
                value: None,
                details: None,
                side_effects: vec![SideEffect::FsWrite {
                    path: (*path).into(),
                    before_sha256: None,
                    after_sha256: (*sha256).into(),
                }],
                attempts: 1,
                duration_ms: 1,
            });
            step.calls.push(c);
        }
        SessionReplay {
            turns: vec![runtime::replay::TurnReplay {
                turn: 1,
                user_text: "write".into(),
                outcome: None,
                steps: vec![step],
            }],
            ..SessionReplay::default()
        }
    }

    #[test]
    fn each_path_is_checked_against_its_latest_write_most_recent_first_and_bounded() {
        let replay = replay_writing(&[("a", "h1"), ("b", "h2"), ("a", "h3"), ("c", "h4")]);
        let owned = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(p, h)| (p.to_string(), h.to_string()))
                .collect()
        };
        assert_eq!(
            written_files(&replay, 10),
            (owned(&[("c", "h4"), ("a", "h3"), ("b", "h2")]), 3)
        );
        assert_eq!(
            written_files(&replay, 2),
            (owned(&[("c", "h4"), ("a", "h3")]), 3)
        );
    }

    #[test]
    fn the_note_names_the_questions_and_the_files_that_differ() {
        let questions = vec![("q1".to_owned(), "Which colour?\nBlue or red".to_owned())];
        let unchanged = note_text(&questions, &[("a.txt".into(), FileNow::AsLeft)], 1);
        assert!(
            unchanged.contains("this question waited") && unchanged.contains("withdrew it"),
            "{unchanged}"
        );
        assert!(
            unchanged.contains("ask q1 (\"Which colour? Blue or red\")"),
            "{unchanged}"
        );
        assert!(
            unchanged.ends_with(
                "Of the 1 file(s) the journal records writes of, those checked are as the \
                 journal left them; files changed by bash, or by calls whose outcome is \
                 unknown, were not checked."
            ),
            "{unchanged}"
        );
        // Nothing written by the file tools: nothing is claimed about files beyond that.
        let none = note_text(&questions, &[], 0);
        assert!(
            none.ends_with(
                "No file tool wrote a file in this session; files changed by bash, or by \
                 calls whose outcome is unknown, were not checked."
            ),
            "{none}"
        );
        assert!(!none.contains("as the journal left them"), "{none}");
        let files = [
            ("a.txt".to_owned(), FileNow::AsLeft),
            ("b.txt".to_owned(), FileNow::Changed),
            ("c.txt".to_owned(), FileNow::Deleted),
        ];
        let two = [questions[0].clone(), ("q2".to_owned(), "Why?".to_owned())];
        let changed = note_text(&two, &files, 70);
        assert!(changed.contains("these questions") && changed.contains("withdrew them"));
        assert!(
            changed.contains("b.txt (changed), c.txt (deleted)") && !changed.contains("a.txt"),
            "{changed}"
        );
        assert!(
            changed.contains("(the 3 most recently written of 70 files were checked)"),
            "{changed}"
        );
    }
}
