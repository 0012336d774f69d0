//! Runs: creation, loading, listing, checkpoints and the transitions they record.

use super::harness::{Backend, T0, checkpoint, new_run};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use troupe_store::{
    Checkpoint, Flush, Lease, MessagesWrite, RunFilter, RunSpend, RunStatus, SpendGroup, StoreError, Transition,
};

/// A created run loads back exactly as it was given, stamped with its creation time.
pub async fn created_run_loads_back(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let mut run = new_run("run-a", "coder", RunStatus::Running);
    run.conversation_id = Some("conv-1".into());
    run.parent_run_id = Some("run-parent".into());
    run.input =
        json!({"instruction": "fix the build", "limits": {"turns": 8, "usd": 0.25}, "tags": ["ü", "😀"]}).into();
    run.state = json!({"messages": [], "turn": 0}).into();
    store.create_run(run.clone(), T0).await.expect("the run is created");

    let loaded = store.load_run("run-a").await.expect("load_run").expect("the run is stored");
    assert_eq!(loaded.id, "run-a");
    assert_eq!(loaded.agent, "coder");
    assert_eq!(loaded.status, RunStatus::Running);
    assert_eq!(loaded.activity, None);
    assert_eq!(loaded.conversation_id.as_deref(), Some("conv-1"));
    assert_eq!(loaded.parent_run_id.as_deref(), Some("run-parent"));
    assert_eq!(loaded.input, run.input);
    assert_eq!(loaded.state, run.state);
    assert_eq!(loaded.created_at, T0);
    assert_eq!(loaded.updated_at, T0);

    assert_eq!(store.load_run("run-missing").await.expect("load_run of an unknown id"), None);
}

/// A second run with a taken id is refused, and the first is left as it was.
pub async fn duplicate_run_id_is_refused(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-dup", "coder", RunStatus::Running), T0).await.expect("the first run is created");
    let mut again = new_run("run-dup", "reviewer", RunStatus::Queued);
    again.state = json!({"overwritten": true}).into();
    let refused = store.create_run(again, T0 + 1).await;
    assert!(
        matches!(&refused, Err(StoreError::RunExists { run_id }) if run_id == "run-dup"),
        "expected RunExists, got {refused:?}"
    );
    let kept = store.load_run("run-dup").await.expect("load_run").expect("the first run is kept");
    assert_eq!(kept.agent, "coder");
    assert_eq!(kept.state, json!({}));
    assert_eq!(store.transitions("run-dup").await.expect("transitions").len(), 1);
    assert!(store.queue().await.expect("queue").is_empty(), "the refused queued run must not be enqueued");
}

