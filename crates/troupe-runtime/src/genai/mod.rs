//! Tracing spans on the OpenTelemetry GenAI semantic conventions.
//!
//! A run is an `invoke_agent {agent}` span; each model call a `chat {model}` span (kind
//! client) and each tool call an `execute_tool {tool}` span, both children of the run's.
//! The display name is the `otel.name` field; attributes are fields named as the
//! conventions name them, declared empty up front and recorded once known.
//! Token counts are recorded as `i64` (saturating): exporters such as
//! `tracing-opentelemetry` turn a `u64` field into a string, and the conventions want
//! integers.
//! `gen_ai.usage.input_tokens` counts every prompt token, cached ones included; the
//! cached ones are also in `gen_ai.usage.cache_read.input_tokens` (and
//! `cache_creation.input_tokens`) when the provider reports them.
//! `gen_ai.response.finish_reasons` is an array in the conventions; `tracing` has no
//! arrays, so it is the reasons joined by commas. A failure sets `error.type` (a short
//! machine-readable kind: the model error's code, `cancelled`, `timeout`,
//! `middleware_refused`, a tool failure's kind) and `otel.status_code = "error"`.
//! troupe's own attributes: `troupe.run.id`, `troupe.parent_run.id` (a delegated run's
//! parent) and `troupe.run.outcome` on `invoke_agent`.
//!
//! Content (prompts, responses, tool arguments and results) is recorded only when the
//! runner is told to capture it; it is then JSON text in `gen_ai.system_instructions`,
//! `gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.tool.call.arguments` and
//! `gen_ai.tool.call.result`, after the middlewares ran (so redacted where they redact).

mod content;

use tracing::Span;
use tracing::field::Empty;
use troupe_core::{ConversationId, ModelRequest, RunId, StopReason, Usage};
use troupe_model::ModelResponse;
use troupe_run::RunOutcome;
use troupe_telemetry::semconv::provider_name;
use troupe_tools::{ToolCall, ToolError, ToolResultOutcome};

/// The span of a whole run (or of the part of it one process runs).
pub(crate) fn agent_span(
    agent: &str,
    run_id: &RunId,
    conversation: Option<&ConversationId>,
    parent_run: Option<&RunId>,
    model: &str,
) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("invoke_agent {agent}"),
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %agent,
        gen_ai.conversation.id = Empty,
        gen_ai.request.model = %model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        troupe.run.id = %run_id,
        troupe.parent_run.id = Empty,
        troupe.run.outcome = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    );
    if let Some(conversation) = conversation {
        span.record("gen_ai.conversation.id", conversation.as_str());
    }
    if let Some(parent) = parent_run {
        span.record("troupe.parent_run.id", parent.as_str());
    }
    span
}

/// Records how the run ended and what it used.
pub(crate) fn record_run_end(span: &Span, outcome: &RunOutcome, usage: &Usage) {
    if span.is_disabled() {
        return;
    }
    let kind = serde_json::to_value(outcome.kind()).ok().and_then(|v| v.as_str().map(str::to_owned));
    if let Some(kind) = kind {
        span.record("troupe.run.outcome", kind.as_str());
    }
    if let RunOutcome::Failed { code, .. } = outcome {
        record_error(span, code.as_ref().map_or("error", |code| code.as_str()));
    }
    span.record("gen_ai.usage.input_tokens", count(usage.total_input()));
    span.record("gen_ai.usage.output_tokens", count(usage.output_tokens));
}

/// A token count as the integer attribute it is recorded as, saturating at `i64::MAX`.
fn count(value: impl Into<u64>) -> i64 {
    i64::try_from(value.into()).unwrap_or(i64::MAX)
}

/// The span of one model call, with what the request says; content only if `capture`.
pub(crate) fn chat_span(provider: &str, request: &ModelRequest, capture: bool) -> Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = %format!("chat {}", request.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(provider),
        gen_ai.request.model = %request.model,
        gen_ai.request.max_tokens = Empty,
        gen_ai.request.temperature = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(max) = request.max_tokens {
        span.record("gen_ai.request.max_tokens", count(max));
    }
    if let Some(temperature) = request.temperature {
        span.record("gen_ai.request.temperature", f64::from(temperature));
    }
    if capture {
        if let Some(system) = content::system_instructions(request) {
            span.record("gen_ai.system_instructions", system.as_str());
        }
        span.record("gen_ai.input.messages", content::input_messages(&request.messages).as_str());
    }
    span
}

