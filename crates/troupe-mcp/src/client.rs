//! [`McpClient`]: a connection to one MCP server that survives the server's death.
//!
//! Calls run concurrently over the one session. Each call is bounded by the server's
//! `timeout_seconds` (an abandoned call is cancelled at the server). When the session is
//! lost (the child died, the transport closed), the call reconnects once and is retried
//! once, as long as retrying cannot repeat an effect: a call that was never sent is always
//! retried; one that was sent and may have run is retried only when the tool is known to be
//! repeatable (read-only or idempotent), and otherwise fails saying its outcome is unknown.
//! Concurrent calls that lose the same session share one reconnect.

use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::session::{self, Kind, Session};
use crate::tool::{McpToolInfo, tool_info};
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode, JsonObject};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Fills in `${NAME}` references: the process environment, or a map in tests.
pub type VariableLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A connection to one MCP server and the tools it offers (after `allow` and `deny`).
pub struct McpClient {
    config: McpServerConfig,
    lookup: VariableLookup,
    tools: Vec<McpToolInfo>,
    session: Mutex<Arc<Session>>,
    reconnecting: tokio::sync::Mutex<()>,
    reconnects: AtomicU64,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.config.name)
            .field("tools", &self.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>())
            .field("reconnects", &self.reconnects())
            .finish_non_exhaustive()
    }
}

/// How one attempt at a call went.
enum Attempt {
    Done(Result<CallToolResult, McpError>),
    /// The session is gone; `delivered` when the request may have reached the server.
    Lost {
        delivered: bool,
        message: String,
    },
}

impl McpClient {
    /// Connects to the server of `config`, filling in `${NAME}` references from the process
    /// environment, and lists its tools.
    pub async fn connect(config: McpServerConfig) -> Result<McpClient, McpError> {
        Self::connect_with_variables(config, Arc::new(|name: &str| std::env::var(name).ok())).await
    }

