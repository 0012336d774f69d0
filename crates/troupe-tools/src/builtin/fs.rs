//! `fs.read`, `fs.write`, `fs.edit` and `fs.list`.

use super::{blocking, clip_line, human_bytes};
use crate::declaration::{Access, Effect, EvidenceCapture, Idempotency};
use crate::error::ToolError;
use crate::tool::{ToolContext, ToolOutput};
use crate::typed::{TypedTool, typed_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The most `fs.read` returns in one call.
pub(crate) const READ_OUTPUT_LIMIT: usize = 256 * 1024;
/// Lines `fs.read` returns when no `limit` is given.
pub(crate) const DEFAULT_READ_LINES: u64 = 2000;
/// Characters of one line `fs.read` shows before cutting it.
const MAX_LINE_CHARS: usize = 2000;
/// Bytes inspected for a NUL byte to decide a file is binary.
const BINARY_SNIFF: usize = 8 * 1024;
/// Entries `fs.list` shows at most.
const MAX_LIST_ENTRIES: usize = 2000;

/// Arguments of `fs.read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file to read, relative to the workspace root.
    pub path: String,
    /// The first line to return, counting from 1 (default 1).
    pub offset: Option<u64>,
    /// How many lines to return at most (default 2000).
    pub limit: Option<u64>,
}

/// Arguments of `fs.write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The file to write, relative to the workspace root; missing parent directories are created.
    pub path: String,
    /// The file's complete new content.
    pub content: String,
}

/// Arguments of `fs.edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The file to edit, relative to the workspace root.
    pub path: String,
    /// The exact text to replace, including whitespace and indentation; it must occur exactly once unless `replace_all` is true.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Arguments of `fs.list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// The directory to list, relative to the workspace root (default ".").
    pub path: Option<String>,
}

/// `fs.read`: a file's lines, numbered like `cat -n`, from `offset` for `limit` lines.
pub fn fs_read() -> TypedTool {
    typed_tool(
        "fs.read",
        "Read a text file in the workspace. Returns numbered lines (line number, tab, text). \
         Use offset and limit to page through large files. An image (PNG, JPEG, GIF, WebP) or a PDF is \
         attached to the result for you to see; other binary files are refused.",
        Effect::ReadOnly,
        |ctx: ToolContext, args: ReadArgs| async move { blocking(move || read(&ctx, &args)).await },
    )
    .access(vec![Access::read_path("path")])
    .idempotency(Idempotency::Idempotent)
    .evidence(EvidenceCapture::Summary)
}

/// `fs.write`: writes a whole file, creating missing parent directories.
pub fn fs_write() -> TypedTool {
    typed_tool(
        "fs.write",
        "Write a file in the workspace, replacing its content; missing parent directories are created. \
         To change part of an existing file prefer fs.edit.",
        Effect::WriteState,
        |ctx: ToolContext, args: WriteArgs| async move { blocking(move || write(&ctx, &args)).await },
    )
    .access(vec![Access::write_path("path")])
    .idempotency(Idempotency::ConditionallyIdempotent)
    .evidence(EvidenceCapture::Summary)
}

/// `fs.edit`: replaces an exact string in a file.
pub fn fs_edit() -> TypedTool {
    typed_tool(
        "fs.edit",
        "Replace an exact string in a file. old_string must match the file exactly (whitespace included) and \
         occur exactly once, unless replace_all is true. Read the file first to copy the text.",
        Effect::WriteState,
        |ctx: ToolContext, args: EditArgs| async move { blocking(move || edit(&ctx, &args)).await },
    )
    // An edit reveals whether `old_string` occurs in the file, so it reads as well as writes.
    .access(vec![Access::read_path("path"), Access::write_path("path")])
    .idempotency(Idempotency::NonIdempotent)
    .evidence(EvidenceCapture::Structured)
}

/// `fs.list`: a directory's entries, sorted, directories marked with `/`.
pub fn fs_list() -> TypedTool {
    typed_tool(
        "fs.list",
        "List a directory in the workspace, sorted by name. Directories end with `/`, symbolic links with `@`.",
        Effect::ReadOnly,
        |ctx: ToolContext, args: ListArgs| async move { blocking(move || list(&ctx, &args)).await },
    )
    .access(vec![Access::read_path("path")])
    .idempotency(Idempotency::Idempotent)
    .evidence(EvidenceCapture::Summary)
}

/// Opens the regular file at `path` for reading, else says what it is instead: a FIFO's
/// open would wait for a writer, a device's read for ever. (Opened without waiting, then
/// asked what it is, so nothing put in its place after a look can make the open wait.)
fn open_regular(shown: &str, path: &std::path::Path) -> Result<(std::fs::File, std::fs::Metadata), ToolError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| ToolError::io(shown, &e))?;
    let meta = file.metadata().map_err(|e| ToolError::io(shown, &e))?;
    if meta.is_dir() {
        return Err(ToolError::failed(format!("`{shown}` is a directory, not a file; use fs.list to see its entries")));
    }
    if !meta.is_file() {
        return Err(ToolError::failed(format!(
            "`{shown}` is not a regular file (a FIFO, a socket or a device); the file tools read files only"
        )));
    }
    Ok((file, meta))
}

