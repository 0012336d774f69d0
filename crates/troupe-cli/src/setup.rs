//! What `troupe run`, `troupe runs resume`, `troupe worker` and `troupe schedule add` share:
//! the coding agent's declaration and the runner that gives it the built-in tools in a
//! workspace, with the providers of `./troupe.toml`.

use crate::Failure;
use anyhow::anyhow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use troupe::runtime::durable::Durability;
use troupe::runtime::{Agent, AgentSpec, ApprovalPolicy, ApprovalRule, Limits, Runner, RuntimeError};
use troupe::tools::{SandboxMode, ToolCatalog, Workspace};
use troupe_model::Providers;
use troupe_workers::build::SandboxChoice;

/// The name every run of the coding agent is recorded under.
pub(crate) const AGENT_NAME: &str = "troupe";

/// What a careful coding agent is told, whatever its model.
pub(crate) const INSTRUCTIONS: &str = "You are a careful coding agent working in a workspace directory; every path you give a \
tool is relative to it. Look before you act: list and read the relevant files first, and take every fact about \
them from the tools, never from guesses. Make the smallest change that does the task, preferring fs.edit for \
existing files. Where the project has checks (tests, linters, a build), run them with the shell and report what \
they say, failures included. Some calls need the user's approval; if one is rejected, do not repeat it \
unchanged: adjust your approach or explain what you need. End with a short summary of what you did and what is \
left to do.";

/// `dir` (or the current directory), once it is known to be a directory.
pub(crate) fn workspace_dir(dir: Option<&Path>) -> Result<PathBuf, Failure> {
    let workspace = dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if !workspace.is_dir() {
        let problem = if workspace.exists() { "is not a directory" } else { "does not exist" };
        return Err(Failure::Usage(anyhow!("the workspace `{}` {problem}", workspace.display())));
    }
    Ok(workspace)
}

/// `--sandbox`: how the commands an agent runs are confined.
#[derive(Clone, Debug, Default, clap::Args)]
pub(crate) struct SandboxArgs {
    /// How the commands the agent runs (`shell`, `git`) are confined: read-only,
    /// workspace-write (writes only in the workspace, no network) or full (unconfined)
    /// [default: `[sandbox] mode` of an agent file, then of ./troupe.toml, then workspace-write].
    #[arg(long, env = "TROUPE_SANDBOX", value_name = "MODE", value_parser = parse_sandbox_mode)]
    pub(crate) sandbox: Option<SandboxMode>,
}

impl SandboxArgs {
    /// `./troupe.toml`'s `[sandbox]`, under this choice.
    pub(crate) fn choice(&self) -> Result<SandboxChoice, Failure> {
        SandboxChoice::load(self.sandbox).map_err(|e| Failure::Usage(e.into()))
    }
}

fn parse_sandbox_mode(text: &str) -> Result<SandboxMode, String> {
    text.parse().map_err(|e: troupe::tools::UnknownMode| e.to_string())
}

/// The runner of every coding agent: the built-in tools confined to `workspace` and
/// `sandbox`, models resolved by `providers`. It records nothing until given a store
/// ([`Runner::with_store`]).
pub(crate) fn runner(workspace: &Path, providers: Providers, sandbox: &SandboxChoice) -> Result<Runner, Failure> {
    let workspace = Workspace::new(workspace).map_err(|e| Failure::Usage(RuntimeError::Workspace(e).into()))?;
    let confined = sandbox.for_agent(&Default::default(), workspace.root());
    if confined.mode() == SandboxMode::Full {
        diagln!("sandbox: full: the commands the agent runs are not confined");
    }
    let workspace = workspace.with_sandbox(confined);
    let catalog = ToolCatalog::with_tools(troupe::tools::coding_tools())
        .map_err(|source| Failure::Usage(RuntimeError::Catalog { agent: AGENT_NAME.to_owned(), source }.into()))?;
    Ok(Runner::new(Arc::new(providers), Arc::new(catalog), Arc::new(workspace)))
}

/// Refuses a USD budget for a model without prices: its cost would count as nothing, so
/// the budget would never run out. A model that does not resolve (a missing key) is the
/// run's to report.
pub(crate) fn check_budget(providers: &Providers, model: &str, budget_usd: Option<f64>) -> Result<(), Failure> {
    let Some(usd) = budget_usd else { return Ok(()) };
    match providers.resolve(model) {
        Ok(resolved) if resolved.info.is_none() => Err(Failure::Usage(anyhow!(
            "--budget-usd {usd} cannot be kept: `{model}` has no prices in the model registry, so its cost is unknown; \
             give it prices in troupe.toml ([models.\"{model}\"] with its prices and limits) or limit the run with --max-iterations"
        ))),
        _ => Ok(()),
    }
}

/// The coding agent's declaration.
pub(crate) fn coding_spec(
    model: String,
    policy: ApprovalPolicy,
    max_iterations: Option<u32>,
    budget_usd: Option<f64>,
) -> AgentSpec {
    let mut limits = Limits::default();
    if let Some(n) = max_iterations {
        limits.max_iterations = n;
    }
    limits.max_usd = budget_usd;
    AgentSpec {
        name: AGENT_NAME.to_owned(),
        instructions: INSTRUCTIONS.to_owned(),
        model,
        limits,
        approval: policy,
        ..AgentSpec::default()
    }
}

/// The policy of a run nobody watches (`--detach`, a schedule): `never` cannot be left
/// to a person, so it becomes a rule denying every tool that would need approval.
pub(crate) fn unattended_policy(never: bool, auto: bool) -> ApprovalPolicy {
    if auto {
        return ApprovalPolicy::auto();
    }
    let mut policy = ApprovalPolicy::default();
    if never {
        for tool in troupe::tools::coding_tools() {
            let declaration = tool.declaration();
            if declaration.requires_approval() {
                policy = policy.rule(ApprovalRule::deny(declaration.name.clone()));
            }
        }
    }
    policy
}

/// Checks that `runner` can run `spec`: its tools exist, its model resolves (a missing key
/// is found here, not at the first call).
pub(crate) fn validate(runner: &Runner, spec: &AgentSpec) -> Result<(), Failure> {
    runner.validate(spec).map_err(build_failure)
}

/// `spec` bound to `runner`, recording its runs in `durability`'s store when given.
pub(crate) fn agent(runner: Runner, spec: AgentSpec, durability: Option<Durability>) -> Agent {
    let runner = match durability {
        Some(durability) => runner.with_store(durability),
        None => runner,
    };
    Agent::new(runner, spec)
}

/// Sorts an agent that could not be built: a model error by its kind, anything else
/// (a bad workspace, a bad spec) is the user's to fix.
pub(crate) fn build_failure(error: RuntimeError) -> Failure {
    match error {
        RuntimeError::Model(error) => Failure::from_model(error),
        other => Failure::Usage(other.into()),
    }
}
