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
            input: serde_json::json!({}).into(),
            state: serde_json::json!({}).into(),
            spend: None,
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
        // Back to version 1: without the memories and work item tables, nor the runs'
        // evidence heads, messages and inputs apart (the input back in the run's row), nor
        // their spend.
        sqlx::query("DROP TABLE run_inputs").execute(store.pool()).await.expect("drops");
        sqlx::query("ALTER TABLE runs ADD COLUMN input TEXT NOT NULL DEFAULT '{}'")
            .execute(store.pool())
            .await
            .expect("adds");
        sqlx::query("DROP TABLE run_messages").execute(store.pool()).await.expect("drops");
        sqlx::query("DROP TABLE memories").execute(store.pool()).await.expect("drops");
        sqlx::query("DROP TABLE work_items").execute(store.pool()).await.expect("drops");
        for column in ["evidence_seq", "evidence_hash", "spend_model", "spend_tokens", "spend_cost_usd", "spend_rollup"]
        {
            let drop = format!("ALTER TABLE runs DROP COLUMN {column}");
            sqlx::query(sqlx::AssertSqlSafe(drop)).execute(store.pool()).await.expect("drops");
        }
        sqlx::query("UPDATE troupe_meta SET value = '1' WHERE key = 'schema_version'")
            .execute(store.pool())
            .await
            .expect("downgrades");
        store.pool().close().await;
    }
    let store = troupe_store::open(path.to_str().expect("UTF-8")).await.expect("reopens");
    assert_eq!(store.info().schema_version, SCHEMA_VERSION);
    store.save_memory("agent:a", "kept", 1).await.expect("the new table exists");
    // Version 5's trigger, made on the way, is gone at version 6: the store moves the heads.
    let handle = troupe_store::sqlite::SqliteStore::open(&path).await.expect("a second handle");
    let triggers: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
            .fetch_all(handle.pool())
            .await
            .expect("the triggers");
    assert_eq!(triggers, ["evidence_is_append_only_delete", "evidence_is_append_only_update"]);
}

/// The rows both backends' version 2 databases hold: the marker, a finished run with its
/// transitions, and a queued run in the queue.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! v2_rows {
    () => {
        "INSERT INTO troupe_meta (key, value) VALUES ('application', 'troupe'), ('schema_version', '2'); \
         INSERT INTO runs (id, agent, status, input, state, created_at, updated_at) \
             VALUES ('run-old', 'coder', 'completed', '{\"instruction\": \"kept\"}', '{}', 1, 1), \
                    ('run-waiting', 'coder', 'queued', '{}', '{}', 2, 2); \
         INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) \
             VALUES ('run-old', 1, NULL, 'running', 1), ('run-old', 2, 'running', 'completed', 2); \
         INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) \
             VALUES ('run-waiting', 2, NULL, 0, NULL); "
    };
}

/// A database of schema version 2, written as that version's migrations left it, with a
/// finished run and its transitions, a queued run and a memory in it.
#[cfg(feature = "sqlite")]
async fn a_version_2_sqlite_database(path: &std::path::Path) {
    use sqlx::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    let mut connection = sqlx::ConnectOptions::connect(
        &SqliteConnectOptions::new().filename(path).create_if_missing(true).journal_mode(SqliteJournalMode::Wal),
    )
    .await
    .expect("a new SQLite file");
    for step in troupe_store::schema::SQLITE_MIGRATIONS.iter().filter(|step| step.version <= 2) {
        sqlx::raw_sql(step.sql).execute(&mut connection).await.expect("a version 1 or 2 step applies");
    }
    sqlx::raw_sql(concat!(
        v2_rows!(),
        "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
             VALUES ('run-old', 1, 'run_started', NULL, '{}', 1, '', 'h1'), \
                    ('run-old', 2, 'run_finished', NULL, '{}', 2, 'h1', 'h2'); \
         INSERT INTO memories (namespace, content, created_at) VALUES ('agent:coder', 'kept across versions', 1);",
    ))
    .execute(&mut connection)
    .await
    .expect("version 2 rows");
    connection.close().await.expect("the connection closes");
}

