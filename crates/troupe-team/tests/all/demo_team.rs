//! A team on the offline demo model: a leader with `delegate` hands the task to each
//! teammate, and answers with their reports.

use std::sync::Arc;
use troupe_model::DemoProvider;
use troupe_runtime::{ApprovalPolicy, Engine, FixedModel};
use troupe_team::{AgentMember, DelegateTool, Member};

#[tokio::test]
async fn a_demo_leader_delegates_to_every_teammate_and_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("README.md"), "# Gadget\n\nCounts words.\n").expect("a README");
    let demo = FixedModel::new(Arc::new(DemoProvider::new().with_delay(std::time::Duration::ZERO)), "demo");
    let engine = Engine::builder().resolver(Arc::new(demo)).build();
    let teammate = |name: &str| -> Arc<dyn Member> {
        let agent = engine.agent(name).workspace(dir.path()).readonly_tools().build().expect("a teammate");
        AgentMember::new(agent, format!("the {name}")).shared()
    };
    let delegate =
        Arc::new(DelegateTool::new("lead", vec![teammate("researcher"), teammate("reviewer")]).expect("a tool"));
    let leader = engine
        .agent("lead")
        .workspace(dir.path())
        .tool(Arc::clone(&delegate) as Arc<dyn troupe_tools::Tool>)
        .approval(ApprovalPolicy::default())
        .build()
        .expect("a leader");
    let output = leader.run("Describe this project").await.expect("runs");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert!(output.text.contains("- researcher:") && output.text.contains("- reviewer:"), "{}", output.text);
    let reports = delegate.results();
    assert_eq!(reports.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["researcher", "reviewer"]);
    assert!(reports.iter().all(|r| r.success && r.content.contains("README.md")), "{reports:?}");
}
