//! The repositories on PostgreSQL: each operation of [`crate::ops`] on a connection of the
//! store's [`Connections`](super::connections::Connections), in a transaction where it is
//! more than one statement.
//!
//! Concurrency rests on PostgreSQL's own locks, taken by the statements themselves (see the
//! backend's documentation).

use super::connections::each;
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
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use std::time::Duration;

/// A transaction on `conn`; when `deferred`, one whose commit returns before its WAL
/// record is flushed ([`Flush::WithNextFlush`]): a later commit that waits for its own
/// flush takes this one with it.
async fn begin(conn: &mut PgConnection, deferred: bool) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, StoreError> {
    let mut tx = conn.begin().await.map_err(db)?;
    if deferred {
        sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await.map_err(db)?;
    }
    Ok(tx)
}

impl RunRepository for PostgresStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        // One statement here, atomic on its own.
        Box::pin(async move { each!(self, |link| ops::runs::insert_run(link, &run, now)) })
    }

    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move { each!(self, |link| ops::runs::load_run(link, run_id)) })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        Box::pin(async move { each!(self, |link| ops::runs::list_runs(link, filter)) })
    }

    fn list_run_records<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move { each!(self, |link| ops::runs::list_run_records(link, filter)) })
    }

    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        Box::pin(async move {
            let deferred = checkpoint.flush == Flush::WithNextFlush;
            // A fenced checkpoint is one statement (its own transaction): one round trip.
            // A deferred one runs it in a transaction that defers its flush.
            let at_once = if deferred {
                let mut in_use = self.connections.get().await?;
                let result = async {
                    let mut tx = begin(in_use.conn(), true).await?;
                    let saved = ops::runs::save_fenced_checkpoint(&mut Pg::Conn(&mut tx), &checkpoint, now).await?;
                    match saved {
                        Some(_) => tx.commit().await.map_err(db)?,
                        None => tx.rollback().await.map_err(db)?,
                    }
                    Ok(saved)
                }
                .await;
                in_use.finish(result).await?
            } else {
                each!(self, |link| ops::runs::save_fenced_checkpoint(link, &checkpoint, now))?
            };
            if let Some(saved) = at_once {
                return Ok(saved);
            }
            // Saved nothing, or not fenced: the steps, which say why, in a transaction.
            let mut in_use = self.connections.get().await?;
            let result = async {
                let mut tx = begin(in_use.conn(), deferred).await?;
                // The run's row lock holds back any signal (its bump of `signal_seq`) until
                // this commits.
                let saved = ops::runs::save_checkpoint(&mut Pg::Conn(&mut tx), &checkpoint, now).await?;
                tx.commit().await.map_err(db)?;
                Ok(saved)
            }
            .await;
            in_use.finish(result).await
        })
    }

    fn spend_since(&self, since: Millis) -> StoreFuture<'_, SpendSums> {
        Box::pin(async move { each!(self, |link| ops::runs::spend_since(link, since)) })
    }

    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        Box::pin(async move { each!(self, |link| ops::runs::transitions(link, run_id)) })
    }
}

impl SignalRepository for PostgresStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move { each!(self, |link| ops::signals::insert_signal(link, run_id, kind, &payload, now)) })
    }

    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move { each!(self, |link| ops::signals::pending_signals(link, run_id, after)) })
    }

    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move { each!(self, |link| ops::signals::signals(link, run_id)) })
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
                && each!(self, |link| ops::evidence::append_fenced(link, entries, lease))?
            {
                return Ok(());
            }
            // Wrote nothing, or not fenced: the entries and the head they move, in a
            // transaction, which says why.
            let mut in_use = self.connections.get().await?;
            let result = async {
                let mut tx = begin(in_use.conn(), false).await?;
                ops::evidence::append(&mut Pg::Conn(&mut tx), entries, fence).await?;
                tx.commit().await.map_err(db)
            }
            .await;
            in_use.finish(result).await
        })
    }

    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        Box::pin(async move { each!(self, |link| ops::evidence::evidence(link, run_id, after)) })
    }

    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        Box::pin(async move { each!(self, |link| ops::evidence::last_evidence(link, run_id)) })
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
            let mut in_use = self.connections.get().await?;
            let result = async {
                let mut tx = begin(in_use.conn(), false).await?;
                ops::conversations::append_turns(&mut Pg::Conn(&mut tx), conversation_id, run_id, &turns, now).await?;
                tx.commit().await.map_err(db)
            }
            .await;
            in_use.finish(result).await
        })
    }

    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        Box::pin(async move { each!(self, |link| ops::conversations::conversation(link, conversation_id)) })
    }
}

