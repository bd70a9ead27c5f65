//! Approvals asked of a person: `--approve ask` sends every call of a tool that may change
//! something to a question, and [`TerminalApprover`] puts questions to the person at the
//! terminal: yes/no approvals (`y`, `n`, or `a` for "this tool, from now on"), and the `ask`
//! tool's questions.
//!
//! Why the yes/no answer (and a question's answer when the terminal is not a terminal) is read
//! from the raw descriptor with a poll and not through `std::io::stdin`: a question withdrawn
//! (the user pressed Ctrl-C, the batch stopped) must not leave a reader blocked on the terminal,
//! where it would swallow the next line meant for the chat prompt.
//!
//! An `ask` question, when stdin and stderr are terminals (and `TERM` is not `dumb`), is a menu
//! (`inquire`): a `Select` for one choice, a `MultiSelect` (space marks, enter submits) for
//! several, each option shown as `N) label — description`. Arrow keys move; typing filters, and
//! typing an option's number leaves only that option (Enter then takes it). Two entries follow
//! the options: "(answer in my own words)" when the question allows free text (it opens a text
//! prompt; Esc there goes back to the menu), and "(decline to answer)". Esc at the menu declines
//! too. A question without options is a text prompt: empty input is refused and asked again,
//! Esc declines. Keys typed before the question is shown are discarded, never taken as its
//! answer.
//!
//! Ctrl-C at the menu is never an answer nor a decline. The menu holds the terminal in raw mode,
//! where Ctrl-C is a key and not the SIGINT the terminal would otherwise send; the approver
//! raises that SIGINT itself, so Ctrl-C means at the menu what it means anywhere in the command
//! (in `chat` and `run --model`: stop the turn, which withdraws the question: `ask/cancelled`
//! "the batch was stopped" and the call cancelled before start, `ABORTED_BEFORE_DISPATCH`). If
//! nothing withdraws it within [`INTERRUPT_GRACE_MS`], the approver withdraws it itself
//! (`QUESTION_UNANSWERED`).
//!
//! A menu cannot be stopped from another thread (the crate reads keys in a blocking call). When
//! the session withdraws a question while its menu is up (its timeout, `question_timeout_ms`,
//! expired; the batch was stopped), the menu stays until the person ends it (Enter, Esc or
//! Ctrl-C); whatever they answer then is not used (the journal already says `ask/expired` or
//! `ask/cancelled`), and a note says so. Until then the terminal stays the menu's: every prompt
//! holds [`TerminalApprover`]'s terminal lock until it ends, not merely until its question is
//! withdrawn, so the next question waits for it, and `chat` waits for it
//! ([`TerminalApprover::wait_for_terminal`]) before it reads its next line. Meanwhile the
//! model's text may print around the menu, and the runtime's shutdown at the end of `run`
//! waits for the menu too.

use runtime::display::visible;
use runtime::event::{Answer, AskAnswer, Question, TEXT_CHARS_MAX};
use runtime::{Approver, AskFuture, CallInfo, QuestionFuture, QuestionOutcome};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `text` on one line, cut to `chars_max` characters, hidden characters shown
/// (`runtime::display::one_line`).
pub fn one_line(text: &str, chars_max: usize) -> String {
    runtime::display::one_line(text, chars_max)
}

/// Asks the person at the terminal (questions on stderr, answers on stdin), one question at a
/// time. End of input answers "denied": silence is never consent.
pub struct TerminalApprover {
    /// Held by a prompt from before it is shown until it ends, even past its question's
    /// withdrawal: whoever prompts next (another question, `chat`) waits for the terminal.
    terminal: Arc<tokio::sync::Mutex<()>>,
}

/// How long a question whose menu saw Ctrl-C waits to be withdrawn by the command's own Ctrl-C
/// handling before withdrawing itself.
pub const INTERRUPT_GRACE_MS: u64 = 3_000;

