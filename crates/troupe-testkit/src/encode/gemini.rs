//! Gemini's `streamGenerateContent?alt=sse`: each event is one `data:` line holding a whole
//! `GenerateContentResponse`; there is no end marker, the stream just ends after the chunk
//! that carries `finishReason`.

use super::WireEncoder;
use crate::script::{MockBlock, MockTurn, pieces};
use serde_json::{Value, json};
use troupe_core::StopReason;

/// Writes turns as Gemini streams them.
///
/// Text and reasoning (`thought: true` parts) arrive in pieces of `delta_chars`, one chunk
/// per piece; a function call arrives whole in one part, with its `id` (as newer Gemini
/// models send it), and consecutive calls share one chunk, as Gemini streams parallel
/// calls. When the turn reasons, its first function call carries a `thoughtSignature`, as
/// Gemini's thinking models sign it. Every chunk has `usageMetadata` (the prompt count as
/// soon as it is known); the last one has the final totals and the `finishReason`.
pub struct GeminiEncoder;

const RESPONSE_ID: &str = "mockResp01";

impl WireEncoder for GeminiEncoder {
    fn encode(&self, turn: &MockTurn) -> Vec<String> {
        let mut chunks: Vec<Vec<Value>> = Vec::new();
        let mut last_was_call = false;
        let mut signed = !turn.blocks.iter().any(|b| matches!(b, MockBlock::Reasoning(_)));
        for block in &turn.blocks {
            match block {
                MockBlock::Reasoning(text) => {
                    chunks.extend(pieces(text, turn.delta_chars).map(|p| vec![json!({"text": p, "thought": true})]));
                    last_was_call &= text.is_empty();
                }
                MockBlock::Text(text) => {
                    chunks.extend(pieces(text, turn.delta_chars).map(|p| vec![json!({"text": p})]));
                    last_was_call &= text.is_empty();
                }
                MockBlock::ToolCall { id, name, arguments } => {
                    // Gemini's args is an object; a script's malformed arguments travel as the
                    // string they are, which a client keeps raw just the same.
                    let args = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!(arguments));
                    let mut part = json!({"functionCall": {"id": id, "name": name, "args": args}});
                    if !signed {
                        part["thoughtSignature"] = json!(signature(id));
                        signed = true;
                    }
                    match chunks.last_mut() {
                        Some(parts) if last_was_call => parts.push(part),
                        _ => chunks.push(vec![part]),
                    }
                    last_was_call = true;
                }
            }
        }
        if chunks.is_empty() {
            chunks.push(vec![json!({"text": ""})]);
        }
        let last = chunks.len() - 1;
        chunks
            .into_iter()
            .enumerate()
            .map(|(n, parts)| {
                let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
                if n == last {
                    candidate["finishReason"] = json!(finish_reason(&turn.stop));
                }
                super::data_event(&json!({
                    "candidates": [candidate],
                    "usageMetadata": usage_metadata(turn, n == last),
                    "modelVersion": turn.model,
                    "responseId": RESPONSE_ID,
                }))
            })
            .collect()
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        json!({"error": {"code": status, "message": message, "status": status_name(status)}}).to_string()
    }

    fn overloaded_event(&self, message: &str) -> String {
        super::data_event(&json!({"error": {"code": 503, "message": message, "status": "UNAVAILABLE"}}))
    }
}

/// A deterministic stand-in for Gemini's opaque base64 signature.
fn signature(id: &str) -> String {
    format!("c2lnOi{}", id.bytes().map(|b| format!("{b:02x}")).collect::<String>())
}

fn finish_reason(stop: &StopReason) -> &str {
    match stop {
        // Gemini has no reason of its own for tool calls or stop sequences: both are STOP.
        StopReason::EndTurn | StopReason::ToolUse | StopReason::StopSequence => "STOP",
        StopReason::MaxTokens => "MAX_TOKENS",
        StopReason::Refusal => "SAFETY",
        StopReason::Other(reason) => reason,
        StopReason::ContextWindowExceeded | StopReason::PauseTurn => "OTHER",
    }
}

fn usage_metadata(turn: &MockTurn, last: bool) -> Value {
    let usage = turn.usage;
    // Gemini's prompt count includes cached tokens and has no cache writes.
    let prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let mut meta = json!({"promptTokenCount": prompt, "totalTokenCount": prompt});
    if usage.cache_read_tokens > 0 {
        meta["cachedContentTokenCount"] = json!(usage.cache_read_tokens);
    }
    if last {
        let thoughts = usage.reasoning_tokens.min(usage.output_tokens);
        meta["candidatesTokenCount"] = json!(usage.output_tokens - thoughts);
        if thoughts > 0 {
            meta["thoughtsTokenCount"] = json!(thoughts);
        }
        meta["totalTokenCount"] = json!(prompt + usage.output_tokens);
    }
    meta
}

fn status_name(status: u16) -> &'static str {
    match status {
        400 | 413 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 | 529 => "UNAVAILABLE",
        400..=499 => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_share_a_chunk_and_the_last_chunk_finishes() {
        let turn = MockTurn::text("hello")
            .with_delta_chars(3)
            .with_tool_call("a", "f", json!({"x": 1}))
            .with_tool_call("b", "g", json!({}));
        let events = GeminiEncoder.encode(&turn);
        assert_eq!(events.len(), 3, "two text pieces, then both calls in one chunk: {events:?}");
        let last: Value = serde_json::from_str(events[2].trim().trim_start_matches("data: ")).expect("JSON");
        assert_eq!(last["candidates"][0]["finishReason"], json!("STOP"));
        assert_eq!(last["candidates"][0]["content"]["parts"][1]["functionCall"]["name"], json!("g"));
        assert_eq!(last["usageMetadata"]["candidatesTokenCount"], json!(5));
        assert!(last["candidates"][0]["content"]["parts"][0].get("thoughtSignature").is_none(), "no reasoning");
    }
}
