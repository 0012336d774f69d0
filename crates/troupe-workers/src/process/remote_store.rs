//! [`RemoteStore`]: the store a worker records its run in, which is the coordinator's,
//! reached through [`StoreCall`] frames. The worker holds no database and no file of the
//! record: what its agent (or a command the agent runs) can reach is only its own run,
//! and only through the calls a run makes.

use crate::ipc::store::{StoreAnswer, StoreCall, StoreOp, StoreReply, WireStoreError};
use crate::ipc::{Frame, FrameSender};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::WeakSender;
use tokio::sync::oneshot;
use troupe_store::{
    Checkpoint, ConversationRepository, ConversationTurn, EvidenceEntry, EvidenceRepository, Firing, Lease,
    MemoryRecord, MemoryRepository, Millis, NewRun, NewWork, QueueEntry, QueueRepository, RunFilter, RunRecord,
    RunRepository, RunSummary, SavedCheckpoint, Schedule, ScheduleRepository, SignalRepository, Store, StoreError,
    StoreFuture, StoreInfo, StoredSignal, Transition, WorkItemRepository, WorkRecord, WorkState, WorkStats,
};

/// The calls waiting for their replies, by number; `None` once the coordinator is gone.
type Waiting = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<StoreAnswer>>>>>;

/// Where replies to a [`RemoteStore`]'s calls are delivered: the worker's frame reader
/// hands each [`StoreReply`] here.
#[derive(Clone)]
pub(crate) struct ReplyRoute {
    waiting: Waiting,
}

impl ReplyRoute {
    /// Delivers `reply` to the call waiting for it (a reply nobody waits for is dropped).
    pub(crate) fn deliver(&self, reply: StoreReply) {
        let sender = self.waiting.lock().ok().and_then(|mut w| w.as_mut().and_then(|w| w.remove(&reply.id)));
        if let Some(sender) = sender {
            let _ = sender.send(reply.answer);
        }
    }

    /// The coordinator is gone: every waiting call, and every later one, fails.
    pub(crate) fn close(&self) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.take();
        }
    }
}

/// A store that forwards a run's calls to the coordinator.
pub(crate) struct RemoteStore {
    /// Weak: the store must not keep the worker's output open after its task ends.
    frames: WeakSender<Frame>,
    next: AtomicU64,
    waiting: Waiting,
}

impl RemoteStore {
    /// A store sending its calls as frames through `frames`, and the route for its replies.
    pub(crate) fn new(frames: FrameSender) -> (Self, ReplyRoute) {
        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        let route = ReplyRoute { waiting: Arc::clone(&waiting) };
        (RemoteStore { frames: frames.downgrade(), next: AtomicU64::new(1), waiting }, route)
    }

    async fn call<T: DeserializeOwned>(&self, op: StoreOp) -> Result<T, StoreError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().map_err(|_| gone())?;
            waiting.as_mut().ok_or_else(gone)?.insert(id, tx);
        }
        let name = op.name();
        let frames = self.frames.upgrade().ok_or_else(gone)?;
        if frames.send(Frame::StoreCall(Box::new(StoreCall { id, op }))).await.is_err() {
            return Err(gone());
        }
        match rx.await.map_err(|_| gone())? {
            StoreAnswer::Ok(value) => serde_json::from_value(value)
                .map_err(|e| StoreError::decode(format!("the coordinator's answer to {name}"), e)),
            StoreAnswer::Err(error) => Err(error.into()),
        }
    }

    fn unsupported<T>(&self, what: &str) -> StoreFuture<'_, T> {
        let message = format!("a worker's store records its own run only; {what} is not available in a worker");
        Box::pin(async move { Err(WireStoreError::Other { message }.into()) })
    }
}

fn gone() -> StoreError {
    StoreError::database("the coordinator is gone: the run cannot be recorded")
}

fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

impl RunRepository for RemoteStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(self.call(StoreOp::CreateRun { run, now }))
    }
    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(self.call(StoreOp::LoadRun { run_id: run_id.to_owned() }))
    }
    fn list_runs<'a>(&'a self, _filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        self.unsupported("listing runs")
    }
    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        Box::pin(async move {
            let latest: i64 = self.call(StoreOp::Checkpoint { checkpoint: Box::new(checkpoint), now }).await?;
            Ok(SavedCheckpoint { latest_signal: latest })
        })
    }
    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        Box::pin(self.call(StoreOp::Transitions { run_id: run_id.to_owned() }))
    }
}

impl SignalRepository for RemoteStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(self.call(StoreOp::SendSignal { run_id: run_id.to_owned(), kind: kind.to_owned(), payload, now }))
    }
    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(self.call(StoreOp::PendingSignals { run_id: run_id.to_owned(), after }))
    }
    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(self.call(StoreOp::Signals { run_id: run_id.to_owned() }))
    }
}

impl EvidenceRepository for RemoteStore {
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()> {
        Box::pin(self.call(StoreOp::AppendEvidence { entries: entries.to_vec(), fence: fence.cloned() }))
    }
    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        Box::pin(self.call(StoreOp::Evidence { run_id: run_id.to_owned(), after }))
    }
    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        Box::pin(self.call(StoreOp::LastEvidence { run_id: run_id.to_owned() }))
    }
}

