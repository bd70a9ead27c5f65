//! Processes a call started, as `/proc` sees them: who they are, and whether they still run.
//!
//! Why: a runtime killed by SIGKILL cannot stop the commands it started, and a command's
//! process group may go on changing the workspace after `recover` said what happened. So `bash`
//! journals its shell's identity (`call/process`) and recovery and resume look the group up
//! again. A pid alone is not an identity (pids are reused), so the identity is the pid, its
//! start time in clock ticks since boot (`/proc/PID/stat` field 22) and the boot's id.

use crate::event::ProcessStarted;

/// This boot's id (`/proc/sys/kernel/random/boot_id`), or "" where there is none.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// What `/proc/PID/stat` says of a process: `pid (comm) state ppid pgrp … starttime …`.
/// `comm` may hold spaces and parentheses, so fields are counted from its last `)`.
struct Stat {
    state: char,
    pgrp: i32,
    start_ticks: u64,
}

fn stat_of(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    // After `comm`: state is field 3, pgrp field 5, starttime field 22 (1-based, man 5 proc).
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The identity of process `pid`, leader of process group `pgid`, now.
pub fn identify(pid: u32, pgid: u32) -> Option<ProcessStarted> {
    let stat = stat_of(i32::try_from(pid).ok()?)?;
    Some(ProcessStarted {
        pid,
        pgid,
        start_ticks: stat.start_ticks,
        boot_id: boot_id(),
    })
}

/// How many processes of group `pgid` are alive (not zombies); `None` without `/proc`.
pub fn live_members(pgid: i32) -> Option<usize> {
    let mut live = 0;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        // A process may vanish between the listing and the read: it is not alive then.
        if let Some(stat) = stat_of(pid) {
            if stat.pgrp == pgid && !matches!(stat.state, 'Z' | 'X' | 'x') {
                live += 1;
            }
        }
    }
    Some(live)
}

/// Whether the process group a call started still has live members: `Some(n)` members, `None`
/// when it is gone or is not ours (another boot, or its leader's pid now names a process that
/// started at another time, so the id was reused).
pub fn still_running(process: &ProcessStarted) -> Option<usize> {
    if process.boot_id != boot_id() {
        return None;
    }
    let pgid = i32::try_from(process.pgid).ok()?;
    if let Some(leader) = stat_of(pgid) {
        // The leader's pid is alive: ours only if it started when ours did.
        if leader.start_ticks != process.start_ticks && leader.pgrp == pgid {
            return None;
        }
    }
    // No leader (it exited, its children run on), or our leader: count the group. Linux does
    // not reuse a pid as a new group's id while a group of that id has members.
    live_members(pgid).filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "42 (a (b) c) S 1 40 40 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3";
        let stat = parse_stat(line).expect("parses");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.pgrp, 40);
        assert_eq!(stat.start_ticks, 987654);
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("42 (short) Z 1 40").is_none(), "no start time");
    }

    #[test]
    fn a_group_is_running_until_it_ends_and_a_reused_id_is_not_taken_for_it() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let pid = child.id();
        let id = identify(pid, pid).expect("the child has a stat");
        assert!(!id.boot_id.is_empty());
        assert_eq!(still_running(&id), Some(1));
        let other_boot = ProcessStarted {
            boot_id: "another boot".into(),
            ..id.clone()
        };
        assert_eq!(still_running(&other_boot), None);
        let reused = ProcessStarted {
            start_ticks: id.start_ticks + 1,
            ..id.clone()
        };
        assert_eq!(still_running(&reused), None, "another start time: not ours");
        child.kill().expect("kill");
        child.wait().expect("reaped");
        assert_eq!(still_running(&id), None);
    }
}
