//! The builder API: an [`Engine`] (models, metrics) hands out [`AgentBuilder`]s.

use crate::agent::Agent;
use crate::compaction::Compactor;
use crate::durable::Durability;
use crate::error::RuntimeError;
use crate::metrics::Metrics;
use crate::middleware::{Middleware, MiddlewareStack, RateLimit};
use crate::plugin::Plugin;
use crate::plugins::PluginSet;
use crate::resolver::ModelResolver;
use crate::runner::{DEFAULT_TOOL_CONCURRENCY, Runner};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use troupe_model::Providers;
use troupe_run::AgentSpec;
use troupe_run::CompactionPolicy;
use troupe_run::{ApprovalMode, ApprovalPolicy, ApprovalRule};
use troupe_run::{SignalHook, SignalKind};
use troupe_tools::{AuditLog, CapabilityAuthorizer, CapabilitySet, Tool, ToolCatalog, Workspace};

/// What every agent of an application shares: how models are resolved, where metrics go,
/// the middlewares and plugins every run goes through.
#[derive(Clone)]
pub struct Engine {
    resolver: Arc<dyn ModelResolver>,
    metrics: Arc<Metrics>,
    tool_concurrency: usize,
    compactor: Option<Arc<dyn Compactor>>,
    durability: Option<Durability>,
    middleware: MiddlewareStack,
    plugins: PluginSet,
    capture_content: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("tool_concurrency", &self.tool_concurrency)
            .field("middleware", &self.middleware)
            .field("plugins", &self.plugins)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Engine`].
#[derive(Default)]
pub struct EngineBuilder {
    resolver: Option<Arc<dyn ModelResolver>>,
    metrics: Option<Arc<Metrics>>,
    tool_concurrency: Option<usize>,
    compactor: Option<Arc<dyn Compactor>>,
    durability: Option<Durability>,
    middleware: MiddlewareStack,
    plugins: PluginSet,
    capture_content: bool,
}

impl Engine {
    /// Starts building an engine.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// Starts building an agent named `name`.
    pub fn agent(&self, name: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            engine: self.clone(),
            spec: AgentSpec { name: name.into(), ..AgentSpec::default() },
            workspace: None,
            tools: Vec::new(),
            capabilities: None,
            audit: None,
            rate_limit: None,
        }
    }

    /// The metrics of every agent of this engine.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The model resolver.
    pub fn resolver(&self) -> &Arc<dyn ModelResolver> {
        &self.resolver
    }

    /// The middlewares every run of the engine's agents goes through, in order (those of
    /// plugins included).
    pub fn middleware(&self) -> &MiddlewareStack {
        &self.middleware
    }

    /// The names of the engine's plugins, in order.
    pub fn plugin_names(&self) -> Vec<&str> {
        self.plugins.names()
    }

    /// Shuts the engine's plugins down: each initialized one once, last registered first
    /// ([`Plugin::shutdown`]). Call it when the application is done with the engine; runs
    /// started after it fail with code `plugin`.
    pub async fn shutdown(&self) {
        self.plugins.shutdown().await;
    }
}

impl EngineBuilder {
    /// Resolves models with `providers` (the built-ins, a `troupe.toml`'s).
    pub fn providers(self, providers: Providers) -> Self {
        self.resolver(Arc::new(providers))
    }

    /// Resolves models with `resolver`.
    pub fn resolver(mut self, resolver: Arc<dyn ModelResolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Counts runs into `metrics`.
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Lets at most `n` read-only calls of one turn run at once.
    pub fn tool_concurrency(mut self, n: usize) -> Self {
        self.tool_concurrency = Some(n.max(1));
        self
    }

    /// Calls `compactor` before every model call of every agent.
    pub fn compactor(mut self, compactor: Arc<dyn Compactor>) -> Self {
        self.compactor = Some(compactor);
        self
    }

    /// Records every run of the engine's agents in a store ([`Runner::with_store`]).
    pub fn store(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Runs `middleware`'s hooks around every model call and tool call of every agent,
    /// after those added before it.
    pub fn middleware(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Adds `plugin` to every agent: its tools to their catalogs (an agent restricted to
    /// named tools gets only those it names), its middlewares to the stack after those
    /// added before it. It is initialized once, when the engine's first run starts, and
    /// shut down by [`Engine::shutdown`]. A tool name that clashes is reported when an
    /// agent is built.
    pub fn plugin(self, plugin: Arc<dyn Plugin>) -> Self {
        self.plugin_with_config(plugin, serde_json::Value::Null)
    }

    /// Adds `plugin` as [`plugin`](Self::plugin) does, with `config` for its
    /// [`PluginContext::config`](crate::PluginContext::config).
    pub fn plugin_with_config(mut self, plugin: Arc<dyn Plugin>, config: serde_json::Value) -> Self {
        let middlewares = self.plugins.register(plugin, config);
        self.middleware.extend(middlewares);
        self
    }

    /// Whether spans record prompts, responses, tool arguments and results
    /// ([`Runner::with_content_capture`]); off by default.
    pub fn capture_content(mut self, capture: bool) -> Self {
        self.capture_content = capture;
        self
    }

    /// The engine; without providers, it resolves with [`Providers::builtin`].
    pub fn build(self) -> Engine {
        Engine {
            resolver: self.resolver.unwrap_or_else(|| Arc::new(Providers::builtin())),
            metrics: self.metrics.unwrap_or_default(),
            tool_concurrency: self.tool_concurrency.unwrap_or(DEFAULT_TOOL_CONCURRENCY),
            compactor: self.compactor,
            durability: self.durability,
            middleware: self.middleware,
            plugins: self.plugins,
            capture_content: self.capture_content,
        }
    }
}

/// Builds one [`Agent`]: its workspace, tools, instructions, model, limits and policy.
///
/// ```no_run
/// use troupe_model::Providers;
/// use troupe_runtime::{ApprovalPolicy, Engine};
///
/// # async fn demo() -> Result<(), troupe_runtime::RuntimeError> {
/// let engine = Engine::builder().providers(Providers::builtin()).build();
/// let coder = engine
///     .agent("coder")
///     .workspace(".")
///     .coding_tools()
///     .instructions("You fix failing tests.")
///     .model("anthropic/claude-sonnet-4-5")
///     .max_iterations(20)
///     .budget_usd(0.5)
///     .approval(ApprovalPolicy::default())
///     .build()?;
/// let output = coder.run("Make `cargo test` pass.").await?;
/// println!("{}", output.text);
/// # Ok(())
/// # }
/// ```
pub struct AgentBuilder {
    engine: Engine,
    spec: AgentSpec,
    workspace: Option<PathBuf>,
    tools: Vec<Arc<dyn Tool>>,
    capabilities: Option<CapabilitySet>,
    audit: Option<Arc<dyn AuditLog>>,
    rate_limit: Option<Arc<RateLimit>>,
}

impl AgentBuilder {
    /// Starts from a whole spec (its name included), e.g. one read from a file.
    pub fn spec(mut self, spec: AgentSpec) -> Self {
        self.spec = spec;
        self
    }

