//! `troupe team`: teams of agent files.
//!
//! ```text
//! troupe team run TEAM.toml TASK… [-w DIR] [--approve ask|auto|never] [--store URL | --no-store] [--json]
//!                 [--config-dir DIR]
//! troupe team validate TEAM.toml [--config-dir DIR]
//! ```
//!
//! The team file's schema is [`troupe_workers::team_file`]'s. Its agents are looked up in
//! `--config-dir` when given, else in the team file's own directory when that has an
//! `agents/` (or `agents.d/`) directory, else in the default config directories.
//!
//! - **Members**: each `[[team.members]]` agent is built from its file as `troupe agent
//!   run` builds one (`isolation = "local"`), or runs in a worker subprocess started as
//!   its `[agent.execution]` says (`isolation = "process"`); a `remote = "https://…"`
//!   member is an agent on another A2A server, its token read from `bearer_env`.
//! - **Strategy**: `delegate` gives the leader a `delegate` tool over the members;
//!   `orchestrated`, `parallel` and `pipeline` run them as an `AgentGroup`.
//! - **Firewall**: each member's report passes the firewall as a message to its recipient
//!   (the leader; a pipeline's next member) before the recipient sees it: secrets are
//!   redacted, and a report on a channel `[firewall]` does not declare is withheld — the
//!   recipient reads a notice instead, and the drop is reported. Without `[firewall]`,
//!   every report passes (secrets still redacted). The leader's briefs are not filtered.
//! - **Budget**: `[team.budget]` is counted live from every member's usage events; crossing
//!   `max_usd` or `max_total_tokens`, or running past `max_seconds`, stops the whole team.
//!   Each member's own limits are also capped at the team's (and its report timeout).
//! - **Record**: the team's run is recorded in the store (`--store`, else the workspace's
//!   own, outside it; `--no-store` records nothing) with its local members' runs as
//!   its children, each durable like any run; `troupe runs list` shows them.
//! - **Approvals** (`--approve ask`, the default): a local member's call that needs approval
//!   is put to the person at the terminal, the question naming the member's path
//!   (`lead → coder: shell {…}`), answered yes / no / always / edit. Without a terminal,
//!   the member's run pauses, every other member is halted where it stands, and the team's
//!   run is recorded paused: `troupe runs approve TEAM_RUN CALL` (or the member run's id)
//!   decides the call and resumes the team, whose finished members are answered from
//!   their records, not run again. `auto` runs such calls, `never` refuses them (the model
//!   is told why); with `--no-store` and no terminal, `ask` refuses them. A process
//!   member's worker follows every mode too (the mode travels with its task): under `ask`
//!   its call is asked about at the terminal like a local member's, and without one it
//!   pauses the team.
//!   A remote member's call is asked about at the terminal too (the answer is sent to its
//!   remote task), approved under `auto`, refused under `never`; where the team would
//!   pause instead, its remote task is cancelled and the member fails.
//!
//! Output: the team's answer on stdout (with `--json`, every member's events as JSON lines,
//! then one `team_finished` line), a line per member event of interest on stderr, then a
//! summary table per member. Exit codes: 0 every member call completed; 1 one did not
//! (or the budget ran out, or the team was cancelled); 2 a usage or configuration error (a
//! bad team or agent file, an unknown agent, a missing API key).

mod ask;
mod progress;

use crate::agent::ConfigDirs;
use crate::agent::build::{self, Approvals};
use crate::render::Style;
use crate::store::StoreArgs;
use crate::{Failure, setup};
use anyhow::anyhow;
use ask::Asker;
use clap::Subcommand;
use futures::future::BoxFuture;
use progress::Progress;
use serde_json::json;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::durable::ClaimedRuns;
use troupe::runtime::RuntimeError;
use troupe::runtime::durable::{Durability, unique_owner};
use troupe::store::{Lease, RunStatus};
use troupe_workers::registry::AgentRegistry;
use troupe_workers::team_file::TeamFile;
use troupe_workers::team_record::{TeamInput, TeamResumeError};
use troupe_workers::team_run::{PreparedTeam, TeamFiles, TeamRun, TeamService};

/// Events buffered between the members and the progress printer.
const EVENT_BUFFER: usize = 4096;

/// `troupe team` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum TeamCommand {
    /// Run a team file's agents on a task.
    Run(RunArgs),
    /// Check a team file and the agent files it names: `ok: …` or every problem.
    Validate(ValidateArgs),
}

