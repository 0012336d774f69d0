//! The conversation an AG-UI run ends with, in the protocol's message shapes, for its
//! `MESSAGES_SNAPSHOT`.
//!
//! It starts from the messages the client sent and grows as the client's own message
//! list does from the events: an assistant message per troupe message (its text and the
//! tool calls it made, `parentMessageId` naming it), and a tool message per result, placed
//! after the assistant message holding the call. Ids are the events' ids, so the client
//! replaces what it has with the same messages, and a client that lost its list gets it
//! back. Reasoning is left out: the client keeps the reasoning it shows when a snapshot
//! carries none.

use super::input::{AssistantMessage, Content, FunctionCall, Message, ToolCall, ToolCallKind, ToolMessage};

/// The messages of an AG-UI thread, as the events of a run change them.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    messages: Vec<Message>,
}

impl Conversation {
    /// Starting from what the client sent.
    pub(crate) fn new(messages: Vec<Message>) -> Self {
        Conversation { messages }
    }

    /// The messages, oldest first.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Whether the conversation has a result of call `call_id`.
    pub(crate) fn has_result(&self, call_id: &str) -> bool {
        self.messages.iter().any(|m| matches!(m, Message::Tool(t) if t.tool_call_id == call_id))
    }

    /// The assistant message `id`, added at the end when the conversation has none.
    fn assistant(&mut self, id: &str, subagent: Option<&str>) -> Option<&mut AssistantMessage> {
        let at = match self.messages.iter().position(|m| matches!(m, Message::Assistant(a) if a.id == id)) {
            Some(at) => at,
            None => {
                let message = Message::Assistant(AssistantMessage {
                    id: id.to_owned(),
                    content: None,
                    tool_calls: Vec::new(),
                    name: None,
                    subagent_run_id: subagent.map(str::to_owned),
                });
                self.messages.push(message);
                self.messages.len() - 1
            }
        };
        match &mut self.messages[at] {
            Message::Assistant(message) => Some(message),
            _ => None,
        }
    }

    fn call(&mut self, call_id: &str) -> Option<&mut ToolCall> {
        self.messages.iter_mut().find_map(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter_mut().find(|c| c.id == call_id),
            _ => None,
        })
    }

    /// Text the agent wrote in message `id`.
    pub(crate) fn text(&mut self, id: &str, delta: &str, subagent: Option<&str>) {
        if let Some(message) = self.assistant(id, subagent) {
            message.content.get_or_insert_with(String::new).push_str(delta);
        }
    }

    /// A tool call began, in message `parent` (or a message of its own).
    pub(crate) fn call_started(&mut self, call_id: &str, tool: &str, parent: Option<&str>, subagent: Option<&str>) {
        if self.call(call_id).is_some() {
            return;
        }
        if let Some(message) = self.assistant(parent.unwrap_or(call_id), subagent) {
            message.tool_calls.push(ToolCall {
                id: call_id.to_owned(),
                kind: ToolCallKind::Function,
                function: FunctionCall { name: tool.to_owned(), arguments: String::new() },
            });
        }
        // A client may hold a result whose call it never saw: the call goes before it.
        let holder = self
            .messages
            .iter()
            .position(|m| matches!(m, Message::Assistant(a) if a.tool_calls.iter().any(|c| c.id == call_id)));
        let result = self.messages.iter().position(|m| matches!(m, Message::Tool(t) if t.tool_call_id == call_id));
        if let (Some(holder), Some(result)) = (holder, result)
            && result < holder
        {
            let message = self.messages.remove(holder);
            self.messages.insert(result, message);
        }
    }

    /// More of a call's arguments.
    pub(crate) fn call_arguments(&mut self, call_id: &str, delta: &str) {
        if let Some(call) = self.call(call_id) {
            call.function.arguments.push_str(delta);
        }
    }

    /// A call's result, as message `id`: after the assistant message holding the call
    /// and the results already there. Nothing when the conversation has one.
    pub(crate) fn result(&mut self, id: &str, call_id: &str, content: &str, subagent: Option<&str>) {
        if self.has_result(call_id) {
            return;
        }
        let message = Message::Tool(ToolMessage {
            id: id.to_owned(),
            content: Content::Text(content.to_owned()),
            tool_call_id: call_id.to_owned(),
            error: None,
            subagent_run_id: subagent.map(str::to_owned),
        });
        let holder = self
            .messages
            .iter()
            .position(|m| matches!(m, Message::Assistant(a) if a.tool_calls.iter().any(|c| c.id == call_id)));
        match holder {
            Some(at) => {
                let mut at = at + 1;
                while matches!(self.messages.get(at), Some(Message::Tool(_))) {
                    at += 1;
                }
                self.messages.insert(at, message);
            }
            None => self.messages.push(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_grow_the_clients_messages_in_its_shapes() {
        let sent: Vec<Message> =
            serde_json::from_value(json!([{"id": "u1", "role": "user", "content": "hi"}])).expect("messages");
        let mut conversation = Conversation::new(sent);
        conversation.text("m1", "Let me ", None);
        conversation.text("m1", "look.", None);
        conversation.call_started("c1", "fs.read", Some("m1"), None);
        conversation.call_arguments("c1", "{\"path\":");
        conversation.call_arguments("c1", "\"a\"}");
        conversation.call_started("c2", "grep", Some("m1"), None);
        conversation.result("c2-result", "c2", "no match", None);
        conversation.result("c1-result", "c1", "alpha", None);
        conversation.result("again", "c1", "alpha", None);
        conversation.text("m2", "It says alpha.", None);
        let value = serde_json::to_value(conversation.messages()).expect("json");
        assert_eq!(
            value,
            json!([
                {"id": "u1", "role": "user", "content": "hi"},
                {"id": "m1", "role": "assistant", "content": "Let me look.", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "fs.read", "arguments": "{\"path\":\"a\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": ""}}]},
                {"id": "c2-result", "role": "tool", "content": "no match", "toolCallId": "c2"},
                {"id": "c1-result", "role": "tool", "content": "alpha", "toolCallId": "c1"},
                {"id": "m2", "role": "assistant", "content": "It says alpha."}
            ])
        );
    }
}
