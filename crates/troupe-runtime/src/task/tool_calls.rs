//! A run's tool calls: through the middleware pipeline, under the run's cancellation
//! and deadline, and (with a store) between their evidence entries.

use super::Run;
use crate::durable::{ActionCompleted, ActionStarted};
use crate::tool_pipeline::ToolPipeline;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_run::RunState;
use troupe_run::machine::{Input, ToolBatch};
use troupe_store::NewEvidence;
use troupe_tools::{ToolCall, ToolCatalog, ToolContext, ToolDeclaration, ToolResultOutcome};

impl Run {
    /// Runs one batch the state scheduled (read-only calls together; a call with side
    /// effects alone, between its `action started` and its completion); on the deadline,
    /// cancels the batch and keeps what the tools report. `None` when the store failed
    /// before the call could start.
    pub(super) async fn run_tools(&mut self, state: &mut RunState, batch: ToolBatch) -> Option<Input> {
        let tools = Arc::clone(&self.tools);
        let declaration = batch
            .side_effect
            .then(|| batch.calls.first().and_then(|call| tools.get(&call.name)))
            .flatten()
            .map(|t| t.declaration().clone());
        let (outcomes, timed_out, completions) = match (&declaration, batch.calls.first()) {
            (Some(declaration), Some(call)) => self.run_recorded(state, &tools, call, declaration).await?,
            _ => {
                let (outcomes, timed_out) = self.run_group(state, &tools, &batch.calls).await;
                (outcomes, timed_out, Vec::new())
            }
        };
        let results = batch.calls.iter().map(|c| c.id.clone()).zip(outcomes).collect();
        Some(Input::ToolsFinished { results, timed_out, completions })
    }

    /// Runs one call with side effects between its evidence entries: its `before_tool`
    /// hooks first, so that `action started` records the arguments the tool runs with
    /// (a refused call never starts), then the tool and its `after_tool` hooks, so that
    /// `action completed` records the result the model sees. Returns the outcome, whether
    /// the deadline passed, and the completion entry; `None` when the store failed.
    async fn run_recorded(
        &mut self,
        state: &mut RunState,
        catalog: &ToolCatalog,
        call: &ToolCall,
        declaration: &ToolDeclaration,
    ) -> Option<(Vec<ToolResultOutcome>, bool, Vec<NewEvidence>)> {
        let (pipeline, cancel) = self.pipeline(state, catalog);
        let (prepared, mut timed_out) = bounded(self.deadline, &cancel, pipeline.prepare(call)).await;
        let runs = prepared.refused.is_none();
        if runs {
            let args = &prepared.call.args;
            let idempotency = catalog.get(&call.name).map_or(declaration.idempotency, |tool| tool.idempotency(args));
            let started = ActionStarted::of_call(call.id.as_str(), declaration, idempotency, args);
            // What allowed the call (an approval, an always-allow) must be on record with
            // its start: else a resume would apply the decision again to a call that may
            // have happened, instead of asking a person.
            let seq = self.emitter.next_seq();
            if let Err(error) = self.recorder.action_started(state, started, seq).await {
                self.store_failed(state, error);
                return None;
            }
        }
        let (outcome, late) = bounded(self.deadline, &cancel, pipeline.finish(prepared)).await;
        timed_out |= late;
        let completions =
            if runs { vec![ActionCompleted::of_outcome(call.id.as_str(), declaration, &outcome)] } else { Vec::new() };
        Some((vec![outcome], timed_out, completions))
    }

    /// Runs `calls` as one batch under the run's cancellation; on the deadline, cancels
    /// the batch and keeps what the tools report. Returns the outcomes and whether the
    /// deadline passed.
    async fn run_group(
        &self,
        state: &RunState,
        catalog: &ToolCatalog,
        calls: &[ToolCall],
    ) -> (Vec<ToolResultOutcome>, bool) {
        let (pipeline, cancel) = self.pipeline(state, catalog);
        bounded(self.deadline, &cancel, pipeline.run_batch(calls, self.tool_concurrency)).await
    }

    /// How this turn's tool calls run: under a child of the run's cancellation (returned,
    /// for the deadline to trip), through the middleware stack.
    fn pipeline<'c>(&self, state: &RunState, catalog: &'c ToolCatalog) -> (ToolPipeline<'c>, CancellationToken) {
        let cancel = self.cancel.child_token();
        let ctx = ToolContext::new(Arc::clone(&self.workspace))
            .with_cancel(cancel.clone())
            .for_run(self.emitter.run_id().clone(), self.spec.name.clone());
        let pipeline = ToolPipeline {
            catalog,
            middleware: self.middleware.clone(),
            ctx,
            agent: self.spec.name.clone(),
            run_id: state.run_id().clone(),
            step: state.iteration(),
            capture_content: self.capture_content,
        };
        (pipeline, cancel)
    }
}

/// Awaits `work`; once `deadline` passes, trips `cancel` and awaits what `work` makes of
/// that. Returns the output and whether the deadline passed.
async fn bounded<F: std::future::Future>(
    deadline: Option<Instant>,
    cancel: &CancellationToken,
    work: F,
) -> (F::Output, bool) {
    let mut work = std::pin::pin!(work);
    match deadline {
        None => (work.await, false),
        Some(deadline) => match tokio::time::timeout_at(deadline, work.as_mut()).await {
            Ok(output) => (output, false),
            Err(_) => {
                cancel.cancel();
                (work.await, true)
            }
        },
    }
}