/// What becomes of a member's call that needs approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TeamApprove {
    /// It is put to you on the terminal, naming the member's path; without a terminal the
    /// team pauses, recorded, for `troupe runs approve` (with --no-store, it is refused).
    Ask,
    /// It runs.
    Auto,
    /// It is refused; the model is told why.
    Never,
}

/// Arguments of `troupe team run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Output: the team's answer on stdout (with --json, every member's events as JSON lines, then \
a `team_finished` line); on stderr, a line per member event (started, tool calls, delegations, firewall drops, \
finished with outcome, tokens and cost), then a summary table per member.\n\nExit codes: 0 every member call \
completed; 1 one did not, the team's budget ran out, or it was cancelled (Ctrl-C); 2 a usage or configuration error \
(a bad team or agent file, an unknown agent, a missing API key).")]
pub(crate) struct RunArgs {
    /// The team file.
    #[arg(value_name = "TEAM.toml")]
    team: PathBuf,
    /// The task (several words are joined by spaces).
    #[arg(required = true, value_name = "TASK")]
    task: Vec<String>,
    /// The directory every member works in [default: the current directory].
    #[arg(long, short, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// What becomes of a member's call that needs approval: asked on the terminal (ask;
    /// without one the team pauses, recorded), run (auto) or refused (never).
    #[arg(long, value_enum, default_value_t = TeamApprove::Ask, value_name = "MODE")]
    approve: TeamApprove,
    /// Print every member's events as JSON lines on stdout, then a `team_finished` line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
    /// Where the team's run and its members' runs are recorded: `sqlite://PATH` (or a
    /// file path) or `postgres://USER@HOST/DB` [default: the workspace's own store, in
    /// the user's data directory].
    // A PostgreSQL URL may hold a password: `--help` must not show it.
    #[arg(long, env = "TROUPE_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    /// Record nothing.
    #[arg(long, conflicts_with = "store")]
    no_store: bool,
    /// Queue the team's run for `troupe worker` instead of running it; print its id on
    /// stdout.
    #[arg(long, conflicts_with = "no_store")]
    detach: bool,
}

/// Arguments of `troupe team validate`.
#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
    /// The team file.
    #[arg(value_name = "TEAM.toml")]
    team: PathBuf,
}

/// Runs a `troupe team` subcommand.
pub(crate) async fn run(dirs: &ConfigDirs, command: TeamCommand) -> Result<(), Failure> {
    match command {
        TeamCommand::Run(args) => run_team(dirs, args).await,
        TeamCommand::Validate(args) => {
            let (team, _) = load(dirs, &args.team)?;
            let agents = team.leader().into_iter().count() + team.team.members.len();
            crate::print_lines(&[format!(
                "ok: team `{}` ({}), {agents} agent{}",
                team.name(),
                team.team.strategy,
                if agents == 1 { "" } else { "s" }
            )])
        }
    }
}

/// Where a team's agents are looked for.
fn team_dirs(dirs: &ConfigDirs, team: &Path) -> Result<Vec<PathBuf>, Failure> {
    if dirs.given() {
        return dirs.resolve();
    }
    let own = team.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
    match own {
        Some(dir) if dir.join("agents").is_dir() || dir.join("agents.d").is_dir() => Ok(vec![dir.to_owned()]),
        _ => dirs.resolve(),
    }
}

/// The team file and its agents, checked.
pub(crate) fn load(dirs: &ConfigDirs, path: &Path) -> Result<(TeamFile, AgentRegistry), Failure> {
    let files = team_files(dirs, path)?;
    Ok((files.team().clone(), files.registry().clone()))
}

/// The team file at `path` and the agents it names, found and checked.
pub(crate) fn team_files(dirs: &ConfigDirs, path: &Path) -> Result<TeamFiles, Failure> {
    let team = TeamFile::load(path).map_err(|e| Failure::Usage(anyhow!(e)))?;
    let search = team_dirs(dirs, path)?;
    let registry = crate::agent::discover(&search)?;
    TeamFiles::new(team, registry, &search).map_err(build::failure)
}

