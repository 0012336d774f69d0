//! Coordination: the message bus, the work queue, shared memory, consensus and the
//! delegation chain.

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use troupe_team::bus::MessageBus;
use troupe_team::coordination::{
    Ballot, Consensus, DelegationChain, DelegationStatus, ItemState, NewWorkItem, QueueError, SharedMemory, WorkQueue,
};
use troupe_team::message::AgentMessage;
use troupe_team::{MemberResult, TeamError};

#[tokio::test]
async fn direct_messages_reach_one_and_broadcasts_all_but_the_sender() {
    let bus = MessageBus::new(8);
    let mut lead = bus.subscribe("lead").expect("subscribes");
    let mut coder = bus.subscribe("coder").expect("subscribes");
    let mut tester = bus.subscribe("tester").expect("subscribes");
    assert!(bus.subscribe("coder").is_err(), "one subscription per name");

    let delivery = bus.publish(AgentMessage::request("lead", "coder", "Write it."));
    assert_eq!(delivery.delivered, ["coder"]);
    assert_eq!(coder.recv().await.expect("direct").payload.summary, "Write it.");
    assert!(lead.try_recv().is_none() && tester.try_recv().is_none());

    let delivery = bus.publish(AgentMessage::broadcast("lead", "Standup in 5."));
    assert_eq!(delivery.delivered, ["coder", "tester"]);
    assert_eq!(coder.recv().await.expect("broadcast").payload.summary, "Standup in 5.");
    assert_eq!(tester.recv().await.expect("broadcast").payload.summary, "Standup in 5.");
    assert!(lead.try_recv().is_none(), "the sender does not hear itself");

    assert!(bus.publish(AgentMessage::request("lead", "nobody", "?")).undeliverable);
    // Secrets never cross the bus, firewall or not.
    bus.publish(AgentMessage::notification("coder", "lead", "password=hunter2"));
    assert_eq!(lead.recv().await.expect("direct").payload.summary, "password=[REDACTED]");

    let stats = bus.stats();
    assert_eq!((stats.published, stats.delivered, stats.undeliverable, stats.evicted), (4, 4, 1, 0));

    // A receiver waiting before the message is sent gets it.
    let waiting = tokio::spawn(async move { tester.recv().await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    bus.publish(AgentMessage::notification("coder", "tester", "late"));
    let late = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("woken").expect("joins");
    assert_eq!(late.expect("a message").payload.summary, "late");
    drop(coder);
    assert_eq!(bus.subscribers(), ["lead"], "dropped subscriptions unsubscribe");
    bus.close();
    assert!(lead.recv().await.is_none(), "a closed, drained bus ends the subscription");
}

#[tokio::test]
async fn a_subscriber_that_never_reads_blocks_nobody_and_loses_only_its_own_oldest() {
    let bus = MessageBus::new(4);
    let mut reader = bus.subscribe("reader").expect("subscribes");
    let sleeper = bus.subscribe("sleeper").expect("subscribes");
    let started = Instant::now();
    for n in 0..1000 {
        bus.publish(AgentMessage::broadcast("lead", format!("{n}")));
        // The reader keeps up; the sleeper never reads.
        assert_eq!(reader.try_recv().expect("kept up").payload.summary, format!("{n}"));
    }
    assert!(started.elapsed() < Duration::from_secs(5), "publishing never waited");
    assert_eq!(reader.lost(), 0);
    assert_eq!(sleeper.lost(), 996);
    assert_eq!(sleeper.len(), 4);
    let mut sleeper = sleeper;
    let kept: Vec<String> = std::iter::from_fn(|| sleeper.try_recv()).map(|m| m.payload.summary).collect();
    assert_eq!(kept, ["996", "997", "998", "999"], "the newest are kept");
    assert_eq!(bus.stats().evicted, 996);
}

/// A clock the test moves by hand.
fn manual_clock() -> (Arc<AtomicU64>, troupe_team::coordination::Clock) {
    let now = Arc::new(AtomicU64::new(1_000_000));
    let read = Arc::clone(&now);
    (now, Arc::new(move || read.load(Ordering::SeqCst)))
}

#[test]
fn the_queue_hands_out_by_priority_then_age_and_honours_filters() {
    let queue = WorkQueue::new();
    let low = queue.enqueue(NewWorkItem::new(json!("low")).priority(1).tag("rust")).expect("enqueues");
    let high_old = queue.enqueue(NewWorkItem::new(json!("high-old")).priority(5).tag("python")).expect("enqueues");
    let high_new = queue.enqueue(NewWorkItem::new(json!("high-new")).priority(5).tag("rust")).expect("enqueues");
    assert!(matches!(queue.enqueue(NewWorkItem::new(json!(0)).id(low.clone())), Err(QueueError::Duplicate(_))));
    let lease = Duration::from_secs(60);

    let rust = queue.claim("rusty", lease, |i| i.has_tag("rust")).expect("claims").expect("rust work");
    assert_eq!(rust.id, high_new, "the highest priority the filter accepts");
    assert_eq!(rust.attempts, 1);
    assert!(matches!(rust.state, ItemState::Claimed { ref by, .. } if by == "rusty"));
    let any = queue.claim("any", lease, |_| true).expect("claims").expect("work");
    assert_eq!(any.id, high_old, "equal priorities go oldest first");
    let last = queue.claim("any", lease, |_| true).expect("claims").expect("work");
    assert_eq!(last.id, low);
    assert!(queue.claim("any", lease, |_| true).expect("claims").is_none());

    assert!(matches!(queue.complete(&high_new, "any", json!(1)), Err(QueueError::NotHolder { .. })));
    assert!(matches!(queue.complete("nope", "any", json!(1)), Err(QueueError::UnknownItem(_))));
    queue.start(&high_new, "rusty").expect("starts");
    assert!(matches!(queue.start(&high_new, "rusty"), Err(QueueError::WrongState { .. })));
    queue.complete(&high_new, "rusty", json!({"ok": true})).expect("completes");
    assert_eq!(queue.get(&high_new).expect("kept").result, Some(json!({"ok": true})));
    let stats = queue.stats();
    assert_eq!((stats.queued, stats.claimed, stats.running, stats.done, stats.failed), (0, 2, 0, 1, 0));
}

#[test]
fn failures_retry_until_the_last_attempt_then_fail() {
    let queue = WorkQueue::new();
    let id = queue.enqueue(NewWorkItem::new(json!("flaky")).max_attempts(2)).expect("enqueues");
    let lease = Duration::from_secs(60);
    queue.claim("w", lease, |_| true).expect("claims").expect("work");
    queue.start(&id, "w").expect("starts");
    assert_eq!(queue.fail(&id, "w", "boom").expect("fails"), ItemState::Queued, "one attempt left");
    assert_eq!(queue.stats().queued, 1);
    let again = queue.claim("w", lease, |_| true).expect("claims").expect("retried");
    assert_eq!((again.attempts, again.last_error.as_deref()), (2, Some("boom")));
    assert_eq!(queue.fail(&id, "w", "boom again").expect("fails"), ItemState::Failed);
    assert!(queue.claim("w", lease, |_| true).expect("claims").is_none());
    let stats = queue.stats();
    assert_eq!((stats.queued, stats.failed), (0, 1));
    assert_eq!(queue.purge_finished().expect("purges"), 1);
    assert!(queue.items().is_empty());
}

#[test]
fn a_lapsed_lease_returns_the_item_and_fences_the_late_worker() {
    let (now, clock) = manual_clock();
    let queue = WorkQueue::new().with_clock(clock);
    let id = queue.enqueue(NewWorkItem::new(json!("job")).max_attempts(2)).expect("enqueues");
    queue.claim("dead", Duration::from_secs(10), |_| true).expect("claims").expect("work");
    queue.start(&id, "dead").expect("starts");
    now.fetch_add(5_000, Ordering::SeqCst);
    queue.heartbeat(&id, "dead", Duration::from_secs(10)).expect("renews");
    now.fetch_add(9_000, Ordering::SeqCst);
    assert_eq!(queue.stats().running, 1, "the heartbeat extended the lease");
    now.fetch_add(2_000, Ordering::SeqCst);
    assert_eq!(queue.stats().queued, 1, "the lease lapsed");
    assert!(queue.get(&id).expect("kept").last_error.expect("why").contains("lapsed"));
    assert!(matches!(queue.complete(&id, "dead", json!(1)), Err(QueueError::NotHolder { .. })));

    let retried = queue.claim("alive", Duration::from_secs(10), |_| true).expect("claims").expect("requeued");
    assert_eq!(retried.attempts, 2);
    now.fetch_add(11_000, Ordering::SeqCst);
    assert_eq!(queue.expire_leases().expect("expires"), 1);
    assert_eq!(queue.get(&id).expect("kept").state, ItemState::Failed, "no attempt left");
}

#[test]
fn a_queue_with_a_snapshot_file_survives_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("queue.json");
    let lease = Duration::from_secs(600);
    {
        let queue = WorkQueue::with_snapshot_file(&path).expect("opens");
        queue.enqueue(NewWorkItem::new(json!("a")).priority(2)).expect("enqueues");
        queue.enqueue(NewWorkItem::new(json!("b"))).expect("enqueues");
        let item = queue.claim("w", lease, |_| true).expect("claims").expect("work");
        queue.start(&item.id, "w").expect("starts");
        queue.complete(&item.id, "w", json!("done")).expect("completes");
    }
    let queue = WorkQueue::with_snapshot_file(&path).expect("reopens");
    let stats = queue.stats();
    assert_eq!((stats.queued, stats.done), (1, 1));
    let next = queue.claim("w2", lease, |_| true).expect("claims").expect("work");
    assert_eq!(next.payload, json!("b"));
    let fresh = queue.enqueue(NewWorkItem::new(json!("c"))).expect("enqueues");
    assert_eq!(fresh, "item-3", "ids go on after a restart");
    std::fs::write(&path, "not json").expect("writes");
    assert!(matches!(WorkQueue::with_snapshot_file(&path), Err(QueueError::Snapshot { .. })));
}

#[test]
fn shared_memory_versions_and_compare_and_set() {
    let memory = SharedMemory::new();
    let other = memory.clone();
    assert_eq!(memory.compare_and_set("plan", "owner", 0, json!("coder")), Ok(1), "0 means absent");
    let conflict = other.compare_and_set("plan", "owner", 0, json!("tester")).expect_err("taken");
    assert_eq!((conflict.expected, conflict.actual), (0, 1));
    assert_eq!(other.get("plan", "owner").expect("shared").value, json!("coder"));
    assert_eq!(other.put("plan", "owner", json!("lead")), 2);
    let stale = memory.compare_and_set("plan", "owner", 1, json!("coder")).expect_err("stale");
    assert_eq!(stale.actual, 2);
    assert!(stale.to_string().contains("version 2"));
    assert_eq!(memory.compare_and_set("plan", "owner", 2, json!("coder")), Ok(3));
    memory.put("plan", "step", json!(1));
    memory.put("notes", "step", json!("other namespace"));
    let keys: Vec<String> = memory.list("plan").into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["owner", "step"]);
    assert_eq!(memory.get("notes", "step").expect("namespaced").version, 1);
    assert_eq!(memory.delete("plan", "step").expect("deleted").value, json!(1));
    assert_eq!(memory.list("plan").len(), 1);
    assert_eq!(memory.namespaces(), ["notes", "plan"]);
}

