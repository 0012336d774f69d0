//! Evidence: the append-only, hash-chained log of each run.

use super::harness::{Backend, T0, checkpoint, new_run};
use serde_json::json;
use std::sync::Arc;
use troupe_store::{
    EvidenceChain, EvidenceEntry, EvidenceKind, NewEvidence, RunStatus, StoreError, verify_chain, verify_log,
};

fn first_entries() -> Vec<NewEvidence> {
    vec![
        NewEvidence::new(EvidenceKind::RunStarted, json!({"instruction": "fix the build", "model": "demo"})),
        NewEvidence::new(
            EvidenceKind::ModelTurn,
            json!({"text": "I will edit ü 😀 \"quoted\"\n", "usage": {"input": 12, "output": 3}, "cost": 0.1, "big": u64::MAX}),
        ),
        NewEvidence::new(EvidenceKind::ActionStarted, json!({"tool": "fs.write", "args": {"path": "src/lib.rs"}}))
            .for_call("call-1"),
    ]
}

async fn seed(backend: &dyn Backend, run_id: &str) -> Vec<EvidenceEntry> {
    let store = backend.store();
    store.create_run(new_run(run_id, "coder", RunStatus::Running), T0).await.expect("the run is created");
    let chain = EvidenceChain::new(run_id);
    let sealed = chain.seal(first_entries(), T0 + 1);
    store.append_evidence(&sealed, None).await.expect("the entries are appended");
    sealed
}

/// Sealed entries read back exactly, verify, and the chain continues from the stored head.
pub async fn evidence_reads_back_and_verifies(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-ev", "coder", RunStatus::Running), T0).await.expect("the run is created");
    assert_eq!(store.last_evidence("run-ev").await.expect("last_evidence"), None);

    let mut chain = EvidenceChain::new("run-ev");
    let first = chain.seal(first_entries(), T0 + 1);
    store.append_evidence(&first, None).await.expect("the first entries are appended");
    chain.advance(&first);
    let second = chain.seal(
        vec![NewEvidence::new(EvidenceKind::ActionCompleted, json!({"content": "ok"})).for_call("call-1")],
        T0 + 2,
    );
    store.append_evidence(&second, None).await.expect("the next entry is appended");
    chain.advance(&second);

    let log = store.evidence("run-ev", 0).await.expect("evidence");
    let expected: Vec<EvidenceEntry> = first.iter().chain(&second).cloned().collect();
    assert_eq!(log, expected, "entries read back exactly as sealed");
    assert_eq!(verify_chain(&log), Ok(()));
    assert_eq!(store.evidence("run-ev", 2).await.expect("evidence after 2"), expected[2..]);

    let last = store.last_evidence("run-ev").await.expect("last_evidence").expect("a newest entry");
    assert_eq!(last, expected[3]);
    let resumed = EvidenceChain::after("run-ev", Some(&last));
    assert_eq!(resumed, chain, "a chain resumed from the stored head is the writer's chain");
    let finished =
        resumed.seal(vec![NewEvidence::new(EvidenceKind::RunFinished, json!({"status": "completed"}))], T0 + 3);
    store.append_evidence(&finished, None).await.expect("the resumed chain appends");
    assert_eq!(verify_chain(&store.evidence("run-ev", 0).await.expect("evidence")), Ok(()));
    assert!(store.evidence("run-none", 0).await.expect("evidence of an unknown run").is_empty());
}

/// The schema itself refuses to change or remove evidence, whoever asks.
pub async fn evidence_cannot_be_updated_or_deleted(backend: Arc<dyn Backend>) {
    let sealed = seed(backend.as_ref(), "run-raw").await;
    let attempts = [
        "UPDATE evidence SET payload = '{\"forged\":true}' WHERE run_id = 'run-raw' AND seq = 2",
        "UPDATE evidence SET hash = prev_hash",
        "DELETE FROM evidence WHERE run_id = 'run-raw' AND seq = 3",
        "DELETE FROM evidence",
    ];
    for sql in attempts {
        let Err(refusal) = backend.execute(sql).await else {
            panic!("{} must refuse `{sql}`", backend.name());
        };
        assert!(refusal.contains("append-only"), "the refusal of `{sql}` names the rule: {refusal}");
    }
    let log = backend.store().evidence("run-raw", 0).await.expect("evidence");
    assert_eq!(log, sealed, "the refused statements changed nothing");
    assert_eq!(verify_chain(&log), Ok(()));
}

