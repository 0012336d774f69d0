//! [`ModelHost`]: the coordinator's side of a worker's model calls. The worker's agent
//! calls its model through the protocol ([`ModelCall`]); the coordinator makes the call
//! with its own providers (their keys and HTTP clients never leave it), refuses it once
//! the team's budget is spent, and counts what it cost as it ends.

use crate::ipc::{Frame, FrameSender, HostedModel, ModelAnswer, ModelCall, ModelReply, WireModelError};
use crate::team_meter::TeamMeter;
use futures::StreamExt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{StreamEvent, Usage};
use troupe_runtime::ModelResolver;

/// The models a coordinator serves its workers, and the meter their calls count against.
#[derive(Clone)]
pub struct ModelHost {
    resolver: Arc<dyn ModelResolver>,
    models: Vec<String>,
    meter: Option<Arc<TeamMeter>>,
}

impl std::fmt::Debug for ModelHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHost").field("models", &self.models).field("metered", &self.meter.is_some()).finish()
    }
}

impl ModelHost {
    /// Serves `models` (as an agent names them) through `resolver`: usually the
    /// coordinator's [`Providers`](troupe_model::Providers), whose HTTP clients every
    /// worker then shares. A worker asking for any other model is refused.
    pub fn new<S: Into<String>>(resolver: Arc<dyn ModelResolver>, models: impl IntoIterator<Item = S>) -> Self {
        ModelHost { resolver, models: models.into_iter().map(Into::into).collect(), meter: None }
    }

    /// Counts each call's spend on `meter` as it ends, and refuses a call once the
    /// meter's budget is spent (stopping the team).
    pub fn metered(mut self, meter: Arc<TeamMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Whether calls are counted on a team's meter.
    pub fn is_metered(&self) -> bool {
        self.meter.is_some()
    }

    /// The models served, resolved: what a task tells its worker. Fails when one cannot be
    /// served (an unknown model, a provider whose key is not set).
    pub fn hosted(&self) -> Result<Vec<HostedModel>, troupe_model::Error> {
        self.models
            .iter()
            .map(|name| {
                let resolved = self.resolver.resolve(name)?;
                Ok(HostedModel { name: name.clone(), id: resolved.id, model: resolved.model, info: resolved.info })
            })
            .collect()
    }

    /// Answers `call` on `frames`: accepted, the response's events, then its end; or why
    /// it failed or was refused. Cancelling `cancel` stops the provider's call.
    pub(crate) async fn answer(&self, call: ModelCall, frames: &FrameSender, cancel: CancellationToken) {
        let id = call.id;
        let reply = |answer| Frame::ModelReply(Box::new(ModelReply { id, answer }));
        let failed = |error: WireModelError| reply(ModelAnswer::Failed(error));
        // A closed channel below means the worker is gone: nobody reads the answer.
        if !self.models.contains(&call.model) {
            let message = format!("the worker asked for the model `{}`, which its task was not given", call.model);
            let _ = frames.send(failed(WireModelError::refused(message))).await;
            return;
        }
        if let Some(which) = self.meter.as_ref().and_then(|meter| meter.refuse()) {
            tracing::info!(budget = %which, "the team's budget is spent: a worker's model call does not start");
            let message = format!("the team's budget is spent ({which}): no model call starts");
            let _ = frames.send(failed(WireModelError::refused(message))).await;
            return;
        }
        let resolved = match self.resolver.resolve(&call.model) {
            Ok(resolved) => resolved,
            Err(error) => {
                let _ = frames.send(failed((&error).into())).await;
                return;
            }
        };
        let mut request = call.request;
        request.model.clone_from(&resolved.model);
        let mut stream = match resolved.provider.stream(&request, cancel).await {
            Ok(stream) => stream,
            Err(error) => {
                let _ = frames.send(failed((&error).into())).await;
                return;
            }
        };
        if frames.send(reply(ModelAnswer::Accepted)).await.is_err() {
            return;
        }
        // What was spent is counted however the call ends: complete, failed, or dropped
        // with its worker's attempt (the worker died or ran out of time) mid-stream.
        let mut spend = Spend { meter: self.meter.as_deref(), resolved: &resolved, usage: Usage::default() };
        let mut end = reply(ModelAnswer::End);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    if let StreamEvent::Usage { usage: totals } = &event {
                        spend.usage = *totals;
                    }
                    if frames.send(reply(ModelAnswer::Event(event))).await.is_err() {
                        break;
                    }
                }
                Err(error) => {
                    end = failed((&error).into());
                    break;
                }
            }
        }
        // Counted before the worker hears of the end, so a worker's next call sees it.
        drop(spend);
        let _ = frames.send(end).await;
    }
}

