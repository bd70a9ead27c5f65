//! The loopback provider server's integration tests: one test binary (one link, not eight), each former test
//! file a module of its own.

mod common;

mod anthropic;
mod bin;
mod checks;
mod faults;
mod gemini;
mod openai_chat;
mod openai_responses;
mod overflow;