/// Listing: newest first, filtered by status, agent and conversation, and limited.
pub async fn runs_are_listed_newest_first_with_filters(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let specs = [
        ("run-1", "coder", RunStatus::Running, Some("conv-a")),
        ("run-2", "reviewer", RunStatus::Queued, Some("conv-a")),
        ("run-3", "coder", RunStatus::Queued, None),
        ("run-4", "coder", RunStatus::Running, Some("conv-b")),
        ("run-5", "reviewer", RunStatus::Running, Some("conv-a")),
    ];
    for (i, (id, agent, status, conversation)) in specs.iter().enumerate() {
        let mut run = new_run(id, agent, *status);
        run.conversation_id = conversation.map(str::to_owned);
        let offset = i64::try_from(i).expect("a small index") * 1_000;
        store.create_run(run, T0 + offset).await.expect("the run is created");
    }
    let ids = |filter: RunFilter| {
        let store = store.clone();
        async move { store.list_runs(&filter).await.expect("list_runs").into_iter().map(|run| run.id).collect::<Vec<_>>() }
    };

    assert_eq!(ids(RunFilter::default()).await, ["run-5", "run-4", "run-3", "run-2", "run-1"]);
    assert_eq!(ids(RunFilter { status: Some(RunStatus::Queued), ..RunFilter::default() }).await, ["run-3", "run-2"]);
    assert!(ids(RunFilter { status: Some(RunStatus::Completed), ..RunFilter::default() }).await.is_empty());
    assert_eq!(
        ids(RunFilter { agent: Some("coder".into()), ..RunFilter::default() }).await,
        ["run-4", "run-3", "run-1"]
    );
    assert_eq!(
        ids(RunFilter { conversation_id: Some("conv-a".into()), ..RunFilter::default() }).await,
        ["run-5", "run-2", "run-1"]
    );
    assert_eq!(ids(RunFilter { limit: 2, ..RunFilter::default() }).await, ["run-5", "run-4"]);
    // A prefix of ids: every run starts `run-`, one starts `run-4`; a `%` is no wildcard.
    assert_eq!(ids(RunFilter { id_prefix: Some("run-".into()), ..RunFilter::default() }).await.len(), 5);
    assert_eq!(ids(RunFilter { id_prefix: Some("run-4".into()), ..RunFilter::default() }).await, ["run-4"]);
    assert!(ids(RunFilter { id_prefix: Some("run-%".into()), ..RunFilter::default() }).await.is_empty());
    assert!(ids(RunFilter { id_prefix: Some("nur".into()), ..RunFilter::default() }).await.is_empty());
    assert_eq!(
        ids(RunFilter {
            status: Some(RunStatus::Running),
            agent: Some("coder".into()),
            conversation_id: None,
            limit: 1,
            ..RunFilter::default()
        })
        .await,
        ["run-4"]
    );
    assert_eq!(
        ids(RunFilter {
            status: Some(RunStatus::Running),
            agent: Some("reviewer".into()),
            conversation_id: Some("conv-a".into()),
            limit: 0,
            ..RunFilter::default()
        })
        .await,
        ["run-5"]
    );
    assert!(ids(RunFilter { agent: Some("nobody".into()), ..RunFilter::default() }).await.is_empty());

    let summaries = store.list_runs(&RunFilter { limit: 1, ..RunFilter::default() }).await.expect("list_runs");
    let newest = summaries.first().expect("one run listed");
    assert_eq!(newest.agent, "reviewer");
    assert_eq!(newest.status, RunStatus::Running);
    assert_eq!(newest.conversation_id.as_deref(), Some("conv-a"));
    assert_eq!(newest.created_at, T0 + 4_000);
}

/// A search finds part of an agent's name or of a run's model, letters in either case, or
/// an id's start; it narrows the other filters, and no character is a wildcard.
pub async fn a_search_finds_part_of_a_name_or_a_model_or_an_ids_start(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let specs = [
        ("run-a1", "Researcher", "openai/gpt-4o", RunStatus::Running),
        ("run-a2", "reviewer", "anthropic/claude-sonnet", RunStatus::Queued),
        ("run-b3", "coder", "openai/gpt-4o-mini", RunStatus::Queued),
        ("run-b4", "search_50%", "ollama/llama3", RunStatus::Running),
    ];
    for (i, (id, agent, model, status)) in specs.iter().enumerate() {
        let mut run = new_run(id, agent, *status);
        let mut state = json!({"run_id": id, "model": model, "nested": {"model": "hidden/elsewhere"}});
        if *id == "run-b4" {
            // A NUL in a state's text (a tool's output kept in it) breaks no search.
            state["kept"] = json!("a\u{0}b");
            // And the text `\u0000` after a backslash, which is no NUL.
            state["typed"] = json!("c:\\u0000");
        }
        run.state = state.into();
        let offset = i64::try_from(i).expect("a small index") * 1_000;
        store.create_run(run, T0 + offset).await.expect("the run is created");
    }
    let found = |search: &str, status: Option<RunStatus>| {
        let (store, filter) =
            (store.clone(), RunFilter { search: Some(search.into()), status, ..RunFilter::default() });
        async move { store.list_runs(&filter).await.expect("list_runs").into_iter().map(|run| run.id).collect::<Vec<_>>() }
    };
    assert_eq!(found("SEARCH", None).await, ["run-b4", "run-a1"], "part of a name, either case");
    assert_eq!(found("rev", None).await, ["run-a2"]);
    assert_eq!(found("gpt-4o", None).await, ["run-b3", "run-a1"], "part of the run's model");
    assert_eq!(found("Claude", None).await, ["run-a2"]);
    assert_eq!(found("run-b", None).await, ["run-b4", "run-b3"], "an id's start");
    assert!(found("a1", None).await.is_empty(), "an id is found by its start only");
    assert_eq!(found("gpt", Some(RunStatus::Queued)).await, ["run-b3"], "with a status");
    assert_eq!(found("50%", None).await, ["run-b4"]);
    assert!(found("5%0", None).await.is_empty(), "`%` is no wildcard");
    assert_eq!(found("_", None).await, ["run-b4"], "nor is `_`");
    assert!(found("elsewhere", None).await.is_empty(), "only the run's own model");
    assert!(found("nobody", None).await.is_empty());
    // The run whose state holds a NUL: found by its name and by its model.
    assert_eq!(found("search_", None).await, ["run-b4"]);
    assert_eq!(found("llama", None).await, ["run-b4"]);
}

