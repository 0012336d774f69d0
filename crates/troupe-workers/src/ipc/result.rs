//! [`AgentResult`]: the last frame a worker sends for its task.

use serde::{Deserialize, Serialize};
use troupe_core::{RunId, RunOutcomeKind, Usage};

/// How a worker's task ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    /// The task's id.
    pub task_id: String,
    /// How the run ended (`failed` also for a task that could not start).
    pub status: RunOutcomeKind,
    /// The answer, or the partial text of a run that did not complete.
    #[serde(default)]
    pub output: String,
    /// Structured output: what the worker received (`inputs`), outputs it could not send
    /// (`missing_outputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// Why the task did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the run used.
    #[serde(default)]
    pub metrics: ResultMetrics,
    /// The artifacts streamed before this frame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactRef>,
    /// The worker's run, when it started one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
}

impl AgentResult {
    /// A failed result for `task_id`.
    pub fn failed(task_id: impl Into<String>, error: impl Into<String>) -> Self {
        AgentResult {
            task_id: task_id.into(),
            status: RunOutcomeKind::Failed,
            output: String::new(),
            data: None,
            error: Some(error.into()),
            metrics: ResultMetrics::default(),
            artifacts: Vec::new(),
            run_id: None,
        }
    }

    /// Whether the task completed.
    pub fn is_completed(&self) -> bool {
        self.status == RunOutcomeKind::Completed
    }
}

/// What a worker's run used, and how it was confined.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultMetrics {
    /// Tokens of every model call.
    #[serde(default)]
    pub usage: Usage,
    /// What the run cost, in USD.
    #[serde(default)]
    pub cost_usd: f64,
    /// Tool calls the model made (refused ones included).
    #[serde(default)]
    pub tool_calls: u32,
    /// How long the task took in the worker, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
    /// The worker's peak resident memory (`VmHWM`), in KiB, when the system reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
    /// How the worker was sandboxed, in words (`landlock: enforced …`, `landlock
    /// unavailable: …`).
    #[serde(default)]
    pub sandbox: String,
}

/// An artifact a worker streamed back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// The payload stream it came on.
    pub stream_id: u32,
    /// Its name (a plain file name).
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// Its SHA-256, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}
