//! `shell`: a command run by `sh -c` in the workspace, in its sandbox, with a scrubbed
//! environment.

use super::human_bytes;
use super::process::{self, Captured, Ending, ProcessSpec};
use crate::declaration::{Access, ApprovalRequirement, Effect, EvidenceCapture, Idempotency, ToolDeclaration};
use crate::error::{HumanDuration, ToolError};
use crate::schema::{decode_arguments, schema_for};
use crate::tool::{Tool, ToolContext, ToolOutput};
use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::Duration;

/// The `PATH` a command gets when the host process has none.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Arguments of `shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The command line, run by `sh -c` in the workspace root.
    pub command: String,
    /// Seconds before the command is killed (default 120).
    pub timeout_secs: Option<u64>,
}

/// The `shell` tool: runs `sh -c COMMAND` with its working directory pinned to the
/// workspace root and an environment scrubbed down to `PATH`, `HOME`, `LANG`, `TERM=dumb`
/// and the variables allowed with [`ShellTool::allow_env`].
///
/// The command runs in the workspace's [`Sandbox`](troupe_sandbox::Sandbox)
/// (`workspace-write` by default: it writes only the workspace and a private temporary
/// directory, reads only the system and the workspace, and has no network); a mode the
/// kernel cannot enforce is refused before anything runs. The result's first line names
/// the mode, so the model and the run's evidence both know how the command was confined.
///
/// The command runs in its own process group; on timeout or cancellation, and when the
/// command itself exits, the whole group is killed, so nothing it started lingers (see the
/// module docs of the process runner). Standard input is empty; stdout and stderr are each
/// kept up to [`ShellTool::output_limit`] bytes, noting how much was cut. A non-zero exit is
/// a normal result showing the exit code; a timeout is an error carrying the partial output.
#[derive(Clone, Debug)]
pub struct ShellTool {
    declaration: ToolDeclaration,
    shell: PathBuf,
    allowed_env: Vec<String>,
    fixed_env: Vec<(String, String)>,
    default_timeout: Duration,
    max_timeout: Duration,
    output_limit: usize,
}

impl Default for ShellTool {
    fn default() -> Self {
        ShellTool::new()
    }
}

impl ShellTool {
    /// The tool with its defaults: `/bin/sh`, a 120 s default and 600 s maximum timeout,
    /// 64 KiB of output per stream.
    pub fn new() -> Self {
        let mut declaration = ToolDeclaration::new(
            "shell",
            "Run a shell command (sh -c) in the workspace root and return its exit code, stdout and stderr. \
             The environment is minimal (PATH, HOME, LANG, TERM=dumb) and standard input is empty; \
             use non-interactive commands. Long outputs are cut. The command runs in a sandbox, named in \
             the result: by default it can write only in the workspace and $TMPDIR, and has no network.",
            schema_for::<ShellArgs>(),
            Effect::ExternalSideEffect,
        );
        declaration.idempotency = Idempotency::NonIdempotent;
        declaration.evidence = EvidenceCapture::Structured;
        declaration.approval = ApprovalRequirement::Derived;
        declaration.access = vec![Access::Shell];
        ShellTool {
            declaration,
            shell: PathBuf::from("/bin/sh"),
            allowed_env: Vec::new(),
            fixed_env: Vec::new(),
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            output_limit: 64 * 1024,
        }
    }

    /// Passes the host's variable `name` through to commands, where it is set.
    pub fn allow_env(mut self, name: impl Into<String>) -> Self {
        self.allowed_env.push(name.into());
        self
    }

