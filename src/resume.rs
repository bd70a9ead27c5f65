//! `tooljournal resume`: recovery first (nothing re-run), then the session goes on under its
//! journaled policy with a live model (from the history recovery rebuilt) or a transcript's
//! next line.
//!
//! Questions withdrawn by the crash: when recovery withdrew the built-in `ask`'s questions of
//! the last turn (they waited for an answer when the session stopped), a resume with a live
//! model begins its first turn's user text with a note ([`withdrawal_note`]): which questions
//! (call id and text) were withdrawn unanswered, and whether the files the conversation's calls
//! wrote (each path's latest `FsWrite` hash, at most [`WRITTEN_PATHS_CHECKED_MAX`], most
//! recently written first) are still as the journal left them, or which changed or were
//! deleted. Decided: the note goes in the user text, not in the withdrawn call's result, so that
//! the result stays what recovery recorded (the same bytes on every rebuild), while the note,
//! which depends on the workspace now, is journaled once in `turn/start` and so is in every
//! history rebuilt after it. The note is decided under the writer lock, from the journal as it
//! ends then; the withdrawn question is never answered by it, nor re-asked for the model.

use crate::agent_run;
use crate::policy;
use crate::run::{failed, load_script, lock, play, prepare, session_is_live, wire, Setup, Wired};
use crate::CliError;
use journal::{FsStorage, Storage};
use runtime::event::CallRef;
use runtime::replay::SessionReplay;
use runtime::transcript::consumed_lines;
use std::path::{Path, PathBuf};

/// Most files a resume checks against the journal's hashes for its note, most recently
/// written first: a bound on the reading a resume does before it goes on.
pub const WRITTEN_PATHS_CHECKED_MAX: usize = 64;

/// Longest question text quoted in the note, in characters.
const QUESTION_CHARS_MAX: usize = 200;

/// What `tooljournal resume` was asked to do.
pub struct ResumeArgs<'a> {
    pub journal_dir: &'a Path,
    pub script: Option<&'a Path>,
    pub flags: policy::ResumeFlags,
    /// Turn plan mode on.
    pub plan_mode: bool,
    /// Kill process groups the crashed run left running instead of refusing to go on.
    pub kill_orphans: bool,
    /// The live model to go on with (default: the one the journal records).
    pub model: crate::model_cli::ModelFlags,
    /// The turns to run with it.
    pub prompts: Vec<String>,
}

