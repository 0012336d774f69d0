//! An [`Agent`] from an agent file, built as `troupe run` builds its agent: the built-in
//! tools confined to the workspace, the providers of the workspace's `troupe.toml`, and
//! the file's instructions, model, tools and denied tools; plus the tools of its MCP
//! servers (those of `troupe.toml`'s `[[mcp.servers]]` and of its own, connected by
//! [`connect_mcp`]).

use crate::definition::{AgentDefinition, DefinitionError, MemoryBackend};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use troupe_mcp::{McpConfigError, McpError, McpSection, McpToolset};
use troupe_model::{Env, ModelConfig, ProcessEnv, Providers};
use troupe_runtime::{Agent, AgentSpec, ApprovalMode, ApprovalRule, Runner, RuntimeError};
use troupe_sandbox::{Sandbox, SandboxConfigError, SandboxMode, SandboxSettings};
use troupe_store::{Store, StoreError};
use troupe_team::MemoryScope;
use troupe_tools::{Tool, ToolCatalog, Workspace};

/// The workspace configuration file, read from the current directory: providers and
/// `[[mcp.servers]]`.
pub const CONFIG_FILE: &str = "troupe.toml";

/// Why an agent (or a team) could not be built from its files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A file or the configuration says something that cannot be built.
    #[error("{0}")]
    Invalid(String),
    /// An agent file is not valid.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// The model configuration or a provider refused (a missing key, an unknown model).
    #[error(transparent)]
    Model(#[from] troupe_model::Error),
    /// The runtime refused the agent (its tools, its workspace, its model).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The MCP servers are not configured right.
    #[error(transparent)]
    McpConfig(#[from] McpConfigError),
    /// An MCP server could not be used.
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// `troupe.toml`'s `[sandbox]` is not valid.
    #[error(transparent)]
    SandboxConfig(#[from] SandboxConfigError),
    /// The store for memories could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// What was being built when `source` happened (an agent and its file, a team).
    #[error("{context}")]
    Context {
        /// What was being built.
        context: String,
        /// What went wrong.
        #[source]
        source: Box<BuildError>,
    },
}

impl BuildError {
    /// Whether the user can fix it by changing a file, the configuration or the
    /// environment (a missing key): all but a provider's or a server's failure at run time.
    pub fn is_usage(&self) -> bool {
        match self {
            BuildError::Model(error) | BuildError::Runtime(RuntimeError::Model(error)) => matches!(
                error,
                troupe_model::Error::MissingApiKey { .. }
                    | troupe_model::Error::UnknownModel { .. }
                    | troupe_model::Error::Config(_)
            ),
            BuildError::Context { source, .. } => source.is_usage(),
            _ => true,
        }
    }

    /// This error, as part of building `context`.
    pub fn context(self, context: impl Into<String>) -> Self {
        BuildError::Context { context: context.into(), source: Box::new(self) }
    }
}

/// What becomes of a call that needs approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approvals {
    /// It waits for whoever approves the run's calls (a person at a terminal, a client).
    Approver,
    /// It runs.
    Auto,
    /// It is refused by the policy, for agents nobody can be asked about.
    Refuse,
}

/// Makes `spec`'s calls that need approval do as `approvals` says: wait for whoever
/// approves (unchanged), run (`auto`), or be refused by a rule for each tool of `catalog`
/// the spec offers that needs approval.
pub fn apply_approvals(spec: &mut AgentSpec, catalog: &ToolCatalog, approvals: Approvals) {
    match approvals {
        Approvals::Approver => {}
        Approvals::Auto => spec.approval.mode = ApprovalMode::Auto,
        Approvals::Refuse => {
            let names = spec.tools.clone().unwrap_or_default();
            for name in names {
                if catalog.get(&name).is_some_and(|t| t.declaration().requires_approval()) {
                    spec.approval = spec.approval.clone().rule(ApprovalRule::deny(name));
                }
            }
        }
    }
}

/// Ceilings put on the agent's own limits (a team's budget, a report timeout).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ceilings {
    /// The most USD.
    pub max_usd: Option<f64>,
    /// The most tokens.
    pub max_total_tokens: Option<u64>,
    /// The longest run.
    pub timeout: Option<Duration>,
}

