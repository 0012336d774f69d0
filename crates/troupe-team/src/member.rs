//! [`Member`]: anything that can take a task for a team — a local agent, a worker
//! process defined by a file, a remote agent — and what it gives back ([`MemberResult`]).

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, RunId, Usage};
use troupe_runtime::{Agent, RunInput, RunOutcome};

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
}

/// Where a member sends its live events (bounded; a full channel makes the member wait).
pub type EventSink = mpsc::Sender<AgentEvent>;

/// A team member.
pub trait Member: Send + Sync {
    /// Its unique name in the team.
    fn name(&self) -> &str;

    /// What it is good at, shown to a leader choosing whom to delegate to.
    fn description(&self) -> &str;

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
#[derive(Clone, Debug)]
pub struct AgentMember {
    agent: Agent,
    description: String,
}

impl AgentMember {
    /// `agent` as a member, described by `description`.
    pub fn new(agent: Agent, description: impl Into<String>) -> Self {
        AgentMember { agent, description: description.into() }
    }

    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Wraps it in an `Arc<dyn Member>`.
    pub fn shared(self) -> Arc<dyn Member> {
        Arc::new(self)
    }
}

impl Member for AgentMember {
    fn name(&self) -> &str {
        &self.agent.spec().name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            let mut input = RunInput::new(task.full_prompt());
            input.parent_run_id.clone_from(&task.parent_run_id);
            let mut handle = self.agent.start(input);
            let run_id = handle.run_id.clone();
            let stop = handle.cancel.clone();
            // Dropping this future (a cancelled group, a timed-out delegation) stops the run.
            let _stop_on_drop = handle.cancel.clone().drop_guard();
            let forward = async {
                while let Some(event) = handle.events.next_event().await {
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
            let name = self.name().to_owned();
            match handle.output().await {
                Ok(output) => {
                    let (success, error) = match &output.outcome {
                        RunOutcome::Completed { .. } => (true, None),
                        other => (false, Some(describe(other))),
                    };
                    MemberResult {
                        name,
                        task_id: task.task_id,
                        content: output.text,
                        success,
                        error,
                        usage: output.usage,
                        cost_usd: output.cost_usd,
                        run_id: Some(run_id),
                    }
                }
                Err(error) => MemberResult::failed(name, task.task_id, error.to_string()),
            }
        })
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
