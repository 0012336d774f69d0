//! Unit tests of the SQLite backend: opening and migrating, refusing files that are not
//! troupe databases without touching them, and the guarantees that rest on SQLite itself.

use super::SqliteStore;
use crate::chain::EvidenceChain;
use crate::error::StoreError;
use crate::record::{
    Checkpoint, EvidenceKind, Firing, Flush, NewEvidence, NewRun, RunFilter, RunStatus, Schedule, ScheduleTarget,
    Trigger,
};
use crate::repository::{
    EvidenceRepository, QueueRepository, RunRepository, ScheduleRepository, SignalRepository, Store,
};
use crate::schema::SCHEMA_VERSION;
use serde_json::json;
use sqlx::{ConnectOptions, Connection};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

fn run(id: &str, status: RunStatus) -> NewRun {
    NewRun {
        id: id.into(),
        agent: "coder".into(),
        status,
        conversation_id: None,
        parent_run_id: None,
        input: json!({"instruction": "fix the build"}).into(),
        state: json!({}).into(),
        spend: None,
    }
}

/// A schedule `nightly` starting a run of `coder` every 100 ms, first at 100.
fn nightly() -> Schedule {
    Schedule {
        id: "nightly".into(),
        trigger: Trigger::Interval { every_ms: 100 },
        target: ScheduleTarget::StartRun { agent: "coder".into(), input: json!({}) },
        next_fire_at: 100,
        last_fired_at: None,
        enabled: true,
    }
}

fn sidecars(path: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| PathBuf::from(format!("{}{suffix}", path.display())))
        .filter(|p| p.exists())
        .collect()
}

/// Opening `path` fails as `expected` says, leaving the file's bytes as they were and no
/// SQLite sidecar files behind.
async fn refused_unchanged(path: &Path, expected: impl Fn(&StoreError) -> bool) {
    let before = std::fs::read(path).expect("the file to refuse exists");
    let error = SqliteStore::open(path).await.expect_err("opening must be refused");
    assert!(expected(&error), "unexpected error: {error}");
    assert!(!error.to_string().contains('\n'), "the message is one line: {error}");
    assert_eq!(std::fs::read(path).expect("the file is still there"), before, "the file was changed");
    assert_eq!(sidecars(path), Vec::<PathBuf>::new(), "sidecar files were left behind");
}

async fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open(&dir.path().join("troupe.db")).await.expect("a new store opens");
    (dir, store)
}

#[tokio::test]
async fn opening_twice_migrates_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("nested").join("troupe.db");
    let first = SqliteStore::open(&path).await.expect("a new store opens");
    first.create_run(run("r1", RunStatus::Running), 1).await.expect("a run is created");
    assert_eq!(first.info().schema_version, SCHEMA_VERSION);
    assert_eq!(first.info().backend, "sqlite");
    assert_eq!(first.path(), path);
    first.close().await.expect("the store closes");

    let second = SqliteStore::open(&path).await.expect("the store opens again");
    let meta: Vec<(String, String)> = sqlx::query_as("SELECT key, value FROM troupe_meta ORDER BY key")
        .fetch_all(second.pool())
        .await
        .expect("troupe_meta reads");
    assert_eq!(
        meta,
        [("application".to_owned(), "troupe".to_owned()), ("schema_version".to_owned(), SCHEMA_VERSION.to_string())]
    );
    assert!(second.load_run("r1").await.expect("the run loads").is_some(), "data survives reopening");
    // A second instance on the same file at once, as a worker and the CLI would.
    let third = SqliteStore::open(&path).await.expect("a concurrent instance opens");
    assert_eq!(third.list_runs(&RunFilter::default()).await.expect("runs list").len(), 1);
}

