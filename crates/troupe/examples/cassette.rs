//! A recorded run as a regression test: the cassette `cassettes/summary.json` holds a run of
//! the agent below (every model response and tool result), and `cargo test` replays it
//! against the agent as the code declares it now — no store, no network, no key. Change
//! the agent's instructions or tools and the test fails with the first step where it now
//! decides differently, as a diff.
//!
//! ```sh
//! cargo test -p troupe --example cassette     # the replay, as CI runs it
//! cargo run -p troupe --example cassette      # records the run again and rewrites the cassette
//! ```
//!
//! With the CLI, `troupe runs export RUN --cassette FILE` writes the cassette of any
//! recorded run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use troupe::prelude::*;
use troupe::runtime::Durability;
use troupe::testing::Cassette;

/// The agent under test, as the application declares it.
fn summariser(engine: &Engine, workspace: &Path) -> Result<Agent, RuntimeError> {
    engine
        .agent("summariser")
        .model("demo")
        .instructions("Summarise the project in the workspace for a newcomer.")
        .workspace(workspace)
        .readonly_tools()
        .build()
}

/// The workspace the run was recorded in: a small project.
fn project() -> std::io::Result<tempfile::TempDir> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# Gadget\n\nA gadget that counts words.\n")?;
    Ok(workspace)
}

fn cassette_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cassettes/summary.json")
}

/// Records the run in a throwaway store and writes its cassette.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = project()?;
    let store_dir = tempfile::tempdir()?;
    let store = troupe::store::open(&store_dir.path().join("runs.db").display().to_string()).await?;
    let engine = Engine::builder().store(Durability::new(Arc::clone(&store))).build();
    let output = summariser(&engine, workspace.path())?.run("Summarise this project").await?.into_result()?;
    let recording = troupe::replay::Recording::load(store.as_ref(), output.run_id.as_str()).await?;
    Cassette::new(recording).save(cassette_path())?;
    println!("recorded {} model step(s) into {}", output.state.iteration(), cassette_path().display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_recorded_summary_replays_identical() {
        let cassette = Cassette::load(cassette_path()).expect("the cassette");
        let workspace = project().expect("a workspace");
        let agent = summariser(&Engine::builder().build(), workspace.path()).expect("the agent");
        let report = cassette.replay_agent(&agent).await.expect("the replay");
        assert!(report.identical(), "{report}");
        assert!(report.steps >= 2 && report.tool_calls >= 1, "{report}");
        assert_eq!(report.model_calls, 0);
    }

    #[tokio::test]
    async fn other_instructions_are_found_at_the_first_step() {
        let cassette = Cassette::load(cassette_path()).expect("the cassette");
        let workspace = project().expect("a workspace");
        let agent = Engine::builder()
            .build()
            .agent("summariser")
            .model("demo")
            .instructions("Summarise the project for an expert.")
            .workspace(workspace.path())
            .readonly_tools()
            .build()
            .expect("the agent");
        let report = cassette.replay_agent(&agent).await.expect("the replay");
        let divergence = report.divergence.expect("a divergence");
        assert_eq!(divergence.step, 1);
        assert!(divergence.detail.contains("+Summarise the project for an expert."), "{}", divergence.detail);
    }
}
