//! [`McpToolset`]: every configured server connected, and the catalog tools they make.

use crate::client::{McpClient, VariableLookup};
use crate::config::{McpServerConfig, ToolLoading};
use crate::error::McpError;
use crate::lazy::lazy_tools;
use crate::names::check_wire_names;
use crate::tool::McpTool;
use std::sync::Arc;
use troupe_tools::Tool;

/// The connected servers of an agent and the tools they give it: one `server/tool` per MCP
/// tool of the eager servers, and `mcp_search_tools` + `mcp_call_tool` over the lazy ones.
#[derive(Clone, Default)]
pub struct McpToolset {
    clients: Vec<Arc<McpClient>>,
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.declaration().name.as_str()).collect();
        f.debug_struct("McpToolset").field("clients", &self.clients).field("tools", &tools).finish()
    }
}

impl McpToolset {
    /// Connects every server of `servers` at once, `${NAME}` references filled in from the
    /// process environment. Fails on the first server that cannot be reached (the others
    /// are closed again), on two servers of one name, and on tools whose wire names clash.
    pub async fn connect(servers: &[McpServerConfig]) -> Result<McpToolset, McpError> {
        Self::connect_with_variables(servers, Arc::new(|name: &str| std::env::var(name).ok())).await
    }

    /// [`connect`](Self::connect), with `${NAME}` references filled in by `lookup`.
    pub async fn connect_with_variables(
        servers: &[McpServerConfig],
        lookup: VariableLookup,
    ) -> Result<McpToolset, McpError> {
        for (n, server) in servers.iter().enumerate() {
            if servers[..n].iter().any(|s| s.name == server.name) {
                return Err(McpError::InvalidConfig {
                    server: server.name.clone(),
                    message: "two servers have this name; server names must be unique".to_owned(),
                });
            }
        }
        let connecting = servers.iter().map(|s| McpClient::connect_with_variables(s.clone(), Arc::clone(&lookup)));
        let clients = futures::future::try_join_all(connecting).await?;
        Self::from_clients(clients.into_iter().map(Arc::new).collect())
    }

    /// The tools of already connected `clients`.
    pub fn from_clients(clients: Vec<Arc<McpClient>>) -> Result<McpToolset, McpError> {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut lazy = Vec::new();
        for client in &clients {
            match client.config().tools {
                ToolLoading::Eager => {
                    for info in client.tools() {
                        tools.push(McpTool::new(Arc::clone(client), info.clone()).into_arc());
                    }
                }
                ToolLoading::Lazy => lazy.push(Arc::clone(client)),
            }
        }
        if !lazy.is_empty() {
            tools.extend(lazy_tools(lazy));
        }
        check_wire_names(tools.iter().map(|t| t.declaration().name.as_str()))?;
        Ok(McpToolset { clients, tools })
    }

    /// The catalog tools.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    /// The connected servers, in the configuration's order.
    pub fn clients(&self) -> &[Arc<McpClient>] {
        &self.clients
    }

    /// The server named `name`.
    pub fn client(&self, name: &str) -> Option<&Arc<McpClient>> {
        self.clients.iter().find(|c| c.name() == name)
    }

    /// Whether no server is connected.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}