#[tokio::test]
async fn the_journal_is_a_write_ahead_log() {
    let (_dir, store) = store().await;
    let mode: String =
        sqlx::query_scalar("PRAGMA journal_mode").fetch_one(store.pool()).await.expect("the journal mode reads");
    assert_eq!(mode, "wal");
    let synchronous: i64 =
        sqlx::query_scalar("PRAGMA synchronous").fetch_one(store.pool()).await.expect("synchronous reads");
    assert_eq!(synchronous, 2, "synchronous is FULL");
    let foreign_keys: i64 =
        sqlx::query_scalar("PRAGMA foreign_keys").fetch_one(store.pool()).await.expect("foreign_keys reads");
    assert_eq!(foreign_keys, 1);
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_left_alone() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("notes.db");
    std::fs::write(&path, b"these are my notes, not a database\n").expect("the file is written");
    refused_unchanged(&path, |e| matches!(e, StoreError::Corrupt { .. })).await;

    let short = dir.path().join("short.db");
    std::fs::write(&short, b"SQLite").expect("the file is written");
    refused_unchanged(&short, |e| matches!(e, StoreError::Corrupt { .. })).await;

    // The right header on a damaged body: SQLite itself finds it out, read-only.
    let damaged = dir.path().join("damaged.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(std::iter::repeat_n(0xA5u8, 8192));
    std::fs::write(&damaged, &bytes).expect("the file is written");
    refused_unchanged(&damaged, |e| matches!(e, StoreError::Corrupt { .. })).await;
}

#[tokio::test]
async fn a_database_of_another_application_is_left_alone() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("app.db");
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .connect()
        .await
        .expect("a plain SQLite database is created");
    sqlx::raw_sql("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada');")
        .execute(&mut conn)
        .await
        .expect("the foreign table is created");
    conn.close().await.expect("the connection closes");
    refused_unchanged(&path, |e| matches!(e, StoreError::Foreign { .. })).await;

    // A `troupe_meta` of someone else's is not troupe's either.
    let other = dir.path().join("other.db");
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&other)
        .create_if_missing(true)
        .connect()
        .await
        .expect("a plain SQLite database is created");
    sqlx::raw_sql(
        "CREATE TABLE troupe_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); \
         INSERT INTO troupe_meta VALUES ('application', 'circus');",
    )
    .execute(&mut conn)
    .await
    .expect("the foreign table is created");
    conn.close().await.expect("the connection closes");
    refused_unchanged(&other, |e| matches!(e, StoreError::Foreign { .. })).await;
}

#[tokio::test]
async fn a_database_from_a_newer_troupe_is_left_alone() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("troupe.db");
    let store = SqliteStore::open(&path).await.expect("a new store opens");
    sqlx::query("UPDATE troupe_meta SET value = '99' WHERE key = 'schema_version'")
        .execute(store.pool())
        .await
        .expect("the version is bumped");
    store.close().await.expect("the store closes");
    refused_unchanged(
        &path,
        |e| matches!(e, StoreError::NewerSchema { found: 99, supported, .. } if *supported == SCHEMA_VERSION),
    )
    .await;
}

#[tokio::test]
async fn an_unusable_location_is_unreachable() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").expect("the file is written");
    // Its parent is a file, so no directory can be made for it (even as root).
    let error = SqliteStore::open(&file.join("troupe.db")).await.expect_err("no directory can hold it");
    assert!(matches!(error, StoreError::Unreachable { .. }), "unexpected error: {error}");

    let error = SqliteStore::open(dir.path()).await.expect_err("a directory is no database");
    assert!(matches!(error, StoreError::Unreachable { .. }), "unexpected error: {error}");
    assert_eq!(std::fs::read(&file).expect("the file is still there"), b"x");
}

#[tokio::test]
async fn evidence_cannot_be_changed_or_removed() {
    let (_dir, store) = store().await;
    store.create_run(run("r1", RunStatus::Running), 1).await.expect("a run is created");
    let chain = EvidenceChain::new("r1");
    let sealed = chain.seal(vec![NewEvidence::new(EvidenceKind::RunStarted, json!({"model": "demo"}))], 2);
    store.append_evidence(&sealed, None).await.expect("the entry is appended");

    let update = sqlx::query("UPDATE evidence SET payload = '{}' WHERE run_id = 'r1'").execute(store.pool()).await;
    assert!(update.is_err_and(|e| e.to_string().contains("append-only")));
    let delete = sqlx::query("DELETE FROM evidence WHERE run_id = 'r1'").execute(store.pool()).await;
    assert!(delete.is_err_and(|e| e.to_string().contains("append-only")));
    assert_eq!(store.evidence("r1", 0).await.expect("the log reads"), sealed);

    // Appending the same sequence number again is a conflict, on the one-entry path too.
    let again = store.append_evidence(&sealed, None).await;
    assert!(matches!(again, Err(StoreError::EvidenceConflict { seq: 1, .. })), "{again:?}");
}

