//! The run queue: enqueueing, claims, heartbeats, releases, takeovers of lapsed leases and
//! the fencing that stops a taken-over worker from writing.

use super::harness::{Backend, T0, checkpoint, new_run};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use troupe_store::{
    Checkpoint, EvidenceChain, EvidenceKind, Lease, NewEvidence, QueueEntry, RunStatus, StoreError, Transition,
};

const TTL: Duration = Duration::from_secs(30);
const TTL_MS: i64 = 30_000;

/// A run goes through the queue: enqueued, claimed, renewed, requeued, claimed again, released.
pub async fn enqueue_claim_heartbeat_release(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-1", "coder", RunStatus::Running), T0).await.expect("the run is created");
    assert!(store.queue().await.expect("queue").is_empty(), "a running run is not enqueued on creation");
    assert_eq!(store.claim("w1", TTL, T0).await.expect("claim of an empty queue"), None);

    store.enqueue("run-1", T0).await.expect("enqueue");
    assert_eq!(
        store.queue().await.expect("queue"),
        [QueueEntry { run_id: "run-1".into(), available_at: T0, owner: None, epoch: 0, expires_at: None }]
    );

    let lease = store.claim("w1", TTL, T0 + 10).await.expect("claim").expect("the queued run is claimed");
    assert_eq!(lease, Lease { run_id: "run-1".into(), owner: "w1".into(), epoch: 1, expires_at: T0 + 10 + TTL_MS });
    let entry = store.queue().await.expect("queue").pop().expect("the run stays in the queue while leased");
    assert_eq!((entry.owner.as_deref(), entry.epoch, entry.expires_at), (Some("w1"), 1, Some(T0 + 10 + TTL_MS)));
    assert_eq!(store.claim("w2", TTL, T0 + 20).await.expect("claim"), None, "a leased run is not claimed twice");

    let renewed = store.heartbeat(&lease, TTL, T0 + 1_000).await.expect("heartbeat").expect("the lease is renewed");
    assert_eq!(renewed, Lease { expires_at: T0 + 1_000 + TTL_MS, ..lease.clone() });
    let forged = Lease { epoch: 7, ..lease.clone() };
    assert_eq!(store.heartbeat(&forged, TTL, T0 + 1_000).await.expect("heartbeat"), None, "the epoch must match");
    let impostor = Lease { owner: "w2".into(), ..lease.clone() };
    assert_eq!(store.heartbeat(&impostor, TTL, T0 + 1_000).await.expect("heartbeat"), None, "the owner must match");

    store.release(&renewed, Some(T0 + 5_000)).await.expect("release with requeue");
    let entry = store.queue().await.expect("queue").pop().expect("the requeued run waits in the queue");
    assert_eq!((entry.owner, entry.available_at, entry.epoch), (None, T0 + 5_000, 1));
    assert_eq!(store.heartbeat(&renewed, TTL, T0 + 2_000).await.expect("heartbeat"), None, "a released lease is gone");
    assert_eq!(store.claim("w2", TTL, T0 + 4_999).await.expect("claim"), None, "not before it is available again");

    let second = store.claim("w2", TTL, T0 + 5_000).await.expect("claim").expect("claimed again once available");
    assert_eq!((second.owner.as_str(), second.epoch), ("w2", 2));
    store.release(&renewed, None).await.expect("releasing a stale lease is not an error");
    assert_eq!(store.queue().await.expect("queue").len(), 1, "releasing a stale lease changes nothing");
    assert!(store.heartbeat(&second, TTL, T0 + 5_001).await.expect("heartbeat").is_some());

    store.release(&second, None).await.expect("release");
    assert!(store.queue().await.expect("queue").is_empty(), "a released run leaves the queue");
    assert_eq!(store.claim("w3", TTL, T0 + 9_000).await.expect("claim"), None);
}

