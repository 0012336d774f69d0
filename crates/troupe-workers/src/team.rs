//! A team file, assembled: its local agents (built as [`build`] builds an agent), its
//! worker processes and its remote A2A agents, each behind a tracked member that reports its events,
//! records its results and passes its report through the firewall; and the strategy that
//! runs them.

use crate::build::{self, AgentBuild, Approvals, BuildError, Ceilings, SandboxChoice};
use crate::definition::AgentDefinition;
use crate::process::{Backoff, ModelHost, ProcessMember, WorkerConfig};
use crate::registry::{AgentRegistry, RegisteredAgent};
use crate::team_file::{Isolation, TeamFile, TeamStrategy};
use crate::team_meter::{TeamGate, TeamMeter};
use crate::team_remote::RemoteMembers;
use futures::future::BoxFuture;
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId, Usage};
use troupe_model::ModelConfig;
use troupe_runtime::{Durability, OutputSpec};
use troupe_store::Store;
use troupe_team::firewall::FirewallDrop;
use troupe_team::message::AgentMessage;
use troupe_team::{
    AgentGroup, AgentMember, ContextFirewall, DelegateTool, Delegations, EventSink, Member, MemberResult, MemberTask,
    Strategy, TeamBudget, TeamControl, TeamError,
};
use troupe_tools::Tool;

/// What one member call came to.
#[derive(Clone, Debug)]
pub struct Record {
    /// The member.
    pub name: String,
    /// Whether it completed its task.
    pub success: bool,
    /// Why not.
    pub error: Option<String>,
    /// Its tokens.
    pub usage: Usage,
    /// Its cost.
    pub cost_usd: f64,
    /// How long it took.
    pub elapsed: Duration,
}

/// Every member call so far, in the order they ended.
pub type Records = Arc<Mutex<Vec<Record>>>;

/// A row of the summary: who is in the team.
#[derive(Clone, Debug)]
pub struct Row {
    /// The member's id in the team (an agent id, or a remote member's name).
    pub name: String,
    /// `leader` or `member`.
    pub role: &'static str,
    /// Where it runs.
    pub isolation: Isolation,
}

/// How the team works on its task.
pub enum Work {
    /// The leader, holding a `delegate` tool over the members.
    Delegate {
        /// The leader.
        leader: Arc<dyn Member>,
        /// The members' tasks its `delegate` tool started: the team ends once they have.
        delegations: Delegations,
    },
    /// A group (orchestrated, parallel, pipeline).
    Group(AgentGroup),
}

/// What the team gave back.
pub struct TeamResult {
    /// The answer (possibly partial).
    pub output: String,
    /// Why the team did not complete, when it did not.
    pub error: Option<String>,
}

impl Work {
    /// Runs the team on `task` until it ends or `cancel` is cancelled.
    pub async fn run(self, team: String, task: String, cancel: CancellationToken) -> TeamResult {
        self.run_under(team, task, None, cancel).await
    }

    /// [`run`](Self::run), the first members' runs recorded as children of `parent`
    /// (the team's own run).
    pub async fn run_under(
        self,
        team: String,
        task: String,
        parent: Option<RunId>,
        cancel: CancellationToken,
    ) -> TeamResult {
        match self {
            Work::Delegate { leader, delegations } => {
                let mut task = MemberTask::new(format!("{team}/task"), "user", task);
                task.parent_run_id = parent;
                let result = leader.run(task, None, cancel).await;
                // A leader stopped mid-delegation left its member stopping: the team ends,
                // and its calls are counted, once that member's run has ended too.
                delegations.settled().await;
                TeamResult { output: result.content, error: result.error.or((!result.success).then(String::new)) }
            }
            Work::Group(group) => match group.run_under(&task, parent, None, cancel).await {
                Ok(output) => TeamResult { output: output.output, error: None },
                Err(TeamError::Cancelled) => TeamResult { output: String::new(), error: Some("cancelled".to_owned()) },
                Err(error) => TeamResult { output: String::new(), error: Some(error.to_string()) },
            },
        }
    }
}

