//! What an AG-UI client sends: `RunAgentInput` and the messages, tools, context and
//! resume entries inside it, with the protocol's field names.
//!
//! Unknown fields are ignored, as the protocol's own schemas do, so a newer client's
//! additions do not break an older server.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The body of `POST /agui/{agent}`: one run of an agent on a thread.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation the run belongs to.
    pub thread_id: String,
    /// This run's id, chosen by the client.
    pub run_id: String,
    /// The run this one follows on the thread, if the client says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The protocol version the client speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The client's view of the agent's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The conversation so far, oldest first.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Tools the client offers to run itself.
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Named pieces of information for the run.
    #[serde(default)]
    pub context: Vec<Context>,
    /// Application-specific properties passed through to the agent.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub forwarded_props: Value,
    /// Answers to the interrupts the previous run ended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<ResumeEntry>>,
}

/// One message of the conversation, by role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the application's developer.
    Developer(TextMessage),
    /// Instructions from the system.
    System(TextMessage),
    /// A message from the agent.
    Assistant(AssistantMessage),
    /// A message from the person.
    User(UserMessage),
    /// What a tool returned.
    Tool(ToolMessage),
    /// Structured progress shown by the client; not conversation content.
    Activity(Map<String, Value>),
    /// The agent's visible reasoning; not sent back to the model.
    Reasoning(Map<String, Value>),
}

/// A system or developer message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessage {
    /// The message's id.
    pub id: String,
    /// Its text.
    pub content: String,
    /// Who wrote it, if named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A message from the agent: text, tool calls, or both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// The message's id.
    pub id: String,
    /// Its text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tool calls it made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Who wrote it, if named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The subagent (a team member's run) that wrote it, when not the agent itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A tool call an assistant message made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call's id.
    pub id: String,
    /// What kind of call it is: always a function call.
    #[serde(rename = "type", default)]
    pub kind: ToolCallKind,
    /// The tool and its arguments.
    pub function: FunctionCall,
}

/// The kind of a [`ToolCall`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallKind {
    /// A call of a function (a tool).
    #[default]
    Function,
}

/// The name and arguments of a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
}

/// A message from the person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// The message's id.
    pub id: String,
    /// What it says.
    pub content: Content,
    /// Who wrote it, if named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What a tool returned, answering an assistant message's call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    /// The message's id.
    pub id: String,
    /// The result.
    pub content: Content,
    /// The call it answers.
    pub tool_call_id: String,
    /// Set when the call failed: what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The subagent (a team member's run) whose call it answers, when not the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A message's content: plain text, or parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Text and media parts, in order.
    Parts(Vec<ContentPart>),
}

/// One part of a message's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Where its bytes are.
        source: PartSource,
    },
    /// A sound recording.
    Audio {
        /// Where its bytes are.
        source: PartSource,
    },
    /// A video.
    Video {
        /// Where its bytes are.
        source: PartSource,
    },
    /// A document (a PDF, say).
    Document {
        /// Where its bytes are.
        source: PartSource,
    },
}

/// Where a media part's bytes are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PartSource {
    /// Inline, base64-encoded.
    Data {
        /// The base64 data.
        value: String,
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// At a URL.
    Url {
        /// The URL.
        value: String,
        /// Its MIME type, if known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A file held by a provider.
    File {
        /// The file's id.
        value: String,
        /// Who holds it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// Its MIME type, if known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// A tool the client offers to run itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its parameters' JSON Schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// A named piece of information given to the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// What it is.
    pub description: String,
    /// The information.
    pub value: String,
}

/// An answer to one interrupt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt answered (for an approval, the tool call's id).
    pub interrupt_id: String,
    /// Whether the person answered or dismissed it.
    pub status: ResumeStatus,
    /// The answer; see the module documentation for what an approval takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// How an interrupt was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    /// Answered, with the payload.
    Resolved,
    /// Dismissed.
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_client_body_parses_with_every_role_and_unknown_fields_ignored() {
        let body = json!({
            "threadId": "t1", "runId": "r1", "protocolVersion": "1.0", "state": {},
            "messages": [
                {"id": "s", "role": "system", "content": "be brief"},
                {"id": "u1", "role": "user", "content": "hi", "future": 1},
                {"id": "a1", "role": "assistant", "content": "hello",
                 "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "fs.read", "arguments": "{}"}}]},
                {"id": "t", "role": "tool", "toolCallId": "c1", "content": "ok"},
                {"id": "r", "role": "reasoning", "content": "hmm"},
                {"id": "u2", "role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}}]}
            ],
            "tools": [], "context": [{"description": "page", "value": "/home"}],
            "forwardedProps": {"modelSelection": "anthropic/claude"},
            "resume": [{"interruptId": "c1", "status": "resolved", "payload": {"approved": true}}]
        });
        let input: RunAgentInput = serde_json::from_value(body).expect("parses");
        assert_eq!(input.thread_id, "t1");
        assert_eq!(input.messages.len(), 6);
        assert!(matches!(&input.messages[2], Message::Assistant(a) if a.tool_calls[0].function.name == "fs.read"));
        assert!(
            matches!(&input.messages[5], Message::User(u) if matches!(&u.content, Content::Parts(p) if p.len() == 2))
        );
        let resume = input.resume.expect("resume");
        assert_eq!(resume[0].status, ResumeStatus::Resolved);
        assert_eq!(input.context[0].value, "/home");
    }

    #[test]
    fn missing_ids_and_unknown_roles_are_refused() {
        assert!(serde_json::from_value::<RunAgentInput>(json!({"runId": "r", "messages": []})).is_err());
        let odd = json!({"threadId": "t", "runId": "r", "messages": [{"id": "x", "role": "robot", "content": ""}]});
        assert!(serde_json::from_value::<RunAgentInput>(odd).is_err());
    }
}
