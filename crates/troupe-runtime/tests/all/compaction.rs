//! Compaction through the runner: a long tool loop on a tiny context window compacts
//! inside the loop, and no request a model receives ever separates a tool call from its
//! result; the summary strategy makes its auxiliary call; the attempt bound holds; the
//! provider's reported usage corrects the estimate.

use crate::common;

use common::{Harness, Wire, check_events};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use troupe_core::{AgentEventKind, Usage};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, ModelInfo, Pricing, ResolvedModel};
use troupe_runtime::{
    AgentSpec, CompactionPolicy, CompactionReport, Engine, FixedModel, ModelResolver, RunOutput, SUMMARY_INSTRUCTION,
    SUMMARY_PREFIX, Strategy,
};
use troupe_testkit::{MockLlmServer, MockTurn, ScriptedModel};
use troupe_tools::{Effect, Tool, ToolOutput, typed_tool};

const TASK: &str = "Probe until you have enough readings.";

#[derive(Deserialize, JsonSchema)]
struct ProbeArgs {
    /// Which reading.
    i: u32,
}

/// A tool whose every reading is `chars` characters long.
fn probe(chars: usize) -> Arc<dyn Tool> {
    typed_tool("probe", "Takes a reading.", Effect::ReadOnly, move |_ctx, args: ProbeArgs| async move {
        Ok(ToolOutput::text(format!("reading {}: {}", args.i, "x".repeat(chars))))
    })
    .into_arc()
}

/// A 2,000-token model: compaction triggers above 1,600 estimated tokens and aims at 1,200.
fn tiny(model: FixedModel, id: &str) -> FixedModel {
    model.with_info(ModelInfo::new(id, 2_000, 500, Pricing::flat(1.0, 2.0)).expect("valid id"))
}

/// `calls` probe calls reporting `usage`, then an answer.
fn tool_loop(h: &Harness, calls: u32, usage: Usage) -> Vec<MockTurn> {
    let mut turns: Vec<MockTurn> =
        (0..calls).map(|i| h.call(&format!("call_{i}"), "probe", json!({"i": i})).with_usage(usage)).collect();
    turns.push(MockTurn::text("enough readings").with_usage(usage));
    turns
}

/// The reports of the run's `compacted` events.
fn reports(output: &RunOutput) -> Vec<CompactionReport> {
    output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Custom { name, value } if name == "compacted" => {
                Some(serde_json::from_value(value["report"].clone()).expect("a report"))
            }
            _ => None,
        })
        .collect()
}

fn blocks<'a>(message: &'a Value, kind: &'a str, key: &'a str) -> BTreeSet<String> {
    message["content"]
        .as_array()
        .map(|blocks| {
            blocks.iter().filter(|b| b["type"] == kind).filter_map(|b| b[key].as_str().map(str::to_owned)).collect()
        })
        .unwrap_or_default()
}

/// Every way a request body (troupe's own shape, or Anthropic's, which is the same
/// here) separates a tool call from its result.
fn pairing_errors(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut errors = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let uses = blocks(message, "tool_use", "id");
        let answered = messages.get(i + 1).map(|m| blocks(m, "tool_result", "tool_use_id")).unwrap_or_default();
        errors.extend(uses.difference(&answered).map(|id| format!("message {i}: {id} unanswered")));
        let asked = i.checked_sub(1).map(|p| blocks(&messages[p], "tool_use", "id")).unwrap_or_default();
        let results = blocks(message, "tool_result", "tool_use_id");
        errors.extend(results.difference(&asked).map(|id| format!("message {i}: result {id} without its call")));
    }
    errors
}

/// The text of the first block of the first message.
fn first_text(body: &Value) -> String {
    let content = &body["messages"][0]["content"];
    content.as_str().or_else(|| content[0]["text"].as_str()).unwrap_or_default().to_owned()
}

fn is_summary_request(body: &Value) -> bool {
    body.to_string().contains(&SUMMARY_INSTRUCTION[..60])
}

