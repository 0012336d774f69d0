//! A worker process in its own process group: spawned with a scrubbed environment, its
//! stderr kept as a short tail for error messages, and the whole group killed when the
//! attempt ends, however it ends.

use super::config::WorkerConfig;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

/// How much of a worker's stderr is kept for error messages.
const STDERR_TAIL: usize = 2048;

/// A running worker and its process group.
#[derive(Debug)]
pub(crate) struct WorkerChild {
    child: Child,
    pid: u32,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_task: Option<JoinHandle<()>>,
}

impl WorkerChild {
    /// Starts the worker as the leader of a new process group, with only the granted
    /// environment.
    pub(crate) fn spawn(config: &WorkerConfig) -> std::io::Result<(Self, ChildStdin, ChildStdout)> {
        let mut command = Command::new(&config.command);
        command
            .args(&config.args)
            .env_clear()
            .envs(config.worker_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &config.working_dir {
            command.current_dir(dir);
        }
        let mut child = command.spawn()?;
        let pid = child.id().ok_or_else(|| std::io::Error::other("the worker exited before it could be watched"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the worker's stdio was not piped"));
        };
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_task = child.stderr.take().map(|mut pipe| {
            let tail = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tracing::debug!(target: "troupe_workers::worker_stderr", pid, "{}", String::from_utf8_lossy(&buf[..n]).trim_end());
                    if let Ok(mut kept) = tail.lock() {
                        kept.extend_from_slice(&buf[..n]);
                        let excess = kept.len().saturating_sub(STDERR_TAIL);
                        kept.drain(..excess);
                    }
                }
            })
        });
        Ok((WorkerChild { child, pid, stderr, stderr_task }, stdin, stdout))
    }

    /// The worker's pid, which is also its process group's id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The last bytes the worker wrote to stderr, as text.
    pub(crate) fn stderr_tail(&self) -> String {
        let kept = self.stderr.lock().map(|k| k.clone()).unwrap_or_default();
        String::from_utf8_lossy(&kept).trim().to_owned()
    }

    /// Sends SIGKILL to the whole group (the worker and whatever it started). A group
    /// already gone is not an error.
    pub(crate) fn kill_group(&self) {
        kill_group(self.pid);
    }

    /// Waits up to `grace` for the worker to exit by itself, then kills its group and
    /// reaps it; its exit status and the end of its stderr. The group is killed before the
    /// leader is reaped, so its id cannot have been reused by then.
    pub(crate) async fn finish(mut self, grace: Duration) -> (Option<ExitStatus>, String) {
        let exited = tokio::time::timeout(grace, self.exit_without_reaping()).await.is_ok_and(|done| done);
        self.kill_group();
        let status = match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => None,
        };
        if !exited {
            tracing::debug!(pid = self.pid, "worker killed after its grace period");
        }
        if let Some(mut task) = self.stderr_task.take() {
            // The group is dead: its stderr ends, unless a process escaped the group.
            if tokio::time::timeout(Duration::from_millis(500), &mut task).await.is_err() {
                tracing::debug!(pid = self.pid, "worker stderr still open after the group was killed");
                task.abort();
            }
        }
        (status, self.stderr_tail())
    }

    /// Whether the leader has exited, polling without reaping it (a zombie keeps its pid,
    /// so its group id stays its own until [`WorkerChild::finish`] reaps it).
    async fn exit_without_reaping(&self) -> bool {
        while !leader_exited(self.pid) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }
}

impl Drop for WorkerChild {
    fn drop(&mut self) {
        // An attempt dropped mid-way (its future cancelled) still leaves nothing behind.
        self.kill_group();
        if let Some(task) = self.stderr_task.take() {
            task.abort();
        }
    }
}

/// Sends SIGKILL to process group `pgid`; a group already gone is not an error.
pub(crate) fn kill_group(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Whether our child `pid` has exited (a zombie not yet reaped counts).
pub(crate) fn leader_exited(pid: u32) -> bool {
    matches!(proc_state(pid), Some('Z' | 'X') | None)
}

/// The state letter of process `pid` from `/proc/<pid>/stat` (`R`, `S`, `Z`, …).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Describes how a worker exited: `exit code 3`, `killed by signal 9 (SIGKILL)`.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "its exit status is unknown".to_owned(),
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => {
                let name = Signal::try_from(signal).map(|s| format!(" ({})", s.as_str())).unwrap_or_default();
                format!("killed by signal {signal}{name}")
            }
            (None, None) => status.to_string(),
        },
    }
}
