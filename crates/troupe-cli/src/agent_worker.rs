//! `troupe agent run --worker`: this binary as a worker process of a coordinator
//! ([`troupe_workers::process::ProcessMember`]). It speaks the worker protocol on stdin and
//! stdout: one task in, its events, artifacts and result out (see `troupe_workers::ipc`).
//!
//! The agent is the one of `--agent-file` when given; otherwise the spec the task carries;
//! otherwise the coding agent of `troupe run` on the task's hosted model, or the model of
//! `TROUPE_MODEL`, `troupe.toml` or the first key set (else `demo`). When the task names
//! hosted models (a team's process member), the agent calls them through the coordinator
//! and this process holds no key; otherwise providers come from the environment the
//! coordinator granted and `./troupe.toml`, as for `troupe run`. Its tools are the built-in
//! coding tools confined to `--workspace`, cut down to what the agent file and the task
//! allow.
//!
//! Before anything else runs, the process confines itself with Landlock to writing only
//! in its workspace (and `/tmp`) and installs the sandbox's system-call filter (without
//! the network when the coordinator set `TROUPE_WORKER_OFFLINE=1`: it hosts the model);
//! the outcome is printed on stderr when it is not full, sent as the first event and put
//! in the result. Files outside the workspace that the worker needs (the agent file,
//! `troupe.toml`) are read before that.

use crate::{Failure, setup};
use anyhow::anyhow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use troupe::runtime::{Agent, ModelResolver};
use troupe_model::ModelConfig;
use troupe_workers::build::SandboxChoice;
use troupe_workers::definition::AgentDefinition;
use troupe_workers::ipc::AgentTask;
use troupe_workers::ipc::channel::stdio;
use troupe_workers::process::{OFFLINE_ENV, SandboxPolicy, ServeOptions, confine, serve};

/// The arguments of `troupe agent run` that its worker mode reads.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct AgentRunArgs {
    /// Serve one task over stdin and stdout with the worker protocol (a coordinator starts
    /// this; it is not for typing).
    #[arg(long)]
    pub(crate) worker: bool,
    /// The agent file (`agents/*.toml`) to run.
    #[arg(long, value_name = "PATH")]
    pub(crate) agent_file: Option<PathBuf>,
    /// The workspace the agent's tools, and its writes, are confined to [default: .].
    #[arg(long, short, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
}

/// What a worker reads before it confines itself.
struct Prepared {
    workspace: PathBuf,
    config: ModelConfig,
    definition: Option<AgentDefinition>,
}

