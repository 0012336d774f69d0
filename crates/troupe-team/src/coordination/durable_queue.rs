//! [`DurableWorkQueue`]: the work queue kept in the troupe store.
//!
//! The same items, states, retries and leases as the in-memory
//! [`WorkQueue`](super::WorkQueue), but every change is a transaction of the store: work
//! survives a crash of any process, and every process opening the store (on PostgreSQL,
//! every machine) shares the queue, each item going to one claimer. A lease lapses at its
//! expiry; the next claim (or [`DurableWorkQueue::expire_leases`]) then puts the item back
//! in the queue, or fails it when it has no attempt left, and the late worker's calls are
//! refused with [`QueueError::NotHolder`].
//!
//! It is asynchronous where the in-memory queue is not, and claims by tags rather than by
//! a closure: the choice of an item is made inside the database, atomically, where no Rust
//! closure can run.

use super::work_item::{Clock, ItemState, NewWorkItem, QueueError, QueueStats, WorkItem};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use troupe_store::{Millis, NewWork, Store, WorkRecord, WorkState};

/// A named work queue in a store; cheap to clone, and clones share the queue (as does every
/// `DurableWorkQueue` of the same name on the same database).
///
/// ```
/// use serde_json::json;
/// use std::time::Duration;
/// use troupe_team::coordination::{DurableWorkQueue, NewWorkItem};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let store = troupe_store::open(dir.path().join("troupe.db").to_str().ok_or("path")?).await?;
/// let queue = DurableWorkQueue::new(store, "reviews");
/// queue.enqueue(NewWorkItem::new(json!({"file": "a.rs"})).tag("rust")).await?;
/// queue.enqueue(NewWorkItem::new(json!({"file": "urgent.rs"})).tag("rust").priority(10)).await?;
/// let item = queue.claim("worker-1", Duration::from_secs(60), &["rust"]).await?.ok_or("work")?;
/// assert_eq!(item.payload["file"], "urgent.rs");
/// queue.start(&item.id, "worker-1").await?;
/// queue.complete(&item.id, "worker-1", json!("fixed")).await?;
/// let stats = queue.stats().await?;
/// assert_eq!((stats.done, stats.queued), (1, 1));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DurableWorkQueue {
    store: Arc<dyn Store>,
    name: Arc<str>,
    clock: Clock,
}

impl std::fmt::Debug for DurableWorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The store's location is redacted: it never shows a password.
        f.debug_struct("DurableWorkQueue").field("name", &self.name).field("store", &self.store.info()).finish()
    }
}

impl DurableWorkQueue {
    /// The queue `name` in `store` (a team's name, say): queues of other names in the same
    /// store keep their items apart.
    pub fn new(store: Arc<dyn Store>, name: impl Into<String>) -> Self {
        DurableWorkQueue { store, name: Arc::from(name.into()), clock: Arc::new(troupe_core::now_ms) }
    }