#[test]
fn consensus_by_majority_quorum_and_ties() {
    let majority = Consensus::majority();
    let outcome = majority.decide_pairs([("a", "The answer is 42"), ("b", "the  answer is 42 "), ("c", "41")]);
    assert_eq!(outcome.decision.as_deref(), Some("The answer is 42"));
    assert_eq!((outcome.votes, outcome.ballots, outcome.needed), (2, 3, 2));
    assert_eq!(outcome.tally[0].voters, ["a", "b"]);

    // Two of four is not a majority, and a tie decides nothing.
    let tie = majority.decide_pairs([("a", "x"), ("b", "X"), ("c", "y"), ("d", "y")]);
    assert!(tie.tie && !tie.is_decided());
    assert_eq!(tie.leading, None);

    // Failed members abstain but still count in the majority's denominator.
    let results = [
        MemberResult { name: "a".into(), content: "yes".into(), success: true, ..MemberResult::default() },
        MemberResult { name: "b".into(), content: "YES".into(), success: true, ..MemberResult::default() },
        MemberResult::failed("c", "t", "crashed"),
        MemberResult::failed("d", "t", "timeout"),
    ];
    let by_results = majority.decide_results(&results);
    assert_eq!((by_results.votes, by_results.abstentions, by_results.needed), (2, 2, 3));
    assert!(!by_results.threshold_met);
    assert_eq!(by_results.leading.as_deref(), Some("yes"), "the plurality is still reported");
    let quorum = Consensus::quorum(2).decide_results(&results);
    assert_eq!(quorum.decision.as_deref(), Some("yes"));

    let short = Consensus::quorum(3).decide([Ballot::new("a", "x"), Ballot::new("b", "x"), Ballot::abstain("c")]);
    assert!(!short.threshold_met && short.decision.is_none());
    assert_eq!(short.leading.as_deref(), Some("x"));
}

