//! The model of a replay: answers each request with the recorded response of its step
//! once the request is found the same as the recorded one, or (live) forwards it to the
//! real model and checks that it asks for the same tool calls.

use crate::divergence::{DivergenceKind, request_detail};
use crate::session::Session;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{ContentBlock, Message, ModelRequest, StopReason, StreamEvent, Usage};
use troupe_model::{Error, EventStream, LlmProvider, ResolvedModel, Result, StreamAccumulator};
use troupe_runtime::ModelResolver;
use troupe_runtime::durable::{RequestDigest, digest};

/// Resolves every model as the current configuration does (its name, its prices) but
/// answers through the replay.
pub(crate) struct ReplayResolver {
    pub(crate) inner: Arc<dyn ModelResolver>,
    pub(crate) session: Arc<Session>,
    pub(crate) live: bool,
}

impl ModelResolver for ReplayResolver {
    fn resolve(&self, model: &str) -> Result<ResolvedModel> {
        let resolved = match self.inner.resolve(model) {
            Ok(resolved) => resolved,
            // Nothing is sent without a live model: a missing key or provider is no reason
            // to refuse (a cassette replays in a test without keys).
            Err(_) if !self.live => offline(model),
            Err(error) => return Err(error),
        };
        let live = self.live.then(|| Arc::clone(&resolved.provider));
        let provider: Arc<dyn LlmProvider> = Arc::new(ReplayModel { session: Arc::clone(&self.session), live });
        Ok(ResolvedModel { provider, ..resolved })
    }
}

/// A model resolved without its provider: the wire name is the id's model part, the
/// prices the registry's.
fn offline(model: &str) -> ResolvedModel {
    let name = troupe_model::split_id(model).map_or(model, |(_, name)| name);
    ResolvedModel {
        id: model.to_owned(),
        model: name.to_owned(),
        provider: Arc::new(troupe_model::DemoProvider::new()),
        info: troupe_model::ModelRegistry::builtin().get(model).cloned(),
    }
}

/// The substituted model.
struct ReplayModel {
    session: Arc<Session>,
    /// The real model, for a live replay.
    live: Option<Arc<dyn LlmProvider>>,
}

/// What a provider answers once the replay has stopped: not retryable, so the run ends.
fn stopped() -> Error {
    Error::Config("the replay stopped at its first divergence".to_owned())
}

impl LlmProvider for ReplayModel {
    fn name(&self) -> &str {
        "replay"
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        async move {
            if self.session.diverged() {
                return Err(stopped());
            }
            let step = {
                let mut progress = self.session.progress();
                progress.step += 1;
                progress.step
            };
            let recording = &self.session.recording;
            let Some(turn) = recording.turns.get(step as usize - 1) else {
                self.session.diverge(
                    DivergenceKind::ExtraModelCall,
                    format!("the recorded run made {} model call(s); this one is new", recording.turns.len()),
                );
                return Err(stopped());
            };
            if let Some(live) = &self.live {
                self.session.progress().live_model_calls += 1;
                self.session.send_inputs(step + 1).await;
                let stream = live.stream(request, cancel).await?;
                return Ok(checked(stream, Arc::clone(&self.session), turn.message.clone()));
            }
            let recorded = turn.request.as_ref().ok_or_else(stopped)?;
            if RequestDigest::of(request).whole != recorded.whole {
                let spec = &recording.input.spec;
                let system = (digest(&spec.instructions) == recorded.system).then_some(spec.instructions.as_str());
                let count = usize::try_from(recorded.message_count).unwrap_or(usize::MAX);
                let messages = &recording.messages[..count.min(recording.messages.len())];
                let detail = request_detail(recorded, system, spec.tools.as_deref(), messages, request);
                self.session.diverge(DivergenceKind::Request, detail);
                return Err(stopped());
            }
            {
                let mut progress = self.session.progress();
                for (id, _, _) in turn.message.tool_uses() {
                    progress.ids.insert(id.to_string(), id.to_string());
                }
            }
            // What a person sent while this step went is sent now, before it answers.
            self.session.send_inputs(step + 1).await;
            let events = message_events(&turn.message, &turn.stop_reason, turn.usage);
            Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
        }
        .boxed()
    }
}

