//! OpenAI Responses (`POST /v1/responses`): typed events, each with an `event:` line
//! naming its `type` and a `sequence_number` counting from 0.
//!
//! Every output item streams as `response.output_item.added`, its parts and deltas, then
//! `response.output_item.done`; the stream ends with `response.completed` (or
//! `response.incomplete` when the output limit or the content filter cut it short),
//! whose `response` carries the whole output and the usage. No keep-alive is sent.

use super::{WireEncoder, named_event};
use crate::script::{MockBlock, MockTurn, pieces};
use serde_json::{Value, json};
use troupe_core::StopReason;

/// Writes turns as the OpenAI Responses API streams them.
pub struct OpenAiResponsesEncoder;

const RESPONSE_ID: &str = "resp_mock";
const CREATED_AT: u64 = 1_760_000_000;

/// Numbers the events as the server does.
struct Events {
    events: Vec<String>,
    sequence: u64,
}

impl Events {
    fn push(&mut self, kind: &str, mut data: Value) {
        if let Some(object) = data.as_object_mut() {
            object.insert("type".to_owned(), Value::String(kind.to_owned()));
            object.insert("sequence_number".to_owned(), json!(self.sequence));
        }
        self.sequence += 1;
        self.events.push(named_event(kind, &data));
    }
}

fn response(turn: &MockTurn, status: &str, output: &[Value], extra: Value) -> Value {
    let mut response = json!({
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": CREATED_AT,
        "status": status,
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "max_output_tokens": null,
        "model": turn.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "service_tier": "default",
        "store": false,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": null,
        "user": null,
        "metadata": {},
    });
    if let (Some(object), Value::Object(extra)) = (response.as_object_mut(), extra) {
        object.extend(extra);
    }
    response
}

fn reasoning(events: &mut Events, turn: &MockTurn, index: usize, text: &str) -> Value {
    let id = format!("rs_mock_{index}");
    events.push(
        "response.output_item.added",
        json!({"output_index": index, "item": {"id": id, "type": "reasoning", "summary": []}}),
    );
    let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
    let with = |extra: Value| merge(&at, extra);
    events.push("response.reasoning_summary_part.added", with(json!({"part": {"type": "summary_text", "text": ""}})));
    for piece in pieces(text, turn.delta_chars) {
        events.push(
            "response.reasoning_summary_text.delta",
            with(json!({"delta": piece, "obfuscation": obfuscation(piece)})),
        );
    }
    events.push("response.reasoning_summary_text.done", with(json!({"text": text})));
    events.push("response.reasoning_summary_part.done", with(json!({"part": {"type": "summary_text", "text": text}})));
    let item = json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]});
    events.push("response.output_item.done", json!({"output_index": index, "item": item}));
    item
}

fn message(events: &mut Events, turn: &MockTurn, index: usize, text: &str) -> Value {
    let id = format!("msg_mock_{index}");
    let added = json!({"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"});
    events.push("response.output_item.added", json!({"output_index": index, "item": added}));
    let at = json!({"item_id": id, "output_index": index, "content_index": 0});
    let with = |extra: Value| merge(&at, extra);
    let part = |text: &str| json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
    events.push("response.content_part.added", with(json!({"part": part("")})));
    for piece in pieces(text, turn.delta_chars) {
        events.push(
            "response.output_text.delta",
            with(json!({"delta": piece, "logprobs": [], "obfuscation": obfuscation(piece)})),
        );
    }
    events.push("response.output_text.done", with(json!({"text": text, "logprobs": []})));
    events.push("response.content_part.done", with(json!({"part": part(text)})));
    let item =
        json!({"id": id, "type": "message", "status": "completed", "content": [part(text)], "role": "assistant"});
    events.push("response.output_item.done", json!({"output_index": index, "item": item}));
    item
}

fn function_call(events: &mut Events, turn: &MockTurn, index: usize, call: (&str, &str, &str)) -> Value {
    let (call_id, name, arguments) = call;
    let id = format!("fc_mock_{index}");
    let item = |status: &str, arguments: &str| {
        json!({
            "id": id, "type": "function_call", "status": status,
            "arguments": arguments, "call_id": call_id, "name": name,
        })
    };
    events.push("response.output_item.added", json!({"output_index": index, "item": item("in_progress", "")}));
    for piece in pieces(arguments, turn.delta_chars) {
        events.push(
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": piece, "obfuscation": obfuscation(piece)}),
        );
    }
    events.push(
        "response.function_call_arguments.done",
        json!({"item_id": id, "output_index": index, "name": name, "arguments": arguments}),
    );
    let done = item("completed", arguments);
    events.push("response.output_item.done", json!({"output_index": index, "item": done}));
    done
}

