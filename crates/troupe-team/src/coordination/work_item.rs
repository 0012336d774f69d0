//! What both work queues hand out and report: [`WorkItem`]s in an [`ItemState`],
//! [`NewWorkItem`]s to enqueue, [`QueueStats`] and [`QueueError`]. The in-memory
//! [`WorkQueue`](super::WorkQueue) and the store-backed
//! [`DurableWorkQueue`](super::DurableWorkQueue) share them, so code written against one
//! reads the other's items.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// Tells the time in milliseconds since the Unix epoch (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Attempts an item gets by default.
pub(super) const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Where an item stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ItemState {
    /// Waiting for a worker.
    Queued,
    /// Held by a worker that has not started it.
    Claimed {
        /// The worker.
        by: String,
        /// When the claim lapses, in ms since the epoch.
        lease_until: u64,
    },
    /// Being worked on.
    Running {
        /// The worker.
        by: String,
        /// When the claim lapses unless renewed (`heartbeat`).
        lease_until: u64,
    },
    /// Finished.
    Done,
    /// Failed on its last attempt.
    Failed,
}

impl ItemState {
    /// The state's name: `queued`, `claimed`, `running`, `done` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            ItemState::Queued => "queued",
            ItemState::Claimed { .. } => "claimed",
            ItemState::Running { .. } => "running",
            ItemState::Done => "done",
            ItemState::Failed => "failed",
        }
    }

    /// The worker holding the item and when its lease lapses, while claimed or running.
    pub fn holder(&self) -> Option<(&str, u64)> {
        match self {
            ItemState::Claimed { by, lease_until } | ItemState::Running { by, lease_until } => Some((by, *lease_until)),
            _ => None,
        }
    }
}

/// One piece of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    /// Its id (generated unless given).
    pub id: String,
    /// Higher goes first.
    pub priority: i64,
    /// What to do.
    pub payload: Value,
    /// Labels workers filter on (`rust`, `review`).
    pub tags: Vec<String>,
    /// Claims so far.
    pub attempts: u32,
    /// Claims it gets before it fails for good.
    pub max_attempts: u32,
    /// Where it stands.
    pub state: ItemState,
    /// Why its last attempt failed.
    pub last_error: Option<String>,
    /// What the worker that completed it gave back.
    pub result: Option<Value>,
    /// When it was enqueued, in ms since the epoch.
    pub enqueued_at: u64,
    /// From when a worker may claim it, in ms since the epoch (0: at once).
    #[serde(default)]
    pub available_at: u64,
    /// Its place in enqueue order (FIFO among equal priorities).
    pub seq: u64,
}

impl WorkItem {
    /// Whether the item carries `tag`.
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }

    /// Whether the item carries at least one of `tags` (always, when `tags` is empty): the
    /// filter of [`DurableWorkQueue::claim`](super::DurableWorkQueue::claim), for
    /// [`WorkQueue::claim`](super::WorkQueue::claim) too.
    pub fn has_any_tag(&self, tags: &[&str]) -> bool {
        tags.is_empty() || tags.iter().any(|tag| self.has_tag(tag))
    }
}

/// An item to enqueue.
#[derive(Clone, Debug, PartialEq)]
pub struct NewWorkItem {
    /// Its id; generated when `None`.
    pub id: Option<String>,
    /// Higher goes first (default 0).
    pub priority: i64,
    /// What to do.
    pub payload: Value,
    /// Labels.
    pub tags: Vec<String>,
    /// Claims it gets (default 3, at least 1).
    pub max_attempts: u32,
    /// From when a worker may claim it, in ms since the epoch; at once when `None`.
    pub available_at: Option<u64>,
}

impl NewWorkItem {
    /// An item of `payload` with priority 0 and 3 attempts, available at once.
    pub fn new(payload: Value) -> Self {
        NewWorkItem {
            id: None,
            priority: 0,
            payload,
            tags: Vec::new(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            available_at: None,
        }
    }

    /// Sets its id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets its priority.
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets how many claims it gets.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Keeps it from workers until `at`, in ms since the epoch.
    pub fn available_at(mut self, at: u64) -> Self {
        self.available_at = Some(at);
        self
    }
}

impl From<Value> for NewWorkItem {
    fn from(payload: Value) -> Self {
        NewWorkItem::new(payload)
    }
}

/// How many items stand where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Waiting.
    pub queued: usize,
    /// Claimed, not started.
    pub claimed: usize,
    /// Being worked on.
    pub running: usize,
    /// Finished.
    pub done: usize,
    /// Failed for good.
    pub failed: usize,
}

/// What went wrong with a queue operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// No item has this id.
    #[error("no work item `{0}`")]
    UnknownItem(String),
    /// An item with this id is queued already.
    #[error("a work item `{0}` exists already")]
    Duplicate(String),
    /// The worker does not hold the item (never did, or its lease lapsed).
    #[error("`{worker}` does not hold work item `{id}`")]
    NotHolder {
        /// The item.
        id: String,
        /// The worker.
        worker: String,
    },
    /// The item is not in a state that allows the operation.
    #[error("work item `{id}` is {state}; {operation} needs it {expected}")]
    WrongState {
        /// The item.
        id: String,
        /// Its state.
        state: &'static str,
        /// What was asked.
        operation: &'static str,
        /// The states that allow it.
        expected: &'static str,
    },
    /// The snapshot file could not be read or written.
    #[error("work queue snapshot `{path}`: {message}")]
    Snapshot {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The store behind a [`DurableWorkQueue`](super::DurableWorkQueue) failed (it cannot
    /// be reached, or holds a record it cannot read).
    #[error(transparent)]
    Store(troupe_store::StoreError),
}

impl From<troupe_store::StoreError> for QueueError {
    /// The store's refusals as the queue's own errors; anything else as [`QueueError::Store`].
    fn from(error: troupe_store::StoreError) -> Self {
        use troupe_store::StoreError;
        match error {
            StoreError::WorkItemExists { id, .. } => QueueError::Duplicate(id),
            StoreError::UnknownWorkItem { id, .. } => QueueError::UnknownItem(id),
            StoreError::WorkLeaseLost { id, worker, .. } => QueueError::NotHolder { id, worker },
            StoreError::WrongWorkState { id, state, operation, expected, .. } => {
                QueueError::WrongState { id, state: state.as_str(), operation, expected }
            }
            other => QueueError::Store(other),
        }
    }
}
