//! The webhooks of the tasks, and their deliveries.
//!
//! Each webhook has its own outbox and worker, so a slow or failing one delays no other
//! and never the run: the task's follower only queues. An outbox holds at most
//! [`OUTBOX_LIMIT`] updates; past that the oldest waiting one is dropped (and said in the
//! log), so the newest — the task's final state among them — always gets in.
//!
//! One follower per task with webhooks folds the run's events into the task's updates
//! (the same `Follow` the streams use) and queues each for every webhook of the task,
//! until the task ends, its last webhook is removed, or the server closes.

use super::config::TaskPushNotificationConfig;
use super::webhook::Webhook;
use crate::a2a::follow::{Follow, Item};
use crate::a2a::rpc::{RpcError, UNSUPPORTED_OPERATION};
use crate::a2a::wire::{StreamResponse, TaskState, TaskStatusUpdateEvent};
use crate::hub::HubRun;
use crate::state::AppState;
use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How many updates wait for one webhook at most.
pub const OUTBOX_LIMIT: usize = 256;
/// How many webhooks one task may have.
pub const WEBHOOKS_PER_TASK: usize = 16;

/// A webhook with its queue of updates.
struct Outbox {
    webhook: Webhook,
    queue: Mutex<VecDeque<Value>>,
    ready: Notify,
    /// Cancelled when the webhook is removed or replaced, or the server closes.
    closed: CancellationToken,
    /// Set when the task has ended and nothing more will be queued: the worker stops
    /// once the queue is empty.
    finished: AtomicBool,
}

impl Outbox {
    fn push(&self, body: Value) {
        let mut queue = self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if queue.len() >= OUTBOX_LIMIT {
            queue.pop_front();
            tracing::warn!(task = %self.webhook.config().task_id, "a webhook fell behind; its oldest update was dropped");
        }
        queue.push_back(body);
        drop(queue);
        self.ready.notify_one();
    }

    /// Delivers the queued updates in order, one at a time, until closed.
    async fn work(self: Arc<Self>, http: reqwest::Client) {
        loop {
            let next = self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
            match next {
                Some(body) => {
                    self.webhook.deliver(&http, &body, &self.closed).await;
                }
                None if self.finished.load(Ordering::Acquire) => return,
                None => tokio::select! {
                    () = self.closed.cancelled() => return,
                    () = self.ready.notified() => {}
                },
            }
            if self.closed.is_cancelled() {
                return;
            }
        }
    }
}

#[derive(Default)]
struct Tasks {
    /// Each task's webhooks, oldest first.
    hooks: HashMap<String, Vec<Arc<Outbox>>>,
    /// The tasks whose follower runs: its number and its stop token.
    followed: HashMap<String, (u64, CancellationToken)>,
    /// The number of the next follower.
    next_follower: u64,
}

/// The webhooks of the server's tasks. They live in memory: a restarted server has none.
pub struct PushRegistry {
    tasks: Mutex<Tasks>,
    http: reqwest::Client,
}

impl Default for PushRegistry {
    fn default() -> Self {
        // Redirects are not followed: the token and credentials are for the URL the client
        // gave, not for wherever it points on.
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap_or_default();
        PushRegistry { tasks: Mutex::default(), http }
    }
}

impl std::fmt::Debug for PushRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushRegistry").finish_non_exhaustive()
    }
}