async fn run_team(dirs: &ConfigDirs, args: RunArgs) -> Result<(), Failure> {
    let files = team_files(dirs, &args.team)?;
    let workspace = setup::workspace_dir(args.workspace.as_deref())?;
    let task = args.task.join(" ");
    if task.trim().is_empty() {
        return Err(Failure::Usage(anyhow!("the task is empty; say what the team should do")));
    }
    let durability = match args.no_store {
        true => None,
        false => {
            let place = StoreArgs { store: args.store.clone(), workspace: Some(workspace.clone()) };
            Some(Durability::new(crate::store::open(&place.url(&workspace)).await?).with_owner(unique_owner("team")))
        }
    };
    let how = Foreground { json: args.json, approve: args.approve, sandbox: args.sandbox.clone() };
    let service =
        service(&files, &workspace, durability.as_ref(), approvals(&how, durability.is_some()), &how.sandbox).await?;
    if args.detach {
        let run_id = service.enqueue(&task).await.map_err(|e| Failure::Run(anyhow!(e)))?;
        outln!("{run_id}");
        diagln!(
            "queued team run {run_id}: `troupe worker` runs it; watch it with `troupe runs events {run_id} --follow`"
        );
        return Ok(());
    }
    let prepared = service.prepare().map_err(build::failure)?;
    let followed = follow(&files, prepared, Some(task), durability.clone(), how).await;
    if let Some(durability) = durability {
        // Every write was answered; closing ends the store's writer cleanly.
        let _ = durability.store().close().await;
    }
    followed
}

/// How a team is followed in the foreground.
#[derive(Clone, Debug)]
pub(crate) struct Foreground {
    /// Every member's events as JSON lines on stdout.
    pub(crate) json: bool,
    /// What becomes of a member's call that needs approval.
    pub(crate) approve: TeamApprove,
    /// How the members' commands are confined.
    pub(crate) sandbox: setup::SandboxArgs,
}

/// Whether a person can be asked here (stdin and stderr are a terminal).
fn at_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// What a new team's members' calls that need approval do, as `how` says.
fn approvals(how: &Foreground, recorded: bool) -> Approvals {
    match how.approve {
        TeamApprove::Auto => Approvals::Auto,
        TeamApprove::Never => Approvals::Refuse,
        // Someone answers: a person at the terminal, or later, from the record.
        TeamApprove::Ask if at_terminal() || recorded => Approvals::Approver,
        TeamApprove::Ask => Approvals::Refuse,
    }
}

/// The team of `files`, ready to run in `workspace`, recorded in `durability`.
async fn service(
    files: &TeamFiles,
    workspace: &Path,
    durability: Option<&Durability>,
    approvals: Approvals,
    sandbox: &setup::SandboxArgs,
) -> Result<TeamService, Failure> {
    let mut run =
        TeamRun::new(files, workspace).config(crate::load_config()?).approvals(approvals).sandbox(sandbox.choice()?);
    if let Some(durability) = durability {
        run = run.store(durability.clone());
    }
    run.service().await.map_err(build::failure)
}

