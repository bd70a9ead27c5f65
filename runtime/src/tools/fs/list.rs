//! `ls`, `glob` and `grep`: listings and walks through directory handles (`walk.rs`).

use super::walk::{read_entries, walk, Kind};
use super::{
    aborted, blocking, failed, io_failed, open_read, optional_str, path_resources, required_str,
    schema, shown, Access, Opened, GLOB_RESULTS_MAX, GREP_FILE_BYTES_MAX, GREP_LINE_BYTES_MAX,
    GREP_MATCHES_MAX, GREP_OUTPUT_BYTES_MAX, GREP_REGEX_BYTES_MAX, LS_ENTRIES_MAX, READ_FLAGS,
};
use crate::args::Args;
use crate::event::Resources;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::workspace::Workspace;
use rustix::fd::AsFd;
use rustix::fs::{FileType, Mode, OFlags};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// ls

/// `ls {path?}`: a directory's entries, sorted, directories with a trailing `/`.
pub struct LsTool {
    ws: Arc<Workspace>,
}

impl LsTool {
    /// The `ls` tool, confined to `ws`.
    pub fn new(ws: Arc<Workspace>) -> LsTool {
        LsTool { ws }
    }
}

fn ls_blocking(
    ws: &Workspace,
    dir: &Path,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, dir);
    let opened = open_read(ws, dir, "list", &rel)?;
    if opened.kind != FileType::Directory {
        return Err(failed(format!("{rel} is not a directory")));
    }
    let mut entries = Vec::new();
    let listed = read_entries(opened.file.as_fd()).map_err(|e| io_failed("list", &rel, e))?;
    for (name, kind) in listed {
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        if ws.is_forbidden(&dir.join(&name)) {
            continue;
        }
        let name = name.to_string_lossy().into_owned();
        // Symlinks are not followed: a link to a directory is listed as a plain name.
        entries.push(if kind == Kind::Dir {
            format!("{name}/")
        } else {
            name
        });
    }
    entries.sort();
    let total = entries.len();
    entries.truncate(LS_ENTRIES_MAX);
    let mut content = if entries.is_empty() {
        "(empty directory)".to_owned()
    } else {
        entries.join("\n")
    };
    if total > entries.len() {
        content.push_str(&format!(
            "\n[... {} more entries not shown]",
            total - entries.len()
        ));
    }
    Ok(ToolOutput::text(content).with_value(json!({
        "path": rel,
        "entries": entries,
        "total": total,
    })))
}

impl Tool for LsTool {
    fn name(&self) -> &str {
        "ls"
    }
    fn description(&self) -> &str {
        "List a directory of the workspace (default: its root), sorted; directories end with `/`."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace (default \".\")"},
            }),
            &[],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "path": {"type": "string"},
                "entries": {"type": "array", "items": {"type": "string"}},
                "total": {"type": "integer", "minimum": 0},
            }),
            &["path", "entries", "total"],
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
        path_resources(
            &self.ws,
            Some(args.str("path").unwrap_or(".")),
            Access::Read,
        )
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let path = optional_str(&args, "path")?.unwrap_or_else(|| ".".into());
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || ls_blocking(&ws, &absolute, &cancel)).await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// glob

/// `glob {pattern, path?}`: the files below `path` whose path relative to it matches.
pub struct GlobTool {
    ws: Arc<Workspace>,
}

impl GlobTool {
    /// The `glob` tool, confined to `ws`.
    pub fn new(ws: Arc<Workspace>) -> GlobTool {
        GlobTool { ws }
    }
}

