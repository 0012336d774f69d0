//! The model registry: what troupe knows about each model (context window, output limit,
//! prices), keyed by `provider/model` id.
//!
//! The built-in table is data, `models.toml` beside this file, parsed once; `troupe.toml`
//! overrides and extends it through [`ModelRegistry::insert`].

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::LazyLock;
use troupe_core::Usage;

/// List prices of a model in USD per million tokens, one per token class of [`Usage`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    /// Prompt tokens billed at the full price ([`Usage::input_tokens`]).
    pub input: f64,
    /// Generated tokens, reasoning included ([`Usage::output_tokens`]).
    pub output: f64,
    /// Prompt tokens served from the cache ([`Usage::cache_read_tokens`]).
    pub cache_read: f64,
    /// Prompt tokens written to the cache ([`Usage::cache_write_tokens`]).
    pub cache_write: f64,
}

impl Pricing {
    /// Prices with no cache discount or surcharge: cached tokens cost as much as input.
    pub fn flat(input: f64, output: f64) -> Self {
        Pricing { input, output, cache_read: input, cache_write: input }
    }

    /// What `usage` costs, in USD.
    ///
    /// Each token class is priced on its own; reasoning tokens are part of the output and
    /// are not counted twice.
    ///
    /// ```
    /// use troupe_model::{Pricing, Usage};
    ///
    /// let sonnet = Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 };
    /// let usage = Usage { input_tokens: 1_000_000, output_tokens: 100_000, ..Default::default() };
    /// assert!((sonnet.cost(&usage) - 4.5).abs() < 1e-9);
    /// ```
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token = |tokens: u64, price: f64| tokens as f64 * price;
        let long = usage.cache_write_long_tokens.min(usage.cache_write_tokens);
        (per_token(usage.input_tokens, self.input)
            + per_token(usage.output_tokens, self.output)
            + per_token(usage.cache_read_tokens, self.cache_read)
            + per_token(usage.cache_write_tokens - long, self.cache_write)
            + per_token(long, self.cache_write_long()))
            / 1_000_000.0
    }

    /// The price of a token written to the cache with the long time to live: Anthropic's
    /// 1-hour writes, at twice the input price (the only vendor that reports them).
    ///
    /// ```
    /// use troupe_model::{Pricing, Usage};
    ///
    /// let sonnet = Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 };
    /// assert_eq!(sonnet.cache_write_long(), 6.0);
    /// let hour = Usage { cache_write_tokens: 1_000_000, cache_write_long_tokens: 1_000_000, ..Default::default() };
    /// assert!((sonnet.cost(&hour) - 6.0).abs() < 1e-9);
    /// ```
    pub fn cache_write_long(&self) -> f64 {
        2.0 * self.input
    }

    /// What the prompt cache saved on `usage`, in USD: the tokens read from the cache at the
    /// input price less the read price, less the surcharge of the tokens written to it (at
    /// the write price of their time to live; negative when writes were not read back enough
    /// to pay off).
    ///
    /// ```
    /// use troupe_model::{Pricing, Usage};
    ///
    /// let sonnet = Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 };
    /// let usage = Usage { cache_read_tokens: 1_000_000, cache_write_tokens: 100_000, ..Default::default() };
    /// // 1M tokens read at $0.30 instead of $3.00, 100k written at $3.75 instead of $3.00.
    /// assert!((sonnet.cache_savings(&usage) - (2.70 - 0.075)).abs() < 1e-9);
    /// ```
    pub fn cache_savings(&self, usage: &Usage) -> f64 {
        let long = usage.cache_write_long_tokens.min(usage.cache_write_tokens);
        (usage.cache_read_tokens as f64 * (self.input - self.cache_read)
            - (usage.cache_write_tokens - long) as f64 * (self.cache_write - self.input)
            - long as f64 * (self.cache_write_long() - self.input))
            / 1_000_000.0
    }

    /// Whether every price is a finite, non-negative number.
    pub fn is_valid(&self) -> bool {
        [self.input, self.output, self.cache_read, self.cache_write].iter().all(|p| p.is_finite() && *p >= 0.0)
    }
}

