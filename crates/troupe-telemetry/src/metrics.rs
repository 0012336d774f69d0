//! [`TelemetryMetrics`]: counters, histograms and gauges fed by the agent event stream.

use crate::histogram::{Histogram, OPERATION_DURATION_BUCKETS, RUN_DURATION_BUCKETS, TOKEN_USAGE_BUCKETS};
use crate::snapshot::{AgentTelemetry, Gauges, ModelTelemetry, TelemetrySnapshot, ToolTelemetry};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use troupe_core::{AgentEvent, AgentEventKind, PauseReason, RunId, RunOutcomeKind, ToolCallId, Usage, now_ms};

/// The label of a tool call whose start was not observed (the observer joined late).
pub const UNKNOWN_TOOL: &str = "unknown";

/// The label of a run error that carries no code.
pub const UNKNOWN_ERROR_CODE: &str = "unknown";

/// How many runs are tracked between their start and their end by default.
pub const DEFAULT_RUN_CAPACITY: usize = 10_000;

/// Metrics of every run whose events it is shown, safe to share between threads.
///
/// Feed it each [`AgentEvent`] with [`observe`](TelemetryMetrics::observe), from as many
/// runs and threads as you like; read it with [`snapshot`](TelemetryMetrics::snapshot)
/// and render the snapshot with a [`MetricsExporter`](crate::MetricsExporter).
///
/// What it counts, and from which events:
///
/// | metric | from |
/// |---|---|
/// | runs started, by agent | `RunStarted` |
/// | runs ended, by agent and outcome | `RunFinished`; `RunError` ends a run as `failed` |
/// | run errors, by agent and code | `RunError` |
/// | run duration, by agent and outcome | `RunStarted` → `RunFinished`/`RunError` timestamps of the same run |
/// | model calls, tokens by type, cost, per-call token histograms, by model | `Usage` (one per model call) |
/// | tool calls, by tool and ok/error | `ToolCallResult`, named by the run's `ToolCallStart` |
/// | approval requests, by tool | `RunPaused` with an approval or an uncertain-action reason |
/// | retries; fallbacks, by model | `Retrying`; `ModelFallback` |
///
/// Tokens and cost come from `Usage` events only, never from a run's `RunFinished` total,
/// which would count them twice. Other events cost one `match` and no lock.
///
/// Between a run's start and end it keeps the run's start time and the names of its open
/// tool calls, and drops them when the run ends. A paused run keeps only its open calls,
/// so that their results are named when it resumes. At most
/// [`DEFAULT_RUN_CAPACITY`] runs are kept (see
/// [`with_run_capacity`](TelemetryMetrics::with_run_capacity)): past that, the run
/// heard from least recently is forgotten, so runs that never end cannot grow memory.
///
/// Label values are agent names, model ids and tool names: bounded by what a deployment
/// declares, not by its traffic.
///
/// ```
/// use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId, RunOutcomeKind, Usage};
/// use troupe_telemetry::TelemetryMetrics;
///
/// let metrics = TelemetryMetrics::new();
/// let at = |seq, timestamp_ms| Attribution {
///     timestamp_ms,
///     ..Attribution::now(AgentId::new("triage"), RunId::new("run_1"), seq)
/// };
/// metrics.observe(&AgentEvent::new(
///     at(0, 1_000),
///     AgentEventKind::RunStarted { instruction: "sort the inbox".into(), model: "demo".into() },
/// ));
/// let usage = Usage { input_tokens: 120, output_tokens: 30, ..Usage::default() };
/// metrics.observe(&AgentEvent::new(
///     at(1, 1_500),
///     AgentEventKind::Usage { model: "demo".into(), usage, cost_usd: Some(0.002) },
/// ));
/// metrics.observe(&AgentEvent::new(
///     at(2, 3_000),
///     AgentEventKind::RunFinished { outcome: RunOutcomeKind::Completed, output: None, usage, cost_usd: 0.002 },
/// ));
///
/// let snapshot = metrics.snapshot();
/// let triage = &snapshot.agents["triage"];
/// assert_eq!(triage.runs_finished_with("completed"), 1);
/// assert_eq!(triage.run_duration_seconds["completed"].sum, 2.0);
/// assert_eq!(snapshot.models["demo"].tokens.input_tokens, 120);
/// assert_eq!(snapshot.gauges.runs_in_flight, 0);
/// ```
#[derive(Debug)]
pub struct TelemetryMetrics {
    state: Mutex<State>,
    queue_depth: AtomicU64,
    active_runs: AtomicU64,
    run_capacity: usize,
}

