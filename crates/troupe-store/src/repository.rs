//! The repositories every backend implements, one trait per kind of record, and
//! [`Store`], all of them together.
//!
//! Methods return boxed `Send` futures so a store can be shared as `Arc<dyn Store>`
//! across spawned tasks. Every method is one transaction: it happens entirely or not at
//! all. Timestamps (`now`) are passed in by the caller, so a test can move time, and
//! every worker sharing a store is expected to keep its clock in sync (NTP): leases
//! compare the caller's clock with the stored expiry.

use crate::error::StoreError;
use crate::record::{
    Checkpoint, ConversationTurn, EvidenceEntry, Firing, Lease, MemoryRecord, Millis, NewRun, QueueEntry, RunFilter,
    RunRecord, RunSummary, SavedCheckpoint, Schedule, SpendSums, StoreInfo, StoredSignal, Transition,
};
use crate::work::{NewWork, WorkRecord, WorkState, WorkStats};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The future every store method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Runs: their status, transitions, current activity, input and last checkpoint.
pub trait RunRepository: Send + Sync {
    /// Creates `run` (recording its first transition); a [`Queued`](crate::RunStatus::Queued)
    /// run is enqueued in the same transaction. [`StoreError::RunExists`] if the id is taken.
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()>;

    /// The run `run_id`, if stored.
    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>>;

    /// The runs `filter` selects, newest (by creation) first.
    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>>;

    /// The runs `filter` selects, newest (by creation) first, as their records, for a list
    /// or a sum over many runs: a record's state may lack the conversation kept apart from
    /// it (its `messages` empty); [`load_run`](Self::load_run) reads a run whole.
    ///
    /// By default [`list_runs`](Self::list_runs), then each run loaded; the SQL stores read
    /// them in one statement.
    fn list_run_records<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move {
            let mut records = Vec::new();
            for summary in self.list_runs(filter).await? {
                // A run deleted in between is not listed.
                if let Some(record) = self.load_run(&summary.id).await? {
                    records.push(record);
                }
            }
            Ok(records)
        })
    }

    /// Saves a boundary atomically: state, status (a change is recorded as a transition),
    /// activity, the checkpoint's evidence and the signals it consumed. With a fence, only
    /// while the fence's lease is held ([`StoreError::LeaseLost`] otherwise). Says which
    /// signal was the run's latest when it committed.
    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint>;

    /// The run's status changes, oldest first.
    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>>;

    /// What the runs created at `since` or later spent, child runs included: those that
    /// keep their [`RunSpend`](crate::RunSpend) summed by agent, model, day and rollup,
    /// the others named for their records to be read.
    ///
    /// By default every run of the window is named: a store that keeps no spend sums none.
    /// The SQL stores sum in one statement.
    fn spend_since(&self, since: Millis) -> StoreFuture<'_, SpendSums> {
        Box::pin(async move {
            let window = RunFilter { created_since: Some(since), ..RunFilter::default() };
            let unsummed = self.list_runs(&window).await?.into_iter().map(|run| run.id).collect();
            Ok(SpendSums { groups: Vec::new(), unsummed })
        })
    }
}

/// Signals: an inbound queue per run, applied in append order, each exactly once.
pub trait SignalRepository: Send + Sync {
    /// Stores a signal for `run_id` and returns its sequence number: once this returns,
    /// the signal is acknowledged and will be applied. [`StoreError::UnknownRun`] if no such
    /// run exists.
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64>;

    /// The run's signals with a sequence number above `after` that no checkpoint has
    /// consumed, in order.
    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>>;

    /// All of the run's signals, consumed or not, in order.
    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>>;
}

/// Evidence: the append-only log of what each run did. Entries are never updated or
/// deleted (the schema refuses it); corrections are new entries.
pub trait EvidenceRepository: Send + Sync {
    /// Appends entries sealed by the run's [`EvidenceChain`](crate::EvidenceChain).
    /// [`StoreError::EvidenceConflict`] if a sequence number is taken; with a fence, only
    /// while its lease is held.
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()>;

    /// The run's entries with a sequence number above `after`, in order.
    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>>;

    /// The run's newest entry, to continue its chain.
    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>>;
}

/// Conversations: the turns of each conversation id, across runs.
pub trait ConversationRepository: Send + Sync {
    /// Appends `turns` (role and message) by `run_id` to the conversation, in order.
    fn append_turns<'a>(
        &'a self,
        conversation_id: &'a str,
        run_id: &'a str,
        turns: Vec<(String, Value)>,
        now: Millis,
    ) -> StoreFuture<'a, ()>;

    /// The conversation's turns, oldest first (empty for an unknown id).
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>>;
}

/// The run queue: runs waiting for a worker, and leases on the runs being worked on.
pub trait QueueRepository: Send + Sync {
    /// Puts the run in the queue, available from `available_at` (moving it if it is queued
    /// and not leased; a leased run stays with its holder).
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()>;

    /// Claims the queued run available longest, whose lease is free or lapsed, for
    /// `owner` until `now + ttl`. Concurrent claimers never get the same run.
    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>>;

    /// Claims the run `run_id` (queued or not) for `owner`, unless someone else holds an
    /// unlapsed lease on it; `None` then. Every claim, a re-claim by the same owner
    /// included, raises the lease's epoch.
    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>>;

