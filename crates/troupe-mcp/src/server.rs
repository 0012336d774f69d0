//! troupe agents served as MCP tools: one tool per agent, `{prompt}` in, the final answer
//! out.
//!
//! A call starts a run of the agent on the prompt and answers when the run ends: with the
//! answer when it completed, otherwise with an error result saying how it ended. Either
//! way the result carries a structured report too (`structuredContent`: the answer, the
//! run's id, its outcome, tokens and cost), which the tools' output schema describes. The MCP
//! client cancelling the call cancels the run. Nobody can approve tool calls over MCP, so a
//! run whose calls need approval ends paused and the tool says so; build such agents with a
//! policy that decides without a person (allow or deny).
//!
//! The tools' annotations are honest: `readOnlyHint` only when every tool the agent can
//! actually call (its tools less those its policy always denies) is read-only.

use crate::error::McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, serve_server};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use troupe_runtime::{Agent, ApprovalPolicy, RuleAction, RunInput, RunOutcome};
use troupe_tools::{Access, Effect, ToolDeclaration};

/// One agent offered as an MCP tool.
#[derive(Clone, Debug)]
pub struct ServedAgent {
    tool: String,
    description: String,
    agent: Agent,
}

impl ServedAgent {
    /// `agent` as the tool named after it (characters MCP tool names do not allow become
    /// `_`), described by `description`.
    pub fn new(agent: Agent, description: impl Into<String>) -> Self {
        let tool = tool_name(&agent.spec().name);
        let description = description.into();
        let description = if description.trim().is_empty() {
            format!("Runs the troupe agent `{}` on a prompt and returns its final answer.", agent.spec().name)
        } else {
            description
        };
        ServedAgent { tool, description, agent }
    }

    /// The MCP tool's name.
    pub fn tool_name(&self) -> &str {
        &self.tool
    }

    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The declarations of the tools the agent can call: its tools, less those its approval
    /// policy denies whatever the arguments.
    pub fn callable_tools(&self) -> Vec<&ToolDeclaration> {
        let catalog = self.agent.runner().catalog();
        let spec = self.agent.spec();
        let names: Vec<&str> = match &spec.tools {
            Some(listed) => listed.iter().map(String::as_str).collect(),
            None => catalog.names(),
        };
        names
            .into_iter()
            .filter(|name| !always_denied(&spec.approval, name))
            .filter_map(|name| catalog.get(name).map(|t| t.declaration()))
            .collect()
    }

    /// Whether every tool the agent can call only observes.
    pub fn is_read_only(&self) -> bool {
        self.callable_tools().iter().all(|d| d.is_read_only())
    }

    /// The MCP tool.
    pub fn mcp_tool(&self) -> Tool {
        let read_only = self.is_read_only();
        let reaches_out = self.callable_tools().iter().any(|d| {
            d.effect >= Effect::ExternalSideEffect
                || d.access.iter().any(|a| matches!(a, Access::Network(_) | Access::NetworkHost(_)))
        });
        let annotations = ToolAnnotations::with_title(format!("troupe agent {}", self.agent.spec().name))
            .read_only(read_only)
            // An agent may rewrite what it can write; nothing promises additive updates only.
            .destructive(!read_only)
            .idempotent(false)
            .open_world(reaches_out);
        let mut tool = Tool::new(self.tool.clone(), self.description.clone(), Arc::new(prompt_schema()))
            .with_annotations(annotations);
        tool.output_schema = Some(Arc::new(report_schema()));
        tool
    }
}

/// Whether `policy` denies every call of `tool`: the first rule that can match it is a
/// deny without conditions. A conditional rule first means some call may pass.
fn always_denied(policy: &ApprovalPolicy, tool: &str) -> bool {
    let first = policy.rules.iter().find(|rule| {
        let unconditional = troupe_runtime::ApprovalRule { argument: None, starts_with: None, ..(*rule).clone() };
        unconditional.matches(tool, &Value::Null)
    });
    first.is_some_and(|rule| rule.action == RuleAction::Deny && rule.argument.is_none())
}

/// An MCP tool name for an agent name: letters, digits, `_`, `-` and `.` kept, the rest `_`.
fn tool_name(agent: &str) -> String {
    let name: String = agent
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
        .take(128)
        .collect();
    if name.is_empty() { "agent".to_owned() } else { name }
}

fn prompt_schema() -> JsonObject {
    let schema = json!({
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The task for the agent, in plain words."}},
        "required": ["prompt"],
        "additionalProperties": false,
    });
    match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The structured result of every call (`structuredContent`), as the tools' output schema
/// says: the answer (or why there is none), the run that made it, how it ended, what it
/// used.
fn report_schema() -> JsonObject {
    let schema = json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": "The agent's final answer, or why it gave none."},
            "run_id": {"type": "string", "description": "The troupe run that answered."},
            "outcome": {
                "type": "string",
                "enum": ["completed", "paused", "cancelled", "budget_exceeded", "max_iterations", "incomplete", "failed"],
            },
            "input_tokens": {"type": "integer", "minimum": 0},
            "output_tokens": {"type": "integer", "minimum": 0},
            "cost_usd": {"type": "number", "minimum": 0},
        },
        "required": ["answer", "run_id", "outcome"],
    });
    match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// A call's result: `answer` as text (what a model reads) and the report as structured
