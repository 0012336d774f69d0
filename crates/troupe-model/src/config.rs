//! [`ModelConfig`]: the model parts of `troupe.toml`.
//!
//! ```toml
//! [model]
//! default_model = "acme/acme-large"     # also accepted at the top level
//!
//! [providers.acme]                      # a new provider: configuration only
//! kind = "openai-chat"                  # anthropic | openai-chat | openai-responses | gemini
//! base_url = "https://api.acme.example/v1"
//! api_key_env = ["ACME_API_KEY"]
//! models = ["acme-large"]
//!
//! [providers.ollama]                    # or override a built-in one
//! base_url = "http://gpu-box:11434/v1"
//!
//! [models."acme/acme-large"]            # extend or override the registry
//! context_window = 128000
//! max_output_tokens = 8192
//! input_price = 0.5                     # USD per million tokens
//! output_price = 1.5
//! fallback = ["openai/gpt-4o-mini"]     # used while the model is overloaded
//!
//! [retry]
//! max_retries = 4
//! initial_delay_ms = 1000
//! max_delay_ms = 8000
//! ```
//!
//! Unknown keys inside these tables are errors reported with their line and column. Other
//! top-level tables belong to other parts of troupe and are left alone.

use crate::error::{Error, Result};
use crate::providers::{Env, ProviderConfig, ProviderKind, Providers};
use crate::registry::{ModelInfo, Pricing, split_id};
use crate::retry::RetryPolicy;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use troupe_core::line_column;

/// The model configuration of `troupe.toml`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ModelConfig {
    /// `[model]`.
    #[serde(default)]
    pub model: ModelSection,
    /// `[providers.NAME]`: new providers, or changes to built-in ones.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
    /// `[models."provider/model"]`: registry additions and overrides, fallback chains.
    #[serde(default)]
    pub models: BTreeMap<String, ModelOverride>,
    /// `[retry]`.
    #[serde(default)]
    pub retry: Option<RetrySection>,
    /// A top-level `default_model`, the short form of `[model] default_model`.
    #[serde(default)]
    default_model: Option<String>,
    /// Other top-level keys: tables of other troupe components, and typos (rejected).
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

/// `[model]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// The model used when neither `--model` nor `TROUPE_MODEL` names one.
    pub default_model: Option<String>,
}

/// `[providers.NAME]`. For a new provider `kind` and `base_url` are required; for a
/// built-in one every field is optional and replaces the built-in value.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// The wire format.
    pub kind: Option<ProviderKind>,
    /// The base URL, with the version where the wire expects it (`https://host/v1`).
    pub base_url: Option<String>,
    /// A variable that overrides `base_url` when set.
    pub base_url_env: Option<String>,
    /// The variables that may hold the key: one name or a list.
    #[serde(default, deserialize_with = "one_or_many")]
    pub api_key_env: Option<Vec<String>>,
    /// Model names to list for the provider.
    #[serde(default)]
    pub models: Vec<String>,
    /// Whether a key is required (default: whether `api_key_env` names one).
    pub requires_key: Option<bool>,
    /// The provider's default model.
    pub default_model: Option<String>,
    /// Send `max_tokens` instead of `max_completion_tokens` (`openai-chat` only).
    pub legacy_max_tokens: Option<bool>,
    /// Ask for typed answers with a forced `final_answer` tool instead of a `json_schema`
    /// response format (`openai-chat` only), for servers without response formats.
    pub answer_tool: Option<bool>,
}

/// `[models."provider/model"]`: every field optional; prices in USD per million tokens.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// The context window in tokens (required for a model the registry does not know).
    pub context_window: Option<u32>,
    /// The output limit in tokens (required for a model the registry does not know).
    pub max_output_tokens: Option<u32>,
    /// The input price.
    pub input_price: Option<f64>,
    /// The output price.
    pub output_price: Option<f64>,
    /// The cache read price (default for a new model: the input price).
    pub cache_read_price: Option<f64>,
    /// The cache write price (default for a new model: the input price).
    pub cache_write_price: Option<f64>,
    /// Other wire names of the model.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Models (`provider/model`) that take over, in order, while this one is overloaded.
    #[serde(default)]
    pub fallback: Vec<String>,
}