#[derive(Debug, Default)]
struct State {
    agents: BTreeMap<String, AgentState>,
    models: BTreeMap<String, ModelState>,
    tools: BTreeMap<String, ToolTelemetry>,
    model_retries: u64,
    runs: HashMap<RunId, TrackedRun>,
}

#[derive(Debug, Default)]
struct AgentState {
    runs_started: u64,
    runs_finished: BTreeMap<&'static str, u64>,
    run_errors: BTreeMap<String, u64>,
    durations: BTreeMap<&'static str, Histogram>,
}

#[derive(Debug)]
struct ModelState {
    calls: u64,
    unpriced_calls: u64,
    tokens: Usage,
    cost_usd: f64,
    input: Histogram,
    output: Histogram,
    /// Seconds per call, from the step that made it to its usage.
    duration: Histogram,
    fallbacks: BTreeMap<String, u64>,
}

impl Default for ModelState {
    fn default() -> Self {
        ModelState {
            calls: 0,
            unpriced_calls: 0,
            tokens: Usage::default(),
            cost_usd: 0.0,
            input: Histogram::new(TOKEN_USAGE_BUCKETS),
            output: Histogram::new(TOKEN_USAGE_BUCKETS),
            duration: Histogram::new(OPERATION_DURATION_BUCKETS),
            fallbacks: BTreeMap::new(),
        }
    }
}

/// What is known of a run between its start and its end.
#[derive(Debug, Default)]
struct TrackedRun {
    /// When it (last) started; `None` while paused, or when its start was not observed.
    started_ms: Option<u64>,
    /// When it was last heard from, to pick the run to forget at capacity.
    touched_ms: u64,
    /// The tool of each call that began and has no result yet.
    open_calls: HashMap<ToolCallId, String>,
    /// When its step began, until the step's first model call ends: that call's
    /// duration (a compaction's summary, when the step makes one, else the turn).
    call_started_ms: Option<u64>,
}

impl Default for TelemetryMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl TelemetryMetrics {
    /// No metrics yet, tracking up to [`DEFAULT_RUN_CAPACITY`] runs at once.
    pub fn new() -> Self {
        Self::with_run_capacity(DEFAULT_RUN_CAPACITY)
    }

    /// No metrics yet, tracking up to `capacity` runs (at least one) between their start
    /// and end.
    pub fn with_run_capacity(capacity: usize) -> Self {
        TelemetryMetrics {
            state: Mutex::new(State::default()),
            queue_depth: AtomicU64::new(0),
            active_runs: AtomicU64::new(0),
            run_capacity: capacity.max(1),
        }
    }