/// A writer whose chain head is stale cannot append over another writer's entries.
pub async fn stale_writer_gets_evidence_conflict(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let sealed = seed(backend.as_ref(), "run-two-writers").await;
    let stale = EvidenceChain::new("run-two-writers");
    let clash = stale.seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, json!({"text": "me too"}))], T0 + 5);
    let refused = store.append_evidence(&clash, None).await;
    assert!(
        matches!(&refused, Err(StoreError::EvidenceConflict { run_id, seq: 1 }) if run_id == "run-two-writers"),
        "expected EvidenceConflict at 1, got {refused:?}"
    );

    // A batch overlapping the head at its second entry is refused as a whole.
    let behind = EvidenceChain::after("run-two-writers", sealed.get(1));
    let overlapping = behind.seal(
        vec![
            NewEvidence::new(EvidenceKind::ModelTurn, json!({"text": "a"})),
            NewEvidence::new(EvidenceKind::ModelTurn, json!({"text": "b"})),
        ],
        T0 + 6,
    );
    assert_eq!(overlapping[0].seq, 3);
    let refused = store.append_evidence(&overlapping, None).await;
    assert!(matches!(&refused, Err(StoreError::EvidenceConflict { seq: 3, .. })), "got {refused:?}");
    let log = store.evidence("run-two-writers", 0).await.expect("evidence");
    assert_eq!(log, sealed, "nothing of a refused batch is kept");
    assert_eq!(verify_chain(&log), Ok(()));
}

/// A row slipped in behind the store's back, with a hash that does not match, is caught.
pub async fn forged_row_fails_verification(backend: Arc<dyn Backend>) {
    let sealed = seed(backend.as_ref(), "run-forged").await;
    let untouched = seed(backend.as_ref(), "run-honest").await;
    let head = &sealed[2];
    let forged_hash = "0".repeat(64);
    let insert = format!(
        "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
         VALUES ('run-forged', 4, 'action_completed', 'call-1', '{{\"content\":\"forged\"}}', {}, '{}', '{forged_hash}')",
        T0 + 9,
        head.hash
    );
    assert_eq!(backend.execute(&insert).await.expect("inserting a row is allowed"), 1);

    let log = backend.store().evidence("run-forged", 0).await.expect("evidence");
    assert_eq!(log.len(), 4);
    let broken = verify_chain(&log).expect_err("a forged row breaks the chain");
    assert_eq!(broken.seq, 4);
    assert_eq!(broken.run_id, "run-forged");

    let honest = backend.store().evidence("run-honest", 0).await.expect("evidence");
    assert_eq!(honest, untouched);
    assert_eq!(verify_chain(&honest), Ok(()), "another run's chain is unaffected");
}

/// The run's record holds the head of its chain, moved with every entry appended: a log
/// whose last entries were removed (the guards dropped, as an attacker with the file
/// would) falls short of it and fails verification; the intact log reaches it.
pub async fn a_cut_log_falls_short_of_its_head(backend: Arc<dyn Backend>) {
    let sealed = seed(backend.as_ref(), "run-cut").await;
    let store = backend.store();
    let head = store.load_run("run-cut").await.expect("load_run").expect("the run").evidence_head;
    assert_eq!((head.seq, head.hash.as_str()), (3, sealed[2].hash.as_str()), "the head is the last entry");
    let log = store.evidence("run-cut", 0).await.expect("evidence");
    assert_eq!(verify_log(&log, &head, "run-cut"), Ok(()));

    let unguard = match backend.name() {
        "sqlite" => "DROP TRIGGER evidence_is_append_only_delete",
        _ => "ALTER TABLE evidence DISABLE TRIGGER evidence_is_append_only",
    };
    backend.execute(unguard).await.expect("the guard is dropped");
    let cut = backend.execute("DELETE FROM evidence WHERE run_id = 'run-cut' AND seq = 3").await;
    assert_eq!(cut, Ok(1), "the last entry is removed");
    let log = store.evidence("run-cut", 0).await.expect("evidence");
    assert_eq!(verify_chain(&log), Ok(()), "what is left still links up");
    let head = store.load_run("run-cut").await.expect("load_run").expect("the run").evidence_head;
    assert_eq!(head.seq, 3, "removing entries does not move the head back");
    let broken = verify_log(&log, &head, "run-cut").expect_err("a cut log is found out");
    assert_eq!(broken.seq, 3);
    assert!(broken.problem.contains("the last ones were removed"), "{broken}");
}

/// One append of two runs' entries, interleaved, moves each run's head to its own last
/// entry, and each run's log reaches its head.
pub async fn one_append_moves_each_runs_head_to_its_last_entry(backend: Arc<dyn Backend>) {
    let store = backend.store();
    for run_id in ["run-left", "run-right"] {
        store.create_run(new_run(run_id, "coder", RunStatus::Running), T0).await.expect("the run is created");
    }
    let (left, right) = (EvidenceChain::new("run-left"), EvidenceChain::new("run-right"));
    let turn = |n: i64| NewEvidence::new(EvidenceKind::ModelTurn, json!({"n": n}));
    let lefts = left.seal(vec![turn(1), turn(2), turn(3)], T0 + 1);
    let rights = right.seal(vec![turn(1), turn(2)], T0 + 1);
    let interleaved = [lefts[0].clone(), rights[0].clone(), lefts[1].clone(), rights[1].clone(), lefts[2].clone()];
    store.append_evidence(&interleaved, None).await.expect("the entries are appended");
    for (run_id, last) in [("run-left", &lefts[2]), ("run-right", &rights[1])] {
        let head = store.load_run(run_id).await.expect("load_run").expect("the run").evidence_head;
        assert_eq!((head.seq, head.hash.as_str()), (last.seq, last.hash.as_str()), "{run_id}'s head");
        let log = store.evidence(run_id, 0).await.expect("evidence");
        assert_eq!(verify_log(&log, &head, run_id), Ok(()), "{run_id}'s log reaches its head");
    }
}

