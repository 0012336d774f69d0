//! The embedded backend: one SQLite file in WAL mode, shared safely by several processes
//! (a worker and the CLI, say) through SQLite's own locking.
//!
//! The store's operations, written once for every backend, run here on two connections of
//! their own. Every write runs on one writer thread (`writer`), which commits concurrent
//! writes in groups, each group in a `BEGIN IMMEDIATE` transaction that takes the write
//! lock up front: a deferred transaction that upgraded later could fail with
//! `SQLITE_BUSY` instead of waiting its turn, and with one writing connection the process
//! never waits behind itself. Reads go through a `sqlx` pool.

mod link;
mod open;
mod repositories;
#[cfg(test)]
mod tests;
mod writer;

use crate::error::StoreError;
use crate::ops;
use crate::record::{Lease, Millis, NewRun, StoreInfo};
use crate::repository::{Store, StoreFuture};
use sqlx::SqlitePool;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The backend name [`StoreInfo::backend`] reports.
const BACKEND: &str = "sqlite";

/// A troupe store in a SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: writer::Writer,
    path: PathBuf,
    schema_version: i64,
}

impl SqliteStore {
    /// Opens the store in the file at `path`, creating the file (and its directory) and
    /// migrating the schema where needed.
    ///
    /// A file that is not a SQLite database ([`StoreError::Corrupt`]), a database of
    /// another application ([`StoreError::Foreign`]) or one from a newer troupe
    /// ([`StoreError::NewerSchema`]) is refused before anything is written to it; a path
    /// that cannot be opened gives [`StoreError::Unreachable`].
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let (pool, schema_version) = open::open(path).await?;
        let writer = match writer::Writer::start(path, open::BUSY_TIMEOUT) {
            Ok(writer) => writer,
            Err(error) => {
                pool.close().await;
                return Err(error);
            }
        };
        Ok(SqliteStore { pool, writer, path: path.to_owned(), schema_version })
    }

    /// The connection pool, for statements outside the repositories (benchmarks, tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Store for SqliteStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            backend: BACKEND.to_owned(),
            location: self.path.display().to_string(),
            schema_version: self.schema_version,
        }
    }

    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.writer.stop().await;
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
        let owner = owner.to_owned();
        Box::pin(self.writer.write(move |conn| {
            link::at_once(ops::runs::insert_leased_run(&mut link::Writing(conn), &run, &owner, ttl, now))
        }))
    }
}
