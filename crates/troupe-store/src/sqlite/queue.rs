//! The run queue and its leases. Each change runs on the writer thread, one statement
//! each under SQLite's write lock, so claims are exclusive across tasks and processes
//! alike.

use super::runs::{unknown_run_or, upsert_queue};
use super::writer::execute;
use super::{SqliteStore, column, millis};
use crate::error::StoreError;
use crate::record::{Lease, Millis, QueueEntry};
use crate::repository::{QueueRepository, StoreFuture};
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::time::Duration;

impl QueueRepository for SqliteStore {
    fn enqueue<'a>(&'a self, run_id: &'a str, available_at: Millis) -> StoreFuture<'a, ()> {
        let run_id = run_id.to_owned();
        Box::pin(self.writer.write(move |conn| upsert_queue(conn, &run_id, available_at)))
    }

    fn claim<'a>(&'a self, owner: &'a str, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        let owner = owner.to_owned();
        Box::pin(self.writer.write(move |conn| {
            leased(
                conn,
                "UPDATE run_queue SET owner = ?1, epoch = epoch + 1, expires_at = ?2 \
                 WHERE run_id = (SELECT run_id FROM run_queue \
                                 WHERE available_at <= ?3 AND (owner IS NULL OR expires_at < ?3) \
                                 ORDER BY available_at, run_id LIMIT 1) \
                 RETURNING run_id, owner, epoch, expires_at",
                params![owner, now.saturating_add(millis(ttl)), now],
            )
            .map_err(StoreError::database)
        }))
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<Lease>> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        Box::pin(self.writer.write(move |conn| acquire_lease(conn, &run_id, &owner, ttl, now)))
    }

    fn heartbeat<'a>(&'a self, held: &'a Lease, ttl: Duration, now: Millis) -> StoreFuture<'a, Option<Lease>> {
        let held = held.clone();
        Box::pin(self.writer.write(move |conn| {
            leased(
                conn,
                "UPDATE run_queue SET expires_at = ?1 WHERE run_id = ?2 AND owner = ?3 AND epoch = ?4 \
                 RETURNING run_id, owner, epoch, expires_at",
                params![now.saturating_add(millis(ttl)), held.run_id, held.owner, held.epoch],
            )
            .map_err(StoreError::database)
        }))
    }

    fn release<'a>(&'a self, held: &'a Lease, requeue_at: Option<Millis>) -> StoreFuture<'a, ()> {
        let held = held.clone();
        Box::pin(self.writer.write(move |conn| release_lease(conn, &held, requeue_at)))
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
pub(super) fn acquire_lease(
    conn: &Connection,
    run_id: &str,
    owner: &str,
    ttl: Duration,
    now: Millis,
) -> Result<Option<Lease>, StoreError> {
    // No queue row can exist for a missing run, so the insert branch is taken and the
    // foreign key refuses it.
    leased(
        conn,
        "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES (?1, ?2, ?3, 1, ?4) \
         ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = run_queue.epoch + 1, \
             expires_at = excluded.expires_at \
         WHERE run_queue.owner IS NULL OR run_queue.expires_at < ?2 OR run_queue.owner = excluded.owner \
         RETURNING run_id, owner, epoch, expires_at",
        params![run_id, now, owner, now.saturating_add(millis(ttl))],
    )
    .map_err(|e| unknown_run_or(e, run_id))
}

/// Gives `held` up: the run leaves the queue, or goes back to it at `requeue_at`.
pub(super) fn release_lease(conn: &Connection, held: &Lease, requeue_at: Option<Millis>) -> Result<(), StoreError> {
    let released = match requeue_at {
        None => execute(
            conn,
            "DELETE FROM run_queue WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
            params![held.run_id, held.owner, held.epoch],
        ),
        Some(at) => execute(
            conn,
            "UPDATE run_queue SET owner = NULL, expires_at = NULL, available_at = ?4 \
             WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
            params![held.run_id, held.owner, held.epoch, at],
        ),
    };
    released.map_err(StoreError::database)?;
    Ok(())
}

/// Refuses to go on unless `held` is still the run's lease (a holder that was taken over
/// has a stale epoch). Expiry alone does not lose a lease nobody took over.
pub(super) fn check_fence(conn: &Connection, held: &Lease, run_id: &str) -> Result<(), StoreError> {
    // A lease fences only its own run.
    if held.run_id != run_id {
        return Err(StoreError::LeaseLost { run_id: run_id.to_owned(), owner: held.owner.clone() });
    }
    let found: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM run_queue WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3")
        .and_then(|mut select| select.query_row(params![held.run_id, held.owner, held.epoch], |r| r.get(0)).optional())
        .map_err(StoreError::database)?;
    match found {
        Some(_) => Ok(()),
        None => Err(StoreError::LeaseLost { run_id: held.run_id.clone(), owner: held.owner.clone() }),
    }
}

/// The lease a statement ending in `RETURNING run_id, owner, epoch, expires_at` returned.
fn leased(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<Option<Lease>> {
    conn.prepare_cached(sql)?.query_row(params, lease).optional()
}

fn lease(row: &Row<'_>) -> rusqlite::Result<Lease> {
    Ok(Lease { run_id: row.get(0)?, owner: row.get(1)?, epoch: row.get(2)?, expires_at: row.get(3)? })
}