    /// The same queue telling the time with `clock`. Leases are compared with the clock of
    /// whichever process acts, so processes sharing a queue keep their clocks in sync.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store the queue lives in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn now(&self) -> Millis {
        to_millis((self.clock)())
    }

    /// Enqueues `item`; returns its id (a fresh `item-<uuid>` unless it has one).
    /// [`QueueError::Duplicate`] if the queue has an item of that id, in any state.
    pub async fn enqueue(&self, item: impl Into<NewWorkItem>) -> Result<String, QueueError> {
        let item = item.into();
        let now = self.now();
        let id = item.id.unwrap_or_else(|| format!("item-{}", uuid::Uuid::now_v7().simple()));
        let work = NewWork {
            queue: self.name.to_string(),
            id,
            payload: item.payload,
            priority: item.priority,
            tags: item.tags,
            max_attempts: item.max_attempts.max(1),
            available_at: item.available_at.map_or(now, to_millis),
        };
        let stored = self.store.enqueue_work(&work, now).await?;
        Ok(stored.id)
    }

    /// Claims for `worker`, for `lease`, the queued, available item of highest priority (the
    /// first enqueued among equals) carrying at least one of `tags` (any item when `tags` is
    /// empty); counts an attempt. Concurrent claimers never get the same item.
    pub async fn claim(&self, worker: &str, lease: Duration, tags: &[&str]) -> Result<Option<WorkItem>, QueueError> {
        let tags: Vec<String> = tags.iter().map(|tag| (*tag).to_owned()).collect();
        let claimed = self.store.claim_work(&self.name, worker, &tags, lease, self.now()).await?;
        claimed.map(work_item).transpose()
    }

    /// `worker` starts the item it claimed.
    pub async fn start(&self, id: &str, worker: &str) -> Result<WorkItem, QueueError> {
        work_item(self.store.start_work(&self.name, id, worker, self.now()).await?)
    }

    /// `worker` renews its claim on `id` for `lease` from now.
    pub async fn heartbeat(&self, id: &str, worker: &str, lease: Duration) -> Result<(), QueueError> {
        self.store.heartbeat_work(&self.name, id, worker, lease, self.now()).await?;
        Ok(())
    }

    /// `worker` finished `id` with `result`.
    pub async fn complete(&self, id: &str, worker: &str, result: Value) -> Result<(), QueueError> {
        self.store.complete_work(&self.name, id, worker, &result, self.now()).await?;
        Ok(())
    }

    /// `worker` failed `id`: it is queued again while it has attempts left, and fails for
    /// good otherwise. Returns its new state.
    pub async fn fail(&self, id: &str, worker: &str, error: impl Into<String>) -> Result<ItemState, QueueError> {
        let error = error.into();
        let record = self.store.fail_work(&self.name, id, worker, &error, self.now()).await?;
        Ok(work_item(record)?.state)
    }

    /// Returns lapsed claims to the queue (or fails their items when they have no attempt
    /// left); returns how many lapsed. Claims do this first anyway.
    pub async fn expire_leases(&self) -> Result<usize, QueueError> {
        let lapsed = self.store.expire_work_leases(&self.name, self.now()).await?;
        Ok(usize::try_from(lapsed).unwrap_or(usize::MAX))
    }

    /// The item `id`, as stored.
    pub async fn get(&self, id: &str) -> Result<Option<WorkItem>, QueueError> {
        self.store.work_item(&self.name, id).await?.map(work_item).transpose()
    }

    /// Every item, in enqueue order, as stored.
    pub async fn items(&self) -> Result<Vec<WorkItem>, QueueError> {
        self.store.work_items(&self.name, None).await?.into_iter().map(work_item).collect()
    }

    /// Removes done and failed items; returns how many.
    pub async fn purge_finished(&self) -> Result<usize, QueueError> {
        let purged = self.store.purge_finished_work(&self.name).await?;
        Ok(usize::try_from(purged).unwrap_or(usize::MAX))
    }

    /// How many items stand where, lapsed claims counted as queued (or failed): they are
    /// expired first.
    pub async fn stats(&self) -> Result<QueueStats, QueueError> {
        self.expire_leases().await?;
        let stats = self.store.work_stats(&self.name).await?;
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Ok(QueueStats {
            queued: count(stats.queued),
            claimed: count(stats.claimed),
            running: count(stats.running),
            done: count(stats.done),
            failed: count(stats.failed),
        })
    }
}

fn to_millis(ms: u64) -> Millis {
    Millis::try_from(ms).unwrap_or(Millis::MAX)
}

fn from_millis(ms: Millis) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

/// A stored item as the queues show it.
fn work_item(record: WorkRecord) -> Result<WorkItem, QueueError> {
    let held = |record: &WorkRecord| match (&record.worker, record.lease_expires_at) {
        (Some(by), Some(until)) => Ok((by.clone(), from_millis(until))),
        _ => Err(QueueError::Store(troupe_store::StoreError::decode(
            format!("work item `{}` of queue `{}`", record.id, record.queue),
            format!("it is {} but has no worker or lease", record.state),
        ))),
    };
    let state = match record.state {
        WorkState::Queued => ItemState::Queued,
        WorkState::Claimed => {
            let (by, lease_until) = held(&record)?;
            ItemState::Claimed { by, lease_until }
        }
        WorkState::Running => {
            let (by, lease_until) = held(&record)?;
            ItemState::Running { by, lease_until }
        }
        WorkState::Done => ItemState::Done,
        WorkState::Failed => ItemState::Failed,
    };
    Ok(WorkItem {
        id: record.id,
        priority: record.priority,
        payload: record.payload,
        tags: record.tags,
        attempts: record.attempts,
        max_attempts: record.max_attempts,
        state,
        last_error: record.last_error,
        result: record.result,
        enqueued_at: from_millis(record.enqueued_at),
        available_at: from_millis(record.available_at),
        seq: from_millis(record.seq),
    })
}