#[tokio::test]
async fn an_entry_is_stored_as_the_text_it_was_sealed_with() {
    let (_dir, store) = store().await;
    store.create_run(run("r1", RunStatus::Running), 1).await.expect("a run is created");
    let mut sealed =
        EvidenceChain::new("r1").seal(vec![NewEvidence::new(EvidenceKind::RunStarted, json!({"b": 1}))], 2);
    // The same JSON in another form than a fresh encoding gives: only the sealed text
    // can put it in the row.
    let sealed_text = "{ \"b\": 1 }";
    sealed[0].payload = crate::StoredJson::with_text(sealed_text);
    store.append_evidence(&sealed, None).await.expect("the entry is appended");
    let stored: String = sqlx::query_scalar("SELECT payload FROM evidence WHERE run_id = 'r1'")
        .fetch_one(store.pool())
        .await
        .expect("the row reads");
    assert_eq!(stored, sealed_text);
}

/// An entry sealed from a typed payload is hashed over its text, and a run's typed input
/// and state are encoded to theirs, with no `Value` of them built; stored, they read back
/// as those values, and the entry verifies.
#[tokio::test]
async fn what_a_run_records_is_sealed_from_its_text_and_reads_back_as_its_value() {
    let (_dir, store) = store().await;
    #[derive(serde::Serialize)]
    struct Typed {
        z: u8,
        a: &'static str,
    }
    let new = NewRun {
        input: crate::StoredJson::encode(&Typed { z: 1, a: "input" }).expect("encoded"),
        state: crate::StoredJson::encode(&Typed { z: 2, a: "state" }).expect("encoded"),
        ..run("r1", RunStatus::Running)
    };
    assert!(!new.input.has_value() && !new.state.has_value(), "only their text was made");
    store.create_run(new, 1).await.expect("a run is created");
    let entry = NewEvidence::encoded(EvidenceKind::RunStarted, &Typed { z: 3, a: "entry" }).expect("encoded");
    let sealed = EvidenceChain::new("r1").seal(vec![entry], 2);
    assert!(!sealed[0].payload.has_value(), "sealed from its text");
    store.append_evidence(&sealed, None).await.expect("the entry is appended");
    let log = store.evidence("r1", 0).await.expect("the log reads");
    assert_eq!(log[0].payload, json!({"a": "entry", "z": 3}));
    crate::verify_chain(&log).expect("it verifies, read back as a value");
    let loaded = store.load_run("r1").await.expect("loads").expect("stored");
    assert_eq!(loaded.state, json!({"a": "state", "z": 2}));
    assert_eq!(loaded.input, json!({"a": "input", "z": 1}));
}

#[tokio::test]
async fn unreadable_rows_are_decode_errors() {
    let (_dir, store) = store().await;
    store.create_run(run("r1", RunStatus::Running), 1).await.expect("a run is created");
    sqlx::query("UPDATE runs SET state = 'not json' WHERE id = 'r1'").execute(store.pool()).await.expect("raw write");
    assert!(matches!(store.load_run("r1").await, Err(StoreError::Decode { .. })));
    sqlx::query("UPDATE runs SET state = '{}', status = 'dancing' WHERE id = 'r1'")
        .execute(store.pool())
        .await
        .expect("raw write");
    assert!(matches!(store.list_runs(&RunFilter::default()).await, Err(StoreError::Decode { .. })));
}