/// Checks every request a model received: calls and results paired, the task first.
fn check_requests(bodies: &[Value]) {
    assert!(!bodies.is_empty());
    for (n, body) in bodies.iter().enumerate() {
        assert_eq!(pairing_errors(body), Vec::<String>::new(), "request {n}: {body}");
        if !is_summary_request(body) {
            assert_eq!(first_text(body), TASK, "request {n} starts with the task");
        }
    }
}

fn bodies(h: &Harness) -> Vec<Value> {
    h.bodies().iter().map(|b| serde_json::from_str(b).expect("JSON body")).collect()
}

/// Pairing in the wire formats other than Anthropic's (which `check_requests` reads):
/// every call is answered before the conversation goes on, and no answer lacks its call.
fn wire_pairing_errors(wire: Wire, body: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let items = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    match wire {
        Wire::OpenAiChat => {
            for message in items("messages") {
                if message["role"] == "tool" {
                    let id = message["tool_call_id"].as_str().unwrap_or_default().to_owned();
                    if !open.contains(&id) {
                        errors.push(format!("result {id} without its call"));
                    }
                    open.retain(|o| o != &id);
                    continue;
                }
                if !open.is_empty() {
                    errors.push(format!("calls {open:?} unanswered before the next message"));
                    open.clear();
                }
                for call in message["tool_calls"].as_array().cloned().unwrap_or_default() {
                    open.push(call["id"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        Wire::OpenAiResponses => {
            for item in items("input") {
                let id = item["call_id"].as_str().unwrap_or_default().to_owned();
                match item["type"].as_str() {
                    Some("function_call") => open.push(id),
                    Some("function_call_output") => {
                        if !open.contains(&id) {
                            errors.push(format!("output {id} without its call"));
                        }
                        open.retain(|o| o != &id);
                    }
                    _ if !open.is_empty() => {
                        errors.push(format!("calls {open:?} unanswered before the next item"));
                        open.clear();
                    }
                    _ => {}
                }
            }
        }
        Wire::Gemini => {
            // Gemini pairs calls and responses by position: a model turn's functionCall
            // parts are answered by the next turn's functionResponse parts.
            let mut calls = 0;
            for content in items("contents") {
                let parts = content["parts"].as_array().cloned().unwrap_or_default();
                let responses = parts.iter().filter(|p| p.get("functionResponse").is_some()).count();
                if responses != calls {
                    errors.push(format!("{calls} calls answered by {responses} responses"));
                }
                calls = parts.iter().filter(|p| p.get("functionCall").is_some()).count();
            }
        }
        Wire::Scripted | Wire::Anthropic => return pairing_errors(body),
    }
    if !open.is_empty() {
        errors.push(format!("calls {open:?} never answered"));
    }
    errors
}

/// How many messages (items, contents) a request carries, in any wire format.
fn conversation_len(body: &Value) -> usize {
    ["messages", "input", "contents"].iter().find_map(|k| body[*k].as_array()).map_or(0, Vec::len)
}

/// The probing agent of `engine`, its conversation kept to the two latest turns.
fn prober(engine: &Engine, h: &Harness) -> troupe_runtime::Agent {
    engine
        .agent("prober")
        .workspace(h.dir.path())
        .tool(probe(1_200))
        .compaction(CompactionPolicy::new().strategies([Strategy::keep_recent(2)]))
        .build()
        .expect("agent builds")
}

async fn a_long_tool_loop_compacts_inside_the_loop(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push(tool_loop(&h, 12, Usage::default()));
    let engine = Engine::builder().resolver(Arc::new(tiny(h.model(), "mock/mock-model"))).build();
    let output = prober(&engine, &h).run(TASK).await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(output.tool_calls, 12);
    check_events(&output.events);

    let reports = reports(&output);
    assert!(reports.len() >= 2, "a single user turn, compacted again and again in its tool loop: {reports:?}");
    for report in &reports {
        assert_eq!(report.strategy, "keep_recent");
        assert!(report.before_tokens > 1_600, "only above the trigger: {report:?}");
        assert!(report.after_tokens <= 1_200 && report.after_tokens < report.before_tokens, "{report:?}");
        assert_eq!((report.context_window, report.target_tokens), (2_000, 1_200));
        assert!(report.removed_messages >= 2 && report.removed_messages % 2 == 0, "whole units: {report:?}");
    }

    let bodies = bodies(&h);
    assert_eq!(bodies.len(), 13, "one request per model call");
    match wire {
        Wire::Scripted | Wire::Anthropic => check_requests(&bodies),
        _ => {
            for (n, body) in bodies.iter().enumerate() {
                assert_eq!(wire_pairing_errors(wire, body), Vec::<String>::new(), "request {n}: {body}");
                assert!(body.to_string().contains(TASK), "request {n} keeps the task: {body}");
            }
        }
    }
    let sizes: Vec<usize> = bodies.iter().map(conversation_len).collect();
    assert!(sizes.iter().all(|n| *n <= 1 + 2 * 4), "the conversation stays small: {sizes:?}");
    let shrunk = sizes.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(shrunk, reports.len(), "every compaction shows in the next request: {sizes:?}");
    let last = bodies.last().expect("requests");
    assert!(last.to_string().contains("earlier turns were removed to fit the context window"), "{last}");
}

#[tokio::test]
async fn a_long_tool_loop_compacts_inside_the_loop_scripted() {
    a_long_tool_loop_compacts_inside_the_loop(Wire::Scripted).await;
}

#[tokio::test]
async fn a_long_tool_loop_compacts_inside_the_loop_anthropic() {
    a_long_tool_loop_compacts_inside_the_loop(Wire::Anthropic).await;
}

#[tokio::test]
async fn a_long_tool_loop_compacts_inside_the_loop_openai_chat() {
    a_long_tool_loop_compacts_inside_the_loop(Wire::OpenAiChat).await;
}

#[tokio::test]
async fn a_long_tool_loop_compacts_inside_the_loop_openai_responses() {
    a_long_tool_loop_compacts_inside_the_loop(Wire::OpenAiResponses).await;
}

#[tokio::test]
async fn a_long_tool_loop_compacts_inside_the_loop_gemini() {
    a_long_tool_loop_compacts_inside_the_loop(Wire::Gemini).await;
}

#[tokio::test]
async fn the_summary_call_is_made_and_the_run_completes_over_http() {
    let server = MockLlmServer::start().await.expect("server starts");
    let config = HttpConfig::new("anthropic", server.url(), Some(ApiKey::new("test-key")));
    let provider = Arc::new(HttpProvider::new(config, AnthropicWire::default()).expect("client"));
    let dir = tempfile::tempdir().expect("tempdir");
    let main_calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&main_calls);
    let summary_usage = Usage { input_tokens: 0, output_tokens: 40, ..Usage::default() };
    server.respond_with(move |request| {
        if is_summary_request(&request.body) {
            return MockTurn::text("Readings 0 to n were taken; all were long runs of x.").with_usage(summary_usage);
        }
        let i = counter.fetch_add(1, Ordering::SeqCst);
        let turn = if i < 10 {
            MockTurn::tool_call(format!("call_{i}"), "probe", json!({"i": i}))
        } else {
            MockTurn::text("enough readings")
        };
        turn.with_usage(Usage::default())
    });
    let engine = Engine::builder().resolver(Arc::new(tiny(FixedModel::new(provider, "m"), "anthropic/m"))).build();
    let policy = CompactionPolicy::new().strategies([Strategy::summarize(200)]);
    let agent =
        engine.agent("prober").workspace(dir.path()).tool(probe(1_200)).compaction(policy).build().expect("builds");
    let output = agent.run(TASK).await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(output.tool_calls, 10);
    check_events(&output.events);

    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    check_requests(&bodies);
    assert_eq!(main_calls.load(Ordering::SeqCst), 11);
    let summaries: Vec<&Value> = bodies.iter().filter(|b| is_summary_request(b)).collect();
    let reports = reports(&output);
    assert!(!summaries.is_empty(), "the auxiliary call was made");
    assert_eq!(summaries.len(), reports.iter().map(|r| r.auxiliary.len()).sum::<usize>(), "each call is reported");
    for summary in &summaries {
        assert_eq!(summary["max_tokens"], json!(200));
        assert!(summary.get("tools").is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)), "no tools: {summary}");
        let text = summary["messages"][0].to_string();
        assert!(text.contains(TASK) && text.contains("called `probe`"), "{text}");
    }
    let carried: Vec<&Value> =
        bodies.iter().filter(|b| !is_summary_request(b) && b.to_string().contains(SUMMARY_PREFIX)).collect();
    assert!(!carried.is_empty(), "later requests carry the summary");
    assert!(
        carried.iter().all(|b| b["messages"][0].to_string().contains(SUMMARY_PREFIX)),
        "the summary rides in the task's message"
    );
    assert!(reports.iter().all(|r| r.strategy == "summarize" && r.after_tokens < r.before_tokens), "{reports:?}");
    // The summaries' tokens count towards the run, as their own usage events.
    let usage_events: Vec<Usage> = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Usage { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(usage_events.len(), 11 + summaries.len());
    assert_eq!(output.usage.output_tokens, 40 * summaries.len() as u64);
}

/// Resolves `cheap/summarizer` to its own scripted model, every other id to the main one.
struct Route {
    main: FixedModel,
    summarizer: FixedModel,
}

impl ModelResolver for Route {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        if model == "cheap/summarizer" { self.summarizer.resolve(model) } else { self.main.resolve(model) }
    }
}

/// Runs the probe loop with a summarizer whose summaries do not get the conversation
/// down to the target in one go; returns the output and the summarizer's request count.
async fn summarize_with_attempts(max_attempts: u32) -> (RunOutput, usize) {
    let h = Harness::new(Wire::Scripted).await;
    h.push(tool_loop(&h, 8, Usage::default()));
    let summarizer = ScriptedModel::new([]);
    for _ in 0..40 {
        summarizer.push(MockTurn::text(format!("readings so far: {}", "y".repeat(800))));
    }
    let route = Route {
        main: tiny(h.model(), "mock/mock-model"),
        summarizer: FixedModel::new(Arc::new(summarizer.clone()), "summarizer").with_pricing(Pricing::flat(0.1, 0.2)),
    };
    let policy = CompactionPolicy::new()
        .strategies([Strategy::Summarize {
            model: Some("cheap/summarizer".into()),
            max_summary_tokens: 300,
            keep_recent: 2,
        }])
        .max_attempts(max_attempts);
    let engine = Engine::builder().resolver(Arc::new(route)).build();
    let agent =
        engine.agent("prober").workspace(h.dir.path()).tool(probe(2_000)).compaction(policy).build().expect("builds");
    let output = agent.run(TASK).await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    check_events(&output.events);
    check_requests(&bodies(&h));
    for request in summarizer.requests() {
        assert_eq!(request.model, "summarizer", "the summary goes to the configured model");
        assert_eq!(request.system.as_deref(), Some(SUMMARY_INSTRUCTION));
    }
    (output, summarizer.requests().len())
}

#[tokio::test]
async fn max_attempts_bounds_the_summary_calls() {
    let (output, calls) = summarize_with_attempts(1).await;
    let compactions = reports(&output);
    assert!(!compactions.is_empty());
    assert!(compactions.iter().all(|r| r.attempts == 1 && r.auxiliary.len() == 1), "{compactions:?}");
    assert_eq!(calls, compactions.len(), "one summary call per compaction");
    assert!(
        compactions.iter().any(|r| r.after_tokens > r.target_tokens),
        "stopped by the bound, above the target: {compactions:?}"
    );
    assert!(compactions.iter().all(|r| r.auxiliary[0].model == "scripted/summarizer"));
    assert!(output.cost_by_model.contains_key("scripted/summarizer"), "the summaries are priced on their model");

    let (output, calls) = summarize_with_attempts(2).await;
    let compactions = reports(&output);
    assert!(compactions.iter().all(|r| r.attempts <= 2), "{compactions:?}");
    assert!(
        compactions.iter().any(|r| r.attempts == 2),
        "a second, harder attempt when the first fell short: {compactions:?}"
    );
    assert_eq!(calls, compactions.iter().map(|r| r.attempts as usize).sum::<usize>(), "every attempt is one call");
}

#[tokio::test]
async fn reported_usage_corrects_the_estimate() {
    // Small readings: by the heuristic alone the conversation never nears the trigger.
    let spec: AgentSpec = serde_json::from_value(json!({
        "name": "prober",
        "compaction": {"strategies": [{"type": "keep_recent", "n": 2}]}
    }))
    .expect("a spec with a compaction policy");
    assert_eq!(spec.compaction.as_ref().map(|p| p.strategies.len()), Some(1));
    assert!(serde_json::from_value::<AgentSpec>(json!({})).expect("parses").compaction.is_none(), "none by default");
    let run = |usage: Usage| {
        let spec = spec.clone();
        async move {
            let h = Harness::new(Wire::Scripted).await;
            h.push(tool_loop(&h, 8, usage));
            let engine = Engine::builder().resolver(Arc::new(tiny(h.model(), "mock/mock-model"))).build();
            let agent = engine.agent("p").spec(spec).workspace(h.dir.path()).tool(probe(300)).build().expect("builds");
            let output = agent.run(TASK).await.expect("the run ends");
            assert!(output.is_completed(), "{:?}", output.outcome);
            check_requests(&bodies(&h));
            reports(&output)
        }
    };
    assert_eq!(run(Usage::default()).await, Vec::new(), "nothing reported, the heuristic alone: no compaction");
    // The provider counts far more tokens than the heuristic: the estimate follows it.
    let compacted = run(Usage { input_tokens: 1_000, cache_read_tokens: 900, ..Usage::default() }).await;
    assert!(!compacted.is_empty(), "the reported size triggers compaction");
    assert!(compacted.iter().all(|r| r.before_tokens > 1_600));
}

/// A recorded run that compacts its conversation says so in its evidence: one
/// `context_digest` entry per compaction, before the model turn it made room for, with the
/// messages before and after; the chain still verifies.
#[tokio::test]
async fn a_recorded_compaction_is_in_the_evidence() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(tool_loop(&h, 12, Usage::default()));
    let dir = tempfile::tempdir().expect("a directory");
    let store = troupe_store::open(dir.path().join("runs.db").to_str().expect("UTF-8")).await.expect("the store");
    let engine = Engine::builder()
        .resolver(Arc::new(tiny(h.model(), "mock/mock-model")))
        .store(troupe_runtime::Durability::new(Arc::clone(&store)))
        .build();
    let output = prober(&engine, &h).run(TASK).await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    let compactions = reports(&output).len();
    assert!(compactions >= 2, "{compactions}");
    let run = output.run_id.as_str();
    let evidence = store.evidence(run, 0).await.expect("the evidence");
    let digests: Vec<&troupe_store::EvidenceEntry> =
        evidence.iter().filter(|e| e.kind == troupe_store::EvidenceKind::ContextDigest).collect();
    assert_eq!(digests.len(), compactions, "one entry per compaction");
    for digest in &digests {
        let (before, after) = (digest.payload["messages_before"].as_u64(), digest.payload["messages_after"].as_u64());
        assert!(before > after, "{}", digest.payload);
        assert_eq!(digest.payload["report"]["strategy"], "keep_recent");
        let next = evidence.iter().find(|e| e.seq > digest.seq).map(|e| e.kind);
        assert_eq!(next, Some(troupe_store::EvidenceKind::ModelTurn), "before the turn it made room for");
    }
    let record = store.load_run(run).await.expect("loads").expect("recorded");
    troupe_store::verify_log(&evidence, &record.evidence_head, run).expect("the chain verifies");
}
