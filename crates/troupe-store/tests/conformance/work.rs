//! Team work queues: enqueueing, claims by priority, age and tags, the holder's operations,
//! retries, lapsed leases, the refusal of a stale holder, and concurrent claimers.

use super::harness::{Backend, T0};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use troupe_store::{NewWork, Store, StoreError, WorkRecord, WorkState, WorkStats};

const TTL: Duration = Duration::from_secs(30);
const TTL_MS: i64 = 30_000;
const QUEUE: &str = "team-a";

/// An item of `QUEUE` with priority 0, no tags, 3 attempts, available from `T0`.
fn work(id: &str) -> NewWork {
    NewWork {
        queue: QUEUE.into(),
        id: id.into(),
        payload: json!({"task": format!("task {id}")}),
        priority: 0,
        tags: Vec::new(),
        max_attempts: 3,
        available_at: T0,
    }
}

async fn claim(store: &dyn Store, worker: &str, tags: &[&str], now: i64) -> Option<WorkRecord> {
    let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
    store.claim_work(QUEUE, worker, &tags, TTL, now).await.expect("claim_work")
}

async fn claimed_id(store: &dyn Store, worker: &str, tags: &[&str], now: i64) -> Option<String> {
    claim(store, worker, tags, now).await.map(|item| item.id)
}

async fn stats(store: &dyn Store) -> WorkStats {
    store.work_stats(QUEUE).await.expect("work_stats")
}

fn is_lost(result: &Result<WorkRecord, StoreError>, worker: &str) -> bool {
    matches!(result, Err(StoreError::WorkLeaseLost { queue, id, worker: w }) if queue == QUEUE && !id.is_empty() && w == worker)
}

/// An item goes through its life: enqueued, claimed, started, renewed, completed, purged.
pub async fn work_items_are_enqueued_claimed_and_completed(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let mut first = work("a");
    first.tags = vec!["rust".into(), "review".into()];
    first.payload = json!({"file": "src/lib.rs", "text": "ü 😀 \"quoted\""});
    let stored = store.enqueue_work(&first, T0).await.expect("enqueue_work");
    assert_eq!((stored.queue.as_str(), stored.id.as_str(), stored.state), (QUEUE, "a", WorkState::Queued));
    assert_eq!((stored.attempts, stored.max_attempts, stored.worker.as_deref()), (0, 3, None));
    assert_eq!((stored.payload.clone(), stored.tags.clone()), (first.payload.clone(), first.tags.clone()));
    assert_eq!((stored.enqueued_at, stored.updated_at, stored.available_at), (T0, T0, T0));
    assert_eq!(store.work_item(QUEUE, "a").await.expect("work_item"), Some(stored.clone()));

    let refused = store.enqueue_work(&work("a"), T0 + 1).await;
    assert!(
        matches!(&refused, Err(StoreError::WorkItemExists { queue, id }) if queue == QUEUE && id == "a"),
        "expected WorkItemExists, got {refused:?}"
    );
    let elsewhere = NewWork { queue: "team-b".into(), ..work("a") };
    store.enqueue_work(&elsewhere, T0).await.expect("another queue may use the same id");
    store.enqueue_work(&work("b"), T0 + 2).await.expect("enqueue_work");

    let claimed = claim(store.as_ref(), "w1", &[], T0 + 10).await.expect("an item is claimed");
    assert_eq!((claimed.id.as_str(), claimed.state, claimed.attempts), ("a", WorkState::Claimed, 1));
    assert_eq!((claimed.worker.as_deref(), claimed.lease_expires_at), (Some("w1"), Some(T0 + 10 + TTL_MS)));
    assert_eq!(stats(store.as_ref()).await, WorkStats { queued: 1, claimed: 1, ..WorkStats::default() });

    let started = store.start_work(QUEUE, "a", "w1", T0 + 20).await.expect("start_work");
    assert_eq!((started.state, started.updated_at), (WorkState::Running, T0 + 20));
    let renewed = store.heartbeat_work(QUEUE, "a", "w1", TTL, T0 + 1_000).await.expect("heartbeat_work");
    assert_eq!((renewed.state, renewed.lease_expires_at), (WorkState::Running, Some(T0 + 1_000 + TTL_MS)));
    let done = store.complete_work(QUEUE, "a", "w1", &json!({"fixed": true}), T0 + 2_000).await.expect("complete");
    assert_eq!(
        (done.state, done.result.clone(), done.lease_expires_at),
        (WorkState::Done, Some(json!({"fixed": true})), None)
    );
    assert_eq!(done.worker.as_deref(), Some("w1"), "a finished item names who finished it");
    assert_eq!(stats(store.as_ref()).await, WorkStats { queued: 1, done: 1, ..WorkStats::default() });

    let all: Vec<String> = store.work_items(QUEUE, None).await.expect("work_items").into_iter().map(|i| i.id).collect();
    assert_eq!(all, ["a", "b"], "items are listed in enqueue order");
    let queued = store.work_items(QUEUE, Some(WorkState::Queued)).await.expect("work_items");
    assert_eq!(queued.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["b"]);
    assert_eq!(store.work_stats("team-b").await.expect("work_stats").queued, 1, "queues are counted apart");

    assert_eq!(store.purge_finished_work(QUEUE).await.expect("purge"), 1);
    assert_eq!(store.work_item(QUEUE, "a").await.expect("work_item"), None, "the finished item is gone");
    assert!(store.work_item(QUEUE, "b").await.expect("work_item").is_some(), "the queued item stays");
    assert!(store.work_item("team-b", "a").await.expect("work_item").is_some(), "other queues are untouched");
    store.enqueue_work(&work("a"), T0 + 3_000).await.expect("a purged id may be used again");

    // A row the store cannot read back is an error, not a panic.
    let garble = format!("UPDATE work_items SET payload = 'not json' WHERE queue = '{QUEUE}' AND id = 'b'");
    assert_eq!(backend.execute(&garble).await.expect("raw SQL"), 1);
    let read = store.work_item(QUEUE, "b").await;
    assert!(matches!(read, Err(StoreError::Decode { .. })), "expected Decode, got {read:?}");
}

