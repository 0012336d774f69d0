//! [`Settings`]: what `troupe.toml` says about every agent's budgets and rate limits.
//!
//! ```toml
//! [limits]                      # every agent's; unset keys keep the runtime's defaults
//! max_usd = 0.50                # dollars per run, by the registry's prices
//! max_total_tokens = 200000
//! max_iterations = 30           # model calls per run
//! timeout_seconds = 600
//! max_tokens_recoveries = 3
//!
//! [rate_limit]                  # each agent's own calls
//! model_calls = 60              # per `per_seconds` (default 60)
//! tool_calls = 300
//!
//! [agents.reviewer.limits]      # one agent's, over the ones above
//! max_usd = 0.10
//!
//! [agents.reviewer.rate_limit]
//! model_calls = 10
//! ```
//!
//! The model tables (`[model]`, `[providers.*]`, `[models.*]`, `[retry]`) are
//! [`ModelConfig`]'s; other tables belong to other parts of troupe and are left alone.
//! Unknown keys inside these tables are errors at their line and column.

use super::error::ReloadError;
use crate::definition::{AgentDefinition, DefinitionError};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use troupe_model::ModelConfig;
use troupe_runtime::{AgentSpec, Limits, RateQuota, RateQuotas};

/// The period of a rate limit that does not give `per_seconds`.
pub const DEFAULT_RATE_PERIOD_SECONDS: u64 = 60;

/// `[limits]` (or `[agents.ID.limits]`): each key replaces the runtime's default.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsTable {
    /// The most model calls of a run (1 or more).
    #[serde(default, deserialize_with = "at_least_one_u32")]
    pub max_iterations: Option<u32>,
    /// The longest a run may take, in seconds (1 or more).
    #[serde(default, deserialize_with = "at_least_one_u64")]
    pub timeout_seconds: Option<u64>,
    /// The most tokens a run may use.
    #[serde(default)]
    pub max_total_tokens: Option<u64>,
    /// The most a run may cost, in USD (a finite number, 0 or more).
    #[serde(default, deserialize_with = "dollars")]
    pub max_usd: Option<f64>,
    /// How many cut responses in a row are resumed.
    #[serde(default)]
    pub max_tokens_recoveries: Option<u32>,
}

impl LimitsTable {
    /// `limits` with the keys this table sets.
    pub fn apply(&self, limits: &mut Limits) {
        if let Some(n) = self.max_iterations {
            limits.max_iterations = n;
        }
        if let Some(seconds) = self.timeout_seconds {
            limits.timeout = Some(Duration::from_secs(seconds));
        }
        if let Some(tokens) = self.max_total_tokens {
            limits.max_total_tokens = Some(tokens);
        }
        if let Some(usd) = self.max_usd {
            limits.max_usd = Some(usd);
        }
        if let Some(n) = self.max_tokens_recoveries {
            limits.max_tokens_recoveries = n;
        }
    }
}

/// `[rate_limit]` (or `[agents.ID.rate_limit]`): how many calls an agent makes per period.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitTable {
    /// Model calls per period (1 or more).
    #[serde(default, deserialize_with = "at_least_one_u32")]
    pub model_calls: Option<u32>,
    /// Tool calls per period (1 or more).
    #[serde(default, deserialize_with = "at_least_one_u32")]
    pub tool_calls: Option<u32>,
    /// The period in seconds (1 or more; default 60).
    #[serde(default, deserialize_with = "at_least_one_u64")]
    pub per_seconds: Option<u64>,
}

impl RateLimitTable {
    /// This table's keys over `base`'s.
    fn over(&self, base: &RateLimitTable) -> RateLimitTable {
        RateLimitTable {
            model_calls: self.model_calls.or(base.model_calls),
            tool_calls: self.tool_calls.or(base.tool_calls),
            per_seconds: self.per_seconds.or(base.per_seconds),
        }
    }

    /// The quotas the table says.
    pub fn quotas(&self) -> RateQuotas {
        let per = Duration::from_secs(self.per_seconds.unwrap_or(DEFAULT_RATE_PERIOD_SECONDS));
        RateQuotas {
            model: self.model_calls.map(|calls| RateQuota::new(calls, per)),
            tool: self.tool_calls.map(|calls| RateQuota::new(calls, per)),
        }
    }
}

