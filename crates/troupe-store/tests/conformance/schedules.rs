//! Schedules: stored, listed, due, deleted, and each tick fired exactly once.

use super::harness::{Backend, T0, new_run};
use serde_json::json;
use std::sync::Arc;
use troupe_store::{Firing, RunFilter, RunStatus, Schedule, ScheduleTarget, Trigger};

fn schedule(id: &str, next_fire_at: i64, enabled: bool) -> Schedule {
    Schedule {
        id: id.to_owned(),
        trigger: Trigger::Interval { every_ms: 60_000 },
        target: ScheduleTarget::StartRun { agent: "reporter".into(), input: json!({"instruction": "report"}) },
        next_fire_at,
        last_fired_at: None,
        enabled,
    }
}

/// Schedules are stored and replaced by id, listed by id, due by their next tick, deleted.
pub async fn schedules_are_put_listed_due_and_deleted(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let nightly = Schedule {
        trigger: Trigger::Cron { expression: "0 0 3 * * *".into() },
        target: ScheduleTarget::WakeRun { run_id: "run-waiting".into() },
        last_fired_at: Some(T0 - 86_400_000),
        ..schedule("nightly", T0 - 5, true)
    };
    let hourly = schedule("hourly", T0, true);
    let later = schedule("later", T0 + 1, true);
    let off = schedule("off", T0 - 100, false);
    for s in [&nightly, &hourly, &later, &off] {
        store.put_schedule(s).await.expect("put_schedule");
    }
    assert_eq!(store.schedules().await.expect("schedules"), [hourly.clone(), later.clone(), nightly.clone(), off]);

    let due: Vec<String> = store.due_schedules(T0).await.expect("due_schedules").into_iter().map(|s| s.id).collect();
    assert_eq!(due.len(), 2, "due at T0: the enabled schedules at or before it, got {due:?}");
    assert!(due.contains(&"hourly".to_owned()) && due.contains(&"nightly".to_owned()), "got {due:?}");
    assert!(store.due_schedules(T0 - 1_000).await.expect("due_schedules").is_empty());

    let replaced = Schedule { trigger: Trigger::Interval { every_ms: 5_000 }, next_fire_at: T0 + 60_000, ..hourly };
    store.put_schedule(&replaced).await.expect("put_schedule replaces by id");
    let stored = store.schedules().await.expect("schedules");
    assert_eq!(stored.len(), 4);
    assert_eq!(stored[0], replaced);
    let due: Vec<String> = store.due_schedules(T0).await.expect("due_schedules").into_iter().map(|s| s.id).collect();
    assert_eq!(due, ["nightly"]);

    assert!(store.delete_schedule("later").await.expect("delete_schedule"), "an existing schedule is deleted");
    assert!(!store.delete_schedule("later").await.expect("delete_schedule"), "twice is not an error, but false");
    let ids: Vec<String> = store.schedules().await.expect("schedules").into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["hourly", "nightly", "off"]);
}

