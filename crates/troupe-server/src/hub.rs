//! The runs a server holds: each run's events in order, for every client that watches.
//!
//! A run's events are appended to its log as they come, and every subscriber reads the
//! log from a position of its choosing, then follows it live. That one log is what makes
//! a reconnect lossless: a client that dropped asks again from the position after the
//! last event it saw (`Last-Event-ID`) and gets every later event exactly once, in order.
//! Positions are the run's own (0, 1, 2, …), whatever the events' attributions say, so a
//! team's run, made of many agents' runs, is one sequence too.

use crate::error::ApiError;
use crate::launcher::{LaunchedRun, RunEnd, RunSignals};
use futures::{Stream, StreamExt};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason, RunId, ToolCallId, now_ms};
use troupe_runtime::Signal;
use troupe_telemetry::TelemetryMetrics;

/// How many ended runs a hub keeps for late readers, by default.
pub const DEFAULT_RETAINED_RUNS: usize = 1024;

/// Where a run stands, as the server sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunPhase {
    /// Working.
    Running,
    /// Waiting for a person's decision (see [`RunView::pending`]).
    Waiting,
    /// Ended; see [`RunView::end`].
    Ended,
}

/// A run's state, for `GET /v1/runs/{id}`.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    /// The run's id.
    pub run_id: RunId,
    /// The agent or team it runs.
    pub target: String,
    /// Where it stands.
    pub phase: RunPhase,
    /// When it was started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// When it ended, in milliseconds since the Unix epoch, once it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// The model it started on (`provider/model`; `team` for a team's run), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How many events it has emitted.
    pub events: usize,
    /// The decisions it waits for.
    pub pending: Vec<PauseReason>,
    /// How it ended, once it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<RunEnd>,
    /// The JSON schema its answer must match, when it was given one: what a typed
    /// answer's fields are, and what each holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
}

/// What a run was asked, as the request that started it said: what tells a start sent
/// again under its idempotency key from another start that reuses the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// The task.
    pub instruction: String,
    /// The conversation it continues, when it continues one.
    pub conversation_id: Option<String>,
    /// The model asked for instead of the agent's, when one was.
    pub model: Option<String>,
}

#[derive(Debug)]
struct RunLog {
    events: Vec<AgentEvent>,
    pending: Vec<PauseReason>,
    end: Option<RunEnd>,
    ended_ms: Option<u64>,
}

/// One run the hub holds.
#[derive(Debug)]
pub struct HubRun {
    run_id: RunId,
    target: String,
    started_ms: u64,
    log: Mutex<RunLog>,
    /// The number of events in the log, bumped on every append and once more at the end,
    /// so a subscriber wakes for both.
    changed: watch::Sender<u64>,
    signals: Option<RunSignals>,
    cancel: CancellationToken,
    /// The JSON schema its answer must match, once known.
    output_schema: std::sync::OnceLock<serde_json::Value>,
    /// What it was asked, when known.
    asked: std::sync::OnceLock<Asked>,
    /// Its hub's count of changes to what a list of runs shows, bumped when it starts
    /// or stops waiting for a decision and when it ends (none for a run in no hub).
    listed: Option<Arc<watch::Sender<u64>>>,
}

impl HubRun {
    fn log(&self) -> MutexGuard<'_, RunLog> {
        // A panic while holding this lock cannot leave the log half-written (each update
        // is one push or one assignment), so a poisoned lock is still a sound log.
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The agent or team it runs.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Its state now.
    pub fn view(&self) -> RunView {
        let log = self.log();
        RunView {
            run_id: self.run_id.clone(),
            target: self.target.clone(),
            phase: match (&log.end, log.pending.is_empty()) {
                (Some(_), _) => RunPhase::Ended,
                (None, false) => RunPhase::Waiting,
                (None, true) => RunPhase::Running,
            },
            started_ms: self.started_ms,
            ended_ms: log.ended_ms,
            model: log.events.iter().find_map(|event| match &event.kind {
                AgentEventKind::RunStarted { model, .. }
                    if event.attribution.run_id == self.run_id && !model.is_empty() =>
                {
                    Some(model.clone())
                }
                _ => None,
            }),
            events: log.events.len(),
            pending: log.pending.clone(),
            end: log.end.clone(),
            output_schema: self.output_schema.get().cloned(),
        }
    }

