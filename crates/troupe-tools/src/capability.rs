//! Capabilities: what an agent may read, write, run and reach, checked before a call runs.
//!
//! A [`CapabilitySet`] grants workspace path prefixes for reading and writing, the shell,
//! and network host patterns. An [`Authorizer`] decides each call from the tool's declared
//! [`Access`] list (never from its name) and the call's arguments; the default one,
//! [`CapabilityAuthorizer`], keeps a set per agent. [`ToolCatalog::invoke_authorized`]
//! checks before it runs the call and records every decision in an [`AuditLog`].
//!
//! Paths are compared component by component (`src` grants `src/lib.rs`, not `srcs/x`)
//! after `.` and `..` are applied; [`Authorizer::authorize_in`] also follows symbolic links
//! inside the workspace, so a link under a granted prefix that points elsewhere does not
//! carry the grant with it.

use crate::audit::{AuditEntry, AuditKind, AuditLog};
use crate::catalog::{ToolCatalog, ToolResultOutcome};
use crate::declaration::{Access, ToolDeclaration};
use crate::error::ToolError;
use crate::tool::ToolContext;
use crate::workspace::Workspace;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

/// What one agent is allowed to do. The default grants nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CapabilitySet {
    /// Workspace-relative prefixes the agent may read; `.` is the whole workspace, an
    /// empty list nothing.
    pub read: Vec<PathBuf>,
    /// Workspace-relative prefixes the agent may write; `.` is the whole workspace.
    pub write: Vec<PathBuf>,
    /// Whether the agent may run shell commands.
    pub shell: bool,
    /// Hosts the agent may contact: `api.github.com` exactly, `*.example.com` for any
    /// subdomain of `example.com` (not `example.com` itself), or `*` for any host.
    pub network: Vec<String>,
}

impl CapabilitySet {
    /// Nothing granted (the same as [`CapabilitySet::default`]).
    pub fn none() -> Self {
        CapabilitySet::default()
    }

    /// Read and write the whole workspace and run the shell; no network.
    pub fn workspace_all() -> Self {
        CapabilitySet { read: vec![".".into()], write: vec![".".into()], shell: true, network: Vec::new() }
    }

    /// Read the whole workspace; nothing else.
    pub fn readonly() -> Self {
        CapabilitySet { read: vec![".".into()], ..CapabilitySet::default() }
    }

    /// Also grants reading under `prefix`.
    pub fn allow_read(mut self, prefix: impl Into<PathBuf>) -> Self {
        self.read.push(prefix.into());
        self
    }

    /// Also grants writing under `prefix`.
    pub fn allow_write(mut self, prefix: impl Into<PathBuf>) -> Self {
        self.write.push(prefix.into());
        self
    }

    /// Also grants the shell.
    pub fn allow_shell(mut self) -> Self {
        self.shell = true;
        self
    }

    /// Also grants hosts matching `pattern` (see [`CapabilitySet::network`]).
    pub fn allow_network(mut self, pattern: impl Into<String>) -> Self {
        self.network.push(pattern.into());
        self
    }

    /// Whether a call of `tool` with `args` is within this set, judging paths lexically
    /// (symbolic links are not followed; see [`CapabilitySet::permits_in`]).
    pub fn permits(&self, tool: &ToolDeclaration, args: &Value) -> AuthorizationDecision {
        self.check(tool, args, None)
    }

    /// Whether a call of `tool` with `args` is within this set, resolving paths in
    /// `workspace` so symbolic links are judged by where they lead.
    pub fn permits_in(&self, tool: &ToolDeclaration, args: &Value, workspace: &Workspace) -> AuthorizationDecision {
        self.check(tool, args, Some(workspace))
    }

    /// Whether `host` (a name or an IP address) matches one of the network patterns.
    pub fn permits_host(&self, host: &str) -> bool {
        let host = normalize_host(host);
        self.network.iter().any(|pattern| host_matches(&normalize_host(pattern), &host))
    }

    fn check(&self, tool: &ToolDeclaration, args: &Value, workspace: Option<&Workspace>) -> AuthorizationDecision {
        let mut granted = Vec::new();
        for access in &tool.access {
            match self.check_one(access, args, workspace) {
                Ok(Some(reason)) => granted.push(reason),
                Ok(None) => {}
                Err(reason) => return AuthorizationDecision::Denied { reason },
            }
        }
        let reason = if granted.is_empty() {
            format!("`{}` declares no access that needs a capability", tool.name)
        } else {
            granted.join("; ")
        };
        AuthorizationDecision::Allowed { reason }
    }

