//! The entry point: one chain of calls wires a session the way `tooljournal run` does, with the
//! safe defaults, so an embedding does not have to know the order the pieces go together in.
//!
//! [`Session::builder`] takes the two places a session lives (the workspace its tools act on,
//! the directory its journal is kept in) and gives back a [`SessionBuilder`]. Settings are
//! optional; each default is the safe one:
//!
//! - the journal's writer lock is taken first, so a second process on the same journal is
//!   refused before anything else happens ([`BuildError::Live`] names the holder's pid), and
//!   nothing in the journal changes until an `open` or `resume` is accepted;
//! - a resume refuses while a process group the interrupted run started still runs;
//! - the journal directory (and whatever [`SessionBuilder::forbid`] adds) is out of the file
//!   tools' reach, even when it lies inside the workspace;
//! - every `ask` goes to the approver; with none set it is answered "no answer" (never yes);
//! - large results are spilled to a store beside the journal (`spill/`), the model sees a
//!   preview and a locator;
//! - group commit: a tool body starts only once its `started` record is on disk.
//!
//! Building goes in three steps when the embedding needs to look before it writes:
//! [`SessionBuilder::lock`] holds the journal and reads it to its end ([`LockedJournal`]: look
//! at the replay); [`LockedJournal::prepare`] opens the workspace and registers the tools
//! ([`PreparedSession`]: add tools that need a running server, e.g. an MCP server's); then
//! [`PreparedSession::open`] a new session or [`PreparedSession::resume`] the one the journal
//! holds. [`SessionBuilder::open`] and [`SessionBuilder::resume`] do all three at once.
//!
//! ```no_run
//! use tooljournal_runtime::Session;
//! # fn main() -> Result<(), tooljournal_runtime::BuildError> {
//! let session = Session::builder("/path/to/workspace", "/path/to/journal")
//!     .parallel_max(4)
//!     .open()?;
//! # let _ = session; Ok(()) }
//! ```
//!
//! A resume needs the session balanced first: run `recover` (the `recover` crate's
//! `Recovery::of(dir).write(true).run()`) on the journal of a crashed session before resuming it.

