//! [`Resume`]: a crashed (or finished, or merely stopped) session continued, with every check
//! `tooljournal resume` makes, whoever embeds the runtime.
//!
//! The order is the protocol, and each step is here for a reason:
//! 1. a PostgreSQL session's lease is waited for (or, asked, taken);
//! 2. the journal is read without writing (a live session, an imported one, or one recovery
//!    could not write to is refused here, with nothing written) and the embedder decides how
//!    it goes on ([`Hooks::decide`]) from what it says;
//! 3. orphaned process groups are killed, when asked, before recovery probes the workspace (so
//!    what it journals of them is true: they ended);
//! 4. recovery balances the journal (unless calls may run again: then it is left for step 6,
//!    under the lock, with the tools known);
//! 5. the writer lock is taken and the journal read again: if another process changed it since
//!    the look, the look is stale and is taken again (at most [`LOOKS_MAX`] looks);
//! 6. the session is resumed under the journaled policy (a change journaled, naming it), the
//!    killed groups journaled, the calls the re-run policy picks left for
//!    [`Opened::run_again`].

use crate::lease::{lease_is_live, take_or_wait};
use crate::policy::{changes, record, Overrides, Settings};
use crate::rerun::{probe_target, recovered_words, recovering, Recovering};
use crate::{approval, orphans, withdrawal_note, ResumeError};
use journal::{FsStorage, FsyncPolicy, Location, OpenReport, Storage};
use recover::Analysis;
use recover::Recovered;
use runtime::event::{ApprovalPolicy, CallRef, Classification, ConfigFile, RerunPolicy};
use runtime::replay::SessionReplay;
use runtime::{PreparedSession, Session, SessionBuilder, ToolResult};
use std::path::{Path, PathBuf};

/// Most looks a resume takes at the journal: it looks again when, under the writer lock, the
/// journal is no longer the one it looked at (another process held the lock meanwhile, wrote,
/// and let it go: each look again follows another process's progress).
pub const LOOKS_MAX: u32 = 3;

/// How long a resume waits for a PostgreSQL session's live lease to expire, unless told.
pub const LEASE_WAIT_MS_DEFAULT: u64 = 30_000;

/// A resume of the session journaled at a location. Build it, then [`Resume::open`].
#[derive(Debug, Clone)]
pub struct Resume {
    location: Location,
    overrides: Overrides,
    kill_orphans: bool,
    rerun: Option<RerunPolicy>,
    steal: bool,
    lease_wait_ms: u64,
    plan_mode: bool,
}

/// What the embedder is shown after the read-only look, to decide how the session goes on.
pub struct Look<'a> {
    /// The journal as recovery reads it, nothing written.
    pub recovered: &'a Recovered,
    /// The settings the resume will run with (the journaled policy, changed as asked).
    pub settings: &'a Settings,
}

/// How the session goes on after the resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Continue {
    /// With new turns (a live model): a finished session reopens (`session/reopen`).
    #[default]
    NewTurns,
    /// With the rest of a transcript: a finished session stays finished.
    Transcript,
    /// With nothing: recovery balances the journal, nothing runs, no session is opened.
    Nothing,
}

/// The embedder's decision after the look.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// How the session goes on.
    pub continue_with: Continue,
    /// The configuration file the session runs with, for `session/policy`.
    pub config_file: Option<ConfigFile>,
}

/// Where the embedder adds what only it knows. Every method has a default: `&mut ()` is a
/// resume that goes on with new turns, with the built-in tools, saying nothing.
pub trait Hooks {
    /// Decides, from the journal read without writing, how the session goes on. Called once per
    /// look (a look can be taken again, see [`LOOKS_MAX`]).
    fn decide(&mut self, look: &Look<'_>) -> Result<Plan, ResumeError> {
        let _ = look;
        Ok(Plan::default())
    }

    /// Adds to the runtime's builder (an approver, observers, paths kept out of reach). The
    /// resume then sets the journaled policy's settings on it, over whatever this set.
    fn wire(
        &mut self,
        builder: SessionBuilder,
        settings: &Settings,
    ) -> Result<SessionBuilder, ResumeError> {
        let _ = settings;
        Ok(builder)
    }

    /// Adds tools that need the workspace or a running server, under the lock, before the
    /// re-run choice reads their natures. Called at most once, when the session goes on.
    fn tools(&mut self, prepared: &mut PreparedSession) -> Result<(), ResumeError> {
        let _ = prepared;
        Ok(())
    }

    /// A note for the person (what the CLI prints as `note: …` on stderr).
    fn note(&mut self, note: &str) {
        let _ = note;
    }