impl PushRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Refuses a webhook for `run` when it could not be served: the task is held (and
    /// working) on another server, or has [`WEBHOOKS_PER_TASK`] already (`replacing` one
    /// of them does not count).
    pub(crate) fn admit(&self, state: &AppState, run: &HubRun, replacing: &str) -> Result<(), RpcError> {
        let id = run.run_id().as_str();
        if !run.is_ended() && state.hub.get(id).is_none() {
            return Err(RpcError::new(
                UNSUPPORTED_OPERATION,
                format!("task `{id}` is held by another server: configure its push notifications there"),
            ));
        }
        let tasks = self.lock();
        let hooks = tasks.hooks.get(id).map(Vec::as_slice).unwrap_or_default();
        if hooks.len() >= WEBHOOKS_PER_TASK && !hooks.iter().any(|h| h.webhook.config().id == replacing) {
            return Err(RpcError::invalid_params(format!(
                "task `{id}` has {WEBHOOKS_PER_TASK} push configs already; delete one first"
            )));
        }
        Ok(())
    }

    /// Adds `webhook` to `run`'s task (replacing the one with its id), and starts following
    /// the task if nobody does; the config as stored, with its secrets.
    pub(crate) fn add(
        &self,
        state: &AppState,
        run: &Arc<HubRun>,
        webhook: Webhook,
    ) -> Result<TaskPushNotificationConfig, RpcError> {
        let task_id = run.run_id().as_str().to_owned();
        let webhook = webhook.for_task(&task_id);
        self.admit(state, run, &webhook.config().id)?;
        let config = webhook.config().clone();
        if self.configs(&task_id).contains(&config) {
            // The same webhook again (a client sending its config with each message): it
            // keeps its outbox and what waits there.
            return Ok(config);
        }
        let outbox = Arc::new(Outbox {
            webhook,
            queue: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            closed: state.closing.child_token(),
            finished: AtomicBool::new(run.is_ended()),
        });
        let mut tasks = self.lock();
        let hooks = tasks.hooks.entry(task_id.clone()).or_default();
        if let Some(at) = hooks.iter().position(|h| h.webhook.config().id == config.id) {
            hooks.remove(at).closed.cancel();
        }
        hooks.push(Arc::clone(&outbox));
        if !run.is_ended() {
            tokio::spawn(outbox.work(self.http.clone()));
        }
        if !tasks.followed.contains_key(&task_id) && !run.is_ended() {
            let stop = state.closing.child_token();
            let number = tasks.next_follower;
            tasks.next_follower += 1;
            tasks.followed.insert(task_id, (number, stop.clone()));
            tokio::spawn(follow(Arc::clone(&state.push), Arc::clone(run), number, stop));
        }
        Ok(config)
    }

    /// The configs of task `task_id`, oldest first (with their secrets).
    pub(crate) fn configs(&self, task_id: &str) -> Vec<TaskPushNotificationConfig> {
        let tasks = self.lock();
        tasks
            .hooks
            .get(task_id)
            .map(|hooks| hooks.iter().map(|h| h.webhook.config().clone()).collect())
            .unwrap_or_default()
    }

    /// Removes config `id` of task `task_id` (its waiting updates are not sent); whether
    /// there was one.
    pub(crate) fn remove(&self, task_id: &str, id: &str) -> bool {
        let mut tasks = self.lock();
        let Some(hooks) = tasks.hooks.get_mut(task_id) else { return false };
        let Some(at) = hooks.iter().position(|h| h.webhook.config().id == id) else { return false };
        hooks.remove(at).closed.cancel();
        if hooks.is_empty() {
            tasks.hooks.remove(task_id);
            if let Some((_, stop)) = tasks.followed.remove(task_id) {
                stop.cancel();
            }
        }
        true
    }

    /// Queues `item` for every webhook of `task_id`; false when it has none left.
    fn queue(&self, task_id: &str, item: &StreamResponse) -> bool {
        let tasks = self.lock();
        let Some(hooks) = tasks.hooks.get(task_id).filter(|h| !h.is_empty()) else { return false };
        let body = serde_json::to_value(item).unwrap_or(Value::Null);
        for hook in hooks {
            hook.push(body.clone());
        }
        true
    }

    /// Forgets follower `number` of `task_id`; when the task has `ended`, its webhooks'
    /// workers stop once they have delivered what waits.
    fn unfollow(&self, task_id: &str, number: u64, ended: bool) {
        let mut tasks = self.lock();
        // Only this follower's own entry: a newer one may have taken the task's place.
        if tasks.followed.get(task_id).is_some_and(|(n, _)| *n == number) {
            tasks.followed.remove(task_id);
        }
        if ended {
            for hook in tasks.hooks.get(task_id).map(Vec::as_slice).unwrap_or_default() {
                hook.finished.store(true, Ordering::Release);
                hook.ready.notify_one();
            }
        }
    }
}

/// Follows `run`'s task from where it stands, queueing its updates for the task's
/// webhooks: across its pauses (each told as `INPUT_REQUIRED`) until it ends.
async fn follow(registry: Arc<PushRegistry>, run: Arc<HubRun>, number: u64, stop: CancellationToken) {
    let task_id = run.run_id().as_str().to_owned();
    let mut told: Option<TaskState> = None;
    while !stop.is_cancelled() {
        let follow = Follow::start(&run, stop.clone()).await;
        let now = follow.projection().status();
        // What changed while nobody followed (a decision taken between two follows).
        if told.is_some_and(|state| state != now.state) {
            let item = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.clone(),
                context_id: follow.projection().context_id().to_owned(),
                status: now.clone(),
                metadata: None,
            });
            if !registry.queue(&task_id, &item) {
                break;
            }
        }
        told = Some(now.state);
        if now.state.is_terminal() {
            break;
        }
        let (tx, rx) = mpsc::channel::<Item>(crate::a2a::methods::STREAM_BUFFER);
        let queued = rx.for_each(|(item, _)| {
            if let StreamResponse::StatusUpdate(update) = &item {
                told = Some(update.status.state);
            }
            if !registry.queue(&task_id, &item) {
                stop.cancel();
            }
            futures::future::ready(())
        });
        let (ended, ()) = futures::join!(follow.run(Some(tx)), queued);
        let state = ended.state();
        // The follow stops at a new pause (follow on), at the end, or when the events
        // stopped (the run ended, or the server closes).
        if !state.is_interrupted() || run.is_ended() {
            break;
        }
    }
    // The fold can say the task ended a moment before the hub records the run's end.
    let ended = run.is_ended() || told.is_some_and(TaskState::is_terminal);
    registry.unfollow(&task_id, number, ended);
}
