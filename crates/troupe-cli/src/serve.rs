//! `troupe serve`: the coding agent, every agent file and the given team files over HTTP
//! (the native API with SSE and WebSocket, AG-UI, A2A), recorded in the store so a run
//! that was going when the server stopped resumes when it starts again.

use crate::agent::ConfigDirs;
use crate::agent::build::{self, AgentBuild, Approvals, Ceilings};
use crate::store::StoreArgs;
use crate::{Failure, setup};
use anyhow::anyhow;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::core::{AgentEvent, AgentEventKind, AgentId, Attribution, PauseReason, RunId, RunOutcomeKind};
use troupe::durable::ResumeRun;
use troupe::runtime::durable::{Durability, is_dead_local_owner, unique_owner};
use troupe::runtime::{Agent, ApprovalPolicy, EVENT_BUFFER, RunInput};
use troupe::server::{
    LaunchError, LaunchedRun, Launcher, RunEnd, RunSignals, Server, ServerConfig, Target, TargetKind, Token,
};
use troupe::store::{RunFilter, RunStatus, Store};
use troupe::team::team_call_id;
use troupe_workers::registry::AgentRegistry;
use troupe_workers::team_run::{TeamFiles, TeamRun, TeamService};

/// Arguments of `troupe serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on; without a token only a loopback address is allowed.
    #[arg(long, default_value = troupe::server::DEFAULT_ADDR, value_name = "ADDR")]
    addr: SocketAddr,
    /// Where runs are recorded, and the workspace.
    #[command(flatten)]
    place: StoreArgs,
    /// Record nothing: runs going at shutdown are cancelled instead of resumed on the next start.
    #[arg(long)]
    no_store: bool,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
    /// The model of the built-in coding agent `troupe` [default: TROUPE_MODEL, then troupe.toml, then demo].
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// A team file to serve too (repeatable); it is run by its name.
    #[arg(long = "team", value_name = "TEAM.toml")]
    teams: Vec<PathBuf>,
    /// An origin browsers may call from (repeatable; `*` for any).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = troupe::server::DEFAULT_BODY_LIMIT, value_name = "BYTES")]
    body_limit: usize,
    /// Append every security decision (capability checks, approvals, denials) as JSON lines to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// How long a run's lease lasts without a heartbeat, in seconds (fractions allowed):
    /// a run whose server stopped answering is adopted by another that long after.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = crate::worker::parse_seconds)]
    lease_ttl: std::time::Duration,
    /// How long shutdown waits for running runs to finish, in seconds.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    shutdown_grace: u64,
    #[command(flatten)]
    limits: ConnectionLimits,
    /// Where agent files are looked for.
    #[command(flatten)]
    config: ConfigDirs,
}

/// How many connections a server holds, and how long it waits for a request: the
/// arguments `troupe serve` and `troupe mcp serve --http` share.
#[derive(Debug, clap::Args)]
pub(crate) struct ConnectionLimits {
    /// How long a client may take to send a request's headers, in seconds; a slower or
    /// idle connection is closed.
    #[arg(long, default_value_t = troupe::server::DEFAULT_HEADER_TIMEOUT.as_secs(), value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
    /// How many connections may be open at once; more wait.
    #[arg(long, default_value_t = troupe::server::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
}

impl ConnectionLimits {
    /// The default server configuration with these limits.
    pub(crate) fn config(&self) -> ServerConfig {
        ServerConfig {
            header_timeout: std::time::Duration::from_secs(self.header_timeout),
            max_connections: self.max_connections,
            ..ServerConfig::default()
        }
    }
}

