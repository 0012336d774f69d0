//! The per-backend part of the suite: how each backend's database is set up for one test,
//! reached with raw SQL through its `pool()`, and removed afterwards.

use super::harness::{Backend, BoxFuture, run_isolated};
use std::future::Future;
use std::sync::Arc;

/// Runs one conformance test on a fresh SQLite file.
#[cfg(feature = "sqlite")]
pub mod sqlite {
    use super::*;
    use std::path::PathBuf;
    use troupe_store::Store;
    use troupe_store::sqlite::SqliteStore;

    struct SqliteBackend {
        path: PathBuf,
        store: Arc<dyn Store>,
        // Opened on first use: most tests never need raw SQL.
        raw: tokio::sync::OnceCell<SqliteStore>,
    }

    impl SqliteBackend {
        async fn raw(&self) -> &SqliteStore {
            self.raw
                .get_or_init(|| async {
                    SqliteStore::open(&self.path).await.expect("a second SqliteStore opens on the same file")
                })
                .await
        }
    }

    impl Backend for SqliteBackend {
        fn name(&self) -> &'static str {
            "sqlite"
        }

        fn store(&self) -> Arc<dyn Store> {
            Arc::clone(&self.store)
        }

        fn open_another(&self) -> BoxFuture<'_, Arc<dyn Store>> {
            Box::pin(async {
                let path = self.path.to_str().expect("the temp path is UTF-8");
                troupe_store::open(path).await.expect("a second store opens on the same file")
            })
        }

        fn execute<'a>(&'a self, sql: &'a str) -> BoxFuture<'a, Result<u64, String>> {
            Box::pin(async move {
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(self.raw().await.pool())
                    .await
                    .map(|done| done.rows_affected())
                    .map_err(|error| error.to_string())
            })
        }
    }

    /// Runs `test` on a store in a new temporary file.
    pub async fn run<F, Fut>(test: F)
    where
        F: FnOnce(Arc<dyn Backend>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("troupe.db");
        let store = troupe_store::open(path.to_str().expect("the temp path is UTF-8"))
            .await
            .expect("a fresh SQLite store opens");
        let backend = Arc::new(SqliteBackend { path, store, raw: tokio::sync::OnceCell::new() });
        let outcome = run_isolated(Box::pin(test(backend.clone()))).await;
        let _ = backend.store.close().await;
        if let Some(raw) = backend.raw.get() {
            let _ = raw.close().await;
        }
        drop(backend);
        drop(dir);
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}

/// Runs one conformance test in a schema of its own on the PostgreSQL server named by
/// `TROUPE_TEST_DATABASE_URL`, dropped afterwards.
#[cfg(feature = "postgres")]
pub mod postgres {
    use super::*;
    use troupe_store::Store;
    use troupe_store::postgres::PostgresStore;

    /// The variable naming the server the PostgreSQL tests use.
    pub const URL_VARIABLE: &str = "TROUPE_TEST_DATABASE_URL";

    struct PostgresBackend {
        url: String,
        schema: String,
        store: Arc<PostgresStore>,
    }

    impl Backend for PostgresBackend {
        fn name(&self) -> &'static str {
            "postgres"
        }

        fn store(&self) -> Arc<dyn Store> {
            self.store.clone()
        }

        fn open_another(&self) -> BoxFuture<'_, Arc<dyn Store>> {
            Box::pin(async {
                let store = PostgresStore::connect_in_schema(&self.url, &self.schema)
                    .await
                    .expect("a second store connects in the same schema");
                Arc::new(store) as Arc<dyn Store>
            })
        }

        fn execute<'a>(&'a self, sql: &'a str) -> BoxFuture<'a, Result<u64, String>> {
            Box::pin(async move {
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(self.store.pool())
                    .await
                    .map(|done| done.rows_affected())
                    .map_err(|error| error.to_string())
            })
        }
    }

    /// Runs `test` in a new schema, or skips it when no server is configured.
    pub async fn run<F, Fut>(test: F)
    where
        F: FnOnce(Arc<dyn Backend>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Ok(url) = std::env::var(URL_VARIABLE) else {
            troupe_testkit::skip(
                "a PostgreSQL conformance test",
                &format!("{URL_VARIABLE} is not set (e.g. postgres://postgres@127.0.0.1:5432/test)"),
            );
            return;
        };
        let schema = format!("troupe_c_{}", uuid::Uuid::new_v4().simple());
        let store =
            PostgresStore::connect_in_schema(&url, &schema).await.expect("the test schema is created and migrated");
        let backend = Arc::new(PostgresBackend { url, schema, store: Arc::new(store) });
        let outcome = run_isolated(Box::pin(test(backend.clone()))).await;
        let drop_schema = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", backend.schema);
        let dropped = sqlx::query(sqlx::AssertSqlSafe(drop_schema)).execute(backend.store.pool()).await;
        let _ = backend.store.close().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
        if let Err(error) = dropped {
            panic!("the test schema {} could not be dropped: {error}", backend.schema);
        }
    }
}
