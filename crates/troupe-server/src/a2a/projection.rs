//! A run's events folded into an A2A task: its state, status message, artifacts and
//! history. The same fold serves `GetTask` (the events so far) and the streams (each
//! event's updates as it comes), so a task read at any moment agrees with what a stream
//! told up to that moment.
//!
//! | run                                        | task                                     |
//! |--------------------------------------------|------------------------------------------|
//! | no event yet                               | `SUBMITTED`                              |
//! | `run_started`, later events                | `WORKING`                                |
//! | an assistant message ends                  | `WORKING`, the message as status message |
//! | `run_paused` (approval, question)          | `INPUT_REQUIRED`, saying what waits      |
//! | the waited-for call's result               | `WORKING`                                |
//! | `artifact`                                 | an artifact `artifact-N`                 |
//! | `run_finished` completed                   | artifact `answer`, then `COMPLETED`      |
//! | `run_finished` cancelled                   | `CANCELED`                               |
//! | `run_finished` paused                      | `INPUT_REQUIRED`                         |
//! | `run_finished` budget / iterations / cut   | artifact `answer` if any, `FAILED`       |
//! | `run_error`                                | `FAILED`, the error as status message    |
//!
//! Only the task's own run starts and ends it: the members of a team run have their own
//! `run_started` / `run_finished`, which are progress here.

use super::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus, parts_text, timestamp};
use crate::launcher::RunEnd;
use serde_json::json;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason, RunOutcomeKind};

pub use troupe_a2a::ANSWER_ARTIFACT;

/// What one event changed, for a stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// The task's status is now this.
    Status(TaskStatus),
    /// The task produced this artifact (whole: one chunk, the last).
    Artifact(Artifact),
    /// A piece of the answer as the agent writes it, to the answer artifact: the first
    /// creates it, the next ones (`append`) add to it; the whole answer replaces it at
    /// the end.
    Chunk {
        /// The piece.
        artifact: Artifact,
        /// Whether it adds to the pieces before it.
        append: bool,
    },
}

/// A task, as folded so far from its run's events.
#[derive(Clone, Debug)]
pub struct TaskProjection {
    task_id: String,
    context_id: Option<String>,
    state: TaskState,
    status_message: Option<Message>,
    status_ms: u64,
    artifacts: Vec<Artifact>,
    history: Vec<Message>,
    /// Assistant messages being written: (run, message id, text so far).
    drafts: Vec<(String, String, String)>,
    /// Whether pieces of the answer were streamed since it last ended.
    streaming: bool,
    pending: Vec<PauseReason>,
}

impl TaskProjection {
    /// The task of run `task_id`, started at `started_ms`, before any event.
    pub fn new(task_id: impl Into<String>, started_ms: u64) -> Self {
        TaskProjection {
            task_id: task_id.into(),
            context_id: None,
            state: TaskState::Submitted,
            status_message: None,
            status_ms: started_ms,
            artifacts: Vec::new(),
            history: Vec::new(),
            drafts: Vec::new(),
            streaming: false,
            pending: Vec::new(),
        }
    }

    /// Its state now.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Its context: the run's conversation, or the task's own id when it has none.
    pub fn context_id(&self) -> &str {
        self.context_id.as_deref().unwrap_or(&self.task_id)
    }

    /// Sets its context, before the run's events say it (a run emits its conversation in
    /// every event; a task just started has none yet).
    pub fn set_context(&mut self, context: String) {
        self.context_id.get_or_insert(context);
    }

    /// The decisions it waits for.
    pub fn pending(&self) -> &[PauseReason] {
        &self.pending
    }

    /// The task as it stands, with at most `history_length` of its latest messages (all
    /// when `None`) and its artifacts when `with_artifacts`.
    pub fn snapshot(&self, history_length: Option<usize>, with_artifacts: bool) -> Task {
        let skip = history_length.map_or(0, |n| self.history.len().saturating_sub(n));
        Task {
            id: self.task_id.clone(),
            context_id: self.context_id().to_owned(),
            status: self.status(),
            artifacts: if with_artifacts { self.artifacts.clone() } else { Vec::new() },
            history: self.history[skip..].to_vec(),
            metadata: None,
        }
    }

    /// Its status now.
    pub fn status(&self) -> TaskStatus {
        TaskStatus {
            state: self.state,
            message: self.status_message.clone(),
            timestamp: Some(timestamp(self.status_ms)),
        }
    }

    fn set(&mut self, state: TaskState, message: Option<Message>, at_ms: u64) -> Update {
        self.state = state;
        self.status_message = message;
        self.status_ms = at_ms;
        Update::Status(self.status())
    }

    fn agent_message(&self, id: String, parts: Vec<Part>) -> Message {
        let mut message = Message::new(id, Role::Agent, parts);
        message.task_id = Some(self.task_id.clone());
        message.context_id = Some(self.context_id().to_owned());
        message
    }

