//! `troupe schedule …`: runs of the coding agent (or of a team, `--team`) started on a
//! cron expression or an interval; workers (`troupe worker`) fire them, each tick once.

use crate::Failure;
use crate::render::shorten;
use crate::run::Approve;
use crate::setup;
use crate::store::{StoreArgs, rfc3339};
use anyhow::anyhow;
use clap::Subcommand;
use comfy_table::{ContentArrangement, Table, presets};
use serde_json::Value;
use troupe::durable::schedule_run;
use troupe::runtime::RunInput;
use troupe::runtime::StoredInput;
use troupe::store::{Schedule, ScheduleTarget, Trigger, now_millis};

/// The subcommands of `troupe schedule`.
#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleCommand {
    /// Adds (or replaces) a schedule starting a run of the coding agent at each tick.
    Add(AddArgs),
    /// The schedules: trigger, task, next and last tick.
    List(ListArgs),
    /// Removes a schedule.
    Rm(RmArgs),
}

/// Arguments of `troupe schedule add`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["cron", "every"])))]
#[command(after_help = "Each tick queues a run for `troupe worker`, which runs it in its workspace. Nobody \
watches a scheduled run: with --approve ask (the default) a call with a side effect pauses it, to be decided with \
`troupe runs approve`; --approve never denies such calls; --approve auto runs them.")]
pub(crate) struct AddArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The schedule's name.
    name: String,
    /// A cron expression, in UTC, seconds first: `0 */5 * * * *` is every five minutes.
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// An interval: `30s`, `5m`, `1h`, `1d`, `500ms`, or combined (`1h30m`).
    #[arg(long, value_name = "DURATION", value_parser = parse_every)]
    every: Option<i64>,
    /// Each tick queues a run of this team (its members' agent files found as for
    /// `troupe team run`) instead of the coding agent.
    #[arg(long, value_name = "TEAM.toml", conflicts_with_all = ["model", "budget_usd", "max_iterations"])]
    team: Option<std::path::PathBuf>,
    #[command(flatten)]
    config: crate::agent::ConfigDirs,
    /// The model, `provider/model` or `demo` [default: as for `troupe run`].
    #[arg(long, short)]
    model: Option<String>,
    /// How the runs' calls that need approval are decided.
    #[arg(long, value_enum, default_value_t = Approve::Ask, value_name = "MODE")]
    approve: Approve,
    /// The most each run may cost, in USD.
    #[arg(long, value_name = "USD")]
    budget_usd: Option<f64>,
    /// The most model calls each run may make [default: 50].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: Option<u32>,
    /// The task (several words are joined by spaces).
    #[arg(required = true, value_name = "TASK")]
    task: Vec<String>,
}

/// Arguments of `troupe schedule list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// One JSON object (a schedule) per line instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `troupe schedule rm`.
#[derive(Debug, clap::Args)]
pub(crate) struct RmArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The schedule's name.
    name: String,
}

/// `1h30m` in milliseconds: numbers each followed by `ms`, `s`, `m`, `h` or `d`.
fn parse_every(text: &str) -> Result<i64, String> {
    let bad = || format!("`{text}` is not a duration; use a number and a unit: 30s, 5m, 1h, 1d, 500ms");
    let mut rest = text.trim();
    let mut total: i64 = 0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let number: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total = number.checked_mul(unit).and_then(|n| total.checked_add(n)).ok_or_else(bad)?;
    }
    if total <= 0 {
        return Err(format!("`{text}` is no time at all; an interval must be positive"));
    }
    Ok(total)
}

/// `5400000` ms as `1h30m`.
fn show_every(ms: i64) -> String {
    let mut out = String::new();
    let mut left = ms;
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)] {
        if left >= size {
            out.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    if out.is_empty() { format!("{ms}ms") } else { out }
}

/// `text` on one line: its lines trimmed and joined, a caret line left out.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && *l != "^").collect::<Vec<_>>().join(" ")
}

/// Runs `troupe schedule …`.
pub(crate) async fn run(command: ScheduleCommand) -> Result<(), Failure> {
    match command {
        ScheduleCommand::Add(args) => add(args).await,
        ScheduleCommand::List(args) => list(args).await,
        ScheduleCommand::Rm(args) => rm(args).await,
    }
}

async fn add(args: AddArgs) -> Result<(), Failure> {
    let trigger = match (args.cron.clone(), args.every) {
        (Some(expression), _) => Trigger::Cron { expression },
        (None, Some(every_ms)) => Trigger::Interval { every_ms },
        (None, None) => return Err(Failure::Usage(anyhow!("give --cron EXPR or --every DURATION"))),
    };
    if let Some(team) = &args.team {
        return add_team(&args, team, trigger).await;
    }
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let environment = std::env::var("TROUPE_MODEL").ok();
    let (model, notice) = crate::chat::choose_model(args.model.as_deref(), environment.as_deref(), &config, &providers);
    if let Some(notice) = notice {
        diagln!("{notice}");
    }
    let policy = setup::unattended_policy(args.approve == Approve::Never, args.approve == Approve::Auto);
    setup::check_budget(&providers, &model, args.budget_usd)?;
    let spec = setup::coding_spec(model, policy, args.max_iterations, args.budget_usd);
    let input = StoredInput::new(&spec, &RunInput::new(args.task.join(" ")));
    let value = serde_json::to_value(&input).map_err(|e| Failure::Run(e.into()))?;
    save(&args, trigger, &spec.name, value, String::new()).await
}

