//! [`GeminiParser`]: `streamGenerateContent?alt=sse` frames → [`StreamEvent`]s.

use super::errors::{ApiError, classify};
use crate::error::{Error, Result, RetryHint};
use crate::sse::SseFrame;
use crate::wire::StreamParser;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use troupe_core::{StopReason, StreamEvent, Usage};

/// One `data:` line: a whole `GenerateContentResponse` (or an error object).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default, borrow)]
    candidates: Vec<Candidate<'a>>,
    #[serde(borrow)]
    prompt_feedback: Option<PromptFeedback<'a>>,
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow)]
    model_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    response_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    error: Option<ApiError<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow)]
    content: Option<Content<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
    index: Option<u32>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default, borrow)]
    parts: Vec<Part<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    thought: Option<bool>,
    #[serde(borrow)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function_call: Option<FunctionCall<'a>>,
}

#[derive(Deserialize)]
struct FunctionCall<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(borrow)]
    block_reason: Option<Cow<'a, str>>,
}

/// Gemini's counts are cumulative; a chunk may leave some out, which keep their last value.
#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    tool_use_prompt_token_count: Option<u64>,
}

impl UsageMetadata {
    fn merge(&mut self, newer: UsageMetadata) {
        let keep = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        keep(&mut self.prompt_token_count, newer.prompt_token_count);
        keep(&mut self.candidates_token_count, newer.candidates_token_count);
        keep(&mut self.cached_content_token_count, newer.cached_content_token_count);
        keep(&mut self.thoughts_token_count, newer.thoughts_token_count);
        keep(&mut self.tool_use_prompt_token_count, newer.tool_use_prompt_token_count);
    }