impl ConversationRepository for RemoteStore {
    fn append_turns<'a>(
        &'a self,
        conversation_id: &'a str,
        run_id: &'a str,
        turns: Vec<(String, Value)>,
        now: Millis,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.call(StoreOp::AppendTurns {
            conversation_id: conversation_id.to_owned(),
            run_id: run_id.to_owned(),
            turns,
            now,
        }))
    }
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        Box::pin(self.call(StoreOp::Conversation { conversation_id: conversation_id.to_owned() }))
    }
}

impl QueueRepository for RemoteStore {
    fn enqueue<'a>(&'a self, _run_id: &'a str, _available_at: Millis) -> StoreFuture<'a, ()> {
        self.unsupported("the run queue")
    }
    fn claim<'a>(&'a self, _owner: &'a str, _ttl: Duration, _now: Millis) -> StoreFuture<'a, Option<Lease>> {
        self.unsupported("claiming queued runs")
    }
    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(self.call(StoreOp::Acquire {
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            ttl_ms: ttl_ms(ttl),
            now,
        }))
    }
    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(self.call(StoreOp::Heartbeat { lease: lease.clone(), ttl_ms: ttl_ms(ttl), now }))
    }
    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        Box::pin(self.call(StoreOp::Release { lease: lease.clone(), requeue_at }))
    }
    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        Box::pin(self.call(StoreOp::Queue))
    }
}

impl ScheduleRepository for RemoteStore {
    fn put_schedule<'a>(&'a self, _schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        self.unsupported("scheduling")
    }
    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>> {
        self.unsupported("scheduling")
    }
    fn delete_schedule<'a>(&'a self, _id: &'a str) -> StoreFuture<'a, bool> {
        self.unsupported("scheduling")
    }
    fn due_schedules(&self, _now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        self.unsupported("scheduling")
    }
    fn fire_schedule<'a>(
        &'a self,
        _id: &'a str,
        _expected: Millis,
        _next: Millis,
        _firing: Firing,
        _now: Millis,
    ) -> StoreFuture<'a, bool> {
        self.unsupported("scheduling")
    }
}

impl MemoryRepository for RemoteStore {
    fn save_memory<'a>(&'a self, _namespace: &'a str, _content: &'a str, _now: Millis) -> StoreFuture<'a, i64> {
        self.unsupported("memory")
    }
    fn search_memory<'a>(
        &'a self,
        _namespace: &'a str,
        _query: &'a str,
        _limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>> {
        self.unsupported("memory")
    }
}

impl WorkItemRepository for RemoteStore {
    fn enqueue_work<'a>(&'a self, _item: &'a NewWork, _now: Millis) -> StoreFuture<'a, WorkRecord> {
        self.unsupported("the work queue")
    }
    fn claim_work<'a>(
        &'a self,
        _queue: &'a str,
        _worker: &'a str,
        _tags: &'a [String],
        _ttl: Duration,
        _now: Millis,
    ) -> StoreFuture<'a, Option<WorkRecord>> {
        self.unsupported("the work queue")
    }
    fn start_work<'a>(
        &'a self,
        _queue: &'a str,
        _id: &'a str,
        _worker: &'a str,
        _now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.unsupported("the work queue")
    }
    fn heartbeat_work<'a>(
        &'a self,
        _queue: &'a str,
        _id: &'a str,
        _worker: &'a str,
        _ttl: Duration,
        _now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.unsupported("the work queue")
    }
    fn complete_work<'a>(
        &'a self,
        _queue: &'a str,
        _id: &'a str,
        _worker: &'a str,
        _result: &'a Value,
        _now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.unsupported("the work queue")
    }
    fn fail_work<'a>(
        &'a self,
        _queue: &'a str,
        _id: &'a str,
        _worker: &'a str,
        _error: &'a str,
        _now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        self.unsupported("the work queue")
    }
    fn expire_work_leases<'a>(&'a self, _queue: &'a str, _now: Millis) -> StoreFuture<'a, u64> {
        self.unsupported("the work queue")
    }
    fn work_item<'a>(&'a self, _queue: &'a str, _id: &'a str) -> StoreFuture<'a, Option<WorkRecord>> {
        self.unsupported("the work queue")
    }
    fn work_items<'a>(&'a self, _queue: &'a str, _state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>> {
        self.unsupported("the work queue")
    }
    fn work_stats<'a>(&'a self, _queue: &'a str) -> StoreFuture<'a, WorkStats> {
        self.unsupported("the work queue")
    }
    fn purge_finished_work<'a>(&'a self, _queue: &'a str) -> StoreFuture<'a, u64> {
        self.unsupported("the work queue")
    }
}

impl Store for RemoteStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            backend: "coordinator".to_owned(),
            location: "the coordinator's store".to_owned(),
            schema_version: 0,
        }
    }
    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    fn create_leased_run<'a>(
        &'a self,
        run: NewRun,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Lease> {
        Box::pin(self.call(StoreOp::CreateLeasedRun { run, owner: owner.to_owned(), ttl_ms: ttl_ms(ttl), now }))
    }
}