/// A team ready to run.
pub struct Assembled {
    /// How it runs.
    pub work: Work,
    /// Who is in it, leader first.
    pub rows: Vec<Row>,
    /// What passes between members.
    pub firewall: Arc<ContextFirewall>,
    /// Every member call, as it ends.
    pub records: Records,
    /// What could not be honoured of the agent files.
    pub notes: Vec<String>,
    /// The agents of the leader and the local members, by name: what a replay of one of
    /// their recorded runs runs as.
    pub agents: std::collections::BTreeMap<String, troupe_runtime::Agent>,
    /// The team's spend, counted as each call ends; armed when the team runs.
    pub meter: Arc<TeamMeter>,
    /// The JSON schema of the arguments of each tool a member may call, by tool: the
    /// leader's and local members' catalogs, then the built-in tools a worker member is
    /// allowed, then a remote member's tools as its server gave them (a troupe server's
    /// extended card does).
    pub inputs: std::collections::BTreeMap<String, serde_json::Value>,
}

/// What every member is built with.
pub struct Setting<'a> {
    /// The team file.
    pub team: &'a TeamFile,
    /// Its agents.
    pub registry: &'a AgentRegistry,
    /// Where the members work.
    pub workspace: &'a Path,
    /// The workspace's `troupe.toml`.
    pub config: &'a ModelConfig,
    /// What a call that needs approval does (nobody can be asked in a team).
    pub approvals: Approvals,
    /// Where every member's events go.
    pub events: EventSink,
    /// The store the members' memories live in, when some member has memory tools.
    pub memory: Option<Arc<dyn Store>>,
    /// The connected MCP servers of the local agents, by agent id.
    pub mcp: std::collections::BTreeMap<String, troupe_mcp::McpToolset>,
    /// Where the local members' runs are recorded, each a child of the run that gave it
    /// its task; `None` records nothing.
    pub durability: Option<Durability>,
    /// What the team's caller holds over the local members' runs.
    pub control: TeamControl,
    /// How the local members' commands are confined.
    pub sandbox: &'a SandboxChoice,
    /// The remote members, made ready ([`RemoteMembers::resolve`]).
    pub remotes: &'a RemoteMembers,
}