/// Numbers a corrupt row gives that no next one can follow are refused as decode errors,
/// before a chain or a transition would overflow on them.
#[tokio::test]
async fn numbers_with_no_successor_are_decode_errors() {
    let (_dir, store) = store().await;
    store.create_run(run("r1", RunStatus::Running), 1).await.expect("a run is created");
    sqlx::query(
        "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
         VALUES ('r1', 9223372036854775807, 'run_started', NULL, '{}', 1, '', 'h')",
    )
    .execute(store.pool())
    .await
    .expect("raw write");
    assert!(matches!(store.last_evidence("r1").await, Err(StoreError::Decode { .. })));
    assert!(matches!(store.evidence("r1", 0).await, Err(StoreError::Decode { .. })));

    sqlx::query("UPDATE runs SET transition_seq = 9223372036854775807 WHERE id = 'r1'")
        .execute(store.pool())
        .await
        .expect("raw write");
    let state = serde_json::value::to_raw_value(&json!({})).expect("JSON");
    let finished = Checkpoint::new("r1", RunStatus::Completed, state);
    let saved = store.checkpoint(finished, 2).await;
    assert!(matches!(&saved, Err(StoreError::Decode { what, .. }) if what.contains("transition")), "{saved:?}");
    let loaded = store.load_run("r1").await.expect("loads").expect("stored");
    assert_eq!(loaded.status, RunStatus::Running, "nothing of the checkpoint was saved");
}

#[tokio::test]
async fn claimers_on_separate_instances_never_share_a_run() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("troupe.db");
    let a = SqliteStore::open(&path).await.expect("the first instance opens");
    let b = SqliteStore::open(&path).await.expect("the second instance opens");
    const RUNS: usize = 24;
    for i in 0..RUNS {
        a.create_run(run(&format!("r{i:02}"), RunStatus::Queued), 1).await.expect("a queued run is created");
    }
    let mut claimers = Vec::new();
    for worker in 0..8 {
        let store = if worker % 2 == 0 { a.clone() } else { b.clone() };
        claimers.push(tokio::spawn(async move {
            let mut won = Vec::new();
            while let Some(lease) = store.claim(&format!("w{worker}"), TTL, 10).await.expect("a claim runs") {
                won.push(lease.run_id);
            }
            won
        }));
    }
    let mut seen = HashSet::new();
    for claimer in claimers {
        for run_id in claimer.await.expect("the claimer finishes") {
            assert!(seen.insert(run_id.clone()), "{run_id} was claimed twice");
        }
    }
    assert_eq!(seen.len(), RUNS);
}

#[tokio::test]
async fn a_tick_fires_once_and_carries_out_its_firing() {
    let (_dir, store) = store().await;
    let start = nightly();
    store.put_schedule(&start).await.expect("the schedule is stored");
    assert_eq!(store.due_schedules(100).await.expect("due schedules read"), std::slice::from_ref(&start));
    let firing = Firing::Start(run("tick-100", RunStatus::Running));
    assert!(store.fire_schedule("nightly", 100, 200, firing.clone(), 150).await.expect("the tick fires"));
    assert!(!store.fire_schedule("nightly", 100, 200, firing, 150).await.expect("a second firing runs"));
    let created = store.load_run("tick-100").await.expect("the run loads").expect("the run exists");
    assert_eq!(created.status, RunStatus::Queued);
    assert_eq!(store.queue().await.expect("the queue reads")[0].available_at, 150);
    assert_eq!(store.schedules().await.expect("schedules read")[0].last_fired_at, Some(100));

    // Waking a run leased by a worker stores the signal and leaves the lease alone.
    let lease = store.claim("w1", TTL, 150).await.expect("a claim runs").expect("the run is claimed");
    let wake = Firing::Wake { run_id: "tick-100".into(), kind: "wake".into(), payload: json!({"tick": 200}) };
    assert!(store.fire_schedule("nightly", 200, 300, wake, 210).await.expect("the tick fires"));
    assert_eq!(store.pending_signals("tick-100", 0).await.expect("signals read").len(), 1);
    assert_eq!(store.queue().await.expect("the queue reads")[0].owner.as_deref(), Some("w1"));
    store.release(&lease, Some(220)).await.expect("the lease is released");
    let unknown = Firing::Wake { run_id: "ghost".into(), kind: "wake".into(), payload: json!({}) };
    assert!(matches!(store.fire_schedule("nightly", 300, 400, unknown, 310).await, Err(StoreError::UnknownRun { .. })));
    assert_eq!(store.schedules().await.expect("schedules read")[0].next_fire_at, 300, "a failed firing rolls back");
}