/// A stored row the store cannot read back is reported, not unwrapped.
pub async fn undecodable_row_is_a_decode_error(backend: Arc<dyn Backend>) {
    seed(backend.as_ref(), "run-garbled").await;
    let insert = "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
                  VALUES ('run-garbled', 4, 'no_such_kind', NULL, '{}', 1, '', '')";
    assert_eq!(backend.execute(insert).await.expect("inserting a row is allowed"), 1);
    let read = backend.store().evidence("run-garbled", 0).await;
    assert!(matches!(read, Err(StoreError::Decode { .. })), "expected Decode, got {read:?}");
}

/// A checkpoint's evidence is appended with its state, or neither is saved.
pub async fn checkpoint_evidence_is_atomic_with_state(backend: Arc<dyn Backend>) {
    let store = backend.store();
    store.create_run(new_run("run-atomic", "coder", RunStatus::Running), T0).await.expect("the run is created");
    store.send_signal("run-atomic", "approval", json!({"approved": true}), T0 + 1).await.expect("send_signal");

    let mut chain = EvidenceChain::new("run-atomic");
    let mut step = checkpoint("run-atomic", RunStatus::Running, json!({"turn": 1}));
    step.activity = Some("thinking".into());
    step.evidence = chain.seal(first_entries(), T0 + 2);
    store.checkpoint(step.clone(), T0 + 2).await.expect("a checkpoint with evidence is saved");
    chain.advance(&step.evidence);
    assert_eq!(store.evidence("run-atomic", 0).await.expect("evidence"), step.evidence);

    // A second writer, still at the old head, tries to save its own boundary.
    let stale = EvidenceChain::new("run-atomic");
    let mut conflicting = checkpoint("run-atomic", RunStatus::Paused, json!({"turn": 99}));
    conflicting.activity = Some("should not be saved".into());
    conflicting.signals_consumed_through = Some(1);
    conflicting.evidence = stale.seal(vec![NewEvidence::new(EvidenceKind::ApprovalWait, json!({}))], T0 + 3);
    let refused = store.checkpoint(conflicting, T0 + 3).await;
    assert!(
        matches!(&refused, Err(StoreError::EvidenceConflict { run_id, seq: 1 }) if run_id == "run-atomic"),
        "expected EvidenceConflict at 1, got {refused:?}"
    );

    let run = store.load_run("run-atomic").await.expect("load_run").expect("stored");
    assert_eq!(run.state, json!({"turn": 1}), "the refused checkpoint's state was not saved");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.activity.as_deref(), Some("thinking"));
    assert_eq!(run.updated_at, T0 + 2);
    assert_eq!(store.transitions("run-atomic").await.expect("transitions").len(), 1, "no transition was recorded");
    assert_eq!(store.pending_signals("run-atomic", 0).await.expect("pending").len(), 1, "no signal was consumed");
    let log = store.evidence("run-atomic", 0).await.expect("evidence");
    assert_eq!(log, step.evidence);
    assert_eq!(verify_chain(&log), Ok(()));
    let last = step.evidence.last().expect("the checkpoint had evidence");
    assert_eq!(
        (run.evidence_head.seq, run.evidence_head.hash.as_str()),
        (last.seq, last.hash.as_str()),
        "the saved checkpoint moved the head to its last entry, the refused one did not move it"
    );
    assert_eq!(verify_log(&log, &run.evidence_head, "run-atomic"), Ok(()));

    // The next checkpoint moves it on, with its own last entry.
    let mut next = checkpoint("run-atomic", RunStatus::Running, json!({"turn": 2}));
    next.evidence = chain.seal(
        vec![
            NewEvidence::new(EvidenceKind::ModelTurn, json!({"text": "c"})),
            NewEvidence::new(EvidenceKind::ModelTurn, json!({"text": "d"})),
        ],
        T0 + 4,
    );
    store.checkpoint(next.clone(), T0 + 4).await.expect("the next checkpoint is saved");
    let head = store.load_run("run-atomic").await.expect("load_run").expect("stored").evidence_head;
    let last = next.evidence.last().expect("two entries");
    assert_eq!((head.seq, head.hash.as_str()), (last.seq, last.hash.as_str()));
}
