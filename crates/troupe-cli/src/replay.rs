//! `troupe runs replay`: a recorded run through the current code and configuration, with
//! its model responses and tool results substituted, and where it now decides differently.

use crate::Failure;
use crate::runs::load;
use crate::setup;
use crate::store::StoreArgs;
use anyhow::anyhow;
use std::path::PathBuf;
use troupe::replay::{Recording, ReplayError, ReplayOptions};

/// Arguments of `troupe runs replay`.
#[derive(Debug, clap::Args)]
#[command(after_help = "The run goes again through this troupe's code and configuration (its instructions, \
tools, approval policy and troupe.toml) with each model response and tool result taken from the record: no \
model is called and no tool runs. At each step the request the run makes to the model is compared with the \
recorded one; the first difference (in the request, a tool call, an approval verdict, or how the run ends) \
is shown as a diff, `-` recorded and `+` now. A person's recorded decisions answer the approvals. A team's run \
replays run by run, as its team and agent files declare each agent now; then each report's passage through \
the firewall (withheld, or which fields passed) is decided again by the team's firewall as its file declares \
it now.\n\n\
Exit codes: 0 identical; 1 the run now decides differently; 2 a usage error (an unknown run, a team's run, a \
run recorded by an older troupe).")]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// Call the model for real at each step (the tool calls it asks for must be the
    /// recorded ones; the tools' results still come from the record unless --live-tools).
    #[arg(long)]
    live_model: bool,
    /// Run the tools for real, in the workspace, instead of taking their recorded results.
    #[arg(long)]
    live_tools: bool,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
    /// The model to replay with, instead of the recorded one (with --live-model, to see
    /// what another model does in the same situation).
    #[arg(long, short, value_name = "MODEL")]
    model: Option<String>,
    /// Replay with the system prompt in FILE instead of the agent's.
    #[arg(long, value_name = "FILE")]
    instructions: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `troupe runs replay`.
pub(crate) async fn replay(args: ReplayArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let record = load(store.as_ref(), &args.run).await?;
    if crate::runs::is_team_run(&record) {
        return replay_team(&args, store.as_ref(), &record).await;
    }
    let recording = Recording::load(store.as_ref(), &record.id).await.map_err(|error| match error {
        ReplayError::Store(error) => Failure::Run(error.into()),
        other => Failure::Usage(other.into()),
    })?;
    let mut spec = recording.input.spec.clone();
    if spec.name == setup::AGENT_NAME {
        // The built-in coding agent as this troupe declares it today.
        spec.instructions = setup::INSTRUCTIONS.to_owned();
    }
    if let Some(path) = &args.instructions {
        spec.instructions = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(anyhow!("--instructions {}: cannot read it: {e}", path.display())))?;
    }
    if let Some(model) = &args.model {
        spec.model = model.clone();
    }
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let workspace = args.place.workspace()?;
    let runner = setup::runner(&workspace, providers, &args.sandbox.choice()?)?;
    let options = ReplayOptions { live_model: args.live_model, live_tools: args.live_tools };
    let report = troupe::replay::replay(&runner, spec, recording, options).await.map_err(|error| match error {
        ReplayError::Store(error) => Failure::Run(error.into()),
        other => Failure::Usage(other.into()),
    })?;
    if args.json {
        outln!("{}", serde_json::to_string(&report).map_err(|e| Failure::Run(e.into()))?);
    } else {
        outln!("{report}");
    }
    match &report.divergence {
        None => Ok(()),
        Some(divergence) => Err(Failure::Run(anyhow!(
            "run {} now decides differently, at step {} ({})",
            report.run_id,
            divergence.step,
            divergence.kind
        ))),
    }
}

/// Arguments of `troupe runs export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    place: StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// Write the run as a cassette to FILE (JSON): `troupe::testing::Cassette` replays it in
    /// `cargo test` with no store, network or key.
    #[arg(long, value_name = "FILE")]
    cassette: PathBuf,
}

/// Runs `troupe runs export`.
pub(crate) async fn export(args: ExportArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let record = load(store.as_ref(), &args.run).await?;
    let recording = Recording::load(store.as_ref(), &record.id).await.map_err(|error| match error {
        ReplayError::Store(error) => Failure::Run(error.into()),
        other => Failure::Usage(other.into()),
    })?;
    let steps = recording.turns.len();
    troupe::testing::Cassette::new(recording).save(&args.cassette).map_err(|e| Failure::Usage(e.into()))?;
    diagln!("run {}: {steps} model step(s) written to {}", record.id, args.cassette.display());
    Ok(())
}

/// One run of a team's tree, replayed.
#[derive(serde::Serialize)]
struct MemberReplay {
    agent: String,
    depth: usize,
    report: troupe::replay::ReplayReport,
}

