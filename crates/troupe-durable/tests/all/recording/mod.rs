//! [`RecordingStore`]: a store that notes, in order, every call a run makes on the store
//! it wraps, so a test can assert what a run writes, when, and how it is flushed.

#![allow(dead_code, unreachable_pub)]

use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use troupe_store::{
    Checkpoint, ConversationRepository, ConversationTurn, EvidenceEntry, EvidenceRepository, Firing, Flush, Lease,
    MemoryRecord, MemoryRepository, Millis, NewRun, NewWork, QueueEntry, QueueRepository, RunFilter, RunRecord,
    RunRepository, RunSummary, SavedCheckpoint, Schedule, ScheduleRepository, SignalRepository, Store, StoreFuture,
    StoreInfo, StoredSignal, Transition, WorkItemRepository, WorkRecord, WorkState, WorkStats,
};

/// What happened, in order: the store's calls, and whatever a test adds (a tool's effect);
/// and, apart, the messages each checkpoint wrote.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>, Arc<Mutex<Vec<(usize, usize)>>>);

impl Log {
    /// Adds `what`.
    pub fn push(&self, what: impl Into<String>) {
        self.0.lock().expect("the log").push(what.into());
    }

    /// Everything so far.
    pub fn entries(&self) -> Vec<String> {
        self.0.lock().expect("the log").clone()
    }

    /// The messages each checkpoint that wrote some wrote: from which position, how many.
    pub fn message_writes(&self) -> Vec<(usize, usize)> {
        self.1.lock().expect("the log").clone()
    }
}

/// Wraps a store; every call is noted in [`Log`] before it is passed on.
pub struct RecordingStore {
    inner: Arc<dyn Store>,
    log: Log,
}

impl RecordingStore {
    /// `inner`, noting into `log`.
    pub fn wrap(inner: Arc<dyn Store>, log: Log) -> Arc<dyn Store> {
        Arc::new(RecordingStore { inner, log })
    }
}

impl RunRepository for RecordingStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        self.log.push("create_run");
        self.inner.create_run(run, now)
    }
    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        self.log.push("load_run");
        self.inner.load_run(run_id)
    }
    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        self.log.push("list_runs");
        self.inner.list_runs(filter)
    }
    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        let flush = match checkpoint.flush {
            Flush::BeforeAnswer => "flushed",
            Flush::WithNextFlush => "deferred",
        };
        let end = if checkpoint.release { " release" } else { "" };
        self.log.push(format!("checkpoint {flush}{end}"));
        if let Some(write) = &checkpoint.messages {
            self.log.1.lock().expect("the log").push((write.from, write.messages.len()));
        }
        self.inner.checkpoint(checkpoint, now)
    }
    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        self.log.push("transitions");
        self.inner.transitions(run_id)
    }
}

impl SignalRepository for RecordingStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        self.log.push("send_signal");
        self.inner.send_signal(run_id, kind, payload, now)
    }
    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        self.log.push("pending_signals");
        self.inner.pending_signals(run_id, after)
    }
    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        self.log.push("signals");
        self.inner.signals(run_id)
    }
}

impl EvidenceRepository for RecordingStore {
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()> {
        self.log.push("append_evidence");
        self.inner.append_evidence(entries, fence)
    }
    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        self.log.push("evidence");
        self.inner.evidence(run_id, after)
    }
    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        self.log.push("last_evidence");
        self.inner.last_evidence(run_id)
    }
}

impl ConversationRepository for RecordingStore {
    fn append_turns<'a>(
        &'a self,
        conversation_id: &'a str,
        run_id: &'a str,
        turns: Vec<(String, Value)>,
        now: Millis,
    ) -> StoreFuture<'a, ()> {
        self.log.push("append_turns");
        self.inner.append_turns(conversation_id, run_id, turns, now)
    }
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        self.log.push("conversation");
        self.inner.conversation(conversation_id)
    }
}

impl QueueRepository for RecordingStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        self.log.push("enqueue");
        self.inner.enqueue(run_id, available_at)
    }
    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        self.log.push("claim");
        self.inner.claim(owner, ttl, now)
    }
    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        self.log.push("acquire");
        self.inner.acquire(run_id, owner, ttl, now)
    }
    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        // Timer-driven: not part of the run's sequence.
        self.inner.heartbeat(lease, ttl, now)
    }
    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        self.log.push("release");
        self.inner.release(lease, requeue_at)
    }
    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        self.log.push("queue");
        self.inner.queue()
    }
}

impl ScheduleRepository for RecordingStore {
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        self.inner.put_schedule(schedule)
    }
    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>> {
        self.inner.schedules()
    }
    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        self.inner.delete_schedule(id)
    }
    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        self.inner.due_schedules(now)
    }
    fn fire_schedule<'a>(
        &'a self,
        id: &'a str,
        expected: Millis,
        next: Millis,
        firing: Firing,
        now: Millis,
    ) -> StoreFuture<'a, bool> {
        self.inner.fire_schedule(id, expected, next, firing, now)
    }
}

impl MemoryRepository for RecordingStore {
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64> {
        self.inner.save_memory(namespace, content, now)
    }
    fn search_memory<'a>(
        &'a self,
        namespace: &'a str,
        query: &'a str,
        limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>> {
        self.inner.search_memory(namespace, query, limit)
    }
}

impl WorkItemRepository for RecordingStore {
    fn enqueue_work<'a>(&'a self, item: &'a NewWork, now: Millis) -> StoreFuture<'a, WorkRecord> {
        self.inner.enqueue_work(item, now)
    }
    fn claim_work<'a>(
        &'a self,
        queue: &'a str,
        worker: &'a str,
        tags: &'a [String],
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<WorkRecord>> {
        self.inner.claim_work(queue, worker, tags, ttl, now)
    }
    fn start_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.inner.start_work(queue, id, worker, now)
    }
    fn heartbeat_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.inner.heartbeat_work(queue, id, worker, ttl, now)
    }
    fn complete_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        result: &'a Value,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.inner.complete_work(queue, id, worker, result, now)
    }
    fn fail_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        error: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.inner.fail_work(queue, id, worker, error, now)
    }
    fn expire_work_leases<'a>(&'a self, queue: &'a str, now: Millis) -> StoreFuture<'a, u64> {
        self.inner.expire_work_leases(queue, now)
    }
    fn work_item<'a>(&'a self, queue: &'a str, id: &'a str) -> StoreFuture<'a, Option<WorkRecord>> {
        self.inner.work_item(queue, id)
    }
    fn work_items<'a>(&'a self, queue: &'a str, state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>> {
        self.inner.work_items(queue, state)
    }
    fn work_stats<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, WorkStats> {
        self.inner.work_stats(queue)
    }
    fn purge_finished_work<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, u64> {
        self.inner.purge_finished_work(queue)
    }
}

impl Store for RecordingStore {
    fn info(&self) -> StoreInfo {
        self.inner.info()
    }
    fn close(&self) -> StoreFuture<'_, ()> {
        self.inner.close()
    }
    fn create_leased_run<'a>(
        &'a self,
        run: NewRun,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Lease> {
        self.log.push("create_leased_run");
        self.inner.create_leased_run(run, owner, ttl, now)
    }
}
