//! Tests of what only the PostgreSQL backend does: opening a server's schema, its
//! refusals, and claims from several stores at once. Each test works in a schema of its
//! own on the server `TROUPE_TEST_DATABASE_URL` names, and drops it at the end.

use super::PostgresStore;
use crate::error::StoreError;
use crate::record::{
    Checkpoint, EvidenceKind, Firing, Flush, NewEvidence, NewRun, RunFilter, RunStatus, Schedule, ScheduleTarget,
    Trigger,
};
use crate::repository::{
    ConversationRepository, EvidenceRepository, QueueRepository, RunRepository, ScheduleRepository, SignalRepository,
    Store,
};
use crate::{EvidenceChain, verify_chain};
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::collections::HashSet;
use std::time::Duration;

const URL_VARIABLE: &str = "TROUPE_TEST_DATABASE_URL";

/// The server's URL and a fresh schema name, or `None` (said on stderr) without a server.
pub(super) fn server(test: &str) -> Option<(String, String)> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.trim().is_empty() => Some((url, format!("troupe_t_{}", uuid::Uuid::new_v4().simple()))),
        _ => {
            troupe_testkit::skip(
                test,
                &format!("{URL_VARIABLE} is not set (e.g. postgres://postgres@127.0.0.1:5432/test)"),
            );
            None
        }
    }
}

/// Runs raw SQL on a connection of the test's own, outside any store.
async fn sql(url: &str, statements: &str) {
    let mut conn = PgConnection::connect(url).await.expect("the test server accepts a connection");
    sqlx::raw_sql(AssertSqlSafe(statements.to_owned())).execute(&mut conn).await.expect("the test SQL runs");
    conn.close().await.expect("the connection closes");
}