/// What troupe knows about one model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The `provider/model` id (`anthropic/claude-sonnet-4-5`).
    pub id: String,
    /// The provider part of the id (`anthropic`).
    pub provider: String,
    /// The model part of the id, the name sent on the wire (`claude-sonnet-4-5`).
    pub name: String,
    /// The most tokens a request and its response may hold together.
    pub context_window: u32,
    /// The most tokens one response may generate.
    pub max_output_tokens: u32,
    /// List prices.
    pub pricing: Pricing,
    /// Other wire names of the same model (dated snapshots), resolved to this entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl ModelInfo {
    /// A model known as `id` (`provider/model`); fails with [`Error::Config`] if the id has
    /// no provider or no model part.
    pub fn new(id: impl Into<String>, context_window: u32, max_output_tokens: u32, pricing: Pricing) -> Result<Self> {
        let id = id.into();
        let (provider, name) = split_id(&id)
            .ok_or_else(|| Error::Config(format!("model id `{id}` is not of the form `provider/model`")))?;
        Ok(ModelInfo {
            provider: provider.to_owned(),
            name: name.to_owned(),
            id,
            context_window,
            max_output_tokens,
            pricing,
            aliases: Vec::new(),
        })
    }

    /// What `usage` of this model costs, in USD.
    pub fn cost(&self, usage: &Usage) -> f64 {
        self.pricing.cost(usage)
    }
}

/// Splits a `provider/model` id at its first `/`: `openrouter/anthropic/claude-sonnet-4.5`
/// is model `anthropic/claude-sonnet-4.5` of provider `openrouter`. `None` when either
/// part is empty.
pub fn split_id(id: &str) -> Option<(&str, &str)> {
    let (provider, model) = id.split_once('/')?;
    (!provider.is_empty() && !model.is_empty()).then_some((provider, model))
}

/// The models troupe knows, in a stable order, looked up by id or alias.
///
/// ```
/// use troupe_model::ModelRegistry;
///
/// let registry = ModelRegistry::builtin();
/// let sonnet = registry.get("anthropic/claude-sonnet-4-5").expect("a built-in model");
/// assert_eq!(sonnet.context_window, 200_000);
/// // A dated snapshot finds the same entry.
/// assert_eq!(registry.get("anthropic/claude-sonnet-4-5-20250929").map(|m| &m.id), Some(&sonnet.id));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ModelRegistry {
    models: Vec<ModelInfo>,
    /// Ids and `provider/alias` keys, to positions in `models`.
    index: HashMap<String, usize>,
}

/// One row of `models.toml`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableRow {
    id: String,
    context_window: u32,
    max_output_tokens: u32,
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write: f64,
    #[serde(default)]
    aliases: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    model: Vec<TableRow>,
}

const BUILTIN_TABLE: &str = include_str!("models.toml");

#[expect(clippy::expect_used, reason = "the table is part of the build, checked by a unit test")]
static BUILTIN: LazyLock<ModelRegistry> = LazyLock::new(|| {
    // The table ships inside the crate and a unit test parses it, so failure here is a
    // build defect, not bad input.
    ModelRegistry::from_table(BUILTIN_TABLE).expect("the built-in models.toml is valid")
});

