//! Opening a SQLite store: refusing files that are not troupe databases before anything
//! is written to them, then migrating the schema.

use crate::error::StoreError;
use crate::schema::{APPLICATION, SCHEMA_VERSION, SQLITE_MIGRATIONS};
use crate::sql::Columns;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, SqliteConnection, SqlitePool};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// How long a statement waits for another process's write lock: workers and the CLI
/// share one file.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections per store: SQLite has one writer at a time, readers proceed alongside.
pub(super) const POOL_SIZE: u32 = 4;

/// How long a process racing to create the file waits before trying again.
const BUSY_RETRY: Duration = Duration::from_millis(25);

/// SQLite's primary result codes: locked by another connection, a damaged file, a file
/// that is no database.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_CORRUPT: i64 = 11;
const SQLITE_NOTADB: i64 = 26;

/// Opens the pool on `path` and migrates it; the schema version in force.
pub(super) async fn open(path: &Path) -> Result<(SqlitePool, i64), StoreError> {
    let location = path.display().to_string();
    match inspect_file(path, &location)? {
        Existing::Nothing => {}
        Existing::Database { idle_wal } => inspect_database(path, &location, idle_wal).await?,
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| unreachable(&location, e))?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT);
    let pool = connect_pool(options, &location).await?;
    match migrate(&pool, &location).await {
        Ok(version) => Ok((pool, version)),
        Err(error) => {
            pool.close().await;
            Err(error)
        }
    }
}

/// The read-write pool. Switching a new file to WAL mode takes an exclusive lock that
/// SQLite's busy timeout does not wait for, so processes racing to create the same file
/// retry here for as long as the busy timeout.
async fn connect_pool(options: SqliteConnectOptions, location: &str) -> Result<SqlitePool, StoreError> {
    let deadline = tokio::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match SqlitePoolOptions::new()
            .max_connections(POOL_SIZE)
            // A connection to a local file does not go stale: no round trip to test it
            // before each use.
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
        {
            Ok(pool) => return Ok(pool),
            Err(error) if is_busy(&error) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(BUSY_RETRY).await;
            }
            Err(error) => return Err(classify(location, error)),
        }
    }
}

/// Whether `error` is SQLite's `SQLITE_BUSY` or `SQLITE_LOCKED`: another connection holds a lock.
fn is_busy(error: &sqlx::Error) -> bool {
    matches!(primary_code(error), Some(SQLITE_BUSY | SQLITE_LOCKED))
}

/// The primary result code of a SQLite error.
fn primary_code(error: &sqlx::Error) -> Option<i64> {
    let sqlx::Error::Database(e) = error else { return None };
    e.code().and_then(|code| code.parse::<i64>().ok()).map(|code| code & 0xff)
}

/// What is at the store's path before it is opened.
enum Existing {
    /// No file, or an empty one: a new database.
    Nothing,
    /// A SQLite database, to inspect.
    Database {
        /// The file is in WAL mode and has no `-wal` file: no process has it open.
        idle_wal: bool,
    },
}

/// Checks what is at `path` without SQLite.
fn inspect_file(path: &Path, location: &str) -> Result<Existing, StoreError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Nothing),
        Err(e) => return Err(unreachable(location, e)),
    };
    if !metadata.is_file() {
        return Err(StoreError::Unreachable {
            location: location.to_owned(),
            reason: "it is not a regular file".into(),
        });
    }
    if metadata.len() == 0 {
        return Ok(Existing::Nothing);
    }
    // The magic string, then the page size (2 bytes), then the write and read format
    // versions: 2 and 2 in WAL mode.
    let mut header = Vec::with_capacity(20);
    std::fs::File::open(path)
        .and_then(|file| file.take(20).read_to_end(&mut header))
        .map_err(|e| unreachable(location, e))?;
    if !header.starts_with(SQLITE_HEADER) {
        return Err(StoreError::Corrupt { location: location.to_owned() });
    }
    let wal_mode = header.get(18..20) == Some(&[2, 2]);
    let wal_file = PathBuf::from(format!("{}-wal", path.display()));
    Ok(Existing::Database { idle_wal: wal_mode && !wal_file.exists() })
}

