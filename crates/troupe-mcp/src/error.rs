//! What can go wrong with MCP: configuration files, connecting, calling.
//!
//! No message carries a secret: header values and environment values filled in from
//! `${NAME}` references are never quoted, and a server's stderr is shown with them
//! redacted.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A `[[mcp.servers]]` table that is not valid. Displays as `file:line:column: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct McpConfigError {
    /// The file, as it was given.
    pub path: PathBuf,
    /// The line, from 1, when the problem is at one place.
    pub line: Option<usize>,
    /// The column in characters, from 1, when the problem is at one place.
    pub column: Option<usize>,
    /// What is wrong, and what is accepted instead.
    pub message: String,
}

impl fmt::Display for McpConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "{}:{line}:{column}: {}", self.path.display(), self.message),
            _ => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Something that went wrong connecting to an MCP server or calling one of its tools.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration cannot work as written (a bad name, header or URL).
    #[error("MCP server `{server}`: {message}")]
    InvalidConfig {
        /// The server.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// A `${NAME}` reference names a variable that is not set.
    #[error(
        "MCP server `{server}`: the environment variable `{variable}` is not set; export it before starting troupe"
    )]
    MissingVariable {
        /// The server.
        server: String,
        /// The variable.
        variable: String,
    },
    /// The server's program could not be started.
    #[error("MCP server `{server}`: cannot start `{command}`: {message}; check `command` and that it is on the PATH")]
    Spawn {
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// The operating system's message.
        message: String,
    },
    /// The server started (or was reached) but the MCP handshake failed.
    #[error("MCP server `{server}`: the connection failed: {message}")]
    Connect {
        /// The server.
        server: String,
        /// What happened, with the end of the server's stderr where there is one.
        message: String,
    },
    /// The server did not answer the handshake in time.
    #[error("MCP server `{server}` did not finish the MCP handshake within {}s", after.as_secs())]
    ConnectTimeout {
        /// The server.
        server: String,
        /// How long troupe waited.
        after: Duration,
    },
    /// The server's tool list could not be read.
    #[error("MCP server `{server}`: cannot list its tools: {message}")]
    ListTools {
        /// The server.
        server: String,
        /// What happened.
        message: String,
    },
    /// Two tools would reach a model under the same wire name.
    #[error(
        "tools `{first}` and `{second}` both become `{wire}` on the wire to the model; rename a server or deny one of the tools"
    )]
    NameCollision {
        /// One catalog name.
        first: String,
        /// The other.
        second: String,
        /// The wire name both encode to.
        wire: String,
    },
    /// A call did not finish in time and was abandoned (the server was told to cancel it).
    #[error("MCP tool `{tool}` of server `{server}` did not answer within {}s and was cancelled", after.as_secs())]
    Timeout {
        /// The server.
        server: String,
        /// The MCP tool.
        tool: String,
        /// The server's `timeout_seconds`.
        after: Duration,
    },
    /// The session was lost and could not be restored by a reconnect.
    #[error("MCP server `{server}` is unavailable: {message}")]
    Unavailable {
        /// The server.
        server: String,
        /// What happened.
        message: String,
    },
    /// The session was lost while a call that may not be repeated was running: the server
    /// was reconnected, but the call was not retried.
    #[error(
        "MCP server `{server}` closed the connection while `{tool}` was running; it was reconnected, but the call was not \
         repeated because it may already have taken effect. Check whether it did before calling it again"
    )]
    OutcomeUnknown {
        /// The server.
        server: String,
        /// The MCP tool.
        tool: String,
    },
    /// The server rejected the call's arguments.
    #[error("{message}")]
    InvalidArguments {
        /// What the server said, or what troupe found.
        message: String,
    },
    /// The server answered the call with a protocol error.
    #[error("MCP server `{server}` refused the call of `{tool}`: {message}")]
    Refused {
        /// The server.
        server: String,
        /// The MCP tool.
        tool: String,
        /// The server's message.
        message: String,
    },
    /// The tool ran and reports a failure.
    #[error("{message}")]
    ToolFailed {
        /// The tool's own words.
        message: String,
    },
    /// The server asked for something troupe does not provide during a call (user input,
    /// a long-running task).
    #[error("MCP tool `{tool}` of server `{server}` needs {what}, which troupe does not provide; use another tool")]
    Unsupported {
        /// The server.
        server: String,
        /// The MCP tool.
        tool: String,
        /// What it needed.
        what: String,
    },
    /// Serving agents over MCP failed.
    #[error("serving MCP: {message}")]
    Serve {
        /// What happened.
        message: String,
    },
}

#[cfg(feature = "client")]
impl From<McpError> for troupe_tools::ToolError {
    fn from(error: McpError) -> Self {
        use troupe_tools::ToolError;
        match error {
            McpError::Timeout { after, .. } => ToolError::Timeout { after },
            McpError::InvalidArguments { message } => ToolError::InvalidArguments { message },
            McpError::ToolFailed { message } => ToolError::Failed { message },
            other => ToolError::Failed { message: other.to_string() },
        }
    }
}