    fn add_artifact(&mut self, artifact: Artifact) -> Update {
        self.artifacts.retain(|a| a.artifact_id != artifact.artifact_id);
        self.artifacts.push(artifact.clone());
        Update::Artifact(artifact)
    }

    /// Folds `event` in; what changed, for a stream.
    pub fn apply(&mut self, event: &AgentEvent) -> Vec<Update> {
        if self.state.is_terminal() {
            return Vec::new();
        }
        let at = event.attribution.timestamp_ms;
        let run = event.attribution.run_id.as_str();
        let own = run == self.task_id;
        if own && self.context_id.is_none() {
            self.context_id = event.attribution.conversation_id.as_ref().map(|c| c.as_str().to_owned());
        }
        let mut updates = Vec::new();
        // Whatever the run does after a pause means it went on: an answered question
        // waits no more.
        if !matches!(event.kind, AgentEventKind::RunPaused { .. }) {
            self.pending.retain(|p| !matches!(p, PauseReason::Input { .. }));
        }
        match &event.kind {
            AgentEventKind::RunStarted { instruction, .. } if own => {
                let mut message =
                    Message::new(format!("{}-task", self.task_id), Role::User, vec![Part::text(instruction)]);
                message.task_id = Some(self.task_id.clone());
                message.context_id = Some(self.context_id().to_owned());
                self.history.push(message);
                updates.push(self.set(TaskState::Working, None, at));
            }
            AgentEventKind::MessageStart { message_id, role: troupe_core::Role::Assistant } => {
                self.drafts.push((run.to_owned(), message_id.clone(), String::new()));
            }
            AgentEventKind::MessageDelta { message_id, delta } => {
                if let Some(draft) = self.drafts.iter_mut().find(|(r, m, _)| r == run && m == message_id) {
                    draft.2.push_str(delta);
                }
                // The run's own text streams into the answer artifact while the task works.
                if own && !delta.is_empty() && !self.state.is_interrupted() {
                    let artifact = Artifact {
                        artifact_id: ANSWER_ARTIFACT.to_owned(),
                        name: Some(ANSWER_ARTIFACT.to_owned()),
                        parts: vec![Part::text(delta)],
                        ..Artifact::default()
                    };
                    updates.push(Update::Chunk { artifact, append: self.streaming });
                    self.streaming = true;
                }
            }
            AgentEventKind::MessageEnd { message_id } => {
                let at_draft = self.drafts.iter().position(|(r, m, _)| r == run && m == message_id);
                if let Some((_, _, text)) = at_draft.map(|i| self.drafts.remove(i))
                    && !text.trim().is_empty()
                {
                    let mut message = self.agent_message(format!("{run}-{message_id}"), vec![Part::text(text)]);
                    if !own {
                        message.metadata = Some(json!({"agent": event.attribution.agent_id.as_str()}));
                    }
                    self.history.push(message.clone());
                    if !self.state.is_interrupted() {
                        updates.push(self.set(TaskState::Working, Some(message), at));
                    }
                }
            }
            AgentEventKind::RunPaused { reason } => {
                self.pending.push(reason.clone());
                let message = self
                    .agent_message(format!("{}-input-{}", self.task_id, event.attribution.seq), waiting(&self.pending));
                updates.push(self.set(TaskState::InputRequired, Some(message), at));
            }
            AgentEventKind::ToolCallResult { call_id, .. } => {
                let before = self.pending.len();
                self.pending.retain(|p| pending_call(p) != Some(call_id.as_str()));
                if self.pending.len() < before && self.pending.is_empty() && self.state.is_interrupted() {
                    updates.push(self.set(TaskState::Working, None, at));
                }
            }
            AgentEventKind::Artifact { name, mime_type, content } => {
                let artifact = Artifact {
                    artifact_id: format!("artifact-{}", self.artifacts.len()),
                    name: Some(name.clone()),
                    parts: vec![Part { media_type: Some(mime_type.clone()), ..Part::text(content) }],
                    ..Artifact::default()
                };
                updates.push(self.add_artifact(artifact));
            }
            AgentEventKind::RunFinished { outcome, output, .. } if own => {
                updates.extend(self.end(*outcome, output.as_deref(), None, at));
            }
            AgentEventKind::RunError { message, .. } if own => {
                updates.extend(self.end(RunOutcomeKind::Failed, None, Some(message), at));
            }
            _ => {
                if self.state == TaskState::Submitted && own {
                    updates.push(self.set(TaskState::Working, None, at));
                }
            }
        }
        updates
    }

    /// The run was given every decision it waited for (the hub takes them before the run
    /// acts on them): the task works again.
    pub fn resume(&mut self, at_ms: u64) -> Option<Update> {
        if !self.state.is_interrupted() {
            return None;
        }
        self.pending.clear();
        Some(self.set(TaskState::Working, None, at_ms))
    }

