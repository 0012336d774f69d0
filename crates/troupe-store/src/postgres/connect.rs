//! Connecting: the first connection checks whose database it is and migrates it, then
//! serves as the first of the store's [`Connections`].

use super::connections::{Connections, MAX_CONNECTIONS};
use super::{PostgresStore, db};
use crate::error::{StoreError, redact_location};
use crate::schema::{APPLICATION, POSTGRES_MIGRATIONS, SCHEMA_VERSION, TABLES};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, Row};
use std::sync::Arc;
use std::time::Duration;

/// How long connecting (and, later, waiting for a pooled connection) may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A pooled connection that was in use this recently is handed out as it is; one idle for
/// longer is pinged first, since a server restart or a proxy's idle limit may have closed
/// it. sqlx pings every connection it hands out by default: a round trip more for every
/// transaction, about a fifth of a busy run's round trips. (The store's own statements go
/// through [`Connections`], which keeps the same rule; [`PostgresStore::pool`] keeps it
/// too.)
pub(super) const TRUSTED_IDLE: Duration = Duration::from_millis(500);

/// The advisory lock every troupe worker takes to create a schema or migrate, so workers
/// starting at once migrate one at a time ("troupe" in ASCII, then 1).
pub(super) const MIGRATION_LOCK: i64 = 0x7472_6f75_7065_0001;

pub(super) async fn open(url: &str, schema: Option<&str>) -> Result<PostgresStore, StoreError> {
    let location = redact_location(url);
    if let Some(schema) = schema {
        check_schema_name(schema, &location)?;
    }
    let options: PgConnectOptions = url.parse().map_err(|_| StoreError::InvalidUrl { url: location.clone() })?;
    let unreachable = |reason: &dyn std::fmt::Display| StoreError::Unreachable {
        location: location.clone(),
        reason: scrub(&reason.to_string(), url),
    };
    // Quoted, and the name was checked: nothing in it can end the identifier.
    let set_path: Option<Arc<str>> = schema.map(|s| format!("SET search_path TO \"{s}\"").into());

    // A connection of its own, not the pool's: the pool retries a refused connection
    // until its timeout and then reports only that it timed out.
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
        .await
        .map_err(|_| unreachable(&format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| unreachable(&e))?;
    let schema_version = match prepare(&mut conn, schema, set_path.clone(), &location).await {
        Ok(version) => version,
        Err(error) => {
            let _ = conn.close().await;
            return Err(error);
        }
    };

    // The store's statements: its own pool, which the connection that prepared the schema
    // joins (its `search_path` is set already).
    let connections =
        Connections::new(options.clone(), set_path.clone(), url, location.clone(), MAX_CONNECTIONS, Some(conn));
    // The caller's statements: a sqlx pool, which opens no connection until it is used.
    let mut pool_options = PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS as u32)
        .acquire_timeout(CONNECT_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= TRUSTED_IDLE {
                    // A failed ping closes the connection; the pool takes or opens another.
                    conn.ping().await?;
                }
                Ok(true)
            })
        });
    if let Some(set_path) = set_path {
        pool_options = pool_options.after_connect(move |conn, _| {
            let set_path = Arc::clone(&set_path);
            Box::pin(async move { sqlx::raw_sql(AssertSqlSafe(set_path)).execute(conn).await.map(drop) })
        });
    }
    let pool = pool_options.connect_lazy_with(options);
    Ok(PostgresStore { pool, connections, location, schema_version })
}

fn check_schema_name(schema: &str, location: &str) -> Result<(), StoreError> {
    let valid = !schema.is_empty()
        && schema.len() <= 63
        && schema.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(StoreError::InvalidUrl { url: format!("{location} (schema `{schema}`: use a-z, 0-9 and _ only)") })
    }
}

/// Makes the connection's schema a troupe schema of the current version: the version
/// in force.
async fn prepare(
    conn: &mut PgConnection,
    schema: Option<&str>,
    set_path: Option<Arc<str>>,
    location: &str,
) -> Result<i64, StoreError> {
    if let (Some(schema), Some(set_path)) = (schema, set_path) {
        create_schema(conn, schema).await?;
        sqlx::raw_sql(AssertSqlSafe(set_path)).execute(&mut *conn).await.map_err(db)?;
    }
    if let Some(found) = stored_version(conn, location).await?
        && found == SCHEMA_VERSION
    {
        return Ok(found);
    }
    migrate(conn, location).await
}

async fn create_schema(conn: &mut PgConnection, schema: &str) -> Result<(), StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    if exists {
        return Ok(());
    }
    // Two workers creating the same schema at once would collide in the catalog.
    let mut tx = conn.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(MIGRATION_LOCK).execute(&mut *tx).await.map_err(db)?;
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"")))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    tx.commit().await.map_err(db)
}

