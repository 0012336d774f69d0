//! `troupe team`: teams of agent files.
//!
//! ```text
//! troupe team run TEAM.toml TASK… [-w DIR] [--approve auto|never] [--store URL | --no-store] [--json]
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
//!   its `[agent.execution]` says (`isolation = "process"`).
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
//!   `.troupe/troupe.db`; `--no-store` records nothing) with its local members' runs as
//!   its children, each durable like any run; `troupe runs list` shows them.
//! - **Approvals**: nobody can be asked about a member's call, so a call that needs
//!   approval runs (`--approve auto`) or is refused with the reason (`never`, the default).
//!
//! Output: the team's answer on stdout (with `--json`, every member's events as JSON lines,
//! then one `team_finished` line), a line per member event of interest on stderr, then a
//! summary table per member. Exit codes: 0 every member call completed; 1 one did not
//! (or the budget ran out, or the team was cancelled); 2 a usage or configuration error (a
//! bad team or agent file, an unknown agent, a missing API key).

mod progress;

use crate::agent::ConfigDirs;
use crate::agent::build::{self, Approvals};
use crate::render::Style;
use crate::store::StoreArgs;
use crate::{Failure, setup};
use anyhow::anyhow;
use clap::Subcommand;
use progress::Progress;
use serde_json::json;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::runtime::durable::{Durability, unique_owner};
use troupe_workers::registry::AgentRegistry;
use troupe_workers::team_file::TeamFile;
use troupe_workers::team_run::{TeamFiles, TeamRun};

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

/// What becomes of a member's call that needs approval (nobody can be asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TeamApprove {
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
    /// What becomes of a member's call that needs approval: nobody can be asked, so it
    /// runs (auto) or is refused (never).
    #[arg(long, value_enum, default_value_t = TeamApprove::Never, value_name = "MODE")]
    approve: TeamApprove,
    /// Print every member's events as JSON lines on stdout, then a `team_finished` line.
    #[arg(long)]
    json: bool,
    /// Where the team's run and its members' runs are recorded: `sqlite://PATH` (or a
    /// file path) or `postgres://USER@HOST/DB` [default: .troupe/troupe.db in the
    /// workspace].
    // A PostgreSQL URL may hold a password: `--help` must not show it.
    #[arg(long, env = "TROUPE_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    /// Record nothing.
    #[arg(long, conflicts_with = "store")]
    no_store: bool,
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
fn team_files(dirs: &ConfigDirs, path: &Path) -> Result<TeamFiles, Failure> {
    let team = TeamFile::load(path).map_err(|e| Failure::Usage(anyhow!(e)))?;
    let search = team_dirs(dirs, path)?;
    let registry = crate::agent::discover(&search)?;
    TeamFiles::new(team, registry, &search).map_err(build::failure)
}

async fn run_team(dirs: &ConfigDirs, args: RunArgs) -> Result<(), Failure> {
    let files = team_files(dirs, &args.team)?;
    let team = files.team();
    let workspace = setup::workspace_dir(args.workspace.as_deref())?;
    let config = crate::load_config()?;
    let task = args.task.join(" ");
    if task.trim().is_empty() {
        return Err(Failure::Usage(anyhow!("the task is empty; say what the team should do")));
    }
    let approvals = match args.approve {
        TeamApprove::Auto => Approvals::Auto,
        TeamApprove::Never => Approvals::Refuse,
    };
    let durability = match args.no_store {
        true => None,
        false => {
            let place = StoreArgs { store: args.store.clone(), workspace: Some(workspace.clone()) };
            Some(Durability::new(crate::store::open(&place.url(&workspace)).await?).with_owner(unique_owner("team")))
        }
    };
    let mut run = TeamRun::new(&files, &workspace).config(config).approvals(approvals);
    if let Some(durability) = &durability {
        run = run.store(durability.clone());
    }
    let prepared = run.prepare().await.map_err(build::failure)?;
    for note in prepared.notes() {
        eprintln!("note: {note}");
    }
    let rows = prepared.rows().to_vec();
    let names: Vec<&str> = rows.iter().filter(|r| r.role == "member").map(|r| r.name.as_str()).collect();
    let leader = team.leader().map(|l| format!("leader {l}; ")).unwrap_or_default();
    eprintln!("team `{}` ({}): {leader}members {}", team.name(), team.team.strategy, names.join(", "));

    let cancel = CancellationToken::new();
    cancel_on_interrupt(cancel.clone());
    let (events, mut received) = mpsc::channel(EVENT_BUFFER);
    let mut progress = Progress::new(args.json, Style::detect());
    let render = async {
        while let Some(event) = received.recv().await {
            progress.event(&event);
        }
    };
    let (report, ()) = tokio::join!(prepared.run(&task, Some(events), cancel), render);
    if let Some(which) = &report.exceeded {
        eprintln!("[team] its {which} budget ran out: every member was stopped");
    }
    let stats = &report.firewall;

    if args.json {
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
        let line = json!({
            "type": "team_finished",
            "team": team.name(),
            "run_id": report.run_id,
            "output": report.output,
            "error": report.error,
            "members": members,
            "firewall": stats,
        });
        crate::print_lines(&[line.to_string()])?;
    } else if report.error.is_none() && !report.output.trim().is_empty() {
        crate::print_lines(&[report.output.trim_end().to_owned()])?;
    }
    eprintln!("{}", progress::summary_table(&rows, &report.records, &progress));
    eprintln!(
        "firewall: {} report{} passed, {} dropped, {} secret{} redacted",
        stats.passed,
        if stats.passed == 1 { "" } else { "s" },
        stats.dropped(),
        stats.secrets_redacted,
        if stats.secrets_redacted == 1 { "" } else { "s" },
    );
    if let Some(run_id) = &report.run_id {
        eprintln!("team run {run_id} recorded with its members' runs: `troupe runs list` shows them");
    }
    if let Some(durability) = durability {
        // Every write was answered; closing ends the store's writer cleanly.
        let _ = durability.store().close().await;
    }
    match report.failure() {
        None => Ok(()),
        Some(failure) => Err(Failure::Run(anyhow!(failure))),
    }
}

/// Cancels the team on Ctrl-C; a second Ctrl-C quits at once.
fn cancel_on_interrupt(cancel: CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: stopping every member (Ctrl-C again quits at once)");
            cancel.cancel();
        }
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(1);
        }
    });
}
