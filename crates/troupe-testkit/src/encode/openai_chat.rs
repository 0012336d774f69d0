//! OpenAI Chat Completions, as `POST /v1/chat/completions` streams it with
//! `stream_options: {include_usage: true}`.
//!
//! Every chunk is a `data:` line of a `chat.completion.chunk` carrying `"usage": null`
//! (and the `obfuscation` padding OpenAI adds), the first one with the assistant role;
//! text streams as `content` deltas, each tool call as a first fragment with `id`, `type`
//! and `name` followed by `arguments` pieces under the same `index`; then a chunk with
//! only `finish_reason`, the usage chunk with `choices: []`, and `data: [DONE]`.
//! Reasoning, which OpenAI itself never streams here, is written as DeepSeek's and vLLM's
//! `reasoning_content` deltas.

use super::{WireEncoder, data_event};
use crate::pieces;
use crate::script::{MockBlock, MockTurn};
use serde_json::{Value, json};
use troupe_core::StopReason;

/// Writes turns as OpenAI's Chat Completions stream.
pub struct OpenAiChatEncoder;

const CREATED: u64 = 1_700_000_000;

struct Chunks<'t> {
    turn: &'t MockTurn,
    events: Vec<String>,
}

impl Chunks<'_> {
    fn push(&mut self, choices: Value, usage: Value) {
        self.events.push(data_event(&json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.turn.model,
            "service_tier": "default",
            "system_fingerprint": "fp_mock",
            "choices": choices,
            "usage": usage,
            "obfuscation": "Xq3",
        })));
    }

    fn delta(&mut self, delta: Value) {
        self.push(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]), Value::Null);
    }
}

fn finish_reason(stop: &StopReason) -> &str {
    match stop {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        // OpenAI says `length` for the output limit and for a context window that leaves no room.
        StopReason::MaxTokens | StopReason::ContextWindowExceeded => "length",
        StopReason::Refusal => "content_filter",
        StopReason::Other(other) => other,
    }
}

/// Sends the held argument fragments of several calls round-robin: one fragment of each
/// call in turn until all are sent.
fn flush_interleaved(chunks: &mut Chunks<'_>, held: &mut Vec<(u32, Vec<&str>)>) {
    let mut round = 0;
    while held.iter().any(|(_, pieces)| round < pieces.len()) {
        for (index, pieces) in held.iter() {
            if let Some(piece) = pieces.get(round) {
                chunks.delta(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}));
            }
        }
        round += 1;
    }
    held.clear();
}

impl WireEncoder for OpenAiChatEncoder {
    fn encode(&self, turn: &MockTurn) -> Vec<String> {
        let mut chunks = Chunks { turn, events: Vec::new() };
        let starts_with_call = matches!(turn.blocks.first(), Some(MockBlock::ToolCall { .. }));
        if !starts_with_call {
            chunks.delta(json!({"role": "assistant", "content": "", "refusal": null}));
        }
        let mut call_index = 0u32;
        // Argument fragments held back to be interleaved: (call index, pieces left).
        let mut held: Vec<(u32, Vec<&str>)> = Vec::new();
        for block in &turn.blocks {
            if !matches!(block, MockBlock::ToolCall { .. }) {
                flush_interleaved(&mut chunks, &mut held);
            }
            match block {
                MockBlock::Text(text) => {
                    for piece in pieces(text, turn.delta_chars) {
                        chunks.delta(json!({"content": piece}));
                    }
                }
                MockBlock::Reasoning(text) => {
                    for piece in pieces(text, turn.delta_chars) {
                        chunks.delta(json!({"content": null, "reasoning_content": piece}));
                    }
                }
                MockBlock::ToolCall { id, name, arguments } => {
                    let first = json!({
                        "index": call_index,
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    });
                    // As in OpenAI's own streams, a reply that opens with a call carries the
                    // role on the call's first fragment.
                    if starts_with_call && call_index == 0 {
                        chunks.delta(json!({"role": "assistant", "content": null, "tool_calls": [first]}));
                    } else {
                        chunks.delta(json!({"tool_calls": [first]}));
                    }
                    if turn.interleave_tool_calls {
                        held.push((call_index, pieces(arguments, turn.delta_chars).collect()));
                    } else {
                        for piece in pieces(arguments, turn.delta_chars) {
                            chunks.delta(
                                json!({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}),
                            );
                        }
                    }
                    call_index += 1;
                }
            }
        }
        flush_interleaved(&mut chunks, &mut held);
        chunks.push(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish_reason(&turn.stop)}]),
            Value::Null,
        );
        let usage = turn.usage;
        let prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        chunks.push(
            json!([]),
            json!({
                "prompt_tokens": prompt,
                "completion_tokens": usage.output_tokens,
                "total_tokens": prompt + usage.output_tokens,
                "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": usage.reasoning_tokens,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            }),
        );
        chunks.events.push("data: [DONE]\n\n".to_owned());
        chunks.events
    }

    /// OpenAI's `{"error": {message, type, param, code}}`, with the `type` and `code` its
    /// API gives each status (and its codes for exhausted quotas and long contexts).
    fn error_body(&self, status: u16, message: &str) -> String {
        let lower = message.to_ascii_lowercase();
        let (kind, code) = match status {
            400 if lower.contains("context length") => ("invalid_request_error", Some("context_length_exceeded")),
            400 | 413 | 422 => ("invalid_request_error", None),
            401 => ("invalid_request_error", Some("invalid_api_key")),
            403 => ("invalid_request_error", Some("unsupported_country_region_territory")),
            404 => ("invalid_request_error", Some("model_not_found")),
            429 if lower.contains("quota") => ("insufficient_quota", Some("insufficient_quota")),
            429 => ("requests", Some("rate_limit_exceeded")),
            503 | 529 => ("service_unavailable_error", Some("server_is_overloaded")),
            _ => ("server_error", None),
        };
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
    }

    fn overloaded_event(&self, message: &str) -> String {
        data_event(&json!({
            "error": {"message": message, "type": "service_unavailable_error", "param": null, "code": "server_is_overloaded"},
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call index of each argument fragment, in stream order.
    fn fragment_order(turn: &MockTurn) -> Vec<u64> {
        OpenAiChatEncoder
            .encode(turn)
            .iter()
            .filter_map(|event| serde_json::from_str::<Value>(event.strip_prefix("data: ")?.trim()).ok())
            .filter_map(|chunk| {
                let call = chunk["choices"][0]["delta"]["tool_calls"][0].clone();
                let fragment = call["function"]["arguments"].as_str()?.to_owned();
                (call.get("id").is_none() && !fragment.is_empty()).then(|| call["index"].as_u64()).flatten()
            })
            .collect()
    }

    #[test]
    fn interleaved_calls_alternate_their_fragments() {
        let turn = MockTurn::tool_call("a", "one", json!({"x": 1}))
            .with_tool_call("b", "two", json!({"y": 2}))
            .with_delta_chars(2);
        assert_eq!(fragment_order(&turn), [0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(fragment_order(&turn.with_interleaved_tool_calls()), [0, 1, 0, 1, 0, 1, 0, 1]);
    }
}
