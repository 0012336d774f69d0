//! The span and attribute names troupe's spans carry: the OpenTelemetry GenAI semantic
//! conventions, written as `tracing` fields.
//!
//! A span's OpenTelemetry name comes from its `otel.name` field (the `tracing` name stays
//! the short operation, which keeps log lines readable); attributes are `tracing` fields
//! with the conventions' dotted names. A field recorded after the span starts (token
//! counts, the response model) must be declared at creation as `tracing::field::Empty`:
//! `tracing` drops values of undeclared fields.
//!
//! | span (`otel.name`) | `tracing` name | kind | fields at creation | recorded later |
//! |---|---|---|---|---|
//! | `invoke_agent {agent}` | `invoke_agent` | internal | [`OPERATION_NAME`] = `invoke_agent`, [`AGENT_NAME`], [`CONVERSATION_ID`], [`RUN_ID`] | [`ERROR_TYPE`] |
//! | `chat {model}` | `chat` | `otel.kind = "client"` | [`OPERATION_NAME`] = `chat`, [`PROVIDER_NAME`], [`REQUEST_MODEL`] | [`RESPONSE_MODEL`], [`RESPONSE_FINISH_REASONS`], [`USAGE_INPUT_TOKENS`], [`USAGE_OUTPUT_TOKENS`], [`USAGE_CACHE_READ_INPUT_TOKENS`], [`ERROR_TYPE`] |
//! | `execute_tool {tool}` | `execute_tool` | internal | [`OPERATION_NAME`] = `execute_tool`, [`TOOL_NAME`], [`TOOL_CALL_ID`] | [`ERROR_TYPE`] |
//!
//! `chat` and `execute_tool` spans are children of their run's `invoke_agent` span (enter
//! it, or pass `parent:`); a delegated teammate's `invoke_agent` is a child of the
//! delegating `execute_tool`. Token counts are integers; `gen_ai.usage.input_tokens` counts
//! every prompt token, cached ones included, as the conventions define it. A failure
//! records `error.type` (a short machine-readable kind) and `otel.status_code = "error"`,
//! so declare both as `Empty`. Spans are `INFO`, the level [`init`](crate::init) exports by
//! default.
//! `gen_ai.response.finish_reasons` is an array in the conventions; `tracing` has no arrays,
//! so it is recorded as the reasons joined by commas.
//!
//! Record integers as `i64` (see [`count`]): `tracing-opentelemetry` exports an `i64` as an
//! integer attribute but a `u64` as its decimal string.
//!
//! ```
//! use tracing::field::Empty;
//!
//! let agent = tracing::info_span!(
//!     "invoke_agent",
//!     otel.name = "invoke_agent triage",
//!     gen_ai.operation.name = "invoke_agent",
//!     gen_ai.agent.name = "triage",
//!     gen_ai.conversation.id = Empty,
//!     troupe.run.id = "run_1",
//!     error.type = Empty,
//! );
//! let chat = tracing::info_span!(
//!     parent: &agent,
//!     "chat",
//!     otel.name = "chat demo-model",
//!     otel.kind = "client",
//!     gen_ai.operation.name = "chat",
//!     gen_ai.provider.name = "demo",
//!     gen_ai.request.model = "demo-model",
//!     gen_ai.response.model = Empty,
//!     gen_ai.response.finish_reasons = Empty,
//!     gen_ai.usage.input_tokens = Empty,
//!     gen_ai.usage.output_tokens = Empty,
//!     gen_ai.usage.cache_read.input_tokens = Empty,
//!     error.type = Empty,
//! );
//! let usage = troupe_core::Usage { input_tokens: 200, cache_read_tokens: 1000, output_tokens: 80, ..Default::default() };
//! chat.record("gen_ai.usage.input_tokens", troupe_telemetry::semconv::count(usage.total_input()));
//! chat.record("gen_ai.usage.output_tokens", troupe_telemetry::semconv::count(usage.output_tokens));
//! let tool = tracing::info_span!(
//!     parent: &agent,
//!     "execute_tool",
//!     otel.name = "execute_tool fs.read",
//!     gen_ai.operation.name = "execute_tool",
//!     gen_ai.tool.name = "fs.read",
//!     gen_ai.tool.call.id = "call_1",
//!     error.type = Empty,
//! );
//! # drop((chat, tool));
//! ```

