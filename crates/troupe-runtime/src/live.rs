//! Live projection of a run: numbering events, and translating a model's stream into
//! [`AgentEvent`]s as it arrives.

use tokio::sync::mpsc;
use tokio::time::Instant;
use troupe_core::{
    AgentEvent, AgentEventKind, AgentId, Attribution, ConversationId, Role, RunId, StreamEvent, ToolCallId, now_ms,
};

/// Stamps events with a gap-free sequence number and sends them to the run's consumer.
pub(crate) struct Emitter {
    agent_id: AgentId,
    run_id: RunId,
    conversation_id: Option<ConversationId>,
    parent_run_id: Option<RunId>,
    seq: u64,
    tx: Option<mpsc::Sender<AgentEvent>>,
    kept: Option<Vec<AgentEvent>>,
}

impl Emitter {
    pub(crate) fn new(
        agent_id: AgentId,
        run_id: RunId,
        conversation_id: Option<ConversationId>,
        parent_run_id: Option<RunId>,
        tx: mpsc::Sender<AgentEvent>,
        keep: bool,
    ) -> Self {
        Emitter { agent_id, run_id, conversation_id, parent_run_id, seq: 0, tx: Some(tx), kept: keep.then(Vec::new) }
    }

    /// The run the events are of.
    pub(crate) fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Numbers events on from `seq` (a resumed run continues its sequence).
    pub(crate) fn starting_at(mut self, seq: u64) -> Self {
        self.seq = seq;
        self
    }

    /// The sequence number of the next event.
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Emits one event. Waits while the consumer's buffer is full; a consumer that went
    /// away is forgotten, and the run goes on.
    pub(crate) async fn emit(&mut self, kind: AgentEventKind) {
        let attribution = Attribution {
            agent_id: self.agent_id.clone(),
            run_id: self.run_id.clone(),
            conversation_id: self.conversation_id.clone(),
            parent_run_id: self.parent_run_id.clone(),
            seq: self.seq,
            timestamp_ms: now_ms(),
        };
        self.seq += 1;
        let event = AgentEvent::new(attribution, kind);
        let Some(tx) = &self.tx else {
            // Nobody listens live (e.g. `Agent::run`): keep the event without copying it.
            if let Some(kept) = &mut self.kept {
                kept.push(event);
            }
            return;
        };
        let live = match &mut self.kept {
            Some(kept) => {
                kept.push(event.clone());
                event
            }
            None => event,
        };
        if tx.send(live).await.is_err() {
            self.tx = None;
        }
    }

    /// Emits several events in order.
    pub(crate) async fn emit_all(&mut self, kinds: impl IntoIterator<Item = AgentEventKind>) {
        for kind in kinds {
            self.emit(kind).await;
        }
    }

    /// The events kept so far.
    pub(crate) fn take_events(&mut self) -> Vec<AgentEvent> {
        self.kept.take().unwrap_or_default()
    }
}

/// A tool call seen in the stream.
struct OpenCall {
    index: u32,
    id: ToolCallId,
    ended: bool,
}

/// Translates one model response's [`StreamEvent`]s into agent events, as they arrive.
///
/// The message is announced on its first text or reasoning, tool calls as they begin;
/// usage is left to the runner, which prices the whole response.
pub(crate) struct Translator {
    message_id: String,
    started: bool,
    calls: Vec<OpenCall>,
}

impl Translator {
    pub(crate) fn new(message_id: String) -> Self {
        Translator { message_id, started: false, calls: Vec::new() }
    }

    fn start(&mut self, out: &mut Vec<AgentEventKind>) {
        if !self.started {
            self.started = true;
            out.push(AgentEventKind::MessageStart { message_id: self.message_id.clone(), role: Role::Assistant });
        }
    }

    fn call(&mut self, index: u32) -> Option<&mut OpenCall> {
        self.calls.iter_mut().rev().find(|c| c.index == index)
    }