    /// `Ok(Some(why))` for a granted access, `Ok(None)` for one that needs nothing.
    fn check_one(
        &self,
        access: &Access,
        args: &Value,
        workspace: Option<&Workspace>,
    ) -> Result<Option<String>, String> {
        match access {
            Access::None => Ok(None),
            Access::Shell if self.shell => Ok(Some("the shell is granted".to_owned())),
            Access::Shell => Err("this agent may not run shell commands".to_owned()),
            Access::ReadPath(field) => check_path("read", &self.read, field, args, workspace).map(Some),
            Access::WritePath(field) => check_path("write", &self.write, field, args, workspace).map(Some),
            Access::Network(field) => {
                let url = match args.get(field) {
                    Some(Value::String(url)) => url,
                    _ => return Err(format!("the argument `{field}` must be a URL string to check network access")),
                };
                let host = url_host(url).ok_or_else(|| format!("`{url}` is not a URL with a host"))?;
                self.check_host(&host)
            }
            Access::NetworkHost(host) => self.check_host(host),
        }
    }

    fn check_host(&self, host: &str) -> Result<Option<String>, String> {
        if self.permits_host(host) {
            Ok(Some(format!("network access to `{host}` is granted")))
        } else if self.network.is_empty() {
            Err(format!("this agent may not contact `{host}` (no network access is granted)"))
        } else {
            Err(format!("this agent may not contact `{host}` (it may contact: {})", quoted_list(&self.network)))
        }
    }
}

/// Checks the path in argument `field` against `prefixes`; `verb` is "read" or "write".
fn check_path(
    verb: &str,
    prefixes: &[PathBuf],
    field: &str,
    args: &Value,
    workspace: Option<&Workspace>,
) -> Result<String, String> {
    let given = match args.get(field) {
        None | Some(Value::Null) => ".",
        Some(Value::String(path)) => path.as_str(),
        Some(_) => return Err(format!("the argument `{field}` must be a path string to check {verb} access")),
    };
    let path = match workspace {
        Some(ws) => ws.resolve(given).ok().and_then(|abs| abs.strip_prefix(ws.root()).ok().and_then(lexical)),
        None => lexical(Path::new(given)),
    };
    let Some(path) = path else {
        return Err(format!("`{given}` leads outside the workspace, which no capability grants"));
    };
    let prefix_parts = |prefix: &PathBuf| match workspace {
        Some(ws) => ws.resolve(prefix).ok().and_then(|abs| abs.strip_prefix(ws.root()).ok().and_then(lexical)),
        None => lexical(prefix),
    };
    for prefix in prefixes {
        if prefix_parts(prefix).is_some_and(|parts| path.starts_with(&parts)) {
            return Ok(format!("{verb} of `{given}` is within the granted `{}`", prefix.display()));
        }
    }
    let granted: Vec<String> = prefixes.iter().map(|p| p.display().to_string()).collect();
    if granted.is_empty() {
        Err(format!("this agent may not {verb} `{given}` (no {verb} access is granted)"))
    } else {
        Err(format!("this agent may not {verb} `{given}` (it may {verb} under: {})", quoted_list(&granted)))
    }
}

/// A relative path's components with `.` and `..` applied; `None` if it is absolute or
/// climbs above its start.
fn lexical(path: &Path) -> Option<Vec<OsString>> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => return None,
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(name) => parts.push(name.to_owned()),
        }
    }
    Some(parts)
}

/// The host of `url`, lower-case, without brackets around an IPv6 address.
fn url_host(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    parsed.host_str().filter(|host| !host.is_empty()).map(normalize_host)
}

fn normalize_host(host: &str) -> String {
    let host = host.trim().trim_end_matches('.');
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.to_ascii_lowercase()
}

fn host_matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            host.len() > domain.len() + 1 && host.ends_with(domain) && {
                let dot = host.len() - domain.len() - 1;
                host.as_bytes()[dot] == b'.'
            }
        }
        None => !pattern.is_empty() && pattern == host,
    }
}

fn quoted_list(items: &[String]) -> String {
    items.iter().map(|item| format!("`{item}`")).collect::<Vec<_>>().join(", ")
}

/// Whether a call may run, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorizationDecision {
    /// The call is within the agent's capabilities.
    Allowed {
        /// Which grants cover it.
        reason: String,
    },
    /// The call needs something the agent was not granted.
    Denied {
        /// What was missing, worded for the model.
        reason: String,
    },
}

impl AuthorizationDecision {
    /// Whether the call may run.
    pub fn is_allowed(&self) -> bool {
        matches!(self, AuthorizationDecision::Allowed { .. })
    }

    /// Why the decision was made.
    pub fn reason(&self) -> &str {
        match self {
            AuthorizationDecision::Allowed { reason } | AuthorizationDecision::Denied { reason } => reason,
        }
    }
}

/// Decides whether an agent's call may run, before it runs.
pub trait Authorizer: Send + Sync {
    /// The decision for `agent` calling `tool` with `args`, from the declaration's
    /// [`Access`] list and the arguments alone.
    fn authorize(&self, agent: &str, tool: &ToolDeclaration, args: &Value) -> AuthorizationDecision;