    /// Counts what `event` says.
    pub fn observe(&self, event: &AgentEvent) {
        let at = event.attribution.timestamp_ms;
        let run_id = &event.attribution.run_id;
        let agent = event.attribution.agent_id.as_str();
        match &event.kind {
            AgentEventKind::RunStarted { .. } => {
                let mut state = self.lock();
                agent_mut(&mut state.agents, agent).runs_started += 1;
                let run = self.track(&mut state, run_id, at);
                run.started_ms = Some(at);
            }
            AgentEventKind::RunFinished { outcome, .. } => {
                self.lock().end_run(run_id, agent, *outcome, at, None);
            }
            AgentEventKind::RunError { code, .. } => {
                let code = code.as_deref().unwrap_or(UNKNOWN_ERROR_CODE);
                self.lock().end_run(run_id, agent, RunOutcomeKind::Failed, at, Some(code));
            }
            AgentEventKind::RunPaused {
                reason: PauseReason::Approval { call_id, tool, .. } | PauseReason::UncertainAction { call_id, tool, .. },
            } => {
                let mut state = self.lock();
                tool_mut(&mut state.tools, tool).approval_requests += 1;
                // The call may have begun before this observer joined; its result needs a name.
                let run = self.track(&mut state, run_id, at);
                run.open_calls.entry(call_id.clone()).or_insert_with(|| tool.clone());
            }
            AgentEventKind::ToolCallStart { call_id, tool, .. } => {
                let mut state = self.lock();
                let run = self.track(&mut state, run_id, at);
                run.open_calls.insert(call_id.clone(), tool.clone());
            }
            AgentEventKind::ToolCallResult { call_id, is_error, .. } => {
                let mut state = self.lock();
                let tool = state.runs.get_mut(run_id).and_then(|run| {
                    run.touched_ms = at;
                    run.open_calls.remove(call_id)
                });
                let counts = tool_mut(&mut state.tools, tool.as_deref().unwrap_or(UNKNOWN_TOOL));
                if *is_error {
                    counts.calls_error += 1;
                } else {
                    counts.calls_ok += 1;
                }
            }
            AgentEventKind::StepStarted { .. } => {
                let mut state = self.lock();
                self.track(&mut state, run_id, at).call_started_ms = Some(at);
            }
            AgentEventKind::Usage { model, usage, cost_usd } => {
                let mut state = self.lock();
                let began = state.runs.get_mut(run_id).and_then(|run| run.call_started_ms.take());
                let counts = model_mut(&mut state.models, model);
                if let Some(began) = began {
                    counts.duration.observe(at.saturating_sub(began) as f64 / 1000.0);
                }
                counts.calls += 1;
                counts.tokens += *usage;
                match cost_usd {
                    Some(cost) if cost.is_finite() && *cost >= 0.0 => counts.cost_usd += cost,
                    _ => counts.unpriced_calls += 1,
                }
                counts.input.observe(usage.total_input() as f64);
                counts.output.observe(usage.output_tokens as f64);
            }
            AgentEventKind::Retrying { .. } => self.lock().model_retries += 1,
            AgentEventKind::ModelFallback { from, to, .. } => {
                let mut state = self.lock();
                *model_mut(&mut state.models, from).fallbacks.entry(to.clone()).or_default() += 1;
            }
            _ => {}
        }
    }

