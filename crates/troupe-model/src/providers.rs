//! [`Providers`]: turns a `provider/model` id into a ready [`LlmProvider`].
//!
//! A provider is data ([`ProviderConfig`]): which wire it speaks, its base URL, the
//! environment variables holding its key. The built-in set covers Anthropic, OpenAI (Chat
//! and Responses), Gemini and the OpenAI-compatible services and local servers; adding
//! another is configuration only (`[providers.NAME]` in `troupe.toml`). Resolution reads
//! keys through an injectable [`Env`], wraps the provider in a [`RetryingProvider`], and in
//! a [`FallbackProvider`] when the model has a fallback chain.

use crate::anthropic::AnthropicWire;
use crate::api_key::ApiKey;
use crate::demo::{DEMO, DemoProvider};
use crate::error::{Error, Result};
use crate::fallback::{FallbackProvider, FallbackRoute};
use crate::gemini::GeminiWire;
use crate::http::{HttpConfig, HttpProvider};
use crate::openai_chat::OpenAiChatWire;
use crate::openai_responses::OpenAiResponsesWire;
use crate::provider::LlmProvider;
use crate::provider_cache::{HttpSettings, ProviderCache};
use crate::registry::{ModelInfo, ModelRegistry, Pricing, split_id};
use crate::retry::{RetryPolicy, RetryingProvider};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use troupe_core::ModelRequest;

/// Where environment variables are read from. Tests pass a map instead of the process
/// environment, so they never mutate global state.
pub trait Env: Send + Sync {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl Env for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// The wire format a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProviderKind {
    /// Anthropic Messages.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions, and every OpenAI-compatible server.
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// OpenAI Responses.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Google Gemini `streamGenerateContent`.
    #[serde(rename = "gemini")]
    Gemini,
}

impl ProviderKind {
    /// The name used in `troupe.toml` (`openai-chat`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAiChat => "openai-chat",
            ProviderKind::OpenAiResponses => "openai-responses",
            ProviderKind::Gemini => "gemini",
        }
    }
}

/// How to reach one provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// The name, the first part of `provider/model` ids (`groq`).
    pub name: String,
    /// The wire format.
    pub kind: ProviderKind,
    /// The base URL (`https://api.groq.com/openai/v1`).
    pub base_url: String,
    /// A variable that, when set, overrides `base_url` (`GROQ_BASE_URL`).
    pub base_url_env: Option<String>,
    /// The variables that may hold the key, tried in order (`GEMINI_API_KEY`, `GOOGLE_API_KEY`).
    pub api_key_env: Vec<String>,
    /// Model names to list for this provider, besides the registry's.
    pub models: Vec<String>,
    /// Whether a request without a key is refused before it is sent (local servers need none).
    pub requires_key: bool,
    /// The model [`Providers::first_available`] picks for this provider.
    pub default_model: Option<String>,
    /// For `openai-chat` servers that only know `max_tokens`, not `max_completion_tokens`.
    pub legacy_max_tokens: bool,
    /// For `openai-chat` servers without `json_schema` response formats: a typed answer is
    /// asked for with a forced `final_answer` tool instead.
    pub answer_tool: bool,
    /// The provider whose registry entries describe this one's models, when they are the
    /// same models behind another wire (`openai-responses` serves `openai`'s).
    pub registry_provider: Option<String>,
}

impl ProviderConfig {
    /// A provider of `kind` at `base_url`, needing no key.
    pub fn new(name: impl Into<String>, kind: ProviderKind, base_url: impl Into<String>) -> Self {
        ProviderConfig {
            name: name.into(),
            kind,
            base_url: base_url.into(),
            base_url_env: None,
            api_key_env: Vec::new(),
            models: Vec::new(),
            requires_key: false,
            default_model: None,
            legacy_max_tokens: false,
            answer_tool: false,
            registry_provider: None,
        }
    }

    /// Reads the key from `variable` and requires it.
    pub fn api_key_env(mut self, variable: impl Into<String>) -> Self {
        self.api_key_env.push(variable.into());
        self.requires_key = true;
        self
    }
}

/// A built-in provider, as data.
struct Preset {
    name: &'static str,
    kind: ProviderKind,
    base_url: &'static str,
    base_url_env: &'static str,
    api_key_env: &'static [&'static str],
    requires_key: bool,
    default_model: Option<&'static str>,
}