/// Claims take the highest priority first, the first enqueued among equals, and never an
/// item before it is available or from another queue.
pub async fn work_claims_go_by_priority_then_age(backend: Arc<dyn Backend>) {
    let store = backend.store();
    for (id, priority, available_at) in
        [("low", 1, T0), ("high-old", 5, T0), ("later", 9, T0 + 500), ("high-new", 5, T0), ("zero", 0, T0)]
    {
        store.enqueue_work(&NewWork { priority, available_at, ..work(id) }, T0).await.expect("enqueue_work");
    }
    let urgent_elsewhere = NewWork { queue: "team-b".into(), priority: 100, ..work("other") };
    store.enqueue_work(&urgent_elsewhere, T0).await.expect("enqueue_work");

    let mut order = Vec::new();
    while let Some(id) = claimed_id(store.as_ref(), "w", &[], T0 + 100).await {
        order.push(id);
    }
    assert_eq!(order, ["high-old", "high-new", "low", "zero"], "priority, then enqueue order; `later` waits");
    assert_eq!(claimed_id(store.as_ref(), "w", &[], T0 + 499).await, None, "not before it is available");
    assert_eq!(claimed_id(store.as_ref(), "w", &[], T0 + 500).await.as_deref(), Some("later"));
    assert_eq!(store.work_stats("team-b").await.expect("work_stats").queued, 1, "the other queue was not touched");
}