/// Claims go to the run available longest, never to one not yet available.
pub async fn claim_respects_availability_and_order(backend: Arc<dyn Backend>) {
    let store = backend.store();
    for id in ["run-late", "run-early", "run-later"] {
        store.create_run(new_run(id, "coder", RunStatus::Running), T0).await.expect("the run is created");
    }
    store.enqueue("run-late", T0 + 200).await.expect("enqueue");
    store.enqueue("run-early", T0 + 100).await.expect("enqueue");
    store.enqueue("run-later", T0 + 300).await.expect("enqueue");
    let order: Vec<String> = store.queue().await.expect("queue").into_iter().map(|e| e.run_id).collect();
    assert_eq!(order, ["run-early", "run-late", "run-later"], "the queue is listed by availability");

    assert_eq!(store.claim("w1", TTL, T0 + 99).await.expect("claim"), None, "nothing is available yet");
    let first = store.claim("w1", TTL, T0 + 250).await.expect("claim").expect("a run is available");
    assert_eq!(first.run_id, "run-early");
    let next = store.claim("w1", TTL, T0 + 250).await.expect("claim").expect("another run is available");
    assert_eq!(next.run_id, "run-late");
    assert_eq!(store.claim("w1", TTL, T0 + 250).await.expect("claim"), None, "run-later is not available yet");
    let last = store.claim("w1", TTL, T0 + 300).await.expect("claim").expect("available from its time on");
    assert_eq!(last.run_id, "run-later");

    // Moving an unleased queued run moves its availability.
    store.create_run(new_run("run-moved", "coder", RunStatus::Queued), T0).await.expect("the run is created");
    store.enqueue("run-moved", T0 + 10_000).await.expect("enqueue moves the run");
    assert_eq!(store.claim("w1", TTL, T0 + 9_999).await.expect("claim"), None, "the moved run waits");
    let moved = store.claim("w1", TTL, T0 + 10_000).await.expect("claim").expect("the moved run is claimed");
    assert_eq!(moved.run_id, "run-moved");
}

/// Enqueueing a leased run leaves it with its holder.
pub async fn enqueue_leaves_a_leased_run_with_its_holder(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-held", "coder", RunStatus::Queued), T0).await.expect("the run is created");
    let lease = store.claim("w1", TTL, T0).await.expect("claim").expect("claimed");
    store.enqueue("run-held", T0 + 50).await.expect("enqueue of a leased run");
    let entry = store.queue().await.expect("queue").pop().expect("still queued");
    assert_eq!((entry.owner.as_deref(), entry.epoch, entry.expires_at), (Some("w1"), 1, Some(T0 + TTL_MS)));
    assert_eq!(store.claim("w2", TTL, T0 + 100).await.expect("claim"), None, "nobody else gets the run");
    assert!(store.heartbeat(&lease, TTL, T0 + 100).await.expect("heartbeat").is_some(), "the holder keeps it");
}