impl ModelOverride {
    fn describes_the_model(&self) -> bool {
        self.context_window.is_some()
            || self.max_output_tokens.is_some()
            || self.input_price.is_some()
            || self.output_price.is_some()
            || self.cache_read_price.is_some()
            || self.cache_write_price.is_some()
            || !self.aliases.is_empty()
    }
}

/// `[retry]`: changes to the default [`RetryPolicy`] (4 retries after 1, 2, 4, 8 s).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySection {
    /// How many times a failed call is retried.
    pub max_retries: Option<u32>,
    /// The wait before the first retry, in milliseconds.
    pub initial_delay_ms: Option<u64>,
    /// The longest wait between two attempts, in milliseconds.
    pub max_delay_ms: Option<u64>,
}

impl RetrySection {
    /// The default policy with these changes.
    pub fn policy(&self) -> RetryPolicy {
        let mut policy = RetryPolicy::default();
        if let Some(n) = self.max_retries {
            policy = policy.max_retries(n);
        }
        if let Some(ms) = self.initial_delay_ms {
            policy = policy.initial_delay(Duration::from_millis(ms));
        }
        if let Some(ms) = self.max_delay_ms {
            policy = policy.max_delay(Duration::from_millis(ms));
        }
        policy
    }
}

fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged, expecting = "a variable name or a list of variable names")]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(Some(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(v) => vec![v],
        OneOrMany::Many(v) => v,
    }))
}

impl ModelConfig {
    /// Reads and validates `path`; errors name the file, line and column.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and validates `troupe.toml` text.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        Self::parse(text, "troupe.toml")
    }

    fn parse(text: &str, origin: &str) -> Result<Self> {
        let mut config: ModelConfig = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((1, 1), |span| line_column(text, span.start));
            Error::Config(format!("{origin}:{line}:{column}: {}", e.message().trim_end()))
        })?;
        // Tables at the top level are other components' sections; a bare value is ours, so
        // an unknown one is a typo.
        if let Some((key, _)) = config.other.iter().find(|(_, value)| !value.is_table()) {
            let (line, column) = top_level_key_position(text, key).unwrap_or((1, 1));
            return Err(Error::Config(format!(
                "{origin}:{line}:{column}: unknown key `{key}`, expected `default_model` or a table"
            )));
        }
        match (config.default_model.take(), &config.model.default_model) {
            (Some(_), Some(_)) => {
                return Err(Error::Config(format!(
                    "{origin}: `default_model` is set both at the top level and in [model]; keep one"
                )));
            }
            (Some(top), None) => config.model.default_model = Some(top),
            _ => {}
        }
        config.other.clear();
        Ok(config)
    }

    /// The configured default model.
    pub fn default_model(&self) -> Option<&str> {
        self.model.default_model.as_deref()
    }

    /// The built-in providers reading `env`, with this configuration applied.
    pub fn providers(&self, env: impl Env + 'static) -> Result<Providers> {
        let mut providers = Providers::with_env(env);
        self.apply(&mut providers)?;
        Ok(providers)
    }

    /// Applies the configuration: providers, then models and fallbacks, then retries.
    pub fn apply(&self, providers: &mut Providers) -> Result<()> {
        for (name, section) in &self.providers {
            let config = provider_config(name, section, providers.provider(name))?;
            providers.insert_provider(config);
        }
        for (id, section) in &self.models {
            let context = format!("[models.\"{id}\"]");
            let (provider, _) =
                split_id(id).ok_or_else(|| Error::Config(format!("{context}: the key must be `provider/model`")))?;
            if providers.provider(provider).is_none() {
                return Err(Error::Config(format!("{context}: no provider `{provider}`")));
            }
            if section.describes_the_model() {
                let info = model_info(id, section, providers.registry().get(id))?;
                providers.registry_mut().insert(info);
            }
            for fallback in &section.fallback {
                let known = split_id(fallback).is_some_and(|(p, _)| providers.provider(p).is_some());
                if !known {
                    return Err(Error::Config(format!(
                        "{context}: fallback `{fallback}` is not a `provider/model` id of a known provider"
                    )));
                }
            }
            let canonical = providers.registry().get(id).map_or_else(|| id.clone(), |info| info.id.clone());
            providers.set_fallback(canonical, section.fallback.clone());
        }
        if let Some(retry) = &self.retry {
            providers.set_retry_policy(retry.policy());
        }
        Ok(())
    }
}