/// Builds the team `setting` describes.
pub fn assemble(setting: &Setting<'_>) -> Result<Assembled, BuildError> {
    let team = setting.team;
    let strategy = team.team.strategy;
    let budget = team.budget().unwrap_or_default();
    let ids = setting.remotes.names(team);
    // Where each member's report goes: the leader, or a pipeline's next member.
    let recipient = |n: usize| -> Option<String> {
        match strategy {
            TeamStrategy::Delegate | TeamStrategy::Orchestrated => team.leader().map(str::to_owned),
            TeamStrategy::Pipeline => ids.get(n + 1).cloned(),
            TeamStrategy::Parallel => None,
        }
    };
    let firewall = Arc::new(firewall(team, &ids, &recipient).events(setting.events.clone()));
    let meter = TeamMeter::new(budget, build::providers(setting.config)?.registry().clone());
    let records: Records = Arc::new(Mutex::new(Vec::new()));
    let mut notes = Vec::new();
    let mut rows = Vec::new();
    if let Some(leader) = team.leader() {
        rows.push(Row { name: leader.to_owned(), role: "leader", isolation: Isolation::Local });
    }
    let mut members: Vec<Arc<dyn Member>> = Vec::new();
    let mut agents = std::collections::BTreeMap::new();
    // The tools worker members may call (all built-in), for `Assembled::inputs`.
    let mut worker_tools = std::collections::BTreeSet::new();
    // Remote members' tools' schemas, as their servers gave them, for `Assembled::inputs`.
    let mut remote_inputs = std::collections::BTreeMap::new();
    // A member whose model calls this process makes (a local one, through its gate; a
    // worker's, through its model host) is metered call by call; a remote agent by its
    // result.
    let tracked = |inner: Arc<dyn Member>, report_to: Option<String>, report: Option<OutputSpec>, local: bool| {
        Arc::new(Tracked {
            inner,
            events: setting.events.clone(),
            report_to,
            report,
            firewall: Arc::clone(&firewall),
            records: Arc::clone(&records),
            meter: (!local).then(|| Arc::clone(&meter)),
        }) as Arc<dyn Member>
    };
    for (n, entry) in team.team.members.iter().enumerate() {
        let Some(id) = entry.agent.as_deref() else {
            // A remote member: the team's caller decides its calls, or they are approved
            // or refused for it, as the team's approval mode says.
            let remote = setting
                .remotes
                .for_run(n, setting.approvals, &setting.control)
                .ok_or_else(|| BuildError::Invalid(format!("the remote member `{}` was not made ready", ids[n])))?;
            rows.push(Row { name: ids[n].clone(), role: "member", isolation: Isolation::Remote });
            remote_inputs.extend(remote.tool_inputs().iter().map(|(tool, schema)| (tool.clone(), schema.clone())));
            // A typed report is asked of the remote agent as its task's typed answer.
            members.push(tracked(Arc::new(remote), recipient(n), team.report(n).spec(), false));
            continue;
        };
        let agent = registered(setting.registry, id)?;
        let description = describe(&agent.definition);
        // The team file's `report` wins over the agent file's `[output]`.
        let report = team.report(n).spec().or_else(|| agent.definition.output_spec().cloned());
        let inner: Arc<dyn Member> = match entry.isolation {
            // A file cannot say `remote` as an isolation.
            Isolation::Local | Isolation::Remote => {
                let ceilings = Ceilings {
                    max_usd: budget.max_usd,
                    max_total_tokens: budget.max_total_tokens,
                    timeout: Some(report_timeout(&agent.definition, &budget)),
                };
                let built = local(setting, &agent.definition, Vec::new(), ceilings, &meter)?;
                notes.extend(built.notes);
                agents.insert(id.to_owned(), built.agent.clone());
                AgentMember::new(built.agent, description).with_control(setting.control.clone()).shared()
            }
            Isolation::Process => {
                let (config, worker_notes) = worker(agent, setting, &budget, &meter)?;
                notes.extend(worker_notes);
                // What the worker may call: its policy allows only built-in tools it has.
                worker_tools.extend(config.tool_policy.allowed().into_iter().flatten().cloned());
                Arc::new(ProcessMember::new(id, description, config).with_control(setting.control.clone()))
            }
        };
        rows.push(Row { name: id.to_owned(), role: "member", isolation: entry.isolation });
        // A process member's model calls are made, and metered, here: counted by the
        // host as they end, not again from its result.
        members.push(tracked(inner, recipient(n), report, true));
    }
    let track = |inner: Arc<dyn Member>| tracked(inner, None, None, true);
    let leader_ceilings =
        Ceilings { max_usd: budget.max_usd, max_total_tokens: budget.max_total_tokens, timeout: budget.max_wall_time };
    let invalid = |e: TeamError| BuildError::Invalid(format!("team `{}`: {e}", team.name()));
    let work = match (strategy, team.leader()) {
        (TeamStrategy::Delegate, Some(leader)) => {
            let definition = &registered(setting.registry, leader)?.definition;
            let delegate = DelegateTool::new(leader, members).map_err(invalid)?;
            let delegations = delegate.delegations();
            let built = local(setting, definition, vec![delegate.into_arc()], leader_ceilings, &meter)?;
            notes.extend(built.notes);
            agents.insert(leader.to_owned(), built.agent.clone());
            let leader = AgentMember::new(built.agent, describe(definition)).with_control(setting.control.clone());
            Work::Delegate { leader: track(leader.shared()), delegations }
        }
        (TeamStrategy::Orchestrated, Some(leader)) => {
            let definition = &registered(setting.registry, leader)?.definition;
            let built = local(setting, definition, Vec::new(), leader_ceilings, &meter)?;
            notes.extend(built.notes);
            agents.insert(leader.to_owned(), built.agent.clone());
            let leader = AgentMember::new(built.agent, describe(definition)).with_control(setting.control.clone());
            let mut orchestrated = Strategy::orchestrated(track(leader.shared()));
            if let (Strategy::Orchestrated { max_concurrency, .. }, Some(n)) =
                (&mut orchestrated, team.team.max_concurrency)
            {
                *max_concurrency = n;
            }
            Work::Group(group(team, members).strategy(orchestrated).build().map_err(invalid)?)
        }
        (TeamStrategy::Parallel, _) => {
            let n = team.team.max_concurrency.unwrap_or(members.len());
            Work::Group(group(team, members).parallel(n).build().map_err(invalid)?)
        }
        (TeamStrategy::Pipeline, _) => Work::Group(group(team, members).pipeline().build().map_err(invalid)?),
        // The team file refuses a leaderless delegate or orchestrated team.
        (strategy, None) => return Err(BuildError::Invalid(format!("a {strategy} team needs a leader"))),
    };
    let mut inputs = std::collections::BTreeMap::new();
    for agent in agents.values() {
        let spec = agent.current_spec();
        if let Ok(catalog) = agent.runner().agent_catalog(&spec) {
            for declaration in catalog.declarations() {
                inputs
                    .entry(declaration.name.clone())
                    .or_insert_with(|| serde_json::Value::clone(&declaration.input_schema));
            }
        }
    }
    for tool in troupe_tools::coding_tools() {
        let declaration = tool.declaration();
        if worker_tools.contains(&declaration.name) {
            inputs
                .entry(declaration.name.clone())
                .or_insert_with(|| serde_json::Value::clone(&declaration.input_schema));
        }
    }
    for (tool, schema) in remote_inputs {
        inputs.entry(tool).or_insert(schema);
    }
    Ok(Assembled { work, rows, firewall, records, notes, agents, meter, inputs })
}

