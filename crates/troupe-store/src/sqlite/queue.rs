//! The run queue and its leases. Each operation is a single statement, so SQLite's write
//! lock makes claims exclusive across tasks and processes alike.

use super::runs::upsert_queue;
use super::{SqliteStore, column, is_foreign_key_violation, millis};
use crate::error::StoreError;
use crate::record::{Lease, Millis, QueueEntry};
use crate::repository::{QueueRepository, StoreFuture};
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use std::time::Duration;

impl QueueRepository for SqliteStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await.map_err(StoreError::database)?;
            upsert_queue(&mut conn, run_id, available_at).await
        })
    }

    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let row = sqlx::query(
                "UPDATE run_queue SET owner = ?1, epoch = epoch + 1, expires_at = ?2 \
                 WHERE run_id = (SELECT run_id FROM run_queue \
                                 WHERE available_at <= ?3 AND (owner IS NULL OR expires_at < ?3) \
                                 ORDER BY available_at, run_id LIMIT 1) \
                 RETURNING run_id, owner, epoch, expires_at",
            )
            .bind(owner)
            .bind(now.saturating_add(millis(ttl)))
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)?;
            row.as_ref().map(lease).transpose()
        })
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await.map_err(StoreError::database)?;
            acquire_lease(&mut conn, run_id, owner, ttl, now).await
        })
    }

    fn heartbeat<'a>(&'a self, held: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let row = sqlx::query(
                "UPDATE run_queue SET expires_at = ? WHERE run_id = ? AND owner = ? AND epoch = ? \
                 RETURNING run_id, owner, epoch, expires_at",
            )
            .bind(now.saturating_add(millis(ttl)))
            .bind(&held.run_id)
            .bind(&held.owner)
            .bind(held.epoch)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)?;
            row.as_ref().map(lease).transpose()
        })
    }

    fn release<'a>(&'a self, held: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await.map_err(StoreError::database)?;
            release_lease(&mut conn, held, requeue_at).await
        })
    }

    fn queue(&self) -> StoreFuture<'_, Vec<QueueEntry>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, available_at, owner, epoch, expires_at FROM run_queue ORDER BY available_at, run_id",
            )
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    Ok(QueueEntry {
                        run_id: column(row, "run_id")?,
                        available_at: column(row, "available_at")?,
                        owner: column(row, "owner")?,
                        epoch: column(row, "epoch")?,
                        expires_at: column(row, "expires_at")?,
                    })
                })
                .collect()
        })
    }
}

/// Takes the lease of `run_id` for `owner` unless another owner holds it unexpired.
pub(super) async fn acquire_lease(
    conn: &mut SqliteConnection,
    run_id: &str,
    owner: &str,
    ttl: Duration,
    now: Millis,
) -> Result<Option<Lease>, StoreError> {
    // No queue row can exist for a missing run, so the insert branch is taken and the
    // foreign key refuses it.
    let row = sqlx::query(
        "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES (?1, ?2, ?3, 1, ?4) \
         ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = run_queue.epoch + 1, \
             expires_at = excluded.expires_at \
         WHERE run_queue.owner IS NULL OR run_queue.expires_at < ?2 OR run_queue.owner = excluded.owner \
         RETURNING run_id, owner, epoch, expires_at",
    )
    .bind(run_id)
    .bind(now)
    .bind(owner)
    .bind(now.saturating_add(millis(ttl)))
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| {
        if is_foreign_key_violation(&e) {
            StoreError::UnknownRun { run_id: run_id.to_owned() }
        } else {
            StoreError::database(e)
        }
    })?;
    row.as_ref().map(lease).transpose()
}

/// Gives `held` up: the run leaves the queue, or goes back to it at `requeue_at`.
pub(super) async fn release_lease(
    conn: &mut SqliteConnection,
    held: &Lease,
    requeue_at: Option<Millis>,
) -> Result<(), StoreError> {
    let query = match requeue_at {
        None => sqlx::query("DELETE FROM run_queue WHERE run_id = ? AND owner = ? AND epoch = ?"),
        Some(at) => sqlx::query(
            "UPDATE run_queue SET owner = NULL, expires_at = NULL, available_at = ? \
             WHERE run_id = ? AND owner = ? AND epoch = ?",
        )
        .bind(at),
    };
    query
        .bind(&held.run_id)
        .bind(&held.owner)
        .bind(held.epoch)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::database)?;
    Ok(())
}

/// Refuses to go on unless `held` is still the run's lease (a holder that was taken over
/// has a stale epoch). Expiry alone does not lose a lease nobody took over.
pub(super) async fn check_fence(conn: &mut SqliteConnection, held: &Lease, run_id: &str) -> Result<(), StoreError> {
    // A lease fences only its own run.
    if held.run_id != run_id {
        return Err(StoreError::LeaseLost { run_id: run_id.to_owned(), owner: held.owner.clone() });
    }
    let found = sqlx::query("SELECT 1 FROM run_queue WHERE run_id = ? AND owner = ? AND epoch = ?")
        .bind(&held.run_id)
        .bind(&held.owner)
        .bind(held.epoch)
        .fetch_optional(&mut *conn)
        .await
        .map_err(StoreError::database)?;
    match found {
        Some(_) => Ok(()),
        None => Err(StoreError::LeaseLost { run_id: held.run_id.clone(), owner: held.owner.clone() }),
    }
}

fn lease(row: &SqliteRow) -> Result<Lease, StoreError> {
    Ok(Lease {
        run_id: column(row, "run_id")?,
        owner: column(row, "owner")?,
        epoch: column(row, "epoch")?,
        expires_at: column(row, "expires_at")?,
    })
}
