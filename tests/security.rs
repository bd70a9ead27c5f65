//! The trust boundary, tried as a hostile model and a hostile local user would (README
//! *Security*): a model-driven `bash` call looks for the model's key everywhere a process of the
//! same user (or root) could; provider errors that echo the key; database passwords in URLs;
//! planted links at the names `recover` writes; the user's umask; the fuzz harness's template;
//! text that renders other than it reads.
//!
//! Why a binary of its own, not a module of `tests/cli/main.rs`: one test bounds the peak memory
//! of every child this test binary waited for (`getrusage(RUSAGE_CHILDREN)` is process-wide);
//! beside the other tests it would count their children too (the 200 MB imports of
//! `bounded_input.rs`, Chromium).
// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

mod common;
use common::mcp_support;

use common::models::*;
use mockllm::{Answer, Format, Reply};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// This file's own key: no other test's process holds it, so a hit anywhere in `/proc` is ours.
const PROBE_KEY: &str = "sk-probe-Q7vN2xK9wR4tL8mZ3pB6";

/// A process the probe can always read, holding this: proof that the search finds what is
/// there.
const CONTROL: &str = "tj-control-5Hq2Wm8Rz";

/// What a model-driven `bash` call runs: it searches every `/proc/*/environ` and
/// `/proc/*/cmdline` it can read, and the memory of its ancestor named `tooljournal`, for the
/// key, and the same ways its own shell for [`CONTROL`]. The key is built from two halves at
/// run time, so that no command line or file holds it whole.
fn probe_script(key: &str) -> String {
    let (k1, k2) = key.split_at(key.len() / 2);
    format!(
        r#"set -u
tmp=$(mktemp -d)
printf '%s%s' '{k1}' '{k2}' > "$tmp/key"
printf '%s' "$TJ_CONTROL" > "$tmp/control"
scan() {{
  n=0; hits=0
  for f in /proc/[0-9]*/$1; do
    cat "$f" > "$tmp/one" 2>/dev/null || continue
    n=$((n+1))
    if grep -q -a -F -f "$tmp/key" "$tmp/one"; then hits=$((hits+1)); echo "HIT $f"; fi
  done
  echo "$1 read=$n hits=$hits"
}}
memscan() {{
  opened=0; hits=0
  while read -r range perms rest; do
    case $perms in r*) ;; *) continue ;; esac
    s=$((16#${{range%-*}})); e=$((16#${{range#*-}}))
    dd if=/proc/$1/mem bs=1M iflag=skip_bytes,count_bytes skip=$s count=$((e-s)) \
      of="$tmp/mem" 2>/dev/null
    [ -s "$tmp/mem" ] || continue
    opened=1
    if grep -q -a -F -f "$2" "$tmp/mem"; then hits=$((hits+1)); fi
  done < <(cat /proc/$1/maps 2>/dev/null)
  echo "opened=$opened hits=$hits"
}}
scan environ
scan cmdline
if grep -q -a -F -f "$tmp/control" /proc/$$/environ; then echo "control environ=1"; else echo "control environ=0"; fi
p=$$; rt=
while [ "$p" -gt 1 ]; do
  if [ "$(cat /proc/$p/comm 2>/dev/null)" = tooljournal ]; then rt=$p; break; fi
  read -r _ _ _ p _ < /proc/$p/stat || break
done
echo "runtime=$rt"
echo "runtime mem: $(memscan "$rt" "$tmp/key")"
echo "self mem: $(memscan $$ "$tmp/control")"
for f in /proc/$rt/fd/* /proc/$$/fd/*; do
  [ -f "$f" ] && grep -q -a -F -f "$tmp/key" "$f" 2>/dev/null && echo "HIT $f"
done
for st in /proc/[0-9]*/status; do
  [ "$(awk '/^PPid:/ {{print $2}}' "$st" 2>/dev/null)" = "$rt" ] || continue
  echo "child $(awk '/^Name:/ {{print $2}}' "$st") bnd=$(awk '/^CapBnd:/ {{print $2}}' "$st") eff=$(awk '/^CapEff:/ {{print $2}}' "$st")"
done
rm -rf "$tmp"
"#
    )
}