const fn hosted(
    name: &'static str,
    base_url: &'static str,
    base_url_env: &'static str,
    key: &'static [&'static str],
) -> Preset {
    Preset {
        name,
        kind: ProviderKind::OpenAiChat,
        base_url,
        base_url_env,
        api_key_env: key,
        requires_key: true,
        default_model: None,
    }
}

const fn local(
    name: &'static str,
    base_url: &'static str,
    base_url_env: &'static str,
    key: &'static [&'static str],
) -> Preset {
    Preset {
        name,
        kind: ProviderKind::OpenAiChat,
        base_url,
        base_url_env,
        api_key_env: key,
        requires_key: false,
        default_model: None,
    }
}

/// The vendors, then OpenAI-compatible services, then local servers (whose key variable is
/// sent when set, for servers started with one).
const PRESETS: &[Preset] = &[
    Preset {
        name: "anthropic",
        kind: ProviderKind::Anthropic,
        base_url: "https://api.anthropic.com",
        base_url_env: "ANTHROPIC_BASE_URL",
        api_key_env: &["ANTHROPIC_API_KEY"],
        requires_key: true,
        default_model: Some("claude-sonnet-5-5"),
    },
    Preset {
        name: "openai",
        kind: ProviderKind::OpenAiChat,
        base_url: "https://api.openai.com/v1",
        base_url_env: "OPENAI_BASE_URL",
        api_key_env: &["OPENAI_API_KEY"],
        requires_key: true,
        default_model: Some("gpt-5.4"),
    },
    Preset {
        name: "openai-responses",
        kind: ProviderKind::OpenAiResponses,
        base_url: "https://api.openai.com/v1",
        base_url_env: "OPENAI_BASE_URL",
        api_key_env: &["OPENAI_API_KEY"],
        requires_key: true,
        default_model: Some("gpt-6.1-terra"),
    },
    Preset {
        name: "gemini",
        kind: ProviderKind::Gemini,
        base_url: "https://generativelanguage.googleapis.com",
        base_url_env: "GEMINI_BASE_URL",
        api_key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        requires_key: true,
        default_model: Some("gemini-3.8-flash"),
    },
    hosted("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_BASE_URL", &["DEEPSEEK_API_KEY"]),
    hosted("groq", "https://api.groq.com/openai/v1", "GROQ_BASE_URL", &["GROQ_API_KEY"]),
    hosted("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_BASE_URL", &["OPENROUTER_API_KEY"]),
    hosted("together", "https://api.together.xyz/v1", "TOGETHER_BASE_URL", &["TOGETHER_API_KEY"]),
    hosted("mistral", "https://api.mistral.ai/v1", "MISTRAL_BASE_URL", &["MISTRAL_API_KEY"]),
    hosted("fireworks", "https://api.fireworks.ai/inference/v1", "FIREWORKS_BASE_URL", &["FIREWORKS_API_KEY"]),
    hosted("xai", "https://api.x.ai/v1", "XAI_BASE_URL", &["XAI_API_KEY"]),
    local("ollama", "http://localhost:11434/v1", "OLLAMA_BASE_URL", &["OLLAMA_API_KEY"]),
    local("vllm", "http://localhost:8000/v1", "VLLM_BASE_URL", &["VLLM_API_KEY"]),
    local("lmstudio", "http://localhost:1234/v1", "LMSTUDIO_BASE_URL", &["LMSTUDIO_API_KEY"]),
    local("llamacpp", "http://localhost:8080/v1", "LLAMACPP_BASE_URL", &["LLAMACPP_API_KEY"]),
];

/// The vendors [`Providers::first_available`] tries, in order.
const FIRST_CHOICES: [&str; 3] = ["anthropic", "openai", "gemini"];

impl Preset {
    fn config(&self) -> ProviderConfig {
        ProviderConfig {
            name: self.name.to_owned(),
            kind: self.kind,
            base_url: self.base_url.to_owned(),
            base_url_env: Some(self.base_url_env.to_owned()),
            api_key_env: self.api_key_env.iter().map(|v| (*v).to_owned()).collect(),
            models: Vec::new(),
            requires_key: self.requires_key,
            default_model: self.default_model.map(str::to_owned),
            // OpenAI itself takes the current name; every compatible server knows the old one.
            legacy_max_tokens: self.kind == ProviderKind::OpenAiChat && self.name != "openai",
            answer_tool: false,
            registry_provider: (self.kind == ProviderKind::OpenAiResponses).then(|| "openai".to_owned()),
        }
    }
}

