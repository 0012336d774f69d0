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
mod connections;
#[cfg(test)]
mod connections_tests;
mod link;
mod repositories;
#[cfg(test)]
mod tests;

use crate::error::StoreError;
use crate::ops;
use crate::record::{Lease, Millis, NewRun, StoreInfo};
use crate::repository::{Store, StoreFuture};
use connections::{Connections, each};
use sqlx::postgres::PgPool;
use std::time::Duration;

/// A store on a PostgreSQL database (or one schema of it).
///
/// Cloning is cheap: clones share the connection pool.
#[derive(Clone, Debug)]
pub struct PostgresStore {
    /// The caller's pool ([`PostgresStore::pool`]).
    pool: PgPool,
    /// The store's own statements' pool.
    connections: Connections,
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

    /// A connection pool for statements of the caller's own, on the same database (and
    /// schema); it opens its first connection when first used. The store's own
    /// statements run on a pool of their own.
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
            self.connections.close().await;
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
        // One statement here (a `WITH` writes the run, its input, its transition and its
        // lease): atomic on its own, with no transaction to open and commit around it.
        Box::pin(async move { each!(self, |link| ops::runs::insert_leased_run(link, &run, owner, ttl, now)) })
    }
}

fn db(error: sqlx::Error) -> StoreError {
    StoreError::database(error)
}
