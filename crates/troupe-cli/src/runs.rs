//! `troupe runs …`: the recorded runs — list and inspect them, read and verify their
//! evidence, resume them, and decide or cancel the ones waiting for a person.

mod tree;

use crate::Failure;
use crate::render::{first_line, outcome_message, shorten};
use crate::run::{Approve, Follow, completed, follow};
use crate::setup;
use crate::store::{StoreArgs, rfc3339};
use anyhow::anyhow;
use clap::Subcommand;
use comfy_table::{ContentArrangement, Table, presets};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use troupe::durable::{ResumeRun, send_signal};
use troupe::runtime::durable::{Durability, StoredInput, state_from_value};
use troupe::runtime::{
    ApprovalDecision, PendingCall, RunInput, RunOutcome, RunOutput, RunState, RuntimeError, Signal, Verdict,
};
use troupe::store::{RunFilter, RunRecord, RunStatus, Store, StoreError, verify_log};

/// How often `runs events --follow` looks for new entries.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// The subcommands of `troupe runs`.
#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// The recorded runs, newest first: id, agent, status, activity, last change.
    List(ListArgs),
    /// One run: its task, model, usage, cost, outcome, the calls waiting for a person, its
    /// status changes.
    Show(ShowArgs),
    /// A run's evidence log, one entry a line.
    Events(EventsArgs),
    /// Continues a paused or interrupted run in the foreground, as `troupe run` shows it (a
    /// cancelled run's conversation goes on in a new run).
    Resume(ResumeArgs),
    /// Approves a waiting call (stored at once), then resumes the run here.
    Approve(ApproveArgs),
    /// Rejects a waiting call (the model is told), then resumes the run here.
    Reject(RejectArgs),
    /// Cancels a run (stored at once), then resumes it here so that it ends.
    Cancel(CancelArgs),
    /// Checks a run's evidence hash chain: exit 0 intact, 1 broken.
    Verify(VerifyArgs),
    /// Replays a run through this troupe's code and configuration with its recorded model
    /// responses and tool results (no model call, no tool run): exit 0 identical, 1 with the
    /// first step where it now decides differently, shown as a diff.
    Replay(crate::replay::ReplayArgs),
    /// Starts a new run from a recorded run's conversation as it stood at one of its model
    /// steps, with a change (a message, a model, instructions), in the foreground; the
    /// recorded run is not touched, and the new run names it as its origin.
    Fork(ForkArgs),
    /// Writes a recorded run to a file: `--cassette FILE` for a test that replays it
    /// (`troupe::testing::Cassette`) with no store, network or key.
    Export(crate::replay::ExportArgs),
}

/// Arguments of `troupe runs fork`.
#[derive(Debug, clap::Args)]
pub(crate) struct ForkArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// The model step to start from (1 for the first model call): the new run has the
    /// conversation as that step's request had it (`troupe runs replay` names steps).
    #[arg(long, value_name = "STEP", value_parser = clap::value_parser!(u32).range(1..))]
    at: u32,
    /// The user's message at that step instead: at step 1 the task; later, added to the
    /// tool results the model gets there.
    #[arg(long, value_name = "TEXT")]
    edit_message: Option<String>,
    /// Another model.
    #[arg(long, short, value_name = "MODEL")]
    model: Option<String>,
    /// Instructions (the system prompt) from FILE instead of the agent's.
    #[arg(long, value_name = "FILE")]
    instructions: Option<PathBuf>,
    #[command(flatten)]
    foreground: ForegroundArgs,
}

/// Arguments of `troupe runs list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// Only runs with this status (queued, running, paused, completed, cancelled, failed,
    /// budget_exceeded, max_iterations, incomplete).
    #[arg(long, value_name = "S", value_parser = parse_status)]
    status: Option<RunStatus>,
    /// Only runs of this agent.
    #[arg(long, value_name = "A")]
    agent: Option<String>,
    /// Only runs this finds: part of an agent's or team's name or of a model, letters in
    /// either case, or an id's first characters.
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// At most this many runs (0 for all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: u32,
    /// One JSON object (a run summary) per line instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `troupe runs show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// The stored record with its transitions, as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Arguments of `troupe runs events`.
#[derive(Debug, clap::Args)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// Each entry as one JSON line.
    #[arg(long)]
    json: bool,
    /// Keep printing new entries until the run has ended.
    #[arg(long)]
    follow: bool,
}