pub fn resume(args: ResumeArgs<'_>) -> Result<(), CliError> {
    let ResumeArgs {
        journal_dir,
        script,
        flags,
        plan_mode,
        kill_orphans,
        model,
        prompts,
    } = args;
    if script.is_some() && (model.spec.is_some() || !prompts.is_empty()) {
        return Err(failed(
            "--script plays a transcript: it goes with neither --model nor --prompt",
        ));
    }
    let recovered = recover_first(journal_dir)?;
    // The policy the journal holds decides how the journal is opened (its fsync), so it is
    // read before the lock, and checked again under it.
    let journaled = recovered.analysis.replay.policy.clone();
    let resolved = policy::for_resume(journaled.as_ref(), flags)?;
    for note in &resolved.notes {
        eprintln!("note: {note}");
    }
    let mut setup = Setup {
        person: None,
        approve: resolved.approve,
        max_parallel: resolved.max_parallel,
        fsync: resolved.fsync,
        json: false,
        config: &resolved.config.config,
        config_file: resolved.config.file.clone(),
        killed: Vec::new(),
        // A resumed session keeps the plan mode its journal shows; the flag can turn it on.
        plan_mode,
    };
    // Decided (and the model connected) before the lock: a missing key changes nothing.
    let live = match script {
        Some(_) => agent_run::Live::NoModel,
        None => agent_run::live(
            &model,
            prompts,
            &resolved.config.config.model,
            &recovered.analysis,
        )?,
    };
    if matches!(live, agent_run::Live::Go(_)) {
        setup.person = agent_run::resume_person(resolved.approve);
    }
    // The workspace is the one the session was opened on (checked again under the lock).
    let workspace = recovered
        .analysis
        .replay
        .open
        .as_ref()
        .map(|open| PathBuf::from(&open.workspace))
        .unwrap_or_default();
    let Wired {
        builder,
        approver,
        printer,
    } = wire(&workspace, journal_dir, &setup, true);
    // From here the writer lock is held: the replay below is the journal as it really ends,
    // and no other process can append before this session does (or finish it meanwhile).
    let locked = lock(builder)?;
    let replay = locked.replay();
    let Some(open) = still_resumable(journal_dir, replay, journaled.as_ref())? else {
        return Ok(());
    };
    let script = match (script, live) {
        (Some(script), _) => script,
        (None, agent_run::Live::Go(mut go)) => {
            setup.killed = stop_orphans(journal_dir, replay, kill_orphans)?;
            if let Some(note) = withdrawal_note(replay, Path::new(&open.workspace)) {
                eprintln!("note: questions withdrawn by the crash; the resumed turn says so");
                go.prepend_to_first_prompt(&note);
            }
            return agent_run::resume(locked, setup, approver, printer, go);
        }
        (None, agent_run::Live::NeedsPrompt(spec)) => {
            outln!(
                "{}: session {} is balanced; give --prompt TEXT to continue it with {spec}",
                journal_dir.display(),
                open.session_id
            )?;
            return Ok(());
        }
        (None, agent_run::Live::NoModel) => {
            outln!(
                "{}: session {} is balanced; give --script, or --model PROVIDER:MODEL with \
                 --prompt TEXT, to continue it",
                journal_dir.display(),
                open.session_id
            )?;
            return Ok(());
        }
    };
    setup.killed = stop_orphans(journal_dir, replay, kill_orphans)?;
    let mut model = load_script(script)?;
    let consumed = consumed_lines(model.lines(), replay)
        .map_err(|e| failed(format!("{}: {e}", script.display())))?;
    model.skip(consumed);
    let session_id = open.session_id.clone();
    let prepared = prepare(locked, setup, approver, printer, true)?;
    outln!("resuming session {session_id} after {consumed} script lines")?;
    play(prepared, model, false)
}

/// Recovery first: balances the journal (never re-running anything) so a resume continues a
/// balanced session; refuses a live session and one recovery could not write to.
fn recover_first(journal_dir: &Path) -> Result<recover::session::Recovered, CliError> {
    let recovered = recover::session::recover(journal_dir, true).map_err(|e| match e {
        recover::session::RecoverError::Corrupt(m) => CliError::Corrupt(m),
        recover::session::RecoverError::Newer(m) => CliError::Newer(m),
        // The rest are I/O failures: exit 1.
        other => CliError::Failed(other.to_string()),
    })?;
    for note in recovered.notes() {
        eprintln!("note: {}: {note}", journal_dir.display());
    }
    if recovered.analysis.live {
        let storage = FsStorage::open(journal_dir).map_err(failed)?;
        return Err(session_is_live(journal_dir, storage.lock_holder_pid()));
    }
    if let Some(why) = &recovered.read_only_because {
        return Err(failed(format!(
            "{}: {why}; cannot resume",
            journal_dir.display()
        )));
    }
    if recovered.appended {
        print_recovered(&recovered)?;
    }
    Ok(recovered)
}

/// Checks, under the writer lock, that the journal is still the one recovery balanced and
/// that there is a session to continue. `None`: nothing to resume (said on stdout).
fn still_resumable<'r>(
    journal_dir: &Path,
    replay: &'r SessionReplay,
    journaled: Option<&runtime::event::SessionPolicy>,
) -> Result<Option<&'r runtime::event::SessionOpen>, CliError> {
    if replay.policy.as_ref() != journaled {
        return Err(failed(format!(
            "{}: another process changed the session's policy while this resume started; \
             run `tooljournal resume` again",
            journal_dir.display()
        )));
    }
    let Some(open) = &replay.open else {
        outln!(
            "{}: empty journal: nothing to resume",
            journal_dir.display()
        )?;
        return Ok(None);
    };
    if replay.closed {
        outln!(
            "{}: session {} already finished; nothing to resume",
            journal_dir.display(),
            open.session_id
        )?;
        return Ok(None);
    }
    if let Some(turn) = replay.open_turn() {
        // Another process was interrupted between our recovery and our lock.
        return Err(failed(format!(
            "{}: turn {} is open again: another process wrote to the session after its \
             recovery; run `tooljournal resume` again",
            journal_dir.display(),
            turn.turn
        )));
    }
    Ok(Some(open))
}

