//! `troupe mcp serve`: the agents of the config directories as an MCP server, on stdio or,
//! with `--http ADDR`, over streamable HTTP at `/mcp`.
//!
//! ```text
//! troupe mcp serve [--agent ID]… [-w DIR] [--approve never|auto] [--http ADDR] [--config-dir DIR]…
//! ```
//!
//! Each agent is one MCP tool named after its id, taking `{"prompt": "…"}` and answering
//! with the agent's final answer; agents are built as `troupe agent run` builds them (their
//! MCP servers included). stdout carries the protocol, so everything else goes to stderr.

use crate::agent::build::{self, AgentBuild, Approvals, Ceilings};
use crate::agent::{ConfigDirs, discover};
use crate::{Failure, setup};
use anyhow::anyhow;
use std::path::PathBuf;
use troupe_mcp::{AgentServer, ServedAgent};
use troupe_workers::registry::RegisteredAgent;

/// `troupe mcp` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum McpCommand {
    /// Serve agents as MCP tools on stdin and stdout, for MCP clients that start servers
    /// (one tool per agent: a prompt in, the agent's answer out).
    Serve(ServeArgs),
}

/// What a call that needs approval does: nobody can be asked over MCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ServeApprove {
    /// It is refused; the agent is told and carries on without it.
    Never,
    /// It runs.
    Auto,
}

/// Arguments of `troupe mcp serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve this agent (repeatable) [default: every agent of the config directories].
    #[arg(long = "agent", value_name = "ID")]
    agents: Vec<String>,
    /// The workspace the agents' tools are confined to [default: .].
    #[arg(long, short, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// How tool calls that need approval are decided.
    #[arg(long, value_enum, default_value_t = ServeApprove::Never, value_name = "MODE")]
    approve: ServeApprove,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
    /// Serve over streamable HTTP at http://ADDR/mcp instead of stdio, behind the bearer
    /// tokens of TROUPE_SERVER_TOKEN (without one, a loopback address only).
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// Over HTTP, the server's connection limits.
    #[command(flatten)]
    limits: crate::serve::ConnectionLimits,
}

/// Runs a `troupe mcp` subcommand.
pub(crate) async fn run(dirs: &ConfigDirs, command: McpCommand) -> Result<(), Failure> {
    match command {
        McpCommand::Serve(args) => serve(dirs, args).await,
    }
}

async fn serve(dirs: &ConfigDirs, args: ServeArgs) -> Result<(), Failure> {
    let search = dirs.resolve()?;
    let registry = discover(&search)?;
    let selected: Vec<&RegisteredAgent> = if args.agents.is_empty() {
        registry.iter().collect()
    } else {
        args.agents
            .iter()
            .map(|id| {
                registry.entry(id).ok_or_else(|| {
                    let known: Vec<&str> = registry.iter().map(|a| a.definition.id()).collect();
                    Failure::Usage(anyhow!("no agent `{id}`; the agents are {}", known.join(", ")))
                })
            })
            .collect::<Result<_, _>>()?
    };
    if selected.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "no agents to serve; create one with `troupe agent create --id ID --name NAME` or pass --config-dir"
        )));
    }
    let workspace = setup::workspace_dir(args.workspace.as_deref())?;
    let config = crate::load_config()?;
    let approvals = match args.approve {
        ServeApprove::Never => Approvals::Refuse,
        ServeApprove::Auto => Approvals::Auto,
    };
    let definitions = || selected.iter().map(|a| &a.definition);
    let memory = build::memory_store(&workspace, definitions()).await?;
    let mcp = build::connect_mcp_each(definitions(), &workspace).await?;
    let sandbox = args.sandbox.choice()?;
    let mut served = Vec::new();
    for definition in definitions() {
        let built = build::build(AgentBuild {
            definition,
            workspace: &workspace,
            config: &config,
            approvals,
            extra_tools: Vec::new(),
            ceilings: Ceilings::default(),
            memory: memory.clone(),
            mcp: mcp.get(definition.id()),
            sandbox: &sandbox,
        })?;
        for note in &built.notes {
            diagln!("note: {note}");
        }
        let description = match definition.agent.description.trim() {
            "" => {
                format!("The troupe agent {}: give it a task as `prompt`; it answers when done.", definition.agent.name)
            }
            text => format!("{text} (the troupe agent {}; give it a task as `prompt`)", definition.agent.name),
        };
        served.push(ServedAgent::new(built.agent, description));
    }
    let server = AgentServer::new(served).map_err(|e| Failure::Usage(anyhow!(e)))?;
    let ids: Vec<String> = server.agents().iter().map(|a| a.tool_name().to_owned()).collect();
    if let Some(addr) = args.http {
        return serve_http(server, &ids, addr, &args.limits).await;
    }
    diagln!("serving {} over MCP on stdio", ids.join(", "));
    troupe_mcp::serve_agents_stdio(server).await.map_err(|e| Failure::Run(anyhow!(e)))
}

/// Serves `server` over streamable HTTP at `http://addr/mcp` until SIGTERM or Ctrl-C, with
/// the same bearer tokens, connection limits and timeouts, and the same refusal of an
/// unprotected public address, as `troupe serve`.
async fn serve_http(
    server: AgentServer,
    ids: &[String],
    addr: std::net::SocketAddr,
    limits: &crate::serve::ConnectionLimits,
) -> Result<(), Failure> {
    use troupe::server::{ServerConfig, TOKEN_ENV, Token};
    let tokens = std::env::var(TOKEN_ENV).map(|v| Token::list(&v)).unwrap_or_default();
    let config = ServerConfig { tokens, ..limits.config() };
    if !config.allows(addr) {
        return Err(Failure::Usage(troupe::server::ServerError::UnprotectedAddress { addr }.into()));
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    // Behind a public address the requests name it as their host; loopback names always pass.
    let hosts = (!addr.ip().is_loopback()).then(|| addr.ip().to_string());
    let service = troupe_mcp::http_service(server, hosts, shutdown.child_token());
    let auth = troupe::server::Auth::new(&config.tokens);
    let app = axum::Router::new().nest_service(MCP_PATH, service).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let checked = auth.check(request.headers());
            async move {
                match checked {
                    Ok(()) => next.run(request).await,
                    Err(refused) => axum::response::IntoResponse::into_response(refused),
                }
            }
        },
    ));
    let listener = troupe::server::bind(addr).map_err(|e| Failure::Usage(anyhow!("cannot listen on {addr}: {e}")))?;
    let bound = listener.local_addr().map_err(|e| Failure::Usage(e.into()))?;
    diagln!("troupe mcp serving {} on http://{bound}{MCP_PATH}", ids.join(", "));
    diagln!("{}", config.auth_summary());
    crate::serve::stop_on_signals(shutdown.clone());
    // The connection loop of `troupe serve`: its limits, its header and body timeouts.
    troupe::server::serve_router(listener, app, &config, shutdown).await;
    Ok(())
}

/// Where `troupe mcp serve --http` answers.
const MCP_PATH: &str = "/mcp";
