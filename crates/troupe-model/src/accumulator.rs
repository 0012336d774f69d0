//! [`StreamAccumulator`]: folds [`StreamEvent`]s into the final assistant message.

use crate::error::{Error, Result};
use troupe_core::{ContentBlock, Message, Role, StopReason, StreamEvent, ToolCallId, Usage};

/// A whole model response.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelResponse {
    /// The assistant message, its blocks in the order they began.
    pub message: Message,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// The tokens the response used.
    pub usage: Usage,
    /// The model that served it, where the provider said.
    pub model: Option<String>,
    /// The provider's message id, where it gave one.
    pub id: Option<String>,
}

#[derive(Debug)]
enum Block {
    Text(String),
    Reasoning { text: String, signature: Option<String> },
    Redacted(String),
    ToolUse { id: String, name: String, json: String, signature: Option<String> },
}

/// Folds a response's events into a [`ModelResponse`].
///
/// Blocks are keyed by their `index`, so the events of several blocks may interleave
/// (OpenAI streams parallel tool calls that way); each block lands in the message at the
/// position of its first event. Usage events carry running totals: the last one wins.
///
/// Tool-call arguments that are not valid JSON (a model's mistake) are kept as a JSON
/// string holding the raw text, so the tool layer can show the model its error instead of
/// the run failing here.
#[derive(Debug, Default)]
pub struct StreamAccumulator {
    blocks: Vec<(u32, Block)>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    model: Option<String>,
    id: Option<String>,
}

impl StreamAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    fn block(&mut self, index: u32) -> Option<&mut Block> {
        // Linear search: a message has a handful of blocks, and the last one is the usual hit.
        self.blocks.iter_mut().rev().find(|(i, _)| *i == index).map(|(_, b)| b)
    }

    fn block_or_insert(&mut self, index: u32, make: impl FnOnce() -> Block) -> &mut Block {
        let position = match self.blocks.iter().rposition(|(i, _)| *i == index) {
            Some(position) => position,
            None => {
                self.blocks.push((index, make()));
                self.blocks.len() - 1
            }
        };
        &mut self.blocks[position].1
    }

    /// Folds one event in. Fails on events that contradict earlier ones (arguments for a
    /// tool call that never started, text for a block that is a tool call).
    pub fn push(&mut self, event: &StreamEvent) -> Result<()> {
        match event {
            StreamEvent::MessageStart { id, model } => {
                if id.is_some() {
                    self.id.clone_from(id);
                }
                if model.is_some() {
                    self.model.clone_from(model);
                }
            }
            StreamEvent::TextDelta { index, text } => match self.block_or_insert(*index, || Block::Text(String::new()))
            {
                Block::Text(buffer) => buffer.push_str(text),
                _ => return Err(mismatch(*index, "text")),
            },
            StreamEvent::ReasoningDelta { index, text } => {
                match self.block_or_insert(*index, || Block::Reasoning { text: String::new(), signature: None }) {
                    Block::Reasoning { text: buffer, .. } => buffer.push_str(text),
                    _ => return Err(mismatch(*index, "reasoning")),
                }
            }
            StreamEvent::Signature { index, signature } => {
                match self.block_or_insert(*index, || Block::Reasoning { text: String::new(), signature: None }) {
                    Block::Reasoning { signature: slot, .. } | Block::ToolUse { signature: slot, .. } => {
                        slot.get_or_insert_with(String::new).push_str(signature)
                    }
                    _ => return Err(mismatch(*index, "signature")),
                }
            }
            StreamEvent::RedactedReasoning { index, data } => {
                match self.block_or_insert(*index, || Block::Redacted(String::new())) {
                    Block::Redacted(buffer) => buffer.push_str(data),
                    _ => return Err(mismatch(*index, "redacted reasoning")),
                }
            }
            StreamEvent::ToolUseStart { index, id, name } => {
                if self.block(*index).is_some() {
                    return Err(Error::decode("stream", format!("tool call block {index} started twice")));
                }
                self.blocks.push((
                    *index,
                    Block::ToolUse { id: id.clone(), name: name.clone(), json: String::new(), signature: None },
                ));
            }
            StreamEvent::ToolUseInputDelta { index, partial_json } => match self.block(*index) {
                Some(Block::ToolUse { json, .. }) => json.push_str(partial_json),
                Some(_) => return Err(mismatch(*index, "tool arguments")),
                None => {
                    return Err(Error::decode(
                        "stream",
                        format!("arguments for tool call block {index} before it began"),
                    ));
                }
            },
            StreamEvent::ToolUseEnd { .. } | StreamEvent::Retrying { .. } | StreamEvent::ModelFallback { .. } => {}
            StreamEvent::Usage { usage } => self.usage = *usage,
            StreamEvent::MessageStop { stop_reason } => self.stop_reason = Some(stop_reason.clone()),
        }
        Ok(())
    }

    /// Folds a whole list of events into its response.
    pub fn fold<'a>(events: impl IntoIterator<Item = &'a StreamEvent>) -> Result<ModelResponse> {
        let mut accumulator = StreamAccumulator::new();
        for event in events {
            accumulator.push(event)?;
        }
        accumulator.finish()
    }

    /// The usage seen so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The final response. Fails if the stream never said why it stopped.
    pub fn finish(self) -> Result<ModelResponse> {
        let stop_reason =
            self.stop_reason.ok_or_else(|| Error::truncated("stream", "the response ended without a stop reason"))?;
        let content = self
            .blocks
            .into_iter()
            .filter_map(|(_, block)| match block {
                Block::Text(text) if text.is_empty() => None,
                Block::Text(text) => Some(ContentBlock::Text { text }),
                Block::Reasoning { text, signature } => Some(ContentBlock::Thinking { text, signature }),
                Block::Redacted(data) => Some(ContentBlock::RedactedThinking { data }),
                Block::ToolUse { id, name, json, signature } => Some(ContentBlock::ToolUse {
                    id: ToolCallId::new(id),
                    name,
                    input: parse_arguments(json),
                    signature,
                }),
            })
            .collect();
        Ok(ModelResponse {
            message: Message::new(Role::Assistant, content),
            stop_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
        })
    }
}

