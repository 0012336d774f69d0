//! Why a run could not be replayed.

/// Why a run could not be replayed. A replay that ran and found the run now decides
/// differently is no error: it is a [`ReplayReport`](crate::ReplayReport) with a
/// [`Divergence`](crate::Divergence).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// No run has this id in the store.
    #[error("no run `{0}` in the store")]
    NotFound(String),
    /// A team's run: its members' runs are replayed one by one.
    #[error("run `{0}` is a team's run; replay its members' runs (`troupe runs list --parent {0}`)")]
    TeamRun(String),
    /// Part of the record could not be read by this version.
    #[error("the {what} of run `{run_id}` cannot be read by this troupe: {reason}")]
    Unreadable {
        /// The run.
        run_id: String,
        /// Which part.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The run was recorded before the requests to the model were digested, so there is
    /// nothing to compare a replay's requests with.
    #[error(
        "run `{run_id}` was recorded by an older troupe that kept no digest of its requests to the model \
         (from model turn {step} on); it can be shown, verified and resumed, but not replayed"
    )]
    NoRequestDigests {
        /// The run.
        run_id: String,
        /// The first turn without a digest.
        step: usize,
    },
    /// The run compacted its conversation before compactions were recorded in full: the
    /// conversation it left is not on record to be put in place.
    #[error(
        "run `{0}` compacted its conversation, recorded by an older troupe that did not keep the conversation \
         each compaction left; it can be shown, verified and resumed, but not replayed"
    )]
    Compacted(String),
    /// A fork at a step before the recorded run's last compaction: the conversation as it
    /// was then is no longer on record.
    #[error(
        "run `{run_id}` compacted its conversation before step {compacted}; its conversation at step {step} is \
         not on record: fork at step {compacted} or later"
    )]
    ForkBeforeCompaction {
        /// The run.
        run_id: String,
        /// The step asked for.
        step: u32,
        /// The step its last compaction came before.
        compacted: u32,
    },
    /// A fork at a step the recorded run did not reach.
    #[error("run `{run_id}` made {steps} model step(s); there is no step {step} to fork at (give 1 to {steps})")]
    NoSuchStep {
        /// The run.
        run_id: String,
        /// The step asked for.
        step: u32,
        /// The steps it made.
        steps: u32,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] troupe_store::StoreError),
    /// The replay's runner refused to start (a tool the agent names is missing, ...).
    #[error("{0}")]
    Runtime(#[from] troupe_runtime::RuntimeError),
}