    /// Says what its answer's JSON schema is (the first time only: it does not change).
    pub fn set_output_schema(&self, schema: serde_json::Value) {
        let _ = self.output_schema.set(schema);
    }

    /// Says what it was asked (the first time only: it does not change).
    pub fn set_asked(&self, asked: Asked) {
        let _ = self.asked.set(asked);
    }

    /// What it was asked, when its start or its record said so.
    pub fn asked(&self) -> Option<&Asked> {
        self.asked.get()
    }

    /// A run this server does not hold, as read from its record: `events` say what is
    /// known of it (its start, the decisions it waits for), `end` how and when it ended. It is in
    /// no hub; its signals go where `signals` says (through the store).
    pub(crate) fn detached(
        run_id: RunId,
        target: &str,
        started_ms: u64,
        events: Vec<AgentEvent>,
        end: Option<(RunEnd, u64)>,
        signals: Option<RunSignals>,
    ) -> Arc<HubRun> {
        let run = HubRun {
            run_id,
            target: target.to_owned(),
            started_ms,
            log: Mutex::new(RunLog { events: Vec::new(), pending: Vec::new(), end: None, ended_ms: None }),
            changed: watch::Sender::new(0),
            signals,
            cancel: CancellationToken::new(),
            output_schema: std::sync::OnceLock::new(),
            asked: std::sync::OnceLock::new(),
            listed: None,
        };
        for event in events {
            run.push(event);
        }
        if let Some((end, ended_ms)) = end {
            run.log().ended_ms = Some(ended_ms);
            run.finish(end);
        }
        Arc::new(run)
    }

    /// Whether it has ended.
    pub fn is_ended(&self) -> bool {
        self.log().end.is_some()
    }

