//! The work queue in the store: the in-memory queue's behaviour on a real SQLite file, work
//! that outlives the store it was enqueued through, and workers of separate stores on one
//! PostgreSQL database (when `TROUPE_TEST_DATABASE_URL` names a server) splitting the items.

use serde_json::json;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use troupe_store::Store;
use troupe_store::postgres::PostgresStore;
use troupe_team::coordination::{Clock, DurableWorkQueue, ItemState, NewWorkItem, QueueError};

const LEASE: Duration = Duration::from_secs(60);
const URL_VARIABLE: &str = "TROUPE_TEST_DATABASE_URL";

/// A clock the test moves by hand.
fn manual_clock() -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(1_700_000_000_000));
    let read = Arc::clone(&now);
    (now, Arc::new(move || read.load(Ordering::SeqCst)))
}

async fn sqlite_store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("troupe.db");
    troupe_store::open(path.to_str().expect("the temp path is UTF-8")).await.expect("a SQLite store opens")
}

#[tokio::test]
async fn a_durable_queue_hands_out_by_priority_tags_and_age() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let queue = DurableWorkQueue::new(sqlite_store(&dir).await, "team");
    let low = queue.enqueue(NewWorkItem::new(json!("low")).priority(1).tag("rust")).await.expect("enqueues");
    let high_old =
        queue.enqueue(NewWorkItem::new(json!("high-old")).priority(5).tag("python")).await.expect("enqueues");
    let high_new = queue.enqueue(NewWorkItem::new(json!("high-new")).priority(5).tag("rust")).await.expect("enqueues");
    assert_ne!(low, high_old, "generated ids are unique");
    let duplicate = queue.enqueue(NewWorkItem::new(json!(0)).id(low.clone())).await;
    assert!(matches!(duplicate, Err(QueueError::Duplicate(id)) if id == low), "ids are unique within the queue");
    let other_team = DurableWorkQueue::new(Arc::clone(queue.store()), "other-team");
    other_team.enqueue(NewWorkItem::new(json!("theirs")).priority(99).id(low.clone())).await.expect("another queue");

    let rust = queue.claim("rusty", LEASE, &["rust"]).await.expect("claims").expect("rust work");
    assert_eq!((rust.id.as_str(), rust.attempts), (high_new.as_str(), 1), "the best the filter accepts");
    assert!(matches!(rust.state, ItemState::Claimed { ref by, .. } if by == "rusty"));
    let any = queue.claim("any", LEASE, &[]).await.expect("claims").expect("work");
    assert_eq!(any.id, high_old, "equal priorities go oldest first");
    assert_eq!(queue.claim("any", LEASE, &["go"]).await.expect("claims"), None, "nothing carries `go`");
    let last = queue.claim("any", LEASE, &["go", "rust"]).await.expect("claims").expect("any of the tags");
    assert_eq!(last.id, low);
    assert_eq!(queue.claim("any", LEASE, &[]).await.expect("claims"), None, "the other queue's item is not ours");

    let stolen = queue.complete(&high_new, "any", json!(1)).await;
    assert!(matches!(stolen, Err(QueueError::NotHolder { ref worker, .. }) if worker == "any"), "{stolen:?}");
    assert!(matches!(queue.complete("nope", "any", json!(1)).await, Err(QueueError::UnknownItem(_))));
    let started = queue.start(&high_new, "rusty").await.expect("starts");
    assert!(matches!(started.state, ItemState::Running { ref by, .. } if by == "rusty"));
    let twice = queue.start(&high_new, "rusty").await;
    assert!(matches!(twice, Err(QueueError::WrongState { state: "running", operation: "start", .. })), "{twice:?}");
    queue.complete(&high_new, "rusty", json!({"ok": true})).await.expect("completes");
    let done = queue.get(&high_new).await.expect("reads").expect("kept");
    assert_eq!((done.state, done.result), (ItemState::Done, Some(json!({"ok": true}))));
    let stats = queue.stats().await.expect("stats");
    assert_eq!((stats.queued, stats.claimed, stats.running, stats.done, stats.failed), (0, 2, 0, 1, 0));
    let ids: Vec<String> = queue.items().await.expect("items").into_iter().map(|i| i.id).collect();
    assert_eq!(ids, [low, high_old, high_new], "items in enqueue order");
    assert_eq!(queue.purge_finished().await.expect("purges"), 1);
    assert_eq!(other_team.stats().await.expect("stats").queued, 1);
}

