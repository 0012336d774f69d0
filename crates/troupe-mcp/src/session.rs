//! One MCP session: the transport (a child process or streamable HTTP) and the running
//! rmcp client over it.
//!
//! A stdio server runs confined (a `troupe_sandbox::Sandbox`, see
//! [`McpServerConfig::stdio_sandbox`]) in its own process group with a scrubbed
//! environment (`PATH`, `HOME` and the configured variables only); the group is killed when the session is
//! dropped, so a server's own children (`npx` starting `node`) go with it. Its stderr is
//! forwarded to `tracing` at debug level, with filled-in secrets redacted, and its last
//! lines explain a failed handshake.

use crate::config::{McpServerConfig, McpTransport};
use crate::error::McpError;
use crate::template;
use rmcp::RoleClient;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{Peer, RunningService, serve_client};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::{ChildStderr, Command};
use troupe_sandbox::Confined;

/// Variables a stdio server inherits from troupe's environment.
const INHERITED: [&str; 2] = ["PATH", "HOME"];
/// Lines of a server's stderr kept to explain a failure.
const STDERR_LINES: usize = 20;
/// The longest stderr line kept.
const STDERR_LINE_CHARS: usize = 400;
/// The most bytes of a stderr line read into memory: enough for its kept characters (at most
/// 4 bytes each in UTF-8); the rest of a longer line is skipped as it is read.
const STDERR_LINE_BYTES: usize = 4 * STDERR_LINE_CHARS;
/// The least time a handshake is given, whatever the per-call timeout: starting a server
/// (`npx` fetching a package, a cold `node`) can take longer than one call should.
const MIN_HANDSHAKE: Duration = Duration::from_secs(30);
/// Shorter filled-in values are not redacted from stderr: they would blank ordinary words.
const MIN_SECRET_CHARS: usize = 4;

/// How a session reaches its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Stdio,
    Http,
}

/// A live session.
pub(crate) struct Session {
    /// Counts the sessions of one client: 0 for the first, 1 after a reconnect, ...
    pub(crate) generation: u64,
    pub(crate) kind: Kind,
    service: RunningService<RoleClient, ClientConfig>,
    /// Set once a call lost this session: it is never used again, even if its transport
    /// does not know it is gone (an HTTP session whose server restarted).
    lost: AtomicBool,
    // Dropped after the service: killing the group ends the child's pipes too.
    child: Option<ChildGuard>,
}

impl Session {
    /// The handle requests are sent through.
    pub(crate) fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// Whether the session is known to be gone (a request would not be sent).
    pub(crate) fn is_closed(&self) -> bool {
        self.lost.load(Ordering::Relaxed) || self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Takes the session out of use.
    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// The server's process id, for a stdio server.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.process.child.id())
    }
}

/// The server process; its whole group is killed on drop.
struct ChildGuard {
    /// The server's process, and its private `TMPDIR` when it is confined (removed with
    /// the guard).
    process: Confined,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.process.child.id().and_then(|id| i32::try_from(id).ok()) {
            // The child leads its own group (`process_group(0)`): its group id is its pid.
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        // `kill_on_drop` kills the child itself should the group be gone; tokio reaps it.
    }
}

/// The last lines of a server's stderr, secrets redacted.
#[derive(Clone, Default)]
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// What troupe tells servers about itself.
fn client_info() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("troupe", env!("CARGO_PKG_VERSION")))
}