    /// A line of what the resume did (what the CLI prints on stdout).
    fn say(&mut self, line: &str) {
        let _ = line;
    }
}

impl Hooks for () {}

/// How a resume ended.
pub enum Resumed {
    /// The session goes on.
    Session(Box<Opened>),
    /// The journal holds no session.
    Empty {
        /// Where.
        location: Location,
    },
    /// The session had finished, and the plan has no new turn for it.
    Finished {
        /// Where.
        location: Location,
        /// Its id.
        session_id: String,
        /// A steal was asked, and nothing was taken.
        nothing_taken: bool,
    },
    /// The journal is balanced (recovered if it needed it), and the plan continues with nothing.
    Balanced {
        /// Where.
        location: Location,
        /// Its id.
        session_id: String,
    },
}

impl std::fmt::Display for Resumed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resumed::Session(opened) => {
                write!(f, "resumed session {}", opened.session.session_id())
            }
            Resumed::Empty { location } => {
                write!(f, "{location}: empty journal: nothing to resume")
            }
            Resumed::Finished {
                location,
                session_id,
                nothing_taken,
            } => write!(
                f,
                "{location}: session {session_id} already finished; nothing to resume{}",
                if *nothing_taken {
                    " (nothing was taken)"
                } else {
                    ""
                }
            ),
            Resumed::Balanced {
                location,
                session_id,
            } => write!(f, "{location}: session {session_id} is balanced"),
        }
    }
}

/// A resumed session, and what the resume did to get there.
pub struct Opened {
    /// The session, holding the writer lock. Call [`Opened::run_again`] before its next turn.
    pub session: Session,
    /// The settings it runs with.
    pub settings: Settings,
    /// The journal as it ended under the writer lock, before the resume wrote: what the model
    /// last saw (the history a live model continues from, the transcript lines consumed).
    pub at_lock: SessionReplay,
    /// The analysis of a recovery appended under the lock (a re-running resume): the history's
    /// results are its.
    pub recovered: Option<Analysis>,
    /// The note for the first new turn's user text when the crash withdrew questions (only
    /// when the plan continues with new turns).
    pub withdrawn: Option<String>,
    /// Process groups of the crashed run killed (and journaled).
    pub killed: Vec<(CallRef, u32)>,
    /// Turn plan mode on once the re-run is done.
    plan_mode_after: bool,
}

impl Opened {
    /// Runs the calls the re-run policy picked, once, with their journaled ids and keys (none
    /// when nothing was picked), then turns plan mode on if asked (a re-run runs under the
    /// journal's plan mode). Not stoppable: an interrupted re-run is a crash like any other,
    /// and recovery tells its truth.
    pub async fn run_again(&mut self) -> Result<Vec<(CallRef, ToolResult)>, ResumeError> {
        let results = self
            .session
            .run_rerun(tokio_util::sync::CancellationToken::new())
            .await?;
        if self.plan_mode_after && !self.session.plan_mode() {
            self.session
                .set_plan_mode(true, "resumed with --plan-mode")
                .map_err(|e| ResumeError::Failed(e.to_string()))?;
        }
        self.plan_mode_after = false;
        Ok(results)
    }
}

/// How one look at the journal ended.
enum Attempt {
    /// The resume ended (went on, or said why there was nothing to resume).
    Done(Resumed),
    /// Under the lock, the journal was no longer the one looked at: what another process
    /// changed, in words.
    Changed(String),
}

impl Resume {
    /// A resume of the session at `location`, with `tooljournal resume`'s defaults: the
    /// journaled policy as it is, orphans refused, the approved calls that provably never
    /// started run again ([`RerunPolicy::NotStarted`], DESIGN.md §6b), a live lease waited for
    /// up to [`LEASE_WAIT_MS_DEFAULT`].
    pub fn at(location: Location) -> Resume {
        Resume {
            location,
            overrides: Overrides::default(),
            kill_orphans: false,
            rerun: Some(RerunPolicy::NotStarted),
            steal: false,
            lease_wait_ms: LEASE_WAIT_MS_DEFAULT,
            plan_mode: false,
        }
    }

    /// Changes how calls are approved (journaled as a change).
    pub fn approval(mut self, approval: ApprovalPolicy) -> Resume {
        self.overrides.approval = Some(approval);
        self
    }

    /// Changes how many concurrency-safe calls run at once (journaled as a change).
    pub fn parallel_max(mut self, parallel_max: usize) -> Resume {
        self.overrides.parallel_max = Some(parallel_max);
        self
    }