/// The `tracing` field that names the OpenTelemetry span.
pub const OTEL_NAME: &str = "otel.name";
/// The `tracing` field that sets the span kind (`client`, `server`, `internal`, …).
pub const OTEL_KIND: &str = "otel.kind";
/// The `tracing` field that sets the span status (`ok`, `error`).
pub const OTEL_STATUS_CODE: &str = "otel.status_code";

/// The operation: [`CHAT`], [`EXECUTE_TOOL`] or [`INVOKE_AGENT`].
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// The provider: `anthropic`, `openai`, `gcp.gemini`, …
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The model the request asked for.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// The model that answered.
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
/// Why the model stopped.
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// Prompt tokens of the call, cached ones included.
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Generated tokens of the call.
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Prompt tokens served from the provider's cache.
pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// The conversation the run continues.
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// The agent's name.
pub const AGENT_NAME: &str = "gen_ai.agent.name";
/// The tool's catalog name.
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// The model's id of the tool call.
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// A short, machine-readable kind of failure.
pub const ERROR_TYPE: &str = "error.type";
/// The troupe run the span belongs to.
pub const RUN_ID: &str = "troupe.run.id";

/// [`OPERATION_NAME`] of a model call.
pub const CHAT: &str = "chat";
/// [`OPERATION_NAME`] of a tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// [`OPERATION_NAME`] of an agent's run.
pub const INVOKE_AGENT: &str = "invoke_agent";

/// A token count as the integer attribute value it must be recorded as (saturating at
/// `i64::MAX`).
pub fn count(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The span name of a model call: `chat {model}`.
pub fn chat_span_name(model: &str) -> String {
    format!("{CHAT} {model}")
}

/// The span name of a tool call: `execute_tool {tool}`.
pub fn execute_tool_span_name(tool: &str) -> String {
    format!("{EXECUTE_TOOL} {tool}")
}

/// The span name of an agent's run: `invoke_agent {agent}`.
pub fn invoke_agent_span_name(agent: &str) -> String {
    format!("{INVOKE_AGENT} {agent}")
}

/// The conventions' name of a provider: `anthropic`, `openai`, `gcp.gemini`, …; the
/// provider's own name for the others.
pub fn provider_name(name: &str) -> &str {
    match name {
        "openai" | "openai-responses" | "openai-chat" => "openai",
        "gemini" | "google" => "gcp.gemini",
        "vertex" | "vertex-ai" => "gcp.vertex_ai",
        "mistral" => "mistral_ai",
        "xai" => "x_ai",
        "bedrock" => "aws.bedrock",
        "azure" | "azure-openai" => "azure.ai.openai",
        other => other,
    }
}

/// A troupe model id (`provider/model`) as the conventions' provider name and model name:
/// `anthropic/claude-sonnet-4` is (`anthropic`, `claude-sonnet-4`); an id without a
/// provider (`demo`) is both.
pub fn provider_and_model(id: &str) -> (&str, &str) {
    match id.split_once('/') {
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => (provider_name(provider), model),
        _ => (provider_name(id), id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_follow_the_conventions() {
        for (ours, theirs) in [
            ("anthropic", "anthropic"),
            ("openai", "openai"),
            ("openai-responses", "openai"),
            ("gemini", "gcp.gemini"),
            ("mistral", "mistral_ai"),
            ("xai", "x_ai"),
            ("groq", "groq"),
            ("demo", "demo"),
        ] {
            assert_eq!(provider_name(ours), theirs, "{ours}");
        }
        assert_eq!(provider_and_model("gemini/gemini-2.5-pro"), ("gcp.gemini", "gemini-2.5-pro"));
        assert_eq!(provider_and_model("ollama/llama3.2:latest"), ("ollama", "llama3.2:latest"));
        assert_eq!(provider_and_model("demo"), ("demo", "demo"));
    }

    #[test]
    fn span_names_are_operation_then_subject() {
        assert_eq!(chat_span_name("demo-model"), "chat demo-model");
        assert_eq!(execute_tool_span_name("fs.read"), "execute_tool fs.read");
        assert_eq!(invoke_agent_span_name("triage"), "invoke_agent triage");
    }

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        assert_eq!(count(1200), 1200);
        assert_eq!(count(u64::MAX), i64::MAX);
    }
}
