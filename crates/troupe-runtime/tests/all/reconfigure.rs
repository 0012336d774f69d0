//! Agents reconfigured while their runs are going: instructions, model, budgets, time
//! limit and rate limit change at the run's next safe boundary, with a `ConfigChanged`
//! event; a model that does not resolve is kept out; a stored run resumes with what it
//! applied. The model is the mock HTTP server, whose recorded request bodies show what each
//! call was made with.

use crate::common;

use common::{Harness, Wire, check_events};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use troupe_core::Budget;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason};
use troupe_model::{LlmProvider, Pricing, ResolvedModel};
use troupe_runtime::{
    Agent, Durability, Engine, FixedModel, Limits, ModelResolver, RateLimit, RateQuota, RateQuotas, RunHandle,
    RunOutcome, SpecUpdate,
};
use troupe_testkit::MockTurn;

const OLD: &str = "You answer in English.";
const NEW: &str = "You answer in French.";

/// Serves `mock/a` and `mock/b` (on the wire `model-a` and `model-b`, resolved as
/// `<provider>/model-a` and `<provider>/model-b`, which resolve too) from one provider; any
/// other id does not resolve.
struct TwoModels {
    provider: Arc<dyn LlmProvider>,
    pricing: Option<Pricing>,
}

impl ModelResolver for TwoModels {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        let provider = self.provider.name();
        let name = match model {
            "mock/a" => "model-a",
            "mock/b" => "model-b",
            id if id == format!("{provider}/model-a") => "model-a",
            id if id == format!("{provider}/model-b") => "model-b",
            other => {
                return Err(troupe_model::Error::UnknownModel {
                    id: other.to_owned(),
                    reason: "only mock/a and mock/b are served".into(),
                });
            }
        };
        let fixed = FixedModel::new(Arc::clone(&self.provider), name);
        match self.pricing {
            Some(pricing) => fixed.with_pricing(pricing).resolve(model),
            None => fixed.resolve(model),
        }
    }
}

fn engine(h: &Harness, pricing: Option<Pricing>) -> Engine {
    Engine::builder().resolver(Arc::new(TwoModels { provider: h.provider(), pricing })).build()
}

/// A writer on `mock/a` with the old instructions; its `fs.write` calls need approval.
fn writer(h: &Harness, engine: &Engine) -> Agent {
    engine
        .agent("writer")
        .workspace(h.dir.path())
        .coding_tools()
        .instructions(OLD)
        .model("mock/a")
        .build()
        .expect("agent builds")
}

/// A reply asking to write `out.txt`, then the answer.
fn turns(h: &Harness) -> Vec<MockTurn> {
    vec![h.call("c1", "fs.write", json!({"path": "out.txt", "content": "bonjour"})), MockTurn::text("Fini.")]
}

/// Reads the run's events until one satisfies `wanted` (10 s at most).
async fn until(handle: &mut RunHandle, what: &str, wanted: impl Fn(&AgentEventKind) -> bool) -> AgentEvent {
    let wait = async {
        let mut seen = Vec::new();
        while let Some(event) = handle.events.next_event().await {
            if wanted(&event.kind) {
                return event;
            }
            seen.push(event.kind);
        }
        panic!("the run ended before {what}: {seen:?}");
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

async fn until_paused(handle: &mut RunHandle) {
    until(handle, "the approval request", |k| matches!(k, AgentEventKind::RunPaused { .. })).await;
}

fn is_config_changed(kind: &AgentEventKind) -> bool {
    matches!(kind, AgentEventKind::ConfigChanged { .. })
}

/// The `ConfigChanged` events of a run: (revision, changed).
fn config_changes(events: &[AgentEvent]) -> Vec<(u64, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::ConfigChanged { revision, changed } => Some((*revision, changed.clone())),
            _ => None,
        })
        .collect()
}

/// The requests the mock server received, as JSON.
fn requests(h: &Harness) -> Vec<Value> {
    h.bodies().iter().map(|b| serde_json::from_str(b).expect("a JSON body")).collect()
}