    fn usage(&self) -> Usage {
        let cached = self.cached_content_token_count.unwrap_or(0);
        let thoughts = self.thoughts_token_count.unwrap_or(0);
        Usage {
            // `promptTokenCount` includes the cached tokens; tool-use prompt tokens (from
            // built-in tools) are counted apart but billed as input.
            // The counts are the vendor's: saturate rather than overflow on absurd ones.
            input_tokens: self
                .prompt_token_count
                .unwrap_or(0)
                .saturating_sub(cached)
                .saturating_add(self.tool_use_prompt_token_count.unwrap_or(0)),
            output_tokens: self.candidates_token_count.unwrap_or(0).saturating_add(thoughts),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
            cache_write_long_tokens: 0,
            reasoning_tokens: thoughts,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Open {
    None,
    Text(u32),
    Reasoning(u32),
}

/// Reads a Gemini `streamGenerateContent?alt=sse` stream.
///
/// Every `data:` line is a whole `GenerateContentResponse`; there is no end marker, so the
/// response is complete once a candidate carries a `finishReason` (or the prompt was
/// blocked). Text parts of consecutive chunks continue one text block until another kind
/// of part interrupts it; each `functionCall` arrives whole and becomes one tool-call block
/// (start, the whole arguments as one delta, end), with an id `call_{responseId}_{n}` when Gemini
/// gives none. A `thoughtSignature` becomes a [`StreamEvent::Signature`] of its part's block;
/// on an answer's text part (troupe's text blocks have no signature) it becomes an empty
/// reasoning block of its own, which the request builder puts back onto that text part.
/// Only the first candidate is read: troupe never asks for more.
#[derive(Debug)]
pub struct GeminiParser {
    provider: String,
    started: bool,
    done: bool,
    open: Open,
    next_index: u32,
    tool_calls: u32,
    usage: UsageState,
    /// The response's id, which makes generated call ids unique across the turns of a
    /// conversation (a bare `call_0` would repeat every turn).
    response_id: Option<String>,
}

/// The merged counts, and the last usage emitted (nothing is emitted while all are zero).
#[derive(Default, Clone, Copy, Debug)]
struct UsageState {
    merged: UsageMetadata,
    emitted: Usage,
}

impl GeminiParser {
    /// A parser for one response of `provider`.
    pub fn new(provider: impl Into<String>) -> Self {
        GeminiParser {
            provider: provider.into(),
            started: false,
            done: false,
            open: Open::None,
            next_index: 0,
            tool_calls: 0,
            response_id: None,
            usage: UsageState::default(),
        }
    }

    fn new_block(&mut self) -> u32 {
        let index = self.next_index;
        self.next_index += 1;
        index
    }

    fn text_part(&mut self, text: &str, thought: bool, signature: Option<&str>, out: &mut Vec<StreamEvent>) {
        let mut index = None;
        if !text.is_empty() || (thought && signature.is_some()) {
            let i = match (self.open, thought) {
                (Open::Text(i), false) | (Open::Reasoning(i), true) => i,
                _ => {
                    let i = self.new_block();
                    self.open = if thought { Open::Reasoning(i) } else { Open::Text(i) };
                    i
                }
            };
            if !text.is_empty() {
                let text = text.to_owned();
                out.push(if thought {
                    StreamEvent::ReasoningDelta { index: i, text }
                } else {
                    StreamEvent::TextDelta { index: i, text }
                });
            }
            index = Some(i);
        }
        if let Some(signature) = signature {
            let index = match index {
                Some(i) if thought => i,
                _ => self.new_block(),
            };
            out.push(StreamEvent::Signature { index, signature: signature.to_owned() });
            // A signed block is complete: a later part must not add a second signature to it.
            self.open = Open::None;
        }
    }

    fn function_call(&mut self, call: FunctionCall<'_>, signature: Option<&str>, out: &mut Vec<StreamEvent>) {
        self.open = Open::None;
        let index = self.new_block();
        let id = match call.id {
            Some(id) if !id.is_empty() => id.into_owned(),
            _ => match &self.response_id {
                Some(response) => format!("call_{response}_{}", self.tool_calls),
                None => format!("call_{}", self.tool_calls),
            },
        };
        self.tool_calls += 1;
        out.push(StreamEvent::ToolUseStart { index, id, name: call.name.into_owned() });
        let arguments = call.args.map_or("{}", RawValue::get);
        out.push(StreamEvent::ToolUseInputDelta { index, partial_json: arguments.to_owned() });
        if let Some(signature) = signature {
            out.push(StreamEvent::Signature { index, signature: signature.to_owned() });
        }
        out.push(StreamEvent::ToolUseEnd { index });
    }

    fn push_usage(&mut self, out: &mut Vec<StreamEvent>) {
        let usage = self.usage.merged.usage();
        if self.usage.emitted != usage {
            self.usage.emitted = usage;
            out.push(StreamEvent::Usage { usage });
        }
    }

    fn stop(&mut self, reason: StopReason, out: &mut Vec<StreamEvent>) {
        self.push_usage(out);
        out.push(StreamEvent::MessageStop { stop_reason: reason });
        self.done = true;
    }

    fn stop_reason(&self, finish_reason: &str) -> StopReason {
        match finish_reason {
            // Gemini says STOP for function calls too.
            "STOP" if self.tool_calls > 0 => StopReason::ToolUse,
            "STOP" => StopReason::EndTurn,
            "MAX_TOKENS" => StopReason::MaxTokens,
            "SAFETY"
            | "RECITATION"
            | "PROHIBITED_CONTENT"
            | "BLOCKLIST"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT" => StopReason::Refusal,
            other => StopReason::Other(other.to_owned()),
        }
    }
}

impl StreamParser for GeminiParser {
    fn on_frame(&mut self, frame: SseFrame<'_>, out: &mut Vec<StreamEvent>) -> Result<()> {
        // The response is complete once it said why it stopped; anything after is not part of it.
        let data = frame.data.trim_start();
        if self.done || data.is_empty() {
            return Ok(());
        }
        if !data.starts_with('{') {
            // serde would read a struct out of an array, field by position.
            return Err(Error::decode(&self.provider, "a data line is not a GenerateContentResponse object"));
        }
        let chunk: Chunk<'_> = serde_json::from_str(data)
            .map_err(|e| Error::decode(&self.provider, format!("invalid GenerateContentResponse: {e}")))?;
        if let Some(error) = chunk.error {
            let mut error = classify(&self.provider, error.code.unwrap_or(0), RetryHint::default(), &error);
            if let Error::Server { status, .. } = &mut error {
                // By convention an error event inside a 200 stream has no HTTP status.
                *status = 0;
            }
            return Err(error);
        }
        if !self.started {
            self.started = true;
            self.response_id = chunk.response_id.as_deref().filter(|id| !id.is_empty()).map(str::to_owned);
            out.push(StreamEvent::MessageStart {
                id: chunk.response_id.map(Cow::into_owned),
                model: chunk.model_version.map(Cow::into_owned),
            });
        }
        if let Some(usage) = chunk.usage_metadata {
            self.usage.merged.merge(usage);
        }
        let candidate = chunk.candidates.into_iter().find(|c| c.index.unwrap_or(0) == 0);
        let Some(candidate) = candidate else {
            if chunk.prompt_feedback.is_some_and(|f| f.block_reason.is_some()) {
                // The prompt itself was blocked: no candidate will come.
                self.stop(StopReason::Refusal, out);
            } else {
                self.push_usage(out);
            }
            return Ok(());
        };
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            let signature = part.thought_signature.as_deref();
            if let Some(call) = part.function_call {
                self.function_call(call, signature, out);
            } else {
                let thought = part.thought.unwrap_or(false);
                self.text_part(part.text.as_deref().unwrap_or(""), thought, signature, out);
            }
        }
        match candidate.finish_reason.as_deref() {
            Some(reason) if reason != "FINISH_REASON_UNSPECIFIED" => {
                let reason = self.stop_reason(reason);
                self.stop(reason, out);
            }
            _ => self.push_usage(out),
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<StreamEvent>) -> Result<()> {
        if self.done {
            Ok(())
        } else if self.started {
            Err(Error::truncated(&self.provider, "the stream ended before a finishReason"))
        } else {
            Err(Error::truncated(&self.provider, "the stream ended without any response"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_token_counts_saturate() {
        let metadata = UsageMetadata {
            prompt_token_count: Some(u64::MAX),
            candidates_token_count: Some(u64::MAX),
            cached_content_token_count: Some(0),
            thoughts_token_count: Some(u64::MAX),
            tool_use_prompt_token_count: Some(u64::MAX),
        };
        let usage = metadata.usage();
        assert_eq!((usage.input_tokens, usage.output_tokens), (u64::MAX, u64::MAX));
        assert_eq!(usage.reasoning_tokens, u64::MAX);
    }
}
