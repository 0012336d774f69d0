//! The runtime around the loop: many concurrent runs, pausing and resuming, signals at
//! boundaries and their hooks, the time limit, the compaction hook, configuration errors.

use crate::common;

use common::{Harness, Reader, Wire, check_events, drain, kind_name, until_event};
use futures::StreamExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use troupe_core::Budget;
use troupe_core::FailureCode;
use troupe_core::{AgentEventKind, ContentBlock, Message, RunId};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, Providers, RetryPolicy, RetryingProvider};
use troupe_runtime::{
    ApprovalDecision, ApprovalPolicy, ApprovalRule, CompactionContext, Compactor, Engine, FixedModel, RunInput,
    RunOutcome, RuntimeError, Signal, SignalKind,
};
use troupe_testkit::{MockLlmServer, MockTurn};
use troupe_tools::{Effect, ToolOutput, typed_tool};

fn assert_send<T: Send>(_: &T) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_runs_share_a_multi_thread_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "shared notes\n").expect("fixture");
    let engine = Engine::builder().resolver(Arc::new(FixedModel::new(Arc::new(Reader), "reader-1"))).build();
    let agent = engine.agent("reader").workspace(dir.path()).readonly_tools().build().expect("agent builds");
    let probe = agent.run("probe");
    assert_send(&probe);
    drop(probe);
    let tasks: Vec<_> = (0..100)
        .map(|n| {
            let agent = agent.clone();
            tokio::spawn(async move { agent.run(format!("run {n}")).await })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for task in tasks {
        let output = task.await.expect("no panic").expect("the run ends");
        assert!(output.text.contains("shared notes"), "{}", output.text);
        check_events(&output.events);
        ids.insert(output.run_id);
    }
    assert_eq!(ids.len(), 100, "every run has its own id");
    let metrics = agent.metrics();
    assert_eq!((metrics.runs_started, metrics.runs_completed, metrics.tool_calls), (100, 100, 100));
    assert_eq!(metrics.model_calls, 200);
}

#[tokio::test]
async fn a_run_nobody_can_approve_pauses_and_resumes_from_its_state() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([h.call("call_w", "fs.write", json!({"path": "out.txt", "content": "later"})), MockTurn::text("done")]);
    let agent = h.engine().agent("writer").workspace(h.dir.path()).coding_tools().build().expect("agent builds");
    let paused = agent.run("Write it.").await.expect("the run ends");
    let RunOutcome::Paused { pending } = &paused.outcome else { panic!("paused: {:?}", paused.outcome) };
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].arguments, json!({"path": "out.txt", "content": "later"}));
    assert_eq!(h.read("out.txt"), None);
    check_events(&paused.events);
    assert_eq!(agent.metrics().runs_paused, 1);

    // The state survives serialization, as a store would keep it.
    let text = serde_json::to_string(&paused.state).expect("serializes");
    let mut state: troupe_runtime::RunState = serde_json::from_str(&text).expect("parses");
    // The decision is made while the run is stored; the resumed run acts on it at once.
    state.apply_signal(Signal::approval(pending[0].call_id.clone(), ApprovalDecision::Approve)).expect("taken");
    let mut handle = agent.resume(state);
    let mut seen = Vec::new();
    drain(&mut handle.events, &mut seen).await;
    let output = handle.result.await.expect("the run task ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "done".into() });
    assert_eq!(output.run_id, paused.run_id, "the same run goes on");
    assert_eq!(h.read("out.txt").as_deref(), Some("later"));
    assert_eq!(seen.first().map(kind_name).as_deref(), Some("tool_call_result"), "resumed where it stopped");
    let seqs: Vec<u64> = seen.iter().map(|e| e.attribution.seq).collect();
    let first = paused.events.len() as u64;
    assert_eq!(seqs, (first..first + seqs.len() as u64).collect::<Vec<_>>(), "the sequence goes on without a gap");
}