    pub(crate) fn on_event(&mut self, event: &StreamEvent, out: &mut Vec<AgentEventKind>) {
        match event {
            StreamEvent::TextDelta { text, .. } if !text.is_empty() => {
                self.start(out);
                out.push(AgentEventKind::MessageDelta { message_id: self.message_id.clone(), delta: text.clone() });
            }
            StreamEvent::ReasoningDelta { text, .. } if !text.is_empty() => {
                self.start(out);
                out.push(AgentEventKind::ReasoningDelta { message_id: self.message_id.clone(), delta: text.clone() });
            }
            StreamEvent::ToolUseStart { index, id, name } => {
                let id = ToolCallId::new(id.clone());
                self.calls.push(OpenCall { index: *index, id: id.clone(), ended: false });
                out.push(AgentEventKind::ToolCallStart {
                    call_id: id,
                    tool: name.clone(),
                    parent_message_id: Some(self.message_id.clone()),
                });
            }
            StreamEvent::ToolUseInputDelta { index, partial_json } if !partial_json.is_empty() => {
                if let Some(call) = self.call(*index) {
                    out.push(AgentEventKind::ToolCallArgs { call_id: call.id.clone(), delta: partial_json.clone() });
                }
            }
            StreamEvent::ToolUseEnd { index } => {
                if let Some(call) = self.call(*index)
                    && !call.ended
                {
                    call.ended = true;
                    out.push(AgentEventKind::ToolCallEnd { call_id: call.id.clone() });
                }
            }
            StreamEvent::Retrying { attempt, delay_ms, reason } => {
                out.push(AgentEventKind::Retrying { attempt: *attempt, delay_ms: *delay_ms, reason: reason.clone() });
            }
            StreamEvent::ModelFallback { from, to, reason } => {
                out.push(AgentEventKind::ModelFallback { from: from.clone(), to: to.clone(), reason: reason.clone() });
            }
            _ => {}
        }
    }

    /// The response is complete: closes calls whose end was not streamed, and the message.
    pub(crate) fn finish(&mut self, out: &mut Vec<AgentEventKind>) {
        for call in self.calls.iter_mut().filter(|c| !c.ended) {
            call.ended = true;
            out.push(AgentEventKind::ToolCallEnd { call_id: call.id.clone() });
        }
        if self.started {
            out.push(AgentEventKind::MessageEnd { message_id: self.message_id.clone() });
        }
    }

    /// The response was abandoned: closes everything, and answers each call it began, so
    /// that every announced call has a result.
    pub(crate) fn abort(&mut self, why: &str, out: &mut Vec<AgentEventKind>) {
        self.finish(out);
        for call in self.calls.drain(..) {
            out.push(AgentEventKind::ToolCallResult {
                call_id: call.id,
                content: format!("The tool call was not run: {why}."),
                is_error: true,
            });
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
pub(crate) async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translate(events: &[StreamEvent]) -> Vec<AgentEventKind> {
        let mut translator = Translator::new("m1".into());
        let mut out = Vec::new();
        for event in events {
            translator.on_event(event, &mut out);
        }
        translator.finish(&mut out);
        out
    }

    #[test]
    fn text_and_calls_are_announced_as_they_arrive() {
        let out = translate(&[
            StreamEvent::MessageStart { id: None, model: None },
            StreamEvent::ToolUseStart { index: 1, id: "a".into(), name: "fs.read".into() },
            StreamEvent::TextDelta { index: 0, text: "Hi".into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "{}".into() },
            StreamEvent::ToolUseStart { index: 2, id: "b".into(), name: "grep".into() },
            StreamEvent::ToolUseEnd { index: 1 },
            StreamEvent::MessageStop { stop_reason: troupe_core::StopReason::ToolUse },
        ]);
        let names: Vec<String> = out
            .iter()
            .map(|k| {
                serde_json::to_value(k).ok().and_then(|v| v["type"].as_str().map(str::to_owned)).unwrap_or_default()
            })
            .collect();
        assert_eq!(
            names,
            [
                "tool_call_start",
                "message_start",
                "message_delta",
                "tool_call_args",
                "tool_call_start",
                "tool_call_end",
                "tool_call_end",
                "message_end"
            ]
        );
        assert!(matches!(&out[3], AgentEventKind::ToolCallArgs { call_id, .. } if call_id.as_str() == "a"));
        assert!(
            matches!(&out[6], AgentEventKind::ToolCallEnd { call_id } if call_id.as_str() == "b"),
            "closed at the end"
        );
    }

    #[test]
    fn an_abandoned_response_answers_its_calls() {
        let mut translator = Translator::new("m".into());
        let mut out = Vec::new();
        translator.on_event(&StreamEvent::ToolUseStart { index: 0, id: "a".into(), name: "t".into() }, &mut out);
        out.clear();
        translator.abort("the run was cancelled", &mut out);
        assert!(matches!(&out[0], AgentEventKind::ToolCallEnd { .. }));
        assert!(
            matches!(&out[1], AgentEventKind::ToolCallResult { is_error: true, content, .. } if content.contains("cancelled"))
        );
        assert_eq!(out.len(), 2, "no message was started");
    }

    #[tokio::test]
    async fn sequence_numbers_have_no_gaps_and_a_gone_consumer_is_forgotten() {
        let (tx, rx) = mpsc::channel(4);
        let mut emitter = Emitter::new(AgentId::new("a"), RunId::new("r"), None, None, tx, true);
        emitter.emit(AgentEventKind::StepStarted { step: 1 }).await;
        drop(rx);
        emitter.emit(AgentEventKind::StepFinished { step: 1 }).await;
        let events = emitter.take_events();
        assert_eq!(events.iter().map(|e| e.attribution.seq).collect::<Vec<_>>(), [0, 1]);
    }
}