/// Runs `troupe serve` until Ctrl-C or SIGTERM.
pub(crate) async fn serve(args: ServeArgs) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let workspace = args.place.workspace()?;
    let tokens = std::env::var(troupe::server::TOKEN_ENV).map(|v| Token::list(&v)).unwrap_or_default();
    let server_config = ServerConfig {
        tokens,
        body_limit: args.body_limit,
        cors_origins: args.cors_origins.clone(),
        cancel_on_shutdown: args.no_store,
        shutdown_grace: std::time::Duration::from_secs(args.shutdown_grace),
        ..args.limits.config()
    };
    if !server_config.allows(args.addr) {
        return Err(Failure::Usage(troupe::server::ServerError::UnprotectedAddress { addr: args.addr }.into()));
    }
    let durability = match args.no_store {
        true => None,
        false => Some(
            Durability::new(args.place.open().await?).with_owner(unique_owner("serve")).with_lease_ttl(args.lease_ttl),
        ),
    };

    let environment = std::env::var("TROUPE_MODEL").ok();
    let (model, notice) = crate::chat::choose_model(args.model.as_deref(), environment.as_deref(), &config, &providers);
    if let Some(notice) = notice {
        diagln!("{notice}");
    }
    // Nobody sits at a terminal: a call that needs approval waits for a signal over HTTP.
    let spec = setup::coding_spec(model, ApprovalPolicy::default(), None, None);
    let audit: Option<Arc<dyn troupe::tools::AuditLog>> = match &args.audit_log {
        Some(path) => Some(Arc::new(
            troupe::tools::FileAuditLog::open(path)
                .map_err(|e| Failure::Usage(anyhow!("cannot open the audit log {}: {e}", path.display())))?,
        )),
        None => None,
    };
    let with_audit = |runner: troupe::runtime::Runner| match &audit {
        Some(audit) => runner.with_audit_log(Arc::clone(audit)),
        None => runner,
    };
    let sandbox = args.sandbox.choice()?;
    let runner = with_audit(setup::runner(&workspace, providers, &sandbox)?);
    setup::validate(&runner, &spec)?;
    let mut launcher = ServeLauncher { agents: BTreeMap::new(), teams: BTreeMap::new() };
    launcher.agents.insert(
        setup::AGENT_NAME.to_owned(),
        (setup::agent(runner, spec, durability.clone()), "A coding agent with the built-in workspace tools".to_owned()),
    );

    let registry = crate::agent::discover(&args.config.resolve()?)?;
    let memory = build::memory_store(&workspace, registry.iter().map(|entry| &entry.definition)).await?;
    for entry in registry.iter() {
        let mcp = match build::connect_mcp(&entry.definition, &workspace).await {
            Ok(mcp) => mcp,
            Err(error) => {
                diagln!("note: agent `{}` is not served: {error}", entry.definition.id());
                continue;
            }
        };
        let built = build::build(AgentBuild {
            definition: &entry.definition,
            workspace: &workspace,
            config: &config,
            approvals: Approvals::Approver,
            extra_tools: Vec::new(),
            ceilings: Ceilings::default(),
            memory: memory.clone(),
            mcp: Some(&mcp),
            sandbox: &sandbox,
        });
        match built {
            Ok(built) => {
                let runner = with_audit(built.agent.runner().clone());
                let runner = match &durability {
                    Some(d) => runner.with_store(d.clone()),
                    None => runner,
                };
                let agent = Agent::new(runner, built.agent.spec().clone());
                let description = entry.definition.agent.description.clone();
                launcher.agents.insert(entry.definition.id().to_owned(), (agent, description));
            }
            Err(error) => diagln!("note: agent `{}` is not served: {error}", entry.definition.id()),
        }
    }
    for path in &args.teams {
        let (team, registry) = crate::team::load(&args.config, path)?;
        let files = TeamFiles::new(team, registry, &[]).map_err(build::failure)?;
        // A member's call that needs approval waits for a decision over HTTP, as an
        // agent's does; the team's run and its members' runs are recorded in the store.
        let mut run = TeamRun::new(&files, workspace.clone())
            .config(config.clone())
            .approvals(Approvals::Approver)
            .memory(memory.clone())
            .sandbox(sandbox.clone());
        if let Some(durability) = &durability {
            run = run.store(durability.clone());
        }
        let service = run.service().await.map_err(build::failure)?;
        // What a person editing a member's waiting call fills in.
        let inputs = service.tool_inputs().map_err(build::failure)?;
        launcher.teams.insert(files.team().name().to_owned(), (service, inputs));
    }

    let launcher = Arc::new(launcher);
    let reloader = watch_config(&args.config, registry, &launcher);
    let server = Server::new(server_config, Arc::clone(&launcher) as Arc<dyn Launcher>);
    let shutdown = CancellationToken::new();
    let server = match &durability {
        Some(durability) => {
            let store = Arc::clone(durability.store());
            // Runs found at start are back before the server listens; later ones as they come.
            let hub = Arc::clone(server.hub());
            if let Err(error) = adopt_once(&hub, &launcher, store.as_ref(), &shutdown).await {
                diagln!("note: cannot look for runs to resume: {error}");
            }
            let every = (durability.lease_ttl() / 3).clamp(std::time::Duration::from_millis(100), ADOPT_EVERY);
            tokio::spawn(adopt(hub, Arc::clone(&launcher), Arc::clone(&store), every, shutdown.clone()));
            gauge_queue_depth(&server, Arc::clone(&store));
            server.with_store(store)
        }
        None => server,
    };
    let listener =
        troupe::server::bind(args.addr).map_err(|e| Failure::Usage(anyhow!("cannot listen on {}: {e}", args.addr)))?;
    let addr = listener.local_addr().map_err(|e| Failure::Usage(e.into()))?;
    let names: Vec<String> = launcher.targets().into_iter().map(|t| t.name).collect();
    diagln!("troupe serving on http://{addr} ({})", names.join(", "));
    diagln!("{}", server.state().config.auth_summary());
    diagln!("{}", console_line(addr, &server.state().config.tokens));
    stop_on_signals(shutdown.clone());
    let served = server.serve(listener, shutdown).await.map_err(|e| Failure::Run(e.into()));
    if let Some(reloader) = reloader {
        reloader.stop();
    }
    served?;
    diagln!("troupe serve stopped");
    Ok(())
}