/// The schema version of the troupe tables in the current schema (`None` when there are
/// none); an error for another application's tables or a newer troupe's.
async fn stored_version(conn: &mut PgConnection, location: &str) -> Result<Option<i64>, StoreError> {
    let present: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relname = ANY($1)",
    )
    .bind(TABLES)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let foreign = || StoreError::Foreign { location: location.to_owned() };
    if !present.iter().any(|t| t == "troupe_meta") {
        return if present.is_empty() { Ok(None) } else { Err(foreign()) };
    }
    let rows = sqlx::query("SELECT key, value FROM troupe_meta WHERE key IN ('application', 'schema_version')")
        .fetch_all(&mut *conn)
        .await
        .map_err(|_| foreign())?;
    let mut application = None;
    let mut version = None;
    for row in &rows {
        let key: String = row.try_get("key").map_err(|_| foreign())?;
        let value: String = row.try_get("value").map_err(|_| foreign())?;
        if key == "application" {
            application = Some(value);
        } else {
            version = Some(value);
        }
    }
    if application.as_deref() != Some(APPLICATION) {
        return Err(foreign());
    }
    let version = version.unwrap_or_default();
    let found: i64 = version
        .trim()
        .parse()
        .map_err(|_| StoreError::decode("store schema version", format!("`{version}` is not a version number")))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { location: location.to_owned(), found, supported: SCHEMA_VERSION });
    }
    Ok(Some(found))
}

/// Brings the current schema to [`SCHEMA_VERSION`] in one transaction, holding the
/// migration lock and reading the version again under it: another worker may have
/// migrated while this one waited.
async fn migrate(conn: &mut PgConnection, location: &str) -> Result<i64, StoreError> {
    let mut tx = conn.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(MIGRATION_LOCK).execute(&mut *tx).await.map_err(db)?;
    let found = stored_version(&mut tx, location).await?.unwrap_or(0);
    if found >= SCHEMA_VERSION {
        return Ok(found);
    }
    for step in POSTGRES_MIGRATIONS.iter().filter(|m| m.version > found) {
        sqlx::raw_sql(step.sql).execute(&mut *tx).await.map_err(db)?;
    }
    sqlx::query(
        "INSERT INTO troupe_meta (key, value) VALUES ('application', $1), ('schema_version', $2) \
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    )
    .bind(APPLICATION)
    .bind(SCHEMA_VERSION.to_string())
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(SCHEMA_VERSION)
}

/// The driver's message with every form of the URL's password masked, should the driver
/// echo the URL or the password.
pub(super) fn scrub(reason: &str, url: &str) -> String {
    let mut text = reason.replace(url, &redact_location(url));
    for secret in passwords(url) {
        text = text.replace(&secret, "***");
    }
    text
}

/// The passwords in `url` (in its user info and as a `password` query parameter), as
/// written and percent-decoded.
fn passwords(url: &str) -> Vec<String> {
    let Some((_, rest)) = url.split_once("://") else { return Vec::new() };
    let (authority, tail) = rest.find(['/', '?']).map_or((rest, ""), |i| rest.split_at(i));
    let mut found = Vec::new();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
    {
        found.push(password.to_owned());
    }
    if let Some((_, query)) = tail.split_once('?') {
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=')
                && key.eq_ignore_ascii_case("password")
            {
                found.push(value.to_owned());
            }
        }
    }
    let decoded: Vec<String> = found.iter().map(|p| percent_decode(p)).collect();
    found.extend(decoded);
    found.retain(|p| !p.is_empty());
    // Longest first, so no shorter one masks part of a longer one and leaves the rest.
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.dedup();
    found
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbed_reasons_hold_no_password() {
        let url = "postgres://u:s%40cret@h/db?password=other";
        let reason = format!("error with {url}: s@cret, other, s%40cret");
        let scrubbed = scrub(&reason, url);
        assert!(!scrubbed.contains("cret") && !scrubbed.contains("other"), "{scrubbed}");
        assert_eq!(scrub("connection refused", "postgres://u@h/db"), "connection refused");
    }

    #[test]
    fn schema_names_are_checked() {
        assert!(check_schema_name("troupe_t_1", "x").is_ok());
        for bad in ["", "Upper", "a-b", "a\"b", "a b", &"x".repeat(64)] {
            assert!(matches!(check_schema_name(bad, "x"), Err(StoreError::InvalidUrl { .. })), "{bad}");
        }
    }
}
