//! [`Agent`]: a spec bound to a runner, ready to run.

use crate::error::RuntimeError;
use crate::handle::{RunHandle, RunInput};
use crate::metrics::MetricsSnapshot;
use crate::outcome::RunOutput;
use crate::runner::Runner;
use crate::spec::AgentSpec;
use crate::state::RunState;
use std::sync::Arc;

/// A declared agent and the runner that runs it; cheap to clone. Built with
/// [`Engine::agent`](crate::Engine::agent).
#[derive(Clone, Debug)]
pub struct Agent {
    runner: Runner,
    spec: Arc<AgentSpec>,
}

impl Agent {
    /// An agent of `spec` run by `runner`.
    pub fn new(runner: Runner, spec: AgentSpec) -> Self {
        Agent { runner, spec: Arc::new(spec) }
    }

    /// The agent's declaration.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The runner.
    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    /// The agent's metrics so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.runner.metrics().agent(&self.spec.name).snapshot()
    }

    /// Starts a run and returns its handle at once: live events, signals, cancellation
    /// and the result. Must be called inside a Tokio runtime.
    pub fn start(&self, input: impl Into<RunInput>) -> RunHandle {
        self.runner.start(Arc::clone(&self.spec), input.into())
    }

    /// Runs to the end and returns the output.
    ///
    /// Nobody can answer approval requests here: a call that needs one ends the run
    /// [`Paused`](crate::RunOutcome::Paused); use [`start`](Agent::start) to decide them
    /// live, or [`resume`](Agent::resume) the paused state later.
    pub async fn run(&self, input: impl Into<RunInput>) -> Result<RunOutput, RuntimeError> {
        self.start(input).output().await
    }

    /// Continues a run from `state` (see [`Runner::resume`]).
    pub fn resume(&self, state: RunState) -> RunHandle {
        self.runner.resume(Arc::clone(&self.spec), state)
    }

    /// Continues the stored run `run_id` with this agent's spec
    /// ([`Runner::resume_run`]).
    pub async fn resume_run(&self, run_id: &str) -> Result<RunHandle, RuntimeError> {
        self.runner.resume_run(run_id, Some(Arc::clone(&self.spec))).await
    }

    /// Puts a run of this agent in the store's queue for a worker ([`Runner::enqueue`]).
    pub async fn enqueue(&self, input: impl Into<RunInput>) -> Result<troupe_core::RunId, RuntimeError> {
        self.runner.enqueue(&self.spec, input.into()).await
    }
}