/// Runs the worker: reads what it needs, confines itself, then serves one task on its own
/// runtime. Called before any other thread exists, since Landlock binds only the calling
/// thread and the threads it starts afterwards.
pub(crate) fn main(args: &AgentRunArgs) -> ExitCode {
    // A worker dies with its coordinator, as a thread of it would: a coordinator killed
    // mid-task leaves no worker going on alone, holding its run's lease, while the team is
    // resumed. (Its parent gone before this line, it is adopted: it stops at once.)
    if nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).is_err()
        || nix::unistd::getppid() == nix::unistd::Pid::from_raw(1)
    {
        diagln!("error: the worker's coordinator is gone");
        return ExitCode::from(1);
    }
    let prepared = match prepare(args) {
        Ok(prepared) => prepared,
        Err(Failure::Usage(e)) => {
            diagln!("error: {e:#}");
            return ExitCode::from(2);
        }
        Err(Failure::Run(e)) => {
            diagln!("error: {e:#}");
            return ExitCode::from(1);
        }
    };
    let mut policy = SandboxPolicy::for_workspace(&prepared.workspace);
    // A coordinator that calls this worker's model says so: then no socket is needed.
    if hosted_by_coordinator() {
        policy = policy.without_network();
    }
    let sandbox = confine(&policy);
    if !sandbox.is_enforced() {
        diagln!("warning: the worker is not fully sandboxed: {sandbox}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            diagln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let options = ServeOptions { workspace: prepared.workspace.clone(), sandbox };
    // The pipes register with the runtime's reactor: made inside it.
    let served = runtime.block_on(async {
        serve(stdio::input(), stdio::output(), options, |task, models| build(&prepared, task, models)).await
    });
    match served {
        Ok(summary) => {
            tracing::debug!(task = %summary.result.task_id, status = ?summary.result.status, "worker done");
            ExitCode::SUCCESS
        }
        Err(error) => {
            diagln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

fn prepare(args: &AgentRunArgs) -> Result<Prepared, Failure> {
    let workspace = setup::workspace_dir(args.workspace.as_deref())?;
    let workspace = workspace
        .canonicalize()
        .map_err(|e| Failure::Usage(anyhow!("cannot resolve the workspace `{}`: {e}", workspace.display())))?;
    let config = crate::load_config()?;
    let mut definition =
        args.agent_file.as_deref().map(AgentDefinition::load).transpose().map_err(|e| Failure::Usage(e.into()))?;
    forget_key(&mut definition, hosted_by_coordinator());
    Ok(Prepared { workspace, config, definition })
}

/// A coordinator that calls this worker's model holds its key: a key written in the agent
/// file is not kept here when `hosted` (and, once confined, the file cannot be read again).
fn forget_key(definition: &mut Option<AgentDefinition>, hosted: bool) {
    if hosted && let Some(definition) = definition {
        definition.provider.api_key = None;
    }
}

/// Whether the coordinator said it calls this worker's model ([`OFFLINE_ENV`]).
fn hosted_by_coordinator() -> bool {
    std::env::var_os(OFFLINE_ENV).is_some_and(|v| v == "1")
}

/// The task's agent; the task's tool policy is applied by `serve` on top. With `models`
/// (the task's hosted models), its model is called through the coordinator.
fn build(prepared: &Prepared, task: &AgentTask, models: Option<Arc<dyn ModelResolver>>) -> Result<Agent, String> {
    let providers = crate::providers(&prepared.config).map_err(describe)?;
    let mut spec = match (&prepared.definition, task.agent_spec()) {
        (Some(definition), _) => definition.to_spec(),
        (None, Ok(Some(spec))) => spec,
        (None, Ok(None)) => {
            let model = match task.hosted_models.first() {
                Some(hosted) => hosted.name.clone(),
                None => {
                    let environment = std::env::var("TROUPE_MODEL").ok();
                    crate::chat::choose_model(None, environment.as_deref(), &prepared.config, &providers).0
                }
            };
            setup::coding_spec(model, setup::unattended_policy(false, false), None, None)
        }
        (None, Err(e)) => return Err(format!("the task's spec is not a valid agent spec: {e}")),
    };
    let sandbox = match &task.sandbox {
        // The team's choice for this member.
        Some(chosen) => SandboxChoice::made(chosen.clone()),
        None => {
            let own = prepared.definition.as_ref().map(|d| d.sandbox.clone()).unwrap_or_default();
            SandboxChoice::made(SandboxChoice::load(None).map_err(|e| e.to_string())?.settings_for(&own))
        }
    };
    let mut runner = setup::runner(&prepared.workspace, providers, &sandbox).map_err(describe)?;
    if let Some(models) = models {
        runner = runner.with_resolver(models);
    }
    if let Some(definition) = &prepared.definition {
        offer_file_tools(&mut spec, definition, &runner, true);
    }
    if let Some(approvals) = task.approvals {
        // The team's approval mode: `auto` runs such calls, `refuse` denies them.
        troupe_workers::build::apply_approvals(&mut spec, runner.catalog(), approvals);
    }
    setup::validate(&runner, &spec).map_err(describe)?;
    Ok(Agent::new(runner, spec))
}

/// The agent a worker runs for `definition`, as [`build`] makes it: what a replay of a
/// worker member's recorded run runs as.
pub(crate) fn file_agent(
    definition: &AgentDefinition,
    providers: troupe::model::Providers,
    workspace: &std::path::Path,
    sandbox: &SandboxChoice,
    approvals: troupe_workers::build::Approvals,
) -> Result<Agent, Failure> {
    let mut spec = definition.to_spec();
    let runner = setup::runner(workspace, providers, &SandboxChoice::made(sandbox.settings_for(&definition.sandbox)))?;
    offer_file_tools(&mut spec, definition, &runner, false);
    troupe_workers::build::apply_approvals(&mut spec, runner.catalog(), approvals);
    setup::validate(&runner, &spec)?;
    Ok(Agent::new(runner, spec))
}

/// Offers the tools the file lists (or all) that its policy permits and this catalog has:
/// the file's denied tools leave the catalog, not only the approval policy.
fn offer_file_tools(
    spec: &mut troupe::runtime::AgentSpec,
    definition: &AgentDefinition,
    runner: &troupe::runtime::Runner,
    say: bool,
) {
    let policy = definition.tool_policy();
    let named = spec.tools.take().unwrap_or_else(|| runner.catalog().names().into_iter().map(str::to_owned).collect());
    // A tool this worker's catalog lacks (web.*, memory.*, MCP tools) is left out, as the
    // coordinator does, and said so on stderr, which the coordinator keeps.
    let (offered, missing): (Vec<String>, Vec<String>) =
        named.into_iter().filter(|tool| policy.permits(tool)).partition(|tool| runner.catalog().get(tool).is_some());
    if say && !missing.is_empty() {
        diagln!("note: this worker has no {}; left out", missing.join(", "));
    }
    spec.tools = Some(offered);
}

fn describe(failure: Failure) -> String {
    match failure {
        Failure::Usage(e) | Failure::Run(e) => format!("{e:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosted_worker_keeps_no_key_of_its_agent_file() {
        let file = "[agent]\nid = \"r\"\nname = \"R\"\n\n[provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\
                    api_key = \"sk-ant-file\"\n";
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("r.toml");
        std::fs::write(&path, file).expect("writes");
        let loaded = || Some(AgentDefinition::load(&path).expect("loads"));
        let mut kept = loaded();
        forget_key(&mut kept, false);
        assert!(kept.and_then(|d| d.provider.api_key).is_some(), "a worker calling its model itself keeps it");
        let mut hosted = loaded();
        forget_key(&mut hosted, true);
        let hosted = hosted.expect("the definition");
        assert!(hosted.provider.api_key.is_none());
        assert_eq!(hosted.model_id(), "anthropic/claude-sonnet-4-5", "the rest is kept");
    }
}
