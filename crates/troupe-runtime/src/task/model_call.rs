//! A run's model calls: compaction, the middlewares' hooks, the `chat` span, the
//! stream projected live, pricing, and the response fed to the state.
//!
//! An answer that breaks off mid-stream (the connection drops, the stream ends before its
//! end marker, the provider fails after its first events) is asked for again from the
//! start, up to [`STREAM_RESTARTS`] times: the broken-off part is closed on the live
//! stream (its message ended, its tool calls answered "not run"), a `Retrying` event
//! says why, and the new answer comes as a new message. Nothing of the broken-off part
//! reaches the conversation or the record; its tokens are counted. (A failure before any
//! output is the provider's to retry, by its retry policy.)

use super::Run;
use crate::compaction::CompactionContext;
use crate::durable::ModelTurn;
use crate::genai;
use crate::live::{Translator, until};
use crate::middleware::{MiddlewareError, ModelCallContext};
use futures::StreamExt;
use tracing::Instrument;
use troupe_core::FailureCode;
use troupe_core::{AgentEventKind, ModelRequest, Role, Usage};
use troupe_model::{ModelResponse, ResolvedModel, StreamAccumulator};
use troupe_run::RunState;
use troupe_run::machine::Input;

/// How many times a model call whose answer broke off mid-stream is asked again.
pub const STREAM_RESTARTS: u32 = 2;

/// The wait before the first restart of a broken-off answer; doubled for each next one.
const RESTART_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

/// Why a model call ended without a response.
enum Interrupted {
    Cancelled,
    TimedOut,
    Failed(troupe_model::Error),
}

impl Interrupted {
    /// The chat span's `error.type`.
    fn error_type(&self) -> &'static str {
        match self {
            Interrupted::Cancelled => "cancelled",
            Interrupted::TimedOut => "timeout",
            Interrupted::Failed(error) => error.code(),
        }
    }
}

