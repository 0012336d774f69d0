//! Conversation messages and their content blocks.

use crate::ids::ToolCallId;
use serde::{Deserialize, Serialize};

/// Who wrote a message. System instructions are not a role: they travel apart, in
/// [`ModelRequest::system`](crate::ModelRequest::system).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person or program driving the agent; also carries tool results back.
    User,
    /// The model.
    Assistant,
}

/// Where the bytes of an image or a document come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline, base64-encoded bytes.
    Base64 {
        /// The MIME type, e.g. `image/png`.
        media_type: String,
        /// The base64 data, without a `data:` prefix.
        data: String,
    },
    /// A URL the provider fetches itself.
    Url {
        /// The image's address.
        url: String,
    },
}

/// One piece of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Where the image comes from.
        source: ImageSource,
    },
    /// A document (a PDF), for vendors that read them.
    Document {
        /// Where the document comes from (its `media_type` is `application/pdf`).
        source: ImageSource,
        /// Its file name, where known: some vendors show it to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// The model's request to call a tool.
    ToolUse {
        /// The call's id, as the model gave it; the result refers to it.
        id: ToolCallId,
        /// The tool's catalog name.
        name: String,
        /// The arguments, a JSON object.
        input: serde_json::Value,
        /// An opaque signature some providers attach to a call and require back
        /// verbatim (Gemini's `thoughtSignature`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// The outcome of a tool call, sent back to the model.
    ToolResult {
        /// The id of the [`ContentBlock::ToolUse`] this answers.
        tool_use_id: ToolCallId,
        /// The tool's output, or the error the model should see.
        content: String,
        /// Whether `content` describes a failure.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// The model's visible reasoning.
    Thinking {
        /// The reasoning text (or its summary).
        text: String,
        /// A provider signature that must be echoed back with the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider returned encrypted; echoed back untouched.
    RedactedThinking {
        /// The opaque payload.
        data: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// A tool call block.
    pub fn tool_use(id: impl Into<ToolCallId>, name: impl Into<String>, input: serde_json::Value) -> Self {
        ContentBlock::ToolUse { id: id.into(), name: name.into(), input, signature: None }
    }

    /// A successful tool result block.
    pub fn tool_result(tool_use_id: impl Into<ToolCallId>, content: impl Into<String>) -> Self {
        ContentBlock::ToolResult { tool_use_id: tool_use_id.into(), content: content.into(), is_error: false }
    }

    /// A failed tool result block: the model sees `message` and may correct itself.
    pub fn tool_error(tool_use_id: impl Into<ToolCallId>, message: impl Into<String>) -> Self {
        ContentBlock::ToolResult { tool_use_id: tool_use_id.into(), content: message.into(), is_error: true }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it says, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A message from `role` made of `content`.
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Message { role, content }
    }

    /// A user message of one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, vec![ContentBlock::text(text)])
    }

    /// An assistant message of one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, vec![ContentBlock::text(text)])
    }

    /// All text blocks joined, in order.
    pub fn text(&self) -> String {
        self.content.iter().filter_map(ContentBlock::as_text).collect()
    }

    /// The tool calls this message requests, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&ToolCallId, &str, &serde_json::Value)> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolUse { id, name, input, .. } => Some((id, name.as_str(), input)),
            _ => None,
        })
    }

    /// Whether this message requests any tool call.
    pub fn has_tool_use(&self) -> bool {
        self.tool_uses().next().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_serialize_with_a_type_tag() {
        let block = ContentBlock::tool_use("toolu_1", "fs.read", json!({"path": "a.txt"}));
        let value = serde_json::to_value(&block).expect("serializes");
        assert_eq!(value, json!({"type": "tool_use", "id": "toolu_1", "name": "fs.read", "input": {"path": "a.txt"}}));
        let back: ContentBlock = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, block);
    }

    #[test]
    fn text_joins_only_text_blocks() {
        let message = Message::new(
            Role::Assistant,
            vec![ContentBlock::text("a"), ContentBlock::tool_use("c", "t", json!({})), ContentBlock::text("b")],
        );
        assert_eq!(message.text(), "ab");
        assert_eq!(message.tool_uses().count(), 1);
    }

    #[test]
    fn tool_error_is_flagged() {
        let v = serde_json::to_value(ContentBlock::tool_error("c", "boom")).expect("serializes");
        assert_eq!(v["is_error"], json!(true));
        let ok = serde_json::to_value(ContentBlock::tool_result("c", "fine")).expect("serializes");
        assert!(ok.get("is_error").is_none());
    }
}
