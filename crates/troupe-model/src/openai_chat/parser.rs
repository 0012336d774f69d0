//! [`OpenAiChatParser`]: the Chat Completions stream as a state machine.

use super::errors::{self, ErrorInfo};
use crate::error::{Error, Result};
use crate::sse::SseFrame;
use crate::wire::StreamParser;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;
use troupe_core::{StopReason, StreamEvent, Usage};

/// A string that borrows from the frame unless it holds escapes.
///
/// serde's `Cow<'a, str>` never borrows inside an `Option` (serde-rs/serde#1497), and
/// nearly every field of a chunk is optional; this newtype borrows wherever it stands.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

impl Str<'_> {
    fn non_empty(&self) -> Option<&str> {
        (!self.0.is_empty()).then_some(self.0.as_ref())
    }
}

/// One `chat.completion.chunk` (or an error in its place).
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(borrow, default)]
    object: Option<Str<'a>>,
    #[serde(borrow, default)]
    choices: Option<FirstChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// The choice with `index` 0 (troupe asks for one completion; with `n > 1` the others
/// are skipped), without collecting the array.
struct FirstChoice<'a>(Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChoicesVisitor;
        impl<'de> Visitor<'de> for ChoicesVisitor {
            type Value = FirstChoice<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut first = None;
                while let Some(choice) = seq.next_element::<Choice<'de>>()? {
                    if first.is_none() && choice.index.unwrap_or(0) == 0 {
                        first = Some(choice);
                    }
                }
                Ok(FirstChoice(first))
            }
        }
        deserializer.deserialize_seq(ChoicesVisitor)
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Str<'a>>,
    #[serde(borrow, default)]
    refusal: Option<Str<'a>>,
    /// DeepSeek's and vLLM's reasoning field.
    #[serde(borrow, default)]
    reasoning_content: Option<Str<'a>>,
    /// OpenRouter's, Groq's and newer vLLM's name for the same.
    #[serde(borrow, default)]
    reasoning: Option<Str<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    arguments: Option<Str<'a>>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek reports its cache hits here instead of in `prompt_tokens_details`.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// The latest value of each usage counter; servers that send usage on every chunk send
/// running totals, and a counter missing from one chunk keeps its earlier value.
#[derive(Default, Clone, Copy)]
struct UsageTotals {
    seen: bool,
    prompt: u64,
    completion: u64,
    cached: u64,
    reasoning: u64,
}

impl UsageTotals {
    fn merge(&mut self, usage: &WireUsage) {
        self.seen = true;
        if let Some(prompt) = usage.prompt_tokens {
            self.prompt = prompt;
        }
        if let Some(completion) = usage.completion_tokens {
            self.completion = completion;
        }
        let cached =
            usage.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).or(usage.prompt_cache_hit_tokens);
        if let Some(cached) = cached {
            self.cached = cached;
        }
        if let Some(reasoning) = usage.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens) {
            self.reasoning = reasoning;
        }
    }

    /// `prompt_tokens` includes the cached tokens; troupe counts them apart.
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.prompt.saturating_sub(self.cached),
            output_tokens: self.completion,
            cache_read_tokens: self.cached,
            cache_write_tokens: 0,
            cache_write_long_tokens: 0,
            reasoning_tokens: self.reasoning,
        }
    }
}

/// One tool call being assembled.
struct ToolSlot {
    /// The wire's `index`, when the server sends one.
    wire_index: Option<u32>,
    id: String,
    /// Whether `id` came from the wire (or was made up for a server that sent none).
    wire_id: bool,
    /// The block index, once the call has a name and its start was emitted.
    block: Option<u32>,
    /// Arguments that arrived before the name.
    pending: String,
    ended: bool,
}

