//! For all prefixes and damage of a session file: the reader never panics, a call whose output
//! line is in the file whole is never reported as not started or unknown, and a repair leaves
//! no call the agent replays without an output.

use crate::common;

use proptest::prelude::*;
use tooljournal_import::{check_repair, read, repair, Agent, Verdict};

fn all_fixtures() -> Vec<(Agent, Vec<u8>)> {
    let mut out = Vec::new();
    for agent in common::AGENTS {
        for (_, bytes) in common::fixture_bytes(agent) {
            out.push((agent, bytes));
        }
    }
    out
}

/// (call id, end of its output line without the newline) for every call the whole file gives
/// a result.
fn outputs(agent: Agent, bytes: &[u8]) -> Vec<(String, usize)> {
    let s = read(agent, bytes).unwrap();
    s.calls
        .iter()
        .filter_map(|c| match &c.verdict {
            Verdict::Result { at, .. } => {
                let start = at.offset as usize;
                let end = bytes[start..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(bytes.len(), |n| start + n);
                Some((c.id.clone(), end))
            }
            _ => None,
        })
        .collect()
}

/// In `prefix`'s reading, every call whose output line ends within it has that result.
fn outputs_kept(agent: Agent, prefix: &[u8], whole: &[(String, usize)]) -> Result<(), String> {
    let s = read(agent, prefix).map_err(|e| e.to_string())?;
    for (id, end) in whole {
        if *end > prefix.len() {
            continue;
        }
        let call = s.calls.iter().find(|c| &c.id == id);
        if !matches!(call.map(|c| &c.verdict), Some(Verdict::Result { .. })) {
            return Err(format!(
                "cut at {}: call {id} has its output line whole (ends at {end}) but reads {:?}",
                prefix.len(),
                call.map(|c| &c.verdict)
            ));
        }
    }
    Ok(())
}

#[test]
fn every_prefix_of_every_fixture_reads_and_keeps_its_whole_outputs() {
    for (agent, bytes) in all_fixtures() {
        let whole = outputs(agent, &bytes);
        for cut in 0..=bytes.len() {
            if let Err(e) = outputs_kept(agent, &bytes[..cut], &whole) {
                panic!("{}: {e}", agent.name());
            }
            // And its repair leaves no call the agent replays without an output.
            let repaired = repair(agent, &bytes[..cut]).unwrap();
            if let Err(e) = check_repair(agent, &repaired) {
                panic!("{}: cut at {cut}: repair: {e}", agent.name());
            }
        }
    }
}

proptest! {
    /// A line replaced by arbitrary bytes (no newline among them): no panic, and the other
    /// calls' results stand.
    #[test]
    fn a_line_of_garbage_anywhere_changes_only_that_line(
        pick in any::<prop::sample::Index>(),
        line in any::<prop::sample::Index>(),
        garbage in prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..200),
    ) {
        let fixtures = all_fixtures();
        let (agent, bytes) = &fixtures[pick.index(fixtures.len())];
        let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let victim = line.index(lines.len());
        let mut damaged = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                damaged.push(b'\n');
            }
            damaged.extend_from_slice(if i == victim { &garbage } else { l });
        }
        let s = read(*agent, &damaged).unwrap();
        let whole = read(*agent, bytes).unwrap();
        for c in &whole.calls {
            let (Verdict::Result { at, .. }, true) = (&c.verdict, true) else { continue };
            let output_line = (at.line - 1) as usize;
            let call_line = (c.at.line - 1) as usize;
            if output_line == victim || call_line == victim {
                continue;
            }
            let after = s.calls.iter().find(|d| d.id == c.id);
            prop_assert!(
                matches!(after.map(|d| &d.verdict), Some(Verdict::Result { .. })),
                "line {} garbled: {} lost its result: {:?}", victim + 1, c.id, after
            );
        }
    }
}