/// A model id resolved to the provider that serves it.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The `provider/model` id (`anthropic/claude-sonnet-4-5`), or `demo`.
    pub id: String,
    /// The model name sent on the wire (`claude-sonnet-4-5`).
    pub model: String,
    /// The provider, with retries and any fallback chain.
    pub provider: Arc<dyn LlmProvider>,
    /// What the registry knows of the model, if anything.
    pub info: Option<ModelInfo>,
}

impl ResolvedModel {
    /// An empty request for this model.
    pub fn request(&self) -> ModelRequest {
        ModelRequest::new(self.model.clone())
    }

    /// What `usage` costs on this model, if its prices are known.
    pub fn cost(&self, usage: &troupe_core::Usage) -> Option<f64> {
        self.info.as_ref().map(|info| info.cost(usage))
    }
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("id", &self.id)
            .field("model", &self.model)
            .field("provider", &self.provider.name())
            .field("info", &self.info)
            .finish()
    }
}

/// The known providers and models, and how to call them.
///
/// Each provider's HTTP client is built once, at its first resolution, and shared by every
/// later resolution of the same provider (and by every clone of this value): one
/// connection pool, one TLS configuration, one reading of the root certificates per
/// process. A provider whose settings changed (its base URL, its key) gets a new client;
/// runs that resolved the old one keep it.
///
/// ```
/// use std::collections::HashMap;
/// use troupe_model::{Error, Providers};
///
/// let env = HashMap::from([("GROQ_API_KEY".to_owned(), "gsk-test".to_owned())]);
/// let providers = Providers::with_env(env);
/// let model = providers.resolve("groq/llama-3.3-70b-versatile")?;
/// assert_eq!((model.model.as_str(), model.provider.name()), ("llama-3.3-70b-versatile", "groq"));
///
/// let missing = providers.resolve("anthropic/claude-sonnet-4-5").unwrap_err();
/// assert_eq!(missing.to_string(), "ANTHROPIC_API_KEY is not set; export it or pass --model demo");
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone)]
pub struct Providers {
    providers: Vec<ProviderConfig>,
    registry: ModelRegistry,
    fallbacks: HashMap<String, Vec<String>>,
    retry: RetryPolicy,
    env: Arc<dyn Env>,
    built: Arc<ProviderCache>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("providers", &self.providers.iter().map(|p| &p.name).collect::<Vec<_>>())
            .field("models", &self.registry.len())
            .field("fallbacks", &self.fallbacks)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Default for Providers {
    fn default() -> Self {
        Self::with_env(ProcessEnv)
    }
}

impl Providers {
    /// The built-in providers and models, reading the process environment.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// The built-in providers and models, reading `env`.
    pub fn with_env(env: impl Env + 'static) -> Self {
        Providers {
            providers: PRESETS.iter().map(Preset::config).collect(),
            registry: ModelRegistry::builtin(),
            fallbacks: HashMap::new(),
            retry: RetryPolicy::default(),
            env: Arc::new(env),
            built: Arc::default(),
        }
    }

    /// The providers, built-ins first.
    pub fn providers(&self) -> &[ProviderConfig] {
        &self.providers
    }

    /// The provider named `name`.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Adds a provider, or replaces the one of the same name.
    pub fn insert_provider(&mut self, config: ProviderConfig) {
        match self.providers.iter_mut().find(|p| p.name == config.name) {
            Some(existing) => *existing = config,
            None => self.providers.push(config),
        }
    }

    /// The model registry.
    pub fn registry(&self) -> &ModelRegistry {
        &self.registry
    }

    /// The model registry, to override or extend.
    pub fn registry_mut(&mut self) -> &mut ModelRegistry {
        &mut self.registry
    }

    /// The retry policy every resolved provider gets.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Sets the retry policy.
    pub fn set_retry_policy(&mut self, policy: RetryPolicy) {
        self.retry = policy;
    }

    /// Makes `fallbacks` (model ids, in order) take over from `id` when it is overloaded;
    /// an empty list removes the chain.
    pub fn set_fallback(&mut self, id: impl Into<String>, fallbacks: Vec<String>) {
        let id = id.into();
        if fallbacks.is_empty() {
            self.fallbacks.remove(&id);
        } else {
            self.fallbacks.insert(id, fallbacks);
        }
    }