impl ModelRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current public models of Anthropic, OpenAI and Google Gemini with their real
    /// context windows, output limits and list prices.
    pub fn builtin() -> Self {
        BUILTIN.clone()
    }

    fn from_table(text: &str) -> Result<Self> {
        let table: Table = toml::from_str(text).map_err(|e| Error::Config(format!("models table: {}", e.message())))?;
        let mut registry = ModelRegistry::new();
        for row in table.model {
            let pricing = Pricing {
                input: row.input,
                output: row.output,
                cache_read: row.cache_read,
                cache_write: row.cache_write,
            };
            let mut info = ModelInfo::new(row.id, row.context_window, row.max_output_tokens, pricing)?;
            info.aliases = row.aliases;
            registry.insert(info);
        }
        Ok(registry)
    }

    /// The model known by `id` (`provider/model`, or `provider/alias`).
    pub fn get(&self, id: &str) -> Option<&ModelInfo> {
        self.index.get(id).map(|&i| &self.models[i])
    }

    /// Every model, in registration order (built-ins first, then additions).
    pub fn iter(&self) -> impl Iterator<Item = &ModelInfo> {
        self.models.iter()
    }

    /// The models of `provider`, in registration order.
    pub fn of_provider<'a>(&'a self, provider: &'a str) -> impl Iterator<Item = &'a ModelInfo> + 'a {
        self.models.iter().filter(move |m| m.provider == provider)
    }

    /// How many models are registered.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether no model is registered.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// Adds `info`, or replaces the entry with the same id in place (an alias of another
    /// entry that `info` claims moves to `info`).
    pub fn insert(&mut self, info: ModelInfo) {
        let position = match self.index.get(&info.id) {
            Some(&i) if self.models[i].id == info.id => {
                let old = std::mem::replace(&mut self.models[i], info);
                for alias in &old.aliases {
                    self.index.remove(&format!("{}/{alias}", old.provider));
                }
                i
            }
            _ => {
                self.models.push(info);
                self.models.len() - 1
            }
        };
        let info = &self.models[position];
        self.index.insert(info.id.clone(), position);
        for alias in &info.aliases {
            self.index.insert(format!("{}/{alias}", info.provider), position);
        }
    }
}

impl<'a> IntoIterator for &'a ModelRegistry {
    type Item = &'a ModelInfo;
    type IntoIter = std::slice::Iter<'a, ModelInfo>;

    fn into_iter(self) -> Self::IntoIter {
        self.models.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_entry_is_sane() {
        let registry = ModelRegistry::from_table(BUILTIN_TABLE).expect("models.toml parses");
        assert!(registry.len() >= 30, "only {} models", registry.len());
        let mut ids = std::collections::HashSet::new();
        for m in &registry {
            assert!(ids.insert(m.id.as_str()), "{} twice", m.id);
            assert!(["anthropic", "openai", "gemini"].contains(&m.provider.as_str()), "{}", m.id);
            assert_eq!(format!("{}/{}", m.provider, m.name), m.id);
            assert!(!m.name.contains(char::is_whitespace), "{}", m.id);
            assert!((100_000..=2_000_000).contains(&m.context_window), "{}: context {}", m.id, m.context_window);
            assert!(
                (4_096..=m.context_window / 2).contains(&m.max_output_tokens),
                "{}: max output {}",
                m.id,
                m.max_output_tokens
            );
            let p = m.pricing;
            assert!(p.is_valid(), "{}: {p:?}", m.id);
            assert!(p.input > 0.0 && p.input <= 50.0, "{}: input {}", m.id, p.input);
            assert!(p.output >= p.input && p.output <= 200.0, "{}: output {}", m.id, p.output);
            assert!(p.cache_read < p.input, "{}: a cache read must be cheaper than input", m.id);
            assert!(
                p.cache_write >= p.input && p.cache_write <= 2.0 * p.input,
                "{}: cache write {}",
                m.id,
                p.cache_write
            );
        }
    }

    #[test]
    fn builtin_has_the_models_the_cli_documents() {
        let registry = ModelRegistry::builtin();
        for id in [
            "anthropic/claude-opus-4-5",
            "anthropic/claude-sonnet-4-5",
            "anthropic/claude-haiku-4-5",
            "openai/gpt-5",
            "openai/gpt-5-mini",
            "openai/gpt-5-nano",
            "openai/gpt-4.1",
            "openai/gpt-4.1-mini",
            "openai/gpt-4o",
            "openai/gpt-4o-mini",
            "openai/o3",
            "openai/o4-mini",
            "gemini/gemini-2.5-pro",
            "gemini/gemini-2.5-flash",
            "gemini/gemini-2.5-flash-lite",
        ] {
            assert!(registry.get(id).is_some(), "{id} missing");
        }
        let sonnet = registry.get("anthropic/claude-sonnet-4-5").expect("present");
        assert_eq!((sonnet.context_window, sonnet.max_output_tokens), (200_000, 64_000));
        assert_eq!(sonnet.pricing, Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 });
        let gpt = registry.get("openai/gpt-4.1").expect("present");
        assert_eq!(gpt.context_window, 1_047_576);
    }

