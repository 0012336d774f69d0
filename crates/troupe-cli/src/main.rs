//! `troupe`: the command-line tool.
//!
//! Results go to stdout and diagnostics to stderr. Exit codes: 0 success, 1 the run failed
//! (for `troupe run`: any outcome but completed), 2 a usage or configuration error (a
//! missing API key, an unknown model, a bad `troupe.toml`).

mod chat;
mod models;
mod render;
mod run;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use troupe_model::{ModelConfig, ProcessEnv, Providers};

/// Build teams of LLM agents that are isolated, safe, durable and observable.
#[derive(Debug, Parser)]
#[command(name = "troupe", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Let an agent with the built-in coding tools work on a task in a workspace.
    Run(run::RunArgs),
    /// Send one prompt to a model and stream its reply.
    Chat(chat::ChatArgs),
    /// Inspect the models troupe knows.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// The model registry (with troupe.toml additions) and the providers' key variables.
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// How a command failed, which decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// A usage or configuration error: exit code 2.
    Usage(anyhow::Error),
    /// The run itself failed: exit code 1.
    Run(anyhow::Error),
}

impl Failure {
    /// Sorts a model error: what the user can fix by changing the command or the
    /// configuration is a usage error, the rest a run failure.
    pub fn from_model(error: troupe_model::Error) -> Self {
        match error {
            troupe_model::Error::MissingApiKey { .. }
            | troupe_model::Error::UnknownModel { .. }
            | troupe_model::Error::Config(_) => Failure::Usage(error.into()),
            _ => Failure::Run(error.into()),
        }
    }
}

/// The configuration file read from the working directory, when present.
const CONFIG_FILE: &str = "troupe.toml";

/// `./troupe.toml` (or the default when there is none).
pub fn load_config() -> Result<ModelConfig, Failure> {
    let path = Path::new(CONFIG_FILE);
    if !path.exists() {
        return Ok(ModelConfig::default());
    }
    ModelConfig::load(path).map_err(Failure::from_model)
}

/// The providers, with `config` applied, reading the process environment.
pub fn providers(config: &ModelConfig) -> Result<Providers, Failure> {
    config.providers(ProcessEnv).map_err(Failure::from_model)
}

fn init_logging() {
    let directives = ["TROUPE_LOG", "RUST_LOG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| "warn".to_owned());
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .init();
}

async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Chat(args) => chat::run(args).await,
        Command::Models { command: ModelsCommand::List { json } } => models::list(json),
    }
}

fn main() -> ExitCode {
    // clap exits with code 2 on a usage error, as the CLI conventions want.
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
