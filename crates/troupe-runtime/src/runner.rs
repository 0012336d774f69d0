//! [`Runner`]: the I/O shell around [`RunState`].
//!
//! The runner asks the state what to do, does it (streams the model, runs tools, waits for
//! decisions), feeds the result back, and projects every step as [`AgentEvent`]s. Each run
//! is one spawned task whose future is `Send`, so any number of runs share a multi-thread
//! runtime.

use crate::compaction::{Compactor, PolicyCompactor};
use crate::cost::CostTracker;
use crate::durable::journal::Journal;
use crate::durable::recorder::{Recorder, RecorderSetup};
use crate::durable::{Durability, ResumePlan, StoredInput, plan_resume, state_from_value};
use crate::error::RuntimeError;
use crate::genai;
use crate::handle::{EVENT_BUFFER, RunEvents, RunHandle, RunInput, RunResult, SIGNAL_BUFFER, SignalSender};
use crate::live::Emitter;
use crate::live_spec::LiveSpec;
use crate::metrics::Metrics;
use crate::middleware::{Middleware, MiddlewareStack};
use crate::plugin::{Plugin, PluginContext, PluginError};
use crate::plugins::PluginSet;
use crate::resolver::ModelResolver;
use crate::task::Run;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use troupe_core::{AgentId, RunId};
use troupe_run::AgentSpec;
use troupe_run::RunState;
use troupe_store::{EvidenceChain, EvidenceKind, Lease, NewEvidence, RunStatus, now_millis};
use troupe_tools::{AuditLog, Authorizer, NoAudit, ToolCatalog, Workspace};

/// Which definition a run goes by: a fixed spec, or a [`LiveSpec`] whose later revisions
/// the run takes at its boundaries (what an [`Agent`](crate::Agent)'s runs go by).
#[derive(Clone)]
pub enum SpecSource<'a> {
    /// This spec, for the whole run.
    Fixed(Arc<AgentSpec>),
    /// The live spec's latest revision, and those after it.
    Live(&'a LiveSpec),
}

impl<'a> SpecSource<'a> {
    /// The spec in force now.
    pub fn spec(&self) -> Arc<AgentSpec> {
        match self {
            SpecSource::Fixed(spec) => Arc::clone(spec),
            SpecSource::Live(live) => live.spec(),
        }
    }

    fn live(&self) -> Option<&'a LiveSpec> {
        match self {
            SpecSource::Fixed(_) => None,
            SpecSource::Live(live) => Some(live),
        }
    }
}

impl From<Arc<AgentSpec>> for SpecSource<'_> {
    fn from(spec: Arc<AgentSpec>) -> Self {
        SpecSource::Fixed(spec)
    }
}

impl From<AgentSpec> for SpecSource<'_> {
    fn from(spec: AgentSpec) -> Self {
        SpecSource::Fixed(Arc::new(spec))
    }
}

impl<'a> From<&'a LiveSpec> for SpecSource<'a> {
    fn from(live: &'a LiveSpec) -> Self {
        SpecSource::Live(live)
    }
}

/// What a run's task starts from.
struct Launch<'a> {
    /// The spec in force at the start.
    spec: Arc<AgentSpec>,
    /// Its live source, when the run follows revisions.
    live: Option<&'a LiveSpec>,
    /// The state the run starts (or goes on) from.
    state: RunState,
    /// The task, for a run's first start.
    instruction: String,
    /// Whether the run starts now (not resumed): it announces its start.
    fresh: bool,
    /// How the run records.
    recorder: RecorderSetup,
}

/// Tool calls of one batch that may run at once, by default.
pub const DEFAULT_TOOL_CONCURRENCY: usize = 8;