    /// The fallback chain of `id`, if any.
    pub fn fallback(&self, id: &str) -> Option<&[String]> {
        self.fallbacks.get(id).map(Vec::as_slice)
    }

    /// The variable holding `provider`'s key, if one of its variables is set.
    pub fn key_variable<'a>(&self, provider: &'a ProviderConfig) -> Option<&'a str> {
        provider.api_key_env.iter().map(String::as_str).find(|v| self.env_var(v).is_some())
    }

    /// The base URL calls to `provider` go to: its `base_url_env` variable's value when
    /// set (`OPENAI_BASE_URL`), else its configured `base_url`.
    pub fn base_url(&self, provider: &ProviderConfig) -> String {
        provider.base_url_env.as_deref().and_then(|v| self.env_var(v)).unwrap_or_else(|| provider.base_url.clone())
    }

    /// `provider/model` of the first vendor (Anthropic, OpenAI, Gemini) whose key is set,
    /// with its default model.
    pub fn first_available(&self) -> Option<String> {
        FIRST_CHOICES.iter().find_map(|name| {
            let provider = self.provider(name)?;
            let model = provider.default_model.as_deref()?;
            self.key_variable(provider).map(|_| format!("{name}/{model}"))
        })
    }

    /// Resolves `id` (`provider/model`, split at the first `/`; `demo`; or a bare model
    /// name the registry knows under one provider) to a provider ready to call.
    ///
    /// Fails with [`Error::UnknownModel`] when the provider is unknown, and with
    /// [`Error::MissingApiKey`] when the provider needs a key and none is set.
    pub fn resolve(&self, id: &str) -> Result<ResolvedModel> {
        let id = id.trim();
        let (provider_name, model) = self.split(id)?;
        if provider_name == DEMO {
            return Ok(demo_model());
        }
        let (resolved, canonical) = self.resolve_one(provider_name, model)?;
        let chain = self.fallbacks.get(&resolved.id).or_else(|| self.fallbacks.get(&canonical));
        let Some(chain) = chain else {
            return Ok(resolved);
        };
        let mut routes =
            vec![FallbackRoute::new(resolved.id.clone(), Arc::clone(&resolved.provider), resolved.model.clone())];
        for fallback in chain {
            let (provider_name, model) = self.split(fallback)?;
            match self.resolve_one(provider_name, model) {
                Ok((next, _)) => routes.push(FallbackRoute::new(next.id, next.provider, next.model)),
                // A fallback without a key must not keep the primary model from working.
                Err(Error::MissingApiKey { variable, .. }) => {
                    tracing::warn!(model = %resolved.id, fallback = %fallback, "skipping fallback: {variable} is not set");
                }
                Err(e) => return Err(e),
            }
        }
        if routes.len() == 1 {
            return Ok(resolved);
        }
        Ok(ResolvedModel { provider: Arc::new(FallbackProvider::new(routes)?), ..resolved })
    }

    /// Checks that `id` names a model these providers can serve (a known provider, or
    /// `demo`, or a bare name the registry knows), without building a client or needing
    /// its key: what a configuration check (`troupe agent validate`) asks.
    pub fn check(&self, id: &str) -> Result<()> {
        let (provider_name, model) = self.split(id.trim())?;
        if provider_name == DEMO || self.provider(provider_name).is_some() {
            return Ok(());
        }
        Err(Error::UnknownModel {
            id: format!("{provider_name}/{model}"),
            reason: format!("no provider `{provider_name}`; valid providers: {}", self.provider_names()),
        })
    }

    fn split<'a>(&'a self, id: &'a str) -> Result<(&'a str, &'a str)> {
        if id == DEMO {
            return Ok((DEMO, DEMO));
        }
        if let Some(parts) = split_id(id) {
            return Ok(parts);
        }
        if !id.contains('/') {
            // A bare name the registry knows under exactly one provider.
            let mut matches = self.registry.iter().filter(|m| m.name == id || m.aliases.iter().any(|a| a == id));
            if let (Some(only), None) = (matches.next(), matches.next()) {
                return Ok((only.provider.as_str(), id));
            }
        }
        Err(Error::UnknownModel {
            id: id.to_owned(),
            reason: format!(
                "expected `provider/model` (e.g. `anthropic/claude-sonnet-4-5`) or `demo`; providers: {}",
                self.provider_names()
            ),
        })
    }

    fn provider_names(&self) -> String {
        let mut names: Vec<&str> = self.providers.iter().map(|p| p.name.as_str()).collect();
        names.push(DEMO);
        names.join(", ")
    }

    /// The provider of `provider_name` for `model`, with retries but no fallback; and the
    /// registry id of the model (its canonical id when `model` is an alias).
    fn resolve_one(&self, provider_name: &str, model: &str) -> Result<(ResolvedModel, String)> {
        let id = format!("{provider_name}/{model}");
        let Some(config) = self.provider(provider_name) else {
            return Err(Error::UnknownModel {
                id,
                reason: format!("no provider `{provider_name}`; valid providers: {}", self.provider_names()),
            });
        };
        let info = self.registry.get(&id).or_else(|| {
            let catalog = config.registry_provider.as_deref()?;
            self.registry.get(&format!("{catalog}/{model}"))
        });
        let info = info.cloned();
        if info.is_none() {
            tracing::debug!(model = %id, "model not in the registry: context window and prices unknown");
        }
        let canonical = info.as_ref().map_or_else(|| id.clone(), |info| info.id.clone());
        let inner = self.http_provider(config)?;
        let provider: Arc<dyn LlmProvider> = Arc::new(RetryingProvider::new(inner, self.retry.clone()));
        Ok((ResolvedModel { id, model: model.to_owned(), provider, info }, canonical))
    }

    fn http_provider(&self, config: &ProviderConfig) -> Result<Arc<dyn LlmProvider>> {
        let key = config.api_key_env.iter().find_map(|v| self.env_var(v)).map(ApiKey::new);
        if key.is_none() && config.requires_key {
            let Some(variable) = config.api_key_env.first() else {
                return Err(Error::Config(format!("provider `{}` requires a key but names no variable", config.name)));
            };
            return Err(Error::MissingApiKey { provider: config.name.clone(), variable: variable.clone() });
        }
        let base_url = self.base_url(config);
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(Error::Config(format!(
                "provider `{}`: base URL `{base_url}` is not an http(s) URL",
                config.name
            )));
        }
        let settings = HttpSettings {
            kind: config.kind,
            base_url,
            key,
            legacy_max_tokens: config.legacy_max_tokens,
            answer_tool: config.answer_tool,
        };
        self.built.get_or_build(&config.name, settings, |settings| build_http_provider(&config.name, settings))
    }

    /// A variable's value, if set to something other than blanks.
    fn env_var(&self, name: &str) -> Option<String> {
        self.env.var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }
}