/// Where the web console is. With a token, at a terminal, the address carries it in its
/// fragment (`#token=…`: the browser never sends a fragment, and the console takes it out
/// of the address bar); elsewhere (a log) the token is not printed, and the console asks
/// for it.
pub(crate) fn console_line(addr: SocketAddr, tokens: &[Token]) -> String {
    use std::io::IsTerminal;
    let host = if addr.ip().is_unspecified() { SocketAddr::new([127, 0, 0, 1].into(), addr.port()) } else { addr };
    match tokens.first() {
        None => format!("console: http://{host}/"),
        Some(token) if std::io::stderr().is_terminal() => {
            format!("console: http://{host}/#token={}", fragment_escaped(token.expose()))
        }
        Some(_) => format!("console: http://{host}/ (it asks for the token)"),
    }
}

/// `text` with every byte that is not unreserved in a URL percent-escaped.
fn fragment_escaped(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Watches the agent files and `./troupe.toml`: an edit of a served agent's file (or of
/// its limits in `troupe.toml`) reconfigures it, and its running runs take the change at
/// their next safe boundary; an edit that does not validate is reported and changes nothing.
fn watch_config(
    dirs: &ConfigDirs,
    baseline: AgentRegistry,
    launcher: &Arc<ServeLauncher>,
) -> Option<troupe_workers::reload::Reloader> {
    let search = dirs.resolve().ok()?;
    let on_agent = Arc::clone(launcher);
    let started = troupe_workers::reload::Reloader::builder()
        .config_dirs(search)
        .config_file(crate::CONFIG_FILE)
        .baseline(baseline)
        .check_model(|model, config| {
            let providers = crate::providers(config).map_err(|e| e.to_string())?;
            providers.resolve(model).map(|_| ()).map_err(|e| e.to_string())
        })
        .on_agent(move |reload| {
            let Some((agent, _)) = on_agent.agents.get(&reload.id) else {
                diagln!("note: agent `{}` was added; restart troupe serve to serve it", reload.id);
                return;
            };
            match agent.reconfigure(reload.update()) {
                Ok(Some(revision)) => diagln!(
                    "reloaded agent `{}` (revision {}): {}",
                    reload.id,
                    revision.revision,
                    reload.changed.join(", ")
                ),
                Ok(None) => {}
                Err(error) => {
                    diagln!("error: the new configuration of agent `{}` is not applied: {error}", reload.id)
                }
            }
            if !reload.needs_restart.is_empty() {
                diagln!(
                    "note: agent `{}` changed {}; restart troupe serve to apply that",
                    reload.id,
                    reload.needs_restart.join(", ")
                );
            }
        })
        .on_removed(|id, path| diagln!("note: {} was removed; agent `{id}` is served on", path.display()))
        .on_error(|error| diagln!("error: not applied, the previous configuration stays: {error}"))
        // A problem of the files as serve read them (an agent whose model cannot be used) was
        // said above, as "not served"; the reloader only logs it.
        .start();
    match started {
        Ok(reloader) => Some(reloader),
        Err(error) => {
            diagln!("note: configuration changes are not watched: {error}");
            None
        }
    }
}

/// How often, at most, a server looks for runs to adopt (a third of the lease is sooner).
const ADOPT_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// How often `/metrics`' queue depth is read from the store.
const QUEUE_DEPTH_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Keeps the `queue_depth` gauge of `/metrics` at the number of stored runs waiting to be
/// claimed (queued, no holder, due), read every [`QUEUE_DEPTH_EVERY`].
fn gauge_queue_depth(server: &Server, store: Arc<dyn Store>) {
    let metrics = Arc::clone(server.hub().metrics());
    tokio::spawn(async move {
        let mut every = tokio::time::interval(QUEUE_DEPTH_EVERY);
        loop {
            every.tick().await;
            match store.queue().await {
                Ok(queue) => {
                    let now = troupe::store::now_millis();
                    let waiting = queue.iter().filter(|e| e.owner.is_none() && e.available_at <= now).count();
                    metrics.set_queue_depth(waiting as u64);
                }
                Err(error) => tracing::debug!(%error, "cannot read the queue depth"),
            }
        }
    });
}

/// Adopts, into the server, the recorded runs of its agents that no live process holds:
/// those that were going when their process died (its lease lapsed, or it was a process of
/// this machine that is gone) and those waiting for a person (paused, holding nothing).
/// Every `every` until `shutdown` (start-up adopts once before the server listens), so one
/// server can replace another without losing a waiting run.
async fn adopt(
    hub: Arc<troupe::server::RunHub>,
    launcher: Arc<ServeLauncher>,
    store: Arc<dyn Store>,
    every: std::time::Duration,
    shutdown: CancellationToken,
) {
    let mut said = false;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        match adopt_once(&hub, &launcher, store.as_ref(), &shutdown).await {
            Ok(()) => said = false,
            Err(error) if !said => {
                said = true;
                diagln!("note: cannot look for runs to resume: {error}");
            }
            Err(_) => {}
        }
    }
}