/// A tag filter takes only items carrying one of its tags; no filter takes any item.
pub async fn work_claims_honour_tag_filters(backend: Arc<dyn Backend>) {
    let store = backend.store();
    for (id, tags, priority) in [
        ("py", vec!["python"], 9),
        ("rs", vec!["rust"], 1),
        ("rs-review", vec!["rust", "review"], 5),
        ("docs", vec!["docs"], 0),
        ("untagged", vec![], 7),
        ("percent", vec!["10%"], 0),
    ] {
        let tags = tags.into_iter().map(str::to_owned).collect();
        store.enqueue_work(&NewWork { tags, priority, ..work(id) }, T0).await.expect("enqueue_work");
    }
    let now = T0 + 1;
    assert_eq!(claimed_id(store.as_ref(), "r", &["rust"], now).await.as_deref(), Some("rs-review"));
    assert_eq!(claimed_id(store.as_ref(), "r", &["rust"], now).await.as_deref(), Some("rs"));
    assert_eq!(claimed_id(store.as_ref(), "r", &["rust"], now).await, None, "no rust work left");
    assert_eq!(claimed_id(store.as_ref(), "x", &["go", "ml"], now).await, None, "no item carries these");
    assert_eq!(claimed_id(store.as_ref(), "x", &["1%"], now).await, None, "tags match whole, not as patterns");
    assert_eq!(claimed_id(store.as_ref(), "d", &["docs", "python"], now).await.as_deref(), Some("py"), "any of them");
    assert_eq!(claimed_id(store.as_ref(), "d", &["docs", "python"], now).await.as_deref(), Some("docs"));
    assert_eq!(claimed_id(store.as_ref(), "a", &[], now).await.as_deref(), Some("untagged"), "no filter: any item");
    assert_eq!(claimed_id(store.as_ref(), "a", &["10%"], now).await.as_deref(), Some("percent"));
}

/// A failed item goes back to the queue while it has attempts left, then fails for good.
pub async fn failed_work_is_retried_until_its_last_attempt(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.enqueue_work(&NewWork { max_attempts: 2, ..work("flaky") }, T0).await.expect("enqueue_work");
    store.enqueue_work(&NewWork { max_attempts: 0, ..work("once") }, T0).await.expect("enqueue_work");
    assert_eq!(store.work_item(QUEUE, "once").await.expect("work_item").expect("stored").max_attempts, 1);

    let first = claim(store.as_ref(), "w1", &[], T0 + 1).await.expect("claimed");
    assert_eq!((first.id.as_str(), first.attempts), ("flaky", 1));
    store.start_work(QUEUE, "flaky", "w1", T0 + 2).await.expect("start_work");
    let retried = store.fail_work(QUEUE, "flaky", "w1", "the linker crashed", T0 + 3).await.expect("fail_work");
    assert_eq!((retried.state, retried.worker.as_deref(), retried.lease_expires_at), (WorkState::Queued, None, None));
    assert_eq!(retried.last_error.as_deref(), Some("the linker crashed"));
    assert!(is_lost(&store.complete_work(QUEUE, "flaky", "w1", &json!(1), T0 + 4).await, "w1"), "w1 let it go");

    let second = claim(store.as_ref(), "w2", &[], T0 + 5).await.expect("claimed again");
    assert_eq!((second.id.as_str(), second.attempts), ("flaky", 2), "the retry goes ahead of newer work");
    assert_eq!(second.last_error.as_deref(), Some("the linker crashed"), "the last error is kept until it ends");
    let failed = store.fail_work(QUEUE, "flaky", "w2", "crashed again", T0 + 6).await.expect("fail_work");
    assert_eq!((failed.state, failed.worker.as_deref()), (WorkState::Failed, Some("w2")));
    assert_eq!(failed.last_error.as_deref(), Some("crashed again"));

    let once = claim(store.as_ref(), "w3", &[], T0 + 7).await.expect("the other item");
    assert_eq!(once.id, "once");
    let ended = store.fail_work(QUEUE, "once", "w3", "no", T0 + 8).await.expect("fail_work");
    assert_eq!(ended.state, WorkState::Failed, "one attempt, one failure");
    assert_eq!(claim(store.as_ref(), "w3", &[], T0 + 9).await, None, "failed items are not claimed");
    assert_eq!(stats(store.as_ref()).await, WorkStats { failed: 2, ..WorkStats::default() });
    assert_eq!(store.purge_finished_work(QUEUE).await.expect("purge"), 2);
    assert_eq!(stats(store.as_ref()).await.total(), 0);
}

