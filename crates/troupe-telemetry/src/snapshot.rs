//! [`TelemetrySnapshot`]: every metric at one instant, as plain serializable data.
//!
//! Maps are keyed by the label value (agent name, model id, tool name, outcome), sorted,
//! so two snapshots of the same counts serialize identically. New fields are
//! `#[serde(default)]`, so a snapshot written by an older version still parses.

use crate::histogram::HistogramSnapshot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use troupe_core::Usage;

/// Every metric [`TelemetryMetrics`](crate::TelemetryMetrics) keeps, at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TelemetrySnapshot {
    /// When it was taken, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Runs, by agent name.
    pub agents: BTreeMap<String, AgentTelemetry>,
    /// Model calls, tokens and cost, by model id (`provider/model`).
    pub models: BTreeMap<String, ModelTelemetry>,
    /// Tool calls, by the tool's catalog name.
    pub tools: BTreeMap<String, ToolTelemetry>,
    /// Model calls retried after a transient failure.
    pub model_retries: u64,
    /// Levels: the ones the host sets and the runs in flight.
    pub gauges: Gauges,
}

/// The runs of one agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentTelemetry {
    /// Runs that began (a resumed run begins again).
    pub runs_started: u64,
    /// Runs that ended (or paused), by outcome: `completed`, `paused`, `cancelled`,
    /// `budget_exceeded`, `max_iterations`, `incomplete`, `failed`.
    pub runs_finished: BTreeMap<String, u64>,
    /// Runs that failed with an error, by the error's code (`unknown` when it has none).
    pub run_errors: BTreeMap<String, u64>,
    /// Wall-clock time from a run's start to its end, by outcome, in seconds.
    pub run_duration_seconds: BTreeMap<String, HistogramSnapshot>,
}

impl AgentTelemetry {
    /// Runs that ended, whatever the outcome.
    pub fn runs_finished_total(&self) -> u64 {
        self.runs_finished.values().sum()
    }

    /// Runs that ended with outcome `outcome` (e.g. `"completed"`).
    pub fn runs_finished_with(&self, outcome: &str) -> u64 {
        self.runs_finished.get(outcome).copied().unwrap_or(0)
    }
}

/// The calls made to one model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelTelemetry {
    /// Model calls (one `Usage` event each).
    pub calls: u64,
    /// Of those, calls whose price was unknown, so counted at 0 USD.
    pub unpriced_calls: u64,
    /// Tokens of all calls, by type.
    pub tokens: Usage,
    /// What the calls cost, by the registry's prices, in USD.
    pub cost_usd: f64,
    /// Prompt tokens per call, cached ones included (`gen_ai.client.token.usage`,
    /// `gen_ai.token.type` = `input`).
    pub input_token_usage: HistogramSnapshot,
    /// Generated tokens per call (`gen_ai.client.token.usage`, `gen_ai.token.type` =
    /// `output`).
    pub output_token_usage: HistogramSnapshot,
    /// Seconds per call, from the step that made it to its usage
    /// (`gen_ai.client.operation.duration`).
    #[serde(default)]
    pub operation_duration: HistogramSnapshot,
    /// Times this model was overloaded and another took over, by the model that did.
    pub fallbacks: BTreeMap<String, u64>,
}

/// The calls of one tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolTelemetry {
    /// Calls whose result was not an error.
    pub calls_ok: u64,
    /// Calls whose result was an error, refusals (by policy, capability or a person)
    /// included.
    pub calls_error: u64,
    /// Calls that paused their run to ask a person for approval.
    pub approval_requests: u64,
}

impl ToolTelemetry {
    /// Calls that returned a result, successful or not.
    pub fn calls(&self) -> u64 {
        self.calls_ok + self.calls_error
    }
}

/// Levels rather than counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Gauges {
    /// Runs waiting to be claimed, as the host last set it.
    pub queue_depth: u64,
    /// Runs executing, as the host last set it.
    pub active_runs: u64,
    /// Runs whose start was observed and whose end was not yet.
    pub runs_in_flight: u64,
}

impl TelemetrySnapshot {
    /// Runs started, over all agents.
    pub fn runs_started(&self) -> u64 {
        self.agents.values().map(|a| a.runs_started).sum()
    }

    /// Runs ended with outcome `outcome`, over all agents.
    pub fn runs_finished_with(&self, outcome: &str) -> u64 {
        self.agents.values().map(|a| a.runs_finished_with(outcome)).sum()
    }

    /// Tokens over all models.
    pub fn tokens(&self) -> Usage {
        self.models.values().fold(Usage::default(), |sum, m| sum + m.tokens)
    }

    /// Cost over all models, in USD.
    pub fn cost_usd(&self) -> f64 {
        self.models.values().map(|m| m.cost_usd).sum()
    }

    /// Tool calls that returned a result, over all tools.
    pub fn tool_calls(&self) -> u64 {
        self.tools.values().map(ToolTelemetry::calls).sum()
    }
}