/// Resumes into the server every run [`adoptable`] finds (until `shutdown`).
async fn adopt_once(
    hub: &Arc<troupe::server::RunHub>,
    launcher: &ServeLauncher,
    store: &dyn Store,
    shutdown: &CancellationToken,
) -> Result<(), troupe::store::StoreError> {
    for run in adoptable(hub, launcher, store).await? {
        let Some((agent, _)) = launcher.agents.get(&run.agent) else { continue };
        if shutdown.is_cancelled() {
            break;
        }
        // Taking the lease again would fence out this server's own run of it.
        if hub.get(&run.id).is_some() {
            continue;
        }
        match agent.resume_run(&run.id).await {
            Ok(handle) => {
                diagln!("resumed run {} ({})", run.id, run.agent);
                let held = hub.insert(&run.agent, LaunchedRun::from_handle(handle));
                // The schema its typed answer must match, as its record holds it.
                if let Ok(Some(record)) = store.load_run(&run.id).await
                    && let Ok(state) = troupe::runtime::durable::state_from_value(&record.id, record.state)
                    && let Some(spec) = state.output_spec()
                {
                    held.set_output_schema(spec.schema.schema.clone());
                }
            }
            Err(error) => tracing::debug!(run = %run.id, %error, "not resumed here"),
        }
    }
    Ok(())
}