    /// When its status last changed, in milliseconds since the Unix epoch.
    pub fn status_ms(&self) -> u64 {
        self.status_ms
    }

    /// Folds in the run's end as the hub recorded it, for a run whose last event did not
    /// say (it failed before emitting one, say). Nothing when the task has ended already.
    pub fn finish(&mut self, end: &RunEnd, at_ms: u64) -> Vec<Update> {
        if self.state.is_terminal() || (self.state.is_interrupted() && end.outcome == RunOutcomeKind::Paused) {
            return Vec::new();
        }
        self.end(end.outcome, end.output.as_deref(), end.error.as_deref(), at_ms)
    }

    fn end(&mut self, outcome: RunOutcomeKind, output: Option<&str>, error: Option<&str>, at: u64) -> Vec<Update> {
        let mut updates = Vec::new();
        let state = outcome_state(outcome);
        if let Some(text) = output.filter(|t| !t.is_empty())
            && state != TaskState::Canceled
        {
            let artifact = Artifact {
                artifact_id: ANSWER_ARTIFACT.to_owned(),
                name: Some(ANSWER_ARTIFACT.to_owned()),
                description: Some("The final answer.".to_owned()),
                parts: vec![Part::text(text)],
                ..Artifact::default()
            };
            updates.push(self.add_artifact(artifact));
        }
        let said = match (outcome, error) {
            (_, Some(error)) => Some(format!("The run failed: {error}")),
            (RunOutcomeKind::Cancelled, None) => Some("The run was cancelled.".to_owned()),
            (RunOutcomeKind::BudgetExceeded, None) => Some("The run stopped: a budget ran out.".to_owned()),
            (RunOutcomeKind::MaxIterations, None) => Some("The run stopped at its iteration limit.".to_owned()),
            (RunOutcomeKind::Incomplete, None) => {
                Some("The answer was cut at the model's output limit; it is partial.".to_owned())
            }
            (RunOutcomeKind::Paused, None) => Some(parts_text(&waiting(&self.pending))),
            (RunOutcomeKind::Completed | RunOutcomeKind::Failed, None) => None,
        };
        let id = format!("{}-status-{at}", self.task_id);
        let message = said.filter(|s| !s.is_empty()).map(|text| self.agent_message(id, vec![Part::text(text)]));
        self.pending.clear();
        updates.push(self.set(state, message, at));
        updates
    }
}

/// The state a run's outcome puts its task in.
pub fn outcome_state(outcome: RunOutcomeKind) -> TaskState {
    match outcome {
        RunOutcomeKind::Completed => TaskState::Completed,
        RunOutcomeKind::Paused => TaskState::InputRequired,
        RunOutcomeKind::Cancelled => TaskState::Canceled,
        RunOutcomeKind::BudgetExceeded
        | RunOutcomeKind::MaxIterations
        | RunOutcomeKind::Incomplete
        | RunOutcomeKind::Failed => TaskState::Failed,
    }
}

/// The call a pause waits on, if it is about one.
pub fn pending_call(reason: &PauseReason) -> Option<&str> {
    match reason {
        PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. } => Some(call_id.as_str()),
        PauseReason::Input { .. } => None,
    }
}

