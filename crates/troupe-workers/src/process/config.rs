//! [`WorkerConfig`]: how a worker process is started, watched and retried.

use super::model_host::ModelHost;
use crate::ipc::ToolPolicy;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use troupe_store::Store;

/// The variables a worker inherits unless told otherwise: `PATH` only, so that the
/// agent's shell and git tools find their programs. Nothing else of the coordinator's
/// environment (API keys, tokens, `HOME`) reaches a worker unless granted.
pub const DEFAULT_INHERITED_ENV: &[&str] = &["PATH"];

/// How a worker process is started, watched and retried.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The program.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its working directory (where a `troupe` worker reads `troupe.toml`); the
    /// coordinator's when `None`.
    pub working_dir: Option<PathBuf>,
    /// Variables the worker gets with these exact values.
    pub env: Vec<(OsString, OsString)>,
    /// Variables the worker gets from the coordinator's environment, when set there
    /// (default: [`DEFAULT_INHERITED_ENV`]). Everything else is cleared.
    pub inherit_env: Vec<OsString>,
    /// The longest one attempt may take, from spawn to result.
    pub timeout: Duration,
    /// How often each side sends a heartbeat.
    pub heartbeat_interval: Duration,
    /// How many intervals without any frame make a worker hung.
    pub missed_heartbeats: u32,
    /// How many times the task is tried (at least 1) when a worker crashes, hangs, times
    /// out or breaks the protocol.
    pub max_attempts: u32,
    /// The wait before each retry.
    pub backoff: Backoff,
    /// The tools the worker's agent may call, enforced inside the worker (its catalog) and
    /// again here (its event stream).
    pub tool_policy: ToolPolicy,
    /// Where artifacts the worker streams back are written (`<dir>/<name>`); without one,
    /// they are counted and dropped.
    pub artifact_dir: Option<PathBuf>,
    /// How long a cancelled worker has to send its result before it is killed.
    pub cancel_grace: Duration,
    /// What the worker's calls that need approval do (its team's mode); `None`: they end
    /// its task paused, as nobody can be asked from a worker.
    pub approvals: Option<crate::build::Approvals>,
    /// How the commands the worker's agent runs are confined (its team's choice); `None`:
    /// as the worker's own agent file and `troupe.toml` say.
    pub sandbox: Option<troupe_sandbox::SandboxSettings>,
    /// Where a worker's run is recorded ([`WorkerConfig::record_in`]); `None`: it is not,
    /// and a worker started again for a task starts its run over.
    pub record: Option<RecordStore>,
    /// The models the coordinator calls for its workers ([`WorkerConfig::host_models`]);
    /// `None`: a worker calls its model itself, with a key it must be granted.
    pub models: Option<Arc<ModelHost>>,
}

/// Set (to `1`) in the environment of a worker whose models its coordinator hosts: it
/// needs no network, and `troupe agent run --worker` confines itself without one.
pub const OFFLINE_ENV: &str = "TROUPE_WORKER_OFFLINE";

/// The coordinator's store that its workers record their runs in.
#[derive(Clone)]
pub struct RecordStore(pub Arc<dyn Store>);

impl std::fmt::Debug for RecordStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RecordStore").field(&self.0.info()).finish()
    }
}

impl WorkerConfig {
    /// Runs `command` with the defaults: `PATH` inherited, a 10-minute timeout, heartbeats
    /// every second (5 missed make a hang), 2 attempts, every tool allowed.
    pub fn new(command: impl Into<PathBuf>) -> Self {
        WorkerConfig {
            command: command.into(),
            args: Vec::new(),
            working_dir: None,
            env: Vec::new(),
            inherit_env: DEFAULT_INHERITED_ENV.iter().map(OsString::from).collect(),
            timeout: Duration::from_secs(600),
            heartbeat_interval: Duration::from_secs(1),
            missed_heartbeats: 5,
            max_attempts: 2,
            backoff: Backoff::default(),
            tool_policy: ToolPolicy::default(),
            artifact_dir: None,
            cancel_grace: Duration::from_secs(2),
            approvals: None,
            sandbox: None,
            record: None,
            models: None,
        }
    }

