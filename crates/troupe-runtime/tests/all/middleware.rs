//! Middlewares in the loop: what the model is sent, what tools run with, what the run
//! keeps and records, over the scripted model and each wire; refusals; rate limits that
//! wait; and durable runs whose evidence and resume see what the middlewares made.

use crate::common;

use common::{Harness, Wire, check_events};
use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use troupe_core::FailureCode;
use troupe_core::{AgentEventKind, ContentBlock, ModelRequest, Role, RunId};
use troupe_runtime::durable::digest;
use troupe_runtime::{
    AgentSpec, ApprovalPolicy, ContentFilter, Durability, FixedModel, Middleware, MiddlewareError, RateLimit, RunInput,
    RunOutcome, RunOutput, Runner, ToolCallContext,
};
use troupe_store::{EvidenceKind, Store};
use troupe_testkit::{MockTurn, ScriptedModel};
use troupe_tools::{Effect, Tool, ToolCatalog, ToolError, ToolOutput, Workspace, typed_tool};

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

const KEY: &str = "sk-live-abcdefghijklmnopqrstuv";

/// `vault.read`: answers with a line holding an API key.
fn vault() -> Arc<dyn Tool> {
    typed_tool("vault.read", "Reads the vault.", Effect::ReadOnly, |_ctx, _: NoArgs| async {
        Ok(ToolOutput::text(format!("the deploy key is {KEY}")))
    })
    .into_arc()
}

/// The results of the tool calls in the user message at `index`.
fn results(output: &RunOutput, index: usize) -> Vec<(String, bool)> {
    output.messages[index]
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

async fn the_model_is_sent_redacted_text_and_tool_results_are_kept_redacted(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([h.call("c1", "vault.read", json!({})), MockTurn::text("Done.")]);
    let engine = troupe_runtime::Engine::builder()
        .resolver(Arc::new(h.model()))
        .middleware(Arc::new(ContentFilter::new()))
        .build();
    let agent = engine.agent("keeper").workspace(h.dir.path()).tool(vault()).build().expect("agent builds");
    let output = agent.run("I am ada@example.com; read the vault").await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    check_events(&output.events);

    let bodies = h.bodies();
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        assert!(!body.contains("ada@example.com"), "the address was sent: {body}");
        assert!(body.contains("[redacted:email]"), "{body}");
    }
    assert!(!bodies[1].contains(KEY) && bodies[1].contains("[redacted:api_key]"), "{}", bodies[1]);
    // The run keeps its conversation as written; the tool result as the model saw it.
    assert!(output.messages[0].text().contains("ada@example.com"));
    assert_eq!(results(&output, 2), [("the deploy key is [redacted:api_key]".to_owned(), false)]);
    let announced: Vec<&str> = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::ToolCallResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(announced, ["the deploy key is [redacted:api_key]"], "the live result is the filtered one");
}

per_wire!(the_model_is_sent_redacted_text_and_tool_results_are_kept_redacted);

/// Sends reads of `secret.txt` to `public.txt`; refuses every write.
struct Guard;

impl Middleware for Guard {
    fn name(&self) -> &str {
        "guard"
    }

    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        arguments: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let verdict = match ctx.tool.as_str() {
            "fs.read" if arguments["path"] == "secret.txt" => {
                arguments["path"] = json!("public.txt");
                Ok(())
            }
            "fs.write" => Err(MiddlewareError::refused(self.name(), "writes are frozen today")),
            _ => Ok(()),
        };
        async move { verdict }.boxed()
    }
}

