//! [`TeamError`]: what can go wrong with a team as a whole.
//!
//! A member's failure is not a team error: it is a failed [`MemberResult`](crate::MemberResult)
//! unless the group's [`FailurePolicy`](crate::FailurePolicy) says otherwise.

/// A team-level failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TeamError {
    /// The group is configured inconsistently (no members, an unknown leader, ...).
    #[error("invalid team: {0}")]
    Invalid(String),
    /// A member failed and the group's policy stops the group on failures.
    #[error("member `{member}` failed: {error}")]
    MemberFailed {
        /// The member.
        member: String,
        /// What went wrong.
        error: String,
    },
    /// A team-wide budget (tokens, USD, wall time) ran out.
    #[error("the team's {budget} budget ran out")]
    BudgetExceeded {
        /// Which.
        budget: troupe_core::Budget,
    },
    /// A delegation went back and forth between the same agents too often.
    #[error("delegation loop between `{a}` and `{b}` stopped after {bounces} bounces")]
    DelegationLoop {
        /// One agent.
        a: String,
        /// The other.
        b: String,
        /// How many times it bounced.
        bounces: u32,
    },
    /// Spawning would exceed the recursion limits.
    #[error("spawn refused: {0}")]
    SpawnRefused(String),
    /// The leader's delegation could not be used.
    #[error("the leader's delegation could not be read: {0}")]
    Delegation(String),
    /// The run was cancelled.
    #[error("the team was cancelled")]
    Cancelled,
    /// A runtime error (building an agent, starting a run).
    #[error(transparent)]
    Runtime(#[from] troupe_runtime::RuntimeError),
    /// A store error.
    #[error(transparent)]
    Store(#[from] troupe_store::StoreError),
}
