//! `troupe`: the command-line tool.
//!
//! ```text
//! troupe run [--model ID] [--workspace DIR] [--store URL | --no-store] [--detach]
//!            [--approve ask|auto|never] [--budget-usd X] [--max-iterations N] [--json] TASK…
//! troupe runs list [--status S] [--agent A] [--limit N] [--json]
//! troupe runs show RUN [--json]
//! troupe runs events RUN [--json] [--follow]
//! troupe runs resume RUN [--approve MODE] [--json]
//! troupe runs approve RUN CALL [--no-resume] [--approve MODE] [--json]
//! troupe runs reject RUN CALL [--reason R] [--no-resume] [--approve MODE] [--json]
//! troupe runs cancel RUN [--reason R] [--no-resume] [--approve MODE] [--json]
//! troupe runs verify RUN
//! troupe worker [--concurrency N] [--lease-ttl SECONDS] [--poll-ms N] [--once]
//! troupe schedule add NAME (--cron EXPR | --every DURATION) [--model M] [--approve MODE] TASK…
//! troupe schedule list [--json]
//! troupe schedule rm NAME
//! troupe chat [--model ID] [--system S] [--max-tokens N] [--json] PROMPT…
//! troupe models list [--json]
//! troupe agent list [--json]
//! troupe agent show ID|FILE [--json]
//! troupe agent create --id ID --name NAME [--from TEMPLATE] [--dir DIR]
//! troupe agent validate [ID|FILE]
//! troupe agent run (--agent-id ID | --agent-file FILE) --prompt P [-w DIR] [--approve MODE] [--json]
//! troupe agent run --worker [--agent-file PATH] [--workspace DIR]   (started by a coordinator)
//! troupe team run TEAM.toml TASK… [-w DIR] [--approve auto|never] [--store URL | --no-store] [--json]
//! troupe team validate TEAM.toml
//! troupe mcp serve [--agent ID]… [-w DIR] [--approve never|auto]
//! troupe serve [--addr 127.0.0.1:8787] [--store URL | --no-store] [--team TEAM.toml]… [--cors-origin O]…
//! troupe console [--addr 127.0.0.1:8787] [--store URL]
//! ```
//!
//! `troupe agent`, `troupe team` and `troupe mcp` take `--config-dir DIR` (repeatable): where agent files
//! are looked for instead of `./.troupe` and `~/.config/troupe`.
//!
//! Every durable command takes `--store URL` (`$TROUPE_STORE`; `sqlite://PATH`, a file
//! path, or `postgres://…`) and `--workspace DIR`; the default store is the workspace's
//! own (the current directory by default), kept outside it in the user's data directory.
//!
//! Results go to stdout and diagnostics to stderr; `--json` prints JSON lines on stdout.
//! Exit codes: 0 success, 1 the run did not complete or a check failed (for `troupe run`:
//! any outcome but completed; for `runs verify`: a broken hash chain), 2 a usage or
//! configuration error (a missing API key, an unknown model, a bad `troupe.toml`, a store
//! that cannot be opened, an unknown run).

// Everything here serves `main`: nothing is public beyond the crate.
#![deny(unreachable_pub)]
// Output goes through `output`'s macros, which never panic on a closed pipe.
#![deny(clippy::print_stdout, clippy::print_stderr)]

