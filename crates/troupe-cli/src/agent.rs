//! `troupe agent`: agents defined as files in the config directories.
//!
//! ```text
//! troupe agent list [--json]
//! troupe agent show ID|FILE [--json]
//! troupe agent create --id ID --name NAME [--from TEMPLATE] [--dir DIR]
//! troupe agent validate [ID|FILE]
//! troupe agent run (--agent-id ID | --agent-file FILE) --prompt P [-w DIR] [--approve MODE] [--json]
//! ```
//!
//! Every subcommand takes `--config-dir DIR` (repeatable): where `agents/*.toml` and
//! `agents.d/**/*.toml` are looked for, instead of `./.troupe` and `~/.config/troupe`.
//! `agent run --worker` is the worker side of subprocess agents ([`crate::agent_worker`]).

pub(crate) mod build;

use crate::run::{Approve, Follow};
use crate::{Failure, agent_worker, setup};
use anyhow::anyhow;
use build::{AgentBuild, Approvals, Ceilings};
use comfy_table::{ContentArrangement, Table, presets};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use troupe::runtime::RunInput;
use troupe_workers::definition::{AgentDefinition, ApiKey};
use troupe_workers::registry::{AgentRegistry, RegisteredAgent};

/// What `show` prints in place of an API key.
const REDACTED: &str = "<redacted>";

/// The config directories option every `agent` and `team` subcommand takes.
#[derive(Clone, Debug, Default, clap::Args)]
pub(crate) struct ConfigDirs {
    /// A config directory holding agents/*.toml and agents.d/**/*.toml (repeatable) [default:
    /// ./.troupe, then $XDG_CONFIG_HOME/troupe or ~/.config/troupe].
    #[arg(long = "config-dir", value_name = "DIR", global = true)]
    pub(crate) dirs: Vec<PathBuf>,
}

