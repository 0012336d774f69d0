//! [`OpenAiResponsesParser`]: the Responses API's typed stream events as [`StreamEvent`]s.

use super::errors::{WireError, stream_error};
use crate::error::{Error, Result};
use crate::sse::SseFrame;
use crate::wire::StreamParser;
use serde::Deserialize;
use std::borrow::Cow;
use troupe_core::{StopReason, StreamEvent, Usage};

/// Reads one Responses API stream.
///
/// Each output item of the response (`output_index`) and each part inside it
/// (`content_index` of a message, `summary_index` of a reasoning summary) becomes its own
/// block, numbered in the order its first event arrives. Message text and refusals become
/// text, reasoning summaries (and raw reasoning text, which some compatible servers
/// stream) become reasoning, function calls become tool calls. Unknown event types and
/// output items troupe does not offer (web search, MCP, ...) are skipped. The stream must
/// end in `response.completed`, `response.incomplete` or `response.failed`; a stream that
/// stops before is truncated and [`finish`](StreamParser::finish) fails.
#[derive(Debug)]
pub struct OpenAiResponsesParser {
    provider: String,
    slots: Vec<Slot>,
    next_index: u32,
    started: bool,
    saw_call: bool,
    refused: bool,
    done: bool,
    /// An `error` event, kept until `response.failed` (which OpenAI sends next, with the
    /// better-classified error) or the end of the stream.
    pending_error: Option<Error>,
}

/// Which part of an output item a block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Content(u32),
    Summary(u32),
    ReasoningText(u32),
    Call,
}

#[derive(Debug)]
struct Slot {
    output_index: u32,
    part: Part,
    index: u32,
    /// Whether any delta arrived, so that a `.done` event's full text is not repeated.
    streamed: bool,
    ended: bool,
}

impl OpenAiResponsesParser {
    /// A parser for a stream of `provider` (the name used in errors).
    pub fn new(provider: impl Into<String>) -> Self {
        OpenAiResponsesParser {
            provider: provider.into(),
            slots: Vec::new(),
            next_index: 0,
            started: false,
            saw_call: false,
            refused: false,
            done: false,
            pending_error: None,
        }
    }

    fn decode<'a, T: Deserialize<'a>>(&self, kind: &str, data: &'a str) -> Result<T> {
        serde_json::from_str(data).map_err(|e| Error::decode(&self.provider, format!("malformed `{kind}` event: {e}")))
    }

    fn find(&self, output_index: u32, part: Part) -> Option<usize> {
        // Few blocks per response, and the newest is the usual hit.
        self.slots.iter().rposition(|s| s.output_index == output_index && s.part == part)
    }

    /// The position of the slot for `part` of output `output_index`, opened if new.
    fn slot(&mut self, output_index: u32, part: Part) -> usize {
        match self.find(output_index, part) {
            Some(position) => position,
            None => {
                let index = self.next_index;
                self.next_index += 1;
                self.slots.push(Slot { output_index, part, index, streamed: false, ended: false });
                self.slots.len() - 1
            }
        }
    }

    fn start_call(&mut self, output_index: u32, item: &Item<'_>, out: &mut Vec<StreamEvent>) -> Result<usize> {
        let (Some(call_id), Some(name)) = (item.call_id.as_deref(), item.name.as_deref()) else {
            return Err(Error::decode(&self.provider, "a function_call item without `call_id` or `name`"));
        };
        let position = self.slot(output_index, Part::Call);
        self.saw_call = true;
        out.push(StreamEvent::ToolUseStart {
            index: self.slots[position].index,
            id: call_id.to_owned(),
            name: name.to_owned(),
        });
        Ok(position)
    }

    fn text(&mut self, output_index: u32, part: Part, text: &str, reasoning: bool, out: &mut Vec<StreamEvent>) {
        let position = self.slot(output_index, part);
        let slot = &mut self.slots[position];
        slot.streamed = true;
        let (index, text) = (slot.index, text.to_owned());
        out.push(if reasoning {
            StreamEvent::ReasoningDelta { index, text }
        } else {
            StreamEvent::TextDelta { index, text }
        });
    }

    /// A `.done` event repeats the whole text; it only counts when no delta carried it.
    fn text_done(&mut self, output_index: u32, part: Part, text: &str, reasoning: bool, out: &mut Vec<StreamEvent>) {
        let streamed = self.find(output_index, part).is_some_and(|p| self.slots[p].streamed);
        if !streamed && !text.is_empty() {
            self.text(output_index, part, text, reasoning, out);
        }
    }