/// Arguments of the gate tool: none.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[tokio::test]
async fn signals_are_taken_at_boundaries_and_run_their_hooks() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([MockTurn::tool_call("call_gate", "gate", json!({})), MockTurn::text("second answer")]);
    // The tool holds the run in its tool turn until the test has sent its signals.
    let gate = Arc::new(Notify::new());
    let opened = Arc::clone(&gate);
    let gate_tool = typed_tool("gate", "Waits for the test.", Effect::ReadOnly, move |_ctx, _args: NoArgs| {
        let opened = Arc::clone(&opened);
        async move {
            opened.notified().await;
            Ok(ToolOutput::text("gate opened"))
        }
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let seen_by_hook = Arc::clone(&calls);
    let agent = h
        .engine()
        .agent("listener")
        .workspace(h.dir.path())
        .tool(gate_tool.into_arc())
        .accept_signals([SignalKind::UserMessage, SignalKind::Steering])
        .on_signal(SignalKind::UserMessage, move |signal: &Signal, state: &troupe_runtime::RunState| {
            seen_by_hook.fetch_add(1, Ordering::SeqCst);
            assert!(matches!(signal, Signal::UserMessage { .. }));
            Some(vec![Message::user(format!("(hook saw {} messages)", state.messages().len()))])
        })
        .build()
        .expect("agent builds");
    let mut handle = agent.start("Open the gate.");
    let mut seen = Vec::new();
    until_event(&mut handle.events, &mut seen, |k| matches!(k, AgentEventKind::ToolCallEnd { .. })).await;
    handle.signals.user_message("also, what about tests?").await.expect("delivered");
    handle.signals.send(Signal::SchedulerWake).await.expect("delivered");
    gate.notify_one();
    drain(&mut handle.events, &mut seen).await;
    let output = handle.result.await.expect("the run task ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "second answer".into() });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Taken during the tool turn: the hook sees the prompt and the call, and what it and
    // the user said follows the call's result, in the same user message.
    let results = &output.messages[2];
    assert!(matches!(&results.content[0], ContentBlock::ToolResult { content, .. } if content == "gate opened"));
    assert_eq!(results.text(), "also, what about tests?(hook saw 2 messages)");
    assert_eq!(h.bodies().len(), 2);
    let refused: Vec<_> = seen
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Custom { name, value } if name == "signal_refused" => Some(value.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "the wake-up is not accepted by this agent");
    assert_eq!(refused[0]["kind"], json!("scheduler_wake"));
    check_events(&seen);
}

#[tokio::test]
async fn the_time_limit_ends_a_run_as_a_time_budget() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([MockTurn::tool_call("c", "shell", json!({"command": "sleep 30"})), MockTurn::text("never")]);
    let agent = h
        .engine()
        .agent("slow")
        .workspace(h.dir.path())
        .coding_tools()
        .approval(ApprovalPolicy::default().rule(ApprovalRule::allow("shell").when("command", "sleep")))
        .timeout(Duration::from_millis(500))
        .build()
        .expect("agent builds");
    let started = Instant::now();
    let output = agent.run("Sleep.").await.expect("the run ends");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(output.outcome, RunOutcome::BudgetExceeded { budget: Budget::Time });
    assert_eq!(h.bodies().len(), 1);
    check_events(&output.events);
}

#[tokio::test]
async fn a_cancel_decision_ends_the_run_cancelled() {
    let h = Harness::new(Wire::Scripted).await;
    h.push([h.call("c", "fs.write", json!({"path": "x", "content": "y"}))]);
    let agent = h.engine().agent("w").workspace(h.dir.path()).coding_tools().build().expect("agent builds");
    let mut handle = agent.start("Write.");
    let mut seen = Vec::new();
    until_event(&mut handle.events, &mut seen, |k| matches!(k, AgentEventKind::RunPaused { .. })).await;
    handle.signals.decide("c", ApprovalDecision::Cancel).await.expect("delivered");
    drain(&mut handle.events, &mut seen).await;
    let output = handle.result.await.expect("the run task ends");
    assert!(matches!(output.outcome, RunOutcome::Cancelled { reason: Some(ref r) } if r.contains("fs.write")));
    check_events(&seen);
}

/// Keeps the first message and the last two; counts its calls.
struct KeepEnds(AtomicUsize);

impl Compactor for KeepEnds {
    fn compact<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<bool, RuntimeError>> {
        Box::pin(async move {
            self.0.fetch_add(1, Ordering::SeqCst);
            assert!(context.model.id.ends_with("mock-model"));
            if messages.len() <= 3 {
                return Ok(false);
            }
            let tail = messages.split_off(messages.len() - 2);
            messages.truncate(1);
            messages.extend(tail);
            Ok(true)
        })
    }
}

#[tokio::test]
async fn the_compactor_runs_before_every_model_call() {
    let h = Harness::new(Wire::Scripted).await;
    h.write("a.txt", "a\n");
    h.push([
        h.call("c1", "fs.read", json!({"path": "a.txt"})),
        h.call("c2", "fs.read", json!({"path": "a.txt"})),
        MockTurn::text("done"),
    ]);
    let compactor = Arc::new(KeepEnds(AtomicUsize::new(0)));
    let engine = Engine::builder().resolver(Arc::new(h.model())).compactor(compactor.clone()).build();
    let agent = engine.agent("r").workspace(h.dir.path()).readonly_tools().build().expect("agent builds");
    let output = agent.run("Read twice.").await.expect("the run ends");
    assert!(output.is_completed());
    assert_eq!(compactor.0.load(Ordering::SeqCst), 3, "once per model call, inside the tool loop");
    let requests: Vec<usize> = h
        .bodies()
        .iter()
        .map(|b| {
            serde_json::from_str::<serde_json::Value>(b).map_or(0, |v| v["messages"].as_array().map_or(0, Vec::len))
        })
        .collect();
    assert_eq!(requests, [1, 3, 3], "the third request was compacted");
    assert!(
        output.events.iter().any(|e| matches!(&e.kind, AgentEventKind::Custom { name, .. } if name == "compacted"))
    );
    check_events(&output.events);
}

#[tokio::test]
async fn a_run_may_override_the_model_and_carries_its_ids() {
    let providers = Providers::with_env(HashMap::<String, String>::new());
    let engine = Engine::builder().providers(providers).build();
    let agent = engine.agent("greeter").model("demo").build().expect("the demo model needs no key");
    let input =
        RunInput::new("hi").run_id(RunId::new("run_fixed")).parent(RunId::new("run_parent")).model("openai/gpt-4o");
    let output = agent.run(input).await.expect("the run ends");
    let RunOutcome::Failed { code, .. } = &output.outcome else { panic!("{:?}", output.outcome) };
    assert_eq!(code, &Some(FailureCode::MissingApiKey), "the per-run model was used");
    assert_eq!(output.run_id.as_str(), "run_fixed");
    assert!(
        output.events.iter().all(|e| e.attribution.parent_run_id.as_ref().map(RunId::as_str) == Some("run_parent"))
    );
    check_events(&output.events);
}

#[tokio::test]
async fn configuration_problems_are_found_at_build() {
    let engine = Engine::builder().providers(Providers::with_env(HashMap::<String, String>::new())).build();
    let unknown = engine.agent("a").model("demo").readonly_tools().only_tools(["fs.write"]).build();
    assert!(matches!(unknown, Err(RuntimeError::Catalog { .. })), "{unknown:?}");
    let workspace = engine.agent("a").model("demo").workspace("/definitely/not/here").build();
    assert!(matches!(workspace, Err(RuntimeError::Workspace(_))), "{workspace:?}");
    let Err(RuntimeError::Model(error)) = engine.agent("a").model("anthropic/claude-sonnet-4-5").build() else {
        panic!("the missing key is found at build")
    };
    assert_eq!(error.code(), "missing_api_key");
    let bad_rule = ApprovalRule { starts_with: Some("x".into()), ..ApprovalRule::allow("shell") };
    let rule = engine.agent("a").model("demo").approval_rule(bad_rule).build();
    assert!(matches!(rule, Err(RuntimeError::InvalidSpec(_))), "{rule:?}");
}

/// An engine whose model is the mock server's Anthropic wire behind `policy`'s retries,
/// 10 ms apart.
fn retrying_engine(server: &MockLlmServer, policy: RetryPolicy) -> Engine {
    let http = HttpProvider::new(
        HttpConfig::new("anthropic", server.url(), Some(ApiKey::new("test-key"))),
        AnthropicWire::default(),
    )
    .expect("client");
    let policy = policy.initial_delay(Duration::from_millis(10)).jitter(0.0);
    let model = FixedModel::new(Arc::new(RetryingProvider::new(http, policy)), "mock-model");
    Engine::builder().resolver(Arc::new(model)).build()
}

/// The attempts the run's `Retrying` events announce, in order.
fn retry_attempts(events: &[troupe_core::AgentEvent]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Retrying { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect()
}

/// A provider that never answers: every retry is shown as it happens, though no stream
/// ever opens, and the run fails (never `Completed`).
#[tokio::test]
async fn retries_of_a_call_that_never_succeeds_are_shown_as_they_happen() {
    let server = MockLlmServer::start().await.expect("mock server starts");
    server.respond_with(|_| MockTurn::status(529, "overloaded"));
    let engine = retrying_engine(&server, RetryPolicy::default().max_retries(2));
    let agent = engine.agent("patient").build().expect("agent builds");
    let output = agent.run("Hello?").await.expect("the run ends");
    assert!(matches!(output.outcome, RunOutcome::Failed { .. }), "{:?}", output.outcome);
    let retries = retry_attempts(&output.events);
    assert_eq!(retries, [1, 2], "each retry is an event");
    assert_eq!(server.requests().len(), 3);
    check_events(&output.events);
}

#[tokio::test]
async fn provider_retries_are_projected_as_events() {
    let server = MockLlmServer::start().await.expect("mock server starts");
    server.push(MockTurn::status(529, "overloaded")).push(MockTurn::text("after a retry"));
    let engine = retrying_engine(&server, RetryPolicy::default());
    let agent = engine.agent("patient").build().expect("agent builds");
    let output = agent.run("Hello?").await.expect("the run ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "after a retry".into() });
    let retries = retry_attempts(&output.events);
    assert_eq!(retries, [1]);
    assert_eq!(server.requests().len(), 2);
    check_events(&output.events);
}

/// Each model call's retries are announced as they happen, in that call: the run's first
/// call retried once before its tool call; its second, after the tool's result, never
/// succeeds, so its retries can only be heard while they happen (no stream opens to carry
/// them at its head).
#[tokio::test]
async fn each_model_calls_retries_are_announced_in_its_own_call() {
    #[derive(Deserialize, JsonSchema)]
    struct Key {
        key: String,
    }
    let server = MockLlmServer::start().await.expect("mock server starts");
    server
        .push(MockTurn::status(529, "overloaded"))
        .push(MockTurn::tool_call("call_1", "lookup", json!({"key": "k"})))
        .push(MockTurn::status(529, "overloaded"))
        .push(MockTurn::status(529, "overloaded"))
        .push(MockTurn::status(529, "overloaded"));
    let engine = retrying_engine(&server, RetryPolicy::default().max_retries(2));
    let lookup = typed_tool("lookup", "Looks a key up.", Effect::ReadOnly, |_ctx, args: Key| async move {
        Ok(ToolOutput::text(format!("{} = 42", args.key)))
    });
    let agent = engine.agent("patient").tool(lookup.into_arc()).build().expect("agent builds");
    let output = agent.run("What is k?").await.expect("the run ends");
    assert!(matches!(output.outcome, RunOutcome::Failed { .. }), "{:?}", output.outcome);
    let marks: Vec<String> = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Retrying { attempt, .. } => Some(format!("retry {attempt}")),
            AgentEventKind::ToolCallResult { .. } => Some("result".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(marks, ["retry 1", "result", "retry 1", "retry 2"]);
    assert_eq!(server.requests().len(), 5);
    check_events(&output.events);
}

/// The path a newcomer writes (`Engine` + `Providers` + a typed tool) must not build a
/// client per run: 50 runs of two model calls each reuse the pool, one connection per
/// run in flight at once, not one per run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_through_providers_share_one_client_per_provider() {
    #[derive(Deserialize, JsonSchema)]
    struct Key {
        key: String,
    }
    let server = MockLlmServer::start().await.expect("server starts");
    server.respond_with(|request| {
        let answered = request.body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if answered { MockTurn::text("k = 42") } else { MockTurn::tool_call("call_1", "lookup", json!({"key": "k"})) }
    });
    let env = HashMap::from([
        ("OPENAI_API_KEY".to_owned(), "sk-test".to_owned()),
        ("OPENAI_BASE_URL".to_owned(), server.openai_url()),
    ]);
    let engine = Engine::builder().providers(Providers::with_env(env)).build();
    let lookup = typed_tool("lookup", "Looks a key up.", Effect::ReadOnly, |_ctx, args: Key| async move {
        Ok(ToolOutput::text(format!("{} = 42", args.key)))
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = engine
        .agent("looker")
        .model("openai/gpt-4o")
        .workspace(dir.path())
        .tool(lookup.into_arc())
        .build()
        .expect("agent builds");
    for _ in 0..50 {
        let output = agent.run("What is k?").await.expect("the run ends");
        assert_eq!((output.text.as_str(), output.tool_calls), ("k = 42", 1), "{:?}", output.outcome);
    }
    assert_eq!(server.requests().len(), 100);
    // A client per run would open 50 connections. One run at a time needs one pooled
    // connection; the pool opens a spare when a request goes out before the previous
    // response's connection is back (the client hands it back from a task of its own,
    // which a loaded machine runs late), so a few may open, never one per run.
    assert!(server.connections() <= 5, "{} connections for 50 runs one at a time", server.connections());

    // 50 more runs, 5 at a time: the pool grows to about the 5 in flight, and no further.
    let outputs: Vec<_> =
        futures::stream::iter(0..50).map(|_| agent.run("What is k?")).buffer_unordered(5).collect().await;
    for output in outputs {
        assert_eq!(output.expect("the run ends").text, "k = 42");
    }
    assert!(server.connections() <= 12, "{} connections for 100 runs, at most 5 at once", server.connections());
}