    /// [`connect`](Self::connect), with `${NAME}` references filled in by `lookup`.
    pub async fn connect_with_variables(
        config: McpServerConfig,
        lookup: VariableLookup,
    ) -> Result<McpClient, McpError> {
        config.validate().map_err(|message| McpError::InvalidConfig { server: config.name.clone(), message })?;
        let session = session::open(&config, 0, lookup.as_ref()).await?;
        let wait = session::handshake_timeout(&config);
        let listed = tokio::time::timeout(wait, session.peer().list_all_tools())
            .await
            .map_err(|_| McpError::ListTools {
                server: config.name.clone(),
                message: format!("no answer within {}s", wait.as_secs()),
            })?
            .map_err(|e| McpError::ListTools { server: config.name.clone(), message: e.to_string() })?;
        let mut tools = Vec::new();
        for tool in listed {
            if tool.name.trim().is_empty() {
                tracing::warn!(server = %config.name, "an MCP tool without a name is left out");
                continue;
            }
            if config.offers(&tool.name) && !tools.iter().any(|t: &McpToolInfo| t.name == tool.name) {
                tools.push(tool_info(&config, &tool));
            }
        }
        if let Some(allow) = &config.allow {
            for name in allow.iter().filter(|name| !tools.iter().any(|t| &t.name == *name)) {
                tracing::warn!(server = %config.name, tool = %name, "`allow` names a tool the server does not offer");
            }
        }
        Ok(McpClient {
            config,
            lookup,
            tools,
            session: Mutex::new(Arc::new(session)),
            reconnecting: tokio::sync::Mutex::new(()),
            reconnects: AtomicU64::new(0),
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The server's configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// The tools the server offers, as listed when it was connected, less the ones
    /// `allow` and `deny` leave out.
    pub fn tools(&self) -> &[McpToolInfo] {
        &self.tools
    }

    /// The tool the server calls `name`, when it is offered.
    pub fn tool(&self, name: &str) -> Option<&McpToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The process id of the current server process (stdio servers only).
    pub fn server_pid(&self) -> Option<u32> {
        self.current().pid()
    }

    /// How many times the session was re-established after being lost.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    fn current(&self) -> Arc<Session> {
        Arc::clone(&self.session.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Calls the MCP tool `tool` with `arguments`. `repeatable` says whether running the
    /// call twice is harmless (read-only or idempotent), which decides whether a call lost
    /// with its session is retried (see the module docs).
    pub async fn call(&self, tool: &str, arguments: JsonObject, repeatable: bool) -> Result<CallToolResult, McpError> {
        let session = self.current();
        let first = if session.is_closed() {
            Attempt::Lost { delivered: false, message: "the transport is closed".to_owned() }
        } else {
            self.attempt(&session, tool, arguments.clone()).await
        };
        let (delivered, message) = match first {
            Attempt::Done(result) => return result,
            Attempt::Lost { delivered, message } => (delivered, message),
        };
        session.mark_lost();
        tracing::info!(server = %self.config.name, tool, "mcp session lost ({message}); reconnecting");
        let fresh = self.reconnect(&session).await?;
        if delivered && !repeatable {
            return Err(McpError::OutcomeUnknown { server: self.config.name.clone(), tool: tool.to_owned() });
        }
        match self.attempt(&fresh, tool, arguments).await {
            Attempt::Done(result) => result,
            Attempt::Lost { message, .. } => {
                fresh.mark_lost();
                Err(McpError::Unavailable {
                    server: self.config.name.clone(),
                    message: format!("the connection was lost again right after reconnecting ({message})"),
                })
            }
        }
    }

    async fn attempt(&self, session: &Session, tool: &str, arguments: JsonObject) -> Attempt {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let server = || self.config.name.clone();
        let answer = match tokio::time::timeout(self.config.timeout, session.peer().call_tool_once(params)).await {
            Ok(answer) => answer,
            // Dropping the request sent `notifications/cancelled` to the server.
            Err(_) => {
                return Attempt::Done(Err(McpError::Timeout {
                    server: server(),
                    tool: tool.to_owned(),
                    after: self.config.timeout,
                }));
            }
        };
        match answer {
            Ok(CallToolResponse::Complete(result)) => Attempt::Done(Ok(result)),
            Ok(CallToolResponse::InputRequired(_)) => Attempt::Done(Err(McpError::Unsupported {
                server: server(),
                tool: tool.to_owned(),
                what: "input from the user (elicitation or sampling)".to_owned(),
            })),
            Ok(CallToolResponse::Task(_)) => Attempt::Done(Err(McpError::Unsupported {
                server: server(),
                tool: tool.to_owned(),
                what: "to run as a task polled later".to_owned(),
            })),
            Ok(_) => Attempt::Done(Err(McpError::Unsupported {
                server: server(),
                tool: tool.to_owned(),
                what: "a kind of answer this version of troupe does not know".to_owned(),
            })),
            Err(ServiceError::McpError(error)) if error.code == ErrorCode::INVALID_PARAMS => {
                Attempt::Done(Err(McpError::InvalidArguments {
                    message: format!(
                        "MCP server `{}` refused the arguments of `{tool}`: {}. Fix them to match the tool's input schema and call it again.",
                        self.config.name, error.message
                    ),
                }))
            }
            Err(ServiceError::McpError(error)) => Attempt::Done(Err(McpError::Refused {
                server: server(),
                tool: tool.to_owned(),
                message: error.message.into_owned(),
            })),
            // A stdio write that failed never reached the server; over HTTP the request may
            // have been handled before the connection broke.
            Err(ServiceError::TransportSend(error)) => {
                Attempt::Lost { delivered: session.kind == Kind::Http, message: error.to_string() }
            }
            Err(ServiceError::TransportClosed) => {
                Attempt::Lost { delivered: true, message: "the transport closed".to_owned() }
            }
            Err(other) => Attempt::Done(Err(McpError::Refused {
                server: server(),
                tool: tool.to_owned(),
                message: other.to_string(),
            })),
        }
    }

    /// A fresh session in place of `lost`; calls that lost the same session share it.
    async fn reconnect(&self, lost: &Session) -> Result<Arc<Session>, McpError> {
        let _one_at_a_time = self.reconnecting.lock().await;
        let current = self.current();
        if current.generation != lost.generation && !current.is_closed() {
            return Ok(current);
        }
        let fresh = session::open(&self.config, current.generation + 1, self.lookup.as_ref()).await.map_err(|e| {
            McpError::Unavailable { server: self.config.name.clone(), message: format!("reconnecting failed: {e}") }
        })?;
        let fresh = Arc::new(fresh);
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&fresh);
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        Ok(fresh)
    }
}