use crate::event::ToolSource;
use crate::eventlog::{Clock, SystemClock};
use crate::hooks::{Approver, Guard, Hooks, Observer, PostExecute, PreExecute};
use crate::registry::{Registry, RegistryError};
use crate::replay::{replay_backend, ReplayError, SessionReplay};
use crate::session::{continuable, refuse_a_session, resumable};
use crate::spill::SledSpill;
use crate::tool::Tool;
use crate::tools::{builtin_registry_sandboxed, Workspace};
use crate::{Config, RuntimeError, Session, SessionOptions};
use journal::{
    Backend, Corruption, FsStorage, FsyncPolicy, Journal, JournalError, OpenReport, Options,
    ReadEnd, Storage, Takeover, TornTail, WriterLock,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Cache of a session's spill store: small, it only holds what is being written.
pub(crate) const SPILL_CACHE_BYTES_DEFAULT: u64 = 8 << 20;

/// The `server` the journal names for tools added with [`SessionBuilder::tool`].
pub(crate) const EMBEDDING_SOURCE: &str = "embedding";

/// Where the spill store lives, inside the journal directory.
pub(crate) const SPILL_DIR_NAME: &str = "spill";

/// Why a session could not be built. The journal is left as it was in every case but a failure
/// while opening it for appending or writing the first records ([`BuildError::Journal`],
/// [`BuildError::Runtime`] from a failed write).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The sandbox asked for cannot be set up (the kernel lacks what it needs, a path the
    /// runtime keeps to itself lies where commands could read it): nothing was written.
    #[error(transparent)]
    Sandbox(sandbox::SandboxError),
    /// Another process holds the journal's writer lock: a live session, or a recovery.
    #[error("{}: session is live (writer pid {}); wait for it to end", dir.display(), holder_pid.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into()))]
    Live {
        /// The journal directory.
        dir: PathBuf,
        /// The holder's pid, when the lock table names it.
        holder_pid: Option<u32>,
    },
    /// The journal directory cannot be created or opened.
    #[error("{}: cannot create the journal directory: {source}", dir.display())]
    JournalDir {
        /// The journal directory.
        dir: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// The journal could not be opened for appending (its message names the file).
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The journal could not be read back to its end under the lock.
    #[error("{}: {source}", dir.display())]
    Replay {
        /// The journal directory.
        dir: PathBuf,
        /// What the replay refused.
        source: ReplayError,
    },
    /// A record in the middle of the journal is damaged: nothing is appended after it.
    #[error("{}: {corruption}", dir.display())]
    Corrupt {
        /// The journal directory.
        dir: PathBuf,
        /// Where and what.
        corruption: Corruption,
    },
    /// The workspace does not exist or cannot be opened.
    #[error("{}: cannot use as the workspace: {source}", path.display())]
    Workspace {
        /// The workspace given.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A resume was asked for on another workspace than the one the session was opened on.
    #[error("{}: the session was opened on workspace {journaled}, not {given}", dir.display())]
    WorkspaceMismatch {
        /// The journal directory.
        dir: PathBuf,
        /// The workspace `session/open` names.
        journaled: String,
        /// The workspace given to the builder.
        given: String,
    },
    /// A process group a call of the interrupted run started still runs: continuing beside it
    /// could let two runs change the workspace at once.
    #[error("{}: {call}: still running: process group {pgid} ({members} processes), started before the session was interrupted; stop it before resuming", dir.display())]
    StillRunning {
        /// The journal directory.
        dir: PathBuf,
        /// The call that started it (its outcome is unknown).
        call: crate::event::CallRef,
        /// The process group, as journaled in `call/process`.
        pgid: u32,
        /// How many of its processes are alive.
        members: usize,
    },
    /// A tool could not be registered (bad name, duplicate, invalid schema).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The spill store could not be opened.
    #[error("{}: cannot open the spill store: {message}", dir.display())]
    Spill {
        /// The spill store's directory.
        dir: PathBuf,
        /// What sled said.
        message: String,
    },
    /// The session refused to open or resume (e.g. `open` on a journal that already holds a
    /// session, `resume` of an interrupted session that was not recovered).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The settings of a session about to be built; what it wires and why is in `runtime/src/builder.rs`.
pub struct SessionBuilder {
    workspace: PathBuf,
    /// The journal directory; for a journal given as a [`Backend`], its location (messages only).
    journal_dir: PathBuf,
    /// The journal's backend when given as one ([`Session::builder_on`]); `None`: segment files
    /// in `journal_dir`, created if missing.
    backend: Option<Backend>,
    forbidden: Vec<PathBuf>,
    fsync: FsyncPolicy,
    config: Config,
    hooks: Hooks,
    tools: Vec<(Arc<dyn Tool>, ToolSource)>,
    builtins: bool,
    sandbox: Option<sandbox::Spec>,
    spill_cache_bytes: Option<u64>,
    session_id: Option<String>,
    clock: Arc<dyn Clock>,
}

impl Session {
    /// Starts building a session whose tools act in `workspace` and whose journal is kept in
    /// `journal_dir` (created if missing). See `crate::builder`.
    pub fn builder(
        workspace: impl Into<PathBuf>,
        journal_dir: impl Into<PathBuf>,
    ) -> SessionBuilder {
        SessionBuilder {
            workspace: workspace.into(),
            journal_dir: journal_dir.into(),
            backend: None,
            forbidden: Vec::new(),
            fsync: FsyncPolicy::Group,
            config: Config::default(),
            hooks: Hooks::default(),
            tools: Vec::new(),
            builtins: true,
            sandbox: None,
            spill_cache_bytes: Some(SPILL_CACHE_BYTES_DEFAULT),
            session_id: None,
            clock: Arc::new(SystemClock),
        }
    }
}

impl Session {
    /// [`Session::builder`] for a journal on any backend: segment files, or a record store
    /// (PostgreSQL). The builder never takes a journal whose lease is live
    /// ([`crate::takeover::steal`] does, on purpose). A record store's journal has no
    /// directory: nothing is kept out of the file tools' reach for it, and large results are
    /// not spilled (no local store would follow the session to another worker) unless
    /// [`SessionBuilder::config`] sets a spill store.
    pub fn builder_on(workspace: impl Into<PathBuf>, backend: Backend) -> SessionBuilder {
        let mut builder = Session::builder(workspace, PathBuf::from(backend.location()));
        if backend.files().is_none() {
            builder.spill_cache_bytes = None;
        }
        builder.backend = Some(backend);
        builder
    }
}

impl SessionBuilder {
    /// When appended records reach the disk (default: group commit).
    pub fn fsync(mut self, fsync: FsyncPolicy) -> SessionBuilder {
        self.fsync = fsync;
        self
    }

    /// Most concurrency-safe calls running at once; 0 is taken as 1 (with [`SessionBuilder::config`],
    /// 0 is refused: `Config::check`).
    pub fn parallel_max(mut self, parallel_max: usize) -> SessionBuilder {
        self.config.parallel_max = parallel_max.max(1);
        self
    }

    /// Starts a new session in plan mode (only read-only tools run until a plan is approved).
    /// A resumed session keeps the plan mode its journal shows; `true` turns it on.
    pub fn plan_mode(mut self, on: bool) -> SessionBuilder {
        self.config.plan_mode = on;
        self
    }

    /// Every limit at once, replacing what `parallel_max` and `plan_mode` set before (call it
    /// first). The spill store is still the builder's unless `config.spill` is set or
    /// [`SessionBuilder::without_spill`] is called.
    pub fn config(mut self, config: Config) -> SessionBuilder {
        self.config = config;
        self
    }

    /// The session's id (default: a random UUID). Ignored by a resume: the journal's id stays.
    pub fn session_id(mut self, session_id: impl Into<String>) -> SessionBuilder {
        self.session_id = Some(session_id.into());
        self
    }

    /// Where event timestamps come from (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> SessionBuilder {
        self.clock = clock;
        self
    }

    /// Who answers `ask` decisions. Without one every ask is answered "no answer".
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> SessionBuilder {
        self.hooks.approver = Some(approver);
        self
    }

    /// Adds a pre-execute listener (asked in the order added, after plan mode).
    pub fn pre_execute(mut self, listener: Arc<dyn PreExecute>) -> SessionBuilder {
        self.hooks.pre_execute.push(listener);
        self
    }

    /// Adds a guard (a last check right before a call starts).
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> SessionBuilder {
        self.hooks.guards.push(guard);
        self
    }

    /// Adds a post-execute listener (may rewrite a draft result before it is frozen).
    pub fn post_execute(mut self, listener: Arc<dyn PostExecute>) -> SessionBuilder {
        self.hooks.post_execute.push(listener);
        self
    }

    /// Adds an observer (told about every transition; its failures never stop a call).
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> SessionBuilder {
        self.hooks.observers.push(observer);
        self
    }

    /// Registers a tool of the embedding. `session/open` records it as `external (embedding)`:
    /// not one of tooljournal's own, so it can neither take a built-in's name nor be taken
    /// for the built-in `ask` (whose answers only the approver gives).
    pub fn tool(self, tool: Arc<dyn Tool>) -> SessionBuilder {
        self.tool_from(
            tool,
            ToolSource::External {
                server: EMBEDDING_SOURCE.to_owned(),
            },
        )
    }

    /// Registers a tool with the source the journal records for it (e.g. an MCP server's).
    pub fn tool_from(mut self, tool: Arc<dyn Tool>, source: ToolSource) -> SessionBuilder {
        self.tools.push((tool, source));
        self
    }

    /// Runs the built-in `bash` under `spec`'s kernel sandbox (crate `sandbox`; its workspace is
    /// the session's, whatever `spec` says), set up in
    /// [`LockedJournal::prepare`] before anything is written: a policy the kernel cannot
    /// enforce, or a journal directory a command could read, refuses the session there. The
    /// journal directory is always among what commands may not read. `session/sandbox` is
    /// journaled when the session opens or resumes, and every command's bound in its
    /// `started`. Without this, commands run unsandboxed and no bound is journaled.
    pub fn sandbox(mut self, spec: sandbox::Spec) -> SessionBuilder {
        self.sandbox = Some(spec);
        self
    }

    /// Leaves out the built-in tools (read, write, edit, bash, …): only the tools added here.
    pub fn without_builtins(mut self) -> SessionBuilder {
        self.builtins = false;
        self
    }

    /// Keeps `path` out of the file tools' reach too (the journal directory always is).
    pub fn forbid(mut self, path: impl Into<PathBuf>) -> SessionBuilder {
        self.forbidden.push(path.into());
        self
    }

    /// No spill store: a result over the model's inline limit reaches the model whole up to
    /// 4 MiB, and beyond that as a preview marked "not kept".
    pub fn without_spill(mut self) -> SessionBuilder {
        self.spill_cache_bytes = None;
        self
    }

    /// Takes the journal's writer lock (creating the directory if needed) and reads the
    /// journal to its end under it. Nothing is changed: a torn tail is cut (after it is copied
    /// aside) only when `open` or `resume` goes ahead, and never in a journal they refuse.
    pub fn lock(self) -> Result<LockedJournal, BuildError> {
        let dir = self.journal_dir.clone();
        let backend = match &self.backend {
            Some(backend) => backend.clone(),
            None => {
                let storage = FsStorage::create(&dir).map_err(|source| BuildError::JournalDir {
                    dir: dir.clone(),
                    source,
                })?;
                let storage: Arc<dyn Storage> = Arc::new(storage);
                Backend::Files(storage)
            }
        };
        // Never a steal here: taking a live holder's journal is its own act
        // ([`crate::takeover::steal`]), journaled before anything else happens.
        let lock = Journal::lock_backend(&backend, Takeover::Refuse).map_err(|e| match e {
            JournalError::Locked { holder_pid, .. } => BuildError::Live {
                dir: dir.clone(),
                holder_pid,
            },
            e => BuildError::Journal(e),
        })?;
        // Under the lock: this is the journal's real end, and nobody appends after it but us.
        let location = backend.location();
        let (replay, end) =
            replay_backend(&backend, journal::Limits::default()).map_err(|source| {
                BuildError::Replay {
                    dir: dir.clone(),
                    source,
                }
            })?;
        let torn = match end {
            ReadEnd::Clean => None,
            ReadEnd::TornTail(torn) => Some(torn),
            ReadEnd::Corrupt(corruption) => return Err(BuildError::Corrupt { dir, corruption }),
        };
        Ok(LockedJournal {
            settings: self,
            lock,
            location,
            replay,
            torn,
        })
    }

    /// Builds a new session: [`SessionBuilder::lock`], then [`LockedJournal::open`].
    pub fn open(self) -> Result<Session, BuildError> {
        self.lock()?.open()
    }

    /// Continues the session the journal holds: [`SessionBuilder::lock`], then
    /// [`LockedJournal::resume`].
    pub fn resume(self) -> Result<Session, BuildError> {
        self.lock()?.resume()
    }
}

/// A journal held for writing and read to its end: the moment to look before anything is
/// written or any tool is set up.
pub struct LockedJournal {
    settings: SessionBuilder,
    lock: WriterLock,
    location: String,
    replay: SessionReplay,
    torn: Option<TornTail>,
}

impl LockedJournal {
    /// The journal as it ends, read under the writer lock.
    pub fn replay(&self) -> &SessionReplay {
        &self.replay
    }

    /// The torn tail the journal ends in, if any: `open` and `resume` copy it aside and cut it
    /// before they append (a refused one leaves it as it is).
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn.as_ref()
    }

    /// The journal directory.
    pub fn journal_dir(&self) -> &Path {
        &self.settings.journal_dir
    }

    /// Opens the workspace (with the journal directory out of reach) and registers the tools.
    pub fn prepare(self) -> Result<PreparedSession, BuildError> {
        let LockedJournal {
            settings,
            lock,
            location,
            replay,
            torn,
        } = self;
        let mut forbidden = Vec::new();
        if settings
            .backend
            .as_ref()
            .is_none_or(|b| b.files().is_some())
        {
            forbidden.push(settings.journal_dir.clone());
        }
        forbidden.extend(settings.forbidden.iter().cloned());
        let workspace = Workspace::new(&settings.workspace, &forbidden).map_err(|source| {
            BuildError::Workspace {
                path: settings.workspace.clone(),
                source,
            }
        })?;
        remember_reads(&workspace, &replay);
        let workspace = Arc::new(workspace);
        // The session's spec made whole: its workspace, and every path kept from the tools.
        let sandbox_spec = settings.sandbox.clone().map(|mut spec| {
            spec.workspace = workspace.root().to_owned();
            spec.label = settings
                .session_id
                .as_deref()
                .map_or_else(|| "session".to_owned(), |id| id.chars().take(8).collect());
            spec.hidden.extend(forbidden.iter().cloned());
            spec
        });
        let sandbox = match &sandbox_spec {
            Some(spec) => Some(Arc::new(
                sandbox::Sandbox::new(spec.clone()).map_err(BuildError::Sandbox)?,
            )),
            None => None,
        };
        let mut registry = if settings.builtins {
            builtin_registry_sandboxed(&workspace, sandbox.clone())?
        } else {
            Registry::new()
        };
        for (tool, source) in &settings.tools {
            registry.register(tool.clone(), source.clone())?;
        }
        Ok(PreparedSession {
            settings,
            lock,
            location,
            replay,
            torn,
            workspace,
            registry,
            sandbox,
            sandbox_spec,
        })
    }

    /// A new session: [`LockedJournal::prepare`], then [`PreparedSession::open`].
    pub fn open(self) -> Result<Session, BuildError> {
        self.prepare()?.open()
    }

    /// The journal's session continued: [`LockedJournal::prepare`], then
    /// [`PreparedSession::resume`].
    pub fn resume(self) -> Result<Session, BuildError> {
        self.prepare()?.resume()
    }
}

/// A locked journal with its workspace and registry ready: the moment to add tools that need
/// the workspace or a running server (an MCP server's), then open or resume.
pub struct PreparedSession {
    settings: SessionBuilder,
    lock: WriterLock,
    location: String,
    replay: SessionReplay,
    torn: Option<TornTail>,
    workspace: Arc<Workspace>,
    registry: Registry,
    /// The sandbox `bash` runs under, journaled when the session opens or resumes.
    sandbox: Option<Arc<sandbox::Sandbox>>,
    /// What it was built from, for the sandboxes of the session's MCP servers.
    sandbox_spec: Option<sandbox::Spec>,
}

impl PreparedSession {
    /// The journal as it ends, read under the writer lock.
    pub fn replay(&self) -> &SessionReplay {
        &self.replay
    }

    /// The torn tail the journal ends in, if any (cut, after it is copied aside, when the
    /// session opens or resumes).
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn.as_ref()
    }

    /// The workspace the tools act in (its root resolved).
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    /// The tools the session will have so far.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Where to add or configure tools before the session opens.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// A sandbox for a process the session starts besides `bash` (an MCP server): the
    /// session's settings (network, extra roots, what stays hidden, the journal directory
    /// among it) under `policy`; `None` when the session has no sandbox.
    pub fn sandbox_under(
        &self,
        policy: crate::event::SandboxPolicy,
        label: &str,
    ) -> Option<Result<sandbox::Sandbox, sandbox::SandboxError>> {
        let mut spec = self.sandbox_spec.clone()?;
        spec.policy = policy;
        spec.label = label.to_owned();
        Some(sandbox::Sandbox::new(spec))
    }

    /// Opens a new session (writes `session/open`). Refused, with the journal untouched, if it
    /// already holds one.
    pub fn open(self) -> Result<Session, BuildError> {
        Ok(self.open_reporting()?.0)
    }

    /// [`PreparedSession::open`], with what opening the journal found (a torn tail it cut).
    pub fn open_reporting(self) -> Result<(Session, OpenReport), BuildError> {
        refuse_a_session(self.replay.last_seq, &self.location)?;
        let sandbox = self.sandbox.clone();
        let (journal, report, registry, hooks, config, options, _) = self.into_parts()?;
        let mut session = Session::open(journal, registry, hooks, config, options)?;
        record_sandbox(&mut session, sandbox.as_deref(), false)?;
        Ok((session, report))
    }

    /// Continues the session the journal holds, on the same workspace. Refused, with the
    /// journal untouched, if it is empty, finished, or ends inside a turn (recover it first),
    /// or while a process group a call of the crashed run started still runs (it may still be
    /// changing the workspace: stop it first). Plan mode stays as the journal shows it;
    /// [`SessionBuilder::plan_mode`]`(true)` turns it on.
    pub fn resume(self) -> Result<Session, BuildError> {
        Ok(self.resume_reporting()?.0)
    }

    /// [`PreparedSession::resume`], with what opening the journal found (a torn tail it cut).
    pub fn resume_reporting(self) -> Result<(Session, OpenReport), BuildError> {
        resumable(&self.replay)?;
        self.check_resumable_here()?;
        let sandbox = self.sandbox.clone();
        let had_sandbox = self.replay.sandbox.is_some();
        let (journal, report, registry, hooks, mut config, options, replay) = self.into_parts()?;
        let plan_mode = std::mem::take(&mut config.plan_mode);
        let mut session = Session::resume(journal, registry, hooks, config, options, &replay)?;
        record_sandbox(&mut session, sandbox.as_deref(), had_sandbox)?;
        if plan_mode && !session.plan_mode() {
            session.set_plan_mode(true, "resumed in plan mode")?;
        }
        Ok((session, report))
    }

    /// Continues a finished session: `session/reopen` is appended and the session goes on
    /// ([`Session::reopen`]). Refused as `resume` is (other workspace, an imported journal),
    /// and when the session is not finished, with the journal untouched. Plan mode as in
    /// `resume`.
    pub fn reopen_reporting(self) -> Result<(Session, OpenReport), BuildError> {
        continuable(&self.replay, true)?;
        self.check_resumable_here()?;
        let sandbox = self.sandbox.clone();
        let had_sandbox = self.replay.sandbox.is_some();
        let (journal, report, registry, hooks, mut config, options, replay) = self.into_parts()?;
        let plan_mode = std::mem::take(&mut config.plan_mode);
        let mut session = Session::reopen(journal, registry, hooks, config, options, &replay)?;
        record_sandbox(&mut session, sandbox.as_deref(), had_sandbox)?;
        if plan_mode && !session.plan_mode() {
            session.set_plan_mode(true, "resumed in plan mode")?;
        }
        Ok((session, report))
    }

    /// Continues a crashed session that was not recovered, appending its recovery first
    /// ([`Session::resume_recovering`]): `recovery` balances it, and may leave calls of the
    /// interrupted step to run again ([`Session::run_rerun`]). Refused as `resume` is (other
    /// workspace, a process group of the crashed run still running), with the journal
    /// untouched; a torn tail is cut (after it is copied aside) as `resume` cuts it. Plan mode
    /// is not changed here (calls that run again were admitted under the journal's); turn it
    /// on after the re-run if asked.
    pub fn resume_recovering(
        self,
        recovery: Vec<crate::event::Event>,
    ) -> Result<(Session, OpenReport), BuildError> {
        self.check_resumable_here()?;
        let sandbox = self.sandbox.clone();
        let had_sandbox = self.replay.sandbox.is_some();
        let (journal, report, registry, hooks, mut config, options, replay) = self.into_parts()?;
        config.plan_mode = false;
        let mut session = Session::resume_recovering(
            journal, registry, hooks, config, options, &replay, recovery,
        )?;
        record_sandbox(&mut session, sandbox.as_deref(), had_sandbox)?;
        Ok((session, report))
    }

    /// The checks every resume makes before it writes: the journal's workspace is this one,
    /// and no process group a call of the crashed run started still runs.
    fn check_resumable_here(&self) -> Result<(), BuildError> {
        let dir = self.settings.journal_dir.clone();
        let Some(open) = &self.replay.open else {
            return Err(RuntimeError::Misuse("the journal holds no session".into()).into());
        };
        let given = self.workspace.root().display().to_string();
        if open.workspace != given {
            return Err(BuildError::WorkspaceMismatch {
                dir,
                journaled: open.workspace.clone(),
                given,
            });
        }
        for (call, process) in self.replay.unsettled_processes() {
            if let Some(members) = crate::process::still_running(&process) {
                return Err(BuildError::StillRunning {
                    dir,
                    call,
                    pgid: process.pgid,
                    members,
                });
            }
        }
        Ok(())
    }

    /// Opens the journal for appending (cutting a torn tail after copying it aside) and the
    /// spill store: everything `Session::open` and `Session::resume` take.
    #[allow(clippy::type_complexity)] // one destructuring, shared by open and resume
    fn into_parts(
        self,
    ) -> Result<
        (
            Journal,
            OpenReport,
            Arc<Registry>,
            Hooks,
            Config,
            SessionOptions,
            SessionReplay,
        ),
        BuildError,
    > {
        let PreparedSession {
            settings,
            lock,
            location: _,
            replay,
            torn: _,
            workspace,
            registry,
            sandbox: _,
            sandbox_spec: _,
        } = self;
        let options = Options {
            fsync: settings.fsync,
            ..Options::default()
        };
        let (journal, report) = lock.open(options)?;
        let mut config = settings.config;
        if config.spill.is_none() {
            if let Some(cache_bytes) = settings.spill_cache_bytes {
                let dir = settings.journal_dir.join(SPILL_DIR_NAME);
                let spill = SledSpill::open(&dir, cache_bytes)
                    .map_err(|message| BuildError::Spill { dir, message })?;
                config.spill = Some(Arc::new(spill));
            }
        }
        let options = SessionOptions {
            session_id: settings.session_id,
            workspace: workspace.root().display().to_string(),
            clock: settings.clock,
        };
        Ok((
            journal,
            report,
            Arc::new(registry),
            settings.hooks,
            config,
            options,
            replay,
        ))
    }
}

