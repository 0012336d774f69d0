//! Scripted model turns: what a mock model says, and which fault it injects.

use std::time::Duration;
use troupe_core::{ContentBlock, Message, Role, StopReason, StreamEvent, ToolCallId, Usage};

/// One block of a scripted reply.
#[derive(Clone, Debug, PartialEq)]
pub enum MockBlock {
    /// Text, streamed in deltas.
    Text(String),
    /// Reasoning, streamed in deltas (with a signature where the wire has one).
    Reasoning(String),
    /// A tool call whose JSON arguments are streamed in fragments.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool's wire name.
        name: String,
        /// The arguments as JSON text.
        arguments: String,
    },
}

/// A failure the mock server injects instead of, or into, a scripted reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer with this HTTP status and the vendor's error body; `headers` such as
    /// `retry-after` are sent as given.
    Status {
        /// The HTTP status.
        status: u16,
        /// Extra response headers.
        headers: Vec<(String, String)>,
        /// The error message inside the vendor's error body.
        message: String,
    },
    /// Send the first `after_events` events, then the vendor's mid-stream "overloaded"
    /// error event, then end.
    OverloadedMidStream {
        /// Events sent before the error.
        after_events: usize,
    },
    /// Send the first `after_events` events, then close the stream.
    Truncate {
        /// Events sent before the end.
        after_events: usize,
    },
    /// Send the first `after_events` events, then a `data:` line that is not JSON, then
    /// the rest.
    InvalidJson {
        /// Events sent before the garbage.
        after_events: usize,
    },
    /// Send the first `after_events` events, then go silent for `duration`, then the rest.
    Stall {
        /// Events sent before the silence.
        after_events: usize,
        /// How long to stay silent.
        duration: Duration,
    },
}

/// One scripted model reply.
#[derive(Clone, Debug, PartialEq)]
pub struct MockTurn {
    /// The reply's blocks, in order.
    pub blocks: Vec<MockBlock>,
    /// Why the reply stops.
    pub stop: StopReason,
    /// The usage to report.
    pub usage: Usage,
    /// The model name to report.
    pub model: String,
    /// Text and argument deltas are cut into pieces of at most this many characters.
    pub delta_chars: usize,
    /// The HTTP body is written in chunks of at most this many bytes (`None`: one chunk
    /// per event).
    pub chunk_bytes: Option<usize>,
    /// A pause between two events.
    pub event_delay: Option<Duration>,
    /// A pause before the first event: the model's time to first token.
    pub latency: Option<Duration>,
    /// A fault to inject.
    pub fault: Option<Fault>,
    /// Interleave the argument fragments of the turn's tool calls (round-robin), as
    /// OpenAI-style servers may stream parallel calls. Only the OpenAI Chat wire can carry
    /// interleaved calls; the other encoders ignore this.
    pub interleave_tool_calls: bool,
}

impl Default for MockTurn {
    fn default() -> Self {
        MockTurn {
            blocks: Vec::new(),
            stop: StopReason::EndTurn,
            usage: Usage { input_tokens: 10, output_tokens: 5, ..Default::default() },
            model: "mock-model".into(),
            delta_chars: 8,
            chunk_bytes: None,
            event_delay: None,
            latency: None,
            fault: None,
            interleave_tool_calls: false,
        }
    }
}

impl MockTurn {
    /// A reply of one text block that ends the turn.
    pub fn text(text: impl Into<String>) -> Self {
        MockTurn { blocks: vec![MockBlock::Text(text.into())], ..Default::default() }
    }