/// How a run resumed in the foreground is shown and decided.
#[derive(Debug, clap::Args)]
pub(crate) struct ForegroundArgs {
    /// How further calls that need approval are decided (without a terminal, `ask`
    /// pauses the run again).
    #[arg(long, value_enum, default_value_t = Approve::Ask, value_name = "MODE")]
    approve: Approve,
    /// Print the run's events as JSON lines on stdout instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sandbox: crate::setup::SandboxArgs,
}

/// Arguments of `troupe runs resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id (a team's run, or any run of its tree, resumes the whole team).
    run: String,
    /// Resume a team run even though its team or agent files changed since it started.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    foreground: ForegroundArgs,
}

/// Arguments of `troupe runs approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// The waiting call's id, or the first characters of it (see `troupe runs show`)
    /// [default: the only call waiting].
    call: Option<String>,
    /// Only store the decision; a worker or `troupe runs resume` applies it.
    #[arg(long)]
    no_resume: bool,
    #[command(flatten)]
    foreground: ForegroundArgs,
}

/// Arguments of `troupe runs reject`.
#[derive(Debug, clap::Args)]
pub(crate) struct RejectArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// The waiting call's id, or the first characters of it (see `troupe runs show`)
    /// [default: the only call waiting].
    call: Option<String>,
    /// Why, for the model.
    #[arg(long, value_name = "R")]
    reason: Option<String>,
    /// Only store the decision; a worker or `troupe runs resume` applies it.
    #[arg(long)]
    no_resume: bool,
    #[command(flatten)]
    foreground: ForegroundArgs,
}

/// Arguments of `troupe runs cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// Why, recorded in the outcome.
    #[arg(long, value_name = "R")]
    reason: Option<String>,
    /// Only store the cancellation; a worker or `troupe runs resume` applies it.
    #[arg(long)]
    no_resume: bool,
    #[command(flatten)]
    foreground: ForegroundArgs,
}

/// Arguments of `troupe runs verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
}

fn parse_status(name: &str) -> Result<RunStatus, String> {
    RunStatus::parse(name.trim()).ok_or_else(|| {
        let names: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("`{name}` is not a run status; use one of {}", names.join(", "))
    })
}

/// Runs `troupe runs …`.
pub(crate) async fn run(command: RunsCommand) -> Result<(), Failure> {
    match command {
        RunsCommand::List(args) => list(args).await,
        RunsCommand::Show(args) => show(args).await,
        RunsCommand::Events(args) => events(args).await,
        RunsCommand::Resume(args) => resume(args).await,
        RunsCommand::Approve(args) => {
            let call = waiting_call(&args.place, &args.run, args.call.as_deref()).await?;
            let signal = Signal::approval(call.clone(), ApprovalDecision::Approve);
            decide(&args.place, &args.run, Some(&call), signal, args.no_resume, &args.foreground).await
        }
        RunsCommand::Reject(args) => {
            let call = waiting_call(&args.place, &args.run, args.call.as_deref()).await?;
            let reason = args.reason.clone().or_else(|| Some("rejected with `troupe runs reject`".to_owned()));
            let signal = Signal::approval(call.clone(), ApprovalDecision::Reject { reason });
            decide(&args.place, &args.run, Some(&call), signal, args.no_resume, &args.foreground).await
        }
        RunsCommand::Cancel(args) => {
            let signal = Signal::Cancel { reason: args.reason.clone() };
            decide(&args.place, &args.run, None, signal, args.no_resume, &args.foreground).await
        }
        RunsCommand::Verify(args) => verify(args).await,
        RunsCommand::Replay(args) => crate::replay::replay(args).await,
        RunsCommand::Fork(args) => fork(args).await,
        RunsCommand::Export(args) => crate::replay::export(args).await,
    }
}

/// The runs under `root` (its members' runs, theirs, ...), each with its depth from 1.
pub(crate) async fn runs_under(
    store: &dyn Store,
    root: &str,
) -> Result<Vec<(usize, troupe::store::RunSummary)>, Failure> {
    tree::walk(store, root).await.map_err(store_failure)
}

/// Whether `record` is a team's own run.
pub(crate) fn is_team_run(record: &RunRecord) -> bool {
    tree::is_team(record)
}

/// A store failure after the store opened: an unknown run is the user's to fix, anything
/// else a failure of the command.
fn store_failure(error: StoreError) -> Failure {
    match error {
        StoreError::UnknownRun { .. } => Failure::Usage(error.into()),
        other => Failure::Run(other.into()),
    }
}