#[tokio::test]
async fn before_tool_changes_arguments_and_a_refusal_is_a_result_the_model_reads() {
    let h = Harness::new(Wire::Scripted).await;
    h.write("secret.txt", "the combination is 1234\n");
    h.write("public.txt", "nothing to see\n");
    h.push([
        h.call("c1", "fs.read", json!({"path": "secret.txt"})),
        h.call("c2", "fs.write", json!({"path": "out.txt", "content": "x"})),
        MockTurn::text("Done."),
    ]);
    let engine = troupe_runtime::Engine::builder().resolver(Arc::new(h.model())).middleware(Arc::new(Guard)).build();
    let agent = engine
        .agent("reader")
        .workspace(h.dir.path())
        .coding_tools()
        .approval(ApprovalPolicy::auto())
        .build()
        .expect("agent builds");
    let output = agent.run("read the secret, then write").await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    check_events(&output.events);
    let read = results(&output, 2);
    assert!(read[0].0.contains("nothing to see") && !read[0].0.contains("1234"), "{read:?}");
    let write = results(&output, 4);
    assert!(write[0].1, "a refusal is an error result");
    assert!(write[0].0.contains("writes are frozen today (guard)"), "{write:?}");
    assert_eq!(h.read("out.txt"), None, "the refused tool never ran");
    assert_eq!(output.tool_calls, 2);
}

/// Refuses model calls whose request mentions `forbidden`.
struct Gatekeeper;

impl Middleware for Gatekeeper {
    fn name(&self) -> &str {
        "gatekeeper"
    }

    fn before_model<'a>(
        &'a self,
        _ctx: &'a troupe_runtime::ModelCallContext,
        request: &'a mut ModelRequest,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let forbidden = request.messages.iter().any(|m| m.text().contains("forbidden"));
        let verdict = if forbidden { Err(MiddlewareError::refused(self.name(), "off-topic request")) } else { Ok(()) };
        async move { verdict }.boxed()
    }
}

#[tokio::test]
async fn a_refused_model_call_fails_the_run_before_the_provider_is_called() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([MockTurn::text("never sent")]);
    let engine =
        troupe_runtime::Engine::builder().resolver(Arc::new(h.model())).middleware(Arc::new(Gatekeeper)).build();
    let agent = engine.agent("a").workspace(h.dir.path()).build().expect("agent builds");
    let output = agent.run("something forbidden").await.expect("the run ends");
    match &output.outcome {
        RunOutcome::Failed { error, code } => {
            assert_eq!(code, &Some(FailureCode::MiddlewareRefused));
            assert!(error.contains("gatekeeper") && error.contains("off-topic request"), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(h.bodies().is_empty(), "the provider was never called");
    check_events(&output.events);

    let fine = agent.run("something else").await.expect("the run ends");
    assert_eq!(fine.text, "never sent");
}

#[tokio::test]
async fn after_model_changes_what_the_run_keeps_not_what_was_streamed() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([MockTurn::text("Write to bob@example.org for access.")]);
    let filter = ContentFilter::new().on_responses(true);
    let engine = troupe_runtime::Engine::builder().resolver(Arc::new(h.model())).middleware(Arc::new(filter)).build();
    let agent = engine.agent("a").workspace(h.dir.path()).build().expect("agent builds");
    let output = agent.run("who do I ask?").await.expect("the run ends");
    assert_eq!(output.text, "Write to [redacted:email] for access.");
    assert_eq!(output.messages.last().map(|m| m.text()).as_deref(), Some("Write to [redacted:email] for access."));
    let streamed: String = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::MessageDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(streamed.contains("bob@example.org"), "live deltas went out before the response was whole");
    check_events(&output.events);
}

/// `echo`: a read-only tool that needs no I/O.
fn echo() -> Arc<dyn Tool> {
    typed_tool("echo", "Echoes.", Effect::ReadOnly, |_ctx, _: NoArgs| async { Ok(ToolOutput::text("echo")) }).into_arc()
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_spaces_model_calls_out_instead_of_failing() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([h.call("c1", "echo", json!({})), h.call("c2", "echo", json!({})), MockTurn::text("Done.")]);
    let limit = RateLimit::new().model_calls(1, Duration::from_secs(10));
    let engine = troupe_runtime::Engine::builder().resolver(Arc::new(h.model())).middleware(Arc::new(limit)).build();
    let agent = engine.agent("a").workspace(h.dir.path()).tool(echo()).build().expect("agent builds");
    let start = tokio::time::Instant::now();
    let output = agent.run("echo twice").await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(20) && took < Duration::from_secs(21), "three calls, one per 10 s: {took:?}");
}