#[tokio::test]
async fn durable_failures_retry_and_lapsed_leases_fence_the_late_worker() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (now, clock) = manual_clock();
    let queue = DurableWorkQueue::new(sqlite_store(&dir).await, "team").with_clock(clock);
    let flaky = queue.enqueue(NewWorkItem::new(json!("flaky")).max_attempts(2).id("flaky")).await.expect("enqueues");
    queue.claim("w", LEASE, &[]).await.expect("claims").expect("work");
    queue.start(&flaky, "w").await.expect("starts");
    assert_eq!(queue.fail(&flaky, "w", "boom").await.expect("fails"), ItemState::Queued, "one attempt left");
    let again = queue.claim("w", LEASE, &[]).await.expect("claims").expect("retried");
    assert_eq!((again.attempts, again.last_error.as_deref()), (2, Some("boom")));
    assert_eq!(queue.fail(&flaky, "w", "boom again").await.expect("fails"), ItemState::Failed);
    assert_eq!(queue.claim("w", LEASE, &[]).await.expect("claims"), None);

    let job = queue.enqueue(NewWorkItem::new(json!("job")).max_attempts(2)).await.expect("enqueues");
    let later = now.load(Ordering::SeqCst) + 60_000;
    queue.enqueue(NewWorkItem::new(json!("later")).available_at(later).id("later")).await.expect("enqueues");
    queue.claim("dead", Duration::from_secs(10), &[]).await.expect("claims").expect("work");
    queue.start(&job, "dead").await.expect("starts");
    now.fetch_add(5_000, Ordering::SeqCst);
    queue.heartbeat(&job, "dead", Duration::from_secs(10)).await.expect("renews");
    now.fetch_add(9_000, Ordering::SeqCst);
    assert_eq!(queue.stats().await.expect("stats").running, 1, "the heartbeat extended the lease");
    now.fetch_add(2_000, Ordering::SeqCst);
    let late = queue.heartbeat(&job, "dead", Duration::from_secs(10)).await;
    assert!(matches!(late, Err(QueueError::NotHolder { .. })), "a lapsed lease is not renewed: {late:?}");
    let stats = queue.stats().await.expect("stats");
    assert_eq!((stats.queued, stats.running, stats.failed), (2, 0, 1), "the lease lapsed: the job waits again");
    assert!(queue.get(&job).await.expect("reads").expect("kept").last_error.expect("why").contains("lapsed"));

    let retried = queue.claim("alive", Duration::from_secs(10), &[]).await.expect("claims").expect("requeued");
    assert_eq!((retried.id.as_str(), retried.attempts), (job.as_str(), 2), "`later` is not available yet");
    let stale = queue.complete(&job, "dead", json!("dead's answer")).await;
    assert!(matches!(stale, Err(QueueError::NotHolder { ref worker, .. }) if worker == "dead"), "{stale:?}");
    now.fetch_add(11_000, Ordering::SeqCst);
    assert_eq!(queue.expire_leases().await.expect("expires"), 1);
    assert_eq!(queue.get(&job).await.expect("reads").expect("kept").state, ItemState::Failed, "no attempt left");
    now.fetch_add(60_000, Ordering::SeqCst);
    let available = queue.claim("alive", LEASE, &[]).await.expect("claims").expect("available by now");
    assert_eq!(available.id, "later");
}

/// Work enqueued, held and finished through one store is all there through the next one,
/// and the holder of a live lease goes on with it.
async fn work_survives_reopening(open: impl Fn() -> std::pin::Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>>) {
    let held_id;
    {
        let queue = DurableWorkQueue::new(open().await, "team");
        for (name, priority) in [("first", 3), ("held", 2), ("waiting", 1)] {
            queue.enqueue(NewWorkItem::new(json!({"task": name})).priority(priority)).await.expect("enqueues");
        }
        let first = queue.claim("w1", LEASE, &[]).await.expect("claims").expect("work");
        queue.complete(&first.id, "w1", json!("done before the restart")).await.expect("completes");
        let held = queue.claim("w1", LEASE, &[]).await.expect("claims").expect("work");
        queue.start(&held.id, "w1").await.expect("starts");
        held_id = held.id;
        queue.store().close().await.expect("the store closes");
    }
    let queue = DurableWorkQueue::new(open().await, "team");
    let stats = queue.stats().await.expect("stats");
    assert_eq!((stats.queued, stats.running, stats.done), (1, 1, 1), "every item is where it was");
    let held = queue.get(&held_id).await.expect("reads").expect("kept");
    assert!(matches!(held.state, ItemState::Running { ref by, .. } if by == "w1"), "{held:?}");
    let items = queue.items().await.expect("items");
    assert_eq!(items[0].result, Some(json!("done before the restart")));
    queue.complete(&held_id, "w1", json!("done after it")).await.expect("the lease is still w1's");
    let waiting = queue.claim("w2", LEASE, &[]).await.expect("claims").expect("the waiting item");
    assert_eq!(waiting.payload, json!({"task": "waiting"}));
    queue.store().close().await.expect("the store closes");
}

