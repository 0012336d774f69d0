//! Everything a run produced: [`RunOutput`].

use crate::cost::ModelCost;
use std::collections::BTreeMap;
use std::time::Duration;
use troupe_core::{AgentEvent, Message, RunId, Usage};
use troupe_run::{RunOutcome, RunState};

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
            run_id: state.run_id().clone(),
            outcome,
            text,
            messages: state.messages().to_vec(),
            usage: state.usage(),
            cost_usd: state.cost_usd(),
            cost_by_model,
            tool_calls: state.tool_calls(),
            duration,
            events,
            state,
        }
    }

    /// What the prompt cache saved over the run, in USD, by the registry's prices (reads at
    /// the cache price instead of the input price, less the write surcharge).
    pub fn cache_saved_usd(&self) -> f64 {
        self.cost_by_model.values().map(|m| m.cache_saved_usd).sum()
    }

    /// Whether the agent finished its task.
    pub fn is_completed(&self) -> bool {
        self.outcome.is_completed()
    }
}
