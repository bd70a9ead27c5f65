//! Transcripts: sessions played from a JSON-lines script instead of a live model.
//!
//! `tooljournal run`/`resume --script` and `demo` play transcripts, and so do the tests and the
//! fuzz campaign: a transcript says what the model answers, when the user presses stop, and how
//! each `ask` is answered, so a session can be replayed exactly. It is one implementation of the
//! model seam ([`crate::model::Model`]), kept apart from it so that an embedding with a real
//! model sees only the seam.
//!
//! - [`script`]: the format, read line by line ([`read_script`], [`parse_script`]), and
//!   [`ScriptedModel`], which plays it; [`consumed_lines`] finds where a resume picks it up.
//! - [`play`]: the session loop ([`drive`]) and the approver that answers from the script
//!   ([`ScriptedApprover`]).

pub(crate) mod play;
pub(crate) mod script;
mod seam;

pub use play::{drive, DriveReport, ScriptedApprover, NO_SCRIPTED_ANSWER};
pub use script::{consumed_lines, parse_script, read_script, ModelStep, ScriptLine, ScriptedModel};