    /// Confines the agent's tools to `dir` (default: the current directory).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// Adds every built-in tool: files, search, shell and git.
    pub fn coding_tools(self) -> Self {
        self.tools(troupe_tools::coding_tools())
    }

    /// Adds the built-in tools that only observe.
    pub fn readonly_tools(self) -> Self {
        self.tools(troupe_tools::readonly_tools())
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

    /// Restricts the agent to the named tools of those added.
    pub fn only_tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.spec.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the system instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.spec.instructions = instructions.into();
        self
    }

    /// Sets the model (`provider/model`, or `demo`).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.spec.model = model.into();
        self
    }

    /// Sets the most model calls of a run.
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.spec.limits.max_iterations = n;
        self
    }

    /// Sets the longest a run may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.spec.limits.timeout = Some(timeout);
        self
    }

    /// Sets the most a run may cost, in USD.
    pub fn budget_usd(mut self, usd: f64) -> Self {
        self.spec.limits.max_usd = Some(usd);
        self
    }

    /// Sets the most tokens a run may use.
    pub fn max_total_tokens(mut self, tokens: u64) -> Self {
        self.spec.limits.max_total_tokens = Some(tokens);
        self
    }

    /// Sets the most tokens one response may generate.
    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.spec.limits.max_output_tokens = Some(tokens);
        self
    }

    /// Sets the approval policy.
    pub fn approval(mut self, policy: ApprovalPolicy) -> Self {
        self.spec.approval = policy;
        self
    }

    /// Sets the approval mode, keeping the rules.
    pub fn approval_mode(mut self, mode: ApprovalMode) -> Self {
        self.spec.approval.mode = mode;
        self
    }

    /// Adds an approval rule after the existing ones.
    pub fn approval_rule(mut self, rule: ApprovalRule) -> Self {
        self.spec.approval.rules.push(rule);
        self
    }

    /// Grants the agent `capabilities` (paths it may read and write, shell, network
    /// hosts). Every tool call is checked against them before approval is even asked; a
    /// call outside them is refused and the model is told why. Without this, the
    /// workspace confinement of the tools is the only limit.
    pub fn capabilities(mut self, capabilities: CapabilitySet) -> Self {
        self.capabilities = Some(capabilities);
        self
    }

    /// Writes every security decision of the agent's runs (capability checks, approval
    /// decisions) to `audit`.
    pub fn audit_log(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Gives the agent a rate limit of its own, after the engine's middlewares; its quotas
    /// change with [`Agent::reconfigure`](crate::Agent::reconfigure). An agent that should
    /// follow a configured rate limit that may come later can start with an unlimited
    /// [`RateLimit::new`].
    pub fn rate_limit(mut self, limit: Arc<RateLimit>) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Compacts the conversation by `policy` before model calls, in place of the engine's
    /// How each request's stable prefix is marked for the vendor's prompt cache: the short
    /// TTL by default, [`CacheTtl::Long`](troupe_core::CacheTtl::Long) for an hour (a day
    /// at OpenAI), `None` to ask for no caching.
    pub fn prompt_cache(mut self, ttl: Option<troupe_core::CacheTtl>) -> Self {
        self.spec.prompt_cache = ttl;
        self
    }

    /// compactor.
    pub fn compaction(mut self, policy: CompactionPolicy) -> Self {
        self.spec.compaction = Some(policy);
        self
    }

    /// Accepts only these signal kinds (cancellation and approvals are always accepted).
    pub fn accept_signals(mut self, kinds: impl IntoIterator<Item = SignalKind>) -> Self {
        self.spec.accepted_signals = kinds.into_iter().collect();
        self
    }

    /// Runs `hook` when a signal of `kind` arrives.
    pub fn on_signal(mut self, kind: SignalKind, hook: impl SignalHook + 'static) -> Self {
        self.spec.signal_hooks.on(kind, Arc::new(hook));
        self
    }

    /// The agent. Fails when the workspace is not a directory, tools clash or are
    /// unknown, an approval rule cannot match, or the model does not resolve (a missing
    /// key is found here, not at the first call).
    pub fn build(self) -> Result<Agent, RuntimeError> {
        let dir = self.workspace.unwrap_or_else(|| PathBuf::from("."));
        let workspace = Workspace::new(&dir).map_err(RuntimeError::Workspace)?;
        let engine = &self.engine;
        let catalog = ToolCatalog::with_tools(self.tools.into_iter().chain(engine.plugins.tools()))
            .map_err(|source| RuntimeError::Catalog { agent: self.spec.name.clone(), source })?;
        let mut runner = Runner::new(Arc::clone(&engine.resolver), Arc::new(catalog), Arc::new(workspace))
            .with_metrics(Arc::clone(&engine.metrics))
            .with_tool_concurrency(engine.tool_concurrency)
            .with_plugin_set(engine.plugins.clone())
            .with_middleware_stack(&engine.middleware)
            .with_content_capture(engine.capture_content);
        if let Some(compactor) = &self.engine.compactor {
            runner = runner.with_compactor(Arc::clone(compactor));
        }
        if let Some(durability) = &self.engine.durability {
            runner = runner.with_store(durability.clone());
        }
        if let Some(capabilities) = self.capabilities {
            runner = runner.with_authorizer(Arc::new(CapabilityAuthorizer::new(capabilities)));
        }
        if let Some(audit) = self.audit {
            runner = runner.with_audit_log(audit);
        }
        if let Some(limit) = &self.rate_limit {
            runner = runner.with_middleware(Arc::clone(limit) as Arc<dyn Middleware>);
        }
        runner.validate(&self.spec)?;
        let agent = Agent::new(runner, self.spec);
        Ok(match self.rate_limit {
            Some(limit) => agent.with_rate_limit(limit),
            None => agent,
        })
    }
}
