//! The tables of an agent file other than `[[tools]]`.
//!
//! Values that can be checked on their own (ranges, names, placeholders, whether an
//! execution mode exists here) are checked while deserializing, so toml points the error
//! at the value.

use super::names::check_agent_id;
use super::placeholders;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
pub use troupe_model::ApiKey;

/// `[agent]`: who the agent is and how it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// The agent's id: unique among the discovered agents; its name in specs and events.
    #[serde(deserialize_with = "agent_id")]
    pub id: String,
    /// A name for people.
    #[serde(deserialize_with = "not_empty")]
    pub name: String,
    /// The definition's version, free-form (`1.2.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What the agent is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `[agent.execution]`: how the worker process is started.
    #[serde(default)]
    pub execution: Execution,
}

/// How an agent's worker runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    /// A child process speaking the worker protocol over stdio.
    #[default]
    Subprocess,
    /// A WebAssembly module. Not available in this build.
    Wasm,
    /// A container. Not available in this build.
    Docker,
}

impl ExecutionMode {
    /// Whether this build can run workers this way; `Err` says why not and what to use.
    pub fn availability(self) -> Result<(), String> {
        match self {
            ExecutionMode::Subprocess => Ok(()),
            ExecutionMode::Wasm => Err("wasm execution is not available on this host (troupe was built without a \
                 WebAssembly runtime); use mode = \"subprocess\""
                .to_owned()),
            ExecutionMode::Docker => Err("docker execution is not available on this host (troupe does not \
                 implement container workers); use mode = \"subprocess\""
                .to_owned()),
        }
    }
}

/// The default worker arguments: the running `troupe` as a worker for this file.
pub fn default_args() -> Vec<String> {
    ["agent", "run", "--worker", "--agent-file", "{agent_file}"].map(str::to_owned).to_vec()
}

/// `[agent.execution]`: the worker's command line, directory and environment. Strings may
/// use the [`PLACEHOLDERS`](super::PLACEHOLDERS).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// How the worker runs (only `subprocess` is available).
    #[serde(default, deserialize_with = "available_mode")]
    pub mode: ExecutionMode,
    /// The program; `None` for the running `troupe` binary (`std::env::current_exe()`,
    /// resolved by whoever starts the worker).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_templated")]
    pub command: Option<String>,
    /// The arguments (default [`default_args`]).
    #[serde(default = "default_args", deserialize_with = "templated_list")]
    pub args: Vec<String>,
    /// The worker's directory; relative to the workspace; default the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_templated")]
    pub working_dir: Option<String>,
    /// `[agent.execution.env]`: variables set for the worker, on top of the inherited ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "environment")]
    pub env: BTreeMap<String, String>,
}

impl Default for Execution {
    fn default() -> Self {
        Execution {
            mode: ExecutionMode::Subprocess,
            command: None,
            args: default_args(),
            working_dir: None,
            env: BTreeMap::new(),
        }
    }
}

/// `[provider]`: the model the agent uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// The provider (`anthropic`, `openai`, a `troupe.toml` one); `None` when `model` is a
    /// whole `provider/model` id or `demo`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "provider_name")]
    pub name: Option<String>,
    /// The model: its name at the provider, a `provider/model` id, or `demo`.
    #[serde(deserialize_with = "not_empty")]
    pub model: String,
    /// The key; absent, the provider's key is inherited from the coordinator's
    /// environment and configuration.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "api_key")]
    pub api_key: Option<ApiKey>,
    /// The sampling temperature, 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "temperature")]
    pub temperature: Option<f32>,
    /// The most tokens one response may generate.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "max_tokens")]
    pub max_tokens: Option<u32>,
    /// How long the vendor keeps the requests' prefix cached (default `short`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<PromptCache>,
}

/// `[provider] prompt_cache`: how the vendor caches each request's stable prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptCache {
    /// The vendor's default, about five minutes.
    Short,
    /// As long as the vendor offers: an hour at Anthropic (writes cost more), a day at
    /// OpenAI.
    Long,
    /// No caching asked for.
    Off,
}

impl PromptCache {
    /// The runtime's choice: a time to live, or none.
    pub fn ttl(self) -> Option<troupe_core::CacheTtl> {
        match self {
            PromptCache::Short => Some(troupe_core::CacheTtl::Short),
            PromptCache::Long => Some(troupe_core::CacheTtl::Long),
            PromptCache::Off => None,
        }
    }
}

impl ProviderSection {
    /// The `provider/model` id (or `demo`) the runtime resolves.
    pub fn model_id(&self) -> String {
        match &self.name {
            Some(name) if !self.model.starts_with(&format!("{name}/")) => format!("{name}/{}", self.model),
            _ => self.model.clone(),
        }
    }
}

/// `[system]`: the system prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSection {
    /// The agent's instructions.
    #[serde(default)]
    pub prompt: String,
}

/// Whose memory an agent reads and writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryBackend {
    /// The team's memory, shared with the other agents.
    #[default]
    Shared,
    /// A memory of its own.
    Isolated,
}

/// `[memory]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    /// Shared or isolated (default shared).
    #[serde(default)]
    pub backend: MemoryBackend,
    /// The category the agent's memories are filed under.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_not_empty")]
    pub category: Option<String>,
}

/// How a worker reports back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportingMode {
    /// Over the worker protocol.
    #[default]
    Ipc,
}

/// The form of a worker's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// Structured JSON.
    #[default]
    Json,
    /// Markdown for people.
    Markdown,
    /// Both.
    Both,
}

