//! `bench sandbox`: what the sandbox costs a `bash` call. The shell `bash` starts (`/bin/bash
//! -c true`, as the tool starts it) is spawned and reaped in a loop, confined by a
//! `workspace-write` sandbox (user and network namespaces entered, the Landlock ruleset
//! applied between fork and exec) and unconfined, in alternating rounds; the ratio is the
//! sandbox's share of a call's process start. Everything else a call does (the journal, the
//! pipeline) is the same on both sides and is measured by `runtime`.

use crate::{say, BoxError, Common};
use sandbox::{Sandbox, SandboxPolicy, Spec};
use std::time::{Duration, Instant};

/// Rounds of each kind, alternated so that a slow moment of the machine hits both.
const ROUNDS: usize = 5;

pub(crate) fn run(common: &Common) -> Result<(), BoxError> {
    let scratch = tempfile::tempdir()?;
    let ws = scratch.path().join("ws");
    std::fs::create_dir(&ws)?;
    let confined = Sandbox::new(Spec::new(SandboxPolicy::WorkspaceWrite, &ws))?;
    let mut networked = Spec::new(SandboxPolicy::WorkspaceWrite, &ws);
    networked.network = true;
    // The same with the network allowed: no network namespace is made.
    let networked = Sandbox::new(networked)?;
    let unconfined = Sandbox::unconfined(false);
    let round = Duration::from_millis(if common.quick { 400 } else { 2_000 });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    say("sandbox: bash -c true, confined and not, alternating");
    let (mut sandboxed, mut unsandboxed, mut with_network) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        sandboxed.push(rt.block_on(spawns_per_s(&confined, &ws, round))?);
        unsandboxed.push(rt.block_on(spawns_per_s(&unconfined, &ws, round))?);
        with_network.push(rt.block_on(spawns_per_s(&networked, &ws, round))?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (s, u) = (median(&mut sandboxed), median(&mut unsandboxed));
    let n = median(&mut with_network);
    let ratio = s / u;
    if common.json {
        println!(
            "{}",
            serde_json::json!({
                "bash_sandboxed_calls_per_s": s,
                "bash_unsandboxed_calls_per_s": u,
                "bash_sandboxed_vs_unsandboxed": ratio,
                "bash_sandboxed_network_calls_per_s": n,
                "mechanism": confined.bound().mechanism,
            })
        );
    } else {
        println!("tooljournal bench: sandbox  [median of {ROUNDS} alternating rounds]");
        println!("  bash_sandboxed_calls_per_s      {s:>10.1}");
        println!("  bash_unsandboxed_calls_per_s    {u:>10.1}");
        println!("  bash_sandboxed_vs_unsandboxed   {ratio:>10.2}  (no target: reported)");
        println!("  bash_sandboxed_network_calls_per_s {n:>7.1}  (network allowed: no network namespace)");
        println!("  {}", confined.bound().mechanism);
    }
    Ok(())
}

/// Shells started and reaped per second for `round`.
async fn spawns_per_s(
    sandbox: &Sandbox,
    ws: &std::path::Path,
    round: Duration,
) -> Result<f64, BoxError> {
    let began = Instant::now();
    let mut done = 0u64;
    while began.elapsed() < round {
        let mut shell = tokio::process::Command::new("/bin/bash");
        shell
            .args(["-c", "true"])
            .current_dir(ws)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        sandbox.confine(&mut shell)?;
        let status = shell.status().await?;
        if !status.success() {
            return Err(format!("bash -c true ended {status}").into());
        }
        done += 1;
    }
    Ok(done as f64 / began.elapsed().as_secs_f64())
}