/// content; an error result unless the run completed.
fn reported(answer: String, output: &troupe_runtime::RunOutput) -> CallToolResult {
    let report = json!({
        "answer": answer,
        "run_id": output.run_id,
        "outcome": output.outcome.kind(),
        "input_tokens": output.usage.total_input(),
        "output_tokens": output.usage.output_tokens,
        "cost_usd": output.cost_usd,
    });
    let completed = matches!(output.outcome, RunOutcome::Completed { .. });
    let mut result = if completed {
        CallToolResult::success(vec![ContentBlock::text(answer)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(answer)])
    };
    result.structured_content = Some(report);
    result
}

/// The MCP server: the [`ServedAgent`]s as tools.
#[derive(Clone, Debug)]
pub struct AgentServer {
    agents: Arc<Vec<ServedAgent>>,
}

impl AgentServer {
    /// A server of `agents`; two agents whose tools would share a name are refused.
    pub fn new(agents: Vec<ServedAgent>) -> Result<AgentServer, McpError> {
        for (n, agent) in agents.iter().enumerate() {
            if agents[..n].iter().any(|a| a.tool == agent.tool) {
                return Err(McpError::InvalidConfig {
                    server: "troupe".to_owned(),
                    message: format!("two agents would both be served as the tool `{}`", agent.tool),
                });
            }
        }
        Ok(AgentServer { agents: Arc::new(agents) })
    }

    /// The agents served.
    pub fn agents(&self) -> &[ServedAgent] {
        &self.agents
    }

    async fn run(&self, agent: &ServedAgent, prompt: String, context: &RequestContext<RoleServer>) -> CallToolResult {
        let handle = agent.agent.start(RunInput::new(prompt));
        let cancel = handle.cancel.clone();
        let output = tokio::select! {
            output = handle.output() => output,
            () = context.ct.cancelled() => {
                cancel.cancel();
                return CallToolResult::error(vec![ContentBlock::text("the call was cancelled; the run was cancelled too")]);
            }
        };
        let output = match output {
            Ok(output) => output,
            Err(error) => return CallToolResult::error(vec![ContentBlock::text(format!("the run failed: {error}"))]),
        };
        let name = &agent.agent.spec().name;
        let text = match &output.outcome {
            RunOutcome::Completed { output: answer } => return reported(answer.clone(), &output),
            RunOutcome::Paused { pending } => {
                let tools: Vec<&str> = pending.iter().map(|p| p.tool.as_str()).collect();
                format!(
                    "the agent `{name}` stopped: its call of {} needs a person's approval, which cannot be given over \
                     MCP (run {})",
                    tools.join(", "),
                    output.run_id
                )
            }
            RunOutcome::Cancelled { reason } => {
                format!(
                    "the agent `{name}`'s run was cancelled{}",
                    reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
                )
            }
            RunOutcome::BudgetExceeded { budget } => {
                format!("the agent `{name}` ran out of its {budget} budget before it answered")
            }
            RunOutcome::MaxIterations { iterations } => {
                format!("the agent `{name}` stopped after {iterations} model calls without an answer")
            }
            RunOutcome::Incomplete { partial } => {
                format!("the agent `{name}`'s answer is incomplete (cut at the output limit):\n{partial}")
            }
            RunOutcome::Failed { error, .. } => format!("the agent `{name}`'s run failed: {error}"),
        };
        reported(text, &output)
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("troupe", env!("CARGO_PKG_VERSION")))
            .with_instructions("Each tool runs a troupe agent on a prompt and returns the agent's final answer.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.agents.iter().map(ServedAgent::mcp_tool).collect()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.agents.iter().find(|a| a.tool == name).map(ServedAgent::mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(agent) = self.agents.iter().find(|a| a.tool == request.name) else {
            let known: Vec<&str> = self.agents.iter().map(|a| a.tool.as_str()).collect();
            return Err(ErrorData::invalid_params(
                format!("no tool `{}`; the tools are {}", request.name, known.join(", ")),
                None,
            ));
        };
        let prompt = request.arguments.as_ref().and_then(|args| args.get("prompt")).and_then(Value::as_str);
        let result = match prompt {
            Some(prompt) if !prompt.trim().is_empty() => self.run(agent, prompt.to_owned(), &context).await,
            _ => CallToolResult::error(vec![ContentBlock::text(
                "the argument `prompt` (a non-empty string: the task for the agent) is missing",
            )]),
        };
        Ok(result.into())
    }
}

/// Serves `server` over `read` and `write` (a pipe, a socket, stdin and stdout) until the
/// client closes the connection.
pub async fn serve_agents<R, W>(server: AgentServer, read: R, write: W) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = serve_server(server, (read, write))
        .await
        .map_err(|e| McpError::Serve { message: format!("the MCP handshake failed: {e}") })?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::Serve { message: format!("the MCP session ended abnormally: {e}") })?;
    Ok(())
}

/// `server` as a streamable HTTP MCP endpoint: a tower service to mount in an HTTP server
/// (`troupe mcp serve --http` mounts it at `/mcp`, behind the server's bearer tokens), one
/// session per client. It answers requests whose `Host` is one of `hosts` (besides the
/// loopback names), against DNS rebinding; cancelling `shutdown` ends every session.
pub fn http_service(
    server: AgentServer,
    hosts: impl IntoIterator<Item = String>,
    shutdown: CancellationToken,
) -> StreamableHttpService<AgentServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts.extend(hosts);
    config.cancellation_token = shutdown;
    StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config)
}

/// Serves `server` on this process's stdin and stdout, as MCP clients start stdio servers.
pub async fn serve_agents_stdio(server: AgentServer) -> Result<(), McpError> {
    serve_agents(server, tokio::io::stdin(), tokio::io::stdout()).await
}
