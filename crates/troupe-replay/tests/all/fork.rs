//! Forks on both stores: a new run from a recorded run's step, with a change, recorded with
//! its origin; the recorded run and its evidence chain stay as they were.

use serde_json::json;
use std::sync::Arc;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_replay::{ForkEdits, Recording, ReplayError, fork, forks_of, next_fork_run_id};
use troupe_runtime::durable::StoredInput;
use troupe_runtime::{AgentSpec, ApprovalPolicy, Durability, FixedModel, RunInput, RunOutcome, Runner};
use troupe_store::{Store, verify_log};
use troupe_testkit::{MockLlmServer, MockTurn};
use troupe_tools::{ToolCatalog, Workspace, coding_tools};

fn runner(server: &MockLlmServer, workspace: &std::path::Path, store: &Arc<dyn Store>) -> Runner {
    let config = HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("sk-test")));
    let provider: Arc<dyn LlmProvider> =
        Arc::new(HttpProvider::new(config, OpenAiChatWire::default()).expect("provider"));
    let catalog = ToolCatalog::with_tools(coding_tools()).expect("the tools");
    let workspace = Workspace::new(workspace).expect("the workspace");
    Runner::new(Arc::new(FixedModel::new(provider, "gpt-4o")), Arc::new(catalog), Arc::new(workspace))
        .with_store(Durability::new(Arc::clone(store)))
}

async fn forking_leaves_the_original_untouched(store: Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("a workspace");
    let server = MockLlmServer::start().await.expect("the mock server");
    let runner = runner(&server, dir.path(), &store);
    let mut spec = AgentSpec::new("coder", "gpt-4o");
    spec.approval = ApprovalPolicy::auto();
    server.push_all([
        MockTurn::tool_call("c1", "fs_write", json!({"path": "a.txt", "content": "a"})),
        MockTurn::tool_call("c2", "fs_write", json!({"path": "b.txt", "content": "b"})),
        MockTurn::text("Wrote a and b."),
    ]);
    let original = runner.start(Arc::new(spec), RunInput::new("Write a and b")).output().await.expect("the run");
    assert!(matches!(original.outcome, RunOutcome::Completed { .. }), "{:?}", original.outcome);
    let id = original.run_id.to_string();
    let before = store.load_run(&id).await.expect("load").expect("the run");
    let evidence_before = store.evidence(&id, 0).await.expect("evidence");

    let recording = Recording::load(store.as_ref(), &id).await.expect("the recording");
    let too_far = fork(&recording, 4, ForkEdits::default()).expect_err("no step 4");
    assert!(matches!(too_far, ReplayError::NoSuchStep { step: 4, steps: 3, .. }), "{too_far}");
    let edits = ForkEdits { message: Some("Write c.txt instead of b.".into()), ..ForkEdits::default() };
    let forked = fork(&recording, 2, edits).expect("a fork");
    server.push_all([
        MockTurn::tool_call("c3", "fs_write", json!({"path": "c.txt", "content": "c"})),
        MockTurn::text("Wrote a and c."),
    ]);
    let fork_id = next_fork_run_id(store.as_ref(), &id).await.expect("an id");
    assert_eq!(fork_id.as_str(), format!("{id}.fork.1"));
    let input = forked.input.run_id(fork_id);
    let output = runner.start(Arc::new(forked.spec.clone()), input).output().await.expect("the fork runs");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "Wrote a and c.".into() });
    assert_ne!(output.run_id.to_string(), id);
    assert_eq!(std::fs::read_to_string(dir.path().join("c.txt")).ok().as_deref(), Some("c"));

    // The fork's first request is the original's step 2, with the change.
    let requests = server.requests();
    let first = &requests[3].body["messages"];
    let recorded = &requests[1].body["messages"];
    let n = recorded.as_array().expect("messages").len();
    assert_eq!(first.as_array().expect("messages")[..n - 1], recorded.as_array().expect("messages")[..n - 1]);
    assert!(first.to_string().contains("Write c.txt instead of b."), "{first}");

    // Linked: the fork names its origin.
    let record = store.load_run(output.run_id.as_str()).await.expect("load").expect("the fork");
    let input = StoredInput::from_value(record.input).expect("its input");
    let origin = input.forked_from.expect("an origin");
    assert_eq!((origin.run_id.as_str(), origin.step), (id.as_str(), 2));
    // And back: the origin's forks are found by their ids, a fork of the fork not among them.
    assert_eq!(forks_of(store.as_ref(), &id).await.expect("forks"), [(output.run_id.to_string(), 2)]);
    let second = next_fork_run_id(store.as_ref(), &id).await.expect("an id");
    assert_eq!(second.as_str(), format!("{id}.fork.2"));
    let fork_recording = Recording::load(store.as_ref(), output.run_id.as_str()).await.expect("the fork's recording");
    let grandchild = fork(&fork_recording, 1, ForkEdits::default()).expect("a fork of the fork");
    let grandchild_id = next_fork_run_id(store.as_ref(), output.run_id.as_str()).await.expect("an id");
    server.push_all([MockTurn::text("Nothing to do.")]);
    let output2 = runner.start(Arc::new(grandchild.spec), grandchild.input.run_id(grandchild_id)).output().await;
    assert!(output2.expect("the fork's fork runs").is_completed());
    assert_eq!(forks_of(store.as_ref(), &id).await.expect("forks").len(), 1, "the fork's fork is its origin's");
    assert_eq!(forks_of(store.as_ref(), output.run_id.as_str()).await.expect("forks").len(), 1);

    // The original and its evidence are as they were, and verify.
    let after = store.load_run(&id).await.expect("load").expect("the run");
    assert_eq!(
        (after.status, &after.input, &after.state, &after.evidence_head),
        (before.status, &before.input, &before.state, &before.evidence_head)
    );
    let evidence_after = store.evidence(&id, 0).await.expect("evidence");
    assert_eq!(evidence_after, evidence_before);
    verify_log(&evidence_after, &after.evidence_head, &id).expect("the chain verifies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_on_sqlite_leaves_the_original_untouched() {
    let dir = tempfile::tempdir().expect("a dir");
    let store = troupe_store::open(&dir.path().join("runs.db").display().to_string()).await.expect("the store");
    forking_leaves_the_original_untouched(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_on_postgres_leaves_the_original_untouched() {
    let Ok(url) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip("the PostgreSQL fork test", "TROUPE_TEST_DATABASE_URL is not set");
        return;
    };
    let store = troupe_store::open(&url).await.expect("the store");
    forking_leaves_the_original_untouched(store).await;
}