fn provider_config(name: &str, section: &ProviderSection, existing: Option<&ProviderConfig>) -> Result<ProviderConfig> {
    let context = format!("[providers.{name}]");
    if name.is_empty() || name.contains('/') || name == crate::demo::DEMO {
        return Err(Error::Config(format!("{context}: `{name}` cannot name a provider")));
    }
    let mut config = match existing {
        Some(existing) => existing.clone(),
        None => {
            let kind = section.kind.ok_or_else(|| {
                Error::Config(format!(
                    "{context}: `kind` is required for a new provider (anthropic, openai-chat, openai-responses, gemini)"
                ))
            })?;
            let base_url = section
                .base_url
                .clone()
                .ok_or_else(|| Error::Config(format!("{context}: `base_url` is required for a new provider")))?;
            ProviderConfig::new(name, kind, base_url)
        }
    };
    if let Some(kind) = section.kind {
        config.kind = kind;
    }
    if let Some(url) = &section.base_url {
        config.base_url.clone_from(url);
    }
    if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
        return Err(Error::Config(format!("{context}: base_url `{}` is not an http(s) URL", config.base_url)));
    }
    if section.base_url_env.is_some() {
        config.base_url_env.clone_from(&section.base_url_env);
    }
    if let Some(variables) = &section.api_key_env {
        config.api_key_env.clone_from(variables);
        if existing.is_none() {
            config.requires_key = !variables.is_empty();
        }
    }
    if let Some(required) = section.requires_key {
        config.requires_key = required;
    }
    if config.requires_key && config.api_key_env.is_empty() {
        return Err(Error::Config(format!("{context}: `requires_key` needs `api_key_env` to name the variable")));
    }
    config.models.extend(section.models.iter().filter(|m| !config.models.contains(m)).cloned().collect::<Vec<_>>());
    if section.default_model.is_some() {
        config.default_model.clone_from(&section.default_model);
    }
    if let Some(legacy) = section.legacy_max_tokens {
        config.legacy_max_tokens = legacy;
    }
    if let Some(answer_tool) = section.answer_tool {
        config.answer_tool = answer_tool;
    }
    Ok(config)
}

fn model_info(id: &str, section: &ModelOverride, existing: Option<&ModelInfo>) -> Result<ModelInfo> {
    let context = format!("[models.\"{id}\"]");
    let mut info = match existing {
        Some(existing) => existing.clone(),
        None => {
            let (Some(context_window), Some(max_output)) = (section.context_window, section.max_output_tokens) else {
                return Err(Error::Config(format!(
                    "{context}: `context_window` and `max_output_tokens` are required for a model the registry does not know"
                )));
            };
            let input = section.input_price.unwrap_or(0.0);
            ModelInfo::new(id, context_window, max_output, Pricing::flat(input, section.output_price.unwrap_or(0.0)))?
        }
    };
    if let Some(v) = section.context_window {
        info.context_window = v;
    }
    if let Some(v) = section.max_output_tokens {
        info.max_output_tokens = v;
    }
    let pricing = &mut info.pricing;
    for (field, value) in [
        (&mut pricing.input, section.input_price),
        (&mut pricing.output, section.output_price),
        (&mut pricing.cache_read, section.cache_read_price),
        (&mut pricing.cache_write, section.cache_write_price),
    ] {
        if let Some(value) = value {
            *field = value;
        }
    }
    if !info.pricing.is_valid() {
        return Err(Error::Config(format!("{context}: prices must be finite and not negative")));
    }
    if info.context_window == 0 || info.max_output_tokens == 0 || info.max_output_tokens > info.context_window {
        return Err(Error::Config(format!(
            "{context}: need 0 < max_output_tokens ({}) <= context_window ({})",
            info.max_output_tokens, info.context_window
        )));
    }
    for alias in &section.aliases {
        if !info.aliases.contains(alias) {
            info.aliases.push(alias.clone());
        }
    }
    Ok(info)
}

/// Where top-level `key = ...` is written, before the first table header.
fn top_level_key_position(text: &str, key: &str) -> Option<(usize, usize)> {
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            return None;
        }
        let unquoted = trimmed.trim_start_matches(['"', '\'']);
        if unquoted
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start_matches(['"', '\'']).trim_start().starts_with('='))
        {
            return Some((n + 1, line.len() - trimmed.len() + 1));
        }
    }
    None
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
