//! Opening a store by URL: what is created, and what is refused with a one-line error and
//! left exactly as it was.

#[cfg(feature = "postgres")]
use std::time::{Duration, Instant};
use troupe_store::StoreError;

/// Every error a person may see is one line.
fn assert_one_line(error: &StoreError) {
    let shown = error.to_string();
    assert!(!shown.is_empty() && !shown.contains('\n'), "the message is one line: {shown:?}");
}

async fn open_err(url: &str) -> StoreError {
    match troupe_store::open(url).await {
        Ok(store) => panic!("`{url}` opened as {:?}, but it should have been refused", store.info()),
        Err(error) => error,
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    use sqlx::{ConnectOptions, Connection};
    use std::path::{Path, PathBuf};
    use troupe_store::schema::SCHEMA_VERSION;
    use troupe_store::{NewRun, RunStatus, Store, now_millis};

    /// The files SQLite writes beside a database it opened for writing.
    fn sidecars(path: &Path) -> Vec<PathBuf> {
        ["-wal", "-shm", "-journal"]
            .iter()
            .map(|suffix| {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            })
            .filter(|sidecar| sidecar.exists())
            .collect()
    }

    fn url(path: &Path) -> &str {
        path.to_str().expect("the temp path is UTF-8")
    }

    fn run(id: &str) -> NewRun {
        NewRun {
            id: id.to_owned(),
            agent: "coder".into(),
            status: RunStatus::Running,
            conversation_id: None,
            parent_run_id: None,
            input: serde_json::json!({}),
            state: serde_json::json!({}),
        }
    }

    #[tokio::test]
    async fn garbage_file_is_corrupt_and_left_unchanged() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("troupe.db");
        let garbage: Vec<u8> = b"this is not a database, only bytes \x00\x01\xfe\xff\n".repeat(200);
        std::fs::write(&path, &garbage).expect("the garbage file is written");

        let error = open_err(url(&path)).await;
        assert!(matches!(&error, StoreError::Corrupt { .. }), "expected Corrupt, got {error:?}");
        assert_one_line(&error);
        assert!(error.to_string().contains("troupe.db"), "the message names the file: {error}");
        assert_eq!(std::fs::read(&path).expect("the file is still there"), garbage, "the file was left unchanged");
        assert_eq!(sidecars(&path), Vec::<PathBuf>::new(), "no journal or WAL file was created");
    }

    #[tokio::test]
    async fn foreign_database_is_refused_and_left_unchanged() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("app.db");
        let mut connection = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Delete)
            .connect()
            .await
            .expect("a plain SQLite database is created");
        sqlx::query("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            .execute(&mut connection)
            .await
            .expect("the foreign table is created");
        sqlx::query("INSERT INTO users (name) VALUES ('ada')").execute(&mut connection).await.expect("a row");
        connection.close().await.expect("the foreign connection closes");
        let before = std::fs::read(&path).expect("the foreign database is readable");

        let error = open_err(&format!("sqlite://{}", url(&path))).await;
        assert!(matches!(&error, StoreError::Foreign { .. }), "expected Foreign, got {error:?}");
        assert_one_line(&error);
        assert_eq!(std::fs::read(&path).expect("the file is still there"), before, "the file was left unchanged");
        assert_eq!(sidecars(&path), Vec::<PathBuf>::new(), "no journal or WAL file was left behind");
    }

    #[tokio::test]
    async fn newer_schema_is_refused_and_left_unchanged() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("troupe.db");
        let store = troupe_store::sqlite::SqliteStore::open(&path).await.expect("a troupe store is created");
        let bumped = sqlx::query("UPDATE troupe_meta SET value = '99' WHERE key = 'schema_version'")
            .execute(store.pool())
            .await
            .expect("the schema version is raised");
        assert_eq!(bumped.rows_affected(), 1, "troupe_meta holds the schema version");
        // Move everything out of the WAL into the main file, so the bytes compared below are
        // the whole database and not whatever part of it was checkpointed so far.
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(store.pool()).await.expect("the WAL is checkpointed");
        store.close().await.expect("the store closes");
        let before = std::fs::read(&path).expect("the database is readable");

        let error = open_err(url(&path)).await;
        assert!(
            matches!(&error, StoreError::NewerSchema { found: 99, supported, .. } if *supported == SCHEMA_VERSION),
            "expected NewerSchema 99, got {error:?}"
        );
        assert_one_line(&error);
        assert_eq!(std::fs::read(&path).expect("the file is still there"), before, "the file was left unchanged");
    }

    #[tokio::test]
    async fn a_fresh_path_in_a_missing_directory_is_created_and_migrated() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("workspace").join(".troupe").join("troupe.db");
        let store = troupe_store::open(url(&path)).await.expect("a store is created where nothing was");
        assert!(path.is_file(), "the database file exists");
        let info = store.info();
        assert_eq!((info.backend.as_str(), info.schema_version), ("sqlite", SCHEMA_VERSION));
        store.create_run(run("run-1"), now_millis()).await.expect("the new store is usable");
        store.close().await.expect("the store closes");

        let reopened = troupe_store::open(&format!("sqlite://{}", url(&path))).await.expect("the store reopens");
        assert!(reopened.load_run("run-1").await.expect("load_run").is_some(), "what was stored is still there");
        reopened.close().await.expect("the store closes");
    }

    #[tokio::test]
    async fn opening_twice_is_fine() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("troupe.db");
        let (first, second) = tokio::join!(troupe_store::open(url(&path)), troupe_store::open(url(&path)));
        let first = first.expect("the first store opens");
        let second = second.expect("a second store opens on the same file at the same time");
        first.create_run(run("run-a"), now_millis()).await.expect("the first store writes");
        second.create_run(run("run-b"), now_millis()).await.expect("the second store writes");
        assert!(second.load_run("run-a").await.expect("load_run").is_some(), "each sees the other's runs");
        assert!(first.load_run("run-b").await.expect("load_run").is_some(), "each sees the other's runs");
        let third = troupe_store::open(url(&path)).await.expect("an opened, migrated store opens again");
        assert_eq!(third.info().schema_version, SCHEMA_VERSION);
        for store in [first, second, third] {
            store.close().await.expect("the store closes");
        }
    }
}