/// The runs a version 2 database held, found after its migration: the finished run's input
/// and transitions, both runs listed newest first, the queued run still queued.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn assert_v2_runs_kept<S: troupe_store::RunRepository + troupe_store::QueueRepository + ?Sized>(store: &S) {
    let old = store.load_run("run-old").await.expect("load_run").expect("the old run is kept");
    assert_eq!(old.input, serde_json::json!({"instruction": "kept"}), "its input, moved out of its row");
    let transitions = store.transitions("run-old").await.expect("transitions");
    let steps: Vec<_> = transitions.iter().map(|t| (t.seq, t.to.as_str())).collect();
    assert_eq!(steps, [(1, "running"), (2, "completed")], "its transitions, in their table's new form");
    let listed = store.list_runs(&troupe_store::RunFilter::default()).await.expect("list_runs");
    let newest: Vec<&str> = listed.iter().map(|run| run.id.as_str()).collect();
    assert_eq!(newest, ["run-waiting", "run-old"], "newest first, from the index kept in ascending order");
    let lease = store.claim("worker", std::time::Duration::from_secs(5), 3).await.expect("claim");
    assert_eq!(lease.map(|l| l.run_id).as_deref(), Some("run-waiting"), "the queued run is still queued");
    let mut sums = store.spend_since(0).await.expect("spend_since");
    sums.unsummed.sort();
    assert!(sums.groups.is_empty(), "an older build's runs keep no spend: {sums:?}");
    assert_eq!(sums.unsummed, ["run-old", "run-waiting"], "they are named, for their records to be read");
}

/// A version 2 database gains the work queue when opened, keeping what it held.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_version_2_database_migrates_to_the_work_queue() {
    use troupe_store::schema::SCHEMA_VERSION;
    use troupe_store::{NewWork, WorkState};
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("v2.db");
    a_version_2_sqlite_database(&path).await;

    let store = troupe_store::open(path.to_str().expect("UTF-8")).await.expect("a version 2 store opens");
    assert_eq!(store.info().schema_version, SCHEMA_VERSION);
    let indexes: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' ORDER BY name")
            .fetch_all(troupe_store::sqlite::SqliteStore::open(&path).await.expect("a second handle").pool())
            .await
            .expect("the indexes");
    let named: Vec<&str> = indexes.iter().map(String::as_str).filter(|n| !n.starts_with("sqlite_")).collect();
    assert_eq!(
        named,
        ["runs_by_creation", "runs_by_parent", "runs_by_status"],
        "none on a column every checkpoint changes"
    );
    let old = store.load_run("run-old").await.expect("load_run").expect("the old run is kept");
    assert_eq!((old.evidence_head.seq, old.evidence_head.hash.as_str()), (2, "h2"), "its head, from its log");
    assert_v2_runs_kept(&*store).await;
    assert_eq!(store.search_memory("agent:coder", "kept", 0).await.expect("search").len(), 1, "so is the memory");
    let item = NewWork {
        queue: "team".into(),
        id: "first".into(),
        payload: serde_json::json!({"task": "migrate"}),
        priority: 0,
        tags: vec!["db".into()],
        max_attempts: 1,
        available_at: 0,
    };
    store.enqueue_work(&item, 1).await.expect("the work table exists");
    let claimed = store.claim_work("team", "w", &["db".into()], std::time::Duration::from_secs(1), 2).await;
    assert_eq!(claimed.expect("claim_work").map(|i| i.state), Some(WorkState::Claimed));
    store.close().await.expect("closes");

    let again = troupe_store::open(path.to_str().expect("UTF-8")).await.expect("the migrated store reopens");
    assert_eq!(again.info().schema_version, SCHEMA_VERSION);
    again.close().await.expect("closes");
}

