//! The smallest agent: one run on a throwaway workspace with the offline `demo` model.
//!
//! ```sh
//! cargo run -p troupe --example minimal
//! ```

use troupe::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# Hello\n\nA tiny project.\n")?;

    let engine = Engine::builder().build();
    let agent = engine
        .agent("summariser")
        .model("demo")
        .workspace(workspace.path())
        .coding_tools()
        // A throwaway workspace: let the agent write without asking.
        .approval(ApprovalPolicy::auto())
        .build()?;
    // `run` returns whatever the run's outcome; `into_result` stops here unless it completed.
    let output = agent.run("Summarise this project").await?.into_result()?;

    println!("{}", output.text);
    let usage = output.usage;
    println!(
        "{:?} in {} tool calls; tokens: {} in, {} out; ${:.4}",
        output.outcome.kind(),
        output.tool_calls,
        usage.total_input(),
        usage.output_tokens,
        output.cost_usd
    );
    Ok(())
}
