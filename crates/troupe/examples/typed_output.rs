//! Typed answers: a run that ends with a Rust value instead of text, offline on the `demo`
//! model.
//!
//! ```sh
//! cargo run -p troupe --example typed_output
//! ```
//!
//! Three ways to ask: `run_typed::<T>()` for a Rust type; the same while watching the answer
//! arrive as it is written (partial JSON, as text deltas); and a JSON schema that is not a
//! Rust type (`RunInput::output`), as an agent file's `[output]` or `troupe run
//! --output-schema` give it. On a real model, swap `demo` for e.g. `openai/gpt-4o` or
//! `anthropic/claude-sonnet-4-5`: the schema then goes by the vendor's own structured-output
//! mechanism, and an answer that does not match is sent back to be corrected.

use serde::Deserialize;
use troupe::prelude::*;
use troupe::runtime::output_spec_for;

/// A review of a change: what the reviewer decided and why.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Review {
    /// Whether the change may land.
    approved: bool,
    /// How sure the reviewer is, from 0 to 1.
    confidence: f64,
    /// Each thing to fix before it lands.
    findings: Vec<Finding>,
}

/// One thing to fix.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Finding {
    /// The file it is in.
    file: String,
    /// What is wrong.
    problem: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::builder().build();
    let agent = engine.agent("reviewer").model("demo").build()?;

    // 1. A Rust type: its schema goes with the request, the answer comes back decoded.
    let review = agent.run_typed::<Review>("Review the change to src/lib.rs").await?;
    println!(
        "approved: {}, confidence {:.2}, {} finding(s); {} tokens, ${:.4}",
        review.value.approved,
        review.value.confidence,
        review.value.findings.len(),
        review.run.usage.total(),
        review.run.cost_usd
    );
    for finding in &review.value.findings {
        println!("  {}: {}", finding.file, finding.problem);
    }

    // 2. The same, watched as it is written: the answer's JSON arrives as text deltas.
    let mut handle = agent.start(RunInput::new("Review the change again").output(output_spec_for::<Review>()));
    let mut streamed = String::new();
    while let Some(event) = handle.events.next_event().await {
        if let AgentEventKind::MessageDelta { delta, .. } = event.kind {
            streamed.push_str(&delta);
        }
    }
    let output = handle.output().await?.into_result()?;
    let review: Review = serde_json::from_str(&output.text)?;
    println!("streamed {} characters of JSON; approved: {}", streamed.len(), review.approved);

    // 3. A JSON schema that is not a Rust type, e.g. read from a file.
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"title": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["title", "tags"],
        "additionalProperties": false
    });
    let spec = OutputSpec::new(troupe::core::OutputSchema::new("Summary", schema))?;
    let output = agent.run(RunInput::new("Summarise the change").output(spec)).await?.into_result()?;
    let summary: serde_json::Value = serde_json::from_str(&output.text)?;
    println!("summary: {summary}");
    Ok(())
}
