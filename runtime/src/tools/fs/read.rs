//! `read`.

use super::{
    aborted, blocking, failed, io_failed, open_read, optional_count, path_resources, required_str,
    schema, shown, Access, CHUNK_BYTES, READ_BYTES_MAX,
};
use crate::args::Args;
use crate::event::Resources;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::workspace::Workspace;
use rustix::fs::FileType;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// `read {path, offset?, limit?}`: a text file's content (lines `offset..offset+limit`, from 1).
pub struct ReadTool {
    ws: Arc<Workspace>,
}

impl ReadTool {
    /// The `read` tool, confined to `ws`; it records each file's version for `edit`'s stale check.
    pub fn new(ws: Arc<Workspace>) -> ReadTool {
        ReadTool { ws }
    }
}

/// What reading a file produced.
struct ReadText {
    text: String,
    lines: u64,
    sha256: String,
}

/// Streams `path` once, opened through the workspace's handle: hashes all of it, counts its
/// lines, keeps the selected ones.
fn read_text(
    ws: &Workspace,
    path: &Path,
    rel: &str,
    offset: u64,
    limit: Option<u64>,
    cancel: &CancellationToken,
) -> Result<ReadText, ToolError> {
    use sha2::Digest;
    let opened = open_read(ws, path, "read", rel)?;
    match opened.kind {
        FileType::RegularFile => {}
        FileType::Directory => {
            return Err(failed(format!("{rel} is a directory; use ls to list it")))
        }
        // A FIFO or a device would block or never end.
        _ => return Err(failed(format!("{rel} is not a regular file"))),
    }
    let file = opened.file;
    let mut reader = BufReader::with_capacity(CHUNK_BYTES, file);
    let mut hasher = sha2::Sha256::new();
    let in_range = |line: u64| line >= offset && limit.is_none_or(|l| line - offset < l);
    let mut out: Vec<u8> = Vec::new();
    // The line the next byte belongs to, and whether it has begun.
    let mut line: u64 = 1;
    let mut line_begun = false;
    loop {
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        let buf = reader.fill_buf().map_err(|e| io_failed("read", rel, e))?;
        if buf.is_empty() {
            break;
        }
        if buf.contains(&0) {
            return Err(failed(format!("{rel} is a binary file")));
        }
        hasher.update(buf);
        let mut rest = buf;
        while !rest.is_empty() {
            let (piece, ends_line) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..=i], true),
                None => (rest, false),
            };
            if in_range(line) {
                out.extend_from_slice(piece);
            }
            rest = &rest[piece.len()..];
            if ends_line {
                line += 1;
                line_begun = false;
            } else {
                line_begun = true;
            }
        }
        if out.len() > READ_BYTES_MAX {
            return Err(failed(format!(
                "the selection is larger than {READ_BYTES_MAX} bytes; \
                 read a smaller range with offset and limit"
            )));
        }
        let n = buf.len();
        reader.consume(n);
    }
    let lines = line - 1 + u64::from(line_begun);
    if offset > lines.max(1) {
        return Err(failed(format!(
            "offset {offset} is past the end of {rel} ({lines} lines)"
        )));
    }
    let text = String::from_utf8(out)
        .map_err(|_| failed(format!("{rel} is a binary file (not UTF-8 text)")))?;
    Ok(ReadText {
        text,
        lines,
        sha256: hex::encode(hasher.finalize()),
    })
}

impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Read a UTF-8 text file in the workspace. `path` is relative to the workspace; `offset` \
         (first line, from 1) and `limit` (number of lines) select a range. Records the version \
         read, which `edit` requires."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace"},
                "offset": {"type": "integer", "minimum": 1, "description": "first line to return, from 1"},
                "limit": {"type": "integer", "minimum": 1, "description": "most lines to return"},
            }),
            &["path"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "path": {"type": "string"},
                "lines": {"type": "integer", "minimum": 0},
                "sha256": {"type": "string"},
            }),
            &["path", "lines", "sha256"],
        ))
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        true
    }
    fn is_retry_safe(&self) -> bool {
        true
    }
    fn resources(&self, args: &Args) -> Resources {
        path_resources(&self.ws, args.str("path"), Access::Read)
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let path = required_str(&args, "path")?;
            let offset = optional_count(&args, "offset")?.unwrap_or(1);
            let limit = optional_count(&args, "limit")?;
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || {
                let rel = shown(&ws, &absolute);
                let read = read_text(&ws, &absolute, &rel, offset, limit, &cancel)?;
                ws.record_read(&absolute, read.sha256.clone());
                Ok(ToolOutput::text(read.text).with_value(json!({
                    "path": rel,
                    "lines": read.lines,
                    "sha256": read.sha256,
                })))
            })
            .await
        })
    }
}