/// How to build one agent.
pub struct AgentBuild<'a> {
    /// Its file.
    pub definition: &'a AgentDefinition,
    /// Where its tools work.
    pub workspace: &'a Path,
    /// The workspace's `troupe.toml`.
    pub config: &'a ModelConfig,
    /// What a call that needs approval does.
    pub approvals: Approvals,
    /// Tools beyond the built-in ones (a leader's `delegate`); always given to the agent.
    pub extra_tools: Vec<Arc<dyn Tool>>,
    /// Ceilings on its limits.
    pub ceilings: Ceilings,
    /// The store its `memory.save` / `memory.search` keep memories in, when it lists them.
    pub memory: Option<Arc<dyn Store>>,
    /// Its MCP servers, connected ([`connect_mcp`]); their tools are offered unless the file
    /// denies them or lists only some tools of their server in `[[tools]]`.
    pub mcp: Option<&'a McpToolset>,
    /// How the commands its tools run are confined, before and after its own `[sandbox]`.
    pub sandbox: &'a SandboxChoice,
}

/// Where an agent's sandbox comes from: `troupe.toml`'s `[sandbox]`, under the agent file's,
/// under what the command line chose (`--sandbox`), which wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxChoice {
    /// `troupe.toml`'s `[sandbox]`.
    pub project: SandboxSettings,
    /// The command line's choice.
    pub command_line: SandboxSettings,
}

impl SandboxChoice {
    /// `troupe.toml`'s `[sandbox]` ([`CONFIG_FILE`] in the current directory), under
    /// `mode` when the command line chose one.
    pub fn load(mode: Option<SandboxMode>) -> Result<Self, BuildError> {
        let project = troupe_sandbox::load_project_settings(CONFIG_FILE)?;
        Ok(SandboxChoice { project, command_line: SandboxSettings { mode, ..SandboxSettings::default() } })
    }

    /// The sandbox of an agent whose file says `own`, in `workspace`.
    pub fn for_agent(&self, own: &SandboxSettings, workspace: &Path) -> Sandbox {
        self.settings_for(own).sandbox(workspace)
    }

    /// The settings of an agent whose file says `own`: the command line's over `own` over
    /// the project's.
    pub fn settings_for(&self, own: &SandboxSettings) -> SandboxSettings {
        self.command_line.over(&own.over(&self.project))
    }

    /// The choice made: `settings`, over anything a worker's own files say.
    pub fn made(settings: SandboxSettings) -> Self {
        SandboxChoice { project: SandboxSettings::default(), command_line: settings }
    }
}

/// The MCP servers of `definition`: [`CONFIG_FILE`]'s `[[mcp.servers]]`, with the file's
/// own replacing those of the same name.
pub fn mcp_servers(definition: &AgentDefinition) -> Result<McpSection, BuildError> {
    let workspace = troupe_mcp::load_workspace_servers(CONFIG_FILE)?;
    Ok(workspace.merged(&definition.mcp))
}

/// Connects the MCP servers of each of `definitions`, by agent id (a team's local agents),
/// their stdio servers confined to `workspace`.
pub async fn connect_mcp_each<'a>(
    definitions: impl IntoIterator<Item = &'a AgentDefinition>,
    workspace: &Path,
) -> Result<BTreeMap<String, McpToolset>, BuildError> {
    let mut toolsets = BTreeMap::new();
    for definition in definitions {
        toolsets.insert(definition.id().to_owned(), connect_mcp(definition, workspace).await?);
    }
    Ok(toolsets)
}

/// Connects the MCP servers of `definition` (none: an empty toolset, at no cost), its
/// stdio servers confined to `workspace` (as each one's `sandbox` says).
pub async fn connect_mcp(definition: &AgentDefinition, workspace: &Path) -> Result<McpToolset, BuildError> {
    let servers = mcp_servers(definition)?;
    if servers.is_empty() {
        return Ok(McpToolset::default());
    }
    let confined: Vec<_> = servers.servers.into_iter().map(|s| s.in_workspace(workspace)).collect();
    McpToolset::connect(&confined).await.map_err(|e| BuildError::from(e).context(of_file(definition)))
}

/// Whether the file gives the agent a memory tool.
pub fn wants_memory(definition: &AgentDefinition) -> bool {
    definition.to_spec().tools.is_some_and(|tools| tools.iter().any(|t| t.starts_with("memory.")))
}

/// Where the file files its memories: its own, or the shared category's.
fn memory_scope(definition: &AgentDefinition) -> MemoryScope {
    match definition.memory.backend {
        MemoryBackend::Isolated => MemoryScope::Isolated { agent: definition.id().to_owned() },
        MemoryBackend::Shared => {
            MemoryScope::Shared { category: definition.memory.category.clone().unwrap_or_else(|| "default".to_owned()) }
        }
    }
}

/// The workspace's store, opened when `definitions` give some agent a memory tool.
pub async fn memory_store<'a>(
    workspace: &Path,
    mut definitions: impl Iterator<Item = &'a AgentDefinition>,
) -> Result<Option<Arc<dyn Store>>, BuildError> {
    if !definitions.any(wants_memory) {
        return Ok(None);
    }
    let path = troupe_store::workspace_sqlite_path(workspace);
    let url = path.to_str().ok_or_else(|| BuildError::Invalid("the store path is not UTF-8".to_owned()))?;
    Ok(Some(troupe_store::open(url).await?))
}