    #[test]
    fn cost_prices_each_token_class() {
        let pricing = Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 };
        let usage = Usage {
            input_tokens: 2_000,
            output_tokens: 1_000,
            cache_read_tokens: 10_000,
            cache_write_tokens: 4_000,
            cache_write_long_tokens: 0,
            reasoning_tokens: 500,
        };
        // 2000×3 + 1000×15 + 10000×0.30 + 4000×3.75 = 6000 + 15000 + 3000 + 15000 (per million)
        assert!((pricing.cost(&usage) - 0.039).abs() < 1e-12, "{}", pricing.cost(&usage));
        // A thousand of the writes with the 1-hour TTL cost 6.00 instead of 3.75 a million.
        let hour = Usage { cache_write_long_tokens: 1_000, ..usage };
        assert!((pricing.cost(&hour) - (0.039 + 1_000.0 * 2.25 / 1e6)).abs() < 1e-12, "{}", pricing.cost(&hour));
        assert!((pricing.cache_savings(&usage) - pricing.cache_savings(&hour) - 1_000.0 * 2.25 / 1e6).abs() < 1e-12);
        assert_eq!(pricing.cost(&Usage::default()), 0.0);
        assert_eq!(Pricing::flat(1.0, 2.0).cache_read, 1.0);
    }

    #[test]
    fn ids_split_at_the_first_slash() {
        assert_eq!(split_id("ollama/llama3.2"), Some(("ollama", "llama3.2")));
        assert_eq!(
            split_id("openrouter/anthropic/claude-sonnet-4.5"),
            Some(("openrouter", "anthropic/claude-sonnet-4.5"))
        );
        assert_eq!(split_id("demo"), None);
        assert_eq!(split_id("/gpt-4o"), None);
        assert_eq!(split_id("openai/"), None);
        assert!(ModelInfo::new("no-provider", 1, 1, Pricing::default()).is_err());
    }

    #[test]
    fn insert_overrides_in_place_and_extends() {
        let mut registry = ModelRegistry::builtin();
        let before = registry.len();
        let position = registry.iter().position(|m| m.id == "anthropic/claude-haiku-4-5");
        let mut cheaper = registry.get("anthropic/claude-haiku-4-5").cloned().expect("present");
        cheaper.pricing.input = 0.5;
        cheaper.aliases.clear();
        registry.insert(cheaper);
        assert_eq!(registry.len(), before);
        assert_eq!(registry.iter().position(|m| m.id == "anthropic/claude-haiku-4-5"), position);
        assert_eq!(registry.get("anthropic/claude-haiku-4-5").map(|m| m.pricing.input), Some(0.5));
        // The dropped alias no longer resolves.
        assert!(registry.get("anthropic/claude-haiku-4-5-20251001").is_none());

        let local = ModelInfo::new("ollama/llama3.2", 128_000, 8_192, Pricing::default()).expect("valid id");
        registry.insert(local);
        assert_eq!(registry.len(), before + 1);
        assert_eq!(registry.iter().last().map(|m| m.id.as_str()), Some("ollama/llama3.2"));
        assert_eq!(registry.of_provider("ollama").count(), 1);
    }
}