impl Run {
    /// Calls the model; returns what came of it for the state (the response, or why there
    /// is none), `None` when the run was cancelled (the next boundary takes the signal).
    pub(super) async fn call_model(
        &mut self,
        state: &mut RunState,
        model: &ResolvedModel,
        mut request: ModelRequest,
    ) -> Option<Input> {
        self.close_step().await;
        self.step += 1;
        self.open_step = Some(self.step);
        self.emitter.emit(AgentEventKind::StepStarted { step: self.step }).await;
        if let Some(compactor) = self.compactor.clone() {
            let before = state.messages().len();
            // The conversation is taken out to be compacted and given back to the state.
            let mut messages = state.take_messages();
            let context = CompactionContext {
                model,
                last_usage: state.last_usage(),
                // The previous request sent everything before the response it got.
                last_request_messages: messages.iter().rposition(|m| m.role == Role::Assistant),
                iteration: state.iteration(),
                cancel: &self.cancel,
                request: &request,
                resolver: self.resolver.as_ref(),
            };
            // A recorded run keeps the conversation as it was, to put on record the results
            // of the calls a compaction drops: a replay answers those calls from them. (A
            // copy per model call, as the request's own encoding of the whole conversation.)
            let uncompacted = self.recorder.records().then(|| messages.clone());
            let compacted = compactor.compact_with_report(&mut messages, context).await;
            let results = match (&compacted, uncompacted) {
                (Ok(Some(_)), Some(uncompacted)) => Some(troupe_run::tool_results(&uncompacted)),
                _ => None,
            };
            // A conversation the compactor says it left alone is not written again.
            let given_back =
                if matches!(compacted, Ok(None)) { Input::Uncompacted(messages) } else { Input::Compacted(messages) };
            self.learn(state, given_back);
            match compacted {
                Ok(None) => {}
                Ok(Some(report)) => {
                    request.messages = state.messages().to_vec();
                    self.announced = state.messages().len();
                    for call in &report.auxiliary {
                        self.costs.record_priced(&call.model, &call.usage, call.cost_usd);
                        let (model, usage, cost_usd) = (call.model.clone(), call.usage, call.cost_usd);
                        self.emitter.emit(AgentEventKind::Usage { model, usage, cost_usd }).await;
                        // The run's totals grow, but `last_usage` keeps measuring the conversation.
                        let cost_usd = call.cost_usd.unwrap_or(0.0);
                        self.learn(state, Input::Billed { usage: call.usage, cost_usd, of_conversation: false });
                    }
                    let value = serde_json::json!({
                        "messages_before": before,
                        "messages_after": state.messages().len(),
                        "report": serde_json::to_value(&report).unwrap_or_default(),
                    });
                    // On record with the next save, with the conversation it left: a resume,
                    // a replay and an audit can tell the conversation was compacted here.
                    // The conversation it left and the results it may have dropped go on
                    // record too (not in the event): a replay substitutes the compaction.
                    let mut entry = value.clone();
                    entry["step"] = serde_json::json!(self.step);
                    entry["conversation"] = serde_json::to_value(state.messages()).unwrap_or_default();
                    entry["results"] = serde_json::to_value(results.unwrap_or_default()).unwrap_or_default();
                    self.recorder
                        .note_turn(troupe_store::NewEvidence::new(troupe_store::EvidenceKind::ContextDigest, entry));
                    self.emitter.emit(AgentEventKind::Custom { name: "compacted".into(), value }).await;
                }
                Err(error) => {
                    return Some(Input::Failed { error: error.to_string(), code: FailureCode::Compaction });
                }
            }
        }
        // Without middlewares, no context is made: the loop pays nothing for them.
        let mut hook = (!self.middleware.is_empty()).then(|| {
            ModelCallContext::new(
                &self.spec.name,
                state.run_id().clone(),
                state.iteration(),
                &model.id,
                model.provider.name(),
            )
            .with_cancel(self.cancel.clone())
        });
        if let Some(hook) = &hook
            && let Err(stopped) = self.before_model(hook, &mut request).await
        {
            return stopped;
        }
        let span = genai::chat_span(model.provider.name(), &request, self.capture_content);
        let mut priced_as = model.clone();
        let mut partial = Usage::default();
        let streaming = std::time::Instant::now();
        let mut restarts = 0;
        let (result, mut translator) = loop {
            let message_id = match restarts {
                0 => format!("{}-m{}", state.run_id(), self.step),
                n => format!("{}-m{}.{n}", state.run_id(), self.step),
            };
            let mut translator = Translator::new(message_id);
            let mut answered = false;
            let result = self
                .stream(model, &request, &mut translator, &mut priced_as, &mut partial, &mut answered)
                .instrument(span.clone())
                .await;
            let error = match result {
                Err(Interrupted::Failed(error)) if answered && error.is_retryable() && restarts < STREAM_RESTARTS => {
                    error
                }
                other => break (other, translator),
            };
            restarts += 1;
            let mut out = Vec::new();
            translator.abort("the answer broke off and the model is asked again", &mut out);
            self.emitter.emit_all(out).await;
            if !partial.is_empty() {
                // The broken-off part was billed.
                let cost_usd = self.price(&priced_as, partial).await;
                self.learn(state, Input::Billed { usage: partial, cost_usd, of_conversation: true });
                partial = Usage::default();
            }
            let delay = RESTART_DELAY * 2u32.pow(restarts - 1);
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            let reason = error.to_string();
            self.emitter.emit(AgentEventKind::Retrying { attempt: restarts, delay_ms, reason }).await;
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => break (Err(Interrupted::Cancelled), Translator::new(String::new())),
                () = until(self.deadline) => break (Err(Interrupted::TimedOut), Translator::new(String::new())),
                () = tokio::time::sleep(delay) => {}
            }
        };
        let mut out = Vec::new();
        match result {
            Ok(mut response) => {
                let kept = match &mut hook {
                    None => Ok(()),
                    Some(hook) => {
                        hook.elapsed = Some(streaming.elapsed());
                        self.middleware.after_model(hook, &mut response).instrument(span.clone()).await
                    }
                };
                genai::record_response(&span, &response, &priced_as.model, self.capture_content);
                if let Err(error) = kept {
                    genai::record_error(&span, error.code());
                    translator.abort(&format!("the response was not kept ({error})"), &mut out);
                    self.emitter.emit_all(out).await;
                    let cost_usd = self.price(&priced_as, response.usage).await;
                    self.learn(state, Input::Billed { usage: response.usage, cost_usd, of_conversation: true });
                    return self.stop_for(state.run_id(), error);
                }
                translator.finish(&mut out);
                self.emitter.emit_all(out).await;
                let cost_usd = self.price(&priced_as, response.usage).await;
                if self.recorder.is_on() {
                    self.recorder.note_turn(ModelTurn::evidence_of(
                        state.iteration(),
                        &priced_as.id,
                        &response.message,
                        &response.stop_reason,
                        response.usage,
                        cost_usd,
                        self.digester.digest(&request),
                    ));
                }
                Some(Input::ModelResponded { response, cost_usd })
            }
            Err(interrupted) => {
                genai::record_error(&span, interrupted.error_type());
                genai::record_usage(&span, &partial);
                let why = match &interrupted {
                    Interrupted::Cancelled => "the run was cancelled".to_owned(),
                    Interrupted::TimedOut => "the run ran out of time".to_owned(),
                    Interrupted::Failed(error) => format!("the model response failed ({error})"),
                };
                translator.abort(&why, &mut out);
                self.emitter.emit_all(out).await;
                if !partial.is_empty() {
                    let cost_usd = self.price(&priced_as, partial).await;
                    self.learn(state, Input::Billed { usage: partial, cost_usd, of_conversation: true });
                }
                match interrupted {
                    // The next boundary takes the cancel signal (and its reason) first.
                    Interrupted::Cancelled => None,
                    Interrupted::TimedOut => Some(Input::DeadlinePassed),
                    Interrupted::Failed(error) => {
                        Some(Input::Failed { error: error.to_string(), code: error.code().into() })
                    }
                }
            }
        }
    }

    /// Runs the `before_model` hooks under the run's cancellation and deadline; `Err` with
    /// what stopped the call, when one did.
    async fn before_model(&self, hook: &ModelCallContext, request: &mut ModelRequest) -> Result<(), Option<Input>> {
        let stack = self.middleware.clone();
        let verdict = tokio::select! {
            biased;
            // The next boundary takes the cancel signal (and its reason).
            () = self.cancel.cancelled() => return Err(None),
            () = until(self.deadline) => return Err(Some(Input::DeadlinePassed)),
            verdict = stack.before_model(hook, request) => verdict,
        };
        verdict.map_err(|error| self.stop_for(&hook.run_id, error))
    }

    /// What a middleware that stopped a model call means for the run: a refusal ends it,
    /// a cancellation starts its cancellation.
    fn stop_for(&self, run_id: &troupe_core::RunId, error: MiddlewareError) -> Option<Input> {
        tracing::info!(run = %run_id, %error, "a middleware stopped the model call");
        match &error {
            // A cancelled run's boundary takes its own signal and reason.
            MiddlewareError::Cancelled { .. } if self.cancel.is_cancelled() => None,
            MiddlewareError::Cancelled { .. } => Some(Input::Cancelled { reason: Some(error.to_string()) }),
            MiddlewareError::Refused { .. } => {
                Some(Input::Failed { error: error.to_string(), code: error.code().into() })
            }
        }
    }

    /// Records a call's usage and cost, emitting the usage event; returns the cost.
    async fn price(&mut self, model: &ResolvedModel, usage: Usage) -> f64 {
        let cost = self.costs.record(model, &usage);
        self.emitter.emit(AgentEventKind::Usage { model: model.id.clone(), usage, cost_usd: cost }).await;
        cost.unwrap_or(0.0)
    }

    /// Streams one response, announcing it live; stops between chunks on cancellation or
    /// the deadline.
    async fn stream(
        &mut self,
        model: &ResolvedModel,
        request: &ModelRequest,
        translator: &mut Translator,
        priced_as: &mut ResolvedModel,
        partial: &mut Usage,
        answered: &mut bool,
    ) -> Result<ModelResponse, Interrupted> {
        let cancel = self.cancel.child_token();
        let mut out = Vec::new();
        // The provider's retries while the stream opens are shown as they happen. A retry
        // announced by an earlier call that was cut short is not this call's.
        let (watch, retries) = self.retry_watch.get_or_insert_with(tokio::sync::mpsc::unbounded_channel);
        while retries.try_recv().is_ok() {}
        let opening = troupe_model::watching_retries(watch.clone(), model.provider.stream(request, cancel.clone()));
        tokio::pin!(opening);
        let opened = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(Interrupted::Cancelled),
                () = until(self.deadline) => { cancel.cancel(); return Err(Interrupted::TimedOut) }
                Some(retry) = retries.recv() => {
                    translator.on_event(&retry, &mut out);
                    self.emitter.emit_all(out.drain(..)).await;
                }
                opened = &mut opening => break opened,
            }
        };
        let mut stream = opened.map_err(|e| self.interrupted(e))?;
        let mut accumulator = StreamAccumulator::new();
        // Made once for the whole stream, not per event: both end the loop when they fire,
        // so neither is polled after completing.
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        let deadline = until(self.deadline);
        tokio::pin!(deadline);
        loop {
            let next = tokio::select! {
                biased;
                () = &mut cancelled => None,
                () = &mut deadline => {
                    cancel.cancel();
                    *partial = accumulator.usage();
                    return Err(Interrupted::TimedOut);
                }
                next = stream.next() => Some(next),
            };
            let Some(next) = next else {
                *partial = accumulator.usage();
                return Err(Interrupted::Cancelled);
            };
            match next {
                None => break,
                Some(Err(error)) => {
                    *partial = accumulator.usage();
                    return Err(self.interrupted(error));
                }
                Some(Ok(event)) => {
                    *answered = true;
                    if let Err(error) = accumulator.push(&event) {
                        *partial = accumulator.usage();
                        return Err(Interrupted::Failed(error));
                    }
                    if let troupe_core::StreamEvent::ModelFallback { to, .. } = &event {
                        // The model now serving is priced by its own entry, where known.
                        match self.resolver.resolve(to) {
                            Ok(next) => *priced_as = next,
                            Err(_) => priced_as.info = None,
                        }
                        priced_as.id.clone_from(to);
                    }
                    translator.on_event(&event, &mut out);
                    self.emitter.emit_all(out.drain(..)).await;
                }
            }
        }
        accumulator.finish().map_err(|e| self.interrupted(e))
    }

    /// A model error, or the cancellation it stands for.
    fn interrupted(&self, error: troupe_model::Error) -> Interrupted {
        if self.cancel.is_cancelled() || matches!(error, troupe_model::Error::Cancelled) {
            Interrupted::Cancelled
        } else {
            Interrupted::Failed(error)
        }
    }
}