    /// Changes when the journal syncs (journaled as a change).
    pub fn fsync(mut self, fsync: FsyncPolicy) -> Resume {
        self.overrides.fsync = Some(fsync);
        self
    }

    /// All three changes at once.
    pub fn overrides(mut self, overrides: Overrides) -> Resume {
        self.overrides = overrides;
        self
    }

    /// Kills process groups the crashed run left running (journaled), instead of refusing.
    pub fn kill_orphans(mut self, kill: bool) -> Resume {
        self.kill_orphans = kill;
        self
    }

    /// What of the interrupted step runs again (`None`: nothing). Applies only when the
    /// session goes on.
    pub fn rerun(mut self, rerun: Option<RerunPolicy>) -> Resume {
        self.rerun = rerun;
        self
    }

    /// Takes a PostgreSQL session from a holder whose lease is live (journaled as
    /// `writer/stolen`), once everything that could refuse has been checked.
    pub fn steal(mut self, steal: bool) -> Resume {
        self.steal = steal;
        self
    }

    /// How long to wait for a live lease to expire before refusing (without a steal).
    pub fn lease_wait_ms(mut self, wait_ms: u64) -> Resume {
        self.lease_wait_ms = wait_ms;
        self
    }

    /// Turns plan mode on once the session goes on (after any re-run).
    pub fn plan_mode(mut self, on: bool) -> Resume {
        self.plan_mode = on;
        self
    }

    /// The location resumed.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Resumes: see the module documentation for the order, and why.
    pub fn open(self, hooks: &mut dyn Hooks) -> Result<Resumed, ResumeError> {
        // Process groups killed by an earlier look, journaled by the one that goes on.
        let mut killed = Vec::new();
        let mut looks = 1;
        loop {
            let changed = match self.look_once(hooks, &mut killed)? {
                Attempt::Done(resumed) => return Ok(resumed),
                Attempt::Changed(changed) => changed,
            };
            // A steal is not taken again: the process that wrote meanwhile took the session
            // after it.
            if looks >= LOOKS_MAX || self.stealing() {
                return Err(ResumeError::Refused(format!(
                    "{}: {changed}; run `tooljournal resume` again",
                    self.location
                )));
            }
            hooks.note(&format!(
                "{}: {changed}; looking at it again",
                self.location
            ));
            looks += 1;
        }
    }

    fn stealing(&self) -> bool {
        self.steal && self.location.url().is_some()
    }

    /// One look at the journal, and the resume it decides, checked under the writer lock.
    fn look_once(
        &self,
        hooks: &mut dyn Hooks,
        killed: &mut Vec<(CallRef, u32)>,
    ) -> Result<Attempt, ResumeError> {
        let location = &self.location;
        // A steal fences the holder off; a resume that then refused would have stopped a
        // healthy writer for nothing: taken only once everything that could refuse is checked.
        let stealing = self.stealing();
        if !stealing {
            take_or_wait(location, self.steal, self.lease_wait_ms, hooks)?;
        }
        // Read first, writing nothing: what the journal says decides what this resume does.
        let mut looked = self.recover_checked(false, None, false, stealing, hooks)?;
        if let Some(source) = &looked.analysis.replay.imported {
            return Err(ResumeError::Refused(format!(
                "{location}: imported from {}'s session file {}: it is a record of that session \
                 and cannot be resumed here (nothing was written)",
                source.agent, source.file
            )));
        }
        // Read before the lock (it decides the journal's fsync), checked again under it.
        let journaled = looked.analysis.replay.policy.clone();
        let settings = Settings::for_resume(journaled.as_ref(), &self.overrides);
        let plan = hooks.decide(&Look {
            recovered: &looked,
            settings: &settings,
        })?;
        let going_on = plan.continue_with != Continue::Nothing;
        let rerun = self.rerun.filter(|_| going_on);
        if stealing {
            if let Some(done) = self.before_the_steal(&looked, &plan)? {
                return Ok(Attempt::Done(done));
            }
            take_or_wait(location, true, self.lease_wait_ms, hooks)?;
            looked = self.recover_checked(false, None, false, false, hooks)?;
        }
        // Killed before recovery probes the workspace: what it journals of them is then true.
        if self.kill_orphans && going_on {
            killed.extend(orphans::stop(
                location,
                &looked.analysis.replay,
                true,
                hooks,
            )?);
        }
        let recovered = self.recover_first(looked, rerun, hooks)?;
        // The session's own workspace (the runtime checks it again under the lock).
        let workspace = recovered
            .analysis
            .replay
            .open
            .as_ref()
            .map(|open| PathBuf::from(&open.workspace))
            .unwrap_or_default();
        let builder = crate::builder(location, &workspace)?;
        let builder = with_settings(hooks.wire(builder, &settings)?, &settings);
        // From here the writer lock is held: the replay below is the journal as it really ends.
        let locked = builder.lock()?;
        let replay = locked.replay();
        if replay.policy != journaled {
            return Ok(Attempt::Changed(
                "another process changed the session's policy while this resume started".to_owned(),
            ));
        }
        for note in &settings.notes {
            hooks.note(note);
        }
        let Some(open) = &replay.open else {
            return Ok(Attempt::Done(Resumed::Empty {
                location: location.clone(),
            }));
        };
        let session_id = open.session_id.clone();
        if replay.closed && plan.continue_with != Continue::NewTurns {
            return Ok(Attempt::Done(Resumed::Finished {
                location: location.clone(),
                session_id,
                nothing_taken: false,
            }));
        }
        // A re-running resume recovers the journal itself (below).
        if let Some(turn) = replay.open_turn().filter(|_| rerun.is_none()) {
            return Ok(Attempt::Changed(format!(
                "turn {} is open again: another process wrote to the session after its recovery",
                turn.turn
            )));
        }
        if plan.continue_with == Continue::Nothing {
            return Ok(Attempt::Done(Resumed::Balanced {
                location: location.clone(),
                session_id,
            }));
        }
        killed.extend(orphans::stop(location, replay, self.kill_orphans, hooks)?);
        let withdrawn = match plan.continue_with {
            Continue::NewTurns => withdrawal_note(replay, Path::new(&open.workspace)),
            _ => None,
        };
        let opened = self.go_on(
            locked,
            settings,
            &plan,
            rerun,
            std::mem::take(killed),
            withdrawn,
            hooks,
        )?;
        Ok(Attempt::Done(Resumed::Session(Box::new(opened))))
    }