    /// Sets `name=value` for every command (after the allowed host variables).
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.fixed_env.push((name.into(), value.into()));
        self
    }

    /// The timeout of a call that gives no `timeout_secs`.
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// The longest `timeout_secs` a call may ask for.
    pub fn max_timeout(mut self, timeout: Duration) -> Self {
        self.max_timeout = timeout;
        self
    }

    /// Bytes kept of each of stdout and stderr.
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    /// The shell binary (default `/bin/sh`); it is invoked as `SHELL -c COMMAND`.
    pub fn shell(mut self, shell: impl Into<PathBuf>) -> Self {
        self.shell = shell.into();
        self
    }

    /// The complete environment a command gets.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let host = |name: &str| std::env::var_os(name);
        let mut env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), host("PATH").unwrap_or_else(|| FALLBACK_PATH.into())),
            ("LANG".into(), host("LANG").unwrap_or_else(|| "C.UTF-8".into())),
            ("TERM".into(), "dumb".into()),
        ];
        if let Some(home) = host("HOME") {
            env.push(("HOME".into(), home));
        }
        for name in &self.allowed_env {
            if let Some(value) = host(name) {
                env.push((name.into(), value));
            }
        }
        env.extend(self.fixed_env.iter().map(|(k, v)| (k.into(), v.into())));
        env
    }

    async fn run(&self, ctx: &ToolContext, args: ShellArgs) -> Result<ToolOutput, ToolError> {
        let timeout = match args.timeout_secs {
            None => self.default_timeout,
            Some(0) => return Err(ToolError::invalid_arguments("`timeout_secs` must be at least 1")),
            Some(secs) if Duration::from_secs(secs) > self.max_timeout => {
                return Err(ToolError::invalid_arguments(format!(
                    "`timeout_secs` may be at most {}",
                    self.max_timeout.as_secs()
                )));
            }
            Some(secs) => Duration::from_secs(secs),
        };
        let spec = ProcessSpec {
            program: self.shell.clone().into_os_string(),
            args: vec!["-c".into(), args.command.into()],
            cwd: ctx.workspace.root().to_path_buf(),
            env: self.environment(),
            timeout,
            output_limit: self.output_limit,
            cancel: ctx.cancel.clone(),
            sandbox: ctx.workspace.sandbox().clone(),
        };
        let outcome = process::run(spec).await.map_err(|error| ToolError::failed(error.to_string()))?;
        let streams = render_streams(&outcome.stdout, &outcome.stderr);
        let mut structured = json!({
            "stdout": outcome.stdout.text(),
            "stderr": outcome.stderr.text(),
            "stdout_truncated": outcome.stdout.truncated(),
            "stderr_truncated": outcome.stderr.truncated(),
            "sandbox": outcome.sandbox,
        });
        match outcome.ending {
            Ending::Cancelled => Err(ToolError::Cancelled),
            Ending::TimedOut => Err(ToolError::failed(format!(
                "the command did not finish within {} and was killed (with every process it started). \
                 Use a longer timeout_secs, run less at once, or avoid commands that wait for input.\n{}\n{streams}",
                HumanDuration(timeout),
                outcome.sandbox
            ))),
            Ending::Exited(status) => {
                let headline = match (status.code(), status.signal()) {
                    (Some(code), _) => format!("exit code: {code}"),
                    (None, Some(signal)) => format!("terminated by signal {signal}"),
                    (None, None) => "exit status unknown".to_owned(),
                };
                structured["exit_code"] = json!(status.code());
                structured["signal"] = json!(status.signal());
                Ok(ToolOutput::text(format!("{headline}\n{}\n{streams}", outcome.sandbox)).with_structured(structured))
            }
        }
    }
}

fn render_streams(stdout: &Captured, stderr: &Captured) -> String {
    let mut out = String::new();
    for (label, stream) in [("stdout", stdout), ("stderr", stderr)] {
        if stream.total == 0 {
            continue;
        }
        out.push_str(&format!("--- {label} ---\n"));
        out.push_str(&stream.text());
        if !out.ends_with('\n') {
            out.push('\n');
        }
        if stream.truncated() {
            out.push_str(&format!(
                "[{label} truncated: showing the first {} of {} bytes]\n",
                human_bytes(stream.bytes.len()),
                stream.total
            ));
        }
    }
    if out.is_empty() {
        out.push_str("(no output)\n");
    }
    out
}

impl Tool for ShellTool {
    fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async move {
            let args = decode_arguments::<ShellArgs>(&self.declaration.input_schema, args)?;
            self.run(ctx, args).await
        }
        .boxed()
    }
}