/// Runs listed as records: what `load_run` reads of each, but for the conversation kept
/// apart from its state, selected and ordered as `list_runs` selects them (a window of
/// creation times included).
pub async fn runs_are_listed_as_records_without_their_conversation(backend: Arc<dyn Backend>) {
    let store = backend.store();
    for (i, (id, agent)) in [("run-r1", "coder"), ("run-r2", "reviewer"), ("run-r3", "coder")].iter().enumerate() {
        let mut run = new_run(id, agent, RunStatus::Running);
        run.state = json!({"model": format!("openai/model-{i}"), "messages": [{"text": "task"}]}).into();
        let offset = i64::try_from(i).expect("a small index") * 1_000;
        store.create_run(run, T0 + offset).await.expect("the run is created");
    }
    // The first run's conversation goes apart from its state, with evidence beside it.
    let message = serde_json::value::to_raw_value(&json!({"text": "apart"})).expect("encodes");
    let chain = troupe_store::EvidenceChain::new("run-r1");
    let entries =
        chain.seal(vec![troupe_store::NewEvidence::new(troupe_store::EvidenceKind::RunStarted, json!({}))], T0);
    let saved = Checkpoint {
        messages: Some(MessagesWrite { from: 0, messages: vec![message] }),
        evidence: entries,
        ..checkpoint("run-r1", RunStatus::Paused, json!({"model": "openai/model-0", "messages": [], "turn": 1}))
    };
    store.checkpoint(saved, T0 + 5_000).await.expect("saved");

    let listed = store.list_run_records(&RunFilter::default()).await.expect("listed");
    assert_eq!(listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["run-r3", "run-r2", "run-r1"]);
    for record in &listed {
        let mut loaded = store.load_run(&record.id).await.expect("loads").expect("stored");
        if record.id == "run-r1" {
            // Loaded whole, its state holds the conversation kept apart; listed, it does not.
            assert_eq!(loaded.state["messages"], json!([{"text": "apart"}]));
            assert_eq!(record.state["messages"], json!([]));
            loaded.state["messages"] = json!([]);
            assert_eq!(record.evidence_head.seq, 1, "{record:?}");
        }
        assert_eq!(record, &loaded, "listed as loaded");
    }
    let ids = |filter: RunFilter| {
        let store = store.clone();
        async move { store.list_run_records(&filter).await.expect("listed").into_iter().map(|r| r.id).collect::<Vec<_>>() }
    };
    assert_eq!(ids(RunFilter { agent: Some("coder".into()), ..RunFilter::default() }).await, ["run-r3", "run-r1"]);
    assert_eq!(ids(RunFilter { search: Some("MODEL-1".into()), ..RunFilter::default() }).await, ["run-r2"]);
    assert_eq!(ids(RunFilter { status: Some(RunStatus::Paused), ..RunFilter::default() }).await, ["run-r1"]);
    assert_eq!(ids(RunFilter { limit: 1, ..RunFilter::default() }).await, ["run-r3"]);
    assert_eq!(ids(RunFilter { limit: 1, offset: 1, ..RunFilter::default() }).await, ["run-r2"]);
    assert_eq!(ids(RunFilter { offset: 1, ..RunFilter::default() }).await, ["run-r2", "run-r1"]);
    let past = RunFilter { offset: 3, ..RunFilter::default() };
    assert!(ids(past.clone()).await.is_empty());
    assert!(store.list_runs(&past).await.expect("listed").is_empty(), "list_runs takes the offset too");
    // A window of creation times: its start included.
    assert_eq!(ids(RunFilter { created_since: Some(T0 + 1_000), ..RunFilter::default() }).await, ["run-r3", "run-r2"]);
    let since = RunFilter { created_since: Some(T0 + 2_001), ..RunFilter::default() };
    assert!(ids(since.clone()).await.is_empty());
    assert!(store.list_runs(&since).await.expect("listed").is_empty(), "list_runs takes the window too");
}

