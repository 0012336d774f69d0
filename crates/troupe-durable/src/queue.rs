//! [`QueueWorker`]: claims queued runs from a shared store and runs them; any number of
//! workers, on any number of machines, may share one store.
//!
//! A claimed run is held by a lease the run renews while it works. A worker that dies
//! stops renewing; once the lease lapses another worker claims the run and resumes it
//! from its last boundary. A run that needs a person pauses and leaves the queue; the
//! person's decision (a stored signal) puts it back.

use crate::schedule::fire_due;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use troupe_runtime::RunOutput;
use troupe_runtime::Runner;
use troupe_runtime::RuntimeError;
use troupe_store::{Lease, RunRecord, RunStatus, now_millis};

/// The tracing target of a worker's events (`claimed`, `run ended`, with the run's id and
/// outcome as fields): what a program follows to report a worker's claims.
pub const TRACING_TARGET: &str = module_path!();

/// Runs claimed runs that are not an agent's (a team's own run), for a [`QueueWorker`]
/// whose runner cannot: the worker hands over the lease, which the run renews while it
/// works and releases when it ends.
pub trait ClaimedRuns: Send + Sync {
    /// Whether the stored run `record` is one of those.
    fn takes(&self, record: &RunRecord) -> bool;

    /// Runs the claimed run to its outcome, as stored.
    fn run(&self, lease: Lease) -> BoxFuture<'static, Result<RunStatus, RuntimeError>>;
}

/// How a claimed run ended: its id, whether it completed, its outcome in a word.
type Ended = (String, bool, String);

/// How long an idle worker waits before looking at the queue again, by default.
pub const DEFAULT_IDLE_POLL: Duration = Duration::from_millis(500);

/// What a worker did before it stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Runs claimed and run to an outcome (a pause included).
    pub runs: u32,
    /// Of those, the ones that completed.
    pub completed: u32,
    /// Schedule ticks this worker fired.
    pub fired: u32,
}

/// Claims queued runs and runs them.
#[derive(Clone)]
pub struct QueueWorker {
    runner: Runner,
    concurrency: usize,
    idle_poll: Duration,
    schedules: bool,
    others: Option<Arc<dyn ClaimedRuns>>,
}

impl std::fmt::Debug for QueueWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueWorker")
            .field("concurrency", &self.concurrency)
            .field("idle_poll", &self.idle_poll)
            .field("schedules", &self.schedules)
            .field("others", &self.others.is_some())
            .finish_non_exhaustive()
    }
}

impl QueueWorker {
    /// A worker running claimed runs on `runner`, whose store it takes them from (it
    /// must have one: [`Runner::with_store`]).
    pub fn new(runner: Runner) -> Result<Self, RuntimeError> {
        if runner.durability().is_none() {
            return Err(RuntimeError::NoStore);
        }
        Ok(QueueWorker { runner, concurrency: 4, idle_poll: DEFAULT_IDLE_POLL, schedules: true, others: None })
    }

    /// Claimed runs that `others` takes (a team's) are run by it instead of the runner.
    pub fn with_claimed_runs(mut self, others: Arc<dyn ClaimedRuns>) -> Self {
        self.others = Some(others);
        self
    }

    /// Starts the claimed run of `lease`: by `others` when it takes it, else by the runner.
    async fn start(&self, lease: Lease) -> Result<BoxFuture<'static, Result<Ended, RuntimeError>>, RuntimeError> {
        if let Some(others) = &self.others {
            let durability = self.runner.durability().ok_or(RuntimeError::NoStore)?;
            let record = durability.store().load_run(&lease.run_id).await?;
            if record.as_ref().is_some_and(|r| others.takes(r)) {
                let run_id = lease.run_id.clone();
                let run = others.run(lease);
                return Ok(Box::pin(async move {
                    let status = run.await?;
                    Ok((run_id, status == RunStatus::Completed, status.as_str().to_owned()))
                }));
            }
        }
        let handle = self.runner.resume_leased(lease, None).await?;
        Ok(Box::pin(async move {
            let output: RunOutput = handle.output().await?;
            Ok((output.run_id.to_string(), output.is_completed(), format!("{:?}", output.outcome.kind())))
        }))
    }

    /// Runs at most `n` runs at once (0 counts as 1).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Looks at an empty queue again every `every`.
    pub fn with_idle_poll(mut self, every: Duration) -> Self {
        self.idle_poll = every.max(Duration::from_millis(5));
        self
    }

    /// Whether the worker also fires due schedules (the default).
    pub fn with_schedules(mut self, on: bool) -> Self {
        self.schedules = on;
        self
    }

    /// Claims one queued run and runs it to its outcome; `None` when the queue is empty.
    pub async fn run_one(&self) -> Result<Option<RunOutput>, RuntimeError> {
        let durability = self.runner.durability().ok_or(RuntimeError::NoStore)?;
        let Some(lease) = durability.store().claim(durability.owner(), durability.lease_ttl(), now_millis()).await?
        else {
            return Ok(None);
        };
        let handle = self.runner.resume_leased(lease, None).await?;
        Ok(Some(handle.output().await?))
    }

    /// Works until `shutdown` is cancelled; then claims nothing more and waits for the
    /// runs in hand to reach their outcome.
    pub async fn run_until(&self, shutdown: CancellationToken) -> Result<WorkerReport, RuntimeError> {
        let durability = self.runner.durability().ok_or(RuntimeError::NoStore)?.clone();
        let mut report = WorkerReport::default();
        let mut running: JoinSet<Result<Ended, RuntimeError>> = JoinSet::new();
        while !shutdown.is_cancelled() {
            if self.schedules {
                match fire_due(durability.store().as_ref(), now_millis()).await {
                    Ok(fired) => report.fired += u32::try_from(fired.len()).unwrap_or(u32::MAX),
                    Err(error) => tracing::warn!(%error, "could not fire due schedules"),
                }
            }
            while running.len() < self.concurrency {
                let claimed = durability.store().claim(durability.owner(), durability.lease_ttl(), now_millis()).await;
                let lease = match claimed {
                    Ok(Some(lease)) => lease,
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(%error, "could not claim a run");
                        break;
                    }
                };
                let run_id = lease.run_id.clone();
                match self.start(lease).await {
                    Ok(run) => {
                        tracing::info!(run = %run_id, "claimed");
                        running.spawn(run);
                    }
                    Err(error) => tracing::warn!(run = %run_id, %error, "a claimed run could not be resumed"),
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => {}
                Some(done) = running.join_next(), if !running.is_empty() => tally(&mut report, done),
                () = tokio::time::sleep(self.idle_poll) => {}
            }
        }
        while let Some(done) = running.join_next().await {
            tally(&mut report, done);
        }
        Ok(report)
    }
}

fn tally(report: &mut WorkerReport, done: Result<Result<Ended, RuntimeError>, tokio::task::JoinError>) {
    match done {
        Ok(Ok((run_id, completed, outcome))) => {
            report.runs += 1;
            report.completed += u32::from(completed);
            tracing::info!(run = %run_id, outcome = %outcome, "run ended");
        }
        Ok(Err(error)) => tracing::warn!(%error, "a run failed to finish"),
        Err(error) => tracing::warn!(%error, "a run task failed"),
    }
}
