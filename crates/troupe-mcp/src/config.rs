//! [`McpServerConfig`]: one MCP server an agent may use, as written in `[[mcp.servers]]`.
//!
//! ```toml
//! [[mcp.servers]]
//! name = "github"                   # letters, digits, - and _; tools are `github/<tool>`
//! command = "npx"                   # stdio: the server is a child process
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }   # the child gets PATH, HOME and these only
//! tools = "eager"                   # eager (default) | lazy
//! timeout_seconds = 60              # per call (default 60); connecting gets at least 30
//! allow = ["create_issue", "get_issue"]        # optional: only these tools
//! deny = ["delete_repository"]      # optional: never these
//! trust_annotations = false         # default: the server's hints cannot lift approval
//! # the process is confined (default: workspace-write, network on; reads the system, the
//! # workspace and what its command line names); npx's cache must be granted:
//! sandbox = { write = ["/home/me/.npm"] }     # or mode = "full" to opt out
//!
//! [[mcp.servers]]
//! name = "search"
//! url = "https://mcp.example.com/mcp"          # streamable HTTP
//! headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
//! ```
//!
//! The transport follows from `command` (stdio) or `url` (streamable HTTP); `transport =
//! "stdio"` or `"http"` may say it explicitly. Values of `env` and `headers` may refer to
//! the environment as `${NAME}` (`$$` is a literal `$`); references are filled in when the
//! server is connected and never logged. Every table refuses keys it does not know.

use crate::template;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use troupe_sandbox::{Sandbox, SandboxSettings};

/// The default per-call timeout, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 60;
/// The longest server name.
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// What [`McpServerConfig::redacted`] shows in place of a value.
const REDACTED: &str = "<redacted>";

/// Headers a configuration may not set: the transport owns them.
const RESERVED_HEADERS: [&str; 4] = ["accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// How an agent is offered a server's tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolLoading {
    /// One catalog tool per MCP tool (`server/tool`), each with its own schema.
    #[default]
    Eager,
    /// The server's tools are reached through `mcp_search_tools` and `mcp_call_tool`, so
    /// a large tool list does not fill the model's context.
    Lazy,
}

/// How troupe talks to a server.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// The server is a child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// The child's environment beyond `PATH` and `HOME` (the only variables inherited);
        /// values may hold `${NAME}` references.
        env: BTreeMap<String, String>,
    },
    /// The server is reached over streamable HTTP.
    Http {
        /// The endpoint (`https://host/mcp`).
        url: String,
        /// Headers sent with every request; values may hold `${NAME}` references.
        headers: BTreeMap<String, String>,
    },
}

impl fmt::Debug for McpTransport {
    // Values may be written out literally instead of as `${NAME}`: never shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpTransport::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
            McpTransport::Http { url, headers } => {
                f.debug_struct("Http").field("url", url).field("headers", &headers.keys().collect::<Vec<_>>()).finish()
            }
        }
    }
}

/// One MCP server an agent may use: how to reach it and which of its tools it offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ServerEntry", into = "ServerEntry")]
pub struct McpServerConfig {
    /// The server's name: the `server` of its tools' catalog names `server/tool`.
    pub name: String,
    /// How it is reached.
    pub transport: McpTransport,
    /// Eager (a catalog tool per MCP tool) or lazy (search and call).
    pub tools: ToolLoading,
    /// The longest one call may take before it is abandoned (connecting and listing the
    /// tools get this too, but at least 30 s: starting a server can be slow).
    pub timeout: Duration,
    /// Only these MCP tools (by the server's names); `None` for all.
    pub allow: Option<Vec<String>>,
    /// Never these MCP tools, whatever `allow` says.
    pub deny: Vec<String>,
    /// Whether the server's `readOnlyHint` and `idempotentHint` may make its tools read-only
    /// (no approval) and idempotent (retried on resume). Off by default: the MCP
    /// specification tells clients to treat annotations of untrusted servers as untrusted.
    pub trust_annotations: bool,
    /// How a stdio server is confined (`[mcp.servers.sandbox]`, the `[sandbox]` table's
    /// keys): by default `workspace-write` with the network on, reading the system's
    /// directories, the workspace and the files its command line names (see
    /// [`McpServerConfig::stdio_sandbox`]).
    pub sandbox: SandboxSettings,
    /// The workspace a stdio server is confined to; the current directory when `None`.
    /// Set by whoever connects it for an agent ([`McpServerConfig::in_workspace`]), never
    /// read from a file.
    pub workspace: Option<PathBuf>,
}