/// The stored runs of the server's agents it does not hold and nobody alive holds: going
/// or waiting, at the top of their tree (a member's run is its team's to resume).
async fn adoptable(
    hub: &troupe::server::RunHub,
    launcher: &ServeLauncher,
    store: &dyn Store,
) -> Result<Vec<troupe::store::RunSummary>, troupe::store::StoreError> {
    let mut runs = store.list_runs(&RunFilter { status: Some(RunStatus::Running), ..RunFilter::default() }).await?;
    runs.extend(store.list_runs(&RunFilter { status: Some(RunStatus::Paused), ..RunFilter::default() }).await?);
    // A run that paused between the two lists is in both: it is adopted once.
    let mut seen = std::collections::HashSet::new();
    runs.retain(|run| seen.insert(run.id.clone()));
    let queue = store.queue().await?;
    let now = troupe::store::now_millis();
    Ok(runs
        .into_iter()
        .filter(|run| run.parent_run_id.is_none() && launcher.agents.contains_key(&run.agent))
        .filter(|run| hub.get(&run.id).is_none())
        .filter(|run| {
            let entry = queue.iter().find(|entry| entry.run_id == run.id);
            let holder = entry.and_then(|e| e.owner.as_deref().filter(|_| e.expires_at.is_some_and(|at| at > now)));
            holder.is_none_or(is_dead_local_owner)
        })
        .collect())
}

/// What `troupe serve` runs: agents by id, teams by name.
struct ServeLauncher {
    agents: BTreeMap<String, (Agent, String)>,
    /// Each team, with its members' tools' argument schemas.
    teams: BTreeMap<String, (TeamService, BTreeMap<String, serde_json::Value>)>,
}

impl Launcher for ServeLauncher {
    fn targets(&self) -> Vec<Target> {
        let agents = self.agents.iter().map(|(name, (agent, description))| Target::agent(name, agent, description));
        let teams = self.teams.iter().map(|(name, (service, inputs))| team_target(name, service, inputs));
        agents.chain(teams).collect()
    }

    fn target(&self, name: &str) -> Option<Target> {
        if let Some((name, (agent, description))) = self.agents.get_key_value(name) {
            return Some(Target::agent(name, agent, description));
        }
        self.teams.get_key_value(name).map(|(name, (service, inputs))| team_target(name, service, inputs))
    }

    fn launch(&self, target: &str, input: RunInput) -> Result<LaunchedRun, LaunchError> {
        if let Some((agent, _)) = self.agents.get(target) {
            return Ok(LaunchedRun::from_handle(agent.start(input)));
        }
        let (service, _) = self.teams.get(target).ok_or_else(|| LaunchError::UnknownTarget(target.to_owned()))?;
        launch_team(service, input)
    }
}

/// The served team `name`, with its members' tools' argument schemas.
fn team_target(name: &str, service: &TeamService, inputs: &BTreeMap<String, serde_json::Value>) -> Target {
    Target {
        name: name.to_owned(),
        description: service.team().team.description.clone(),
        kind: TargetKind::Team,
        model: None,
        tools: Vec::new(),
        inputs: inputs.clone(),
    }
}

