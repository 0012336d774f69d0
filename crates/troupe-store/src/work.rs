//! Team work items: what a queue of work holds, and why an operation on an item is refused.
//!
//! An item is **queued**, then **claimed** by one worker under a lease, **running** once the
//! worker starts it, and **done** or, after its last attempt, **failed**. Every claim counts
//! an attempt. A lease is held while `now < lease_expires_at`; from its expiry on it is lost
//! to its holder, and the next claim (or [`expire_work_leases`]) puts the item back in the
//! queue, or fails it when it has no attempt left.
//!
//! [`expire_work_leases`]: crate::WorkItemRepository::expire_work_leases

// The backends share these helpers; a build with neither backend has no use for them.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

use crate::error::StoreError;
use crate::record::Millis;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Where a work item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Waiting for a worker.
    Queued,
    /// Held by a worker that has not started it.
    Claimed,
    /// Being worked on by its holder.
    Running,
    /// Finished.
    Done,
    /// Failed on its last attempt.
    Failed,
}

impl WorkState {
    /// Every state, in declaration order.
    pub const ALL: [WorkState; 5] =
        [WorkState::Queued, WorkState::Claimed, WorkState::Running, WorkState::Done, WorkState::Failed];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Queued => "queued",
            WorkState::Claimed => "claimed",
            WorkState::Running => "running",
            WorkState::Done => "done",
            WorkState::Failed => "failed",
        }
    }

    /// The state named `name`, as [`as_str`](Self::as_str) writes it.
    pub fn parse(name: &str) -> Option<WorkState> {
        WorkState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether a worker holds the item (claimed or running).
    pub fn is_held(self) -> bool {
        matches!(self, WorkState::Claimed | WorkState::Running)
    }

    /// Whether the item is finished for good (done or failed).
    pub fn is_finished(self) -> bool {
        matches!(self, WorkState::Done | WorkState::Failed)
    }
}

impl fmt::Display for WorkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A work item to enqueue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewWork {
    /// The queue it joins (a team's name, say): queues share a store but not their items.
    pub queue: String,
    /// Its id, unique within the queue.
    pub id: String,
    /// What to do.
    pub payload: Value,
    /// Higher goes first.
    pub priority: i64,
    /// Labels workers claim by.
    pub tags: Vec<String>,
    /// Claims it gets before it fails for good (0 is taken as 1).
    pub max_attempts: u32,
    /// From when a worker may claim it.
    pub available_at: Millis,
}

/// A stored work item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkRecord {
    /// Its queue.
    pub queue: String,
    /// Its id within the queue.
    pub id: String,
    /// Its place in enqueue order across the store (first in, first out among equal
    /// priorities).
    pub seq: i64,
    /// What to do.
    pub payload: Value,
    /// Higher goes first.
    pub priority: i64,
    /// Labels workers claim by.
    pub tags: Vec<String>,
    /// Where it stands.
    pub state: WorkState,
    /// Claims so far.
    pub attempts: u32,
    /// Claims it gets before it fails for good.
    pub max_attempts: u32,
    /// The worker holding it (claimed or running), or the last one that did (done or
    /// failed); `None` while queued.
    pub worker: Option<String>,
    /// When the holder's lease lapses, while it is claimed or running.
    pub lease_expires_at: Option<Millis>,
    /// From when a worker may claim it.
    pub available_at: Millis,
    /// Why its last attempt failed (or that its lease lapsed).
    pub last_error: Option<String>,
    /// What the worker that completed it gave back.
    pub result: Option<Value>,
    /// When it was enqueued.
    pub enqueued_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
}

/// How many items of a queue stand where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkStats {
    /// Waiting.
    pub queued: u64,
    /// Claimed, not started.
    pub claimed: u64,
    /// Being worked on.
    pub running: u64,
    /// Finished.
    pub done: u64,
    /// Failed for good.
    pub failed: u64,
}

impl WorkStats {
    /// Adds `count` items in `state`.
    pub fn add(&mut self, state: WorkState, count: u64) {
        let slot = match state {
            WorkState::Queued => &mut self.queued,
            WorkState::Claimed => &mut self.claimed,
            WorkState::Running => &mut self.running,
            WorkState::Done => &mut self.done,
            WorkState::Failed => &mut self.failed,
        };
        *slot += count;
    }

