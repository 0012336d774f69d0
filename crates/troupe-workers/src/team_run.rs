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

use crate::build::{self, Approvals, BuildError, SandboxChoice};
use crate::registry::AgentRegistry;
use crate::team::{Assembled, BRIEF_EVENT, REPORT_EVENT, Record, Row, Setting, TeamResult, Work};
use crate::team_file::{Isolation, TeamFile};
use crate::team_record::{TeamInput, TeamResumeError};
use crate::team_remote::RemoteMembers;
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
use troupe_store::{
    Checkpoint, EvidenceChain, EvidenceKind, NewEvidence, NewRun, RunFilter, RunSpend, RunStatus, Store, StoreError,
    now_millis,
};
use troupe_team::ContextFirewall;
use troupe_team::firewall::FirewallStats;
use troupe_team::{EventSink, PausedRun, TeamBudget, TeamControl};

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
    sandbox: SandboxChoice,
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
            sandbox: SandboxChoice::default(),
        }
    }

    /// How the local members' commands are confined: `troupe.toml`'s `[sandbox]` under
    /// each agent file's, under the command line's choice (default: `workspace-write`).
    pub fn sandbox(mut self, sandbox: SandboxChoice) -> Self {
        self.sandbox = sandbox;
        self
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
    /// needs it, the local agents' MCP servers, connected once, and its remote members
    /// ([`RemoteMembers::resolve`]: tokens read from the environment, cards read).
    pub async fn service(self) -> Result<TeamService, BuildError> {
        let TeamFiles { team, registry } = self.files;
        let memory = match self.memory {
            Some(memory) => memory,
            None => build::memory_store(&self.workspace, registry.iter().map(|entry| &entry.definition)).await?,
        };
        let local =
            team.team.members.iter().filter(|m| m.isolation == Isolation::Local).filter_map(|m| m.agent.as_deref());
        let leader_and_local = team.leader().into_iter().chain(local).filter_map(|id| registry.get(id));
        let mcp = build::connect_mcp_each(leader_and_local, &self.workspace).await?;
        let remotes = RemoteMembers::resolve(team).await?;
        Ok(TeamService {
            files: self.files.clone(),
            workspace: self.workspace,
            config: self.config,
            approvals: self.approvals,
            memory,
            mcp,
            durability: self.durability,
            sandbox: self.sandbox,
            remotes,
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
    sandbox: SandboxChoice,
    remotes: RemoteMembers,
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
        let control = TeamControl::new();
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
            control: control.clone(),
            sandbox: &self.sandbox,
            remotes: &self.remotes,
        };
        let assembled = crate::team::assemble(&setting)?;
        Ok(PreparedTeam {
            workspace: self.workspace.clone(),
            name: team.name().to_owned(),
            budget: team.budget().unwrap_or_default(),
            assembled,
            received,
            durability: self.durability.clone(),
            control,
            input: TeamInput::new(&self.files, "", &self.workspace, self.approvals),
            resumed: None,
            run_id: None,
        })
    }

    /// The JSON schema of the arguments of each tool a member may call, by tool, as a run
    /// of the team would assemble its members ([`Assembled::inputs`]).
    pub fn tool_inputs(&self) -> Result<std::collections::BTreeMap<String, serde_json::Value>, BuildError> {
        Ok(self.prepare()?.assembled.inputs)
    }

    /// Records a run of the team on `task` in the store's queue, for a worker to run
    /// ([`troupe_durable::QueueWorker::with_claimed_runs`]); returns its id.
    pub async fn enqueue(&self, task: &str) -> Result<RunId, TeamResumeError> {
        let durability = self.durability.as_ref().ok_or(TeamResumeError::NoStore)?;
        let run_id = RunId::generate();
        let input = TeamInput::new(&self.files, task, &self.workspace, self.approvals);
        let mut queued = team_run(&run_id, &input);
        queued.status = RunStatus::Queued;
        durability.store().create_run(queued, now_millis()).await?;
        Ok(run_id)
    }

    /// Assembles the team's members to resume its stored run `run_id`: a team paused for
    /// a person, or stopped by a crash. The members whose runs finished are answered from
    /// the store without running again; an interrupted member's run resumes from its last
    /// checkpoint (the single run's rule: a call that may or may not have happened waits
    /// for a person). Refused for a run that is not this team's, that has finished, or
    /// whose files changed since it started (unless `force`).
    pub async fn resume(&self, run_id: &str, force: bool) -> Result<PreparedTeam, TeamResumeError> {
        let durability = self.durability.as_ref().ok_or(TeamResumeError::NoStore)?;
        let record =
            durability.store().load_run(run_id).await?.ok_or_else(|| TeamResumeError::UnknownRun(run_id.to_owned()))?;
        let Some(recorded) = TeamInput::read(&record)? else {
            return Err(TeamResumeError::NotTeamRun { run_id: record.id, agent: record.agent });
        };
        let name = self.files.team.name();
        if recorded.team != name {
            return Err(TeamResumeError::OtherTeam {
                run_id: record.id,
                recorded: recorded.team,
                this: name.to_owned(),
            });
        }
        if record.status.is_terminal() {
            return Err(TeamResumeError::Finished { run_id: record.id, status: record.status });
        }
        let now = TeamInput::new(&self.files, &recorded.instruction, &self.workspace, self.approvals);
        let changes = recorded.changes(&now);
        if !changes.is_empty() && !force {
            return Err(TeamResumeError::Changed { run_id: record.id, changes });
        }
        let mut prepared = self.prepare()?;
        prepared.input = recorded;
        prepared.resumed = Some(RunId::new(record.id));
        Ok(prepared)
    }
}

/// A team whose members are built, ready to run one task (or to resume one stored run,
/// [`TeamService::resume`]).
pub struct PreparedTeam {
    name: String,
    workspace: PathBuf,
    budget: TeamBudget,
    assembled: Assembled,
    received: mpsc::Receiver<AgentEvent>,
    durability: Option<Durability>,
    control: TeamControl,
    input: TeamInput,
    resumed: Option<RunId>,
    run_id: Option<RunId>,
}

impl PreparedTeam {
    /// The directory its members work in.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Who is in the team, leader first.
    pub fn rows(&self) -> &[Row] {
        &self.assembled.rows
    }

    /// What could not be honoured of the agent files (tools left out, a key not used).
    pub fn notes(&self) -> &[String] {
        &self.assembled.notes
    }

    /// The agents of its leader and local members, by name (a member in a worker process
    /// has none here).
    pub fn agents(&self) -> &std::collections::BTreeMap<String, troupe_runtime::Agent> {
        &self.assembled.agents
    }

    /// The firewall its members' reports pass, as its team file declares it now: what a
    /// replay checks a recorded run's decisions against.
    pub fn firewall(&self) -> &ContextFirewall {
        &self.assembled.firewall
    }

    /// The handle on the members' runs: decide a member's waiting call (its `RunPaused`
    /// event names the member's run), defer approvals so that the team pauses instead of
    /// waiting, halt the team.
    pub fn control(&self) -> TeamControl {
        self.control.clone()
    }

    /// The same team, its run recorded under `run_id` (a server's run id, say) instead of
    /// a generated one. Ignored when the team resumes a stored run.
    pub fn with_run_id(mut self, run_id: RunId) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// The stored run this team resumes, when it was prepared to resume one.
    pub fn resumes(&self) -> Option<&RunId> {
        self.resumed.as_ref()
    }

    /// The task of the stored run this team resumes.
    pub fn resumed_task(&self) -> Option<&str> {
        self.resumed.as_ref().map(|_| self.input.instruction.as_str())
    }

    /// Resumes the stored run it was prepared for ([`TeamService::resume`]) on its
    /// recorded task, as [`run`](Self::run) runs a new one.
    pub async fn resume(self, events: Option<EventSink>, cancel: CancellationToken) -> TeamReport {
        let task = self.input.instruction.clone();
        self.run(&task, events, cancel).await
    }

    /// Runs the team on `task` until it ends, `cancel` is cancelled, or a team budget
    /// runs out (then every member is stopped). Every member's events go to `events`.
    ///
    /// When a member needs a decision nobody gives live ([`TeamControl::defer_approvals`]),
    /// the member's run pauses, every other member is halted where it stands, and the
    /// team's run is recorded paused ([`TeamReport::paused`]), to be resumed
    /// ([`TeamService::resume`]) once the calls are decided.
    pub async fn run(self, task: &str, events: Option<EventSink>, cancel: CancellationToken) -> TeamReport {
        let PreparedTeam {
            name, budget, assembled, mut received, durability, control, mut input, resumed, run_id, ..
        } = self;
        let Assembled { work, firewall, records, meter, .. } = assembled;
        let store = durability.as_ref().map(|d| Arc::clone(d.store()));
        input.instruction = task.to_owned();
        let run_id = resumed.clone().or(run_id).unwrap_or_else(RunId::generate);
        if let Some(store) = &store {
            let opened = match &resumed {
                None => store.create_run(team_run(&run_id, &input), now_millis()).await.map(drop),
                Some(_) => match team_state(&run_id, RunStatus::Running, &input, json!({})) {
                    Ok(going) => store.checkpoint(going, now_millis()).await.map(drop),
                    Err(error) => Err(error),
                },
            };
            if let Err(error) = opened {
                let mut report = TeamReport::unrun(&cancel);
                report.unrecorded = Some(error.to_string());
                return report;
            }
        }
        // A wall time past what an `Instant` holds (from a file: any number) is none.
        let deadline = budget.max_wall_time.and_then(|t| tokio::time::Instant::now().checked_add(t));
        // A resumed team's budget goes on from what its members spent before.
        let mut spend = match (&resumed, &store) {
            (Some(_), Some(store)) => TeamSpend::recorded(store.as_ref(), run_id.as_str()).await.unwrap_or_default(),
            _ => TeamSpend::default(),
        };
        let mut exceeded = spend.over(&budget);
        if exceeded.is_some() {
            cancel.cancel();
        }
        // Each local member's call checks this first: none starts once the budget is spent.
        meter.arm(spend.usage.total(), spend.cost_usd, cancel.clone());
        let mut log = match &store {
            Some(store) => Some(TeamLog::open(Arc::clone(store), &run_id).await),
            None => None,
        };
        let parent = store.is_some().then(|| run_id.clone());
        let mut work = tokio::spawn(Work::run_under(work, name.clone(), task.to_owned(), parent, cancel.clone()));
        let mut paused = Vec::new();
        let joined = loop {
            let timer = async {
                match deadline {
                    Some(at) if exceeded.is_none() => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(event) = received.recv() => {
                    let Some(event) = keep(&mut log, event).await else { continue };
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
                () = control.pause_noticed(), if paused.is_empty() => {
                    // A member waits for a person nobody is there to be: stop every member
                    // where it stands; the team resumes from their records.
                    control.halt();
                    work.abort();
                    paused = control.paused();
                }
                joined = &mut work => break joined,
            }
        };
        while let Ok(event) = received.try_recv() {
            let Some(event) = keep(&mut log, event).await else { continue };
            spend.observe(&event);
            forward(events.as_ref(), event).await;
        }
        // A member's gate may have stopped the team before its events were read: the meter
        // counted its calls as they ended, so the spend is at least the meter's.
        if exceeded.is_none() {
            exceeded = meter.stopped();
        }
        let (metered_tokens, metered_usd) = meter.spent();
        let (result, crashed) = match joined {
            Ok(result) => (result, None),
            Err(error) if error.is_cancelled() && !paused.is_empty() => {
                (TeamResult { output: String::new(), error: None }, None)
            }
            Err(error) => (TeamResult { output: String::new(), error: None }, Some(error.to_string())),
        };
        let records = records.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let mut report = TeamReport {
            run_id: store.is_some().then_some(run_id),
            unrecorded: None,
            paused,
            output: result.output,
            error: result.error,
            records,
            firewall: firewall.stats(),
            exceeded,
            cancelled: cancel.is_cancelled(),
            crashed,
            tokens: spend.usage.total().max(metered_tokens),
            usage: spend.usage,
            cost_usd: spend.cost_usd.max(metered_usd),
        };
        report.unrecorded = log.and_then(|log| log.failed);
        if let (Some(store), Some(run_id)) = (&store, report.run_id.clone()) {
            let saved = match team_end(&run_id, &input, &report, &budget) {
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

/// The team's own run as it starts: its input, and a state that says it is a team's (so
/// it is never taken for an agent's run).
fn team_run(run_id: &RunId, input: &TeamInput) -> NewRun {
    NewRun {
        id: run_id.to_string(),
        agent: input.team.clone(),
        status: RunStatus::Running,
        conversation_id: None,
        parent_run_id: None,
        input: troupe_store::StoredJson::encode(input).unwrap_or_default(),
        state: json!({"kind": TEAM_RUN_KIND, "team": input.team, "instruction": input.instruction}).into(),
        // Its members' spend, as they report it: nothing yet.
        spend: Some(RunSpend::rollup(0, 0.0)),
    }
}

/// The team's own run in `status`, with `more` in its state.
fn team_state(
    run_id: &RunId,
    status: RunStatus,
    input: &TeamInput,
    more: serde_json::Value,
) -> Result<Checkpoint, StoreError> {
    let mut state = json!({"kind": TEAM_RUN_KIND, "team": input.team, "instruction": input.instruction});
    if let (Some(state), serde_json::Value::Object(more)) = (state.as_object_mut(), more) {
        state.extend(more);
    }
    let state = serde_json::value::to_raw_value(&state)
        .map_err(|e| StoreError::database(format!("cannot encode the team run's state: {e}")))?;
    Ok(Checkpoint::new(run_id.to_string(), status, state))
}

/// The team's own run as it ended (or paused): its status, and what it came to in its
/// state: each member's outcome, the calls waiting, the spend against its budget, what
/// its firewall let through and withheld.
fn team_end(
    run_id: &RunId,
    input: &TeamInput,
    report: &TeamReport,
    budget: &TeamBudget,
) -> Result<Checkpoint, StoreError> {
    let failure = report.failure();
    let status = match (&failure, &report.exceeded) {
        (None, _) => RunStatus::Completed,
        (Some(_), _) if !report.paused.is_empty() => RunStatus::Paused,
        (Some(_), Some(_)) => RunStatus::BudgetExceeded,
        (Some(_), None) if report.cancelled => RunStatus::Cancelled,
        (Some(_), None) => RunStatus::Failed,
    };
    let members: Vec<serde_json::Value> = report
        .records
        .iter()
        .map(|r| json!({"agent": r.name, "success": r.success, "error": r.error, "tokens": r.usage.total(), "cost_usd": r.cost_usd}))
        .collect();
    let paused: Vec<serde_json::Value> =
        report.paused.iter().map(|p| json!({"member": p.member, "run_id": p.run_id, "calls": p.pending})).collect();
    let more = json!({
        "output": report.output,
        "error": failure,
        "members": members,
        "paused": paused,
        "tokens": report.tokens,
        "cost_usd": report.cost_usd,
        "budget": budget,
        "exceeded": report.exceeded,
        "firewall": report.firewall,
    });
    Ok(team_state(run_id, status, input, more)?.with_spend(RunSpend::rollup(report.tokens, report.cost_usd)))
}

/// The team's own evidence: each brief a member got and each report that reached its
/// recipient, appended as they happen.
struct TeamLog {
    store: Arc<dyn Store>,
    chain: EvidenceChain,
    /// The first write that failed: the team goes on, and its report says the record is
    /// short.
    failed: Option<String>,
}

impl TeamLog {
    async fn open(store: Arc<dyn Store>, run_id: &RunId) -> TeamLog {
        let (chain, failed) = match store.last_evidence(run_id.as_str()).await {
            Ok(last) => (EvidenceChain::after(run_id.as_str(), last.as_ref()), None),
            Err(error) => (EvidenceChain::new(run_id.as_str()), Some(error.to_string())),
        };
        TeamLog { store, chain, failed }
    }

    async fn append(&mut self, kind: EvidenceKind, value: serde_json::Value) {
        if self.failed.is_some() {
            return;
        }
        let mut entry = NewEvidence::new(kind, value.clone());
        if let Some(task) = value.get("task_id").and_then(serde_json::Value::as_str) {
            entry = entry.for_call(task);
        }
        let sealed = self.chain.seal(vec![entry], now_millis());
        match self.store.append_evidence(&sealed, None).await {
            Ok(()) => self.chain.advance(&sealed),
            Err(error) => self.failed = Some(error.to_string()),
        }
    }
}

/// `event`, unless it is one of the team's own (a brief or a report), which goes to the
/// team's log instead.
async fn keep(log: &mut Option<TeamLog>, event: AgentEvent) -> Option<AgentEvent> {
    let kind = match &event.kind {
        AgentEventKind::Custom { name, .. } if name == BRIEF_EVENT => EvidenceKind::BriefSent,
        AgentEventKind::Custom { name, .. } if name == REPORT_EVENT => EvidenceKind::ReportReceived,
        _ => return Some(event),
    };
    if let (Some(log), AgentEventKind::Custom { value, .. }) = (log, event.kind) {
        log.append(kind, value).await;
    }
    None
}

async fn forward(events: Option<&EventSink>, event: AgentEvent) {
    if let Some(sink) = events {
        // A watcher that went away does not stop the team.
        let _ = sink.send(event).await;
    }
}

/// The most runs under a team whose spend [`TeamSpend::recorded`] adds up.
const MAX_RECORDED_RUNS: usize = 10_000;

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

    /// What the runs under the team's run `team_run` have spent so far, as their records
    /// say: a resumed team starts its budget from there, not from nothing.
    pub async fn recorded(store: &dyn Store, team_run: &str) -> Result<TeamSpend, StoreError> {
        let mut spend = TeamSpend::default();
        let mut parents = vec![team_run.to_owned()];
        // Bounded: a tree deeper or wider than this is not a team's.
        let mut visited = 0usize;
        while let Some(parent) = parents.pop() {
            let filter = RunFilter { parent_run_id: Some(parent), ..RunFilter::default() };
            // The children's records in one read, without their conversations.
            for child in store.list_run_records(&filter).await? {
                visited += 1;
                if visited > MAX_RECORDED_RUNS {
                    return Ok(spend);
                }
                let usage = child.state.get("usage").cloned().map(serde_json::from_value::<Usage>);
                spend.usage += usage.and_then(Result::ok).unwrap_or_default();
                let cost = child.state.get("cost_usd").and_then(serde_json::Value::as_f64).unwrap_or(0.0);
                spend.cost_usd += if cost.is_finite() { cost } else { 0.0 };
                parents.push(child.id);
            }
        }
        Ok(spend)
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
    /// The member runs that paused for a person nobody was there to be: the team stopped
    /// and its run is recorded paused, to resume once their calls are decided.
    pub paused: Vec<PausedRun>,
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
    /// Tokens every member spent together: at least what the team's gates counted call by
    /// call, so a call whose events were not yet read when the team stopped counts too.
    pub tokens: u64,
    /// The same, by kind, as the members' events told it.
    pub usage: Usage,
    /// USD every member spent together (priced models only), counted as `tokens` is.
    pub cost_usd: f64,
}

impl TeamReport {
    /// The report of a team that never started.
    fn unrun(cancel: &CancellationToken) -> Self {
        TeamReport {
            run_id: None,
            unrecorded: None,
            paused: Vec::new(),
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
        if !self.paused.is_empty() {
            let calls: usize = self.paused.iter().map(|p| p.pending.len()).sum();
            let who: Vec<&str> = self.paused.iter().map(|p| p.member.as_str()).collect();
            return Some(format!(
                "the team paused: {calls} call{} of {} wait{} for a person",
                if calls == 1 { "" } else { "s" },
                who.join(", "),
                if calls == 1 { "s" } else { "" }
            ));
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

    #[tokio::test]
    async fn a_resumed_teams_spend_starts_from_what_its_runs_recorded() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store =
            troupe_store::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.expect("opens");
        let run = |id: &str, parent: Option<&str>, input: u64, cost: f64| NewRun {
            id: id.to_owned(),
            agent: id.to_owned(),
            status: RunStatus::Running,
            conversation_id: None,
            parent_run_id: parent.map(str::to_owned),
            input: json!({}).into(),
            state: json!({"usage": {"input_tokens": input, "output_tokens": 10}, "cost_usd": cost}).into(),
            spend: None,
        };
        for new in [
            run("team", None, 0, 0.0),
            run("lead", Some("team"), 100, 0.25),
            run("coder", Some("lead"), 200, 0.5),
            run("elsewhere", None, 999, 9.0),
        ] {
            store.create_run(new, 1).await.expect("creates");
        }
        let spend = TeamSpend::recorded(store.as_ref(), "team").await.expect("adds up");
        assert_eq!((spend.usage.input_tokens, spend.usage.output_tokens), (300, 20));
        assert!((spend.cost_usd - 0.75).abs() < 1e-9, "{}", spend.cost_usd);
        let budget = TeamBudget { max_total_tokens: Some(300), ..TeamBudget::default() };
        assert!(spend.over(&budget).is_some(), "the team resumes over its budget");
    }

    #[test]
    fn the_first_budget_crossed_is_named_with_its_limit() {
        let budget = TeamBudget { max_usd: Some(1.0), max_total_tokens: Some(100), ..TeamBudget::default() };
        assert_eq!(over_budget(&budget, 99, 0.5), None);
        assert_eq!(over_budget(&budget, 100, 0.5).as_deref(), Some("tokens (max_total_tokens = 100)"));
        assert_eq!(over_budget(&budget, 100, 1.0).as_deref(), Some("usd (max_usd = 1)"));
    }
}
