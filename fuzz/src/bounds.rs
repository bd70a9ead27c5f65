//! I29 in the simulated world: every file a call's body wrote lies inside the sandbox bound its
//! last `started` journaled, and a probe that says a call "could not have written" a changed
//! file is right by the world's history (no write of that file by that call).
//!
//! The bounds are read from the journal (not the tool's own record): what recovery states is
//! what the journal says, and the journal is held to the tool's record by I20's own check.

use crate::world::{World, Writer};
use crate::Coverage;
use journal::SimStorage;
use recover::{Analysis, Probe};
use runtime::event::{Event, Evidence, SandboxBound};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::Path;

/// The bound among a `started`'s evidence, if any.
pub(crate) fn of_evidence(evidence: &[Evidence]) -> Option<&SandboxBound> {
    evidence.iter().find_map(|e| match e {
        Evidence::Sandbox(bound) => Some(bound),
        Evidence::FileReplace { .. } => None,
    })
}

/// The bound each call's last `started` journaled, by call id, read from the journal the first
/// time one is asked for (most cases never ask: only a `TOOL_OUTCOME_UNKNOWN` text needs it).
pub(crate) struct Journaled<'a> {
    image: &'a SimStorage,
    bounds: OnceCell<HashMap<String, SandboxBound>>,
}