/// Who the runtime runs as.
#[derive(Debug, Clone, Copy)]
enum As {
    /// uid 0: really, or in a user namespace of its own when the tests are not root (where
    /// it holds every capability, CAP_SYS_PTRACE included, as root does).
    Root,
    /// An ordinary user: `nobody` when the tests are root, else the tests' own user.
    Unprivileged,
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `tooljournal` `args` as `who`, for `case` (whose directory `who` is made to own).
fn tooljournal_as(who: As, case: &Case, format: Format, args: &[String]) -> Output {
    let mut command = case.command(format);
    command
        .env(key_var(format), PROBE_KEY)
        .env("TJ_CONTROL", CONTROL)
        .args(args);
    match who {
        As::Root if is_root() => {}
        As::Root => {
            let mut userns = Command::new("unshare");
            userns
                .args(["--user", "--map-root-user", "--"])
                .arg(command.get_program())
                .args(command.get_args())
                .current_dir(case.dir.path());
            for (k, v) in command.get_envs() {
                match v {
                    Some(v) => userns.env(k, v),
                    None => userns.env_remove(k),
                };
            }
            command = userns;
        }
        As::Unprivileged if is_root() => {
            use std::os::unix::process::CommandExt;
            chown_tree(case.dir.path(), 65534, 65534);
            let exe = Path::new(env!("CARGO_BIN_EXE_tooljournal"));
            for dir in exe.ancestors().skip(1) {
                let mode = std::fs::metadata(dir).map(|m| m.permissions().mode());
                assert!(
                    mode.is_ok_and(|m| m & 0o001 != 0),
                    "{}: not searchable by others, so `nobody` cannot run {}",
                    dir.display(),
                    exe.display()
                );
            }
            command.uid(65534).gid(65534);
        }
        As::Unprivileged => {}
    }
    command.output().expect("tooljournal runs")
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).expect("chown");
    if dir.is_dir() && !dir.is_symlink() {
        for entry in std::fs::read_dir(dir).expect("a directory") {
            chown_tree(&entry.expect("an entry").path(), uid, gid);
        }
    }
}

/// The line of `report` that starts with `prefix`, without it.
fn line<'a>(report: &'a str, prefix: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in the probe's report:\n{report}"))
}

fn count(field: &str, name: &str) -> u64 {
    field
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in `{field}`"))
}