/// Opens a session to `config`'s server, `generation` numbering it, `lookup` filling in
/// `${NAME}` references.
pub(crate) async fn open(
    config: &McpServerConfig,
    generation: u64,
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Session, McpError> {
    match &config.transport {
        McpTransport::Stdio { command, args, env } => open_stdio(config, command, args, env, generation, lookup).await,
        McpTransport::Http { url, headers } => open_http(config, url, headers, generation, lookup).await,
    }
}

/// How long a handshake may take: the per-call timeout, but at least [`MIN_HANDSHAKE`].
pub(crate) fn handshake_timeout(config: &McpServerConfig) -> Duration {
    config.timeout.max(MIN_HANDSHAKE)
}

/// Fills in `value`'s references, remembering the filled-in values as secrets.
fn fill(
    server: &str,
    value: &str,
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
    secrets: &mut Vec<String>,
) -> Result<String, McpError> {
    template::check(value).map_err(|message| McpError::InvalidConfig { server: server.to_owned(), message })?;
    let filled = template::expand(value, &|name: &str| lookup(name))
        .map_err(|variable| McpError::MissingVariable { server: server.to_owned(), variable })?;
    for name in template::variables(value) {
        if let Some(secret) = lookup(&name).filter(|s| s.chars().count() >= MIN_SECRET_CHARS) {
            secrets.push(secret);
        }
    }
    Ok(filled)
}

async fn open_stdio(
    config: &McpServerConfig,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    generation: u64,
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Session, McpError> {
    let server = config.name.as_str();
    let mut secrets = Vec::new();
    let mut cmd = Command::new(command);
    cmd.args(args).env_clear();
    for name in INHERITED {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    for (name, value) in env {
        cmd.env(name, fill(server, value, lookup, &mut secrets)?);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    let spawn_error =
        |message: String| McpError::Spawn { server: server.to_owned(), command: command.to_owned(), message };
    let workspace = match &config.workspace {
        Some(workspace) => workspace.clone(),
        None => {
            std::env::current_dir().map_err(|e| spawn_error(format!("no current directory to confine it to: {e}")))?
        }
    };
    let sandbox = config.stdio_sandbox(command, args, &workspace);
    let confined = sandbox.spawn(cmd, &workspace).await.map_err(|e| spawn_error(e.to_string()))?;
    tracing::debug!(server, sandbox = %confined.report, "mcp server started");
    let sandboxed = sandbox.mode().confines().then(|| confined.report.to_string());
    let mut process = confined;
    let child = &mut process.child;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(McpError::Spawn {
            server: server.to_owned(),
            command: command.to_owned(),
            message: "its stdin or stdout could not be piped".to_owned(),
        });
    };
    let tail = StderrTail::default();
    if let Some(stderr) = child.stderr.take() {
        forward_stderr(server.to_owned(), stderr, tail.clone(), secrets);
    }
    let mut guard = ChildGuard { process };
    let handshake = tokio::time::timeout(handshake_timeout(config), serve_client(client_info(), (stdout, stdin))).await;
    let service = match handshake {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            // Give the stderr reader a moment to catch the server's last words.
            let exited = tokio::time::timeout(Duration::from_millis(300), guard.process.child.wait()).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut message = error.to_string();
            if let Ok(Ok(status)) = exited {
                message.push_str(&format!(" (the server exited: {status})"));
            }
            let stderr = tail.text();
            if let Some(sandbox) = &sandboxed {
                // A server that needs files outside what it may read fails here: say where
                // to grant them.
                message.push_str(&format!(
                    " (it ran confined, {sandbox}; grant what it needs with `read` or `write` under \
                     [mcp.servers.sandbox], or mode = \"full\")"
                ));
            }
            if !stderr.is_empty() {
                message.push_str(&format!("; its stderr ends with:\n{stderr}"));
            }
            return Err(McpError::Connect { server: server.to_owned(), message });
        }
        Err(_) => return Err(McpError::ConnectTimeout { server: server.to_owned(), after: handshake_timeout(config) }),
    };
    Ok(Session { generation, kind: Kind::Stdio, service, lost: AtomicBool::new(false), child: Some(guard) })
}

fn forward_stderr(server: String, stderr: ChildStderr, tail: StderrTail, secrets: Vec<String>) {
    tokio::spawn(async move {
        // Read to the end even when nothing is kept: a server whose stderr fills up blocks.
        crate::bounded_lines::read_lines(stderr, STDERR_LINE_BYTES, |line| {
            let mut line: String = line.chars().take(STDERR_LINE_CHARS).collect();
            for secret in &secrets {
                line = line.replace(secret.as_str(), "<redacted>");
            }
            tracing::debug!(server = %server, "mcp server stderr: {line}");
            tail.push(line);
        })
        .await;
    });
}

async fn open_http(
    config: &McpServerConfig,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    generation: u64,
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Session, McpError> {
    use reqwest::header::{HeaderName, HeaderValue};
    let server = config.name.as_str();
    let invalid = |message: String| McpError::InvalidConfig { server: server.to_owned(), message };
    let mut secrets = Vec::new();
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid(format!("`{name}` is not an HTTP header name")))?;
        let filled = fill(server, value, lookup, &mut secrets)?;
        // The value is never quoted: it may be a token.
        let mut value = HeaderValue::from_str(&filled)
            .map_err(|_| invalid(format!("the value of header `{name}` is not a valid HTTP header value")))?;
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    // Redirects are not followed: they would carry the headers, tokens included, elsewhere.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| McpError::Connect { server: server.to_owned(), message: format!("no HTTP client: {e}") })?;
    let transport_config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .custom_headers(custom)
        .reinit_on_expired_session(true);
    let transport = StreamableHttpClientTransport::with_client(client, transport_config);
    let service = match tokio::time::timeout(handshake_timeout(config), serve_client(client_info(), transport)).await {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            return Err(McpError::Connect { server: server.to_owned(), message: redact(&error.to_string(), &secrets) });
        }
        Err(_) => return Err(McpError::ConnectTimeout { server: server.to_owned(), after: handshake_timeout(config) }),
    };
    Ok(Session { generation, kind: Kind::Http, service, lost: AtomicBool::new(false), child: None })
}

/// `text` with every secret replaced.
pub(crate) fn redact(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_owned(), |t, s| t.replace(s.as_str(), "<redacted>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_writing_stderr_without_a_newline_is_kept_to_one_cut_line() {
        let mut child = Command::new("sh")
            .args(["-c", "exec tr '\\0' a < /dev/zero >&2"])
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh starts");
        let tail = StderrTail::default();
        forward_stderr("endless".to_owned(), child.stderr.take().expect("piped"), tail.clone(), Vec::new());
        let seen = tokio::time::timeout(Duration::from_secs(10), async {
            while tail.text().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        let _ = child.kill().await;
        assert!(seen.is_ok(), "the line is kept before the server ends it");
        assert_eq!(tail.text(), "a".repeat(STDERR_LINE_CHARS));
    }
}
