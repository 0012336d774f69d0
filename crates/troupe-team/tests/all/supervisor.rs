//! The supervisor: lifecycles, suspend and resume, model and instruction changes, spawn
//! limits, children narrowed to their parents, budgets that roll up and stop the team,
//! and delegation loops. Every agent runs on scripted models.

use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use troupe_core::Budget;
use troupe_model::{ModelInfo, Pricing, ResolvedModel};
use troupe_runtime::{AgentSpec, ApprovalDecision, ApprovalMode, ApprovalPolicy, Engine, ModelResolver};
use troupe_team::supervisor::{AgentStatus, EngineFactory, RecursiveSpawnGuard, Supervisor, TeamBudget};
use troupe_team::{Member, MemberTask, TeamError};
use troupe_testkit::{MockTurn, ScriptedModel};

/// Every token costs 0.1 USD: a default scripted turn (10 in, 5 out) costs 1.5.
const PRICE_PER_MILLION: f64 = 100_000.0;
const TURN_USD: f64 = 1.5;

/// Serves each model name from its own scripted model (the default one for the others),
/// sending the name on the wire, priced at [`PRICE_PER_MILLION`].
#[derive(Clone, Default)]
struct Models {
    default: ScriptedModel,
    named: HashMap<String, ScriptedModel>,
}

impl Models {
    fn new(turns: impl IntoIterator<Item = MockTurn>) -> Self {
        Models { default: ScriptedModel::new(turns), named: HashMap::new() }
    }

    fn with(mut self, name: &str, turns: impl IntoIterator<Item = MockTurn>) -> Self {
        self.named.insert(name.to_owned(), ScriptedModel::new(turns));
        self
    }

    fn model(&self, name: &str) -> &ScriptedModel {
        self.named.get(name).unwrap_or(&self.default)
    }
}

impl ModelResolver for Models {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        // A resumed run asks again for the id it was given.
        let name = model.strip_prefix("scripted/").unwrap_or(model);
        let id = format!("scripted/{name}");
        Ok(ResolvedModel {
            id: id.clone(),
            model: name.to_owned(),
            provider: Arc::new(self.model(name).clone()),
            info: Some(ModelInfo {
                id,
                provider: "scripted".into(),
                name: name.into(),
                context_window: 200_000,
                max_output_tokens: 8_192,
                pricing: Pricing::flat(PRICE_PER_MILLION, PRICE_PER_MILLION),
                aliases: Vec::new(),
            }),
        })
    }
}

struct World {
    dir: tempfile::TempDir,
    models: Models,
}

impl World {
    fn new(models: Models) -> Self {
        World { dir: tempfile::tempdir().expect("temp dir"), models }
    }

    fn factory(&self) -> EngineFactory {
        let engine = Engine::builder().resolver(Arc::new(self.models.clone())).build();
        EngineFactory::new(engine).workspace(self.dir.path()).tools(troupe_tools::coding_tools())
    }

    fn supervisor(&self) -> Supervisor {
        Supervisor::new(self.factory())
    }
}

fn spec(name: &str, model: &str) -> AgentSpec {
    AgentSpec::new(name, model)
}

fn task(prompt: &str) -> MemberTask {
    MemberTask::new(format!("t-{prompt}"), "user", prompt)
}