/// `[agents.ID]`: one agent's settings over everyone's.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentTable {
    /// `[agents.ID.limits]`.
    #[serde(default)]
    pub limits: LimitsTable,
    /// `[agents.ID.rate_limit]`.
    #[serde(default)]
    pub rate_limit: RateLimitTable,
}

/// The tables of `troupe.toml` this module reads; the others are ignored here.
#[derive(Default, Deserialize)]
struct SettingsTables {
    #[serde(default)]
    limits: LimitsTable,
    #[serde(default)]
    rate_limit: RateLimitTable,
    #[serde(default)]
    agents: BTreeMap<String, AgentTable>,
}

/// What `troupe.toml` says that reloading applies: the model configuration, and every
/// agent's limits and rate limit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// `[model]`, `[providers.*]`, `[models.*]`, `[retry]`.
    pub model: ModelConfig,
    /// `[limits]`.
    pub limits: LimitsTable,
    /// `[rate_limit]`.
    pub rate_limit: RateLimitTable,
    /// `[agents.ID]`.
    pub agents: BTreeMap<String, AgentTable>,
}

impl Settings {
    /// Reads and validates the `troupe.toml` at `path`; errors name the file, line and
    /// column.
    pub fn load(path: &Path) -> Result<Settings, ReloadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ReloadError::Settings { path: path.to_owned(), message: format!("cannot read it: {e}") })?;
        Self::parse(&text, path)
    }

    /// Parses and validates `troupe.toml` text read from `path` (used in errors). Text
    /// that needs trust and is not trusted by the user (see [`crate::trust`]) is refused.
    ///
    /// ```
    /// use std::path::Path;
    /// use troupe_workers::reload::Settings;
    ///
    /// let text = "[limits]\nmax_usd = 0.5\n\n[agents.reviewer.limits]\nmax_usd = 0.1\n";
    /// let settings = Settings::parse(text, Path::new("troupe.toml"))?;
    /// assert_eq!(settings.limits_for("reviewer", &Default::default()).max_usd, Some(0.1));
    /// assert_eq!(settings.limits_for("coder", &Default::default()).max_usd, Some(0.5));
    ///
    /// let typo = Settings::parse("[limits]\nmax_usdd = 1\n", Path::new("troupe.toml")).unwrap_err();
    /// assert!(typo.to_string().starts_with("troupe.toml:2:1: unknown key `max_usdd` in [limits]"), "{typo}");
    /// # Ok::<(), troupe_workers::reload::ReloadError>(())
    /// ```
    pub fn parse(text: &str, path: &Path) -> Result<Settings, ReloadError> {
        // An edit can make the file route a key or loosen the sandbox: such a file is taken
        // only as the user trusted it (see `trust`).
        crate::trust::check_text(path, text, crate::trust::TrustStore::user().as_ref())
            .map_err(|untrusted| ReloadError::Settings { path: path.to_owned(), message: untrusted.to_string() })?;
        let model_error = |error: troupe_model::Error| {
            let message = match error {
                troupe_model::Error::Config(message) => message,
                other => other.to_string(),
            };
            // The model configuration names the file `troupe.toml`; say which one.
            let message = match message.strip_prefix("troupe.toml") {
                Some(rest) => format!("{}{rest}", path.display()),
                None => format!("{}: {message}", path.display()),
            };
            ReloadError::Settings { path: path.to_owned(), message }
        };
        let model = ModelConfig::from_toml_str(text).map_err(model_error)?;
        // Providers and models are checked as they would be applied; keys are not needed.
        model.providers(std::collections::HashMap::<String, String>::new()).map_err(model_error)?;
        let tables: SettingsTables = toml::from_str(text).map_err(|e| {
            let error = DefinitionError::from_toml(path, text, &e);
            ReloadError::Settings { path: path.to_owned(), message: error.to_string() }
        })?;
        Ok(Settings { model, limits: tables.limits, rate_limit: tables.rate_limit, agents: tables.agents })
    }

    /// `base` with `[limits]`, then `[agents.ID.limits]`, applied.
    pub fn limits_for(&self, id: &str, base: &Limits) -> Limits {
        let mut limits = base.clone();
        self.limits.apply(&mut limits);
        if let Some(agent) = self.agents.get(id) {
            agent.limits.apply(&mut limits);
        }
        limits
    }

    /// The quotas of agent `id`: `[agents.ID.rate_limit]` over `[rate_limit]`.
    pub fn rate_quotas_for(&self, id: &str) -> RateQuotas {
        match self.agents.get(id) {
            Some(agent) => agent.rate_limit.over(&self.rate_limit).quotas(),
            None => self.rate_limit.quotas(),
        }
    }

    /// The runtime spec of `definition` under these settings: its
    /// [`to_spec`](AgentDefinition::to_spec) with the limits applied.
    pub fn spec_for(&self, definition: &AgentDefinition) -> AgentSpec {
        let mut spec = definition.to_spec();
        spec.limits = self.limits_for(definition.id(), &spec.limits);
        spec
    }
}