/// What the session's file tools saw before this process: each path's hash as its last
/// successful `read`, `write` or `edit` left it (their structured values), so that an `edit`
/// of a file the session read before a crash (one a resume runs again, or the model's next)
/// is checked against that read, as it would have been in one process. Safe: an edit still
/// refuses a file that changed since (its hash differs), and a path that no longer resolves
/// inside the workspace is left out.
fn remember_reads(workspace: &Workspace, replay: &SessionReplay) {
    for c in replay.calls() {
        let field = match c.tool.as_str() {
            "read" => "sha256",
            "write" | "edit" => "after_sha256",
            _ => continue,
        };
        let Some(outcome) = &c.outcome else { continue };
        if outcome.status != crate::event::OutcomeStatus::Success {
            continue;
        }
        let Some(value) = outcome
            .value
            .as_deref()
            .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
        else {
            continue;
        };
        let (Some(path), Some(sha256)) = (value["path"].as_str(), value[field].as_str()) else {
            continue;
        };
        if let Ok(absolute) = workspace.resolve(path) {
            workspace.record_read(&absolute, sha256.to_owned());
        }
    }
}

/// Journals the session's sandbox (`session/sandbox`) right after it opens or resumes, before
/// any call can run under it. A resume without one, of a journal that records one, journals
/// that this run has none: the journal's last word on it must be this run's.
fn record_sandbox(
    session: &mut Session,
    sandbox: Option<&sandbox::Sandbox>,
    journal_had_one: bool,
) -> Result<(), BuildError> {
    match sandbox {
        Some(sandbox) => session.record_sandbox(sandbox.bound())?,
        None if journal_had_one => {
            let mut none = sandbox::Sandbox::unconfined(false).bound().clone();
            none.mechanism = "none: this run of the session set no sandbox".to_owned();
            session.record_sandbox(&none)?;
        }
        None => {}
    }
    Ok(())
}
