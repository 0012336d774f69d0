//! MCP for troupe: the tools of MCP servers as troupe tools, and troupe agents as an MCP
//! server.
//!
//! **Client** (feature `client`). An [`McpServerConfig`] says how to reach a server (a child
//! process over stdio, or streamable HTTP) and which of its tools to offer.
//! [`McpToolset::connect`] connects the servers and turns their tools into
//! [`Tool`](troupe_tools::Tool)s for an agent's catalog:
//!
//! - each MCP tool `t` of the server `s` is the catalog tool `s/t` (sent to providers as
//!   `s_t`; clashing wire names are refused when the tools are assembled, see
//!   [`check_wire_names`]), its input schema normalized ([`normalize_input_schema`]);
//! - its effect is an external side effect unless the server is trusted and annotates it
//!   read-only, or it is annotated destructive ([`derive_effect`]), so calls are put to a
//!   person by the default approval policy;
//! - each call is bounded by the server's timeout; a lost session is reconnected once and the
//!   call retried once where that cannot repeat an effect ([`McpClient`]);
//! - a server configured `tools = "lazy"` is offered through `mcp_search_tools` and
//!   `mcp_call_tool` instead ([`lazy_tools`]).
//!
//! **Server** (feature `server`). [`AgentServer`] offers troupe agents as MCP tools, one per
//! agent taking `{prompt}` and answering with the agent's final answer;
//! [`serve_agents`] serves it over any byte stream, [`serve_agents_stdio`] on stdio.
//!
//! **Configuration** (always). `[[mcp.servers]]` tables ([`McpSection`]) in agent files and
//! in a workspace's `troupe.toml` ([`load_workspace_servers`]); see [`McpServerConfig`] for
//! the keys.
//!
//! An agent calling the `echo` tool of the MCP reference server (run with node); the call
//! waits for approval, as MCP tools are side effects unless the server is trusted:
//!
//! ```no_run
//! use std::sync::Arc;
//! use troupe_core::{AgentEventKind, PauseReason};
//! use troupe_mcp::{McpServerConfig, McpToolset};
//! use troupe_runtime::{Engine, RunInput};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let everything = McpServerConfig::stdio(
//!     "everything",
//!     "node",
//!     vec!["node_modules/@modelcontextprotocol/server-everything/dist/index.js".into(), "stdio".into()],
//! );
//! let mcp = McpToolset::connect(&[everything]).await?;
//! assert!(mcp.tools().iter().any(|t| t.declaration().name == "everything/echo"));
//!
//! let engine = Engine::builder().build();
//! let agent = engine
//!     .agent("echoer")
//!     .tools(mcp.tools())
//!     .model("anthropic/claude-sonnet-4-5")
//!     .instructions("Repeat the user's words with the everything/echo tool.")
//!     .build()?;
//! let mut run = agent.start(RunInput::new("Say hello through the echo tool."));
//! while let Some(event) = run.events.next_event().await {
//!     if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, .. } } = event.kind {
//!         run.signals.approve(call_id).await?;
//!     }
//! }
//! let output = run.result.await?;
//! println!("{}", output.text);
//! # Ok(())
//! # }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod error;
mod schema;
mod template;
mod workspace;

#[cfg(feature = "client")]
mod bounded_lines;
#[cfg(feature = "client")]
mod client;
#[cfg(feature = "client")]
mod lazy;
#[cfg(feature = "client")]
mod names;
#[cfg(feature = "client")]
mod session;
#[cfg(feature = "client")]
mod tool;
#[cfg(feature = "client")]
mod toolset;

#[cfg(feature = "server")]
mod server;

pub use config::{
    DEFAULT_TIMEOUT_SECONDS, MAX_SERVER_NAME_LEN, McpSection, McpServerConfig, McpTransport, ToolLoading,
    check_server_name,
};
pub use error::{McpConfigError, McpError};
pub use schema::normalize_input_schema;
pub use workspace::{load_workspace_servers, parse_workspace_servers};

#[cfg(feature = "client")]
pub use client::{McpClient, VariableLookup};
#[cfg(feature = "client")]
pub use lazy::{CALL_TOOL, CallArgs, MAX_SEARCH_RESULTS, SEARCH_TOOL, SearchArgs, lazy_tools};
#[cfg(feature = "client")]
pub use names::{catalog_name, check_wire_names};
#[cfg(feature = "client")]
pub use tool::{McpTool, McpToolInfo, ToolHints, derive_effect, to_tool_output};
#[cfg(feature = "client")]
pub use toolset::McpToolset;

#[cfg(feature = "server")]
pub use server::{AgentServer, ServedAgent, http_service, serve_agents, serve_agents_stdio};