    /// Counts every event of `events`, in order.
    pub fn observe_all<'a>(&self, events: impl IntoIterator<Item = &'a AgentEvent>) {
        for event in events {
            self.observe(event);
        }
    }

    /// Sets the number of runs waiting to be claimed (a level the host knows, e.g. the
    /// store's queue).
    pub fn set_queue_depth(&self, depth: u64) {
        self.queue_depth.store(depth, Ordering::Relaxed);
    }

    /// Sets the number of runs executing now, as the host counts them.
    pub fn set_active_runs(&self, runs: u64) {
        self.active_runs.store(runs, Ordering::Relaxed);
    }

    /// Every metric now.
    pub fn snapshot(&self) -> TelemetrySnapshot {
        let state = self.lock();
        let agents = state
            .agents
            .iter()
            .map(|(name, a)| {
                let telemetry = AgentTelemetry {
                    runs_started: a.runs_started,
                    runs_finished: a.runs_finished.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
                    run_errors: a.run_errors.clone(),
                    run_duration_seconds: a.durations.iter().map(|(k, h)| ((*k).to_owned(), h.snapshot())).collect(),
                };
                (name.clone(), telemetry)
            })
            .collect();
        let models = state
            .models
            .iter()
            .map(|(name, m)| {
                let telemetry = ModelTelemetry {
                    calls: m.calls,
                    unpriced_calls: m.unpriced_calls,
                    tokens: m.tokens,
                    cost_usd: m.cost_usd,
                    input_token_usage: m.input.snapshot(),
                    output_token_usage: m.output.snapshot(),
                    operation_duration: m.duration.snapshot(),
                    fallbacks: m.fallbacks.clone(),
                };
                (name.clone(), telemetry)
            })
            .collect();
        let runs_in_flight = state.runs.values().filter(|r| r.started_ms.is_some()).count() as u64;
        TelemetrySnapshot {
            timestamp_ms: now_ms(),
            agents,
            models,
            tools: state.tools.clone(),
            model_retries: state.model_retries,
            gauges: Gauges {
                queue_depth: self.queue_depth.load(Ordering::Relaxed),
                active_runs: self.active_runs.load(Ordering::Relaxed),
                runs_in_flight,
            },
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent, so a panic elsewhere poisons nothing.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The tracked run `run_id`, begun now if new; forgets the least recently heard-from
    /// run when at capacity.
    fn track<'s>(&self, state: &'s mut State, run_id: &RunId, at: u64) -> &'s mut TrackedRun {
        if !state.runs.contains_key(run_id) && state.runs.len() >= self.run_capacity {
            let stalest = state.runs.iter().min_by_key(|(_, run)| run.touched_ms).map(|(id, _)| id.clone());
            if let Some(stalest) = stalest {
                state.runs.remove(&stalest);
            }
        }
        let run = state.runs.entry(run_id.clone()).or_default();
        run.touched_ms = at;
        run
    }
}

impl State {
    fn end_run(&mut self, run_id: &RunId, agent: &str, outcome: RunOutcomeKind, at: u64, error: Option<&str>) {
        let label = outcome_label(outcome);
        let started = if outcome == RunOutcomeKind::Paused {
            // Keep the open calls: their results arrive after the run resumes.
            self.runs.get_mut(run_id).and_then(|run| {
                run.touched_ms = at;
                run.started_ms.take()
            })
        } else {
            self.runs.remove(run_id).and_then(|run| run.started_ms)
        };
        let counts = agent_mut(&mut self.agents, agent);
        *counts.runs_finished.entry(label).or_default() += 1;
        if let Some(code) = error {
            *counts.run_errors.entry(code.to_owned()).or_default() += 1;
        }
        if let Some(started) = started {
            let seconds = at.saturating_sub(started) as f64 / 1000.0;
            counts.durations.entry(label).or_insert_with(|| Histogram::new(RUN_DURATION_BUCKETS)).observe(seconds);
        }
    }
}

/// The snake_case name of an outcome, as it appears in labels and snapshots.
pub fn outcome_label(outcome: RunOutcomeKind) -> &'static str {
    match outcome {
        RunOutcomeKind::Completed => "completed",
        RunOutcomeKind::Paused => "paused",
        RunOutcomeKind::Cancelled => "cancelled",
        RunOutcomeKind::BudgetExceeded => "budget_exceeded",
        RunOutcomeKind::MaxIterations => "max_iterations",
        RunOutcomeKind::Incomplete => "incomplete",
        RunOutcomeKind::Failed => "failed",
    }
}

// `entry(name.to_owned())` would allocate on every event; look up first.
#[expect(clippy::expect_used, reason = "the key was inserted just above")]
fn agent_mut<'m>(map: &'m mut BTreeMap<String, AgentState>, name: &str) -> &'m mut AgentState {
    if !map.contains_key(name) {
        map.insert(name.to_owned(), AgentState::default());
    }
    map.get_mut(name).expect("inserted above")
}

#[expect(clippy::expect_used, reason = "the key was inserted just above")]
fn model_mut<'m>(map: &'m mut BTreeMap<String, ModelState>, name: &str) -> &'m mut ModelState {
    if !map.contains_key(name) {
        map.insert(name.to_owned(), ModelState::default());
    }
    map.get_mut(name).expect("inserted above")
}

