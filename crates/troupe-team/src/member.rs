//! [`Member`]: anything that can take a task for a team — a local agent, a worker
//! process defined by a file, a remote agent — and what it gives back ([`MemberResult`]).

use crate::control::{PausedRun, TeamControl};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason, RunId, Usage};
use troupe_durable::ResumeRun;
use troupe_runtime::durable::{child_run_id, finished_output};
use troupe_runtime::{Agent, OutputSpec, RunHandle, RunInput, RunOutcome, RunOutput, RuntimeError};

/// A task given to a member.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberTask {
    /// The task's id, unique within the team's work.
    pub task_id: String,
    /// Who gives the task (a member's name, or `user`).
    pub from: String,
    /// What to do.
    pub prompt: String,
    /// Context the member needs beyond its own instructions (results of earlier members,
    /// a brief), appended to the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The run of the member that delegates, so runs form a tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// The typed report the member must end with (see [`report`](crate::report)); `None`:
    /// as the member itself declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<OutputSpec>,
}

impl MemberTask {
    /// A task `prompt` from `from`.
    pub fn new(task_id: impl Into<String>, from: impl Into<String>, prompt: impl Into<String>) -> Self {
        MemberTask { task_id: task_id.into(), from: from.into(), prompt: prompt.into(), ..MemberTask::default() }
    }

    /// The same task with `context`.
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// The prompt with its context, as the member reads it.
    pub fn full_prompt(&self) -> String {
        match &self.context {
            Some(context) if !context.is_empty() => format!("{}\n\n{context}", self.prompt),
            _ => self.prompt.clone(),
        }
    }
}

/// What a member gave back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberResult {
    /// The member.
    pub name: String,
    /// The task it was given.
    pub task_id: String,
    /// Its answer (or the partial text of a failed run).
    pub content: String,
    /// Whether it completed the task.
    pub success: bool,
    /// Why it did not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its tokens.
    pub usage: Usage,
    /// Its cost in USD.
    pub cost_usd: f64,
    /// Its run, when it ran as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// Its typed report, when its report is typed and it completed the task: the JSON
    /// document its run ended with, as it may be read (see [`report`](crate::report)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
}

impl MemberResult {
    /// A failed result of `name` for `task_id`.
    pub fn failed(name: impl Into<String>, task_id: impl Into<String>, error: impl Into<String>) -> Self {
        MemberResult {
            name: name.into(),
            task_id: task_id.into(),
            error: Some(error.into()),
            ..MemberResult::default()
        }
    }

    /// The typed report decoded as a `T` (a [`Report`](crate::report::Report), say):
    /// `None` without a typed report, else the report or why it is not a `T`.
    pub fn report_as<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.report.as_ref().map(|report| T::deserialize(report))
    }

    /// Reads the typed report of `spec` from the answer of a completed task, when there is
    /// a spec, no report was read yet and the answer matches it (for a [`Member`] whose
    /// runs end with a typed answer).
    pub fn read_report(&mut self, spec: Option<&OutputSpec>) {
        if let (Some(spec), true, None) = (spec, self.success, &self.report) {
            self.report = spec.check(&self.content).ok();
        }
    }
}

/// Where a member sends its live events (bounded; a full channel makes the member wait).
pub type EventSink = mpsc::Sender<AgentEvent>;

/// A team member.
pub trait Member: Send + Sync {
    /// Its unique name in the team.
    fn name(&self) -> &str;

    /// What it is good at, shown to a leader choosing whom to delegate to.
    fn description(&self) -> &str;

    /// Whether the member's runs are recorded so that a task given again under the same
    /// parent run is found rather than run again (a resumed team's member replays what it
    /// did); a tool that starts such a member may then be retried without repeating its
    /// effects.
    fn resumable(&self) -> bool {
        false
    }

    /// Runs `task` to its end; live events go to `events` when given. Never panics and
    /// never fails the caller: every problem is a failed [`MemberResult`].
    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult>;
}

/// A local [`Agent`] as a member.
///
/// When its agent records runs ([`Runner::with_store`](troupe_runtime::Runner::with_store))
/// and a task names the run that gives it (`parent_run_id`), the member's run for that
/// task has one id ([`child_run_id`] of the parent, the member's name and the task's id):
/// a task whose run already finished is answered from the record without running again,
/// and one whose run was interrupted resumes it from its last checkpoint. That is how a
/// team resumed after a crash replays what its members did.
#[derive(Clone, Debug)]
pub struct AgentMember {
    agent: Agent,
    description: String,
    control: Option<TeamControl>,
    report: Option<OutputSpec>,
}

impl AgentMember {
    /// `agent` as a member, described by `description`.
    pub fn new(agent: Agent, description: impl Into<String>) -> Self {
        AgentMember { agent, description: description.into(), control: None, report: None }
    }

    /// The same member, reporting in `format` (see [`report`](crate::report)): its runs
    /// end with a document of that schema, which its results carry as
    /// [`MemberResult::report`]. A task that names its own report wins.
    pub fn report(mut self, format: crate::report::ReportFormat) -> Self {
        self.report = format.spec();
        self
    }

    /// The report the member's run for `task` must end with: the task's, else the
    /// member's, else its agent's own output schema.
    fn report_spec(&self, task: &MemberTask) -> Option<OutputSpec> {
        task.report.clone().or_else(|| self.report.clone()).or_else(|| self.agent.spec().output.clone())
    }

