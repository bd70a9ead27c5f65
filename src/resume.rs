//! `tooljournal resume`: the library's [`session::Resume`] (recovery first, the journaled
//! policy, orphans, the re-run choice, withdrawn questions), then the session goes on with a
//! live model (from the history recovery rebuilt) or a transcript's next line. This room is
//! the command line's part: which model, which configuration, what is printed.

use crate::agent_run;
use crate::config::Loaded;
use crate::policy;
use crate::printer::Printer;
use crate::run::{add_tools, load_script, play, wire, Prepared, Setup, Tooled, Wired};
use crate::{failed, CliError};
use runtime::event::RerunPolicy;
use runtime::{consumed_lines, ScriptedApprover};
use session::{Continue, Look, Plan, Resume, ResumeError, Resumed, Settings};
use std::path::Path;
use std::sync::Arc;

/// What `tooljournal resume` was asked to do.
pub struct ResumeArgs<'a> {
    pub journal_dir: &'a Path,
    pub script: Option<&'a Path>,
    pub flags: policy::ResumeFlags,
    /// Turn plan mode on.
    pub plan_mode: bool,
    /// Kill process groups the crashed run left running instead of refusing to go on.
    pub kill_orphans: bool,
    /// What of the interrupted step runs again (`--rerun`; `None`: nothing).
    pub rerun: Option<RerunPolicy>,
    /// The live model to go on with (default: the one the journal records).
    pub model: crate::model_cli::ModelFlags,
    /// The turns to run with it.
    pub prompts: Vec<String>,
    /// Take a PostgreSQL session from a holder whose lease is live (`--steal`).
    pub steal: bool,
    /// How long to wait for a live lease to expire before giving up (without `--steal`).
    pub lease_wait_ms: u64,
    /// The sandbox `bash` runs under (`--sandbox` and friends).
    pub sandbox: crate::sandbox_cli::SandboxFlags,
}

/// A hook's failure, carried through the library and given back as it was.
fn hook_error(e: CliError, kept: &mut Option<CliError>) -> ResumeError {
    let said = e.to_string();
    *kept = Some(e);
    ResumeError::Hook(said)
}

pub fn resume(args: ResumeArgs<'_>) -> Result<(), CliError> {
    if args.script.is_some() && (args.model.spec.is_some() || !args.prompts.is_empty()) {
        return Err(failed(
            "--script plays a transcript: it goes with neither --model nor --prompt",
        ));
    }
    let location = crate::location::parse(args.journal_dir)?;
    let resume = Resume::at(location)
        .overrides(args.flags.overrides())
        .kill_orphans(args.kill_orphans)
        .rerun(args.rerun)
        .steal(args.steal)
        .lease_wait_ms(args.lease_wait_ms)
        .plan_mode(args.plan_mode);
    let mut cli = CliHooks {
        args: &args,
        loaded: None,
        live: None,
        wired: None,
        tooled: None,
        failure: None,
        sandbox: None,
    };
    let resumed = resume.open(&mut cli);
    let resumed = match resumed {
        Ok(resumed) => resumed,
        Err(e) => {
            if let Some(tooled) = &mut cli.tooled {
                tooled.stop_servers();
            }
            return Err(match (e, cli.failure.take()) {
                (ResumeError::Hook(_), Some(kept)) => kept,
                (e, _) => CliError::from(e),
            });
        }
    };
    cli.go_on(resumed)
}

/// The CLI's side of the resume: decided from the look, kept for after it.
struct CliHooks<'a> {
    args: &'a ResumeArgs<'a>,
    /// The configuration file the session runs with.
    loaded: Option<Loaded>,
    /// How it goes on without a transcript (a model, or why not).
    live: Option<agent_run::Live>,
    /// The approver and printer wired into the session.
    wired: Option<(Arc<ScriptedApprover>, Arc<Printer>)>,
    /// The servers and runtime added under the lock.
    tooled: Option<Tooled>,
    /// A hook's own error, given back as it was (its exit code, its words).
    failure: Option<CliError>,
    /// The sandbox decided from the flags, the configuration and the journal.
    sandbox: Option<sandbox::Spec>,
}