/// Records a complete response: the model that served it, why it stopped, its usage.
pub(crate) fn record_response(span: &Span, response: &ModelResponse, served_by: &str, capture: bool) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.response.model", response.model.as_deref().unwrap_or(served_by));
    if let Some(id) = &response.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    // One response, one reason; several would be joined by commas.
    span.record("gen_ai.response.finish_reasons", finish_reason(&response.stop_reason));
    record_usage(span, &response.usage);
    if capture {
        span.record("gen_ai.output.messages", content::output_messages(response).as_str());
    }
}

/// Records what a call used (a failed call's partial usage too, where it had any).
pub(crate) fn record_usage(span: &Span, usage: &Usage) {
    if span.is_disabled() || usage.is_empty() {
        return;
    }
    span.record("gen_ai.usage.input_tokens", count(usage.total_input()));
    span.record("gen_ai.usage.output_tokens", count(usage.output_tokens));
    if usage.cache_read_tokens > 0 {
        span.record("gen_ai.usage.cache_read.input_tokens", count(usage.cache_read_tokens));
    }
    if usage.cache_write_tokens > 0 {
        span.record("gen_ai.usage.cache_creation.input_tokens", count(usage.cache_write_tokens));
    }
}

/// Records why a call (or run) failed.
pub(crate) fn record_error(span: &Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
}

/// The span of one tool call; its arguments only if `capture`.
pub(crate) fn tool_span(call: &ToolCall) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {}", call.name),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        error.type = Empty,
        otel.status_code = Empty,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
    )
}

/// Records the arguments the tool runs with, when content is captured.
pub(crate) fn record_tool_arguments(span: &Span, arguments: &serde_json::Value, capture: bool) {
    if capture && !span.is_disabled() {
        span.record("gen_ai.tool.call.arguments", arguments.to_string().as_str());
    }
}

/// Records how a tool call ended; `refused` when a middleware stopped it.
pub(crate) fn record_tool_result(span: &Span, outcome: &ToolResultOutcome, refused: bool, capture: bool) {
    if span.is_disabled() {
        return;
    }
    if outcome.is_error {
        let error_type = if refused { "middleware_refused" } else { tool_error_type(outcome.error.as_ref()) };
        record_error(span, error_type);
    }
    if capture {
        span.record("gen_ai.tool.call.result", outcome.content.as_str());
    }
}

/// The conventions' finish reason for a stop reason.
pub(crate) fn finish_reason(stop: &StopReason) -> &str {
    match stop {
        StopReason::EndTurn | StopReason::StopSequence => "stop",
        StopReason::ToolUse => "tool_call",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        StopReason::ContextWindowExceeded => "context_window_exceeded",
        StopReason::PauseTurn => "pause_turn",
        StopReason::Other(other) => other,
    }
}

/// A short name of a tool failure, for `error.type`.
fn tool_error_type(error: Option<&ToolError>) -> &'static str {
    match error {
        Some(ToolError::InvalidArguments { .. }) => "invalid_arguments",
        Some(ToolError::UnknownTool { .. }) => "unknown_tool",
        Some(ToolError::PathOutsideWorkspace { .. }) => "path_outside_workspace",
        Some(ToolError::NotFound { .. }) => "not_found",
        Some(ToolError::Io { .. }) => "io",
        Some(ToolError::Timeout { .. }) => "timeout",
        Some(ToolError::Cancelled) => "cancelled",
        Some(ToolError::Panicked { .. }) => "panicked",
        Some(ToolError::Denied { .. }) => "denied",
        _ => "tool_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        assert_eq!(count(20u64), 20);
        assert_eq!(count(4096u32), 4096);
        assert_eq!(count(u64::MAX), i64::MAX);
    }

    #[test]
    fn finish_reasons_follow_the_conventions() {
        assert_eq!(finish_reason(&StopReason::EndTurn), "stop");
        assert_eq!(finish_reason(&StopReason::ToolUse), "tool_call");
        assert_eq!(finish_reason(&StopReason::MaxTokens), "length");
        assert_eq!(finish_reason(&StopReason::Other("SAFETY".into())), "SAFETY");
    }
}