    /// A reply that calls one tool.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        MockTurn::default().with_tool_call(id, name, arguments)
    }

    /// A reply that is only a fault.
    pub fn fault(fault: Fault) -> Self {
        MockTurn { fault: Some(fault), ..Default::default() }
    }

    /// An HTTP error reply.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        MockTurn::fault(Fault::Status { status, headers: Vec::new(), message: message.into() })
    }

    /// Adds a text block.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(MockBlock::Text(text.into()));
        self
    }

    /// Adds a reasoning block.
    pub fn with_reasoning(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(MockBlock::Reasoning(text.into()));
        self
    }

    /// Adds a tool call and makes the turn stop for tool use.
    pub fn with_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        self.blocks.push(MockBlock::ToolCall { id: id.into(), name: name.into(), arguments: arguments.to_string() });
        self.stop = StopReason::ToolUse;
        self
    }

    /// Sets the stop reason.
    pub fn with_stop(mut self, stop: StopReason) -> Self {
        self.stop = stop;
        self
    }

    /// Sets the usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets the delta size.
    pub fn with_delta_chars(mut self, chars: usize) -> Self {
        self.delta_chars = chars.max(1);
        self
    }

    /// Sets the HTTP chunk size.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = Some(bytes.max(1));
        self
    }

    /// Sets a pause between events.
    pub fn with_event_delay(mut self, delay: Duration) -> Self {
        self.event_delay = Some(delay);
        self
    }

    /// Waits `latency` before the first event, as a model does before its first token
    /// (the response's headers go out at once).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// Streams the tool calls' argument fragments interleaved (OpenAI Chat wire only).
    pub fn with_interleaved_tool_calls(mut self) -> Self {
        self.interleave_tool_calls = true;
        self
    }

    /// Injects a fault.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The assistant message a client should assemble from this turn.
    pub fn expected_message(&self) -> Message {
        let content = self
            .blocks
            .iter()
            .filter(|b| !matches!(b, MockBlock::Text(t) if t.is_empty()))
            .map(|block| match block {
                MockBlock::Text(text) => ContentBlock::text(text.clone()),
                MockBlock::Reasoning(text) => ContentBlock::Thinking { text: text.clone(), signature: None },
                MockBlock::ToolCall { id, name, arguments } => ContentBlock::ToolUse {
                    id: ToolCallId::new(id.clone()),
                    name: name.clone(),
                    input: serde_json::from_str(arguments).unwrap_or(serde_json::Value::String(arguments.clone())),
                    signature: None,
                },
            })
            .collect();
        Message::new(Role::Assistant, content)
    }

    /// The neutral events of this turn, as the in-process [`ScriptedModel`](crate::ScriptedModel)
    /// streams them.
    pub fn stream_events(&self) -> Vec<StreamEvent> {
        let mut events =
            vec![StreamEvent::MessageStart { id: Some("msg_mock".into()), model: Some(self.model.clone()) }];
        for (index, block) in self.blocks.iter().enumerate() {
            let index = index as u32;
            match block {
                MockBlock::Text(text) => events
                    .extend(pieces(text, self.delta_chars).map(|t| StreamEvent::TextDelta { index, text: t.into() })),
                MockBlock::Reasoning(text) => events.extend(
                    pieces(text, self.delta_chars).map(|t| StreamEvent::ReasoningDelta { index, text: t.into() }),
                ),
                MockBlock::ToolCall { id, name, arguments } => {
                    events.push(StreamEvent::ToolUseStart { index, id: id.clone(), name: name.clone() });
                    events.extend(
                        pieces(arguments, self.delta_chars)
                            .map(|p| StreamEvent::ToolUseInputDelta { index, partial_json: p.into() }),
                    );
                    events.push(StreamEvent::ToolUseEnd { index });
                }
            }
        }
        events.push(StreamEvent::Usage { usage: self.usage });
        events.push(StreamEvent::MessageStop { stop_reason: self.stop.clone() });
        events
    }
}

/// `text` cut into pieces of at most `chars` characters (never inside a character).
pub fn pieces(text: &str, chars: usize) -> impl Iterator<Item = &str> {
    let chars = chars.max(1);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(chars).map(|(i, _)| i).unwrap_or(rest.len());
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_respect_char_boundaries() {
        let parts: Vec<_> = pieces("héllo wörld", 3).collect();
        assert_eq!(parts, ["hél", "lo ", "wör", "ld"]);
        assert_eq!(pieces("", 3).count(), 0);
    }
}