/// Runs (or resumes, with no `task`) the prepared team in the foreground: its progress on
/// stderr, its members' approvals asked or deferred, its answer on stdout.
pub(crate) async fn follow(
    files: &TeamFiles,
    prepared: PreparedTeam,
    task: Option<String>,
    durability: Option<Durability>,
    how: Foreground,
) -> Result<(), Failure> {
    let team = files.team();
    let rows = prepared.rows().to_vec();
    let names: Vec<&str> = rows.iter().filter(|r| r.role == "member").map(|r| r.name.as_str()).collect();
    let leader = team.leader().map(|l| format!("leader {l}; ")).unwrap_or_default();
    // The team first, then what was left out of it.
    diagln!("team `{}` ({}): {leader}members {}", team.name(), team.team.strategy, names.join(", "));
    for note in prepared.notes() {
        diagln!("note: {note}");
    }
    if let Some(run_id) = prepared.resumes() {
        diagln!("resuming team run {run_id}");
    }
    let control = prepared.control();
    let asking = how.approve != TeamApprove::Never && at_terminal();
    if !asking && durability.is_some() {
        // Nobody to ask here: a member that needs a decision (under `auto`, about a call a
        // crash interrupted) pauses the team, recorded.
        control.defer_approvals();
    }

    let cancel = CancellationToken::new();
    cancel_on_interrupt(cancel.clone());
    let (events, mut received) = mpsc::channel(EVENT_BUFFER);
    let mut progress = Progress::new(how.json, Style::detect());
    let mut asker = Asker::new(control).in_workspace(prepared.workspace());
    let render = async {
        while let Some(event) = received.recv().await {
            progress.event(&event);
            if asking {
                asker.event(&event, &cancel).await;
            }
        }
    };
    let going = async {
        match &task {
            Some(task) => prepared.run(task, Some(events), cancel.clone()).await,
            None => prepared.resume(Some(events), cancel.clone()).await,
        }
    };
    let (report, ()) = tokio::join!(going, render);
    if let Some(which) = &report.exceeded {
        diagln!("[team] its {which} budget ran out: every member was stopped");
    }
    let stats = &report.firewall;

    if how.json {
        let members: Vec<_> = report
            .records
            .iter()
            .map(|r| {
                json!({
                    "member": r.name,
                    "success": r.success,
                    "error": r.error,
                    "usage": r.usage,
                    "cost_usd": r.cost_usd,
                })
            })
            .collect();
        let paused: Vec<_> =
            report.paused.iter().map(|p| json!({"member": p.member, "run_id": p.run_id, "calls": p.pending})).collect();
        let line = json!({
            "type": "team_finished",
            "team": team.name(),
            "run_id": report.run_id,
            "output": report.output,
            "error": report.error,
            "members": members,
            "paused": paused,
            "firewall": stats,
        });
        crate::print_lines(&[line.to_string()])?;
    } else if report.error.is_none() && report.paused.is_empty() && !report.output.trim().is_empty() {
        crate::print_lines(&[report.output.trim_end().to_owned()])?;
    }
    let paused: Vec<&str> = report.paused.iter().map(|p| p.member.as_str()).collect();
    diagln!("{}", progress::summary_table(&rows, &report.records, &paused, &progress));
    let withheld = match stats.fields_withheld {
        0 => String::new(),
        1 => ", 1 report field withheld".to_owned(),
        n => format!(", {n} report fields withheld"),
    };
    diagln!(
        "firewall: {} report{} passed, {} dropped, {} secret{} redacted{withheld}",
        stats.passed,
        if stats.passed == 1 { "" } else { "s" },
        stats.dropped(),
        stats.secrets_redacted,
        if stats.secrets_redacted == 1 { "" } else { "s" },
    );
    if let Some(run_id) = &report.run_id {
        for paused in &report.paused {
            for call in &paused.pending {
                diagln!(
                    "paused: {} wants {} {}: approve with `troupe runs approve {run_id} {}` or reject with `troupe runs reject {run_id} {}`",
                    paused.member,
                    call.tool,
                    crate::render::shorten(&call.arguments.to_string(), 200),
                    call.call_id,
                    call.call_id
                );
            }
        }
        diagln!("team run {run_id} recorded with its members' runs: `troupe runs list` shows them");
    }
    drop(durability);
    match report.failure() {
        None => Ok(()),
        Some(failure) => Err(Failure::Run(anyhow!(failure))),
    }
}

/// Queued team runs, for `troupe worker`: a claimed team run is built again from the
/// files it recorded and resumed (nobody watches it: a member's call that needs a person
/// pauses it), its lease renewed while it works and released when it ends.
pub(crate) struct QueuedTeams {
    /// The worker's store.
    pub(crate) store: std::sync::Arc<dyn troupe::store::Store>,
    /// How long the lease lasts without a heartbeat.
    pub(crate) lease_ttl: std::time::Duration,
    /// How the teams' members' commands are confined.
    pub(crate) sandbox: setup::SandboxArgs,
}

impl ClaimedRuns for QueuedTeams {
    fn takes(&self, record: &troupe::store::RunRecord) -> bool {
        matches!(TeamInput::read(record), Ok(Some(_)))
    }

    fn run(&self, lease: Lease) -> BoxFuture<'static, Result<RunStatus, RuntimeError>> {
        let (store, ttl, sandbox) = (std::sync::Arc::clone(&self.store), self.lease_ttl, self.sandbox.clone());
        Box::pin(async move {
            let renewing = renew_lease(std::sync::Arc::clone(&store), lease.clone(), ttl);
            let (runtime, claimed, run_id, sandbox) =
                (tokio::runtime::Handle::current(), std::sync::Arc::clone(&store), lease.run_id.clone(), sandbox);
            // The team's foreground is not a `Send` future: it runs on a thread of its own,
            // on this runtime.
            let ran = tokio::task::spawn_blocking(move || {
                runtime.block_on(async move {
                    let record = claimed
                        .load_run(&run_id)
                        .await?
                        .ok_or_else(|| troupe::store::StoreError::UnknownRun { run_id: run_id.clone() })?;
                    let how = Foreground { json: false, approve: TeamApprove::Ask, sandbox };
                    match resume(claimed, &record, false, how).await {
                        // A team that paused or failed is recorded so; the worker reads its status.
                        Ok(()) | Err(Failure::Run(_)) => Ok(()),
                        Err(failure) => Err(RuntimeError::TaskFailed(failure.to_string())),
                    }
                })
            })
            .await
            .unwrap_or_else(|e| Err(RuntimeError::TaskFailed(e.to_string())));
            renewing.abort();
            let _ = store.release(&lease, None).await;
            ran?;
            let record = store.load_run(&lease.run_id).await?;
            Ok(record.map_or(RunStatus::Failed, |r| r.status))
        })
    }
}

