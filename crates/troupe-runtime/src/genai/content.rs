//! Messages in the JSON shape of the GenAI conventions' `gen_ai.*.messages` attributes:
//! `[{"role": …, "parts": [{"type": "text", "content": …} | {"type": "tool_call", …} |
//! {"type": "tool_call_response", …} | {"type": "reasoning", …}]}]`.

use super::finish_reason;
use serde_json::{Value, json};
use troupe_core::{ContentBlock, Message, ModelRequest, Role};
use troupe_model::ModelResponse;

fn part(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "content": text}),
        ContentBlock::ToolUse { id, name, input, .. } => {
            json!({"type": "tool_call", "id": id, "name": name, "arguments": input})
        }
        ContentBlock::ToolResult { tool_use_id, content, .. } => {
            json!({"type": "tool_call_response", "id": tool_use_id, "response": content})
        }
        ContentBlock::Thinking { text, .. } => json!({"type": "reasoning", "content": text}),
        // Neither the image's bytes nor encrypted reasoning belong in a span.
        ContentBlock::Image { .. } => json!({"type": "image"}),
        ContentBlock::Document { .. } => json!({"type": "document"}),
        ContentBlock::RedactedThinking { .. } => json!({"type": "reasoning"}),
    }
}

fn role(message: &Message) -> &'static str {
    match message.role {
        // The conventions give tool results a role of their own.
        Role::User if message.content.iter().all(|b| matches!(b, ContentBlock::ToolResult { .. })) => "tool",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn message(message: &Message) -> Value {
    json!({"role": role(message), "parts": message.content.iter().map(part).collect::<Vec<_>>()})
}

/// `gen_ai.input.messages`: the conversation a request sends.
pub(super) fn input_messages(messages: &[Message]) -> String {
    Value::Array(messages.iter().map(message).collect()).to_string()
}

/// `gen_ai.system_instructions`, when the request has some.
pub(super) fn system_instructions(request: &ModelRequest) -> Option<String> {
    request.system.as_ref().map(|system| json!([{"type": "text", "content": system}]).to_string())
}

/// `gen_ai.output.messages`: the response, with its finish reason.
pub(super) fn output_messages(response: &ModelResponse) -> String {
    let mut value = message(&response.message);
    value["finish_reason"] = json!(finish_reason(&response.stop_reason));
    json!([value]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::StopReason;

    #[test]
    fn messages_take_the_conventions_shape() {
        let messages = vec![
            Message::user("hi"),
            Message::new(Role::Assistant, vec![ContentBlock::tool_use("c1", "fs.read", json!({"path": "a"}))]),
            Message::new(
                Role::User,
                vec![ContentBlock::ToolResult { tool_use_id: "c1".into(), content: "body".into(), is_error: false }],
            ),
        ];
        let value: Value = serde_json::from_str(&input_messages(&messages)).expect("JSON");
        assert_eq!(
            value,
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
                {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "fs.read", "arguments": {"path": "a"}}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "body"}]},
            ])
        );
        let response = ModelResponse {
            message: Message::assistant("done"),
            stop_reason: StopReason::EndTurn,
            usage: Default::default(),
            model: None,
            id: None,
        };
        let out: Value = serde_json::from_str(&output_messages(&response)).expect("JSON");
        assert_eq!(
            out,
            json!([{"role": "assistant", "parts": [{"type": "text", "content": "done"}], "finish_reason": "stop"}])
        );
    }
}