#[tokio::test]
async fn a_fenced_checkpoint_needs_the_lease() {
    let (_dir, store) = store().await;
    store.create_run(run("r1", RunStatus::Queued), 1).await.expect("a run is created");
    let first = store.claim("w1", TTL, 2).await.expect("a claim runs").expect("the run is claimed");
    let taken = store.acquire("r1", "w2", TTL, 2).await.expect("an acquire runs");
    assert_eq!(taken, None, "a live lease is not taken");
    let later = first.expires_at + 1;
    let second = store.acquire("r1", "w2", TTL, later).await.expect("an acquire runs").expect("a lapsed lease is");
    assert_eq!(second.epoch, first.epoch + 1);

    store.send_signal("r1", "user_message", json!({"text": "hi"}), later).await.expect("a signal is stored");
    let chain = EvidenceChain::new("r1");
    let checkpoint = |fence| Checkpoint {
        run_id: "r1".into(),
        status: RunStatus::Running,
        activity: Some("thinking".into()),
        state: serde_json::value::to_raw_value(&json!({"turn": 1})).expect("JSON"),
        evidence: chain.seal(vec![NewEvidence::new(EvidenceKind::SignalApplied, json!({"seq": 1}))], later),
        signals_consumed_through: Some(1),
        fence: Some(fence),
        require_signals_consumed: false,
        release: false,
        flush: Flush::BeforeAnswer,
        messages: None,
        spend: None,
    };
    let stale = store.checkpoint(checkpoint(first), later).await;
    assert!(matches!(stale, Err(StoreError::LeaseLost { .. })), "{stale:?}");
    assert!(store.evidence("r1", 0).await.expect("the log reads").is_empty(), "nothing of it was saved");

    store.checkpoint(checkpoint(second), later).await.expect("the holder checkpoints");
    let transitions = store.transitions("r1").await.expect("transitions read");
    assert_eq!(
        transitions.iter().map(|t| (t.from, t.to)).collect::<Vec<_>>(),
        [(None, RunStatus::Queued), (Some(RunStatus::Queued), RunStatus::Running)]
    );
    assert!(store.pending_signals("r1", 0).await.expect("signals read").is_empty());
    assert_eq!(store.signals("r1").await.expect("signals read")[0].consumed_at, Some(later));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_opens_of_a_new_file_all_succeed() {
    for _ in 0..20 {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("troupe.db");
        let (a, b, c, d) = tokio::join!(
            SqliteStore::open(&path),
            SqliteStore::open(&path),
            SqliteStore::open(&path),
            SqliteStore::open(&path)
        );
        for opened in [a, b, c, d] {
            opened.expect("every racing open succeeds");
        }
    }
}

/// Every write runs on the writer thread, none on the pool: with each of the pool's
/// connections taken, a team's writes (work items and their claims, memories,
/// conversations, schedules) still go through. Written through the pool, each would wait
/// for a connection, and its write lock would be taken behind the writer's back.
#[tokio::test]
async fn every_write_runs_on_the_writer_thread_none_on_the_pool() {
    use crate::repository::{ConversationRepository, MemoryRepository, WorkItemRepository};
    use crate::work::{NewWork, WorkState};
    let (_dir, store) = store().await;
    let mut taken = Vec::new();
    for _ in 0..super::open::POOL_SIZE {
        taken.push(store.pool().acquire().await.expect("a pool connection"));
    }
    let work = |id: &str| NewWork {
        queue: "review".into(),
        id: id.into(),
        payload: json!({"file": "lib.rs"}),
        priority: 0,
        tags: Vec::new(),
        max_attempts: 1,
        available_at: 0,
    };
    let schedule = nightly();
    let writes = async {
        store.enqueue_work(&work("a"), 1).await.expect("enqueued");
        store.enqueue_work(&work("b"), 1).await.expect("enqueued");
        let claimed = store.claim_work("review", "w1", &[], TTL, 2).await.expect("claims").expect("an item");
        store.start_work("review", &claimed.id, "w1", 3).await.expect("started");
        store.heartbeat_work("review", &claimed.id, "w1", TTL, 4).await.expect("heartbeats");
        store.complete_work("review", &claimed.id, "w1", &json!({"ok": true}), 5).await.expect("completed");
        let other = store.claim_work("review", "w2", &[], TTL, 6).await.expect("claims").expect("the other item");
        store.fail_work("review", &other.id, "w2", "no reviewer", 7).await.expect("failed");
        store.expire_work_leases("review", 8).await.expect("expires");
        assert_eq!(store.purge_finished_work("review").await.expect("purges"), 2);
        store.save_memory("team", "the build uses cargo", 9).await.expect("saved");
        store.append_turns("c1", "r1", vec![("user".into(), json!("hello"))], 10).await.expect("appended");
        store.put_schedule(&schedule).await.expect("stored");
        assert!(store.delete_schedule("nightly").await.expect("deleted"));
    };
    tokio::time::timeout(Duration::from_secs(10), writes).await.expect("no write waited for the pool");
    drop(taken);
    // And they were written.
    assert!(store.work_items("review", Some(WorkState::Done)).await.expect("reads").is_empty());
    assert_eq!(store.search_memory("team", "cargo", 0).await.expect("searches").len(), 1);
    assert_eq!(store.conversation("c1").await.expect("reads").len(), 1);
    assert!(store.schedules().await.expect("reads").is_empty());
}

/// A stored message that is not JSON (the file edited by hand, say) makes loading its run
/// a decode error that names the run, not a panic and not a run without its conversation.
#[tokio::test]
async fn a_stored_message_that_is_not_json_is_a_decode_error() {
    let (_dir, store) = store().await;
    store.create_run(run("r1", RunStatus::Running), 1).await.expect("created");
    sqlx::query("INSERT INTO run_messages (run_id, seq, message) VALUES ('r1', 0, '{\"role\": \"user\"}')")
        .execute(store.pool())
        .await
        .expect("a message is stored");
    let loaded = store.load_run("r1").await.expect("loads").expect("the run");
    assert_eq!(loaded.state["messages"], json!([{"role": "user"}]));
    sqlx::query("INSERT INTO run_messages (run_id, seq, message) VALUES ('r1', 1, 'not json')")
        .execute(store.pool())
        .await
        .expect("a broken message is stored");
    let error = store.load_run("r1").await.expect_err("a broken conversation does not load");
    assert!(matches!(&error, StoreError::Decode { what, .. } if what.contains("`r1`")), "{error}");
}

/// The WAL's length in frames (a frame is a page and its 24-byte header, after the
/// file's 32-byte header).
fn wal_frames(db: &Path) -> u64 {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    std::fs::metadata(wal).map_or(0, |m| m.len().saturating_sub(32) / (4096 + 24))
}

/// A flushed checkpoint of run `r1`, still running under `lease`, saving `state`,
/// `evidence` and `messages`.
fn running_boundary(
    lease: &crate::record::Lease,
    state: &serde_json::Value,
    evidence: Vec<crate::record::EvidenceEntry>,
    messages: Option<crate::record::MessagesWrite>,
) -> Checkpoint {
    Checkpoint {
        run_id: "r1".into(),
        status: RunStatus::Running,
        activity: None,
        state: serde_json::value::to_raw_value(state).expect("JSON"),
        evidence,
        signals_consumed_through: None,
        fence: Some(lease.clone()),
        require_signals_consumed: false,
        release: false,
        flush: Flush::BeforeAnswer,
        messages,
        spend: None,
    }
}

#[tokio::test]
async fn a_checkpoint_writes_its_state_not_the_runs_input_again() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("troupe.db");
    let store = SqliteStore::open(&path).await.expect("a new store opens");
    // A long system prompt, a session's history or an attachment: 64 KiB of input, 16 pages.
    let input = json!({"instruction": "x".repeat(64 * 1024)});
    let new = NewRun { input: input.clone().into(), ..run("r1", RunStatus::Running) };
    let lease = store.create_leased_run(new, "w1", TTL, 1).await.expect("a run is created");
    let mut chain = EvidenceChain::new("r1");
    let before = wal_frames(&path);
    let boundaries: u64 = 10;
    for turn in 0..boundaries {
        let evidence = chain.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, json!({"turn": turn}))], 2);
        chain.advance(&evidence);
        // A state that grows, as a run's does: the row cannot be rewritten in place.
        let state = json!({"turn": turn, "notes": "n".repeat(turn as usize * 40)});
        store.checkpoint(running_boundary(&lease, &state, evidence, None), 2).await.expect("a checkpoint is saved");
    }
    let per_boundary = (wal_frames(&path) - before) as f64 / boundaries as f64;
    assert!(per_boundary < 8.0, "{per_boundary} pages per checkpoint: the input is written again");
    let loaded = store.load_run("r1").await.expect("load_run").expect("the run");
    assert_eq!(loaded.input, input, "and it is kept whole");
}