/// A lapsed lease is taken over with a higher epoch, and the old holder is fenced out.
pub async fn lapsed_lease_is_taken_over_and_fenced(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-t", "coder", RunStatus::Queued), T0).await.expect("the run is created");
    let old = store.claim("w1", Duration::from_millis(1_000), T0).await.expect("claim").expect("claimed");
    assert_eq!((old.epoch, old.expires_at), (1, T0 + 1_000));

    // A holder that renews late, before anyone took over, still holds the lease.
    let old = store.heartbeat(&old, Duration::from_millis(1_000), T0 + 1_500).await.expect("heartbeat");
    let old = old.expect("a lapsed lease nobody took over is still renewed by its holder");
    assert_eq!(old.expires_at, T0 + 2_500);

    assert_eq!(store.claim("w2", TTL, T0 + 2_000).await.expect("claim"), None, "the lease has not lapsed");
    assert_eq!(store.claim("w2", TTL, T0 + 2_500).await.expect("claim"), None, "it lapses after its expiry");
    let new = store.claim("w2", TTL, T0 + 2_501).await.expect("claim").expect("the lapsed lease is taken over");
    assert_eq!((new.run_id.as_str(), new.owner.as_str(), new.epoch), ("run-t", "w2", 2));

    assert_eq!(store.heartbeat(&old, TTL, T0 + 2_600).await.expect("heartbeat"), None, "the old holder lost it");

    let mut stale = checkpoint("run-t", RunStatus::Completed, json!({"by": "w1"}));
    stale.fence = Some(old.clone());
    let refused = store.checkpoint(stale, T0 + 2_700).await;
    assert!(
        matches!(&refused, Err(StoreError::LeaseLost { run_id, owner }) if run_id == "run-t" && owner == "w1"),
        "expected LeaseLost for w1, got {refused:?}"
    );
    let run = store.load_run("run-t").await.expect("load_run").expect("stored");
    assert_eq!((run.status, run.state), (RunStatus::Queued, json!({})), "the fenced checkpoint saved nothing");

    let chain = EvidenceChain::new("run-t");
    let entries = chain.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, json!({"by": "w1"}))], T0 + 2_700);
    let refused = store.append_evidence(&entries, Some(&old)).await;
    assert!(matches!(&refused, Err(StoreError::LeaseLost { .. })), "expected LeaseLost, got {refused:?}");
    assert!(store.evidence("run-t", 0).await.expect("evidence").is_empty(), "the fenced append saved nothing");

    let entries = chain.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, json!({"by": "w2"}))], T0 + 2_800);
    store.append_evidence(&entries, Some(&new)).await.expect("the new holder appends");
    let mut current = checkpoint("run-t", RunStatus::Running, json!({"by": "w2"}));
    current.fence = Some(new.clone());
    store.checkpoint(current, T0 + 2_800).await.expect("the new holder checkpoints");

    // A lease fences its own run only: it does not let its holder write another.
    store.create_run(new_run("run-u", "coder", RunStatus::Running), T0).await.expect("the run is created");
    let mut elsewhere = checkpoint("run-u", RunStatus::Completed, json!({"by": "w2"}));
    elsewhere.fence = Some(new.clone());
    let refused = store.checkpoint(elsewhere, T0 + 2_850).await;
    assert!(matches!(&refused, Err(StoreError::LeaseLost { .. })), "another run's lease fences: {refused:?}");
    let run = store.load_run("run-u").await.expect("load_run").expect("stored");
    assert_eq!((run.status, run.state), (RunStatus::Running, json!({})), "the fenced checkpoint saved nothing");

    store.release(&old, None).await.expect("releasing a lost lease is not an error");
    assert_eq!(store.queue().await.expect("queue").len(), 1, "the old holder's release did not remove the run");
    store.release(&new, None).await.expect("release");
    let mut after_release = checkpoint("run-t", RunStatus::Completed, json!({}));
    after_release.fence = Some(new);
    let refused = store.checkpoint(after_release, T0 + 2_900).await;
    assert!(matches!(&refused, Err(StoreError::LeaseLost { .. })), "a released lease fences too: {refused:?}");
}