/// [`resume`], holding the team run's lease while it goes, as a worker that claimed it
/// would: a `troupe worker` does not take the run up meanwhile, and a second resume of it
/// is refused while this one is alive. A holder on this machine that died is taken over.
pub(crate) async fn resume_held(
    store: std::sync::Arc<dyn troupe::store::Store>,
    record: &troupe::store::RunRecord,
    force: bool,
    how: Foreground,
) -> Result<(), Failure> {
    let owner = unique_owner("team");
    let ttl = troupe::runtime::durable::DEFAULT_LEASE_TTL;
    let lease = take_team_lease(store.as_ref(), &record.id, &owner, ttl).await?;
    let renewing = renew_lease(std::sync::Arc::clone(&store), lease.clone(), ttl);
    let ran = resume(std::sync::Arc::clone(&store), record, force, how).await;
    renewing.abort();
    let _ = store.release(&lease, None).await;
    ran
}

/// The team run's lease for `owner`; refused while another live process holds it.
async fn take_team_lease(
    store: &dyn troupe::store::Store,
    run_id: &str,
    owner: &str,
    ttl: std::time::Duration,
) -> Result<Lease, Failure> {
    let taken = troupe::durable::take_lease(store, run_id, owner, ttl).await;
    taken.map_err(|e| Failure::Run(anyhow!(e)))?.map_err(|holder| {
        Failure::Usage(anyhow!(
            "team run {run_id} is being run by {holder}: wait for it to end (or stop that process), then resume it"
        ))
    })
}

/// Renews `lease` every third of `ttl` until aborted or lost.
fn renew_lease(
    store: std::sync::Arc<dyn troupe::store::Store>,
    mut held: Lease,
    ttl: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            match store.heartbeat(&held, ttl, troupe::store::now_millis()).await {
                Ok(Some(renewed)) => held = renewed,
                Ok(None) => return,
                Err(error) => tracing::warn!(%error, "the team run's heartbeat failed; retrying"),
            }
        }
    })
}

/// Resumes the stored team run `record` in the foreground, built again from the files it
/// recorded (refused when they changed since, unless `force`).
pub(crate) async fn resume(
    store: std::sync::Arc<dyn troupe::store::Store>,
    record: &troupe::store::RunRecord,
    force: bool,
    how: Foreground,
) -> Result<(), Failure> {
    let input = TeamInput::read(record)
        .map_err(|e| Failure::Run(anyhow!(e)))?
        .ok_or_else(|| Failure::Usage(anyhow!("run {} is not a team's run", record.id)))?;
    let file = input.file.clone().ok_or_else(|| {
        Failure::Usage(anyhow!("team run {} does not say which team file it ran, so it cannot be resumed", record.id))
    })?;
    let files = TeamFiles::load(&file, &input.agent_dirs).map_err(|e| {
        Failure::Usage(anyhow!("team run {} cannot be resumed: its team file {}: {e}", record.id, file.display()))
    })?;
    let workspace = match &input.workspace {
        Some(dir) => dir.clone(),
        None => setup::workspace_dir(None)?,
    };
    let durability = Durability::new(store).with_owner(unique_owner("team"));
    // The members decide as they did when the team started; `how` says who answers.
    let approvals = input.approvals.unwrap_or(Approvals::Approver);
    let service = service(&files, &workspace, Some(&durability), approvals, &how.sandbox).await?;
    let prepared = service.resume(&record.id, force).await.map_err(|e| match e {
        TeamResumeError::Store(_) | TeamResumeError::Build(_) => Failure::Run(anyhow!(e)),
        _ => Failure::Usage(anyhow!(e)),
    })?;
    follow(&files, prepared, None, Some(durability), how).await
}

/// Cancels the team on Ctrl-C; a second Ctrl-C quits at once.
fn cancel_on_interrupt(cancel: CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            diagln!("interrupted: stopping every member (Ctrl-C again quits at once)");
            cancel.cancel();
        }
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(1);
        }
    });
}