/// The stored run `run_id`, or the one run whose id begins with it; exit 2 when there is
/// none, or when several runs begin with it.
pub(crate) async fn load(store: &dyn Store, run_id: &str) -> Result<RunRecord, Failure> {
    if let Some(record) = store.load_run(run_id).await.map_err(store_failure)? {
        return Ok(record);
    }
    let unknown = || store_failure(StoreError::UnknownRun { run_id: run_id.to_owned() });
    if run_id.is_empty() {
        return Err(unknown());
    }
    let filter = RunFilter { id_prefix: Some(run_id.to_owned()), limit: 6, ..RunFilter::default() };
    let matches = store.list_runs(&filter).await.map_err(store_failure)?;
    match matches.as_slice() {
        [] => Err(unknown()),
        [only] => store.load_run(&only.id).await.map_err(store_failure)?.ok_or_else(unknown),
        several => {
            let ids: Vec<&str> = several.iter().take(5).map(|r| r.id.as_str()).collect();
            let more = if several.len() > 5 { ", …" } else { "" };
            Err(Failure::Usage(anyhow!(
                "`{run_id}` begins the ids of several runs ({}{more}); type more of the id",
                ids.join(", ")
            )))
        }
    }
}

/// The call of run `run_id` (or of its team's tree) that a decision is about: `given`
/// when it waits, the only waiting call whose id begins with `given`, or, with none
/// given, the only call waiting. Exit 2 when that does not name exactly one.
async fn waiting_call(place: &StoreArgs, run_id: &str, given: Option<&str>) -> Result<String, Failure> {
    let store = place.open_existing().await?;
    let record = load(store.as_ref(), run_id).await?;
    let mut records = vec![];
    match tree::team_root(store.as_ref(), &record).await.map_err(store_failure)? {
        Some(team) => {
            for (_, run) in tree::walk(store.as_ref(), &team.id).await.map_err(store_failure)? {
                if !run.status.is_terminal() {
                    records.push(load(store.as_ref(), &run.id).await?);
                }
            }
        }
        None => records.push(record),
    }
    let waiting: Vec<(String, String)> = records
        .iter()
        .flat_map(|record| {
            let stored = Stored::read(record);
            stored.waiting().iter().map(|c| (c.call_id.to_string(), c.tool.clone())).collect::<Vec<_>>()
        })
        .collect();
    if let Some(given) = given
        && waiting.iter().any(|(id, _)| id == given)
    {
        return Ok(given.to_owned());
    }
    let candidates: Vec<&(String, String)> =
        waiting.iter().filter(|(id, _)| given.is_none_or(|given| id.starts_with(given))).collect();
    let listed = || candidates.iter().map(|(id, tool)| format!("{id} ({tool})")).collect::<Vec<_>>().join(", ");
    match (candidates.as_slice(), given) {
        ([(id, _)], _) => Ok(id.clone()),
        // Let the decision itself say which calls do wait.
        ([], Some(given)) => Ok(given.to_owned()),
        ([], None) => Err(Failure::Usage(anyhow!("no call of run {run_id} is waiting for a person"))),
        (_, None) => Err(Failure::Usage(anyhow!("several calls wait: {}; name one", listed()))),
        (_, Some(given)) => {
            Err(Failure::Usage(anyhow!("`{given}` begins the ids of several waiting calls: {}; type more", listed())))
        }
    }
}

