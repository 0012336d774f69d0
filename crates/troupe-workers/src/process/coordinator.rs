//! [`ProcessMember`]: a team member whose every task runs in a fresh worker process,
//! retried when the process crashes, hangs, times out or breaks the protocol.

use super::attempt::{self, Attempt, StreamedInput};
use super::config::WorkerConfig;
use super::error::AttemptError;
use super::outcome::{AttemptReport, WorkerOutcome};
use super::store_host::StoreHost;
use crate::ipc::{AgentResult, AgentTask, PayloadRef, PayloadSource, is_plain_file_name};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason, RunId, RunOutcomeKind};
use troupe_runtime::RunOutcome;
use troupe_runtime::durable::child_run_id;
use troupe_team::{EventSink, Member, MemberResult, MemberTask, PausedRun, TeamControl};

/// A task for a worker, with the payloads streamed to it.
#[derive(Clone, Debug)]
pub struct WorkerTask {
    /// The task; its `input.payloads` are filled in from `inputs`.
    pub task: AgentTask,
    /// The input payloads, by name (a plain file name: the worker writes each to
    /// `.troupe-inputs/<name>` in its workspace).
    pub inputs: Vec<(String, PayloadSource)>,
}

impl WorkerTask {
    /// `task` without payloads.
    pub fn new(task: AgentTask) -> Self {
        WorkerTask { task, inputs: Vec::new() }
    }

    /// Adds the input payload `name`.
    pub fn input(mut self, name: impl Into<String>, source: PayloadSource) -> Self {
        self.inputs.push((name.into(), source));
        self
    }
}

impl From<AgentTask> for WorkerTask {
    fn from(task: AgentTask) -> Self {
        WorkerTask::new(task)
    }
}

/// A member that runs each task in a worker process (by default `troupe agent run
/// --worker`, see [`WorkerConfig::troupe`]).
///
/// Each attempt starts a new process in its own process group with only the granted
/// environment, sends the task and its payloads, streams the worker's events to the sink,
/// checks them against the tool policy, and takes the worker's result. A worker that
/// crashes, goes silent for longer than its heartbeats allow, outlives its timeout or
/// writes anything but valid frames fails the attempt, and its whole group is killed;
/// the task is retried with backoff up to `max_attempts` times, then fails with the last
/// error. Nothing a worker does can make the coordinator panic.
#[derive(Clone, Debug)]
pub struct ProcessMember {
    name: String,
    description: String,
    config: WorkerConfig,
    control: Option<TeamControl>,
}

impl ProcessMember {
    /// A member `name`, described by `description`, whose tasks run as `config` says.
    pub fn new(name: impl Into<String>, description: impl Into<String>, config: WorkerConfig) -> Self {
        ProcessMember { name: name.into(), description: description.into(), config, control: None }
    }

    /// Reports to `control` a task whose recorded run ended paused while the team defers
    /// approvals ([`TeamControl::defer_approvals`]), and waits for the team to halt, as a
    /// local member does: the team is recorded paused, a decision stored for the worker's
    /// run is applied when the team resumes, and the worker started again then resumes
    /// the run. Needs a store ([`WorkerConfig::record_in`]); without one a paused task is
    /// a failed result.
    pub fn with_control(mut self, control: TeamControl) -> Self {
        self.control = Some(control);
        self
    }

    /// The paused run a task's result names, read back from the store: what the team
    /// records as waiting.
    async fn paused_run(&self, result: &AgentResult) -> Option<PausedRun> {
        if result.status != RunOutcomeKind::Paused {
            return None;
        }
        let store = &self.config.record.as_ref()?.0;
        let run_id = result.run_id.clone()?;
        let record = store.load_run(run_id.as_str()).await.ok()??;
        let outcome = serde_json::from_value::<RunOutcome>(record.state.get("outcome")?.clone()).ok()?;
        let RunOutcome::Paused { pending } = outcome else { return None };
        Some(PausedRun { member: self.name.clone(), run_id, pending })
    }

    /// How its workers are run.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// A team's task as a worker task for this member.
    pub fn agent_task(&self, task: &MemberTask) -> AgentTask {
        AgentTask {
            task_id: task.task_id.clone(),
            from: task.from.clone(),
            to: self.name.clone(),
            prompt: task.prompt.clone(),
            context: task.context.clone(),
            parent_run_id: task.parent_run_id.clone(),
            output: task.report.clone(),
            ..AgentTask::default()
        }
    }

