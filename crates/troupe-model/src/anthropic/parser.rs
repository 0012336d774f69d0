//! [`AnthropicParser`]: the Messages API's SSE stream as [`StreamEvent`]s.

use super::errors::classify;
use crate::error::{Error, Result, RetryHint};
use crate::sse::SseFrame;
use crate::wire::StreamParser;
use serde::Deserialize;
use std::borrow::Cow;
use troupe_core::{StopReason, StreamEvent, Usage};

/// A JSON string borrowed from the frame when it has no escapes, owned otherwise.
///
/// A newtype because serde only borrows a bare `Cow<str>` field marked `borrow`; inside an
/// `Option` it would always allocate.
#[derive(Deserialize)]
#[serde(transparent)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

impl Str<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }

    fn into_string(self) -> String {
        self.0.into_owned()
    }
}

fn text<'s>(value: &'s Option<Str<'_>>) -> Option<&'s str> {
    value.as_ref().map(Str::as_str)
}

/// Every event of the stream in one flat shape: each event type fills some of these
/// fields, so a frame is parsed in one pass without buffering it to look at `type` first.
#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    message: Option<MessageWire<'a>>,
    index: Option<u32>,
    #[serde(borrow)]
    content_block: Option<BlockWire<'a>>,
    #[serde(borrow)]
    delta: Option<DeltaWire<'a>>,
    usage: Option<UsageWire>,
    #[serde(borrow)]
    error: Option<ErrorWire<'a>>,
}

#[derive(Deserialize)]
struct MessageWire<'a> {
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    model: Option<Str<'a>>,
    usage: Option<UsageWire>,
}

/// A `content_block` of `content_block_start`.
#[derive(Deserialize)]
struct BlockWire<'a> {
    #[serde(borrow, rename = "type")]
    kind: Str<'a>,
    #[serde(borrow)]
    text: Option<Str<'a>>,
    #[serde(borrow)]
    thinking: Option<Str<'a>>,
    #[serde(borrow)]
    signature: Option<Str<'a>>,
    #[serde(borrow)]
    data: Option<Str<'a>>,
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    name: Option<Str<'a>>,
    /// Anthropic always starts a call with `{}` and streams the arguments; a `Value` here
    /// costs nothing for that and keeps arguments a compatible server sends up front.
    input: Option<serde_json::Value>,
}

/// The `delta` of `content_block_delta` (typed) and of `message_delta` (untyped, with
/// `stop_reason`).
#[derive(Deserialize)]
struct DeltaWire<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    text: Option<Str<'a>>,
    #[serde(borrow)]
    partial_json: Option<Str<'a>>,
    #[serde(borrow)]
    thinking: Option<Str<'a>>,
    #[serde(borrow)]
    signature: Option<Str<'a>>,
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
}

/// Usage as Anthropic reports it; every field may be absent or `null` in `message_delta`.
#[derive(Deserialize)]
struct UsageWire {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    /// The cache writes by time to live, when the response breaks them down.
    cache_creation: Option<CacheCreationWire>,
}

/// `usage.cache_creation`: the tokens written to the cache, by time to live.
#[derive(Deserialize)]
struct CacheCreationWire {
    ephemeral_1h_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct ErrorWire<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    message: Option<Str<'a>>,
}

impl ErrorWire<'_> {
    pub(super) fn kind(&self) -> &str {
        text(&self.kind).unwrap_or("")
    }

    pub(super) fn message(&self) -> &str {
        text(&self.message).unwrap_or("")
    }
}

#[derive(Debug)]
enum Kind {
    Text,
    Thinking,
    Redacted,
    ToolUse {
        /// Arguments given in `content_block_start` itself, sent at the block's end unless
        /// deltas arrived meanwhile.
        initial_input: Option<String>,
    },
    /// A block troupe does not model (server tool calls and results, future types): its
    /// events are skipped.
    Ignored,
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Thinking => "thinking",
            Kind::Redacted => "redacted_thinking",
            Kind::ToolUse { .. } => "tool_use",
            Kind::Ignored => "skipped",
        }
    }
}

#[derive(Debug)]
struct Block {
    index: u32,
    kind: Kind,
    open: bool,
}

/// Parses one Anthropic Messages stream.
///
/// Block indexes are Anthropic's own `index`. Usage is reported after `message_start` and
/// after `message_delta`, each time as the merged running totals (`message_delta` repeats
/// some counts cumulatively and may omit others). The stream is complete only at
/// `message_stop`; an `error` event becomes the matching typed [`Error`].
#[derive(Debug)]
pub struct AnthropicParser {
    provider: String,
    usage: Usage,
    stop_reason: Option<StopReason>,
    blocks: Vec<Block>,
    started: bool,
    done: bool,
}

impl AnthropicParser {
    /// A parser whose errors name `provider`.
    pub fn new(provider: impl Into<String>) -> Self {
        AnthropicParser {
            provider: provider.into(),
            usage: Usage::default(),
            stop_reason: None,
            blocks: Vec::new(),
            started: false,
            done: false,
        }
    }

    fn decode(&self, message: impl Into<String>) -> Error {
        Error::decode(self.provider.as_str(), message)
    }