/// Checkpoints replace state, status and activity; only status changes are transitions.
pub async fn checkpoints_record_transitions_only_on_status_changes(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let run = new_run("run-cp", "coder", RunStatus::Running);
    let input = run.input.clone();
    store.create_run(run, T0).await.expect("the run is created");

    let mut step = checkpoint("run-cp", RunStatus::Running, json!({"turn": 1}));
    step.activity = Some("running fs.write".into());
    store.checkpoint(step, T0 + 10).await.expect("checkpoint 1");
    let loaded = store.load_run("run-cp").await.expect("load_run").expect("stored");
    assert_eq!(loaded.state, json!({"turn": 1}));
    assert_eq!(loaded.activity.as_deref(), Some("running fs.write"));
    assert_eq!(loaded.status, RunStatus::Running);
    assert_eq!(loaded.updated_at, T0 + 10);
    assert_eq!(loaded.created_at, T0);
    assert_eq!(loaded.input, input, "checkpoints never change the input");

    let mut pause = checkpoint("run-cp", RunStatus::Paused, json!({"turn": 2, "waiting": "approval"}));
    pause.activity = Some("waiting for approval of c1".into());
    store.checkpoint(pause, T0 + 20).await.expect("checkpoint 2");
    store.checkpoint(checkpoint("run-cp", RunStatus::Paused, json!({"turn": 2})), T0 + 30).await.expect("checkpoint 3");
    let loaded = store.load_run("run-cp").await.expect("load_run").expect("stored");
    assert_eq!(loaded.activity, None, "a checkpoint without activity clears it");
    assert_eq!(loaded.status, RunStatus::Paused);
    store
        .checkpoint(checkpoint("run-cp", RunStatus::Running, json!({"turn": 3})), T0 + 40)
        .await
        .expect("checkpoint 4");
    store
        .checkpoint(checkpoint("run-cp", RunStatus::Completed, json!({"turn": 3, "answer": "done"})), T0 + 50)
        .await
        .expect("checkpoint 5");

    let loaded = store.load_run("run-cp").await.expect("load_run").expect("stored");
    assert_eq!(loaded.status, RunStatus::Completed);
    assert_eq!(loaded.state, json!({"turn": 3, "answer": "done"}));
    assert_eq!(loaded.updated_at, T0 + 50);

    let transition = |seq, from, to, at| Transition { run_id: "run-cp".into(), seq, from, to, at };
    assert_eq!(
        store.transitions("run-cp").await.expect("transitions"),
        [
            transition(1, None, RunStatus::Running, T0),
            transition(2, Some(RunStatus::Running), RunStatus::Paused, T0 + 20),
            transition(3, Some(RunStatus::Paused), RunStatus::Running, T0 + 40),
            transition(4, Some(RunStatus::Running), RunStatus::Completed, T0 + 50),
        ]
    );
}

/// A queued run is enqueued as it is created, and its creation is its first transition.
pub async fn queued_run_is_enqueued_on_creation(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-q", "coder", RunStatus::Queued), T0).await.expect("the run is created");
    store.create_run(new_run("run-r", "coder", RunStatus::Running), T0).await.expect("the run is created");
    let queue = store.queue().await.expect("queue");
    assert_eq!(queue.len(), 1, "only the queued run is enqueued: {queue:?}");
    assert_eq!(queue[0].run_id, "run-q");
    assert_eq!(queue[0].owner, None);
    assert!(queue[0].available_at <= T0, "a new queued run is available at once: {queue:?}");
    assert_eq!(
        store.transitions("run-q").await.expect("transitions"),
        [Transition { run_id: "run-q".into(), seq: 1, from: None, to: RunStatus::Queued, at: T0 }]
    );
}

/// A checkpoint of a run that does not exist is refused and creates nothing.
pub async fn checkpoint_of_unknown_run_fails(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let refused = store.checkpoint(checkpoint("run-ghost", RunStatus::Running, json!({"x": 1})), T0).await;
    assert!(
        matches!(&refused, Err(StoreError::UnknownRun { run_id }) if run_id == "run-ghost"),
        "expected UnknownRun, got {refused:?}"
    );
    assert_eq!(store.load_run("run-ghost").await.expect("load_run"), None);
    assert!(store.transitions("run-ghost").await.expect("transitions").is_empty());
}