/// A model's `bash` call searches every readable `/proc/*/environ` and `cmdline`, the
/// runtime's memory and its open files for the key, as root and as an ordinary user; it finds
/// nothing, though the same search finds what is there (its own shell's environment and
/// memory). The result, the journal, the audit page and the next request hold no key either.
#[test]
fn a_model_driven_bash_call_finds_the_key_nowhere() {
    for who in [As::Root, As::Unprivileged] {
        let format = Format::OpenAiChat;
        let case = Case::new();
        case.server.expect_key(PROBE_KEY);
        std::fs::write(case.workspace().join("probe.sh"), probe_script(PROBE_KEY))
            .expect("the probe");
        // An MCP server beside the shell: its environment is the model's to read too.
        let config = std::fs::read_to_string(case.config()).expect("the configuration");
        let everything = mcp_support::everything_server();
        std::fs::write(
            case.config(),
            format!("{config}\n[mcp_servers.everything]\ncommand = {everything:?}\nargs = [\"stdio\"]\n"),
        )
        .expect("the configuration");
        let call = json!({"command": "bash probe.sh", "timeout_ms": 120000}).to_string();
        case.server.push(
            format,
            Answer::calls(vec![
                ("call_env", "mcp__everything__get-env", "{}"),
                ("call_probe", "bash", &call),
            ])
            .into(),
        );
        case.server.push(format, Answer::text("done").into());
        let out = tooljournal_as(who, &case, format, &case.run_args(format, &["look around"]));
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", shown(&out));
        let requests = case.requests();
        assert_eq!(requests.len(), 2, "{who:?}: {}", shown(&out));
        let results = results_for(format, &requests[1].body, "call_probe", "bash");
        let report: String = results
            .first()
            .and_then(|r| serde_json::from_str(r).ok())
            .expect("the probe's result, a JSON string");
        let report = report.as_str();
        assert!(
            !report.contains("HIT "),
            "{who:?}: the key was found:\n{report}"
        );
        for kind in ["environ", "cmdline"] {
            let field = line(report, &format!("{kind} "));
            assert!(count(field, "read") >= 1, "{who:?}: {kind} read: {report}");
            assert_eq!(count(field, "hits"), 0, "{who:?}: {report}");
        }
        assert_eq!(line(report, "control "), "environ=1", "{who:?}: {report}");
        assert!(!line(report, "runtime=").is_empty(), "{who:?}: {report}");
        let runtime_mem = line(report, "runtime mem: ");
        assert_eq!(
            runtime_mem, "opened=0 hits=0",
            "{who:?}: the runtime's memory is open to its tools: {report}"
        );
        let self_mem = line(report, "self mem: ");
        assert!(
            count(self_mem, "opened") == 1 && count(self_mem, "hits") >= 1,
            "{who:?}: the search cannot read memory at all: {report}"
        );
        // Every process the runtime started (the shell, the MCP server) runs without
        // CAP_SYS_PTRACE, and as root none can gain it back at an exec.
        let children: Vec<&str> = report.lines().filter(|l| l.starts_with("child ")).collect();
        assert!(
            children
                .iter()
                .any(|c| c.starts_with("child node") || c.contains("mcp"))
                && children.iter().any(|c| c.starts_with("child bash")),
            "{who:?}: the runtime's children: {report}"
        );
        const PTRACE: u64 = 1 << 19;
        for child in &children {
            let cap = |name: &str| {
                child
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{name}=")))
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .unwrap_or_else(|| panic!("no {name} in `{child}`"))
            };
            assert_eq!(cap("eff") & PTRACE, 0, "{who:?}: {child}");
            if matches!(who, As::Root) {
                assert_eq!(cap("bnd") & PTRACE, 0, "{who:?}: {child}");
            }
        }
        let env: Vec<String> = results_for(
            format,
            &requests[1].body,
            "call_env",
            "mcp__everything__get-env",
        );
        assert!(
            env.len() == 1 && env[0].contains("PATH"),
            "{who:?}: the server's environment: {env:?}"
        );
        // Nothing the session wrote or sent holds the key.
        for r in &requests {
            assert!(
                !r.body.to_string().contains(PROBE_KEY),
                "{who:?}: a request"
            );
        }
        let page = case.dir.path().join("audit.html");
        let audit = Command::new(common::recover_bin::recover_bin())
            .arg("audit")
            .arg(case.journal())
            .arg("--html")
            .arg(&page)
            .output()
            .expect("recover runs");
        assert!(audit.status.success(), "{}", shown(&audit));
        for path in files_under(case.dir.path()) {
            let bytes = std::fs::read(&path).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(PROBE_KEY),
                "{who:?}: {} holds the key",
                path.display()
            );
        }
        for stream in [&out.stdout, &out.stderr] {
            assert!(
                !text(stream).contains(PROBE_KEY),
                "{who:?}: {}",
                shown(&out)
            );
        }
    }
}

