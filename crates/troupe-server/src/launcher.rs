//! What a server can run: the [`Launcher`] trait, and [`AgentLauncher`] for local agents.
//!
//! The server knows nothing of how a run is made: it asks its launcher for the targets
//! (agents and teams) it exposes and to start one. A launched run is a stream of
//! [`AgentEvent`]s, a way to signal it, a cancellation token and its end.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, RunId, RunOutcomeKind, Usage};
use troupe_runtime::{Agent, RunInput, RunOutput, RuntimeError, SignalSender};

/// What kind of thing a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// One agent.
    Agent,
    /// A team of agents.
    Team,
}

/// An agent or team a server exposes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Target {
    /// Its name, as used in requests.
    pub name: String,
    /// What it does, for people and for other agents choosing it.
    pub description: String,
    /// Agent or team.
    pub kind: TargetKind,
    /// The model it runs on by default (`provider/model`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The tools it may call.
    pub tools: Vec<String>,
    /// The JSON schema of each tool's arguments, by tool, where the server knows it: what
    /// a person editing a waiting call's arguments fills in (a team's: its members' tools,
    /// a remote member's as its server gives them).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, serde_json::Value>,
}

impl Target {
    /// `agent` as the target `name`: its current model (a reloaded one included) and the
    /// tools its catalog gives it, with their arguments' schemas.
    pub fn agent(name: &str, agent: &Agent, description: &str) -> Self {
        let spec = agent.current_spec();
        // Each tool's name and arguments' schema, in the catalog's order.
        let tools: Vec<(String, serde_json::Value)> = agent
            .runner()
            .agent_catalog(&spec)
            .map(|c| {
                c.declarations()
                    .into_iter()
                    .map(|d| (d.name.clone(), serde_json::Value::clone(&d.input_schema)))
                    .collect()
            })
            .unwrap_or_default();
        Target {
            name: name.to_owned(),
            description: description.to_owned(),
            kind: TargetKind::Agent,
            model: Some(spec.model.clone()),
            tools: tools.iter().map(|(name, _)| name.clone()).collect(),
            inputs: tools.into_iter().collect(),
        }
    }
}

/// How a launched run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The outcome.
    pub outcome: RunOutcomeKind,
    /// The final answer, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What went wrong, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens used.
    pub usage: Usage,
    /// Cost by the registry's prices.
    pub cost_usd: f64,
}

impl RunEnd {
    /// A failed end with `error`.
    pub fn failed(error: impl Into<String>) -> Self {
        RunEnd {
            outcome: RunOutcomeKind::Failed,
            output: None,
            error: Some(error.into()),
            usage: Usage::default(),
            cost_usd: 0.0,
        }
    }
}

impl From<Result<RunOutput, RuntimeError>> for RunEnd {
    fn from(result: Result<RunOutput, RuntimeError>) -> Self {
        match result {
            Ok(output) => {
                let outcome = output.outcome.kind();
                let error = match &output.outcome {
                    troupe_runtime::RunOutcome::Failed { error, .. } => Some(error.clone()),
                    _ => None,
                };
                let text = (!output.text.is_empty()).then(|| output.text.clone());
                RunEnd { outcome, output: text, error, usage: output.usage, cost_usd: output.cost_usd }
            }
            Err(error) => RunEnd::failed(error.to_string()),
        }
    }
}

/// A run that has started.
pub struct LaunchedRun {
    /// Its id.
    pub run_id: RunId,
    /// Its events, live, ending after its last one.
    pub events: BoxStream<'static, AgentEvent>,
    /// Sends it signals, when it takes them.
    pub signals: Option<RunSignals>,
    /// Stops it.
    pub cancel: CancellationToken,
    /// Resolves when it has ended.
    pub end: BoxFuture<'static, RunEnd>,
}

impl std::fmt::Debug for LaunchedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchedRun").field("run_id", &self.run_id).finish_non_exhaustive()
    }
}

impl LaunchedRun {
    /// A launched run from a runtime [`RunHandle`](troupe_runtime::RunHandle).
    pub fn from_handle(handle: troupe_runtime::RunHandle) -> Self {
        let troupe_runtime::RunHandle { run_id, events, signals, cancel, result } = handle;
        LaunchedRun {
            run_id,
            events: events.boxed(),
            signals: Some(RunSignals::Run(signals)),
            cancel,
            end: Box::pin(async move { RunEnd::from(result.await) }),
        }
    }
}

/// Where a launched run's signals go.
#[derive(Clone)]
#[non_exhaustive]
pub enum RunSignals {
    /// An agent's run: every signal, to the run.
    Run(SignalSender),
    /// A team's run: a decision about a member's call goes to the member run that waits
    /// on it, through the team's control; a cancellation stops the team; other signals
    /// are not taken.
    Team(troupe_team::TeamControl),
    /// A stored run this server does not hold: every signal is stored for whichever
    /// process holds the run (a paused run goes back to the queue, to be adopted).
    Store {
        /// The store.
        store: std::sync::Arc<dyn troupe_store::Store>,
        /// The run.
        run_id: String,
    },
}

impl std::fmt::Debug for RunSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunSignals::Run(sender) => f.debug_tuple("Run").field(sender).finish(),
            RunSignals::Team(control) => f.debug_tuple("Team").field(control).finish(),
            RunSignals::Store { store, run_id } => {
                f.debug_struct("Store").field("store", &store.info()).field("run_id", run_id).finish()
            }
        }
    }
}

/// Why a run could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// No target has that name.
    #[error("no agent or team is named `{0}`")]
    UnknownTarget(String),
    /// The target exists but refused the request (a model it cannot use, say).
    #[error("{0}")]
    Refused(String),
}

/// Starts runs of the agents and teams a server exposes.
pub trait Launcher: Send + Sync + 'static {
    /// The targets, in a stable order.
    fn targets(&self) -> Vec<Target>;

    /// The target named `name`, if there is one: what a request naming it is checked
    /// against. The default looks through [`targets`](Self::targets); a launcher that can
    /// describe one target without describing them all (each with its tools' schemas)
    /// does so here.
    fn target(&self, name: &str) -> Option<Target> {
        self.targets().into_iter().find(|t| t.name == name)
    }

    /// Starts a run of `target` with `input`.
    fn launch(&self, target: &str, input: RunInput) -> Result<LaunchedRun, LaunchError>;
}

/// A launcher over local [`Agent`]s, by name.
#[derive(Clone, Debug, Default)]
pub struct AgentLauncher {
    agents: BTreeMap<String, (Agent, String)>,
}

impl AgentLauncher {
    /// A launcher with no agents.
    pub fn new() -> Self {
        AgentLauncher::default()
    }

    /// Exposes `agent` under its spec's name, described by `description`.
    pub fn agent(mut self, agent: Agent, description: impl Into<String>) -> Self {
        self.agents.insert(agent.spec().name.clone(), (agent, description.into()));
        self
    }
}

impl Launcher for AgentLauncher {
    fn targets(&self) -> Vec<Target> {
        self.agents.iter().map(|(name, (agent, description))| Target::agent(name, agent, description)).collect()
    }

    fn target(&self, name: &str) -> Option<Target> {
        self.agents.get_key_value(name).map(|(name, (agent, description))| Target::agent(name, agent, description))
    }

    fn launch(&self, target: &str, input: RunInput) -> Result<LaunchedRun, LaunchError> {
        let (agent, _) = self.agents.get(target).ok_or_else(|| LaunchError::UnknownTarget(target.to_owned()))?;
        Ok(LaunchedRun::from_handle(agent.start(input)))
    }
}
