//! `recover`: what happened, after any crash, told truthfully.
pub mod classify;
pub mod conversation;
pub mod listing;
pub mod mutant;
pub mod providers;
pub mod report;
pub mod session;
pub mod stream;
pub mod verify;
