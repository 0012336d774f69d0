//! [`AgentFactory`]: how the supervisor turns an [`AgentSpec`] into a runnable [`Agent`].

use crate::TeamError;
use std::path::PathBuf;
use std::sync::Arc;
use troupe_runtime::{Agent, AgentSpec, Engine, RuntimeError};
use troupe_tools::Tool;

/// Builds agents from specs: the supervisor calls it at every spawn and whenever a live
/// agent's model or instructions change.
pub trait AgentFactory: Send + Sync {
    /// The agent of `spec`.
    fn build(&self, spec: AgentSpec) -> Result<Agent, TeamError>;
}

impl<F> AgentFactory for F
where
    F: Fn(AgentSpec) -> Result<Agent, RuntimeError> + Send + Sync,
{
    fn build(&self, spec: AgentSpec) -> Result<Agent, TeamError> {
        self(spec).map_err(TeamError::from)
    }
}

/// Builds agents with an [`Engine`], in one workspace, from one set of tools (each agent
/// gets the subset its spec names).
#[derive(Clone)]
pub struct EngineFactory {
    engine: Engine,
    workspace: Option<PathBuf>,
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for EngineFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.declaration().name.as_str()).collect();
        f.debug_struct("EngineFactory").field("workspace", &self.workspace).field("tools", &tools).finish()
    }
}

impl EngineFactory {
    /// Agents of `engine`, without tools, in the current directory.
    pub fn new(engine: Engine) -> Self {
        EngineFactory { engine, workspace: None, tools: Vec::new() }
    }

    /// Confines the agents' tools to `dir`.
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// Adds a tool: a `#[tool]` unit struct, a [`TypedTool`](troupe_tools::TypedTool), any
    /// [`Tool`] by value, or one already in an `Arc`.
    pub fn tool(mut self, tool: impl troupe_tools::IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }
}

impl AgentFactory for EngineFactory {
    fn build(&self, spec: AgentSpec) -> Result<Agent, TeamError> {
        let mut builder = self.engine.agent(spec.name.clone()).spec(spec).tools(self.tools.iter().cloned());
        if let Some(dir) = &self.workspace {
            builder = builder.workspace(dir);
        }
        Ok(builder.build()?)
    }
}
