//! Why one attempt of a worker failed ([`AttemptError`]), and why the worker side of the
//! protocol stopped ([`WorkerError`]).

use crate::ipc::{IpcError, PayloadError};
use std::time::Duration;

/// Why one attempt of a task in a worker process failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The worker could not be started.
    #[error("cannot start the worker `{command}`: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// The error.
        source: std::io::Error,
    },
    /// The worker wrote something that is not a valid frame stream.
    #[error("the worker broke the protocol: {0}")]
    Protocol(#[source] IpcError),
    /// The worker sent a frame a worker never sends, or a result for another task.
    #[error("the worker broke the protocol: {0}")]
    Unexpected(String),
    /// The worker's output ended before its result.
    #[error("the worker exited without a result ({exit}){}", stderr_note(.stderr))]
    Exited {
        /// How it exited.
        exit: String,
        /// The end of its stderr.
        stderr: String,
    },
    /// The worker sent no frame (not even a heartbeat) for too long.
    #[error("the worker hung: no frame for {} ms ({missed} heartbeat intervals)", .silent.as_millis())]
    Hung {
        /// How long it was silent.
        silent: Duration,
        /// The intervals that passed without a frame.
        missed: u32,
    },
    /// The attempt took longer than the timeout.
    #[error("the worker timed out after {} ms", .after.as_millis())]
    TimedOut {
        /// The timeout.
        after: Duration,
    },
    /// The worker's events show a call of a tool its policy denies.
    #[error("worker called denied tool {tool}")]
    DeniedTool {
        /// The tool.
        tool: String,
    },
    /// The task was cancelled and the worker did not answer within its grace period.
    #[error("cancelled{}", .reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Cancelled {
        /// Why.
        reason: Option<String>,
    },
    /// An input payload could not be sent.
    #[error("an input could not be sent: {0}")]
    Input(#[source] PayloadError),
    /// An artifact the worker streamed could not be received.
    #[error("an artifact could not be received: {0}")]
    Artifact(#[source] PayloadError),
}

impl AttemptError {
    /// Whether another attempt may do better: crashes, hangs, timeouts and protocol
    /// errors are retried; a policy breach, a cancellation, a program that does not exist
    /// and an unreadable input are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            AttemptError::Spawn { source, .. } => {
                !matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied)
            }
            AttemptError::DeniedTool { .. } | AttemptError::Cancelled { .. } | AttemptError::Input(_) => false,
            AttemptError::Protocol(_)
            | AttemptError::Unexpected(_)
            | AttemptError::Exited { .. }
            | AttemptError::Hung { .. }
            | AttemptError::TimedOut { .. }
            | AttemptError::Artifact(_) => true,
        }
    }
}

/// The end of a worker's stderr, as an error message quotes it.
fn stderr_note(stderr: &str) -> String {
    const QUOTED: usize = 400;
    if stderr.is_empty() {
        return String::new();
    }
    let start = stderr.char_indices().rev().nth(QUOTED).map_or(0, |(i, _)| i);
    let cut = if start > 0 { "…" } else { "" };
    format!("; its stderr ends: {cut}{}", &stderr[start..])
}

/// Why the worker side of the protocol stopped before it could send a result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The coordinator's stream is not a valid frame stream.
    #[error(transparent)]
    Ipc(#[from] IpcError),
    /// The first frame was not a task.
    #[error("expected a task frame first, got {got}")]
    NoTask {
        /// What came instead (`end of input` when nothing did).
        got: String,
    },
    /// The frames could not be written (the coordinator is gone).
    #[error("cannot write to the coordinator: {0}")]
    Write(String),
}