/// A lapsed lease puts the item back in the queue, counted as an attempt; at its last
/// attempt the item fails. Claims expire lapsed leases themselves.
pub async fn lapsed_work_leases_return_the_item_or_fail_it(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let short = Duration::from_millis(1_000);
    store.enqueue_work(&NewWork { max_attempts: 2, ..work("job") }, T0).await.expect("enqueue_work");
    store.claim_work(QUEUE, "dead", &[], short, T0).await.expect("claim").expect("claimed");
    store.start_work(QUEUE, "job", "dead", T0 + 10).await.expect("start_work");
    let renewed = store.heartbeat_work(QUEUE, "job", "dead", short, T0 + 500).await.expect("heartbeat_work");
    assert_eq!(renewed.lease_expires_at, Some(T0 + 1_500));

    assert_eq!(store.expire_work_leases(QUEUE, T0 + 1_499).await.expect("expire"), 0, "the lease is still live");
    assert_eq!(store.expire_work_leases(QUEUE, T0 + 1_500).await.expect("expire"), 1, "it lapses at its expiry");
    let back = store.work_item(QUEUE, "job").await.expect("work_item").expect("stored");
    assert_eq!((back.state, back.worker.as_deref(), back.attempts), (WorkState::Queued, None, 1));
    assert!(back.last_error.as_deref().is_some_and(|e| e.contains("dead") && e.contains("lapsed")), "{back:?}");
    assert_eq!(store.expire_work_leases(QUEUE, T0 + 1_600).await.expect("expire"), 0, "nothing else lapsed");

    // The second claim lapses too, with no one expiring it: the next claim does.
    store.claim_work(QUEUE, "slow", &[], short, T0 + 2_000).await.expect("claim").expect("claimed again");
    store.enqueue_work(&work("next"), T0 + 2_000).await.expect("enqueue_work");
    let taken = claim(store.as_ref(), "alive", &[], T0 + 3_000).await.expect("claimed");
    assert_eq!(taken.id, "next", "the lapsed item had no attempt left");
    let failed = store.work_item(QUEUE, "job").await.expect("work_item").expect("stored");
    assert_eq!((failed.state, failed.attempts, failed.worker.as_deref()), (WorkState::Failed, 2, Some("slow")));
    assert!(failed.last_error.as_deref().is_some_and(|e| e.contains("slow")), "{failed:?}");
    assert_eq!(stats(store.as_ref()).await, WorkStats { claimed: 1, failed: 1, ..WorkStats::default() });
}