/// How long a killed process group may take to disappear.
const ORPHAN_KILL_WAIT_MS: u64 = 5_000;

/// Process groups that calls of the crashed run started and that still run: a resume does not
/// go on beside them (they may still be changing the workspace) unless told to kill them.
/// Returns the groups killed, for the journal.
fn stop_orphans(
    journal_dir: &Path,
    replay: &SessionReplay,
    kill: bool,
) -> Result<Vec<(CallRef, u32)>, CliError> {
    let mut killed = Vec::new();
    for (call, process) in replay.unsettled_processes() {
        let Some(members) = runtime::process::still_running(&process) else {
            continue;
        };
        if !kill {
            return Err(failed(format!(
                "{}: {call}: still running: process group {} ({members} processes), started \
                 before the session was interrupted; stop it, or resume with --kill-orphans",
                journal_dir.display(),
                process.pgid
            )));
        }
        let pgid = nix::unistd::Pid::from_raw(process.pgid as i32);
        // ESRCH: it ended on its own meanwhile; that is fine.
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(ORPHAN_KILL_WAIT_MS);
        while runtime::process::still_running(&process).is_some() {
            if std::time::Instant::now() > deadline {
                return Err(failed(format!(
                    "{}: {call}: process group {} still runs {ORPHAN_KILL_WAIT_MS} ms after SIGKILL",
                    journal_dir.display(),
                    process.pgid
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!(
            "note: {call}: killed process group {} ({members} processes) left running by the crashed run",
            process.pgid
        );
        killed.push((call, process.pgid));
    }
    Ok(killed)
}

/// What recovery did before a resume, for people.
fn print_recovered(recovered: &recover::session::Recovered) -> Result<(), CliError> {
    let unknown: Vec<_> = recovered
        .analysis
        .calls
        .iter()
        .filter(|c| c.classification == Some(runtime::event::Classification::ToolOutcomeUnknown))
        .map(|c| c.call.call_id.clone())
        .collect();
    outln!(
        "recovered: {} call(s) classified{}",
        recovered
            .analysis
            .recovery
            .as_ref()
            .map(|r| r.calls.len())
            .unwrap_or(0),
        if unknown.is_empty() {
            String::new()
        } else {
            format!("; may have run, not re-run: {}", unknown.join(", "))
        }
    )?;
    Ok(())
}

/// The built-in `ask` questions of the last turn that recovery withdrew (they waited for an
/// answer at the crash): (call id, question text), in journal order.
fn withdrawn_questions(replay: &SessionReplay) -> Vec<(String, String)> {
    let Some(turn) = replay.turns.last() else {
        return Vec::new();
    };
    turn.steps
        .iter()
        .flat_map(|s| s.calls.iter())
        .filter(|c| c.recovered && c.tool == runtime::session::ASK_TOOL)
        .filter_map(|c| {
            let ask = c.asks.last()?;
            let withdrawn = ask.structured.is_some()
                && ask.answer == Some(runtime::event::AskAnswer::Cancelled)
                && ask.cancel_reason.as_deref() == Some(recover::classify::WITHDRAWN_REASON);
            withdrawn.then(|| (c.call.call_id.clone(), ask.question.clone()))
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
    // Asked before opening: opening a FIFO left in its place would wait for a writer.
    match std::fs::metadata(&path) {
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
    if differ.is_empty() {
        note.push_str(" Files written earlier in this conversation are as the journal left them");
    } else {
        note.push_str(&format!(
            " Files written earlier in this conversation differ from what the journal \
             recorded: {}",
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
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(QUESTION_CHARS_MAX) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
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
                "Files written earlier in this conversation are as the journal left them."
            ),
            "{unchanged}"
        );
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
