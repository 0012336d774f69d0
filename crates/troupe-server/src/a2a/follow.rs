//! Following a run as a task: the events so far folded into a [`TaskProjection`], then
//! the live events as stream items, until the task ends or (newly) needs input.

use super::projection::{TaskProjection, Update};
use super::wire::{StreamResponse, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent};
use crate::hub::{HubRun, RunPhase};
use futures::SinkExt;
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, now_ms};

/// How long a pause waits for the pauses emitted with it (a turn asking for several
/// approvals pauses once per call) before the stream says `INPUT_REQUIRED` and ends.
const PAUSE_SETTLE: Duration = Duration::from_millis(50);

/// A run being followed as a task.
pub struct Follow {
    run: Arc<HubRun>,
    projection: TaskProjection,
    events: BoxStream<'static, (usize, AgentEvent)>,
    stop: CancellationToken,
}

/// One stream item, and whether it is the stream's last.
pub type Item = (StreamResponse, bool);

impl Follow {
    /// Starts following `run` (until `stop`): its events so far are folded in, and the
    /// fold agrees with the hub on what has been decided and how the run ended.
    pub async fn start(run: &Arc<HubRun>, stop: CancellationToken) -> Follow {
        let view = run.view();
        let mut events = run.subscribe(0, stop.clone()).boxed();
        let mut projection = TaskProjection::new(run.run_id().as_str(), view.started_ms);
        let mut seen = 0;
        while seen < view.events {
            let Some((_, event)) = events.next().await else { break };
            projection.apply(&event);
            seen += 1;
        }
        // Decisions are taken by the hub before the run acts on them: a task whose calls
        // were all decided works again, whatever its last event said.
        if view.phase == RunPhase::Running && projection.state().is_interrupted() {
            projection.resume(now_ms());
        }
        if let Some(end) = &view.end {
            projection.finish(end, now_ms());
        }
        Follow { run: Arc::clone(run), projection, events, stop }
    }

    /// Sets the task's context, for a run that has not said it yet (a task just started).
    pub fn set_context(&mut self, context: String) {
        self.projection.set_context(context);
    }

    /// The token that stops the following.
    pub fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    /// The fold so far.
    pub fn projection(&self) -> &TaskProjection {
        &self.projection
    }

    /// The task as it stands.
    pub fn task(&self, history_length: Option<usize>) -> Task {
        self.projection.snapshot(history_length, true)
    }

    fn item(&self, update: Update) -> StreamResponse {
        let task_id = self.run.run_id().as_str().to_owned();
        let context_id = self.projection.context_id().to_owned();
        match update {
            Update::Status(status) => {
                StreamResponse::StatusUpdate(TaskStatusUpdateEvent { task_id, context_id, status, metadata: None })
            }
            Update::Artifact(artifact) => StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id,
                context_id,
                artifact,
                append: false,
                last_chunk: true,
                metadata: None,
            }),
            Update::Chunk { artifact, append } => StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id,
                context_id,
                artifact,
                append,
                last_chunk: false,
                metadata: None,
            }),
        }
    }

    /// Follows the run until the task ends, or needs input anew (an interruption it
    /// already had when following began does not count), or the events stop (`stop`
    /// was cancelled); every update goes to `out` when given, the last marked so.
    /// Returns the fold at that point.
    pub async fn run(mut self, mut out: Option<mpsc::Sender<Item>>) -> TaskProjection {
        if self.projection.state().is_terminal() {
            return self.projection;
        }
        let mut held: Option<StreamResponse> = None;
        loop {
            let next = match held {
                None => self.events.next().await,
                Some(_) => match tokio::time::timeout(PAUSE_SETTLE, self.events.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        // The pause has settled: say it, with every call it waits for.
                        let status = self.projection.status();
                        let last = self.item(Update::Status(status));
                        send(&mut out, last, true).await;
                        return self.projection;
                    }
                },
            };
            let Some((_, event)) = next else { break };
            for update in self.projection.apply(&event) {
                let is_pause = matches!(&update, Update::Status(s) if s.state.is_interrupted());
                let item = self.item(update);
                if is_pause {
                    held = Some(item);
                    continue;
                }
                if let Some(pause) = held.take() {
                    // The run went on after the pause (decided elsewhere): it was real, say it.
                    send(&mut out, pause, false).await;
                }
                let ends = matches!(&item, StreamResponse::StatusUpdate(s) if s.status.state.is_terminal());
                if !send(&mut out, item, ends).await && out.is_some() {
                    return self.projection;
                }
                if ends {
                    return self.projection;
                }
            }
        }
        // The events stopped: the run ended (then say how, if its events did not), or
        // the follower was stopped.
        let end = self.run.view().end;
        let mut updates = match &end {
            Some(end) => self.projection.finish(end, now_ms()),
            None => Vec::new(),
        };
        if updates.is_empty() {
            if let Some(pause) = held.take() {
                send(&mut out, pause, true).await;
            }
            return self.projection;
        }
        let last = updates.pop();
        for update in updates {
            let item = self.item(update);
            send(&mut out, item, false).await;
        }
        if let Some(update) = last {
            let item = self.item(update);
            send(&mut out, item, true).await;
        }
        self.projection
    }
}

/// Sends `item` when there is somewhere to send it; false when the receiver is gone.
async fn send(out: &mut Option<mpsc::Sender<Item>>, item: StreamResponse, last: bool) -> bool {
    match out {
        Some(sender) => sender.send((item, last)).await.is_ok(),
        None => true,
    }
}
