//! [`WorkQueue`]: work items claimed by workers, by priority, with leases and retries.
//!
//! An item is **queued**, then **claimed** by one worker for a lease, **running** once the
//! worker starts it, and **done** or, after its last attempt, **failed**. A claim whose
//! lease runs out (a worker that died) returns the item to the queue, or fails it when it
//! has no attempt left; the late worker's calls are then refused.
//!
//! In memory by default; [`WorkQueue::with_snapshot_file`] keeps the whole queue in a JSON
//! file rewritten (atomically) after every change, so it survives a restart of the
//! process: claims held when it stopped stay held until their lease lapses (leases are
//! wall-clock times), then go back to the queue. One process should own the file at a
//! time (there is no locking between processes). A queue that many processes (or, on
//! PostgreSQL, machines) share, and that survives any crash, is a
//! [`DurableWorkQueue`](super::DurableWorkQueue) in the store.

use super::work_item::{Clock, ItemState, NewWorkItem, QueueError, QueueStats, WorkItem};
use crate::bus::lock;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    next_seq: u64,
    items: Vec<WorkItem>,
}

/// Work for a team's workers; cheap to clone, and clones share the queue.
///
/// ```
/// use serde_json::json;
/// use std::time::Duration;
/// use troupe_team::coordination::{NewWorkItem, WorkQueue};
///
/// # fn main() -> Result<(), troupe_team::coordination::QueueError> {
/// let queue = WorkQueue::new();
/// queue.enqueue(NewWorkItem::new(json!({"file": "a.rs"})).tag("rust"))?;
/// queue.enqueue(NewWorkItem::new(json!({"file": "urgent.rs"})).tag("rust").priority(10))?;
/// let item = queue.claim("worker-1", Duration::from_secs(60), |i| i.has_tag("rust"))?.expect("work");
/// assert_eq!(item.payload["file"], "urgent.rs");
/// queue.start(&item.id, "worker-1")?;
/// queue.complete(&item.id, "worker-1", json!("fixed"))?;
/// assert_eq!((queue.stats().done, queue.stats().queued), (1, 1));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct WorkQueue {
    state: Arc<Mutex<State>>,
    clock: Clock,
    snapshot: Option<Arc<PathBuf>>,
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").field("stats", &self.stats()).field("snapshot", &self.snapshot).finish()
    }
}

impl Default for WorkQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkQueue {
    /// An empty queue in memory.
    pub fn new() -> Self {
        WorkQueue { state: Arc::default(), clock: Arc::new(troupe_core::now_ms), snapshot: None }
    }

