use serde_json::json;
use std::sync::Arc;
use troupe_core::{AgentEventKind, PauseReason};
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_replay::{DivergenceKind, Recording, ReplayError, ReplayOptions, replay};
use troupe_run::{ApprovalDecision, ApprovalMode, ApprovalPolicy};
use troupe_runtime::{AgentSpec, Durability, FixedModel, RunInput, RunOutcome, Runner, Signal};
use troupe_store::{EvidenceChain, EvidenceKind, NewEvidence, RunStatus, Store};
use troupe_testkit::{MockLlmServer, MockTurn};
use troupe_tools::{ToolCatalog, Workspace, coding_tools};

/// A workspace, a SQLite store and the mock model server.
struct World {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    server: MockLlmServer,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir(dir.path().join("ws")).expect("the workspace");
        let store = troupe_store::open(&dir.path().join("runs.db").display().to_string()).await.expect("the store");
        let server = MockLlmServer::start().await.expect("the mock server");
        World { dir, store, server }
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }

    /// A runner of the coding tools on the mock server's OpenAI Chat wire.
    fn runner(&self) -> Runner {
        let config = HttpConfig::new("openai", self.server.openai_url(), Some(ApiKey::new("sk-test")));
        let provider: Arc<dyn LlmProvider> =
            Arc::new(HttpProvider::new(config, OpenAiChatWire::default()).expect("the provider"));
        let catalog = ToolCatalog::with_tools(coding_tools()).expect("the tools");
        let workspace = Workspace::new(self.workspace()).expect("the workspace");
        Runner::new(Arc::new(FixedModel::new(provider, "gpt-4o")), Arc::new(catalog), Arc::new(workspace))
    }

    fn recording_runner(&self) -> Runner {
        self.runner().with_store(Durability::new(Arc::clone(&self.store)))
    }
}

fn coder(instructions: &str) -> AgentSpec {
    let mut spec = AgentSpec::new("coder", "gpt-4o");
    spec.instructions = instructions.to_owned();
    spec.approval = ApprovalPolicy::auto();
    spec
}

/// A 20-step coding run: 19 tool calls (writes and reads), then an answer.
fn twenty_steps() -> Vec<MockTurn> {
    let mut turns = Vec::new();
    for i in 0..19 {
        let turn = if i % 2 == 0 {
            MockTurn::tool_call(
                format!("c{i}"),
                "fs_write",
                json!({"path": format!("src/f{i}.rs"), "content": format!("pub fn f{i}() {{}}\n")}),
            )
        } else {
            MockTurn::tool_call(format!("c{i}"), "fs_read", json!({"path": format!("src/f{}.rs", i - 1)}))
        };
        turns.push(turn);
    }
    turns.push(MockTurn::text("Done: ten functions written and read back."));
    turns
}