    /// Runs `task` in worker processes until one gives a result or the attempts run out;
    /// events go to `events`, and `cancel` asks the worker to stop (and kills it after the
    /// grace period).
    pub async fn run_task(
        &self,
        task: WorkerTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> WorkerOutcome {
        let task_id = task.task.task_id.clone();
        let attempt = AssertUnwindSafe(self.attempts(task, events, cancel)).catch_unwind().await;
        attempt
            .unwrap_or_else(|_| self.failed(&task_id, "the coordinator's worker loop panicked".to_owned(), Vec::new()))
    }

    async fn attempts(&self, task: WorkerTask, events: Option<EventSink>, cancel: CancellationToken) -> WorkerOutcome {
        let WorkerTask { mut task, inputs } = task;
        if task.to.is_empty() {
            task.to.clone_from(&self.name);
        }
        let streamed = match prepare_inputs(&mut task, inputs) {
            Ok(streamed) => streamed,
            Err(error) => return self.failed(&task.task_id, error, Vec::new()),
        };
        task.tools = task.tools.and(&self.config.tool_policy);
        task.approvals = task.approvals.or(self.config.approvals);
        task.sandbox = task.sandbox.or_else(|| self.config.sandbox.clone());
        task.heartbeat_ms = millis(self.config.heartbeat_interval).max(1);
        task.missed_heartbeats = self.config.missed_heartbeats;
        if let Some(models) = &self.config.models {
            task.hosted_models = match models.hosted() {
                Ok(hosted) => hosted,
                Err(error) => {
                    let error = format!("the coordinator cannot serve the worker's model: {error}");
                    return self.failed(&task.task_id, error, Vec::new());
                }
            };
        }
        let host = self.config.record.as_ref().map(|record| {
            let run_id = task.record_run.clone().unwrap_or_else(|| self.run_id_for(&task));
            task.record_run = Some(run_id.clone());
            StoreHost::new(std::sync::Arc::clone(&record.0), run_id.as_str())
        });
        let caller_deadline = task.deadline_ms;
        let max_attempts = self.config.max_attempts.max(1);
        let mut reports: Vec<AttemptReport> = Vec::new();
        let mut last_error: Option<AttemptError> = None;
        for number in 1..=max_attempts {
            if cancel.is_cancelled() {
                last_error = Some(AttemptError::Cancelled { reason: None });
                break;
            }
            let own_deadline = now_ms().saturating_add(millis(self.config.timeout));
            task.deadline_ms = Some(caller_deadline.map_or(own_deadline, |d| d.min(own_deadline)));
            let attempt = Attempt {
                config: &self.config,
                task: &task,
                inputs: &streamed,
                events: events.as_ref(),
                cancel: &cancel,
                number,
                store: host.as_ref(),
            };
            let (report, outcome) = attempt::run(attempt).await;
            reports.push(report);
            match outcome {
                Ok(finished) => {
                    let member = self.member_result(&finished.result);
                    return WorkerOutcome {
                        member,
                        result: Some(finished.result),
                        artifacts: finished.artifacts,
                        attempts: reports,
                    };
                }
                Err(error) => {
                    let retry = error.is_retryable() && number < max_attempts;
                    tracing::warn!(member = %self.name, attempt = number, max_attempts, %error, retry, "worker attempt failed");
                    last_error = Some(error);
                    if !retry {
                        break;
                    }
                    tokio::select! {
                        () = tokio::time::sleep(self.config.backoff.delay(number)) => {}
                        () = cancel.cancelled() => {
                            last_error = Some(AttemptError::Cancelled { reason: None });
                            break;
                        }
                    }
                }
            }
        }
        let error = match (last_error, reports.len()) {
            (Some(error), 0 | 1) => error.to_string(),
            (Some(error), n) => format!("{error} (after {n} attempts)"),
            (None, _) => "no attempt was made".to_owned(),
        };
        self.failed(&task.task_id, error, reports)
    }

    /// The run a task's worker records: under the delegating run, one per member and
    /// task id (as a local member's), so a team run that resumes finds it again; a new
    /// one otherwise.
    fn run_id_for(&self, task: &AgentTask) -> RunId {
        match &task.parent_run_id {
            Some(parent) => child_run_id(parent, &format!("{}\0{}", self.name, task.task_id)),
            None => RunId::generate(),
        }
    }

    fn failed(&self, task_id: &str, error: String, attempts: Vec<AttemptReport>) -> WorkerOutcome {
        WorkerOutcome {
            member: MemberResult::failed(self.name.clone(), task_id, error),
            result: None,
            artifacts: Vec::new(),
            attempts,
        }
    }

    fn member_result(&self, result: &AgentResult) -> MemberResult {
        let success = result.is_completed();
        let error = match (&result.error, success) {
            (Some(error), _) => Some(error.clone()),
            (None, true) => None,
            (None, false) => Some(describe_status(result.status)),
        };
        MemberResult {
            name: self.name.clone(),
            task_id: result.task_id.clone(),
            content: result.output.clone(),
            success,
            error,
            usage: result.metrics.usage,
            cost_usd: result.metrics.cost_usd,
            run_id: result.run_id.clone(),
            report: None,
        }
    }
}

impl Member for ProcessMember {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn resumable(&self) -> bool {
        self.config.record.is_some()
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        let report = task.report.clone();
        let mut task = self.agent_task(&task);
        // A person watching the team answers the worker's calls through its recorded run.
        let asked = match (&self.control, &self.config.record) {
            (Some(control), Some(record)) if !control.defers_approvals() => {
                let run_id = self.run_id_for(&task);
                task.record_run = Some(run_id.clone());
                task.await_decisions = true;
                control.enter_recorded(&self.name, &run_id, std::sync::Arc::clone(&record.0));
                Some((control.clone(), run_id))
            }
            _ => None,
        };
        let task = WorkerTask::new(task);
        Box::pin(async move {
            let outcome = match &asked {
                // Its waiting calls are noted as it announces them, so a decision naming
                // only the call (`TeamControl::decide_call`) finds the worker's run.
                Some((control, _)) => {
                    let (tx, mut rx) = tokio::sync::mpsc::channel::<AgentEvent>(crate::ipc::WRITE_QUEUE * 64);
                    let noting = async {
                        while let Some(event) = rx.recv().await {
                            if let AgentEventKind::RunPaused {
                                reason:
                                    PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. },
                            } = &event.kind
                            {
                                control.note_waiting(&event.attribution.run_id, call_id);
                            }
                            if let Some(sink) = &events {
                                let _ = sink.send(event).await;
                            }
                        }
                    };
                    tokio::join!(self.run_task(task, Some(tx), cancel), noting).0
                }
                None => self.run_task(task, events, cancel).await,
            };
            if let Some((control, run_id)) = &asked {
                control.leave(run_id);
            }
            if let (Some(control), Some(result)) = (&self.control, &outcome.result)
                && control.defers_approvals()
                && let Some(paused) = self.paused_run(result).await
            {
                control.note_paused(paused);
                control.halted().await;
                // A halted member never answers: whoever waits for it is being stopped too.
                return std::future::pending().await;
            }
            let mut member = outcome.member;
            member.read_report(report.as_ref());
            member
        })
    }
}

