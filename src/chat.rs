//! `tooljournal chat`: a person and a live model, turn by turn, at a terminal.
//!
//! The prompt is `rustyline`'s (line editing, history) at a terminal; piped input is read line by
//! line from the one input the approvals' answers come from too (`Input`). During a turn the
//! terminal is the session's: the model's text streams as it arrives, each call has a live status
//! line (the printer), questions are asked by the terminal approver (y/n/a for approvals, a menu
//! for the `ask` tool's), and Ctrl-C (a SIGINT: the terminal is out of raw mode then, and a menu
//! passes its Ctrl-C on as one) stops the turn, journaled as the user's stop; a second Ctrl-C
//! within a second also ends the session. A question's menu may outlive its question (expired, or
//! the batch stopped): the prompt waits until the menu is gone, so that no line typed into it is
//! taken for the chat's. At the prompt, Ctrl-C clears the line (twice within a second: ends the
//! session); Ctrl-D or `/exit` ends the session (`session/close`).
//!
//! A provider error that ends a turn is shown and the chat goes on: the person may fix what is
//! wrong (a network, a limit) and say something again.

use crate::agent_run::{one_turn, Interrupts, StreamOut};
use crate::approval::TerminalApprover;
use crate::config;
use crate::model_cli::{self, ModelFlags};
use crate::policy::{Approve, PARALLEL_MAX_DEFAULT};
use crate::run::{self, Prepared, Setup};
use crate::CliError;
use journal::FsyncPolicy;
use runtime::Agent;
use rustyline::error::ReadlineError;
use std::path::PathBuf;
use std::sync::Arc;

/// What `tooljournal chat` was asked to do.
pub struct ChatArgs {
    pub flags: ModelFlags,
    pub workspace: Option<PathBuf>,
    pub journal: Option<PathBuf>,
    pub approve: Approve,
    pub config: Option<PathBuf>,
    pub plan_mode: bool,
    /// The sandbox `bash` runs under (`--sandbox` and friends).
    pub sandbox: crate::sandbox_cli::SandboxFlags,
}

const HELP: &str = "Type a message for the model. Ctrl-C stops a running turn (twice: ends the \
session); Ctrl-D or /exit ends the session; /help shows this.";

pub fn chat(args: ChatArgs) -> Result<(), CliError> {
    let failed = |what: String| CliError::Failed(what);
    let new = run::NewSession::at(args.workspace, args.journal)?;
    let workspace = new.workspace.clone();
    let journal = new.journal_dir.clone();
    let loaded = config::load(args.config.as_deref())?;
    let section = loaded.config.model.clone();
    let spec = model_cli::spec(&args.flags, &section, None)?.ok_or_else(|| {
        failed("no model: give --model PROVIDER:MODEL (or [model] in the configuration)".into())
    })?;
    let model = model_cli::connect(&spec, &args.flags, &section, None)?;
    let mut input = Input::new().map_err(|e| failed(format!("cannot use the terminal: {e}")))?;
    let person = TerminalApprover::new();
    let setup = Setup {
        journal: &journal,
        // Every question goes to the person, whatever the policy sends to it.
        person: Some(person.clone() as Arc<dyn runtime::Approver>),
        approve: args.approve,
        max_parallel: PARALLEL_MAX_DEFAULT,
        fsync: FsyncPolicy::Group,
        json: false,
        config: &loaded.config,
        config_file: loaded.file.clone(),
        plan_mode: args.plan_mode,
        sandbox: Some(crate::sandbox_cli::spec(
            &args.sandbox,
            &loaded.config.sandbox,
            None,
        )?),
    };
    let prepared = new.open(setup)?;
    let agent_config = model_cli::agent_config(
        &args.flags,
        &section,
        &prepared.workspace,
        &prepared.tools,
        model.model(),
    )?;
    let Prepared {
        rt,
        journal_dir,
        mut session,
        approver: _,
        servers,
        printer,
        tools: _,
        workspace: _,
        rerun: _,
        recovered: _,
    } = prepared;
    outln!(
        "session {} with {spec} on {}",
        session.session_id(),
        workspace.display()
    )?;
    outln!("journal: {}", crate::location::shown(&journal_dir))?;
    outln!("{HELP}")?;
    let interrupts = Interrupts::new();
    interrupts.listen(&rt);
    let mut agent = Agent::new(model, agent_config);
    let mut out = StreamOut::new(printer.clone());
    let mut result = Ok(());
    loop {
        if !person.terminal_free_within(300) {
            eprintln!("(a withdrawn question is still on the screen: end it with Enter or Esc)");
            person.wait_for_terminal();
        }
        let line = input.readline("you> ");
        if interrupts.quit_requested() {
            // A second Ctrl-C that came as a signal just before the prompt took the terminal.
            break;
        }
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                // One count for presses at the prompt and during a turn: the second of a
                // double press often lands here, the first having stopped the turn.
                interrupts.press();
                if interrupts.quit_requested() {
                    break;
                }
                eprintln!("(Ctrl-C again to end the session, or /exit)");
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                result = Err(failed(format!("cannot read the input: {e}")));
                break;
            }
        };
        let text = line.trim();
        match text {
            "" => continue,
            "/exit" | "/quit" => break,
            "/help" => {
                outln!("{HELP}")?;
                continue;
            }
            _ => {}
        }
        input.add_history_entry(text);
        match rt.block_on(one_turn(
            &mut agent,
            &mut session,
            text,
            &mut out,
            &interrupts,
        )) {
            Ok(None) => {}
            // Shown, and the person decides what next.
            Ok(Some(message)) => eprintln!("error: {message}"),
            Err(e) => {
                // The journal failed: nothing more can be recorded, so nothing more may run.
                result = Err(e);
                break;
            }
        }
        printer.show_durable();
        if interrupts.quit_requested() {
            break;
        }
    }
    let closed = rt.block_on(async {
        let closed = match &result {
            Ok(()) => session.close().await.map_err(|e| failed(e.to_string())),
            Err(_) => Ok(()),
        };
        crate::run::shutdown(servers).await;
        closed
    });
    printer.show_durable();
    result?;
    closed?;
    outln!(
        "session closed; journal: {}",
        crate::location::shown(&journal_dir)
    )?;
    Ok(())
}

/// Where the person's lines come from: a terminal, through `rustyline` (line editing, history);
/// any other input (a pipe, a here-doc) line by line as the approver reads its answers
/// ([`crate::approval::next_piped_line`]), so that a scripted chat's answers reach the
/// questions they follow and never the model. (rustyline reads such input through a buffer,
/// taking the answers' lines with the message's.)
enum Input {
    Terminal(Box<rustyline::DefaultEditor>),
    Piped,
}

impl Input {
    fn new() -> rustyline::Result<Input> {
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Ok(Input::Terminal(Box::new(rustyline::DefaultEditor::new()?)))
        } else {
            Ok(Input::Piped)
        }
    }

    fn readline(&mut self, prompt: &str) -> Result<String, ReadlineError> {
        match self {
            Input::Terminal(editor) => editor.readline(prompt),
            Input::Piped => match crate::approval::next_piped_line() {
                Ok(Some(line)) => Ok(line),
                Ok(None) => Err(ReadlineError::Eof),
                Err(e) => Err(ReadlineError::Io(e)),
            },
        }
    }

    fn add_history_entry(&mut self, line: &str) {
        if let Input::Terminal(editor) = self {
            // Best effort: a line missing from the history is no failure.
            let _ = editor.add_history_entry(line);
        }
    }
}