    /// The same member, its runs followed by `control` (decisions, deferral, halt).
    pub fn with_control(mut self, control: TeamControl) -> Self {
        self.control = Some(control);
        self
    }

    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Wraps it in an `Arc<dyn Member>`.
    pub fn shared(self) -> Arc<dyn Member> {
        Arc::new(self)
    }

    /// The run for `task`: its record when it has finished, else a handle on it, started
    /// or resumed.
    async fn open(&self, task: &MemberTask) -> Result<Opened, RuntimeError> {
        let mut input = RunInput::new(task.full_prompt());
        input.parent_run_id.clone_from(&task.parent_run_id);
        input.output = self.report_spec(task);
        let (Some(parent), Some(durability)) = (&task.parent_run_id, self.agent.runner().durability()) else {
            return Ok(Opened::Going(self.agent.start(input)));
        };
        let run_id = child_run_id(parent, &format!("{}\0{}", self.name(), task.task_id));
        match durability.store().load_run(run_id.as_str()).await? {
            None => Ok(Opened::Going(self.agent.start(input.run_id(run_id)))),
            Some(record) => match finished_output(record)? {
                Some(output) => Ok(Opened::Finished(Box::new(output))),
                None => Ok(Opened::Going(self.agent.resume_run(run_id.as_str()).await?)),
            },
        }
    }
}

/// A member's run for a task, as found.
enum Opened {
    /// It had finished: its record.
    Finished(Box<RunOutput>),
    /// It goes on (started or resumed).
    Going(RunHandle),
}

impl Member for AgentMember {
    fn name(&self) -> &str {
        &self.agent.spec().name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn resumable(&self) -> bool {
        self.agent.runner().durability().is_some()
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            let name = self.name().to_owned();
            let spec = self.report_spec(&task);
            let result_of = |name, task_id, output| {
                let mut result = result_of(name, task_id, output);
                result.read_report(spec.as_ref());
                result
            };
            let mut handle = match self.open(&task).await {
                Ok(Opened::Going(handle)) => handle,
                Ok(Opened::Finished(output)) => return result_of(name, task.task_id, *output),
                Err(error) => return MemberResult::failed(name, task.task_id, error.to_string()),
            };
            let run_id = handle.run_id.clone();
            let stop = handle.cancel.clone();
            if let Some(control) = &self.control {
                control.enter(&name, &run_id, &handle.signals, handle.result.halter());
            }
            // Dropping this future (a cancelled group, a timed-out delegation) stops the
            // run, unless the team was halted: then the run stays as recorded, to resume.
            let _stop_on_drop = StopOnDrop { cancel: stop.clone(), control: self.control.clone() };
            let control = self.control.as_ref();
            let forward = async {
                while let Some(event) = handle.events.next_event().await {
                    if let (Some(control), AgentEventKind::RunPaused { reason }) = (control, &event.kind)
                        && let PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. } =
                            reason
                    {
                        control.note_waiting(&run_id, call_id);
                    }
                    if let Some(sink) = &events {
                        // A closed sink means nobody watches: the run goes on.
                        let _ = sink.send(event).await;
                    }
                }
            };
            tokio::select! {
                () = forward => {}
                () = cancel.cancelled() => stop.cancel(),
            }
            let output = handle.output().await;
            let Some(control) = &self.control else {
                return match output {
                    Ok(output) => result_of(name, task.task_id, output),
                    Err(error) => MemberResult::failed(name, task.task_id, error.to_string()),
                };
            };
            control.leave(&run_id);
            match output {
                // A halted member never answers: whoever waits for it is being stopped too.
                Err(RuntimeError::Halted) => std::future::pending().await,
                Ok(RunOutput { outcome: RunOutcome::Paused { pending }, .. }) if control.defers_approvals() => {
                    control.note_paused(PausedRun { member: name, run_id, pending });
                    control.halted().await;
                    std::future::pending().await
                }
                Ok(output) => result_of(name, task.task_id, output),
                Err(error) => MemberResult::failed(name, task.task_id, error.to_string()),
            }
        })
    }
}

/// Cancels a member's run when its future is dropped, unless its team was halted.
struct StopOnDrop {
    cancel: CancellationToken,
    control: Option<TeamControl>,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if !self.control.as_ref().is_some_and(TeamControl::is_halted) {
            self.cancel.cancel();
        }
    }
}

/// What a member's run came to, as its result.
fn result_of(name: String, task_id: String, output: RunOutput) -> MemberResult {
    let (success, error) = match &output.outcome {
        RunOutcome::Completed { .. } => (true, None),
        other => (false, Some(describe(other))),
    };
    MemberResult {
        name,
        task_id,
        content: output.text,
        success,
        error,
        usage: output.usage,
        cost_usd: output.cost_usd,
        run_id: Some(output.run_id),
        report: None,
    }
}

/// An outcome that is not a completion, in words.
pub(crate) fn describe(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Completed { .. } => "completed".to_owned(),
        RunOutcome::Paused { pending } => format!("paused waiting for {} approval(s)", pending.len()),
        RunOutcome::Cancelled { reason } => {
            format!("cancelled{}", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())
        }
        RunOutcome::BudgetExceeded { budget } => format!("its {budget} budget ran out"),
        RunOutcome::MaxIterations { iterations } => format!("it reached its iteration limit ({iterations})"),
        RunOutcome::Incomplete { .. } => "its answer was cut at the output limit".to_owned(),
        RunOutcome::Failed { error, .. } => error.clone(),
    }
}