    /// Renews `lease` until `now + ttl`; `None` if it was taken over or released. A lease
    /// that lapsed but that nobody took over is still the holder's: it is renewed (and
    /// fences still accept it).
    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>>;

    /// Gives up `lease`: the run leaves the queue, or with `requeue_at` waits in it for the
    /// next worker. Releasing a lease no longer held changes nothing.
    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()>;

    /// The queue's entries, by availability.
    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>>;
}

/// Schedules: runs started, or waiting runs woken, on a cron expression or an interval.
pub trait ScheduleRepository: Send + Sync {
    /// Creates or replaces the schedule with this id.
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()>;

    /// Every schedule, by id.
    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>>;

    /// Removes a schedule; whether it existed.
    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;

    /// The enabled schedules whose next tick is at or before `now`.
    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>>;

    /// Fires the tick `expected` of schedule `id` exactly once: moves its next tick to
    /// `next` and carries out `firing` in the same transaction, only if the schedule's
    /// next tick is still `expected`. Returns whether this call fired it (another worker
    /// may have).
    fn fire_schedule<'a>(
        &'a self,
        id: &'a str,
        expected: Millis,
        next: Millis,
        firing: Firing,
        now: Millis,
    ) -> StoreFuture<'a, bool>;
}

/// Memories: what agents chose to remember, by namespace.
pub trait MemoryRepository: Send + Sync {
    /// Saves `content` in `namespace`; returns its id.
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64>;

    /// The memories of `namespace` holding every word of `query` (case-insensitive; an
    /// empty query matches all), newest first, at most `limit` (0 for no limit).
    fn search_memory<'a>(
        &'a self,
        namespace: &'a str,
        query: &'a str,
        limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>>;
}

/// Team work queues: items claimed by priority and tags, under leases, retried up to their
/// attempts. Queues are named; one store holds many, and each operation names its queue.
///
/// Every operation by a worker on an item it holds (start, heartbeat, complete, fail)
/// needs a live lease (`now` before its expiry): otherwise [`StoreError::WorkLeaseLost`],
/// and nothing changes. See [`WorkState`] for the life of an item.
pub trait WorkItemRepository: Send + Sync {
    /// Enqueues `item`, queued from its `available_at`; the stored item.
    /// [`StoreError::WorkItemExists`] if its queue has an item of that id (in any state).
    fn enqueue_work<'a>(&'a self, item: &'a NewWork, now: Millis) -> StoreFuture<'a, WorkRecord>;

    /// Claims for `worker`, until `now + ttl`, the queued item of `queue` available at
    /// `now` with the highest priority (the first enqueued among equals) carrying at least
    /// one of `tags` (any item when `tags` is empty), counting an attempt. Lapsed leases of
    /// the queue are expired first, as [`expire_work_leases`](Self::expire_work_leases)
    /// does. Concurrent claimers, in this process or others, never get the same item.
    fn claim_work<'a>(
        &'a self,
        queue: &'a str,
        worker: &'a str,
        tags: &'a [String],
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<WorkRecord>>;

    /// `worker` starts the item it claimed ([`StoreError::WrongWorkState`] unless it is
    /// claimed).
    fn start_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord>;

    /// `worker` renews its lease on the item until `now + ttl`.
    fn heartbeat_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord>;

    /// `worker` finished the item with `result`: it is done.
    fn complete_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        result: &'a Value,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord>;

    /// `worker` failed the item with `error`: it is queued again while it has attempts left,
    /// failed for good otherwise.
    fn fail_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        error: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord>;

    /// Returns the items of `queue` whose lease lapsed at `now` to the queue, or fails those
    /// with no attempt left, noting the lapse as their last error; how many lapsed.
    fn expire_work_leases<'a>(&'a self, queue: &'a str, now: Millis) -> StoreFuture<'a, u64>;

    /// The item `id` of `queue`, if stored.
    fn work_item<'a>(&'a self, queue: &'a str, id: &'a str) -> StoreFuture<'a, Option<WorkRecord>>;

    /// The items of `queue` (only those in `state`, when given), in enqueue order.
    fn work_items<'a>(&'a self, queue: &'a str, state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>>;

    /// How many items of `queue` stand where, as stored (a lapsed lease counts as held until
    /// it is expired).
    fn work_stats<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, WorkStats>;

    /// Removes the done and failed items of `queue`; how many.
    fn purge_finished_work<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, u64>;
}

/// A whole store: every repository, on one database.
pub trait Store:
    RunRepository
    + SignalRepository
    + EvidenceRepository
    + ConversationRepository
    + QueueRepository
    + ScheduleRepository
    + MemoryRepository
    + WorkItemRepository
{
    /// What the store is and where.
    fn info(&self) -> StoreInfo;

    /// Closes the store's connections, waiting for statements in flight.
    fn close(&self) -> StoreFuture<'_, ()>;

    /// Creates `run` and takes its lease for `owner` (see [`QueueRepository::acquire`]):
    /// a run started in this process costs one transaction, not two. The backends do it
    /// in one; this default does it in two.
    fn create_leased_run<'a>(
        &'a self,
        run: NewRun,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Lease> {
        Box::pin(async move {
            let run_id = run.id.clone();
            self.create_run(run, now).await?;
            self.acquire(&run_id, owner, ttl, now)
                .await?
                .ok_or_else(|| StoreError::LeaseLost { run_id, owner: owner.to_owned() })
        })
    }
}