    fn close_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for slot in self.slots.iter_mut().filter(|s| s.part == Part::Call && !s.ended) {
            slot.ended = true;
            out.push(StreamEvent::ToolUseEnd { index: slot.index });
        }
    }

    fn on_item_done(&mut self, event: ItemEvent<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        if event.item.kind != "function_call" {
            return Ok(());
        }
        let position = match self.find(event.output_index, Part::Call) {
            Some(position) => position,
            // A server that skipped `output_item.added` still describes the whole call here.
            None => self.start_call(event.output_index, &event.item, out)?,
        };
        let slot = &mut self.slots[position];
        if let Some(arguments) = event.item.arguments.as_deref().filter(|a| !slot.streamed && !a.is_empty()) {
            slot.streamed = true;
            out.push(StreamEvent::ToolUseInputDelta { index: slot.index, partial_json: arguments.to_owned() });
        }
        if !slot.ended {
            slot.ended = true;
            out.push(StreamEvent::ToolUseEnd { index: slot.index });
        }
        Ok(())
    }

    fn on_end(&mut self, kind: Kind, response: Final<'_>, out: &mut Vec<StreamEvent>) {
        self.done = true;
        self.close_calls(out);
        if let Some(usage) = response.usage {
            out.push(StreamEvent::Usage { usage: usage.into_usage() });
        }
        let reason = response.incomplete_details.and_then(|d| d.reason);
        let stop_reason = match reason.as_deref() {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None if kind == Kind::Incomplete => StopReason::Other("incomplete".to_owned()),
            None if self.refused => StopReason::Refusal,
            None if self.saw_call => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        out.push(StreamEvent::MessageStop { stop_reason });
    }
}

impl StreamParser for OpenAiResponsesParser {
    fn on_frame(&mut self, frame: SseFrame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        let data = frame.data;
        // Nothing after the end marker counts; OpenAI-compatible servers often add
        // Chat Completions' `[DONE]` there.
        if self.done || data.trim() == "[DONE]" {
            return Ok(());
        }
        // The `event:` line names the type without a second parse; the data's `type`
        // decides when a server sends none (or a generic one).
        let name: Cow<'_, str> = match frame.event {
            Some(event) if event.starts_with("response.") || event == "error" => Cow::Borrowed(event),
            _ => self.decode::<TypeOnly<'_>>("untyped", data)?.kind,
        };
        let kind = Kind::of(&name);
        if self.pending_error.is_some() && kind != Kind::Failed {
            return Ok(());
        }
        match kind {
            Kind::Created | Kind::InProgress | Kind::Queued => {
                let head: Envelope<Head<'_>> = self.decode(&name, data)?;
                if !self.started {
                    self.started = true;
                    out.push(StreamEvent::MessageStart {
                        id: head.response.id.map(Cow::into_owned),
                        model: head.response.model.map(Cow::into_owned),
                    });
                }
            }
            Kind::ItemAdded => {
                let event: ItemEvent<'_> = self.decode(&name, data)?;
                if event.item.kind == "function_call" {
                    if self.find(event.output_index, Part::Call).is_some() {
                        let message = format!("function call at output {} began twice", event.output_index);
                        return Err(Error::decode(&self.provider, message));
                    }
                    self.start_call(event.output_index, &event.item, out)?;
                }
            }
            Kind::ItemDone => {
                let event: ItemEvent<'_> = self.decode(&name, data)?;
                self.on_item_done(event, out)?;
            }
            Kind::TextDelta | Kind::RefusalDelta | Kind::SummaryDelta | Kind::ReasoningDelta => {
                let event: Delta<'_> = self.decode(&name, data)?;
                if kind == Kind::RefusalDelta {
                    self.refused = true;
                }
                if !event.delta.is_empty() {
                    let (part, reasoning) = kind.part(event.content_index, event.summary_index);
                    self.text(event.output_index, part, &event.delta, reasoning, out);
                }
            }
            Kind::TextDone | Kind::RefusalDone | Kind::SummaryDone | Kind::ReasoningDone => {
                let event: PartDone<'_> = self.decode(&name, data)?;
                if kind == Kind::RefusalDone {
                    self.refused = true;
                }
                let text = event.text.or(event.refusal).unwrap_or_default();
                let (part, reasoning) = kind.part(event.content_index, event.summary_index);
                self.text_done(event.output_index, part, &text, reasoning, out);
            }
            Kind::ArgsDelta => {
                let event: ArgsDelta<'_> = self.decode(&name, data)?;
                let Some(position) = self.find(event.output_index, Part::Call) else {
                    let message = format!("arguments for output {}, which is no function call", event.output_index);
                    return Err(Error::decode(&self.provider, message));
                };
                let slot = &mut self.slots[position];
                if !event.delta.is_empty() {
                    slot.streamed = true;
                    out.push(StreamEvent::ToolUseInputDelta {
                        index: slot.index,
                        partial_json: event.delta.into_owned(),
                    });
                }
            }
            Kind::ArgsDone => {
                let event: ArgsDone<'_> = self.decode(&name, data)?;
                let position = self.find(event.output_index, Part::Call);
                if let (Some(position), Some(arguments)) = (position, event.arguments) {
                    let slot = &mut self.slots[position];
                    if !slot.streamed && !arguments.is_empty() {
                        slot.streamed = true;
                        out.push(StreamEvent::ToolUseInputDelta {
                            index: slot.index,
                            partial_json: arguments.into_owned(),
                        });
                    }
                }
            }
            Kind::Completed | Kind::Incomplete => {
                let end: Envelope<Final<'_>> = self.decode(&name, data)?;
                self.on_end(kind, end.response, out);
            }
            Kind::Failed => {
                let failed: Envelope<Failed<'_>> = self.decode(&name, data)?;
                self.done = true;
                let pending = self.pending_error.take();
                return Err(match (failed.response.error, pending) {
                    (Some(error), _) => stream_error(&self.provider, &error),
                    (None, Some(pending)) => pending,
                    (None, None) => stream_error(&self.provider, &WireError::default()),
                });
            }
            Kind::Error => {
                let event: ErrorEvent<'_> = self.decode(&name, data)?;
                // The SDK documents `code` and `message` at the top level; some servers nest
                // them in an `error` object as the HTTP body does.
                let error = match event.error {
                    Some(nested) if event.message.is_none() => nested,
                    _ => WireError { code: event.code, message: event.message, kind: None },
                };
                self.pending_error = Some(stream_error(&self.provider, &error));
            }
            Kind::Other => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<StreamEvent>) -> Result<()> {
        if let Some(error) = self.pending_error.take() {
            return Err(error);
        }
        if self.done {
            Ok(())
        } else {
            Err(Error::truncated(&self.provider, "the stream ended before `response.completed`"))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Created,
    InProgress,
    Queued,
    ItemAdded,
    ItemDone,
    TextDelta,
    TextDone,
    RefusalDelta,
    RefusalDone,
    SummaryDelta,
    SummaryDone,
    ReasoningDelta,
    ReasoningDone,
    ArgsDelta,
    ArgsDone,
    Completed,
    Incomplete,
    Failed,
    Error,
    Other,
}

impl Kind {
    fn of(name: &str) -> Kind {
        match name {
            "response.created" => Kind::Created,
            "response.in_progress" => Kind::InProgress,
            "response.queued" => Kind::Queued,
            "response.output_item.added" => Kind::ItemAdded,
            "response.output_item.done" => Kind::ItemDone,
            "response.output_text.delta" => Kind::TextDelta,
            "response.output_text.done" => Kind::TextDone,
            "response.refusal.delta" => Kind::RefusalDelta,
            "response.refusal.done" => Kind::RefusalDone,
            "response.reasoning_summary_text.delta" => Kind::SummaryDelta,
            "response.reasoning_summary_text.done" => Kind::SummaryDone,
            "response.reasoning_text.delta" => Kind::ReasoningDelta,
            "response.reasoning_text.done" => Kind::ReasoningDone,
            "response.function_call_arguments.delta" => Kind::ArgsDelta,
            "response.function_call_arguments.done" => Kind::ArgsDone,
            "response.completed" => Kind::Completed,
            "response.incomplete" => Kind::Incomplete,
            "response.failed" => Kind::Failed,
            "error" => Kind::Error,
            _ => Kind::Other,
        }
    }

    /// The block part a text event addresses, and whether it is reasoning.
    fn part(self, content_index: u32, summary_index: u32) -> (Part, bool) {
        match self {
            Kind::SummaryDelta | Kind::SummaryDone => (Part::Summary(summary_index), true),
            Kind::ReasoningDelta | Kind::ReasoningDone => (Part::ReasoningText(content_index), true),
            _ => (Part::Content(content_index), false),
        }
    }
}

#[derive(Deserialize)]
struct TypeOnly<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Envelope<T> {
    response: T,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Final<'a> {
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default, borrow)]
    incomplete_details: Option<IncompleteDetails<'a>>,
}