/// The default report timeout, in seconds.
pub const DEFAULT_REPORT_TIMEOUT_SECONDS: u64 = 600;

/// `[reporting]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportingSection {
    /// How (only `ipc`).
    #[serde(default)]
    pub mode: ReportingMode,
    /// In what form (default `json`).
    #[serde(default)]
    pub format: ReportFormat,
    /// How long the coordinator waits for the report, in seconds (more than 0; default 600).
    #[serde(default = "default_timeout", deserialize_with = "timeout_seconds")]
    pub timeout_seconds: u64,
}

impl Default for ReportingSection {
    fn default() -> Self {
        ReportingSection {
            mode: ReportingMode::Ipc,
            format: ReportFormat::Json,
            timeout_seconds: DEFAULT_REPORT_TIMEOUT_SECONDS,
        }
    }
}

/// `[retry]`: how a failed task is retried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySection {
    /// Attempts in all, the first included (1 or more; default 1: no retry).
    #[serde(default = "one", deserialize_with = "max_attempts")]
    pub max_attempts: u32,
    /// The wait before a retry, in milliseconds (default 1000).
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
}

impl Default for RetrySection {
    fn default() -> Self {
        RetrySection { max_attempts: 1, backoff_ms: default_backoff() }
    }
}

fn one() -> u32 {
    1
}

fn default_backoff() -> u64 {
    1000
}

fn default_timeout() -> u64 {
    DEFAULT_REPORT_TIMEOUT_SECONDS
}

fn agent_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let id = String::deserialize(d)?;
    check_agent_id(&id).map_err(D::Error::custom)?;
    Ok(id)
}

fn not_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    if text.trim().is_empty() {
        return Err(D::Error::custom("must not be empty"));
    }
    Ok(text)
}

fn some_not_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    not_empty(d).map(Some)
}

fn provider_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let name = not_empty(d)?;
    if name.contains('/') {
        return Err(D::Error::custom(format!(
            "`{name}` is not a provider name; write the provider in `name` and the model in `model`"
        )));
    }
    Ok(Some(name))
}

fn api_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ApiKey>, D::Error> {
    let key = String::deserialize(d)?;
    if key.trim().is_empty() {
        return Err(D::Error::custom("is empty; remove `api_key` to inherit the provider's key"));
    }
    Ok(Some(ApiKey::new(key)))
}

fn temperature<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    let t = f32::deserialize(d)?;
    if !(0.0..=2.0).contains(&t) {
        return Err(D::Error::custom(format!("{t} is out of range; the temperature is a number from 0 to 2")));
    }
    Ok(Some(t))
}

fn max_tokens<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = u32::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 tokens leaves no room for a response; use 1 or more"));
    }
    Ok(Some(n))
}

fn timeout_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 seconds would time out every report; use 1 or more"));
    }
    Ok(n)
}

fn max_attempts<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = u32::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 attempts would never run the task; use 1 (no retry) or more"));
    }
    Ok(n)
}

fn available_mode<'de, D: Deserializer<'de>>(d: D) -> Result<ExecutionMode, D::Error> {
    let mode = ExecutionMode::deserialize(d)?;
    mode.availability().map_err(D::Error::custom)?;
    Ok(mode)
}

/// A string whose placeholders are checked as it is read, so an error points at it.
struct Templated(String);

impl<'de> Deserialize<'de> for Templated {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        placeholders::check(&text).map_err(D::Error::custom)?;
        Ok(Templated(text))
    }
}

fn some_templated<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Templated::deserialize(d).map(|t| Some(t.0))
}

fn templated_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Vec::<Templated>::deserialize(d)?.into_iter().map(|t| t.0).collect())
}

/// A variable name as it is read: not empty, no `=`, no NUL.
struct VariableName(String);

impl<'de> Deserialize<'de> for VariableName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(D::Error::custom(format!("`{name}` cannot name an environment variable")));
        }
        Ok(VariableName(name))
    }
}

fn environment<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(BTreeMap::<VariableName, Templated>::deserialize(d)?.into_iter().map(|(k, v)| (k.0, v.0)).collect())
}

// BTreeMap keys need an order; variable names compare as their text.
impl PartialEq for VariableName {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for VariableName {}
impl PartialOrd for VariableName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for VariableName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids() {
        let section = |name: Option<&str>, model: &str| ProviderSection {
            name: name.map(str::to_owned),
            model: model.to_owned(),
            api_key: None,
            temperature: None,
            max_tokens: None,
            prompt_cache: None,
        };
        assert_eq!(section(None, "demo").model_id(), "demo");
        assert_eq!(section(Some("anthropic"), "claude-sonnet-4-5").model_id(), "anthropic/claude-sonnet-4-5");
        assert_eq!(section(Some("anthropic"), "anthropic/claude-sonnet-4-5").model_id(), "anthropic/claude-sonnet-4-5");
        assert_eq!(section(None, "openai/gpt-4o").model_id(), "openai/gpt-4o");
    }

    #[test]
    fn api_keys_are_redacted() {
        let key = ApiKey::new("sk-secret");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.expose(), "sk-secret");
    }

    #[test]
    fn only_subprocess_is_available() {
        assert!(ExecutionMode::Subprocess.availability().is_ok());
        for mode in [ExecutionMode::Wasm, ExecutionMode::Docker] {
            let error = mode.availability().expect_err("unavailable");
            assert!(error.contains("not available on this host") && error.contains("subprocess"), "{error}");
        }
    }
}
