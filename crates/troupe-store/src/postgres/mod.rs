//! The PostgreSQL backend, for many workers on many machines sharing one database.
//!
//! Concurrency rests on PostgreSQL's own locks: a run's row lock orders its signals and
//! status changes, `FOR UPDATE SKIP LOCKED` hands each queued run (and each team work
//! item) to one claimer, a share lock on the queue row fences a checkpoint against a
//! takeover, and advisory locks serialize migrations and the numbering of conversation
//! turns.
//!
//! Lock order, to keep transactions from deadlocking: a run's queue row before its run
//! row.

mod connect;
mod log;
mod memory;
mod queue;
mod runs;
mod schedules;
#[cfg(test)]
mod tests;
mod work;

use crate::error::StoreError;
use crate::record::{Lease, Millis, NewRun, RunStatus, StoreInfo};
use crate::repository::{Store, StoreFuture};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgPool, PgRow, Postgres};
use std::time::Duration;

/// A store on a PostgreSQL database (or one schema of it).
///
/// Cloning is cheap: clones share the connection pool.
#[derive(Clone, Debug)]
pub struct PostgresStore {
    pool: PgPool,
    location: String,
    schema_version: i64,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`),
    /// creating or migrating troupe's tables in its current schema.
    ///
    /// A database of another application ([`StoreError::Foreign`]) or of a newer troupe
    /// ([`StoreError::NewerSchema`]) is left unchanged; a server that does not answer
    /// within 5 s is [`StoreError::Unreachable`].
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        connect::open(url, None).await
    }

    /// Connects as [`connect`](Self::connect) does, but keeps troupe's tables in `schema`
    /// (created if missing; lowercase letters, digits and `_` only): every pooled
    /// connection's `search_path` is that schema.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<PostgresStore, StoreError> {
        connect::open(url, Some(schema)).await
    }

    /// The connection pool, for statements of the caller's own.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl Store for PostgresStore {
    fn info(&self) -> StoreInfo {
        StoreInfo { backend: "postgres".into(), location: self.location.clone(), schema_version: self.schema_version }
    }

    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.pool.close().await;
            Ok(())
        })
    }

    fn create_leased_run<'a>(
        &'a self,
        run: NewRun,
        owner: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Lease> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            runs::insert_run(&mut tx, &run, now).await?;
            let lease = queue::acquire_on(&mut *tx, &run.id, owner, ttl, now)
                .await?
                .ok_or_else(|| StoreError::LeaseLost { run_id: run.id.clone(), owner: owner.to_owned() })?;
            tx.commit().await.map_err(db)?;
            Ok(lease)
        })
    }
}

fn db(error: sqlx::Error) -> StoreError {
    StoreError::database(error)
}

fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.is_unique_violation())
}

fn is_foreign_key_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.is_foreign_key_violation())
}

/// Column `column` of `row`; a value of the wrong type is a [`StoreError::Decode`].
fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(column).map_err(|e| StoreError::decode(format!("column `{column}`"), e))
}

/// A JSON document stored as text.
fn json_column(row: &PgRow, column: &str, what: impl FnOnce() -> String) -> Result<Value, StoreError> {
    let text: String = get(row, column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::decode(what(), e))
}

fn parse_status(name: &str, what: impl FnOnce() -> String) -> Result<RunStatus, StoreError> {
    RunStatus::parse(name).ok_or_else(|| StoreError::decode(what(), format!("unknown run status `{name}`")))
}

/// `now + ttl` in milliseconds, saturating.
fn expiry(now: i64, ttl: Duration) -> i64 {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// Holds `lease`'s queue row for the rest of the transaction (a takeover waits for it);
/// [`StoreError::LeaseLost`] unless the lease is still the run's.
async fn hold_fence(conn: &mut PgConnection, lease: &Lease) -> Result<(), StoreError> {
    let held = sqlx::query("SELECT 1 FROM run_queue WHERE run_id = $1 AND owner = $2 AND epoch = $3 FOR SHARE")
        .bind(&lease.run_id)
        .bind(&lease.owner)
        .bind(lease.epoch)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    match held {
        Some(_) => Ok(()),
        None => Err(lease_lost(&lease.run_id, lease)),
    }
}

fn lease_lost(run_id: &str, lease: &Lease) -> StoreError {
    StoreError::LeaseLost { run_id: run_id.to_owned(), owner: lease.owner.clone() }
}