fn group(team: &TeamFile, members: Vec<Arc<dyn Member>>) -> troupe_team::AgentGroupBuilder {
    AgentGroup::builder(team.name()).description(team.team.description.clone()).members(members)
}

fn registered<'a>(registry: &'a AgentRegistry, id: &str) -> Result<&'a RegisteredAgent, BuildError> {
    // The team file was checked against the registry already.
    registry.entry(id).ok_or_else(|| BuildError::Invalid(format!("no agent `{id}`")))
}

fn describe(definition: &AgentDefinition) -> String {
    match definition.agent.description.trim() {
        "" => definition.agent.name.clone(),
        description => description.to_owned(),
    }
}

/// How long a member's report may take: its file's `[reporting] timeout_seconds`, within
/// the team's time.
fn report_timeout(definition: &AgentDefinition, budget: &TeamBudget) -> Duration {
    let own = Duration::from_secs(definition.reporting.timeout_seconds);
    budget.max_wall_time.map_or(own, |team| team.min(own))
}

fn local(
    setting: &Setting<'_>,
    definition: &AgentDefinition,
    extra_tools: Vec<Arc<dyn Tool>>,
    ceilings: Ceilings,
    meter: &Arc<TeamMeter>,
) -> Result<build::Built, BuildError> {
    let built = build::build(AgentBuild {
        definition,
        workspace: setting.workspace,
        config: setting.config,
        approvals: setting.approvals,
        extra_tools,
        ceilings,
        memory: setting.memory.clone(),
        mcp: setting.mcp.get(definition.id()),
        sandbox: setting.sandbox,
    })?;
    // Member runs are followed through their events; their outputs need not keep them too.
    // No call starts once the team's budget is spent.
    let runner =
        built.agent.runner().clone().with_events_kept(false).with_middleware(Arc::new(TeamGate(Arc::clone(meter))));
    let runner = match &setting.durability {
        Some(durability) => runner.with_store(durability.clone()),
        None => runner,
    };
    let agent = troupe_runtime::Agent::new(runner, built.agent.spec().clone());
    Ok(build::Built { agent, notes: built.notes })
}

