//! How a run ended ([`RunOutcome`]) and everything it produced ([`RunOutput`]).

use crate::approval::ApprovalRequest;
use crate::cost::ModelCost;
use crate::error::RuntimeError;
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

/// Everything a run produced.
///
/// A run that did not complete is still an `Ok` output of [`Agent::run`](crate::Agent::run)
/// (it paused, failed, ran out of a budget…): [`RunOutput::into_result`] turns every
/// outcome but [`RunOutcome::Completed`] into an error, for callers that want `?` to stop
/// at one.
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