/// One run of a served team, members of its own assembled for it: the team run's own
/// `run_started` and `run_finished` around every member's events, which keep their own
/// attribution (agent, run, parent run). The team's budgets and its outcome are the
/// library's, as for `troupe team run`.
fn launch_team(service: &TeamService, input: RunInput) -> Result<LaunchedRun, LaunchError> {
    let run_id = input.run_id.clone().unwrap_or_else(RunId::generate);
    let prepared = service.prepare().map_err(|e| LaunchError::Refused(e.to_string()))?.with_run_id(run_id.clone());
    let control = prepared.control();
    let cancel = CancellationToken::new();
    let (events, forwarded) = mpsc::channel::<AgentEvent>(EVENT_BUFFER);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<RunEnd>();
    let stamp = TeamStamp {
        agent: AgentId::new(service.team().name()),
        run_id: run_id.clone(),
        conversation_id: input.conversation_id.clone(),
    };
    let task = input.instruction;
    let stop = cancel.clone();
    tokio::spawn(async move {
        let started = AgentEventKind::RunStarted { instruction: task.clone(), model: "team".to_owned() };
        let _ = events.send(stamp.event(0, started)).await;
        let (members, mut from_members) = mpsc::channel::<AgentEvent>(EVENT_BUFFER);
        let (into_stream, conversation) = (events.clone(), stamp.conversation_id.clone());
        let relay = tokio::spawn(async move {
            while let Some(event) = from_members.recv().await {
                if into_stream.send(on_the_teams_stream(event, conversation.as_ref())).await.is_err() {
                    break;
                }
            }
        });
        let report = prepared.run(&task, Some(members), stop).await;
        let _ = relay.await;
        let error = report.failure();
        let outcome = match &error {
            None => RunOutcomeKind::Completed,
            Some(_) if report.cancelled && report.exceeded.is_none() => RunOutcomeKind::Cancelled,
            Some(_) => RunOutcomeKind::Failed,
        };
        let output = (!report.output.is_empty()).then(|| report.output.clone());
        let (usage, cost_usd) = (report.usage, report.cost_usd);
        let end = RunEnd { outcome, output: output.clone(), error, usage, cost_usd };
        let finished = AgentEventKind::RunFinished { outcome, output, usage, cost_usd };
        let _ = events.send(stamp.event(1, finished)).await;
        let _ = done_tx.send(end);
    });
    Ok(LaunchedRun {
        run_id,
        events: tokio_stream_of(forwarded).boxed(),
        signals: Some(RunSignals::Team(control)),
        cancel,
        end: Box::pin(async move { done_rx.await.unwrap_or_else(|_| RunEnd::failed("the team's task crashed")) }),
    })
}

/// A member's event as the team's one stream carries it: on the team's thread, its call
/// ids made unique across members ([`team_call_id`]), so that a client following the
/// whole team (AG-UI) tells two members' calls apart and a decision names the member.
fn on_the_teams_stream(mut event: AgentEvent, conversation: Option<&troupe::core::ConversationId>) -> AgentEvent {
    if event.attribution.conversation_id.is_none() {
        event.attribution.conversation_id = conversation.cloned();
    }
    let run = event.attribution.run_id.clone();
    let unique = |call_id: &mut troupe::core::ToolCallId| *call_id = team_call_id(&run, call_id);
    match &mut event.kind {
        AgentEventKind::ToolCallStart { call_id, .. }
        | AgentEventKind::ToolCallArgs { call_id, .. }
        | AgentEventKind::ToolCallEnd { call_id }
        | AgentEventKind::ToolCallResult { call_id, .. } => unique(call_id),
        AgentEventKind::RunPaused {
            reason: PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. },
        } => unique(call_id),
        _ => {}
    }
    event
}

/// The attribution of the team run's own events.
struct TeamStamp {
    agent: AgentId,
    run_id: RunId,
    conversation_id: Option<troupe::core::ConversationId>,
}

impl TeamStamp {
    fn event(&self, seq: u64, kind: AgentEventKind) -> AgentEvent {
        let mut attribution = Attribution::now(self.agent.clone(), self.run_id.clone(), seq);
        attribution.conversation_id = self.conversation_id.clone();
        AgentEvent::new(attribution, kind)
    }
}

fn tokio_stream_of(rx: mpsc::Receiver<AgentEvent>) -> futures::stream::BoxStream<'static, AgentEvent> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }).boxed()
}

/// Cancels `shutdown` on Ctrl-C or SIGTERM.
pub(crate) fn stop_on_signals(shutdown: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(error) => {
                    tracing::warn!("cannot listen for SIGTERM: {error}");
                    let _ = tokio::signal::ctrl_c().await;
                    shutdown.cancel();
                    return;
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        diagln!("shutting down: open streams close, running runs get a moment to finish");
        shutdown.cancel();
    });
}