/// A live response passed on as it streams, its tool calls compared with the recorded
/// response's once it is complete.
fn checked(stream: EventStream, session: Arc<Session>, recorded: Message) -> EventStream {
    let mut accumulator = StreamAccumulator::new();
    let mut session = Some(session);
    stream
        .map(move |event| {
            if let Ok(event) = &event {
                let _ = accumulator.push(event);
                if matches!(event, StreamEvent::MessageStop { .. })
                    && let Some(session) = session.take()
                {
                    let now = std::mem::replace(&mut accumulator, StreamAccumulator::new())
                        .finish()
                        .map(|r| r.message)
                        .unwrap_or_else(|_| Message::new(troupe_core::Role::Assistant, Vec::new()));
                    compare_calls(&session, &recorded, &now);
                }
            }
            event
        })
        .boxed()
}

/// Maps the live calls to the recorded ones when they are the same calls (same tools, same
/// arguments, in order); a divergence otherwise.
fn compare_calls(session: &Session, recorded: &Message, now: &Message) {
    let calls = |m: &Message| {
        m.tool_uses().map(|(id, name, input)| (id.to_string(), format!("{name} {input}"))).collect::<Vec<_>>()
    };
    let (before, after) = (calls(recorded), calls(now));
    let same = before.len() == after.len() && before.iter().zip(&after).all(|(a, b)| a.1 == b.1);
    if same {
        let mut progress = session.progress();
        for ((recorded, _), (live, _)) in before.iter().zip(&after) {
            progress.ids.insert(live.clone(), recorded.clone());
        }
        return;
    }
    let lines = |calls: &[(String, String)]| calls.iter().map(|c| c.1.clone()).collect::<Vec<_>>().join("\n");
    let detail = if after.is_empty() && !before.is_empty() {
        format!(
            "the model now answers without calling a tool:\n{}",
            crate::divergence::unified(&lines(&before), &now.text())
        )
    } else {
        crate::divergence::unified(&lines(&before), &lines(&after))
    };
    session.diverge(DivergenceKind::ToolCall, detail);
}

/// The stream events that deliver `message` as a provider would have streamed it.
pub(crate) fn message_events(message: &Message, stop_reason: &StopReason, usage: Usage) -> Vec<StreamEvent> {
    let mut events = vec![StreamEvent::MessageStart { id: None, model: None }];
    for (index, block) in message.content.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        match block {
            ContentBlock::Text { text } => events.push(StreamEvent::TextDelta { index, text: text.clone() }),
            ContentBlock::Thinking { text, signature } => {
                events.push(StreamEvent::ReasoningDelta { index, text: text.clone() });
                if let Some(signature) = signature {
                    events.push(StreamEvent::Signature { index, signature: signature.clone() });
                }
            }
            ContentBlock::RedactedThinking { data } => {
                events.push(StreamEvent::RedactedReasoning { index, data: data.clone() });
            }
            ContentBlock::ToolUse { id, name, input, signature } => {
                events.push(StreamEvent::ToolUseStart { index, id: id.to_string(), name: name.clone() });
                events.push(StreamEvent::ToolUseInputDelta { index, partial_json: input.to_string() });
                if let Some(signature) = signature {
                    events.push(StreamEvent::Signature { index, signature: signature.clone() });
                }
                events.push(StreamEvent::ToolUseEnd { index });
            }
            // A model's message holds nothing else.
            _ => {}
        }
    }
    events.push(StreamEvent::Usage { usage });
    events.push(StreamEvent::MessageStop { stop_reason: stop_reason.clone() });
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_streams_back_into_itself() {
        let message = Message::new(
            troupe_core::Role::Assistant,
            vec![
                ContentBlock::Thinking { text: "hmm".into(), signature: Some("sig".into()) },
                ContentBlock::text("Reading it."),
                ContentBlock::tool_use("c1", "fs.read", json!({"path": "a.txt", "n": [1, 2]})),
            ],
        );
        let usage = Usage { input_tokens: 7, output_tokens: 3, ..Usage::default() };
        let events = message_events(&message, &StopReason::ToolUse, usage);
        let response = StreamAccumulator::fold(&events).expect("folds");
        assert_eq!(response.message, message);
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.usage, usage);
    }
}