/// Acquiring a particular run: refused while someone else holds it, granted to its holder
/// again and to anyone once the lease lapses.
pub async fn acquire_takes_a_particular_run(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-a", "coder", RunStatus::Paused), T0).await.expect("the run is created");
    let first = store.acquire("run-a", "w1", TTL, T0).await.expect("acquire").expect("an unqueued run is acquired");
    assert_eq!((first.owner.as_str(), first.epoch, first.expires_at), ("w1", 1, T0 + TTL_MS));
    assert_eq!(store.queue().await.expect("queue").len(), 1, "an acquired run holds a queue entry");
    assert_eq!(store.acquire("run-a", "w2", TTL, T0 + 10).await.expect("acquire"), None, "held by w1");
    assert_eq!(store.claim("w2", TTL, T0 + 10).await.expect("claim"), None, "an acquired run is not claimed");

    let again = store.acquire("run-a", "w1", TTL, T0 + 20).await.expect("acquire").expect("w1 acquires it again");
    assert!(again.epoch >= first.epoch, "the epoch never goes back: {again:?} after {first:?}");
    assert_eq!(again.expires_at, T0 + 20 + TTL_MS);
    assert!(store.heartbeat(&again, TTL, T0 + 30).await.expect("heartbeat").is_some());

    let lapse = T0 + 30 + TTL_MS + 1;
    let taken = store.acquire("run-a", "w2", TTL, lapse).await.expect("acquire").expect("acquired once lapsed");
    assert_eq!(taken.owner, "w2");
    assert!(taken.epoch > again.epoch, "a takeover raises the epoch: {taken:?} after {again:?}");
    assert_eq!(store.heartbeat(&again, TTL, lapse).await.expect("heartbeat"), None);

    store.create_run(new_run("run-q", "coder", RunStatus::Queued), T0).await.expect("the run is created");
    let queued = store.acquire("run-q", "w3", TTL, T0).await.expect("acquire").expect("a queued run is acquired");
    assert_eq!((queued.owner.as_str(), queued.epoch), ("w3", 1));
    assert_eq!(store.claim("w4", TTL, T0 + 1).await.expect("claim"), None);

    let refused = store.acquire("run-ghost", "w1", TTL, T0).await;
    assert!(
        matches!(&refused, Err(StoreError::UnknownRun { run_id }) if run_id == "run-ghost"),
        "expected UnknownRun, got {refused:?}"
    );
}

/// Eight workers on two store instances drain forty runs: each run is claimed exactly once.
pub async fn concurrent_claimers_never_share_a_run(backend: Arc<dyn Backend>) {
    const RUNS: i64 = 40;
    const WORKERS: usize = 8;
    let store = backend.store();
    let second = backend.open_another().await;
    for i in 0..RUNS {
        let id = format!("run-{i:02}");
        store.create_run(new_run(&id, "coder", RunStatus::Running), T0).await.expect("the run is created");
        store.enqueue(&id, T0 + i).await.expect("enqueue");
    }
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..WORKERS {
        let store = if worker % 2 == 0 { store.clone() } else { second.clone() };
        workers.spawn(async move {
            let owner = format!("worker-{worker}");
            let mut leases = Vec::new();
            while let Some(lease) = store.claim(&owner, TTL, T0 + 1_000).await.expect("every concurrent claim succeeds")
            {
                assert_eq!(lease.owner, owner);
                leases.push(lease);
            }
            leases
        });
    }
    let mut leases = Vec::new();
    while let Some(joined) = workers.join_next().await {
        leases.extend(joined.expect("the worker task ran"));
    }
    let claimed: BTreeSet<&str> = leases.iter().map(|lease| lease.run_id.as_str()).collect();
    assert_eq!(leases.len(), claimed.len(), "a run was claimed twice: {leases:?}");
    assert_eq!(claimed.len(), 40, "every run was claimed");
    assert!(leases.iter().all(|lease| lease.epoch == 1), "each run was claimed once: {leases:?}");
    let queue = store.queue().await.expect("queue");
    for entry in &queue {
        let lease = leases.iter().find(|lease| lease.run_id == entry.run_id).expect("every queued run was claimed");
        assert_eq!(entry.owner.as_ref(), Some(&lease.owner), "the queue agrees with the lease handed out");
    }
    second.close().await.expect("the second store closes");
}