/// Adds a schedule whose ticks queue runs of the team in `team`: its input is what
/// `troupe team run --detach` records, checked now (the files, the agents).
async fn add_team(args: &AddArgs, team: &std::path::Path, trigger: Trigger) -> Result<(), Failure> {
    let files = crate::team::team_files(&args.config, team)?;
    let workspace = args.place.workspace()?;
    let task = args.task.join(" ");
    if task.trim().is_empty() {
        return Err(Failure::Usage(anyhow!("the task is empty; say what the team should do")));
    }
    // Nobody watches a scheduled team: under `ask` a member's call that needs a person
    // pauses it, recorded, to be decided with `troupe runs approve`.
    let approvals = match args.approve {
        Approve::Auto => troupe::workers::build::Approvals::Auto,
        Approve::Never => troupe::workers::build::Approvals::Refuse,
        Approve::Ask => troupe::workers::build::Approvals::Approver,
    };
    let input = troupe::workers::team_record::TeamInput::new(&files, &task, &workspace, approvals);
    let value = serde_json::to_value(&input).map_err(|e| Failure::Run(e.into()))?;
    save(args, trigger, &input.team, value, format!("team `{}`, ", input.team)).await
}

/// Stores the schedule of runs of `agent` with `input`, and says so (`what` names a team).
async fn save(args: &AddArgs, trigger: Trigger, agent: &str, input: Value, what: String) -> Result<(), Failure> {
    let store = args.place.open().await?;
    let existed = store.schedules().await.map_err(|e| Failure::Run(e.into()))?.iter().any(|s| s.id == args.name);
    let schedule =
        schedule_run(store.as_ref(), &args.name, trigger, agent, input, now_millis()).await.map_err(|e| match e {
            // The cron parser's message spans lines (with a caret under the fault): one line here.
            troupe::runtime::RuntimeError::InvalidSchedule(_) => Failure::Usage(anyhow!(one_line(&e.to_string()))),
            other => Failure::Run(other.into()),
        })?;
    let verb = if existed { "replaced" } else { "added" };
    crate::print_lines(&[format!(
        "schedule {} {verb}: {what}first run at {}; `troupe worker` fires it",
        schedule.id,
        rfc3339(schedule.next_fire_at)
    )])
}

async fn list(args: ListArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let schedules = store.schedules().await.map_err(|e| Failure::Run(e.into()))?;
    if args.json {
        let lines: Vec<String> = schedules.iter().filter_map(|s| serde_json::to_string(s).ok()).collect();
        return crate::print_lines(&lines);
    }
    if schedules.is_empty() {
        diagln!("no schedules in {}", store.info().location);
        return Ok(());
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    table.set_header(["name", "trigger", "task", "next", "last", "enabled"]);
    for schedule in &schedules {
        table.add_row(row(schedule));
    }
    crate::print_lines(&[table.to_string()])
}

fn row(schedule: &Schedule) -> [String; 6] {
    let trigger = match &schedule.trigger {
        Trigger::Cron { expression } => format!("cron {expression}"),
        Trigger::Interval { every_ms } => format!("every {}", show_every(*every_ms)),
    };
    let task = match &schedule.target {
        ScheduleTarget::StartRun { input, .. } => {
            shorten(input.get("instruction").and_then(|i| i.as_str()).unwrap_or_default(), 50)
        }
        ScheduleTarget::WakeRun { run_id } => format!("wake run {run_id}"),
    };
    [
        schedule.id.clone(),
        trigger,
        task,
        rfc3339(schedule.next_fire_at),
        schedule.last_fired_at.map_or_else(|| "-".to_owned(), rfc3339),
        if schedule.enabled { "yes" } else { "no" }.to_owned(),
    ]
}

async fn rm(args: RmArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    if store.delete_schedule(&args.name).await.map_err(|e| Failure::Run(e.into()))? {
        diagln!("schedule {} removed", args.name);
        Ok(())
    } else {
        Err(Failure::Usage(anyhow!("no schedule `{}` in {}", args.name, store.info().location)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_and_show_in_units() {
        assert_eq!(parse_every("30s"), Ok(30_000));
        assert_eq!(parse_every("5m"), Ok(300_000));
        assert_eq!(parse_every("1h30m"), Ok(5_400_000));
        assert_eq!(parse_every("500ms"), Ok(500));
        assert_eq!(parse_every("1d"), Ok(86_400_000));
        for bad in ["", "5", "m", "5 minutes", "0s", "-5s", "99999999999999999999d"] {
            assert!(parse_every(bad).is_err(), "{bad}");
        }
        assert_eq!(show_every(5_400_000), "1h30m");
        assert_eq!(show_every(1500), "1s500ms");
        assert_eq!(one_line("bad (x\n  ^\nmore)"), "bad (x more)");
    }
}
