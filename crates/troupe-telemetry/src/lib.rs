//! Observability for troupe: metrics from the agent event stream, exported as Prometheus
//! text or JSON, and `tracing` spans on the OpenTelemetry GenAI conventions, exported over
//! OTLP.
//!
//! - **Metrics.** Every run emits the neutral [`AgentEvent`](troupe_core::AgentEvent)
//!   stream; [`TelemetryMetrics::observe`] turns it into counters (runs by outcome, errors,
//!   tokens by type, cost by model, tool calls by tool and result, approval requests),
//!   histograms (run duration, tokens per model call as `gen_ai.client.token.usage`) and
//!   gauges the host sets (queue depth, active runs). [`TelemetryMetrics::snapshot`] gives
//!   a plain [`TelemetrySnapshot`]; a [`MetricsExporter`] renders it:
//!   [`PrometheusExporter`] (text format 0.0.4, every name prefixed `troupe_`) or
//!   [`JsonExporter`].
//! - **Spans.** The runtime opens `invoke_agent {agent}`, `chat {model}` and
//!   `execute_tool {tool}` spans with `tracing`; [`semconv`] is the exact convention (span
//!   name in `otel.name`, attributes as dotted `gen_ai.*` fields).
//! - **Export.** [`init`] installs the process's subscriber: log lines on stderr and, with
//!   feature `otlp` and an `OtlpConfig`, spans sent to a collector over OTLP/HTTP with
//!   protobuf, at `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://localhost:4318`) unless
//!   the configuration names another. An application with a subscriber of its own adds
//!   `otlp_layer` to it. Either way the returned [`TelemetryGuard`] flushes on drop.
//!
//! This crate depends on `troupe-core` only: it reads events, it never drives a run.
//!
//! # Security audit
//!
//! The audit trail lives in `troupe-tools` (`AuditLog`, with `MemoryAuditLog` and the
//! JSON-lines `FileAuditLog`): give one to an agent (`AgentBuilder::audit_log`) and the
//! runner records every capability check and every answer to an approval request, with a
//! digest of the call's arguments instead of the arguments. This crate adds no second
//! audit sink; its metrics count the same moments in aggregate —
//! `troupe_tool_approval_requests_total` and `troupe_tool_calls_total{result="error"}`,
//! refusals included. The facade's `observability` example wires both.
//!
//! # Example
//!
//! ```
//! use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId, RunOutcomeKind, ToolCallId, Usage};
//! use troupe_telemetry::{JsonExporter, PrometheusExporter, TelemetryMetrics};
//!
//! let metrics = TelemetryMetrics::new();
//! let mut seq = 0;
//! let mut emit = |kind| {
//!     let attribution = Attribution::now(AgentId::new("triage"), RunId::new("run_1"), seq);
//!     seq += 1;
//!     metrics.observe(&AgentEvent::new(attribution, kind));
//! };
//! emit(AgentEventKind::RunStarted { instruction: "sort the inbox".into(), model: "demo".into() });
//! let usage = Usage { input_tokens: 900, output_tokens: 40, ..Usage::default() };
//! emit(AgentEventKind::Usage { model: "demo".into(), usage, cost_usd: Some(0.0) });
//! let call_id = ToolCallId::new("call_1");
//! emit(AgentEventKind::ToolCallStart { call_id: call_id.clone(), tool: "fs.read".into(), parent_message_id: None });
//! emit(AgentEventKind::ToolCallResult { call_id, content: "# Inbox".into(), is_error: false });
//! emit(AgentEventKind::RunFinished { outcome: RunOutcomeKind::Completed, output: None, usage, cost_usd: 0.0 });
//!
//! let snapshot = metrics.snapshot();
//! let text = PrometheusExporter::new().render(&snapshot);
//! assert!(text.contains(r#"troupe_runs_finished_total{agent="triage",outcome="completed"} 1"#));
//! assert!(text.contains(r#"troupe_tokens_total{model="demo",type="input"} 900"#));
//! assert!(text.contains(r#"troupe_tool_calls_total{tool="fs.read",result="ok"} 1"#));
//! let json = JsonExporter::new().render(&snapshot)?;
//! assert!(json.contains(r#""fs.read":{"calls_ok":1"#));
//! # Ok::<(), troupe_telemetry::TelemetryError>(())
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod exporter;
mod histogram;
mod metrics;
#[cfg(feature = "otlp")]
mod otlp;
mod prometheus;
pub mod semconv;
mod snapshot;
mod subscriber;

pub use error::TelemetryError;
pub use exporter::{JsonExporter, MetricsExporter};
pub use histogram::{Bucket, HistogramSnapshot, OPERATION_DURATION_BUCKETS, RUN_DURATION_BUCKETS, TOKEN_USAGE_BUCKETS};
pub use metrics::{DEFAULT_RUN_CAPACITY, TelemetryMetrics, UNKNOWN_ERROR_CODE, UNKNOWN_TOOL, outcome_label};
#[cfg(feature = "otlp")]
pub use otlp::{
    DEFAULT_OTLP_ENDPOINT, DEFAULT_SERVICE_NAME, OtlpConfig, OtlpLayer, TRACER_NAME, TRACES_PATH, otlp_layer,
};
pub use prometheus::{METRIC_PREFIX, PROMETHEUS_CONTENT_TYPE, PrometheusExporter, escape_label_value};
pub use snapshot::{AgentTelemetry, Gauges, ModelTelemetry, TelemetrySnapshot, ToolTelemetry};
pub use subscriber::{DEFAULT_LOG_FILTER, DEFAULT_TRACE_FILTER, TelemetryConfig, TelemetryGuard, init};
