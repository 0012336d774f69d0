//! [`CostTracker`]: what a run's model calls cost, by model.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use troupe_core::Usage;
use troupe_model::ResolvedModel;

/// Usage and cost of one model over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelCost {
    /// Model calls priced here.
    pub calls: u32,
    /// Tokens used.
    pub usage: Usage,
    /// What they cost, in USD (0 when the model's prices are unknown).
    pub cost_usd: f64,
    /// Whether the registry knows the model's prices.
    pub priced: bool,
    /// What the prompt cache saved on these calls, in USD ([`Pricing::cache_savings`](troupe_model::Pricing::cache_savings)).
    #[serde(default)]
    pub cache_saved_usd: f64,
}

/// Sums the cost of model calls per model, by the registry's prices
/// ([`ResolvedModel::cost`]). A model without known prices counts 0 and is reported by
/// [`unpriced`](CostTracker::unpriced), so a budget is never silently wrong.
///
/// ```
/// use std::sync::Arc;
/// use troupe_model::{DemoProvider, ModelInfo, Pricing, ResolvedModel, Usage};
/// use troupe_runtime::CostTracker;
///
/// let info = ModelInfo::new("acme/m1", 100_000, 4_096, Pricing::flat(3.0, 15.0))?;
/// let provider = Arc::new(DemoProvider::new());
/// let model = ResolvedModel { id: "acme/m1".into(), model: "m1".into(), provider, info: Some(info) };
/// let mut costs = CostTracker::new();
/// let usage = Usage { input_tokens: 1_000_000, output_tokens: 100_000, ..Default::default() };
/// assert_eq!(costs.record(&model, &usage), Some(4.5));
/// assert!((costs.total_usd() - 4.5).abs() < 1e-9);
/// assert!(costs.unpriced().is_empty());
/// # Ok::<(), troupe_model::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostTracker {
    by_model: BTreeMap<String, ModelCost>,
}

impl CostTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one call's `usage` on `model`; returns its cost when the prices are known.
    pub fn record(&mut self, model: &ResolvedModel, usage: &Usage) -> Option<f64> {
        let cost = model.cost(usage);
        self.record_priced(&model.id, usage, cost);
        if let (Some(info), Some(entry)) = (&model.info, self.by_model.get_mut(&model.id)) {
            entry.cache_saved_usd += info.pricing.cache_savings(usage);
        }
        cost
    }

    /// Records one call's `usage` on the model known as `id`, at `cost` (`None`: unknown).
    pub fn record_priced(&mut self, id: &str, usage: &Usage, cost: Option<f64>) {
        let entry =
            self.by_model.entry(id.to_owned()).or_insert_with(|| ModelCost { priced: true, ..Default::default() });
        entry.calls += 1;
        entry.usage += *usage;
        match cost {
            Some(cost) if cost.is_finite() && cost >= 0.0 => entry.cost_usd += cost,
            _ => entry.priced = false,
        }
    }

    /// Usage and cost per model id.
    pub fn by_model(&self) -> &BTreeMap<String, ModelCost> {
        &self.by_model
    }

    /// The total cost, in USD.
    pub fn total_usd(&self) -> f64 {
        self.by_model.values().map(|m| m.cost_usd).sum()
    }

    /// The models whose prices are unknown, so whose cost was counted as 0.
    pub fn unpriced(&self) -> Vec<&str> {
        self.by_model.iter().filter(|(_, m)| !m.priced).map(|(id, _)| id.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_prices_count_zero_and_are_reported() {
        let mut costs = CostTracker::new();
        let usage = Usage { input_tokens: 10, output_tokens: 5, ..Default::default() };
        costs.record_priced("a/priced", &usage, Some(0.25));
        costs.record_priced("a/priced", &usage, Some(0.25));
        costs.record_priced("b/unknown", &usage, None);
        assert!((costs.total_usd() - 0.5).abs() < 1e-12);
        assert_eq!(costs.unpriced(), vec!["b/unknown"]);
        let priced = &costs.by_model()["a/priced"];
        assert_eq!((priced.calls, priced.usage.input_tokens, priced.priced), (2, 20, true));
    }
}