impl<'a> Journaled<'a> {
    pub(crate) fn new(image: &'a SimStorage) -> Journaled<'a> {
        Journaled {
            image,
            bounds: OnceCell::new(),
        }
    }

    /// The bound `call_id`'s last `started` journaled; `None`: it journaled none (or did not
    /// start).
    pub(crate) fn bound(&self, call_id: &str) -> Option<&SandboxBound> {
        self.bounds
            .get_or_init(|| bounds_of(&crate::read::events(self.image).unwrap_or_default()))
            .get(call_id)
    }

    /// Takes the bounds from `events`, the image's events already decoded (unless they were
    /// read already).
    pub(crate) fn seed(&self, events: Option<&[Event]>) {
        self.bounds
            .get_or_init(|| bounds_of(events.unwrap_or_default()));
    }
}

/// The bound each call's last `started` among `events` journaled, by call id.
fn bounds_of(events: &[Event]) -> HashMap<String, SandboxBound> {
    let mut bounds = HashMap::new();
    for e in events {
        if let Event::Started(s) = e {
            // A later `started` (a re-run) replaces an earlier one, with or without.
            match of_evidence(&s.evidence) {
                Some(b) => bounds.insert(s.call.call_id.clone(), b.clone()),
                None => bounds.remove(&s.call.call_id),
            };
        }
    }
    bounds
}

/// Every write `world` saw by a call lies inside the bound that call's last `started`
/// journaled in `a`, beneath the workspace its session/open names. `during` says which
/// session's world it is, for the message.
pub(crate) fn writes_within(
    world: &World,
    a: &Analysis,
    during: &str,
    coverage: &mut Coverage,
    v: &mut Vec<String>,
) {
    let Some(open) = &a.replay.open else { return };
    let workspace = Path::new(&open.workspace);
    let bounds: HashMap<&str, Option<&SandboxBound>> = a
        .replay
        .calls()
        .map(|c| (c.call.call_id.as_str(), of_evidence(&c.evidence)))
        .collect();
    for w in world.log() {
        let Writer::Call(id) = &w.by else { continue };
        coverage.bounded_writes += 1;
        let at = workspace.join(&w.path);
        match bounds.get(id.as_str()).copied().flatten() {
            Some(bound) if bound.could_write(&at) => {}
            Some(bound) => v.push(format!(
                "I29 sandbox bound: {during}, the body of {id} wrote {}, outside the bound its \
                 last started journaled ({})",
                at.display(),
                bound.in_words()
            )),
            None => v.push(format!(
                "I29 sandbox bound: {during}, the body of {id} wrote {}, but its call journaled \
                 no bound",
                at.display()
            )),
        }
    }
}

/// No call a probe ruled out as a writer of a file it found changed wrote that file, by the
/// world's history. `probes`: each probed call's id and its probe among its peers.
pub(crate) fn ruled_out_truly<'p>(
    world: &World,
    probes: impl Iterator<Item = (&'p str, &'p Probe)>,
    coverage: &mut Coverage,
    v: &mut Vec<String>,
) {
    for (id, probe) in probes {
        for (path, calls) in &probe.ruled_out {
            for call in calls {
                coverage.ruled_out += 1;
                let wrote = world
                    .log()
                    .iter()
                    .any(|w| &w.path == path && w.by == Writer::Call(call.call_id.clone()));
                if wrote {
                    v.push(format!(
                        "I29 sandbox bound: the probe of {id} says {} could not have written \
                         {path}, but its body did",
                        call.call_id
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use recover::Verdict;
    use runtime::event::CallRef;
    use std::sync::Arc;

    fn call(id: &str) -> CallRef {
        CallRef {
            turn: 1,
            step: 1,
            call_id: id.into(),
        }
    }

    fn changed(ruled_out: Vec<(String, Vec<CallRef>)>) -> Probe {
        Probe {
            verdict: Verdict::Changed,
            path: Some("a".into()),
            expected_sha256: None,
            before_sha256: None,
            found_sha256: None,
            pgid: None,
            detail: "a changed".into(),
            ruled_out,
        }
    }

    #[test]
    fn a_call_ruled_out_as_a_writer_of_a_file_it_wrote_is_named() {
        let mut world = World::new(&["a"]);
        world.write("a", Writer::Call("c1".into()), Some("x".into()));
        let (mut coverage, mut v) = (Coverage::default(), Vec::new());
        let wrong = changed(vec![("a".into(), vec![call("c2"), call("c1")])]);
        let right = changed(vec![("a".into(), vec![call("c2")])]);
        let probes = [("w1", &wrong), ("w2", &right)];
        ruled_out_truly(&world, probes.into_iter(), &mut coverage, &mut v);
        assert_eq!(
            v,
            ["I29 sandbox bound: the probe of w1 says c1 could not have written a, but its body \
              did"]
        );
        assert_eq!(coverage.ruled_out, 3);
    }

    #[test]
    fn a_write_outside_the_bound_its_call_journaled_is_named() {
        // The first seed whose session has a call that wrote a file.
        let (run, id) = (0u64..200)
            .find_map(|seed| {
                let case = crate::tree_for_seed(seed).current();
                let run = crate::sim::run(&case, None);
                let id = run.world.log().iter().find_map(|w| match &w.by {
                    Writer::Call(id) => Some(id.clone()),
                    Writer::Case => None,
                })?;
                Some((run, id))
            })
            .unwrap();
        let image = journal::Backend::Files(Arc::new(crate::read::copy_of(&run.image)));
        let a = recover::Recovery::of(image).run().unwrap().analysis;
        let (mut coverage, mut v) = (Coverage::default(), Vec::new());
        writes_within(&run.world, &a, "here", &mut coverage, &mut v);
        assert_eq!(v, Vec::<String>::new());
        assert!(coverage.bounded_writes > 0);
        let bound = Journaled::new(&run.image).bound(&id).cloned().unwrap();
        assert_eq!(bound.mechanism, "simulated by the fuzz harness");

        let mut world = run.world.clone();
        world.write("beyond", Writer::Call(id.clone()), Some("x".into()));
        world.write("a", Writer::Call("ghost".into()), Some("x".into()));
        writes_within(&world, &a, "here", &mut coverage, &mut v);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].starts_with(&format!(
            "I29 sandbox bound: here, the body of {id} wrote /sim/beyond, outside the bound"
        )));
        assert_eq!(
            v[1],
            "I29 sandbox bound: here, the body of ghost wrote /sim/a, but its call journaled no \
             bound"
        );
    }
}
