//! The PostgreSQL server the `runtime` benchmark's journal-in-PostgreSQL runs write to. The
//! bench starts its own (initdb + pg_ctl in a temporary directory, on a Unix socket,
//! through `pg::testing`), with `fsync=on` and `synchronous_commit=on`: the tests' server runs
//! with fsync off, and a durable figure measured on it would be a lie. Without PostgreSQL on
//! the machine the PG runs are skipped and say so; the rest of the bench runs as before.

use pg::testing::{StartError, TempPostgres};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the table prints in place of a PG figure when there is no PostgreSQL.
pub(super) const NOT_FOUND: &str = "PostgreSQL not found (apt-get install postgresql)";

/// A running server, confirmed durable.
pub(crate) struct PgServer {
    server: TempPostgres,
    /// Its version and sync settings, as it reports them (the table's heading).
    pub(super) description: String,
    /// Numbers the sessions of a run: every journal is a new one.
    sessions: AtomicU64,
}

/// The server, or why the PG runs are skipped.
pub(crate) enum PgState {
    Running(PgServer),
    Skipped(String),
}

impl PgState {
    pub(super) fn server(&self) -> Option<&PgServer> {
        match self {
            PgState::Running(server) => Some(server),
            PgState::Skipped(_) => None,
        }
    }
}

/// Starts the server in a new directory inside `parent` (default: the system's temporary
/// directory, where the other runs write too) and checks that it syncs its commits.
pub(super) fn start(parent: Option<&Path>) -> PgState {
    let server = match TempPostgres::start_durable(parent) {
        Ok(server) => server,
        Err(StartError::NotFound { .. }) => return PgState::Skipped(NOT_FOUND.to_owned()),
        Err(e) => return PgState::Skipped(format!("PostgreSQL did not start: {e}")),
    };
    let show = |name: &str| server.show(name).map(|v| format!("{name}={v}"));
    let settings = ["fsync", "synchronous_commit", "wal_sync_method"].map(show);
    let mut shown = Vec::new();
    for setting in settings {
        match setting {
            Ok(s) => shown.push(s),
            Err(e) => return PgState::Skipped(format!("PostgreSQL's settings: {e}")),
        }
    }
    if !shown.iter().any(|s| s == "fsync=on") || !shown.iter().any(|s| s == "synchronous_commit=on")
    {
        return PgState::Skipped(format!("PostgreSQL does not sync its commits ({shown:?})"));
    }
    let version = server
        .show("server_version")
        .unwrap_or_else(|_| "(version unknown)".to_owned());
    let description = format!("PostgreSQL {version}, {}", shown.join(", "));
    PgState::Running(PgServer {
        server,
        description,
        sessions: AtomicU64::new(0),
    })
}

impl PgServer {
    /// A session name no run has used yet: `label-N`.
    pub(super) fn fresh_session(&self, label: &str) -> String {
        format!("{label}-{}", self.sessions.fetch_add(1, Ordering::Relaxed))
    }

    /// The URL of journal `session` on this server.
    pub(super) fn url(&self, session: &str) -> String {
        self.server.url(session)
    }

    /// Where it keeps its data and socket.
    pub(super) fn dir(&self) -> &Path {
        self.server.socket_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::super::many::{sessions_at, sessions_measured};
    use super::super::session::{session_run_at, At};
    use super::*;
    use journal::FsyncPolicy;
    use std::time::Duration;

    #[test]
    fn sessions_journal_their_calls_in_postgresql_one_commit_per_step() {
        let server = match start(None) {
            PgState::Running(server) => server,
            PgState::Skipped(why) => panic!("this test needs PostgreSQL: {why}"),
        };
        assert!(
            server.description.contains("fsync=on"),
            "{}",
            server.description
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let seq = At::Store(server.url(&server.fresh_session("seq")));
        let m = session_run_at(&rt, &seq, FsyncPolicy::Group, 1, Duration::from_millis(100))
            .expect("the PG seq run");
        assert!(m.calls > 0 && m.calls_per_s() > 0.0, "{} calls", m.calls);
        // One commit per step, plus the turn's end.
        assert_eq!(m.syncs, Some(m.steps + 1));
        let ats: Vec<At> = (0..3)
            .map(|_| At::Store(server.url(&server.fresh_session("many"))))
            .collect();
        let timed = sessions_at(&rt, &ats, Duration::from_millis(100), || Ok(()))
            .expect("three PG sessions");
        let m = sessions_measured(&timed, &ats).expect("their sum");
        assert!(m.calls >= 3, "{} calls", m.calls);
        assert_eq!(m.bytes_per_step, None, "rows have no segment bytes");
    }
}