impl TerminalApprover {
    pub fn new() -> Arc<TerminalApprover> {
        Arc::new(TerminalApprover {
            terminal: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// Whether the terminal is free, or becomes free within `wait_ms` (a withdrawn line prompt
    /// notices within a tenth of a second; a menu waits for the person).
    pub fn terminal_free_within(&self, wait_ms: u64) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
        loop {
            if self.terminal.try_lock().is_ok() {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Blocks until no prompt holds the terminal. Not for async code: it blocks the thread.
    pub fn wait_for_terminal(&self) {
        drop(self.terminal.blocking_lock());
    }

    /// Puts a yes/no `prompt` to the person, one question at a time on the terminal.
    fn yes_no(&self, prompt: String) -> AskFuture<'_> {
        Box::pin(async move {
            let terminal = self.terminal.clone().lock_owned().await;
            let withdrawn = Arc::new(AtomicBool::new(false));
            let _guard = Withdrawn(withdrawn.clone());
            let answer = tokio::task::spawn_blocking(move || {
                let _terminal = terminal;
                if withdrawn.load(Ordering::SeqCst) {
                    return AskAnswer::Cancelled;
                }
                // Keys typed at the terminal while the model streamed are not an answer to
                // this question (piped input is, as it always was: it was meant for it).
                if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                    discard_typeahead();
                }
                ask_blocking(&prompt, &withdrawn)
            })
            .await;
            answer.unwrap_or(AskAnswer::Cancelled)
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
        let prompt = format!(
            "? {} {} — allow? [y]es / [n]o / [a]lways for {}: ",
            visible(&call.call.call_id),
            visible(&question),
            call.tool
        );
        self.yes_no(prompt)
    }

    /// As `ask`, offering no "always": leaving the sandbox is asked of every call ("a", if
    /// typed anyway, allows this one).
    fn escalate(&self, call: CallInfo, question: String) -> AskFuture<'_> {
        let prompt = format!(
            "? {} {} — allow, this once? [y]es / [n]o: ",
            visible(&call.call.call_id),
            visible(&question),
        );
        Box::pin(async move {
            match self.yes_no(prompt).await {
                AskAnswer::AllowedAlways => AskAnswer::AllowedOnce,
                answer => answer,
            }
        })
    }

    fn question(&self, call: CallInfo, question: Question) -> QuestionFuture<'_> {
        Box::pin(async move {
            let terminal = self.terminal.clone().lock_owned().await;
            let withdrawn = Arc::new(AtomicBool::new(false));
            let _guard = Withdrawn(withdrawn.clone());
            let call_id = call.call.call_id.clone();
            let prompted = tokio::task::spawn_blocking(move || {
                // Released when the prompt ends, not when the question is withdrawn.
                let _terminal = terminal;
                // Withdrawn before the prompt began: nothing is shown.
                if withdrawn.load(Ordering::SeqCst) {
                    return Menu::Done(QuestionOutcome::Withdrawn {
                        reason: "the question was withdrawn before it was shown".into(),
                    });
                }
                if menus_possible() {
                    menu_question(&call_id, &question, &withdrawn)
                } else {
                    let shown = show_question(&call_id, &question);
                    Menu::Done(question_blocking(&shown, &question, &withdrawn))
                }
            })
            .await;
            match prompted {
                Ok(Menu::Done(outcome)) => outcome,
                Ok(Menu::Interrupted) => interrupted().await,
                Err(e) => QuestionOutcome::Withdrawn {
                    reason: format!("the terminal prompt failed: {e}"),
                },
            }
        })
    }
}

/// Ctrl-C at a menu: the SIGINT raw mode kept from being sent, then a withdrawal if the
/// command's own handling of it has not withdrawn the question (dropping this future) by then.
async fn interrupted() -> QuestionOutcome {
    use nix::sys::signal::{raise, Signal};
    if let Err(e) = raise(Signal::SIGINT) {
        return QuestionOutcome::Withdrawn {
            reason: format!("Ctrl-C at the question (it could not be passed on: {e})"),
        };
    }
    tokio::time::sleep(std::time::Duration::from_millis(INTERRUPT_GRACE_MS)).await;
    QuestionOutcome::Withdrawn {
        reason: "the person pressed Ctrl-C at the question".into(),
    }
}

/// Menus need a terminal to draw on and read keys from; else the line-based prompt.
fn menus_possible() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// What a question's prompt ended with.
enum Menu {
    Done(QuestionOutcome),
    /// Ctrl-C: not an outcome the person chose, see [`interrupted`].
    Interrupted,
}

/// One line of a question's menu.
#[derive(Debug, Clone)]
enum Entry {
    Choice {
        number: usize,
        label: String,
        description: String,
    },
    OwnWords,
    Decline,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Entry::Choice {
                number,
                label,
                description,
            } => {
                write!(f, "{number}) {}", visible(label))?;
                if !description.is_empty() {
                    write!(f, " — {}", one_line(description, 200))?;
                }
                Ok(())
            }
            Entry::OwnWords => f.write_str("(answer in my own words)"),
            Entry::Decline => f.write_str("(decline to answer)"),
        }
    }
}

const SELECT_HELP: &str = "↑↓ to move, enter to choose, type a number or words to filter, esc to \
                           decline";
const MULTI_HELP: &str = "↑↓ to move, space to mark, enter to submit, type a number or words to \
                          filter, esc to decline";

/// An entry as the answered prompt shows it: the label, without its description.
fn chosen(entry: &Entry) -> String {
    match entry {
        Entry::Choice { label, .. } => visible(label).into_owned(),
        Entry::OwnWords => "(in my own words)".into(),
        Entry::Decline => "(declined)".into(),
    }
}

/// Typing an option's number leaves only that option; other input filters as inquire does.
fn score(input: &str, entry: &Entry, shown: &str, index: usize) -> Option<i64> {
    let typed = input.trim();
    if !typed.is_empty() && typed.bytes().all(|b| b.is_ascii_digit()) {
        return match entry {
            Entry::Choice { number, .. } if typed.parse() == Ok(*number) => Some(0),
            _ => None,
        };
    }
    (inquire::Select::<Entry>::DEFAULT_SCORER)(input, entry, shown, index)
}

/// A `MultiSelect` submission: something marked, and a decline alone.
fn marked_validly(
    marked: &[inquire::list_option::ListOption<&Entry>],
) -> Result<inquire::validator::Validation, inquire::CustomUserError> {
    use inquire::validator::Validation;
    if marked.is_empty() {
        return Ok(Validation::Invalid(
            "mark at least one entry with space (or esc to decline)".into(),
        ));
    }
    if marked.len() > 1 && marked.iter().any(|m| matches!(m.value, Entry::Decline)) {
        return Ok(Validation::Invalid(
            "\"(decline to answer)\" cannot go with other entries".into(),
        ));
    }
    Ok(Validation::Valid)
}

/// The question as a menu (or a text prompt, without options), until it is answered, declined
/// or interrupted.
fn menu_question(call_id: &str, question: &Question, withdrawn: &AtomicBool) -> Menu {
    // Printed apart from the menu: a long or multi-line question stays readable above it.
    eprintln!("? {} asks: {}", visible(call_id), visible(&question.text));
    discard_typeahead();
    let menu = if question.options.is_empty() {
        words_only()
    } else {
        options_menu(question)
    };
    if withdrawn.load(Ordering::SeqCst) {
        eprintln!(
            "(the question had already been withdrawn (expired, or the batch stopped): that \
             answer was not used)"
        );
    }
    menu
}

/// Keys pressed before a question is shown are not its answer (an Enter typed during the
/// model's stream would choose the first option): the terminal's pending input is flushed, and
/// so are keys the menu backend read ahead during an earlier menu.
fn discard_typeahead() {
    use nix::sys::termios::{tcflush, FlushArg};
    let _ = tcflush(std::io::stdin().as_fd(), FlushArg::TCIFLUSH);
    while crossterm::event::poll(std::time::Duration::ZERO).unwrap_or(false) {
        if crossterm::event::read().is_err() {
            break;
        }
    }
}

/// How a menu that ended without a choice ended.
fn ended(e: inquire::InquireError) -> Menu {
    use inquire::InquireError;
    match e {
        InquireError::OperationCanceled => Menu::Done(QuestionOutcome::Declined { text: None }),
        InquireError::OperationInterrupted => Menu::Interrupted,
        e => Menu::Done(QuestionOutcome::Withdrawn {
            reason: format!("the terminal menu failed: {e}"),
        }),
    }
}

/// What a text prompt gave: words, Esc, or an end of the whole question.
enum Typed {
    Words(String),
    Escaped,
    Ended(Menu),
}

fn type_words(message: &str, help: &str) -> Typed {
    use inquire::validator::Validation;
    let typed = inquire::Text::new(message)
        .with_help_message(help)
        .with_validator(|text: &str| {
            let text = text.trim();
            Ok(if text.is_empty() {
                Validation::Invalid("type an answer".into())
            } else if text.chars().count() > TEXT_CHARS_MAX {
                Validation::Invalid(format!("at most {TEXT_CHARS_MAX} characters, please").into())
            } else {
                Validation::Valid
            })
        })
        .prompt();
    match typed {
        Ok(text) => Typed::Words(text.trim().to_owned()),
        Err(inquire::InquireError::OperationCanceled) => Typed::Escaped,
        Err(e) => Typed::Ended(ended(e)),
    }
}

/// A question without options: free text, Esc declines.
fn words_only() -> Menu {
    match type_words("Your answer:", "enter to send, esc to decline") {
        Typed::Words(text) => Menu::Done(QuestionOutcome::Answered(Answer {
            choice: Vec::new(),
            text: Some(text),
        })),
        Typed::Escaped => Menu::Done(QuestionOutcome::Declined { text: None }),
        Typed::Ended(menu) => menu,
    }
}

/// A question with options: a `Select` or a `MultiSelect`, then the own-words prompt if that
/// entry was chosen.
fn options_menu(question: &Question) -> Menu {
    let mut entries: Vec<Entry> = question
        .options
        .iter()
        .enumerate()
        .map(|(i, option)| Entry::Choice {
            number: i + 1,
            label: option.label.clone(),
            description: option.description.clone(),
        })
        .collect();
    if question.free_text {
        entries.push(Entry::OwnWords);
    }
    entries.push(Entry::Decline);
    let page_size = entries.len();
    loop {
        let picked = if question.multiple {
            inquire::MultiSelect::new("Choose any:", entries.clone())
                .with_help_message(MULTI_HELP)
                .with_page_size(page_size)
                .with_scorer(&score)
                .with_validator(marked_validly)
                .with_formatter(&|marked| {
                    let shown: Vec<String> = marked.iter().map(|m| chosen(m.value)).collect();
                    shown.join(", ")
                })
                .prompt()
        } else {
            inquire::Select::new("Choose one:", entries.clone())
                .with_help_message(SELECT_HELP)
                .with_page_size(page_size)
                .with_scorer(&score)
                .with_formatter(&|picked| chosen(picked.value))
                .prompt()
                .map(|entry| vec![entry])
        };
        let picked = match picked {
            Ok(picked) => picked,
            Err(e) => return ended(e),
        };
        if picked.iter().any(|e| matches!(e, Entry::Decline)) {
            return Menu::Done(QuestionOutcome::Declined { text: None });
        }
        let mut numbered: Vec<(usize, String)> = picked
            .iter()
            .filter_map(|e| match e {
                Entry::Choice { number, label, .. } => Some((*number, label.clone())),
                _ => None,
            })
            .collect();
        // The question's order, whatever order they were marked in.
        numbered.sort();
        let choice = numbered.into_iter().map(|(_, label)| label).collect();
        let text = if picked.iter().any(|e| matches!(e, Entry::OwnWords)) {
            match type_words(
                "In your own words:",
                "enter to send, esc to go back to the options",
            ) {
                Typed::Words(text) => Some(text),
                Typed::Escaped => continue,
                Typed::Ended(menu) => return menu,
            }
        } else {
            None
        };
        let answer = Answer { choice, text };
        match question.check(&answer) {
            Ok(()) => return Menu::Done(QuestionOutcome::Answered(answer)),
            Err(why) => eprintln!("{why}"),
        }
    }
}

/// The question as printed for a line-by-line answer: the text, the numbered options, and how
/// to answer.
fn show_question(call_id: &str, question: &Question) -> String {
    let mut shown = format!("? {} asks: {}\n", visible(call_id), visible(&question.text));
    for (i, option) in question.options.iter().enumerate() {
        shown.push_str(&format!("  {}) {}", i + 1, visible(&option.label)));
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
        Some(mut numbers) if !question.options.is_empty() => {
            // The question's order (as `Answer` keeps it), whatever order they were typed in.
            numbers.sort_unstable();
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
            // End of input is nobody's "no": the question is withdrawn (and refused).
            None => {
                eprintln!("(no answer: end of input; the question is withdrawn)");
                return AskAnswer::Cancelled;
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

/// One line from stdin (without its newline); None at end of input, on a read error, or once
/// withdrawn.
fn read_line(withdrawn: &AtomicBool) -> Option<String> {
    read_stdin_line(withdrawn).ok().flatten()
}

/// The next line of input when stdin is not a terminal (a pipe, a here-doc, a file): `chat`'s
/// messages come from here, read as the approvals' answers are, so that both take their lines
/// from the one input in order (a buffered reader would take lines meant for the next
/// question). `None` at end of input.
pub fn next_piped_line() -> std::io::Result<Option<String>> {
    read_stdin_line(&AtomicBool::new(false))
}

/// One line from stdin (without its newline); `None` at end of input or once withdrawn.
fn read_stdin_line(withdrawn: &AtomicBool) -> std::io::Result<Option<String>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    loop {
        if withdrawn.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let ready = {
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(100u16)) {
                Ok(n) => n > 0,
                Err(nix::errno::Errno::EINTR) => false,
                Err(e) => return Err(std::io::Error::other(format!("stdin: poll: {e}"))),
            }
        };
        if !ready {
            continue;
        }
        let mut byte = [0u8; 1];
        // One byte at a time: nothing after the newline is taken from whoever reads next.
        match nix::unistd::read(stdin.as_fd(), &mut byte) {
            Ok(0) => return Ok((!line.is_empty()).then(|| String::from_utf8_lossy(&line).into())),
            Ok(_) if byte[0] == b'\n' => return Ok(Some(String::from_utf8_lossy(&line).into())),
            Ok(_) => line.push(byte[0]),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(e) => return Err(std::io::Error::other(format!("stdin: read: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(args: serde_json::Value) -> Question {
        Question::from_arguments(&args).expect("a valid question")
    }

    fn three(multiple: bool, free_text: bool) -> Question {
        question(json!({
            "question": "which?",
            "options": [{"label": "red"}, {"label": "green"}, {"label": "blue"}],
            "multiple": multiple,
            "free_text": free_text,
        }))
    }

    fn answered(choice: &[&str], text: Option<&str>) -> QuestionOutcome {
        QuestionOutcome::Answered(Answer {
            choice: choice.iter().map(|c| (*c).to_owned()).collect(),
            text: text.map(str::to_owned),
        })
    }

    #[test]
    fn a_number_chooses_its_option() {
        assert_eq!(
            parse_reply(" 2 ", &three(false, false)),
            Ok(answered(&["green"], None))
        );
    }

    #[test]
    fn several_numbers_choose_in_the_questions_order_only_when_several_may_be_chosen() {
        assert_eq!(
            parse_reply("3, 1", &three(true, false)),
            Ok(answered(&["red", "blue"], None))
        );
        let one = parse_reply("1 3", &three(false, false)).unwrap_err();
        assert!(one.contains("only one"), "{one}");
    }

    #[test]
    fn a_number_that_is_no_option_is_refused_naming_it() {
        for (line, named) in [("4", "4"), ("0", "0"), ("1,9", "9")] {
            let why = parse_reply(line, &three(true, false)).unwrap_err();
            assert!(why.contains(&format!("{named} is not")), "{line}: {why}");
        }
    }

    #[test]
    fn a_dash_declines_and_blank_is_no_answer() {
        assert_eq!(
            parse_reply(" - ", &three(false, false)),
            Ok(QuestionOutcome::Declined { text: None })
        );
        assert!(parse_reply("   ", &three(false, false)).is_err());
    }

    #[test]
    fn words_are_free_text_only_where_the_question_takes_them() {
        assert_eq!(
            parse_reply("purple please", &three(false, true)),
            Ok(answered(&[], Some("purple please")))
        );
        let why = parse_reply("purple please", &three(false, false)).unwrap_err();
        assert!(why.contains("no free text"), "{why}");
        // Without options, even digits are words.
        let open = question(json!({"question": "how many?"}));
        assert_eq!(parse_reply("42", &open), Ok(answered(&[], Some("42"))));
    }

    #[test]
    fn a_typed_number_leaves_only_its_option_in_the_menu() {
        let entries = [
            Entry::Choice {
                number: 1,
                label: "alpha".into(),
                description: "the first, not number 2".into(),
            },
            Entry::Choice {
                number: 2,
                label: "beta".into(),
                description: String::new(),
            },
            Entry::OwnWords,
            Entry::Decline,
        ];
        let kept: Vec<String> = entries
            .iter()
            .enumerate()
            .filter(|(i, e)| score("2", e, &e.to_string(), *i).is_some())
            .map(|(_, e)| e.to_string())
            .collect();
        assert_eq!(kept, vec!["2) beta".to_owned()]);
        // Words still filter by what is shown.
        let kept: Vec<String> = entries
            .iter()
            .enumerate()
            .filter(|(i, e)| score("decline", e, &e.to_string(), *i).is_some())
            .map(|(_, e)| e.to_string())
            .collect();
        assert_eq!(kept, vec!["(decline to answer)".to_owned()]);
    }

    #[test]
    fn a_decline_marked_with_other_entries_or_nothing_marked_is_refused() {
        use inquire::list_option::ListOption;
        use inquire::validator::Validation;
        let choice = Entry::Choice {
            number: 1,
            label: "a".into(),
            description: String::new(),
        };
        let decline = Entry::Decline;
        let valid =
            |marked: &[ListOption<&Entry>]| matches!(marked_validly(marked), Ok(Validation::Valid));
        assert!(!valid(&[]));
        assert!(!valid(&[
            ListOption::new(0, &choice),
            ListOption::new(2, &decline)
        ]));
        assert!(valid(&[ListOption::new(2, &decline)]));
        assert!(valid(&[ListOption::new(0, &choice)]));
    }
}
