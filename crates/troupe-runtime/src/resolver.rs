//! [`ModelResolver`]: how a model id becomes a provider to call.
//!
//! An agent names its model as data (`anthropic/claude-sonnet-4-5`, `demo`); the runner
//! asks its resolver for the provider. [`Providers`] is the usual resolver; an application
//! may supply its own (a router over several providers, a per-tenant key store), and
//! [`FixedModel`] serves one provider for every id, for tests and embedding.

use std::sync::Arc;
use troupe_model::{LlmProvider, ModelInfo, Pricing, Providers, ResolvedModel};

/// Turns a model id into a provider ready to call.
pub trait ModelResolver: Send + Sync {
    /// The provider, wire name and registry entry of `model`.
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel>;
}

impl ModelResolver for Providers {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        Providers::resolve(self, model)
    }
}

impl<R: ModelResolver + ?Sized> ModelResolver for Arc<R> {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        (**self).resolve(model)
    }
}

/// One provider and model that serves every id asked for.
///
/// ```
/// use std::sync::Arc;
/// use troupe_model::{DemoProvider, Pricing};
/// use troupe_runtime::{FixedModel, ModelResolver};
///
/// let fixed = FixedModel::new(Arc::new(DemoProvider::new()), "demo-1").with_pricing(Pricing::flat(1.0, 2.0));
/// let resolved = fixed.resolve("anything/at-all")?;
/// assert_eq!((resolved.id.as_str(), resolved.model.as_str()), ("demo/demo-1", "demo-1"));
/// assert!(resolved.info.is_some());
/// # Ok::<(), troupe_model::Error>(())
/// ```
#[derive(Clone)]
pub struct FixedModel {
    provider: Arc<dyn LlmProvider>,
    model: String,
    info: Option<ModelInfo>,
}

impl FixedModel {
    /// Serves `model` (its wire name) on `provider`, with unknown prices.
    pub fn new(provider: Arc<dyn LlmProvider>, model: impl Into<String>) -> Self {
        FixedModel { provider, model: model.into(), info: None }
    }

    /// Sets what is known of the model (context window, prices).
    pub fn with_info(mut self, info: ModelInfo) -> Self {
        self.info = Some(info);
        self
    }

    /// Prices the model at `pricing` (with a 200k-token window and an 8k output limit).
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        let id = self.id();
        self.info = Some(ModelInfo {
            provider: self.provider.name().to_owned(),
            name: self.model.clone(),
            id,
            context_window: 200_000,
            max_output_tokens: 8_192,
            pricing,
            aliases: Vec::new(),
        });
        self
    }

    /// `provider/model`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.provider.name(), self.model)
    }
}

impl std::fmt::Debug for FixedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedModel")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("info", &self.info)
            .finish()
    }
}

impl ModelResolver for FixedModel {
    fn resolve(&self, _model: &str) -> troupe_model::Result<ResolvedModel> {
        Ok(ResolvedModel {
            id: self.id(),
            model: self.model.clone(),
            provider: Arc::clone(&self.provider),
            info: self.info.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn providers_resolve_demo_and_report_missing_keys() {
        let providers = Providers::with_env(HashMap::<String, String>::new());
        let resolver: Arc<dyn ModelResolver> = Arc::new(providers);
        assert_eq!(resolver.resolve("demo").expect("demo needs no key").id, "demo");
        let error = resolver.resolve("anthropic/claude-sonnet-4-5").expect_err("no key");
        assert_eq!(error.code(), "missing_api_key");
    }
}