/// A checkpoint flushed with the next write ([`Flush::WithNextFlush`]) is saved, fenced and
/// read back like any other, and writes committed after it, flushed or not, come after it.
pub async fn a_deferred_checkpoint_saves_and_orders_with_flushed_writes(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let lease = store
        .create_leased_run(new_run("run-d", "coder", RunStatus::Running), "w1", std::time::Duration::from_secs(30), T0)
        .await
        .expect("the run is created and leased");
    let deferred = |step: u32, fence: Lease| Checkpoint {
        fence: Some(fence),
        flush: Flush::WithNextFlush,
        ..checkpoint("run-d", RunStatus::Running, json!({"step": step}))
    };
    store.checkpoint(deferred(1, lease.clone()), T0 + 1).await.expect("a deferred checkpoint is saved");
    let record = store.load_run("run-d").await.expect("load").expect("stored");
    assert_eq!(record.state, json!({"step": 1}), "a deferred checkpoint reads back at once");

    let stale = Lease { epoch: lease.epoch - 1, ..lease.clone() };
    assert!(
        matches!(store.checkpoint(deferred(2, stale), T0 + 2).await, Err(StoreError::LeaseLost { .. })),
        "a deferred checkpoint is fenced like any other"
    );

    // Deferred and flushed checkpoints of many runs at once, as the writers of a busy
    // process interleave them: each run ends with the state of its last write.
    let mut leases = Vec::new();
    for n in 0..20 {
        let run = new_run(&format!("run-d{n}"), "coder", RunStatus::Running);
        leases.push(
            store
                .create_leased_run(run, "w1", std::time::Duration::from_secs(30), T0)
                .await
                .expect("created and leased"),
        );
    }
    let writes = leases.iter().enumerate().map(|(n, lease)| {
        let store = Arc::clone(&store);
        let lease = lease.clone();
        tokio::spawn(async move {
            for step in 0..3 {
                let flush = if (n + step) % 2 == 0 { Flush::WithNextFlush } else { Flush::BeforeAnswer };
                let saved = Checkpoint {
                    fence: Some(lease.clone()),
                    flush,
                    ..checkpoint(&lease.run_id, RunStatus::Running, json!({"step": step}))
                };
                store.checkpoint(saved, T0 + 2 + step as i64).await.expect("saved");
            }
        })
    });
    for write in futures::future::join_all(writes).await {
        write.expect("the writer task ran");
    }
    for lease in &leases {
        let record = store.load_run(&lease.run_id).await.expect("load").expect("stored");
        assert_eq!(record.state, json!({"step": 2}), "run {} ends with its last write", lease.run_id);
    }
    store
        .checkpoint(
            Checkpoint { fence: Some(lease.clone()), ..checkpoint("run-d", RunStatus::Completed, json!({"step": 3})) },
            T0 + 9,
        )
        .await
        .expect("a flushed checkpoint after a deferred one is saved");
    let record = store.load_run("run-d").await.expect("load").expect("stored");
    assert_eq!((record.status, record.state), (RunStatus::Completed, json!({"step": 3})));
}

/// The runs a run started are listed by their parent, newest first, and no other.
pub async fn child_runs_are_listed_by_their_parent(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let tree = [("team", None), ("lead", Some("team")), ("a", Some("lead")), ("b", Some("lead")), ("other", None)];
    for (i, (id, parent)) in tree.iter().enumerate() {
        let mut run = new_run(id, id, RunStatus::Running);
        run.parent_run_id = parent.map(str::to_owned);
        let offset = i64::try_from(i).expect("a small index") * 1_000;
        store.create_run(run, T0 + offset).await.expect("the run is created");
    }
    let children = |parent: &str| {
        let (store, filter) = (store.clone(), RunFilter { parent_run_id: Some(parent.into()), ..RunFilter::default() });
        async move { store.list_runs(&filter).await.expect("list_runs").into_iter().map(|run| run.id).collect::<Vec<_>>() }
    };
    assert_eq!(children("team").await, ["lead"]);
    assert_eq!(children("lead").await, ["b", "a"]);
    assert!(children("a").await.is_empty());
    assert!(children("missing").await.is_empty());
    let under_lead = store
        .list_runs(&RunFilter { parent_run_id: Some("lead".into()), agent: Some("a".into()), ..RunFilter::default() })
        .await
        .expect("list_runs");
    assert_eq!(under_lead.iter().map(|r| r.parent_run_id.as_deref()).collect::<Vec<_>>(), [Some("lead")]);
}

