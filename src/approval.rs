//! Approvals asked of a person: `--approve ask` sends every call of a tool that may change
//! something to a question, and [`TerminalApprover`] puts questions to the person at the
//! terminal (`y`, `n`, or `a` for "this tool, from now on").
//!
//! Why the answer is read from the raw descriptor with a poll and not through `std::io::stdin`:
//! a question withdrawn (the user pressed Ctrl-C, the batch stopped) must not leave a reader
//! blocked on the terminal, where it would swallow the next line meant for the chat prompt.

use runtime::event::{Answer, AskAnswer, Question};
use runtime::hooks::{
    Approver, AskFuture, CallInfo, Decision, PreExecute, QuestionFuture, QuestionOutcome,
};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `--approve ask`: a call of a tool that does not declare itself read-only asks first.
pub struct AskBeforeChanges;

impl PreExecute for AskBeforeChanges {
    fn name(&self) -> &str {
        "approve-ask"
    }
    fn decide(&self, call: &CallInfo) -> Decision {
        if call.read_only {
            Decision::Pass
        } else {
            Decision::Ask {
                reason: describe(call),
            }
        }
    }
}

/// The question shown for `call`: the command of a `bash` call, the path of a file tool's.
pub fn describe(call: &CallInfo) -> String {
    if let Some(command) = call.args.str("command") {
        return format!("{} `{}`", call.tool, one_line(command, 200));
    }
    if let Some(path) = call.args.str("path") {
        return format!("{} {}", call.tool, one_line(path, 200));
    }
    format!(
        "{} {}",
        call.tool,
        one_line(&call.args.value().to_string(), 200)
    )
}

fn one_line(text: &str, chars_max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(chars_max) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

/// Asks the person at the terminal (questions on stderr, answers on stdin), one question at a
/// time. End of input answers "denied": silence is never consent.
pub struct TerminalApprover {
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl TerminalApprover {
    pub fn new() -> Arc<TerminalApprover> {
        Arc::new(TerminalApprover {
            one_at_a_time: tokio::sync::Mutex::new(()),
        })
    }
}

/// Set when the question's future is dropped (the batch was stopped): the reader gives up.
struct Withdrawn(Arc<AtomicBool>);

impl Drop for Withdrawn {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Approver for TerminalApprover {
    fn ask(&self, call: CallInfo, question: String) -> AskFuture<'_> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            let withdrawn = Arc::new(AtomicBool::new(false));
            let _guard = Withdrawn(withdrawn.clone());
            let prompt = format!(
                "? {} {question} — allow? [y]es / [n]o / [a]lways for {}: ",
                call.call.call_id, call.tool
            );
            let answer =
                tokio::task::spawn_blocking(move || ask_blocking(&prompt, &withdrawn)).await;
            answer.unwrap_or(AskAnswer::Cancelled)
        })
    }

    fn question(&self, call: CallInfo, question: Question) -> QuestionFuture<'_> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            let withdrawn = Arc::new(AtomicBool::new(false));
            let _guard = Withdrawn(withdrawn.clone());
            let shown = show_question(&call.call.call_id, &question);
            let outcome = tokio::task::spawn_blocking(move || {
                question_blocking(&shown, &question, &withdrawn)
            })
            .await;
            outcome.unwrap_or_else(|e| QuestionOutcome::Withdrawn {
                reason: format!("the terminal prompt failed: {e}"),
            })
        })
    }
}

/// The question as printed for a line-by-line answer: the text, the numbered options, and how
/// to answer.
fn show_question(call_id: &str, question: &Question) -> String {
    let mut shown = format!("? {call_id} asks: {}\n", question.text);
    for (i, option) in question.options.iter().enumerate() {
        shown.push_str(&format!("  {}) {}", i + 1, option.label));
        if !option.description.is_empty() {
            shown.push_str(&format!(" — {}", one_line(&option.description, 200)));
        }
        shown.push('\n');
    }
    let mut how = Vec::new();
    match (question.options.is_empty(), question.multiple) {
        (true, _) => {}
        (false, false) => how.push("a number".to_owned()),
        (false, true) => how.push("numbers (e.g. 1,3)".to_owned()),
    }
    if question.free_text {
        how.push("your own words".to_owned());
    }
    how.push("`-` to decline".to_owned());
    shown.push_str(&format!("answer with {}: ", how.join(", or ")));
    shown
}