/// Names each input's stream in the task; refuses names that are not plain file names,
/// names given twice and inputs that cannot be read.
fn prepare_inputs(task: &mut AgentTask, inputs: Vec<(String, PayloadSource)>) -> Result<Vec<StreamedInput>, String> {
    task.input.payloads.clear();
    let mut streamed = Vec::with_capacity(inputs.len());
    for (stream_id, (name, source)) in (1u32..).zip(inputs) {
        if !is_plain_file_name(&name) {
            return Err(format!("input {name:?} is not a plain file name"));
        }
        if streamed.iter().any(|s: &StreamedInput| s.name == name) {
            return Err(format!("input `{name}` is given twice"));
        }
        let total_len = source.len(&name).map_err(|e| e.to_string())?;
        task.input.payloads.push(PayloadRef { stream_id, name: name.clone(), total_len: Some(total_len) });
        streamed.push(StreamedInput { stream_id, name, source });
    }
    Ok(streamed)
}

/// A status that is not a completion, in words.
fn describe_status(status: RunOutcomeKind) -> String {
    match status {
        RunOutcomeKind::Completed => "completed",
        RunOutcomeKind::Paused => "the worker's run paused waiting for a person",
        RunOutcomeKind::Cancelled => "cancelled",
        RunOutcomeKind::BudgetExceeded => "the worker's budget ran out",
        RunOutcomeKind::MaxIterations => "the worker reached its iteration limit",
        RunOutcomeKind::Incomplete => "the worker's answer was cut at the output limit",
        RunOutcomeKind::Failed => "the worker's run failed",
    }
    .to_owned()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(millis).unwrap_or(0)
}
