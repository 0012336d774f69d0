//! Running a child process confined to its own process group, with a timeout, a
//! cancellation token and capped output.
//!
//! The child is started as the leader of a new process group (`process_group(0)`), so
//! everything it starts shares the group unless it deliberately leaves it. When the child
//! exits, times out, is cancelled, or the future running it is dropped (the catalog's own
//! timeout or cancellation), the whole group gets `SIGKILL`: processes a command starts do
//! not outlive it, and a backgrounded grandchild cannot keep the output pipes open. This
//! needs no unsafe code: `nix::sys::signal::killpg` wraps the system call safely.
//!
//! The child is started in a [`Sandbox`]; a mode the kernel cannot enforce is refused
//! before anything runs.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use troupe_sandbox::{Sandbox, SandboxError, SandboxReport};

/// How long to wait for the output pipes to close after the group was killed; only a
/// process that left the group can hold them open longer.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// What to run.
pub(crate) struct ProcessSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment: the child inherits nothing else.
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Duration,
    /// Bytes kept of each of stdout and stderr.
    pub output_limit: usize,
    pub cancel: CancellationToken,
    /// How the process is confined.
    pub sandbox: Sandbox,
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

/// One output stream as captured.
#[derive(Debug, Default, Clone)]
pub(crate) struct Captured {
    pub bytes: Vec<u8>,
    /// Bytes the stream produced in all, kept or not.
    pub total: usize,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// What a run produced.
#[derive(Debug)]
pub(crate) struct ProcessOutcome {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
    /// How the process was confined.
    pub sandbox: SandboxReport,
}

/// Kills the process group and stops the readers when dropped, however the run ends.
struct GroupGuard {
    pgid: Option<Pid>,
    readers: Vec<JoinHandle<()>>,
}

impl GroupGuard {
    fn kill_group(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // ESRCH (the group is already gone) is the normal case after a clean exit.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_group();
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// Runs `spec`. Fails only when the process cannot be started (or not in its sandbox).
pub(crate) async fn run(spec: ProcessSpec) -> Result<ProcessOutcome, SandboxError> {
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // Held to the end: the sandbox's temporary directory goes with it.
    let mut confined = spec.sandbox.spawn(command, &spec.cwd).await?;
    let report = confined.report.clone();
    let child = &mut confined.child;
    let mut guard = GroupGuard { pgid: None, readers: Vec::new() };
    guard.pgid = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);

    let stdout = Arc::new(Mutex::new(Captured::default()));
    let stderr = Arc::new(Mutex::new(Captured::default()));
    if let Some(pipe) = child.stdout.take() {
        guard.readers.push(tokio::spawn(capture(pipe, spec.output_limit, Arc::clone(&stdout))));
    }
    if let Some(pipe) = child.stderr.take() {
        guard.readers.push(tokio::spawn(capture(pipe, spec.output_limit, Arc::clone(&stderr))));
    }

    let ending = tokio::select! {
        status = child.wait() => Ending::Exited(status.map_err(|source| SandboxError::Spawn {
            program: spec.program.to_string_lossy().into_owned(),
            source,
        })?),
        () = tokio::time::sleep(spec.timeout) => Ending::TimedOut,
        () = spec.cancel.cancelled() => Ending::Cancelled,
    };
    guard.kill_group();
    if !matches!(ending, Ending::Exited(_)) {
        // Reap the killed leader; SIGKILL cannot be ignored, so this is prompt.
        let _ = child.wait().await;
    }
    let readers = std::mem::take(&mut guard.readers);
    let stoppers: Vec<_> = readers.iter().map(JoinHandle::abort_handle).collect();
    if tokio::time::timeout(PIPE_GRACE, futures::future::join_all(readers)).await.is_err() {
        // Some process outside the group still holds a pipe; keep what was read so far.
        stoppers.iter().for_each(tokio::task::AbortHandle::abort);
    }
    let take = |slot: &Arc<Mutex<Captured>>| slot.lock().map(|c| c.clone()).unwrap_or_default();
    Ok(ProcessOutcome { ending, stdout: take(&stdout), stderr: take(&stderr), sandbox: report })
}

/// Reads `pipe` to its end, keeping the first `limit` bytes and counting the rest.
async fn capture(mut pipe: impl AsyncRead + Unpin, limit: usize, into: Arc<Mutex<Captured>>) {
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Ok(mut captured) = into.lock() else { return };
        captured.total += n;
        let room = limit.saturating_sub(captured.bytes.len());
        let kept = n.min(room);
        captured.bytes.extend_from_slice(&chunk[..kept]);
    }
}