impl McpServerConfig {
    /// A stdio server: `command` with `args`, no extra environment, defaults otherwise.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self::with_transport(name, McpTransport::Stdio { command: command.into(), args, env: BTreeMap::new() })
    }

    /// A streamable HTTP server at `url`, no headers, defaults otherwise.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::with_transport(name, McpTransport::Http { url: url.into(), headers: BTreeMap::new() })
    }

    fn with_transport(name: impl Into<String>, transport: McpTransport) -> Self {
        McpServerConfig {
            name: name.into(),
            transport,
            tools: ToolLoading::Eager,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
            allow: None,
            deny: Vec::new(),
            trust_annotations: false,
            sandbox: SandboxSettings::default(),
            workspace: None,
        }
    }

    /// Sets a variable of a stdio server's environment (`value` may hold `${NAME}`); no
    /// effect on an HTTP server.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.insert(name.into(), value.into());
        }
        self
    }

    /// Sets a header of an HTTP server (`value` may hold `${NAME}`); no effect on a stdio
    /// server.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } = &mut self.transport {
            headers.insert(name.into(), value.into());
        }
        self
    }

    /// Offers the tools eagerly or lazily.
    pub fn loading(mut self, tools: ToolLoading) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the per-call timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Offers only the named MCP tools.
    pub fn allow<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.allow = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Never offers the named MCP tools.
    pub fn deny<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.deny = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Confines a stdio server as `settings` say, over the defaults.
    pub fn sandbox(mut self, settings: SandboxSettings) -> Self {
        self.sandbox = settings;
        self
    }

    /// Confines a stdio server to `workspace` (it may write there in `workspace-write`).
    pub fn in_workspace(mut self, workspace: impl Into<PathBuf>) -> Self {
        self.workspace = Some(workspace.into());
        self
    }

    /// The sandbox a stdio server started as `command` with `args` runs in, confined to
    /// `workspace`: the mode of [`McpServerConfig::sandbox`] (`workspace-write` by
    /// default), the network unless it says `network = false`, its `read` and `write`
    /// paths, and, to read, the directories its command line names: the program's, each
    /// absolute path among the arguments (a file's directory), and the `node_modules` or
    /// Python environment such a path lies in (where a server's packages are).
    pub fn stdio_sandbox(&self, command: &str, args: &[String], workspace: &Path) -> Sandbox {
        let settings = self.sandbox.over(&SandboxSettings { network: Some(true), ..SandboxSettings::default() });
        let mut sandbox = settings.sandbox(workspace);
        let program = resolve_program(command);
        let named = program.into_iter().chain(args.iter().map(PathBuf::from).filter(|p| p.is_absolute()));
        for path in named.filter(|p| p.exists()) {
            let dir = if path.is_dir() {
                path.clone()
            } else {
                path.parent().map_or_else(|| path.clone(), Path::to_path_buf)
            };
            for package in package_roots(&dir) {
                sandbox = sandbox.allow_read(package);
            }
            sandbox = sandbox.allow_read(dir);
        }
        sandbox
    }

    /// Trusts (or not) the server's read-only and idempotency hints.
    pub fn trust_annotations(mut self, trust: bool) -> Self {
        self.trust_annotations = trust;
        self
    }

    /// The configuration as it may be shown to a person: `env` and `headers` values without
    /// a `${NAME}` reference are replaced by `<redacted>`, since a secret may be written out
    /// in them (values with a reference show the reference, never what it is filled with).
    pub fn redacted(&self) -> McpServerConfig {
        let hide = |values: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            values
                .iter()
                .map(|(k, v)| {
                    let shown = if template::variables(v).is_empty() { REDACTED.to_owned() } else { v.clone() };
                    (k.clone(), shown)
                })
                .collect()
        };
        let transport = match &self.transport {
            McpTransport::Stdio { command, args, env } => {
                McpTransport::Stdio { command: command.clone(), args: args.clone(), env: hide(env) }
            }
            McpTransport::Http { url, headers } => McpTransport::Http { url: url.clone(), headers: hide(headers) },
        };
        McpServerConfig { transport, ..self.clone() }
    }

    /// Whether the MCP tool `tool` passes the `allow` and `deny` lists.
    pub fn offers(&self, tool: &str) -> bool {
        !self.deny.iter().any(|d| d == tool) && self.allow.as_ref().is_none_or(|allow| allow.iter().any(|a| a == tool))
    }

    /// Checks what deserializing checks, for a configuration built in code: the name, the
    /// command or URL, header names and `${NAME}` references, the timeout.
    pub fn validate(&self) -> Result<(), String> {
        check_server_name(&self.name)?;
        if self.timeout.is_zero() {
            return Err(format!("server `{}`: a timeout of 0 would fail every call", self.name));
        }
        let within = |e: String| format!("server `{}`: {e}", self.name);
        match &self.transport {
            McpTransport::Stdio { command, env, .. } => {
                if command.trim().is_empty() {
                    return Err(within("`command` is empty".to_owned()));
                }
                for (name, value) in env {
                    check_variable_name(name).map_err(within)?;
                    template::check(value).map_err(|e| within(format!("env `{name}`: {e}")))?;
                }
            }
            McpTransport::Http { url, headers } => {
                check_url(url).map_err(within)?;
                for (name, value) in headers {
                    check_header_name(name).map_err(within)?;
                    template::check(value).map_err(|e| within(format!("header `{name}`: {e}")))?;
                }
            }
        }
        Ok(())
    }
}