    /// The decision for a call that will run in `workspace`; an authorizer that judges
    /// paths overrides it to resolve them there (following symbolic links). By default,
    /// [`Authorizer::authorize`].
    fn authorize_in(
        &self,
        agent: &str,
        tool: &ToolDeclaration,
        args: &Value,
        workspace: &Workspace,
    ) -> AuthorizationDecision {
        let _ = workspace;
        self.authorize(agent, tool, args)
    }
}

/// The default [`Authorizer`]: a [`CapabilitySet`] per agent name, and one for every
/// other agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CapabilityAuthorizer {
    /// The capabilities of named agents.
    pub grants: HashMap<String, CapabilitySet>,
    /// The capabilities of agents not in `grants`.
    pub default: CapabilitySet,
}

impl CapabilityAuthorizer {
    /// An authorizer giving every agent `default`.
    pub fn new(default: CapabilitySet) -> Self {
        CapabilityAuthorizer { grants: HashMap::new(), default }
    }

    /// Gives `agent` the capabilities `set` (replacing what it had).
    pub fn grant(mut self, agent: impl Into<String>, set: CapabilitySet) -> Self {
        self.grants.insert(agent.into(), set);
        self
    }

    /// The capabilities `agent` has.
    pub fn capabilities_of(&self, agent: &str) -> &CapabilitySet {
        self.grants.get(agent).unwrap_or(&self.default)
    }
}

impl Authorizer for CapabilityAuthorizer {
    fn authorize(&self, agent: &str, tool: &ToolDeclaration, args: &Value) -> AuthorizationDecision {
        self.capabilities_of(agent).permits(tool, args)
    }

    fn authorize_in(
        &self,
        agent: &str,
        tool: &ToolDeclaration,
        args: &Value,
        workspace: &Workspace,
    ) -> AuthorizationDecision {
        self.capabilities_of(agent).permits_in(tool, args, workspace)
    }
}

impl ToolCatalog {
    /// Runs one call of `agent` like [`ToolCatalog::invoke`], after `authorizer` allowed
    /// it: a denied call does not run and comes back as an error outcome
    /// ("denied by capability policy: …", [`ToolError::Denied`]) the model can read.
    /// Every decision is recorded in `audit` (kind [`AuditKind::CapabilityCheck`], with a
    /// digest of the arguments, never the arguments). A call of an unknown tool is not a
    /// decision: it fails as in [`ToolCatalog::invoke`] and is not recorded.
    pub async fn invoke_authorized(
        &self,
        agent: &str,
        authorizer: &dyn Authorizer,
        audit: &dyn AuditLog,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> ToolResultOutcome {
        let Some(tool) = self.get(name) else {
            return self.invoke(name, args, ctx).await;
        };
        let started = Instant::now();
        let decision = authorizer.authorize_in(agent, tool.declaration(), &args, &ctx.workspace);
        let entry = AuditEntry::new(AuditKind::CapabilityCheck, agent, decision.is_allowed(), decision.reason())
            .with_tool(name)
            .with_call_id(ctx.call_id.as_str())
            .with_arguments(&args);
        audit.record(entry);
        match decision {
            AuthorizationDecision::Allowed { .. } => self.invoke(name, args, ctx).await,
            AuthorizationDecision::Denied { reason } => {
                let content = format!(
                    "denied by capability policy: {reason}. Do not repeat the call; do what this agent is \
                     allowed to, or ask the user."
                );
                let mut outcome = ToolResultOutcome::failure(
                    ToolError::Denied { reason: format!("capability policy: {reason}") },
                    started.elapsed(),
                );
                outcome.content = content;
                outcome
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns_match_exactly_by_subdomain_or_all() {
        assert!(host_matches("api.github.com", "api.github.com"));
        assert!(!host_matches("api.github.com", "github.com"));
        assert!(host_matches("example.com", "example.com"));
        assert!(host_matches("*.example.com", "a.example.com"));
        assert!(host_matches("*.example.com", "a.b.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "badexample.com"));
        assert!(host_matches("*", "anything.org"));
        let set = CapabilitySet::none().allow_network("API.GitHub.com.").allow_network("[::1]");
        assert!(set.permits_host("api.github.com"));
        assert!(set.permits_host("::1"));
    }

    #[test]
    fn url_hosts_are_normalized() {
        assert_eq!(url_host("https://API.Example.com:8443/x?y").as_deref(), Some("api.example.com"));
        assert_eq!(url_host("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(url_host("http://127.0.0.1/").as_deref(), Some("127.0.0.1"));
        assert_eq!(url_host("file:///etc/passwd"), None);
        assert_eq!(url_host("not a url"), None);
    }

    #[test]
    fn lexical_paths_apply_dots_and_refuse_escapes() {
        assert_eq!(lexical(Path::new("a/./b/../c")), Some(vec!["a".into(), "c".into()]));
        assert_eq!(lexical(Path::new(".")), Some(vec![]));
        assert_eq!(lexical(Path::new("../x")), None);
        assert_eq!(lexical(Path::new("/etc")), None);
    }
}
