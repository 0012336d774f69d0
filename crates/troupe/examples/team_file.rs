//! A team defined as files, run from code: two agent files and a `team.toml` (written
//! here into a temporary directory, as `troupe agent create` and an editor would), loaded,
//! built and run on a task, with every member's events watched and the team's budget
//! kept across all of them. Offline: every agent is on the `demo` model.
//!
//! ```sh
//! cargo run -p troupe --example team_file
//! ```
//!
//! The same team runs from the command line with `troupe team run team.toml "…"`.

use tokio::sync::mpsc;
use troupe::prelude::*;
use troupe::workers::team_run::{TeamFiles, TeamRun};

const TEAM: &str = r#"
[team]
name = "project"
description = "Looks into a repository and reports on it."
strategy = "delegate"
leader = "lead"

[team.budget]
max_usd = 1.0
max_total_tokens = 200000
max_seconds = 600

[[team.members]]
agent = "reviewer"
isolation = "local"

[firewall]
channels = ["reviewer -> lead"]
"#;

const LEAD: &str = r#"
[agent]
id = "lead"
name = "Lead"
description = "Delegates, then answers from the reports."

[provider]
model = "demo"

[[tools]]
name = "fs.read"
"#;

const REVIEWER: &str = r#"
[agent]
id = "reviewer"
name = "Reviewer"
description = "Reviews the repository; changes nothing."

[provider]
model = "demo"

[[tools]]
name = "fs.read"

[[tools]]
name = "fs.list"
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = tempfile::tempdir()?;
    std::fs::write(config.path().join("team.toml"), TEAM)?;
    std::fs::create_dir_all(config.path().join("agents"))?;
    std::fs::write(config.path().join("agents/lead.toml"), LEAD)?;
    std::fs::write(config.path().join("agents/reviewer.toml"), REVIEWER)?;
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# Gadget\n\nA gadget that counts words.\n")?;

    // The team file, and its agents from the directory's agents/.
    let files = TeamFiles::load(&config.path().join("team.toml"), &[config.path().to_owned()])?;
    let team = TeamRun::new(&files, workspace.path()).prepare().await?;
    for note in team.notes() {
        eprintln!("note: {note}");
    }

    // Every member's events, as they happen.
    let (events, mut received) = mpsc::channel::<AgentEvent>(1024);
    let watcher = tokio::spawn(async move {
        while let Some(event) = received.recv().await {
            if let AgentEventKind::ToolCallStart { tool, .. } = &event.kind {
                println!("[{}] {tool}", event.attribution.agent_id);
            }
        }
    });
    let report = team.run("Describe this repository", Some(events), CancellationToken::new()).await;
    watcher.await?;

    println!("\n{}", report.output);
    println!(
        "\n{} member calls, {} tokens, firewall: {} passed",
        report.records.len(),
        report.tokens,
        report.firewall.passed
    );
    match report.failure() {
        None => Ok(()),
        Some(failure) => Err(failure.into()),
    }
}