/// A run's conversation kept apart from its state: a checkpoint appends the messages its
/// boundary added, or replaces them from the first one it changed, and the run loads
/// back with its state holding the whole conversation. A run that never kept it apart
/// loads with the conversation its state holds.
pub async fn a_conversation_kept_apart_is_appended_and_loads_whole(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let mut run = new_run("run-m", "coder", RunStatus::Running);
    run.state = json!({"messages": [{"text": "task"}], "turn": 0}).into();
    store.create_run(run, T0).await.expect("the run is created");
    let state = |turn: u32| json!({"messages": [], "turn": turn});
    let texts = |texts: &[&str]| -> Vec<Box<serde_json::value::RawValue>> {
        texts.iter().map(|t| serde_json::value::to_raw_value(&json!({"text": t})).expect("encodes")).collect()
    };
    let messages_of = |record: &troupe_store::RunRecord| record.state["messages"].clone();

    // The creation's state holds the conversation until a checkpoint writes it apart.
    let record = store.load_run("run-m").await.expect("load").expect("stored");
    assert_eq!(messages_of(&record), json!([{"text": "task"}]));

    // The first checkpoint writes every message; the next ones only what they add.
    let first = Checkpoint {
        messages: Some(MessagesWrite { from: 0, messages: texts(&["task", "call"]) }),
        ..checkpoint("run-m", RunStatus::Running, state(1))
    };
    store.checkpoint(first, T0 + 1).await.expect("saved");
    let second = Checkpoint {
        messages: Some(MessagesWrite { from: 2, messages: texts(&["result", "answer"]) }),
        ..checkpoint("run-m", RunStatus::Running, state(2))
    };
    store.checkpoint(second, T0 + 2).await.expect("saved");
    let record = store.load_run("run-m").await.expect("load").expect("stored");
    assert_eq!(record.state["turn"], 2);
    assert_eq!(
        messages_of(&record),
        json!([{"text": "task"}, {"text": "call"}, {"text": "result"}, {"text": "answer"}])
    );

    // A checkpoint that writes no messages leaves them; one that changed the last one
    // replaces it and drops nothing before it.
    store.checkpoint(checkpoint("run-m", RunStatus::Running, state(3)), T0 + 3).await.expect("saved");
    let changed = Checkpoint {
        messages: Some(MessagesWrite { from: 3, messages: texts(&["answer, continued"]) }),
        ..checkpoint("run-m", RunStatus::Running, state(4))
    };
    store.checkpoint(changed, T0 + 4).await.expect("saved");
    let record = store.load_run("run-m").await.expect("load").expect("stored");
    assert_eq!(
        messages_of(&record),
        json!([{"text": "task"}, {"text": "call"}, {"text": "result"}, {"text": "answer, continued"}])
    );

    // A compaction rewrites the conversation from the start, shorter than it was.
    let compacted = Checkpoint {
        messages: Some(MessagesWrite { from: 0, messages: texts(&["summary", "next"]) }),
        ..checkpoint("run-m", RunStatus::Completed, state(5))
    };
    store.checkpoint(compacted, T0 + 5).await.expect("saved");
    let record = store.load_run("run-m").await.expect("load").expect("stored");
    assert_eq!(messages_of(&record), json!([{"text": "summary"}, {"text": "next"}]));
    assert_eq!(record.state["turn"], 5);

    // Under a lease alike: a fenced checkpoint appends, and a fenced compaction drops the
    // messages past its own.
    let lease = store
        .create_leased_run(new_run("run-f", "coder", RunStatus::Running), "w1", std::time::Duration::from_secs(30), T0)
        .await
        .expect("created with its lease");
    let fenced = |from: usize, messages: &[&str], turn: u32| Checkpoint {
        messages: Some(MessagesWrite { from, messages: texts(messages) }),
        fence: Some(lease.clone()),
        ..checkpoint("run-f", RunStatus::Running, state(turn))
    };
    store.checkpoint(fenced(0, &["task", "call"], 1), T0 + 1).await.expect("saved");
    store.checkpoint(fenced(2, &["result"], 2), T0 + 2).await.expect("saved");
    let record = store.load_run("run-f").await.expect("load").expect("stored");
    assert_eq!(messages_of(&record), json!([{"text": "task"}, {"text": "call"}, {"text": "result"}]));
    store.checkpoint(fenced(0, &["summary"], 3), T0 + 3).await.expect("saved");
    let record = store.load_run("run-f").await.expect("load").expect("stored");
    assert_eq!(messages_of(&record), json!([{"text": "summary"}]));
    assert_eq!(record.state["turn"], 3);

    // A refused checkpoint writes none of its messages.
    let ghost = Checkpoint {
        messages: Some(MessagesWrite { from: 0, messages: texts(&["lost"]) }),
        ..checkpoint("run-ghost", RunStatus::Running, state(1))
    };
    assert!(store.checkpoint(ghost, T0 + 6).await.is_err());
    assert_eq!(store.load_run("run-ghost").await.expect("load_run"), None);
}