async fn list(args: ListArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let filter = RunFilter {
        status: args.status,
        agent: args.agent,
        search: args.search,
        limit: args.limit,
        ..RunFilter::default()
    };
    let runs = store.list_runs(&filter).await.map_err(store_failure)?;
    let mut under = Vec::with_capacity(runs.len());
    for run in &runs {
        under.push(tree::walk(store.as_ref(), &run.id).await.map_err(store_failure)?.len());
    }
    if args.json {
        let lines: Vec<String> = runs
            .iter()
            .zip(&under)
            .filter_map(|(run, under)| {
                let mut value = serde_json::to_value(run).ok()?;
                value.as_object_mut()?.insert("runs_under".into(), (*under).into());
                Some(value.to_string())
            })
            .collect();
        return crate::print_lines(&lines);
    }
    if runs.is_empty() {
        diagln!("no runs recorded in {}", store.info().location);
        return Ok(());
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    table.set_header(["id", "agent", "status", "runs under", "activity", "updated"]);
    for (run, under) in runs.iter().zip(&under) {
        let activity = run.activity.as_deref().map(|a| shorten(a, 60)).unwrap_or_default();
        let under = if *under == 0 { String::new() } else { under.to_string() };
        let row = [run.id.clone(), run.agent.clone(), run.status.to_string(), under, activity, rfc3339(run.updated_at)];
        table.add_row(row);
    }
    crate::print_lines(&[table.to_string()])
}

/// What a stored run was started with and where it stands, as far as this build can read it.
struct Stored {
    input: Option<StoredInput>,
    state: Option<RunState>,
}

impl Stored {
    fn read(record: &RunRecord) -> Self {
        Stored {
            input: StoredInput::from_value(record.input.clone()).ok(),
            state: state_from_value(&record.id, record.state.clone()).ok(),
        }
    }

    /// The calls waiting for a person.
    fn waiting(&self) -> Vec<&PendingCall> {
        self.state.iter().flat_map(|s| s.pending_calls().iter().filter(|c| c.is_awaiting())).collect()
    }
}

async fn show(args: ShowArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let record = load(store.as_ref(), &args.run).await?;
    let transitions = store.transitions(&record.id).await.map_err(store_failure)?;
    let under = tree::descendants(store.as_ref(), &record.id).await.map_err(store_failure)?;
    if args.json {
        let mut value = serde_json::to_value(&record).map_err(|e| Failure::Run(e.into()))?;
        if let Some(object) = value.as_object_mut() {
            object.insert("transitions".into(), serde_json::to_value(&transitions).unwrap_or_default());
            object.insert("runs_under".into(), under.iter().map(tree::Node::json).collect());
        }
        return crate::print_lines(&[value.to_string()]);
    }
    let stored = Stored::read(&record);
    let mut rows: Vec<(&str, String)> = vec![
        ("run", record.id.clone()),
        ("agent", record.agent.clone()),
        ("status", record.status.to_string()),
        ("activity", record.activity.clone().unwrap_or_else(|| "-".into())),
        ("created", rfc3339(record.created_at)),
        ("updated", rfc3339(record.updated_at)),
    ];
    if let Some(origin) = stored.input.as_ref().and_then(|input| input.forked_from.as_ref()) {
        rows.push(("forked from", format!("{} at step {}", origin.run_id, origin.step)));
    }
    let forks = troupe::replay::forks_of(store.as_ref(), &record.id).await.map_err(store_failure)?;
    if !forks.is_empty() {
        let listed: Vec<String> = forks.iter().map(|(id, step)| format!("{id} (at step {step})")).collect();
        rows.push(("forks", listed.join(", ")));
    }
    match &stored.input {
        Some(input) if input.instruction.is_empty() && input.forked_from.is_some() => {
            rows.push(("task", "(the conversation of its origin)".into()))
        }
        Some(input) => rows.push(("task", input.instruction.clone())),
        None if tree::is_team(&record) => rows.extend(tree::team_rows(&record)),
        None => rows.push(("task", "(the stored input cannot be read by this troupe)".into())),
    }
    if let Some(state) = &stored.state {
        let usage = state.usage();
        rows.push(("model", state.model().to_owned()));
        rows.push(("iteration", state.iteration().to_string()));
        rows.push((
            "usage",
            format!(
                "in {} · out {} · cache read {} · cache write {} tokens",
                usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
            ),
        ));
        rows.push(("cost", format!("${:.4}", state.cost_usd())));
        match &state.outcome() {
            Some(RunOutcome::Completed { output }) => rows.push(("answer", output.clone())),
            Some(RunOutcome::Paused { .. }) | None => {}
            Some(outcome) => rows.push(("outcome", outcome_message(outcome))),
        }
    }
    let mut text = String::new();
    for (name, value) in rows {
        let mut lines = value.lines();
        text.push_str(&format!("{name:<10} {}\n", lines.next().unwrap_or_default()));
        for line in lines {
            text.push_str(&format!("{:<10} {line}\n", ""));
        }
    }
    // A decision stored but not applied yet (the run has not resumed) is said as such,
    // not left as waiting.
    let cursor = stored.state.as_ref().map_or(0, |s| s.signal_cursor());
    let stored_decisions: BTreeMap<String, (i64, &'static str)> = store
        .pending_signals(&record.id, cursor)
        .await
        .map_err(store_failure)?
        .into_iter()
        .filter_map(|pending| match serde_json::from_value::<Signal>(pending.payload) {
            Ok(Signal::Approval { call_id, decision }) => {
                let word = match decision {
                    ApprovalDecision::Reject { .. } => "rejected",
                    _ => "approved",
                };
                Some((call_id.to_string(), (pending.seq, word)))
            }
            _ => None,
        })
        .collect();
    let (decided, waiting): (Vec<&PendingCall>, Vec<&PendingCall>) =
        stored.waiting().into_iter().partition(|c| stored_decisions.contains_key(c.call_id.as_str()));
    if !decided.is_empty() {
        text.push_str("decided, applied when the run resumes:\n");
        for call in decided {
            let (seq, word) = stored_decisions[call.call_id.as_str()];
            let label = crate::render::call_label(&call.tool, &call.effective_arguments().to_string());
            text.push_str(&format!("  {}  {label}: {word} (signal {seq})\n", call.call_id));
        }
    }
    if !waiting.is_empty() {
        text.push_str("waiting for a person:\n");
        for call in waiting {
            let reason = match &call.verdict {
                Some(Verdict::Ask { reason }) => reason.as_str(),
                _ => "",
            };
            let label = crate::render::call_label(&call.tool, &call.effective_arguments().to_string());
            text.push_str(&format!("  {}  {label}: {}\n", call.call_id, first_line(reason, 200)));
            // What approving it would run.
            text.push_str(&format!("      arguments: {}\n", shorten(&call.effective_arguments().to_string(), 400)));
            text.push_str(&format!(
                "      approve: troupe runs approve {id} {call}   reject: troupe runs reject {id} {call}\n",
                id = record.id,
                call = call.call_id
            ));
        }
    }
    if !under.is_empty() {
        text.push_str("runs under it:\n");
        for line in tree::lines(&under) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    text.push_str("transitions:\n");
    for transition in &transitions {
        let from = transition.from.map_or_else(|| "(created)".to_owned(), |s| s.to_string());
        text.push_str(&format!("  {}  {from} → {}\n", rfc3339(transition.at), transition.to));
    }
    crate::print_lines(&[text.trim_end().to_owned()])
}

async fn events(args: EventsArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let root = load(store.as_ref(), &args.run).await?;
    // Each run of the tree (the run, and the runs under it: a team's members') and how far
    // its evidence was printed.
    let mut after: BTreeMap<String, i64> = BTreeMap::new();
    loop {
        // The status is read before the entries: the entry that ends a run is stored with
        // its final status, so once that is seen, one more read has every entry. A team's
        // run ends after every run under it.
        let ended = !args.follow || load(store.as_ref(), &root.id).await?.status.is_terminal();
        let mut runs = vec![(root.id.clone(), root.agent.clone())];
        let under = tree::walk(store.as_ref(), &root.id).await.map_err(store_failure)?;
        runs.extend(under.into_iter().map(|(_, run)| (run.id, run.agent)));
        let named = runs.len() > 1;
        let mut entries = Vec::new();
        for (run_id, agent) in runs {
            let seen = after.entry(run_id.clone()).or_insert(0);
            let new = store.evidence(&run_id, *seen).await.map_err(store_failure)?;
            if let Some(last) = new.last() {
                *seen = last.seq;
            }
            entries.extend(new.into_iter().map(|e| (agent.clone(), e)));
        }
        // Across the runs of a tree, in the order they were written.
        entries.sort_by_key(|(_, e)| e.recorded_at);
        let lines: Vec<String> = entries
            .iter()
            .map(|(agent, e)| match (args.json, named) {
                (true, _) => serde_json::to_string(e).unwrap_or_default(),
                (false, true) => format!("[{agent}] {}", crate::evidence::line(e)),
                (false, false) => crate::evidence::line(e),
            })
            .collect();
        if !crate::print_lines_or_stop(&lines)? || ended {
            return Ok(());
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

async fn verify(args: VerifyArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let root = load(store.as_ref(), &args.run).await?;
    let under = tree::walk(store.as_ref(), &root.id).await.map_err(store_failure)?;
    let named = !under.is_empty();
    let runs = std::iter::once((root.id, root.agent)).chain(under.into_iter().map(|(_, run)| (run.id, run.agent)));
    let mut broken_runs = Vec::new();
    for (run_id, agent) in runs {
        let entries = store.evidence(&run_id, 0).await.map_err(store_failure)?;
        // The head the store moved with each entry: a log cut short of it was shortened.
        let head = store.load_run(&run_id).await.map_err(store_failure)?.map(|r| r.evidence_head).unwrap_or_default();
        let line = match verify_log(&entries, &head, &run_id) {
            Ok(()) => format!("ok: {} entries, hash chain intact", entries.len()),
            Err(broken) => {
                broken_runs.push(run_id.clone());
                format!("broken: {broken}")
            }
        };
        crate::print_lines(&[if named { format!("{run_id} ({agent}) {line}") } else { line }])?;
    }
    match broken_runs.as_slice() {
        [] => Ok(()),
        [one] => Err(Failure::Run(anyhow!(
            "the evidence of run {one} does not verify: it was changed or cut after it was written"
        ))),
        many => Err(Failure::Run(anyhow!(
            "the evidence of runs {} does not verify: they were changed or cut after they were written",
            many.join(", ")
        ))),
    }
}

async fn resume(args: ResumeArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let record = load(store.as_ref(), &args.run).await?;
    if let Some(team) = tree::team_root(store.as_ref(), &record).await.map_err(store_failure)? {
        return crate::team::resume_held(store, &team, args.force, team_foreground(&args.foreground)).await;
    }
    if record.status == RunStatus::Cancelled {
        return continue_cancelled(&args.place, store, &record, &args.foreground).await;
    }
    match foreground(&args.place, store, &record, &args.foreground).await? {
        Resumed::Ran(output) => completed(&output),
        Resumed::Leased(error) => Err(Failure::Run(error.into())),
    }
}

/// A runner for the stored run (its agent's spec, checked against this troupe's tools and
/// models) in `place`'s workspace, the spec, and the workspace.
fn stored_runner(
    place: &StoreArgs,
    stored: &Stored,
    record: &RunRecord,
    options: &ForegroundArgs,
) -> Result<(troupe::runtime::Runner, troupe::runtime::AgentSpec, std::path::PathBuf), Failure> {
    let Some(input) = &stored.input else {
        return Err(Failure::Run(anyhow!("the stored input of run {} cannot be read by this troupe", record.id)));
    };
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let workspace = place.workspace()?;
    let runner = setup::runner(&workspace, providers, &options.sandbox.choice()?)?;
    setup::validate(&runner, &input.spec)?;
    Ok((runner, input.spec.clone(), workspace))
}

/// A cancelled run's record is final; resuming it goes on with its conversation in a new
/// run of the same agent, which the model takes up where it stopped.
async fn continue_cancelled(
    place: &StoreArgs,
    store: Arc<dyn Store>,
    record: &RunRecord,
    options: &ForegroundArgs,
) -> Result<(), Failure> {
    let stored = Stored::read(record);
    let (runner, spec, workspace) = stored_runner(place, &stored, record, options)?;
    let next = crate::run::continued(store.as_ref(), &record.id, RunInput::new("")).await?;
    let runner = runner.with_store(Durability::new(store));
    let handle = runner.start(Arc::new(spec), next);
    diagln!("run {} was cancelled; its conversation goes on in run {}", record.id, handle.run_id);
    diagln!("run {}", handle.run_id);
    let follow_options = Follow {
        json: options.json,
        approve: options.approve,
        recorded: true,
        known: Vec::new(),
        workspace: Some(workspace.clone()),
    };
    completed(&follow(handle, &follow_options).await?)
}

/// `troupe runs fork`: the new run, recorded, in the foreground.
async fn fork(args: ForkArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let record = load(store.as_ref(), &args.run).await?;
    let recording = troupe::replay::Recording::load(store.as_ref(), &record.id).await.map_err(|error| match error {
        troupe::replay::ReplayError::Store(error) => store_failure(error),
        other => Failure::Usage(other.into()),
    })?;
    let instructions = match &args.instructions {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(anyhow!("--instructions {}: cannot read it: {e}", path.display())))?,
        ),
        None => None,
    };
    let edits =
        troupe::replay::ForkEdits { message: args.edit_message.clone(), model: args.model.clone(), instructions };
    let forked = troupe::replay::fork(&recording, args.at, edits).map_err(|e| Failure::Usage(e.into()))?;
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let workspace = args.place.workspace()?;
    let runner = setup::runner(&workspace, providers, &args.foreground.sandbox.choice()?)?;
    setup::validate(&runner, &forked.spec)?;
    // Its id begins with its origin's: the origin's forks are found by their ids.
    let id = troupe::replay::next_fork_run_id(store.as_ref(), &record.id).await.map_err(store_failure)?;
    let runner = runner.with_store(Durability::new(store));
    let handle = runner.start(Arc::new(forked.spec), forked.input.run_id(id));
    diagln!("run {} forks run {} at step {}", handle.run_id, record.id, args.at);
    diagln!("run {}", handle.run_id);
    let follow_options = Follow {
        json: args.foreground.json,
        approve: args.foreground.approve,
        recorded: true,
        known: Vec::new(),
        workspace: Some(workspace.clone()),
    };
    completed(&follow(handle, &follow_options).await?)
}

/// Stores `signal` for the run (about `call`, which must be waiting), then resumes the run
/// here unless told not to or another process holds it.
async fn decide(
    place: &StoreArgs,
    run_id: &str,
    call: Option<&str>,
    signal: Signal,
    no_resume: bool,
    options: &ForegroundArgs,
) -> Result<(), Failure> {
    let store = place.open_existing().await?;
    let record = load(store.as_ref(), run_id).await?;
    let run_id = record.id.as_str();
    if let Some(team) = tree::team_root(store.as_ref(), &record).await.map_err(store_failure)? {
        return decide_in_team(store, &team, call, signal, no_resume, options).await;
    }
    if record.status.is_terminal() {
        return Err(finished(&record));
    }
    if let Some(call) = call {
        let stored = Stored::read(&record);
        let waiting = stored.waiting();
        if !waiting.iter().any(|c| c.call_id.as_str() == call) {
            let listed: Vec<String> = waiting.iter().map(|c| format!("{} ({})", c.call_id, c.tool)).collect();
            let which = match listed.is_empty() {
                true => format!("no call of run {run_id} is waiting for a person (it is {})", record.status),
                false => format!("the calls waiting are: {}", listed.join(", ")),
            };
            return Err(Failure::Usage(anyhow!(
                "call `{call}` of run {run_id} is not waiting for a decision; {which}"
            )));
        }
    }
    let seq = send_signal(store.as_ref(), run_id, &signal).await.map_err(|e| match e {
        RuntimeError::RunFinished => finished(&record),
        RuntimeError::Store(error) => store_failure(error),
        other => Failure::Run(other.into()),
    })?;
    diagln!("signal {seq} stored");
    if no_resume {
        diagln!("run {run_id} takes it when a worker or `troupe runs resume {run_id}` resumes it");
        return Ok(());
    }
    match foreground(place, store, &record, options).await? {
        // Cancelling a run that then ends cancelled did what was asked.
        Resumed::Ran(output) if matches!(signal, Signal::Cancel { .. }) => match output.outcome {
            RunOutcome::Cancelled { .. } => Ok(()),
            _ => completed(&output),
        },
        Resumed::Ran(output) => completed(&output),
        Resumed::Leased(RuntimeError::RunLeased { owner, .. }) => {
            diagln!(
                "run {run_id} is held by `{owner}`, which takes the signal (if that process died, resume the run \
                 with `troupe runs resume {run_id}` once its lease lapses)"
            );
            Ok(())
        }
        Resumed::Leased(other) => Err(Failure::Run(other.into())),
    }
}

/// [`decide`] for a run of a team's tree (`team` is its team's run): the decision goes
/// to the member run whose call waits (a cancellation to every run of the tree still
/// going), then the team resumes here unless told not to.
async fn decide_in_team(
    store: Arc<dyn Store>,
    team: &RunRecord,
    call: Option<&str>,
    signal: Signal,
    no_resume: bool,
    options: &ForegroundArgs,
) -> Result<(), Failure> {
    if team.status.is_terminal() {
        return Err(finished(team));
    }
    let mut going = Vec::new();
    for (_, run) in tree::walk(store.as_ref(), &team.id).await.map_err(store_failure)? {
        if !run.status.is_terminal() {
            going.push(load(store.as_ref(), &run.id).await?);
        }
    }
    let targets: Vec<&RunRecord> = match call {
        None => going.iter().collect(),
        Some(call) => {
            let waiting: Vec<(&RunRecord, String, String)> = going
                .iter()
                .flat_map(|record| {
                    let stored = Stored::read(record);
                    let calls: Vec<(String, String)> =
                        stored.waiting().iter().map(|c| (c.call_id.to_string(), c.tool.clone())).collect();
                    calls.into_iter().map(move |(id, tool)| (record, id, tool))
                })
                .collect();
            match waiting.iter().find(|(_, id, _)| id == call) {
                Some((record, _, _)) => vec![*record],
                None => {
                    let listed: Vec<String> = waiting
                        .iter()
                        .map(|(r, id, tool)| format!("{id} ({tool}, {} run {})", r.agent, r.id))
                        .collect();
                    let which = match listed.is_empty() {
                        true => {
                            format!("no call of team run {} is waiting for a person (it is {})", team.id, team.status)
                        }
                        false => format!("the calls waiting are: {}", listed.join(", ")),
                    };
                    return Err(Failure::Usage(anyhow!(
                        "call `{call}` of team run {} is not waiting for a decision; {which}",
                        team.id
                    )));
                }
            }
        }
    };
    for target in targets {
        // Stored for the member's run, which is not queued on its own: the team resumes it.
        let payload = serde_json::to_value(&signal).map_err(|e| Failure::Run(e.into()))?;
        let seq = store
            .send_signal(&target.id, &signal.kind().to_string(), payload, troupe::store::now_millis())
            .await
            .map_err(store_failure)?;
        diagln!("signal {seq} stored for run {} ({})", target.id, target.agent);
    }
    if no_resume {
        if team.status == RunStatus::Paused {
            // A worker takes the team up again, as it would a paused run whose decision came.
            store.enqueue(&team.id, troupe::store::now_millis()).await.map_err(store_failure)?;
        }
        diagln!("team run {} takes it when a worker or `troupe runs resume {}` resumes it", team.id, team.id);
        return Ok(());
    }
    crate::team::resume_held(store, team, false, team_foreground(options)).await
}

/// A team resumed in the foreground, decided as `options` say.
fn team_foreground(options: &ForegroundArgs) -> crate::team::Foreground {
    let approve = match options.approve {
        Approve::Ask => crate::team::TeamApprove::Ask,
        Approve::Auto => crate::team::TeamApprove::Auto,
        Approve::Never => crate::team::TeamApprove::Never,
    };
    crate::team::Foreground { json: options.json, approve, sandbox: options.sandbox.clone() }
}

/// Exit 2: a finished run takes nothing more.
fn finished(record: &RunRecord) -> Failure {
    Failure::Usage(anyhow!("run {} has finished ({})", record.id, record.status))
}

/// How a resume in the foreground went.
enum Resumed {
    /// The run went on here, to this output.
    Ran(Box<RunOutput>),
    /// Another process holds the run ([`RuntimeError::RunLeased`]).
    Leased(RuntimeError),
}

/// Continues the stored run in the foreground, with the coding agent's tools in the
/// workspace and the run's stored definition.
async fn foreground(
    place: &StoreArgs,
    store: Arc<dyn Store>,
    record: &RunRecord,
    options: &ForegroundArgs,
) -> Result<Resumed, Failure> {
    if let Some(error) = troupe::runtime::durable::resumable_failure(record) {
        diagln!(
            "run {} failed ({error}); it goes on from its last checkpoint: the model call it was making is made \
             again, and no tool call that completed is repeated",
            record.id
        );
    } else if record.status.is_terminal() {
        return Err(finished(record));
    }
    let stored = Stored::read(record);
    let (runner, _, workspace) = stored_runner(place, &stored, record, options)?;
    let runner = runner.with_store(Durability::new(store));
    let handle = match runner.resume_run(&record.id).await {
        Ok(handle) => handle,
        Err(error @ RuntimeError::RunLeased { .. }) => return Ok(Resumed::Leased(error)),
        Err(RuntimeError::RunFinished) => return Err(finished(record)),
        Err(RuntimeError::Store(error)) => return Err(store_failure(error)),
        Err(error) => return Err(setup::build_failure(error)),
    };
    diagln!("resuming run {}", record.id);
    let known = stored
        .state
        .iter()
        .flat_map(|s| s.pending_calls().iter().filter(|c| c.result.is_none()))
        .map(|c| (c.call_id.clone(), c.tool.clone(), c.effective_arguments().clone()))
        .collect();
    let follow_options = Follow {
        json: options.json,
        approve: options.approve,
        recorded: true,
        known,
        workspace: Some(workspace.clone()),
    };
    Ok(Resumed::Ran(Box::new(follow(handle, &follow_options).await?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_by_their_stored_names() {
        assert_eq!(parse_status("budget_exceeded"), Ok(RunStatus::BudgetExceeded));
        assert!(parse_status("done").is_err_and(|e| e.contains("paused")));
    }
}