/// A boundary that appends writes the pages it changes: the run's row (holding the head of
/// its evidence since schema 9), the pages its messages go to, the evidence's table and
/// key, and their splits. Before schema 9 the head had a table of its own, one more page a
/// boundary and its neighbours' when it split: 6.8 pages a boundary here, 5.8 since.
#[tokio::test]
async fn a_boundary_that_appends_writes_the_pages_it_changes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("troupe.db");
    let store = SqliteStore::open(&path).await.expect("a new store opens");
    let lease = store.create_leased_run(run("r1", RunStatus::Running), "w1", TTL, 1).await.expect("a run is created");
    let mut chain = EvidenceChain::new("r1");
    let text = |turn: u64, who: &str| {
        serde_json::value::to_raw_value(&json!({"role": who, "content": format!("{turn:04} {}", "m".repeat(300))}))
            .expect("JSON")
    };
    let before = wal_frames(&path);
    let boundaries: u64 = 30;
    for turn in 0..boundaries {
        let payload = json!({"turn": turn, "message": "e".repeat(600)});
        let evidence = chain.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, payload)], 2);
        chain.advance(&evidence);
        let from = usize::try_from(turn * 2).expect("small");
        // A state of the same size at each boundary, as a run's mostly is.
        let state = json!({"turn": format!("{turn:04}"), "notes": "n".repeat(600)});
        let messages =
            crate::record::MessagesWrite { from, messages: vec![text(turn, "assistant"), text(turn, "tool")] };
        let checkpoint = running_boundary(&lease, &state, evidence, Some(messages));
        store.checkpoint(checkpoint, 2).await.expect("a checkpoint is saved");
    }
    let per_boundary = (wal_frames(&path) - before) as f64 / boundaries as f64;
    let loaded = store.load_run("r1").await.expect("load_run").expect("the run");
    assert_eq!(loaded.evidence_head.seq, i64::try_from(boundaries).expect("small"), "the head moved with each");
    assert!(per_boundary < 6.3, "{per_boundary} pages per boundary: a page more than the boundary changes");
}

