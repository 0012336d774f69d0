//! The repositories on SQLite: each operation of [`crate::ops`], on the writer thread or
//! through the pool.
//!
//! Every write runs on the writer thread, in its groups: a running run's calls (its
//! creation and lease, checkpoints, evidence, signals, the queue), and a team's work items,
//! conversations, memories and schedules alike. The writer is then the only connection of
//! the process that takes the database's write lock: it never waits for another of the
//! store's own connections, and a write that reads first (a claim, an append) holds the
//! lock from its group's `BEGIN IMMEDIATE`. Reads go through the pool, except the look for
//! pending signals asked at every boundary, which runs between the writer's groups.

use super::SqliteStore;
use super::link::{Pooled, Writing, at_once};
use crate::ops::{self, work::Held};
use crate::record::{
    Checkpoint, ConversationTurn, EvidenceEntry, Firing, Lease, MemoryRecord, Millis, NewRun, QueueEntry, RunFilter,
    RunRecord, RunSummary, SavedCheckpoint, Schedule, SpendSums, StoredSignal, Transition,
};
use crate::repository::{
    ConversationRepository, EvidenceRepository, MemoryRepository, QueueRepository, RunRepository, ScheduleRepository,
    SignalRepository, StoreFuture, WorkItemRepository,
};
use crate::work::{NewWork, WorkRecord, WorkState, WorkStats};
use serde_json::Value;
use std::time::Duration;

impl SqliteStore {
    /// The pool, as the operations take it.
    fn reads(&self) -> Pooled<'_> {
        Pooled::Pool(&self.pool)
    }
}

impl RunRepository for SqliteStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(self.writer.write(move |conn| at_once(ops::runs::insert_run(&mut Writing(conn), &run, now))))
    }

    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move { ops::runs::load_run(&mut self.reads(), run_id).await })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        Box::pin(async move { ops::runs::list_runs(&mut self.reads(), filter).await })
    }

    fn list_run_records<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move { ops::runs::list_run_records(&mut self.reads(), filter).await })
    }

    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        // The writer thread is the only writer: no signal can come between the checkpoint's
        // read of the run and its group's commit.
        Box::pin(self.writer.write_flushed(checkpoint.flush, move |conn| {
            at_once(ops::runs::save_checkpoint(&mut Writing(conn), &checkpoint, now))
        }))
    }

    fn spend_since(&self, since: Millis) -> StoreFuture<'_, SpendSums> {
        Box::pin(async move { ops::runs::spend_since(&mut self.reads(), since).await })
    }

    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        Box::pin(async move { ops::runs::transitions(&mut self.reads(), run_id).await })
    }
}

impl SignalRepository for SqliteStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        let (run_id, kind) = (run_id.to_owned(), kind.to_owned());
        Box::pin(
            self.writer.write(move |conn| {
                at_once(ops::signals::insert_signal(&mut Writing(conn), &run_id, &kind, &payload, now))
            }),
        )
    }

    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        let run_id = run_id.to_owned();
        Box::pin(
            self.writer.read(move |conn| at_once(ops::signals::pending_signals(&mut Writing(conn), &run_id, after))),
        )
    }

    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move { ops::signals::signals(&mut self.reads(), run_id).await })
    }
}

impl EvidenceRepository for SqliteStore {
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()> {
        if entries.is_empty() && fence.is_none() {
            return Box::pin(async { Ok(()) });
        }
        let (entries, fence) = (entries.to_vec(), fence.cloned());
        Box::pin(
            self.writer.write(move |conn| at_once(ops::evidence::append(&mut Writing(conn), &entries, fence.as_ref()))),
        )
    }

    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        Box::pin(async move { ops::evidence::evidence(&mut self.reads(), run_id, after).await })
    }

    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        Box::pin(async move { ops::evidence::last_evidence(&mut self.reads(), run_id).await })
    }
}

impl ConversationRepository for SqliteStore {
    fn append_turns<'a>(
        &'a self,
        conversation_id: &'a str,
        run_id: &'a str,
        turns: Vec<(String, Value)>,
        now: Millis,
    ) -> StoreFuture<'a, ()> {
        let (conversation_id, run_id) = (conversation_id.to_owned(), run_id.to_owned());
        Box::pin(async move {
            if turns.is_empty() {
                return Ok(());
            }
            self.writer
                .write(move |conn| {
                    at_once(ops::conversations::append_turns(
                        &mut Writing(conn),
                        &conversation_id,
                        &run_id,
                        &turns,
                        now,
                    ))
                })
                .await
        })
    }

    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        Box::pin(async move { ops::conversations::conversation(&mut self.reads(), conversation_id).await })
    }
}

impl QueueRepository for SqliteStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        let run_id = run_id.to_owned();
        Box::pin(self.writer.write(move |conn| at_once(ops::queue::enqueue(&mut Writing(conn), &run_id, available_at))))
    }

    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        let owner = owner.to_owned();
        Box::pin(self.writer.write(move |conn| at_once(ops::queue::claim(&mut Writing(conn), &owner, ttl, now))))
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        Box::pin(
            self.writer.write(move |conn| at_once(ops::queue::acquire(&mut Writing(conn), &run_id, &owner, ttl, now))),
        )
    }

    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        let lease = lease.clone();
        Box::pin(self.writer.write(move |conn| at_once(ops::queue::heartbeat(&mut Writing(conn), &lease, ttl, now))))
    }

    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        let lease = lease.clone();
        Box::pin(self.writer.write(move |conn| at_once(ops::queue::release(&mut Writing(conn), &lease, requeue_at))))
    }

    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        Box::pin(async move { ops::queue::queue(&mut self.reads()).await })
    }
}

