//! A throwaway PostgreSQL server for tests (feature `testing`): `initdb` into a temp directory,
//! `pg_ctl start` listening only on a Unix socket in that directory.
//!
//! Why its own server and not the machine's: tests restart it, kill its backends and crash it
//! on purpose, which nobody's real instance should suffer; and a test that needs PostgreSQL and
//! cannot find it panics saying how to install it, never skips. As root (initdb refuses root)
//! the server runs as the `postgres` OS user. A guard process stops the server and removes the
//! directory when this process ends, however it ends (the shared server is never dropped).
//!
//! Tests get `fsync=off` (speed; nothing of theirs survives a power cut). A benchmark of
//! durable commits needs the real thing: [`TempPostgres::start_durable`] runs with `fsync=on`
//! and `synchronous_commit=on`, and says what went wrong instead of panicking.

use crate::conn::Conn;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

/// Connections the server accepts: a journal holds three (its store's, its writer's, its
/// lease's heartbeat), and a benchmark runs 64 at once.
const MAX_CONNECTIONS_DURABLE: u32 = 300;

const INSTALL_HINT: &str =
    "install PostgreSQL (Debian/Ubuntu: `apt-get install postgresql`; it provides initdb and \
     pg_ctl under /usr/lib/postgresql/*/bin)";

/// A PostgreSQL server of the test's own, in a temp directory. Dropping it stops it
/// (`-m immediate`) and removes the directory.
#[derive(Debug)]
pub struct TempPostgres {
    dir: PathBuf,
    bin: PathBuf,
    /// The `postgres` OS user's (uid, gid) when this process is root.
    run_as: Option<(u32, u32)>,
    /// Whether the server syncs its WAL (`fsync=on`, `synchronous_commit=on`).
    durable: bool,
    /// Stops the server and removes `dir` when its stdin closes (when this process ends).
    guard: Mutex<Option<Child>>,
}

/// Why a server could not be started.
#[derive(Debug)]
pub enum StartError {
    /// PostgreSQL's programs (or, as root, its `postgres` OS user) are not on this machine.
    NotFound {
        /// What was looked for, and how to install it.
        message: String,
    },
    /// They are there, and a step failed.
    Failed {
        /// The step (`initdb`, `pg_ctl start`, `store init`, ...).
        step: String,
        /// What it said.
        message: String,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::NotFound { message } => f.write_str(message),
            StartError::Failed { step, message } => write!(f, "{step} failed: {message}"),
        }
    }
}

impl std::error::Error for StartError {}

fn failed(step: impl Into<String>, message: impl std::fmt::Display) -> StartError {
    StartError::Failed {
        step: step.into(),
        message: message.to_string(),
    }
}

static SHARED: OnceLock<TempPostgres> = OnceLock::new();

/// The test binary's shared server, started on first use (for tests that do not restart it).
pub fn shared() -> &'static TempPostgres {
    SHARED.get_or_init(TempPostgres::start)
}

/// The directory of PostgreSQL's server binaries: `initdb` on PATH (its real directory), else
/// the newest `/usr/lib/postgresql/*/bin`.
fn find_bin() -> Result<PathBuf, StartError> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("initdb"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
    });
    if let Some(dir) = on_path {
        return Ok(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => Ok(bin),
        None => Err(StartError::NotFound {
            message: format!(
                "PostgreSQL's initdb was not found on PATH nor in /usr/lib/postgresql/*/bin: \
                 {INSTALL_HINT}"
            ),
        }),
    }
}

/// The `postgres` OS user's ids when this process is root (initdb and the server refuse root).
fn run_as() -> Result<Option<(u32, u32)>, StartError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("postgres") {
        Ok(Some(user)) => Ok(Some((user.uid.as_raw(), user.gid.as_raw()))),
        _ => Err(StartError::NotFound {
            message: format!(
                "running as root, and there is no `postgres` OS user to run the server as: \
                 {INSTALL_HINT}"
            ),
        }),
    }
}