/// A built agent, and what could not be honoured of its file.
pub struct Built {
    /// The agent.
    pub agent: Agent,
    /// Notes for the user (tools left out, a key that is not used).
    pub notes: Vec<String>,
}

/// Why a tool the file lists is not in this build's catalog.
fn missing_reason(tool: &str) -> &'static str {
    match tool {
        "web.search" => "no web search backend is configured",
        "memory.save" | "memory.search" => "no store for memories",
        "delegate" => "only a team's leader delegates",
        _ => "no MCP server of that name is configured in [[mcp.servers]], or it does not offer the tool",
    }
}

/// The built-in tools: the coding tools and `web.fetch`.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    let mut tools = troupe_tools::coding_tools();
    tools.extend(troupe_tools::web_tools(None));
    tools
}

/// `agent `id` (path)`: what an error of building `definition` is about.
fn of_file(definition: &AgentDefinition) -> String {
    format!("agent `{}` ({})", definition.id(), definition.path().display())
}

/// Builds the agent `build` describes, validated (its model resolves, its key is set).
pub fn build(build: AgentBuild<'_>) -> Result<Built, BuildError> {
    let definition = build.definition;
    let id = definition.id().to_owned();
    let mut notes = Vec::new();
    let extra_names: Vec<String> = build.extra_tools.iter().map(|t| t.declaration().name.clone()).collect();
    let mut tools = builtin_tools();
    tools.extend(build.extra_tools);
    if let Some(store) = build.memory {
        tools.extend(troupe_team::memory_tools(store, &memory_scope(definition)));
    }
    let mcp_tools = build.mcp.map(McpToolset::tools).unwrap_or_default();
    let mcp_names: Vec<String> = mcp_tools.iter().map(|t| t.declaration().name.clone()).collect();
    tools.extend(mcp_tools);
    let catalog =
        ToolCatalog::with_tools(tools).map_err(|source| RuntimeError::Catalog { agent: id.clone(), source })?;
    // Two tools that providers would see under one name are found here, not at the first call.
    troupe_mcp::check_wire_names(catalog.names()).map_err(|e| BuildError::from(e).context(of_file(definition)))?;

    let mut spec = definition.to_spec();
    let policy = definition.tool_policy();
    let wanted: Vec<String> = match spec.tools.take() {
        Some(listed) => listed,
        // None listed: every tool of the catalog the file does not deny.
        None => catalog.names().into_iter().map(str::to_owned).collect(),
    };
    let (mut available, missing): (Vec<String>, Vec<String>) = wanted
        .into_iter()
        .filter(|t| policy.check(t).is_ok() || extra_names.contains(t))
        .partition(|t| catalog.get(t).is_some());
    if !missing.is_empty() {
        let why: Vec<String> = missing.iter().map(|t| format!("{t} ({})", missing_reason(t))).collect();
        notes.push(format!("{id}: not available here, left out: {}", why.join(", ")));
    }
    for name in extra_names.into_iter().chain(offered_mcp(&mcp_names, build.mcp, definition)) {
        if !available.contains(&name) {
            available.push(name);
        }
    }
    spec.tools = Some(available);
    apply_ceilings(&mut spec, build.ceilings);
    apply_approvals(&mut spec, &catalog, build.approvals);

    let providers = providers_for(definition, build.config, &mut notes)?;
    let workspace = Workspace::new(build.workspace).map_err(RuntimeError::Workspace)?;
    let sandbox = build.sandbox.for_agent(&definition.sandbox, workspace.root());
    if sandbox.mode() == SandboxMode::Full {
        notes.push(format!("{id}: sandbox full: the commands it runs are not confined"));
    }
    let workspace = workspace.with_sandbox(sandbox);
    let runner = Runner::new(Arc::new(providers), Arc::new(catalog), Arc::new(workspace));
    runner.validate(&spec).map_err(|e| runtime(e).context(of_file(definition)))?;
    Ok(Built { agent: Agent::new(runner, spec), notes })
}

/// A runtime error, a model's error as itself.
fn runtime(error: RuntimeError) -> BuildError {
    match error {
        RuntimeError::Model(error) => BuildError::Model(error),
        other => BuildError::Runtime(other),
    }
}

