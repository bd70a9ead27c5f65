//! A PostgreSQL session's lease: waited for, or taken (`--steal`). A directory has no lease:
//! its writer is a live process on this machine, never taken over.

use crate::{Hooks, ResumeError};
use journal::{Location, WriterState};

/// How often a resume looks at a live lease it waits for.
const LEASE_POLL_MS_MAX: u64 = 200;

/// With `steal`, takes the session from a live holder now (fenced off, the steal journaled as
/// `writer/stolen`); without, waits up to `wait_ms` for a live lease to expire (a crashed
/// worker's lease ends on its own; a live worker's does not).
pub(crate) fn take_or_wait(
    location: &Location,
    steal: bool,
    wait_ms: u64,
    hooks: &mut dyn Hooks,
) -> Result<(), ResumeError> {
    if location.url().is_none() {
        if steal {
            return Err(ResumeError::Refused(format!(
                "{location}: --steal takes a PostgreSQL session's lease; a journal directory's \
                 writer is a live process on this machine, and is never taken over"
            )));
        }
        return Ok(());
    }
    let backend = pg::open(location)?;
    if steal {
        let clock = runtime::SystemClock;
        if let Some(holder) = runtime::steal(&backend, &clock)? {
            hooks.note(&format!(
                "{location}: took the session from {} (epoch {}, {} ms of its lease left); \
                 its appends from now on are refused",
                holder.name, holder.epoch, holder.expires_in_ms
            ));
        }
        return Ok(());
    }
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        let WriterState::Leased(holder) = backend.writer_state()? else {
            return Ok(());
        };
        if !holder.live() {
            return Ok(());
        }
        let waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if waited_ms >= wait_ms {
            return Err(lease_is_live(location));
        }
        if !said {
            hooks.note(&format!(
                "{location}: held by {} (lease expires in {} ms unless renewed); waiting up to \
                 {wait_ms} ms",
                holder.name, holder.expires_in_ms
            ));
            said = true;
        }
        let left_ms = u64::try_from(holder.expires_in_ms).unwrap_or(0);
        let nap_ms = left_ms.clamp(1, LEASE_POLL_MS_MAX).min(wait_ms - waited_ms);
        std::thread::sleep(std::time::Duration::from_millis(nap_ms));
    }
}

/// The one refusal for "another worker holds this PostgreSQL session".
pub(crate) fn lease_is_live(location: &Location) -> ResumeError {
    let holder = pg::open(location).ok().and_then(|b| b.writer_state().ok());
    let who = match holder {
        Some(WriterState::Leased(h)) => format!(
            "{} (epoch {}, lease expires in {} ms unless renewed)",
            h.name, h.epoch, h.expires_in_ms
        ),
        _ => "another worker".to_owned(),
    };
    ResumeError::Locked(format!(
        "{location}: session is live: held by {who}; wait for its lease to expire, or take it \
         with `tooljournal resume --steal`"
    ))
}
