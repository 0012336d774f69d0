//! [`RuntimeError`]: what can go wrong around a run, as opposed to inside it.
//!
//! Problems *inside* a run (a model error, a budget, a cancellation) end the run with a
//! [`RunOutcome`](crate::RunOutcome); they are not errors of the caller. A `RuntimeError`
//! is a configuration problem found while building an agent, a signal the run cannot take,
//! or a run task that died.

use crate::outcome::RunOutput;

/// A configuration or control problem of the runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The agent names a tool the runner's catalog does not have, or its tools clash.
    #[error("agent `{agent}`: {source}")]
    Catalog {
        /// The agent.
        agent: String,
        /// What is wrong with its tools.
        source: troupe_tools::CatalogError,
    },
    /// The workspace directory cannot be used.
    #[error("bad workspace: {0}")]
    Workspace(troupe_tools::ToolError),
    /// The agent's model could not be resolved (unknown id, missing key, ...).
    #[error("model resolution failed: {0}")]
    Model(#[from] troupe_model::Error),
    /// The agent's spec is inconsistent (an approval rule that can never match, ...).
    #[error("invalid agent spec: {0}")]
    InvalidSpec(String),
    /// The run's state refused a signal (a kind the agent does not accept, a decision
    /// about a call that is not waiting for one).
    #[error(transparent)]
    Signal(troupe_run::SignalError),
    /// The run has finished; it takes no more signals.
    #[error("the run has finished")]
    RunFinished,
    /// The run's task is gone (finished or dropped), so a signal could not be delivered.
    #[error("the run is no longer receiving signals")]
    Disconnected,
    /// Compaction of the conversation failed.
    #[error("compaction failed: {0}")]
    Compaction(String),
    /// The run's task panicked; the panic was contained.
    #[error("the run task failed: {0}")]
    TaskFailed(String),
    /// The run was halted where it stood ([`RunHalt::halt`](crate::RunHalt::halt)), as a
    /// crash would stop it: nothing more was recorded, and a recorded run resumes from its
    /// last checkpoint.
    #[error("the run was halted where it stood; a recorded run resumes from its last checkpoint")]
    Halted,
    /// The store failed or refused an operation.
    #[error(transparent)]
    Store(#[from] troupe_store::StoreError),
    /// The stored run is a team's run: its members' runs are its children, and it is not
    /// resumed as an agent's run.
    #[error("run `{run_id}` is the run of team `{team}`, not an agent's run: it cannot be resumed as one")]
    TeamRun {
        /// The run.
        run_id: String,
        /// Its team.
        team: String,
    },
    /// The operation needs a store and the runner has none ([`Runner::with_store`](crate::Runner::with_store)).
    #[error("this runner records no runs: it has no store")]
    NoStore,
    /// Another process holds the run's lease: it is running the run now.
    #[error("run `{run_id}` is being run by `{owner}`; wait for it, or for its lease to lapse if that process died")]
    RunLeased {
        /// The run.
        run_id: String,
        /// Who holds its lease.
        owner: String,
    },
    /// A schedule's trigger cannot fire.
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),
    /// A plugin cannot be added or set up.
    #[error(transparent)]
    Plugin(#[from] crate::plugin::PluginError),
    /// The run ended without completing ([`RunOutput::into_result`](crate::RunOutput::into_result)):
    /// it failed, paused, was cancelled or ran out of a budget. The whole output is kept:
    /// its outcome, its partial text, its state (a paused run resumes from it).
    #[error(transparent)]
    NotCompleted(RunNotCompleted),
    /// A completed run's answer matched its output schema but not the Rust type asked for
    /// (a schema and a type that disagree).
    #[error("the answer does not decode as the type asked for: {0}")]
    OutputType(String),
}

impl From<troupe_run::SignalError> for RuntimeError {
    fn from(error: troupe_run::SignalError) -> Self {
        match error {
            // A finished run refuses everything alike, stored or in memory.
            troupe_run::SignalError::RunFinished => RuntimeError::RunFinished,
            other => RuntimeError::Signal(other),
        }
    }
}

impl RunOutput {
    /// The output of a completed run, or [`RuntimeError::NotCompleted`] (holding this
    /// whole output, its outcome readable as a sentence) for any other outcome.
    ///
    /// ```
    /// # use troupe_runtime::{Engine, RuntimeError};
    /// # async fn demo() -> Result<(), RuntimeError> {
    /// let agent = Engine::builder().build().agent("helper").model("demo").build()?;
    /// let answer = agent.run("Say hello").await?.into_result()?.text;
    /// # assert!(!answer.is_empty());
    /// # Ok(())
    /// # }
    /// # tokio::runtime::Runtime::new().expect("runtime").block_on(demo()).expect("runs");
    /// ```
    #[allow(clippy::result_large_err)]
    pub fn into_result(self) -> Result<RunOutput, RuntimeError> {
        if self.is_completed() {
            Ok(self)
        } else {
            Err(RuntimeError::NotCompleted(RunNotCompleted { output: Box::new(self) }))
        }
    }
}

/// A run that ended without completing, as an error ([`RunOutput::into_result`]). It
/// reads as its outcome's sentence; its `Debug` shows the run and the outcome, not the
/// whole conversation, which is in `output`.
pub struct RunNotCompleted {
    /// Everything the run produced: its outcome, partial text, usage and state (a paused
    /// run resumes from it).
    pub output: Box<RunOutput>,
}

impl std::fmt::Display for RunNotCompleted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.output.outcome.fmt(f)
    }
}

impl std::fmt::Debug for RunNotCompleted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunNotCompleted")
            .field("run_id", &self.output.run_id)
            .field("outcome", &self.output.outcome)
            .finish_non_exhaustive()
    }
}

impl std::error::Error for RunNotCompleted {}
