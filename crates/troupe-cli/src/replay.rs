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
is shown as a diff, `-` recorded and `+` now. A person's recorded decisions answer the approvals.\n\n\
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
        println!("{}", serde_json::to_string(&report).map_err(|e| Failure::Run(e.into()))?);
    } else {
        println!("{report}");
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
    eprintln!("run {}: {steps} model step(s) written to {}", record.id, args.cassette.display());
    Ok(())
}
