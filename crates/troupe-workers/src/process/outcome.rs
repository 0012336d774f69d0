//! What running a task in worker processes gave: [`WorkerOutcome`], one [`AttemptReport`]
//! per process started, and the artifacts received.

use crate::ipc::AgentResult;
use std::path::PathBuf;
use std::time::Duration;
use troupe_team::MemberResult;

/// Everything a task in worker processes came to.
#[derive(Clone, Debug)]
pub struct WorkerOutcome {
    /// The result as a team member's (failed with the last error when no attempt
    /// finished).
    pub member: MemberResult,
    /// The worker's own result, when an attempt got one.
    pub result: Option<AgentResult>,
    /// The artifacts the finishing attempt streamed back.
    pub artifacts: Vec<ReceivedArtifact>,
    /// Each attempt, in order.
    pub attempts: Vec<AttemptReport>,
}

/// One worker process started for a task.
#[derive(Clone, Debug, Default)]
pub struct AttemptReport {
    /// The attempt's number, from 1.
    pub attempt: u32,
    /// The worker's pid (and process group id), once it started.
    pub pid: Option<u32>,
    /// Why the attempt failed; `None` when it got a result.
    pub error: Option<String>,
    /// How the worker exited (`exit code 0`, `killed by signal 9 (SIGKILL)`).
    pub exit: Option<String>,
    /// From spawn to the worker's end.
    pub duration: Duration,
    /// The events it streamed.
    pub events: u64,
    /// The worker's peak resident memory in KiB (`VmHWM`), read by the coordinator from
    /// `/proc/<pid>/status` every 50 ms while the worker ran and when its result arrived:
    /// growth in its last moments may be missed (the worker reports its own at the end
    /// in its result's metrics).
    pub peak_rss_kib: Option<u64>,
}

/// An artifact a worker streamed back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedArtifact {
    /// Its name.
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// Its SHA-256 as received, hex (checked against the worker's); `None` when the task
    /// skipped checksums.
    pub sha256: Option<String>,
    /// Where it was written; `None` when no artifact directory was configured and it was
    /// dropped.
    pub path: Option<PathBuf>,
}