/// Every 6-byte piece of the key's plain, hex and base64 forms.
fn key_pieces(key: &str) -> Vec<String> {
    use base64::Engine;
    let mut forms = vec![key.to_owned(), hex::encode(key)];
    for prefix in ["", "u", "u:"] {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{key}"));
        forms.push(encoded[4..encoded.len() - 4].to_owned());
    }
    forms
        .iter()
        .flat_map(|f| {
            f.as_bytes()
                .windows(6)
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A provider that echoes the key, as is and in base64, across the place where its text is
/// cut (a body that is not JSON, an event that is not the provider's): neither stderr nor the
/// journal's `llm/attempt-failed` shows any piece of it.
#[test]
fn a_key_echoed_across_a_cut_or_encoded_is_never_shown() {
    use base64::Engine;
    let format = Format::OpenAiChat;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("u:{PROBE_KEY}"));
    let bodies = [
        format!("{}{PROBE_KEY} {b64}", "x".repeat(990)),
        format!("{}{b64} {PROBE_KEY}", "y".repeat(985)),
    ];
    let events = [
        format!("data: {}{PROBE_KEY} and more\n\n", "z".repeat(190)),
        format!("data: {}{b64} and more\n\n", "w".repeat(180)),
    ];
    let pieces = key_pieces(PROBE_KEY);
    let replies: Vec<Reply> = bodies
        .iter()
        .map(|body| Reply::Status {
            status: 400,
            headers: vec![("content-type".into(), "text/html".into())],
            body: body.clone(),
        })
        .chain(events.iter().map(|sse| Reply::Status {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: sse.clone(),
        }))
        .collect();
    for reply in replies {
        let case = Case::new();
        case.server.expect_key(PROBE_KEY);
        case.write_config("retry_attempts = 0");
        case.server.push(format, reply);
        let out = case
            .command(format)
            .env(key_var(format), PROBE_KEY)
            .args(case.run_args(format, &["hello"]))
            .output()
            .expect("tooljournal runs");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("xxxx")
                || stderr.contains("yyyy")
                || stderr.contains("zzzz")
                || stderr.contains("wwww"),
            "the provider's text is quoted: {stderr}"
        );
        let failed: Vec<String> = events_of(&case)
            .into_iter()
            .filter(|e| e.kind() == "llm/attempt-failed")
            .map(|e| format!("{e:?}"))
            .collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        for shown_text in [&stderr, &text(&out.stdout), &failed[0]] {
            if let Some(p) = pieces.iter().find(|p| shown_text.contains(p.as_str())) {
                panic!("`{p}` of the key is shown: {shown_text}");
            }
        }
    }
}

fn events_of(case: &Case) -> Vec<runtime::event::Event> {
    events(&case.journal())
}

/// A transcript whose one step runs `env` in `bash`.
fn env_transcript(dir: &Path) -> std::path::PathBuf {
    let call = json!({"command": "env"}).to_string();
    let lines = [
        json!({"user": "show the environment"}),
        json!({"assistant": {"text": "", "tool_calls": [{"id": "c1", "name": "bash", "arguments": call}], "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
    ];
    let path = dir.join("env.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).expect("the transcript");
    path
}

/// Runs `program` with `args` (and `PGPASSWORD` when given) and a state directory of its own.
fn run_bin(program: &Path, args: &[&str], pgpassword: Option<&str>, state: &Path) -> Output {
    let mut command = Command::new(program);
    command
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env_remove("PGPASSWORD");
    if let Some(pw) = pgpassword {
        command.env("PGPASSWORD", pw);
    }
    command.output().expect("the binary runs")
}

/// A database password never shows, however it is given (in the user part, percent-encoded
/// or with a raw `?`; as a `password` parameter, its name percent-encoded; in `PGPASSWORD`),
/// in any command's output or error, nor in the environment a `bash` call sees; and every
/// command that takes a location works with it (`run` once re-opened the store from the URL
/// it shows, without the password).
#[test]
fn database_passwords_are_never_shown_and_every_command_connects_with_them() {
    const PW: &str = "Pw7-Hq?Zr9Xy";
    let server = pg::testing::shared();
    let base = server.password_role("tj_secret", PW);
    let query = base.split_once('?').expect("a socket directory").1;
    let encoded = percent_encoding::utf8_percent_encode(PW, percent_encoding::NON_ALPHANUMERIC);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("the workspace");
    let script = env_transcript(dir.path());
    let tooljournal = Path::new(env!("CARGO_BIN_EXE_tooljournal"));
    let recover = common::recover_bin::recover_bin();
    let forms = [
        (
            format!("postgres://tj_secret:{encoded}@/postgres?{query}&session=pw-a"),
            None,
        ),
        (
            format!("postgres://tj_secret:{PW}@/postgres?{query}&session=pw-b"),
            None,
        ),
        (
            format!("postgres://tj_secret@/postgres?{query}&session=pw-c&%70assword={encoded}"),
            None,
        ),
        (
            format!("postgres://tj_secret@/postgres?{query}&session=pw-d"),
            Some(PW),
        ),
    ];
    let shows_password = |out: &Output| {
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        all.contains(PW) || all.contains(&encoded.to_string()) || all.contains("Zr9Xy")
    };
    for (url, pgpassword) in &forms {
        let state = dir.path().join("state");
        let run = run_bin(
            tooljournal,
            &[
                "run",
                "--script",
                script.to_str().unwrap(),
                "--workspace",
                ws.to_str().unwrap(),
                "--journal",
                url,
            ],
            *pgpassword,
            &state,
        );
        assert_eq!(run.status.code(), Some(0), "{url}: {}", shown(&run));
        assert!(!shows_password(&run), "{url}: {}", shown(&run));
        // Read here with the password in the URL: this process has no PGPASSWORD.
        let readable = url.replace("tj_secret@", &format!("tj_secret:{encoded}@"));
        let journaled = common::pg::records(Path::new(&readable));
        let dump = format!("{journaled:?}");
        assert!(dump.contains("PATH="), "the env call ran: {url}");
        assert!(!dump.contains(PW), "the bash call saw the password: {url}");
        for args in [
            vec!["classify", url.as_str()],
            vec!["audit", url.as_str()],
            vec!["verify", url.as_str()],
        ] {
            let out = run_bin(recover, &args, *pgpassword, &state);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", shown(&out));
            assert!(!shows_password(&out), "{args:?}: {}", shown(&out));
        }
        let store: String = url
            .split('&')
            .filter(|p| !p.starts_with("session="))
            .collect::<Vec<_>>()
            .join("&");
        let sessions = run_bin(
            tooljournal,
            &["sessions", "--store", &store],
            *pgpassword,
            &state,
        );
        assert_eq!(sessions.status.code(), Some(0), "{}", shown(&sessions));
        assert!(!shows_password(&sessions), "{}", shown(&sessions));
    }
    // Refused URLs say why without the password: a bad parameter after a raw `?` in it, a
    // parameter without `=`, a host part that holds a raw `@` of the password.
    for bad in [
        format!("postgres://tj_secret:{PW}@/postgres?{query}&session=x&lease_ms=no"),
        format!("postgres://tj_secret@/postgres?{query}&session=x&{PW}"),
        format!("postgres://tj_secret:a@{PW}@/postgres?{query}&session=x"),
        format!("postgres://tj_secret:{PW}@/postgres?{query}&session=x&sslpassword={PW}"),
    ] {
        for (program, args) in [
            (
                tooljournal,
                vec![
                    "run",
                    "--script",
                    script.to_str().unwrap(),
                    "--journal",
                    bad.as_str(),
                ],
            ),
            (recover, vec!["classify", bad.as_str()]),
        ] {
            let out = run_bin(program, &args, None, dir.path());
            assert_ne!(out.status.code(), Some(0), "{bad}: {}", shown(&out));
            assert!(
                text(&out.stderr).contains("error: postgres://"),
                "{}",
                shown(&out)
            );
            assert!(!shows_password(&out), "{bad}: {}", shown(&out));
        }
    }
}

/// `tooljournal run --script FILE` into `journal`, on a fresh workspace in `dir`.
fn scripted_journal(dir: &Path, script: &str) -> std::path::PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("the workspace");
    let journal = dir.join("journal");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(script);
    let out = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["run", "--script"])
        .arg(script)
        .arg("--workspace")
        .arg(&ws)
        .arg("--journal")
        .arg(&journal)
        .env("XDG_STATE_HOME", dir.join("state"))
        .output()
        .expect("tooljournal runs");
    assert!(out.status.success(), "{}", shown(&out));
    journal
}

/// `recover ARGS` run by a shell that first plants, as the user it runs as could, a symlink
/// to `target` at `plant` with `$$` (the pid `recover` will have: the shell `exec`s it)
/// replaced by that pid.
fn recover_after_planting(
    plant: Option<&Path>,
    target: &Path,
    args: &[&std::ffi::OsStr],
) -> Output {
    let mut command = Command::new("sh");
    let script = match plant {
        Some(_) => r#"ln -s "$1" "$(printf '%s' "$2" | sed "s/PID/$$/")" && shift 2 && exec "$@""#,
        None => r#"shift 2 && exec "$@""#,
    };
    command
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(target)
        .arg(plant.unwrap_or(Path::new("-")))
        .arg(common::recover_bin::recover_bin())
        .args(args);
    command.output().expect("sh runs")
}

/// Nothing `recover` writes follows a link planted at its destination or at the temporary
/// name it once used beside it (`FILE.partial-PID`), and nothing that was there is removed:
/// the planted link's target keeps its bytes, the refusal names the real obstacle.
#[test]
fn recover_never_writes_through_a_planted_link_nor_removes_what_it_did_not_make() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let journal = scripted_journal(d, "basic.jsonl");
    let target = d.join("bashrc");
    let original = "alias ll='ls -l'\n";
    let os = |s: &str| std::ffi::OsString::from(s);
    let intact = |what: &str| {
        assert_eq!(
            std::fs::read_to_string(&target).expect("the target"),
            original,
            "{what}: the link's target was written"
        );
    };
    std::fs::write(&target, original).expect("the target");

    // A link at the old temporary name: the page is written, the target untouched, and the
    // page is a file of its own.
    let page = d.join("page.html");
    let plant = d.join("page.html.partial-PID");
    let out = recover_after_planting(
        Some(&plant),
        &target,
        &[
            &os("audit"),
            journal.as_os_str(),
            &os("--html"),
            page.as_os_str(),
        ],
    );
    assert!(out.status.success(), "{}", shown(&out));
    intact("audit --html, link at FILE.partial-PID");
    let meta = std::fs::symlink_metadata(&page).expect("the page");
    assert!(meta.is_file(), "the page is a regular file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // A link at the destination itself: refused by every command that writes one, named.
    let link = d.join("out.txt");
    std::os::unix::fs::symlink(&target, &link).expect("a link");
    for args in [
        vec![
            os("audit"),
            journal.clone().into(),
            os("--html"),
            link.clone().into(),
        ],
        vec![
            os("rebuild"),
            journal.clone().into(),
            os("--format"),
            os("anthropic"),
            os("--out"),
            link.clone().into(),
        ],
    ] {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let out = recover_after_planting(None, &target, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", shown(&out));
        assert!(
            text(&out.stderr).contains("is a symbolic link"),
            "{args:?}: {}",
            shown(&out)
        );
        intact(&format!("{args:?}"));
        assert!(std::fs::symlink_metadata(&link)
            .expect("the link")
            .is_symlink());
    }

    // `repair --out X`: a file of someone else's at `X.partial-PID` is left as it is, and X
    // is written; a link at X is refused as existing.
    let session =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/codex/no_output.jsonl");
    let copy = d.join("repaired.jsonl");
    let theirs = d.join("repaired.jsonl.partial-PID");
    let out = recover_after_planting(
        Some(&theirs),
        &target,
        &[
            &os("repair"),
            &os("--from"),
            &os("codex"),
            session.as_os_str(),
            &os("--out"),
            copy.as_os_str(),
        ],
    );
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        std::fs::read(&copy).is_ok_and(|b| !b.is_empty()),
        "the copy"
    );
    intact("repair, link at X.partial-PID");
    let planted: Vec<_> = std::fs::read_dir(d)
        .expect("the directory")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("repaired.jsonl.partial-")
        })
        .collect();
    assert_eq!(planted.len(), 1, "the planted link is still there");
    let out = recover_after_planting(
        None,
        &target,
        &[
            &os("repair"),
            &os("--from"),
            &os("codex"),
            session.as_os_str(),
            &os("--out"),
            link.as_os_str(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(text(&out.stderr).contains("exists"), "{}", shown(&out));
    intact("repair --out LINK");

    // `import --journal DIR`: a link to an empty directory is not followed.
    let empty = d.join("empty");
    std::fs::create_dir(&empty).expect("a directory");
    let linked_dir = d.join("imported");
    std::os::unix::fs::symlink(&empty, &linked_dir).expect("a link");
    let out = recover_after_planting(
        None,
        &target,
        &[
            &os("import"),
            &os("--from"),
            &os("codex"),
            session.as_os_str(),
            &os("--journal"),
            linked_dir.as_os_str(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        text(&out.stderr).contains("symbolic link"),
        "{}",
        shown(&out)
    );
    assert_eq!(std::fs::read_dir(&empty).expect("empty").count(), 0);
}

/// A transcript of one step: `calls` as (id, tool, arguments).
fn transcript(
    dir: &Path,
    name: &str,
    calls: &[(&str, &str, serde_json::Value)],
) -> std::path::PathBuf {
    let calls: Vec<serde_json::Value> = calls
        .iter()
        .map(|(id, tool, args)| json!({"id": id, "name": tool, "arguments": args.to_string()}))
        .collect();
    let lines = [
        json!({"user": "go"}),
        json!({"assistant": {"text": "", "tool_calls": calls, "stop_reason": "tool_use"}}),
        json!({"assistant": {"text": "done", "tool_calls": [], "stop_reason": "end_turn"}}),
    ];
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).expect("the transcript");
    path
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Run with the user's umask 022, the files and directories a `bash` call and the `write` tool
/// create in the workspace are 0644 and 0755, as the user's own; the session's own files
/// (journal, spill store, the state directories above them) are 0600 and 0700 whatever the
/// umask.
#[test]
fn tools_create_with_the_user_s_umask_and_the_journal_is_private() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let ws = d.join("ws");
    std::fs::create_dir(&ws).expect("the workspace");
    let script = transcript(
        d,
        "umask.jsonl",
        &[
            (
                "c1",
                "bash",
                json!({"command": "mkdir made && echo x > made/by-bash.txt"}),
            ),
            (
                "c2",
                "write",
                json!({"path": "written/by-write.txt", "content": "y\n"}),
            ),
            ("c3", "bash", json!({"command": "seq 1 40000"})),
        ],
    );
    let state = d.join("state");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 022 && exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["run", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(&ws)
        .env("XDG_STATE_HOME", &state)
        .output()
        .expect("tooljournal runs");
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(mode_of(&ws.join("made")), 0o755);
    assert_eq!(mode_of(&ws.join("made/by-bash.txt")), 0o644);
    assert_eq!(mode_of(&ws.join("written")), 0o755);
    assert_eq!(mode_of(&ws.join("written/by-write.txt")), 0o644);
    let sessions = state.join("tooljournal/sessions");
    for private in [state.join("tooljournal"), sessions.clone()] {
        assert_eq!(mode_of(&private), 0o700, "{}", private.display());
    }
    let journals: Vec<_> = std::fs::read_dir(&sessions)
        .expect("the sessions")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(journals.len(), 1, "{journals:?}");
    let spill = journals[0].join("spill");
    assert!(spill.is_dir(), "a result was spilled");
    // The journal's own files are 0600, its directories 0700, the spill store's included
    // (sled makes its files and directories with the umask, inside it).
    let mut seen = 0;
    for path in files_under(&journals[0]) {
        if !path.starts_with(&spill) {
            assert_eq!(mode_of(&path), 0o600, "{}", path.display());
            seen += 1;
        }
        let mut p = path.clone();
        while p.pop() && p.starts_with(&journals[0]) {
            if p == spill || !p.starts_with(&spill) {
                assert_eq!(mode_of(&p), 0o700, "{}", p.display());
            }
        }
    }
    assert!(seen >= 2, "the journal's segment and lock were looked at");
}

/// `tooljournal fuzz --workspace-template DIR`, with a symlinked directory in the template
/// that leads out to a 3 GiB file the transcript names: nothing outside is read (the world
/// says the path is reached through a symlink), and the run's memory stays small.
#[test]
fn the_fuzz_template_and_world_stay_inside_the_workspace() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let outside = d.join("outside");
    std::fs::create_dir(&outside).expect("outside");
    // Sparse: 3 GiB that take no disk, and would take 3 GiB of memory to read whole.
    std::fs::File::create(outside.join("big.bin"))
        .and_then(|f| f.set_len(3 << 30))
        .expect("a big file");
    std::fs::write(outside.join("secret.txt"), "OUTSIDE\n").expect("a file outside");
    let template = d.join("template");
    std::fs::create_dir(&template).expect("the template");
    std::fs::write(template.join("notes.txt"), "TODO\n").expect("a file");
    std::os::unix::fs::symlink(&outside, template.join("out")).expect("a link out");
    let script = transcript(
        d,
        "fuzz.jsonl",
        &[
            (
                "w1",
                "write",
                json!({"path": "out/big.bin", "content": "x"}),
            ),
            (
                "e1",
                "edit",
                json!({"path": "out/secret.txt", "old_string": "OUTSIDE", "new_string": "CHANGED"}),
            ),
            (
                "w2",
                "write",
                json!({"path": "notes.txt", "content": "DONE\n"}),
            ),
        ],
    );
    let out = Command::new(common::fuzz_bin::tooljournal())
        .args(["fuzz", "--script"])
        .arg(&script)
        .arg("--workspace-template")
        .arg(&template)
        .args(["--seed", "7", "--cases", "3"])
        .env("XDG_CONFIG_HOME", d.join("no-config"))
        .output()
        .expect("tooljournal fuzz runs");
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    // ru_maxrss is in KiB: the largest child this test binary waited for.
    assert!(
        usage.max_rss() < 256 * 1024,
        "a child of these tests took {} KiB",
        usage.max_rss()
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).expect("outside"),
        "OUTSIDE\n"
    );
    assert_eq!(
        std::fs::metadata(outside.join("big.bin"))
            .expect("big")
            .len(),
        3 << 30
    );
}

/// The characters the transcript `tests/data/audit/bidi.jsonl` hides in its prompt, text,
/// call id, file name, file content and command output.
const HIDDEN: [char; 4] = ['\u{202E}', '\u{202C}', '\u{2066}', '\u{200B}'];

fn assert_shown_not_hidden(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|c| HIDDEN.contains(c)) {
        panic!("{what} shows U+{:04X} as itself:\n{text}", c as u32);
    }
    assert!(
        text.contains("\\u{202E}"),
        "{what} shows the override's escape:\n{text}"
    );
}

/// Bidi controls and invisible characters in a prompt, a call id, a file name, a result: every
/// terminal display (`run`'s table, `recover audit`, `recover classify`) shows them as
/// escapes, and the journal keeps them as they are.
#[test]
fn hidden_characters_are_shown_as_escapes_and_journaled_as_they_are() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let journal = scripted_journal(dir.path(), "audit/bidi.jsonl");
    let events = serde_json::to_string(&events(&journal)).expect("events as JSON");
    assert!(
        events.contains("report\u{202E}txt.exe") && events.contains("c\u{202E}1"),
        "the journal keeps the bytes"
    );
    let ws = dir.path().join("ws");
    assert!(
        ws.join("report\u{202E}txt.exe").is_file(),
        "the file has its name"
    );
    let run = Command::new(env!("CARGO_BIN_EXE_tooljournal"))
        .args(["run", "--script"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/audit/bidi.jsonl"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .arg("--journal")
        .arg(dir.path().join("again"))
        .output()
        .expect("tooljournal runs");
    assert!(run.status.success(), "{}", shown(&run));
    assert_shown_not_hidden("run", &text(&run.stdout));
    for command in ["audit", "classify"] {
        let out = Command::new(common::recover_bin::recover_bin())
            .arg(command)
            .arg(&journal)
            .output()
            .expect("recover runs");
        assert!(out.status.success(), "{}", shown(&out));
        assert_shown_not_hidden(command, &text(&out.stdout));
    }
    // Data is not a display: the JSON keeps the characters (as JSON has them).
    let json = Command::new(common::recover_bin::recover_bin())
        .args(["audit", "--json"])
        .arg(&journal)
        .output()
        .expect("recover runs");
    let json = text(&json.stdout);
    assert!(
        json.contains('\u{202E}') && !json.contains("\\u{202E}"),
        "{json}"
    );
}
