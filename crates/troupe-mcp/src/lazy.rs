//! Lazy loading: two catalog tools instead of one per MCP tool.
//!
//! [`SEARCH_TOOL`] (`mcp_search_tools`) finds tools of the lazy servers by words of their
//! names and descriptions and shows their schemas; [`CALL_TOOL`] (`mcp_call_tool`) calls
//! one by server and name. A server with hundreds of tools then costs the model two tool
//! definitions, not hundreds.
//!
//! Approval is decided from a tool's declaration before the call runs, and one
//! declaration serves every target of `mcp_call_tool`, so it declares the strongest effect
//! among the tools it can reach (and the weakest idempotency): when every lazy tool is
//! read-only (trusted `readOnlyHint`), calls need no approval; as soon as one is not, every
//! call of `mcp_call_tool` is asked about, the read-only targets too. Declaring it
//! read-only and looking at the target afterwards would not be sound: approval, capability
//! checks, parallel scheduling and resume all read the declaration alone. The search tool
//! only reads the lists fetched at connection and is read-only.

use crate::client::McpClient;
use crate::tool::{McpToolInfo, arguments_object, to_tool_output};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use troupe_tools::{Effect, Idempotency, Tool, ToolError, ToolOutput, typed_tool};

/// The catalog name of the search tool.
pub const SEARCH_TOOL: &str = "mcp_search_tools";
/// The catalog name of the call tool.
pub const CALL_TOOL: &str = "mcp_call_tool";
/// The most matches a search returns.
pub const MAX_SEARCH_RESULTS: usize = 50;
const DEFAULT_SEARCH_RESULTS: usize = 10;

/// Arguments of `mcp_search_tools`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to look for in tool names and descriptions; empty lists every tool.
    pub query: String,
    /// The most tools to return (default 10, at most 50).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Arguments of `mcp_call_tool`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallArgs {
    /// The server, as `mcp_search_tools` names it.
    pub server: String,
    /// The tool's name at that server.
    pub tool: String,
    /// The tool's arguments, matching its input schema.
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
}

/// One match of a search.
#[derive(Serialize)]
struct Match<'a> {
    server: &'a str,
    tool: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    needs_approval: bool,
}

/// The two lazy tools over `clients` (the servers configured `tools = "lazy"`).
pub fn lazy_tools(clients: Vec<Arc<McpClient>>) -> Vec<Arc<dyn Tool>> {
    let clients = Arc::new(clients);
    let (effect, idempotency) = strongest(&clients);
    let servers: Vec<&str> = clients.iter().map(|c| c.name()).collect();
    let listed = servers.join(", ");
    let search_clients = Arc::clone(&clients);
    let search = typed_tool(
        SEARCH_TOOL,
        format!(
            "Searches the tools of the MCP servers {listed} by words of their names and descriptions, and returns \
             each match's server, name, description and input schema. Call a match with {CALL_TOOL}."
        ),
        Effect::ReadOnly,
        move |_ctx, args: SearchArgs| {
            let clients = Arc::clone(&search_clients);
            async move { Ok(search(&clients, &args.query, args.limit)) }
        },
    );
    let call_clients = Arc::clone(&clients);
    let call = typed_tool(
        CALL_TOOL,
        format!(
            "Calls a tool of the MCP servers {listed} by server and tool name, with arguments matching the input \
             schema {SEARCH_TOOL} showed."
        ),
        effect,
        move |_ctx, args: CallArgs| {
            let clients = Arc::clone(&call_clients);
            async move { call(&clients, args).await }
        },
    )
    .idempotency(idempotency);
    vec![search.into_arc(), call.into_arc()]
}

/// The strongest effect and weakest idempotency among every tool the clients offer.
fn strongest(clients: &[Arc<McpClient>]) -> (Effect, Idempotency) {
    let tools = clients.iter().flat_map(|c| c.tools());
    let effect = tools.clone().map(|t| t.effect).max().unwrap_or(Effect::ReadOnly);
    let repeatable = tools.clone().all(|t| t.idempotency == Idempotency::Idempotent);
    (effect, if repeatable { Idempotency::Idempotent } else { Idempotency::NonIdempotent })
}

fn search(clients: &[Arc<McpClient>], query: &str, limit: Option<usize>) -> ToolOutput {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let limit = limit.unwrap_or(DEFAULT_SEARCH_RESULTS).clamp(1, MAX_SEARCH_RESULTS);
    let mut scored: Vec<(usize, &McpToolInfo)> = clients
        .iter()
        .flat_map(|c| c.tools())
        .filter_map(|tool| {
            let score = relevance(tool, &words);
            (score > 0).then_some((score, tool))
        })
        .collect();
    // Stable: equal scores keep the servers' order.
    scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    let total = scored.len();
    let matches: Vec<Match<'_>> = scored
        .into_iter()
        .take(limit)
        .map(|(_, tool)| Match {
            server: &tool.server,
            tool: &tool.name,
            description: &tool.description,
            input_schema: &tool.input_schema,
            needs_approval: tool.effect != Effect::ReadOnly,
        })
        .collect();
    let shown = matches.len();
    let result = json!({"matches": matches, "total": total});
    let text = if shown == 0 {
        format!("No tool matches `{query}`. Try other words, or an empty query to list every tool.")
    } else {
        result.to_string()
    };
    ToolOutput::text(text).with_structured(result)
}

/// How well `tool` matches `words`: 0 for no match; every tool matches no words.
fn relevance(tool: &McpToolInfo, words: &[String]) -> usize {
    if words.is_empty() {
        return 1;
    }
    let name = tool.catalog_name.to_lowercase();
    let description = tool.description.to_lowercase();
    words
        .iter()
        .map(|w| {
            if name.contains(w.as_str()) {
                3
            } else if description.contains(w.as_str()) {
                1
            } else {
                0
            }
        })
        .sum()
}

async fn call(clients: &[Arc<McpClient>], args: CallArgs) -> Result<ToolOutput, ToolError> {
    let Some(client) = clients.iter().find(|c| c.name() == args.server) else {
        let known: Vec<&str> = clients.iter().map(|c| c.name()).collect();
        return Err(ToolError::invalid_arguments(format!(
            "no MCP server `{}` here; the servers are {}",
            args.server,
            known.join(", ")
        )));
    };
    let Some(tool) = client.tool(&args.tool) else {
        return Err(ToolError::invalid_arguments(format!(
            "the MCP server `{}` offers no tool `{}`; find its tools with {SEARCH_TOOL}",
            args.server, args.tool
        )));
    };
    let arguments = arguments_object(args.arguments.map_or(Value::Null, Value::Object))?;
    let result = client.call(&tool.name, arguments, tool.is_repeatable()).await?;
    to_tool_output(result).map_err(ToolError::from)
}
