//! The trust boundary, tried as a hostile model and a hostile local user would (README
//! *Security*): a model-driven `bash` call looks for the model's key everywhere a process of the
//! same user (or root) could; provider errors that echo the key; database passwords in URLs;
//! planted links at the names `recover` writes; the user's umask; the fuzz harness's template;
//! text that renders other than it reads.

mod common;

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
for f in /proc/$rt/fd/*; do grep -q -a -F -f "$tmp/key" "$f" 2>/dev/null && echo "HIT $f"; done
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
        let call = json!({"command": "bash probe.sh", "timeout_ms": 120000}).to_string();
        case.server.push(
            format,
            Answer::calls(vec![("call_probe", "bash", &call)]).into(),
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