/// The firewall of the team file's channels; without a `[firewall]` table, one that
/// passes every report to its recipient (and still redacts secrets).
fn firewall(team: &TeamFile, ids: &[String], recipient: &dyn Fn(usize) -> Option<String>) -> ContextFirewall {
    let firewall = match team.channels() {
        Some(channels) => channels.into_iter().fold(ContextFirewall::new(), |f, c| f.channel(c.from, c.to)),
        None => (0..ids.len())
            .filter_map(|n| recipient(n).map(|to| (ids[n].as_str(), to)))
            .fold(ContextFirewall::new(), |f, (from, to)| f.channel(from, to)),
    };
    team.report_fields().into_iter().fold(firewall, |f, (c, fields)| f.report_fields(c.from, c.to, fields))
}

/// How a `process` member's workers start: its file's `[agent.execution]`, with paths
/// made absolute (the worker starts in the workspace), its model called by this process
/// (no key is granted: the worker's calls come back as frames, gated by the team's
/// meter), its retries and report timeout.
fn worker(
    agent: &RegisteredAgent,
    setting: &Setting<'_>,
    budget: &TeamBudget,
    meter: &Arc<TeamMeter>,
) -> Result<(WorkerConfig, Vec<String>), BuildError> {
    let absolute = |path: &Path| {
        std::path::absolute(path).map_err(|e| BuildError::Invalid(format!("cannot resolve {}: {e}", path.display())))
    };
    // `{agent_file}` is the path the file was read from: made absolute, it still names
    // the file from the worker's directory.
    let definition = build::load(&absolute(&agent.path)?)?;
    let execution = definition.render_templates(&absolute(setting.workspace)?, &absolute(&agent.config_dir)?);
    let program = execution
        .program()
        .map_err(|e| BuildError::Invalid(format!("cannot tell the worker program of `{}`: {e}", definition.id())))?;
    let mut config = WorkerConfig::new(program).args(execution.args).working_dir(execution.working_dir);
    for (name, value) in execution.env {
        config = config.env(name, value);
    }
    let mut notes = Vec::new();
    let providers = build::providers_for(&definition, setting.config, &mut notes)?;
    let host = ModelHost::new(Arc::new(providers), [definition.model_id()]).metered(Arc::clone(meter));
    config = config.host_models(host);
    for variable in ["TROUPE_MODEL", "TROUPE_LOG", "RUST_LOG"] {
        config = config.inherit_env(variable);
    }
    let backoff = Duration::from_millis(definition.retry.backoff_ms);
    config = config
        .max_attempts(definition.retry.max_attempts)
        .backoff(Backoff { initial: backoff, max: backoff.saturating_mul(8) })
        .timeout(report_timeout(&definition, budget));
    // The worker has the built-in coding tools only: tools it lacks are left out here, so
    // that the worker does not refuse the agent for them.
    let worker_tools: Vec<String> = troupe_tools::coding_tools().iter().map(|t| t.declaration().name.clone()).collect();
    let policy = definition.tool_policy();
    let allowed = match policy.allowed() {
        Some(allowed) => {
            let (kept, left): (Vec<String>, Vec<String>) =
                allowed.iter().cloned().partition(|t| worker_tools.contains(t));
            if !left.is_empty() {
                notes.push(format!("{}: its worker has no {}; left out", definition.id(), left.join(", ")));
            }
            kept
        }
        None => worker_tools,
    };
    let policy = policy.allowing(allowed);
    if let Some(durability) = &setting.durability {
        // The worker's run is a child run in the team's store, reached through the
        // protocol: a worker that dies is replaced by one that resumes it.
        config = config.record_in(Arc::clone(durability.store()));
    }
    // The worker confines its commands as this team chose for the member, not as its own
    // directory's files would.
    let sandbox = setting.sandbox.settings_for(&definition.sandbox);
    Ok((config.tool_policy(policy).approvals(setting.approvals).sandbox(sandbox), notes))
}

/// A member as the team sees it: its events go to the team's sink whoever runs it (a
/// `delegate` call gives none), each result is recorded, and its report reaches its
/// recipient only through the firewall.
struct Tracked {
    inner: Arc<dyn Member>,
    events: EventSink,
    report_to: Option<String>,
    /// The typed report the member ends with, if its report is typed.
    report: Option<OutputSpec>,
    firewall: Arc<ContextFirewall>,
    records: Records,
    /// The team's meter, for a member whose calls this process does not make (a remote
    /// agent): its spend is added when its result comes back.
    meter: Option<Arc<TeamMeter>>,
}