/// The padding OpenAI adds to every delta (`stream_options.include_obfuscation`, on by
/// default) so that event sizes do not reveal the tokens: the delta and its padding
/// together are about 16 characters long.
fn obfuscation(piece: &str) -> String {
    const ALPHABET: &[u8] = b"w1Urf0p1hclpVYY3JgemHiTl4pUxn0fV";
    let len = 16usize.saturating_sub(piece.chars().count()).max(1);
    ALPHABET.iter().cycle().skip(piece.len() % ALPHABET.len()).take(len).map(|&b| char::from(b)).collect()
}

fn merge(base: &Value, extra: Value) -> Value {
    let mut merged = base.clone();
    if let (Some(object), Value::Object(extra)) = (merged.as_object_mut(), extra) {
        object.extend(extra);
    }
    merged
}

impl WireEncoder for OpenAiResponsesEncoder {
    fn encode(&self, turn: &MockTurn) -> Vec<String> {
        let mut events = Events { events: Vec::new(), sequence: 0 };
        events.push("response.created", json!({"response": response(turn, "in_progress", &[], json!({}))}));
        events.push("response.in_progress", json!({"response": response(turn, "in_progress", &[], json!({}))}));
        let mut output = Vec::with_capacity(turn.blocks.len());
        for (index, block) in turn.blocks.iter().enumerate() {
            output.push(match block {
                MockBlock::Reasoning(text) => reasoning(&mut events, turn, index, text),
                MockBlock::Text(text) => message(&mut events, turn, index, text),
                MockBlock::ToolCall { id, name, arguments } => {
                    function_call(&mut events, turn, index, (id, name, arguments))
                }
            });
        }
        let usage = &turn.usage;
        let wire_usage = json!({
            "input_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            "input_tokens_details": {
                "cached_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
            },
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total(),
        });
        // The Responses API ends a turn in one of three ways; a tool-use turn is a
        // completed response whose output holds function calls. Stop reasons it has no
        // word for (stop sequences, pauses) are written as completed.
        let incomplete = match &turn.stop {
            StopReason::MaxTokens => Some("max_output_tokens"),
            StopReason::Refusal => Some("content_filter"),
            _ => None,
        };
        match incomplete {
            Some(reason) => {
                let extra = json!({"usage": wire_usage, "incomplete_details": {"reason": reason}});
                events.push("response.incomplete", json!({"response": response(turn, "incomplete", &output, extra)}));
            }
            None => {
                let extra = json!({"usage": wire_usage, "completed_at": CREATED_AT + 1});
                events.push("response.completed", json!({"response": response(turn, "completed", &output, extra)}));
            }
        }
        events.events
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        let lower = message.to_ascii_lowercase();
        let (kind, code, param) = match status {
            400 if lower.contains("context") => {
                ("invalid_request_error", json!("context_length_exceeded"), json!("input"))
            }
            401 => ("invalid_request_error", json!("invalid_api_key"), Value::Null),
            429 => ("requests", json!("rate_limit_exceeded"), Value::Null),
            503 | 529 => ("service_unavailable_error", json!("server_is_overloaded"), Value::Null),
            500..=599 => ("server_error", Value::Null, Value::Null),
            _ => ("invalid_request_error", Value::Null, Value::Null),
        };
        json!({"error": {"message": message, "type": kind, "param": param, "code": code}}).to_string()
    }

    fn overloaded_event(&self, message: &str) -> String {
        // The stream's own `error` event. Its `sequence_number` is not known here; the
        // server cuts the event list, so the number may repeat one already sent.
        let data = json!({
            "type": "error", "sequence_number": 0,
            "code": "server_is_overloaded", "message": message, "param": null,
        });
        named_event("error", &data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_numbered_and_named_after_their_type() {
        let turn = MockTurn::text("Hi there").with_tool_call("call_1", "f", json!({"a": 1}));
        let events = OpenAiResponsesEncoder.encode(&turn);
        for (n, event) in events.iter().enumerate() {
            let (head, data) = event.split_once("\ndata: ").expect("event and data lines");
            let data: Value = serde_json::from_str(data.trim_end()).expect("json data");
            assert_eq!(head.strip_prefix("event: "), data["type"].as_str());
            assert_eq!(data["sequence_number"], json!(n));
        }
        assert!(events.last().is_some_and(|e| e.starts_with("event: response.completed\n")));
    }
}
