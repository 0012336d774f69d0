//! How a run ended ([`RunOutcome`]) and everything it produced ([`RunOutput`]).

use crate::approval::ApprovalRequest;
use crate::cost::ModelCost;
use crate::state::RunState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use troupe_core::{AgentEvent, Budget, FailureCode, Message, RunId, RunOutcomeKind, Usage};

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
    /// its [`RunState`] can be resumed once they are made.
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

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The run.
    pub run_id: RunId,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The answer: the output of a completed run, the partial text of an incomplete one,
    /// otherwise the text of the last model response.
    pub text: String,
    /// The whole conversation, the prompt included.
    pub messages: Vec<Message>,
    /// Tokens used by every model call.
    pub usage: Usage,
    /// What the run cost, by the registry's prices (unpriced models count 0).
    pub cost_usd: f64,
    /// Cost and usage per model.
    pub cost_by_model: BTreeMap<String, ModelCost>,
    /// Tool calls the model made (refused ones included).
    pub tool_calls: u32,
    /// How long the run took.
    pub duration: Duration,
    /// Every event the run emitted, in order (empty when the runner keeps none).
    pub events: Vec<AgentEvent>,
    /// The run's final state: a paused run resumes from it.
    pub state: RunState,
}

impl RunOutput {
    /// The output of a run that ended with `outcome` in `state`: its answer is the
    /// outcome's text, else the last model response's.
    pub(crate) fn ended(
        state: RunState,
        outcome: RunOutcome,
        cost_by_model: BTreeMap<String, ModelCost>,
        duration: Duration,
        events: Vec<AgentEvent>,
    ) -> Self {
        let text = outcome.text().map_or_else(|| state.last_assistant_text(), str::to_owned);
        RunOutput {
            run_id: state.run_id.clone(),
            outcome,
            text,
            messages: state.messages.clone(),
            usage: state.usage,
            cost_usd: state.cost_usd,
            cost_by_model,
            tool_calls: state.tool_calls,
            duration,
            events,
            state,
        }
    }

    /// Whether the agent finished its task.
    pub fn is_completed(&self) -> bool {
        self.outcome.is_completed()
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
