//! One tool call through the middleware stack, inside its `execute_tool` span.
//!
//! A call is prepared (its `before_tool` hooks: changed arguments or a refusal) and then
//! finished (the catalog runs it, its `after_tool` hooks see the result). The two halves
//! are apart so that a call with side effects has its `action started` evidence written
//! in between, with the arguments the tool really runs with.

use crate::genai;
use crate::middleware::{MiddlewareError, MiddlewareStack, ToolCallContext};
use futures::StreamExt;
use std::time::{Duration, Instant};
use tracing::{Instrument, Span};
use troupe_core::RunId;
use troupe_tools::{ToolCall, ToolCatalog, ToolContext, ToolError, ToolResultOutcome};

/// How the calls of one turn are run.
pub(crate) struct ToolPipeline<'c> {
    pub(crate) catalog: &'c ToolCatalog,
    pub(crate) middleware: MiddlewareStack,
    /// The run's context; each call gets it with its own id.
    pub(crate) ctx: ToolContext,
    pub(crate) agent: String,
    pub(crate) run_id: RunId,
    /// The model call that requested the calls.
    pub(crate) step: u32,
    pub(crate) capture_content: bool,
}

/// A call whose `before_tool` hooks have run.
pub(crate) struct PreparedCall {
    /// The call with the arguments the tool is to run with.
    pub(crate) call: ToolCall,
    /// The result in place of running it, when a hook refused or the run was cancelled.
    pub(crate) refused: Option<ToolResultOutcome>,
    /// What the hooks are told; `None` without middlewares.
    hook: Option<ToolCallContext>,
    span: Span,
    started: Instant,
}

impl ToolPipeline<'_> {
    /// Runs `call`'s `before_tool` hooks in its span; stops them if the run is cancelled.
    pub(crate) async fn prepare(&self, call: &ToolCall) -> PreparedCall {
        let span = genai::tool_span(call);
        let started = Instant::now();
        let mut arguments = call.args.clone();
        let mut refused = None;
        let hook = (!self.middleware.is_empty()).then(|| {
            let mut hook =
                ToolCallContext::new(&self.agent, self.run_id.clone(), self.step, &call.name, call.id.clone())
                    .with_cancel(self.ctx.cancel.clone());
            hook.effect = self.catalog.get(&call.name).map(|t| t.declaration().effect);
            hook
        });
        if let Some(hook) = &hook {
            let cancel = self.ctx.cancel.clone();
            let verdict = async {
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => Err(None),
                    verdict = self.middleware.before_tool(hook, &mut arguments) => verdict.map_err(Some),
                }
            }
            .instrument(span.clone())
            .await;
            refused = match verdict {
                Ok(()) => None,
                Err(None) => Some(ToolResultOutcome::failure(ToolError::Cancelled, started.elapsed())),
                Err(Some(error)) => Some(refusal(&error, started.elapsed())),
            };
        }
        genai::record_tool_arguments(&span, &arguments, self.capture_content);
        PreparedCall {
            call: ToolCall::new(call.id.clone(), call.name.clone(), arguments),
            refused,
            hook,
            span,
            started,
        }
    }

    /// Runs a prepared call (unless refused) and its `after_tool` hooks, in its span.
    pub(crate) async fn finish(&self, prepared: PreparedCall) -> ToolResultOutcome {
        let PreparedCall { call, refused, hook, span, started } = prepared;
        let was_refused = refused.as_ref().is_some_and(|o| o.error.as_ref() != Some(&ToolError::Cancelled));
        let run = async {
            if let Some(outcome) = refused {
                return outcome;
            }
            let ctx = self.ctx.with_call_id(call.id.clone());
            let mut outcome = self.catalog.invoke(&call.name, call.args, &ctx).await;
            if let Some(hook) = &hook
                && let Err(error) = self.middleware.after_tool(hook, &mut outcome).await
            {
                outcome = withheld(&error, started.elapsed());
            }
            outcome
        };
        let outcome = run.instrument(span.clone()).await;
        genai::record_tool_result(&span, &outcome, was_refused, self.capture_content);
        outcome
    }

    /// Prepares and finishes one call.
    pub(crate) async fn run(&self, call: &ToolCall) -> ToolResultOutcome {
        let prepared = self.prepare(call).await;
        self.finish(prepared).await
    }

    /// Runs the calls of one turn, outcomes in the calls' order, as
    /// [`ToolCatalog::run_batch`] does: consecutive read-only calls (and calls of unknown
    /// tools, which fail at once) run concurrently, at most `limit` at a time; any other
    /// call runs alone, after those before it.
    pub(crate) async fn run_batch(&self, calls: &[ToolCall], limit: usize) -> Vec<ToolResultOutcome> {
        let concurrent =
            |call: &ToolCall| self.catalog.get(&call.name).is_none_or(|tool| tool.declaration().is_read_only());
        let mut outcomes = Vec::with_capacity(calls.len());
        let mut start = 0;
        while start < calls.len() {
            if !concurrent(&calls[start]) {
                outcomes.push(self.run(&calls[start]).await);
                start += 1;
                continue;
            }
            let end = calls[start..].iter().position(|c| !concurrent(c)).map_or(calls.len(), |offset| start + offset);
            // Collected first: a stream holding the mapping closure makes this future
            // impossible to prove `Send` inside a spawned task (a higher-ranked lifetime).
            let pending: Vec<_> = calls[start..end].iter().map(|call| self.run(call)).collect();
            outcomes.extend(futures::stream::iter(pending).buffered(limit.max(1)).collect::<Vec<_>>().await);
            start = end;
        }
        outcomes
    }
}

/// The result the model reads for a call a middleware refused.
fn refusal(error: &MiddlewareError, elapsed: Duration) -> ToolResultOutcome {
    let outcome = match error {
        MiddlewareError::Cancelled { .. } => ToolError::Cancelled,
        MiddlewareError::Refused { middleware, reason } => {
            ToolError::Denied { reason: format!("{reason} ({middleware})") }
        }
    };
    ToolResultOutcome::failure(outcome, elapsed)
}

/// The result the model reads for a call whose result a middleware withheld.
fn withheld(error: &MiddlewareError, elapsed: Duration) -> ToolResultOutcome {
    let message = match error {
        MiddlewareError::Refused { middleware, reason } => {
            format!(
                "the tool ran, but its result was withheld by `{middleware}`: {reason}. Do not ask for the same data again."
            )
        }
        MiddlewareError::Cancelled { .. } => {
            "the tool ran, but the run was cancelled before its result was kept".to_owned()
        }
    };
    ToolResultOutcome::failure(ToolError::Failed { message }, elapsed)
}
