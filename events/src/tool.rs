//! What a tool declares about itself that a reader of the journal needs: whether a call of it
//! may run again after a crash (`recover::choose` asks; the runtime's registry answers).

/// What a resume's tools declare about themselves, as far as running a call again goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolNature {
    /// The tool changes nothing (plan mode lets only these run).
    pub read_only: bool,
    /// Running the tool twice has the effect of once (idempotent).
    pub retry_safe: bool,
}
