//! `fs.glob` and `grep`: finding files and lines, honouring `.gitignore`.
//!
//! Both walk the workspace with the `ignore` crate (ripgrep's walker): `.gitignore`,
//! `.ignore` and git's exclude files are respected even outside a git repository, hidden
//! files are included, the `.git` directory is skipped and symbolic links are not followed,
//! so a walk cannot leave the workspace.

use super::{blocking, clip_line};
use crate::declaration::{Access, Effect, EvidenceCapture, Idempotency};
use crate::error::ToolError;
use crate::tool::{ToolContext, ToolOutput};
use crate::typed::{TypedTool, typed_tool};
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Paths `fs.glob` returns at most.
const MAX_GLOB_RESULTS: usize = 1000;
/// Matches `grep` returns when no `max_results` is given.
const DEFAULT_GREP_RESULTS: u64 = 200;
/// The most matches `grep` returns, whatever `max_results` says.
const MAX_GREP_RESULTS: u64 = 2000;
/// Characters of a matching line `grep` shows.
const MAX_MATCH_CHARS: usize = 500;

/// Arguments of `fs.glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// A glob pattern relative to `path`, e.g. `**/*.rs` or `src/*.toml`; `*` does not cross `/`, `**` does.
    pub pattern: String,
    /// The directory to search from, relative to the workspace root (default ".").
    pub path: Option<String>,
}

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// A regular expression (Rust regex syntax) matched against each line.
    pub pattern: String,
    /// A file or directory to search, relative to the workspace root (default ".").
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` (matched against the file name) or `src/**/*.rs` (matched against the path).
    pub glob: Option<String>,
    /// Match without regard to letter case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// The most matching lines to return (default 200, at most 2000).
    pub max_results: Option<u64>,
}

/// `fs.glob`: workspace files whose path matches a glob, sorted.
pub fn fs_glob() -> TypedTool {
    typed_tool(
        "fs.glob",
        "Find files in the workspace by glob pattern (e.g. `**/*.rs`). Honours .gitignore. \
         Returns matching file paths relative to the workspace root, sorted.",
        Effect::ReadOnly,
        |ctx: ToolContext, args: GlobArgs| async move { blocking(move || glob(&ctx, &args)).await },
    )
    .access(vec![Access::read_path("path")])
    .idempotency(Idempotency::Idempotent)
    .evidence(EvidenceCapture::Summary)
}

/// `grep`: lines matching a regex, as `path:line:text`.
pub fn grep() -> TypedTool {
    typed_tool(
        "grep",
        "Search file contents in the workspace with a regular expression. Honours .gitignore and skips binary \
         files. Returns `path:line:text` for each matching line.",
        Effect::ReadOnly,
        |ctx: ToolContext, args: GrepArgs| async move { blocking(move || search(&ctx, &args)).await },
    )
    .access(vec![Access::read_path("path")])
    .idempotency(Idempotency::Idempotent)
    .evidence(EvidenceCapture::Summary)
}

/// A walker over `base` with the rules of the module docs, in a stable order; never into
/// `.git` or the workspace's reserved directory.
fn walker(ctx: &ToolContext, base: &Path) -> ignore::Walk {
    let reserved = ctx.workspace.root().join(crate::workspace::RESERVED_DIR);
    ignore::WalkBuilder::new(base)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| entry.file_name() != ".git" && entry.path() != reserved)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

fn compile_glob(pattern: &str) -> Result<GlobMatcher, ToolError> {
    if pattern.starts_with('/') {
        return Err(ToolError::invalid_arguments(format!(
            "glob `{pattern}` is absolute; patterns are relative to the search directory, e.g. `**/*.rs`"
        )));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| ToolError::invalid_arguments(format!("invalid glob `{pattern}`: {error}")))
}

/// The search directory of an optional `path` argument.
fn base_dir(ctx: &ToolContext, path: Option<&str>) -> Result<(PathBuf, String), ToolError> {
    let given = path.unwrap_or(".").to_owned();
    let base = ctx.workspace.resolve(&given)?;
    if !base.exists() {
        return Err(ToolError::NotFound { path: given });
    }
    Ok((base, given))
}

fn glob(ctx: &ToolContext, args: &GlobArgs) -> Result<ToolOutput, ToolError> {
    let matcher = compile_glob(&args.pattern)?;
    let (base, given) = base_dir(ctx, args.path.as_deref())?;
    if !base.is_dir() {
        return Err(ToolError::failed(format!("`{given}` is a file, not a directory; fs.glob searches directories")));
    }
    let mut found = Vec::new();
    let mut more = false;
    for entry in walker(ctx, &base).flatten() {
        if entry.file_type().is_none_or(|kind| kind.is_dir()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(&base) else { continue };
        if !matcher.is_match(relative) {
            continue;
        }
        if found.len() == MAX_GLOB_RESULTS {
            more = true;
            break;
        }
        found.push(ctx.workspace.relative(entry.path()));
    }
    found.sort_unstable();
    let mut out = String::new();
    for path in &found {
        out.push_str(path);
        out.push('\n');
    }
    if found.is_empty() {
        out = format!("No files match `{}` under `{given}`.\n", args.pattern);
    } else if more {
        out.push_str(&format!("[showing the first {MAX_GLOB_RESULTS} matches; use a narrower pattern]\n"));
    }
    Ok(ToolOutput::text(out).with_structured(json!({"matches": found.len(), "more": more})))
}

/// Which files a `grep` looks at: a glob without `/` matches the file name, one with `/`
/// the path relative to the search directory (like ripgrep's `--glob`).
struct FileFilter {
    matcher: Option<GlobMatcher>,
    by_name: bool,
}

impl FileFilter {
    fn new(glob: Option<&str>) -> Result<Self, ToolError> {
        let matcher = glob.map(compile_glob).transpose()?;
        Ok(FileFilter { matcher, by_name: glob.is_some_and(|g| !g.contains('/')) })
    }

    fn accepts(&self, path: &Path, base: &Path) -> bool {
        let Some(matcher) = &self.matcher else { return true };
        if self.by_name {
            path.file_name().is_some_and(|name| matcher.is_match(name))
        } else {
            path.strip_prefix(base).is_ok_and(|relative| matcher.is_match(relative))
        }
    }
}

fn search(ctx: &ToolContext, args: &GrepArgs) -> Result<ToolOutput, ToolError> {
    let max = args.max_results.unwrap_or(DEFAULT_GREP_RESULTS);
    if max == 0 {
        return Err(ToolError::invalid_arguments("`max_results` must be at least 1"));
    }
    let max = usize::try_from(max.min(MAX_GREP_RESULTS)).unwrap_or(usize::MAX);
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|error| ToolError::invalid_arguments(format!("invalid regular expression: {error}")))?;
    let filter = FileFilter::new(args.glob.as_deref())?;
    let (base, _given) = base_dir(ctx, args.path.as_deref())?;
    let mut searcher =
        SearcherBuilder::new().line_number(true).binary_detection(BinaryDetection::quit(b'\x00')).build();

    let mut lines: Vec<String> = Vec::new();
    let mut files_with_matches = 0usize;
    let mut full = false;
    for entry in walker(ctx, &base).flatten() {
        if full {
            break;
        }
        if !entry.file_type().is_some_and(|kind| kind.is_file()) || !filter.accepts(entry.path(), &base) {
            continue;
        }
        let shown = ctx.workspace.relative(entry.path());
        let before = lines.len();
        let sink = Lossy(|number, text: &str| {
            if lines.len() == max {
                full = true;
                return Ok(false);
            }
            let text = text.trim_end_matches(['\n', '\r']);
            lines.push(format!("{shown}:{number}:{}", clip_line(text, MAX_MATCH_CHARS)));
            Ok(true)
        });
        // An unreadable file is skipped, as ripgrep does, rather than failing the search.
        let _ = searcher.search_path(&matcher, entry.path(), sink);
        if lines.len() > before {
            files_with_matches += 1;
        }
    }
    let mut out = lines.join("\n");
    if lines.is_empty() {
        out = format!("No matches for `{}`.", args.pattern);
    } else if full {
        out.push_str(&format!(
            "\n[stopped after {max} matching lines; narrow the pattern, path or glob, or raise max_results]"
        ));
    }
    out.push('\n');
    let structured = json!({"matches": lines.len(), "files": files_with_matches, "more": full});
    Ok(ToolOutput::text(out).with_structured(structured))
}