/// Where `command` is: itself when it names a path, else the first match on `PATH`.
fn resolve_program(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        return std::path::absolute(command).ok();
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|dir| dir.join(command)).find(|p| p.is_file())
}

/// The package directories `dir` lies in: the nearest `node_modules` above it (npm puts a
/// package's dependencies beside it there) and a Python environment (the directory with
/// `pyvenv.cfg`).
fn package_roots(dir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(modules) = dir.ancestors().find(|a| a.file_name().is_some_and(|n| n == "node_modules")) {
        roots.push(modules.to_path_buf());
    }
    if let Some(venv) = dir.ancestors().find(|a| a.join("pyvenv.cfg").is_file()) {
        roots.push(venv.to_path_buf());
    }
    roots
}

/// `[mcp]`: the servers of an agent file or of `troupe.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// `[[mcp.servers]]`, in the file's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<McpServerConfig>,
}

impl McpSection {
    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The name of the first server configured twice, with the index of its second entry.
    pub fn duplicate(&self) -> Option<(&str, usize)> {
        self.servers.iter().enumerate().find_map(|(n, server)| {
            self.servers[..n].iter().any(|s| s.name == server.name).then_some((server.name.as_str(), n))
        })
    }

    /// These servers, with `overrides` replacing the ones of the same name and the other
    /// `overrides` added after them (an agent file's servers over `troupe.toml`'s).
    pub fn merged(&self, overrides: &McpSection) -> McpSection {
        let mut servers: Vec<McpServerConfig> = self
            .servers
            .iter()
            .map(|s| overrides.servers.iter().find(|o| o.name == s.name).unwrap_or(s).clone())
            .collect();
        servers.extend(overrides.servers.iter().filter(|o| !self.servers.iter().any(|s| s.name == o.name)).cloned());
        McpSection { servers }
    }
}

/// `[[mcp.servers]]` as written; checked and turned into an [`McpServerConfig`].
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEntry {
    #[serde(deserialize_with = "server_name")]
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transport: Option<TransportKind>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_command")]
    command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "environment")]
    env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_url")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "header_map")]
    headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "is_eager")]
    tools: ToolLoading,
    #[serde(default = "default_timeout", deserialize_with = "timeout_seconds")]
    timeout_seconds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_tool_names")]
    allow: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "tool_names")]
    deny: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    trust_annotations: bool,
    #[serde(default, skip_serializing_if = "SandboxSettings::is_empty")]
    sandbox: SandboxSettings,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TransportKind {
    Stdio,
    Http,
}

