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
    /// The JSON schema of the arguments object, shared: a run offers its tools at every
    /// model call, and a schema can be large.
    pub input_schema: std::sync::Arc<serde_json::Value>,
}

impl ToolSpec {
    /// A tool spec.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: impl Into<std::sync::Arc<serde_json::Value>>,
    ) -> Self {
        ToolSpec { name: name.into(), description: description.into(), input_schema: input_schema.into() }
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

/// The shape a model's final answer must take: a JSON schema, sent to each vendor by its
/// own structured-output mechanism (OpenAI's `json_schema` response format, Anthropic's
/// `output_config`, Gemini's `responseSchema`) or, for a server without one, as a final
/// `answer` tool the model must call.
///
/// The answer comes back as the text of the model's last turn: the JSON document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputSchema {
    /// A name for the shape (`[a-zA-Z0-9_-]`, at most 64 characters: OpenAI's limit),
    /// e.g. the Rust type's name.
    pub name: String,
    /// The JSON schema of the answer. Vendors' strict modes want an object at the root,
    /// every property required and `additionalProperties: false`.
    pub schema: serde_json::Value,
}

impl OutputSchema {
    /// An output schema named `name`.
    pub fn new(name: impl Into<String>, schema: serde_json::Value) -> Self {
        OutputSchema { name: name.into(), schema }
    }

    /// A name vendors accept made from `text` (a type's or a file's name): every character
    /// outside `[a-zA-Z0-9_-]` becomes `_`, at most 64 are kept, and nothing at all is
    /// `Output`.
    pub fn name_from(text: &str) -> String {
        let name: String = text
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
            .take(64)
            .collect();
        if name.is_empty() { "Output".to_owned() } else { name }
    }

    /// Whether the schema meets the vendors' strict mode (OpenAI's `strict: true`): every
    /// object closed (`additionalProperties: false`) with every property required. Only
    /// then is it sent as strict; a schema with optional fields is sent as a hint, and the
    /// answer is still validated when it comes back.
    pub fn is_strict(&self) -> bool {
        fn strict(node: &serde_json::Value) -> bool {
            use serde_json::Value;
            match node {
                Value::Array(items) => items.iter().all(strict),
                Value::Object(map) => {
                    if let Some(Value::Object(properties)) = map.get("properties") {
                        let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
                        let required: Vec<&str> = match map.get("required") {
                            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
                            _ => Vec::new(),
                        };
                        if !closed || !properties.keys().all(|key| required.contains(&key.as_str())) {
                            return false;
                        }
                    }
                    // Data keys hold values, not schemas.
                    map.iter()
                        .filter(|(key, _)| !matches!(key.as_str(), "enum" | "const" | "default" | "examples"))
                        .all(|(_, value)| strict(value))
                }
                _ => true,
            }
        }
        strict(&self.schema)
    }
}

/// How long a vendor keeps a request's cached prefix, where it lets the caller choose:
/// Anthropic's `cache_control` TTL (`5m` or `1h`), OpenAI's `prompt_cache_retention`
/// (in memory, or `24h`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheTtl {
    /// The vendor's default: about five minutes after the last use.
    #[default]
    Short,
    /// As long as the vendor offers: an hour at Anthropic (writes cost 2× input instead of
    /// 1.25×), a day at OpenAI.
    Long,
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
    /// The shape the final answer must take, when the caller asks for a typed answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSchema>,
    /// Ask the vendor to cache the request's prefix (instructions, tools, the conversation
    /// so far), by its own mechanism; `None` asks for nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheTtl>,
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

    /// Asks for an answer of this shape.
    pub fn output(mut self, output: OutputSchema) -> Self {
        self.output = Some(output);
        self
    }

    /// Adds a metadata label.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
}