pub(super) async fn drop_schema(url: &str, schema: &str) {
    sql(url, &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
}

async fn tables_in(url: &str, schema: &str) -> Vec<String> {
    let mut conn = PgConnection::connect(url).await.expect("the test server accepts a connection");
    let tables = sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = $1 ORDER BY tablename")
        .bind(schema)
        .fetch_all(&mut conn)
        .await
        .expect("the catalog is readable");
    conn.close().await.expect("the connection closes");
    tables
}

pub(super) fn run(id: &str, status: RunStatus) -> NewRun {
    NewRun {
        id: id.into(),
        agent: "coder".into(),
        status,
        conversation_id: Some("conv".into()),
        parent_run_id: None,
        input: json!({"instruction": "go"}).into(),
        state: json!({"step": 0}).into(),
        spend: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrating_is_idempotent_and_happens_once_under_concurrency() {
    let Some((url, schema)) = server("migrating_is_idempotent_and_happens_once_under_concurrency") else { return };
    let (a, b) =
        tokio::join!(PostgresStore::connect_in_schema(&url, &schema), PostgresStore::connect_in_schema(&url, &schema));
    let (a, b) = (a.expect("the first concurrent open migrates or waits"), b.expect("so does the second"));
    assert_eq!(a.info().schema_version, crate::schema::SCHEMA_VERSION);
    a.create_run(run("r1", RunStatus::Queued), 1).await.expect("a run is created");
    a.close().await.expect("closes");
    b.close().await.expect("closes");

    let again = PostgresStore::connect_in_schema(&url, &schema).await.expect("a migrated schema reopens");
    assert_eq!(again.info().backend, "postgres");
    assert!(again.load_run("r1").await.expect("loads").is_some(), "reopening keeps the data");
    let meta: Vec<(String, String)> = sqlx::query_as("SELECT key, value FROM troupe_meta ORDER BY key")
        .fetch_all(again.pool())
        .await
        .expect("troupe_meta is readable");
    assert_eq!(
        meta,
        [
            ("application".to_owned(), "troupe".to_owned()),
            ("schema_version".to_owned(), crate::schema::SCHEMA_VERSION.to_string())
        ]
    );
    again.close().await.expect("closes");
    let mut expected: Vec<String> = crate::schema::TABLES.iter().map(|t| (*t).to_owned()).collect();
    expected.sort();
    assert_eq!(tables_in(&url, &schema).await, expected);
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn a_foreign_schema_is_left_unchanged() {
    let Some((url, schema)) = server("a_foreign_schema_is_left_unchanged") else { return };
    sql(&url, &format!("CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".runs (x INT); INSERT INTO \"{schema}\".runs VALUES (7)"))
        .await;
    let opened = PostgresStore::connect_in_schema(&url, &schema).await;
    assert!(matches!(opened, Err(StoreError::Foreign { .. })), "{opened:?}");
    assert_eq!(tables_in(&url, &schema).await, ["runs"]);
    let mut conn = PgConnection::connect(&url).await.expect("connects");
    let x: i32 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT x FROM \"{schema}\".runs")))
        .fetch_one(&mut conn)
        .await
        .expect("the foreign table is intact");
    assert_eq!(x, 7);
    conn.close().await.expect("closes");

    // troupe_meta of another application is foreign too.
    let other = format!("{schema}_b");
    sql(&url, &format!("CREATE SCHEMA \"{other}\"; CREATE TABLE \"{other}\".troupe_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO \"{other}\".troupe_meta VALUES ('application', 'else')")).await;
    let opened = PostgresStore::connect_in_schema(&url, &other).await;
    assert!(matches!(opened, Err(StoreError::Foreign { .. })), "{opened:?}");
    assert_eq!(tables_in(&url, &other).await, ["troupe_meta"]);
    drop_schema(&url, &schema).await;
    drop_schema(&url, &other).await;
}

#[tokio::test]
async fn a_newer_schema_is_left_unchanged() {
    let Some((url, schema)) = server("a_newer_schema_is_left_unchanged") else { return };
    sql(
        &url,
        &format!(
            "CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".troupe_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); \
             INSERT INTO \"{schema}\".troupe_meta VALUES ('application', 'troupe'), ('schema_version', '99')"
        ),
    )
    .await;
    let opened = PostgresStore::connect_in_schema(&url, &schema).await;
    assert!(
        matches!(opened, Err(StoreError::NewerSchema { found: 99, supported, .. }) if supported == crate::schema::SCHEMA_VERSION),
        "{opened:?}"
    );
    assert_eq!(tables_in(&url, &schema).await, ["troupe_meta"]);
    let mut conn = PgConnection::connect(&url).await.expect("connects");
    let version: String = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT value FROM \"{schema}\".troupe_meta WHERE key = 'schema_version'"
    )))
    .fetch_one(&mut conn)
    .await
    .expect("troupe_meta is intact");
    assert_eq!(version, "99");
    conn.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn an_unreachable_server_is_reported_without_its_password() {
    let url = "postgres://u:secret@127.0.0.1:1/x";
    let started = std::time::Instant::now();
    let opened = PostgresStore::connect(url).await;
    let Err(error @ StoreError::Unreachable { .. }) = opened else { panic!("expected Unreachable, got {opened:?}") };
    let message = error.to_string();
    assert!(!message.contains("secret"), "{message}");
    assert!(!format!("{error:?}").contains("secret"), "{error:?}");
    assert!(message.contains("postgres://u:***@127.0.0.1:1/x"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(10), "gave up after {:?}", started.elapsed());
}

#[tokio::test]
async fn bad_schema_names_are_refused_before_connecting() {
    let opened = PostgresStore::connect_in_schema("postgres://u:secret@127.0.0.1:1/x", "Robert\"; DROP").await;
    assert!(matches!(&opened, Err(StoreError::InvalidUrl { url }) if !url.contains("secret")), "{opened:?}");
}

#[tokio::test]
async fn evidence_refuses_update_and_delete() {
    let Some((url, schema)) = server("evidence_refuses_update_and_delete") else { return };
    let store = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens");
    store.create_run(run("r1", RunStatus::Running), 1).await.expect("creates");
    let sealed = EvidenceChain::new("r1")
        .seal(vec![NewEvidence::new(EvidenceKind::RunStarted, json!({"b": 1, "a": [1.5, "x"]}))], 2);
    store.append_evidence(&sealed, None).await.expect("appends");
    for statement in ["UPDATE evidence SET payload = '{}'", "DELETE FROM evidence", "TRUNCATE evidence"] {
        let refused = sqlx::query(statement).execute(store.pool()).await;
        assert!(refused.is_err_and(|e| e.to_string().contains("append-only")), "{statement} was allowed");
    }
    let log = store.evidence("r1", 0).await.expect("reads");
    assert_eq!(log, sealed);
    verify_chain(&log).expect("the stored payload is the hashed text");
    assert!(matches!(store.append_evidence(&sealed, None).await, Err(StoreError::EvidenceConflict { seq: 1, .. })));
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_never_claim_the_same_run() {
    let Some((url, schema)) = server("two_stores_never_claim_the_same_run") else { return };
    let a = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens");
    let b = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens again");
    const RUNS: usize = 60;
    for i in 0..RUNS {
        a.create_run(run(&format!("r{i:03}"), RunStatus::Queued), 10).await.expect("creates");
    }
    let mut claimers = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let store = if worker % 2 == 0 { a.clone() } else { b.clone() };
        claimers.spawn(async move {
            let mut claimed = Vec::new();
            while let Some(lease) =
                store.claim(&format!("w{worker}"), Duration::from_secs(60), 100).await.expect("claims")
            {
                claimed.push(lease);
            }
            claimed
        });
    }
    let mut seen = HashSet::new();
    while let Some(claimed) = claimers.join_next().await {
        for lease in claimed.expect("the claimer finished") {
            assert_eq!(lease.epoch, 1);
            assert!(seen.insert(lease.run_id.clone()), "{} was claimed twice", lease.run_id);
        }
    }
    assert_eq!(seen.len(), RUNS);
    a.close().await.expect("closes");
    b.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn a_run_round_trips_with_fences_signals_and_turns() {
    let Some((url, schema)) = server("a_run_round_trips_with_fences_signals_and_turns") else { return };
    let store = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens");
    store.create_run(run("r1", RunStatus::Queued), 5).await.expect("creates");
    assert!(matches!(store.create_run(run("r1", RunStatus::Queued), 6).await, Err(StoreError::RunExists { .. })));
    let lease = store.claim("w1", Duration::from_secs(30), 5).await.expect("claims").expect("the run is queued");
    assert_eq!(store.send_signal("r1", "user_message", json!({"text": "hi"}), 6).await.expect("sends"), 1);
    assert_eq!(store.send_signal("r1", "approval", json!(true), 7).await.expect("sends"), 2);
    assert!(matches!(store.send_signal("nope", "x", json!(null), 7).await, Err(StoreError::UnknownRun { .. })));

    let chain = EvidenceChain::new("r1");
    let sealed = chain.seal(vec![NewEvidence::new(EvidenceKind::SignalApplied, json!({"seq": 1}))], 8);
    let checkpoint = Checkpoint {
        run_id: "r1".into(),
        status: RunStatus::Running,
        activity: Some("thinking".into()),
        state: serde_json::value::to_raw_value(&json!({"step": 1})).expect("JSON"),
        evidence: sealed.clone(),
        signals_consumed_through: Some(1),
        fence: Some(lease.clone()),
        require_signals_consumed: false,
        release: false,
        flush: Flush::BeforeAnswer,
        messages: None,
        spend: None,
    };
    store.checkpoint(checkpoint.clone(), 9).await.expect("checkpoints under the lease");
    let record = store.load_run("r1").await.expect("loads").expect("exists");
    assert_eq!((record.status, record.state, record.updated_at), (RunStatus::Running, json!({"step": 1}), 9));
    let pending = store.pending_signals("r1", 0).await.expect("reads");
    assert_eq!(pending.iter().map(|s| s.seq).collect::<Vec<_>>(), [2]);
    assert_eq!(store.signals("r1").await.expect("reads")[0].consumed_at, Some(9));
    let transitions = store.transitions("r1").await.expect("reads");
    assert_eq!(
        transitions.iter().map(|t| (t.seq, t.from, t.to)).collect::<Vec<_>>(),
        [(1, None, RunStatus::Queued), (2, Some(RunStatus::Queued), RunStatus::Running)]
    );

    // Taken over after the lease lapsed: the old holder's fence no longer holds.
    let taken = store.acquire("r1", "w2", Duration::from_secs(30), 40_000).await.expect("acquires").expect("lapsed");
    assert_eq!(taken.epoch, 2);
    let stale = Checkpoint { evidence: Vec::new(), ..checkpoint };
    assert!(matches!(store.checkpoint(stale, 40_001).await, Err(StoreError::LeaseLost { .. })));
    assert!(store.heartbeat(&lease, Duration::from_secs(30), 40_001).await.expect("beats").is_none());
    assert!(store.acquire("r1", "w1", Duration::from_secs(30), 40_002).await.expect("tries").is_none());
    store.release(&taken, Some(50_000)).await.expect("requeues");
    let queue = store.queue().await.expect("reads");
    assert_eq!((queue[0].owner.as_deref(), queue[0].available_at), (None, 50_000));

    store
        .append_turns("conv", "r1", vec![("user".into(), json!("a")), ("assistant".into(), json!("b"))], 10)
        .await
        .expect("appends");
    store.append_turns("conv", "r1", vec![("user".into(), json!("c"))], 11).await.expect("appends");
    let turns = store.conversation("conv").await.expect("reads");
    assert_eq!(
        turns.iter().map(|t| (t.seq, t.message.clone())).collect::<Vec<_>>(),
        [(1, json!("a")), (2, json!("b")), (3, json!("c"))]
    );

    let listed = store
        .list_runs(&RunFilter { agent: Some("coder".into()), limit: 1, ..RunFilter::default() })
        .await
        .expect("lists");
    assert_eq!(listed.len(), 1);
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tick_fires_once_among_concurrent_firers() {
    let Some((url, schema)) = server("a_tick_fires_once_among_concurrent_firers") else { return };
    let store = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens");
    let schedule = Schedule {
        id: "nightly".into(),
        trigger: Trigger::Interval { every_ms: 1000 },
        target: ScheduleTarget::StartRun { agent: "coder".into(), input: json!({}) },
        next_fire_at: 1000,
        last_fired_at: None,
        enabled: true,
    };
    store.put_schedule(&schedule).await.expect("puts");
    assert_eq!(store.due_schedules(1000).await.expect("reads"), std::slice::from_ref(&schedule));
    let mut firers = tokio::task::JoinSet::new();
    for i in 0..6 {
        let store = store.clone();
        firers.spawn(async move {
            let firing = Firing::Start(run(&format!("tick-{i}"), RunStatus::Running));
            store.fire_schedule("nightly", 1000, 2000, firing, 1001).await.expect("fires or finds it fired")
        });
    }
    let mut fired = 0;
    while let Some(result) = firers.join_next().await {
        fired += usize::from(result.expect("the firer finished"));
    }
    assert_eq!(fired, 1);
    let runs = store.list_runs(&RunFilter::default()).await.expect("lists");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Queued);
    assert_eq!(store.queue().await.expect("reads").len(), 1);

    let wake = Firing::Wake { run_id: runs[0].id.clone(), kind: "wake".into(), payload: json!({}) };
    assert!(store.fire_schedule("nightly", 2000, 3000, wake, 2001).await.expect("fires"));
    assert_eq!(store.signals(&runs[0].id).await.expect("reads").len(), 1);
    let stored = store.schedules().await.expect("reads");
    assert_eq!((stored[0].next_fire_at, stored[0].last_fired_at), (3000, Some(2000)));
    assert!(store.delete_schedule("nightly").await.expect("deletes"));
    assert!(!store.delete_schedule("nightly").await.expect("deletes nothing"));
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn undecodable_rows_are_errors_not_panics() {
    let Some((url, schema)) = server("undecodable_rows_are_errors_not_panics") else { return };
    let store = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens");
    sqlx::raw_sql(
        "INSERT INTO runs (id, agent, status, state, created_at, updated_at) \
         VALUES ('bad-json', 'a', 'running', '{}', 1, 1), ('bad-status', 'a', 'dancing', '{}', 2, 2); \
         INSERT INTO run_inputs (run_id, input) VALUES ('bad-json', '{'), ('bad-status', '{}')",
    )
    .execute(store.pool())
    .await
    .expect("inserts");
    assert!(matches!(store.load_run("bad-json").await, Err(StoreError::Decode { .. })));
    assert!(matches!(store.load_run("bad-status").await, Err(StoreError::Decode { .. })));
    assert!(matches!(store.list_runs(&RunFilter::default()).await, Err(StoreError::Decode { .. })));
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

/// A raw JSON value, as a checkpoint carries its state and messages.
fn raw(value: serde_json::Value) -> Box<serde_json::value::RawValue> {
    serde_json::value::to_raw_value(&value).expect("JSON")
}

/// Two checkpoints of run `r1` under `lease`: the first keeps the status, writes three
/// messages and two entries (one about a call) and consumes the first signal; the second
/// completes the run, rewrites the messages from the second on, requires every signal
/// consumed and releases the lease.
fn two_checkpoints(lease: &crate::record::Lease) -> [Checkpoint; 2] {
    let mut chain = EvidenceChain::new("r1");
    let first = chain.seal(
        vec![
            NewEvidence::new(EvidenceKind::SignalApplied, json!({"seq": 1})),
            NewEvidence {
                call_id: Some("call-1".into()),
                ..NewEvidence::new(EvidenceKind::ActionStarted, json!({"a": 1}))
            },
        ],
        8,
    );
    chain.advance(&first);
    let second = chain.seal(vec![NewEvidence::new(EvidenceKind::RunFinished, json!({"answer": "done"}))], 9);
    let messages = |from: usize, texts: &[&str]| crate::record::MessagesWrite {
        from,
        messages: texts.iter().map(|text| raw(json!({"role": "user", "content": text}))).collect(),
    };
    [
        Checkpoint {
            run_id: "r1".into(),
            status: RunStatus::Running,
            activity: Some("thinking".into()),
            state: raw(json!({"step": 1})),
            evidence: first,
            signals_consumed_through: Some(1),
            fence: Some(lease.clone()),
            require_signals_consumed: false,
            release: false,
            flush: Flush::BeforeAnswer,
            messages: Some(messages(0, &["a", "b", "c"])),
            spend: None,
        },
        Checkpoint {
            run_id: "r1".into(),
            status: RunStatus::Completed,
            activity: None,
            state: raw(json!({"step": 2})),
            evidence: second,
            signals_consumed_through: Some(2),
            fence: Some(lease.clone()),
            require_signals_consumed: true,
            release: true,
            flush: Flush::BeforeAnswer,
            messages: Some(messages(1, &["B"])),
            spend: None,
        },
    ]
}

/// Everything the store holds of run `r1`, to compare two stores by.
async fn everything_of_r1(store: &PostgresStore) -> String {
    let record = store.load_run("r1").await.expect("loads");
    let transitions = store.transitions("r1").await.expect("reads");
    let evidence = store.evidence("r1", 0).await.expect("reads");
    let signals = store.signals("r1").await.expect("reads");
    let queue = store.queue().await.expect("reads");
    format!("{record:?}\n{transitions:?}\n{evidence:?}\n{signals:?}\n{queue:?}")
}

/// A store in a schema of its own with run `r1` created running under a lease, and two
/// signals sent to it.
async fn a_leased_run(url: &str, schema: &str) -> (PostgresStore, crate::record::Lease) {
    let store = PostgresStore::connect_in_schema(url, schema).await.expect("opens");
    let lease = store
        .create_leased_run(run("r1", RunStatus::Running), "w1", Duration::from_secs(30), 5)
        .await
        .expect("creates and leases");
    store.send_signal("r1", "user_message", json!({"text": "hi"}), 6).await.expect("sends");
    store.send_signal("r1", "approval", json!(true), 7).await.expect("sends");
    (store, lease)
}

#[tokio::test]
async fn a_fenced_checkpoint_in_one_statement_saves_what_its_steps_save() {
    let test = "a_fenced_checkpoint_in_one_statement_saves_what_its_steps_save";
    let Some((url, schema)) = server(test) else { return };
    let stepped_schema = format!("{schema}_steps");
    let (at_once, lease) = a_leased_run(&url, &schema).await;
    let (stepped, stepped_lease) = a_leased_run(&url, &stepped_schema).await;
    assert_eq!(lease, stepped_lease);

    for (checkpoint, now) in two_checkpoints(&lease).into_iter().zip([10, 11]) {
        let saved =
            crate::ops::runs::save_fenced_checkpoint(&mut super::link::Pg::Pool(&at_once.pool), &checkpoint, now)
                .await
                .expect("saves")
                .expect("in one statement");
        let mut tx = stepped.pool.begin().await.expect("begins");
        let by_steps = crate::ops::runs::save_checkpoint(&mut super::link::Pg::Conn(&mut tx), &checkpoint, now)
            .await
            .expect("saves by its steps");
        tx.commit().await.expect("commits");
        assert_eq!(saved, by_steps);
    }
    let held = everything_of_r1(&at_once).await;
    assert_eq!(held, everything_of_r1(&stepped).await);
    // What the two saved: not two empty stores.
    let record = at_once.load_run("r1").await.expect("loads").expect("exists");
    assert_eq!((record.status, record.evidence_head.seq), (RunStatus::Completed, 3));
    assert_eq!(record.state["messages"], json!([{"role": "user", "content": "a"}, {"role": "user", "content": "B"}]));
    assert!(at_once.queue().await.expect("reads").is_empty(), "the lease was released with the run's end");
    crate::verify_log(&at_once.evidence("r1", 0).await.expect("reads"), &record.evidence_head, "r1")
        .expect("the chain reaches its head");
    for store in [at_once, stepped] {
        store.close().await.expect("closes");
    }
    drop_schema(&url, &schema).await;
    drop_schema(&url, &stepped_schema).await;
}

#[tokio::test]
async fn a_fenced_checkpoint_that_may_not_be_saved_writes_nothing_and_says_why() {
    let test = "a_fenced_checkpoint_that_may_not_be_saved_writes_nothing_and_says_why";
    let Some((url, schema)) = server(test) else { return };
    let (store, lease) = a_leased_run(&url, &schema).await;
    let [first, last] = two_checkpoints(&lease);
    let before = everything_of_r1(&store).await;
    let at_once = |checkpoint: Checkpoint| {
        let pool = store.pool.clone();
        async move {
            crate::ops::runs::save_fenced_checkpoint(&mut super::link::Pg::Pool(&pool), &checkpoint, 10)
                .await
                .expect("no database error")
        }
    };

    // A lease that is not the run's (a stale epoch).
    let stale = Checkpoint { fence: Some(crate::record::Lease { epoch: 7, ..lease.clone() }), ..first.clone() };
    assert!(at_once(stale.clone()).await.is_none());
    assert!(matches!(store.checkpoint(stale, 10).await, Err(StoreError::LeaseLost { .. })));
    // A signal pending where every one must be consumed.
    let pending = Checkpoint { signals_consumed_through: Some(1), ..last.clone() };
    assert!(at_once(pending.clone()).await.is_none());
    assert!(matches!(store.checkpoint(pending, 10).await, Err(StoreError::SignalsPending { .. })));
    assert_eq!(everything_of_r1(&store).await, before, "nothing was written");

    // An entry whose number is taken: the statement fails whole.
    store.checkpoint(first.clone(), 10).await.expect("the first checkpoint saves");
    let saved = everything_of_r1(&store).await;
    let again = Checkpoint { state: raw(json!({"step": 99})), ..first };
    assert!(at_once(again.clone()).await.is_none());
    assert!(matches!(store.checkpoint(again, 11).await, Err(StoreError::EvidenceConflict { seq: 1, .. })));
    assert_eq!(everything_of_r1(&store).await, saved, "nothing was written");
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_while_idle_is_replaced() {
    let test = "a_pooled_connection_the_server_closed_while_idle_is_replaced";
    let Some((url, schema)) = server(test) else { return };
    let separator = if url.contains('?') { '&' } else { '?' };
    let named = format!("{url}{separator}application_name={schema}");
    let store = PostgresStore::connect_in_schema(&named, &schema).await.expect("opens");
    store.create_run(run("r1", RunStatus::Queued), 1).await.expect("creates");
    // As a server restart or a proxy's idle limit would: every connection of the pool goes.
    let mut admin = PgConnection::connect(&url).await.expect("the test server accepts a connection");
    let closed: Vec<bool> =
        sqlx::query_scalar("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1")
            .bind(&schema)
            .fetch_all(&mut admin)
            .await
            .expect("the server's activity is readable");
    assert!(!closed.is_empty() && closed.iter().all(|&c| c), "the pool's connections were closed: {closed:?}");
    admin.close().await.expect("the connection closes");
    tokio::time::sleep(super::connect::TRUSTED_IDLE + Duration::from_millis(100)).await;

    let record = store.load_run("r1").await.expect("a closed connection is not handed out");
    assert_eq!(record.map(|r| r.status), Some(RunStatus::Queued));
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

/// Two entries of run `r1` (the first about a call), sealed to follow `after`.
fn two_entries(after: &[crate::record::EvidenceEntry]) -> Vec<crate::record::EvidenceEntry> {
    EvidenceChain::after("r1", after.last()).seal(
        vec![
            NewEvidence {
                call_id: Some("call-7".into()),
                ..NewEvidence::new(EvidenceKind::ActionStarted, json!({"x": 1}))
            },
            NewEvidence::new(EvidenceKind::ActionCompleted, json!({"ok": true})),
        ],
        20,
    )
}

#[tokio::test]
async fn fenced_evidence_in_one_statement_appends_what_its_steps_append() {
    let test = "fenced_evidence_in_one_statement_appends_what_its_steps_append";
    let Some((url, schema)) = server(test) else { return };
    let stepped_schema = format!("{schema}_steps");
    let (at_once, lease) = a_leased_run(&url, &schema).await;
    let (stepped, _) = a_leased_run(&url, &stepped_schema).await;

    let first = two_entries(&[]);
    let second = two_entries(&first);
    for entries in [first, second] {
        let appended = crate::ops::evidence::append_fenced(&mut super::link::Pg::Pool(&at_once.pool), &entries, &lease)
            .await
            .expect("appends");
        assert!(appended, "in one statement");
        let mut tx = stepped.pool.begin().await.expect("begins");
        crate::ops::evidence::append(&mut super::link::Pg::Conn(&mut tx), &entries, Some(&lease))
            .await
            .expect("appends by its steps");
        tx.commit().await.expect("commits");
    }
    assert_eq!(everything_of_r1(&at_once).await, everything_of_r1(&stepped).await);
    let record = at_once.load_run("r1").await.expect("loads").expect("exists");
    let log = at_once.evidence("r1", 0).await.expect("reads");
    assert_eq!((log.len(), record.evidence_head.seq), (4, 4));
    assert_eq!(log[0].call_id.as_deref(), Some("call-7"));
    crate::verify_log(&log, &record.evidence_head, "r1").expect("the chain reaches its head");
    for store in [at_once, stepped] {
        store.close().await.expect("closes");
    }
    drop_schema(&url, &schema).await;
    drop_schema(&url, &stepped_schema).await;
}

#[tokio::test]
async fn fenced_evidence_that_may_not_be_appended_writes_nothing_and_says_why() {
    let test = "fenced_evidence_that_may_not_be_appended_writes_nothing_and_says_why";
    let Some((url, schema)) = server(test) else { return };
    let (store, lease) = a_leased_run(&url, &schema).await;
    let entries = two_entries(&[]);
    let at_once = |entries: Vec<crate::record::EvidenceEntry>, lease: crate::record::Lease| {
        let pool = store.pool.clone();
        async move {
            crate::ops::evidence::append_fenced(&mut super::link::Pg::Pool(&pool), &entries, &lease)
                .await
                .expect("no database error")
        }
    };
    let before = everything_of_r1(&store).await;
    let stale = crate::record::Lease { epoch: 7, ..lease.clone() };
    assert!(!at_once(entries.clone(), stale.clone()).await);
    assert!(matches!(store.append_evidence(&entries, Some(&stale)).await, Err(StoreError::LeaseLost { .. })));
    assert_eq!(everything_of_r1(&store).await, before, "nothing was written");

    store.append_evidence(&entries, Some(&lease)).await.expect("appends under the lease");
    let appended = everything_of_r1(&store).await;
    assert!(!at_once(entries.clone(), lease.clone()).await);
    assert!(matches!(
        store.append_evidence(&entries, Some(&lease)).await,
        Err(StoreError::EvidenceConflict { seq: 1, .. })
    ));
    assert_eq!(everything_of_r1(&store).await, appended, "nothing was written");
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}