/// A hosted call's spend so far, counted on the team's meter when the call is done
/// with: at its end, or when its task is dropped part-way.
struct Spend<'a> {
    meter: Option<&'a TeamMeter>,
    resolved: &'a troupe_model::ResolvedModel,
    usage: Usage,
}

impl Drop for Spend<'_> {
    fn drop(&mut self) {
        if let Some(meter) = self.meter {
            meter.add(self.usage.total(), self.resolved.cost(&self.usage).unwrap_or(0.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::ModelAnswer;
    use tokio::sync::mpsc;
    use troupe_model::{DemoProvider, ModelRegistry, Pricing};
    use troupe_runtime::FixedModel;
    use troupe_team::TeamBudget;

    fn host(meter: Option<Arc<TeamMeter>>) -> ModelHost {
        let fixed = FixedModel::new(Arc::new(DemoProvider::new()), "demo-1").with_pricing(Pricing::flat(1.0, 2.0));
        let host = ModelHost::new(Arc::new(fixed), ["demo/demo-1"]);
        match meter {
            Some(meter) => host.metered(meter),
            None => host,
        }
    }

    fn call(model: &str) -> ModelCall {
        let mut request = troupe_core::ModelRequest::new("demo-1");
        request.messages.push(troupe_core::Message::user("Summarise this repository"));
        ModelCall { id: 4, model: model.to_owned(), request }
    }

    /// Every answer the host sends for `call`.
    async fn answers(host: &ModelHost, call: ModelCall) -> Vec<ModelAnswer> {
        let (frames, mut sent) = mpsc::channel(1024);
        host.answer(call, &frames, CancellationToken::new()).await;
        drop(frames);
        let mut answers = Vec::new();
        while let Some(frame) = sent.recv().await {
            let Frame::ModelReply(reply) = frame else { panic!("only model replies: {frame:?}") };
            assert_eq!(reply.id, 4, "each answer carries the call's number");
            answers.push(reply.answer);
        }
        answers
    }

    fn meter(max_total_tokens: u64) -> (Arc<TeamMeter>, CancellationToken) {
        let budget = TeamBudget { max_total_tokens: Some(max_total_tokens), ..TeamBudget::default() };
        let meter = TeamMeter::new(budget, ModelRegistry::builtin());
        let team = CancellationToken::new();
        meter.arm(0, 0.0, team.clone());
        (meter, team)
    }

    #[tokio::test]
    async fn a_call_is_accepted_streamed_ended_and_counted() {
        let (meter, team) = meter(1_000_000);
        let answers = answers(&host(Some(Arc::clone(&meter))), call("demo/demo-1")).await;
        assert_eq!(answers.first(), Some(&ModelAnswer::Accepted), "{answers:?}");
        assert_eq!(answers.last(), Some(&ModelAnswer::End), "{answers:?}");
        assert!(answers.iter().any(|a| matches!(a, ModelAnswer::Event(StreamEvent::TextDelta { .. }))), "{answers:?}");
        let (tokens, usd) = meter.spent();
        assert!(tokens > 0 && usd > 0.0, "the call's spend is counted: {tokens} tokens, ${usd}");
        assert!(!team.is_cancelled());
    }

    #[tokio::test]
    async fn a_model_the_task_was_not_given_is_refused_and_costs_nothing() {
        let (meter, _) = meter(1_000_000);
        let answers = answers(&host(Some(Arc::clone(&meter))), call("openai/gpt-4.1")).await;
        let [ModelAnswer::Failed(error)] = &answers[..] else { panic!("one refusal: {answers:?}") };
        assert_eq!(error.code, "refused");
        assert!(error.message.contains("`openai/gpt-4.1`"), "{}", error.message);
        assert_eq!(meter.spent(), (0, 0.0));
    }

    #[tokio::test]
    async fn a_spent_budget_refuses_the_next_call_and_stops_the_team() {
        let (meter, team) = meter(10);
        meter.add(11, 0.0);
        let answers = answers(&host(Some(Arc::clone(&meter))), call("demo/demo-1")).await;
        let [ModelAnswer::Failed(error)] = &answers[..] else { panic!("one refusal: {answers:?}") };
        assert!(error.message.contains("budget is spent"), "{}", error.message);
        assert!(team.is_cancelled(), "the team is stopped");
        assert_eq!(meter.spent().0, 11, "nothing more was spent");
    }
}