fn glob_blocking(
    ws: &Arc<Workspace>,
    base: &Path,
    pattern: &str,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, base);
    if open_read(ws, base, "search", &rel)?.kind != FileType::Directory {
        return Err(failed(format!("{rel} is not a directory")));
    }
    let base_rel = ws.relative(base);
    let matcher = globset::GlobBuilder::new(pattern.strip_prefix("./").unwrap_or(pattern))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| failed(format!("invalid glob pattern: {e}")))?
        .compile_matcher();
    // The smallest GLOB_RESULTS_MAX paths seen so far (a max-heap: its top is dropped first).
    let mut kept: BinaryHeap<String> = BinaryHeap::new();
    let mut total: u64 = 0;
    let unreadable = walk(ws, base, cancel, |entry| {
        if matches!(entry.kind, Kind::File | Kind::Symlink) {
            if let Ok(below) = entry.rel.strip_prefix(base_rel) {
                if matcher.is_match(below) {
                    total += 1;
                    kept.push(entry.rel.to_string_lossy().into_owned());
                    if kept.len() > GLOB_RESULTS_MAX {
                        kept.pop();
                    }
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    let files = kept.into_sorted_vec();
    let mut content = if files.is_empty() {
        format!("no files match {pattern:?}")
    } else {
        files.join("\n")
    };
    if total > files.len() as u64 {
        content.push_str(&format!(
            "\n[... {} more matches not shown (limit {GLOB_RESULTS_MAX}); narrow the pattern]",
            total - files.len() as u64
        ));
    }
    if unreadable > 0 {
        content.push_str(&format!("\n[{unreadable} entries could not be read]"));
    }
    Ok(ToolOutput::text(content).with_value(json!({
        "files": files,
        "total": total,
    })))
}

impl Tool for GlobTool {
    fn name(&self) -> &str {
        "glob"
    }
    fn description(&self) -> &str {
        "Find files by glob pattern (e.g. `**/*.rs`; `*` does not cross `/`), matched against \
         paths relative to `path` (default: the workspace root). Honours .gitignore; sorted; at \
         most 1000 results."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "pattern": {"type": "string", "minLength": 1, "description": "glob, relative to `path`"},
                "path": {"type": "string", "minLength": 1, "description": "directory to search, relative to the workspace (default \".\")"},
            }),
            &["pattern"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "files": {"type": "array", "items": {"type": "string"}},
                "total": {"type": "integer", "minimum": 0},
            }),
            &["files", "total"],
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
        path_resources(
            &self.ws,
            Some(args.str("path").unwrap_or(".")),
            Access::Read,
        )
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let pattern = required_str(&args, "pattern")?;
            let path = optional_str(&args, "path")?.unwrap_or_else(|| ".".into());
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || glob_blocking(&ws, &absolute, &pattern, &cancel)).await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// grep

/// `grep {pattern, path?, glob?}`: lines matching a regex, as `path:line: text`.
pub struct GrepTool {
    ws: Arc<Workspace>,
}

impl GrepTool {
    /// The `grep` tool, confined to `ws`.
    pub fn new(ws: Arc<Workspace>) -> GrepTool {
        GrepTool { ws }
    }
}

/// `line` cut to at most `max` bytes (on a character boundary), marked when cut.
fn cut(line: &str, max: usize) -> Cow<'_, str> {
    if line.len() <= max {
        return Cow::Borrowed(line);
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &line[..end]))
}

#[derive(Default)]
struct GrepState {
    out: String,
    matches: usize,
    files: usize,
    truncated: bool,
    skipped_large: u64,
    unreadable: u64,
}