/// An image or a PDF read whole from `file` (past `head`, its first bytes, already read)
/// and attached to the result, its size checked first and as it is read.
fn attach(shown: &str, head: Vec<u8>, file: std::fs::File, size: u64) -> Result<ToolOutput, ToolError> {
    let limit = troupe_core::attachment::MAX_DOCUMENT_BYTES;
    let over = |size: u64| {
        ToolError::failed(format!(
            "`{shown}` is {size} bytes, over the {limit} bytes an attachment may have; it cannot be shown"
        ))
    };
    if size > limit {
        return Err(over(size));
    }
    let mut bytes = head;
    // The file may have grown since it was measured: read no more than the limit allows.
    file.take(limit + 1 - bytes.len() as u64).read_to_end(&mut bytes).map_err(|e| ToolError::io(shown, &e))?;
    if bytes.len() as u64 > limit {
        return Err(over(bytes.len() as u64));
    }
    let size = bytes.len() as u64;
    let block = troupe_core::attachment::from_bytes(shown, &bytes).map_err(|e| ToolError::failed(e.to_string()))?;
    let (kind, media_type) = match &block {
        troupe_core::ContentBlock::Document { .. } => ("a PDF", "application/pdf"),
        _ => ("an image", troupe_core::attachment::sniff(&bytes).unwrap_or("image")),
    };
    Ok(ToolOutput::text(format!("`{shown}` is {kind} ({media_type}, {size} bytes), attached to this result."))
        .with_structured(json!({"path": shown, "media_type": media_type, "bytes": size}))
        .with_attachment(block))
}

fn read(ctx: &ToolContext, args: &ReadArgs) -> Result<ToolOutput, ToolError> {
    let path = ctx.workspace.resolve(&args.path)?;
    let offset = args.offset.unwrap_or(1);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES);
    if offset == 0 {
        return Err(ToolError::invalid_arguments("`offset` counts lines from 1; use 1 for the first line"));
    }
    if limit == 0 {
        return Err(ToolError::invalid_arguments("`limit` must be at least 1"));
    }
    let shown = args.path.as_str();
    let (mut file, meta) = open_regular(shown, &path)?;
    let mut head = Vec::with_capacity(BINARY_SNIFF);
    (&mut file).take(BINARY_SNIFF as u64).read_to_end(&mut head).map_err(|e| ToolError::io(shown, &e))?;
    if troupe_core::attachment::sniff(&head).is_some() {
        return attach(shown, head, file, meta.len());
    }
    if head.contains(&0) {
        return Err(ToolError::failed(format!(
            "`{shown}` looks like a binary file (it contains NUL bytes); fs.read only shows text files"
        )));
    }
    if head.is_empty() {
        return Ok(ToolOutput::text(format!("(`{shown}` is empty)")).with_structured(
            json!({"path": shown, "start_line": 1, "end_line": 0, "more": false, "truncated": false}),
        ));
    }
    let mut reader = BufReader::new(std::io::Cursor::new(head).chain(file));
    let mut out = String::new();
    let mut line = Vec::new();
    let (mut number, mut shown_lines, mut more, mut truncated) = (0u64, 0u64, false, false);
    loop {
        if !read_line_bounded(&mut reader, &mut line, MAX_LINE_CHARS * 4).map_err(|e| ToolError::io(shown, &e))? {
            break;
        }
        number += 1;
        if number < offset {
            continue;
        }
        if shown_lines == limit {
            more = true;
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let entry = format!("{number:>6}\t{}\n", clip_line(text, MAX_LINE_CHARS));
        if out.len() + entry.len() > READ_OUTPUT_LIMIT {
            truncated = true;
            break;
        }
        out.push_str(&entry);
        shown_lines += 1;
    }
    if shown_lines == 0 && !truncated {
        return Err(ToolError::invalid_arguments(format!(
            "`offset` {offset} is past the end of `{shown}`, which has {number} lines"
        )));
    }
    let end_line = offset + shown_lines - 1;
    if truncated {
        out.push_str(&format!(
            "[output truncated at {}: showing lines {offset}-{end_line}; continue with offset={}]\n",
            human_bytes(READ_OUTPUT_LIMIT),
            end_line + 1
        ));
    } else if more {
        out.push_str(&format!(
            "[showing lines {offset}-{end_line}; more lines follow: continue with offset={}]\n",
            end_line + 1
        ));
    }
    let structured =
        json!({"path": shown, "start_line": offset, "end_line": end_line, "more": more, "truncated": truncated});
    Ok(ToolOutput::text(out).with_structured(structured))
}

