//! What a run leaves behind for the people who operate it: metrics, cost and an audit
//! trail.
//!
//! Two agents run on the offline `demo` model. Every event of their runs feeds
//! `troupe::telemetry::TelemetryMetrics` — live from the event stream for the first run,
//! afterwards from `RunOutput::events` for the second. Security decisions go to a JSON-lines
//! audit log (`troupe::tools::FileAuditLog`) in a temporary directory. At the end the
//! program prints the runtime's own per-agent metrics and per-model cost, the audit log,
//! and the telemetry in the Prometheus text format and as JSON, the two bodies a `/metrics`
//! endpoint would serve.
//!
//! ```sh
//! cargo run -p troupe --example observability
//! ```

use serde_json::Value;
use std::sync::Arc;
use troupe::core::PauseReason;
use troupe::prelude::*;
use troupe::runtime::ApprovalRule;
use troupe::telemetry::{JsonExporter, MetricsExporter, PrometheusExporter, TelemetryMetrics};
use troupe::tools::{AuditEntry, CapabilitySet, FileAuditLog};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# Inbox\n\nSorts mail by urgency.\n")?;
    let logs = tempfile::tempdir()?;
    let audit = Arc::new(FileAuditLog::open(logs.path().join("audit.jsonl"))?);
    let telemetry = TelemetryMetrics::new();
    let engine = Engine::builder().build();

    // 1. Writes need a person's approval; this program approves the summary file only.
    let triage = engine
        .agent("triage")
        .model("demo")
        .workspace(workspace.path())
        .coding_tools()
        .capabilities(CapabilitySet::readonly().allow_write("TROUPE_DEMO.md"))
        .audit_log(audit.clone())
        .approval(ApprovalPolicy::default().rule(ApprovalRule::allow("fs.read")).rule(ApprovalRule::ask("fs.write")))
        .build()?;
    let mut run = triage.start("Summarise this project");
    telemetry.set_active_runs(1);
    while let Some(event) = run.events.next_event().await {
        telemetry.observe(&event);
        if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, arguments, .. } } = event.kind
        {
            let path = arguments.get("path").and_then(Value::as_str).unwrap_or_default();
            if tool == "fs.write" && path == "TROUPE_DEMO.md" {
                run.signals.approve(call_id).await?;
            } else {
                run.signals.reject(call_id, "only the summary file may be written").await?;
            }
        }
    }
    let first = run.result.await?.into_result()?;
    telemetry.set_active_runs(0);

    // 2. This agent is granted reading only: its write is refused by the capability check,
    //    before any approval, and the refusal is audited.
    let reviewer = engine
        .agent("reviewer")
        .model("demo")
        .workspace(workspace.path())
        .coding_tools()
        .capabilities(CapabilitySet::readonly())
        .audit_log(audit.clone())
        .approval(ApprovalPolicy::auto())
        .build()?;
    let second = reviewer.run("Summarise this project").await?;
    telemetry.observe_all(&second.events);

    println!("== runs");
    for output in [&first, &second] {
        println!(
            "{} {:?}: {} tool calls, {:?}",
            output.run_id,
            output.outcome.kind(),
            output.tool_calls,
            output.duration
        );
    }

    println!("\n== runtime metrics, by agent");
    for (agent, m) in engine.metrics().snapshot() {
        println!(
            "{agent}: {} runs, {} completed, {} model calls, {} tool calls ({} errors), {} tokens in, {} out",
            m.runs_started,
            m.runs_completed,
            m.model_calls,
            m.tool_calls,
            m.tool_errors,
            m.input_tokens,
            m.output_tokens
        );
    }

    println!("\n== cost, by model (CostTracker)");
    for output in [&first, &second] {
        for (model, cost) in &output.cost_by_model {
            let priced = if cost.priced { "" } else { " (unpriced)" };
            println!("{}: {model}: {} calls, ${:.6}{priced}", output.run_id, cost.calls, cost.cost_usd);
        }
    }

    println!("\n== audit log ({})", audit.path().display());
    let audit_lines = std::fs::read_to_string(audit.path())?;
    print!("{audit_lines}");

    let snapshot = telemetry.snapshot();
    let prometheus = PrometheusExporter::new();
    println!("\n== GET /metrics ({})", prometheus.content_type());
    print!("{}", prometheus.render(&snapshot));
    println!("\n== GET /metrics.json");
    println!("{}", JsonExporter::pretty().render(&snapshot)?);

    // The event stream and the runtime count the same runs.
    let runtime = engine.metrics().total();
    let tokens = snapshot.tokens();
    assert_eq!(snapshot.runs_started(), runtime.runs_started);
    assert_eq!((tokens.input_tokens, tokens.output_tokens), (runtime.input_tokens, runtime.output_tokens));
    assert_eq!(snapshot.tool_calls(), runtime.tool_calls);
    assert!(snapshot.tools["fs.write"].approval_requests >= 1, "the first run asked before writing");
    assert!(snapshot.tools["fs.write"].calls_error >= 1, "the second run's write was refused");
    let refused = audit_lines.lines().filter_map(|line| serde_json::from_str::<AuditEntry>(line).ok());
    assert!(refused.filter(|e| !e.is_allowed()).any(|e| e.agent == "reviewer"), "and the refusal audited");
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write happened");
    Ok(())
}