/// Reads an existing database without writing to it, refusing one that is not a troupe
/// database this build understands.
async fn inspect_database(path: &Path, location: &str, idle_wal: bool) -> Result<(), StoreError> {
    // Even a read-only connection creates `-wal` and `-shm` files for a WAL database
    // that has none, and leaves them behind. With no `-wal` file nobody has the
    // database open and everything is in the main file, so it is read as immutable,
    // which creates nothing. (A process opening it in these milliseconds writes to its
    // new WAL, not to the pages read here.)
    let options =
        SqliteConnectOptions::new().filename(path).read_only(true).immutable(idle_wal).busy_timeout(BUSY_TIMEOUT);
    let mut conn = options.connect().await.map_err(|e| classify(location, e))?;
    let verdict = troupe_version(&mut conn, location).await;
    // The connection was read-only: closing it cannot fail in a way that matters here.
    let _ = conn.close().await;
    verdict.map(|_| ())
}

/// The troupe schema version of the database behind `conn` (0 for an empty database),
/// or why it is not one this build may open.
async fn troupe_version(conn: &mut SqliteConnection, location: &str) -> Result<i64, StoreError> {
    let objects: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| classify(location, e))?;
    if objects == 0 {
        return Ok(0);
    }
    let foreign = || StoreError::Foreign { location: location.to_owned() };
    let has_meta: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'troupe_meta'")
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| classify(location, e))?;
    if has_meta == 0 {
        return Err(foreign());
    }
    let rows = sqlx::query("SELECT key, value FROM troupe_meta WHERE key IN ('application', 'schema_version')")
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| classify(location, e))?;
    let mut application = None;
    let mut version = None;
    for row in &rows {
        let key = row.text("key")?;
        let value = row.text("value").map_err(|_| foreign())?;
        match key.as_str() {
            "application" => application = Some(value),
            _ => version = Some(value),
        }
    }
    if application.as_deref() != Some(APPLICATION) {
        return Err(foreign());
    }
    let found = match version {
        Some(text) => text.trim().parse::<i64>().map_err(|e| StoreError::decode("schema version", e))?,
        None => 0,
    };
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { location: location.to_owned(), found, supported: SCHEMA_VERSION });
    }
    Ok(found)
}

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction, checking again under the
/// write lock: another process may have migrated (or claimed) the file meanwhile.
async fn migrate(pool: &SqlitePool, location: &str) -> Result<i64, StoreError> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(|e| classify(location, e))?;
    let current = troupe_version(&mut tx, location).await?;
    if current == SCHEMA_VERSION {
        tx.rollback().await.map_err(StoreError::database)?;
        return Ok(current);
    }
    for step in SQLITE_MIGRATIONS.iter().filter(|step| step.version > current) {
        sqlx::raw_sql(step.sql).execute(&mut *tx).await.map_err(|e| {
            StoreError::database(format!("migrating {location} to schema version {}: {e}", step.version))
        })?;
    }
    let upsert = "INSERT INTO troupe_meta (key, value) VALUES (?, ?) \
                  ON CONFLICT (key) DO UPDATE SET value = excluded.value";
    sqlx::query(upsert).bind("application").bind(APPLICATION).execute(&mut *tx).await.map_err(StoreError::database)?;
    sqlx::query(upsert)
        .bind("schema_version")
        .bind(SCHEMA_VERSION.to_string())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::database)?;
    tx.commit().await.map_err(StoreError::database)?;
    tracing::info!(location, from = current, to = SCHEMA_VERSION, "migrated the store's schema");
    Ok(SCHEMA_VERSION)
}

/// A driver error while opening: a damaged file, or one that cannot be opened.
fn classify(location: &str, error: sqlx::Error) -> StoreError {
    if matches!(primary_code(&error), Some(SQLITE_CORRUPT | SQLITE_NOTADB)) {
        return StoreError::Corrupt { location: location.to_owned() };
    }
    if let sqlx::Error::Database(e) = &error {
        return StoreError::Unreachable { location: location.to_owned(), reason: e.message().to_owned() };
    }
    unreachable(location, error)
}

fn unreachable(location: &str, reason: impl std::fmt::Display) -> StoreError {
    StoreError::Unreachable { location: location.to_owned(), reason: reason.to_string() }
}