    fn merge_usage(&mut self, usage: &UsageWire, out: &mut Vec<StreamEvent>) {
        let total = &mut self.usage;
        let fields = [
            (&mut total.input_tokens, usage.input_tokens),
            (&mut total.output_tokens, usage.output_tokens),
            (&mut total.cache_write_tokens, usage.cache_creation_input_tokens),
            (&mut total.cache_read_tokens, usage.cache_read_input_tokens),
            (
                &mut total.cache_write_long_tokens,
                usage.cache_creation.as_ref().and_then(|c| c.ephemeral_1h_input_tokens),
            ),
        ];
        for (slot, value) in fields {
            if let Some(value) = value {
                *slot = value;
            }
        }
        out.push(StreamEvent::Usage { usage: self.usage });
    }

    fn index(&self, frame: &Frame<'_>, event: &str) -> Result<u32> {
        frame.index.ok_or_else(|| self.decode(format!("`{event}` without an `index`")))
    }

    fn open_block(&mut self, index: u32, event: &str) -> Result<&mut Block> {
        match self.blocks.iter().rposition(|b| b.index == index) {
            Some(position) if self.blocks[position].open => Ok(&mut self.blocks[position]),
            Some(_) => Err(self.decode(format!("`{event}` for block {index}, which has already stopped"))),
            None => Err(self.decode(format!("`{event}` for block {index}, which never started"))),
        }
    }

    fn message_start(&mut self, frame: Frame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        if self.started {
            return Err(self.decode("a second `message_start` in one stream"));
        }
        self.started = true;
        let message = frame.message.ok_or_else(|| self.decode("`message_start` without a `message`"))?;
        out.push(StreamEvent::MessageStart {
            id: message.id.map(Str::into_string),
            model: message.model.map(Str::into_string),
        });
        if let Some(usage) = &message.usage {
            self.merge_usage(usage, out);
        }
        Ok(())
    }

    fn block_start(&mut self, frame: Frame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        let index = self.index(&frame, "content_block_start")?;
        if self.blocks.iter().any(|b| b.index == index) {
            return Err(self.decode(format!("block {index} started twice")));
        }
        let block =
            frame.content_block.ok_or_else(|| self.decode("`content_block_start` without a `content_block`"))?;
        let kind = match block.kind.as_str() {
            "text" => {
                push_text(out, index, block.text, |index, text| StreamEvent::TextDelta { index, text });
                Kind::Text
            }
            "thinking" => {
                push_text(out, index, block.thinking, |index, text| StreamEvent::ReasoningDelta { index, text });
                push_text(out, index, block.signature, |index, signature| StreamEvent::Signature { index, signature });
                Kind::Thinking
            }
            "redacted_thinking" => {
                let data = block.data.ok_or_else(|| self.decode("a `redacted_thinking` block without `data`"))?;
                out.push(StreamEvent::RedactedReasoning { index, data: data.into_string() });
                Kind::Redacted
            }
            "tool_use" => {
                let (Some(id), Some(name)) = (block.id, block.name) else {
                    return Err(self.decode("a `tool_use` block without its `id` or `name`"));
                };
                out.push(StreamEvent::ToolUseStart { index, id: id.into_string(), name: name.into_string() });
                let initial_input = match block.input {
                    Some(serde_json::Value::Object(map)) if map.is_empty() => None,
                    Some(serde_json::Value::Null) | None => None,
                    Some(input) => Some(input.to_string()),
                };
                Kind::ToolUse { initial_input }
            }
            _ => Kind::Ignored,
        };
        self.blocks.push(Block { index, kind, open: true });
        Ok(())
    }

    fn block_delta(&mut self, frame: Frame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        let index = self.index(&frame, "content_block_delta")?;
        let delta = frame.delta.ok_or_else(|| self.decode("`content_block_delta` without a `delta`"))?;
        let delta_kind = delta.kind.as_ref().map(Str::as_str).unwrap_or("");
        let provider = self.provider.as_str();
        let block = match self.blocks.iter_mut().rev().find(|b| b.index == index) {
            Some(block) if block.open => block,
            _ => return Err(Error::decode(provider, format!("`{delta_kind}` for block {index}, which is not open"))),
        };
        let missing = |field: &str| Error::decode(provider, format!("a `{delta_kind}` without `{field}`"));
        match (&mut block.kind, delta_kind) {
            (Kind::Ignored, _) | (Kind::Text, "citations_delta") => {}
            (Kind::Text, "text_delta") => {
                let text = delta.text.ok_or_else(|| missing("text"))?;
                push_text(out, index, Some(text), |index, text| StreamEvent::TextDelta { index, text });
            }
            (Kind::Thinking, "thinking_delta") => {
                let text = delta.thinking.ok_or_else(|| missing("thinking"))?;
                push_text(out, index, Some(text), |index, text| StreamEvent::ReasoningDelta { index, text });
            }
            (Kind::Thinking, "signature_delta") => {
                let signature = delta.signature.ok_or_else(|| missing("signature"))?;
                push_text(out, index, Some(signature), |index, signature| StreamEvent::Signature { index, signature });
            }
            (Kind::ToolUse { initial_input }, "input_json_delta") => {
                let partial = delta.partial_json.ok_or_else(|| missing("partial_json"))?;
                // Streamed arguments supersede any given at the start; both would not parse.
                *initial_input = None;
                push_text(out, index, Some(partial), |index, partial_json| StreamEvent::ToolUseInputDelta {
                    index,
                    partial_json,
                });
            }
            (kind, "text_delta" | "thinking_delta" | "signature_delta" | "input_json_delta") => {
                let kind = kind.name();
                return Err(Error::decode(provider, format!("a `{delta_kind}` for block {index}, a {kind} block")));
            }
            // A delta type introduced after this parser: skipped, not fatal.
            _ => {}
        }
        Ok(())
    }

