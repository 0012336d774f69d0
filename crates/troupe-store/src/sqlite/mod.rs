//! The embedded backend: one SQLite file in WAL mode, shared safely by several processes
//! (a worker and the CLI, say) through SQLite's own locking.
//!
//! The calls a running run makes (its creation and lease, checkpoints, evidence, signals,
//! the queue, schedule firings) run on one writer thread (`writer`), which commits
//! concurrent writes in groups. The rest — reads, conversations, memories, team work
//! items, schedule bookkeeping — goes through a `sqlx` pool. Every write that reads before
//! it writes runs in a `BEGIN IMMEDIATE` transaction, which takes the write lock up
//! front: a deferred transaction that upgraded later could fail with `SQLITE_BUSY`
//! instead of waiting its turn. Single-statement writes take the lock at their start
//! anyway, so they run on the pool directly.

mod evidence;
mod memory;
mod open;
mod queue;
mod runs;
mod schedules;
#[cfg(test)]
mod tests;
mod work;
mod writer;

use crate::error::StoreError;
use crate::record::{Lease, Millis, NewRun, StoreInfo};
use crate::repository::{Store, StoreFuture};
use sqlx::sqlite::{SqliteRow, SqliteTransaction};
use sqlx::{Row, Sqlite, SqlitePool};
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

    /// A transaction holding the database's write lock from its start.
    async fn begin_write(&self) -> Result<SqliteTransaction<'static>, StoreError> {
        self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(StoreError::database)
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
            runs::insert_run(conn, &run, now)?;
            queue::acquire_lease(conn, &run.id, &owner, ttl, now)?
                .ok_or_else(|| StoreError::LeaseLost { run_id: run.id.clone(), owner: owner.clone() })
        }))
    }
}

/// A duration in milliseconds, saturating at `i64::MAX`.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Whether `error` is the database refusing a duplicate key.
fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.is_unique_violation())
}

/// Whether `error` is the database refusing a duplicate key (on the writer thread).
fn is_unique(error: &rusqlite::Error) -> bool {
    let code = error.sqlite_error().map(|e| e.extended_code);
    matches!(code, Some(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY))
}

/// Whether `error` is the database refusing a reference to a missing row (on the writer
/// thread).
fn is_foreign_key(error: &rusqlite::Error) -> bool {
    error.sqlite_error().is_some_and(|e| e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
}

/// Column `column` of `row`, or a [`StoreError::Decode`] naming it.
fn column<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
{
    row.try_get(column).map_err(|e| StoreError::decode(format!("column `{column}`"), e))
}

/// The JSON document stored as text in `column` of `row`.
fn json_column(row: &SqliteRow, name: &str, what: impl FnOnce() -> String) -> Result<serde_json::Value, StoreError> {
    let text: String = column(row, name)?;
    serde_json::from_str(&text).map_err(|e| StoreError::decode(what(), e))
}

/// `value` as the JSON text stored for it.
fn json_text(value: &impl serde::Serialize, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::database(format!("cannot encode {what}: {e}")))
}