impl GrepState {
    /// Searches one file; `Break` once the output is full.
    /// Searches the file opened as `rel` (its type and size checked on the handle).
    fn search(
        &mut self,
        opened: Result<Opened, ToolError>,
        rel: &str,
        re: &regex::Regex,
    ) -> ControlFlow<()> {
        let file: File = match opened {
            Ok(o) if o.kind != FileType::RegularFile => return ControlFlow::Continue(()),
            Ok(o) if o.stat.st_size as u64 > GREP_FILE_BYTES_MAX => {
                self.skipped_large += 1;
                return ControlFlow::Continue(());
            }
            Ok(o) => o.file,
            Err(_) => {
                self.unreadable += 1;
                return ControlFlow::Continue(());
            }
        };
        let mut bytes = Vec::new();
        let read = file.take(GREP_FILE_BYTES_MAX).read_to_end(&mut bytes);
        if read.is_err() {
            self.unreadable += 1;
            return ControlFlow::Continue(());
        }
        if bytes.contains(&0) {
            // Binary: skipped, as ripgrep does.
            return ControlFlow::Continue(());
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut matched_here = false;
        for (i, line) in text.lines().enumerate() {
            if !re.is_match(line) {
                continue;
            }
            let entry = format!("{rel}:{}: {}\n", i + 1, cut(line, GREP_LINE_BYTES_MAX));
            if self.matches >= GREP_MATCHES_MAX
                || self.out.len() + entry.len() > GREP_OUTPUT_BYTES_MAX
            {
                self.truncated = true;
                if matched_here {
                    self.files += 1;
                }
                return ControlFlow::Break(());
            }
            self.out.push_str(&entry);
            self.matches += 1;
            matched_here = true;
        }
        if matched_here {
            self.files += 1;
        }
        ControlFlow::Continue(())
    }
}

fn grep_blocking(
    ws: &Arc<Workspace>,
    base: &Path,
    pattern: &str,
    glob: Option<&str>,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let rel = shown(ws, base);
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(GREP_REGEX_BYTES_MAX)
        .build()
        .map_err(|e| failed(format!("invalid regex: {e}")))?;
    // A glob without `/` matches file names anywhere (as ripgrep's --glob); with one, the path
    // relative to `path`.
    let filter = match glob {
        None => None,
        Some(g) => {
            let g = g.strip_prefix("./").unwrap_or(g);
            let matcher = globset::GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| failed(format!("invalid glob: {e}")))?
                .compile_matcher();
            Some((matcher, g.contains('/')))
        }
    };
    let opened = open_read(ws, base, "search", &rel)?;
    let mut state = GrepState::default();
    if opened.kind != FileType::Directory {
        // Asked for by name: searched even if ignored.
        let _ = state.search(Ok(opened), &rel, &re);
    } else {
        drop(opened);
        let base_rel = ws.relative(base);
        let unreadable = walk(ws, base, cancel, |entry| {
            if entry.kind != Kind::File {
                // Directories are walked into; symlinks are never followed.
                return ControlFlow::Continue(());
            }
            if let Some((matcher, whole_path)) = &filter {
                let subject = if *whole_path {
                    entry.rel.strip_prefix(base_rel).unwrap_or(entry.rel)
                } else {
                    Path::new(entry.name)
                };
                if !matcher.is_match(subject) {
                    return ControlFlow::Continue(());
                }
            }
            let rel = entry.rel.to_string_lossy();
            let fd = rustix::fs::openat(
                entry.dir,
                entry.name,
                READ_FLAGS | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            );
            state.search(
                super::opened(fd.map_err(Into::into), "search", &rel),
                &rel,
                &re,
            )
        })?;
        state.unreadable += unreadable;
    }
    let mut content = if state.matches == 0 {
        format!("no matches for /{pattern}/")
    } else {
        state.out.trim_end_matches('\n').to_owned()
    };
    if state.truncated {
        content.push_str(&format!(
            "\n[truncated: output limit reached after {} matching lines (at most \
             {GREP_MATCHES_MAX} lines and {GREP_OUTPUT_BYTES_MAX} bytes); narrow the pattern, \
             path or glob]",
            state.matches
        ));
    }
    if state.skipped_large > 0 {
        content.push_str(&format!(
            "\n[skipped {} files larger than {GREP_FILE_BYTES_MAX} bytes]",
            state.skipped_large
        ));
    }
    if state.unreadable > 0 {
        content.push_str(&format!(
            "\n[{} entries could not be read]",
            state.unreadable
        ));
    }
    Ok(ToolOutput::text(content).with_value(json!({
        "matches": state.matches,
        "files": state.files,
        "truncated": state.truncated,
    })))
}

impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }
    fn description(&self) -> &str {
        "Search file contents with a regular expression (Rust regex syntax) below `path` \
         (default: the workspace root; a file searches just it), optionally only files matching \
         `glob` (a glob without `/` matches file names). Honours .gitignore, skips binary files. \
         Output: `path:line: text` lines, truncated past 10000 lines or 1 MiB."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "pattern": {"type": "string", "minLength": 1, "description": "regular expression"},
                "path": {"type": "string", "minLength": 1, "description": "file or directory, relative to the workspace (default \".\")"},
                "glob": {"type": "string", "minLength": 1, "description": "only search files matching this glob"},
            }),
            &["pattern"],
        )
    }
    fn output_schema(&self) -> Option<Value> {
        Some(schema(
            json!({
                "matches": {"type": "integer", "minimum": 0},
                "files": {"type": "integer", "minimum": 0},
                "truncated": {"type": "boolean"},
            }),
            &["matches", "files", "truncated"],
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
        path_resources(
            &self.ws,
            Some(args.str("path").unwrap_or(".")),
            Access::Read,
        )
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel().clone();
        Box::pin(async move {
            let pattern = required_str(&args, "pattern")?;
            let path = optional_str(&args, "path")?.unwrap_or_else(|| ".".into());
            let glob = optional_str(&args, "glob")?;
            let absolute = ws.resolve(&path)?;
            if cancel.is_cancelled() {
                return Err(aborted());
            }
            blocking(move || grep_blocking(&ws, &absolute, &pattern, glob.as_deref(), &cancel))
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("aé", 2), "a…");
    }
}
