//! How a run ended, or stopped for now: [`RunOutcome`].

use crate::approval::ApprovalRequest;
use serde::{Deserialize, Serialize};
use troupe_core::{Budget, FailureCode, RunOutcomeKind};

/// How a run ended, or stopped for now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunOutcome {
    /// The agent answered.
    Completed {
        /// The final answer.
        output: String,
    },
    /// The run waits for decisions nobody is there to give (its signal senders are gone);
    /// its [`RunState`](crate::RunState) can be resumed once they are made.
    Paused {
        /// The calls waiting for approval.
        pending: Vec<ApprovalRequest>,
    },
    /// The run was cancelled.
    Cancelled {
        /// Why, when the canceller said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A budget ran out before the next model call.
    BudgetExceeded {
        /// Which.
        budget: Budget,
    },
    /// The iteration limit was reached before the next model call.
    MaxIterations {
        /// The model calls made.
        iterations: u32,
    },
    /// The model kept stopping at its output limit; the answer is partial.
    Incomplete {
        /// The text produced, joined across the resumed responses.
        partial: String,
    },
    /// The run failed.
    Failed {
        /// What went wrong.
        error: String,
        /// Why, for programs (a model error's [`code`](troupe_model::Error::code), or the
        /// run's own: `store`, `lease_lost`, `unknown_tool`, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<FailureCode>,
    },
}

impl RunOutcome {
    /// The outcome's kind.
    pub fn kind(&self) -> RunOutcomeKind {
        match self {
            RunOutcome::Completed { .. } => RunOutcomeKind::Completed,
            RunOutcome::Paused { .. } => RunOutcomeKind::Paused,
            RunOutcome::Cancelled { .. } => RunOutcomeKind::Cancelled,
            RunOutcome::BudgetExceeded { .. } => RunOutcomeKind::BudgetExceeded,
            RunOutcome::MaxIterations { .. } => RunOutcomeKind::MaxIterations,
            RunOutcome::Incomplete { .. } => RunOutcomeKind::Incomplete,
            RunOutcome::Failed { .. } => RunOutcomeKind::Failed,
        }
    }

    /// Whether the agent finished its task.
    pub fn is_completed(&self) -> bool {
        matches!(self, RunOutcome::Completed { .. })
    }

    /// The answer text the outcome carries: the output, or the partial text.
    pub fn text(&self) -> Option<&str> {
        match self {
            RunOutcome::Completed { output } => Some(output),
            RunOutcome::Incomplete { partial } => Some(partial),
            _ => None,
        }
    }

    /// A failure with a code.
    pub fn failed(error: impl Into<String>, code: impl Into<FailureCode>) -> Self {
        RunOutcome::Failed { error: error.into(), code: Some(code.into()) }
    }
}

/// A sentence a person can read: "the run failed: …", "the run paused waiting for
/// approval of fs.write", …
impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunOutcome::Completed { .. } => f.write_str("the run completed"),
            RunOutcome::Failed { error, code: Some(code) } => write!(f, "the run failed ({code}): {error}"),
            RunOutcome::Failed { error, code: None } => write!(f, "the run failed: {error}"),
            RunOutcome::Cancelled { reason: Some(reason) } => write!(f, "the run was cancelled: {reason}"),
            RunOutcome::Cancelled { reason: None } => f.write_str("the run was cancelled"),
            RunOutcome::BudgetExceeded { budget } => write!(f, "the run stopped: its {budget} budget ran out"),
            RunOutcome::MaxIterations { iterations } => {
                write!(f, "the run stopped after {iterations} model calls, its iteration limit")
            }
            RunOutcome::Incomplete { .. } => {
                f.write_str("the run's answer is incomplete: the model kept stopping at its output limit")
            }
            RunOutcome::Paused { pending } => {
                let tools: Vec<&str> = pending.iter().map(|p| p.tool.as_str()).collect();
                write!(f, "the run paused waiting for approval of {}", tools.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcomes_serialize_tagged_and_know_their_kind() {
        let outcome = RunOutcome::BudgetExceeded { budget: Budget::Usd };
        assert_eq!(
            serde_json::to_value(&outcome).expect("serializes"),
            json!({"type": "budget_exceeded", "budget": "usd"})
        );
        assert_eq!(outcome.kind(), RunOutcomeKind::BudgetExceeded);
        let failed = RunOutcome::failed("boom", "server_error");
        let back: RunOutcome =
            serde_json::from_value(serde_json::to_value(&failed).expect("serializes")).expect("parses");
        assert_eq!(back, failed);
        assert_eq!(RunOutcome::Incomplete { partial: "ab".into() }.text(), Some("ab"));
        assert_eq!(RunOutcome::Cancelled { reason: None }.text(), None);
    }
}