async fn record(world: &World, spec: &AgentSpec, turns: Vec<MockTurn>, task: &str) -> String {
    world.server.push_all(turns);
    let output =
        world.recording_runner().start(Arc::new(spec.clone()), RunInput::new(task)).output().await.expect("the run");
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "{:?}", output.outcome);
    output.run_id.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twenty_step_coding_run_replays_identical_with_no_model_call_and_no_tool_run() {
    let world = World::new().await;
    let spec = coder("You write Rust.");
    let run = record(&world, &spec, twenty_steps(), "Write ten functions").await;
    let requests = world.server.requests().len();
    assert_eq!(requests, 20);
    // Were a tool to run again, these files would come back.
    std::fs::remove_dir_all(world.workspace().join("src")).expect("the files go");

    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    assert_eq!(recording.turns.len(), 20);
    let report = replay(&world.runner(), spec, recording, ReplayOptions::default()).await.expect("the replay");
    assert!(report.identical(), "{report}");
    assert_eq!((report.steps, report.tool_calls, report.model_calls), (20, 19, 0), "{report}");
    assert_eq!(world.server.requests().len(), requests, "no model call");
    assert!(!world.workspace().join("src").exists(), "no tool ran");
    assert!(report.to_string().starts_with(&format!("run {run}: identical (20 model step(s)")), "{report}");
    // The store holds the one recorded run, untouched.
    assert_eq!(world.store.list_runs(&Default::default()).await.expect("runs").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_system_prompt_diverges_at_the_first_step_with_a_diff() {
    let world = World::new().await;
    let run = record(&world, &coder("You write Rust.\nBe brief."), twenty_steps(), "Write ten functions").await;
    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    let edited = coder("You write careful Rust.\nBe brief.");
    let report = replay(&world.runner(), edited, recording, ReplayOptions::default()).await.expect("the replay");
    let divergence = report.divergence.clone().expect("a divergence");
    assert_eq!((divergence.step, divergence.kind), (1, DivergenceKind::Request), "{report}");
    assert_eq!(divergence.detail, "system prompt:\n-You write Rust.\n+You write careful Rust.\n Be brief.\n");
    assert_eq!(report.model_calls, 0);
    assert_eq!(world.server.requests().len(), 20, "no model call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_result_that_changed_is_found_at_the_step_that_reads_it() {
    let world = World::new().await;
    std::fs::write(world.workspace().join("notes.txt"), "alpha\n").expect("a file");
    let spec = coder("");
    let turns = vec![
        MockTurn::tool_call("c1", "fs_write", json!({"path": "out.txt", "content": "x"})),
        MockTurn::tool_call("c2", "fs_read", json!({"path": "notes.txt"})),
        MockTurn::text("It says alpha."),
    ];
    let run = record(&world, &spec, turns, "Read the notes").await;
    std::fs::write(world.workspace().join("notes.txt"), "beta\n").expect("the file changes");
    // The write's result is the same when its file is new again ("Created", not "Overwrote").
    std::fs::remove_file(world.workspace().join("out.txt")).expect("the written file goes");

    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    let options = ReplayOptions { live_tools: true, ..ReplayOptions::default() };
    let report = replay(&world.runner(), spec, recording, options).await.expect("the replay");
    let divergence = report.divergence.clone().expect("a divergence");
    // Step 2's request carries the write's result (the same); step 3's the read's (changed).
    assert_eq!((divergence.step, divergence.kind), (3, DivergenceKind::Request), "{report}");
    // The task, the write, its result, the read, and then the read's result.
    assert_eq!(
        divergence.detail,
        "message 5 differs:\n [user]\n-result of c2:      1\talpha\n+result of c2:      1\tbeta\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_answered_as_recorded_and_a_changed_policy_is_a_divergence() {
    let world = World::new().await;
    let mut spec = coder("");
    spec.approval = ApprovalPolicy::new(ApprovalMode::OnSideEffect);
    world.server.push_all([
        MockTurn::tool_call("c1", "fs_write", json!({"path": "a.txt", "content": "a"})),
        MockTurn::tool_call("c2", "fs_write", json!({"path": "b.txt", "content": "b"})),
        MockTurn::text("Wrote a; b was refused."),
    ]);
    let mut handle = world.recording_runner().start(Arc::new(spec.clone()), RunInput::new("Write two files"));
    let mut decided = 0;
    while let Some(event) = handle.events.next_event().await {
        if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, .. } } = event.kind {
            let decision = if decided == 0 {
                ApprovalDecision::Approve
            } else {
                ApprovalDecision::Reject { reason: Some("not b".into()) }
            };
            decided += 1;
            handle.signals.send(Signal::Approval { call_id, decision }).await.expect("sent");
        }
    }
    let output = handle.result.await.expect("the run");
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "{:?}", output.outcome);
    let run = output.run_id.to_string();

    let load = || Recording::load(world.store.as_ref(), &run);
    let same = replay(&world.runner(), spec.clone(), load().await.expect("recording"), ReplayOptions::default())
        .await
        .expect("the replay");
    assert!(same.identical(), "the person's decisions are replayed: {same}");
    assert!(!world.workspace().join("b.txt").exists());

    let mut trusting = spec;
    trusting.approval = ApprovalPolicy::auto();
    let report = replay(&world.runner(), trusting, load().await.expect("recording"), ReplayOptions::default())
        .await
        .expect("replay");
    let divergence = report.divergence.clone().expect("a divergence");
    assert_eq!((divergence.step, divergence.kind), (1, DivergenceKind::ApprovalVerdict), "{report}");
    assert!(divergence.detail.contains("now runs without asking"), "{}", divergence.detail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_a_person_sent_mid_run_is_sent_again_at_its_step() {
    let world = World::new().await;
    let mut spec = coder("");
    spec.approval = ApprovalPolicy::new(ApprovalMode::OnSideEffect);
    world.server.push_all([
        MockTurn::tool_call("c1", "fs_write", json!({"path": "a.txt", "content": "a"})),
        MockTurn::text("Wrote a.txt, and kept it short."),
    ]);
    let mut handle = world.recording_runner().start(Arc::new(spec.clone()), RunInput::new("Write a file"));
    while let Some(event) = handle.events.next_event().await {
        if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, .. } } = event.kind {
            let message = Signal::UserMessage { text: "Keep the answer short.".into() };
            handle.signals.send(message).await.expect("sent");
            handle.signals.send(Signal::Approval { call_id, decision: ApprovalDecision::Approve }).await.expect("sent");
        }
    }
    let output = handle.result.await.expect("the run");
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "{:?}", output.outcome);
    let second = world.server.requests()[1].body.to_string();
    assert!(second.contains("Keep the answer short."), "the message reached the second request: {second}");
    let run = output.run_id.to_string();

    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    assert_eq!(recording.inputs.len(), 1, "{:?}", recording.inputs);
    assert_eq!(recording.inputs[0].step, 2, "the second request first carried it");
    let report = replay(&world.runner(), spec, recording, ReplayOptions::default()).await.expect("the replay");
    assert!(report.identical(), "the message is sent again where it was taken: {report}");
    assert_eq!(report.steps, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_replay_cannot_take_is_a_clear_error() {
    let world = World::new().await;
    let missing = Recording::load(world.store.as_ref(), "run_nope").await.expect_err("unknown");
    assert!(matches!(missing, ReplayError::NotFound(_)), "{missing}");

    // A run recorded by an older troupe: its model turn has no request digest.
    let spec = coder("");
    let input = troupe_runtime::durable::StoredInput::new(&spec, &RunInput::new("old"));
    let run_id = troupe_core::RunId::new("run_old");
    world.store.create_run(input.new_run(&run_id, RunStatus::Completed), 1).await.expect("created");
    let turn = json!({"iteration": 1, "model": "openai/gpt-4o", "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        "stop_reason": "end_turn", "usage": {}, "cost_usd": 0.0});
    let entries =
        EvidenceChain::new("run_old".to_owned()).seal(vec![NewEvidence::new(EvidenceKind::ModelTurn, turn.clone())], 2);
    world.store.append_evidence(&entries, None).await.expect("appended");
    let old = Recording::load(world.store.as_ref(), "run_old").await.expect_err("refused");
    assert!(matches!(old, ReplayError::NoRequestDigests { step: 1, .. }), "{old}");
    assert!(old.to_string().contains("recorded by an older troupe"), "{old}");

    // A run whose conversation was compacted: its second request holds fewer messages.
    let run_id = troupe_core::RunId::new("run_compacted");
    world.store.create_run(input.new_run(&run_id, RunStatus::Completed), 1).await.expect("created");
    let turn = |count: u32| {
        let digest = json!({"whole": "w", "system": "s", "tools": "t", "messages": "m", "message_count": count});
        let mut turn = turn.clone();
        turn["request"] = digest;
        NewEvidence::new(EvidenceKind::ModelTurn, turn)
    };
    let entries = EvidenceChain::new("run_compacted".to_owned()).seal(vec![turn(9), turn(3)], 2);
    world.store.append_evidence(&entries, None).await.expect("appended");
    let compacted = Recording::load(world.store.as_ref(), "run_compacted").await.expect_err("refused");
    assert!(matches!(compacted, ReplayError::Compacted(_)), "{compacted}");
    assert!(compacted.to_string().contains("compacted its conversation"), "{compacted}");

    // A replay never records: a recording runner is refused.
    let run = record(&world, &spec, vec![MockTurn::text("hello")], "hi").await;
    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    let refused =
        replay(&world.recording_runner(), spec, recording, ReplayOptions::default()).await.expect_err("refused");
    assert!(refused.to_string().contains("records nothing"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_model_is_checked_for_the_recorded_tool_calls() {
    let world = World::new().await;
    let spec = coder("");
    let turns = || {
        vec![
            MockTurn::tool_call("c1", "fs_write", json!({"path": "a.txt", "content": "a"})),
            MockTurn::text("Wrote a.txt."),
        ]
    };
    let run = record(&world, &spec, turns(), "Write a").await;
    let live = ReplayOptions { live_model: true, ..ReplayOptions::default() };

    // The same calls, worded otherwise: identical decisions, and a note on the wording.
    world.server.push_all([
        MockTurn::tool_call("other_id", "fs_write", json!({"path": "a.txt", "content": "a"})),
        MockTurn::text("a.txt is written."),
    ]);
    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    let report = replay(&world.runner(), spec.clone(), recording, live).await.expect("the replay");
    assert!(report.identical(), "{report}");
    assert_eq!(report.model_calls, 2);
    assert!(report.notes.iter().any(|n| n.contains("-Wrote a.txt.\n+a.txt is written.")), "{report}");

    // Another call: the first divergence, at its step.
    world.server.push_all([MockTurn::tool_call("c9", "fs_write", json!({"path": "b.txt", "content": "b"}))]);
    let recording = Recording::load(world.store.as_ref(), &run).await.expect("the recording");
    let report = replay(&world.runner(), spec, recording, live).await.expect("the replay");
    let divergence = report.divergence.clone().expect("a divergence");
    assert_eq!((divergence.step, divergence.kind), (1, DivergenceKind::ToolCall), "{report}");
    assert!(divergence.detail.contains("-fs.write {\"content\":\"a\",\"path\":\"a.txt\"}"), "{}", divergence.detail);
    assert!(divergence.detail.contains("+fs.write {\"content\":\"b\",\"path\":\"b.txt\"}"), "{}", divergence.detail);
    assert!(!world.workspace().join("b.txt").exists(), "the recorded results stand in for the tools");
}

/// A run whose conversation was compacted by a summary (a model call of its own, made
/// during the run and not replayed) replays identical: at each step where it compacted,
/// the replay takes the conversation the compaction left, and the calls whose results the
/// compaction dropped are answered from the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_run_replays_identical_with_the_conversation_each_compaction_left() {
    let world = World::new().await;
    let mut spec = coder("You write Rust.");
    let policy = troupe_run::CompactionPolicy::new()
        .context_window(1_500)
        .trigger_ratio(0.5)
        .target_ratio(0.3)
        .strategies([troupe_run::Strategy::summarize(200), troupe_run::Strategy::keep_recent(4)]);
    spec.compaction = Some(policy);
    // The summary calls are answered apart from the run's own turns, whenever they come.
    let turns = std::sync::Mutex::new(twenty_steps().into_iter());
    let summaries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&summaries);
    world.server.respond_with(move |request| {
        if request.body.to_string().contains("You condense the earlier part") {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return MockTurn::text("Functions f0 to f8 were written to src/ and read back.");
        }
        turns.lock().expect("the script").next().unwrap_or_else(|| MockTurn::text("nothing left"))
    });
    let output = world
        .recording_runner()
        .start(Arc::new(spec.clone()), RunInput::new("Write ten functions"))
        .output()
        .await
        .expect("the run");
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "{:?}", output.outcome);
    let run = output.run_id.to_string();
    let summaries = summaries.load(std::sync::atomic::Ordering::SeqCst);
    assert!(summaries > 0, "the run compacted by a summary");
    let requests = world.server.requests().len();
    std::fs::remove_dir_all(world.workspace().join("src")).expect("the files go");

    let recording = Recording::load(world.store.as_ref(), &run).await.expect("a compacted run loads");
    let compactions = recording.compactions.len();
    assert!(compactions > 0 && compactions <= summaries, "{compactions} compaction(s) by {summaries} summary call(s)");
    assert_eq!(recording.turns.len(), 20);
    let first = recording.compactions[0].step;
    let report = replay(&world.runner(), spec, recording.clone(), ReplayOptions::default()).await.expect("the replay");
    assert!(report.identical(), "{report}");
    assert_eq!((report.steps, report.tool_calls, report.model_calls), (20, 19, 0), "{report}");
    assert_eq!(world.server.requests().len(), requests, "no model call, not even a summary");
    assert!(!world.workspace().join("src").exists(), "no tool ran");
    assert!(report.notes.iter().any(|n| n.contains("compacted its conversation before step")), "{report}");

    // Without the recorded compactions, the replay would send the whole conversation on:
    // the first request after a compaction differs.
    let mut uncompacted = recording.clone();
    uncompacted.compactions.clear();
    let report = replay(&world.runner(), coder("You write Rust."), uncompacted, ReplayOptions::default())
        .await
        .expect("the replay");
    let divergence = report.divergence.expect("a divergence");
    assert_eq!((divergence.step, divergence.kind), (first, DivergenceKind::Request));

    // A fork needs the conversation of its step: before the last compaction it is gone.
    let last = recording.compactions.iter().map(|c| c.step).max().expect("a compaction");
    let early = troupe_replay::fork(&recording, last - 1, Default::default()).expect_err("refused");
    assert!(matches!(early, ReplayError::ForkBeforeCompaction { .. }), "{early}");
    assert!(early.to_string().contains(&format!("fork at step {last} or later")), "{early}");
    troupe_replay::fork(&recording, last, Default::default()).expect("a fork from the last compaction");
}