/// What runs keep of their spend is summed by the store, by agent, model, day and rollup:
/// kept from a run's creation, replaced by a checkpoint that says it (fenced or not), left
/// by one that does not; a run that keeps none is named instead, and a run older than the
/// window is not counted.
pub async fn runs_spend_is_summed_by_agent_model_day_and_rollup(backend: Arc<dyn Backend>) {
    const DAY: i64 = 86_400_000;
    let store = backend.store();
    let spend = |model: &str, tokens: u64, cost_usd: f64| RunSpend {
        model: Some(model.to_owned()),
        tokens,
        cost_usd,
        rollup: false,
    };
    let created = |id: &str, agent: &str, spent: Option<RunSpend>| {
        let mut run = new_run(id, agent, RunStatus::Running);
        run.spend = spent;
        run
    };
    // Before the window: not counted.
    store.create_run(created("old", "coder", Some(spend("m/a", 1, 1.0))), T0 - DAY).await.expect("create");
    // Kept at creation, then replaced by a checkpoint without a fence.
    store.create_run(created("a1", "coder", Some(spend("m/a", 0, 0.0))), T0).await.expect("create");
    let saved = checkpoint("a1", RunStatus::Completed, json!({})).with_spend(spend("m/a", 100, 0.25));
    store.checkpoint(saved, T0 + 1).await.expect("checkpoint");
    // Replaced by a fenced checkpoint, then left by one that says nothing of it.
    let lease = store
        .create_leased_run(created("a2", "coder", Some(spend("m/a", 0, 0.0))), "w1", Duration::from_secs(60), T0 + 2)
        .await
        .expect("created with its lease");
    let mut fenced = checkpoint("a2", RunStatus::Running, json!({})).with_spend(spend("m/a", 50, 0.5));
    fenced.fence = Some(lease.clone());
    store.checkpoint(fenced, T0 + 3).await.expect("fenced checkpoint");
    let mut silent = checkpoint("a2", RunStatus::Completed, json!({}));
    (silent.fence, silent.release) = (Some(lease), true);
    store.checkpoint(silent, T0 + 4).await.expect("checkpoint without spend");
    // Another model, the next day; a team's rollup; a run that keeps none.
    store.create_run(created("b1", "coder", Some(spend("m/b", 7, 0.125))), T0 + DAY).await.expect("create");
    store.create_run(created("t1", "crew", Some(RunSpend::rollup(0, 0.0))), T0 + 5).await.expect("create");
    let team_end = checkpoint("t1", RunStatus::Completed, json!({})).with_spend(RunSpend::rollup(157, 0.875));
    store.checkpoint(team_end, T0 + 6).await.expect("checkpoint");
    store.create_run(created("legacy", "coder", None), T0 + 7).await.expect("create");

    let mut sums = store.spend_since(T0).await.expect("sums");
    sums.groups.sort_by(|a, b| (a.day, a.rollup, &a.model).cmp(&(b.day, b.rollup, &b.model)));
    let group = |agent: &str, model: Option<&str>, day: i64, rollup: bool, runs: u64, tokens: u64, cost_usd: f64| {
        SpendGroup { agent: agent.to_owned(), model: model.map(str::to_owned), day, rollup, runs, tokens, cost_usd }
    };
    let today = T0 / DAY;
    assert_eq!(
        sums.groups,
        [
            group("coder", Some("m/a"), today, false, 2, 150, 0.75),
            group("crew", None, today, true, 1, 157, 0.875),
            group("coder", Some("m/b"), today + 1, false, 1, 7, 0.125),
        ],
        "{}",
        backend.name()
    );
    assert_eq!(sums.unsummed, ["legacy"], "the run that keeps no spend is named");
}