#[expect(clippy::expect_used, reason = "the key was inserted just above")]
fn tool_mut<'m>(map: &'m mut BTreeMap<String, ToolTelemetry>, name: &str) -> &'m mut ToolTelemetry {
    if !map.contains_key(name) {
        map.insert(name.to_owned(), ToolTelemetry::default());
    }
    map.get_mut(name).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;
    use troupe_core::{AgentId, Attribution};

    fn event(agent: &str, run: &str, at: u64, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(
            Attribution { timestamp_ms: at, ..Attribution::now(AgentId::new(agent), RunId::new(run), 0) },
            kind,
        )
    }

    fn started(agent: &str, run: &str, at: u64) -> AgentEvent {
        event(agent, run, at, AgentEventKind::RunStarted { instruction: "go".into(), model: "demo".into() })
    }

    fn finished(agent: &str, run: &str, at: u64, outcome: RunOutcomeKind) -> AgentEvent {
        let kind = AgentEventKind::RunFinished { outcome, output: None, usage: Usage::default(), cost_usd: 0.0 };
        event(agent, run, at, kind)
    }

    fn tool_start(run: &str, call: &str, tool: &str) -> AgentEvent {
        let kind = AgentEventKind::ToolCallStart {
            call_id: ToolCallId::new(call),
            tool: tool.into(),
            parent_message_id: None,
        };
        event("a", run, 0, kind)
    }

    fn tool_result(run: &str, call: &str, is_error: bool) -> AgentEvent {
        let kind = AgentEventKind::ToolCallResult { call_id: ToolCallId::new(call), content: "x".into(), is_error };
        event("a", run, 0, kind)
    }

    #[test]
    fn durations_pair_start_and_end_of_the_same_run_and_forget_it_after() {
        let metrics = TelemetryMetrics::new();
        metrics.observe(&started("a", "r1", 10_000));
        metrics.observe(&started("a", "r2", 11_000));
        assert_eq!(metrics.snapshot().gauges.runs_in_flight, 2);
        metrics.observe(&finished("a", "r2", 11_400, RunOutcomeKind::Completed));
        metrics.observe(&finished("a", "r1", 25_000, RunOutcomeKind::Cancelled));
        let s = metrics.snapshot();
        let a = &s.agents["a"];
        assert_eq!(a.runs_started, 2);
        assert_eq!(a.runs_finished_total(), 2);
        assert_eq!(a.run_duration_seconds["completed"].sum, 0.4);
        assert_eq!(a.run_duration_seconds["completed"].count_le(0.5), Some(1));
        assert_eq!(a.run_duration_seconds["cancelled"].sum, 15.0);
        assert_eq!(a.run_duration_seconds["cancelled"].count_le(10.0), Some(0));
        assert_eq!(s.gauges.runs_in_flight, 0);
        assert!(metrics.lock().runs.is_empty(), "per-run state is dropped at the end");
    }

    #[test]
    fn a_run_error_ends_the_run_as_failed_with_its_code() {
        let metrics = TelemetryMetrics::new();
        metrics.observe(&started("a", "r1", 0));
        metrics.observe(&event("a", "r1", 2_000, AgentEventKind::RunError { message: "boom".into(), code: None }));
        metrics.observe(&started("a", "r2", 0));
        let kind = AgentEventKind::RunError { message: "429".into(), code: Some("rate_limited".into()) };
        metrics.observe(&event("a", "r2", 1_000, kind));
        let s = metrics.snapshot();
        let a = &s.agents["a"];
        assert_eq!(a.runs_finished_with("failed"), 2);
        assert_eq!(a.run_errors[UNKNOWN_ERROR_CODE], 1);
        assert_eq!(a.run_errors["rate_limited"], 1);
        assert_eq!(a.run_duration_seconds["failed"].count, 2);
        assert!(metrics.lock().runs.is_empty());
    }

    #[test]
    fn tool_results_are_named_by_their_start_and_late_ones_are_unknown() {
        let metrics = TelemetryMetrics::new();
        metrics.observe(&started("a", "r1", 0));
        metrics.observe(&tool_start("r1", "c1", "fs.read"));
        metrics.observe(&tool_start("r1", "c2", "shell"));
        metrics.observe(&tool_result("r1", "c1", false));
        metrics.observe(&tool_result("r1", "c2", true));
        metrics.observe(&tool_result("r1", "never-started", false));
        let s = metrics.snapshot();
        assert_eq!(s.tools["fs.read"], ToolTelemetry { calls_ok: 1, calls_error: 0, approval_requests: 0 });
        assert_eq!(s.tools["shell"].calls_error, 1);
        assert_eq!(s.tools[UNKNOWN_TOOL].calls_ok, 1);
        assert_eq!(s.tool_calls(), 3);
    }

    #[test]
    fn a_paused_run_keeps_its_open_call_for_the_result_after_resume() {
        let metrics = TelemetryMetrics::new();
        metrics.observe(&started("a", "r1", 1_000));
        metrics.observe(&tool_start("r1", "c1", "fs.write"));
        let reason = PauseReason::Approval {
            call_id: ToolCallId::new("c1"),
            tool: "fs.write".into(),
            arguments: json!({"path": "x"}),
            reason: "writes".into(),
        };
        metrics.observe(&event("a", "r1", 1_500, AgentEventKind::RunPaused { reason }));
        metrics.observe(&finished("a", "r1", 2_000, RunOutcomeKind::Paused));
        assert_eq!(metrics.snapshot().gauges.runs_in_flight, 0, "a paused run is not in flight");
        metrics.observe(&started("a", "r1", 60_000));
        metrics.observe(&tool_result("r1", "c1", false));
        metrics.observe(&finished("a", "r1", 61_000, RunOutcomeKind::Completed));
        let s = metrics.snapshot();
        assert_eq!(s.tools["fs.write"], ToolTelemetry { calls_ok: 1, calls_error: 0, approval_requests: 1 });
        let a = &s.agents["a"];
        assert_eq!(a.runs_started, 2);
        assert_eq!(a.run_duration_seconds["paused"].sum, 1.0);
        assert_eq!(a.run_duration_seconds["completed"].sum, 1.0, "measured from the resume");
        assert!(metrics.lock().runs.is_empty());
    }

    #[test]
    fn an_interrupted_call_put_to_a_person_counts_as_an_approval_request() {
        let metrics = TelemetryMetrics::new();
        metrics.observe(&started("a", "r1", 1_000));
        let reason = PauseReason::UncertainAction {
            call_id: ToolCallId::new("c1"),
            tool: "shell".into(),
            arguments: json!({"command": "make deploy"}),
        };
        metrics.observe(&event("a", "r1", 1_500, AgentEventKind::RunPaused { reason }));
        metrics.observe(&tool_result("r1", "c1", false));
        let s = metrics.snapshot();
        assert_eq!(s.tools["shell"], ToolTelemetry { calls_ok: 1, calls_error: 0, approval_requests: 1 });
    }

    #[test]
    fn usage_sums_tokens_and_cost_per_model_and_feeds_the_token_histograms() {
        let metrics = TelemetryMetrics::new();
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 900,
            cache_write_tokens: 24,
            cache_write_long_tokens: 0,
            reasoning_tokens: 5,
        };
        let call = |cost| AgentEventKind::Usage { model: "anthropic/claude".into(), usage, cost_usd: cost };
        metrics.observe(&event("a", "r", 0, call(Some(0.25))));
        metrics.observe(&event("a", "r", 0, call(Some(0.5))));
        metrics.observe(&event("a", "r", 0, call(None)));
        metrics.observe(&event("a", "r", 0, call(Some(f64::NAN))));
        let s = metrics.snapshot();
        let m = &s.models["anthropic/claude"];
        assert_eq!(m.calls, 4);
        assert_eq!(m.unpriced_calls, 2);
        assert_eq!(m.cost_usd, 0.75);
        assert_eq!(m.tokens.cache_read_tokens, 3_600);
        assert_eq!(m.tokens.reasoning_tokens, 20);
        assert_eq!(m.input_token_usage.count, 4);
        assert_eq!(m.input_token_usage.sum, 4.0 * 1024.0, "input includes cached prompt tokens");
        assert_eq!(m.input_token_usage.count_le(1024.0), Some(4));
        assert_eq!(m.input_token_usage.count_le(256.0), Some(0));
        assert_eq!(m.output_token_usage.count_le(16.0), Some(0));
        assert_eq!(m.output_token_usage.count_le(64.0), Some(4));
    }

    #[test]
    fn retries_fallbacks_and_host_gauges() {
        let metrics = TelemetryMetrics::new();
        let retry = AgentEventKind::Retrying { attempt: 1, delay_ms: 10, reason: "503".into() };
        metrics.observe(&event("a", "r", 0, retry));
        let fallback =
            AgentEventKind::ModelFallback { from: "x/big".into(), to: "y/small".into(), reason: "529".into() };
        metrics.observe(&event("a", "r", 0, fallback));
        metrics.set_queue_depth(7);
        metrics.set_active_runs(3);
        let s = metrics.snapshot();
        assert_eq!(s.model_retries, 1);
        assert_eq!(s.models["x/big"].fallbacks["y/small"], 1);
        assert_eq!(s.models["x/big"].calls, 0);
        assert_eq!((s.gauges.queue_depth, s.gauges.active_runs), (7, 3));
    }

    #[test]
    fn at_capacity_the_least_recently_heard_from_run_is_forgotten() {
        let metrics = TelemetryMetrics::with_run_capacity(2);
        metrics.observe(&started("a", "old", 1));
        metrics.observe(&started("a", "mid", 2));
        metrics.observe(&started("a", "new", 3));
        {
            let state = metrics.lock();
            assert_eq!(state.runs.len(), 2);
            assert!(!state.runs.contains_key(&RunId::new("old")));
        }
        metrics.observe(&finished("a", "old", 10, RunOutcomeKind::Completed));
        let s = metrics.snapshot();
        assert_eq!(s.agents["a"].runs_finished_with("completed"), 1, "still counted");
        assert!(s.agents["a"].run_duration_seconds.is_empty(), "but its duration is unknown");
    }

    #[test]
    fn observing_from_many_threads_loses_nothing() {
        let metrics = Arc::new(TelemetryMetrics::new());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let metrics = Arc::clone(&metrics);
                std::thread::spawn(move || {
                    for i in 0..250 {
                        let run = format!("r{t}-{i}");
                        metrics.observe(&started("a", &run, 0));
                        metrics.observe(&tool_start(&run, "c", "fs.read"));
                        metrics.observe(&tool_result(&run, "c", i % 5 == 0));
                        metrics.observe(&finished("a", &run, 100, RunOutcomeKind::Completed));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("observer thread");
        }
        let s = metrics.snapshot();
        assert_eq!(s.runs_started(), 2_000);
        assert_eq!(s.runs_finished_with("completed"), 2_000);
        assert_eq!(s.tools["fs.read"], ToolTelemetry { calls_ok: 1_600, calls_error: 400, approval_requests: 0 });
        assert_eq!(s.gauges.runs_in_flight, 0);
    }

    #[test]
    fn outcome_labels_match_the_serialized_outcomes() {
        for outcome in [
            RunOutcomeKind::Completed,
            RunOutcomeKind::Paused,
            RunOutcomeKind::Cancelled,
            RunOutcomeKind::BudgetExceeded,
            RunOutcomeKind::MaxIterations,
            RunOutcomeKind::Incomplete,
            RunOutcomeKind::Failed,
        ] {
            assert_eq!(serde_json::to_value(outcome).expect("serializes"), json!(outcome_label(outcome)));
        }
    }
}
