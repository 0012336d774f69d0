//! The repositories on PostgreSQL: each operation of [`crate::ops`], on the pool, or in a
//! transaction where it is more than one statement.
//!
//! Concurrency rests on PostgreSQL's own locks, taken by the statements themselves (see the
//! backend's documentation).

use super::link::Pg;
use super::{PostgresStore, db};
use crate::error::StoreError;
use crate::ops::{self, work::Held};
use crate::record::{
    Checkpoint, ConversationTurn, EvidenceEntry, Firing, Flush, Lease, MemoryRecord, Millis, NewRun, QueueEntry,
    RunFilter, RunRecord, RunSummary, SavedCheckpoint, Schedule, SpendSums, StoredSignal, Transition,
};
use crate::repository::{
    ConversationRepository, EvidenceRepository, MemoryRepository, QueueRepository, RunRepository, ScheduleRepository,
    SignalRepository, StoreFuture, WorkItemRepository,
};
use crate::work::{NewWork, WorkRecord, WorkState, WorkStats};
use serde_json::Value;
use std::time::Duration;

impl PostgresStore {
    /// The pool, as the operations take it: each statement on its own.
    fn each(&self) -> Pg<'_> {
        Pg::Pool(&self.pool)
    }

    /// A transaction whose commit returns before its WAL record is flushed
    /// ([`Flush::WithNextFlush`]): a later commit that waits for its own flush takes this
    /// one with it.
    async fn deferring_transaction(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await.map_err(db)?;
        Ok(tx)
    }
}

impl RunRepository for PostgresStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        // One statement here, atomic on its own.
        Box::pin(async move { ops::runs::insert_run(&mut self.each(), &run, now).await })
    }

    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move { ops::runs::load_run(&mut self.each(), run_id).await })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        Box::pin(async move { ops::runs::list_runs(&mut self.each(), filter).await })
    }

    fn list_run_records<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move { ops::runs::list_run_records(&mut self.each(), filter).await })
    }

    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        Box::pin(async move {
            let deferred = checkpoint.flush == Flush::WithNextFlush;
            // A fenced checkpoint is one statement (its own transaction): one round trip.
            // A deferred one runs it in a transaction that defers its flush.
            let at_once = if deferred {
                let mut tx = self.deferring_transaction().await?;
                let saved = ops::runs::save_fenced_checkpoint(&mut Pg::Conn(&mut tx), &checkpoint, now).await?;
                match saved {
                    Some(_) => tx.commit().await.map_err(db)?,
                    None => tx.rollback().await.map_err(db)?,
                }
                saved
            } else {
                ops::runs::save_fenced_checkpoint(&mut self.each(), &checkpoint, now).await?
            };
            if let Some(saved) = at_once {
                return Ok(saved);
            }
            // Saved nothing, or not fenced: the steps, which say why, in a transaction.
            let mut tx =
                if deferred { self.deferring_transaction().await? } else { self.pool.begin().await.map_err(db)? };
            // The run's row lock holds back any signal (its bump of `signal_seq`) until
            // this commits.
            let saved = ops::runs::save_checkpoint(&mut Pg::Conn(&mut tx), &checkpoint, now).await?;
            tx.commit().await.map_err(db)?;
            Ok(saved)
        })
    }

    fn spend_since(&self, since: Millis) -> StoreFuture<'_, SpendSums> {
        Box::pin(async move { ops::runs::spend_since(&mut self.each(), since).await })
    }

    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        Box::pin(async move { ops::runs::transitions(&mut self.each(), run_id).await })
    }
}

impl SignalRepository for PostgresStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move { ops::signals::insert_signal(&mut self.each(), run_id, kind, &payload, now).await })
    }

    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move { ops::signals::pending_signals(&mut self.each(), run_id, after).await })
    }

    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move { ops::signals::signals(&mut self.each(), run_id).await })
    }
}

impl EvidenceRepository for PostgresStore {
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if entries.is_empty() {
                return Ok(());
            }
            // Under a fence, one statement (its own transaction): one round trip.
            if let Some(lease) = fence
                && ops::evidence::append_fenced(&mut self.each(), entries, lease).await?
            {
                return Ok(());
            }
            // Wrote nothing, or not fenced: the entries and the head they move, in a
            // transaction, which says why.
            let mut tx = self.pool.begin().await.map_err(db)?;
            ops::evidence::append(&mut Pg::Conn(&mut tx), entries, fence).await?;
            tx.commit().await.map_err(db)
        })
    }

    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        Box::pin(async move { ops::evidence::evidence(&mut self.each(), run_id, after).await })
    }

    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        Box::pin(async move { ops::evidence::last_evidence(&mut self.each(), run_id).await })
    }
}

