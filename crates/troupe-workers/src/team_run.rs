//! A team file run on a task from code, as `troupe team run` runs it: [`TeamFiles`] finds
//! and checks the team and its agents, [`TeamRun`] builds and assembles its members, and
//! [`PreparedTeam::run`] runs them, passing every member's events on, watching the
//! team's budget (tokens and USD across every member, and wall time), and reporting what
//! each member call came to. A team run many times, as `troupe serve` serves one, is a
//! [`TeamService`] ([`TeamRun::service`]): what every run shares (MCP connections, the
//! memory store) is opened once, and [`TeamService::prepare`] assembles each run's
//! members.
//!
//! ```no_run
//! # async fn example() -> Result<(), troupe_workers::build::BuildError> {
//! use troupe_workers::team_run::{TeamFiles, TeamRun};
//! use tokio_util::sync::CancellationToken;
//!
//! let files = TeamFiles::load("team.toml".as_ref(), &[".troupe".into()])?;
//! let team = TeamRun::new(&files, ".").prepare().await?;
//! let report = team.run("Summarize the README", None, CancellationToken::new()).await;
//! match report.failure() {
//!     None => println!("{}", report.output),
//!     Some(why) => eprintln!("{why}"),
//! }
//! # Ok(())
//! # }
//! ```

use crate::build::{self, Approvals, BuildError};
use crate::registry::AgentRegistry;
use crate::team::{Assembled, Record, Row, Setting, TeamResult, Work};
use crate::team_file::{Isolation, TeamFile};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_core::RunId;
use troupe_core::{AgentEvent, AgentEventKind, Usage};
use troupe_mcp::McpToolset;
use troupe_model::ModelConfig;
use troupe_runtime::Durability;
use troupe_runtime::durable::TEAM_RUN_KIND;
use troupe_store::{Checkpoint, NewRun, RunStatus, Store, StoreError, now_millis};
use troupe_team::firewall::FirewallStats;
use troupe_team::{EventSink, TeamBudget};

/// How many member events may wait for the team's watcher.
const EVENT_BUFFER: usize = 4096;

/// A team file and the agents it names, found and checked against each other.
#[derive(Clone, Debug)]
pub struct TeamFiles {
    team: TeamFile,
    registry: AgentRegistry,
}

impl TeamFiles {
    /// Loads the team file at `path` and the agent files of `agent_dirs` (each holding
    /// `agents/*.toml` or `agents.d/**/*.toml`); every agent the team names must be there.
    pub fn load(path: &Path, agent_dirs: &[PathBuf]) -> Result<Self, BuildError> {
        let team = TeamFile::load(path).map_err(|e| BuildError::Invalid(e.to_string()))?;
        let registry = AgentRegistry::discover(agent_dirs).map_err(|e| BuildError::Invalid(e.to_string()))?;
        Self::new(team, registry, agent_dirs)
    }

    /// `team` with the agents of `registry` (found in `searched`, for the message when
    /// the team names an agent that is not there).
    pub fn new(team: TeamFile, registry: AgentRegistry, searched: &[PathBuf]) -> Result<Self, BuildError> {
        if let Err(problems) = team.check_agents(&registry) {
            let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
            let searched: Vec<String> = searched.iter().map(|d| d.display().to_string()).collect();
            return Err(BuildError::Invalid(format!(
                "the team names agents that are not defined (looked in {}):\n  {}",
                searched.join(", "),
                lines.join("\n  ")
            )));
        }
        Ok(TeamFiles { team, registry })
    }

    /// The team file.
    pub fn team(&self) -> &TeamFile {
        &self.team
    }

    /// Its agents.
    pub fn registry(&self) -> &AgentRegistry {
        &self.registry
    }
}

/// How a team file is to be run: where, with which providers, and what its members'
/// calls that need approval do.
pub struct TeamRun<'a> {
    files: &'a TeamFiles,
    workspace: PathBuf,
    config: ModelConfig,
    approvals: Approvals,
    memory: Option<Option<Arc<dyn Store>>>,
    durability: Option<Durability>,
}

impl<'a> TeamRun<'a> {
    /// The team of `files`, its members working in `workspace`, with the default model
    /// configuration, refusing every call that needs approval (nobody is asked).
    pub fn new(files: &'a TeamFiles, workspace: impl Into<PathBuf>) -> Self {
        TeamRun {
            files,
            workspace: workspace.into(),
            config: ModelConfig::default(),
            approvals: Approvals::Refuse,
            memory: None,
            durability: None,
        }
    }