impl QueueRepository for PostgresStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        Box::pin(async move { each!(self, |link| ops::queue::enqueue(link, run_id, available_at)) })
    }

    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { each!(self, |link| ops::queue::claim(link, owner, ttl, now)) })
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { each!(self, |link| ops::queue::acquire(link, run_id, owner, ttl, now)) })
    }

    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move { each!(self, |link| ops::queue::heartbeat(link, lease, ttl, now)) })
    }

    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        Box::pin(async move { each!(self, |link| ops::queue::release(link, lease, requeue_at)) })
    }

    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        Box::pin(async move { each!(self, |link| ops::queue::queue(link)) })
    }
}

impl ScheduleRepository for PostgresStore {
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        Box::pin(async move { each!(self, |link| ops::schedules::put(link, schedule)) })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move { each!(self, |link| ops::schedules::schedules(link)) })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { each!(self, |link| ops::schedules::delete(link, id)) })
    }

    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move { each!(self, |link| ops::schedules::due(link, now)) })
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
            let mut in_use = self.connections.get().await?;
            let result = async {
                let mut tx = begin(in_use.conn(), false).await?;
                let fired = ops::schedules::fire(&mut Pg::Conn(&mut tx), id, expected, next, &firing, now).await?;
                // A tick already moved on leaves nothing to commit.
                if fired {
                    tx.commit().await.map_err(db)?;
                } else {
                    tx.rollback().await.map_err(db)?;
                }
                Ok(fired)
            }
            .await;
            in_use.finish(result).await
        })
    }
}

impl MemoryRepository for PostgresStore {
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move { each!(self, |link| ops::memory::save(link, namespace, content, now)) })
    }

    fn search_memory<'a>(
        &'a self,
        namespace: &'a str,
        query: &'a str,
        limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>> {
        Box::pin(async move { each!(self, |link| ops::memory::search(link, namespace, query, limit)) })
    }
}

impl WorkItemRepository for PostgresStore {
    fn enqueue_work<'a>(&'a self, item: &'a NewWork, now: Millis) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { each!(self, |link| ops::work::enqueue(link, item, now)) })
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
            let mut in_use = self.connections.get().await?;
            let result = async {
                let mut tx = begin(in_use.conn(), false).await?;
                let claimed = ops::work::claim(&mut Pg::Conn(&mut tx), queue, worker, tags, ttl, now).await?;
                tx.commit().await.map_err(db)?;
                Ok(claimed)
            }
            .await;
            in_use.finish(result).await
        })
    }

    fn start_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { each!(self, |link| ops::work::start(link, Held { queue, id, worker, now })) })
    }

    fn heartbeat_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { each!(self, |link| ops::work::heartbeat(link, Held { queue, id, worker, now }, ttl)) })
    }

    fn complete_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        result: &'a Value,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { each!(self, |link| ops::work::complete(link, Held { queue, id, worker, now }, result)) })
    }

    fn fail_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        error: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move { each!(self, |link| ops::work::fail(link, Held { queue, id, worker, now }, error)) })
    }

    fn expire_work_leases<'a>(&'a self, queue: &'a str, now: Millis) -> StoreFuture<'a, u64> {
        Box::pin(async move { each!(self, |link| ops::work::expire(link, queue, now)) })
    }

    fn work_item<'a>(&'a self, queue: &'a str, id: &'a str) -> StoreFuture<'a, Option<WorkRecord>> {
        Box::pin(async move { each!(self, |link| ops::work::item(link, queue, id)) })
    }

    fn work_items<'a>(&'a self, queue: &'a str, state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>> {
        Box::pin(async move { each!(self, |link| ops::work::items(link, queue, state)) })
    }

    fn work_stats<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, WorkStats> {
        Box::pin(async move { each!(self, |link| ops::work::stats(link, queue)) })
    }

    fn purge_finished_work<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(async move { each!(self, |link| ops::work::purge(link, queue)) })
    }
}
