//! `git.status` and `git.diff`: the `git` binary, run read-only in the workspace, in the
//! `read-only` sandbox (unless the workspace's sandbox is `full`).
//!
//! Git is told not to take optional locks, not to run an fsmonitor hook, external diff
//! drivers, textconv filters or the clean and smudge filters the repository's own config
//! defines (all of which a repository's config can point at arbitrary programs, and the
//! agent can write that config), and not to look for a repository above the workspace root
//! (`GIT_CEILING_DIRECTORIES`), so a workspace that is not itself a repository does not show
//! its parent's changes.

use super::process::{self, Ending, ProcessSpec};
use crate::declaration::{Access, Effect, EvidenceCapture, Idempotency};
use crate::error::ToolError;
use crate::tool::{ToolContext, ToolOutput};
use crate::typed::{TypedTool, typed_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::ffi::OsString;
use std::time::Duration;
use troupe_sandbox::{Sandbox, SandboxMode};

/// How long a git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of git output kept.
const GIT_OUTPUT_LIMIT: usize = 256 * 1024;

/// Arguments of `git.status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitStatusArgs {}

/// Arguments of `git.diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitDiffArgs {
    /// Only show changes to this file or directory, relative to the workspace root.
    pub path: Option<String>,
    /// Show the staged changes (the index against HEAD) instead of the unstaged ones.
    #[serde(default)]
    pub staged: bool,
}

/// `git.status`: the branch and changed files, in git's short format.
pub fn git_status() -> TypedTool {
    typed_tool(
        "git.status",
        "Show the git branch and the changed, staged and untracked files of the workspace (git status --short --branch).",
        Effect::ReadOnly,
        |ctx: ToolContext, _args: GitStatusArgs| async move {
            let output = git(&ctx, &["status", "--short", "--branch", "--untracked-files=all"]).await?;
            Ok(ToolOutput::text(output.clone()).with_structured(json!({"output": output})))
        },
    )
    // No `path` argument, so this is read access to the whole workspace (`.`).
    .access(vec![Access::read_path("path")])
    .idempotency(Idempotency::Idempotent)
    .evidence(EvidenceCapture::Summary)
}

/// `git.diff`: the unstaged (or staged) changes as a unified diff.
pub fn git_diff() -> TypedTool {
    typed_tool(
        "git.diff",
        "Show the workspace's uncommitted changes as a unified diff; set staged to see the staged changes, \
         path to limit it to a file or directory.",
        Effect::ReadOnly,
        |ctx: ToolContext, args: GitDiffArgs| async move {
            let mut command = vec!["diff", "--no-ext-diff", "--no-textconv", "--no-color"];
            if args.staged {
                command.push("--cached");
            }
            let relative;
            if let Some(path) = &args.path {
                relative = ctx.workspace.relative(&ctx.workspace.resolve(path)?);
                command.extend(["--", relative.as_str()]);
            }
            let output = git(&ctx, &command).await?;
            let content = if output.trim().is_empty() { "(no changes)\n".to_owned() } else { output };
            Ok(ToolOutput::text(content).with_structured(json!({"staged": args.staged, "path": args.path})))
        },
    )
    .access(vec![Access::read_path("path")])
    .idempotency(Idempotency::Idempotent)
    .evidence(EvidenceCapture::Summary)
}

/// Runs `git ARGS` in the workspace root and returns its stdout, or its stderr as the error.
async fn git(ctx: &ToolContext, args: &[&str]) -> Result<String, ToolError> {
    let mut full: Vec<OsString> =
        ["--no-pager", "-c", "core.fsmonitor=false", "-c", "core.quotepath=false"].map(OsString::from).into();
    // A filter the repository's config defines is a program the agent may have named
    // (`.git/config` is in the workspace): each is emptied, which git takes as no filter.
    // Those of the user's own config (`git-lfs`, say) stay.
    for driver in repository_filters(ctx).await {
        if driver.contains('=') {
            // `-c` splits at the first `=`: such a driver cannot be named, so not emptied.
            return Err(ToolError::failed(format!(
                "the repository's config defines a filter `{driver}` that git cannot be told to leave out; git is \
                 not run with it"
            )));
        }
        for key in ["clean", "smudge", "process"] {
            full.extend(["-c".into(), format!("filter.{driver}.{key}=").into()]);
        }
        full.extend(["-c".into(), format!("filter.{driver}.required=false").into()]);
    }
    full.extend(args.iter().map(OsString::from));
    run_git(ctx, full, args.first().copied().unwrap_or_default()).await
}

/// The filter drivers the repository's own config (and what it includes) defines.
async fn repository_filters(ctx: &ToolContext) -> Vec<String> {
    let query = ["--no-pager", "config", "--local", "--includes", "--name-only", "--get-regexp", r"^filter\."];
    // Outside a repository (or with no filter) git exits non-zero: nothing to empty.
    let names = run_git(ctx, query.map(OsString::from).into(), "config").await.unwrap_or_default();
    let mut drivers: Vec<String> = names
        .lines()
        .filter_map(|name| name.strip_prefix("filter.")?.rsplit_once('.').map(|(driver, _key)| driver.to_owned()))
        .collect();
    drivers.sort();
    drivers.dedup();
    drivers
}

/// Runs git with `full` as its arguments in the workspace root: its stdout, or its stderr
/// as the error, which names `subcommand`.
async fn run_git(ctx: &ToolContext, full: Vec<OsString>, subcommand: &str) -> Result<String, ToolError> {
    let root = ctx.workspace.root();
    let host = |name: &str| std::env::var_os(name);
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), host("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())),
        ("LANG".into(), "C.UTF-8".into()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
    ];
    if let Some(home) = host("HOME") {
        env.push(("HOME".into(), home));
    }
    if let Some(parent) = root.parent() {
        env.push(("GIT_CEILING_DIRECTORIES".into(), parent.as_os_str().to_owned()));
    }
    let spec = ProcessSpec {
        program: "git".into(),
        args: full,
        cwd: root.to_path_buf(),
        env,
        timeout: GIT_TIMEOUT,
        output_limit: GIT_OUTPUT_LIMIT,
        cancel: ctx.cancel.clone(),
        sandbox: match ctx.workspace.sandbox().mode() {
            SandboxMode::Full => ctx.workspace.sandbox().clone(),
            _ => Sandbox::new(SandboxMode::ReadOnly),
        },
    };
    let outcome = process::run(spec).await.map_err(|error| match error {
        troupe_sandbox::SandboxError::Spawn { source, .. } => {
            ToolError::failed(format!("could not run `git` ({source}); git must be installed and on PATH"))
        }
        refused => ToolError::failed(refused.to_string()),
    })?;
    match outcome.ending {
        Ending::Cancelled => Err(ToolError::Cancelled),
        Ending::TimedOut => Err(ToolError::Timeout { after: GIT_TIMEOUT }),
        Ending::Exited(status) if status.success() => {
            let mut text = outcome.stdout.text();
            if outcome.stdout.truncated() {
                text.push_str(&format!(
                    "\n[output truncated at {} of {} bytes; pass a path to narrow it]\n",
                    GIT_OUTPUT_LIMIT, outcome.stdout.total
                ));
            }
            Ok(text)
        }
        Ending::Exited(status) => {
            let code = status.code().map_or_else(|| "killed".to_owned(), |c| c.to_string());
            let stderr = outcome.stderr.text();
            let hint =
                if stderr.contains("not a git repository") { " The workspace is not a git repository." } else { "" };
            Err(ToolError::failed(format!("git {subcommand} failed (exit code {code}): {}{hint}", stderr.trim())))
        }
    }
}