impl ConfigDirs {
    /// Whether directories were given.
    pub(crate) fn given(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// The directories given, else the default ones.
    pub(crate) fn resolve(&self) -> Result<Vec<PathBuf>, Failure> {
        if self.given() {
            return Ok(self.dirs.clone());
        }
        let cwd =
            std::env::current_dir().map_err(|e| Failure::Usage(anyhow!("cannot tell the current directory: {e}")))?;
        Ok(troupe_workers::default_config_dirs(&cwd))
    }
}

/// Every agent of `dirs`, or every problem found (a configuration error).
pub(crate) fn discover(dirs: &[PathBuf]) -> Result<AgentRegistry, Failure> {
    AgentRegistry::discover(dirs)
        .map_err(|e| Failure::Usage(anyhow!("{e}\n(run `troupe agent validate` to check the agent files)")))
}

fn shown(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Arguments of `troupe agent list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `troupe agent list`.
pub(crate) fn list(dirs: &ConfigDirs, args: &ListArgs) -> Result<(), Failure> {
    let dirs = dirs.resolve()?;
    let registry = discover(&dirs)?;
    if registry.is_empty() {
        diagln!(
            "no agent files in {}; create one with `troupe agent create --id ID --name NAME [--from TEMPLATE]`",
            shown(&dirs)
        );
        return Ok(());
    }
    if args.json {
        let lines: Vec<String> = registry.iter().map(|a| summary_json(a).to_string()).collect();
        return crate::print_lines(&lines);
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(["id", "name", "version", "description", "file"]);
    for summary in registry.list() {
        table.add_row([
            summary.id,
            summary.name,
            summary.version.unwrap_or_default(),
            summary.description,
            summary.path.display().to_string(),
        ]);
    }
    crate::print_lines(&[table.to_string()])
}

fn summary_json(agent: &RegisteredAgent) -> Value {
    let section = &agent.definition.agent;
    json!({
        "id": section.id,
        "name": section.name,
        "version": section.version,
        "description": section.description,
        "model": agent.definition.model_id(),
        "file": agent.path,
        "config_dir": agent.config_dir,
    })
}

/// Arguments of `troupe agent show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The agent's id, or the path of an agent file.
    #[arg(value_name = "ID|FILE")]
    agent: String,
    /// One JSON object instead of TOML.
    #[arg(long)]
    json: bool,
}

/// Whether `target` names a file rather than an id (ids hold no `/` and no `.`).
fn is_file(target: &str) -> bool {
    target.contains(['/', '.', '\\']) || Path::new(target).is_file()
}

/// The agent `target` names: a file, or an id of `dirs`.
fn find(dirs: &ConfigDirs, target: &str) -> Result<AgentDefinition, Failure> {
    if is_file(target) {
        return build::load(Path::new(target));
    }
    let dirs = dirs.resolve()?;
    let registry = discover(&dirs)?;
    match registry.get(target) {
        Some(definition) => Ok(definition.clone()),
        None => Err(unknown_agent(target, &registry, &dirs)),
    }
}

fn unknown_agent(id: &str, registry: &AgentRegistry, dirs: &[PathBuf]) -> Failure {
    let known: Vec<&str> = registry.iter().map(|a| a.definition.id()).collect();
    let known =
        if known.is_empty() { "there are none".to_owned() } else { format!("the agents are {}", known.join(", ")) };
    Failure::Usage(anyhow!("no agent `{id}` in {}; {known}", shown(dirs)))
}

/// Runs `troupe agent show`.
pub(crate) fn show(dirs: &ConfigDirs, args: &ShowArgs) -> Result<(), Failure> {
    let mut definition = find(dirs, &args.agent)?;
    if definition.provider.api_key.is_some() {
        definition.provider.api_key = Some(ApiKey::new(REDACTED));
    }
    // Header and environment values of MCP servers may hold secrets written out.
    for server in &mut definition.mcp.servers {
        *server = server.redacted();
    }
    if args.json {
        let mut value = serde_json::to_value(&definition).map_err(|e| Failure::Run(e.into()))?;
        // An f32 temperature reads 0.30000001192092896 once widened; show it as written.
        if let Some(t) = value.pointer_mut("/provider/temperature")
            && let Some(f) = t.as_f64()
        {
            *t = json!((f * 1e4).round() / 1e4);
        }
        if let Value::Object(map) = &mut value {
            map.insert("file".to_owned(), json!(definition.path()));
            map.insert("model_id".to_owned(), json!(definition.model_id()));
        }
        return crate::print_lines(&[value.to_string()]);
    }
    let text = definition.to_toml().map_err(|e| Failure::Run(anyhow!("cannot write the definition as TOML: {e}")))?;
    crate::print_lines(&[format!(
        "# {}\n# model: {}\n\n{}",
        definition.path().display(),
        definition.model_id(),
        text.trim_end()
    )])
}

/// Arguments of `troupe agent create`.
#[derive(Debug, clap::Args)]
pub(crate) struct CreateArgs {
    /// The new agent's id: letters, digits, `-` and `_`.
    #[arg(long)]
    id: String,
    /// Its name for people.
    #[arg(long)]
    name: String,
    /// The template to start from (researcher, coder, tester, reviewer, summarizer)
    /// [default: a blank agent with read-only tools].
    #[arg(long, value_name = "TEMPLATE")]
    from: Option<String>,
    /// The config directory to write to (the file is `DIR/agents/ID.toml`) [default: the
    /// first config directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Runs `troupe agent create`.
pub(crate) fn create(dirs: &ConfigDirs, args: &CreateArgs) -> Result<(), Failure> {
    // The error's path is made up by the template: only its message is the user's.
    let text = AgentDefinition::template(&args.id, &args.name, args.from.as_deref())
        .map_err(|e| Failure::Usage(anyhow!("{}", e.message)))?;
    let mut search = dirs.resolve()?;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => search.first().cloned().unwrap_or_else(|| PathBuf::from(".troupe")),
    };
    search.insert(0, dir.clone());
    // Ids are unique across the config directories: one defined elsewhere would make both
    // unusable. (Broken files elsewhere are not this command's business.)
    if let Ok(registry) = AgentRegistry::discover(&search)
        && let Some(path) = registry.path_of(&args.id)
    {
        return Err(Failure::Usage(anyhow!(
            "agent `{}` is already defined in {}; agent ids must be unique across the config directories",
            args.id,
            path.display()
        )));
    }
    let agents = dir.join("agents");
    let path = agents.join(format!("{}.toml", args.id));
    std::fs::create_dir_all(&agents)
        .map_err(|e| Failure::Usage(anyhow!("cannot create the directory {}: {e}", agents.display())))?;
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Failure::Usage(anyhow!(
                "{} exists already; it was left alone (pick another id, or remove the file first)",
                path.display()
            )));
        }
        Err(e) => return Err(Failure::Usage(anyhow!("cannot create {}: {e}", path.display()))),
    };
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| Failure::Run(anyhow!("cannot write {}: {e}", path.display())))?;
    crate::print_lines(&[path.display().to_string()])?;
    diagln!("created agent `{}`; edit the file, then check it with `troupe agent validate {}`", args.id, args.id);
    Ok(())
}

