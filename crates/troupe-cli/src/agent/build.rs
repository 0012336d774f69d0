//! Agents built from their files by the library ([`troupe_workers::build`]), their errors
//! sorted into the CLI's exit codes: what the user can fix is a usage error (exit 2).

use crate::Failure;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use troupe::store::Store;
use troupe_mcp::McpToolset;
use troupe_workers::build::BuildError;
use troupe_workers::definition::AgentDefinition;

pub(crate) use troupe_workers::build::{AgentBuild, Approvals, Built, Ceilings};

/// A build error as a failure of the command.
pub(crate) fn failure(error: BuildError) -> Failure {
    if error.is_usage() { Failure::Usage(anyhow::Error::new(error)) } else { Failure::Run(anyhow::Error::new(error)) }
}

/// Connects the MCP servers of each of `definitions`, by agent id (a team's local agents),
/// confined to `workspace`.
pub(crate) async fn connect_mcp_each<'a>(
    definitions: impl IntoIterator<Item = &'a AgentDefinition>,
    workspace: &std::path::Path,
) -> Result<BTreeMap<String, McpToolset>, Failure> {
    troupe_workers::build::connect_mcp_each(definitions, workspace).await.map_err(failure)
}

/// Connects the MCP servers of `definition` (none: an empty toolset, at no cost), confined
/// to `workspace`.
pub(crate) async fn connect_mcp(
    definition: &AgentDefinition,
    workspace: &std::path::Path,
) -> Result<McpToolset, Failure> {
    troupe_workers::build::connect_mcp(definition, workspace).await.map_err(failure)
}

/// The workspace's store, opened when `definitions` give some agent a memory tool.
pub(crate) async fn memory_store<'a>(
    workspace: &Path,
    definitions: impl Iterator<Item = &'a AgentDefinition>,
) -> Result<Option<Arc<dyn Store>>, Failure> {
    troupe_workers::build::memory_store(workspace, definitions).await.map_err(failure)
}

/// Builds the agent `build` describes, validated (its model resolves, its key is set).
pub(crate) fn build(build: AgentBuild<'_>) -> Result<Built, Failure> {
    troupe_workers::build::build(build).map_err(failure)
}

/// Loads the agent file at `path` as a usage error when it is not valid.
pub(crate) fn load(path: &Path) -> Result<AgentDefinition, Failure> {
    troupe_workers::build::load(path).map_err(failure)
}