#[test]
fn the_delegation_chain_tracks_paths_and_stops_bouncing() {
    let chain = DelegationChain::new(2);
    let root = chain.delegate("lead", "coder", "Build the parser.").expect("delegates");
    let sub = chain.delegate_within(&root, "tester", "Test the parser.").expect("delegates on");
    assert_eq!(chain.chain(&sub), ["lead", "coder", "tester"]);
    assert_eq!(chain.get(&sub).expect("recorded").from, "coder");

    // tester -> coder -> tester -> coder: the third hop back is one too many.
    let back = chain.delegate_within(&sub, "coder", "It fails.").expect("bounce 1");
    let again = chain.delegate_within(&back, "tester", "Fixed?").expect("bounce 2");
    let error = chain.delegate_within(&again, "coder", "Still fails.").expect_err("bounce 3");
    let TeamError::DelegationLoop { a, b, bounces } = error else { panic!("a loop: {error:?}") };
    assert_eq!((a.as_str(), b.as_str(), bounces), ("tester", "coder", 3));
    // Going elsewhere is fine.
    chain.delegate_within(&again, "lead", "Please decide.").expect("a third agent");

    chain
        .report(&sub, MemberResult { name: "tester".into(), success: true, ..MemberResult::default() })
        .expect("reports");
    assert_eq!(chain.get(&sub).expect("recorded").status, DelegationStatus::Done);
    chain.report(&root, MemberResult::failed("coder", &root, "gave up")).expect("reports");
    assert_eq!(chain.get(&root).expect("recorded").status, DelegationStatus::Failed);
    assert!(chain.report("task-999", MemberResult::default()).is_err());
    let open: Vec<String> = chain.open().into_iter().map(|r| r.task_id).collect();
    assert_eq!(open.len(), 3);
    assert!(!open.contains(&sub) && !open.contains(&root));
    assert!(chain.delegate_within("task-999", "x", "y").is_err());
}