    /// A queue kept in `path`: loaded from it when it exists, rewritten after every change
    /// (to a temporary file, then renamed over it).
    pub fn with_snapshot_file(path: impl Into<PathBuf>) -> Result<Self, QueueError> {
        let path = path.into();
        let state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<State>(&bytes)
                .map_err(|e| QueueError::Snapshot { path: path.clone(), message: e.to_string() })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(QueueError::Snapshot { path, message: e.to_string() }),
        };
        Ok(WorkQueue {
            state: Arc::new(Mutex::new(state)),
            clock: Arc::new(troupe_core::now_ms),
            snapshot: Some(Arc::new(path)),
        })
    }

    /// The same queue telling the time with `clock`.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The snapshot file, if the queue has one.
    pub fn snapshot_file(&self) -> Option<&Path> {
        self.snapshot.as_deref().map(PathBuf::as_path)
    }

    /// Runs `change` on the state, then saves it (when there is a snapshot file).
    fn change<T>(&self, change: impl FnOnce(&mut State, u64) -> Result<T, QueueError>) -> Result<T, QueueError> {
        let now = (self.clock)();
        let mut state = lock(&self.state);
        expire(&mut state, now);
        let out = change(&mut state, now)?;
        self.save(&state)?;
        Ok(out)
    }

    fn save(&self, state: &State) -> Result<(), QueueError> {
        let Some(path) = &self.snapshot else { return Ok(()) };
        let failed =
            |e: &dyn std::fmt::Display| QueueError::Snapshot { path: path.to_path_buf(), message: e.to_string() };
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| failed(&e))?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, bytes).map_err(|e| failed(&e))?;
        std::fs::rename(&tmp, path.as_path()).map_err(|e| failed(&e))
    }

    /// Enqueues `item`; returns its id.
    pub fn enqueue(&self, item: impl Into<NewWorkItem>) -> Result<String, QueueError> {
        let item = item.into();
        self.change(|state, now| {
            state.next_seq += 1;
            let seq = state.next_seq;
            let id = item.id.unwrap_or_else(|| format!("item-{seq}"));
            if state.items.iter().any(|i| i.id == id) {
                return Err(QueueError::Duplicate(id));
            }
            state.items.push(WorkItem {
                available_at: item.available_at.unwrap_or(now),
                id: id.clone(),
                priority: item.priority,
                payload: item.payload,
                tags: item.tags,
                attempts: 0,
                max_attempts: item.max_attempts.max(1),
                state: ItemState::Queued,
                last_error: None,
                result: None,
                enqueued_at: now,
                seq,
            });
            Ok(id)
        })
    }

    /// Claims for `worker`, for `lease`, the queued, available item of highest priority
    /// (the oldest among equals) that `filter` accepts; counts an attempt.
    pub fn claim(
        &self,
        worker: &str,
        lease: Duration,
        filter: impl Fn(&WorkItem) -> bool,
    ) -> Result<Option<WorkItem>, QueueError> {
        self.change(|state, now| {
            let best = state
                .items
                .iter_mut()
                .filter(|i| i.state == ItemState::Queued && i.available_at <= now && filter(i))
                .max_by(|a, b| a.priority.cmp(&b.priority).then(b.seq.cmp(&a.seq)));
            Ok(best.map(|item| {
                item.attempts += 1;
                item.state = ItemState::Claimed { by: worker.to_owned(), lease_until: now + millis(lease) };
                item.clone()
            }))
        })
    }

    /// `worker` starts the item it claimed.
    pub fn start(&self, id: &str, worker: &str) -> Result<WorkItem, QueueError> {
        self.change(|state, _| {
            let item = held(state, id, worker, "start", "claimed")?;
            let ItemState::Claimed { lease_until, .. } = item.state else {
                return Err(wrong(item, "start", "claimed"));
            };
            item.state = ItemState::Running { by: worker.to_owned(), lease_until };
            Ok(item.clone())
        })
    }

    /// `worker` renews its claim on `id` for `lease` from now.
    pub fn heartbeat(&self, id: &str, worker: &str, lease: Duration) -> Result<(), QueueError> {
        self.change(|state, now| {
            let item = held(state, id, worker, "heartbeat", "claimed or running")?;
            let until = now + millis(lease);
            match &mut item.state {
                ItemState::Claimed { lease_until, .. } | ItemState::Running { lease_until, .. } => *lease_until = until,
                _ => {}
            }
            Ok(())
        })
    }

    /// `worker` finished `id` with `result`.
    pub fn complete(&self, id: &str, worker: &str, result: Value) -> Result<(), QueueError> {
        self.change(|state, _| {
            let item = held(state, id, worker, "complete", "claimed or running")?;
            item.state = ItemState::Done;
            item.result = Some(result);
            item.last_error = None;
            Ok(())
        })
    }

    /// `worker` failed `id`: it is queued again while it has attempts left, and fails for
    /// good otherwise. Returns its new state.
    pub fn fail(&self, id: &str, worker: &str, error: impl Into<String>) -> Result<ItemState, QueueError> {
        let error = error.into();
        self.change(|state, _| {
            let item = held(state, id, worker, "fail", "claimed or running")?;
            item.last_error = Some(error);
            item.state = if item.attempts >= item.max_attempts { ItemState::Failed } else { ItemState::Queued };
            Ok(item.state.clone())
        })
    }

    /// Returns lapsed claims to the queue (or fails their items when they have no attempt
    /// left); returns how many lapsed. Claims and every other change do this first anyway.
    pub fn expire_leases(&self) -> Result<usize, QueueError> {
        let now = (self.clock)();
        let mut state = lock(&self.state);
        let lapsed = expire(&mut state, now);
        if lapsed > 0 {
            self.save(&state)?;
        }
        Ok(lapsed)
    }

    /// The item `id`.
    pub fn get(&self, id: &str) -> Option<WorkItem> {
        lock(&self.state).items.iter().find(|i| i.id == id).cloned()
    }

    /// Every item, in enqueue order.
    pub fn items(&self) -> Vec<WorkItem> {
        lock(&self.state).items.clone()
    }

    /// Removes done and failed items; returns how many.
    pub fn purge_finished(&self) -> Result<usize, QueueError> {
        self.change(|state, _| {
            let before = state.items.len();
            state.items.retain(|i| !matches!(i.state, ItemState::Done | ItemState::Failed));
            Ok(before - state.items.len())
        })
    }

    /// How many items stand where, lapsed claims counted as queued (or failed).
    pub fn stats(&self) -> QueueStats {
        let now = (self.clock)();
        let mut state = lock(&self.state);
        if expire(&mut state, now) > 0
            && let Err(error) = self.save(&state)
        {
            // The next change saves the whole queue again.
            tracing::warn!(%error, "could not save the work queue");
        }
        let mut stats = QueueStats::default();
        for item in &state.items {
            match item.state {
                ItemState::Queued => stats.queued += 1,
                ItemState::Claimed { .. } => stats.claimed += 1,
                ItemState::Running { .. } => stats.running += 1,
                ItemState::Done => stats.done += 1,
                ItemState::Failed => stats.failed += 1,
            }
        }
        stats
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Lapses the claims whose lease ended at `now`; returns how many.
fn expire(state: &mut State, now: u64) -> usize {
    let mut lapsed = 0;
    for item in &mut state.items {
        let Some((by, lease_until)) = item.state.holder() else { continue };
        if lease_until > now {
            continue;
        }
        lapsed += 1;
        tracing::info!(item = %item.id, worker = by, "work item lease lapsed");
        item.last_error = Some(format!("the lease of `{by}` lapsed"));
        item.state = if item.attempts >= item.max_attempts { ItemState::Failed } else { ItemState::Queued };
    }
    lapsed
}

/// The item `id` held by `worker`.
fn held<'a>(
    state: &'a mut State,
    id: &str,
    worker: &str,
    operation: &'static str,
    expected: &'static str,
) -> Result<&'a mut WorkItem, QueueError> {
    let item = state.items.iter_mut().find(|i| i.id == id).ok_or_else(|| QueueError::UnknownItem(id.to_owned()))?;
    match item.state.holder() {
        Some((by, _)) if by == worker => Ok(item),
        Some(_) => Err(QueueError::NotHolder { id: id.to_owned(), worker: worker.to_owned() }),
        // A lapsed claim went back to the queue: its former holder is told so.
        None if item.state == ItemState::Queued => {
            Err(QueueError::NotHolder { id: id.to_owned(), worker: worker.to_owned() })
        }
        None => Err(wrong(item, operation, expected)),
    }
}

fn wrong(item: &WorkItem, operation: &'static str, expected: &'static str) -> QueueError {
    QueueError::WrongState { id: item.id.clone(), state: item.state.name(), operation, expected }
}