#[derive(Deserialize)]
struct IncompleteDetails<'a> {
    #[serde(default, borrow)]
    reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Failed<'a> {
    #[serde(default, borrow)]
    error: Option<WireError<'a>>,
}

#[derive(Deserialize)]
struct ErrorEvent<'a> {
    #[serde(default, borrow)]
    code: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    error: Option<WireError<'a>>,
}

#[derive(Deserialize)]
struct ItemEvent<'a> {
    output_index: u32,
    #[serde(borrow)]
    item: Item<'a>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    output_index: u32,
    #[serde(default)]
    content_index: u32,
    #[serde(default)]
    summary_index: u32,
    #[serde(borrow)]
    delta: Cow<'a, str>,
}

#[derive(Deserialize)]
struct PartDone<'a> {
    output_index: u32,
    #[serde(default)]
    content_index: u32,
    #[serde(default)]
    summary_index: u32,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    refusal: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ArgsDelta<'a> {
    output_index: u32,
    #[serde(borrow)]
    delta: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ArgsDone<'a> {
    output_index: u32,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// `response.usage`. Counts are read as optional so that a `null` from a compatible
/// server means zero rather than a failed response.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// OpenAI's `input_tokens` include the cached ones; troupe counts them apart.
    fn into_usage(self) -> Usage {
        let cache_read = self.input_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0);
        let cache_write = self.input_tokens_details.as_ref().and_then(|d| d.cache_write_tokens).unwrap_or(0);
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0).saturating_sub(cache_read).saturating_sub(cache_write),
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            cache_write_long_tokens: 0,
            reasoning_tokens: self.output_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
        }
    }
}