    /// The `troupe` binary at `binary` as a worker in `workspace`:
    /// `troupe agent run --worker --workspace DIR`.
    pub fn troupe(binary: impl Into<PathBuf>, workspace: impl AsRef<Path>) -> Self {
        WorkerConfig::new(binary).args(["agent", "run", "--worker", "--workspace"]).arg(workspace.as_ref())
    }

    /// The running executable (the `troupe` binary, when the coordinator is `troupe`) as a
    /// worker in `workspace`; fails when the executable's path cannot be found.
    pub fn this_troupe(workspace: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(WorkerConfig::troupe(std::env::current_exe()?, workspace))
    }

    /// Also passes `--agent-file PATH` (for a `troupe` worker).
    pub fn agent_file(self, path: impl AsRef<Path>) -> Self {
        self.arg("--agent-file").arg(path.as_ref())
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets the working directory.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// Grants `name` with `value`.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Grants `name` with the coordinator's value, when it has one.
    pub fn inherit_env(mut self, name: impl Into<OsString>) -> Self {
        self.inherit_env.push(name.into());
        self
    }

    /// Inherits nothing, not even `PATH`.
    pub fn clear_inherited_env(mut self) -> Self {
        self.inherit_env.clear();
        self
    }

    /// Sets the timeout of one attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the heartbeat interval and how many missed ones make a hang.
    pub fn heartbeat(mut self, interval: Duration, missed: u32) -> Self {
        self.heartbeat_interval = interval;
        self.missed_heartbeats = missed.max(1);
        self
    }

    /// Sets how many times a task is tried.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Sets the wait before retries.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets the tool policy.
    pub fn tool_policy(mut self, policy: ToolPolicy) -> Self {
        self.tool_policy = policy;
        self
    }

    /// Makes the worker's calls that need approval do as `approvals` says.
    pub fn approvals(mut self, approvals: crate::build::Approvals) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// Confines the commands the worker's agent runs as `sandbox` says, whatever the
    /// worker's own files say.
    pub fn sandbox(mut self, sandbox: troupe_sandbox::SandboxSettings) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Writes artifacts under `dir`.
    pub fn artifact_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.artifact_dir = Some(dir.into());
        self
    }

    /// Records each task's run in `store`, through the worker protocol (the worker holds
    /// no database): checkpoints, evidence and signals, as a run of this process would.
    /// A worker that crashes, hangs or is killed mid-task is started again on the same
    /// run, which resumes from its last checkpoint: a side effect it completed is not
    /// repeated. The worker can reach its task's run and the runs it creates, nothing else.
    pub fn record_in(mut self, store: Arc<dyn Store>) -> Self {
        self.record = Some(RecordStore(store));
        self
    }

    /// Makes the workers' model calls here, through `host`: a worker's agent calls its
    /// model through the protocol, the coordinator calls the provider with its own key and
    /// HTTP client (no key needs granting, and none reaches the worker) and refuses a
    /// call once a metered host's budget is spent. The worker is told it needs no network
    /// ([`OFFLINE_ENV`]). A task's model must be one the host
    /// serves; a host that cannot serve its models (a key not set) fails the task before
    /// any worker starts.
    pub fn host_models(mut self, host: ModelHost) -> Self {
        self.models = Some(Arc::new(host));
        // troupe's worker then confines itself without the network; another program may
        // ignore it.
        self.env(OFFLINE_ENV, "1")
    }

    /// Sets how long a cancelled worker has to answer.
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// How long a worker may stay silent before it counts as hung.
    pub fn silence_limit(&self) -> Duration {
        self.heartbeat_interval.saturating_mul(self.missed_heartbeats.max(1))
    }

    /// The environment the worker starts with: the granted values, then the inherited ones
    /// the coordinator has (a granted value wins).
    pub fn worker_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.env.clone();
        for name in &self.inherit_env {
            if env.iter().any(|(n, _)| n == name) {
                continue;
            }
            if let Some(value) = std::env::var_os(name) {
                env.push((name.clone(), value));
            }
        }
        env
    }
}

/// Exponential backoff between attempts: `initial`, doubled each time, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(5) }
    }
}

impl Backoff {
    /// No wait between attempts.
    pub fn none() -> Self {
        Backoff { initial: Duration::ZERO, max: Duration::ZERO }
    }

    /// The wait before retry `retry` (1 for the first).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.saturating_sub(1)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}
