//! Per-agent run metrics: lock-free counters and a serializable snapshot.

use crate::outcome::RunOutput;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use troupe_core::RunOutcomeKind;

/// The counters of one agent. Every field is updated atomically; read them together with
/// [`snapshot`](AgentMetrics::snapshot).
#[derive(Debug, Default)]
pub struct AgentMetrics {
    runs_started: AtomicU64,
    runs_completed: AtomicU64,
    runs_failed: AtomicU64,
    runs_cancelled: AtomicU64,
    runs_paused: AtomicU64,
    runs_limited: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    cache_read_tokens: AtomicU64,
    cache_write_tokens: AtomicU64,
    model_calls: AtomicU64,
    tool_calls: AtomicU64,
    tool_errors: AtomicU64,
    total_duration_ms: AtomicU64,
    cost_micro_usd: AtomicU64,
}

/// The counters of one agent at one instant. New fields are `#[serde(default)]`, so an
/// older snapshot still parses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricsSnapshot {
    /// Runs started; a resumed run counts again, as it ends again.
    pub runs_started: u64,
    /// Runs that completed.
    pub runs_completed: u64,
    /// Runs that failed.
    pub runs_failed: u64,
    /// Runs that were cancelled.
    pub runs_cancelled: u64,
    /// Runs that paused for approval.
    pub runs_paused: u64,
    /// Runs stopped by a limit: a budget, the iteration limit, or the output limit.
    pub runs_limited: u64,
    /// Prompt tokens billed at the full price.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to cache.
    pub cache_write_tokens: u64,
    /// Model calls made.
    pub model_calls: u64,
    /// Tool calls the models made.
    pub tool_calls: u64,
    /// Of those, the ones whose result was an error.
    pub tool_errors: u64,
    /// Wall-clock time of all finished runs, in milliseconds.
    pub total_duration_ms: u64,
    /// Cost of all finished runs, in USD.
    pub cost_usd: f64,
}

impl AgentMetrics {
    /// Counts a run that began.
    pub fn run_started(&self) {
        self.runs_started.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts what a finished run used and how it ended.
    pub fn run_finished(&self, output: &RunOutput) {
        let outcome = match output.outcome.kind() {
            RunOutcomeKind::Completed => &self.runs_completed,
            RunOutcomeKind::Failed => &self.runs_failed,
            RunOutcomeKind::Cancelled => &self.runs_cancelled,
            RunOutcomeKind::Paused => &self.runs_paused,
            RunOutcomeKind::BudgetExceeded | RunOutcomeKind::MaxIterations | RunOutcomeKind::Incomplete => {
                &self.runs_limited
            }
        };
        outcome.fetch_add(1, Ordering::Relaxed);
        let usage = output.usage;
        add(&self.input_tokens, usage.input_tokens);
        add(&self.output_tokens, usage.output_tokens);
        add(&self.cache_read_tokens, usage.cache_read_tokens);
        add(&self.cache_write_tokens, usage.cache_write_tokens);
        add(&self.model_calls, u64::from(output.state.iteration()));
        add(&self.tool_calls, u64::from(output.tool_calls));
        add(&self.tool_errors, u64::from(output.state.tool_errors()));
        add(&self.total_duration_ms, u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX));
        // Micro-dollars keep the sum exact enough in an integer atomic.
        let micro = (output.cost_usd.max(0.0) * 1_000_000.0).round();
        if micro.is_finite() {
            // `as` saturates: a cost past what a u64 holds counts as the most it holds.
            add(&self.cost_micro_usd, micro as u64);
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        MetricsSnapshot {
            runs_started: get(&self.runs_started),
            runs_completed: get(&self.runs_completed),
            runs_failed: get(&self.runs_failed),
            runs_cancelled: get(&self.runs_cancelled),
            runs_paused: get(&self.runs_paused),
            runs_limited: get(&self.runs_limited),
            input_tokens: get(&self.input_tokens),
            output_tokens: get(&self.output_tokens),
            cache_read_tokens: get(&self.cache_read_tokens),
            cache_write_tokens: get(&self.cache_write_tokens),
            model_calls: get(&self.model_calls),
            tool_calls: get(&self.tool_calls),
            tool_errors: get(&self.tool_errors),
            total_duration_ms: get(&self.total_duration_ms),
            cost_usd: get(&self.cost_micro_usd) as f64 / 1_000_000.0,
        }
    }
}

/// The metrics of every agent a runner has run, by agent name.
#[derive(Debug, Default)]
pub struct Metrics {
    agents: RwLock<BTreeMap<String, Arc<AgentMetrics>>>,
}

impl Metrics {
    /// No metrics yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters of agent `name`, created on first use.
    pub fn agent(&self, name: &str) -> Arc<AgentMetrics> {
        if let Some(existing) = self.agents.read().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Arc::clone(existing);
        }
        let mut agents = self.agents.write().unwrap_or_else(|p| p.into_inner());
        Arc::clone(agents.entry(name.to_owned()).or_default())
    }