/// A worker whose lease lapsed is refused, whether or not the item was claimed again; only
/// the holder changes an item, and only in the states that allow it.
pub async fn a_stale_work_holder_is_refused(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let short = Duration::from_millis(1_000);
    store.enqueue_work(&work("item"), T0).await.expect("enqueue_work");
    store.claim_work(QUEUE, "w1", &[], short, T0).await.expect("claim").expect("claimed");

    let impostor = store.start_work(QUEUE, "item", "w2", T0 + 1).await;
    assert!(is_lost(&impostor, "w2"), "only the holder starts it: {impostor:?}");
    assert!(is_lost(&store.heartbeat_work(QUEUE, "item", "w2", TTL, T0 + 1).await, "w2"), "nor renews it");
    store.start_work(QUEUE, "item", "w1", T0 + 2).await.expect("the holder starts it");
    let twice = store.start_work(QUEUE, "item", "w1", T0 + 3).await;
    assert!(
        matches!(&twice, Err(StoreError::WrongWorkState { state: WorkState::Running, operation: "start", .. })),
        "an item is started once: {twice:?}"
    );

    // Lapsed, not yet claimed again: the late holder is refused all the same.
    let late = store.heartbeat_work(QUEUE, "item", "w1", short, T0 + 1_000).await;
    assert!(is_lost(&late, "w1"), "a lapsed lease is not renewed: {late:?}");
    let still = store.work_item(QUEUE, "item").await.expect("work_item").expect("stored");
    assert_eq!((still.state, still.lease_expires_at), (WorkState::Running, Some(T0 + 1_000)), "nothing changed");

    let retaken = claim(store.as_ref(), "w2", &[], T0 + 1_001).await.expect("the lapsed item is claimed again");
    assert_eq!((retaken.id.as_str(), retaken.attempts, retaken.worker.as_deref()), ("item", 2, Some("w2")));
    let stale = store.complete_work(QUEUE, "item", "w1", &json!("w1's answer"), T0 + 1_002).await;
    assert!(is_lost(&stale, "w1"), "the stale holder's completion is refused: {stale:?}");
    assert!(is_lost(&store.fail_work(QUEUE, "item", "w1", "late", T0 + 1_002).await, "w1"), "so is its failure");
    assert!(is_lost(&store.start_work(QUEUE, "item", "w1", T0 + 1_002).await, "w1"), "and its start");
    let current = store.work_item(QUEUE, "item").await.expect("work_item").expect("stored");
    assert_eq!(
        (current.state, current.worker.as_deref(), current.result.clone()),
        (WorkState::Claimed, Some("w2"), None)
    );

    let done = store.complete_work(QUEUE, "item", "w2", &json!("w2's answer"), T0 + 1_003).await.expect("complete");
    assert_eq!(done.result, Some(json!("w2's answer")));
    assert!(is_lost(&store.complete_work(QUEUE, "item", "w1", &Value::Null, T0 + 1_004).await, "w1"));
    let again = store.complete_work(QUEUE, "item", "w2", &Value::Null, T0 + 1_004).await;
    assert!(
        matches!(&again, Err(StoreError::WrongWorkState { state: WorkState::Done, operation: "complete", .. })),
        "a finished item is not completed twice: {again:?}"
    );
    let ghost = store.complete_work(QUEUE, "ghost", "w2", &Value::Null, T0).await;
    assert!(
        matches!(&ghost, Err(StoreError::UnknownWorkItem { queue, id }) if queue == QUEUE && id == "ghost"),
        "expected UnknownWorkItem, got {ghost:?}"
    );
    let elsewhere = store.complete_work("team-b", "item", "w2", &Value::Null, T0).await;
    assert!(matches!(elsewhere, Err(StoreError::UnknownWorkItem { .. })), "items belong to their queue");
    assert_eq!(
        store.work_item(QUEUE, "item").await.expect("work_item").expect("stored").result,
        Some(json!("w2's answer"))
    );
}

/// Four workers on two store instances drain 200 items, completing each: every item is
/// claimed exactly once.
pub async fn concurrent_work_claimers_never_share_an_item(backend: Arc<dyn Backend>) {
    const WORKERS: usize = 4;
    const ITEMS: usize = WORKERS * 50;
    let store = backend.store();
    let second = backend.open_another().await;
    for i in 0..ITEMS {
        let priority = i64::try_from(i % 7).expect("small");
        store.enqueue_work(&NewWork { priority, ..work(&format!("item-{i:03}")) }, T0).await.expect("enqueue_work");
    }
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..WORKERS {
        let store = if worker % 2 == 0 { Arc::clone(&store) } else { Arc::clone(&second) };
        workers.spawn(async move {
            let name = format!("worker-{worker}");
            let mut claimed = Vec::new();
            while let Some(item) =
                store.claim_work(QUEUE, &name, &[], TTL, T0 + 1).await.expect("every concurrent claim succeeds")
            {
                assert_eq!((item.worker.as_deref(), item.attempts), (Some(name.as_str()), 1));
                store.complete_work(QUEUE, &item.id, &name, &json!(name), T0 + 2).await.expect("the holder completes");
                claimed.push(item.id);
            }
            claimed
        });
    }
    let mut claimed = Vec::new();
    while let Some(joined) = workers.join_next().await {
        claimed.extend(joined.expect("the worker task ran"));
    }
    let distinct: BTreeSet<&String> = claimed.iter().collect();
    assert_eq!(claimed.len(), distinct.len(), "an item was claimed twice");
    assert_eq!(distinct.len(), ITEMS, "every item was claimed");
    assert_eq!(stats(store.as_ref()).await, WorkStats { done: ITEMS as u64, ..WorkStats::default() });
    for item in store.work_items(QUEUE, None).await.expect("work_items") {
        assert_eq!(
            item.result.as_ref().and_then(Value::as_str),
            item.worker.as_deref(),
            "the holder's result was kept"
        );
    }
    second.close().await.expect("the second store closes");
}