impl ScheduleRepository for SqliteStore {
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        let schedule = schedule.clone();
        Box::pin(self.writer.write(move |conn| at_once(ops::schedules::put(&mut Writing(conn), &schedule))))
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move { ops::schedules::schedules(&mut self.reads()).await })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        Box::pin(self.writer.write(move |conn| at_once(ops::schedules::delete(&mut Writing(conn), &id))))
    }

    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move { ops::schedules::due(&mut self.reads(), now).await })
    }

    fn fire_schedule<'a>(
        &'a self,
        id: &'a str,
        expected: Millis,
        next: Millis,
        firing: Firing,
        now: Millis,
    ) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        Box::pin(
            self.writer.write(move |conn| {
                at_once(ops::schedules::fire(&mut Writing(conn), &id, expected, next, &firing, now))
            }),
        )
    }
}

impl MemoryRepository for SqliteStore {
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64> {
        let (namespace, content) = (namespace.to_owned(), content.to_owned());
        Box::pin(
            self.writer.write(move |conn| at_once(ops::memory::save(&mut Writing(conn), &namespace, &content, now))),
        )
    }

    fn search_memory<'a>(
        &'a self,
        namespace: &'a str,
        query: &'a str,
        limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>> {
        Box::pin(async move { ops::memory::search(&mut self.reads(), namespace, query, limit).await })
    }
}

impl WorkItemRepository for SqliteStore {
    fn enqueue_work<'a>(&'a self, item: &'a NewWork, now: Millis) -> StoreFuture<'a, WorkRecord> {
        let item = item.clone();
        Box::pin(self.writer.write(move |conn| at_once(ops::work::enqueue(&mut Writing(conn), &item, now))))
    }

    fn claim_work<'a>(
        &'a self,
        queue: &'a str,
        worker: &'a str,
        tags: &'a [String],
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<WorkRecord>> {
        let (queue, worker, tags) = (queue.to_owned(), worker.to_owned(), tags.to_vec());
        // The group's write lock, taken up front, makes the claim exclusive across tasks
        // and processes alike.
        Box::pin(
            self.writer
                .write(move |conn| at_once(ops::work::claim(&mut Writing(conn), &queue, &worker, &tags, ttl, now))),
        )
    }

    fn start_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        let held = HeldWork::new(queue, id, worker, now);
        Box::pin(self.writer.write(move |conn| at_once(ops::work::start(&mut Writing(conn), held.held()))))
    }

    fn heartbeat_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        let held = HeldWork::new(queue, id, worker, now);
        Box::pin(self.writer.write(move |conn| at_once(ops::work::heartbeat(&mut Writing(conn), held.held(), ttl))))
    }

    fn complete_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        result: &'a Value,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        let (held, result) = (HeldWork::new(queue, id, worker, now), result.clone());
        Box::pin(self.writer.write(move |conn| at_once(ops::work::complete(&mut Writing(conn), held.held(), &result))))
    }

    fn fail_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        error: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        let (held, error) = (HeldWork::new(queue, id, worker, now), error.to_owned());
        Box::pin(self.writer.write(move |conn| at_once(ops::work::fail(&mut Writing(conn), held.held(), &error))))
    }

    fn expire_work_leases<'a>(&'a self, queue: &'a str, now: Millis) -> StoreFuture<'a, u64> {
        let queue = queue.to_owned();
        Box::pin(self.writer.write(move |conn| at_once(ops::work::expire(&mut Writing(conn), &queue, now))))
    }

    fn work_item<'a>(&'a self, queue: &'a str, id: &'a str) -> StoreFuture<'a, Option<WorkRecord>> {
        Box::pin(async move { ops::work::item(&mut self.reads(), queue, id).await })
    }

    fn work_items<'a>(&'a self, queue: &'a str, state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>> {
        Box::pin(async move { ops::work::items(&mut self.reads(), queue, state).await })
    }

    fn work_stats<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, WorkStats> {
        Box::pin(async move { ops::work::stats(&mut self.reads(), queue).await })
    }

    fn purge_finished_work<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, u64> {
        let queue = queue.to_owned();
        Box::pin(self.writer.write(move |conn| at_once(ops::work::purge(&mut Writing(conn), &queue))))
    }
}

/// A held work item's names, owned, for a write the writer thread may run more than once.
struct HeldWork {
    queue: String,
    id: String,
    worker: String,
    now: Millis,
}

impl HeldWork {
    fn new(queue: &str, id: &str, worker: &str, now: Millis) -> Self {
        HeldWork { queue: queue.to_owned(), id: id.to_owned(), worker: worker.to_owned(), now }
    }

    fn held(&self) -> Held<'_> {
        Held { queue: &self.queue, id: &self.id, worker: &self.worker, now: self.now }
    }
}