fn is_eager(loading: &ToolLoading) -> bool {
    *loading == ToolLoading::Eager
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

impl TryFrom<ServerEntry> for McpServerConfig {
    type Error = String;

    fn try_from(entry: ServerEntry) -> Result<Self, String> {
        let name = entry.name;
        let kind = match (entry.transport, &entry.command, &entry.url) {
            (_, Some(_), Some(_)) => {
                return Err(format!("server `{name}` has both `command` (stdio) and `url` (http); keep one"));
            }
            (Some(TransportKind::Http), Some(_), None) => {
                return Err(format!("server `{name}` says transport = \"http\" but gives a `command`; give its `url`"));
            }
            (Some(TransportKind::Stdio), None, Some(_)) => {
                return Err(format!(
                    "server `{name}` says transport = \"stdio\" but gives a `url`; give its `command`"
                ));
            }
            (_, Some(_), None) => TransportKind::Stdio,
            (_, None, Some(_)) => TransportKind::Http,
            (_, None, None) => {
                return Err(format!(
                    "server `{name}` has neither `command` (a stdio server) nor `url` (a streamable HTTP server)"
                ));
            }
        };
        let transport = match kind {
            TransportKind::Stdio => {
                if !entry.headers.is_empty() {
                    return Err(format!("server `{name}`: `headers` are for HTTP servers; a stdio server takes `env`"));
                }
                McpTransport::Stdio { command: entry.command.unwrap_or_default(), args: entry.args, env: entry.env }
            }
            TransportKind::Http => {
                if !entry.sandbox.is_empty() {
                    return Err(format!(
                        "server `{name}`: `sandbox` confines a stdio server's process; an HTTP server has none"
                    ));
                }
                if !entry.args.is_empty() || !entry.env.is_empty() {
                    return Err(format!(
                        "server `{name}`: `args` and `env` are for stdio servers; an HTTP server takes `headers`"
                    ));
                }
                McpTransport::Http { url: entry.url.unwrap_or_default(), headers: entry.headers }
            }
        };
        Ok(McpServerConfig {
            name,
            transport,
            tools: entry.tools,
            timeout: Duration::from_secs(entry.timeout_seconds),
            allow: entry.allow,
            deny: entry.deny,
            trust_annotations: entry.trust_annotations,
            sandbox: entry.sandbox,
            workspace: None,
        })
    }
}

impl From<McpServerConfig> for ServerEntry {
    fn from(config: McpServerConfig) -> Self {
        let (command, args, env, url, headers) = match config.transport {
            McpTransport::Stdio { command, args, env } => (Some(command), args, env, None, BTreeMap::new()),
            McpTransport::Http { url, headers } => (None, Vec::new(), BTreeMap::new(), Some(url), headers),
        };
        ServerEntry {
            name: config.name,
            transport: None,
            command,
            args,
            env,
            url,
            headers,
            tools: config.tools,
            // Whole seconds are what the file can say; a shorter timeout set in code rounds up.
            timeout_seconds: config.timeout.as_secs_f64().ceil().max(1.0) as u64,
            allow: config.allow,
            deny: config.deny,
            trust_annotations: config.trust_annotations,
            sandbox: config.sandbox,
        }
    }
}

/// Checks a server name: it becomes the first part of catalog names (`server/tool`) and of
/// the wire names providers see, so it is kept to ASCII letters, digits, `-` and `_`.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_SERVER_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a server name; use 1 to {MAX_SERVER_NAME_LEN} ASCII letters, digits, `-` or `_`, starting with a letter or digit"
        ))
    }
}

fn check_variable_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!("`{name}` cannot name an environment variable"));
    }
    Ok(())
}

fn check_url(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        _ => Err(format!("`{url}` is not an http:// or https:// URL of an MCP endpoint")),
    }
}

fn check_header_name(name: &str) -> Result<(), String> {
    // RFC 9110 token characters.
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!("`{name}` is not an HTTP header name"));
    }
    if RESERVED_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(format!("the header `{name}` is set by the MCP transport itself and cannot be configured"));
    }
    Ok(())
}

fn server_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    check_server_name(&name).map_err(D::Error::custom)?;
    Ok(name)
}

fn some_command<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let command = String::deserialize(d)?;
    if command.trim().is_empty() {
        return Err(D::Error::custom("must not be empty"));
    }
    Ok(Some(command))
}

fn some_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let url = String::deserialize(d)?;
    check_url(&url).map_err(D::Error::custom)?;
    Ok(Some(url))
}

fn timeout_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 seconds would time out every call; use 1 or more"));
    }
    Ok(n)
}

