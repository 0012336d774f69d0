//! The run queue and its leases.

use super::{PostgresStore, db, expiry, get, is_foreign_key_violation};
use crate::error::StoreError;
use crate::record::{Lease, Millis, QueueEntry};
use crate::repository::{QueueRepository, StoreFuture};
use sqlx::postgres::{PgExecutor, PgRow};
use std::time::Duration;

/// Queues `run_id` from `available_at`, or moves it there if it waits unleased; a leased
/// run stays with its holder.
pub(super) async fn enqueue_on<'e>(
    executor: impl PgExecutor<'e>,
    run_id: &str,
    available_at: Millis,
) -> Result<(), StoreError> {
    let queued = sqlx::query(
        "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES ($1, $2, NULL, 0, NULL) \
         ON CONFLICT (run_id) DO UPDATE SET available_at = EXCLUDED.available_at WHERE run_queue.owner IS NULL",
    )
    .bind(run_id)
    .bind(available_at)
    .execute(executor)
    .await;
    match queued {
        Ok(_) => Ok(()),
        Err(e) if is_foreign_key_violation(&e) => Err(StoreError::UnknownRun { run_id: run_id.to_owned() }),
        Err(e) => Err(db(e)),
    }
}

/// Takes the lease of `run_id` for `owner` unless another owner holds it unexpired.
pub(super) async fn acquire_on<'e>(
    executor: impl PgExecutor<'e>,
    run_id: &str,
    owner: &str,
    ttl: Duration,
    now: Millis,
) -> Result<Option<Lease>, StoreError> {
    // The foreign key tells an unknown run: a queue row exists only for a stored run.
    let row = sqlx::query(
        "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES ($1, $4, $2, 1, $3) \
         ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, epoch = run_queue.epoch + 1, \
           expires_at = EXCLUDED.expires_at \
         WHERE run_queue.owner IS NULL OR run_queue.expires_at < $4 OR run_queue.owner = EXCLUDED.owner \
         RETURNING run_id, owner, epoch, expires_at",
    )
    .bind(run_id)
    .bind(owner)
    .bind(expiry(now, ttl))
    .bind(now)
    .fetch_optional(executor)
    .await;
    match row {
        Ok(row) => row.as_ref().map(lease_row).transpose(),
        Err(e) if is_foreign_key_violation(&e) => Err(StoreError::UnknownRun { run_id: run_id.to_owned() }),
        Err(e) => Err(db(e)),
    }
}

/// Gives `lease` up: the run leaves the queue, or goes back to it at `requeue_at`.
pub(super) async fn release_on<'e>(
    executor: impl PgExecutor<'e>,
    lease: &Lease,
    requeue_at: Option<Millis>,
) -> Result<(), StoreError> {
    let released = match requeue_at {
        None => sqlx::query("DELETE FROM run_queue WHERE run_id = $1 AND owner = $2 AND epoch = $3"),
        Some(_) => sqlx::query(
            "UPDATE run_queue SET owner = NULL, expires_at = NULL, available_at = $4 \
             WHERE run_id = $1 AND owner = $2 AND epoch = $3",
        ),
    };
    let mut released = released.bind(&lease.run_id).bind(&lease.owner).bind(lease.epoch);
    if let Some(at) = requeue_at {
        released = released.bind(at);
    }
    released.execute(executor).await.map_err(db)?;
    Ok(())
}

fn lease_row(row: &PgRow) -> Result<Lease, StoreError> {
    Ok(Lease {
        run_id: get(row, "run_id")?,
        owner: get(row, "owner")?,
        epoch: get(row, "epoch")?,
        expires_at: get(row, "expires_at")?,
    })
}

impl QueueRepository for PostgresStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        Box::pin(enqueue_on(&self.pool, run_id, available_at))
    }

    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            // SKIP LOCKED: concurrent claimers each lock a different candidate, and one
            // that finds its candidate claimed in the meantime moves to the next.
            let row = sqlx::query(
                "UPDATE run_queue SET owner = $1, epoch = epoch + 1, expires_at = $2 \
                 WHERE run_id = (SELECT run_id FROM run_queue \
                   WHERE available_at <= $3 AND (owner IS NULL OR expires_at < $3) \
                   ORDER BY available_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 RETURNING run_id, owner, epoch, expires_at",
            )
            .bind(owner)
            .bind(expiry(now, ttl))
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
            row.as_ref().map(lease_row).transpose()
        })
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(acquire_on(&self.pool, run_id, owner, ttl, now))
    }

    fn heartbeat<'a>(&'a self, lease: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let row = sqlx::query(
                "UPDATE run_queue SET expires_at = $4 WHERE run_id = $1 AND owner = $2 AND epoch = $3 \
                 RETURNING run_id, owner, epoch, expires_at",
            )
            .bind(&lease.run_id)
            .bind(&lease.owner)
            .bind(lease.epoch)
            .bind(expiry(now, ttl))
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
            row.as_ref().map(lease_row).transpose()
        })
    }

    fn release<'a>(&'a self, lease: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        Box::pin(release_on(&self.pool, lease, requeue_at))
    }

    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, available_at, owner, epoch, expires_at FROM run_queue ORDER BY available_at, run_id",
            )
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(QueueEntry {
                        run_id: get(row, "run_id")?,
                        available_at: get(row, "available_at")?,
                        owner: get(row, "owner")?,
                        epoch: get(row, "epoch")?,
                        expires_at: get(row, "expires_at")?,
                    })
                })
                .collect()
        })
    }
}
