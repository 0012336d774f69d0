//! Durable runs on a real SQLite store: what is recorded, and what a resume after a crash
//! does. A "process" here is a Tokio runtime of its own with its own store connection;
//! a crash is that runtime shut down under the run, so nothing of the run's own ending
//! happens, exactly as with a killed process.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use troupe_core::{AgentEventKind, ConversationId, Message, PauseReason, RunId};
use troupe_durable::{QueueWorker, ResumeRun, fire_due, schedule_agent, send_signal};
use troupe_runtime::{
    AgentSpec, ApprovalDecision, ApprovalPolicy, Durability, FixedModel, RunInput, RunOutcome, Runner, RuntimeError,
    Signal,
};
use troupe_store::{EvidenceKind, Flush, RunStatus, Store, Trigger, verify_chain};
use troupe_testkit::{MockTurn, ScriptedModel};

use crate::recording;
use recording::{Log, RecordingStore};
use troupe_tools::{Effect, Idempotency, Tool, ToolCatalog, ToolError, ToolOutput, Workspace, typed_tool};

const TTL: Duration = Duration::from_millis(300);

/// Where a tool call stops forever, to be crashed in.
#[derive(Default)]
struct Gate {
    hang_before: AtomicBool,
    hang_after: AtomicBool,
    /// The hangs apply from this call on (counting from 1; 0 for every call).
    hang_from_call: AtomicU32,
    calls: AtomicU32,
}

#[derive(Deserialize, JsonSchema)]
struct Line {
    line: u32,
}

/// `notes.append`: appends a numbered line to `notes.txt` (not idempotent); `kv.put`:
/// writes `kv.txt` (idempotent).
fn tools(gate: &Arc<Gate>) -> Vec<Arc<dyn Tool>> {
    let tool = |name: &str, file: &'static str, append: bool| {
        let gate = Arc::clone(gate);
        typed_tool(name, "Records a line.", Effect::WriteState, move |ctx, args: Line| {
            let gate = Arc::clone(&gate);
            async move {
                let call = gate.calls.fetch_add(1, Ordering::SeqCst) + 1;
                let armed = call >= gate.hang_from_call.load(Ordering::SeqCst);
                if armed && gate.hang_before.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                let path = ctx.workspace.root().join(file);
                let mut text = if append { std::fs::read_to_string(&path).unwrap_or_default() } else { String::new() };
                text.push_str(&format!("{}\n", args.line));
                std::fs::write(&path, text).map_err(|e| ToolError::Failed { message: e.to_string() })?;
                if armed && gate.hang_after.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                Ok(ToolOutput::text(format!("recorded line {}", args.line)))
            }
        })
    };
    vec![
        tool("notes.append", "notes.txt", true).idempotency(Idempotency::NonIdempotent).into_arc(),
        tool("kv.put", "kv.txt", false).idempotency(Idempotency::Idempotent).into_arc(),
    ]
}

pub(crate) fn process() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
}

pub(crate) struct World {
    dir: tempfile::TempDir,
    db: PathBuf,
    pub(crate) model: ScriptedModel,
    gate: Arc<Gate>,
}

impl World {
    pub(crate) fn new(turns: impl IntoIterator<Item = MockTurn>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join(".troupe").join("troupe.db");
        World { dir, db, model: ScriptedModel::new(turns), gate: Arc::default() }
    }

    pub(crate) async fn store(&self) -> Arc<dyn Store> {
        troupe_store::open(self.db.to_str().expect("utf-8 path")).await.expect("the store opens")
    }