/// Arguments of `troupe agent validate`.
#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
    /// One agent id or file [default: every agent file of the config directories].
    #[arg(value_name = "ID|FILE")]
    agent: Option<String>,
}

/// Runs `troupe agent validate`: `ok: N agent files`, or every problem and exit 1.
pub(crate) fn validate(dirs: &ConfigDirs, args: &ValidateArgs) -> Result<(), Failure> {
    let ok = |n: usize| crate::print_lines(&[format!("ok: {n} agent file{}", if n == 1 { "" } else { "s" })]);
    // A file that parses may still name a provider nobody configured.
    let providers = crate::providers(&crate::load_config()?)?;
    let unknown_models = |agents: &[(&Path, &AgentDefinition)]| -> Result<(), Failure> {
        let problems: Vec<String> = agents
            .iter()
            .filter_map(|(path, definition)| {
                let id = definition.provider.model_id();
                let error = providers.check(&id).err()?;
                Some(format!("{}: [provider] model `{id}`: {error}", path.display()))
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        crate::print_lines(&problems)?;
        let n = problems.len();
        let files = if n == 1 { "agent file names" } else { "agent files name" };
        Err(Failure::Run(anyhow!("{n} {files} an unknown model")))
    };
    if let Some(target) = args.agent.as_deref().filter(|t| is_file(t)) {
        return match AgentDefinition::load(target) {
            Ok(definition) => {
                unknown_models(&[(Path::new(target), &definition)])?;
                ok(1)
            }
            Err(problem) => {
                crate::print_lines(&[problem.to_string()])?;
                Err(Failure::Run(anyhow!("{target} is not a valid agent file")))
            }
        };
    }
    let search = dirs.resolve()?;
    let registry = match AgentRegistry::discover(&search) {
        Ok(registry) => registry,
        Err(error) => {
            let lines: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
            crate::print_lines(&lines)?;
            let n = error.problems.len();
            return Err(Failure::Run(anyhow!("{n} problem{} in the agent files", if n == 1 { "" } else { "s" })));
        }
    };
    match args.agent.as_deref() {
        Some(id) if registry.get(id).is_none() => Err(unknown_agent(id, &registry, &search)),
        Some(id) => {
            let agent = registry.entry(id).map(|a| (a.path.as_path(), &a.definition));
            unknown_models(&agent.into_iter().collect::<Vec<_>>())?;
            ok(1)
        }
        None => {
            if registry.is_empty() {
                diagln!("no agent files in {}", shown(&search));
            }
            unknown_models(&registry.iter().map(|a| (a.path.as_path(), &a.definition)).collect::<Vec<_>>())?;
            ok(registry.len())
        }
    }
}

/// Arguments of `troupe agent run`: an agent in the foreground, or (`--worker`) a worker
/// process of a coordinator.
#[derive(Debug, clap::Args)]
#[command(after_help = "Without --worker, the agent runs like `troupe run --no-store`: its text on stdout (with \
--json, every event as one JSON line instead), tool calls and a summary table on stderr; nothing is recorded. Its \
instructions, model, tools and denied tools come from its file; the tools are the built-in ones, confined to the \
workspace.\n\nExit codes: 0 the run completed; 1 it did not; 2 a usage or configuration error (an unknown agent, an \
invalid file, a missing API key).")]
pub(crate) struct RunArgs {
    /// `--worker`, `--agent-file` and `--workspace`, shared with the worker.
    #[command(flatten)]
    pub(crate) worker: agent_worker::AgentRunArgs,
    /// The agent to run, by id (see `troupe agent list`).
    #[arg(long, value_name = "ID", conflicts_with_all = ["worker", "agent_file"])]
    agent_id: Option<String>,
    /// The task.
    #[arg(long, value_name = "TEXT", conflicts_with = "worker", required_unless_present = "worker")]
    prompt: Option<String>,
    /// How tool calls that need approval are decided (ask: on the terminal; without one,
    /// they are rejected).
    #[arg(long, value_enum, default_value_t = Approve::Ask, value_name = "MODE", conflicts_with = "worker")]
    approve: Approve,
    /// Print the run's events as JSON lines on stdout instead of text.
    #[arg(long, conflicts_with = "worker")]
    json: bool,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
}

impl RunArgs {
    /// The worker's arguments, when this is `--worker`.
    pub(crate) fn worker_mode(&self) -> Option<&agent_worker::AgentRunArgs> {
        self.worker.worker.then_some(&self.worker)
    }
}

/// Runs `troupe agent run` in the foreground (the worker mode never gets here).
pub(crate) async fn run(dirs: &ConfigDirs, args: RunArgs) -> Result<(), Failure> {
    let definition = match (&args.agent_id, &args.worker.agent_file) {
        (Some(id), None) => {
            let search = dirs.resolve()?;
            let registry = discover(&search)?;
            match registry.get(id) {
                Some(definition) => definition.clone(),
                None => return Err(unknown_agent(id, &registry, &search)),
            }
        }
        (None, Some(file)) => build::load(file)?,
        _ => return Err(Failure::Usage(anyhow!("say which agent to run: --agent-id ID or --agent-file FILE"))),
    };
    let Some(prompt) = args.prompt.filter(|p| !p.trim().is_empty()) else {
        return Err(Failure::Usage(anyhow!("the prompt is empty; say what the agent should do with --prompt")));
    };
    let workspace = setup::workspace_dir(args.worker.workspace.as_deref())?;
    let config = crate::load_config()?;
    let approvals = match args.approve {
        Approve::Auto => Approvals::Auto,
        Approve::Ask | Approve::Never => Approvals::Approver,
    };
    let mcp = build::connect_mcp(&definition, &workspace).await?;
    let built = build::build(AgentBuild {
        definition: &definition,
        workspace: &workspace,
        config: &config,
        approvals,
        extra_tools: Vec::new(),
        ceilings: Ceilings::default(),
        memory: build::memory_store(&workspace, std::iter::once(&definition)).await?,
        mcp: Some(&mcp),
        sandbox: &args.sandbox.choice()?,
    })?;
    for note in &built.notes {
        diagln!("note: {note}");
    }
    let handle = built.agent.start(RunInput::new(prompt));
    let options = Follow {
        json: args.json,
        approve: args.approve,
        recorded: false,
        known: Vec::new(),
        workspace: Some(workspace.clone()),
    };
    let output = crate::run::follow(handle, &options).await?;
    crate::run::completed(&output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_ids_are_told_apart() {
        assert!(is_file("agents/coder.toml") && is_file("coder.toml") && is_file("./x"));
        assert!(!is_file("coder") && !is_file("code-reviewer_2"));
    }
}
