//! tooljournal's session layer: where a journal is, opened; and a crashed session resumed the
//! way `tooljournal resume` resumes it, as a library guarantee.
//!
//! Why a floor of its own: resuming safely needs both the executor (`runtime`: the session,
//! its tools) and the reader (`recover`: classification, the probe, the re-run choice), and
//! neither may depend on the other. Before this floor the protocol lived in the CLI, so an
//! embedder could open a session but not resume one without re-implementing the checks that
//! keep a resume truthful. Now the CLI is parsing and printing around [`Resume`].
//!
//! ```no_run
//! use tooljournal_session::{Location, Resume, Resumed};
//!
//! # async fn go() -> Result<(), tooljournal_session::ResumeError> {
//! let location = Location::parse("/var/lib/agent/journal")?;
//! match Resume::at(location).kill_orphans(true).open(&mut ())? {
//!     Resumed::Session(mut opened) => {
//!         let _ran_again = opened.run_again().await?;
//!         // opened.session goes on: turn, step, close.
//!     }
//!     other => println!("{other}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! What [`Resume::open`] guarantees, whatever the embedder's hooks do:
//! - recovery first: a crashed journal is balanced (its orphans classified, the workspace
//!   probed for calls that may have run) before anything else is written, and the writer lock
//!   is held from the moment the journal is read for good;
//! - the journaled policy reapplied: approval, parallelism and fsync as `session/policy`
//!   recorded them, unless the caller changes one (journaled as a change, naming it);
//! - orphaned process groups (started by the crashed run, still running) refused, or killed
//!   and journaled when asked;
//! - the re-run choice: only approved calls that provably never started, or (with
//!   [`RerunPolicy::Safe`]) idempotent or read-only tools' calls, run again, once, same ids;
//! - questions the crash withdrew said to the model ([`Opened::withdrawn`]).

mod approval;
mod error;
mod lease;
mod open;
mod orphans;
mod policy;
mod rerun;
mod resume;
mod withdrawn;

pub use approval::{describe, AskBeforeChanges, BashNeedsApproval};
pub use error::ResumeError;
pub use journal::{Location, LocationError};
pub use open::{builder, place};
pub use policy::{changes, record, Overrides, Settings, PARALLEL_MAX_DEFAULT};
pub use rerun::probe_target;
pub use resume::{
    torn_note, Continue, Hooks, Look, Opened, Plan, Resume, Resumed, LEASE_WAIT_MS_DEFAULT,
    LOOKS_MAX,
};
pub use runtime::event::RerunPolicy;
pub use withdrawn::{withdrawal_note, WRITTEN_PATHS_CHECKED_MAX};