impl TempPostgres {
    /// Starts a new server; panics saying how to install PostgreSQL when it is missing.
    /// The store's schema is created (`init`) before it is returned. It runs with `fsync=off`.
    pub fn start() -> TempPostgres {
        TempPostgres::launch(false, None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A server whose commits are durable (`fsync=on`, `synchronous_commit=on`), with room for
    /// 300 connections (64 journals hold three each), in a new directory inside `parent` (default:
    /// the system's temporary directory; as root, the `postgres` user must be able to reach
    /// it). The store's schema is created before it is returned. Errors instead of panicking:
    /// [`StartError::NotFound`] when PostgreSQL is not installed.
    pub fn start_durable(parent: Option<&Path>) -> Result<TempPostgres, StartError> {
        TempPostgres::launch(true, parent)
    }

    fn launch(durable: bool, parent: Option<&Path>) -> Result<TempPostgres, StartError> {
        let bin = find_bin()?;
        let run_as = run_as()?;
        let mut builder = tempfile::Builder::new();
        builder.prefix("tooljournal-pg-");
        let dir = match parent {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
        .map_err(|e| failed("make a temp directory for PostgreSQL", e))?
        .keep();
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| failed(format!("chown {} to postgres", dir.display()), e))?;
        }
        // From here on, dropping it stops whatever was started and removes the directory.
        let server = TempPostgres {
            dir,
            bin,
            run_as,
            durable,
            guard: Mutex::new(None),
        };
        let data = server.data();
        server.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        server.start_guard()?;
        server.pg_ctl(&["start"])?;
        let report = crate::init(&server.url("init")).map_err(|e| failed("store init", e))?;
        if report.version != crate::SCHEMA_VERSION {
            return Err(failed(
                "store init",
                format!(
                    "schema version {} (expected {})",
                    report.version,
                    crate::SCHEMA_VERSION
                ),
            ));
        }
        Ok(server)
    }

    /// A server setting's current value (`SHOW name`), e.g. to confirm `fsync`.
    pub fn show(&self, name: &str) -> Result<String, StartError> {
        let step = format!("SHOW {name}");
        let url = crate::url::parse(&self.url("show")).map_err(|e| failed(&step, e))?;
        let conn = Conn::connect(&url.config).map_err(|e| failed(&step, e.describe()))?;
        // SHOW takes no parameters; the name is quoted as an identifier.
        let sql = format!("SHOW \"{}\"", name.replace('"', "\"\""));
        conn.call(move |w| {
            let row = w.client.query_one(sql.as_str(), &[])?;
            Ok(row.try_get::<_, String>(0)?)
        })
        .map_err(|e| failed(&step, e.describe()))
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The socket directory: where the server listens.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// A store URL naming journal `session` on this server (superuser `postgres`, trust auth).
    pub fn url(&self, session: &str) -> String {
        format!(
            "postgres://postgres@/postgres?host={}&session={session}",
            self.dir.display()
        )
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command.current_dir(&self.dir);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<Output, StartError> {
        let output = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| StartError::NotFound {
                message: format!("cannot run {program}: {e}: {INSTALL_HINT}"),
            })?;
        if !output.status.success() {
            return Err(failed(
                format!("{program} {args:?}"),
                format!(
                    "{}:\n{}\n{}",
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
            ));
        }
        Ok(output)
    }

    /// `pg_ctl ACTION` with this server's directory, log and options.
    fn pg_ctl(&self, action: &[&str]) -> Result<(), StartError> {
        let sync = if self.durable {
            format!(
                "-c fsync=on -c synchronous_commit=on -c max_connections={MAX_CONNECTIONS_DURABLE}"
            )
        } else {
            "-c fsync=off -c max_connections=100".to_owned()
        };
        let options = format!("-c listen_addresses='' -k {} {sync}", self.dir.display());
        let data = self.data();
        let log = self.dir.join("log");
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "-D".as_ref(),
            data.as_os_str(),
            "-l".as_ref(),
            log.as_os_str(),
            "-w".as_ref(),
            "-t".as_ref(),
            "60".as_ref(),
            "-o".as_ref(),
            options.as_ref(),
        ];
        args.extend(action.iter().map(std::ffi::OsStr::new));
        self.run("pg_ctl", &args).map(drop)
    }

    /// A shell that waits for its stdin to close, then stops the server and removes the
    /// directory: this process's end, even by SIGKILL, closes that pipe.
    fn start_guard(&self) -> Result<(), StartError> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(r#"read _x; "$0" -D "$1" stop -m immediate >/dev/null 2>&1; rm -rf "$2""#)
            .arg(self.bin.join("pg_ctl"))
            .arg(self.data())
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        let child = command
            .spawn()
            .map_err(|e| failed("start the cleanup guard (sh)", e))?;
        *self.guard.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    /// Crashes and restarts the server: `pg_ctl restart -m immediate` (no shutdown checkpoint;
    /// the restart replays the WAL, as after a power cut that kept the disk).
    pub fn restart_immediate(&self) {
        self.pg_ctl(&["-m", "immediate", "restart"])
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Terminates every other client backend (`pg_terminate_backend`); returns how many.
    pub fn terminate_backends(&self) -> i64 {
        let url = crate::url::parse(&self.url("terminate"))
            .unwrap_or_else(|e| panic!("the test server's URL: {e}"));
        let conn = Conn::connect(&url.config)
            .unwrap_or_else(|e| panic!("connect to the test server: {}", e.describe()));
        conn.call(|w| {
            let row = w.client.query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
                &[],
            )?;
            Ok(row.try_get::<_, i64>(0)?)
        })
        .unwrap_or_else(|e| panic!("terminate backends: {}", e.describe()))
    }

    /// A superuser `role` that must give `password` (scram-sha-256 on the socket; every other
    /// role keeps trust), made once; returns the store URL without user or password:
    /// `postgres:///postgres?host=DIR`, for a test to put them where it means to.
    pub fn password_role(&self, role: &str, password: &str) -> String {
        let step = format!("password role {role}");
        let url = crate::url::parse(&self.url("roles")).unwrap_or_else(|e| panic!("{step}: {e}"));
        let conn = Conn::connect(&url.config)
            .unwrap_or_else(|e| panic!("{step}: connect: {}", e.describe()));
        let (role_q, password_q) = (role.replace('"', "\"\""), password.replace('\'', "''"));
        conn.call(move |w| {
            w.client.batch_execute(&format!(
                "DO $$ BEGIN
                   IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{}') THEN
                     CREATE ROLE \"{role_q}\" LOGIN SUPERUSER;
                   END IF;
                 END $$;
                 ALTER ROLE \"{role_q}\" PASSWORD '{password_q}';",
                role_q.replace('\'', "''")
            ))?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{step}: {}", e.describe()));
        let hba = self.data().join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).unwrap_or_else(|e| panic!("{step}: {e}"));
        let line = format!("local all \"{role}\" scram-sha-256\n");
        if !text.contains(&line) {
            std::fs::write(&hba, format!("{line}{text}")).unwrap_or_else(|e| panic!("{step}: {e}"));
            self.pg_ctl(&["reload"])
                .unwrap_or_else(|e| panic!("{step}: {e}"));
        }
        // A reload is signalled, not awaited: the rule holds once a connection without the
        // password is refused.
        let bare = format!(
            "postgres://{role}@/postgres?host={}&session=x",
            self.dir.display()
        );
        let bare = crate::url::parse(&bare).unwrap_or_else(|e| panic!("{step}: {e}"));
        let mut config = bare.config;
        config.password(b"not the password".as_slice());
        for _ in 0..200 {
            if Conn::connect(&config).is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        format!("postgres:///postgres?host={}", self.dir.display())
    }

    /// Stops the server (`-m fast`); it stays stopped until dropped.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"])
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        // Already stopped is fine: pg_ctl just says so.
        let _ = self
            .command("pg_ctl")
            .args([
                "-D".as_ref(),
                self.data().as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "stop".as_ref(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(mut guard) = self.guard.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Closing its stdin lets it run its (now idle) cleanup and end.
            if let Some(mut stdin) = guard.stdin.take() {
                let _ = stdin.flush();
            }
            let _ = guard.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