/// A run started in this process is created and leased in one step; an id taken already
/// is refused and leaves no lease behind.
pub async fn a_run_is_created_with_its_lease(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let lease = store
        .create_leased_run(new_run("run-1", "coder", RunStatus::Running), "w1", TTL, T0)
        .await
        .expect("the run is created and leased");
    assert_eq!(lease, Lease { run_id: "run-1".into(), owner: "w1".into(), epoch: 1, expires_at: T0 + TTL_MS });
    let record = store.load_run("run-1").await.expect("load").expect("the run is stored");
    assert_eq!(record.status, RunStatus::Running);
    assert_eq!(store.claim("w2", TTL, T0 + 1).await.expect("claim"), None, "a leased run is nobody else's");

    let again = store.create_leased_run(new_run("run-1", "coder", RunStatus::Running), "w2", TTL, T0 + 2).await;
    assert!(matches!(again, Err(StoreError::RunExists { .. })), "{again:?}");
    let entry = store.queue().await.expect("queue").pop().expect("the first lease stands");
    assert_eq!((entry.owner.as_deref(), entry.epoch), (Some("w1"), 1), "the refused creation changed no lease");
    assert_eq!(entry.available_at, T0, "a leased run is in the queue from its creation");
    assert_eq!(
        store.transitions("run-1").await.expect("transitions"),
        [Transition { run_id: "run-1".into(), seq: 1, from: None, to: RunStatus::Running, at: T0 }],
        "its creation is its first transition"
    );

    // A queued run created with its lease is held as one acquired after it was queued.
    let lease = store
        .create_leased_run(new_run("run-2", "coder", RunStatus::Queued), "w2", TTL, T0 + 3)
        .await
        .expect("the queued run is created and leased");
    assert_eq!(lease, Lease { run_id: "run-2".into(), owner: "w2".into(), epoch: 1, expires_at: T0 + 3 + TTL_MS });
    let queue = store.queue().await.expect("queue");
    let entry = queue.iter().find(|e| e.run_id == "run-2").expect("the queued run has its entry");
    assert_eq!((entry.owner.as_deref(), entry.epoch, entry.available_at), (Some("w2"), 1, T0 + 3));
    assert_eq!(
        store.transitions("run-2").await.expect("transitions"),
        [Transition { run_id: "run-2".into(), seq: 1, from: None, to: RunStatus::Queued, at: T0 + 3 }]
    );
}

/// A fenced checkpoint that keeps its run's status (most of a run's checkpoints, which
/// PostgreSQL saves in one statement) checks the lease (a stale epoch, another owner,
/// another run's) and the signals that had to be consumed, each failure with its own
/// error, and saves nothing when one fails.
pub async fn a_fenced_checkpoint_that_keeps_the_status_checks_the_lease_and_signals(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let lease = store
        .create_leased_run(new_run("run-k", "coder", RunStatus::Running), "w1", TTL, T0)
        .await
        .expect("the run is created and leased");
    let other = store
        .create_leased_run(new_run("run-o", "coder", RunStatus::Running), "w1", TTL, T0)
        .await
        .expect("another run is created and leased");
    let at = |fence: Lease, step: &str| Checkpoint {
        fence: Some(fence),
        ..checkpoint("run-k", RunStatus::Running, json!({"step": step}))
    };
    let state = || async { store.load_run("run-k").await.expect("load").expect("stored").state };
    let refusals = [
        at(Lease { epoch: lease.epoch - 1, ..lease.clone() }, "stale"),
        at(Lease { owner: "w2".into(), ..lease.clone() }, "another owner"),
        at(other.clone(), "another run's lease"),
    ];
    for refused in refusals {
        let step = refused.state.get().to_owned();
        let result = store.checkpoint(refused, T0 + 1).await;
        assert!(matches!(result, Err(StoreError::LeaseLost { .. })), "{step}: {result:?}");
        assert_eq!(state().await, json!({}), "{step}: nothing saved");
    }

    store.send_signal("run-k", "user_message", json!({"text": "hi"}), T0 + 2).await.expect("send");
    let pending = Checkpoint { require_signals_consumed: true, ..at(lease.clone(), "pending") };
    assert!(matches!(store.checkpoint(pending, T0 + 3).await, Err(StoreError::SignalsPending { .. })));
    assert_eq!(state().await, json!({}), "a checkpoint with a signal pending saves nothing");

    let saved = store.checkpoint(at(lease.clone(), "saved"), T0 + 4).await.expect("the lease holds");
    assert_eq!(saved.latest_signal, 1, "it says the latest signal");
    assert_eq!(state().await, json!({"step": "saved"}));
    let consumed = Checkpoint {
        require_signals_consumed: true,
        signals_consumed_through: Some(1),
        ..at(lease.clone(), "consumed")
    };
    store.checkpoint(consumed, T0 + 5).await.expect("the signal consumed");
    assert!(store.pending_signals("run-k", 0).await.expect("pending").is_empty());
    assert_eq!(state().await, json!({"step": "consumed"}));
    let transitions = store.transitions("run-k").await.expect("transitions");
    assert_eq!(transitions.len(), 1, "no status changed: only the run's first transition");
}