    /// Every agent's counters now, by name.
    pub fn snapshot(&self) -> BTreeMap<String, MetricsSnapshot> {
        let agents = self.agents.read().unwrap_or_else(|p| p.into_inner());
        agents.iter().map(|(name, metrics)| (name.clone(), metrics.snapshot())).collect()
    }

    /// All agents' counters summed.
    pub fn total(&self) -> MetricsSnapshot {
        self.snapshot().into_values().fold(MetricsSnapshot::default(), |mut sum, s| {
            sum.runs_started = sum.runs_started.saturating_add(s.runs_started);
            sum.runs_completed = sum.runs_completed.saturating_add(s.runs_completed);
            sum.runs_failed = sum.runs_failed.saturating_add(s.runs_failed);
            sum.runs_cancelled = sum.runs_cancelled.saturating_add(s.runs_cancelled);
            sum.runs_paused = sum.runs_paused.saturating_add(s.runs_paused);
            sum.runs_limited = sum.runs_limited.saturating_add(s.runs_limited);
            sum.input_tokens = sum.input_tokens.saturating_add(s.input_tokens);
            sum.output_tokens = sum.output_tokens.saturating_add(s.output_tokens);
            sum.cache_read_tokens = sum.cache_read_tokens.saturating_add(s.cache_read_tokens);
            sum.cache_write_tokens = sum.cache_write_tokens.saturating_add(s.cache_write_tokens);
            sum.model_calls = sum.model_calls.saturating_add(s.model_calls);
            sum.tool_calls = sum.tool_calls.saturating_add(s.tool_calls);
            sum.tool_errors = sum.tool_errors.saturating_add(s.tool_errors);
            sum.total_duration_ms = sum.total_duration_ms.saturating_add(s.total_duration_ms);
            sum.cost_usd += s.cost_usd;
            sum
        })
    }
}

/// Adds `n` to `counter`, stopping at `u64::MAX`. Token counts come from a provider: a sum
/// that wrapped around would read as a counter reset, or as almost nothing used.
fn add(counter: &AtomicU64, n: u64) {
    // The closure always returns `Some`: the update cannot fail.
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| Some(now.saturating_add(n)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_parse_with_missing_fields() {
        let snapshot: MetricsSnapshot = serde_json::from_str(r#"{"runs_started": 2}"#).expect("parses");
        assert_eq!(snapshot, MetricsSnapshot { runs_started: 2, ..Default::default() });
    }

    #[test]
    fn agents_are_counted_apart_and_summed() {
        let metrics = Metrics::new();
        metrics.agent("a").run_started();
        metrics.agent("a").run_started();
        metrics.agent("b").run_started();
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot["a"].runs_started, 2);
        assert_eq!(snapshot["b"].runs_started, 1);
        assert_eq!(metrics.total().runs_started, 3);
        assert!(Arc::ptr_eq(&metrics.agent("a"), &metrics.agent("a")));
    }

    #[test]
    fn counts_past_what_a_counter_holds_stop_at_its_most() {
        let mut state = troupe_run::RunState::new(troupe_core::RunId::new("r"), "a", "demo/model", "model");
        let near_the_end = troupe_core::Usage { input_tokens: u64::MAX - 1, ..Default::default() };
        state.record_usage(near_the_end, 1e300);
        let output = RunOutput::ended(
            state,
            troupe_run::RunOutcome::Completed { output: String::new() },
            BTreeMap::new(),
            std::time::Duration::MAX,
            Vec::new(),
        );
        let metrics = Metrics::new();
        for agent in ["a", "b"] {
            metrics.agent(agent).run_finished(&output);
            metrics.agent(agent).run_finished(&output);
        }
        let a = &metrics.snapshot()["a"];
        assert_eq!((a.runs_completed, a.input_tokens, a.total_duration_ms), (2, u64::MAX, u64::MAX));
        assert_eq!(a.cost_usd, u64::MAX as f64 / 1_000_000.0);
        let total = metrics.total();
        assert_eq!((total.runs_completed, total.input_tokens, total.total_duration_ms), (4, u64::MAX, u64::MAX));
    }
}