/// Work stays where it was when the store is closed and opened again: queued, held (with
/// its lease, which the holder can still use), done.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn work_survives_closing_and_reopening_a_sqlite_store() {
    use std::time::Duration;
    use troupe_store::{NewWork, WorkState, WorkStats};
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = dir.path().join("troupe.db").to_str().expect("UTF-8").to_owned();
    let item = |id: &str, priority: i64| NewWork {
        queue: "team".into(),
        id: id.into(),
        payload: serde_json::json!({"id": id}),
        priority,
        tags: Vec::new(),
        max_attempts: 3,
        available_at: 0,
    };
    let lease = Duration::from_secs(60);
    {
        let store = troupe_store::open(&url).await.expect("opens");
        for (id, priority) in [("done", 3), ("held", 2), ("waiting", 1)] {
            store.enqueue_work(&item(id, priority), 10).await.expect("enqueue_work");
        }
        let done = store.claim_work("team", "w1", &[], lease, 20).await.expect("claim").expect("claimed");
        store.complete_work("team", &done.id, "w1", &serde_json::json!("ok"), 30).await.expect("complete");
        let held = store.claim_work("team", "w1", &[], lease, 40).await.expect("claim").expect("claimed");
        store.start_work("team", &held.id, "w1", 50).await.expect("start");
        store.close().await.expect("closes");
    }
    let store = troupe_store::open(&url).await.expect("reopens");
    let stats = store.work_stats("team").await.expect("work_stats");
    assert_eq!(stats, WorkStats { queued: 1, running: 1, done: 1, ..WorkStats::default() });
    let held = store.work_item("team", "held").await.expect("work_item").expect("kept");
    assert_eq!(
        (held.state, held.worker.as_deref(), held.lease_expires_at),
        (WorkState::Running, Some("w1"), Some(60_040))
    );
    let done = store.work_item("team", "done").await.expect("work_item").expect("kept");
    assert_eq!(done.result, Some(serde_json::json!("ok")));
    store
        .complete_work("team", "held", "w1", &serde_json::json!("also ok"), 100)
        .await
        .expect("the holder still holds it");
    let next = store.claim_work("team", "w2", &[], lease, 110).await.expect("claim").expect("the waiting item");
    assert_eq!((next.id.as_str(), next.attempts), ("waiting", 1));
    store.close().await.expect("closes");
}

/// A version 2 PostgreSQL schema gains the work queue when a store connects to it.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_version_2_postgres_schema_migrates_to_the_work_queue() {
    use sqlx::{AssertSqlSafe, Connection, PgConnection};
    use troupe_store::postgres::PostgresStore;
    use troupe_store::{MemoryRepository, NewWork, Store, WorkItemRepository};
    let Ok(url) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip("a_version_2_postgres_schema_migrates", "TROUPE_TEST_DATABASE_URL is not set");
        return;
    };
    let schema = format!("troupe_v2_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect(&url).await.expect("the test server accepts a connection");
    let mut setup = format!("CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\";");
    for step in troupe_store::schema::POSTGRES_MIGRATIONS.iter().filter(|step| step.version <= 2) {
        setup.push_str(step.sql);
        setup.push(';');
    }
    setup.push_str(concat!(
        v2_rows!(),
        "INSERT INTO memories (namespace, content, created_at) VALUES ('agent:coder', 'kept across versions', 1);",
    ));
    sqlx::raw_sql(AssertSqlSafe(setup)).execute(&mut conn).await.expect("a version 2 schema");

    let opened = PostgresStore::connect_in_schema(&url, &schema).await;
    let outcome = async {
        let store = opened.expect("a version 2 schema opens");
        assert_eq!(store.info().schema_version, troupe_store::schema::SCHEMA_VERSION);
        assert_eq!(store.search_memory("agent:coder", "kept", 0).await.expect("search").len(), 1);
        assert_v2_runs_kept(&store).await;
        let item = NewWork {
            queue: "team".into(),
            id: "first".into(),
            payload: serde_json::json!(1),
            priority: 0,
            tags: Vec::new(),
            max_attempts: 1,
            available_at: 0,
        };
        store.enqueue_work(&item, 1).await.expect("the work table exists");
        store.close().await.expect("closes");
    };
    let outcome = tokio::spawn(outcome).await;
    sqlx::raw_sql(AssertSqlSafe(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")))
        .execute(&mut conn)
        .await
        .expect("the test schema is dropped");
    conn.close().await.expect("the connection closes");
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}
