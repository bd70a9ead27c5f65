//! A throwaway PostgreSQL server for tests (feature `testing`): `initdb` into a temp directory,
//! `pg_ctl start` listening only on a Unix socket in that directory.
//!
//! Why its own server and not the machine's: tests restart it, kill its backends and crash it
//! on purpose, which nobody's real instance should suffer; and a test that needs PostgreSQL and
//! cannot find it panics saying how to install it, never skips. As root (initdb refuses root)
//! the server runs as the `postgres` OS user. A guard process stops the server and removes the
//! directory when this process ends, however it ends (the shared server is never dropped).

use crate::conn::Conn;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

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
    /// Stops the server and removes `dir` when its stdin closes (when this process ends).
    guard: Mutex<Option<Child>>,
}

static SHARED: OnceLock<TempPostgres> = OnceLock::new();

/// The test binary's shared server, started on first use (for tests that do not restart it).
pub fn shared() -> &'static TempPostgres {
    SHARED.get_or_init(TempPostgres::start)
}

/// The directory of PostgreSQL's server binaries: `initdb` on PATH (its real directory), else
/// the newest `/usr/lib/postgresql/*/bin`.
fn find_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("initdb"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
    });
    if let Some(dir) = on_path {
        return dir;
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
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL's initdb was not found on PATH nor in /usr/lib/postgresql/*/bin: \
             {INSTALL_HINT}"
        ),
    }
}

/// The `postgres` OS user's ids when this process is root (initdb and the server refuse root).
fn run_as() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    match nix::unistd::User::from_name("postgres") {
        Ok(Some(user)) => Some((user.uid.as_raw(), user.gid.as_raw())),
        _ => panic!("running as root, and there is no `postgres` OS user to run the server as: {INSTALL_HINT}"),
    }
}

impl TempPostgres {
    /// Starts a new server; panics saying how to install PostgreSQL when it is missing.
    /// The store's schema is created (`init`) before it is returned.
    pub fn start() -> TempPostgres {
        let bin = find_bin();
        let run_as = run_as();
        let dir = tempfile::Builder::new()
            .prefix("tooljournal-pg-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot make a temp directory for PostgreSQL: {e}"))
            .keep();
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("cannot chown {} to postgres: {e}", dir.display()));
        }
        let server = TempPostgres {
            dir,
            bin,
            run_as,
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
        );
        server.start_guard();
        server.pg_ctl(&["start"]);
        let report = crate::init(&server.url("init"))
            .unwrap_or_else(|e| panic!("tooljournal store init on the test server: {e}"));
        assert_eq!(report.version, crate::SCHEMA_VERSION);
        server
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

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Output {
        let output = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}: {INSTALL_HINT}", program));
        assert!(
            output.status.success(),
            "{program} {args:?} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// `pg_ctl ACTION` with this server's directory, log and options.
    fn pg_ctl(&self, action: &[&str]) {
        let options = format!(
            "-c listen_addresses='' -k {} -c fsync=off -c max_connections=100",
            self.dir.display()
        );
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
        self.run("pg_ctl", &args);
    }

    /// A shell that waits for its stdin to close, then stops the server and removes the
    /// directory: this process's end, even by SIGKILL, closes that pipe.
    fn start_guard(&self) {
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
            .unwrap_or_else(|e| panic!("cannot start the cleanup guard (sh): {e}"));
        *self.guard.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
    }

    /// Crashes and restarts the server: `pg_ctl restart -m immediate` (no shutdown checkpoint;
    /// the restart replays the WAL, as after a power cut that kept the disk).
    pub fn restart_immediate(&self) {
        self.pg_ctl(&["-m", "immediate", "restart"]);
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

    /// Stops the server (`-m fast`); it stays stopped until dropped.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
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