/// The MCP tools (of `names`) the file lets the agent call: not denied, and, for a server of
/// which `[[tools]]` lists some tools, only those.
fn offered_mcp(names: &[String], mcp: Option<&McpToolset>, definition: &AgentDefinition) -> Vec<String> {
    let policy = definition.tool_policy();
    let listed = definition.to_spec().tools.unwrap_or_default();
    let servers: Vec<&str> = mcp.map(|m| m.clients().iter().map(|c| c.name()).collect()).unwrap_or_default();
    names
        .iter()
        .filter(|name| !policy.denied().contains_key(*name))
        .filter(|name| {
            let server = servers.iter().find(|s| name.starts_with(&format!("{s}/")));
            let listed_of_server: Vec<&String> =
                listed.iter().filter(|l| server.is_some_and(|s| l.starts_with(&format!("{s}/")))).collect();
            listed_of_server.is_empty() || listed_of_server.contains(name)
        })
        .cloned()
        .collect()
}

fn apply_ceilings(spec: &mut AgentSpec, ceilings: Ceilings) {
    fn lowest<T: PartialOrd + Copy>(own: Option<T>, ceiling: Option<T>) -> Option<T> {
        match (own, ceiling) {
            (Some(a), Some(b)) => Some(if b < a { b } else { a }),
            (a, b) => a.or(b),
        }
    }
    let limits = &mut spec.limits;
    limits.max_usd = lowest(limits.max_usd, ceilings.max_usd);
    limits.max_total_tokens = lowest(limits.max_total_tokens, ceilings.max_total_tokens);
    limits.timeout = lowest(limits.timeout, ceilings.timeout);
}

/// The provider name of the file's model, when it has one (not `demo`, not a bare name).
pub fn provider_name(definition: &AgentDefinition) -> Option<String> {
    definition.provider.name.clone().or_else(|| definition.model_id().split_once('/').map(|(p, _)| p.to_owned()))
}

/// The providers of `config`, reading the process environment.
pub fn providers(config: &ModelConfig) -> Result<Providers, BuildError> {
    Ok(config.providers(ProcessEnv)?)
}

/// The providers of `config`; with the file's `api_key` in place of its provider's key
/// variables.
pub(crate) fn providers_for(
    definition: &AgentDefinition,
    config: &ModelConfig,
    notes: &mut Vec<String>,
) -> Result<Providers, BuildError> {
    let providers = providers(config)?;
    let Some(key) = &definition.provider.api_key else {
        return Ok(providers);
    };
    let name = provider_name(definition);
    let variables = name.as_deref().and_then(|n| providers.provider(n)).map(|p| p.api_key_env.clone());
    match variables {
        Some(variables) if !variables.is_empty() => {
            Ok(config.providers(KeyEnv { variables, key: key.expose().to_owned() })?)
        }
        _ => {
            notes.push(format!(
                "{}: `api_key` is ignored: the model `{}` takes no key",
                definition.id(),
                definition.model_id()
            ));
            Ok(providers)
        }
    }
}

/// The process environment, with one key in the given variables.
struct KeyEnv {
    variables: Vec<String>,
    key: String,
}

impl Env for KeyEnv {
    fn var(&self, name: &str) -> Option<String> {
        if self.variables.iter().any(|v| v == name) { Some(self.key.clone()) } else { std::env::var(name).ok() }
    }
}

/// Loads the agent file at `path`.
pub fn load(path: &Path) -> Result<AgentDefinition, BuildError> {
    Ok(AgentDefinition::load(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_only_lower_limits() {
        let mut spec = AgentSpec::new("a", "demo");
        spec.limits.max_usd = Some(0.5);
        apply_ceilings(
            &mut spec,
            Ceilings { max_usd: Some(1.0), max_total_tokens: Some(10), timeout: Some(Duration::from_secs(3)) },
        );
        assert_eq!(spec.limits.max_usd, Some(0.5));
        assert_eq!(spec.limits.max_total_tokens, Some(10));
        assert_eq!(spec.limits.timeout, Some(Duration::from_secs(3)));
    }

    #[test]
    fn keys_replace_only_their_variables() {
        let env = KeyEnv { variables: vec!["X_API_KEY".into()], key: "k".into() };
        assert_eq!(env.var("X_API_KEY").as_deref(), Some("k"));
        assert_eq!(env.var("TROUPE_SURELY_UNSET_VARIABLE"), None);
    }

    #[test]
    fn only_what_the_user_can_fix_is_a_usage_error() {
        let missing =
            troupe_model::Error::MissingApiKey { provider: "openai".into(), variable: "OPENAI_API_KEY".into() };
        assert!(BuildError::from(missing).context("agent `a` (a.toml)").is_usage());
        let failed = troupe_model::Error::Transport { provider: "openai".into(), message: "reset".into() };
        assert!(!BuildError::Runtime(RuntimeError::Model(failed)).is_usage());
        assert!(BuildError::Invalid("no agent `x`".into()).is_usage());
    }
}