#[tokio::test]
async fn durable_work_survives_dropping_and_reopening_a_sqlite_store() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = dir.path().join("troupe.db").to_str().expect("UTF-8").to_owned();
    work_survives_reopening(|| {
        let url = url.clone();
        Box::pin(async move { troupe_store::open(&url).await.expect("the store opens") })
    })
    .await;
}

/// Runs `test` with the test server's URL and a fresh schema on it, dropped afterwards; or
/// skips, saying so, without a server.
async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(String, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Ok(url) = std::env::var(URL_VARIABLE) else {
        troupe_testkit::skip("a PostgreSQL team queue test", &format!("{URL_VARIABLE} is not set"));
        return;
    };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let schema = format!("troupe_team_{}_{nanos}", std::process::id());
    let admin = PostgresStore::connect_in_schema(&url, &schema).await.expect("the test schema is created");
    let outcome = tokio::spawn(test(url, schema.clone())).await;
    let drop_schema = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
    let dropped = sqlx::query(sqlx::AssertSqlSafe(drop_schema)).execute(admin.pool()).await;
    admin.close().await.expect("closes");
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
    dropped.expect("the test schema is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn durable_work_survives_reconnecting_to_postgres() {
    with_postgres(|url, schema| async move {
        work_survives_reopening(move || {
            let (url, schema) = (url.clone(), schema.clone());
            Box::pin(async move {
                let store = PostgresStore::connect_in_schema(&url, &schema).await.expect("connects");
                Arc::new(store) as Arc<dyn Store>
            })
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_on_their_own_postgres_stores_split_the_items() {
    const ITEMS: usize = 100;
    with_postgres(|url, schema| async move {
        let connect = || async {
            Arc::new(PostgresStore::connect_in_schema(&url, &schema).await.expect("connects")) as Arc<dyn Store>
        };
        let (first, second) = (connect().await, connect().await);
        let producer = DurableWorkQueue::new(Arc::clone(&first), "builds");
        for i in 0..ITEMS {
            let item = NewWorkItem::new(json!({"n": i})).id(format!("build-{i:03}")).priority(i64::from(i % 3 == 0));
            producer.enqueue(item).await.expect("enqueues");
        }
        let mut workers = Vec::new();
        for (name, store) in [("worker-a", first), ("worker-b", second)] {
            let queue = DurableWorkQueue::new(store, "builds");
            workers.push(tokio::spawn(async move {
                let mut done = Vec::new();
                while let Some(item) = queue.claim(name, LEASE, &[]).await.expect("claims") {
                    queue.start(&item.id, name).await.expect("starts");
                    // Work takes a moment, so the other worker claims meanwhile.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    queue.complete(&item.id, name, json!(name)).await.expect("completes its own item");
                    done.push(item.id);
                }
                done
            }));
        }
        let mut per_worker = Vec::new();
        for worker in workers {
            per_worker.push(worker.await.expect("the worker ran"));
        }
        let all: Vec<&String> = per_worker.iter().flatten().collect();
        let distinct: BTreeSet<&String> = all.iter().copied().collect();
        assert_eq!(all.len(), distinct.len(), "no item was worked on twice");
        assert_eq!(distinct.len(), ITEMS, "every item was worked on");
        assert!(per_worker.iter().all(|done| !done.is_empty()), "both workers got work: {per_worker:?}");
        let stats = producer.stats().await.expect("stats");
        assert_eq!((stats.done, stats.queued, stats.claimed, stats.running), (ITEMS, 0, 0, 0));
        for item in producer.items().await.expect("items") {
            assert_eq!(item.attempts, 1, "each item was claimed once: {item:?}");
        }
    })
    .await;
}