#[tokio::test]
async fn a_run_waiting_for_its_rate_limit_is_cancelled_at_once() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([MockTurn::text("first"), MockTurn::text("never")]);
    let limit = Arc::new(RateLimit::new().model_calls(1, Duration::from_secs(3600)).global());
    let engine = troupe_runtime::Engine::builder().resolver(Arc::new(h.model())).middleware(limit).build();
    let first = engine.agent("one").workspace(h.dir.path()).build().expect("agent builds");
    let second = engine.agent("two").workspace(h.dir.path()).build().expect("agent builds");
    assert!(first.run("go").await.expect("ends").is_completed());
    let mut handle = second.start("go");
    while let Some(event) = handle.events.next_event().await {
        if matches!(event.kind, AgentEventKind::StepStarted { .. }) {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    handle.signals.cancel("no time to wait").await.expect("cancel sent");
    let output = handle.result.await.expect("ends");
    assert_eq!(output.outcome, RunOutcome::Cancelled { reason: Some("no time to wait".into()) });
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(h.bodies().len(), 1, "the waiting call was never made");
}

#[derive(Deserialize, JsonSchema)]
struct Line {
    line: u32,
}

/// Multiplies each `notes.append` line by 10 and refuses line 20; counts its hooks.
#[derive(Default)]
struct Stamper {
    before: Mutex<HashMap<String, u32>>,
}

impl Middleware for Stamper {
    fn name(&self) -> &str {
        "stamper"
    }

    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        arguments: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        *self.before.lock().expect("counts").entry(ctx.call_id.to_string()).or_default() += 1;
        let line = arguments["line"].as_u64().unwrap_or_default() * 10;
        arguments["line"] = json!(line);
        let verdict =
            if line == 20 { Err(MiddlewareError::refused(self.name(), "line 2 is reserved")) } else { Ok(()) };
        async move { verdict }.boxed()
    }
}

struct Notebook {
    dir: tempfile::TempDir,
    model: ScriptedModel,
    calls: Arc<AtomicU32>,
    stamper: Arc<Stamper>,
}

impl Notebook {
    fn new(turns: impl IntoIterator<Item = MockTurn>) -> Self {
        Notebook {
            dir: tempfile::tempdir().expect("tempdir"),
            model: ScriptedModel::new(turns),
            calls: Arc::default(),
            stamper: Arc::default(),
        }
    }

    async fn store(&self) -> Arc<dyn Store> {
        let db = self.dir.path().join(".troupe").join("troupe.db");
        troupe_store::open(db.to_str().expect("utf-8 path")).await.expect("the store opens")
    }

    /// A runner with a store, the stamper and a content filter, holding leases as `owner`.
    async fn runner(&self, owner: &str) -> Runner {
        let calls = Arc::clone(&self.calls);
        let append = typed_tool("notes.append", "Appends a line.", Effect::WriteState, move |ctx, args: Line| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let path = ctx.workspace.root().join("notes.txt");
                let mut text = std::fs::read_to_string(&path).unwrap_or_default();
                text.push_str(&format!("{}\n", args.line));
                std::fs::write(&path, text).map_err(|e| ToolError::failed(e.to_string()))?;
                Ok(ToolOutput::text(format!("recorded line {} with {KEY}", args.line)))
            }
        })
        .idempotency(troupe_tools::Idempotency::NonIdempotent)
        .into_arc();
        let catalog = ToolCatalog::with_tools([append]).expect("a catalog");
        let model = FixedModel::new(Arc::new(self.model.clone()), "scripted");
        let workspace = Workspace::new(self.dir.path()).expect("workspace");
        let durability =
            Durability::new(self.store().await).with_owner(owner).with_lease_ttl(Duration::from_millis(300));
        Runner::new(Arc::new(model), Arc::new(catalog), Arc::new(workspace))
            .with_store(durability)
            .with_middleware(Arc::clone(&self.stamper) as Arc<dyn Middleware>)
            .with_middleware(Arc::new(ContentFilter::new()))
    }

    fn file(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("notes.txt")).unwrap_or_default()
    }

    fn before_count(&self, call: &str) -> u32 {
        self.stamper.before.lock().expect("counts").get(call).copied().unwrap_or_default()
    }
}

