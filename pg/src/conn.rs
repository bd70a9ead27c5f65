//! One connection to the store, on a thread of its own.
//!
//! Why a thread per connection: the `postgres` crate's client is tokio-postgres driven by a
//! runtime of its own, and its blocking calls panic on a thread that is inside a tokio runtime
//! ("Cannot start a runtime from within a runtime"). The journal calls its store from tokio
//! worker threads, from `spawn_blocking` and from plain threads; so the client lives on a plain
//! thread that runs the jobs it is sent, one at a time, and any thread can wait for the answer.

use journal::JournalError;
use postgres::{Client, NoTls, Statement};
use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;

/// What a job gets: the client, and the statements prepared on it so far.
pub(crate) struct Worker {
    pub(crate) client: Client,
    prepared: HashMap<&'static str, Statement>,
    /// The connection's `synchronous_commit`, once this worker set it.
    synchronous_commit: Option<bool>,
}

impl Worker {
    /// `sql` prepared on this connection once, then reused (one round trip less per call).
    pub(crate) fn prepared(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.prepared.insert(sql, statement.clone());
        Ok(statement)
    }

    /// Sets the connection's `synchronous_commit` (a round trip only when it changes): `on`,
    /// a commit returns once its log record is flushed; `off`, at once.
    pub(crate) fn set_synchronous_commit(&mut self, on: bool) -> Result<(), postgres::Error> {
        if self.synchronous_commit != Some(on) {
            self.client.batch_execute(match on {
                true => "SET synchronous_commit = on",
                false => "SET synchronous_commit = off",
            })?;
            self.synchronous_commit = Some(on);
        }
        Ok(())
    }
}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// Who the connection's server process is: to tell, after a lost connection, that it is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backend {
    /// `pg_backend_pid()`.
    pub(crate) pid: i32,
    /// Its `backend_start`, as text: a pid can be reused, a (pid, start) pair cannot.
    pub(crate) start: String,
}

/// A connection: a thread that owns the client. Dropping it ends the thread and the session.
pub(crate) struct Conn {
    jobs: mpsc::Sender<Job>,
    pub(crate) backend: Backend,
}

/// A failed call on a connection: the server's (or the client's) error, or the thread is gone.
#[derive(Debug)]
pub(crate) enum CallError {
    Pg(postgres::Error),
    /// The connection's thread ended (it panicked): treated as a lost connection.
    ThreadGone,
}

impl From<postgres::Error> for CallError {
    fn from(e: postgres::Error) -> CallError {
        CallError::Pg(e)
    }
}

impl CallError {
    /// Whether the connection was lost, so a transaction's outcome is unknown: an I/O error, a
    /// closed connection, SQLSTATE class 08 (connection exception) or 57 (operator intervention:
    /// admin or crash shutdown, terminated backend). A server error of another class ends the
    /// transaction known: rolled back.
    pub(crate) fn lost(&self) -> bool {
        match self {
            CallError::ThreadGone => true,
            CallError::Pg(e) => match e.as_db_error() {
                Some(db) => {
                    let code = db.code().code();
                    code.starts_with("08") || code.starts_with("57")
                }
                None => true,
            },
        }
    }

    /// The SQLSTATE, when the server sent one.
    pub(crate) fn code(&self) -> Option<&str> {
        match self {
            CallError::Pg(e) => e.code().map(|c| c.code()),
            CallError::ThreadGone => None,
        }
    }

    /// A message for a [`JournalError::Store`]: the server's text, and what to do when the
    /// schema is missing.
    pub(crate) fn describe(&self) -> String {
        match self {
            CallError::ThreadGone => "the connection's thread ended".into(),
            CallError::Pg(e) => match e.as_db_error() {
                Some(db) if db.code().code() == "42P01" => format!(
                    "{} (the store has no tooljournal schema: run `tooljournal store init URL`)",
                    db.message()
                ),
                Some(db) => {
                    let detail = db.detail().map(|d| format!(" ({d})")).unwrap_or_default();
                    format!(
                        "{} {}: {}{detail}",
                        db.severity(),
                        db.code().code(),
                        db.message()
                    )
                }
                None => {
                    let source = std::error::Error::source(e)
                        .map(|s| format!(": {s}"))
                        .unwrap_or_default();
                    format!("{e}{source}")
                }
            },
        }
    }

    /// This error as the journal's.
    pub(crate) fn into_store(self, location: &str, op: &'static str) -> JournalError {
        JournalError::Store {
            location: location.to_string(),
            op,
            message: self.describe(),
        }
    }
}

impl Conn {
    /// Connects on a new thread; returns once the connection is up (or failed).
    pub(crate) fn connect(config: &postgres::Config) -> Result<Conn, CallError> {
        let config = config.clone();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let spawned = thread::Builder::new()
            .name("tooljournal-pg".into())
            .spawn(move || {
                let mut worker = match connect_worker(&config) {
                    Ok((worker, backend)) => {
                        let _ = ready_tx.send(Ok(backend));
                        worker
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                for job in jobs_rx {
                    job(&mut worker);
                }
            });
        if spawned.is_err() {
            return Err(CallError::ThreadGone);
        }
        let backend = ready_rx.recv().map_err(|_| CallError::ThreadGone)??;
        Ok(Conn {
            jobs: jobs_tx,
            backend,
        })
    }

    /// Runs `job` on the connection's thread and waits for its answer. Safe from any thread,
    /// a tokio worker's included: this thread only waits on a channel.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Worker) -> Result<R, CallError> + Send + 'static,
    ) -> Result<R, CallError> {
        let (answer_tx, answer_rx) = mpsc::channel();
        let job: Job = Box::new(move |worker| {
            let _ = answer_tx.send(job(worker));
        });
        self.jobs.send(job).map_err(|_| CallError::ThreadGone)?;
        answer_rx.recv().map_err(|_| CallError::ThreadGone)?
    }
}

fn connect_worker(config: &postgres::Config) -> Result<(Worker, Backend), CallError> {
    let mut client = config.connect(NoTls)?;
    let row = client.query_one(
        "SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        &[],
    )?;
    let backend = Backend {
        pid: row.try_get(0)?,
        start: row.try_get(1)?,
    };
    let worker = Worker {
        client,
        prepared: HashMap::new(),
        synchronous_commit: None,
    };
    Ok((worker, backend))
}