fn parse_arguments(json: String) -> serde_json::Value {
    if json.trim().is_empty() {
        return serde_json::Value::Object(Default::default());
    }
    serde_json::from_str(&json).unwrap_or(serde_json::Value::String(json))
}

fn mismatch(index: u32, what: &str) -> Error {
    Error::decode("stream", format!("{what} delta for block {index}, which is of another kind"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fold(events: &[StreamEvent]) -> ModelResponse {
        let mut acc = StreamAccumulator::new();
        for e in events {
            acc.push(e).expect("event folds");
        }
        acc.finish().expect("complete response")
    }

    #[test]
    fn interleaved_tool_calls_are_assembled_per_index() {
        let response = fold(&[
            StreamEvent::MessageStart { id: Some("m1".into()), model: Some("gpt-4o".into()) },
            StreamEvent::TextDelta { index: 0, text: "Checking ".into() },
            StreamEvent::ToolUseStart { index: 1, id: "a".into(), name: "weather".into() },
            StreamEvent::ToolUseStart { index: 2, id: "b".into(), name: "time".into() },
            StreamEvent::ToolUseInputDelta { index: 2, partial_json: "{\"tz\":".into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "{\"city\":\"Paris\"}".into() },
            StreamEvent::ToolUseInputDelta { index: 2, partial_json: "\"CET\"}".into() },
            StreamEvent::TextDelta { index: 0, text: "both.".into() },
            StreamEvent::Usage { usage: Usage { input_tokens: 5, ..Default::default() } },
            StreamEvent::Usage { usage: Usage { input_tokens: 5, output_tokens: 9, ..Default::default() } },
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
        ]);
        assert_eq!(response.message.text(), "Checking both.");
        let calls: Vec<_> =
            response.message.tool_uses().map(|(id, n, i)| (id.to_string(), n.to_owned(), i.clone())).collect();
        assert_eq!(
            calls,
            vec![
                ("a".into(), "weather".into(), json!({"city": "Paris"})),
                ("b".into(), "time".into(), json!({"tz": "CET"}))
            ]
        );
        assert_eq!(response.usage.output_tokens, 9, "the last usage event wins");
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.model.as_deref(), Some("gpt-4o"));
    }

    #[test]
    fn empty_arguments_are_an_empty_object_and_bad_json_is_kept_raw() {
        let response = fold(&[
            StreamEvent::ToolUseStart { index: 0, id: "a".into(), name: "t".into() },
            StreamEvent::ToolUseStart { index: 1, id: "b".into(), name: "t".into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "{\"x\": ".into() },
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
        ]);
        let inputs: Vec<_> = response.message.tool_uses().map(|(_, _, i)| i.clone()).collect();
        assert_eq!(inputs, vec![json!({}), json!("{\"x\": ")]);
    }

    #[test]
    fn contradictory_events_are_errors() {
        let mut acc = StreamAccumulator::new();
        let err =
            acc.push(&StreamEvent::ToolUseInputDelta { index: 3, partial_json: "{}".into() }).expect_err("no start");
        assert!(matches!(err, Error::Decode { .. }));
        acc.push(&StreamEvent::TextDelta { index: 0, text: "x".into() }).expect("text");
        assert!(acc.push(&StreamEvent::ToolUseInputDelta { index: 0, partial_json: "{}".into() }).is_err());
        assert!(StreamAccumulator::new().finish().is_err(), "no stop reason");
    }
}