fn at_least_one_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = u32::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 would allow nothing; use 1 or more"));
    }
    Ok(Some(n))
}

fn at_least_one_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 would allow nothing; use 1 or more"));
    }
    Ok(Some(n))
}

fn dollars<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let usd = f64::deserialize(d)?;
    if !usd.is_finite() || usd < 0.0 {
        return Err(D::Error::custom(format!("{usd} is not a budget; use a number of dollars, 0 or more")));
    }
    Ok(Some(usd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ReloadError> {
        Settings::parse(text, Path::new("conf/troupe.toml"))
    }

    #[test]
    fn agent_tables_go_over_everyones_key_by_key() {
        let text = "default_model = \"demo\"\n[limits]\nmax_usd = 1.0\ntimeout_seconds = 60\n\
                    [rate_limit]\nmodel_calls = 60\ntool_calls = 100\n\
                    [agents.slow.rate_limit]\nmodel_calls = 6\n[agents.slow.limits]\nmax_iterations = 3\n\
                    [[mcp.servers]]\nname = \"x\"\ncommand = \"y\"\n";
        let settings = parse(text).expect("valid");
        assert_eq!(settings.model.default_model(), Some("demo"));
        let slow = settings.limits_for("slow", &Limits::default());
        assert_eq!((slow.max_usd, slow.timeout, slow.max_iterations), (Some(1.0), Some(Duration::from_secs(60)), 3));
        assert_eq!(settings.limits_for("other", &Limits::default()).max_iterations, 50);
        let minute = Duration::from_secs(60);
        assert_eq!(
            settings.rate_quotas_for("slow"),
            RateQuotas { model: Some(RateQuota::new(6, minute)), tool: Some(RateQuota::new(100, minute)) }
        );
        assert_eq!(settings.rate_quotas_for("other").model, Some(RateQuota::new(60, minute)));
        assert!(Settings::default().rate_quotas_for("any").is_unlimited());
    }

    #[test]
    fn errors_name_the_file_line_and_column() {
        let error = parse("[limits]\nmax_usd = -1\n").expect_err("negative");
        assert!(error.to_string().starts_with("conf/troupe.toml:2:11:"), "{error}");
        assert!(error.to_string().contains("not a budget"), "{error}");
        let error = parse("[rate_limit]\nmodel_calls = 0\n").expect_err("zero");
        assert!(error.to_string().starts_with("conf/troupe.toml:2:15:"), "{error}");
        let error = parse("[agents.a.limits]\nmax_usd = 1\nbudget = 2\n").expect_err("unknown key");
        assert!(error.to_string().starts_with("conf/troupe.toml:3:1: unknown key `budget`"), "{error}");
        let error = parse("[providers.acme]\nkind = \"openai-chat\"\n").expect_err("no base_url");
        assert!(error.to_string().starts_with("conf/troupe.toml: "), "{error}");
        let error = parse("[model]\ndefualt_model = \"x\"\n").expect_err("model typo");
        assert!(error.to_string().starts_with("conf/troupe.toml:2:"), "{error}");
    }
}
