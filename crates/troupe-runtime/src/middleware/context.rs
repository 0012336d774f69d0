//! What a hook is told about the call it runs around.

use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{RunId, ToolCallId};
use troupe_tools::Effect;

/// A model call, as its hooks see it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ModelCallContext {
    /// The agent making the call.
    pub agent: String,
    /// The run.
    pub run_id: RunId,
    /// The call's number in the run, counting from 1 (it survives a resume).
    pub step: u32,
    /// The model's `provider/model` id (`anthropic/claude-sonnet-4-5`, `demo`).
    pub model: String,
    /// The name of the provider serving it.
    pub provider: String,
    /// Cancelled with the run: a hook that waits should stop when it fires.
    pub cancel: CancellationToken,
    /// `None` in `before_model`; in `after_model`, how long the provider took to stream
    /// the response.
    pub elapsed: Option<Duration>,
}

impl ModelCallContext {
    /// The context of call `step` of `agent`'s run `run_id` on `model`, served by
    /// `provider`; with a fresh cancellation token.
    pub fn new(
        agent: impl Into<String>,
        run_id: RunId,
        step: u32,
        model: impl Into<String>,
        provider: impl Into<String>,
    ) -> Self {
        ModelCallContext {
            agent: agent.into(),
            run_id,
            step,
            model: model.into(),
            provider: provider.into(),
            cancel: CancellationToken::new(),
            elapsed: None,
        }
    }

    /// The same context watching `cancel`.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// A tool call, as its hooks see it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ToolCallContext {
    /// The agent making the call.
    pub agent: String,
    /// The run.
    pub run_id: RunId,
    /// The number of the model call that requested the tool call.
    pub step: u32,
    /// The tool's catalog name, as the model called it.
    pub tool: String,
    /// The model's id for the call.
    pub call_id: ToolCallId,
    /// The tool's declared effect; `None` when the catalog has no such tool.
    pub effect: Option<Effect>,
    /// Cancelled with the run: a hook that waits should stop when it fires.
    pub cancel: CancellationToken,
}

impl ToolCallContext {
    /// The context of call `call_id` of `tool`, requested by model call `step` of
    /// `agent`'s run `run_id`; with a fresh cancellation token and no known effect.
    pub fn new(
        agent: impl Into<String>,
        run_id: RunId,
        step: u32,
        tool: impl Into<String>,
        call_id: impl Into<ToolCallId>,
    ) -> Self {
        ToolCallContext {
            agent: agent.into(),
            run_id,
            step,
            tool: tool.into(),
            call_id: call_id.into(),
            effect: None,
            cancel: CancellationToken::new(),
        }
    }

    /// The same context for a tool of `effect`.
    pub fn with_effect(mut self, effect: Effect) -> Self {
        self.effect = Some(effect);
        self
    }

    /// The same context watching `cancel`.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}