#[tokio::test]
async fn a_url_of_another_database_is_invalid() {
    let error = open_err("mysql://troupe:secret@127.0.0.1/runs").await;
    assert!(matches!(&error, StoreError::InvalidUrl { .. }), "expected InvalidUrl, got {error:?}");
    assert_one_line(&error);
    assert!(!error.to_string().contains("secret"), "the password is not shown: {error}");
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn an_unreachable_server_is_reported_without_its_password() {
    let started = Instant::now();
    let opened =
        tokio::time::timeout(Duration::from_secs(60), troupe_store::open("postgres://troupe:secret@127.0.0.1:1/none"));
    let error = match opened.await.expect("an unreachable server is reported within a minute") {
        Ok(store) => panic!("nothing listens on port 1, yet a store opened: {:?}", store.info()),
        Err(error) => error,
    };
    assert!(matches!(&error, StoreError::Unreachable { .. }), "expected Unreachable, got {error:?}");
    assert_one_line(&error);
    let shown = error.to_string();
    assert!(!shown.contains("secret"), "the password is not shown: {shown}");
    assert!(!format!("{error:?}").contains("secret"), "nor in the debug form: {error:?}");
    assert!(shown.contains("127.0.0.1"), "the message says where: {shown}");
    eprintln!("an unreachable server was reported after {:?}", started.elapsed());
}

#[cfg(not(feature = "postgres"))]
#[tokio::test]
async fn a_postgres_url_without_the_backend_says_so() {
    let error = open_err("postgres://troupe:secret@127.0.0.1:1/none").await;
    assert!(matches!(&error, StoreError::BackendDisabled { backend: "postgres" }), "got {error:?}");
    assert_one_line(&error);
}

#[cfg(not(feature = "sqlite"))]
#[tokio::test]
async fn a_sqlite_path_without_the_backend_says_so() {
    let error = open_err("sqlite://troupe.db").await;
    assert!(matches!(&error, StoreError::BackendDisabled { backend: "sqlite" }), "got {error:?}");
    assert_one_line(&error);
}

/// A database written by the first schema version is brought up to date when opened.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn an_older_schema_is_migrated_forward() {
    use troupe_store::schema::SCHEMA_VERSION;
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("old.db");
    {
        let store = troupe_store::sqlite::SqliteStore::open(&path).await.expect("opens");
        // Back to version 1: without the memories table.
        sqlx::query("DROP TABLE memories").execute(store.pool()).await.expect("drops");
        sqlx::query("UPDATE troupe_meta SET value = '1' WHERE key = 'schema_version'")
            .execute(store.pool())
            .await
            .expect("downgrades");
        store.pool().close().await;
    }
    let store = troupe_store::open(path.to_str().expect("UTF-8")).await.expect("reopens");
    assert_eq!(store.info().schema_version, SCHEMA_VERSION);
    store.save_memory("agent:a", "kept", 1).await.expect("the new table exists");
}