    /// A steal's own checks, before anything is taken: a finished session with nothing new to
    /// take it for; a call's process group still running (unless it is to be killed); the
    /// session's workspace missing here.
    fn before_the_steal(
        &self,
        looked: &Recovered,
        plan: &Plan,
    ) -> Result<Option<Resumed>, ResumeError> {
        let location = &self.location;
        let replay = &looked.analysis.replay;
        if replay.closed && plan.continue_with != Continue::NewTurns {
            if let Some(open) = &replay.open {
                return Ok(Some(Resumed::Finished {
                    location: location.clone(),
                    session_id: open.session_id.clone(),
                    nothing_taken: true,
                }));
            }
        }
        // The holder's running calls become orphans the moment it is fenced off.
        if plan.continue_with != Continue::Nothing && !self.kill_orphans {
            orphans::refuse_running(location, replay)?;
        }
        if let Some(open) = &replay.open {
            let here = std::fs::metadata(&open.workspace).map(|m| m.is_dir());
            if !matches!(here, Ok(true)) {
                return Err(ResumeError::Refused(format!(
                    "{location}: the session's workspace {} is not a directory here; nothing \
                     was taken",
                    open.workspace
                )));
            }
        }
        Ok(None)
    }

    /// Recovery first: balances the journal so a resume continues a balanced session, probing
    /// the session's workspace for calls that may have run. `looked` is the journal read
    /// without writing: when calls of the interrupted step may run again it is left as it is,
    /// and [`Resume::go_on`] recovers it under the lock, its tools known.
    fn recover_first(
        &self,
        looked: Recovered,
        rerun: Option<RerunPolicy>,
        hooks: &mut dyn Hooks,
    ) -> Result<Recovered, ResumeError> {
        if let Some(policy) = rerun {
            if !recover::rerun_candidates(&looked.analysis, policy).is_empty() {
                return Ok(looked);
            }
        }
        let workspace = probe_target(&looked.analysis);
        let recovered = self.recover_checked(true, workspace.as_deref(), true, false, hooks)?;
        if recovered.appended {
            hooks.say(&recovered_line(&recovered));
        }
        Ok(recovered)
    }