/// A team's run, replayed run by run (the leader's, then each member's), each as the team's
/// files declare its agent now; a member's work reaches the leader as its recorded result.
async fn replay_team(
    args: &ReplayArgs,
    store: &dyn troupe::store::Store,
    record: &troupe::store::RunRecord,
) -> Result<(), Failure> {
    if args.instructions.is_some() || args.model.is_some() {
        return Err(Failure::Usage(anyhow!(
            "--instructions and --model apply to one agent: replay a member's run, or edit the team's agent files"
        )));
    }
    let input = troupe_workers::team_record::TeamInput::read(record)
        .map_err(|e| Failure::Run(e.into()))?
        .ok_or_else(|| Failure::Usage(anyhow!("run {} is not a team's run this troupe can read", record.id)))?;
    let Some(file) = &input.file else {
        return Err(Failure::Usage(anyhow!("team run {} was not started from a team file", record.id)));
    };
    let files =
        troupe_workers::team_run::TeamFiles::load(file, &input.agent_dirs).map_err(|e| Failure::Usage(e.into()))?;
    let workspace = match &input.workspace {
        Some(dir) if dir.is_dir() => dir.clone(),
        _ => args.place.workspace()?,
    };
    let config = crate::load_config()?;
    let sandbox = args.sandbox.choice()?;
    let approvals = input.approvals.unwrap_or(troupe_workers::build::Approvals::Refuse);
    let prepared = troupe_workers::team_run::TeamRun::new(&files, &workspace)
        .config(config.clone())
        .approvals(approvals)
        .sandbox(sandbox.clone())
        .memory(None)
        .prepare()
        .await
        .map_err(|e| Failure::Usage(e.into()))?;
    let options = ReplayOptions { live_model: args.live_model, live_tools: args.live_tools };
    let mut replays = Vec::new();
    for (depth, run) in crate::runs::runs_under(store, &record.id).await? {
        let recording = Recording::load(store, &run.id).await.map_err(|error| match error {
            ReplayError::Store(error) => Failure::Run(error.into()),
            other => Failure::Usage(other.into()),
        })?;
        let agent = match prepared.agents().get(&run.agent) {
            Some(agent) => agent.clone(),
            // A member in a worker process: the same file, built here.
            None => member_agent(&files, &run.agent, &workspace, &config, approvals, &sandbox)?,
        };
        let report = troupe::replay::replay(agent.runner(), (*agent.current_spec()).clone(), recording, options)
            .await
            .map_err(|error| Failure::Usage(anyhow!("run {} ({}): {error}", run.id, run.agent)))?;
        let diverged = !report.identical();
        replays.push(MemberReplay { agent: run.agent.clone(), depth, report });
        if diverged {
            break;
        }
    }
    let first = replays.iter().find(|r| !r.report.identical());
    // Every run decides as it did: then each report's passage through the firewall, as
    // recorded, is decided again by the team's firewall as its file declares it now.
    let firewall = match first {
        Some(_) => Vec::new(),
        None => {
            let evidence = store.evidence(&record.id, 0).await.map_err(|e| Failure::Run(e.into()))?;
            let reports = evidence.iter().filter(|e| e.kind == troupe::store::EvidenceKind::ReportReceived);
            troupe_workers::team_replay::recheck_firewall(prepared.firewall(), reports.map(|e| e.payload.value()))
        }
    };
    if args.json {
        let identical = first.is_none() && firewall.is_empty();
        let value =
            serde_json::json!({"run_id": record.id, "identical": identical, "runs": replays, "firewall": firewall});
        outln!("{value}");
    } else if first.is_none() && !firewall.is_empty() {
        outln!("team run {}: its runs decide as they did, but the firewall now decides differently:", record.id);
        for change in &firewall {
            outln!("  {change}");
        }
    } else {
        let steps: u32 = replays.iter().map(|r| r.report.steps).sum();
        let tools: u32 = replays.iter().map(|r| r.report.tool_calls).sum();
        let calls: u32 = replays.iter().map(|r| r.report.model_calls).sum();
        match first {
            None => outln!(
                "team run {}: identical ({} runs, {steps} model step(s), {tools} tool call(s), {calls} model call(s) made)",
                record.id,
                replays.len()
            ),
            Some(member) => outln!("team run {}: diverges in the run of {}:", record.id, member.agent),
        }
        for member in &replays {
            let indent = "  ".repeat(member.depth);
            let text = member.report.to_string().replace('\n', &format!("\n{indent}  "));
            outln!("{indent}{}: {text}", member.agent);
        }
    }
    if let (None, Some(change)) = (first, firewall.first()) {
        return Err(Failure::Run(anyhow!(
            "team run {} now decides differently: the firewall, for the report of {} to {}",
            record.id,
            change.member,
            change.to
        )));
    }
    match first {
        None => Ok(()),
        Some(member) => Err(Failure::Run(anyhow!(
            "team run {} now decides differently, in the run of {} at step {}",
            record.id,
            member.agent,
            member.report.divergence.as_ref().map_or(0, |d| d.step)
        ))),
    }
}

/// The agent of team member `name` in a worker process, built as the worker builds it.
fn member_agent(
    files: &troupe_workers::team_run::TeamFiles,
    name: &str,
    workspace: &std::path::Path,
    config: &troupe::model::ModelConfig,
    approvals: troupe_workers::build::Approvals,
    sandbox: &troupe_workers::build::SandboxChoice,
) -> Result<troupe::runtime::Agent, Failure> {
    let definition = &files
        .registry()
        .entry(name)
        .ok_or_else(|| Failure::Usage(anyhow!("the team's files have no agent `{name}` any more")))?
        .definition;
    let providers = crate::providers(config)?;
    crate::agent_worker::file_agent(definition, providers, workspace, sandbox, approvals)
}
