//! The provider-neutral request to a model.

use crate::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A tool as offered to a model: its name, what it does, and its arguments' JSON schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The catalog name (`fs.read`, `server/tool`); providers encode it for the wire.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON schema of the arguments object.
    pub input_schema: serde_json::Value,
}

impl ToolSpec {
    /// A tool spec.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: serde_json::Value) -> Self {
        ToolSpec { name: name.into(), description: description.into(), input_schema }
    }
}

/// How the model may use the tools it is offered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must call this tool.
    Tool {
        /// The tool's catalog name.
        name: String,
    },
    /// The model must not call tools.
    None,
}

/// Extended reasoning ("thinking") settings, where a model supports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningConfig {
    /// Tokens the model may spend reasoning before it answers.
    pub budget_tokens: u32,
}

/// One call to a model, in troupe's terms; each provider translates it to its wire format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ModelRequest {
    /// The provider's own model name (`claude-sonnet-4-5`, `gpt-4o`), not the
    /// `provider/model` id: the resolver has already chosen the provider.
    pub model: String,
    /// System instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// How the tools may be used; `None` leaves the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may request several tool calls in one turn; `None` leaves the
    /// provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The most tokens to generate; providers that require it fall back to the model's
    /// registered maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Sequences that end generation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Extended reasoning, where supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningConfig>,
    /// Free-form labels forwarded where the vendor accepts them (e.g. a user id).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl ModelRequest {
    /// An empty request for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        ModelRequest { model: model.into(), ..Default::default() }
    }

    /// Sets the system instructions.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Appends a message.
    pub fn message(mut self, message: Message) -> Self {
        self.messages.push(message);
        self
    }

    /// Offers a tool.
    pub fn tool(mut self, tool: ToolSpec) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the tool choice.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets the output token limit.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Adds a stop sequence.
    pub fn stop_sequence(mut self, stop: impl Into<String>) -> Self {
        self.stop_sequences.push(stop.into());
        self
    }

    /// Enables extended reasoning with a token budget.
    pub fn reasoning(mut self, budget_tokens: u32) -> Self {
        self.reasoning = Some(ReasoningConfig { budget_tokens });
        self
    }

    /// Adds a metadata label.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
}