/// The status message of a task waiting for `pending`: one line of text per decision
/// and how to answer, then a data part `{"pending": [{type, callId, tool, arguments,
/// reason}]}` for programs.
fn waiting(pending: &[PauseReason]) -> Vec<Part> {
    let mut lines = Vec::new();
    let mut data = Vec::new();
    let mut asks_decision = false;
    for reason in pending {
        match reason {
            PauseReason::Approval { call_id, tool, arguments, reason } => {
                asks_decision = true;
                lines.push(format!(
                    "The call `{tool}` (call id `{call_id}`) waits for approval ({reason}): {arguments}"
                ));
                data.push(json!({
                    "type": "approval", "callId": call_id, "tool": tool, "arguments": arguments, "reason": reason,
                }));
            }
            PauseReason::UncertainAction { call_id, tool, arguments } => {
                asks_decision = true;
                lines.push(format!(
                    "The call `{tool}` (call id `{call_id}`) was interrupted and may or may not have taken effect: \
                     {arguments}; approve to run it again, reject to skip it"
                ));
                data.push(json!({"type": "uncertain_action", "callId": call_id, "tool": tool, "arguments": arguments}));
            }
            PauseReason::Input { prompt } => {
                lines.push(prompt.clone());
                data.push(json!({"type": "input", "prompt": prompt}));
            }
        }
    }
    if asks_decision {
        lines.push(
            "Reply `approve` or `reject`, or send a data part {\"approval\": \"approve\" | \"reject\", \"callId\": …}."
                .to_owned(),
        );
    }
    vec![Part::text(lines.join("\n")), Part::data(json!({ "pending": data }))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::{AgentId, Attribution, ConversationId, RunId, ToolCallId, Usage};

    fn event(run: &str, seq: u64, kind: AgentEventKind) -> AgentEvent {
        let mut attribution = Attribution::now(AgentId::new("coder"), RunId::new(run), seq);
        attribution.conversation_id = Some(ConversationId::new("ctx-1"));
        AgentEvent::new(attribution, kind)
    }

    fn fold(projection: &mut TaskProjection, kinds: Vec<AgentEventKind>) -> Vec<Update> {
        kinds.into_iter().enumerate().flat_map(|(i, k)| projection.apply(&event("run_1", i as u64, k))).collect()
    }

    #[test]
    fn a_pause_asks_for_input_naming_the_call_and_its_result_resumes_work() {
        let mut task = TaskProjection::new("run_1", 0);
        assert_eq!(task.state(), TaskState::Submitted);
        let updates = fold(
            &mut task,
            vec![
                AgentEventKind::RunStarted { instruction: "write".into(), model: "m".into() },
                AgentEventKind::RunPaused {
                    reason: PauseReason::Approval {
                        call_id: ToolCallId::new("call_w"),
                        tool: "fs.write".into(),
                        arguments: json!({"path": "a.md"}),
                        reason: "writes files".into(),
                    },
                },
            ],
        );
        assert_eq!(task.state(), TaskState::InputRequired);
        assert_eq!(task.context_id(), "ctx-1");
        let Some(Update::Status(status)) = updates.last() else { panic!("a status update: {updates:?}") };
        let said = status.message.as_ref().expect("a status message");
        assert!(said.text().contains("fs.write") && said.text().contains("call_w") && said.text().contains("a.md"));
        assert_eq!(said.parts[1].data.as_ref().expect("data")["pending"][0]["callId"], "call_w");

        let resumed = task.apply(&event(
            "run_1",
            2,
            AgentEventKind::ToolCallResult {
                call_id: ToolCallId::new("call_w"),
                content: "ok".into(),
                is_error: false,
            },
        ));
        assert_eq!(task.state(), TaskState::Working);
        assert_eq!(resumed.len(), 1);
    }

    #[test]
    fn a_completed_run_gives_the_answer_artifact_then_completed() {
        let mut task = TaskProjection::new("run_1", 0);
        let updates = fold(
            &mut task,
            vec![
                AgentEventKind::RunStarted { instruction: "hi".into(), model: "m".into() },
                AgentEventKind::MessageStart { message_id: "m1".into(), role: troupe_core::Role::Assistant },
                AgentEventKind::MessageDelta { message_id: "m1".into(), delta: "Hel".into() },
                AgentEventKind::MessageDelta { message_id: "m1".into(), delta: "lo".into() },
                AgentEventKind::MessageEnd { message_id: "m1".into() },
                AgentEventKind::RunFinished {
                    outcome: RunOutcomeKind::Completed,
                    output: Some("Hello".into()),
                    usage: Usage::default(),
                    cost_usd: 0.0,
                },
            ],
        );
        let n = updates.len();
        assert!(matches!(&updates[n - 2], Update::Artifact(a) if a.artifact_id == ANSWER_ARTIFACT));
        assert!(matches!(&updates[n - 1], Update::Status(s) if s.state == TaskState::Completed));
        let snapshot = task.snapshot(None, true);
        assert_eq!(snapshot.history.len(), 2, "the task and the answer");
        assert_eq!(snapshot.history[1].text(), "Hello");
        assert_eq!(snapshot.artifacts[0].parts[0].text.as_deref(), Some("Hello"));
        assert_eq!(task.snapshot(Some(1), false).history.len(), 1);
        assert!(task.snapshot(Some(0), false).artifacts.is_empty());
        let late = task.finish(&RunEnd::failed("late"), 9);
        assert!(late.is_empty(), "an ended task stays as it ended");
    }

    #[test]
    fn a_member_run_finishing_does_not_end_the_team_task() {
        let mut task = TaskProjection::new("run_team", 0);
        task.apply(&event("run_team", 0, AgentEventKind::RunStarted { instruction: "t".into(), model: "team".into() }));
        task.apply(&event(
            "run_member",
            0,
            AgentEventKind::RunFinished {
                outcome: RunOutcomeKind::Completed,
                output: Some("part".into()),
                usage: Usage::default(),
                cost_usd: 0.0,
            },
        ));
        assert_eq!(task.state(), TaskState::Working);
        let ended = task.finish(&RunEnd::failed("boom"), 5);
        assert_eq!(task.state(), TaskState::Failed);
        let Some(Update::Status(status)) = ended.last() else { panic!("a status") };
        assert!(status.message.as_ref().expect("message").text().contains("boom"));
    }
}