/// The writes the writer thread has made so far (`syscw` of `/proc/thread-self/io`: every
/// `write`, `pwrite` and their kin, its wake-ups of other threads included).
#[cfg(target_os = "linux")]
async fn writer_thread_writes(store: &SqliteStore) -> u64 {
    store
        .writer
        .read(|_| {
            let io = std::fs::read_to_string("/proc/thread-self/io").map_err(StoreError::database)?;
            io.lines()
                .find_map(|line| line.strip_prefix("syscw: "))
                .and_then(|count| count.trim().parse().ok())
                .ok_or_else(|| StoreError::database("no syscw in /proc/thread-self/io"))
        })
        .await
        .expect("the writer thread reads its own counts")
}

/// The writer's connection goes through `troupe-sqlite-wal`: a commit's WAL frames (here
/// three or four pages a boundary, two writes each on the system's VFS: about eight writes
/// a commit with the wake-up, measured) reach the file in one write.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn each_commit_reaches_the_wal_in_one_write() {
    let (_dir, store) = store().await;
    let lease = store.create_leased_run(run("r1", RunStatus::Running), "w1", TTL, 1).await.expect("a run is created");
    let mut chain = EvidenceChain::new("r1");
    let before = writer_thread_writes(&store).await;
    let boundaries: u64 = 30;
    for turn in 0..boundaries {
        let payload = json!({"turn": turn, "message": "e".repeat(600)});
        let evidence = chain.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, payload)], 2);
        chain.advance(&evidence);
        let state = json!({"turn": format!("{turn:04}"), "notes": "n".repeat(600)});
        store.checkpoint(running_boundary(&lease, &state, evidence, None), 2).await.expect("a checkpoint is saved");
    }
    // One write of the frames; the rest is the writer waking the callers it answers.
    let per_boundary = (writer_thread_writes(&store).await - before) as f64 / boundaries as f64;
    assert!(per_boundary < 3.0, "{per_boundary} writes per commit: its frames went to the WAL one by one");
}