/// Ten workers racing for the same tick: one fires it, one run is created and queued.
pub async fn a_tick_fires_exactly_once_under_contention(backend: Arc<dyn Backend>) {
    const RACERS: usize = 10;
    let store = backend.store();
    let second = backend.open_another().await;
    store.put_schedule(&schedule("every-minute", T0, true)).await.expect("put_schedule");

    let mut racers = tokio::task::JoinSet::new();
    for racer in 0..RACERS {
        let store = if racer % 2 == 0 { store.clone() } else { second.clone() };
        racers.spawn(async move {
            // Each racer names its run differently: a second firing would show as a second run.
            let run = new_run(&format!("run-tick-{racer}"), "reporter", RunStatus::Queued);
            store.fire_schedule("every-minute", T0, T0 + 60_000, Firing::Start(run), T0 + 7).await
        });
    }
    let mut fired = 0;
    while let Some(joined) = racers.join_next().await {
        if joined.expect("the racer task ran").expect("every concurrent fire_schedule succeeds") {
            fired += 1;
        }
    }
    assert_eq!(fired, 1, "exactly one racer fires the tick");

    let runs = store.list_runs(&RunFilter { agent: Some("reporter".into()), ..RunFilter::default() }).await;
    let runs = runs.expect("list_runs");
    assert_eq!(runs.len(), 1, "exactly one run was created: {runs:?}");
    assert_eq!(runs[0].status, RunStatus::Queued);
    let queue = store.queue().await.expect("queue");
    assert_eq!(queue.len(), 1, "exactly one run was queued: {queue:?}");
    assert_eq!(queue[0].run_id, runs[0].id);
    let run = store.load_run(&runs[0].id).await.expect("load_run").expect("the fired run is stored");
    assert_eq!(run.input, json!({"instruction": format!("task of {}", runs[0].id)}));

    let after = store.schedules().await.expect("schedules").pop().expect("the schedule stays");
    assert_eq!(after.next_fire_at, T0 + 60_000, "the next tick moved");
    assert_eq!(after.last_fired_at, Some(T0), "the tick that fired is recorded");
    assert!(store.due_schedules(T0 + 59_999).await.expect("due_schedules").is_empty());

    let late = new_run("run-tick-late", "reporter", RunStatus::Queued);
    let refired = store.fire_schedule("every-minute", T0, T0 + 60_000, Firing::Start(late), T0 + 8).await;
    assert!(!refired.expect("fire_schedule of a fired tick"), "a fired tick never fires again");
    assert_eq!(store.load_run("run-tick-late").await.expect("load_run"), None);

    let next = new_run("run-tick-next", "reporter", RunStatus::Queued);
    let fired_next = store.fire_schedule("every-minute", T0 + 60_000, T0 + 120_000, Firing::Start(next), T0 + 60_001);
    assert!(fired_next.await.expect("fire_schedule of the next tick"), "the next tick fires");
    second.close().await.expect("the second store closes");
}

/// A wake-up tick stores a scheduler_wake signal for the waiting run and enqueues it.
pub async fn a_wake_tick_signals_and_enqueues_the_run(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-waiting", "coder", RunStatus::Paused), T0).await.expect("the run is created");
    let wake = Schedule {
        target: ScheduleTarget::WakeRun { run_id: "run-waiting".into() },
        ..schedule("wake-waiting", T0 + 1_000, true)
    };
    store.put_schedule(&wake).await.expect("put_schedule");
    let firing = Firing::Wake {
        run_id: "run-waiting".into(),
        kind: "scheduler_wake".into(),
        payload: json!({"tick": T0 + 1_000}),
    };
    let fired = store.fire_schedule("wake-waiting", T0 + 1_000, T0 + 61_000, firing.clone(), T0 + 1_002).await;
    assert!(fired.expect("fire_schedule"), "the wake tick fires");

    let signals = store.pending_signals("run-waiting", 0).await.expect("pending_signals");
    assert_eq!(signals.len(), 1, "one wake-up signal: {signals:?}");
    assert_eq!((signals[0].seq, signals[0].kind.as_str()), (1, "scheduler_wake"));
    assert_eq!(signals[0].payload, json!({"tick": T0 + 1_000}));
    assert_eq!(signals[0].sent_at, T0 + 1_002);
    let queue = store.queue().await.expect("queue");
    assert_eq!(queue.len(), 1);
    assert_eq!((queue[0].run_id.as_str(), queue[0].owner.as_deref()), ("run-waiting", None));
    let lease = store.claim("w1", std::time::Duration::from_secs(30), T0 + 1_002).await.expect("claim");
    assert_eq!(lease.map(|l| l.run_id).as_deref(), Some("run-waiting"), "a worker picks the woken run up");

    let again = store.fire_schedule("wake-waiting", T0 + 1_000, T0 + 61_000, firing, T0 + 1_003).await;
    assert!(!again.expect("fire_schedule"), "the same tick does not wake twice");
    assert_eq!(store.signals("run-waiting").await.expect("signals").len(), 1);
}