/// Prompts and reads lines until one answers; `Withdrawn` at end of input or once withdrawn.
fn question_blocking(shown: &str, question: &Question, withdrawn: &AtomicBool) -> QuestionOutcome {
    use std::io::Write;
    loop {
        {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{shown}");
            let _ = err.flush();
        }
        let Some(line) = read_line(withdrawn) else {
            // A lost terminal is never an answer, and never a decline either.
            let reason = if withdrawn.load(Ordering::SeqCst) {
                "the question was withdrawn at the terminal"
            } else {
                "end of input: nobody is there to answer"
            };
            return QuestionOutcome::Withdrawn {
                reason: reason.into(),
            };
        };
        match parse_reply(&line, question) {
            Ok(outcome) => return outcome,
            Err(why) => eprintln!("{why}"),
        }
    }
}

/// A typed line as an answer to `question`: `-` declines, option numbers choose, other words are
/// free text where the question allows them. Else why it does not answer.
pub fn parse_reply(line: &str, question: &Question) -> Result<QuestionOutcome, String> {
    let line = line.trim();
    if line == "-" {
        return Ok(QuestionOutcome::Declined { text: None });
    }
    if line.is_empty() {
        return Err("no answer typed".into());
    }
    let numbers: Option<Vec<usize>> = line
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse::<usize>().ok())
        .collect();
    let answer = match numbers {
        Some(numbers) if !question.options.is_empty() => {
            let mut choice = Vec::new();
            for n in numbers {
                let option = n
                    .checked_sub(1)
                    .and_then(|i| question.options.get(i))
                    .ok_or_else(|| format!("{n} is not an option's number"))?;
                choice.push(option.label.clone());
            }
            Answer { choice, text: None }
        }
        _ => Answer {
            choice: Vec::new(),
            text: Some(line.to_owned()),
        },
    };
    question.check(&answer)?;
    Ok(QuestionOutcome::Answered(answer))
}

/// Prompts and reads lines until one is an answer; `Cancelled` once withdrawn.
fn ask_blocking(prompt: &str, withdrawn: &AtomicBool) -> AskAnswer {
    use std::io::Write;
    loop {
        {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{prompt}");
            let _ = err.flush();
        }
        let line = match read_line(withdrawn) {
            Some(line) => line,
            None if withdrawn.load(Ordering::SeqCst) => return AskAnswer::Cancelled,
            None => {
                eprintln!("(no answer: end of input; denied)");
                return AskAnswer::Denied;
            }
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return AskAnswer::AllowedOnce,
            "a" | "always" => return AskAnswer::AllowedAlways,
            "n" | "no" => return AskAnswer::Denied,
            _ => eprintln!("answer y, n or a"),
        }
    }
}

/// One line from stdin (without its newline); None at end of input or once withdrawn.
fn read_line(withdrawn: &AtomicBool) -> Option<String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    loop {
        if withdrawn.load(Ordering::SeqCst) {
            return None;
        }
        let ready = {
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(100u16)) {
                Ok(n) => n > 0,
                Err(nix::errno::Errno::EINTR) => false,
                Err(_) => return None,
            }
        };
        if !ready {
            continue;
        }
        let mut byte = [0u8; 1];
        // One byte at a time: nothing after the newline is taken from whoever reads next.
        match nix::unistd::read(stdin.as_fd(), &mut byte) {
            Ok(0) => return (!line.is_empty()).then(|| String::from_utf8_lossy(&line).into()),
            Ok(_) if byte[0] == b'\n' => return Some(String::from_utf8_lossy(&line).into()),
            Ok(_) => line.push(byte[0]),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(_) => return None,
        }
    }
}