    /// Its cancellation token.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    fn push(&self, event: AgentEvent) {
        let (count, phase_changed) = {
            let mut log = self.log();
            let waited = log.pending.len();
            match &event.kind {
                AgentEventKind::RunPaused { reason } => log.pending.push(reason.clone()),
                AgentEventKind::ToolCallResult { call_id, .. } => {
                    log.pending.retain(|p| pending_call(p) != Some(call_id))
                }
                _ => {}
            }
            let phase_changed = (waited == 0) != log.pending.is_empty();
            log.events.push(event);
            (log.events.len() as u64, phase_changed)
        };
        self.changed.send_replace(count);
        if phase_changed {
            self.listed_changed();
        }
    }

    /// Tells the hub's listeners that what a list shows of this run changed.
    fn listed_changed(&self) {
        if let Some(listed) = &self.listed {
            listed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn finish(&self, end: RunEnd) {
        let count = {
            let mut log = self.log();
            log.pending.clear();
            log.end = Some(end);
            log.ended_ms.get_or_insert_with(now_ms);
            log.events.len() as u64
        };
        // One more than the count, so that subscribers also wake when the end adds no event.
        self.changed.send_replace(count + 1);
        self.listed_changed();
    }

    /// The events from position `from` on, live: the stream ends once the run has ended
    /// and every event is delivered, or when `stop` is cancelled. Items are
    /// `(position, event)`.
    pub fn subscribe(
        self: &Arc<Self>,
        from: usize,
        stop: CancellationToken,
    ) -> impl Stream<Item = (usize, AgentEvent)> + Send + 'static {
        let run = Arc::clone(self);
        let changes = self.changed.subscribe();
        futures::stream::unfold((run, from, changes, stop), |(run, mut cursor, mut changes, stop)| async move {
            loop {
                let (batch, ended) = {
                    let log = run.log();
                    let batch: Vec<(usize, AgentEvent)> = log
                        .events
                        .get(cursor..)
                        .unwrap_or_default()
                        .iter()
                        .cloned()
                        .enumerate()
                        .map(|(i, e)| (cursor + i, e))
                        .collect();
                    (batch, log.end.is_some())
                };
                if !batch.is_empty() {
                    cursor += batch.len();
                    return Some((futures::stream::iter(batch), (run, cursor, changes, stop)));
                }
                if ended {
                    return None;
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return None },
                    () = stop.cancelled() => return None,
                }
            }
        })
        .flatten()
    }

    /// Sends `signal` to the run. An approval, or a client tool's result, must name a call
    /// the run waits for, so a decision meant for another run (or given twice) has no
    /// effect.
    pub async fn signal(&self, signal: Signal) -> Result<(), ApiError> {
        if self.is_ended() {
            return Err(ApiError::conflict("run_ended", format!("run `{}` has ended", self.run_id)));
        }
        if matches!(signal, Signal::Cancel { .. }) && self.signals.is_none() {
            self.cancel.cancel();
            return Ok(());
        }
        let sender = self.signals.as_ref().ok_or_else(|| {
            ApiError::conflict("signals_not_accepted", format!("run `{}` does not take signals", self.run_id))
        })?;
        if let Signal::Approval { call_id, .. } | Signal::ToolResult { call_id, .. } = &signal {
            let no_longer_waiting = {
                let mut log = self.log();
                let before = log.pending.len();
                log.pending.retain(|p| pending_call(p) != Some(call_id));
                if log.pending.len() == before {
                    return Err(ApiError::conflict(
                        "no_such_call",
                        format!("run `{}` is not waiting for a decision about call `{call_id}`", self.run_id),
                    ));
                }
                log.pending.is_empty()
            };
            if no_longer_waiting {
                self.listed_changed();
            }
        }
        let ended = || ApiError::conflict("run_ended", format!("run `{}` has ended", self.run_id));
        match (sender, signal) {
            (RunSignals::Run(sender), signal) => sender.send(signal).await.map_err(|_| ended()),
            (RunSignals::Team(control), Signal::Approval { call_id, decision }) => control
                .decide_call(&call_id, decision)
                .await
                .map_err(|error| ApiError::conflict("no_such_call", format!("run `{}`: {error}", self.run_id))),
            (RunSignals::Team(_), Signal::Cancel { .. }) => {
                self.cancel.cancel();
                Ok(())
            }
            (RunSignals::Store { store, run_id }, signal) => {
                match troupe_durable::send_signal(store.as_ref(), run_id, &signal).await {
                    Ok(_) => Ok(()),
                    Err(troupe_runtime::RuntimeError::RunFinished) => Err(ended()),
                    Err(error) => {
                        tracing::warn!(run = %run_id, %error, "a signal could not be stored");
                        Err(ApiError::new(
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "store_unavailable",
                            "the run store cannot take the signal now",
                        ))
                    }
                }
            }
            (RunSignals::Team(_), other) => Err(ApiError::conflict(
                "signals_not_accepted",
                format!(
                    "run `{}` is a team's: it takes decisions about its members' calls and cancel, not {}",
                    self.run_id,
                    other.kind()
                ),
            )),
        }
    }
}

fn pending_call(reason: &PauseReason) -> Option<&ToolCallId> {
    match reason {
        PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. } => Some(call_id),
        PauseReason::Input { .. } => None,
    }
}

/// Every run a server holds: the live ones, and the last ended ones for late readers.
#[derive(Debug)]
pub struct RunHub {
    metrics: Arc<TelemetryMetrics>,
    runs: Mutex<HashMap<RunId, Arc<HubRun>>>,
    ended: Mutex<VecDeque<RunId>>,
    retained: usize,
    active: watch::Sender<usize>,
    /// A count of changes to what a list of the held runs shows (see [`RunHub::listed`]).
    listed: Arc<watch::Sender<u64>>,
}

impl Default for RunHub {
    fn default() -> Self {
        RunHub::new(DEFAULT_RETAINED_RUNS)
    }
}