fn scribe() -> Arc<AgentSpec> {
    let mut spec = AgentSpec::new("scribe", "scripted");
    spec.approval = ApprovalPolicy::auto();
    Arc::new(spec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_records_the_arguments_tools_ran_with_and_the_results_the_model_saw() {
    let book = Notebook::new([
        MockTurn::tool_call("c1", "notes.append", json!({"line": 1})),
        MockTurn::tool_call("c2", "notes.append", json!({"line": 2})),
        MockTurn::text("done"),
    ]);
    let runner = book.runner("solo").await;
    let output = runner.start(scribe(), RunInput::new("write")).output().await.expect("ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(book.file(), "10\n", "the tool ran with the changed arguments, and not for the refused call");
    assert_eq!(book.calls.load(Ordering::SeqCst), 1);

    let store = runner.durability().expect("a store").store().clone();
    let log = store.evidence(output.run_id.as_str(), 0).await.expect("evidence");
    troupe_store::verify_chain(&log).expect("an intact chain");
    let of = |kind: EvidenceKind, call: &str| {
        log.iter().filter(|e| e.kind == kind && e.call_id.as_deref() == Some(call)).collect::<Vec<_>>()
    };
    let started = of(EvidenceKind::ActionStarted, "c1");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].payload["arguments_digest"], digest(&json!({"line": 10}).to_string()));
    let completed = of(EvidenceKind::ActionCompleted, "c1");
    assert_eq!(completed[0].payload["content"], "recorded line 10 with [redacted:api_key]");
    assert!(!serde_json::to_string(&log).expect("serializes").contains(KEY), "the key is nowhere on record");
    assert!(of(EvidenceKind::ActionStarted, "c2").is_empty(), "a refused call never started");
    assert!(of(EvidenceKind::ActionCompleted, "c2").is_empty());
    let refused = results(&output, 4);
    assert!(refused[0].1 && refused[0].0.contains("line 2 is reserved"), "{refused:?}");
}

fn process() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
}

/// A crash after a call with side effects completed: the resumed run gives the model the
/// recorded, filtered result; neither the tool nor its hooks run again.
#[test]
fn a_resumed_run_replays_the_filtered_result_without_running_the_call_again() {
    let book = Notebook::new([
        MockTurn::tool_call("c1", "notes.append", json!({"line": 1})),
        // The first process dies while this reply streams.
        MockTurn::text("never finished").with_event_delay(Duration::from_secs(3600)),
        MockTurn::text("done"),
    ]);
    let run_id = RunId::generate();
    let first = process();
    first.block_on(async {
        let runner = book.runner("first").await;
        let store = runner.durability().expect("a store").store().clone();
        std::mem::forget(runner.start(scribe(), RunInput::new("write").run_id(run_id.clone())));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while book.model.requests().len() < 2 {
            assert!(std::time::Instant::now() < deadline, "the second model call never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let log = store.evidence(run_id.as_str(), 0).await.expect("evidence");
        assert!(log.iter().any(|e| e.kind == EvidenceKind::ActionCompleted), "c1 is on record before the crash");
    });
    first.shutdown_background();
    assert_eq!((book.calls.load(Ordering::SeqCst), book.before_count("c1")), (1, 1));

    process().block_on(async {
        tokio::time::sleep(Duration::from_millis(350)).await;
        let runner = book.runner("second").await;
        let output = runner
            .resume_leased(crate::common::lease_of(&runner, run_id.as_str()).await, None)
            .await
            .expect("resumes")
            .output()
            .await
            .expect("ends");
        assert!(output.is_completed(), "{:?}", output.outcome);
        assert_eq!(output.text, "done");
    });
    assert_eq!(book.calls.load(Ordering::SeqCst), 1, "the tool ran once");
    assert_eq!(book.before_count("c1"), 1, "its hooks ran once");
    assert_eq!(book.file(), "10\n");
    let requests = book.model.requests();
    let resumed = serde_json::to_string(&requests[2]).expect("serializes");
    assert!(resumed.contains("recorded line 10 with [redacted:api_key]"), "{resumed}");
    assert!(!resumed.contains(KEY));
    let kept = requests[2].messages.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(kept, 2, "the task and the replayed result");
}
