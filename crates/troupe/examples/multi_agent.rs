//! Many agents on one task, offline: a parallel group of reviewers on the `demo` model,
//! then an orchestrated group whose leader plans, delegates to two workers running at
//! once, and writes one answer from their results.
//!
//! The leader here is a scripted model standing in for a real one (its two replies are
//! a delegation in JSON, then a synthesis); give it `.model("anthropic/claude-sonnet-4-5")`
//! and a key to let a real model plan.
//!
//! ```sh
//! cargo run -p troupe --example multi_agent
//! ```

use std::sync::Arc;
use troupe::model::DemoProvider;
use troupe::prelude::*;
use troupe::runtime::FixedModel;
use troupe::team::{AgentGroup, AgentMember, Member, Strategy};
use troupe_testkit::{MockTurn, ScriptedModel};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# Gadget\n\nA gadget that counts words.\n")?;

    // Parallel: the same task to every member, at most two at a time.
    let demo = Engine::builder().build();
    let reviewer = |name: &str, focus: &str| -> troupe::Result<Arc<dyn Member>> {
        let agent = demo
            .agent(name)
            .model("demo")
            .workspace(workspace.path())
            .readonly_tools()
            .instructions(format!("You review projects for {focus}."))
            .build()?;
        Ok(AgentMember::new(agent, format!("reviews {focus}")).shared())
    };
    let reviewers = AgentGroup::builder("reviewers")
        .member(reviewer("docs", "documentation")?)
        .member(reviewer("tests", "test coverage")?)
        .member(reviewer("style", "code style")?)
        .parallel(2)
        .build()?;
    let output = reviewers.run("Review this project.").await?;
    for member in &output.members {
        println!("{} ({}): {}", member.name, if member.success { "ok" } else { "failed" }, first_line(&member.content));
    }

    // Orchestrated: the leader delegates, the workers run in parallel, the leader
    // synthesises. The workers use the demo model; the leader's plan is scripted.
    let plan = r#"I will split the work.
```json
[{"worker": 0, "task": "Summarise the README."}, {"worker": "tests", "task": "List what would need tests."}]
```"#;
    let leader_model = ScriptedModel::new([
        MockTurn::text(plan),
        MockTurn::text("The gadget counts words; its README is short and it has no tests yet."),
    ]);
    let leader_engine = Engine::builder().resolver(Arc::new(FixedModel::new(Arc::new(leader_model), "leader"))).build();
    let leader =
        AgentMember::new(leader_engine.agent("lead").workspace(workspace.path()).build()?, "plans and decides");
    let workers_engine = Engine::builder()
        .resolver(Arc::new(FixedModel::new(
            Arc::new(DemoProvider::new().with_delay(std::time::Duration::ZERO)),
            "demo",
        )))
        .build();
    let worker = |name: &str, role: &str| -> troupe::Result<Arc<dyn Member>> {
        let agent = workers_engine.agent(name).workspace(workspace.path()).readonly_tools().build()?;
        Ok(AgentMember::new(agent, role).shared())
    };
    let team = AgentGroup::builder("team")
        .member(worker("docs", "reads and summarises documents")?)
        .member(worker("tests", "plans tests")?)
        .strategy(Strategy::orchestrated(leader.shared()))
        .build()?;
    let output = team.run("What state is this project in?").await?;
    println!("\nteam answer: {}", output.output);
    println!(
        "{} calls, {} tokens in, {} out, ${:.4}",
        output.members.len(),
        output.usage.total_input(),
        output.usage.output_tokens,
        output.cost_usd
    );
    Ok(())
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