/// Reads a Chat Completions stream (OpenAI's or a compatible server's) into
/// [`StreamEvent`]s.
///
/// Blocks are numbered in order of first appearance: the reasoning block, the text block
/// and each tool call. The stream ends at `data: [DONE]`; a stream that closes after a
/// `finish_reason` but without `[DONE]` (some compatible servers omit it) is complete too,
/// while one that closes with neither was cut short and fails with [`Error::Truncated`].
/// The usage chunk follows the `finish_reason` chunk on OpenAI's wire, so
/// [`StreamEvent::Usage`] and [`StreamEvent::MessageStop`] are both held until the end.
///
/// Deviations of compatible servers are tolerated: tool-call fragments without `index`
/// (matched by `id`, else they continue the latest call), `usage` on every chunk (the last
/// wins), `finish_reason` on the usage chunk, chunks without `choices`, empty ids.
/// `refusal` text is streamed as text, and a turn that carried a refusal ends with
/// [`StopReason::Refusal`] (OpenAI ends refusals with `finish_reason: "stop"`).
pub struct OpenAiChatParser {
    provider: String,
    started: bool,
    next_block: u32,
    reasoning_block: Option<u32>,
    text_block: Option<u32>,
    tools: Vec<ToolSlot>,
    last_tool: Option<usize>,
    usage: UsageTotals,
    finish: Option<StopReason>,
    refused: bool,
    done: bool,
}

impl OpenAiChatParser {
    /// A parser for one response of `provider`.
    pub fn new(provider: impl Into<String>) -> Self {
        OpenAiChatParser {
            provider: provider.into(),
            started: false,
            next_block: 0,
            reasoning_block: None,
            text_block: None,
            tools: Vec::new(),
            last_tool: None,
            usage: UsageTotals::default(),
            finish: None,
            refused: false,
            done: false,
        }
    }

    fn block(next: &mut u32, slot: &mut Option<u32>) -> u32 {
        *slot.get_or_insert_with(|| {
            let index = *next;
            *next += 1;
            index
        })
    }