/// The system instructions of an Anthropic request body: a string, or the text of its
/// one block (which carries the prompt cache's breakpoint).
fn system(body: &Value) -> String {
    match &body["system"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_takes_new_instructions_model_and_budget() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    h.push([MockTurn::text("Salut.")]);
    let engine = engine(&h, None);
    let agent = writer(&h, &engine);
    let mut handle = agent.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;

    let limits = Limits { max_usd: Some(5.0), ..agent.current_spec().limits.clone() };
    let revision = agent
        .reconfigure(SpecUpdate::new().instructions(NEW).model("mock/b").limits(limits))
        .expect("a valid change")
        .expect("a change");
    assert_eq!(revision.revision, 1);
    assert_eq!(revision.changed, ["instructions", "model", "limits.max_usd"]);
    // The run takes it while it waits, before anyone decides.
    let event = until(&mut handle, "the change", is_config_changed).await;
    assert_eq!(
        event.kind,
        AgentEventKind::ConfigChanged {
            revision: 1,
            changed: vec!["instructions".into(), "model".into(), "limits.max_usd".into()]
        }
    );
    handle.signals.approve("c1").await.expect("the run takes signals");
    let output = handle.result.await.expect("the run ends");
    check_events(&output.events);
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(config_changes(&output.events).len(), 1, "announced once");
    assert_eq!(h.read("out.txt").as_deref(), Some("bonjour"));
    assert_eq!(output.state.model_name(), "model-b");
    let applied = output.state.applied_spec().expect("the state carries the change");
    assert_eq!((applied.revision, applied.instructions.as_str()), (1, NEW));
    assert_eq!(applied.limits.max_usd, Some(5.0));

    let bodies = requests(&h);
    assert_eq!(bodies.len(), 2);
    assert_eq!((bodies[0]["model"].as_str(), system(&bodies[0]).as_str()), (Some("model-a"), OLD));
    assert_eq!((bodies[1]["model"].as_str(), system(&bodies[1]).as_str()), (Some("model-b"), NEW));
    assert!(bodies[1].to_string().contains("c1"), "the call and its result went back together");

    // A run started now starts with the change, and has nothing to announce.
    let output = agent.run("Say hello.").await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert!(config_changes(&output.events).is_empty());
    let bodies = requests(&h);
    assert_eq!((bodies[2]["model"].as_str(), system(&bodies[2]).as_str()), (Some("model-b"), NEW));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_while_the_model_streams_waits_for_the_boundary() {
    let h = Harness::new(Wire::Anthropic).await;
    let slow = h
        .call("c1", "fs.read", json!({"path": "notes.txt"}))
        .with_text("Let me read the notes first, then I will answer.")
        .with_delta_chars(4)
        .with_event_delay(Duration::from_millis(20));
    h.write("notes.txt", "milk");
    h.push([slow, MockTurn::text("Du lait.")]);
    let engine = engine(&h, None);
    let agent = engine
        .agent("reader")
        .workspace(h.dir.path())
        .readonly_tools()
        .instructions(OLD)
        .model("mock/a")
        .build()
        .expect("builds");
    let mut handle = agent.start("What do the notes say?");
    until(&mut handle, "the response to stream", |k| matches!(k, AgentEventKind::MessageDelta { .. })).await;
    agent.reconfigure(SpecUpdate::new().instructions(NEW)).expect("valid").expect("a change");
    let output = handle.result.await.expect("the run ends");
    check_events(&output.events);
    assert!(output.is_completed(), "{:?}", output.outcome);

    let position = |wanted: &dyn Fn(&AgentEventKind) -> bool| {
        output.events.iter().position(|e| wanted(&e.kind)).expect("the event is there")
    };
    let changed = position(&is_config_changed);
    let first_usage = position(&|k| matches!(k, AgentEventKind::Usage { .. }));
    let second_step = position(&|k| matches!(k, AgentEventKind::StepStarted { step: 2 }));
    assert!(first_usage < changed && changed < second_step, "the streaming response was finished first");
    assert_eq!(config_changes(&output.events), [(1, vec!["instructions".to_owned()])]);
    let bodies = requests(&h);
    assert_eq!(system(&bodies[0]), OLD);
    assert_eq!(system(&bodies[1]), NEW);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_does_not_resolve_is_refused_or_kept_out() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    let engine = engine(&h, None);
    let agent = writer(&h, &engine);

    // Checked by the agent: refused whole, nothing changes.
    let error = agent.reconfigure(SpecUpdate::new().model("nowhere/x").instructions(NEW)).expect_err("refused");
    assert!(error.to_string().contains("nowhere/x"), "{error}");
    assert_eq!(agent.live_spec().revision(), 0);
    assert_eq!(agent.current_spec().instructions, OLD);

    // Published unchecked: the run keeps its model, says so, and takes the rest.
    let mut handle = agent.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;
    agent.live_spec().update(SpecUpdate::new().model("nowhere/x").instructions(NEW)).expect("published");
    let rejected = until(&mut handle, "the refusal", |k| matches!(k, AgentEventKind::Custom { .. })).await;
    let AgentEventKind::Custom { name, value } = rejected.kind else { unreachable!() };
    assert_eq!(name, "config_rejected");
    assert_eq!((value["field"].as_str(), value["model"].as_str()), (Some("model"), Some("nowhere/x")));
    assert_eq!(value["kept"].as_str(), Some("mock/a"));
    assert_eq!(value["code"].as_str(), Some("unknown_model"), "{value}");
    handle.signals.approve("c1").await.expect("the run takes signals");
    let output = handle.result.await.expect("the run ends");
    check_events(&output.events);
    assert!(output.is_completed(), "the run did not fail: {:?}", output.outcome);
    assert_eq!(config_changes(&output.events), [(1, vec!["instructions".to_owned()])]);
    let bodies = requests(&h);
    assert_eq!((bodies[1]["model"].as_str(), system(&bodies[1]).as_str()), (Some("model-a"), NEW));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_lowered_below_the_spend_stops_the_run_before_its_next_call() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    // 15 tokens at $1 per million: the first call costs $0.000015.
    let engine = engine(&h, Some(Pricing::flat(1.0, 1.0)));
    let agent = writer(&h, &engine);
    let mut handle = agent.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;
    let limits = Limits { max_usd: Some(0.000_001), ..agent.current_spec().limits.clone() };
    agent.reconfigure(SpecUpdate::new().limits(limits)).expect("valid").expect("a change");
    until(&mut handle, "the change", is_config_changed).await;
    // The tool turn under way is finished: the person decides, the call runs.
    handle.signals.approve("c1").await.expect("the run takes signals");
    let output = handle.result.await.expect("the run ends");
    check_events(&output.events);
    assert_eq!(output.outcome, RunOutcome::BudgetExceeded { budget: Budget::Usd });
    assert_eq!(config_changes(&output.events), [(1, vec!["limits.max_usd".to_owned()])]);
    assert_eq!(h.read("out.txt").as_deref(), Some("bonjour"));
    assert_eq!(requests(&h).len(), 1, "no model call after the budget was spent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_limit_already_passed_ends_the_run_at_the_boundary() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    let engine = engine(&h, None);
    let agent = writer(&h, &engine);
    let mut handle = agent.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let limits = Limits { timeout: Some(Duration::from_millis(5)), ..agent.current_spec().limits.clone() };
    agent.reconfigure(SpecUpdate::new().limits(limits)).expect("valid").expect("a change");
    let output = handle.result.await.expect("the run ends without a decision");
    check_events(&output.events);
    assert_eq!(output.outcome, RunOutcome::BudgetExceeded { budget: Budget::Time });
    assert_eq!(config_changes(&output.events), [(1, vec!["limits.timeout".to_owned()])]);
    assert_eq!(h.read("out.txt"), None, "the waiting call never ran");
}

/// A time limit no clock can reach (a file may say any number) is no limit: not a panic,
/// neither when a run starts under it nor when a change brings it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_limit_past_any_clock_is_no_limit() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    h.push(turns(&h));
    let engine = engine(&h, None);
    let agent = writer(&h, &engine);
    let endless = Limits { timeout: Some(Duration::MAX), ..agent.current_spec().limits.clone() };
    agent.reconfigure(SpecUpdate::new().limits(endless.clone())).expect("valid").expect("a change");
    let mut first = agent.start("Write a greeting to out.txt.");
    until_paused(&mut first).await;
    first.signals.approve("c1").await.expect("the run takes signals");
    let output = first.result.await.expect("the run ends");
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "started under it: {:?}", output.outcome);

    let bounded = Limits { timeout: Some(Duration::from_secs(600)), ..endless.clone() };
    agent.reconfigure(SpecUpdate::new().limits(bounded)).expect("valid").expect("a change");
    let mut second = agent.start("Write a greeting to out.txt.");
    until_paused(&mut second).await;
    agent.reconfigure(SpecUpdate::new().limits(endless)).expect("valid").expect("a change");
    until(&mut second, "the change", is_config_changed).await;
    second.signals.approve("c1").await.expect("the run takes signals");
    let output = second.result.await.expect("the run ends");
    check_events(&output.events);
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "changed to it: {:?}", output.outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_rate_quotas_apply_to_the_agents_limiter_and_are_announced() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    let engine = engine(&h, None);
    let limit = Arc::new(RateLimit::new());
    let agent = engine
        .agent("writer")
        .workspace(h.dir.path())
        .coding_tools()
        .model("mock/a")
        .rate_limit(Arc::clone(&limit))
        .build()
        .expect("builds");
    let mut handle = agent.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;
    let quotas = RateQuotas { model: Some(RateQuota::per_minute(600)), tool: Some(RateQuota::per_minute(60)) };
    agent.reconfigure(SpecUpdate::new().rate_quotas(quotas)).expect("valid").expect("a change");
    assert_eq!(limit.quotas(), quotas, "the limiter changed at once");
    let event = until(&mut handle, "the change", is_config_changed).await;
    assert_eq!(event.kind, AgentEventKind::ConfigChanged { revision: 1, changed: vec!["rate_limit".into()] });
    handle.signals.approve("c1").await.expect("the run takes signals");
    let output = handle.result.await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);

    // An agent without a limiter of its own cannot be given quotas; lifting none is no change.
    let plain = writer(&h, &engine);
    let error = plain.reconfigure(SpecUpdate::new().rate_quotas(quotas)).expect_err("refused");
    assert!(error.to_string().contains("without a rate limit"), "{error}");
    assert!(plain.reconfigure(SpecUpdate::new().rate_quotas(RateQuotas::default())).expect("valid").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_run_resumes_with_the_configuration_it_applied() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    let db = h.dir.path().join(".troupe").join("troupe.db");
    let open = || async { troupe_store::open(db.to_str().expect("utf-8")).await.expect("the store opens") };
    let stored_engine = |owner: &str, store| {
        Engine::builder()
            .resolver(Arc::new(TwoModels { provider: h.provider(), pricing: None }))
            .store(Durability::new(store).with_owner(owner))
            .build()
    };

    // One process: the run waits for approval, takes the change, then pauses unanswered.
    let first = writer(&h, &stored_engine("first", open().await));
    let mut handle = first.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;
    first.reconfigure(SpecUpdate::new().instructions(NEW).model("mock/b")).expect("valid").expect("a change");
    until(&mut handle, "the change", is_config_changed).await;
    handle.signals.defer_approvals();
    let output = handle.result.await.expect("the run ends");
    assert!(matches!(output.outcome, RunOutcome::Paused { .. }), "{:?}", output.outcome);
    let run_id = output.run_id.to_string();
    let store = open().await;
    let record = store.load_run(&run_id).await.expect("loads").expect("stored");
    assert_eq!(record.state["applied_spec"]["instructions"], json!(NEW), "the checkpoint holds the change");
    assert_eq!(record.state["model_name"], json!("model-b"));

    // Another process, whose agent was built with the old definition, resumes the run.
    let second = writer(&h, &stored_engine("second", store));
    assert_eq!(second.current_spec().instructions, OLD);
    let mut handle =
        second.resume_leased(crate::common::lease_of(second.runner(), &run_id).await).await.expect("resumes");
    let paused = until(&mut handle, "the approval request", |k| matches!(k, AgentEventKind::RunPaused { .. })).await;
    let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, .. } } = paused.kind else {
        unreachable!()
    };
    handle.signals.approve(call_id).await.expect("the run takes signals");
    let output = handle.result.await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert!(config_changes(&output.events).is_empty(), "nothing new to announce");
    let bodies = requests(&h);
    assert_eq!(bodies.len(), 2);
    assert_eq!((bodies[1]["model"].as_str(), system(&bodies[1]).as_str()), (Some("model-b"), NEW));
    assert_eq!(output.state.applied_spec().map(|a| a.revision), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_resumed_by_its_agent_takes_what_changed_while_it_was_paused() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push(turns(&h));
    let engine = engine(&h, None);
    let agent = writer(&h, &engine);
    let mut handle = agent.start("Write a greeting to out.txt.");
    until_paused(&mut handle).await;
    agent.reconfigure(SpecUpdate::new().instructions(NEW)).expect("valid").expect("a change");
    until(&mut handle, "the change", is_config_changed).await;
    handle.signals.defer_approvals();
    let paused = handle.result.await.expect("the run ends");
    assert!(matches!(paused.outcome, RunOutcome::Paused { .. }), "{:?}", paused.outcome);

    // Another agent of the old definition resumes it as it was changed...
    let other = writer(&h, &engine);
    let mut handle = other.resume(paused.state.clone());
    until_paused(&mut handle).await;
    handle.cancel.cancel();
    let output = handle.result.await.expect("the run ends");
    assert!(config_changes(&output.events).is_empty());
    assert_eq!(output.state.applied_spec().map(|a| a.instructions.as_str()), Some(NEW));

    // ...while its own agent, changed again meanwhile, brings the newer revision.
    agent.reconfigure(SpecUpdate::new().model("mock/b")).expect("valid").expect("a change");
    let mut handle = agent.resume(paused.state);
    let event = until(&mut handle, "the change", is_config_changed).await;
    assert_eq!(event.kind, AgentEventKind::ConfigChanged { revision: 2, changed: vec!["model".into()] });
    until_paused(&mut handle).await;
    handle.signals.approve("c1").await.expect("the run takes signals");
    let output = handle.result.await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    let bodies = requests(&h);
    assert_eq!((bodies[1]["model"].as_str(), system(&bodies[1]).as_str()), (Some("model-b"), NEW));
}