fn tool_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    if let Some(empty) = names.iter().find(|n| n.trim().is_empty()) {
        return Err(D::Error::custom(format!("`{empty}` is not a tool name")));
    }
    Ok(names)
}

fn some_tool_names<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    tool_names(d).map(Some)
}

/// A value whose `${NAME}` references are checked as it is read, so an error points at it.
struct Templated(String);

impl<'de> Deserialize<'de> for Templated {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        template::check(&text).map_err(D::Error::custom)?;
        Ok(Templated(text))
    }
}

/// A map key checked as it is read.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Checked<const HEADER: bool>(String);

impl<'de, const HEADER: bool> Deserialize<'de> for Checked<HEADER> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        let checked = if HEADER { check_header_name(&name) } else { check_variable_name(&name) };
        checked.map_err(D::Error::custom)?;
        Ok(Checked(name))
    }
}

fn environment<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(BTreeMap::<Checked<false>, Templated>::deserialize(d)?.into_iter().map(|(k, v)| (k.0, v.0)).collect())
}

fn header_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(BTreeMap::<Checked<true>, Templated>::deserialize(d)?.into_iter().map(|(k, v)| (k.0, v.0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        mcp: McpSection,
    }

    fn parse(text: &str) -> Result<McpSection, String> {
        toml::from_str::<Doc>(text).map(|d| d.mcp).map_err(|e| e.message().to_owned())
    }

    #[test]
    fn stdio_and_http_servers_are_told_apart_by_command_and_url() {
        let section = parse(
            "[[mcp.servers]]\nname = \"everything\"\ncommand = \"node\"\nargs = [\"index.js\"]\n\
             env = { TOKEN = \"${TOKEN}\" }\ntools = \"lazy\"\ntimeout_seconds = 5\nallow = [\"echo\"]\n\
             [[mcp.servers]]\nname = \"remote\"\nurl = \"http://127.0.0.1:3001/mcp\"\n\
             headers = { Authorization = \"Bearer ${TOKEN}\" }\ndeny = [\"get-env\"]\ntrust_annotations = true\n",
        )
        .expect("valid");
        let [stdio, http] = &section.servers[..] else { panic!("two servers") };
        assert_eq!(stdio.tools, ToolLoading::Lazy);
        assert_eq!(stdio.timeout, Duration::from_secs(5));
        assert!(stdio.offers("echo") && !stdio.offers("get-sum"));
        let McpTransport::Stdio { command, args, env } = &stdio.transport else { panic!("stdio") };
        assert_eq!((command.as_str(), args.as_slice()), ("node", &["index.js".to_owned()][..]));
        assert_eq!(env["TOKEN"], "${TOKEN}", "references are kept, not filled in");
        assert_eq!(http.timeout, Duration::from_secs(DEFAULT_TIMEOUT_SECONDS));
        assert!(http.trust_annotations && http.offers("echo") && !http.offers("get-env"));
        assert!(matches!(&http.transport, McpTransport::Http { url, .. } if url.ends_with("/mcp")));
        assert!(!format!("{http:?}").contains("Bearer"), "header values are not shown: {http:?}");
        let literal = http.clone().header("X-Key", "sk-written-out");
        let McpTransport::Http { headers, .. } = literal.redacted().transport else { panic!("http") };
        assert_eq!(headers["X-Key"], "<redacted>");
        assert_eq!(headers["Authorization"], "Bearer ${TOKEN}", "a reference is no secret");
    }

    #[test]
    fn mistakes_are_refused_with_what_to_do() {
        let cases = [
            ("name = \"a\"\ncommand = \"x\"\nurl = \"http://h/mcp\"", "keep one"),
            ("name = \"a\"", "neither `command`"),
            ("name = \"a b\"\ncommand = \"x\"", "not a server name"),
            ("name = \"a/b\"\ncommand = \"x\"", "not a server name"),
            ("name = \"a\"\ncommand = \"\"", "must not be empty"),
            ("name = \"a\"\nurl = \"ftp://h\"", "not an http:// or https:// URL"),
            ("name = \"a\"\ncommand = \"x\"\ntimeout_seconds = 0", "0 seconds"),
            ("name = \"a\"\ncommand = \"x\"\nheaders = { X = \"1\" }", "`headers` are for HTTP servers"),
            ("name = \"a\"\nurl = \"http://h/mcp\"\nenv = { X = \"1\" }", "are for stdio servers"),
            ("name = \"a\"\nurl = \"http://h/mcp\"\nheaders = { Accept = \"x\" }", "set by the MCP transport"),
            ("name = \"a\"\nurl = \"http://h/mcp\"\nheaders = { X = \"${OOPS\" }", "never closed"),
            ("name = \"a\"\ncommand = \"x\"\ntransport = \"http\"", "gives a `command`"),
            ("name = \"a\"\ncommand = \"x\"\ntools = \"sometimes\"", "unknown variant"),
            ("name = \"a\"\ncommand = \"x\"\ncomand = \"y\"", "unknown field `comand`"),
            ("name = \"a\"\nurl = \"http://h/mcp\"\nsandbox = { mode = \"full\" }", "an HTTP server has none"),
            ("name = \"a\"\ncommand = \"x\"\nsandbox = { mode = \"jail\" }", "unknown variant"),
        ];
        for (entry, expected) in cases {
            let error = parse(&format!("[[mcp.servers]]\n{entry}\n")).expect_err(entry);
            assert!(error.contains(expected), "{entry:?}: {error}");
        }
        assert!(parse("[mcp]\nserver = []\n").expect_err("typo").contains("unknown field `server`"));
    }

    #[test]
    fn configurations_round_trip_through_toml() {
        #[derive(Serialize)]
        struct Out<'a> {
            mcp: &'a McpSection,
        }
        let section = McpSection {
            servers: vec![
                McpServerConfig::stdio("local", "node", vec!["s.js".into()]).env("A", "${A}").allow(["echo"]).sandbox(
                    SandboxSettings { network: Some(false), write: vec!["/srv/cache".into()], ..Default::default() },
                ),
                McpServerConfig::http("remote", "https://h/mcp").header("X-Key", "${KEY}").loading(ToolLoading::Lazy),
            ],
        };
        let text = toml::to_string(&Out { mcp: &section }).expect("serializes");
        assert_eq!(parse(&text).expect("parses back"), section, "{text}");
        assert!(section.servers.iter().all(|s| s.validate().is_ok()));
    }

    #[test]
    fn a_stdio_server_reads_what_its_command_line_names_and_has_the_network_unless_refused() {
        let dir = std::env::temp_dir().join(format!("troupe-mcp-sandbox-{}", std::process::id()));
        let script = dir.join("node_modules/@scope/server/dist/index.js");
        std::fs::create_dir_all(script.parent().expect("a parent")).expect("creates");
        std::fs::write(&script, "").expect("writes");
        let args = vec![script.display().to_string(), "stdio".into(), "relative/path".into()];
        let config = McpServerConfig::stdio("s", "sh", args.clone());
        let sandbox = config.stdio_sandbox("sh", &args, Path::new("/work"));
        let read = sandbox.readable();
        assert!(read.contains(&dir.join("node_modules")), "the packages beside the script: {read:?}");
        assert!(read.contains(&script.parent().expect("dist").to_path_buf()), "{read:?}");
        assert!(!read.iter().any(|p| p.ends_with("relative/path")), "only absolute paths: {read:?}");
        assert_eq!(sandbox.mode(), troupe_sandbox::SandboxMode::WorkspaceWrite);
        assert!(sandbox.network(), "an MCP server is usually a client of something");
        let offline = config.sandbox(SandboxSettings { network: Some(false), ..Default::default() });
        assert!(!offline.stdio_sandbox("sh", &args, Path::new("/work")).network());
        std::fs::remove_dir_all(&dir).expect("cleans up");
    }

    #[test]
    fn duplicates_and_merging() {
        let a = McpServerConfig::stdio("a", "x", vec![]);
        let b = McpServerConfig::stdio("b", "y", vec![]);
        let section = McpSection { servers: vec![a.clone(), b.clone(), a.clone()] };
        assert_eq!(section.duplicate(), Some(("a", 2)));
        let workspace = McpSection { servers: vec![a.clone(), b] };
        let replaced = McpServerConfig::stdio("a", "z", vec![]);
        let agent = McpSection { servers: vec![replaced.clone(), McpServerConfig::stdio("c", "w", vec![])] };
        let merged = workspace.merged(&agent);
        let names: Vec<&str> = merged.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(merged.servers[0], replaced, "the agent's entry wins");
    }
}