impl RunHub {
    /// A hub that keeps the last `retained` ended runs.
    pub fn new(retained: usize) -> Self {
        RunHub {
            metrics: Arc::new(TelemetryMetrics::new()),
            runs: Mutex::new(HashMap::new()),
            ended: Mutex::new(VecDeque::new()),
            retained,
            active: watch::Sender::new(0),
            listed: Arc::new(watch::Sender::new(0)),
        }
    }

    /// A count that moves whenever what a list of the held runs shows changes: a run
    /// taken in, one that starts or stops waiting for a decision, one that ends. A
    /// client following it asks for the list again at each move instead of polling.
    pub fn listed(&self) -> watch::Receiver<u64> {
        self.listed.subscribe()
    }

    /// The metrics every held run's events feed (served at `/metrics`).
    pub fn metrics(&self) -> &Arc<TelemetryMetrics> {
        &self.metrics
    }

    fn runs(&self) -> MutexGuard<'_, HashMap<RunId, Arc<HubRun>>> {
        self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `launched` in: its events are logged as they come, and its end recorded.
    pub fn insert(self: &Arc<Self>, target: &str, launched: LaunchedRun) -> Arc<HubRun> {
        let LaunchedRun { run_id, mut events, signals, cancel, end } = launched;
        let run = Arc::new(HubRun {
            run_id: run_id.clone(),
            target: target.to_owned(),
            started_ms: now_ms(),
            log: Mutex::new(RunLog { events: Vec::new(), pending: Vec::new(), end: None, ended_ms: None }),
            changed: watch::Sender::new(0),
            signals,
            cancel,
            output_schema: std::sync::OnceLock::new(),
            asked: std::sync::OnceLock::new(),
            listed: Some(Arc::clone(&self.listed)),
        });
        self.runs().insert(run_id.clone(), Arc::clone(&run));
        run.listed_changed();
        self.active.send_modify(|n| *n += 1);
        let hub = Arc::clone(self);
        let pumped = Arc::clone(&run);
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                hub.metrics.observe(&event);
                pumped.push(event);
            }
            let end = end.await;
            pumped.finish(end);
            hub.retire(run_id);
        });
        run
    }

    fn retire(&self, run_id: RunId) {
        self.active.send_modify(|n| *n = n.saturating_sub(1));
        let evicted: Vec<RunId> = {
            let mut ended = self.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            ended.push_back(run_id);
            let excess = ended.len().saturating_sub(self.retained);
            ended.drain(..excess).collect()
        };
        let mut runs = self.runs();
        for id in evicted {
            runs.remove(&id);
        }
    }

    /// The run `run_id`, if held.
    pub fn get(&self, run_id: &str) -> Option<Arc<HubRun>> {
        self.runs().get(&RunId::new(run_id)).cloned()
    }

    /// Every held run, newest first.
    pub fn list(&self) -> Vec<RunView> {
        let mut views: Vec<RunView> = self.runs().values().map(|run| run.view()).collect();
        views.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then_with(|| b.run_id.as_str().cmp(a.run_id.as_str())));
        views
    }

    /// How many runs have not ended.
    pub fn active(&self) -> usize {
        *self.active.borrow()
    }

    /// Waits until no run is active, or `within` has passed; returns how many still are.
    pub async fn drain(&self, within: std::time::Duration) -> usize {
        let mut active = self.active.subscribe();
        let _ = tokio::time::timeout(within, active.wait_for(|n| *n == 0)).await;
        self.active()
    }

    /// Ends every run that waits for a person at once, paused with its state recorded
    /// (it needs no process while it waits: another server adopts it); returns how many.
    /// A run still working is left alone.
    pub fn suspend_waiting(&self) -> usize {
        let mut suspended = 0;
        for run in self.runs().values() {
            let waiting = { !run.log().pending.is_empty() } && !run.is_ended();
            if let (true, Some(RunSignals::Run(sender))) = (waiting, &run.signals) {
                sender.suspend();
                suspended += 1;
            }
        }
        suspended
    }

    /// Cancels every active run.
    pub fn cancel_all(&self) {
        for run in self.runs().values() {
            if !run.is_ended() {
                run.cancel.cancel();
            }
        }
    }
}
