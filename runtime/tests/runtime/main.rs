//! The runtime's integration tests: one test binary (one link, not twenty-seven), each former
//! test file a module of its own. `confinement_race.rs` stays a binary of its own.

// tests: a failed unwrap is the test failing
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test crate exports nothing: `pub` only shares helpers between its modules.
#![allow(unreachable_pub)]

// Shared with `confinement_race.rs`, which declares it from its own crate root.
#[path = "../common/mod.rs"]
mod common;

mod agent;
mod agent_reduce;
mod ask;
mod builder;
mod cancel_at_step_start;
mod event_format;
mod evidence;
mod exposure;
mod pipeline_admission;
mod pipeline_commit;
mod pipeline_execute;
mod registry;
mod replay;
mod replay_ask;
mod replay_context;
mod replay_import;
mod replay_llm;
mod rerun;
mod scheduler_cancel;
mod scheduler_overlap;
mod scheduler_props;
mod spill;
mod tools_bash;
mod tools_confinement;
mod tools_read_write;
mod tools_search;
mod write_ahead;
