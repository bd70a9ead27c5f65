//! The reader's answers as plain values: `classify`, `rebuild` and `audit` of a journal, as
//! `recover` gives them with `--json`. Reading only: a library reading never changes the
//! journal (the `recover` binary balances it by default; `balance` asks for that here).

use crate::error::{EmbedError, ErrorKind};
use history::providers::Format;
use journal::Location;
use recover::{Analysis, Recovery};
use serde_json::Value;

/// Reads the journal at `location` whole; with `balance`, a crashed one is balanced as
/// `recover classify` balances it (its torn tail cut, one `recovery` event appended).
fn analyze(location: &Location, balance: bool) -> Result<Analysis, EmbedError> {
    let place = session::place(location)?;
    Ok(Recovery::of(place).write(balance).run()?.analysis)
}

/// `recover classify --json` of the journal at `location`: every call with its state and,
/// for an unfinished one, `TOOL_NOT_STARTED` or `TOOL_OUTCOME_UNKNOWN`.
pub fn classify(location: &str, balance: bool) -> Result<Value, EmbedError> {
    let location = Location::parse(location)?;
    let analysis = analyze(&location, balance)?;
    Ok(recover::classify_json(&location.to_string(), &analysis))
}

/// `recover audit --json` of the journal at `location`.
pub fn audit(location: &str, balance: bool) -> Result<Value, EmbedError> {
    let location = Location::parse(location)?;
    let analysis = analyze(&location, balance)?;
    Ok(recover::audit_json(&location.to_string(), &analysis))
}

/// `recover rebuild --format format` of the journal at `location`: a complete request body,
/// every unfinished call answered with the truth about it.
pub fn rebuild(location: &str, format: &str, balance: bool) -> Result<Value, EmbedError> {
    rebuild_at(&Location::parse(location)?, format, balance)
}

/// [`rebuild`] of a location already parsed (a live journal's own `history`).
pub(crate) fn rebuild_at(
    location: &Location,
    format: &str,
    balance: bool,
) -> Result<Value, EmbedError> {
    let format = parse_format(format)?;
    body(&analyze(location, balance)?, format)
}

fn parse_format(format: &str) -> Result<Format, EmbedError> {
    format.parse().map_err(|_| {
        EmbedError::usage(format!(
            "format `{format}`: not one of openai-chat, openai-responses, anthropic, gemini"
        ))
    })
}

fn body(analysis: &Analysis, format: Format) -> Result<Value, EmbedError> {
    let rebuilt = recover::rebuild_body(analysis, format)
        .map_err(|e| EmbedError::new(ErrorKind::Failed, e.to_string()))?;
    Ok(rebuilt.body.value())
}