/// A new HTTP provider (with its own client) named `name`, from `settings`.
fn build_http_provider(name: &str, settings: &HttpSettings) -> Result<Arc<dyn LlmProvider>> {
    let http = HttpConfig::new(name, settings.base_url.clone(), settings.key.clone());
    Ok(match settings.kind {
        ProviderKind::Anthropic => Arc::new(HttpProvider::new(http, AnthropicWire::default())?),
        ProviderKind::OpenAiChat => {
            let wire = OpenAiChatWire {
                legacy_max_tokens: settings.legacy_max_tokens,
                answer_tool: settings.answer_tool,
                ..OpenAiChatWire::default()
            };
            Arc::new(HttpProvider::new(http, wire)?)
        }
        ProviderKind::OpenAiResponses => Arc::new(HttpProvider::new(http, OpenAiResponsesWire::default())?),
        ProviderKind::Gemini => Arc::new(HttpProvider::new(http, GeminiWire::default())?),
    })
}

/// The offline demo model: free, unlimited, no key.
fn demo_model() -> ResolvedModel {
    let info = ModelInfo {
        id: DEMO.to_owned(),
        provider: DEMO.to_owned(),
        name: DEMO.to_owned(),
        context_window: 200_000,
        max_output_tokens: 8_192,
        pricing: Pricing::default(),
        aliases: Vec::new(),
    };
    ResolvedModel {
        id: DEMO.to_owned(),
        model: DEMO.to_owned(),
        provider: Arc::new(DemoProvider::new()),
        info: Some(info),
    }
}

#[cfg(test)]
#[path = "providers_tests.rs"]
mod tests;