/// Reads one line (with its `\n`) into `line`, keeping at most `max` bytes of it so a
/// gigantic single-line file cannot exhaust memory. Returns false at the end of input.
fn read_line_bounded(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> std::io::Result<bool> {
    line.clear();
    let mut any = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(any);
        }
        any = true;
        let (used, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buffer.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&buffer[..used.min(room)]);
        reader.consume(used);
        if done {
            return Ok(true);
        }
    }
}

fn write(ctx: &ToolContext, args: &WriteArgs) -> Result<ToolOutput, ToolError> {
    let path = ctx.workspace.resolve(&args.path)?;
    let shown = args.path.as_str();
    if path == ctx.workspace.root() || path.is_dir() {
        return Err(ToolError::failed(format!("`{shown}` is a directory; give the path of a file")));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ToolError::io(ctx.workspace.relative(parent), &e))?;
    }
    let existed = path.exists();
    std::fs::write(&path, args.content.as_bytes()).map_err(|e| ToolError::io(shown, &e))?;
    let verb = if existed { "Overwrote" } else { "Created" };
    let bytes = args.content.len();
    Ok(ToolOutput::text(format!("{verb} `{shown}` ({bytes} bytes)."))
        .with_structured(json!({"path": shown, "bytes": bytes, "created": !existed})))
}

fn edit(ctx: &ToolContext, args: &EditArgs) -> Result<ToolOutput, ToolError> {
    let path = ctx.workspace.resolve(&args.path)?;
    let shown = args.path.as_str();
    if args.old_string.is_empty() {
        return Err(ToolError::invalid_arguments(
            "`old_string` is empty; give the exact text to replace (use fs.write to create a file)",
        ));
    }
    if args.old_string == args.new_string {
        return Err(ToolError::invalid_arguments("`old_string` and `new_string` are the same; nothing would change"));
    }
    let (file, _) = open_regular(shown, &path)?;
    let mut bytes = Vec::new();
    (&file).read_to_end(&mut bytes).map_err(|e| ToolError::io(shown, &e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError::failed(format!("`{shown}` is not valid UTF-8 text; fs.edit only edits text files")))?;
    let found = text.matches(args.old_string.as_str()).count();
    if found == 0 {
        return Err(ToolError::invalid_arguments(format!(
            "`old_string` was not found in `{shown}`; read the file and copy the text exactly, whitespace and indentation included"
        )));
    }
    if found > 1 && !args.replace_all {
        return Err(ToolError::invalid_arguments(format!(
            "`old_string` occurs {found} times in `{shown}`; include more surrounding text to make it unique, or set `replace_all` to true"
        )));
    }
    let updated = text.replace(args.old_string.as_str(), &args.new_string);
    std::fs::write(&path, updated.as_bytes()).map_err(|e| ToolError::io(shown, &e))?;
    let noun = if found == 1 { "occurrence" } else { "occurrences" };
    Ok(ToolOutput::text(format!("Replaced {found} {noun} in `{shown}`."))
        .with_structured(json!({"path": shown, "replacements": found})))
}

fn list(ctx: &ToolContext, args: &ListArgs) -> Result<ToolOutput, ToolError> {
    let given = args.path.as_deref().unwrap_or(".");
    let path = ctx.workspace.resolve(given)?;
    let meta = std::fs::metadata(&path).map_err(|e| ToolError::io(given, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::failed(format!("`{given}` is a file, not a directory; use fs.read to read it")));
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&path).map_err(|e| ToolError::io(given, &e))? {
        let Ok(entry) = entry else { continue };
        if ctx.workspace.is_reserved(&entry.path()) {
            continue;
        }
        entries.push(describe_entry(&entry.file_name(), entry.file_type().ok()));
    }
    entries.sort_unstable();
    let total = entries.len();
    let mut out = String::new();
    for entry in entries.iter().take(MAX_LIST_ENTRIES) {
        out.push_str(entry);
        out.push('\n');
    }
    if total == 0 {
        out.push_str(&format!("(`{given}` is empty)\n"));
    } else if total > MAX_LIST_ENTRIES {
        out.push_str(&format!(
            "[showing {MAX_LIST_ENTRIES} of {total} entries; use fs.glob or grep to narrow the search]\n"
        ));
    }
    Ok(ToolOutput::text(out).with_structured(json!({"path": given, "entries": total})))
}

/// An entry's name as listed: lossy for non-UTF-8 names, `/` after directories and `@`
/// after symbolic links (which are not followed).
fn describe_entry(name: &std::ffi::OsStr, kind: Option<std::fs::FileType>) -> String {
    let mut shown = Path::new(name).to_string_lossy().into_owned();
    match kind {
        Some(kind) if kind.is_dir() => shown.push('/'),
        Some(kind) if kind.is_symlink() => shown.push('@'),
        _ => {}
    }
    shown
}
