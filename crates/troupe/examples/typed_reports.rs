//! Members that report as data: a leader delegates to a researcher that ends with the
//! structured report (summary, artifacts, decisions, blockers) and to a reviewer that ends
//! with a Rust type of its own. The `delegate` tool returns each report as JSON, and the
//! context firewall lets only the fields each channel carries reach the leader. Offline,
//! on the `demo` model:
//!
//! ```sh
//! cargo run -p troupe --example typed_reports
//! ```
//!
//! A team file says the same with `report = "structured"` (or a schema file) on a member
//! and `[firewall.fields]`: see `examples/team/reports.toml`.

use serde::Deserialize;
use std::sync::Arc;
use troupe::prelude::*;
use troupe::runtime::output_spec_for;
use troupe::team::firewall::ContextFirewall;
use troupe::team::{AgentMember, DelegateTool, Member, Report, ReportFormat};

/// The reviewer's verdict.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Verdict {
    /// Whether the work may go on as it is.
    approved: bool,
    /// Each thing to fix, one sentence each.
    findings: Vec<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# Gadget\n\nA gadget that counts words.\n")?;
    let engine = Engine::builder().build();
    let agent = |name: &str| engine.agent(name).model("demo").workspace(workspace.path()).readonly_tools().build();

    // Each member declares its report: the structured report, or a Rust type's schema.
    let researcher: Arc<dyn Member> =
        AgentMember::new(agent("researcher")?, "Finds facts.").report(ReportFormat::Structured).shared();
    let reviewer: Arc<dyn Member> = AgentMember::new(agent("reviewer")?, "Reviews the work.")
        .report(ReportFormat::Schema(output_spec_for::<Verdict>()))
        .shared();

    // The leader reads what the researcher found and decided, not its artifacts.
    let firewall = ContextFirewall::new().channel("researcher", "lead").channel("reviewer", "lead").report_fields(
        "researcher",
        "lead",
        ["summary", "decisions", "blockers"],
    );
    let firewall = Arc::new(firewall);
    let delegate = Arc::new(DelegateTool::new("lead", [researcher, reviewer])?.firewall(Arc::clone(&firewall)));
    let lead = engine.agent("lead").model("demo").workspace(workspace.path()).tool(delegate.clone()).build()?;

    let output = lead.run("Describe this repository").await?.into_result()?;
    println!("{}", output.text.trim_end());

    // Every delegation's report, as data.
    for result in delegate.results() {
        match result.name.as_str() {
            "researcher" => {
                let report: Report = result.report_as().ok_or("the researcher reports")??;
                println!("researcher: {} ({} decision(s))", report.summary, report.decisions.len());
                assert!(report.artifacts.is_empty(), "the firewall withheld the artifacts");
            }
            _ => {
                let verdict: Verdict = result.report_as().ok_or("the reviewer reports")??;
                println!("reviewer: approved = {}, {} finding(s)", verdict.approved, verdict.findings.len());
            }
        }
    }
    let stats = firewall.stats();
    println!("firewall: {} reports passed, {} field(s) withheld", stats.passed, stats.fields_withheld);
    assert_eq!((stats.passed, stats.fields_withheld), (2, 1));
    Ok(())
}
