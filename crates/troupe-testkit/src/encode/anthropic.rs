//! Anthropic Messages streams, as `api.anthropic.com` writes them.
//!
//! `message_start` (an empty message with the input usage), then per block
//! `content_block_start` / `content_block_delta`* / `content_block_stop` with Anthropic's
//! block `index`, a `ping` after the first block opens, `message_delta` with the stop
//! reason and the cumulative usage, and `message_stop`. Thinking blocks end with a
//! `signature_delta`; tool calls open with `input: {}` and an empty `input_json_delta`.

use super::{WireEncoder, named_event};
use crate::script::{MockBlock, MockTurn, pieces};
use serde_json::json;
use troupe_core::StopReason;

/// Writes turns in Anthropic's Messages stream format.
pub struct AnthropicEncoder;

/// Anthropic's keep-alive, byte for byte (its data has a space the others lack).
const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

/// The signature Anthropic would attach to thinking block `index`: opaque base64.
fn mock_signature(index: usize) -> String {
    format!("EqQBCkgIBhABGAIiQMock{index:04}Signature==")
}

fn stop_reason(stop: &StopReason) -> &str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "refusal",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
        StopReason::PauseTurn => "pause_turn",
        StopReason::Other(other) => other,
    }
}

/// Anthropic's error `type` for an HTTP status.
fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

fn delta(index: usize, delta: serde_json::Value) -> String {
    named_event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

impl WireEncoder for AnthropicEncoder {
    fn encode(&self, turn: &MockTurn) -> Vec<String> {
        let usage = &turn.usage;
        let mut events = vec![named_event(
            "message_start",
            &json!({
                "type": "message_start",
                "message": {
                    "id": "msg_mock",
                    "type": "message",
                    "role": "assistant",
                    "model": turn.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": usage.input_tokens,
                        "cache_creation_input_tokens": usage.cache_write_tokens,
                        "cache_read_input_tokens": usage.cache_read_tokens,
                        "cache_creation": cache_creation(usage),
                        // Anthropic counts the first output token here already.
                        "output_tokens": usage.output_tokens.min(1),
                    },
                },
            }),
        )];
        if turn.blocks.is_empty() {
            events.push(PING.to_owned());
        }
        for (index, block) in turn.blocks.iter().enumerate() {
            let content_block = match block {
                MockBlock::Text(_) => json!({"type": "text", "text": ""}),
                MockBlock::Reasoning(_) => json!({"type": "thinking", "thinking": "", "signature": ""}),
                MockBlock::ToolCall { id, name, .. } => {
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}})
                }
            };
            events.push(named_event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
            ));
            if index == 0 {
                events.push(PING.to_owned());
            }
            match block {
                MockBlock::Text(text) => events.extend(
                    pieces(text, turn.delta_chars).map(|t| delta(index, json!({"type": "text_delta", "text": t}))),
                ),
                MockBlock::Reasoning(text) => {
                    events.extend(
                        pieces(text, turn.delta_chars)
                            .map(|t| delta(index, json!({"type": "thinking_delta", "thinking": t}))),
                    );
                    events.push(delta(index, json!({"type": "signature_delta", "signature": mock_signature(index)})));
                }
                MockBlock::ToolCall { arguments, .. } => {
                    events.push(delta(index, json!({"type": "input_json_delta", "partial_json": ""})));
                    events.extend(
                        pieces(arguments, turn.delta_chars)
                            .map(|p| delta(index, json!({"type": "input_json_delta", "partial_json": p}))),
                    );
                }
            }
            events.push(named_event("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        }
        events.push(named_event(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(&turn.stop), "stop_sequence": null},
                // Cumulative counts, input included, as the API reports them today.
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "cache_creation_input_tokens": usage.cache_write_tokens,
                    "cache_read_input_tokens": usage.cache_read_tokens,
                    "cache_creation": cache_creation(usage),
                    "output_tokens": usage.output_tokens,
                },
            }),
        ));
        events.push(named_event("message_stop", &json!({"type": "message_stop"})));
        events
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        json!({
            "type": "error",
            "error": {"type": error_type(status), "message": message},
            "request_id": "req_mock",
        })
        .to_string()
    }

    fn overloaded_event(&self, message: &str) -> String {
        named_event("error", &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}))
    }
}

/// `usage.cache_creation`: the cache writes by time to live, the long ones the 1-hour writes.
fn cache_creation(usage: &troupe_core::Usage) -> serde_json::Value {
    let long = usage.cache_write_long_tokens.min(usage.cache_write_tokens);
    json!({
        "ephemeral_5m_input_tokens": usage.cache_write_tokens - long,
        "ephemeral_1h_input_tokens": long,
    })
}
