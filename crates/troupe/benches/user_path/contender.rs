//! troupe as a newcomer writes it: `Engine` + `Providers` (the built-in `openai` preset,
//! pointed at the mock server by `OPENAI_BASE_URL`), an agent on `openai/gpt-4o`, one
//! typed tool; optionally a store, as the CLI records every run.

use crate::workload::{ANSWER, TASK, lookup_answer};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashMap;
use troupe::model::Providers;
use troupe::prelude::*;
use troupe::runtime::Durability;
use troupe::tools::{Effect, ToolOutput, typed_tool};

/// The arguments of `lookup`.
#[derive(Deserialize, JsonSchema)]
pub struct Lookup {
    /// The key to look up.
    key: String,
}

/// Either contender: troupe's agent or the hand-written loop.
pub enum Contender {
    Troupe(Agent),
    Bare(crate::bare::BareLoop),
}

impl Contender {
    /// One run, which should make `expected_calls` tool calls; `Err` says why it does not
    /// count as a success.
    pub async fn run(&self, expected_calls: u32) -> Result<(), String> {
        let (text, tool_calls) = match self {
            Contender::Troupe(agent) => {
                let output = agent.run(TASK).await.map_err(|e| e.to_string())?;
                if !output.is_completed() {
                    return Err(format!("outcome {:?}", output.outcome));
                }
                (output.text, output.tool_calls)
            }
            Contender::Bare(bare) => bare.run().await?,
        };
        if text != ANSWER || tool_calls != expected_calls {
            return Err(format!("{tool_calls} tool calls, answer {text:?}"));
        }
        Ok(())
    }
}

/// The agent, recording its runs as `durability` says if it is given.
pub fn troupe_agent(base_url: &str, model: &str, durability: Option<Durability>) -> Agent {
    // `Providers::builtin()` reads the process environment; the benchmark hands it the same
    // two variables a user would export.
    let env = HashMap::from([
        ("OPENAI_API_KEY".to_owned(), "sk-bench".to_owned()),
        ("OPENAI_BASE_URL".to_owned(), format!("{base_url}/v1")),
    ]);
    let mut engine = Engine::builder().providers(Providers::with_env(env));
    if let Some(durability) = durability {
        engine = engine.store(durability);
    }
    let lookup =
        typed_tool("lookup", "Looks up the value of a key.", Effect::ReadOnly, |_ctx, args: Lookup| async move {
            Ok(ToolOutput::text(lookup_answer(&args.key)))
        });
    engine
        .build()
        .agent("bench")
        .model(format!("openai/{model}"))
        .instructions("Look the keys up, then answer.")
        .workspace(std::env::temp_dir())
        .tool(lookup.into_arc())
        .build()
        .expect("the benchmark agent builds")
}

/// The JSON schema troupe sends for `lookup`, so the bare loop sends the same.
pub fn lookup_parameters() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Lookup)).expect("a schema is JSON")
}