/// The last checkpoint gives the lease up in the same transaction; a checkpoint whose
/// fence is stale releases nothing and saves nothing.
pub async fn the_last_checkpoint_releases_the_lease(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let lease = store
        .create_leased_run(new_run("run-1", "coder", RunStatus::Running), "w1", TTL, T0)
        .await
        .expect("the run is created and leased");
    let stale = Lease { epoch: lease.epoch - 1, ..lease.clone() };
    let refused = Checkpoint {
        fence: Some(stale),
        release: true,
        ..checkpoint("run-1", RunStatus::Completed, json!({"step": "stale"}))
    };
    assert!(matches!(store.checkpoint(refused, T0 + 1).await, Err(StoreError::LeaseLost { .. })));
    assert_eq!(store.queue().await.expect("queue").len(), 1, "a refused checkpoint releases nothing");

    let last = Checkpoint {
        fence: Some(lease.clone()),
        release: true,
        ..checkpoint("run-1", RunStatus::Completed, json!({"step": "done"}))
    };
    store.checkpoint(last, T0 + 2).await.expect("the last checkpoint is saved");
    assert!(store.queue().await.expect("queue").is_empty(), "the run left the queue with its last checkpoint");
    let record = store.load_run("run-1").await.expect("load").expect("stored");
    assert_eq!((record.status, record.state), (RunStatus::Completed, json!({"step": "done"})));
    assert_eq!(store.heartbeat(&lease, TTL, T0 + 3).await.expect("heartbeat"), None, "the lease is gone");
}

/// Many runs checkpointing at once (their writes committed together where the backend
/// groups them): each is saved whole, and one whose lease was taken over is refused
/// without taking the others down with it.
pub async fn concurrent_checkpoints_stand_or_fall_alone(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let mut leases = Vec::new();
    for n in 0..40 {
        let run = new_run(&format!("run-{n}"), "coder", RunStatus::Running);
        leases.push(store.create_leased_run(run, "w1", TTL, T0).await.expect("created and leased"));
    }
    // Every fourth run was taken over: its holder's checkpoints must be refused.
    for lease in leases.iter().step_by(4) {
        store.release(lease, Some(T0)).await.expect("released");
        store.acquire(&lease.run_id, "w2", TTL, T0 + 1).await.expect("acquire").expect("taken over");
    }
    let writes = leases.iter().enumerate().map(|(n, lease)| {
        let store = Arc::clone(&store);
        let lease = lease.clone();
        tokio::spawn(async move {
            let chain = EvidenceChain::new(lease.run_id.clone());
            let entries = chain.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, json!({"n": n}))], T0 + 2);
            let saved = Checkpoint {
                fence: Some(lease.clone()),
                evidence: entries,
                ..checkpoint(&lease.run_id, RunStatus::Running, json!({"n": n}))
            };
            store.checkpoint(saved, T0 + 2).await
        })
    });
    let results: Vec<_> = futures::future::join_all(writes).await;
    for (n, result) in results.into_iter().enumerate() {
        let result = result.expect("no panic");
        let run_id = format!("run-{n}");
        let record = store.load_run(&run_id).await.expect("load").expect("stored");
        let evidence = store.evidence(&run_id, 0).await.expect("evidence");
        if n % 4 == 0 {
            assert!(matches!(result, Err(StoreError::LeaseLost { .. })), "run {n}: {result:?}");
            assert_eq!((record.state, evidence.len()), (json!({}), 0), "run {n}: nothing of the refused write");
        } else {
            result.unwrap_or_else(|e| panic!("run {n}: {e}"));
            assert_eq!((record.state, evidence.len()), (json!({"n": n}), 1), "run {n}: saved whole");
        }
    }
}