impl Member for Tracked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn resumable(&self) -> bool {
        self.inner.resumable()
    }

    fn run(
        &self,
        task: MemberTask,
        _events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            let started = Instant::now();
            // The brief passes the firewall too: the member reads it as its sanitisers
            // allow, secrets redacted (a leader's brief needs no declared channel).
            let mut task = task;
            let brief = AgentMessage::request(task.from.clone(), self.inner.name().to_owned(), task.prompt.clone());
            task.prompt = self.firewall.sanitise_for(&brief, self.inner.name()).payload.summary;
            if let Some(context) = &task.context {
                let context = AgentMessage::request(task.from.clone(), self.inner.name().to_owned(), context.clone());
                task.context = Some(self.firewall.sanitise_for(&context, self.inner.name()).payload.summary);
            }
            if task.report.is_none() {
                task.report.clone_from(&self.report);
            }
            let spec = task.report.clone();
            let (from, task_id, parent) = (task.from.clone(), task.task_id.clone(), task.parent_run_id.clone());
            let brief = json!({"member": self.inner.name(), "task_id": task_id, "from": from, "brief": task.prompt});
            self.tell(BRIEF_EVENT, parent.clone(), brief).await;
            let mut result = self.inner.run(task, Some(self.events.clone()), cancel).await;
            if let Some(meter) = &self.meter {
                meter.add(result.usage.total(), result.cost_usd);
            }
            result.read_report(spec.as_ref());
            let record = Record {
                name: result.name.clone(),
                success: result.success,
                error: result.error.clone(),
                usage: result.usage,
                cost_usd: result.cost_usd,
                elapsed: started.elapsed(),
            };
            self.records.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(record);
            let mut withheld = false;
            let mut fields_withheld = Vec::new();
            if let Some(to) = &self.report_to {
                match self.firewall.filter_result(&mut result, to) {
                    Ok(fields) => fields_withheld = fields,
                    Err(drop) => {
                        withheld = true;
                        result.content = notice(&drop);
                        result.report = None;
                        result.error = result.error.map(|_| "its report was withheld by the firewall".to_owned());
                    }
                }
            }
            let mut report = json!({
                "member": result.name, "task_id": task_id, "to": self.report_to.clone().unwrap_or(from),
                "success": result.success, "withheld": withheld, "report": result.content,
                "firewall": self.report_to.is_some(),
            });
            if let Some(structured) = &result.report {
                report["structured"] = structured.clone();
                report["withheld_fields"] = json!(fields_withheld);
            }
            self.tell(REPORT_EVENT, parent, report).await;
            result
        })
    }
}

impl Tracked {
    /// Tells the team's run what passed between it and a member (see [`BRIEF_EVENT`]).
    async fn tell(&self, name: &str, parent: Option<RunId>, value: serde_json::Value) {
        let run = parent.unwrap_or_else(|| RunId::new(""));
        let attribution = Attribution::now(AgentId::new(self.inner.name()), run, 0);
        let event = AgentEvent::new(attribution, AgentEventKind::Custom { name: name.to_owned(), value });
        // A closed sink means nobody records: the member's work goes on.
        let _ = self.events.send(event).await;
    }
}

/// The event a team's member gets its brief by (as it reads it, after the firewall); the
/// team's run records it as evidence (`brief_sent`) and passes it on to nobody.
pub const BRIEF_EVENT: &str = "team.brief";
/// The event a member's report reaches its recipient by (after the firewall, or the
/// notice of its withholding); recorded as `report_received`.
pub const REPORT_EVENT: &str = "team.report";

/// What a recipient reads instead of a report the firewall dropped.
pub fn notice(drop: &FirewallDrop) -> String {
    format!(
        "[firewall] the report of `{}` to `{}` was withheld: {} (the team file does not declare \"{} -> {}\")",
        drop.from, drop.to, drop.reason, drop.from, drop.to
    )
}