    /// Recovery, read-only or not (probing `workspace` when given), refusing a live session
    /// (unless `live_ok`: a look before a steal) and one it could not write to; with `say`,
    /// its notes are noted first.
    fn recover_checked(
        &self,
        write: bool,
        workspace: Option<&Path>,
        say: bool,
        live_ok: bool,
        hooks: &mut dyn Hooks,
    ) -> Result<Recovered, ResumeError> {
        let location = &self.location;
        let recovered = recover::Recovery::of(crate::place(location)?)
            .write(write)
            .probe(workspace)
            .run()?;
        if say {
            for note in recovered.notes() {
                hooks.note(&format!("{location}: {note}"));
            }
        }
        if recovered.analysis.live && !live_ok {
            let Some(dir) = location.dir() else {
                return Err(lease_is_live(location));
            };
            let holder_pid = FsStorage::open(dir)
                .ok()
                .and_then(|storage| storage.lock_holder_pid());
            return Err(ResumeError::Locked(
                runtime::BuildError::Live {
                    dir: dir.to_path_buf(),
                    holder_pid,
                }
                .to_string(),
            ));
        }
        if let Some(why) = &recovered.read_only_because {
            return Err(ResumeError::Refused(format!(
                "{location}: {why}; cannot resume"
            )));
        }
        Ok(recovered)
    }

    /// Under the lock: the embedder's tools, the session resumed (recovering it first when a
    /// re-run left it unrecovered), the policy and the killed groups journaled.
    #[allow(clippy::too_many_arguments)] // one private step of `look_once`, named for reading
    fn go_on(
        &self,
        locked: runtime::LockedJournal,
        settings: Settings,
        plan: &Plan,
        rerun: Option<RerunPolicy>,
        killed: Vec<(CallRef, u32)>,
        withdrawn: Option<String>,
        hooks: &mut dyn Hooks,
    ) -> Result<Opened, ResumeError> {
        let at_lock = locked.replay().clone();
        let mut prepared = locked.prepare()?;
        hooks.tools(&mut prepared)?;
        let mut policy = record(
            settings.approval,
            settings.parallel_max,
            settings.fsync,
            plan.config_file.clone(),
            prepared.registry(),
            "session opened",
        );
        let journaled = prepared.replay().policy.clone();
        let mut recovered = None;
        let (mut session, report) = if prepared.replay().open_turn().is_some() {
            // Only a re-running resume leaves a journal unrecovered for us.
            let Some(rerun) = rerun else {
                return Err(ResumeError::Failed(
                    "the session was interrupted and not recovered; run `recover classify` on \
                     it, or resume it again"
                        .to_owned(),
                ));
            };
            let Recovering {
                events,
                said,
                analysis,
            } = recovering(&prepared, rerun, self.plan_mode)?;
            let resumed = prepared.resume_recovering(events)?;
            hooks.say(&said);
            recovered = Some(analysis);
            resumed
        } else if prepared.replay().closed {
            // A finished session given new turns.
            prepared.reopen_reporting()?
        } else {
            prepared.resume_reporting()?
        };
        if let Some(note) = torn_note(&report) {
            hooks.note(&note);
        }
        if let Some(reason) = changes(journaled.as_ref(), &policy) {
            policy.reason = reason;
            session
                .record_policy(&policy)
                .map_err(|e| ResumeError::Failed(e.to_string()))?;
        }
        for (call, pgid) in &killed {
            session
                .record_process_killed(call, *pgid, nix::sys::signal::Signal::SIGKILL as i32)
                .map_err(|e| ResumeError::Failed(e.to_string()))?;
        }
        Ok(Opened {
            session,
            settings,
            at_lock,
            recovered,
            withdrawn,
            killed,
            plan_mode_after: self.plan_mode,
        })
    }
}

/// The journaled policy's settings on the builder, over whatever the embedder set: a resumed
/// session keeps the journal's plan mode ([`Opened::run_again`] turns it on if asked).
fn with_settings(builder: SessionBuilder, settings: &Settings) -> SessionBuilder {
    let builder = builder
        .fsync(settings.fsync)
        .parallel_max(settings.parallel_max)
        .plan_mode(false);
    match approval::listener(settings.approval) {
        Some(listener) => builder.pre_execute(listener),
        None => builder,
    }
}

/// What opening the journal cut, for a note.
pub fn torn_note(report: &OpenReport) -> Option<String> {
    let torn = report.torn.as_ref()?;
    Some(format!(
        "dropped a torn tail of {} bytes at {} (kept in {})",
        torn.dropped_bytes,
        torn.position,
        report.quarantine_file.as_deref().unwrap_or("?")
    ))
}

/// What recovery did before a resume, in one line.
fn recovered_line(recovered: &Recovered) -> String {
    let unknown: Vec<&str> = recovered
        .analysis
        .calls
        .iter()
        .filter(|c| c.classification == Some(Classification::ToolOutcomeUnknown))
        .map(|c| c.call.call_id.as_str())
        .collect();
    let classified = recovered
        .analysis
        .recovery
        .as_ref()
        .map_or(0, |r| r.calls.len());
    recovered_words(classified, &unknown)
}