    fn block_stop(&mut self, frame: Frame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        let index = self.index(&frame, "content_block_stop")?;
        let block = self.open_block(index, "content_block_stop")?;
        block.open = false;
        if let Kind::ToolUse { initial_input } = &mut block.kind {
            if let Some(partial_json) = initial_input.take() {
                out.push(StreamEvent::ToolUseInputDelta { index, partial_json });
            }
            out.push(StreamEvent::ToolUseEnd { index });
        }
        Ok(())
    }

    fn message_delta(&mut self, frame: Frame<'_>, out: &mut Vec<StreamEvent>) {
        if let Some(reason) = frame.delta.as_ref().and_then(|d| text(&d.stop_reason)) {
            self.stop_reason = Some(stop_reason(reason));
        }
        if let Some(usage) = &frame.usage {
            self.merge_usage(usage, out);
        }
    }

    fn message_stop(&mut self, out: &mut Vec<StreamEvent>) {
        self.done = true;
        // Anthropic always sends a stop reason in `message_delta`; a compatible server that
        // omits it still ended the message, and whether it asked for tools is plain to see.
        let stop_reason = self.stop_reason.take().unwrap_or_else(|| {
            if self.blocks.iter().any(|b| matches!(b.kind, Kind::ToolUse { .. })) {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }
        });
        out.push(StreamEvent::MessageStop { stop_reason });
    }

    fn error_event(&self, frame: Frame<'_>) -> Error {
        match &frame.error {
            Some(error) => {
                let message = error.message().to_owned();
                classify(&self.provider, 0, error.kind(), message, RetryHint::default())
            }
            None => classify(&self.provider, 0, "", "an error event without details".to_owned(), RetryHint::default()),
        }
    }
}

/// Pushes `make(index, value)` unless the value is absent or empty (Anthropic opens blocks
/// with empty text and starts arguments with an empty fragment; neither carries anything).
fn push_text(
    out: &mut Vec<StreamEvent>,
    index: u32,
    value: Option<Str<'_>>,
    make: impl FnOnce(u32, String) -> StreamEvent,
) {
    if let Some(value) = value.filter(|v| !v.as_str().is_empty()) {
        out.push(make(index, value.into_string()));
    }
}

/// Anthropic's `stop_reason` in troupe's terms; unknown reasons are kept verbatim.
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        "pause_turn" => StopReason::PauseTurn,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        other => StopReason::Other(other.to_owned()),
    }
}

impl StreamParser for AnthropicParser {
    fn on_frame(&mut self, frame: SseFrame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        if self.done {
            // Nothing after `message_stop` belongs to the message.
            return Ok(());
        }
        let parsed: Frame<'_> = serde_json::from_str(frame.data).map_err(|e| {
            self.decode(format!("invalid JSON in the `{}` event: {e}", frame.event.unwrap_or("unnamed")))
        })?;
        // The data's `type` is authoritative; the SSE event name stands in when it is absent.
        let kind = match &parsed.kind {
            Some(kind) => kind.as_str(),
            None => frame.event.unwrap_or(""),
        };
        match kind {
            "content_block_delta" => self.block_delta(parsed, out),
            "content_block_start" => self.block_start(parsed, out),
            "content_block_stop" => self.block_stop(parsed, out),
            "message_start" => self.message_start(parsed, out),
            "message_delta" => {
                self.message_delta(parsed, out);
                Ok(())
            }
            "message_stop" => {
                self.message_stop(out);
                Ok(())
            }
            "error" => Err(self.error_event(parsed)),
            // `ping` and event types introduced after this parser.
            _ => Ok(()),
        }
    }

    fn finish(&mut self, _out: &mut Vec<StreamEvent>) -> Result<()> {
        if self.done {
            Ok(())
        } else if self.started {
            Err(Error::truncated(&self.provider, "the stream ended before `message_stop`"))
        } else {
            Err(Error::truncated(&self.provider, "the stream ended without any message event"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescaped_strings_are_borrowed_and_escaped_ones_owned() {
        let frame: Frame<'_> = serde_json::from_str(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\nb"}}"#,
        )
        .expect("parses");
        assert!(matches!(frame.kind, Some(Str(Cow::Borrowed("content_block_delta")))));
        let text = frame.delta.and_then(|d| d.text).expect("text");
        assert!(matches!(text.0, Cow::Owned(ref s) if s == "a\nb"));
    }
}
