//! The built-in workspace tools: files, search, shell and git.
//!
//! Every path argument goes through [`Workspace::resolve`](crate::Workspace::resolve), so
//! these tools never read or write outside the workspace; outputs are capped and say so
//! when they are cut, so a huge file or a chatty command cannot flood the model's context.

mod fs;
mod git;
mod process;
mod search;
mod shell;
mod web;

pub use fs::{EditArgs, ListArgs, ReadArgs, WriteArgs, fs_edit, fs_list, fs_read, fs_write};
pub use git::{GitDiffArgs, GitStatusArgs, git_diff, git_status};
pub use search::{GlobArgs, GrepArgs, fs_glob, grep};
pub use shell::{ShellArgs, ShellTool};
pub use web::{SearchBackend, WebFetchArgs, WebFetchTool, WebSearchArgs, WebSearchTool, web_tools};

use crate::error::ToolError;
use crate::tool::Tool;
use std::sync::Arc;

/// Every built-in tool: `fs.read`, `fs.write`, `fs.edit`, `fs.list`, `fs.glob`, `grep`,
/// `shell` (with its default settings), `git.status` and `git.diff`.
pub fn coding_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        fs_read().into_arc(),
        fs_write().into_arc(),
        fs_edit().into_arc(),
        fs_list().into_arc(),
        fs_glob().into_arc(),
        grep().into_arc(),
        Arc::new(ShellTool::new()),
        git_status().into_arc(),
        git_diff().into_arc(),
    ]
}

/// The built-in tools that only observe: `fs.read`, `fs.list`, `fs.glob`, `grep`,
/// `git.status` and `git.diff`.
pub fn readonly_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        fs_read().into_arc(),
        fs_list().into_arc(),
        fs_glob().into_arc(),
        grep().into_arc(),
        git_status().into_arc(),
        git_diff().into_arc(),
    ]
}

/// Runs blocking file-system work off the async threads; a panic in it becomes
/// [`ToolError::Panicked`].
async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) => Err(ToolError::Panicked { message: error.to_string() }),
    }
}

/// `text` cut to at most `max_chars` characters, with a marker when cut.
fn clip_line(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}… [line cut at {max_chars} characters]", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A byte count as `64 KiB` / `1.5 MiB` / `300 bytes`.
fn human_bytes(bytes: usize) -> String {
    const KIB: usize = 1024;
    if bytes < KIB {
        format!("{bytes} bytes")
    } else if bytes < KIB * KIB {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{:.1} MiB", bytes as f64 / (KIB * KIB) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_line_counts_characters_not_bytes() {
        assert_eq!(clip_line("héllo", 10), "héllo");
        assert_eq!(clip_line("héllo", 2), "hé… [line cut at 2 characters]");
    }

    #[test]
    fn tool_sets_have_unique_names_and_readonly_means_read_only() {
        let all = coding_tools();
        let mut names: Vec<&str> = all.iter().map(|t| t.declaration().name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 9);
        assert!(readonly_tools().iter().all(|t| t.declaration().is_read_only()));
        assert_eq!(human_bytes(64 * 1024), "64 KiB");
    }
}
