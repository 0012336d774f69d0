//! Shared by the runtime benchmarks: the lookup tool the scripted model calls, and how
//! far into the script a request is. The `/proc` figures and the mock server in a child
//! process are `troupe_testkit`'s (`process`, `ChildMockServer`).

use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;
use troupe_testkit::RecordedRequest;
use troupe_tools::{Effect, Tool, ToolOutput, typed_tool};

/// How many `tool_result` blocks an Anthropic request carries: the turn the scripted
/// model is at.
pub fn tool_results(request: &RecordedRequest) -> usize {
    let Some(messages) = request.body["messages"].as_array() else { return 0 };
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .count()
}

/// Arguments of `lookup`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Lookup {
    /// The key to look up.
    key: String,
}

/// A cheap read-only tool: answers a fixed value for any key, so a tool call costs the
/// runtime's machinery and nothing else.
pub fn lookup_tool() -> Arc<dyn Tool> {
    typed_tool("lookup", "Looks up the value of a key.", Effect::ReadOnly, |_ctx, args: Lookup| async move {
        Ok(ToolOutput::text(format!("{} = 42", args.key)))
    })
    .into_arc()
}