impl CliHooks<'_> {
    fn decide_cli(&mut self, look: &Look<'_>) -> Result<Plan, CliError> {
        let analysis = &look.recovered.analysis;
        let loaded = policy::config_for_resume(
            analysis.replay.policy.as_ref(),
            self.args.flags.config.as_deref(),
        )?;
        // Decided (and the model connected) before the lock: a missing key changes nothing.
        let live = match self.args.script {
            Some(_) => agent_run::Live::NoModel,
            None => agent_run::live(
                &self.args.model,
                self.args.prompts.clone(),
                &loaded.config.model,
                analysis,
            )?,
        };
        let continue_with = match (self.args.script, &live) {
            (Some(_), _) => Continue::Transcript,
            (None, agent_run::Live::Go(_)) => Continue::NewTurns,
            (None, _) => Continue::Nothing,
        };
        let plan = Plan {
            continue_with,
            config_file: loaded.file.clone(),
        };
        self.sandbox = Some(crate::sandbox_cli::spec(
            &self.args.sandbox,
            &loaded.config.sandbox,
            analysis.replay.sandbox.as_ref(),
        )?);
        self.loaded = Some(loaded);
        self.live = Some(live);
        Ok(plan)
    }

    fn setup<'s>(&'s self, settings: &Settings, loaded: &'s Loaded) -> Setup<'s> {
        let approve = policy::Approve::of(settings.approval);
        Setup {
            journal: self.args.journal_dir,
            person: match self.live {
                Some(agent_run::Live::Go(_)) => agent_run::resume_person(approve),
                _ => None,
            },
            approve,
            max_parallel: settings.parallel_max,
            fsync: settings.fsync,
            json: false,
            config: &loaded.config,
            config_file: loaded.file.clone(),
            plan_mode: self.args.plan_mode,
            sandbox: self.sandbox.clone(),
        }
    }

    /// After the library: the session goes on, or the CLI says why not.
    fn go_on(mut self, resumed: Resumed) -> Result<(), CliError> {
        let journal = self.args.journal_dir;
        let mut opened = match resumed {
            Resumed::Session(opened) => opened,
            Resumed::Finished {
                nothing_taken: false,
                ..
            } if matches!(self.live, Some(agent_run::Live::NeedsPrompt(_))) => {
                outln!("{resumed} (give --prompt TEXT to go on with a new turn)")?;
                return Ok(());
            }
            Resumed::Balanced { .. } => {
                match &self.live {
                    Some(agent_run::Live::NeedsPrompt(spec)) => {
                        outln!("{resumed}; give --prompt TEXT to continue it with {spec}")?
                    }
                    _ => outln!(
                        "{resumed}; give --script, or --model PROVIDER:MODEL with --prompt \
                         TEXT, to continue it"
                    )?,
                }
                return Ok(());
            }
            other => {
                outln!("{other}")?;
                return Ok(());
            }
        };
        let (Some(loaded), Some((approver, printer)), Some(tooled)) =
            (self.loaded.take(), self.wired.take(), self.tooled.take())
        else {
            // The library opens a session only after every hook ran.
            return Err(failed(format!(
                "{}: resumed without its tools",
                crate::location::shown(journal)
            )));
        };
        printer.watch(opened.session.event_log().journal().clone());
        let rerun = crate::rerun::run_again(&tooled.rt, &mut opened);
        let session::Opened {
            session,
            at_lock,
            recovered,
            withdrawn,
            ..
        } = *opened;
        let mut prepared = Prepared::of(tooled, session, journal.to_path_buf(), approver, printer);
        prepared.recovered = recovered;
        match rerun {
            Ok(rerun) => prepared.rerun = rerun,
            Err(e) => {
                prepared.stop_servers();
                return Err(e);
            }
        }
        match (self.args.script, self.live.take()) {
            (Some(script), _) => {
                let mut model = load_script(script)?;
                let consumed = consumed_lines(model.lines(), &at_lock)
                    .map_err(|e| failed(format!("{}: {e}", script.display())))?;
                model.skip(consumed);
                outln!(
                    "resuming session {} after {consumed} script lines",
                    prepared.session.session_id()
                )?;
                play(prepared, model, false)
            }
            (None, Some(agent_run::Live::Go(mut go))) => {
                if let Some(note) = withdrawn {
                    eprintln!("note: questions withdrawn by the crash; the resumed turn says so");
                    go.prepend_to_first_prompt(&note);
                }
                agent_run::resume(prepared, &at_lock, loaded.config.model.clone(), go)
            }
            // The plan went on only with a transcript or a live model.
            _ => {
                prepared.stop_servers();
                Err(failed("resumed with nothing to go on with"))
            }
        }
    }
}

impl session::Hooks for CliHooks<'_> {
    fn decide(&mut self, look: &Look<'_>) -> Result<Plan, ResumeError> {
        self.decide_cli(look)
            .map_err(|e| hook_error(e, &mut self.failure))
    }

    fn wire(
        &mut self,
        builder: runtime::SessionBuilder,
        settings: &Settings,
    ) -> Result<runtime::SessionBuilder, ResumeError> {
        let Some(loaded) = &self.loaded else {
            return Err(ResumeError::Hook("wired before the look".into()));
        };
        let setup = self.setup(settings, loaded);
        let wired = wire(builder, &setup, true);
        let Wired {
            builder,
            approver,
            printer,
        } = wired.map_err(|e| hook_error(e, &mut self.failure))?;
        self.wired = Some((approver, printer));
        Ok(builder)
    }

    fn tools(&mut self, prepared: &mut runtime::PreparedSession) -> Result<(), ResumeError> {
        let Some(loaded) = &self.loaded else {
            return Err(ResumeError::Hook("tools added before the look".into()));
        };
        let tooled = add_tools(prepared, &loaded.config, self.args.journal_dir);
        self.tooled = Some(tooled.map_err(|e| hook_error(e, &mut self.failure))?);
        Ok(())
    }

    fn note(&mut self, note: &str) {
        eprintln!("note: {note}");
    }

    fn say(&mut self, line: &str) {
        // A closed stdout is noticed by the next line the command writes.
        let _ = crate::out(format_args!("{line}"));
    }
}