    fn start(&mut self, id: Option<&str>, model: Option<&str>, out: &mut Vec<StreamEvent>) {
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart { id: id.map(str::to_owned), model: model.map(str::to_owned) });
        }
    }

    fn on_chunk(&mut self, chunk: Chunk<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        let id = chunk.id.as_ref().and_then(Str::non_empty);
        let model = chunk.model.as_ref().and_then(Str::non_empty);
        self.start(id, model, out);
        if let Some(usage) = &chunk.usage {
            self.usage.merge(usage);
        }
        let Some(choice) = chunk.choices.and_then(|c| c.0) else {
            return Ok(());
        };
        if let Some(delta) = choice.delta {
            if let Some(text) = delta.reasoning_content.as_ref().or(delta.reasoning.as_ref()).and_then(Str::non_empty) {
                let index = Self::block(&mut self.next_block, &mut self.reasoning_block);
                out.push(StreamEvent::ReasoningDelta { index, text: text.to_owned() });
            }
            if let Some(text) = delta.content.as_ref().and_then(Str::non_empty) {
                let index = Self::block(&mut self.next_block, &mut self.text_block);
                out.push(StreamEvent::TextDelta { index, text: text.to_owned() });
            }
            if let Some(text) = delta.refusal.as_ref().and_then(Str::non_empty) {
                self.refused = true;
                let index = Self::block(&mut self.next_block, &mut self.text_block);
                out.push(StreamEvent::TextDelta { index, text: text.to_owned() });
            }
            for call in delta.tool_calls.into_iter().flatten() {
                self.on_tool_fragment(call, out)?;
            }
        }
        if let Some(reason) = choice.finish_reason.as_ref().and_then(Str::non_empty) {
            if self.finish.is_none() {
                self.finish = Some(stop_reason(reason));
            }
            self.end_tools(out)?;
        }
        Ok(())
    }

    fn on_tool_fragment(&mut self, call: ToolCallDelta<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        let id = call.id.as_ref().and_then(Str::non_empty);
        let (name, arguments) = match &call.function {
            Some(f) => (f.name.as_ref().and_then(Str::non_empty), f.arguments.as_ref().and_then(Str::non_empty)),
            None => (None, None),
        };
        let same_call = |slot: &ToolSlot| id.is_none_or(|id| !slot.wire_id || slot.id == id);
        let found = match (call.index, id) {
            // A server that numbers every call 0 still gives each its own id.
            (Some(index), _) => self.tools.iter().rposition(|s| s.wire_index == Some(index) && same_call(s)),
            (None, Some(id)) => self.tools.iter().rposition(|s| s.id == id),
            (None, None) => self.last_tool,
        };
        let position = match found {
            Some(position) => position,
            None if id.is_none() && name.is_none() => {
                if arguments.is_none() {
                    return Ok(());
                }
                return Err(Error::decode(&self.provider, "tool call arguments arrived before any tool call began"));
            }
            None => {
                self.tools.push(ToolSlot {
                    wire_index: call.index,
                    id: id.map_or_else(|| format!("call_troupe_{}", self.tools.len()), str::to_owned),
                    wire_id: id.is_some(),
                    block: None,
                    pending: String::new(),
                    ended: false,
                });
                self.tools.len() - 1
            }
        };
        self.last_tool = Some(position);
        let slot = &mut self.tools[position];
        if let (None, Some(name)) = (slot.block, name) {
            let index = Self::block(&mut self.next_block, &mut slot.block);
            out.push(StreamEvent::ToolUseStart { index, id: slot.id.clone(), name: name.to_owned() });
            if !slot.pending.is_empty() {
                out.push(StreamEvent::ToolUseInputDelta { index, partial_json: std::mem::take(&mut slot.pending) });
            }
        }
        if let Some(arguments) = arguments {
            match slot.block {
                Some(index) => out.push(StreamEvent::ToolUseInputDelta { index, partial_json: arguments.to_owned() }),
                None => slot.pending.push_str(arguments),
            }
        }
        Ok(())
    }

    /// The calls are complete once the choice finishes.
    fn end_tools(&mut self, out: &mut Vec<StreamEvent>) -> Result<()> {
        for slot in &mut self.tools {
            if slot.ended {
                continue;
            }
            let Some(index) = slot.block else {
                return Err(Error::decode(&self.provider, format!("tool call `{}` never received a name", slot.id)));
            };
            slot.ended = true;
            out.push(StreamEvent::ToolUseEnd { index });
        }
        Ok(())
    }

    /// The closing events: open calls ended, the final usage, then the stop.
    fn complete(&mut self, out: &mut Vec<StreamEvent>) -> Result<()> {
        self.done = true;
        self.start(None, None, out);
        self.end_tools(out)?;
        if self.usage.seen {
            out.push(StreamEvent::Usage { usage: self.usage.usage() });
        }
        let has_calls = !self.tools.is_empty();
        // Some compatible servers (older Ollama) end calls with "stop"; the calls still
        // need running. A `[DONE]` without any `finish_reason` is judged the same way.
        let stop_reason = match self.finish.take() {
            Some(StopReason::EndTurn) | None if has_calls => StopReason::ToolUse,
            Some(StopReason::EndTurn) | None if self.refused => StopReason::Refusal,
            Some(reason) => reason,
            None => StopReason::EndTurn,
        };
        out.push(StreamEvent::MessageStop { stop_reason });
        Ok(())
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

impl StreamParser for OpenAiChatParser {
    fn on_frame(&mut self, frame: SseFrame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        if self.done {
            return Ok(());
        }
        let data = frame.data.trim_ascii();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            return self.complete(out);
        }
        let chunk: Chunk<'_> = serde_json::from_str(data)
            .map_err(|e| Error::decode(&self.provider, format!("malformed chat completion chunk: {e}")))?;
        let is_error = chunk.error.is_some()
            || frame.event == Some("error")
            || chunk.object.as_ref().is_some_and(|o| o.0 == "error");
        if is_error {
            let value: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
            return Err(errors::from_stream(&self.provider, &ErrorInfo::from_value(&value)));
        }
        self.on_chunk(chunk, out)
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<()> {
        if self.done {
            return Ok(());
        }
        if self.finish.is_none() {
            return Err(Error::truncated(&self.provider, "the stream ended before `data: [DONE]` or a finish_reason"));
        }
        self.complete(out)
    }
}
