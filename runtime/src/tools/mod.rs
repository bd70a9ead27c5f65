//! The built-in tools (DESIGN.md §9). Built-ins are trusted; every file tool goes through
//! [`Workspace::resolve`], and every write confirms its side effect (path, hash before and after).

pub mod ask;
pub mod fs;
pub mod todo;
pub mod workspace;

pub use workspace::{sha256_hex, Workspace};