impl ConversationRepository for PostgresStore {
    fn append_turns<'a>(
        &'a self,
        conversation_id: &'a str,
        run_id: &'a str,
        turns: Vec<(String, Value)>,
        now: Millis,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if turns.is_empty() {
                return Ok(());
            }
            let mut tx = self.pool.begin().await.map_err(db)?;
            ops::conversations::append_turns(&mut Pg::Conn(&mut tx), conversation_id, run_id, &turns, now).await?;
            tx.commit().await.map_err(db)
        })
    }

    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        Box::pin(async move { ops::conversations::conversation(&mut self.each(), conversation_id).await })
    }
}

impl QueueRepository for PostgresStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        Box::pin(async move { ops::queue::enqueue(&mut self.each(), run_id, available_at).await })
    }

    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { ops::queue::claim(&mut self.each(), owner, ttl, now).await })
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { ops::queue::acquire(&mut self.each(), run_id, owner, ttl, now).await })
    }

    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { ops::queue::heartbeat(&mut self.each(), lease, ttl, now).await })
    }

    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        Box::pin(async move { ops::queue::release(&mut self.each(), lease, requeue_at).await })
    }

    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        Box::pin(async move { ops::queue::queue(&mut self.each()).await })
    }
}

impl ScheduleRepository for PostgresStore {
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        Box::pin(async move { ops::schedules::put(&mut self.each(), schedule).await })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move { ops::schedules::schedules(&mut self.each()).await })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { ops::schedules::delete(&mut self.each(), id).await })
    }

    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move { ops::schedules::due(&mut self.each(), now).await })
    }

    fn fire_schedule<'a>(
        &'a self,
        id: &'a str,
        expected: Millis,
        next: Millis,
        firing: Firing,
        now: Millis,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let fired = ops::schedules::fire(&mut Pg::Conn(&mut tx), id, expected, next, &firing, now).await?;
            // A tick already moved on leaves nothing to commit.
            if fired {
                tx.commit().await.map_err(db)?;
            }
            Ok(fired)
        })
    }
}

impl MemoryRepository for PostgresStore {
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move { ops::memory::save(&mut self.each(), namespace, content, now).await })
    }

    fn search_memory<'a>(
        &'a self,
        namespace: &'a str,
        query: &'a str,
        limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>> {
        Box::pin(async move { ops::memory::search(&mut self.each(), namespace, query, limit).await })
    }
}

impl WorkItemRepository for PostgresStore {
    fn enqueue_work<'a>(&'a self, item: &'a NewWork, now: Millis) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { ops::work::enqueue(&mut self.each(), item, now).await })
    }

    fn claim_work<'a>(
        &'a self,
        queue: &'a str,
        worker: &'a str,
        tags: &'a [String],
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<WorkRecord>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let claimed = ops::work::claim(&mut Pg::Conn(&mut tx), queue, worker, tags, ttl, now).await?;
            tx.commit().await.map_err(db)?;
            Ok(claimed)
        })
    }

    fn start_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { ops::work::start(&mut self.each(), Held { queue, id, worker, now }).await })
    }

    fn heartbeat_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { ops::work::heartbeat(&mut self.each(), Held { queue, id, worker, now }, ttl).await })
    }

    fn complete_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        result: &'a Value,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { ops::work::complete(&mut self.each(), Held { queue, id, worker, now }, result).await })
    }

    fn fail_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        error: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { ops::work::fail(&mut self.each(), Held { queue, id, worker, now }, error).await })
    }

    fn expire_work_leases<'a>(&'a self, queue: &'a str, now: Millis) -> StoreFuture<'a, u64> {
        Box::pin(async move { ops::work::expire(&mut self.each(), queue, now).await })
    }

    fn work_item<'a>(&'a self, queue: &'a str, id: &'a str) -> StoreFuture<'a, Option<WorkRecord>> {
        Box::pin(async move { ops::work::item(&mut self.each(), queue, id).await })
    }

    fn work_items<'a>(&'a self, queue: &'a str, state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>> {
        Box::pin(async move { ops::work::items(&mut self.each(), queue, state).await })
    }

    fn work_stats<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, WorkStats> {
        Box::pin(async move { ops::work::stats(&mut self.each(), queue).await })
    }

    fn purge_finished_work<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(async move { ops::work::purge(&mut self.each(), queue).await })
    }
}