/// Waits until `model` has been asked `n` times, so a stop lands mid-response.
async fn asked(model: &ScriptedModel, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while model.requests().len() < n {
        assert!(Instant::now() < deadline, "the model was never asked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A reply slow enough to be stopped mid-stream (about 8 s if left alone).
fn slow_turn() -> MockTurn {
    MockTurn::text("word ".repeat(40)).with_delta_chars(5).with_event_delay(Duration::from_millis(200))
}

#[tokio::test]
async fn an_agent_goes_from_created_through_running_to_completed_and_then_terminated() {
    let world = World::new(Models::new([MockTurn::text("first"), MockTurn::text("second")]));
    let supervisor = world.supervisor();
    let agent = supervisor.spawn(spec("coder", "m")).expect("spawns");
    assert_eq!(agent.status(), AgentStatus::Created);
    agent.start(task("one")).expect("starts");
    assert_eq!(agent.status(), AgentStatus::Running);
    assert!(agent.start(task("two")).is_err(), "one task at a time");
    assert_eq!(agent.wait().await, AgentStatus::Completed);
    let result = agent.result().expect("a result");
    assert!(result.success);
    assert_eq!((result.content.as_str(), result.task_id.as_str()), ("first", "t-one"));
    let second = agent.run(task("two")).await.expect("runs again");
    assert_eq!(second.content, "second");
    assert_eq!(agent.runs(), 2);
    agent.terminate();
    assert_eq!(agent.status(), AgentStatus::Terminated);
    assert!(matches!(agent.start(task("three")), Err(TeamError::Invalid(_))));
    assert!(supervisor.agent("coder").is_none(), "a terminated agent leaves the roster");
    supervisor.spawn(spec("coder", "m")).expect("its name is free again");
}

#[tokio::test]
async fn terminating_a_running_agent_stops_its_run() {
    let world = World::new(Models::new([slow_turn()]));
    let supervisor = world.supervisor();
    let agent = supervisor.spawn(spec("coder", "m")).expect("spawns");
    agent.start(task("slow")).expect("starts");
    asked(&world.models.default, 1).await;
    let stopped = Instant::now();
    agent.terminate();
    assert_eq!(agent.status(), AgentStatus::Terminated);
    assert_eq!(agent.wait().await, AgentStatus::Terminated);
    assert!(stopped.elapsed() < Duration::from_secs(3), "the run stopped at once");
    let result = agent.result().expect("a result");
    assert!(!result.success);
    assert!(result.error.expect("why").contains("cancelled"));
}

#[tokio::test]
async fn a_model_switch_and_new_instructions_apply_to_the_next_run() {
    let world = World::new(Models::new([MockTurn::text("one"), MockTurn::text("two")]));
    let supervisor = world.supervisor();
    let agent = supervisor.spawn(spec("coder", "m-one").instructions("Be brief.")).expect("spawns");
    agent.run(task("a")).await.expect("runs");
    agent.switch_model("m-two").expect("switches");
    agent.set_instructions("Be thorough.").expect("changes");
    assert_eq!(agent.spec().model, "m-two");
    agent.run(task("b")).await.expect("runs");
    let requests = world.models.default.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!((requests[0].model.as_str(), requests[0].system.as_deref()), ("m-one", Some("Be brief.")));
    assert_eq!((requests[1].model.as_str(), requests[1].system.as_deref()), ("m-two", Some("Be thorough.")));
}

/// Suspending waits for the run's next safe boundary and cancels nothing: the model's
/// response in flight (a tool call) is kept, not asked again, and the resumed run goes on
/// from there — on the model switched to meanwhile.
#[tokio::test]
async fn a_suspended_run_keeps_its_response_and_resumes_on_the_new_model() {
    let slow_call = MockTurn::tool_call("call_l", "fs.list", serde_json::json!({"path": "."}))
        .with_delta_chars(2)
        .with_event_delay(Duration::from_millis(100));
    let world = World::new(Models::new([slow_call, MockTurn::text("done")]));
    let supervisor = world.supervisor();
    let agent = supervisor.spawn(spec("coder", "m-one")).expect("spawns");
    assert!(agent.suspend().await.is_err(), "nothing to suspend yet");
    agent.start(task("work")).expect("starts");
    asked(&world.models.default, 1).await;
    assert_eq!(agent.suspend().await.expect("suspends"), AgentStatus::Suspended);
    assert_eq!(agent.status(), AgentStatus::Suspended);
    assert_eq!(world.models.default.requests().len(), 1, "suspended before its next model call");
    assert!(agent.start(task("other")).is_err(), "a suspended agent resumes or is terminated");
    agent.switch_model("m-two").expect("switches while suspended");
    agent.resume().expect("resumes");
    assert_eq!(agent.wait().await, AgentStatus::Completed);
    let result = agent.result().expect("a result");
    assert_eq!(result.content, "done");
    assert_eq!(result.task_id, "t-work", "the same task goes on");
    let requests = world.models.default.requests();
    assert_eq!(requests.len(), 2, "the response in flight was kept, not asked again");
    assert_eq!(requests[1].model, "m-two");
    let last = serde_json::to_string(&requests[1].messages).expect("messages");
    assert!(last.contains("call_l"), "the kept call ran and its result went to the model: {last}");
    assert_eq!(agent.runs(), 2);
}

#[tokio::test]
async fn a_call_needing_approval_suspends_the_agent_until_decided() {
    let call = MockTurn::tool_call("c1", "fs.write", json!({"path": "out.txt", "content": "hi"}));
    let world = World::new(Models::new([call, MockTurn::text("wrote it")]));
    let supervisor = world.supervisor();
    let agent = supervisor.spawn(spec("coder", "m")).expect("spawns");
    agent.start(task("write")).expect("starts");
    assert_eq!(agent.wait().await, AgentStatus::Suspended);
    let pending = agent.pending_approvals();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "fs.write");
    agent.decide(pending[0].call_id.clone(), ApprovalDecision::Approve).expect("decides");
    agent.resume().expect("resumes");
    assert_eq!(agent.wait().await, AgentStatus::Completed);
    assert_eq!(agent.result().expect("a result").content, "wrote it");
    assert_eq!(std::fs::read_to_string(world.dir.path().join("out.txt")).expect("written"), "hi");
}

#[tokio::test]
async fn spawning_is_bounded_in_depth_and_children() {
    let world = World::new(Models::default());
    let supervisor = Supervisor::builder(world.factory()).guard(RecursiveSpawnGuard::new(1, 2)).build();
    let lead = supervisor.spawn(spec("lead", "m")).expect("spawns");
    assert!(matches!(supervisor.spawn(spec("lead", "m")), Err(TeamError::Invalid(_))), "names are unique");
    let a = supervisor.spawn_child(&lead, spec("a", "m")).expect("child 1");
    let b = supervisor.spawn_child(&lead, spec("b", "m")).expect("child 2");
    assert_eq!((a.depth(), a.parent()), (1, Some("lead")));
    let Err(TeamError::SpawnRefused(why)) = supervisor.spawn_child(&lead, spec("c", "m")) else {
        panic!("a third child is one too many")
    };
    assert!(why.contains("2 children"), "{why}");
    let Err(TeamError::SpawnRefused(why)) = supervisor.spawn_child(&a, spec("grandchild", "m")) else {
        panic!("depth 2 is past the limit")
    };
    assert!(why.contains("depth 2"), "{why}");
    b.terminate();
    supervisor.spawn_child(&lead, spec("c", "m")).expect("a terminated child frees its place");
    lead.terminate();
    assert_eq!(a.status(), AgentStatus::Terminated, "terminating a parent terminates its children");
}

#[tokio::test]
async fn a_child_gets_no_more_tools_budget_or_permissions_than_its_parent() {
    let world = World::new(Models::default());
    let supervisor = world.supervisor();
    let mut parent_spec = spec("lead", "m");
    parent_spec.tools = Some(vec!["fs.read".into(), "grep".into()]);
    parent_spec.limits.max_usd = Some(1.0);
    parent_spec.limits.max_iterations = 5;
    parent_spec.approval = ApprovalPolicy::always();
    let lead = supervisor.spawn(parent_spec).expect("spawns");

    let mut greedy = spec("greedy", "m");
    greedy.tools = Some(vec!["fs.read".into(), "shell".into()]);
    let Err(TeamError::SpawnRefused(why)) = supervisor.spawn_child(&lead, greedy) else {
        panic!("the parent has no shell")
    };
    assert!(why.contains("`shell`"), "{why}");

    let mut modest = spec("modest", "m");
    modest.tools = Some(vec!["grep".into()]);
    modest.limits.max_usd = Some(10.0);
    modest.approval = ApprovalPolicy::auto();
    let modest = supervisor.spawn_child(&lead, modest).expect("a subset");
    let narrowed = modest.spec();
    assert_eq!(narrowed.tools, Some(vec!["grep".to_owned()]));
    assert_eq!(narrowed.limits.max_usd, Some(1.0), "clamped to the parent's budget");
    assert_eq!(narrowed.limits.max_iterations, 5);
    assert_eq!(narrowed.approval.mode, ApprovalMode::Always, "never more permissive");

    let heir = supervisor.spawn_child(&lead, spec("heir", "m")).expect("inherits");
    assert_eq!(heir.spec().tools, Some(vec!["fs.read".to_owned(), "grep".to_owned()]), "all of the parent's");
}

#[tokio::test]
async fn children_costs_roll_up_into_their_parent() {
    let models = Models::default().with("a", [MockTurn::text("from a")]).with("b", [MockTurn::text("from b")]);
    let world = World::new(models);
    let supervisor = world.supervisor();
    let lead = supervisor.spawn(spec("lead", "m")).expect("spawns");
    let a = supervisor.spawn_child(&lead, spec("a", "a")).expect("child");
    let b = supervisor.spawn_child(&lead, spec("b", "b")).expect("child");
    let (ra, rb) = tokio::join!(a.run(task("a")), b.run(task("b")));
    let (ra, rb) = (ra.expect("runs"), rb.expect("runs"));
    assert!((ra.cost_usd - TURN_USD).abs() < 1e-9 && (rb.cost_usd - TURN_USD).abs() < 1e-9);
    let spent = lead.spent();
    assert!((spent.cost_usd - 2.0 * TURN_USD).abs() < 1e-9, "{spent:?}");
    assert_eq!(spent.usage.total(), 30);
    assert!((a.spent().cost_usd - TURN_USD).abs() < 1e-9, "a child's own ledger");
    assert!((supervisor.spent().cost_usd - 2.0 * TURN_USD).abs() < 1e-9);

    // What the children spent comes out of what the next child may get.
    let mut capped = spec("lead2", "m");
    capped.limits.max_usd = Some(4.0);
    let lead2 = supervisor.spawn(capped).expect("spawns");
    let c = supervisor.spawn_child(&lead2, spec("c", "c")).expect("child");
    world.models.model("c").push(MockTurn::text("from c"));
    c.run(task("c")).await.expect("runs");
    let d = supervisor.spawn_child(&lead2, spec("d", "d")).expect("child");
    assert_eq!(d.spec().limits.max_usd, Some(4.0 - TURN_USD));
}

#[tokio::test]
async fn crossing_the_team_budget_stops_every_agent() {
    let models = Models::default()
        .with("slow", [slow_turn()])
        .with("fast1", [MockTurn::text("one")])
        .with("fast2", [MockTurn::text("two")]);
    let world = World::new(models);
    let supervisor =
        Supervisor::builder(world.factory()).budget(TeamBudget::unlimited().usd(2.0 * TURN_USD - 0.5)).build();
    let slow = supervisor.spawn(spec("slow", "slow")).expect("spawns");
    let fast1 = supervisor.spawn(spec("fast1", "fast1")).expect("spawns");
    let fast2 = supervisor.spawn(spec("fast2", "fast2")).expect("spawns");
    slow.start(task("slow")).expect("starts");
    asked(world.models.model("slow"), 1).await;
    let started = Instant::now();
    fast1.run(task("one")).await.expect("runs");
    supervisor.check_budget().expect("1.5 of 2.5");
    let _ = fast2.run(task("two")).await;
    assert_eq!(slow.wait().await, AgentStatus::Failed);
    assert!(started.elapsed() < Duration::from_secs(4), "the slow run was stopped, not waited for");
    let error = slow.result().expect("a result").error.expect("why");
    assert!(error.contains("usd budget"), "{error}");
    assert!(matches!(supervisor.check_budget(), Err(TeamError::BudgetExceeded { budget }) if budget == Budget::Usd));
    assert!(matches!(fast1.start(task("again")), Err(TeamError::BudgetExceeded { .. })), "the team is stopped");
    assert!(supervisor.spent().cost_usd >= 2.0 * TURN_USD - 1e-9);
}

#[tokio::test]
async fn the_team_wall_time_stops_the_team() {
    let world = World::new(Models::new([slow_turn()]));
    let supervisor = Supervisor::builder(world.factory())
        .budget(TeamBudget::unlimited().wall_time(Duration::from_millis(300)))
        .build();
    let agent = supervisor.spawn(spec("coder", "m")).expect("spawns");
    agent.start(task("slow")).expect("starts");
    assert_eq!(agent.wait().await, AgentStatus::Failed);
    assert!(agent.result().expect("a result").error.expect("why").contains("time budget"));
    assert!(matches!(supervisor.check_budget(), Err(TeamError::BudgetExceeded { budget }) if budget == Budget::Time));
}

#[tokio::test]
async fn a_delegation_bouncing_between_two_agents_is_stopped() {
    let world = World::new(Models::new([MockTurn::text("coded"), MockTurn::text("answered")]));
    let supervisor = Supervisor::builder(world.factory()).max_bounces(1).build();
    let lead = supervisor.spawn(spec("lead", "m")).expect("spawns");
    let coder = supervisor.spawn(spec("coder", "m")).expect("spawns");
    let first = supervisor.delegate("lead", &coder, None, "Write it.").await.expect("delegates");
    assert_eq!(first.content, "coded");
    let back = supervisor.delegate("coder", &lead, Some(&first.task_id), "Which API?").await.expect("bounces once");
    let error = supervisor.delegate("lead", &coder, Some(&back.task_id), "The new one.").await.expect_err("a loop");
    assert!(matches!(error, TeamError::DelegationLoop { bounces: 2, .. }), "{error}");
    assert_eq!(supervisor.delegations().chain(&back.task_id), ["lead", "coder", "lead"]);
    assert!(supervisor.delegations().open().is_empty(), "both ran and were reported");
    assert!(supervisor.delegate("tester", &coder, Some(&back.task_id), "?").await.is_err(), "not the holder");
}

#[tokio::test]
async fn a_handle_is_a_team_member() {
    let world = World::new(Models::new([MockTurn::text("as a member")]));
    let supervisor = world.supervisor();
    let agent = supervisor.spawn(spec("coder", "m").instructions("Writes Rust.\nMore detail.")).expect("spawns");
    let member: &dyn Member = &agent;
    assert_eq!(member.description(), "Writes Rust.");
    let result = member.run(task("go"), None, CancellationToken::new()).await;
    assert!(result.success);
    assert_eq!(result.content, "as a member");
}