    /// Every item counted.
    pub fn total(&self) -> u64 {
        self.queued + self.claimed + self.running + self.done + self.failed
    }
}

/// The state stored as `name`, or a [`StoreError::Decode`].
pub(crate) fn stored_state(name: &str) -> Result<WorkState, StoreError> {
    WorkState::parse(name).ok_or_else(|| StoreError::decode("work item state", format!("unknown state `{name}`")))
}

/// An operation a worker makes on an item it holds, and the states it needs the item in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HolderOp {
    Start,
    Heartbeat,
    Complete,
    Fail,
}

impl HolderOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            HolderOp::Start => "start",
            HolderOp::Heartbeat => "heartbeat",
            HolderOp::Complete => "complete",
            HolderOp::Fail => "fail",
        }
    }

    fn expected(self) -> &'static str {
        match self {
            HolderOp::Start => "claimed",
            _ => "claimed or running",
        }
    }
}

/// Why `worker`'s `op` on the item found as `found` (read after the operation matched no
/// row) was refused.
pub(crate) fn refusal(
    queue: &str,
    id: &str,
    worker: &str,
    op: HolderOp,
    found: Option<&WorkRecord>,
    now: Millis,
) -> StoreError {
    let lost = || StoreError::WorkLeaseLost { queue: queue.to_owned(), id: id.to_owned(), worker: worker.to_owned() };
    let Some(item) = found else {
        return StoreError::UnknownWorkItem { queue: queue.to_owned(), id: id.to_owned() };
    };
    let is_holder = item.worker.as_deref() == Some(worker);
    let lease_live = item.lease_expires_at.is_some_and(|until| now < until);
    match item.state {
        // Held by someone else, or by this worker past its lease.
        state if state.is_held() && !(is_holder && lease_live) => lost(),
        // A lapsed lease already went back to the queue.
        WorkState::Queued => lost(),
        // Finished by another worker after this one's lease lapsed.
        state if state.is_finished() && !is_holder => lost(),
        state => StoreError::WrongWorkState {
            queue: queue.to_owned(),
            id: id.to_owned(),
            state,
            operation: op.name(),
            expected: op.expected(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(state: WorkState, worker: Option<&str>, lease: Option<Millis>) -> WorkRecord {
        WorkRecord {
            queue: "q".into(),
            id: "a".into(),
            seq: 1,
            payload: Value::Null,
            priority: 0,
            tags: Vec::new(),
            state,
            attempts: 1,
            max_attempts: 3,
            worker: worker.map(str::to_owned),
            lease_expires_at: lease,
            available_at: 0,
            last_error: None,
            result: None,
            enqueued_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn refusals_name_what_went_wrong() {
        let lost = |e: StoreError| matches!(e, StoreError::WorkLeaseLost { .. });
        let wrong = |e: StoreError| matches!(e, StoreError::WrongWorkState { .. });
        let op = HolderOp::Complete;
        assert!(matches!(refusal("q", "a", "w", op, None, 10), StoreError::UnknownWorkItem { .. }));
        assert!(lost(refusal("q", "a", "w", op, Some(&item(WorkState::Claimed, Some("v"), Some(20))), 10)));
        assert!(lost(refusal("q", "a", "w", op, Some(&item(WorkState::Running, Some("w"), Some(10))), 10)));
        assert!(lost(refusal("q", "a", "w", op, Some(&item(WorkState::Queued, None, None)), 10)));
        assert!(lost(refusal("q", "a", "w", op, Some(&item(WorkState::Done, Some("v"), None)), 10)));
        assert!(wrong(refusal("q", "a", "w", op, Some(&item(WorkState::Done, Some("w"), None)), 10)));
        let start = refusal("q", "a", "w", HolderOp::Start, Some(&item(WorkState::Running, Some("w"), Some(20))), 10);
        assert_eq!(start.to_string(), "work item `a` of queue `q` is running; start needs it claimed");
        assert!(WorkState::ALL.iter().all(|s| WorkState::parse(s.as_str()) == Some(*s)));
    }
}