    /// Records each run of the team in `durability`'s store: the team's own run, its
    /// local members' runs as its children (a member's run a child of the run that gave
    /// it its task), each durable like any run.
    pub fn store(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Providers and models as `config` (a workspace's `troupe.toml`) says.
    pub fn config(mut self, config: ModelConfig) -> Self {
        self.config = config;
        self
    }

    /// What a member's call that needs approval does.
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// The store the members' memories live in (`None`: no memory tools), shared with
    /// whoever else holds it, instead of the one the agent files name.
    pub fn memory(mut self, memory: Option<Arc<dyn Store>>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Opens what every run of the team shares: the store for memories when a member
    /// needs it, the local agents' MCP servers, connected once.
    pub async fn service(self) -> Result<TeamService, BuildError> {
        let TeamFiles { team, registry } = self.files;
        let memory = match self.memory {
            Some(memory) => memory,
            None => build::memory_store(&self.workspace, registry.iter().map(|entry| &entry.definition)).await?,
        };
        let local = team.team.members.iter().filter(|m| m.isolation == Isolation::Local).map(|m| m.agent.as_str());
        let leader_and_local = team.leader().into_iter().chain(local).filter_map(|id| registry.get(id));
        let mcp = build::connect_mcp_each(leader_and_local).await?;
        Ok(TeamService {
            files: self.files.clone(),
            workspace: self.workspace,
            config: self.config,
            approvals: self.approvals,
            memory,
            mcp,
            durability: self.durability,
        })
    }

    /// Builds the members for one run: [`service`](Self::service), then
    /// [`TeamService::prepare`].
    pub async fn prepare(self) -> Result<PreparedTeam, BuildError> {
        self.service().await?.prepare()
    }
}

/// A team file ready to run any number of times, each run with members of its own (as
/// `troupe serve` serves a team): what every run shares is opened once.
pub struct TeamService {
    files: TeamFiles,
    workspace: PathBuf,
    config: ModelConfig,
    approvals: Approvals,
    memory: Option<Arc<dyn Store>>,
    mcp: BTreeMap<String, McpToolset>,
    durability: Option<Durability>,
}

impl TeamService {
    /// The team file.
    pub fn team(&self) -> &TeamFile {
        &self.files.team
    }

    /// Assembles the team's members for one run.
    pub fn prepare(&self) -> Result<PreparedTeam, BuildError> {
        let (events, received) = mpsc::channel(EVENT_BUFFER);
        let team = &self.files.team;
        let setting = Setting {
            team,
            registry: &self.files.registry,
            workspace: &self.workspace,
            config: &self.config,
            approvals: self.approvals,
            events,
            memory: self.memory.clone(),
            mcp: self.mcp.clone(),
            durability: self.durability.clone(),
        };
        let assembled = crate::team::assemble(&setting)?;
        Ok(PreparedTeam {
            name: team.name().to_owned(),
            budget: team.budget().unwrap_or_default(),
            assembled,
            received,
            durability: self.durability.clone(),
        })
    }
}

/// A team whose members are built, ready to run one task.
pub struct PreparedTeam {
    name: String,
    budget: TeamBudget,
    assembled: Assembled,
    received: mpsc::Receiver<AgentEvent>,
    durability: Option<Durability>,
}

impl PreparedTeam {
    /// Who is in the team, leader first.
    pub fn rows(&self) -> &[Row] {
        &self.assembled.rows
    }

    /// What could not be honoured of the agent files (tools left out, a key not used).
    pub fn notes(&self) -> &[String] {
        &self.assembled.notes
    }

    /// Runs the team on `task` until it ends, `cancel` is cancelled, or a team budget
    /// runs out (then every member is stopped). Every member's events go to `events`.
    pub async fn run(self, task: &str, events: Option<EventSink>, cancel: CancellationToken) -> TeamReport {
        let PreparedTeam { name, budget, assembled, mut received, durability } = self;
        let Assembled { work, firewall, records, .. } = assembled;
        let store = durability.as_ref().map(|d| Arc::clone(d.store()));
        let run_id = RunId::generate();
        if let Some(store) = &store
            && let Err(error) = store.create_run(team_run(&run_id, &name, task), now_millis()).await
        {
            let mut report = TeamReport::unrun(&cancel);
            report.unrecorded = Some(error.to_string());
            return report;
        }
        let deadline = budget.max_wall_time.map(|t| tokio::time::Instant::now() + t);
        let parent = store.is_some().then(|| run_id.clone());
        let mut work = tokio::spawn(Work::run_under(work, name.clone(), task.to_owned(), parent, cancel.clone()));
        let mut spend = TeamSpend::default();
        let mut exceeded: Option<String> = None;
        let joined = loop {
            let timer = async {
                match deadline {
                    Some(at) if exceeded.is_none() => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(event) = received.recv() => {
                    spend.observe(&event);
                    forward(events.as_ref(), event).await;
                    if exceeded.is_none() && let Some(which) = spend.over(&budget) {
                        exceeded = Some(which);
                        cancel.cancel();
                    }
                }
                () = timer => {
                    exceeded =
                        Some(format!("time (max_seconds = {})", budget.max_wall_time.map_or(0, |t| t.as_secs())));
                    cancel.cancel();
                }
                joined = &mut work => break joined,
            }
        };
        while let Ok(event) = received.try_recv() {
            spend.observe(&event);
            forward(events.as_ref(), event).await;
        }
        let (result, crashed) = match joined {
            Ok(result) => (result, None),
            Err(error) => (TeamResult { output: String::new(), error: None }, Some(error.to_string())),
        };
        let records = records.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let mut report = TeamReport {
            run_id: store.is_some().then_some(run_id),
            unrecorded: None,
            output: result.output,
            error: result.error,
            records,
            firewall: firewall.stats(),
            exceeded,
            cancelled: cancel.is_cancelled(),
            crashed,
            tokens: spend.usage.total(),
            usage: spend.usage,
            cost_usd: spend.cost_usd,
        };
        if let (Some(store), Some(run_id)) = (&store, report.run_id.clone()) {
            let saved = match team_end(&run_id, &name, task, &report) {
                Ok(end) => store.checkpoint(end, now_millis()).await.map(drop),
                Err(error) => Err(error),
            };
            if let Err(error) = saved {
                report.unrecorded = Some(error.to_string());
            }
        }
        report
    }
}

/// The team's own run as it starts: its task as input, and a state that says it is a
/// team's (so it is never taken for an agent's run).
fn team_run(run_id: &RunId, team: &str, task: &str) -> NewRun {
    NewRun {
        id: run_id.to_string(),
        agent: team.to_owned(),
        status: RunStatus::Running,
        conversation_id: None,
        parent_run_id: None,
        input: json!({"kind": TEAM_RUN_KIND, "team": team, "instruction": task}),
        state: json!({"kind": TEAM_RUN_KIND, "team": team, "instruction": task}),
    }
}

/// The team's own run as it ended: its status, and what it came to in its state.
fn team_end(run_id: &RunId, team: &str, task: &str, report: &TeamReport) -> Result<Checkpoint, StoreError> {
    let failure = report.failure();
    let status = match (&failure, &report.exceeded) {
        (None, _) => RunStatus::Completed,
        (Some(_), Some(_)) => RunStatus::BudgetExceeded,
        (Some(_), None) if report.cancelled => RunStatus::Cancelled,
        (Some(_), None) => RunStatus::Failed,
    };
    let members: Vec<serde_json::Value> = report
        .records
        .iter()
        .map(|r| json!({"agent": r.name, "success": r.success, "error": r.error, "tokens": r.usage.total(), "cost_usd": r.cost_usd}))
        .collect();
    let state = json!({
        "kind": TEAM_RUN_KIND,
        "team": team,
        "instruction": task,
        "output": report.output,
        "error": failure,
        "members": members,
        "tokens": report.tokens,
        "cost_usd": report.cost_usd,
    });
    let state = serde_json::value::to_raw_value(&state)
        .map_err(|e| StoreError::database(format!("cannot encode the team run's state: {e}")))?;
    Ok(Checkpoint::new(run_id.to_string(), status, state))
}

async fn forward(events: Option<&EventSink>, event: AgentEvent) {
    if let Some(sink) = events {
        // A watcher that went away does not stop the team.
        let _ = sink.send(event).await;
    }
}

/// What a team's members have spent together, counted from their `usage` events.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TeamSpend {
    /// Every member's tokens.
    pub usage: Usage,
    /// Every member's cost in USD (priced models only).
    pub cost_usd: f64,
}

impl TeamSpend {
    /// Counts `event` when it is a model call's usage.
    pub fn observe(&mut self, event: &AgentEvent) {
        if let AgentEventKind::Usage { usage, cost_usd, .. } = &event.kind {
            self.usage += *usage;
            if let Some(cost) = cost_usd.filter(|c| c.is_finite()) {
                self.cost_usd += cost;
            }
        }
    }

    /// The first of `budget`'s token and USD limits this spend has reached, with its
    /// limit (see [`over_budget`]).
    pub fn over(&self, budget: &TeamBudget) -> Option<String> {
        over_budget(budget, self.usage.total(), self.cost_usd)
    }
}

/// Which of the team's budgets `tokens` and `cost_usd`, spent by every member together,
/// have crossed, if any, with the limit that was crossed.
pub fn over_budget(budget: &TeamBudget, tokens: u64, cost_usd: f64) -> Option<String> {
    if let Some(max) = budget.max_usd
        && cost_usd >= max
    {
        return Some(format!("usd (max_usd = {max})"));
    }
    if let Some(max) = budget.max_total_tokens
        && tokens >= max
    {
        return Some(format!("tokens (max_total_tokens = {max})"));
    }
    None
}

/// What a team run came to.
#[derive(Clone, Debug)]
pub struct TeamReport {
    /// The team's own run in the store, when the team was run with one
    /// ([`TeamRun::store`]): its members' runs are its children.
    pub run_id: Option<RunId>,
    /// Why the team's run could not be recorded in its store, if it could not.
    pub unrecorded: Option<String>,
    /// The answer (possibly partial).
    pub output: String,
    /// Why the team's strategy did not complete, when it did not.
    pub error: Option<String>,
    /// Every member call, in the order they ended.
    pub records: Vec<Record>,
    /// What the firewall passed, dropped and redacted.
    pub firewall: FirewallStats,
    /// The team budget that ran out, if one did, with its limit.
    pub exceeded: Option<String>,
    /// Whether the team was stopped (cancelled, or a budget ran out).
    pub cancelled: bool,
    /// Why the team's task crashed, if it did.
    pub crashed: Option<String>,
    /// Tokens every member spent together.
    pub tokens: u64,
    /// The same, by kind.
    pub usage: Usage,
    /// USD every member spent together (priced models only).
    pub cost_usd: f64,
}

impl TeamReport {
    /// The report of a team that never started.
    fn unrun(cancel: &CancellationToken) -> Self {
        TeamReport {
            run_id: None,
            unrecorded: None,
            output: String::new(),
            error: None,
            records: Vec::new(),
            firewall: FirewallStats::default(),
            exceeded: None,
            cancelled: cancel.is_cancelled(),
            crashed: None,
            tokens: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
        }
    }

    /// Why the team did not complete its task; `None` when it did, every member call
    /// included.
    pub fn failure(&self) -> Option<String> {
        if let Some(why) = &self.unrecorded {
            return Some(format!("the team's run could not be recorded: {why}"));
        }
        if let Some(crash) = &self.crashed {
            return Some(format!("the team's task crashed: {crash}"));
        }
        if let Some(which) = &self.exceeded {
            return Some(format!("the team stopped: its {which} budget ran out ([team.budget])"));
        }
        if self.cancelled {
            return Some("the team was cancelled".to_owned());
        }
        let failed: Vec<String> = self
            .records
            .iter()
            .filter(|r| !r.success)
            .map(|r| format!("{}: {}", r.name, r.error.as_deref().unwrap_or("it did not complete")))
            .collect();
        match (&self.error, failed.is_empty()) {
            (None, true) => None,
            (Some(error), true) => Some(format!("the team did not complete: {error}")),
            (_, false) => Some(format!("the team did not complete: {}", failed.join("; "))),
        }
    }

    /// Whether the team completed its task.
    pub fn is_completed(&self) -> bool {
        self.failure().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_budget_crossed_is_named_with_its_limit() {
        let budget = TeamBudget { max_usd: Some(1.0), max_total_tokens: Some(100), ..TeamBudget::default() };
        assert_eq!(over_budget(&budget, 99, 0.5), None);
        assert_eq!(over_budget(&budget, 100, 0.5).as_deref(), Some("tokens (max_total_tokens = 100)"));
        assert_eq!(over_budget(&budget, 100, 1.0).as_deref(), Some("usd (max_usd = 1)"));
    }
}
