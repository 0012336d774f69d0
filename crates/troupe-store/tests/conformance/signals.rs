//! Signals: numbered per run from 1 in the order they were stored, pending until a
//! checkpoint consumes them, each consumed exactly once.

use super::harness::{Backend, T0, checkpoint, new_run};
use serde_json::json;
use std::sync::Arc;
use troupe_store::{RunStatus, StoreError};

/// Signals are numbered 1, 2, 3, pending after a given number, and consumed by checkpoints.
pub async fn signals_are_pending_until_consumed(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-s", "coder", RunStatus::Paused), T0).await.expect("the run is created");
    store.create_run(new_run("run-other", "coder", RunStatus::Paused), T0).await.expect("the run is created");
    for (i, kind) in ["approval", "user_message", "cancel"].into_iter().enumerate() {
        let at = T0 + 10 * i64::try_from(i).expect("a small index");
        let seq = store.send_signal("run-s", kind, json!({"n": i}), at).await.expect("send_signal");
        assert_eq!(seq, i64::try_from(i).expect("a small index") + 1);
    }
    assert_eq!(store.send_signal("run-other", "approval", json!({}), T0).await.expect("send_signal"), 1);

    let all = store.signals("run-s").await.expect("signals");
    assert_eq!(all.iter().map(|s| s.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(all.iter().map(|s| s.kind.as_str()).collect::<Vec<_>>(), ["approval", "user_message", "cancel"]);
    assert_eq!(all[1].payload, json!({"n": 1}));
    assert_eq!(all[1].sent_at, T0 + 10);
    assert!(all.iter().all(|s| s.run_id == "run-s" && s.consumed_at.is_none()));

    let seqs = |after: i64| {
        let store = store.clone();
        async move {
            store
                .pending_signals("run-s", after)
                .await
                .expect("pending_signals")
                .iter()
                .map(|s| s.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(seqs(0).await, [1, 2, 3]);
    assert_eq!(seqs(1).await, [2, 3]);
    assert!(seqs(3).await.is_empty());

    let mut applied = checkpoint("run-s", RunStatus::Running, json!({"applied": [1, 2]}));
    applied.signals_consumed_through = Some(2);
    store.checkpoint(applied, T0 + 100).await.expect("checkpoint consuming 1..=2");
    assert_eq!(seqs(0).await, [3]);

    // A later checkpoint that consumed less (or nothing) does not bring signals back.
    let mut behind = checkpoint("run-s", RunStatus::Running, json!({"applied": [1, 2]}));
    behind.signals_consumed_through = Some(1);
    store.checkpoint(behind, T0 + 200).await.expect("checkpoint consuming 1 again");
    store.checkpoint(checkpoint("run-s", RunStatus::Running, json!({})), T0 + 300).await.expect("plain checkpoint");
    assert_eq!(seqs(0).await, [3]);
    let all = store.signals("run-s").await.expect("signals");
    assert_eq!(
        all.iter().map(|s| s.consumed_at).collect::<Vec<_>>(),
        [Some(T0 + 100), Some(T0 + 100), None],
        "a signal is consumed once, by the first checkpoint that applied it"
    );

    let mut rest = checkpoint("run-s", RunStatus::Running, json!({"applied": [1, 2, 3]}));
    rest.signals_consumed_through = Some(3);
    store.checkpoint(rest, T0 + 400).await.expect("checkpoint consuming 3");
    assert!(seqs(0).await.is_empty());
    assert_eq!(store.send_signal("run-s", "user_message", json!({"text": "more"}), T0 + 500).await.expect("send"), 4);
    assert_eq!(seqs(0).await, [4]);

    let other = store.pending_signals("run-other", 0).await.expect("pending_signals");
    assert_eq!(other.len(), 1, "consuming one run's signals leaves another's alone");
}

/// A checkpoint says which signal was the run's latest when it committed, whoever sent
/// it (this store or another process's): a run that has applied through it has nothing
/// to look for.
pub async fn a_checkpoint_says_the_latest_signal(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let other = backend.open_another().await;
    store.create_run(new_run("run-latest", "coder", RunStatus::Running), T0).await.expect("the run is created");
    let saved = store.checkpoint(checkpoint("run-latest", RunStatus::Running, json!({})), T0 + 1).await;
    assert_eq!(saved.expect("checkpoint").latest_signal, 0, "no signal yet");

    store.send_signal("run-latest", "user_message", json!({}), T0 + 2).await.expect("send_signal");
    other.send_signal("run-latest", "approval", json!({}), T0 + 3).await.expect("send_signal from another store");
    let saved = store.checkpoint(checkpoint("run-latest", RunStatus::Running, json!({})), T0 + 4).await;
    assert_eq!(saved.expect("checkpoint").latest_signal, 2);

    let mut consumed = checkpoint("run-latest", RunStatus::Running, json!({"applied": [1, 2]}));
    consumed.signals_consumed_through = Some(2);
    let saved = store.checkpoint(consumed, T0 + 5).await.expect("checkpoint consuming 1..=2");
    assert_eq!(saved.latest_signal, 2, "consuming a signal does not change which was the latest");
    other.send_signal("run-latest", "cancel", json!({}), T0 + 6).await.expect("send_signal from another store");
    let saved = store.checkpoint(checkpoint("run-latest", RunStatus::Running, json!({})), T0 + 7).await;
    assert_eq!(saved.expect("checkpoint").latest_signal, 3);
}

/// Many concurrent senders get the numbers 1..=50, each exactly once, stored in that order.
pub async fn concurrent_senders_get_gapless_numbers(backend: Arc<dyn Backend>) {
    const SENDERS: i64 = 50;
    let store = backend.store();
    let second = backend.open_another().await;
    store.create_run(new_run("run-many", "coder", RunStatus::Paused), T0).await.expect("the run is created");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..SENDERS {
        let store = if i % 2 == 0 { store.clone() } else { second.clone() };
        tasks.spawn(async move {
            let seq = store.send_signal("run-many", "user_message", json!({"sender": i}), T0 + i).await;
            (i, seq)
        });
    }
    let mut numbers = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (sender, seq) = joined.expect("the sender task ran");
        numbers.push((seq.expect("every concurrent send_signal succeeds"), sender));
    }
    numbers.sort_unstable();
    assert_eq!(numbers.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), (1..=SENDERS).collect::<Vec<_>>());

    let stored = store.signals("run-many").await.expect("signals");
    assert_eq!(stored.iter().map(|s| s.seq).collect::<Vec<_>>(), (1..=SENDERS).collect::<Vec<_>>());
    for ((seq, sender), signal) in numbers.iter().zip(&stored) {
        assert_eq!(signal.seq, *seq);
        assert_eq!(signal.payload, json!({"sender": sender}), "signal {seq} holds what its sender was told it holds");
    }
    second.close().await.expect("the second store closes");
}

/// A signal to a run that does not exist is refused, not silently stored.
pub async fn signal_to_unknown_run_fails(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let refused = store.send_signal("run-ghost", "approval", json!({}), T0).await;
    assert!(
        matches!(&refused, Err(StoreError::UnknownRun { run_id }) if run_id == "run-ghost"),
        "expected UnknownRun, got {refused:?}"
    );
    store.create_run(new_run("run-ghost", "coder", RunStatus::Paused), T0 + 1).await.expect("the run is created");
    assert!(store.signals("run-ghost").await.expect("signals").is_empty(), "the refused signal was not kept");
    assert_eq!(store.send_signal("run-ghost", "approval", json!({}), T0 + 2).await.expect("send_signal"), 1);
}

/// A run completes only once it has applied every acknowledged signal, and an ended run
/// takes no more: no signal is acknowledged and then never applied.
pub async fn no_signal_is_acknowledged_and_then_left_behind(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-e", "coder", RunStatus::Running), T0).await.expect("the run is created");
    let seq = store.send_signal("run-e", "user_message", json!({"text": "one more thing"}), T0).await.expect("stored");
    let mut done = checkpoint("run-e", RunStatus::Completed, json!({"answer": "done"}));
    done.require_signals_consumed = true;
    let refused = store.checkpoint(done.clone(), T0 + 1).await;
    assert!(matches!(refused, Err(StoreError::SignalsPending { ref run_id }) if run_id == "run-e"), "{refused:?}");
    let record = store.load_run("run-e").await.expect("loads").expect("exists");
    assert_eq!((record.status, record.state), (RunStatus::Running, json!({})), "nothing was saved");

    done.signals_consumed_through = Some(seq);
    store.checkpoint(done, T0 + 2).await.expect("completes once the signal is applied");
    let late = store.send_signal("run-e", "user_message", json!({"text": "too late"}), T0 + 3).await;
    assert!(
        matches!(late, Err(StoreError::RunEnded { ref status, .. }) if status == "completed"),
        "an ended run refuses signals: {late:?}"
    );
    assert_eq!(store.signals("run-e").await.expect("signals").len(), 1);
}