    /// A runner of this world in the current process, holding leases as `owner`.
    pub(crate) async fn runner(&self, owner: &str) -> Runner {
        let catalog = ToolCatalog::with_tools(tools(&self.gate)).expect("a catalog");
        let model = FixedModel::new(Arc::new(self.model.clone()), "scripted");
        Runner::new(Arc::new(model), Arc::new(catalog), Arc::new(Workspace::new(self.dir.path()).expect("workspace")))
            .with_store(Durability::new(self.store().await).with_owner(owner).with_lease_ttl(TTL))
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

pub(crate) fn spec(policy: ApprovalPolicy) -> Arc<AgentSpec> {
    let mut spec = AgentSpec::new("scribe", "scripted");
    spec.approval = policy;
    Arc::new(spec)
}

/// Polls `check` until it holds (or fails the test after 10 s).
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn kinds(store: &dyn Store, run_id: &str) -> Vec<EvidenceKind> {
    store.evidence(run_id, 0).await.expect("evidence").into_iter().map(|e| e.kind).collect()
}

#[test]
fn a_recorded_run_leaves_a_verified_log() {
    let world = World::new([MockTurn::tool_call("c1", "notes.append", json!({"line": 1})), MockTurn::text("done")]);
    process().block_on(async {
        let runner = world.runner("solo").await;
        let output =
            runner.start(spec(ApprovalPolicy::auto()), RunInput::new("write line 1")).output().await.expect("runs");
        assert!(output.is_completed());
        let store = runner.durability().expect("a store").store().clone();
        let run_id = output.run_id.to_string();
        let record = store.load_run(&run_id).await.expect("loads").expect("recorded");
        assert_eq!(record.status, RunStatus::Completed);
        assert_eq!(record.input["instruction"], "write line 1");
        let started_in = record.input["workspace"].as_str().expect("the workspace is recorded");
        assert_eq!(Path::new(started_in), runner.workspace().root());
        assert_eq!(
            kinds(store.as_ref(), &run_id).await,
            [
                EvidenceKind::RunStarted,
                EvidenceKind::ModelTurn,
                EvidenceKind::ActionStarted,
                EvidenceKind::ActionCompleted,
                EvidenceKind::ModelTurn,
                EvidenceKind::RunFinished
            ]
        );
        let log = store.evidence(&run_id, 0).await.expect("evidence");
        verify_chain(&log).expect("an intact chain");
        assert_eq!(log[3].payload["content"], "recorded line 1");
        let statuses: Vec<_> =
            store.transitions(&run_id).await.expect("transitions").into_iter().map(|t| t.to).collect();
        assert_eq!(statuses, [RunStatus::Running, RunStatus::Completed]);
        assert!(store.queue().await.expect("queue").is_empty(), "the lease is released");
    });
    assert_eq!(world.file("notes.txt"), "1\n");
}

/// Crashes a run in a call of `notes.append` (before or after its effect), then resumes it
/// in a second process where a person, looking at the file, decides.
fn crash_in_a_non_idempotent_call(after_effect: bool) {
    let world = World::new([
        MockTurn::tool_call("c1", "notes.append", json!({"line": 1})),
        MockTurn::tool_call("c2", "notes.append", json!({"line": 2})),
        MockTurn::text("done"),
    ]);
    let first = process();
    let run_id = RunId::generate();
    first.block_on(async {
        let runner = world.runner("first").await;
        let store = runner.durability().expect("a store").store().clone();
        // Line 1 completes; the crash comes during line 2.
        world.gate.hang_from_call.store(2, Ordering::SeqCst);
        world.gate.hang_before.store(!after_effect, Ordering::SeqCst);
        world.gate.hang_after.store(after_effect, Ordering::SeqCst);
        let handle = runner.start(spec(ApprovalPolicy::auto()), RunInput::new("write lines").run_id(run_id.clone()));
        until("the second call started", async || {
            kinds(store.as_ref(), run_id.as_str()).await.iter().filter(|k| **k == EvidenceKind::ActionStarted).count()
                == 2
        })
        .await;
        // The tool itself is in the call (and, after its effect, has written the line).
        let expected = if after_effect { "1\n2\n" } else { "1\n" };
        until("the tool hangs", async || {
            world.gate.calls.load(Ordering::SeqCst) == 2 && world.file("notes.txt") == expected
        })
        .await;
        std::mem::forget(handle);
    });
    first.shutdown_background();
    world.gate.hang_before.store(false, Ordering::SeqCst);
    world.gate.hang_after.store(false, Ordering::SeqCst);
    assert_eq!(world.gate.calls.load(Ordering::SeqCst), 2);

    process().block_on(async {
        let runner = world.runner("second").await;
        // The dead process's lease has not lapsed yet: nobody may take the run.
        let early = runner.resume_run(run_id.as_str()).await;
        assert!(matches!(early, Err(RuntimeError::RunLeased { ref owner, .. }) if owner == "first"), "{early:?}");
        tokio::time::sleep(TTL + Duration::from_millis(50)).await;
        let mut handle = runner.resume_run(run_id.as_str()).await.expect("resumes after the lease lapsed");
        let mut asked = Vec::new();
        while let Some(event) = handle.events.next_event().await {
            if let AgentEventKind::RunPaused { reason } = event.kind {
                // An interrupted call is announced as one, not as a plain approval.
                let (call_id, tool) = match reason {
                    PauseReason::UncertainAction { call_id, tool, .. } => (call_id, tool),
                    other => panic!("an interrupted call pauses the run as uncertain: {other:?}"),
                };
                assert_eq!(tool, "notes.append");
                // The person looks: is line 2 there?
                let happened = world.file("notes.txt").lines().any(|l| l == "2");
                assert_eq!(happened, after_effect);
                let decision = if happened {
                    ApprovalDecision::Reject { reason: Some("line 2 is in the file".into()) }
                } else {
                    ApprovalDecision::Approve
                };
                handle.signals.decide(call_id.clone(), decision).await.expect("decided");
                asked.push(call_id);
            }
        }
        let output = handle.result.await.expect("ends");
        assert!(output.is_completed(), "{:?}", output.outcome);
        assert_eq!(asked.len(), 1, "only the interrupted call is put to the person");
        let store = runner.durability().expect("a store").store().clone();
        let log = store.evidence(run_id.as_str(), 0).await.expect("evidence");
        verify_chain(&log).expect("one chain across both processes");
        assert!(log.iter().any(|e| e.kind == EvidenceKind::ResumePlanned));
    });
    assert_eq!(world.file("notes.txt"), "1\n2\n", "every line exactly once");
    // Line 1 never ran again; line 2 ran again only when it had not happened.
    assert_eq!(world.gate.calls.load(Ordering::SeqCst), if after_effect { 2 } else { 3 });
}

#[test]
fn a_call_interrupted_after_its_effect_is_skipped_by_a_person() {
    crash_in_a_non_idempotent_call(true);
}

#[test]
fn a_call_interrupted_before_its_effect_is_retried_by_a_person() {
    crash_in_a_non_idempotent_call(false);
}

#[test]
fn an_interrupted_idempotent_call_is_retried_without_asking() {
    let world = World::new([MockTurn::tool_call("c1", "kv.put", json!({"line": 7})), MockTurn::text("done")]);
    world.gate.hang_after.store(true, Ordering::SeqCst);
    let run_id = RunId::generate();
    let first = process();
    first.block_on(async {
        let runner = world.runner("first").await;
        std::mem::forget(runner.start(spec(ApprovalPolicy::auto()), RunInput::new("put").run_id(run_id.clone())));
        until("the call ran", async || world.file("kv.txt") == "7\n").await;
    });
    first.shutdown_background();
    world.gate.hang_after.store(false, Ordering::SeqCst);
    process().block_on(async {
        tokio::time::sleep(TTL + Duration::from_millis(50)).await;
        let runner = world.runner("second").await;
        let handle = runner.resume_run(run_id.as_str()).await.expect("resumes");
        let output = handle.output().await.expect("ends");
        assert!(output.is_completed(), "{:?}", output.outcome);
        assert!(!output.events.iter().any(|e| matches!(e.kind, AgentEventKind::RunPaused { .. })));
    });
    assert_eq!(world.gate.calls.load(Ordering::SeqCst), 2, "retried once");
    assert_eq!(world.file("kv.txt"), "7\n");
}

#[test]
fn signals_from_another_process_are_applied_once_in_order() {
    let world = World::new([MockTurn::tool_call("c1", "notes.append", json!({"line": 1})), MockTurn::text("done")]);
    process().block_on(async {
        let runner = world.runner("live").await;
        let store = world.store().await;
        // Approval is asked (the default policy); the person answers from elsewhere.
        let handle = runner.start(spec(ApprovalPolicy::default()), RunInput::new("write"));
        let run_id = handle.run_id.to_string();
        until("the run waits", async || {
            store.load_run(&run_id).await.ok().flatten().is_some_and(|r| r.status == RunStatus::Paused)
        })
        .await;
        for text in ["first note", "second note"] {
            send_signal(store.as_ref(), &run_id, &Signal::user_message(text)).await.expect("stored");
        }
        let decision = Signal::approval("c1", ApprovalDecision::Approve);
        let seq = send_signal(store.as_ref(), &run_id, &decision).await.expect("stored");
        assert_eq!(seq, 3);
        let RunHandle { events, signals, result, .. } = handle;
        drop(events);
        let output = result.await.expect("ends");
        drop(signals);
        assert!(output.is_completed(), "{:?}", output.outcome);
        let last = world.model.requests().pop().expect("a second request");
        let text = serde_json::to_string(&last.messages).expect("serializes");
        assert_eq!(text.matches("first note").count(), 1);
        assert_eq!(text.matches("second note").count(), 1);
        assert!(text.find("first note") < text.find("second note"));
        let pending = store.pending_signals(&run_id, 0).await.expect("signals");
        assert!(pending.is_empty(), "every signal is consumed");
        let applied =
            kinds(store.as_ref(), &run_id).await.iter().filter(|k| **k == EvidenceKind::SignalApplied).count();
        assert_eq!(applied, 3);
    });
    assert_eq!(world.file("notes.txt"), "1\n");
}

/// A run that is working (not waiting for a person) takes a signal another process
/// stored during a step at its next boundary: it does not go on trusting what its last
/// checkpoint said of its signals once a poll interval has passed.
#[test]
fn a_signal_stored_while_a_tool_runs_reaches_the_next_model_call() {
    let world = World::new([MockTurn::tool_call("c1", "peek", json!({"line": 1})), MockTurn::text("done")]);
    process().block_on(async {
        let elsewhere = world.store().await;
        let run_id = RunId::from("run-peek");
        let peek = {
            let (store, run_id) = (Arc::clone(&elsewhere), run_id.to_string());
            typed_tool("peek", "Looks.", Effect::ReadOnly, move |_ctx, _args: Line| {
                let (store, run_id) = (Arc::clone(&store), run_id.clone());
                async move {
                    send_signal(store.as_ref(), &run_id, &Signal::user_message("a note from elsewhere"))
                        .await
                        .map_err(|e| ToolError::Failed { message: e.to_string() })?;
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    Ok(ToolOutput::text("looked"))
                }
            })
            .into_arc()
        };
        let catalog = ToolCatalog::with_tools(vec![peek]).expect("a catalog");
        let model = FixedModel::new(Arc::new(world.model.clone()), "scripted");
        let durability = Durability::new(world.store().await).with_signal_poll(Duration::from_millis(10));
        let runner =
            Runner::new(Arc::new(model), Arc::new(catalog), Arc::new(Workspace::new(world.path()).expect("ws")))
                .with_store(durability);
        let output = runner
            .start(spec(ApprovalPolicy::auto()), RunInput::new("look").run_id(run_id.clone()))
            .output()
            .await
            .expect("ends");
        assert!(output.is_completed(), "{:?}", output.outcome);
        let second = world.model.requests().pop().expect("a second request");
        let text = serde_json::to_string(&second.messages).expect("serializes");
        assert!(text.contains("a note from elsewhere"), "the second model call carries the note: {text}");
        assert!(elsewhere.pending_signals(run_id.as_str(), 0).await.expect("signals").is_empty());
    });
}

/// What a recorded run writes, in order, and how each write is flushed. By default every
/// checkpoint is flushed. With model turns' checkpoints deferred (opt-in), every write that
/// a side effect or the run's end relies on is still flushed: a side effect always follows
/// a flushed write, which takes every earlier deferred turn to disk with it, so a power
/// loss can undo read-only progress, never the record of an effect. Either way a run
/// reads nothing back from its store on the way.
#[test]
fn a_side_effect_follows_a_flushed_write_and_only_model_turns_are_deferred() {
    for turn_flush in [Flush::BeforeAnswer, Flush::WithNextFlush] {
        let entries = writes_of_a_run(turn_flush);
        let flushed = |entry: &str| entry == "append_evidence" || entry.starts_with("checkpoint flushed");
        let effect = entries.iter().position(|e| e == "effect notes.append").expect("the side effect ran");
        let last_write = entries[..effect].iter().rev().find(|e| !e.starts_with("effect")).expect("a write before it");
        assert!(flushed(last_write), "a side effect follows a flushed write: {entries:?}");
        let deferred = entries.iter().filter(|e| *e == "checkpoint deferred").count();
        match turn_flush {
            Flush::BeforeAnswer => assert_eq!(deferred, 0, "by default every checkpoint is flushed: {entries:?}"),
            Flush::WithNextFlush => assert_eq!(deferred, 3, "the three turns the run acted on: {entries:?}"),
        }
        assert_eq!(entries.last().map(String::as_str), Some("checkpoint flushed release"), "{entries:?}");
        assert_eq!(entries.first().map(String::as_str), Some("create_leased_run"), "{entries:?}");
        assert!(
            entries.iter().all(|e| e.starts_with("effect")
                || e.starts_with("checkpoint")
                || flushed(e)
                || e == "create_leased_run"),
            "a run reads nothing back from its store: {entries:?}"
        );
    }
}

/// The store calls and tool effects of a run that reads, writes, reads and answers.
fn writes_of_a_run(turn_flush: Flush) -> Vec<String> {
    let world = World::new([
        MockTurn::tool_call("c1", "peek", json!({"line": 1})),
        MockTurn::tool_call("c2", "notes.append", json!({"line": 2})),
        MockTurn::tool_call("c3", "peek", json!({"line": 3})),
        MockTurn::text("done"),
    ]);
    let log = Log::default();
    process().block_on(async {
        let tool = |name: &str, effect: Effect| {
            let (log, name_owned) = (log.clone(), name.to_owned());
            typed_tool(name, "Acts.", effect, move |_ctx, _args: Line| {
                log.push(format!("effect {name_owned}"));
                async move { Ok(ToolOutput::text("done")) }
            })
            .idempotency(Idempotency::NonIdempotent)
            .into_arc()
        };
        let catalog =
            ToolCatalog::with_tools(vec![tool("peek", Effect::ReadOnly), tool("notes.append", Effect::WriteState)])
                .expect("a catalog");
        let model = FixedModel::new(Arc::new(world.model.clone()), "scripted");
        let store = RecordingStore::wrap(world.store().await, log.clone());
        let runner =
            Runner::new(Arc::new(model), Arc::new(catalog), Arc::new(Workspace::new(world.path()).expect("ws")))
                .with_store(Durability::new(store).with_turn_flush(turn_flush));
        let output = runner.start(spec(ApprovalPolicy::auto()), RunInput::new("work")).output().await.expect("ends");
        assert!(output.is_completed(), "{:?}", output.outcome);
    });
    log.entries()
}

use troupe_runtime::RunHandle;

#[test]
fn a_paused_run_is_decided_later_and_finished_by_a_worker() {
    let world = World::new([MockTurn::tool_call("c1", "notes.append", json!({"line": 1})), MockTurn::text("done")]);
    process().block_on(async {
        let runner = world.runner("cli").await;
        // Nobody is there to decide: the run pauses, recorded.
        let output =
            runner.start(spec(ApprovalPolicy::default()), RunInput::new("write")).output().await.expect("ends");
        assert!(matches!(output.outcome, RunOutcome::Paused { .. }));
        let store = world.store().await;
        let run_id = output.run_id.to_string();
        assert_eq!(store.load_run(&run_id).await.expect("loads").expect("stored").status, RunStatus::Paused);
        assert!(store.queue().await.expect("queue").is_empty(), "a paused run waits outside the queue");

        send_signal(store.as_ref(), &run_id, &Signal::approval("c1", ApprovalDecision::Approve)).await.expect("stored");
        let worker = QueueWorker::new(world.runner("worker").await).expect("a worker");
        let output = worker.run_one().await.expect("works").expect("the decided run was queued");
        assert!(output.is_completed(), "{:?}", output.outcome);
        assert_eq!(output.run_id.as_str(), run_id);
        assert!(worker.run_one().await.expect("works").is_none());
    });
    assert_eq!(world.file("notes.txt"), "1\n");
}

/// Two decisions stored for one call: the first is applied, the second refused — and the
/// log says so, with why, instead of calling both applied.
#[test]
fn a_second_decision_about_a_call_is_logged_as_refused() {
    let world = World::new([MockTurn::tool_call("c1", "notes.append", json!({"line": 1})), MockTurn::text("done")]);
    process().block_on(async {
        let runner = world.runner("cli").await;
        let output =
            runner.start(spec(ApprovalPolicy::default()), RunInput::new("write")).output().await.expect("ends");
        assert!(matches!(output.outcome, RunOutcome::Paused { .. }));
        let store = world.store().await;
        let run_id = output.run_id.to_string();
        send_signal(store.as_ref(), &run_id, &Signal::approval("c1", ApprovalDecision::Approve)).await.expect("stored");
        let reject = Signal::approval("c1", ApprovalDecision::Reject { reason: Some("changed my mind".into()) });
        send_signal(store.as_ref(), &run_id, &reject).await.expect("stored");
        let worker = QueueWorker::new(world.runner("worker").await).expect("a worker");
        let output = worker.run_one().await.expect("works").expect("the decided run was queued");
        assert!(output.is_completed(), "{:?}", output.outcome);
        let log = store.evidence(&run_id, 0).await.expect("evidence");
        let taken: Vec<&serde_json::Value> =
            log.iter().filter(|e| e.kind == EvidenceKind::SignalApplied).map(|e| e.payload.value()).collect();
        assert_eq!(taken.len(), 2, "{taken:?}");
        assert_eq!(taken[0]["applied"], true, "{taken:?}");
        assert_eq!(taken[1]["applied"], false, "the second decision was refused: {taken:?}");
        assert!(taken[1]["refused"].as_str().is_some_and(|why| !why.is_empty()), "{taken:?}");
    });
    assert_eq!(world.file("notes.txt"), "1\n", "the call ran once, as first decided");
}

#[test]
fn a_worker_takes_over_a_run_whose_worker_died() {
    let world = World::new([MockTurn::tool_call("c1", "kv.put", json!({"line": 3})), MockTurn::text("done")]);
    world.gate.hang_after.store(true, Ordering::SeqCst);
    let first = process();
    let run_id = first.block_on(async {
        let runner = world.runner("worker-a").await;
        let run_id = runner.enqueue(&spec(ApprovalPolicy::auto()), RunInput::new("put")).await.expect("queued");
        let worker = QueueWorker::new(runner).expect("a worker").with_idle_poll(Duration::from_millis(10));
        tokio::spawn(async move { worker.run_until(tokio_util::sync::CancellationToken::new()).await });
        until("worker a is in the call", async || world.file("kv.txt") == "3\n").await;
        run_id
    });
    first.shutdown_background();
    world.gate.hang_after.store(false, Ordering::SeqCst);
    process().block_on(async {
        let worker = QueueWorker::new(world.runner("worker-b").await).expect("a worker");
        let start = Instant::now();
        let output = loop {
            if let Some(output) = worker.run_one().await.expect("works") {
                break output;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "the run was never taken over");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(start.elapsed() >= TTL / 2, "taken over only once the lease lapsed");
        assert_eq!(output.run_id, run_id);
        assert!(output.is_completed(), "{:?}", output.outcome);
        let store = world.store().await;
        let log = store.evidence(run_id.as_str(), 0).await.expect("evidence");
        verify_chain(&log).expect("one chain across both workers");
        let plan = log.iter().find(|e| e.kind == EvidenceKind::ResumePlanned).expect("a resume plan");
        assert_eq!(plan.payload["owner"], "worker-b");
        assert_eq!(plan.payload["calls"][0]["resume"]["action"], "retry");
    });
}

#[test]
fn conversations_carry_history_across_runs() {
    let world = World::new([MockTurn::text("Hello, Ada."), MockTurn::text("You are Ada."), MockTurn::text("Hi.")]);
    process().block_on(async {
        let runner = world.runner("chat").await;
        let conversation = ConversationId::new("conv-1");
        let spec = spec(ApprovalPolicy::auto());
        let first = RunInput::new("My name is Ada.").conversation(conversation.clone());
        assert!(runner.start(Arc::clone(&spec), first).output().await.expect("runs").is_completed());
        let second = RunInput::new("What is my name?").conversation(conversation.clone());
        assert!(runner.start(Arc::clone(&spec), second).output().await.expect("runs").is_completed());
        let requests = world.model.requests();
        let texts: Vec<String> = requests[1].messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["My name is Ada.", "Hello, Ada.", "What is my name?"]);
        // Inline history wins over the stored conversation.
        let third = RunInput::new("Hello?").conversation(conversation.clone()).history(vec![Message::user("Earlier.")]);
        assert!(runner.start(spec, third).output().await.expect("runs").is_completed());
        let texts: Vec<String> = world.model.requests()[2].messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["Earlier.Hello?"]);
        let store = world.store().await;
        assert_eq!(store.conversation("conv-1").await.expect("turns").len(), 6);
    });
}

#[test]
fn a_schedule_tick_starts_one_run_however_many_fire_it() {
    let world = World::new([MockTurn::text("tick done")]);
    process().block_on(async {
        let store = world.store().await;
        let trigger = Trigger::Interval { every_ms: 60_000 };
        let schedule =
            schedule_agent(store.as_ref(), "hourly", trigger, &spec(ApprovalPolicy::auto()), &RunInput::new("tick"), 0)
                .await
                .expect("scheduled");
        assert_eq!(schedule.next_fire_at, 60_000);
        assert!(fire_due(store.as_ref(), 59_999).await.expect("fires").is_empty(), "not due yet");
        let mut firing = Vec::new();
        for _ in 0..6 {
            let store = world.store().await;
            firing.push(tokio::spawn(async move { fire_due(store.as_ref(), 60_000).await }));
        }
        let mut fired = Vec::new();
        for task in firing {
            fired.extend(task.await.expect("joins").expect("fires"));
        }
        assert_eq!(fired.len(), 1, "one tick, one run: {fired:?}");
        let schedules = store.schedules().await.expect("schedules");
        assert_eq!(schedules[0].next_fire_at, 120_000);
        let worker = QueueWorker::new(world.runner("worker").await).expect("a worker");
        let output = worker.run_one().await.expect("works").expect("the scheduled run");
        assert_eq!(output.run_id.as_str(), fired[0].run_id);
        assert_eq!(output.text, "tick done");
    });
    let _ = world.path();
}

/// A recorded run writes each message of its conversation once: every checkpoint only
/// the messages its boundary added, and the run loads back with the whole conversation.
#[test]
fn each_boundary_writes_only_the_messages_it_added() {
    let world = World::new([
        MockTurn::tool_call("c1", "peek", json!({"line": 1})),
        MockTurn::tool_call("c2", "peek", json!({"line": 2})),
        MockTurn::tool_call("c3", "peek", json!({"line": 3})),
        MockTurn::text("done"),
    ]);
    let log = Log::default();
    let loaded =
        process().block_on(async {
            let peek = typed_tool("peek", "Reads.", Effect::ReadOnly, |_ctx, _args: Line| async move {
                Ok(ToolOutput::text("seen"))
            })
            .into_arc();
            let catalog = ToolCatalog::with_tools(vec![peek]).expect("a catalog");
            let model = FixedModel::new(Arc::new(world.model.clone()), "scripted");
            let store = RecordingStore::wrap(world.store().await, log.clone());
            let runner =
                Runner::new(Arc::new(model), Arc::new(catalog), Arc::new(Workspace::new(world.path()).expect("ws")))
                    .with_store(Durability::new(Arc::clone(&store)));
            let output =
                runner.start(spec(ApprovalPolicy::auto()), RunInput::new("look")).output().await.expect("ends");
            assert!(output.is_completed(), "{:?}", output.outcome);
            store.load_run(output.run_id.as_str()).await.expect("loads").expect("stored")
        });
    let messages = loaded.state["messages"].as_array().expect("the conversation").len();
    // The task, three calls with their results, the answer.
    assert_eq!(messages, 8, "{}", loaded.state["messages"]);
    let writes = log.message_writes();
    assert_eq!(writes.first().map(|w| w.0), Some(0), "{writes:?}");
    let mut next = 0;
    for (from, count) in &writes {
        assert_eq!(*from, next, "each write starts where the last one ended: {writes:?}");
        next += count;
    }
    assert_eq!(next, messages, "every message written once: {writes:?}");
    assert!(writes.iter().all(|(_, count)| *count <= 2), "{writes:?}");
}