/// Runs agents: owns the loop every agent shares.
///
/// ```
/// use std::sync::Arc;
/// use troupe_model::DemoProvider;
/// use troupe_runtime::{AgentSpec, FixedModel, Runner, RunInput};
/// use troupe_tools::{AuditLog, Authorizer, NoAudit, ToolCatalog, Workspace};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let model = FixedModel::new(Arc::new(DemoProvider::new().with_delay(std::time::Duration::ZERO)), "demo");
/// let runner = Runner::new(Arc::new(model), Arc::new(ToolCatalog::new()), Arc::new(Workspace::new(dir.path())?));
/// let handle = runner.start(Arc::new(AgentSpec::new("greeter", "demo")), RunInput::new("hello"));
/// let output = handle.output().await?;
/// assert!(output.is_completed());
/// assert!(output.text.contains("hello"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Runner {
    resolver: Arc<dyn ModelResolver>,
    catalog: Arc<ToolCatalog>,
    workspace: Arc<Workspace>,
    metrics: Arc<Metrics>,
    tool_concurrency: usize,
    compactor: Option<Arc<dyn Compactor>>,
    keep_events: bool,
    authorizer: Option<Arc<dyn Authorizer>>,
    audit: Arc<dyn AuditLog>,
    durability: Option<Durability>,
    middleware: MiddlewareStack,
    plugins: PluginSet,
    capture_content: bool,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("catalog", &self.catalog)
            .field("workspace", &self.workspace.root())
            .field("tool_concurrency", &self.tool_concurrency)
            .field("compactor", &self.compactor.is_some())
            .field("keep_events", &self.keep_events)
            .field("durability", &self.durability)
            .field("middleware", &self.middleware)
            .field("plugins", &self.plugins)
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// A runner resolving models with `resolver` and running tools of `catalog` in
    /// `workspace`, with fresh metrics, [`DEFAULT_TOOL_CONCURRENCY`] and no compaction.
    pub fn new(resolver: Arc<dyn ModelResolver>, catalog: Arc<ToolCatalog>, workspace: Arc<Workspace>) -> Self {
        Runner {
            resolver,
            catalog,
            workspace,
            metrics: Arc::new(Metrics::new()),
            tool_concurrency: DEFAULT_TOOL_CONCURRENCY,
            compactor: None,
            keep_events: true,
            authorizer: None,
            audit: Arc::new(NoAudit),
            durability: None,
            middleware: MiddlewareStack::new(),
            plugins: PluginSet::default(),
            capture_content: false,
        }
    }

    /// The same runner resolving models with `resolver` instead: what a replay does to
    /// answer from a recording, keeping everything else (middleware, policy, tools).
    pub fn with_resolver(mut self, resolver: Arc<dyn ModelResolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// The same runner with `catalog` as its tools instead.
    pub fn with_catalog(mut self, catalog: Arc<ToolCatalog>) -> Self {
        self.catalog = catalog;
        self
    }

    /// Runs `middleware`'s hooks around every model call and tool call, after those
    /// added before it.
    pub fn with_middleware(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Adds `plugin`: its tools join the catalog, its middlewares the stack (after those
    /// added before it); it is initialized when the first run starts (or by
    /// [`initialize_plugins`](Self::initialize_plugins)). Fails when one of its tools
    /// has the name of a tool already in the catalog.
    pub fn with_plugin(self, plugin: Arc<dyn Plugin>) -> Result<Self, RuntimeError> {
        self.with_plugin_config(plugin, serde_json::Value::Null)
    }

    /// Adds `plugin` as [`with_plugin`](Self::with_plugin) does, with `config` for its
    /// [`PluginContext::config`].
    pub fn with_plugin_config(
        mut self,
        plugin: Arc<dyn Plugin>,
        config: serde_json::Value,
    ) -> Result<Self, RuntimeError> {
        let mut plugins = self.plugins.clone();
        let middlewares = plugins.register(plugin, config);
        let mut catalog = ToolCatalog::clone(&self.catalog);
        catalog
            .register_all(plugins.last_tools())
            .map_err(|source| PluginError::Tools { plugin: plugins.last_name(), source })?;
        self.catalog = Arc::new(catalog);
        self.middleware.extend(middlewares);
        self.plugins = plugins;
        Ok(self)
    }

    /// Uses the plugins of an engine, whose tools the catalog already holds.
    pub(crate) fn with_plugin_set(mut self, plugins: PluginSet) -> Self {
        self.plugins = plugins;
        self
    }

    /// Runs every middleware of `stack` after those already added.
    pub(crate) fn with_middleware_stack(mut self, stack: &MiddlewareStack) -> Self {
        self.middleware.extend(stack.iter().cloned());
        self
    }

    /// Whether spans record what was said: prompts and responses
    /// (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`),
    /// tool arguments and results. Off by default: spans carry names, ids, models, token
    /// counts and errors only. What is recorded is what middlewares let through.
    pub fn with_content_capture(mut self, capture: bool) -> Self {
        self.capture_content = capture;
        self
    }

    /// The middlewares run around every call, in order.
    pub fn middleware(&self) -> &MiddlewareStack {
        &self.middleware
    }

    /// The names of the registered plugins, in order.
    pub fn plugin_names(&self) -> Vec<&str> {
        self.plugins.names()
    }

    /// Initializes the plugins not yet initialized, now, in this runner's workspace
    /// (otherwise the first run does it).
    pub async fn initialize_plugins(&self) -> Result<(), PluginError> {
        let ctx = PluginContext::new(Arc::clone(&self.workspace), Arc::clone(&self.metrics));
        self.plugins.initialize(&ctx).await
    }

    /// Shuts down every initialized plugin, last registered first; runs started after
    /// this fail with code `plugin`. Runs still going keep their middlewares and tools.
    pub async fn shutdown_plugins(&self) {
        self.plugins.shutdown().await;
    }

    /// Records every run in `durability`'s store: checkpoints at each boundary, evidence
    /// of every side effect, signals through the store, a lease with a heartbeat.
    pub fn with_store(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Where runs are recorded, if anywhere.
    pub fn durability(&self) -> Option<&Durability> {
        self.durability.as_ref()
    }

    /// Counts runs into `metrics` (shared with other runners, say).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Lets at most `n` read-only calls of one turn run at once (0 counts as 1).
    pub fn with_tool_concurrency(mut self, n: usize) -> Self {
        self.tool_concurrency = n.max(1);
        self
    }

    /// Checks every tool call against `authorizer` (the agent's capabilities) as soon as
    /// the model requests it, before approval is even asked; a denied call becomes an
    /// error result the model sees, and the tool never runs.
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Records every security decision (capability checks, approval decisions, policy
    /// denials) to `audit`.
    pub fn with_audit_log(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.audit = audit;
        self
    }

    /// Calls `compactor` before every model call.
    pub fn with_compactor(mut self, compactor: Arc<dyn Compactor>) -> Self {
        self.compactor = Some(compactor);
        self
    }

    /// Whether [`RunOutput::events`](crate::RunOutput::events) keeps every event (the
    /// default); turning it off saves memory when the live stream is consumed anyway.
    pub fn with_events_kept(mut self, keep: bool) -> Self {
        self.keep_events = keep;
        self
    }

    /// The model resolver.
    pub fn resolver(&self) -> &Arc<dyn ModelResolver> {
        &self.resolver
    }

    /// The catalog of every tool agents of this runner may be given.
    pub fn catalog(&self) -> &Arc<ToolCatalog> {
        &self.catalog
    }

    /// The workspace tools are confined to.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    /// The runs' metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The tools `spec` may call: all of the catalog, or the subset it names.
    pub fn agent_catalog(&self, spec: &AgentSpec) -> Result<Arc<ToolCatalog>, RuntimeError> {
        match &spec.tools {
            None => Ok(Arc::clone(&self.catalog)),
            Some(names) => self
                .catalog
                .subset(names)
                .map(Arc::new)
                .map_err(|source| RuntimeError::Catalog { agent: spec.name.clone(), source }),
        }
    }

    /// Checks `spec` against this runner: its tools exist, its approval rules can match,
    /// its model resolves.
    pub fn validate(&self, spec: &AgentSpec) -> Result<(), RuntimeError> {
        self.agent_catalog(spec)?;
        spec.approval.validate().map_err(RuntimeError::InvalidSpec)?;
        self.resolver.resolve(&spec.model)?;
        Ok(())
    }

    /// Starts a run of `spec` on a spawned task; must be called inside a Tokio runtime.
    /// `spec` is an `Arc<AgentSpec>`, or a [`LiveSpec`] whose later revisions the run
    /// follows.
    ///
    /// Problems found once the run is going (an unknown tool name in the spec, a model
    /// that does not resolve) end it [`Failed`](crate::RunOutcome::Failed) with a code.
    pub fn start<'a>(&self, spec: impl Into<SpecSource<'a>>, input: RunInput) -> RunHandle {
        let source = spec.into();
        let spec = source.spec();
        let recorder = match &self.durability {
            Some(durability) => RecorderSetup::Create(
                durability.clone(),
                Box::new(StoredInput::new(&spec, &input).in_workspace(self.workspace.root())),
            ),
            None => RecorderSetup::Off,
        };
        let run_id = input.run_id.clone().unwrap_or_else(RunId::generate);
        let model_id = input.model.clone().unwrap_or_else(|| spec.model.clone());
        let state = RunState::new(run_id, spec.name.clone(), model_id, String::new())
            .with_history(input.history)
            .with_instruction(&input.instruction)
            .with_attachments(input.attachments)
            .with_conversation(input.conversation_id)
            .with_parent(input.parent_run_id)
            .with_output(input.output.or_else(|| spec.output.clone()))
            .with_client_tools(input.client_tools)
            .with_shared_state(input.shared_state);
        self.launch(Launch { spec, live: source.live(), state, instruction: input.instruction, fresh: true, recorder })
    }

    /// Records a run of `spec` with `input` in the store's queue, for a worker to run;
    /// returns its id.
    pub async fn enqueue(&self, spec: &AgentSpec, input: RunInput) -> Result<RunId, RuntimeError> {
        let durability = self.durability.as_ref().ok_or(RuntimeError::NoStore)?;
        let run_id = input.run_id.clone().unwrap_or_else(RunId::generate);
        let stored = StoredInput::new(spec, &input).in_workspace(self.workspace.root());
        durability.store().create_run(stored.new_run(&run_id, RunStatus::Queued), now_millis()).await?;
        Ok(run_id)
    }

    /// Continues the stored run whose lease this process holds (a worker's claim, or one
    /// taken to resume the run by its id: `troupe_durable::ResumeRun`): plans the resume
    /// from its evidence ([`plan_resume`]) and runs it. `spec` replaces the stored
    /// definition (to bring back signal hooks, say); the configuration the run applied
    /// while it was going ([`RunState::applied_spec`]) stays in force either way. A run
    /// that cannot go on here gives its lease back.
    pub async fn resume_leased(&self, lease: Lease, spec: Option<Arc<AgentSpec>>) -> Result<RunHandle, RuntimeError> {
        self.resume_stored(lease, spec.map(SpecSource::Fixed)).await
    }

    /// Continues a stored run whose lease this process holds, by `spec` when given.
    pub(crate) async fn resume_stored(
        &self,
        lease: Lease,
        spec: Option<SpecSource<'_>>,
    ) -> Result<RunHandle, RuntimeError> {
        let durability = self.durability.as_ref().ok_or(RuntimeError::NoStore)?;
        let live = spec.as_ref().and_then(SpecSource::live);
        let spec = spec.map(|source| source.spec());
        match self.prepare_resume(durability, &lease, spec).await {
            Ok((spec, state, instruction, fresh, journal)) => {
                let recorder = RecorderSetup::Ready(durability.clone(), Box::new(journal));
                Ok(self.launch(Launch { spec, live, state, instruction, fresh, recorder }))
            }
            Err(error) => {
                // The run cannot go on here: let another process (or a person) have it.
                let _ = durability.store().release(&lease, None).await;
                Err(error)
            }
        }
    }

    async fn prepare_resume(
        &self,
        durability: &Durability,
        lease: &Lease,
        spec: Option<Arc<AgentSpec>>,
    ) -> Result<(Arc<AgentSpec>, RunState, String, bool, Journal), RuntimeError> {
        let store = durability.store();
        let run_id = lease.run_id.as_str();
        let record = store
            .load_run(run_id)
            .await?
            .ok_or_else(|| troupe_store::StoreError::UnknownRun { run_id: run_id.to_owned() })?;
        if record.status.is_terminal() && crate::durable::resumable_failure(&record).is_none() {
            return Err(RuntimeError::RunFinished);
        }
        let input = StoredInput::from_value(record.input)?;
        let here = self.workspace.root().display().to_string();
        if let Some(started_in) = input.workspace.as_deref().filter(|w| *w != here) {
            // The tools act on this process's workspace: say so, for a run moved between machines.
            tracing::warn!(run = run_id, started_in, resuming_in = %here, "the run resumes in another workspace");
        }
        let mut state = state_from_value(run_id, record.state)?;
        let evidence = store.evidence(run_id, 0).await?;
        let pending = store.pending_signals(run_id, state.signal_cursor()).await?;
        let fresh = evidence.is_empty();
        let mut journal =
            Journal::new(Arc::clone(store), EvidenceChain::after(run_id, evidence.last()), Some(lease.clone()))
                .with_instruction(&input.instruction);
        let instruction = if fresh { input.instruction.clone() } else { String::new() };
        if let Some((code, error)) = state.reopen_failed() {
            // A failed run goes on from its last checkpoint: the model call it was making
            // (or the one after the tools it ran) is made again.
            let payload = serde_json::json!({ "after_failure": code.as_str(), "error": error, "owner": lease.owner });
            journal.note(NewEvidence::new(EvidenceKind::ResumePlanned, payload));
        }
        if !fresh {
            let plan: ResumePlan = plan_resume(&state, &evidence, &pending);
            plan.apply(&mut state);
            state.reopen();
            if !plan.calls.is_empty() {
                let payload = serde_json::json!({ "calls": plan.calls, "owner": lease.owner, "epoch": lease.epoch });
                journal.note(NewEvidence::new(EvidenceKind::ResumePlanned, payload));
            }
        }
        let spec = spec.unwrap_or_else(|| Arc::new(input.spec));
        Ok((spec, state, instruction, fresh, journal))
    }

    /// Continues a run from `state`, typically a [`Paused`](crate::RunOutcome::Paused) one whose
    /// decisions arrive as signals on the new handle (or were already applied to it).
    ///
    /// The resumed run emits no second `RunStarted`; its events number on from the last
    /// one the run emitted ([`RunState::event_seq`]). This continues a state held in
    /// memory and records nothing; a stored run is continued with
    /// [`resume_leased`](Self::resume_leased).
    pub fn resume<'a>(&self, spec: impl Into<SpecSource<'a>>, mut state: RunState) -> RunHandle {
        let source = spec.into();
        state.reopen();
        let (spec, live) = (source.spec(), source.live());
        self.launch(Launch {
            spec,
            live,
            state,
            instruction: String::new(),
            fresh: false,
            recorder: RecorderSetup::Off,
        })
    }

    /// Spawns a run's task: every run, fresh or resumed, fixed or live, starts here.
    fn launch(&self, launch: Launch<'_>) -> RunHandle {
        let Launch { spec, live, state, instruction, fresh, recorder } = launch;
        // A configuration the run applied before it stopped stays in force.
        let (spec, live) = crate::task::reconfigure::launch_spec(spec, &state, live);
        let (event_tx, event_rx) = mpsc::channel(EVENT_BUFFER);
        let (signal_tx, signal_rx) = mpsc::channel(SIGNAL_BUFFER);
        let cancel = CancellationToken::new();
        let defer = CancellationToken::new();
        let suspend = CancellationToken::new();
        let run_id = state.run_id().clone();
        let span =
            genai::agent_span(&spec.name, &run_id, state.conversation_id(), state.parent_run_id(), state.model());
        let emitter = Emitter::new(
            AgentId::new(spec.name.clone()),
            run_id.clone(),
            state.conversation_id().cloned(),
            state.parent_run_id().cloned(),
            event_tx,
            self.keep_events,
        )
        .starting_at(state.event_seq());
        // An agent's own policy takes precedence over the runner's compactor.
        let compactor = match &spec.compaction {
            Some(policy) => Some(Arc::new(PolicyCompactor::new(policy.clone())) as Arc<dyn Compactor>),
            None => self.compactor.clone(),
        };
        let launched = Instant::now();
        let catalog = self.agent_catalog(&spec);
        let run = Run {
            // A timeout past what an `Instant` holds (from a file: any number) is none.
            deadline: spec.limits.timeout.and_then(|t| launched.checked_add(t)),
            live,
            launched,
            tools: catalog.as_ref().map(Arc::clone).unwrap_or_default(),
            catalog,
            spec,
            resolver: Arc::clone(&self.resolver),
            workspace: Arc::clone(&self.workspace),
            compactor,
            authorizer: self.authorizer.clone(),
            audit: Arc::clone(&self.audit),
            tool_concurrency: self.tool_concurrency,
            metrics: Arc::clone(&self.metrics),
            emitter,
            signals: signal_rx,
            queued: VecDeque::new(),
            cancel: cancel.clone(),
            costs: CostTracker::new(),
            announced: state.messages().len(),
            paused: HashSet::new(),
            step: 0,
            open_step: None,
            recorder: Recorder::Off,
            defer: defer.clone(),
            suspend: suspend.clone(),
            middleware: self.middleware.clone(),
            plugins: self.plugins.clone(),
            capture_content: self.capture_content,
            span: span.clone(),
            digester: crate::durable::RequestDigester::new(),
            retry_watch: None,
        };
        // The span is the run's whole task, across every await. The run's future (some
        // 10 KB) is boxed once: spawned as it is, tokio's task cell holds it inline, and
        // the spawn, the task's first poll and the reading of its output each copy the
        // whole cell.
        let join = tokio::spawn(Box::pin(run.run(state, instruction, fresh, recorder)).instrument(span));
        RunHandle {
            run_id,
            events: RunEvents::new(event_rx),
            signals: SignalSender::new(signal_tx, cancel.clone(), defer, suspend),
            cancel,
            result: RunResult::new(join),
        }
    }
}