/// `println!` that never panics: see [`output`].
macro_rules! outln {
    () => {
        $crate::output::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that never panics: see [`output`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: see [`output`].
macro_rules! diagln {
    () => {
        $crate::output::stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics: see [`output`].
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::output::stderr(format_args!($($arg)*))
    };
}

mod agent;
mod agent_worker;
mod approval_view;
mod chat;
mod console;
mod eval;
mod evidence;
mod mcp;
mod models;
mod output;
mod render;
mod replay;
mod run;
mod runs;
mod schedule;
mod serve;
mod session;
mod setup;
mod store;
mod team;
mod trust;
mod undo;
mod worker;

/// The process's allocator. With many runs in flight, glibc's allocator makes a thread
/// that frees memory another thread allocated take that thread's arena lock, and the
/// runtime's workers hand buffers to each other all the time (a response read on one,
/// parsed on another); the waits for those locks were most of the process's `futex`
/// calls. mimalloc frees across threads without a lock. docs/PERFORMANCE.md has the
/// figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use troupe_model::{ModelConfig, ProcessEnv, Providers};

/// Build teams of LLM agents that are isolated, safe, durable and observable.
#[derive(Debug, Parser)]
#[command(name = "troupe", version, about)]
struct Cli {
    /// What to do; none, at a terminal, opens a session (`troupe chat` without a prompt).
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Let an agent with the built-in coding tools work on a task in a workspace.
    Run(run::RunArgs),
    /// The recorded runs: list, inspect, verify, resume, approve, reject, cancel.
    Runs {
        #[command(subcommand)]
        command: runs::RunsCommand,
    },
    /// Run queued runs (`troupe run --detach`, schedules, decided pauses) from a shared store.
    Worker(worker::WorkerArgs),
    /// Runs started on a cron expression or an interval (fired by workers).
    Schedule {
        #[command(subcommand)]
        command: schedule::ScheduleCommand,
    },
    /// Send one prompt to a model and stream its reply.
    Chat(chat::ChatArgs),
    /// Inspect the models troupe knows.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Agents defined as files: list, show, create, validate, run.
    Agent {
        #[command(flatten)]
        config: agent::ConfigDirs,
        #[command(subcommand)]
        command: AgentCommand,
    },
    /// Serve the agents and teams over HTTP: native API (SSE, WebSocket), AG-UI, A2A.
    Serve(serve::ServeArgs),
    /// The web console on a store's runs, serving no agent (`troupe serve` serves it too, at `/`).
    Console(console::ConsoleArgs),
    /// Evaluate an agent over a suite of cases: N runs each, graded; pass rates with
    /// confidence intervals, cost, tokens and latency.
    Eval(eval::EvalArgs),
    /// Teams of agent files: run one on a task, or check its file.
    Team {
        #[command(flatten)]
        config: agent::ConfigDirs,
        #[command(subcommand)]
        command: team::TeamCommand,
    },
    /// The Model Context Protocol: serve agent files as MCP tools.
    Mcp {
        #[command(flatten)]
        config: agent::ConfigDirs,
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Trust ./troupe.toml as it is now: its providers' keys, MCP servers' variables and
    /// sandbox are used only from a file trusted so.
    Trust(trust::TrustArgs),
}

#[derive(Debug, Subcommand)]
enum AgentCommand {
    /// The agents of the config directories: id, name, version, description, file.
    List(agent::ListArgs),
    /// One agent's definition as parsed, defaults included (its API key is never shown).
    Show(agent::ShowArgs),
    /// Write a new agent file, `DIR/agents/ID.toml`, from a template.
    Create(agent::CreateArgs),
    /// Check agent files: `ok: N agent files`, or every problem as `file:line:col: message`.
    Validate(agent::ValidateArgs),
    /// Run an agent on a prompt in the foreground; with --worker (for coordinators), serve
    /// one task over stdin and stdout.
    // `--worker` is what a coordinator types, not a person.
    #[command(mut_arg("worker", |arg| arg.hide(true)))]
    Run(agent::RunArgs),
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
pub(crate) enum Failure {
    /// A usage or configuration error: exit code 2.
    Usage(anyhow::Error),
    /// The run itself failed: exit code 1.
    Run(anyhow::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(error) | Failure::Run(error) => write!(f, "{error:#}"),
        }
    }
}

impl Failure {
    /// Sorts a model error: what the user can fix by changing the command or the
    /// configuration is a usage error, the rest a run failure.
    pub(crate) fn from_model(error: troupe_model::Error) -> Self {
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
pub(crate) fn load_config() -> Result<ModelConfig, Failure> {
    let path = Path::new(CONFIG_FILE);
    if !path.exists() {
        return Ok(ModelConfig::default());
    }
    ModelConfig::load(path).map_err(Failure::from_model)
}

/// The providers, with `config` applied, reading the process environment.
pub(crate) fn providers(config: &ModelConfig) -> Result<Providers, Failure> {
    config.providers(ProcessEnv).map_err(Failure::from_model)
}

/// Prints `lines` on stdout, each ending a line; a reader that stopped early (`| head`)
/// is not a failure.
pub(crate) fn print_lines(lines: &[String]) -> Result<(), Failure> {
    print_lines_or_stop(lines).map(|_| ())
}

/// Prints `lines` on stdout; false once stdout is closed (nobody reads the rest).
pub(crate) fn print_lines_or_stop(lines: &[String]) -> Result<bool, Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = lines.iter().try_for_each(|line| writeln!(out, "{line}")).and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Failure::Run(anyhow::Error::new(e).context("cannot write to stdout"))),
    }
}

/// Sets up logging on stderr; a worker also reports each claim and end (`claimed RUN`).
/// With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) set, spans are exported
/// over OTLP/HTTP too, unless `otlp` is false (a worker subprocess, which must confine
/// itself before any thread exists); the guard flushes them at exit.
fn init_logging(worker: bool, otlp: bool) -> Option<troupe::telemetry::TelemetryGuard> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let directives = ["TROUPE_LOG", "RUST_LOG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| "warn".to_owned());
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .with_filter(filter);
    let wanted = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    let config = troupe::telemetry::OtlpConfig::new().service_name("troupe");
    let (export, guard) = match (otlp && wanted).then(|| troupe::telemetry::otlp_layer(&config)) {
        Some(Ok((layer, guard))) => {
            let filter = tracing_subscriber::EnvFilter::new(troupe::telemetry::DEFAULT_TRACE_FILTER);
            (Some(layer.with_filter(filter)), Some(guard))
        }
        Some(Err(error)) => {
            diagln!("note: spans are not exported over OTLP: {error}");
            (None, None)
        }
        None => (None, None),
    };
    let registry = tracing_subscriber::registry().with(fmt).with(export);
    if worker {
        registry.with(worker::ClaimLog::layer()).init();
    } else {
        registry.init();
    }
    guard
}

async fn run(command: Command) -> Result<(), Failure> {
    if !matches!(command, Command::Trust(_)) {
        trust::require_trusted_config()?;
    }
    match command {
        Command::Trust(args) => trust::trust(args),
        Command::Run(args) => run::run(args).await,
        Command::Runs { command } => runs::run(command).await,
        Command::Worker(args) => worker::run(args).await,
        Command::Schedule { command } => schedule::run(command).await,
        Command::Chat(args) => chat::run(args).await,
        Command::Models { command: ModelsCommand::List { json } } => models::list(json),
        Command::Agent { config, command } => match command {
            AgentCommand::List(args) => agent::list(&config, &args),
            AgentCommand::Show(args) => agent::show(&config, &args),
            AgentCommand::Create(args) => agent::create(&config, &args),
            AgentCommand::Validate(args) => agent::validate(&config, &args),
            AgentCommand::Run(args) => agent::run(&config, args).await,
        },
        Command::Team { config, command } => team::run(&config, command).await,
        Command::Mcp { config, command } => mcp::run(&config, command).await,
        Command::Serve(args) => serve::serve(args).await,
        Command::Console(args) => console::console(args).await,
        Command::Eval(args) => eval::eval(args).await,
    }
}

fn main() -> ExitCode {
    // The keys troupe holds are in its environment: a process that is not dumpable has its
    // `/proc/PID/environ` (and memory) closed to other processes of the same user, not
    // only to the sandboxed ones (which see no `/proc/PID` at all). It also writes no core
    // dump.
    let _ = nix::sys::prctl::set_dumpable(false);
    // clap exits with code 2 on a usage error, as the CLI conventions want.
    let cli = Cli::parse();
    let command = match cli.command {
        Some(command) => command,
        // `troupe` alone: a session where a person can type, else the usage.
        None if session::at_a_terminal().is_ok() => Command::Chat(chat::ChatArgs::session()),
        None => {
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            return ExitCode::from(2);
        }
    };
    let agent_worker =
        matches!(&command, Command::Agent { command: AgentCommand::Run(args), .. } if args.worker_mode().is_some());
    let _spans = init_logging(matches!(command, Command::Worker(_)), !agent_worker);
    // A worker confines itself before any thread exists (Landlock binds only the calling
    // thread and those it starts later), so it builds its own runtime.
    if let Command::Agent { command: AgentCommand::Run(args), .. } = &command
        && let Some(worker) = args.worker_mode()
    {
        return agent_worker::main(worker);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            diagln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(run(command));
    output::flush_stdout();
    let outcome = match (outcome, output::stdout_failure()) {
        // Results the user asked for were lost: not a success.
        (Ok(()), Some(failure)) => Err(Failure::Run(anyhow::anyhow!("cannot write to stdout: {failure}"))),
        (outcome, _) => outcome,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            diagln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            diagln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
